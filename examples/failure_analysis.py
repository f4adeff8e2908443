#!/usr/bin/env python
"""Where GazeFlow's error is (paper Section 4.8, Appendix A.3, Figure failure_cases): per-clip errors, the frames whose
recorded gaze left the view (off-frame, or at the border right after a large saccade) and the share of the error
they carry, and a figure of the worst clips.

    python examples/failure_analysis.py --dataset_name synthetic --data_dir data/synthetic_small \
        --dataset_config small --output_dir runs/analysis/failures                       # the bundled model
    python examples/failure_analysis.py --model_name_or_path runs/egtea --dataset_name egtea --data_dir /data/egtea \
        --num_samples 30 --output_dir runs/egtea/failures

Each clip's first window of --window_frames frames (the evaluation protocol's, 64) is sampled as
``examples/evaluate.py`` does (same seeds per clip); the error of a frame is the pixel distance between the mean of
the K samples and the recorded gaze, on valid frames (``analysis.failures``). Writes ``failures.md``,
``failures.json`` (every clip's row) and ``failure_cases.png`` (the worst clips' frames with the K samples and the
recorded gaze drawn by the package's overlay code).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from transformers_gazeflow.analysis.capture import (
    add_model_and_dataset_arguments,
    model_from_arguments,
    windows_from_arguments,
)
from transformers_gazeflow.analysis.failures import (
    FailureRule,
    clip_failures,
    failure_markdown,
    failure_summary,
    failures_json,
    worst_clips,
)
from transformers_gazeflow.analysis.figures import FailureRow, evenly_spaced, failure_cases_figure
from transformers_gazeflow.data.gaze_types import OFF_FRAME
from transformers_gazeflow.data.video import decode_frames
from transformers_gazeflow.models.gazeflow.generation_gazeflow import SamplingSettings
from transformers_gazeflow.models.gazeflow.geometry import unit_to_pixels
from transformers_gazeflow.training.evaluation import predict_clips
from transformers_gazeflow.training.script_errors import run_script

PROG = "failure_analysis.py"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=PROG, description="Per-clip errors and the frames that carry them.")
    add_model_and_dataset_arguments(parser)
    parser.add_argument("--split", default="test", help="the clips analysed")
    parser.add_argument(
        "--window_frames", type=int, default=64, help="frames of each clip's first window (protocol: 64)"
    )
    parser.add_argument("--max_clips", type=int, default=None, help="analyse at most N clips (quick checks)")
    parser.add_argument("--num_samples", type=int, default=None, help="K (default: the model config's)")
    parser.add_argument("--num_steps", type=int, default=None, help="S (default: the model config's)")
    parser.add_argument("--solver", default=None, choices=["euler", "heun", "midpoint"], help="default: the config's")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed (per clip, as evaluate.py)")
    parser.add_argument(
        "--border",
        type=float,
        default=FailureRule.border,
        help="'at the border': within this fraction of the frame's width/height of an edge",
    )
    parser.add_argument(
        "--saccade_amplitude",
        type=float,
        default=FailureRule.saccade_amplitude,
        help="'large saccade': a move of at least this fraction of the frame diagonal",
    )
    parser.add_argument(
        "--lookback",
        type=int,
        default=FailureRule.lookback,
        help="frames before a border frame in which the large saccade must happen",
    )
    parser.add_argument("--worst", type=int, default=4, help="clips in the figure (the largest mean error)")
    parser.add_argument("--frames_per_clip", type=int, default=6, help="frames drawn per clip in the figure")
    parser.add_argument("--device", default=None, help="e.g. cuda (default: cpu)")
    parser.add_argument("--output_dir", required=True, help="where failures.md/.json and failure_cases.png go")
    args = parser.parse_args(argv)
    for name in ("window_frames", "max_clips", "num_samples", "num_steps", "worst", "frames_per_clip"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name} must be >= 1, got {value}")
    try:
        args.rule = FailureRule(args.border, args.saccade_amplitude, args.lookback)
    except ValueError as err:
        parser.error(f"--border/--saccade_amplitude/--lookback: {err}")
    return args


def figure_row(example: dict, failures, samples: np.ndarray, frames_per_clip: int) -> FailureRow:
    """The worst clip's row: evenly spaced frames of its window, the recorded gaze and the K samples in pixels."""
    n = int(example["num_frames"])
    frames = decode_frames(example["video_path"], int(example["window_start"]), n)
    height, width = frames.shape[1:3]
    picks = evenly_spaced(n, frames_per_clip)
    gaze = np.asarray(example["gaze"], np.float64)
    gaze_type = np.asarray(example["gaze_type"])
    return FailureRow(
        title=f"{failures.clip_id}\nmean {failures.mean_error:.1f} px",
        frames=frames[picks],
        truth_px=unit_to_pixels(gaze[picks], width, height),
        samples_px=unit_to_pixels(np.transpose(samples, (1, 0, 2))[picks], width, height),
        off_frame=gaze_type[picks] == OFF_FRAME,
        frame_numbers=[int(example["window_start"]) + p for p in picks],
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    model, processor = model_from_arguments(args)
    examples = windows_from_arguments(args, "--split", args.split, args.window_frames, args.max_clips)
    model.set_attn_implementation("sdpa")  # sampling needs no weights
    settings = SamplingSettings.resolve(
        model.config, num_samples=args.num_samples, num_steps=args.num_steps, solver=args.solver
    )
    predictions, _ = predict_clips(
        model,
        examples,
        processor,
        settings.num_samples,
        settings.num_steps,
        settings.solver,
        args.seed,
        window=args.window_frames,
    )
    clips = [
        clip_failures(
            str(e["clip_id"]),
            np.asarray(e["gaze"]),
            np.asarray(e["gaze_type"]),
            samples,
            int(e["width"]),
            int(e["height"]),
            args.rule,
        )
        for e, samples in zip(examples, predictions)
    ]
    summary = failure_summary(clips, args.rule)
    worst = worst_clips(clips, args.worst)
    by_id = {str(e["clip_id"]): (e, samples) for e, samples in zip(examples, predictions)}
    rows = [figure_row(by_id[c.clip_id][0], c, by_id[c.clip_id][1], args.frames_per_clip) for c in worst]

    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    name = args.model_name_or_path or "bundled default"
    report = (
        f"## Failure analysis: {name} on {args.dataset_name} / {args.split} (K = {settings.num_samples}, first "
        f"{args.window_frames} frames per clip)\n\n{failure_markdown(summary, worst)}\n"
    )
    (out / "failures.md").write_text(report)
    (out / "failures.json").write_text(failures_json(summary, clips))
    failure_cases_figure(rows, out / "failure_cases.png")
    print(report)
    print(f"wrote {out / 'failures.md'}, {out / 'failures.json'} and {out / 'failure_cases.png'}")
    return 0


if __name__ == "__main__":
    run_script(main, PROG)
