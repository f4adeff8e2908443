#!/usr/bin/env python
"""The velocity network's attention heads (paper Section 4.6, Appendix A): temporal roles of the gaze
self-attention heads and hand / active-object attribution of the visual cross-attention heads.

    python examples/attention_analysis.py --dataset_name synthetic --data_dir data/synthetic_small \
        --dataset_config small --group_by action --output_dir runs/analysis/attention     # the bundled model
    python examples/attention_analysis.py --model_name_or_path runs/egtea --dataset_name egtea --data_dir /data/egtea \
        --mask_dir /data/egtea_masks --output_dir runs/egtea/attention

Each test clip's first window is run through the frozen model at flow time s (default 0.5, as the paper) on the
interpolant between K noise draws and the recorded gaze (``analysis.capture.clip_attentions``).

* Roles (``analysis.attention``): every (layer, head)'s frame-to-frame pattern, resized to clip-relative positions,
  averaged over clips, collapsed to attention vs offset and classified look-back / look-ahead / split / local /
  diffuse by a documented rule (thresholds overridable with --role_rule). Writes ``roles.md``, ``roles.json``,
  ``self_attn_grid.png`` and ``self_attn_offset.png``.
* Attribution (``analysis.attribution``): the share of each visual cross-attention head's mass on the hand, on the
  active object and elsewhere, normalised per (clip, layer, head), averaged over clips; and per label group
  (--group_by). Masks: the synthetic dataset's exact masks (default for --dataset_name synthetic), or --mask_dir in
  one of the layouts of ``analysis.masks`` (``<CLIP>.npz``, ``<CLIP>/<frame>.npz`` or
  ``<CLIP>/<region>/<frame>.png``). Uniform attention (each region's share of the token area) is the reference.
  Writes ``attribution.md``, ``attribution.json``, ``attribution_scatter.png``
  and ``attribution_by_group.png``.

``report.md`` gathers both tables.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from transformers_gazeflow.analysis.attention import (
    HeadRoles,
    SelfAttentionPatterns,
    role_rule_from_mapping,
    roles_json,
)
from transformers_gazeflow.analysis.attribution import (
    REGIONS,
    RegionAttribution,
    region_attention_mass,
    tubelet_region_tokens,
)
from transformers_gazeflow.analysis.capture import (
    add_model_and_dataset_arguments,
    clip_attentions,
    model_from_arguments,
    windows_from_arguments,
)
from transformers_gazeflow.analysis.figures import (
    attribution_scatter_figure,
    group_breakdown_figure,
    self_attention_grid_figure,
    self_attention_offset_figure,
)
from transformers_gazeflow.analysis.masks import MaskFolderSource, MaskNotFoundError, SyntheticMaskSource
from transformers_gazeflow.training.script_errors import run_script

PROG = "attention_analysis.py"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Roles of the gaze self-attention heads and hand/object "
        "attribution of the visual cross-attention heads.",
    )
    add_model_and_dataset_arguments(parser)
    parser.add_argument("--split", default="test", help="the clips analysed")
    parser.add_argument("--max_clips", type=int, default=None, help="analyse at most N clips (quick checks)")
    parser.add_argument("--flow_time", type=float, default=0.5, help="the flow time s in [0, 1] the network is run at")
    parser.add_argument("--num_samples", type=int, default=4, help="K noise draws per clip (their weights averaged)")
    parser.add_argument(
        "--grid",
        type=int,
        default=None,
        help="cells per axis of the clip-relative pattern (default: the model's window)",
    )
    parser.add_argument(
        "--role_rule",
        default="",
        help="overrides of the role rule, e.g. 'directional_share=0.7,local_radius=2' (fields of "
        "analysis.attention.RoleRule)",
    )
    parser.add_argument(
        "--mask_dir",
        default=None,
        help="hand/object masks of every clip (layouts in analysis.masks); default for synthetic data: its exact masks",
    )
    parser.add_argument("--hand_region", default="hand", help="the hand masks' name in --mask_dir")
    parser.add_argument("--object_region", default="object", help="the active object masks' name in --mask_dir")
    parser.add_argument("--no_attribution", action="store_true", help="only the self-attention roles")
    parser.add_argument(
        "--group_by",
        default="verb",
        choices=["action", "verb", "noun"],
        help="the label the per-group breakdown is split by (synthetic data has only action)",
    )
    parser.add_argument("--top_groups", type=int, default=6, help="the most frequent groups drawn in the breakdown")
    parser.add_argument("--seed", type=int, default=0, help="seed of the noise draws")
    parser.add_argument("--device", default=None, help="e.g. cuda (default: cpu)")
    parser.add_argument("--output_dir", required=True, help="where the tables and figures go")
    args = parser.parse_args(argv)
    if not 0.0 <= args.flow_time <= 1.0:
        parser.error(f"--flow_time must be in [0, 1], got {args.flow_time}")
    for name in ("max_clips", "num_samples", "top_groups"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name} must be >= 1, got {value}")
    if args.grid is not None and args.grid < 2:
        parser.error(f"--grid must be >= 2 (cells per axis), got {args.grid}")
    try:
        pairs = [item.split("=", 1) for item in args.role_rule.split(",") if item.strip()]
        if any(len(pair) != 2 for pair in pairs):
            raise ValueError("expected key=value pairs separated by commas")
        args.rule = role_rule_from_mapping({key.strip(): float(value) for key, value in pairs})
    except ValueError as err:
        parser.error(f"--role_rule {args.role_rule!r}: {err}")
    return args


def mask_source(args: argparse.Namespace):
    """The attribution's masks (module docstring), or None when there are none."""
    if args.no_attribution:
        return None
    if args.mask_dir:
        try:
            return MaskFolderSource(args.mask_dir, args.hand_region, args.object_region)
        except FileNotFoundError as err:
            raise ValueError(f"--mask_dir {args.mask_dir}: {err}") from err
    if args.dataset_name in ("synthetic", "synthetic_gaze"):
        if not args.data_dir:
            raise ValueError(
                "--data_dir: the synthetic masks are re-drawn from the dataset folder; give --data_dir "
                "(or --no_attribution)"
            )
        return SyntheticMaskSource(args.data_dir)
    print(f"{PROG}: no --mask_dir for {args.dataset_name}: the attribution is skipped", file=sys.stderr)
    return None


def group_names(source, group_by: str) -> list[str] | None:
    if isinstance(source, SyntheticMaskSource) and group_by == "action":
        from transformers_gazeflow.data.synthetic import task_names

        return task_names(source.settings.num_tasks)
    return None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    model, processor, examples = load_model_and_clips(args)
    source = mask_source(args)
    patterns, attribution, area = capture_clips(args, model, processor, examples, source)
    if patterns.num_clips == 0:
        raise ValueError(f"--split {args.split}: no clip has two frames or more")
    roles = HeadRoles.from_patterns(patterns.mean(), args.rule, patterns.num_clips)
    write_report(args, roles, attribution, area, source)
    return 0


def load_model_and_clips(args: argparse.Namespace) -> tuple:
    """The model (``--model_name_or_path``, the bundled one without it), its processor and the first window of each
    clip of ``--split``; a ``ValueError`` naming the argument when one cannot be loaded."""
    model, processor = model_from_arguments(args)
    window = int(model.config.num_frames)
    examples = windows_from_arguments(args, "--split", args.split, window, args.max_clips)
    return model, processor, examples


def capture_clips(
    args: argparse.Namespace, model, processor, examples: list[dict], source
) -> tuple[SelfAttentionPatterns, RegionAttribution, RegionAttribution]:
    """Each clip's attention at flow time ``--flow_time``: the self-attention patterns, and where masks are at hand
    the visual cross-attention's mass on the hand / active object / background, beside the same shares under
    uniform attention (the regions' area, the reference)."""
    window = int(model.config.num_frames)
    side = int(round(model.config.tokens_per_frame**0.5))
    tubelet = int(model.config.frames_per_encoder_group)
    patterns = SelfAttentionPatterns(args.grid or window)
    attribution = RegionAttribution()
    area = RegionAttribution()  # the reference: uniform attention over the tokens gives the regions' area share
    for index, example in enumerate(examples):
        captured = clip_attentions(model, processor, example, args.flow_time, args.num_samples, args.seed + index)
        n = captured.num_frames
        if n >= 2:  # a one-frame window has no temporal pattern
            patterns.add(captured.self_attention, n)
        if source is None or captured.visual_cross_attention is None:
            continue
        try:
            regions = source.region_tokens(example, (side, side))
        except MaskNotFoundError as err:
            raise ValueError(f"--mask_dir {args.mask_dir or args.data_dir}: {err}") from err
        weights = captured.visual_cross_attention.mean(axis=1)[:, :, :n]  # [L, H, n, N], the K draws averaged
        tokens = tubelet_region_tokens(regions, tubelet)
        group = int(example.get(args.group_by, -1))
        attribution.add(captured.clip_id, region_attention_mass(weights, tokens), group)
        area.add(captured.clip_id, region_attention_mass(np.full((1, 1) + weights.shape[2:], 1.0), tokens), group)
    return patterns, attribution, area


def write_report(
    args: argparse.Namespace, roles: HeadRoles, attribution: RegionAttribution, area: RegionAttribution, source
) -> None:
    """The roles' and the attribution's tables, JSON and figures in ``--output_dir``, and ``report.md`` with both
    tables (printed too)."""
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    name = args.model_name_or_path or "bundled default"
    report = [
        f"## Attention heads: {name} on {args.dataset_name} / {args.split} (flow time s = {args.flow_time}, "
        f"K = {args.num_samples})",
        "",
        "### Gaze self-attention roles",
        "",
        roles.markdown(),
    ]
    (out / "roles.md").write_text(roles.markdown() + "\n")
    (out / "roles.json").write_text(roles_json(roles))
    written = [
        self_attention_grid_figure(roles, out / "self_attn_grid.png"),
        self_attention_offset_figure(roles, out / "self_attn_offset.png"),
    ]
    if attribution.clip_ids:
        lines, figures = write_attribution(args, attribution, area, source, out)
        report += lines
        written += figures
    elif source is not None:
        report += ["", "(the model has no visual cross-attention: no attribution)"]
    (out / "report.md").write_text("\n".join(report) + "\n")
    print("\n".join(report))
    print("wrote " + ", ".join(str(p) for p in [out / "report.md", *written]))


def write_attribution(
    args: argparse.Namespace,
    attribution: RegionAttribution,
    area: RegionAttribution,
    source,
    out: Path,
) -> tuple[list[str], list[Path]]:
    """``attribution.md``, ``attribution.json`` and the figures in ``out``; returns the report's lines on the
    attribution and the figures written."""
    names = group_names(source, args.group_by)
    reference = area.global_mean()
    table = attribution.markdown() + (
        "\n\nUniform attention (each region's share of the token area, the reference a head beats or not): hand "
        f"{100 * reference[0]:.1f}%, object {100 * reference[1]:.1f}%, background {100 * reference[2]:.1f}%."
    )
    report = ["", "### Visual cross-attention: hand / active object / background", "", table]
    (out / "attribution.md").write_text(table + "\n")
    result = {**attribution.to_json(names), "uniform_attention": dict(zip(REGIONS, reference.round(6).tolist()))}
    (out / "attribution.json").write_text(json.dumps(result, indent=2))
    figures = [attribution_scatter_figure(attribution, out / "attribution_scatter.png", reference=reference)]
    if attribution.group_counts():
        figures.append(group_breakdown_figure(attribution, out / "attribution_by_group.png", names, args.top_groups))
    else:
        report += ["", f"(no clip has a {args.group_by} label: no per-group breakdown)"]
    return report, figures


if __name__ == "__main__":
    run_script(main, PROG)
