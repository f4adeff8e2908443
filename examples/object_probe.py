#!/usr/bin/env python
"""Can a frozen GazeFlow's token grid tell a task family's objects apart by what the cue names? (the recipe panel's
anatomy: ``analysis.object_views``)

    python examples/object_probe.py --family shape_cue --model_name_or_path runs/panel/runs/shape_cue/seed0 \
        --attribute shape --encoders 64x4 128x8 --output_dir runs/anatomy/shape_cue

Clips of the family are drawn afresh (``--data_seed``, not the panel's draw) and each clip's first window is read by
the run's encoder and condition encoder. For every frame group and object, the 3 x 3 token cells around the object
(``--radius``) are one view labelled by the object's ``--attribute``; linear probes fitted on the first clips' views
are scored on the last quarter's. Rows: the run's encoder tokens, its c_v, two pixel controls of the processed frames
(the same cells' pixels; an object-centred crop of the same size) and, with ``--encoders CROPxPATCH``, fresh random
encoders of the run's encoder config at another input size or patch (torch seed ``--seed``). Writes
``object_probe.md`` and ``object_probe.json`` to ``--output_dir``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import numpy as np
import torch

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
from transformers_gazeflow.analysis.capture import model_from_arguments
from transformers_gazeflow.analysis.object_views import (
    ObjectViews,
    cell_crop,
    pixel_crop,
    probe_object_views,
    token_cell,
    token_neighbourhood,
)
from transformers_gazeflow.data.processing import GazeFlowVideoProcessor
from transformers_gazeflow.data.synthetic_tasks_panel import PANEL_NAMES, panel_family
from transformers_gazeflow.models.gazeflow.modeling_gazeflow_checks import check_encoder_hidden_states
from transformers_gazeflow.training.script_errors import run_script

PROG = "object_probe.py"
ATTRIBUTES = ("shape", "color")


def encoder_size(text: str) -> tuple[int, int]:
    """``CROPxPATCH`` (e.g. ``64x4``) as two positive ints, the crop a multiple of the patch."""
    parts = text.lower().split("x")
    if len(parts) != 2 or not all(part.isdigit() and int(part) > 0 for part in parts):
        raise argparse.ArgumentTypeError(
            f"expected CROPxPATCH with two positive whole numbers, e.g. 64x4; got {text!r}"
        )
    crop, patch = int(parts[0]), int(parts[1])
    if crop % patch:
        raise argparse.ArgumentTypeError(f"{text}: the crop must be a multiple of the patch")
    return crop, patch


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=PROG, description="Linear probes of the objects' looks in a token grid.")
    parser.add_argument("--family", required=True, choices=PANEL_NAMES, help="the recipe panel's task family")
    parser.add_argument("--model_name_or_path", required=True, help="a windowed GazeFlow run trained on that family")
    parser.add_argument("--attribute", default="shape", choices=ATTRIBUTES, help="what labels each object")
    parser.add_argument("--num_clips", type=int, default=200, help="clips drawn (the last quarter are the test)")
    parser.add_argument("--data_seed", type=int, default=1, help="the draw of the clips (the panel's is 7)")
    parser.add_argument("--radius", type=int, default=1, help="a view is the (2r + 1)^2 cells around the object")
    parser.add_argument(
        "--encoders", type=encoder_size, nargs="*", default=[], help="fresh random encoders, each CROPxPATCH"
    )
    parser.add_argument("--seed", type=int, default=0, help="torch seed of each fresh encoder's draw")
    parser.add_argument("--device", default=None, help="e.g. cuda (default: cpu)")
    parser.add_argument("--output_dir", required=True, help="where object_probe.md and object_probe.json go")
    args = parser.parse_args(argv)
    if args.num_clips < 8:
        parser.error(f"--num_clips must be >= 8 (a train, validation and test split by clip), got {args.num_clips}")
    if args.radius < 0:
        parser.error(f"--radius must be >= 0, got {args.radius}")
    return args


class ViewCollector:
    """Per-object views of one input, gathered clip by clip."""

    def __init__(self) -> None:
        self.features: list[np.ndarray] = []
        self.labels: list[int] = []
        self.clips: list[int] = []

    def add(self, feature: np.ndarray, label: int, clip: int) -> None:
        self.features.append(feature)
        self.labels.append(label)
        self.clips.append(clip)

    def views(self) -> ObjectViews:
        return ObjectViews.stack(self.features, self.labels, self.clips)


def token_grids(model, pixels: torch.Tensor, condition: bool) -> np.ndarray:
    """``[G, rows, cols, D]``: the encoder's tokens of one window ``[T, 3, S, S]`` or, with ``condition``, c_v."""
    with torch.no_grad():
        tokens = model.encode_video(pixels[None].to(model.device))
        if condition:
            grid = model.build_condition(tokens, pixels.shape[0]).visual_tokens[0]
        else:
            grid = check_encoder_hidden_states(tokens, pixels.shape[0], model.config)[0]
    side = int(round(grid.shape[1] ** 0.5))
    return grid.reshape(grid.shape[0], side, side, -1).float().cpu().numpy()


def fresh_encoder_model(model, crop: int, patch: int, seed: int) -> GazeFlowModel:
    """A GazeFlow of ``model``'s config with its encoder's input size and patch changed, freshly drawn."""
    config = model.config.to_dict()
    config["encoder_config"] = {**config["encoder_config"], "crop_size": crop, "patch_size": patch}
    torch.manual_seed(seed)
    return GazeFlowModel(GazeFlowConfig.from_dict(config)).eval().to(model.device)


def collect(args: argparse.Namespace, model, processor) -> tuple[dict[str, ObjectViews], list]:
    """Every row's views over ``--num_clips`` fresh clips of the family, and the attribute's classes."""
    if model.config.causal:
        raise ValueError(f"--model_name_or_path {args.model_name_or_path}: a windowed model expected, not a causal one")
    settings = dataclasses.replace(panel_family(args.family).settings, seed=args.data_seed)
    clips = [settings.generate_clip(i) for i in range(args.num_clips)]
    classes = sorted({getattr(obj, args.attribute) for clip in clips for obj in clip.objects})
    if len(classes) < 2:
        raise ValueError(
            f"--attribute {args.attribute}: every object of {args.family} has the same one; nothing to probe"
        )
    window = int(model.config.num_frames)
    encoder = model.config.encoder_config
    fresh = {
        f"fresh random encoder {c}x{p}": (
            fresh_encoder_model(model, c, p, args.seed),
            GazeFlowVideoProcessor(c, processor.image_mean, processor.image_std),
        )
        for c, p in args.encoders
    }
    half = (2 * args.radius + 1) * encoder.patch_size // 2  # the object-centred crop: as wide as a view's cells
    rows = ["encoder", "c_v", "cell pixels", "object-centred pixels", *fresh]
    collectors = {row: ViewCollector() for row in rows}
    for index, clip in enumerate(clips):
        video = np.stack([clip.frame(t) for t in range(min(window, clip.num_frames))])
        pixels = processor.preprocess(video)
        grids = {"encoder": token_grids(model, pixels, False), "c_v": token_grids(model, pixels, True)}
        for row, (fresh_model, fresh_processor) in fresh.items():
            grids[row] = token_grids(fresh_model, fresh_processor.preprocess(video), False)
        frames_per_group = len(video) // grids["encoder"].shape[0]
        for group in range(grids["encoder"].shape[0]):
            frame = pixels[group * frames_per_group].numpy()
            for obj in clip.objects:
                x, y = obj.track[group * frames_per_group]
                label = classes.index(getattr(obj, args.attribute))
                for row, grid in grids.items():
                    cell = token_cell(x, y, grid.shape[1], grid.shape[2])
                    collectors[row].add(token_neighbourhood(grid[group], *cell, args.radius), label, index)
                row, col = token_cell(x, y, *grids["encoder"].shape[1:3])
                collectors["cell pixels"].add(cell_crop(frame, row, col, encoder.patch_size, args.radius), label, index)
                collectors["object-centred pixels"].add(pixel_crop(frame, x, y, half), label, index)
    return {row: collector.views() for row, collector in collectors.items()}, classes


def report_markdown(args: argparse.Namespace, results: dict, classes: list, crop: int, patch: int) -> str:
    side, size = 2 * args.radius + 1, (2 * args.radius + 1) * patch
    names = {
        "encoder": f"the run's encoder tokens ({crop}x{patch}), {side}x{side} cells",
        "c_v": f"the run's c_v, {side}x{side} cells",
        "cell pixels": f"pixels of the same cells ({size}x{size}, at the grid's offsets)",
        "object-centred pixels": f"pixels centred on the object ({size}x{size})",
    }
    lines = [
        f"## Object views: {args.family}, attribute {args.attribute} ({len(classes)} classes), "
        f"{args.model_name_or_path}",
        "",
        "| input | test accuracy | chance | views (train / validation / test) |",
        "| --- | ---: | ---: | --- |",
    ]
    for row, result in results.items():
        name = names.get(row, f"{row}, {side}x{side} cells")
        counts = f"{result['train_views']} / {result['validation_views']} / {result['test_views']}"
        lines.append(f"| {name} | {100 * result['accuracy']:.1f} | {100 * result['chance']:.1f} | {counts} |")
    lines += ["", f"Clips: {args.num_clips} drawn with data seed {args.data_seed}; split by clip."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    model, processor = model_from_arguments(args)
    views, classes = collect(args, model, processor)
    results = {row: probe_object_views(row_views, len(classes)) for row, row_views in views.items()}
    encoder = model.config.encoder_config
    report = report_markdown(args, results, classes, encoder.crop_size, encoder.patch_size)
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "object_probe.md").write_text(report)
    payload = {"arguments": dict(vars(args)), "classes": [str(c) for c in classes], "rows": results}
    (out / "object_probe.json").write_text(json.dumps(payload, indent=1, default=str) + "\n")
    print(report)
    print(f"wrote {out / 'object_probe.md'} and {out / 'object_probe.json'}")
    return 0


if __name__ == "__main__":
    run_script(main, PROG)
