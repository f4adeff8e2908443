"""Frames per second of ``gazeflow stream``'s backends on the bundled causal model, side by side in one run.

What ``gazeflow stream`` runs per frame, through the steppers of its own registry
(``generation.steppers.STEPPERS``, opened as the command opens them): the raw RGB frame resized and normalised, the
frame's noise drawn, the causal step (encoder on the frame's causal window, condition, S ODE steps on the K samples
against the ring caches), the samples back as numpy. Backends, each of the registry's and, for a backend that runs
the model, the same compiled:

* ``torch``: ``GazeFlowStreamer`` eager;
* ``torch-compiled``: the same step under ``torch.compile`` (one graph; compiled before the timed frames);
* ``onnxruntime``: the step exported by ``gazeflow export-streamer`` (this run exports it to a temporary folder) in
  onnxruntime's CPU provider.

Each backend streams the same frames with the same seed (their gaze is compared: the largest difference in unit
coordinates is printed), ``--warmup`` frames first, then ``--frames`` timed ones; rounds alternate between the
backends so that a machine's load falls on all of them alike. Printed per backend: per-frame p50 / p95 in ms and
frames/s at the p50 (1000 / p50), with the ratio to eager, and the CPU time per frame (``time.process_time``: every
thread's, none of the time spent waiting for a core; on a loaded machine it is what the wall time cannot say).
Target: >= 60 frames/s at the p50 on 2 CPU cores (``--threads 2``; pin the process to two cores with
``taskset -c 0,1`` on a larger machine).

    python benchmarks/bench_stream_backends.py --threads 2
    taskset -c 0,1 python benchmarks/bench_stream_backends.py --threads 2 --json stream_backends.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from results import add_results_argument, folder_model, write_section

from transformers_gazeflow.generation.onnx_export import export_streamer
from transformers_gazeflow.generation.steppers import STEPPERS, StepperOptions
from transformers_gazeflow.hub.model_folders import default_model_path, load_model

COMPILED = "-compiled"
BACKENDS = tuple(
    variant
    for name, backend in STEPPERS.items()
    for variant in ((name,) if backend.exported else (name, name + COMPILED))
)
"""The registry's backends and, for one that runs the model, its compiled variant (``torch``, ``torch-compiled``,
``onnxruntime``)."""
TARGET_FRAMES_PER_S = 60.0  # p50, 2 CPU cores


def make_steppers(model_dir: str, backends: list[str], seed: int, threads: int, export_dir: Path) -> dict:
    steppers = {}
    for variant in backends:
        backend = STEPPERS[variant.removesuffix(COMPILED)]
        options = StepperOptions(seed=seed, threads=threads, compile="default" if variant.endswith(COMPILED) else None)
        if backend.exported and not export_dir.exists():
            export_streamer(model_dir, export_dir)
        steppers[variant] = backend.open(str(export_dir) if backend.exported else model_dir, options)
    return steppers


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(default_model_path(causal=True)), help="a causal model folder")
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    parser.add_argument("--frames", type=int, default=300, help="timed frames per backend")
    parser.add_argument("--warmup", type=int, default=20, help="untimed frames per backend first")
    parser.add_argument("--rounds", type=int, default=5, help="the timed frames in this many alternating rounds")
    parser.add_argument("--size", default="128x96", help="source frames, WIDTHxHEIGHT (the synthetic data's)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="also write the figures here")
    add_results_argument(parser)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    measured = stream_every_backend(args)
    config = load_model(args.model).config
    print(
        f"{args.model}: K={config.num_samples}, S={config.num_steps}, {config.image_size}x{config.image_size} "
        f"input, W={config.num_frames}; {args.size} frames, {args.threads} threads, torch {torch.__version__}"
    )
    rows = backend_rows(*measured)
    best = max(rows, key=lambda name: rows[name]["frames_per_s_at_p50"])
    verdict = "meets" if rows[best]["frames_per_s_at_p50"] >= TARGET_FRAMES_PER_S else "misses"
    print(
        f"best: {best}, {rows[best]['frames_per_s_at_p50']:.1f} frames/s at the p50: {verdict} the target of "
        f">= {TARGET_FRAMES_PER_S:.0f} frames/s on {args.threads} threads"
    )
    figures = {
        "model": args.model,
        "threads": args.threads,
        "size": args.size,
        "frames": args.frames,
        "torch": torch.__version__,
        "backends": rows,
        "best": best,
    }
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    write_section(
        args.results_dir,
        "bench_stream_backends",
        f"{args.threads}-threads",
        figures,
        [folder_model("causal model", args.model)],
    )


def stream_every_backend(args) -> tuple[dict, dict, dict]:
    """Every backend streams the same frames (``--warmup`` untimed first), in alternating rounds: per backend the
    wall ms and CPU ms of each timed frame and its gaze point."""
    width, height = (int(v) for v in args.size.split("x"))
    frames = np.random.default_rng(0).integers(0, 256, (args.warmup + args.frames, height, width, 3), np.uint8)
    with tempfile.TemporaryDirectory() as scratch:
        started = time.perf_counter()
        steppers = make_steppers(args.model, args.backends, args.seed, args.threads, Path(scratch) / "onnx")
        for variant, stepper in steppers.items():  # warm-up frames: compilation, allocations, caches
            if variant.endswith(COMPILED):
                stepper.warm_up(height, width)
            for frame in frames[: args.warmup]:
                stepper.step(frame)
        print(f"setup (loading, export, compilation, warm-up): {time.perf_counter() - started:.1f} s", flush=True)
        times = {name: [] for name in steppers}
        cpu_times = {name: [] for name in steppers}
        points = {name: [] for name in steppers}
        timed = frames[args.warmup :]
        for chunk in np.array_split(np.arange(len(timed)), args.rounds):
            for name, stepper in steppers.items():
                for index in chunk:
                    start, cpu_start = time.perf_counter(), time.process_time()
                    _, mean = stepper.step(timed[index])
                    times[name].append((time.perf_counter() - start) * 1e3)
                    cpu_times[name].append((time.process_time() - cpu_start) * 1e3)
                    points[name].append(mean)
    return times, cpu_times, points


def backend_rows(times: dict, cpu_times: dict, points: dict) -> dict:
    """Per backend: p50/p95/mean ms, frames/s at the p50, the ratio to eager, the largest difference of its gaze
    from eager's and the CPU ms at the p50; printed as a table."""
    eager_p50 = percentile(times["torch"], 50) if "torch" in times else None
    rows = {}
    print(
        f"{'backend':<16}{'p50 ms':>9}{'p95 ms':>9}{'frames/s':>10}{'vs eager':>10}{'max |dx|':>11}{'CPU ms p50':>12}"
    )
    for name in times:
        p50, p95, cpu_p50 = (percentile(times[name], 50), percentile(times[name], 95), percentile(cpu_times[name], 50))
        difference = (
            float(np.abs(np.asarray(points[name]) - np.asarray(points["torch"])).max())
            if "torch" in points
            else float("nan")
        )
        rows[name] = {
            "p50_ms": p50,
            "p95_ms": p95,
            "mean_ms": statistics.fmean(times[name]),
            "frames_per_s_at_p50": 1e3 / p50,
            "speedup_vs_eager": eager_p50 / p50 if eager_p50 else None,
            "max_abs_difference_vs_eager": difference,
            "cpu_ms_p50": cpu_p50,
        }
        print(
            f"{name:<16}{p50:>9.2f}{p95:>9.2f}{1e3 / p50:>10.1f}"
            f"{(eager_p50 / p50 if eager_p50 else float('nan')):>9.2f}x{difference:>11.1e}{cpu_p50:>12.2f}"
        )
    return rows


if __name__ == "__main__":
    main()
