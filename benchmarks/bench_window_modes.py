"""Coherent vs blended sliding windows on long clips: the trajectories' dynamics and the sampling time.

The bundled model (16-frame windows, stride 8) samples K trajectories on long synthetic clips with known gaze
(``data.synthetic``, the distribution it was trained on) in both window modes, with the same seeds. Printed, per mode:

* the per-step displacement statistics against the true gaze (``metrics.dynamics``): mean and median step as
  ratios to the human (true) steps and the JSD of the step histograms (100 linear bins, the paper's);
* the same, split into the steps that cross into a window's new frames (frame ``s + L - 1 -> s + L`` for a window
  starting at ``s`` with ``L`` frames shared with the one before) against all other steps: a window boundary that
  jumps shows as a larger boundary median;
* the reference of windows sampled alone: each clip's first window (16 frames), no joining at all;
* seconds per clip of ``model.generate`` (the two modes side by side in one run).

    python benchmarks/bench_window_modes.py                    # 24 clips of 128 frames, K=16, S=5
    python benchmarks/bench_window_modes.py --num-steps 50 --clips 12
    python benchmarks/bench_window_modes.py --results-dir docs/benchmark_results   # the figures the README quotes
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from results import add_results_argument, shipped_model, write_section

import transformers_gazeflow
from transformers_gazeflow import GazeFlowVideoProcessor, load_model
from transformers_gazeflow.data.synthetic import SyntheticGazeSettings, generate_clip
from transformers_gazeflow.metrics.dynamics import displacement_statistics, displacements
from transformers_gazeflow.models.gazeflow.geometry import unit_to_pixels
from transformers_gazeflow.models.gazeflow.windows import window_starts


def boundary_steps(num_frames: int, window: int, stride: int) -> np.ndarray:
    """Step indices t (the step t -> t + 1) that enter a window's first new frame."""
    starts = window_starts(num_frames, window, stride)
    covered, steps = 0, []
    for start in starts:
        end = min(start + window, num_frames)
        if start > 0 and covered < end:
            steps.append(covered - 1)
        covered = max(covered, end)
    return np.asarray(steps, dtype=np.int64)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=24)
    parser.add_argument("--frames", type=int, default=128)
    parser.add_argument("--num-samples", type=int, default=16)
    parser.add_argument("--num-steps", type=int, default=5)
    parser.add_argument("--solver", default="euler")
    parser.add_argument("--threads", type=int, default=1)
    add_results_argument(parser)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = load_model(transformers_gazeflow.default_model_path())
    processor = GazeFlowVideoProcessor.from_pretrained(transformers_gazeflow.default_model_path())
    settings = SyntheticGazeSettings(num_clips=args.clips, min_frames=args.frames, max_frames=args.frames, seed=123)
    clips = [generate_clip(settings, index) for index in range(args.clips)]
    print(
        f"bundled model: windows of {model.config.num_frames} frames, stride {model.config.window_stride}; "
        f"{args.clips} synthetic clips of {args.frames} frames ({settings.width}x{settings.height}); "
        f"K={args.num_samples}, S={args.num_steps}, {args.solver}"
    )
    steps = sample_steps(args, model, processor, clips)
    figures = {"clips": args.clips, "frames": args.frames, "K": args.num_samples, "S": args.num_steps}
    figures.update(report(args, steps, model.config.num_frames))
    write_section(args.results_dir, "bench_window_modes", "default", figures, [shipped_model()])


def generate_kwargs(args, index: int) -> dict:
    return dict(
        num_samples=args.num_samples,
        num_steps=args.num_steps,
        solver=args.solver,
        generator=torch.Generator().manual_seed(index),
    )


def sample_steps(args, model, processor, clips) -> dict:
    """Per-step displacements (pixels) of the true gaze and of each mode's samples (all steps, the steps into a
    window's new frames, the others), each mode's seconds, and those of each clip's first window sampled alone."""
    window, stride = model.config.num_frames, model.config.window_stride
    found = {"human": [], "alone_human": [], "alone": []}
    found["modes"] = {mode: {"all": [], "boundary": [], "inside": [], "seconds": 0.0} for mode in ("blend", "coherent")}
    boundary = boundary_steps(args.frames, window, stride)
    inside = np.setdiff1d(np.arange(args.frames - 1), boundary)
    for index, clip in enumerate(clips):
        pixels = processor.preprocess(clip.render())[None]
        valid = np.asarray(clip.gaze.valid, bool)
        truth = unit_to_pixels(np.asarray(clip.gaze.gaze, np.float64), clip.width, clip.height)
        found["human"].append(displacements(truth, valid))
        found["alone_human"].append(displacements(truth[:window], valid[:window]))
        for mode, result in found["modes"].items():
            start = time.perf_counter()
            out = model.generate(pixels, window_mode=mode, **generate_kwargs(args, index))
            result["seconds"] += time.perf_counter() - start
            samples = unit_to_pixels(out.trajectories[0].numpy().astype(np.float64), clip.width, clip.height)
            steps = np.linalg.norm(np.diff(samples, axis=1), axis=-1)  # [K, T - 1]
            keep = valid[1:] & valid[:-1]
            result["all"].append(steps[:, keep].reshape(-1))
            result["boundary"].append(steps[:, boundary[keep[boundary]]].reshape(-1))
            result["inside"].append(steps[:, inside[keep[inside]]].reshape(-1))
        first = model.generate(pixels[:, :window], **generate_kwargs(args, index))
        first_samples = unit_to_pixels(first.trajectories[0].numpy().astype(np.float64), clip.width, clip.height)
        found["alone"].append(displacements(first_samples, valid[:window]))
    return found


def report(args, found: dict, window: int) -> dict:
    """Print each mode's dynamics against the true gaze's; return them."""
    human_steps = np.concatenate(found["human"])
    print(f"\nhuman (true) steps: median {np.median(human_steps):.3f} px, mean {human_steps.mean():.3f} px")
    print(
        "| joining | median step / human | mean step / human | JSD | boundary median (px) | inside median (px) "
        "| boundary / inside | s per clip |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    figures = {"human_median_px": float(np.median(human_steps)), "modes": {}}
    for mode, result in found["modes"].items():
        stats = displacement_statistics(np.concatenate(result["all"]), human_steps)
        b, i = np.median(np.concatenate(result["boundary"])), np.median(np.concatenate(result["inside"]))
        print(
            f"| {mode} | {stats['displacement_median_ratio']:.2f} | {stats['displacement_mean_ratio']:.2f} | "
            f"{stats['displacement_jsd']:.3f} | {b:.3f} | {i:.3f} | {b / i:.2f} | "
            f"{result['seconds'] / args.clips:.3f} |"
        )
        figures["modes"][mode] = {
            **{key: float(value) for key, value in stats.items()},
            "boundary_median_px": float(b),
            "inside_median_px": float(i),
            "seconds_per_clip": result["seconds"] / args.clips,
        }
    stats = displacement_statistics(np.concatenate(found["alone"]), np.concatenate(found["alone_human"]))
    print(
        f"| first window alone ({window} frames) | {stats['displacement_median_ratio']:.2f} | "
        f"{stats['displacement_mean_ratio']:.2f} | {stats['displacement_jsd']:.3f} | - | - | - | - |"
    )
    figures["first_window_alone"] = {key: float(value) for key, value in stats.items()}
    return figures


if __name__ == "__main__":
    main()
