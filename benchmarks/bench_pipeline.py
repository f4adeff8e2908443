"""Benchmarks of the ``gazeflow predict`` command: what the overlay costs per frame, and memory on long videos.

**Overlay cost** (the default, ``--sizes``): for each frame size, a generated video (a moving bright target over a
drifting gradient, numpy only, written with ``data.video.write_video``) goes through the command's code path
(``runner.GazePredictor.predict``: decode -> processor -> encoder -> sampler -> blend -> CSV, plus the overlay:
heatmap + samples + trail drawn, H.264 in a background thread) with the overlay and with ``--no-overlay``,
alternating, ``--repeats`` times; it prints the median wall-clock and CPU ms per frame of each (CPU: all the process's
threads, so it does not depend on whether a free core ran the overlay thread), side by side, and the overlay's share.
It also times the overlay's two parts alone on the same frames (drawing one frame; encoding one frame).

    python benchmarks/bench_pipeline.py                                  # 256x192, 640x360, 1280x720; bundled model
    python benchmarks/bench_pipeline.py --sizes 1280x720 --frames 96 --repeats 5 --threads 1
    python benchmarks/bench_pipeline.py --model tiny                     # a tiny random GazeFlow instead

**Memory** (``--minutes``): the same code path on long videos while a thread samples the process's resident memory
(RSS, from ``/proc/self/statm``) every 0.1 s. Memory is flat when the 10-minute video peaks where the short one does
and RSS does not climb between the first and the last quarter of the run.

    python benchmarks/bench_pipeline.py --minutes 1 10 --size 128x96 --model tiny

The model is the bundled default (what ``gazeflow predict`` uses without ``--model``), a folder, or ``tiny``
(``GazeFlowConfig.tiny()``, 32x32 frames, 8-frame windows: then the figures measure the pipeline's own costs).

Three more runs compare the command's path as it runs now ("overlapped": frames decoded in a background thread,
eight windows encoded per call, preprocessing a batch at a time on the model's device, on CUDA the weights in
bf16 and each window's sampling steps replayed as a CUDA graph) with the serial path it replaced ("serial": one
window at a time, frames read in the model's loop, fp32, eager sampling), side by side in one run:

**Ops per output frame** (``--ops``, CPU): aten ops dispatched per output frame of ``gazeflow predict
--no-overlay`` with the bundled model at K=30, S=5 on a generated 256x256 video (``torch.profiler`` over
``--ops-frames`` frames): all aten ops (views and allocations included), and those that are not views or
allocations (an upper bound on a GPU's kernel launches); then per stage: the encoder per window (transformers' V-JEPA 2
attention against the fused one), the condition per window, one velocity-network call, preprocessing per frame.

    python benchmarks/bench_pipeline.py --ops --threads 2 --json ops.json

**Against decoding alone, and the stage times** (``--decode-ratio``): ms per frame of the command's path at 640x480
with K=1, S=1 (the model's cost near zero) against decoding the same video alone (``iter_frames``), alternating,
median of ``--repeats``, wall and CPU time (all the process's threads): the serial path, the overlapped one, and the
overlapped one with the processor's uint8 resize (``gazeflow predict --resize-dtype uint8``); beside each,
``summary.json``'s stage times in ms per frame (decode, preprocess, encode, sample, write, and the time the model's
loop waited for frames). On the serial path every stage runs in the model's loop, one after another, so its stage
times are what each stage costs on ``--threads`` torch threads (decode: PyAV with FFmpeg's threads); on the
overlapped path on a CPU the reading thread also resizes, so its decode is decoding and preprocessing together.

    python benchmarks/bench_pipeline.py --decode-ratio --threads 2 --repeats 3 --json ratio.json

**Frames per second** (``--throughput``, for a GPU): ``gazeflow predict --no-overlay``'s path
(``GazePredictor.predict``) on generated videos of ``--seconds`` seconds at each of ``--throughput-sizes``, with
the bundled model and a random model of the paper's geometry (ViT-L, 64-frame windows, 256 px), K=30, S=5, serial
and overlapped; each predictor first runs a short warm-up video (CUDA graph capture, cuDNN's autotuning). Prints
frames per second and the stage times of ``summary.json``.

    python benchmarks/bench_pipeline.py --throughput --device cuda --json throughput.json
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import torch
from pipeline_paths import PATHS, decode_ratio, generated_frames, measured_model, ops_per_frame, throughput, tiny_model
from results import add_results_argument, write_section

PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_mb() -> float:
    """Resident memory of this process in MiB (Linux ``/proc/self/statm``)."""
    with open("/proc/self/statm", encoding="ascii") as handle:
        return int(handle.read().split()[1]) * PAGE / 2**20


class MemorySampler(threading.Thread):
    """Samples RSS every ``interval`` seconds until stopped."""

    def __init__(self, interval: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.interval, self.samples = interval, []
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.samples.append(rss_mb())
            self._stop_event.wait(self.interval)

    def stop(self) -> list[float]:
        self._stop_event.set()
        self.join()
        return self.samples


def run(video: Path, model: str, out_dir: Path, overlay: bool, num_samples: int | None, num_steps: int | None) -> dict:
    from transformers_gazeflow.commands.predict import predict_video

    sampler = MemorySampler()
    before = rss_mb()
    sampler.start()
    started = time.perf_counter()
    summary = predict_video(
        video, out_dir, model=model, overlay=overlay, num_samples=num_samples, num_steps=num_steps, quiet=True
    )
    wall = time.perf_counter() - started
    samples = np.array(sampler.stop())
    quarter = max(1, len(samples) // 4)
    return {
        "frames": summary["frames"],
        "wall_s": wall,
        "ms_per_frame": 1000 * wall / summary["frames"],
        "predict_ms_per_frame": summary["timings"]["ms_per_frame"],
        "rss_before_mb": before,
        "rss_peak_mb": float(samples.max()),
        "rss_first_quarter_mb": float(samples[:quarter].max()),
        "rss_last_quarter_mb": float(samples[-quarter:].max()),
    }


def overlay_costs(args, work: Path, model: str | None) -> dict:
    """The overlay's cost per frame at each of ``--sizes``, side by side with ``--no-overlay``."""
    import statistics

    from transformers_gazeflow.commands.predict import GazePredictor, PredictOptions
    from transformers_gazeflow.data.video import write_video

    predictor = GazePredictor(model)
    options = dict(sampling=dict(num_samples=args.num_samples, num_steps=args.num_steps), quiet=True)
    rows = []
    for size in args.sizes:
        width, height = (int(v) for v in size.lower().split("x"))
        video = work / f"generated_{width}x{height}.mp4"
        write_video(video, generated_frames(args.frames, width, height, args.fps), fps=args.fps)
        times: dict[bool, list[float]] = {True: [], False: []}
        cpu: dict[bool, list[float]] = {True: [], False: []}
        for repeat in range(args.repeats):
            for overlay in (True, False) if repeat % 2 == 0 else (False, True):  # alternate the order
                started, cpu_started = time.perf_counter(), time.process_time()
                summary = predictor.predict(
                    video, work / f"out_{size}_{overlay}", PredictOptions(overlay=overlay, **options)
                )
                times[overlay].append(1000 * (time.perf_counter() - started) / summary["frames"])
                cpu[overlay].append(1000 * (time.process_time() - cpu_started) / summary["frames"])
        draw_ms, encode_ms = overlay_parts_ms(video, work / f"out_{size}_True" / "gaze.csv", width, args.fps, work)
        rows.append(
            {
                "size": size,
                "no_overlay_ms": statistics.median(times[False]),
                "overlay_ms": statistics.median(times[True]),
                "no_overlay_cpu_ms": statistics.median(cpu[False]),
                "overlay_cpu_ms": statistics.median(cpu[True]),
                "drawing_ms": draw_ms,
                "encoding_ms": encode_ms,
                "runs_wall_ms": {"no_overlay": times[False], "overlay": times[True]},
            }
        )
        print(
            f"  {size}: wall ms/frame: no overlay {[round(t, 1) for t in times[False]]}, overlay "
            f"{[round(t, 1) for t in times[True]]}",
            flush=True,
        )
    print(
        f"\ntorch {torch.__version__}, {torch.get_num_threads()} thread(s), "
        f"model: {args.model or 'bundled default'}, {args.frames} frames at {args.fps:g} fps, "
        f"median of {args.repeats}, load average {os.getloadavg()[0]:.1f}"
    )
    print_overlay_table(rows)
    return {"frames": args.frames, "fps": args.fps, "repeats": args.repeats, "sizes": rows}


def overlay_parts_ms(video: Path, csv_path: Path, width: int, fps: float, work: Path) -> tuple[float, float]:
    """The overlay's two parts alone on the same frames and predictions: ms per frame drawing, and encoding."""
    from transformers_gazeflow.commands.overlay_frames import render_overlay_frame
    from transformers_gazeflow.data.video import iter_frames
    from transformers_gazeflow.metrics.heatmaps import heatmap_sigma_px
    from transformers_gazeflow.outputs.overlay import OverlayRenderer, OverlayVideoWriter

    frames = list(iter_frames(video))
    samples = summary_samples(csv_path, len(frames))
    renderer = OverlayRenderer()
    sigma = heatmap_sigma_px(width)
    started = time.perf_counter()
    drawn = [
        render_overlay_frame(renderer, frame, samples[i], samples[i].mean(axis=0), sigma)
        for i, frame in enumerate(frames)
    ]
    draw_ms = 1000 * (time.perf_counter() - started) / len(frames)
    started = time.perf_counter()
    writer = OverlayVideoWriter(work / "encode_only.mp4", fps=fps)
    for frame in drawn:
        writer.write(frame)
    writer.close()
    return draw_ms, 1000 * (time.perf_counter() - started) / len(frames)


def print_overlay_table(rows: list[dict]) -> None:
    print(
        "| frame size | --no-overlay ms/frame | overlay ms/frame | overlay adds (wall) | --no-overlay CPU ms/frame | "
        "overlay CPU ms/frame | overlay adds (CPU) | drawing alone ms/frame | encoding alone ms/frame |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        none, with_overlay = row["no_overlay_ms"], row["overlay_ms"]
        cpu_none, cpu_overlay = row["no_overlay_cpu_ms"], row["overlay_cpu_ms"]
        print(
            f"| {row['size']} | {none:.1f} | {with_overlay:.1f} | {100 * (with_overlay / none - 1):+.0f}% | "
            f"{cpu_none:.1f} | {cpu_overlay:.1f} | {100 * (cpu_overlay / cpu_none - 1):+.0f}% | "
            f"{row['drawing_ms']:.1f} | {row['encoding_ms']:.1f} |"
        )


def summary_samples(csv_path: Path, num_frames: int) -> np.ndarray:
    """The K samples per frame from a gaze.csv, ``[T, K, 2]``."""
    import csv

    with csv_path.open(encoding="utf-8") as handle:
        rows = [row for row in csv.DictReader(handle) if int(row["sample_id"]) >= 0]
    xy = np.array([[float(r["x_norm"]), float(r["y_norm"])] for r in rows])
    return xy.reshape(num_frames, -1, 2)


def memory(args, work: Path, model: str | None) -> dict:
    """Resident memory over long videos (``--minutes``)."""
    from transformers_gazeflow.data.video import write_video

    width, height = (int(v) for v in args.size.lower().split("x"))
    rows = []
    for minutes in args.minutes:
        frames = int(round(minutes * 60 * args.fps))
        video = work / f"generated_{minutes:g}min.mp4"
        started = time.perf_counter()
        write_video(video, generated_frames(frames, width, height, args.fps), fps=args.fps)
        print(
            f"generated {video.name}: {frames} frames {width}x{height} in {time.perf_counter() - started:.1f} s",
            flush=True,
        )
        result = run(video, model, work / f"out_{minutes:g}min", not args.no_overlay, args.num_samples, args.num_steps)
        rows.append((minutes, result))
        print(f"  {result}", flush=True)
    print(
        f"\ntorch {torch.__version__}, {args.threads} thread(s), model: {args.model or 'bundled default'}, "
        f"overlay: {not args.no_overlay}, load average {os.getloadavg()[0]:.1f}"
    )
    print(
        "| video | frames | ms/frame (whole command) | ms/frame (predict) | RSS first quarter | RSS last quarter "
        "| peak RSS |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for minutes, r in rows:
        print(
            f"| {minutes:g} min {width}x{height} @ {args.fps:g} fps | {r['frames']} | {r['ms_per_frame']:.2f} | "
            f"{r['predict_ms_per_frame']:.2f} | {r['rss_first_quarter_mb']:.0f} MiB | "
            f"{r['rss_last_quarter_mb']:.0f} MiB | {r['rss_peak_mb']:.0f} MiB |"
        )
    return {
        "size": args.size,
        "fps": args.fps,
        "overlay": not args.no_overlay,
        "videos": [{"minutes": minutes, **result} for minutes, result in rows],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--sizes",
        nargs="+",
        default=["256x192", "640x360", "1280x720"],
        help="frame sizes of the overlay-cost run (WIDTHxHEIGHT)",
    )
    parser.add_argument("--frames", type=int, default=96, help="frames per video of the overlay-cost run")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each setting (the median is printed)")
    parser.add_argument(
        "--minutes",
        type=float,
        nargs="+",
        default=None,
        help="memory run instead: lengths of the generated videos in minutes (e.g. 1 10)",
    )
    parser.add_argument("--size", default="128x96", help="WIDTHxHEIGHT of the memory run's videos")
    parser.add_argument("--fps", type=float, default=24.0)
    parser.add_argument("--model", default=None, help="model folder, or 'tiny' (default: the bundled model)")
    parser.add_argument("--num-samples", type=int, default=None)
    parser.add_argument("--num-steps", type=int, default=None)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    parser.add_argument("--no-overlay", action="store_true", help="memory run without the overlay")
    parser.add_argument("--workdir", default=None, help="where videos and outputs go (default: a temp folder)")
    parser.add_argument("--ops", action="store_true", help="aten ops per output frame, serial and overlapped (CPU)")
    parser.add_argument("--ops-frames", type=int, default=192, help="frames of the --ops video")
    parser.add_argument(
        "--decode-ratio",
        action="store_true",
        help="ms/frame at K=1, S=1 against decoding alone, serial and overlapped (CPU)",
    )
    parser.add_argument("--ratio-size", default="640x480", help="WIDTHxHEIGHT of the --decode-ratio video")
    parser.add_argument("--ratio-frames", type=int, default=480, help="frames of the --decode-ratio video")
    parser.add_argument("--throughput", action="store_true", help="frames per second, serial and overlapped")
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the --throughput videos")
    parser.add_argument("--throughput-sizes", nargs="+", default=["256x256", "640x480"])
    parser.add_argument(
        "--throughput-models", nargs="+", default=["bundled", "paper"], choices=["bundled", "paper", "tiny"]
    )
    parser.add_argument("--paths", nargs="+", default=list(PATHS), choices=list(PATHS))
    parser.add_argument(
        "--device", default="cuda" if torch.cuda.is_available() else "cpu", help="device of the --throughput run"
    )
    parser.add_argument("--json", default=None, help="write the figures of --ops/--decode-ratio/--throughput here")
    add_results_argument(parser)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.workdir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        figures = run_modes(args, work)
    for section, section_figures in figures.items():
        device = args.device if section == "throughput" else "cpu"  # the other runs are the CPU's
        write_section(
            args.results_dir, "bench_pipeline", section, section_figures, section_models(section, args), device
        )


def run_modes(args, work: Path) -> dict:
    """The runs the flags ask for, each one's figures under its results section's name."""
    if args.ops or args.decode_ratio or args.throughput:
        figures = {}
        for flag, run_mode in (("ops", ops_per_frame), ("decode_ratio", decode_ratio), ("throughput", throughput)):
            if getattr(args, flag):
                figures[flag.replace("_", "-")] = run_mode(args, work)
        if args.json:
            Path(args.json).write_text(json.dumps({k.replace("-", "_"): v for k, v in figures.items()}, indent=1))
        return figures
    model = str(tiny_model(work / "tiny_model")) if args.model == "tiny" else args.model
    if args.minutes:
        return {"memory": memory(args, work, model)}
    return {"overlay": overlay_costs(args, work, model)}


def section_models(section: str, args) -> list[dict]:
    """The models a section measured: ``--ops`` the bundled one, ``--throughput`` each of ``--throughput-models``,
    the others ``--model``."""
    if section == "ops":
        return [measured_model("bundled")]
    if section == "throughput":
        return [measured_model(name) for name in args.throughput_models]
    return [measured_model(args.model)]


if __name__ == "__main__":
    main()
