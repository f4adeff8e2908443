"""``gazeflow export-streamer --format onnx``: the per-frame step as ONNX; onnxruntime on CPU gives the torch
streamer's gaze within 1e-3 with the same noise, through the interface streamer.json describes, and
``gazeflow stream --backend onnxruntime`` runs it."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from transformers_gazeflow import GazeFlowModel
from transformers_gazeflow.commands.cli import main
from transformers_gazeflow.data.processing import GazeFlowVideoProcessor
from transformers_gazeflow.data.video import iter_frames, write_video
from transformers_gazeflow.generation.online import GazeFlowStreamer

from .pipeline_fixtures import random_video, single_torch_thread, synthetic_clip_mp4, tiny_model_dir  # noqa: F401
from .test_cli_stream import causal_model_dir, stream_in_process  # noqa: F401

onnxruntime = pytest.importorskip("onnxruntime", reason="the [onnx] extra: pip install -e '.[onnx]'")


@pytest.fixture(scope="module")
def exported(tmp_path_factory, causal_model_dir):  # noqa: F811
    folder = tmp_path_factory.mktemp("exported")
    assert (
        main(["export-streamer", "--format", "onnx", "--model", str(causal_model_dir), "-o", str(folder), "-k", "5"])
        == 0
    )
    return folder


def test_the_interface_names_every_input_and_output_and_the_state_start(exported, causal_model_dir):  # noqa: F811
    interface = json.loads((exported / "streamer.json").read_text())
    assert {p.name for p in exported.iterdir()} >= {
        "step.onnx",
        "streamer.json",
        "preprocessor_config.json",
        "config.json",
    }
    assert interface["num_samples"] == 5 and interface["num_steps"] == 3 and interface["opset"] >= 17
    inputs = {entry["name"]: entry for entry in interface["inputs"]}
    assert inputs["frame"]["shape"] == [1, 3, 32, 32] and inputs["noise"]["shape"] == [1, 5, 1, 2]
    assert inputs["noise"]["dtype"] == "float32" and "standard normal" in inputs["noise"]["meaning"]
    assert inputs["state.frame_index"] == {
        "name": "state.frame_index",
        "shape": [],
        "dtype": "int64",
        "meaning": "stream state; start: zeros",
    }
    outputs = {entry["name"]: entry for entry in interface["outputs"]}
    assert outputs["gaze_samples"]["shape"] == [1, 5, 2] and outputs["gaze_point"]["shape"] == [1, 2]
    state_inputs = [name for name in inputs if name.startswith("state.")]
    assert [outputs["next_" + name]["feeds"] for name in state_inputs] == state_inputs
    session = onnxruntime.InferenceSession(str(exported / "step.onnx"), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == [entry["name"] for entry in interface["inputs"]]
    assert [o.name for o in session.get_outputs()] == [entry["name"] for entry in interface["outputs"]]
    assert [list(i.shape) for i in session.get_inputs()] == [entry["shape"] for entry in interface["inputs"]]
    checked = interface["checked"]
    assert checked["frames"] >= 16 and checked["max_abs_difference"] <= 1e-3
    assert interface["preprocessing"]["mean"] == list(
        GazeFlowVideoProcessor.from_pretrained(causal_model_dir).image_mean
    )


def test_onnxruntime_gives_the_torch_streamers_gaze_on_a_clip(
    exported,
    causal_model_dir,  # noqa: F811
    synthetic_clip_mp4,
):  # noqa: F811
    """A generated clip (30 frames, past the 8-frame context) through the ONNX file as streamer.json says (zero
    state, each next_state fed back, the frame prepared by preprocessor_config.json) and through GazeFlowStreamer,
    the same noise fed to both."""
    path, _ = synthetic_clip_mp4
    interface = json.loads((exported / "streamer.json").read_text())
    session = onnxruntime.InferenceSession(str(exported / "step.onnx"), providers=["CPUExecutionProvider"])
    processor = GazeFlowVideoProcessor.from_pretrained(exported)
    state = {e["name"]: np.zeros(e["shape"], e["dtype"]) for e in interface["inputs"] if e["name"].startswith("state.")}
    model = GazeFlowModel.from_pretrained(causal_model_dir).eval()
    streamer = GazeFlowStreamer(
        model, num_samples=5, processor=GazeFlowVideoProcessor.from_pretrained(causal_model_dir)
    )
    generator = torch.Generator().manual_seed(7)
    largest, count = 0.0, 0
    for frame in iter_frames(path):
        noise = torch.randn(1, 5, 1, 2, generator=generator)
        expected = streamer.push(torch.from_numpy(frame), noise=noise)
        outputs = session.run(
            None, {"frame": processor.preprocess(frame[None]).numpy(), "noise": noise.numpy(), **state}
        )
        state = dict(zip(state, outputs[2:]))
        largest = max(
            largest,
            float(np.abs(outputs[0] - expected.trajectories.numpy()).max()),
            float(np.abs(outputs[1] - expected.mean.numpy()).max()),
        )
        count += 1
    assert count == 30 and largest < 1e-3, largest


def test_gazeflow_stream_with_the_onnxruntime_backend(
    capsys,
    tmp_path,
    exported,
    causal_model_dir,  # noqa: F811
    synthetic_clip_mp4,
):  # noqa: F811
    path, _ = synthetic_clip_mp4
    status, onnx_records, err = stream_in_process(
        capsys, path, "--backend", "onnxruntime", "--onnx", exported, "--seed", 2, "--summary", tmp_path / "s.json"
    )
    assert status == 0, err
    _, torch_records, _ = stream_in_process(capsys, path, "--model", causal_model_dir, "-k", 5, "--seed", 2)
    assert len(onnx_records) == len(torch_records) == 30
    for ours, theirs in zip(onnx_records, torch_records):
        assert ours["frame"] == theirs["frame"]
        assert abs(ours["x"] - theirs["x"]) < 1e-3 and abs(ours["y"] - theirs["y"]) < 1e-3
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["backend"] == "onnxruntime" and summary["num_samples"] == 5 and summary["model"] == str(exported)


def test_export_and_backend_errors_are_one_line(capsys, tmp_path, exported, tiny_model_dir):  # noqa: F811
    def error_of(*argv) -> tuple[int, str]:
        status = main([str(a) for a in argv])
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("gazeflow: error: "), lines
        return status, lines[0]

    status, line = error_of("export-streamer", "--model", tiny_model_dir, "-o", tmp_path / "x")
    assert status == 1 and "needs a causal model" in line and str(tiny_model_dir) in line
    status, line = error_of("export-streamer", "-o", tmp_path / "x", "--opset", 13)
    assert status == 2 and "--opset 13: expected an integer >= 17" in line
    (tmp_path / "taken").write_text("a file")
    status, line = error_of("export-streamer", "-o", tmp_path / "taken")
    assert status == 2 and f"--output-dir {tmp_path / 'taken'}: is an existing file, expected a folder" in line
    status, line = error_of("export-streamer", "--model", tmp_path / "nowhere", "-o", tmp_path / "x")
    assert status == 1 and line == f"gazeflow: error: model folder not found: {tmp_path / 'nowhere'}"
    video = write_video(tmp_path / "v.mp4", random_video(3, 16, 16), fps=10)
    status, line = error_of("stream", video, "--backend", "onnxruntime", "--onnx", tmp_path / "none")
    assert status == 1 and f"--onnx {tmp_path / 'none'}: no such folder" in line
    status, line = error_of("stream", video, "--backend", "onnxruntime", "--onnx", tmp_path)
    assert status == 1 and f"--onnx {tmp_path}: no streamer.json" in line
    status, line = error_of("stream", video, "--backend", "onnxruntime", "--onnx", exported, "-k", 7)
    assert status == 1 and f"--num-samples 7: the step in {exported} was exported with 5" in line
    status, line = error_of("stream", video, "--backend", "onnxruntime", "--onnx", exported, "--device", "cuda")
    assert status == 2 and "--device is for --backend torch" in line
