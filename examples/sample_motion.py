#!/usr/bin/env python
"""Where a model's sampled steps come from: the K samples' per-frame steps split into the mean trajectory's (what the
samples agree on) and each sample's deviation from it, at one or more step counts S
(``metrics.dynamics.sample_motion``).

    python examples/sample_motion.py --dataset_name synthetic --data_dir data/synthetic_small \
        --dataset_config small --num_steps 5 50 --output_dir runs/analysis/sample_motion     # the bundled model

``--noise_scale`` samples at another temperature tau than the model's. Each clip's first window of --window_frames
frames (the evaluation protocol's, 64) is sampled as ``examples/evaluate.py`` does (coherent windows, the same seeds
per clip). Besides the steps, whether the samples make the recording's large saccades
(``metrics.events.large_saccades``: how many per 100 frames, and around each recorded one how far a sample moves and
its largest step, against the recording's). Writes ``sample_motion.md`` and ``sample_motion.json`` (one row per S).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from transformers_gazeflow.analysis.capture import (
    add_model_and_dataset_arguments,
    config_number,
    model_from_arguments,
    windows_from_arguments,
)
from transformers_gazeflow.metrics.dynamics import sample_motion
from transformers_gazeflow.metrics.events import FOLLOW_MARGIN_FRAMES, LARGE_SACCADE_DEG
from transformers_gazeflow.models.gazeflow.generation_gazeflow import SamplingSettings
from transformers_gazeflow.models.gazeflow.geometry import DEFAULT_HORIZONTAL_FOV_DEG
from transformers_gazeflow.training.evaluation import large_saccade_report, predict_clips
from transformers_gazeflow.training.script_errors import run_script

PROG = "sample_motion.py"
COLUMNS = (
    ("S", "num_steps", "{:d}"),
    ("tau", "noise_scale", "{:g}"),
    ("sample step / human", "sample_ratio", "{:.2f}x"),
    ("mean trajectory step / human", "mean_ratio", "{:.2f}x"),
    ("deviation step (px)", "deviation_step_px", "{:.3f}"),
    ("deviation size (px)", "deviation_px", "{:.2f}"),
    ("deviation lag-1 correlation", "deviation_lag1", "{:.3f}"),
    (f"saccades >= {LARGE_SACCADE_DEG:g} deg per 100 frames", "samples_per_100_frames", "{:.2f}"),
    ("net move at the recorded ones", "net_move_ratio", "{:.2f}x"),
    ("largest step there", "largest_step_ratio", "{:.2f}x"),
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=PROG, description="The samples' steps: mean trajectory and deviations.")
    add_model_and_dataset_arguments(parser)
    parser.add_argument("--split", default="test", help="the clips analysed")
    parser.add_argument("--window_frames", type=int, default=64, help="frames of each clip's first window")
    parser.add_argument("--max_clips", type=int, default=None, help="analyse at most N clips (quick checks)")
    parser.add_argument("--num_samples", type=int, default=None, help="K (default: the model config's)")
    parser.add_argument("--num_steps", type=int, nargs="+", default=None, help="S values (default: the config's)")
    parser.add_argument(
        "--noise_scale",
        type=config_number("noise_scale"),
        default=None,
        help="tau, x_0 = tau e (default: the model config's)",
    )
    parser.add_argument("--seed", type=int, default=0, help="sampling seed (per clip, as evaluate.py)")
    parser.add_argument("--device", default=None, help="e.g. cuda (default: cpu)")
    parser.add_argument("--output_dir", required=True, help="where sample_motion.md/.json go")
    args = parser.parse_args(argv)
    for name in ("window_frames", "max_clips", "num_samples"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name} must be >= 1, got {value}")
    if args.num_steps is not None and min(args.num_steps) < 1:
        parser.error(f"--num_steps must each be >= 1, got {args.num_steps}")
    return args


def motion_row(model, examples: list[dict], processor, args: argparse.Namespace, num_steps: int | None) -> dict:
    """:func:`sample_motion` of the K samples at one S, with the ratios to the recorded gaze's median step."""
    settings = SamplingSettings.resolve(model.config, num_samples=args.num_samples, num_steps=num_steps)
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
    width, height = int(examples[0]["width"]), int(examples[0]["height"])
    if any((int(e["width"]), int(e["height"])) != (width, height) for e in examples):
        raise ValueError(f"--split {args.split}: the clips differ in frame size; pixels would not pool")
    motion = sample_motion(
        predictions,
        [np.asarray(e["gaze"]) for e in examples],
        [np.asarray(e["valid"]) for e in examples],
        width,
        height,
    )
    human = motion["human_step_px"]
    return {
        "num_steps": settings.num_steps,
        "num_samples": settings.num_samples,
        "noise_scale": model.config.noise_scale,
        **motion,
        **large_saccade_report(examples, predictions, DEFAULT_HORIZONTAL_FOV_DEG),
        "sample_ratio": motion["sample_step_px"] / human if human > 0 else float("nan"),
        "mean_ratio": motion["mean_step_px"] / human if human > 0 else float("nan"),
    }


def motion_markdown(rows: list[dict], title: str) -> str:
    header = "| " + " | ".join(name for name, _, _ in COLUMNS) + " |"
    rule = "| " + " | ".join("---:" for _ in COLUMNS) + " |"
    body = ["| " + " | ".join(fmt.format(row[key]) for _, key, fmt in COLUMNS) + " |" for row in rows]
    human = (
        f"(recorded gaze: median step {rows[0]['human_step_px']:.3f} px, {rows[0]['recorded_per_100_frames']:.2f} "
        f"saccades >= {LARGE_SACCADE_DEG:g} deg per 100 frames, {rows[0]['measured']:.0f} of them measured with "
        f"{FOLLOW_MARGIN_FRAMES} frames on each side)"
    )
    return "\n".join([f"## {title}", "", header, rule, *body, "", human, ""])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    model, processor = model_from_arguments(args)
    examples = windows_from_arguments(args, "--split", args.split, args.window_frames, args.max_clips)
    model.set_attn_implementation("sdpa")  # sampling needs no weights
    if args.noise_scale is not None:  # checked by parse_args (config_number)
        model.config.noise_scale = args.noise_scale
    rows = [motion_row(model, examples, processor, args, s) for s in (args.num_steps or [None])]
    name = args.model_name_or_path or "bundled default"
    report = motion_markdown(
        rows, f"Sample motion: {name} on {args.dataset_name} / {args.split}, {len(examples)} clips"
    )
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "sample_motion.md").write_text(report)
    (out / "sample_motion.json").write_text(json.dumps(rows, indent=2) + "\n")
    print(report)
    print(f"wrote {out / 'sample_motion.md'} and {out / 'sample_motion.json'}")
    return 0


if __name__ == "__main__":
    run_script(main, PROG)
