#!/usr/bin/env python
"""Linear probes of GazeFlow's task-token bank (paper Section 4.3, Table probing): does c_task = [p; q_1..q_M]
carry the task?

    python examples/probe.py --dataset_name synthetic --data_dir data/synthetic_small --dataset_config small \
        --output_dir runs/analysis/probe                      # the bundled default model
    python examples/probe.py --model_name_or_path runs/egtea --dataset_name egtea --data_dir /data/egtea \
        --validation_split none --output_dir runs/egtea/probe

The model is frozen; each clip's first window gives one bank (``analysis.capture.clip_task_banks``). For each label
head (``action``, ``verb``, ``noun``; -1 = absent) a logistic-regression probe per input (q alone, p alone, both) is
fitted on the training clips, its weight decay chosen on the validation clips, and scored on the test clips
(``analysis.probing``). A control row probes the frozen video encoder's own tokens, mean-pooled: what the bank
carries beyond it is what the condition encoder adds. Writes ``probe.md`` (the paper's layout, with the union,
control and chance rows), ``probe.json`` and ``probe.png`` to ``--output_dir``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from transformers_gazeflow.analysis.capture import (
    add_model_and_dataset_arguments,
    clip_encoder_features,
    clip_task_banks,
    model_from_arguments,
    windows_from_arguments,
)
from transformers_gazeflow.analysis.figures import probe_figure
from transformers_gazeflow.analysis.probing import (
    DEFAULT_WEIGHT_DECAYS,
    LABEL_HEADS,
    probe_table,
    probe_table_json,
    probe_table_markdown,
)
from transformers_gazeflow.training.script_errors import run_script

PROG = "probe.py"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=PROG, description="Linear probes of a frozen GazeFlow's task-token bank.")
    add_model_and_dataset_arguments(parser)
    parser.add_argument("--train_split", default="train", help="the clips the probes are fitted on")
    parser.add_argument(
        "--validation_split",
        default="validation",
        help="the clips the weight decay is chosen on; 'none': hold out --validation_fraction of "
        "the training clips instead (datasets without a validation split)",
    )
    parser.add_argument(
        "--validation_fraction",
        type=float,
        default=0.2,
        help="with --validation_split none: the share of training clips held out (seeded by --seed)",
    )
    parser.add_argument("--test_split", default="test", help="the held-out clips the table reports")
    parser.add_argument(
        "--heads", nargs="+", default=list(LABEL_HEADS), choices=LABEL_HEADS, help="the label heads to probe"
    )
    parser.add_argument(
        "--weight_decays",
        type=float,
        nargs="+",
        default=list(DEFAULT_WEIGHT_DECAYS),
        help="the L2 weights tried on the validation clips",
    )
    parser.add_argument(
        "--no_encoder_control",
        action="store_true",
        help="leave out the control row (a probe on the video encoder's own mean-pooled tokens, "
        "which tells what the bank adds over the frames' features)",
    )
    parser.add_argument("--max_clips", type=int, default=None, help="use at most N clips per split (quick checks)")
    parser.add_argument("--batch_size", type=int, default=8, help="clips encoded together")
    parser.add_argument("--seed", type=int, default=0, help="seed of the held-out validation clips")
    parser.add_argument("--device", default=None, help="e.g. cuda (default: cpu)")
    parser.add_argument("--output_dir", required=True, help="where probe.md, probe.json and probe.png go")
    args = parser.parse_args(argv)
    if args.max_clips is not None and args.max_clips < 1:
        parser.error(f"--max_clips must be >= 1, got {args.max_clips}")
    if args.batch_size < 1:
        parser.error(f"--batch_size must be >= 1, got {args.batch_size}")
    if not 0 < args.validation_fraction < 1:
        parser.error(f"--validation_fraction must be in (0, 1), got {args.validation_fraction}")
    if any(d < 0 for d in args.weight_decays):
        parser.error(f"--weight_decays must be >= 0, got {args.weight_decays}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    model, processor = model_from_arguments(args)
    window = int(model.config.num_frames)
    splits = {
        "train": windows_from_arguments(args, "--train_split", args.train_split, window, args.max_clips),
        "test": windows_from_arguments(args, "--test_split", args.test_split, window, args.max_clips),
    }
    if args.validation_split.lower() != "none":
        splits["validation"] = windows_from_arguments(
            args, "--validation_split", args.validation_split, window, args.max_clips
        )
    held_out = None
    if args.validation_split.lower() == "none":
        order = np.random.default_rng(args.seed).permutation(len(splits["train"]))
        held = max(1, int(round(args.validation_fraction * len(order))))
        if held >= len(order):
            raise ValueError(
                f"--train_split {args.train_split} has {len(order)} clips: too few to hold out "
                "validation clips (give --validation_split)"
            )
        held_out = (np.sort(order[:held]), np.sort(order[held:]))

    def probe(extract) -> dict:
        """The probe table of one feature extractor over the three splits."""
        banks = {name: extract(model, processor, examples, args.batch_size) for name, examples in splits.items()}
        if held_out is not None:
            banks["validation"], banks["train"] = banks["train"].subset(held_out[0]), banks["train"].subset(held_out[1])
        return probe_table(
            banks["train"], banks["validation"], banks["test"], heads=args.heads, weight_decays=args.weight_decays
        )

    table = probe(clip_task_banks)
    if not args.no_encoder_control:
        control = probe(clip_encoder_features)
        for head, result in table["heads"].items():
            if result is not None:
                result["rows"]["encoder"] = control["heads"][head]["rows"]["p"]
    if all(result is None for result in table["heads"].values()):
        raise ValueError(
            f"--heads {' '.join(args.heads)}: no clip of some split is labelled for any of them (labels -1 = absent)"
        )
    table["model"] = args.model_name_or_path or "bundled default"
    table["dataset"] = {
        "name": args.dataset_name,
        "config": args.dataset_config,
        "train": args.train_split,
        "validation": args.validation_split,
        "test": args.test_split,
    }
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    labelled = {head: result for head, result in table["heads"].items() if result}
    markdown = probe_table_markdown({**table, "heads": labelled})
    unlabelled = sorted(set(table["heads"]) - set(labelled))
    if unlabelled:
        markdown += f"\n\n(no labels for {', '.join(unlabelled)} in some split: not probed)"
    report = (
        f"## Task-token bank probe: {table['model']} on {args.dataset_name} / {args.test_split}\n\n{markdown}\n\n"
        f"Top-k in percent on held-out clips; M = {table['num_queries']} learnable queries; clips per split "
        + ", ".join(f"{head}: {json.dumps(result['clips'])}" for head, result in table["heads"].items() if result)
        + ".\n"
    )
    (out / "probe.md").write_text(report)
    (out / "probe.json").write_text(probe_table_json(table))
    probe_figure(table, out / "probe.png")
    print(report)
    print(f"wrote {out / 'probe.md'}, {out / 'probe.json'} and {out / 'probe.png'}")
    return 0


if __name__ == "__main__":
    run_script(main, PROG)
