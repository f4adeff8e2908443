"""The analyses' figures (PNG, matplotlib; ``pip install "transformers-gazeflow[analysis]"``), after the paper's:

* :func:`self_attention_grid_figure` - Figure self_attn_grid: every (layer, head)'s relative pattern, query frame
  down, source frame across, the dashed diagonal ``source = query``, each cell framed in its role's colour;
* :func:`self_attention_offset_figure` - Figure self_attn_offset: the attention-vs-offset curves, one panel per
  layer, coloured by role, a dashed line at zero offset;
* :func:`attribution_scatter_figure` - Figure head_semantic_taxonomy: hand vs object mass per head, error bars the
  clip-wise standard deviation, colour by layer, dotted global means;
* :func:`group_breakdown_figure` - Figure per_verb_breakdown: per label group, the hand / object / background mass
  of each layer (mean over heads and clips) as stacked bars;
* :func:`failure_cases_figure` - Figure failure_cases: rows of evenly spaced frames with the K samples and the
  recorded gaze drawn by :mod:`transformers_gazeflow.outputs.overlay`.

Figures are drawn on :class:`matplotlib.figure.Figure` objects (no pyplot state, no display needed).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..outputs.overlay import draw_gaze, draw_ground_truth
from .attention import ROLE_COLOURS, ROLES, HeadRoles, offset_shares, offsets
from .attribution import REGIONS, RegionAttribution

REGION_COLOURS = {"hand": "#e6862e", "object": "#2a9d8f", "background": "#bdbdbd"}


def _figure(width: float, height: float):
    try:
        from matplotlib.figure import Figure
    except ImportError as err:
        raise ImportError(
            "the analysis figures need matplotlib: pip install 'transformers-gazeflow[analysis]' "
            "(or pip install matplotlib)"
        ) from err
    return Figure(figsize=(width, height), layout="constrained")


def _save(figure, path: str | os.PathLike, dpi: int) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=dpi, facecolor="white")
    return path


def _role_handles():
    from matplotlib.patches import Patch

    return [Patch(facecolor="white", edgecolor=ROLE_COLOURS[role], linewidth=2.5, label=role) for role in ROLES]


def self_attention_grid_figure(roles: HeadRoles, path: str | os.PathLike, dpi: int = 110) -> Path:
    """Figure self_attn_grid: a ``layers x heads`` grid of relative attention patterns framed by role."""
    layers, heads = roles.patterns.shape[:2]
    figure = _figure(1.9 * heads + 0.6, 1.9 * layers + 0.9)
    axes = np.atleast_2d(figure.subplots(layers, heads, squeeze=False))
    for layer in range(layers):
        for head in range(heads):
            ax = axes[layer, head]
            pattern = roles.patterns[layer, head]
            ax.imshow(
                pattern,
                cmap="magma",
                extent=(0, 1, 1, 0),
                vmin=0,
                vmax=float(pattern.max()) or 1.0,
                interpolation="nearest",
            )
            ax.plot([0, 1], [0, 1], linestyle="--", color="white", linewidth=0.9)
            role = roles.roles[layer][head]
            for spine in ax.spines.values():
                spine.set_edgecolor(ROLE_COLOURS[role])
                spine.set_linewidth(3)
            ax.set_title(f"L{layer} H{head}: {role}", fontsize=8, color=ROLE_COLOURS[role])
            ax.set_xticks([0, 0.5, 1])
            ax.set_yticks([0, 0.5, 1])
            ax.tick_params(labelsize=6)
            if layer == layers - 1:
                ax.set_xlabel("source frame (clip-relative)", fontsize=7)
            if head == 0:
                ax.set_ylabel("query frame (clip-relative)", fontsize=7)
    figure.suptitle(
        f"Gaze self-attention per (layer, head), mean over {roles.num_clips} clips; below the dashed "
        "diagonal: past, above: future",
        fontsize=9,
    )
    figure.legend(handles=_role_handles(), loc="outside lower center", ncol=len(ROLES), fontsize=8, frameon=False)
    return _save(figure, path, dpi)


def self_attention_offset_figure(roles: HeadRoles, path: str | os.PathLike, dpi: int = 110) -> Path:
    """Figure self_attn_offset: per layer, every head's attention share vs offset (source - query)."""
    from matplotlib.lines import Line2D

    layers, heads = roles.curves.shape[:2]
    grid = roles.patterns.shape[-1]
    x = offsets(grid)
    figure = _figure(min(4.0 * layers, 16), 3.4)
    axes = figure.subplots(1, layers, squeeze=False, sharey=True)[0]
    styles = ["-", "--", ":", "-."]
    for layer, ax in enumerate(axes):
        for head in range(heads):
            role = roles.roles[layer][head]
            ax.plot(
                x,
                offset_shares(roles.curves[layer, head]),
                color=ROLE_COLOURS[role],
                linestyle=styles[head % len(styles)],
                linewidth=1.4,
                label=f"H{head}",
            )
        ax.axvline(0, color="black", linestyle="--", linewidth=0.8)
        ax.set_title(f"layer {layer}", fontsize=9)
        ax.set_xlabel(f"offset source − query (cells of a {grid}-cell clip)", fontsize=8)
        ax.tick_params(labelsize=7)
    axes[0].set_ylabel("share of attention", fontsize=8)
    head_handles = [
        Line2D([], [], color="black", linestyle=styles[h % len(styles)], label=f"head {h}") for h in range(heads)
    ]
    figure.legend(handles=_role_handles() + head_handles, loc="outside right center", fontsize=7, frameon=False)
    figure.suptitle(f"Attention vs temporal offset (negative: past), mean over {roles.num_clips} clips", fontsize=9)
    return _save(figure, path, dpi)


def attribution_scatter_figure(
    attribution: RegionAttribution, path: str | os.PathLike, dpi: int = 110, reference: Sequence[float] | None = None
) -> Path:
    """Figure head_semantic_taxonomy: hand (x) vs object (y) mass of every (layer, head), in percent; with
    ``reference`` (hand, object, background shares, e.g. of uniform attention: the regions' area) a black star."""
    mean, std = 100 * attribution.mean(), 100 * attribution.std()
    overall = 100 * attribution.global_mean()
    layers, heads = mean.shape[:2]
    figure = _figure(5.6, 4.6)
    ax = figure.subplots()
    colours = _layer_colours(layers)
    for layer in range(layers):
        ax.errorbar(
            mean[layer, :, 0],
            mean[layer, :, 1],
            xerr=std[layer, :, 0],
            yerr=std[layer, :, 1],
            fmt="o",
            color=colours[layer],
            ecolor=colours[layer],
            elinewidth=0.8,
            capsize=2,
            markersize=5,
            alpha=0.9,
            label=f"layer {layer}",
        )
        for head in range(heads):
            ax.annotate(
                f"H{head}",
                (mean[layer, head, 0], mean[layer, head, 1]),
                fontsize=6,
                xytext=(3, 3),
                textcoords="offset points",
                color=colours[layer],
            )
    ax.axvline(overall[0], color="grey", linestyle=":", linewidth=1)
    ax.axhline(overall[1], color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel(f"attention mass on the hand (%)  [mean {overall[0]:.1f}%, dotted]", fontsize=8)
    ax.set_ylabel(f"attention mass on the active object (%)  [mean {overall[1]:.1f}%, dotted]", fontsize=8)
    if reference is not None:
        ax.plot(
            100 * reference[0],
            100 * reference[1],
            marker="*",
            markersize=12,
            color="black",
            linestyle="none",
            label="uniform attention (area share)",
        )
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7, title="visual cross-attention", title_fontsize=7)
    ax.set_title(
        f"Hand vs active-object attention per (layer, head), {len(attribution.clip_ids)} clips; bars: clip-wise s.d.",
        fontsize=8,
    )
    return _save(figure, path, dpi)


PROBE_COLOURS = {
    "q": "#1f5fbf",
    "p": "#2a9d8f",
    "pq": "#8e44ad",
    "union": "#e6862e",
    "encoder": "#5d4037",
    "chance": "#9e9e9e",
}


def probe_figure(table: dict, path: str | os.PathLike, dpi: int = 110) -> Path:
    """The probe table as bars: top-1 accuracy (%) of every probe input per label head, the chance row in grey."""
    from .probing import ROW_LABELS, ROW_ORDER

    heads = {head: result for head, result in table["heads"].items() if result}
    if not heads:
        raise ValueError("the probe table has no head with labels: nothing to draw")
    rows = [row for row in ROW_ORDER if any(row in result["rows"] for result in heads.values())]
    figure = _figure(3.2 + 1.8 * len(heads), 3.2)
    ax = figure.subplots()
    width = 0.8 / len(rows)
    for r, row in enumerate(rows):
        values = [100 * (result["rows"].get(row, {}).get("top1") or 0.0) for result in heads.values()]
        bars = ax.bar(
            np.arange(len(heads)) + (r - (len(rows) - 1) / 2) * width,
            values,
            width,
            color=PROBE_COLOURS[row],
            label=ROW_LABELS[row],
        )
        ax.bar_label(bars, fmt="%.0f", fontsize=6, padding=1)
    ax.set_xticks(
        np.arange(len(heads)),
        [
            f"{head} ({result['num_classes']} classes, {result['clips']['test']} test clips)"
            for head, result in heads.items()
        ],
        fontsize=7,
    )
    ax.set_ylabel("top-1 accuracy on held-out clips (%)", fontsize=8)
    ax.set_ylim(0, 105)
    handles, labels = ax.get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside right upper", fontsize=6)
    ax.set_title("Linear probes of the task-token bank", fontsize=9)
    return _save(figure, path, dpi)


def _layer_colours(layers: int) -> list:
    from matplotlib import colormaps

    cmap = colormaps["viridis"]
    return [cmap(i / max(layers - 1, 1) * 0.9) for i in range(layers)]


def group_breakdown_figure(
    attribution: RegionAttribution,
    path: str | os.PathLike,
    group_names: Sequence[str] | None = None,
    top: int = 6,
    dpi: int = 110,
) -> Path:
    """Figure per_verb_breakdown: for the ``top`` most frequent label groups, stacked region mass per layer."""
    groups = attribution.by_group(top=top)
    if not groups:
        raise ValueError("no clip has a group label (verb/action/noun): the per-group breakdown needs labels")
    counts = attribution.group_counts()
    columns = min(3, len(groups))
    rows = -(-len(groups) // columns)
    figure = _figure(3.2 * columns + 0.4, 2.7 * rows + 0.6)
    axes = figure.subplots(rows, columns, squeeze=False, sharey=True)
    for index, (group, values) in enumerate(groups.items()):
        ax = axes[index // columns, index % columns]
        layers = np.arange(values.shape[0])
        bottom = np.zeros(len(layers))
        for r, region in enumerate(REGIONS):
            ax.bar(layers, 100 * values[:, r], bottom=bottom, color=REGION_COLOURS[region], label=region, width=0.7)
            bottom += 100 * values[:, r]
        name = group_names[group] if group_names is not None and 0 <= group < len(group_names) else f"class {group}"
        ax.set_title(f"{name} ({counts[group]} clips)", fontsize=8)
        ax.set_xticks(layers)
        ax.set_xlabel("layer", fontsize=8)
        ax.set_ylim(0, 100)
        ax.tick_params(labelsize=7)
        if index % columns == 0:
            ax.set_ylabel("attention mass (%)", fontsize=8)
    for index in range(len(groups), rows * columns):
        axes[index // columns, index % columns].set_visible(False)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncol=3, fontsize=8, frameon=False)
    figure.suptitle("Visual cross-attention mass per layer by label group (mean over heads and clips)", fontsize=9)
    return _save(figure, path, dpi)


@dataclass
class FailureRow:
    """One row of the failure figure: frames ``[n, H, W, 3]`` uint8 and, per frame, the recorded gaze ``[n, 2]`` and
    the K samples ``[n, K, 2]`` (pixels), whether the truth is off-frame, and the frame numbers."""

    title: str
    frames: np.ndarray
    truth_px: np.ndarray
    samples_px: np.ndarray
    off_frame: np.ndarray
    frame_numbers: Sequence[int]


def evenly_spaced(num_frames: int, count: int = 8) -> list[int]:
    """``count`` frame indices spread evenly over ``0 .. num_frames - 1`` (fewer when the clip is shorter)."""
    if num_frames < 1:
        raise ValueError(f"num_frames must be >= 1, got {num_frames}")
    return sorted(set(np.linspace(0, num_frames - 1, count).round().astype(int).tolist()))


def failure_cases_figure(rows: Sequence[FailureRow], path: str | os.PathLike, dpi: int = 110) -> Path:
    """Figure failure_cases: each row a clip's frames with the K samples (cyan) and the recorded gaze (red disc;
    hollow ring with a yellow halo where it is off-frame)."""
    if not rows:
        raise ValueError("failure_cases_figure needs at least one row")
    columns = max(len(row.frames) for row in rows)
    height, width = rows[0].frames.shape[1:3]
    panel_width, panel_height = 2.0, 2.0 * height / width
    figure = _figure(columns * panel_width + 0.4, len(rows) * (panel_height + 0.35) + 0.5)
    axes = figure.subplots(len(rows), columns, squeeze=False)
    for r, row in enumerate(rows):
        for c in range(columns):
            ax = axes[r, c]
            ax.set_xticks([])
            ax.set_yticks([])
            if c >= len(row.frames):
                ax.set_visible(False)
                continue
            drawn = draw_gaze(row.frames[c], row.samples_px[c])
            drawn = draw_ground_truth(drawn, row.truth_px[c], off_frame=bool(row.off_frame[c]))
            ax.imshow(drawn)
            ax.set_xlabel(f"frame {row.frame_numbers[c]}" + (" (off-frame)" if row.off_frame[c] else ""), fontsize=6)
        axes[r, 0].set_ylabel(row.title, fontsize=6)
    figure.suptitle(
        "Worst clips: cyan dots = the K samples, red disc = recorded gaze, hollow ring with a yellow "
        "halo = recorded gaze off-frame (clamped to the border)",
        fontsize=8,
    )
    return _save(figure, path, dpi)


__all__ = [
    "REGION_COLOURS",
    "PROBE_COLOURS",
    "probe_figure",
    "self_attention_grid_figure",
    "self_attention_offset_figure",
    "attribution_scatter_figure",
    "group_breakdown_figure",
    "FailureRow",
    "evenly_spaced",
    "failure_cases_figure",
]
