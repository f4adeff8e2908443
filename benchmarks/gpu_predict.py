"""The GPU suite's predict step: ``gazeflow predict --no-overlay`` (the console command) on generated videos, one
at a time and as a folder shared among processes (``--num-processes``), and the inputs it and the train step need,
made in the background (``prepare``). Run through ``gpu_suite_tools.py``."""

from __future__ import annotations

import csv
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


BATCH_VIDEOS = {"tiny": 2, "paper": 8}
"""Copies of the small generated video in the batch runs' folder (copies, not links: a batch predicts a file once)."""
BATCH_PROCESSES = {"tiny": (1, 2), "paper": (1, 4)}
"""The batch runs' ``--num-processes``: the folder in one process, then shared among several on the one GPU."""


def predict_command(inputs: Path, output: Path, device: str, model: Path | None, *options: str) -> list[str]:
    """``gazeflow predict INPUTS --no-overlay`` at K=30, S=5 into ``output``."""
    command = gazeflow_command() + ["predict", str(inputs), "--no-overlay", "--device", device, "-k", "30", "-s", "5"]
    command += ["--quiet", "-o", str(output), *options]
    return command + (["--model", str(model)] if model else [])


def run_command(command: list[str]) -> tuple[subprocess.CompletedProcess, float]:
    print("$ " + " ".join(command), flush=True)
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - start
    print(result.stdout + result.stderr[-3000:], flush=True)
    return result, wall


def batch_folder(work: Path, tiny: bool) -> Path:
    """``work/batch``: copies of the small generated video (made once)."""
    preset = "tiny" if tiny else "paper"
    folder = work / "batch"
    source = work / video_name(PREDICT_SIZES[preset][0])
    folder.mkdir(exist_ok=True)
    for index in range(BATCH_VIDEOS[preset]):
        copy = folder / f"clip_{index}.mp4"
        if not copy.exists():
            shutil.copyfile(source, copy)
    return folder


def batch_makespan(rows: list[dict[str, str]], processes: int) -> float:
    """The predicting time of a batch run: process r takes the index's rows r, r + N, ... one after the other
    (``batch.Shard``), each row's ``seconds`` its video's prediction with model loading excluded; the processes run
    side by side, so the run predicts for the longest of their sums."""
    return max(sum(float(row["seconds"]) for row in rows[rank::processes]) for rank in range(processes))


def batch_throughput(work: Path, device: str, tiny: bool) -> dict:
    """The bundled model on the batch folder in one process and shared among several (``BATCH_PROCESSES``): frames
    per second of the predicting time (:func:`batch_makespan`) and of the command's whole wall time."""
    preset = "tiny" if tiny else "paper"
    folder, runs = batch_folder(work, tiny), {}
    for processes in BATCH_PROCESSES[preset]:
        output = work / f"out_batch_{processes}"
        command = predict_command(folder, output, device, None, "--num-processes", str(processes))
        result, wall = run_command(command)
        run = {"command": " ".join(command), "processes": processes, "exit_code": result.returncode}
        run["command_wall_s"] = round(wall, 1)
        if result.returncode == 0:
            with open(output / "index.csv", newline="", encoding="utf-8") as handle:
                rows = list(csv.DictReader(handle))
            frames = sum(int(row["frames"]) for row in rows)
            makespan = batch_makespan(rows, processes)
            run.update(
                videos=len(rows),
                frames=frames,
                statuses=sorted({row["status"] for row in rows}),
                predicting_s=round(makespan, 2),
                frames_per_second=frames / max(makespan, 1e-9),
                frames_per_second_wall=frames / wall,
            )
        runs[f"bundled, {BATCH_VIDEOS[preset]} videos, {processes} process(es)"] = run
        shutil.rmtree(output, ignore_errors=True)
    return runs


def predict_throughput(out_dir: Path, device: str, tiny: bool, work: Path | None = None) -> int:
    """``gazeflow predict --no-overlay`` (the console script) on generated videos, K=30, S=5, frames per second:
    the bundled model and a random model of the paper's geometry (``--tiny``: the tiny test model) on a video of the
    encoder's input size, and the paper's geometry on a 640x480 video (EGTEA Gaze+'s size); then the bundled model on
    a folder of copies of the small video, in one process and in several (:func:`batch_throughput`). ``work``: where
    ``prepare`` left its inputs (made here when missing)."""
    work = work or Path(tempfile.mkdtemp(prefix="gazeflow_predict_"))
    if not (work / "prepared.json").exists():
        prepare(work, tiny)
    made = json.loads((work / "prepared.json").read_text())
    figures: dict = {"benchmark": "predict", "prepared": made, "runs": {}}
    status = 0
    for index, (name, (model, video)) in enumerate(predict_runs(work, tiny).items()):
        output = work / f"out_{index}"
        command = predict_command(video, output, device, model)
        result, wall = run_command(command)
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
    figures["batch"] = batch_throughput(work, device, tiny)
    status = status or next((run["exit_code"] for run in figures["batch"].values() if run["exit_code"]), 0)
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
