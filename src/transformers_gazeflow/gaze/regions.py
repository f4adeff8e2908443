"""The calibrated uncertainty region of a model: one factor per level, fitted by split conformal prediction.

For a frame with point estimate ``m``, true gaze ``g`` and spread radius ``r_q`` (``uncertainty.spread_radii``: the
radius around ``m`` holding a share ``q`` of the K samples), the **q-region** is the disc around ``m`` of radius

    R_q = f_q * max(r_q, rho)

with one factor ``f_q`` per level ``q`` (:class:`RegionCalibration`). ``f_q`` is fitted on held-out frames with
known gaze as the split-conformal quantile (:func:`conformal_quantile`) of the nonconformity score

    s_q = |g - m| / max(r_q, rho)

so that the q-region holds the truth on a share ``q`` of new frames. ``rho`` (:data:`MIN_RADIUS_PX`, one native
pixel, stored with the factors) keeps the score finite when the samples coincide (``r_q = 0``: K = 1, a regression
head, or samples collapsed onto one point): without it such frames would score infinity, a factor could be
infinite, and their region would be a point that never holds the truth. With it their region is a disc of
``f_q * rho``; a model whose samples never spread gets the plain conformal disc of constant radius.

**What is guaranteed.** With ``exchangeable="frames"`` the factor is the ``ceil((N + 1) q)``-th smallest of the N
scores. If the held-out frames and a new frame are exchangeable, the new frame's q-region holds its truth with
probability at least ``q`` and (without ties) below ``q + 1 / (N + 1)``. The frames of one clip are not
exchangeable (consecutive frames look alike); with clips that are (``n`` clips of ``m`` frames each, and a new clip
drawn like them, whatever the dependence inside a clip) the same factor gives a uniformly drawn frame of the new
clip a coverage of at least ``ceil((N + 1) q) / (N + m) >= q n / (n + 1)`` (0.878 at q = 0.9 with 40 clips), and
``q`` as the number of clips grows. ``exchangeable="clips"`` buys back the full guarantee: each clip weighs one in
the empirical distribution of the scores (each of its frames ``1 / m_i``), and the factor is the smallest score at
which that distribution reaches ``q (n + 1)`` clips. A uniformly drawn frame of a new exchangeable clip is then
covered with probability at least ``q``, for any clip lengths; the price is an excess of about ``q / n`` (for one
frame per clip it is the ``ceil((n + 1) q)``-th smallest, the frames rule again).

**Nested regions.** The spread radius ``r_q`` never shrinks as ``q`` grows, but the conformal quantiles of the
levels' scores need not grow with ``q`` (each level's score divides by its own radius), and a larger level's region
could then be smaller than a lower one's on a frame whose samples give both levels the same radius. Each fitted
factor is therefore raised to the largest quantile of the levels below it (``f_q = max over q' <= q of the
quantile at q'``): the q-region then contains every lower level's region on every frame, and each level keeps its
guarantee (a larger factor only covers more). The quantiles themselves are kept in the file's provenance
(``conformal_quantiles``).

**A level that was not fitted** gets the region of the smallest fitted level above it (which holds the truth at
least as often: a conservative region, never an interpolation); a level above the largest fitted one is an error.
A version-1 file (``{"scale": s}``, the single scale of earlier releases) means what it meant: ``R_q = s * r_q`` at
every level, without the floor.

``region_calibration.json`` (:meth:`RegionCalibration.to_record`, read by :meth:`RegionCalibration.from_record`) is
written into a model folder by ``hub.model_folders.save_region_calibration``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..data.interface_files import (
    MAX_REGION_FACTOR,
    REGION_CALIBRATION_FORMAT,
    REGION_CALIBRATION_VERSION,
    region_calibration,
)

MIN_RADIUS_PX = 1.0
"""``rho``: the smallest spread radius a score divides by, native pixels (the frame's own resolution)."""

EXCHANGEABLE_UNITS = ("frames", "clips")
"""What the conformal fit takes as exchangeable (see the module docstring)."""

_SCHEMA_KEYS = ("format", "version", "rule", "exchangeable", "levels", "factors", "min_radius_px", "scale")


def check_level(level: float, name: str = "level") -> float:
    """A coverage level must be a share in (0, 1)."""
    value = float(level)
    if not 0 < value < 1:
        raise ValueError(f"{name} must be a share in (0, 1), got {level!r}")
    return value


@dataclass(frozen=True)
class RegionCalibration:
    """A model's calibrated regions (module docstring): ``R_q = f_q * max(r_q, rho)``.

    Args:
        levels: the fitted levels, increasing; None for a version-1 file's single scale (one factor at every level).
        factors: ``f_q``, one per level (the one scale when ``levels`` is None).
        min_radius_px: ``rho`` in native pixels (0: no floor, a version-1 file).
        exchangeable: the conformal fit's unit (:data:`EXCHANGEABLE_UNITS`; None for a version-1 file).
        provenance: how it was fitted (split, clips, frames, sampler settings, coverage), kept in the file.
    """

    levels: tuple[float, ...] | None
    factors: tuple[float, ...]
    min_radius_px: float = 0.0
    exchangeable: str | None = None
    provenance: dict = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.levels is None:
            if len(self.factors) != 1 or not (math.isfinite(self.factors[0]) and self.factors[0] > 0):
                raise ValueError(f"a single region scale must be one finite positive number, got {self.factors}")
            return
        if not self.levels or len(self.levels) != len(self.factors):
            raise ValueError(f"need one factor per level, got levels {self.levels} and factors {self.factors}")
        if any(b <= a for a, b in zip(self.levels, self.levels[1:])) or not all(0 < q < 1 for q in self.levels):
            raise ValueError(f"levels must increase within (0, 1), got {self.levels}")
        if any(not (math.isfinite(f) and 0 <= f <= MAX_REGION_FACTOR) for f in self.factors):
            raise ValueError(f"factors must be finite numbers in [0, {MAX_REGION_FACTOR:g}], got {self.factors}")
        if not (math.isfinite(self.min_radius_px) and self.min_radius_px >= 0):
            raise ValueError(f"min_radius_px must be a finite number >= 0, got {self.min_radius_px}")

    @property
    def noise_scale(self) -> float:
        """tau of the samples the factors were fitted on (the provenance's ``noise_scale``; 1, the paper's x_0, for a
        file that does not say)."""
        return float(self.provenance.get("noise_scale", 1.0))

    def sampler_mismatch(self, noise_scale: float) -> str | None:
        """Why these factors do not calibrate samples drawn at ``noise_scale`` (tau), or None when they do: the
        spread r_q shrinks with tau while the error |g - m| hardly moves, so factors fitted at another tau give
        regions that hold the truth more often (a larger tau) or less often (a smaller one) than their level says."""
        if math.isclose(self.noise_scale, float(noise_scale), rel_tol=1e-9):
            return None
        return (
            f"the model's region factors were fitted on samples drawn at noise_scale {self.noise_scale:g}, these are "
            f"drawn at {float(noise_scale):g}: the regions do not hold the truth on the share of frames their level "
            "says (refit them at this noise_scale: examples/evaluate.py --region_split validation "
            "--save_region_calibration)"
        )

    @classmethod
    def single_scale(cls, scale: float, provenance: dict | None = None) -> RegionCalibration:
        """The version-1 calibration: ``R_q = scale * r_q`` at every level."""
        return cls(None, (float(scale),), 0.0, None, dict(provenance or {}))

    def factor_for(self, level: float) -> tuple[float, float]:
        """``(fitted level, factor)`` of the q-region: ``level`` itself when fitted (or any level for a single
        scale), else the smallest fitted level above it; a ValueError above the largest."""
        level = check_level(level)
        if self.levels is None:
            return level, self.factors[0]
        for fitted, factor in zip(self.levels, self.factors):
            if fitted >= level - 1e-12:
                return fitted, factor
        raise ValueError(
            f"no calibrated region at level {level}: the model's calibration holds levels {list(self.levels)}"
        )

    def radius(
        self, level: float, spread_at: Callable[[float], np.ndarray], floor: float | np.ndarray | None = None
    ) -> np.ndarray:
        """``R_q``: the factor times the spread ``spread_at(fitted level)``, or times ``floor`` where the spread is
        smaller (``floor``: None for ``min_radius_px``; in degrees, the same floor as an angle). The one rule behind
        ``GazeUncertainty.region`` and the coverage of the fit."""
        fitted, factor = self.factor_for(level)
        spread = spread_at(fitted)
        floor = self.min_radius_px if floor is None else floor
        if self.levels is None or np.all(np.asarray(floor) == 0):
            return factor * spread
        return factor * np.maximum(spread, floor)

    def to_record(self) -> dict[str, Any]:
        """The JSON object of ``region_calibration.json``: the factors with their levels, then the provenance."""
        extra = {key: value for key, value in self.provenance.items() if key not in _SCHEMA_KEYS}
        if self.levels is None:
            return {"scale": self.factors[0], **extra}
        return {
            "format": REGION_CALIBRATION_FORMAT,
            "version": REGION_CALIBRATION_VERSION,
            "rule": "R_q = factors[q] * max(r_q, min_radius_px); factors: split-conformal quantiles of "
            "|g - m| / max(r_q, min_radius_px) per level",
            "exchangeable": self.exchangeable,
            "levels": list(self.levels),
            "factors": list(self.factors),
            "min_radius_px": self.min_radius_px,
            **extra,
        }

    def summary(self) -> dict[str, Any]:
        """What ``summary.json`` says of the regions a prediction used."""
        if self.levels is None:
            return {"version": 1, "scale": self.factors[0]}
        return {
            "version": REGION_CALIBRATION_VERSION,
            "levels": list(self.levels),
            "factors": list(self.factors),
            "min_radius_px": self.min_radius_px,
            "exchangeable": self.exchangeable,
        }

    @classmethod
    def from_record(cls, record: Any, where: str = "region calibration") -> RegionCalibration:
        """Read the JSON object of ``region_calibration.json``, checked by its one schema (``data.interface_files.
        region_calibration``: version 2's factors per level, or version 1's single scale); every fault is a one-line
        ValueError naming ``where`` and the field."""
        checked = region_calibration(record, where, EXCHANGEABLE_UNITS)
        provenance = {key: value for key, value in record.items() if key not in _SCHEMA_KEYS}
        if checked["levels"] is None:  # version 1: one scale at every level
            return cls.single_scale(checked["factors"][0], provenance)
        return cls(checked["levels"], checked["factors"], checked["min_radius_px"], checked["exchangeable"], provenance)


def warn_on_sampler_mismatch(calibration: RegionCalibration | None, noise_scale: float) -> None:
    """A ``UserWarning`` (:meth:`RegionCalibration.sampler_mismatch`) when ``calibration`` was fitted on samples of
    another tau than ``noise_scale``; the one check behind the pipeline, ``gazeflow predict`` and ``gazeflow
    stream``."""
    why = None if calibration is None else calibration.sampler_mismatch(noise_scale)
    if why is not None:
        warnings.warn(why, UserWarning, stacklevel=3)


def conformal_rank(level: float, count: int) -> int:
    """``ceil((count + 1) q)``: the rank of the split-conformal quantile of ``count`` scores at level ``q``
    (computed so that ``0.9 * 20`` is 18, not 19 by a rounding error)."""
    return math.ceil(round(check_level(level) * (count + 1), 9))


def _fewest(level: float) -> int:
    """The fewest scores whose conformal quantile at ``level`` is finite: ``ceil(q / (1 - q))``."""
    return math.ceil(round(level / (1 - level), 9))


def conformal_quantile(scores: Sequence[float], level: float, clips: Sequence[int] | None = None) -> float:
    """The split-conformal threshold of ``scores`` at level ``q`` (module docstring): the
    :func:`conformal_rank`-th smallest score, or with ``clips`` (one clip id per score) the smallest score at which
    the scores, each clip weighing one, reach ``q (n + 1)`` of the ``n`` clips. A ValueError when there are too few
    scores (or clips) for the level: the threshold would be infinite."""
    scores = np.asarray(scores, np.float64).reshape(-1)
    if scores.size == 0 or not np.isfinite(scores).all():
        raise ValueError(f"need finite scores to fit a region on, got {scores.size} scores")
    order = np.argsort(scores, kind="stable")
    if clips is None:
        rank = conformal_rank(level, scores.size)
        if rank > scores.size:
            raise ValueError(f"the {level} region needs at least {_fewest(level)} held-out frames, got {scores.size}")
        return float(scores[order[rank - 1]])
    clips = np.asarray(clips).reshape(-1)
    if clips.shape != scores.shape:
        raise ValueError(f"need one clip id per score, got {clips.size} for {scores.size} scores")
    _, index, counts = np.unique(clips, return_inverse=True, return_counts=True)
    target = round(check_level(level) * (counts.size + 1), 9)
    if target > counts.size:
        raise ValueError(f"the {level} region needs at least {_fewest(level)} held-out clips, got {counts.size}")
    reached = np.cumsum(1.0 / counts[index[order]])
    return float(scores[order[min(int(np.searchsorted(reached, target - 1e-9)), scores.size - 1)]])


__all__ = [
    "MIN_RADIUS_PX",
    "EXCHANGEABLE_UNITS",
    "RegionCalibration",
    "check_level",
    "conformal_rank",
    "conformal_quantile",
    "warn_on_sampler_mismatch",
]
