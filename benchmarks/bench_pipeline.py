"""Benchmark of the ``gazeflow predict`` command on long generated videos: ms per frame and peak memory.

Generates videos of a moving bright target over a drifting gradient (numpy only, written with
``data.video.write_video``), runs the command's code path (``cli.predict_video``: decode -> processor -> encoder ->
sampler -> blend -> overlay + CSV, all streaming) on each, and samples the process's resident memory (RSS, from
``/proc/self/statm``) every 0.1 s in a background thread. Memory is flat when the 10-minute video peaks where the
short one does and RSS does not climb between the first and the last quarter of the run.

    python benchmarks/bench_pipeline.py                       # 1 and 10 minutes, 24 fps, 128x96, tiny model
    python benchmarks/bench_pipeline.py --model path/to/model --minutes 1 10 --threads 2

With no ``--model``, a tiny random GazeFlow (``GazeFlowConfig.tiny()``, 32x32 frames, 8-frame windows) is used:
the figures then measure the pipeline's own costs (decode, resize, overlay, CSV) more than the network's.
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
    from transformers_gazeflow.cli import predict_video

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, nargs="+", default=[1.0, 10.0])
    parser.add_argument("--fps", type=float, default=24.0)
    parser.add_argument("--size", default="128x96", help="WIDTHxHEIGHT of the generated videos")
    parser.add_argument("--model", default=None, help="model folder (default: a tiny random GazeFlow)")
    parser.add_argument("--num-samples", type=int, default=None)
    parser.add_argument("--num-steps", type=int, default=None)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    parser.add_argument("--no-overlay", action="store_true")
    parser.add_argument("--workdir", default=None, help="where videos and outputs go (default: a temp folder)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    width, height = (int(v) for v in args.size.lower().split("x"))

    from transformers.utils import logging as hf_logging

    from transformers_gazeflow.data.video import write_video

    hf_logging.disable_progress_bar()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.workdir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        model = args.model or str(tiny_model(work / "tiny_model"))
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
    print(f"\ntorch {torch.__version__}, {args.threads} thread(s), model: {args.model or 'tiny random'}, "
          f"overlay: {not args.no_overlay}")
    print("| video | frames | ms/frame (whole command) | ms/frame (predict) | RSS first quarter | RSS last quarter "
          "| peak RSS |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for minutes, r in rows:
        print(f"| {minutes:g} min {width}x{height} @ {args.fps:g} fps | {r['frames']} | {r['ms_per_frame']:.2f} | "
              f"{r['predict_ms_per_frame']:.2f} | {r['rss_first_quarter_mb']:.0f} MiB | "
              f"{r['rss_last_quarter_mb']:.0f} MiB | {r['rss_peak_mb']:.0f} MiB |")


if __name__ == "__main__":
    main()
