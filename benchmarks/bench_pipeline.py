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
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import torch

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


def generated_frames(num_frames: int, width: int, height: int, fps: float):
    """A bright disc moving on a Lissajous path over a slowly drifting colour gradient."""
    ys, xs = np.mgrid[0:height, 0:width].astype(np.float32)
    for t in range(num_frames):
        seconds = t / fps
        base = (xs / width * 120 + ys / height * 60 + 40 * np.sin(0.2 * seconds)).astype(np.float32)
        cx = width * (0.5 + 0.35 * np.sin(0.7 * seconds))
        cy = height * (0.5 + 0.3 * np.sin(1.1 * seconds + 0.5))
        disc = ((xs - cx) ** 2 + (ys - cy) ** 2 < (0.06 * min(width, height)) ** 2) * 255.0
        frame = np.clip(np.stack([base + disc, base * 0.8 + disc, 200 - base * 0.5 + disc * 0.2], -1), 0, 255)
        yield frame.astype(np.uint8)


def tiny_model(folder: Path) -> Path:
    from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
    from transformers_gazeflow.data.processing import GazeFlowVideoProcessor

    torch.manual_seed(0)
    GazeFlowModel(GazeFlowConfig.tiny()).save_pretrained(folder)
    GazeFlowVideoProcessor(size=32).save_pretrained(folder)
    return folder


def run(video: Path, model: str, out_dir: Path, overlay: bool, num_samples: int | None,
        num_steps: int | None) -> dict:
    from transformers_gazeflow.commands.predict import predict_video

    sampler = MemorySampler()
    before = rss_mb()
    sampler.start()
    started = time.perf_counter()
    summary = predict_video(video, out_dir, model=model, overlay=overlay, num_samples=num_samples,
                            num_steps=num_steps, quiet=True)
    wall = time.perf_counter() - started
    samples = np.array(sampler.stop())
    quarter = max(1, len(samples) // 4)
    return {
        "frames": summary["frames"], "wall_s": wall, "ms_per_frame": 1000 * wall / summary["frames"],
        "predict_ms_per_frame": summary["timings"]["ms_per_frame"], "rss_before_mb": before,
        "rss_peak_mb": float(samples.max()), "rss_first_quarter_mb": float(samples[:quarter].max()),
        "rss_last_quarter_mb": float(samples[-quarter:].max()),
    }


def overlay_costs(args, work: Path, model: str | None) -> None:
    import statistics

    from transformers_gazeflow.commands.predict import GazePredictor, PredictOptions, render_overlay_frame
    from transformers_gazeflow.data.video import iter_frames, write_video
    from transformers_gazeflow.metrics.heatmaps import heatmap_sigma_px
    from transformers_gazeflow.outputs.overlay import OverlayRenderer, OverlayVideoWriter

    predictor = GazePredictor(model)
    options = dict(num_samples=args.num_samples, num_steps=args.num_steps, quiet=True)
    rows = []
    for size in args.sizes:
        width, height = (int(v) for v in size.lower().split("x"))
        video = work / f"generated_{width}x{height}.mp4"
        write_video(video, generated_frames(args.frames, width, height, args.fps), fps=args.fps)
        times: dict[bool, list[float]] = {True: [], False: []}
        cpu: dict[bool, list[float]] = {True: [], False: []}
        for repeat in range(args.repeats):
            for overlay in ((True, False) if repeat % 2 == 0 else (False, True)):  # alternate the order
                started, cpu_started = time.perf_counter(), time.process_time()
                summary = predictor.predict(video, work / f"out_{size}_{overlay}", PredictOptions(overlay=overlay,
                                                                                                   **options))
                times[overlay].append(1000 * (time.perf_counter() - started) / summary["frames"])
                cpu[overlay].append(1000 * (time.process_time() - cpu_started) / summary["frames"])
        # the overlay's parts alone, on the same frames and predictions
        frames = list(iter_frames(video))
        samples = summary_samples(work / f"out_{size}_True" / "gaze.csv", len(frames))
        renderer = OverlayRenderer()
        sigma = heatmap_sigma_px(width)
        started = time.perf_counter()
        drawn = [render_overlay_frame(renderer, frame, samples[i], samples[i].mean(axis=0), sigma)
                 for i, frame in enumerate(frames)]
        draw_ms = 1000 * (time.perf_counter() - started) / len(frames)
        started = time.perf_counter()
        writer = OverlayVideoWriter(work / "encode_only.mp4", fps=args.fps)
        for frame in drawn:
            writer.write(frame)
        writer.close()
        encode_ms = 1000 * (time.perf_counter() - started) / len(frames)
        none, with_overlay = statistics.median(times[False]), statistics.median(times[True])
        rows.append((size, none, with_overlay, statistics.median(cpu[False]), statistics.median(cpu[True]), draw_ms,
                     encode_ms))
        print(f"  {size}: wall ms/frame: no overlay {[round(t, 1) for t in times[False]]}, overlay "
              f"{[round(t, 1) for t in times[True]]}", flush=True)
    print(f"\ntorch {torch.__version__}, {torch.get_num_threads()} thread(s), "
          f"model: {args.model or 'bundled default'}, {args.frames} frames at {args.fps:g} fps, "
          f"median of {args.repeats}, load average {os.getloadavg()[0]:.1f}")
    print("| frame size | --no-overlay ms/frame | overlay ms/frame | overlay adds (wall) | --no-overlay CPU ms/frame | "
          "overlay CPU ms/frame | overlay adds (CPU) | drawing alone ms/frame | encoding alone ms/frame |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for size, none, with_overlay, cpu_none, cpu_overlay, draw_ms, encode_ms in rows:
        print(f"| {size} | {none:.1f} | {with_overlay:.1f} | {100 * (with_overlay / none - 1):+.0f}% | "
              f"{cpu_none:.1f} | {cpu_overlay:.1f} | {100 * (cpu_overlay / cpu_none - 1):+.0f}% | {draw_ms:.1f} | "
              f"{encode_ms:.1f} |")


def summary_samples(csv_path: Path, num_frames: int) -> np.ndarray:
    """The K samples per frame from a gaze.csv, ``[T, K, 2]``."""
    import csv

    with csv_path.open(encoding="utf-8") as handle:
        rows = [row for row in csv.DictReader(handle) if int(row["sample_id"]) >= 0]
    xy = np.array([[float(r["x_norm"]), float(r["y_norm"])] for r in rows])
    return xy.reshape(num_frames, -1, 2)


def memory(args, work: Path, model: str | None) -> None:
    from transformers_gazeflow.data.video import write_video

    width, height = (int(v) for v in args.size.lower().split("x"))
    rows = []
    for minutes in args.minutes:
        frames = int(round(minutes * 60 * args.fps))
        video = work / f"generated_{minutes:g}min.mp4"
        started = time.perf_counter()
        write_video(video, generated_frames(frames, width, height, args.fps), fps=args.fps)
        print(f"generated {video.name}: {frames} frames {width}x{height} in {time.perf_counter() - started:.1f} s",
              flush=True)
        result = run(video, model, work / f"out_{minutes:g}min", not args.no_overlay, args.num_samples,
                     args.num_steps)
        rows.append((minutes, result))
        print(f"  {result}", flush=True)
    print(f"\ntorch {torch.__version__}, {args.threads} thread(s), model: {args.model or 'bundled default'}, "
          f"overlay: {not args.no_overlay}, load average {os.getloadavg()[0]:.1f}")
    print("| video | frames | ms/frame (whole command) | ms/frame (predict) | RSS first quarter | RSS last quarter "
          "| peak RSS |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for minutes, r in rows:
        print(f"| {minutes:g} min {width}x{height} @ {args.fps:g} fps | {r['frames']} | {r['ms_per_frame']:.2f} | "
              f"{r['predict_ms_per_frame']:.2f} | {r['rss_first_quarter_mb']:.0f} MiB | "
              f"{r['rss_last_quarter_mb']:.0f} MiB | {r['rss_peak_mb']:.0f} MiB |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=["256x192", "640x360", "1280x720"],
                        help="frame sizes of the overlay-cost run (WIDTHxHEIGHT)")
    parser.add_argument("--frames", type=int, default=96, help="frames per video of the overlay-cost run")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each setting (the median is printed)")
    parser.add_argument("--minutes", type=float, nargs="+", default=None,
                        help="memory run instead: lengths of the generated videos in minutes (e.g. 1 10)")
    parser.add_argument("--size", default="128x96", help="WIDTHxHEIGHT of the memory run's videos")
    parser.add_argument("--fps", type=float, default=24.0)
    parser.add_argument("--model", default=None, help="model folder, or 'tiny' (default: the bundled model)")
    parser.add_argument("--num-samples", type=int, default=None)
    parser.add_argument("--num-steps", type=int, default=None)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    parser.add_argument("--no-overlay", action="store_true", help="memory run without the overlay")
    parser.add_argument("--workdir", default=None, help="where videos and outputs go (default: a temp folder)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.workdir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        model = str(tiny_model(work / "tiny_model")) if args.model == "tiny" else args.model
        if args.minutes:
            memory(args, work, model)
        else:
            overlay_costs(args, work, model)


if __name__ == "__main__":
    main()
