"""The GPU suite's predict step: ``gazeflow predict --no-overlay`` (the console command) on generated videos, and
the inputs it and the train step need, made in the background (``prepare``). Run through ``gpu_suite_tools.py``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def gazeflow_command() -> list[str]:
    script = shutil.which("gazeflow")
    return [script] if script else [sys.executable, "-m", "transformers_gazeflow.commands.cli"]


def predict_config(preset: str):
    """The random model of the predict step: the tiny test model, or the paper's geometry."""
    from transformers_gazeflow import GazeFlowConfig

    return GazeFlowConfig.tiny() if preset == "tiny" else GazeFlowConfig(use_lora=False)


def make_model(folder: Path, preset: str) -> Path:
    import torch

    from transformers_gazeflow import GazeFlowModel
    from transformers_gazeflow.data.processing import GazeFlowVideoProcessor

    torch.manual_seed(0)
    config = predict_config(preset)
    GazeFlowModel(config).save_pretrained(folder)
    GazeFlowVideoProcessor(size=config.image_size).save_pretrained(folder)
    return folder


PREDICT_SIZES = {"tiny": [(64, 64), (160, 120)], "paper": [(256, 256), (640, 480)]}
"""The generated videos of the predict step (WIDTH, HEIGHT): the encoder's input size, and EGTEA Gaze+'s."""
PREDICT_MINUTES = {"tiny": 0.05, "paper": 0.5}


def video_name(size: tuple[int, int]) -> str:
    return f"video_{size[0]}x{size[1]}.mp4"


def write_generated_video(path: Path, size: tuple[int, int], minutes: float, fps: float = 24.0) -> dict:
    """A generated video (pipeline_paths's moving disc) of ``minutes`` at ``fps``; returns what it is."""
    sys.path.insert(0, str(HERE))
    from pipeline_paths import generated_frames

    from transformers_gazeflow.data.video import write_video

    frames = int(round(minutes * 60 * fps))
    start = time.perf_counter()
    write_video(path, generated_frames(frames, size[0], size[1], fps), fps=fps)
    return {
        "path": str(path),
        "description": f"{minutes:g} min {size[0]}x{size[1]} at {fps:g} fps, {frames} frames",
        "seconds_to_write": round(time.perf_counter() - start, 1),
    }


def prepare_train_clips(folder: Path, tiny: bool) -> dict:
    """The train step's EGTEA-layout clips (``bench_train.py --prepare-data``)."""
    sys.path.insert(0, str(HERE))
    import bench_train

    start = time.perf_counter()
    bench_train.main(["--prepare-data", str(folder), "--preset", "tiny" if tiny else "paper"])
    return {"path": str(folder), "seconds_to_write": round(time.perf_counter() - start, 1)}


def prepare(work: Path, tiny: bool) -> int:
    """The predict and train steps' inputs, made in parallel (the suite runs this in the background while the
    preflight and the tests run): the videos, the random paper-geometry model folder, the EGTEA-layout clips.
    ``work/prepared.json`` says what was made and how long it took."""
    from concurrent.futures import ProcessPoolExecutor

    preset = "tiny" if tiny else "paper"
    work.mkdir(parents=True, exist_ok=True)
    jobs = {
        video_name(size): (write_generated_video, work / video_name(size), size, PREDICT_MINUTES[preset])
        for size in PREDICT_SIZES[preset]
    }
    jobs["model"] = (make_model_timed, work / "model", preset)
    jobs["egtea"] = (prepare_train_clips, work / "egtea", tiny)
    status, made, start = 0, {}, time.perf_counter()
    with ProcessPoolExecutor(max_workers=len(jobs)) as pool:
        futures = {name: pool.submit(*job) for name, job in jobs.items()}
        for name, future in futures.items():
            try:
                made[name] = future.result()
                print(f"prepared {name}: {made[name]}", flush=True)
            except Exception as err:  # noqa: BLE001 - reported; the step that needs it says what is missing
                status = 1
                made[name] = {"error": f"{type(err).__name__}: {err}"}
                print(f"prepare {name} failed: {made[name]['error']}", flush=True)
    made["seconds"] = round(time.perf_counter() - start, 1)
    (work / "prepared.json").write_text(json.dumps(made, indent=1))
    return status


def make_model_timed(folder: Path, preset: str) -> dict:
    start = time.perf_counter()
    make_model(folder, preset)
    return {"path": str(folder), "seconds_to_write": round(time.perf_counter() - start, 1)}


def predict_runs(work: Path, tiny: bool) -> dict[str, tuple[Path | None, Path]]:
    """The predict step's runs: name -> (model folder or None for the bundled model, video)."""
    small, large = PREDICT_SIZES["tiny" if tiny else "paper"]
    if tiny:  # the same code as the three runs below, in two (CI runs this)
        return {
            "bundled": (None, work / video_name(small)),
            f"tiny random, {large[0]}x{large[1]}": (work / "model", work / video_name(large)),
        }
    model = "paper geometry, random weights"
    return {
        "bundled": (None, work / video_name(small)),
        model: (work / "model", work / video_name(small)),
        f"{model}, {large[0]}x{large[1]}": (work / "model", work / video_name(large)),
    }


def predict_throughput(out_dir: Path, device: str, tiny: bool, work: Path | None = None) -> int:
    """``gazeflow predict --no-overlay`` (the console script) on generated videos, K=30, S=5, frames per second:
    the bundled model and a random model of the paper's geometry (``--tiny``: the tiny test model) on a video of the
    encoder's input size, and the paper's geometry on a 640x480 video (EGTEA Gaze+'s size). ``work``: where
    ``prepare`` left its inputs (made here when missing)."""
    work = work or Path(tempfile.mkdtemp(prefix="gazeflow_predict_"))
    if not (work / "prepared.json").exists():
        prepare(work, tiny)
    made = json.loads((work / "prepared.json").read_text())
    figures: dict = {"benchmark": "predict", "prepared": made, "runs": {}}
    status = 0
    for index, (name, (model, video)) in enumerate(predict_runs(work, tiny).items()):
        output = work / f"out_{index}"
        command = gazeflow_command() + [
            "predict",
            str(video),
            "--no-overlay",
            "--device",
            device,
            "-k",
            "30",
            "-s",
            "5",
            "--quiet",
            "-o",
            str(output),
        ]
        command += ["--model", str(model)] if model else []
        print("$ " + " ".join(command), flush=True)
        start = time.perf_counter()
        result = subprocess.run(command, capture_output=True, text=True)
        wall = time.perf_counter() - start
        print(result.stdout + result.stderr[-3000:], flush=True)
        run = {
            "command": " ".join(command),
            "exit_code": result.returncode,
            "video": made.get(video.name, {}).get("description", video.name),
            "command_wall_s": round(wall, 1),
        }
        if result.returncode != 0:
            status = result.returncode
        else:
            summary = json.loads((output / "summary.json").read_text())
            timings = summary["timings"]
            run.update(
                frames=summary["frames"],
                device=summary["device"],
                load_s=timings["load_s"],
                predict_s=timings["predict_s"],
                ms_per_frame=timings["ms_per_frame"],
                frames_per_second=summary["frames"] / max(timings["predict_s"], 1e-9),
            )
        figures["runs"][name] = run
        shutil.rmtree(output, ignore_errors=True)
    (out_dir / "predict.json").write_text(json.dumps(figures, indent=1))
    write_results(figures, device, tiny)
    return status


def write_results(figures: dict, device: str, tiny: bool) -> None:
    """The step's figures with their provenance, where ``$GAZEFLOW_BENCHMARK_RESULTS`` says (the suite sets it)."""
    from results import ENVIRONMENT_VARIABLE, config_model, shipped_model, write_section

    preset = "tiny" if tiny else "paper"
    models = [
        shipped_model(),
        config_model(f"{preset} random model", predict_config(preset), "gpu_predict:predict_config", preset=preset),
    ]
    write_section(os.environ.get(ENVIRONMENT_VARIABLE), "gazeflow_predict", preset, figures, models, device)
