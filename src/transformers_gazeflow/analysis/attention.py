"""Temporal roles of the velocity network's gaze self-attention heads (paper Section 4.6, Appendix A.1, Figures
self_attn_grid and self_attn_offset).

Each (layer, head) gives, per clip, a frame-to-frame attention matrix A ``[T, T]`` (row i: query frame i, column j:
source frame j, rows summing to 1). The analysis, step by step:

1. :func:`real_frames_pattern`: the block of the clip's real frames (a window padded past the clip's end drops the
   padded rows and columns; rows are renormalised over the real sources).
2. :func:`relative_pattern`: resized to a common ``G x G`` grid of clip-relative positions by area-weighted rebinning
   (``data.masks.grid_coverage``: each grid cell is the mean of the entries it covers), rows renormalised to 1.
3. :class:`SelfAttentionPatterns`: averaged over clips (and over the K noise samples within a clip).
4. :func:`offset_curve`: the mean of the pattern along each diagonal, offset ``d = source - query`` from
   ``-(G - 1)`` (past) to ``G - 1`` (future); :func:`offset_shares` normalises it to 1.
5. :func:`classify_role`: one of :data:`ROLES` by the deterministic rule of :class:`RoleRule`, applied in order to
   the normalised curve c(d) with past = sum of c(d < 0), future = sum of c(d > 0), near = sum of c(|d| <= r):

   * ``look-back``: past >= ``directional_share`` and past >= ``dominance`` x future;
   * ``look-ahead``: the same with past and future swapped;
   * ``split``: past and future both >= ``min_side_share``, and the curve has a valley at the current frame:
     c(0) <= ``valley_ratio`` x min(max of c(d < 0), max of c(d > 0)) (the paper's inverted-M shape);
   * ``local``: near >= ``local_share`` (mass on the current frame and its ``local_radius`` neighbours);
   * ``diffuse``: none of these (spread over the clip without a side or a peak: a fifth role the paper does not
     name, kept apart rather than forced into one of the four).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from ..data.masks import grid_coverage

ROLES = ("look-back", "look-ahead", "split", "local", "diffuse")
#: the paper's frame colours (look-back blue, look-ahead red, split purple, local grey) and light grey for diffuse
ROLE_COLOURS = {
    "look-back": "#1f5fbf",
    "look-ahead": "#d62728",
    "split": "#8e44ad",
    "local": "#7f7f7f",
    "diffuse": "#c7c7c7",
}


@dataclass(frozen=True)
class RoleRule:
    """The thresholds of :func:`classify_role` (see the module docstring for the rule)."""

    directional_share: float = 0.6
    dominance: float = 2.0
    min_side_share: float = 0.2
    valley_ratio: float = 0.8
    local_radius: int = 1
    local_share: float = 0.5

    def __post_init__(self) -> None:
        for name in ("directional_share", "min_side_share", "local_share"):
            if not 0 < getattr(self, name) <= 1:
                raise ValueError(f"RoleRule.{name} must be in (0, 1], got {getattr(self, name)!r}")
        if self.dominance < 1:
            raise ValueError(f"RoleRule.dominance must be >= 1, got {self.dominance!r}")
        if not 0 < self.valley_ratio <= 1:
            raise ValueError(f"RoleRule.valley_ratio must be in (0, 1], got {self.valley_ratio!r}")
        if isinstance(self.local_radius, bool) or not isinstance(self.local_radius, int) or self.local_radius < 0:
            raise ValueError(f"RoleRule.local_radius must be an int >= 0 (grid cells), got {self.local_radius!r}")


def _normalise_rows(pattern: np.ndarray) -> np.ndarray:
    sums = pattern.sum(axis=-1, keepdims=True)
    return np.divide(pattern, sums, out=np.zeros_like(pattern), where=sums > 0)


def real_frames_pattern(weights: np.ndarray, num_frames: int) -> np.ndarray:
    """``weights [..., W, W]`` of a window whose first ``num_frames`` frames are real -> ``[..., n, n]``, rows
    renormalised over the real source frames."""
    weights = np.asarray(weights, np.float64)
    if weights.ndim < 2 or weights.shape[-1] != weights.shape[-2]:
        raise ValueError(f"self-attention weights must be [..., T, T], got {weights.shape}")
    if not 1 <= num_frames <= weights.shape[-1]:
        raise ValueError(f"num_frames must be in [1, {weights.shape[-1]}], got {num_frames}")
    return _normalise_rows(weights[..., :num_frames, :num_frames])


def relative_pattern(pattern: np.ndarray, grid: int) -> np.ndarray:
    """``[..., n, n]`` -> ``[..., grid, grid]`` on clip-relative positions (area-weighted rebinning, rows
    renormalised to 1). The identity when ``n == grid``."""
    pattern = np.asarray(pattern, np.float64)
    if pattern.ndim < 2 or pattern.shape[-1] != pattern.shape[-2]:
        raise ValueError(f"an attention pattern must be [..., n, n], got {pattern.shape}")
    if isinstance(grid, bool) or not isinstance(grid, (int, np.integer)) or grid < 2:
        raise ValueError(f"grid must be an int >= 2 (cells per axis), got {grid!r}")
    if pattern.shape[-1] == grid:
        return _normalise_rows(pattern)
    return _normalise_rows(grid_coverage(pattern, (int(grid), int(grid))).astype(np.float64))


def offsets(grid: int) -> np.ndarray:
    """The offsets ``source - query`` of :func:`offset_curve`: ``-(grid - 1) .. grid - 1``."""
    return np.arange(-(grid - 1), grid)


def offset_curve(pattern: np.ndarray) -> np.ndarray:
    """The mean of ``pattern [..., G, G]`` along each diagonal: ``[..., 2G - 1]`` at :func:`offsets` (negative =
    source before the query: past)."""
    pattern = np.asarray(pattern, np.float64)
    grid = pattern.shape[-1]
    if pattern.ndim < 2 or pattern.shape[-2] != grid:
        raise ValueError(f"an attention pattern must be [..., G, G], got {pattern.shape}")
    return np.stack(
        [np.diagonal(pattern, offset=int(d), axis1=-2, axis2=-1).mean(axis=-1) for d in offsets(grid)], axis=-1
    )


def offset_shares(curve: np.ndarray) -> np.ndarray:
    """The curve normalised to sum to 1 over offsets (a distribution over ``source - query``)."""
    curve = np.asarray(curve, np.float64)
    total = curve.sum(axis=-1, keepdims=True)
    if curve.shape[-1] % 2 != 1 or (total <= 0).any() or not np.isfinite(curve).all():
        raise ValueError(
            f"an offset curve must be [..., 2G - 1] of finite non-negative values with positive sum, "
            f"got shape {curve.shape}"
        )
    return curve / total


def curve_summary(curve: np.ndarray, rule: RoleRule = RoleRule()) -> dict[str, float]:
    """The quantities the rule reads: ``past``, ``current``, ``future``, ``near`` shares and the ``peak_offset``."""
    shares = offset_shares(curve)
    d = offsets((len(shares) + 1) // 2)
    return {
        "past": float(shares[d < 0].sum()),
        "current": float(shares[d == 0].sum()),
        "future": float(shares[d > 0].sum()),
        "near": float(shares[np.abs(d) <= rule.local_radius].sum()),
        "peak_offset": int(d[int(np.argmax(shares))]),
    }


def classify_role(curve: np.ndarray, rule: RoleRule = RoleRule()) -> str:
    """The role of one head from its offset curve ``[2G - 1]`` (the rule of the module docstring)."""
    curve = np.asarray(curve, np.float64)
    if curve.ndim != 1:
        raise ValueError(f"classify_role takes one head's curve [2G - 1], got shape {curve.shape}")
    shares = offset_shares(curve)
    d = offsets((len(shares) + 1) // 2)
    past, future = shares[d < 0].sum(), shares[d > 0].sum()
    if past >= rule.directional_share and past >= rule.dominance * future:
        return "look-back"
    if future >= rule.directional_share and future >= rule.dominance * past:
        return "look-ahead"
    if past >= rule.min_side_share and future >= rule.min_side_share:
        valley = shares[d == 0].sum()
        if valley <= rule.valley_ratio * min(shares[d < 0].max(), shares[d > 0].max()):
            return "split"
    if shares[np.abs(d) <= rule.local_radius].sum() >= rule.local_share:
        return "local"
    return "diffuse"


class SelfAttentionPatterns:
    """Running mean over clips of every (layer, head)'s relative pattern ``[L, H, G, G]``."""

    def __init__(self, grid: int):
        relative_pattern(np.eye(2), grid)  # validates grid
        self.grid = int(grid)
        self._sum: np.ndarray | None = None
        self.num_clips = 0

    def add(self, weights: np.ndarray, num_frames: int) -> None:
        """One clip's weights ``[L, H, W, W]`` (``[L, K, H, W, W]``: averaged over the K samples first), of a window
        whose first ``num_frames`` frames are real."""
        weights = np.asarray(weights, np.float64)
        if weights.ndim == 5:
            weights = weights.mean(axis=1)
        if weights.ndim != 4:
            raise ValueError(
                f"one clip's self-attention must be [layers, heads, T, T] (or with a samples axis), got {weights.shape}"
            )
        pattern = relative_pattern(real_frames_pattern(weights, num_frames), self.grid)
        if self._sum is not None and self._sum.shape != pattern.shape:
            raise ValueError(f"clips must have the same layers and heads: {self._sum.shape[:2]} vs {pattern.shape[:2]}")
        self._sum = pattern if self._sum is None else self._sum + pattern
        self.num_clips += 1

    def mean(self) -> np.ndarray:
        if self._sum is None:
            raise ValueError("no clip was added")
        return self._sum / self.num_clips


@dataclass(frozen=True)
class HeadRoles:
    """Patterns ``[L, H, G, G]``, offset curves ``[L, H, 2G - 1]`` and roles ``[L][H]`` of every head."""

    patterns: np.ndarray
    curves: np.ndarray
    roles: list[list[str]]
    rule: RoleRule
    num_clips: int

    @classmethod
    def from_patterns(cls, patterns: np.ndarray, rule: RoleRule = RoleRule(), num_clips: int = 0) -> HeadRoles:
        patterns = np.asarray(patterns, np.float64)
        if patterns.ndim != 4:
            raise ValueError(f"patterns must be [layers, heads, G, G], got {patterns.shape}")
        curves = offset_curve(patterns)
        roles = [
            [classify_role(curves[layer, head], rule) for head in range(curves.shape[1])]
            for layer in range(curves.shape[0])
        ]
        return cls(patterns, curves, roles, rule, num_clips)

    def counts(self) -> dict[str, int]:
        flat = [role for layer in self.roles for role in layer]
        return {role: flat.count(role) for role in ROLES}

    def to_json(self) -> dict:
        heads = []
        for layer, layer_roles in enumerate(self.roles):
            for head, role in enumerate(layer_roles):
                heads.append(
                    {
                        "layer": layer,
                        "head": head,
                        "role": role,
                        **curve_summary(self.curves[layer, head], self.rule),
                        "offset_curve": offset_shares(self.curves[layer, head]).round(6).tolist(),
                    }
                )
        return {
            "grid": int(self.patterns.shape[-1]),
            "num_clips": self.num_clips,
            "rule": asdict(self.rule),
            "counts": self.counts(),
            "heads": heads,
        }

    def markdown(self) -> str:
        """A roles table (layer x head) and the shares behind each role."""
        layers, heads = len(self.roles), len(self.roles[0])
        lines = ["| Layer | " + " | ".join(f"head {h}" for h in range(heads)) + " |", "| --- |" + " --- |" * heads]
        for layer in range(layers):
            lines.append(f"| {layer} | " + " | ".join(self.roles[layer]) + " |")
        lines += [
            "",
            f"| Layer | Head | Role | past | current | future | within ±{self.rule.local_radius} | peak offset |",
            "| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for layer in range(layers):
            for head in range(heads):
                s = curve_summary(self.curves[layer, head], self.rule)
                lines.append(
                    f"| {layer} | {head} | {self.roles[layer][head]} | {s['past']:.3f} | {s['current']:.3f} "
                    f"| {s['future']:.3f} | {s['near']:.3f} | {s['peak_offset']:+d} |"
                )
        counts = ", ".join(f"{role} {n}" for role, n in self.counts().items())
        return "\n".join(lines) + f"\n\nRoles: {counts} (of {layers * heads} heads, {self.num_clips} clips)."


def roles_json(roles: HeadRoles) -> str:
    return json.dumps(roles.to_json(), indent=2)


def role_rule_from_mapping(values: Mapping[str, float] | None) -> RoleRule:
    """A :class:`RoleRule` from ``{field: value}`` (command-line overrides); unknown names raise naming them."""
    values = dict(values or {})
    known = set(RoleRule.__dataclass_fields__)
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"unknown role-rule settings {unknown} (known: {sorted(known)})")
    if "local_radius" in values:
        values["local_radius"] = int(values["local_radius"])
    return RoleRule(**values)


def roles_from_clip_weights(
    clips: Sequence[tuple[np.ndarray, int]], grid: int, rule: RoleRule = RoleRule()
) -> HeadRoles:
    """Roles from ``(weights [L, (K,) H, W, W], real frames)`` per clip (steps 1-5 of the module docstring)."""
    patterns = SelfAttentionPatterns(grid)
    for weights, num_frames in clips:
        patterns.add(weights, num_frames)
    return HeadRoles.from_patterns(patterns.mean(), rule, patterns.num_clips)


__all__ = [
    "ROLES",
    "ROLE_COLOURS",
    "RoleRule",
    "real_frames_pattern",
    "relative_pattern",
    "offsets",
    "offset_curve",
    "offset_shares",
    "curve_summary",
    "classify_role",
    "SelfAttentionPatterns",
    "HeadRoles",
    "roles_json",
    "role_rule_from_mapping",
    "roles_from_clip_weights",
]
