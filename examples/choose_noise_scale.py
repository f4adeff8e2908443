#!/usr/bin/env python
"""Choose a trained model's sampling temperature tau (config ``noise_scale``: x_0 = tau e) on a validation split, by
the rule of ``training.noise_scale_choice``: the largest tau whose samples' median per-frame step is at most 1.25x the
recorded gaze's and whose saccade share is at most 1.33x the recording's (a share below 0.75x is reported: the two
targets then conflict for the model).

    python examples/choose_noise_scale.py --model_name_or_path runs/my_model --dataset_name synthetic \
        --data_dir data/synthetic_small --dataset_config small --split validation --write

The candidates are tried from the largest down (``--noise_scales``, default 1.0, 0.95, ..., 0.5) and the search stops
at the first that passes; each is sampled as ``examples/evaluate.py`` samples (each clip's protocol window of 64
frames; with ``--window_frames`` at least a clip's length, the whole clip, its windows joined as ``gazeflow predict``
joins them; K and S of the model's config, the same seeds per clip; ``--online`` for a causal model's
frame-by-frame prediction). Prints one row per candidate and writes ``noise_scale.json`` (the rows and the choice) to
``--output_dir``. ``--write`` sets the chosen tau in the model folder's ``config.json`` (nothing else in the folder
changes); the uncertainty regions' factors in ``region_calibration.json`` were fitted at the sampler they were
fitted with, so refit them after:
``examples/evaluate.py --region_split validation --save_region_calibration``.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from transformers_gazeflow.analysis.capture import (
    add_model_and_dataset_arguments,
    config_number,
    model_from_arguments,
    windows_from_arguments,
)
from transformers_gazeflow.data.atomic_files import atomic_write
from transformers_gazeflow.metrics.protocol_records import PROTOCOL_WINDOW
from transformers_gazeflow.models.gazeflow.generation_gazeflow import SamplingSettings
from transformers_gazeflow.training.noise_scale_choice import (
    MAX_SHARE_RATIO,
    MAX_STEP_RATIO,
    NOISE_SCALE_GRID,
    choose_noise_scale,
    measure_dynamics,
)
from transformers_gazeflow.training.script_errors import run_script

PROG = "choose_noise_scale.py"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=PROG, description="Choose a model's sampling temperature tau.")
    add_model_and_dataset_arguments(parser)
    parser.add_argument("--split", default="validation", help="the clips the rule is applied on")
    parser.add_argument("--max_clips", type=int, default=None, help="use at most N clips (quick checks)")
    parser.add_argument(
        "--window_frames",
        type=int,
        default=PROTOCOL_WINDOW,
        help="frames of each clip sampled (the protocol's first 64; at least a clip's length: whole clips, joined "
        "as gazeflow predict joins them)",
    )
    parser.add_argument("--online", action="store_true", help="a causal model's frame-by-frame prediction")
    parser.add_argument(
        "--noise_scales",
        type=config_number("noise_scale"),
        nargs="+",
        default=list(NOISE_SCALE_GRID),
        help="the candidate taus",
    )
    parser.add_argument("--max_step_ratio", type=float, default=MAX_STEP_RATIO)
    parser.add_argument("--max_share_ratio", type=float, default=MAX_SHARE_RATIO, help="of the saccade share")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed (per clip, as evaluate.py)")
    parser.add_argument("--fov_deg", type=float, default=60.0, help="the pinhole the saccades' degrees use")
    parser.add_argument("--device", default=None, help="e.g. cuda (default: cpu)")
    parser.add_argument("--output_dir", required=True, help="where noise_scale.json goes")
    parser.add_argument("--write", action="store_true", help="set the chosen tau in the model folder's config.json")
    args = parser.parse_args(argv)
    for name in ("max_step_ratio", "max_share_ratio"):
        if not 0 < getattr(args, name) < math.inf:
            parser.error(f"--{name} must be a number > 0, got {getattr(args, name)}")
    if args.window_frames < 1:
        parser.error(f"--window_frames must be >= 1, got {args.window_frames}")
    if args.max_clips is not None and args.max_clips < 1:
        parser.error(f"--max_clips must be >= 1, got {args.max_clips}")
    if args.write and (args.model_name_or_path is None or not Path(args.model_name_or_path).is_dir()):
        parser.error("--write needs --model_name_or_path to be a local model folder (the bundled models ship theirs)")
    return args


def search(model, examples: list[dict], processor, args: argparse.Namespace) -> tuple[list[dict], float | None]:
    """The candidates from the largest down, stopping at the first that passes; their rows and the choice."""
    settings = SamplingSettings.resolve(model.config)
    checks = []
    for tau in sorted(set(args.noise_scales), reverse=True):
        check = measure_dynamics(
            model, examples, processor, tau, settings.num_samples, settings.num_steps, settings.solver,
            seed=args.seed, online=args.online, fov_deg=args.fov_deg, window=args.window_frames,
        )  # fmt: skip
        checks.append(check)
        verdict = "passes" if check.passes(args.max_step_ratio, args.max_share_ratio) else "fails"
        few = " (fewer saccades than 0.75x the recording's)" if check.too_few_saccades else ""
        print(
            f"tau {tau:g}: median step {check.median_step_ratio:.2f}x the recording's, saccade share "
            f"{check.saccade_share:.3f} ({check.share_ratio:.2f}x the recording's {check.recorded_saccade_share:.3f})"
            f"{few}, log-bin JSD {check.log_jsd:.3f}: {verdict}",
            flush=True,
        )
        if verdict == "passes":
            break
    return [check.to_dict() for check in checks], choose_noise_scale(checks, args.max_step_ratio, args.max_share_ratio)


def write_noise_scale(folder: Path, tau: float) -> None:
    """Set ``noise_scale`` in ``folder/config.json``, every other key as it was (written whole)."""
    path = folder / "config.json"
    config = json.loads(path.read_text())
    config["noise_scale"] = tau
    atomic_write(path, json.dumps(config, indent=2, sort_keys=True) + "\n")
    print(f"wrote noise_scale {tau:g} to {path}; refit the regions at it: examples/evaluate.py --model_name_or_path "
          f"{folder} ... --region_split validation --save_region_calibration")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    model, processor = model_from_arguments(args)
    examples = windows_from_arguments(args, "--split", args.split, args.window_frames, args.max_clips)
    if args.online and not model.config.causal:
        raise ValueError(f"--online needs a causal model; {args.model_name_or_path or 'the bundled model'} is windowed")
    rows, chosen = search(model, examples, processor, args)
    record = {
        "model": args.model_name_or_path or "bundled default",
        "split": f"{args.dataset_name} / {args.split}" + (f" ({args.dataset_options})" if args.dataset_options else ""),
        "clips": len(examples),
        "window_frames": args.window_frames,
        "online": args.online,
        "rule": {"max_step_ratio": args.max_step_ratio, "max_share_ratio": args.max_share_ratio},
        "rows": rows,
        "chosen": chosen,
    }
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "noise_scale.json", json.dumps(record, indent=2) + "\n")
    if chosen is None:
        print(f"no candidate passes; the model's noise_scale stays {model.config.noise_scale:g}")
    else:
        print(f"chosen: noise_scale {chosen:g}")
        if args.write:
            write_noise_scale(Path(args.model_name_or_path), chosen)
    print(f"wrote {out / 'noise_scale.json'}")
    return 0


if __name__ == "__main__":
    run_script(main, PROG)
