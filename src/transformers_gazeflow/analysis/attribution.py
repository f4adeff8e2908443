"""Hand / active-object attribution of the per-frame visual cross-attention heads (paper Section 4.6, Appendix A.2,
Figures head_semantic_taxonomy and per_verb_breakdown).

Row t of a visual cross-attention head is frame t's gaze token over the N spatial tokens it reads: those of
tubelet ``t // tubelet`` (the encoder makes one token grid per tubelet of frames; the model shares it between the
tubelet's frames). A token's content spans the tubelet's frames, so its share of a region is the region's mean
coverage of that grid cell over the tubelet's frames (:func:`tubelet_region_tokens`).

For one clip, layer and head (:func:`region_attention_mass`): hand mass = sum over frames t and tokens n of
``a[t, n] * hand[t, n]``, object mass likewise, background mass = ``a * (1 - either)``, with ``either`` the coverage
of the union of the two regions (so a pixel in both counts for both, and the three are then normalised to 1 per
(clip, layer, head), as in the paper). :class:`RegionAttribution` averages over clips (with the clip-wise standard
deviation) and by label group (the per-verb breakdown).

Region masks per clip come from a mask source (``analysis.masks``): exact synthetic masks, or a folder of masks from
any segmenter.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

REGIONS = ("hand", "object", "background")


@dataclass(frozen=True)
class RegionTokens:
    """Per-frame coverage of each token-grid cell, float ``[T, rows, cols]`` in [0, 1]: ``hand``, ``object`` and
    ``either`` (their union; ``>= max(hand, object)``)."""

    hand: np.ndarray
    object: np.ndarray
    either: np.ndarray

    def __post_init__(self) -> None:
        shapes = {np.shape(self.hand), np.shape(self.object), np.shape(self.either)}
        if len(shapes) != 1 or len(next(iter(shapes))) != 3:
            raise ValueError(
                f"hand, object and either coverage must share one shape [T, rows, cols], got "
                f"{[np.shape(self.hand), np.shape(self.object), np.shape(self.either)]}"
            )
        for name in ("hand", "object", "either"):
            values = np.asarray(getattr(self, name))
            if not np.isfinite(values).all() or values.min() < -1e-6 or values.max() > 1 + 1e-6:
                raise ValueError(f"{name} coverage must be in [0, 1] (the covered fraction of each token cell)")

    @property
    def num_frames(self) -> int:
        return int(self.hand.shape[0])

    @property
    def grid(self) -> tuple[int, int]:
        return int(self.hand.shape[1]), int(self.hand.shape[2])

    def window(self, start: int, num_frames: int) -> RegionTokens:
        """Frames ``start .. start + num_frames - 1``; raises if the masks do not reach that far."""
        if start < 0 or start + num_frames > self.num_frames:
            raise ValueError(
                f"the masks cover {self.num_frames} frames, the window needs frames {start}..{start + num_frames - 1}"
            )
        cut = slice(start, start + num_frames)
        return RegionTokens(self.hand[cut], self.object[cut], self.either[cut])


def tubelet_region_tokens(regions: RegionTokens, tubelet: int) -> np.ndarray:
    """``[3, T, N]``: for each frame t, the hand / object / background share of each of the N tokens it reads
    (those of tubelet ``t // tubelet``: the mean coverage over that tubelet's frames present in ``regions``)."""
    if isinstance(tubelet, bool) or not isinstance(tubelet, int) or tubelet < 1:
        raise ValueError(f"tubelet must be a positive int (frames per encoder token group), got {tubelet!r}")
    frames = regions.num_frames
    stacked = np.stack([regions.hand, regions.object, 1.0 - regions.either]).reshape(3, frames, -1).astype(np.float64)
    groups = np.arange(frames) // tubelet
    means = np.stack([stacked[:, groups == g].mean(axis=1) for g in range(int(groups[-1]) + 1)], axis=1)
    return means[:, groups]


def region_attention_mass(
    weights: np.ndarray, region_tokens: np.ndarray, frames: np.ndarray | None = None
) -> np.ndarray:
    """``weights [..., T, N]`` (rows: frames' attention over their N tokens) and ``region_tokens [3, T, N]`` ->
    ``[..., 3]``: hand, object and background mass summed over the frames in ``frames`` (bool ``[T]``, default
    all), normalised to 1 (a head without mass on the frames gives NaN)."""
    weights = np.asarray(weights, np.float64)
    region_tokens = np.asarray(region_tokens, np.float64)
    if region_tokens.ndim != 3 or region_tokens.shape[0] != 3 or weights.shape[-2:] != region_tokens.shape[1:]:
        raise ValueError(
            f"weights [..., T, N] and region tokens [3, T, N] must agree on T and N, got "
            f"{weights.shape} and {region_tokens.shape}"
        )
    if frames is not None:
        frames = np.asarray(frames, bool)
        if frames.shape != (weights.shape[-2],):
            raise ValueError(f"frames must be bool [T={weights.shape[-2]}], got {frames.shape}")
        weights = weights * frames[:, None]
    mass = np.einsum("...tn,rtn->...r", weights, region_tokens)
    total = mass.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return mass / total


class RegionAttribution:
    """Per-clip region mass ``[L, H, 3]`` collected over clips, with each clip's group label (e.g. its verb)."""

    def __init__(self) -> None:
        self.clip_ids: list[str] = []
        self.groups: list[int] = []
        self._masses: list[np.ndarray] = []

    def add(self, clip_id: str, mass: np.ndarray, group: int = -1) -> None:
        mass = np.asarray(mass, np.float64)
        if mass.ndim != 3 or mass.shape[-1] != 3:
            raise ValueError(f"one clip's region mass must be [layers, heads, 3], got {mass.shape}")
        if self._masses and mass.shape != self._masses[0].shape:
            raise ValueError(f"clips must have the same layers and heads: {self._masses[0].shape} vs {mass.shape}")
        self.clip_ids.append(str(clip_id))
        self.groups.append(int(group))
        self._masses.append(mass)

    @property
    def masses(self) -> np.ndarray:
        """``[clips, L, H, 3]``."""
        if not self._masses:
            raise ValueError("no clip was added (did every clip lack masks?)")
        return np.stack(self._masses)

    def mean(self) -> np.ndarray:
        """``[L, H, 3]``: the mean over clips (clips where a head had no mass are left out of its mean)."""
        return np.nanmean(self.masses, axis=0)

    def std(self) -> np.ndarray:
        """``[L, H, 3]``: the clip-wise standard deviation."""
        return np.nanstd(self.masses, axis=0)

    def global_mean(self) -> np.ndarray:
        """``[3]``: the mean over clips, layers and heads (the figure's dotted lines)."""
        return np.nanmean(self.masses, axis=(0, 1, 2))

    def group_counts(self) -> dict[int, int]:
        values, counts = np.unique(np.asarray(self.groups), return_counts=True)
        return {int(v): int(c) for v, c in zip(values, counts) if v >= 0}

    def by_group(self, groups: Sequence[int] | None = None, top: int = 6) -> dict[int, np.ndarray]:
        """``{group: [L, 3]}``: per layer, the region mass averaged over the group's clips and the layer's heads.
        Default groups: the ``top`` most frequent (ties: lower id first), labelled clips only (group >= 0)."""
        counts = self.group_counts()
        if groups is None:
            groups = sorted(counts, key=lambda g: (-counts[g], g))[:top]
        masses, labels = self.masses, np.asarray(self.groups)
        return {int(g): np.nanmean(masses[labels == g], axis=(0, 2)) for g in groups if (labels == g).any()}

    def to_json(self, group_names: Sequence[str] | None = None, top: int = 6) -> dict:
        mean, std = self.mean(), self.std()
        heads = [
            {
                "layer": layer,
                "head": head,
                **{f"{region}_mean": float(mean[layer, head, r]) for r, region in enumerate(REGIONS)},
                **{f"{region}_std": float(std[layer, head, r]) for r, region in enumerate(REGIONS)},
            }
            for layer in range(mean.shape[0])
            for head in range(mean.shape[1])
        ]
        groups = {
            _group_name(g, group_names): {
                "clips": self.group_counts()[g],
                "per_layer": {region: values[:, r].round(6).tolist() for r, region in enumerate(REGIONS)},
            }
            for g, values in self.by_group(top=top).items()
        }
        return {
            "num_clips": len(self.clip_ids),
            "regions": list(REGIONS),
            "global_mean": dict(zip(REGIONS, self.global_mean().round(6).tolist())),
            "heads": heads,
            "groups": groups,
        }

    def markdown(self) -> str:
        mean, std = self.mean(), self.std()
        overall = self.global_mean()
        lines = [
            "| Layer | Head | hand (mean ± sd) | object (mean ± sd) | background (mean ± sd) |",
            "| ---: | ---: | ---: | ---: | ---: |",
        ]
        for layer in range(mean.shape[0]):
            for head in range(mean.shape[1]):
                cells = [f"{100 * mean[layer, head, r]:.1f} ± {100 * std[layer, head, r]:.1f}" for r in range(3)]
                lines.append(f"| {layer} | {head} | " + " | ".join(cells) + " |")
        lines.append(f"| all | all | {100 * overall[0]:.1f} | {100 * overall[1]:.1f} | {100 * overall[2]:.1f} |")
        return "\n".join(lines) + f"\n\nPercent of each head's attention mass ({len(self.clip_ids)} clips)."


def _group_name(group: int, names: Sequence[str] | None) -> str:
    return names[group] if names is not None and 0 <= group < len(names) else f"class {group}"


__all__ = ["REGIONS", "RegionTokens", "tubelet_region_tokens", "region_attention_mass", "RegionAttribution"]
