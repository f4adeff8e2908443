"""Uncertainty of a frame's gaze from its K samples: spread radii, the number of modes, and the calibrated region.

For a frame with K sampled points ``p_1..p_K`` and the point estimate ``m`` (their mean,
``generation_gazeflow.point_estimate``):

* **spread** ``r_q``: the radius of the smallest disc around ``m`` holding at least a share ``q`` of the samples,
  i.e. the ``ceil(q K)``-th smallest distance ``|p_k - m|`` (numpy's ``inverted_cdf`` quantile), in native pixels and,
  with a camera, in degrees (the angle between the rays of ``p_k`` and ``m``: ``geometry.PinholeCamera``).
  :data:`SPREAD_LEVELS` are 50% and 90%.
* **modes**: mean-shift with a Gaussian kernel started from every sample; points that converge within ``h / 2`` of
  each other form one mode, and a mode counts when it holds at least 10% of the samples (:data:`MODE_MIN_SHARE`; at
  least one sample). The bandwidth ``h`` is the samples' local spread (:func:`mode_bandwidth`): the median over the
  samples of the distance to their ``ceil(K / 5)``-th nearest neighbour, so it does not grow when the samples split
  into groups (a bandwidth from ``r_50`` would, and would merge them). Measured on Gaussian clouds (300 frames
  each): one cloud gives one mode in 99.7% of frames at K = 30 (99.3% at K = 16); two equal clouds 6 sigmas apart
  give two in 100%, 4 sigmas apart in 74%; three 6 sigmas apart give three in 93%. Points stop once a step moves
  none of them by more than ``h / 100``.
* **calibrated region**: the disc around ``m`` of radius ``f_q * max(r_q, rho)``, one factor ``f_q`` per level fitted
  on held-out frames with known gaze by split conformal prediction so that the q-region holds the true gaze a share
  ``q`` of the time (:mod:`.regions`: the rule, what it guarantees, the file). :func:`describe_uncertainty` computes
  spreads and regions for every reader (``gaze.csv``, ``gazeflow stream``, the pipeline, the web demo);
  :func:`coverage_ratios` and :func:`fit_region_calibration` fit the factors on held-out frames, and
  :func:`reliability_table` is the coverage, nominal against observed (printed by
  ``metrics.tables.reliability_table_markdown``). :func:`fit_region_scale` is the single scale of version-1 files,
  kept to compare with: one scale cannot fit every level when the errors' tails are heavier than the samples'.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..models.gazeflow.geometry import PinholeCamera, unit_to_pixels
from .regions import MIN_RADIUS_PX, RegionCalibration, conformal_quantile

SPREAD_LEVELS = (0.5, 0.9)
"""The shares of the K samples whose radii are reported (``spread50``, ``spread90``)."""

REGION_LEVELS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
"""The nominal coverages the region factors are fitted at and the reliability table reports."""

MODE_NEIGHBOUR_SHARE = 0.2
"""Mean-shift bandwidth: the median distance of a sample to its ``ceil(MODE_NEIGHBOUR_SHARE * K)``-th nearest
neighbour."""

MODE_MIN_SHARE = 0.1
"""A mode counts when it holds at least this share of the K samples (and at least one sample)."""

COVERAGE_CONFIDENCE = 0.95
"""The confidence of the reliability table's clip-bootstrap intervals of the observed coverage."""

COVERAGE_RESAMPLES = 2000
"""Clip-bootstrap draws behind each interval (the interval's ends move by about 0.002 between seeds)."""

MEAN_SHIFT_STEPS = 50
"""Most mean-shift iterations; the points have converged long before at the merge radius ``h / 2``."""


def _as_points(points, name: str) -> np.ndarray:
    array = np.asarray(points, dtype=np.float64)
    if array.ndim != 3 or array.shape[-1] != 2 or array.shape[0] < 1:
        raise ValueError(f"{name} must be [K, T, 2] with K >= 1 samples, got shape {array.shape}")
    if not np.isfinite(array).all():
        raise ValueError(f"{name} holds NaN or inf")
    return array


def _check_levels(levels: Sequence[float], name: str = "levels") -> tuple[float, ...]:
    levels = tuple(float(q) for q in levels)
    if not levels or any(not 0 < q < 1 for q in levels):
        raise ValueError(f"{name} must be shares in (0, 1), got {levels}")
    return levels


def radius_quantiles(distances: np.ndarray, levels: Sequence[float]) -> np.ndarray:
    """``[L, T]``: for each level ``q`` the ``ceil(q K)``-th smallest of the K distances ``[K, T]`` of each frame."""
    levels = _check_levels(levels)
    return np.quantile(np.asarray(distances, np.float64), levels, axis=0, method="inverted_cdf")


def spread_radii(samples_px, centre_px, levels: Sequence[float] = SPREAD_LEVELS) -> np.ndarray:
    """The spread radii ``r_q`` of K samples around their point estimate, in pixels: ``[L, ...]`` for
    ``samples_px [K, ..., 2]`` around ``centre_px [..., 2]`` (one frame: ``[K, 2]`` around ``[2]`` gives ``[L]``),
    by the one quantile rule of :func:`radius_quantiles` (the ``ceil(q K)``-th smallest distance). The ``r50_px`` /
    ``r90_px`` of ``gazeflow stream`` and the ``spread50`` / ``spread90`` of ``gaze.csv`` are these radii."""
    samples = np.asarray(samples_px, np.float64)
    return radius_quantiles(np.linalg.norm(samples - np.asarray(centre_px, np.float64), axis=-1), levels)


def _squared_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``[T, I, J]``: ``|a_i - b_j|^2`` of each frame's points ``a`` ``[2, T, I]`` and ``b`` ``[2, T, J]`` (x and y
    apart), as ``dx * dx + dy * dy`` (the same bits as squaring the differences and summing the two coordinates)."""
    dx = a[0][:, :, None] - b[0][:, None, :]
    dy = a[1][:, :, None] - b[1][:, None, :]
    dx *= dx
    dy *= dy
    dx += dy
    return dx


def _coordinates(points_px: np.ndarray) -> np.ndarray:
    """``[2, T, K]``: the x and the y of each frame's K points ``[K, T, 2]``, each contiguous."""
    return np.ascontiguousarray(_as_points(points_px, "points_px").transpose(2, 1, 0))


def mode_bandwidth(points_px: np.ndarray) -> np.ndarray:
    """``[T]``: the local spread of each frame's K points ``[K, T, 2]``: the median over the points of the distance
    to their ``ceil(K / 5)``-th nearest neighbour (0 for K = 1)."""
    return _bandwidth(_coordinates(points_px))


def _bandwidth(points: np.ndarray) -> np.ndarray:
    """:func:`mode_bandwidth` of the x and y ``[2, T, K]`` of each frame's points."""
    k = points.shape[2]
    if k == 1:
        return np.zeros(points.shape[1])
    distances = np.sqrt(_squared_distances(points, points))
    neighbour = min(k - 1, max(1, math.ceil(MODE_NEIGHBOUR_SHARE * k)))  # column 0 is the point itself
    return np.median(np.partition(distances, neighbour, axis=-1)[:, :, neighbour], axis=1)


def _pairwise_rows_sum(rows: np.ndarray) -> np.ndarray:
    """The sum of ``rows`` ``[n, ...]`` over its first axis with the additions of ``ndarray.sum`` along a contiguous
    axis (numpy's pairwise summation): below 8 terms one after the other; up to 128 terms in 8 running sums over
    every eighth term, joined as ``((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))``, then the terms left over
    one after the other; longer sums as the sum of their two halves (the first a multiple of 8 terms long). Every
    bit is the same as summing each column's terms laid out contiguously."""
    n = rows.shape[0]
    if n < 8:
        return rows.sum(0)  # over the outer axis: one row after the other
    if n > 128:
        half = n // 2 - (n // 2) % 8
        return _pairwise_rows_sum(rows[:half]) + _pairwise_rows_sum(rows[half:])
    blocks = n - n % 8
    running = rows[:blocks].reshape(blocks // 8, 8, *rows.shape[1:]).sum(0)  # s_r: every eighth term in turn
    pairs = running[0::2] + running[1::2]  # s0 + s1, s2 + s3, s4 + s5, s6 + s7
    total = (pairs[0] + pairs[1]) + (pairs[2] + pairs[3])
    for row in rows[blocks:]:
        total += row
    return total


def _mean_shift_step(shifted: np.ndarray, sources: np.ndarray, divisor: np.ndarray) -> np.ndarray:
    """One Gaussian mean-shift step of the points ``shifted`` ``[2, t, K]`` (x and y) of ``t`` frames: each point
    moves to the mean of its frame's K points weighted by ``exp(-|x - p|^2 / (2 h^2))``. ``sources``
    ``[2, K, t, K]`` holds point ``j``'s coordinates at ``[:, j, f, i]`` for every ``i`` and ``divisor`` ``[t, K]``
    the ``-2 h^2`` of each point's frame, so that every operation runs over whole contiguous rows. The weighted
    points are added one after the other (the order of ``np.einsum("tij,tjc->tic")``) and the weights in the order
    of ``ndarray.sum`` over each point's K weights (:func:`_pairwise_rows_sum`), so every bit is the same as theirs."""
    differences = shifted[:, None] - sources  # [2, K, t, K]: x_i - p_j at [:, j, f, i]
    differences *= differences
    exponent = np.add(differences[0], differences[1], out=differences[0])  # dx^2 + dy^2, as summing the two
    exponent /= divisor  # the same bits as -0.5 d^2 / h^2: scaling by 2 is exact
    weights = np.exp(exponent, out=exponent)
    pulled = (weights * sources).sum(1)  # [2, t, K]: the weighted points one after the other
    return pulled / _pairwise_rows_sum(weights)


def mean_shift(points_px: np.ndarray, bandwidth: np.ndarray) -> np.ndarray:
    """``[2, T, K]``: where each frame's K points ``[K, T, 2]`` (pixels) end under Gaussian mean-shift at the
    frame's bandwidth ``[T]`` (pixels, at least ``1e-9``): every point climbs over its frame's fixed points, at most
    :data:`MEAN_SHIFT_STEPS` steps, and a frame stops after the first step that moves none of its points by more
    than ``h / 100`` in x or y."""
    points = _coordinates(points_px)  # [2, T, K]
    return _climb(points, np.maximum(np.asarray(bandwidth, np.float64).reshape(points.shape[1]), 1e-9))


def _climb(points: np.ndarray, h: np.ndarray) -> np.ndarray:
    """:func:`mean_shift` of the x and y ``[2, T, K]`` of each frame's points at bandwidths ``h`` ``[T]``."""
    frames, k = points.shape[1:]
    sources = np.ascontiguousarray(np.broadcast_to(points.transpose(0, 2, 1)[..., None], (2, k, frames, k)))
    divisor = np.repeat((-2.0 * h**2)[:, None], k, axis=1)  # [T, K]
    shifted = points.copy()
    active = np.arange(frames)  # frames whose points still move
    x, scale = shifted, h
    for _ in range(MEAN_SHIFT_STEPS):
        moved = _mean_shift_step(x, sources, divisor)
        moving = np.abs(moved - x).max(axis=(0, 2)) > 1e-2 * scale
        shifted[:, active] = moved
        if not moving.all():  # frames that stopped leave the step
            active, x, scale = active[moving], moved[:, moving], scale[moving]
            sources, divisor = sources[:, :, moving], divisor[moving]
        else:
            x = moved
        if active.size == 0:
            break
    return shifted


def count_modes(
    points_px: np.ndarray, bandwidth: np.ndarray | None = None, min_share: float = MODE_MIN_SHARE
) -> np.ndarray:
    """The number of modes of each frame's K points ``[K, T, 2]`` (pixels) under mean-shift with a Gaussian kernel of
    bandwidth ``bandwidth`` ``[T]`` (pixels; None: :func:`mode_bandwidth`; see the module docstring). Returns int
    ``[T]``, at least 1."""
    points = _coordinates(points_px)  # [2, T, K]
    frames, k = points.shape[1:]
    bandwidth = _bandwidth(points) if bandwidth is None else bandwidth
    h = np.maximum(np.asarray(bandwidth, np.float64).reshape(frames), 1e-9)
    shifted = _climb(points, h)
    close = _squared_distances(shifted, shifted) <= ((0.5 * h) ** 2)[:, None, None]
    labels = np.broadcast_to(np.arange(k), (frames, k)).copy()
    while True:  # connected components: each point takes the smallest label within reach
        spread = np.where(close, labels[:, None, :], k).min(-1)
        if np.array_equal(spread, labels):
            break
        labels = spread
    sizes = (labels[:, :, None] == np.arange(k)).sum(1)  # [T, K]: points per label
    needed = max(1, math.ceil(min_share * k))
    return np.maximum((sizes >= needed).sum(-1), 1)


@dataclass
class GazeUncertainty:
    """Per-frame uncertainty of ``T`` frames (see the module docstring).

    Args:
        levels: the sample shares of the spread radii (:data:`SPREAD_LEVELS` and the calibration's levels).
        spread_px: ``[L, T]`` radii around the point estimate holding each share of the samples, native pixels.
        spread_deg: ``[L, T]`` the same in degrees (None without a camera).
        modes: ``[T]`` the number of modes of the samples.
        calibration: the model's :class:`~.regions.RegionCalibration` (None: the region is the raw spread).
        min_radius_deg: ``[T]`` the calibration's floor ``rho`` as an angle at each point estimate (None without a
            camera or a floor).
    """

    levels: tuple[float, ...]
    spread_px: np.ndarray
    spread_deg: np.ndarray | None
    modes: np.ndarray
    calibration: RegionCalibration | None = None
    min_radius_deg: np.ndarray | None = None

    @property
    def region_calibrated(self) -> bool:
        """Whether the regions come from a calibration fitted on held-out data."""
        return self.calibration is not None

    def spread(self, level: float, unit: str = "px") -> np.ndarray:
        """``[T]`` radius holding ``level`` of the samples, in ``"px"`` or ``"deg"``."""
        if level not in self.levels:
            raise KeyError(f"level {level} is not one of the computed levels {self.levels}")
        table = self.spread_px if unit == "px" else self.spread_deg
        if table is None:
            raise ValueError("no radii in degrees: the uncertainty was computed without a camera")
        return table[self.levels.index(level)]

    def region(self, level: float, unit: str = "px") -> np.ndarray:
        """``[T]`` radius of the ``level`` region: ``f_q * max(r_q, rho)`` with the model's calibration
        (:meth:`~.regions.RegionCalibration.radius`), the raw spread ``r_q`` without one."""
        if self.calibration is None:
            return self.spread(level, unit)
        floor = None if unit == "px" else (0.0 if self.min_radius_deg is None else self.min_radius_deg)
        return self.calibration.radius(level, lambda fitted: self.spread(fitted, unit), floor)

    def frames(self, cut: slice) -> GazeUncertainty:
        """The uncertainty of the frames ``cut``."""
        return GazeUncertainty(
            self.levels,
            self.spread_px[:, cut],
            None if self.spread_deg is None else self.spread_deg[:, cut],
            self.modes[cut],
            self.calibration,
            None if self.min_radius_deg is None else self.min_radius_deg[cut],
        )

    @staticmethod
    def concatenate(parts: Sequence[GazeUncertainty]) -> GazeUncertainty:
        """The frames of ``parts`` (of one stream: the same levels and calibration) one after the other."""
        first = parts[0]
        return GazeUncertainty(
            first.levels,
            np.concatenate([p.spread_px for p in parts], 1),
            None if first.spread_deg is None else np.concatenate([p.spread_deg for p in parts], 1),
            np.concatenate([p.modes for p in parts]),
            first.calibration,
            None if first.min_radius_deg is None else np.concatenate([p.min_radius_deg for p in parts]),
        )


def as_region_calibration(calibration: RegionCalibration | float | None) -> RegionCalibration | None:
    """A model's region calibration: a :class:`~.regions.RegionCalibration`, a single scale (a version-1 file's
    ``s``: :func:`check_region_scale`) or None."""
    if calibration is None or isinstance(calibration, RegionCalibration):
        return calibration
    return RegionCalibration.single_scale(check_region_scale(calibration))


def describe_uncertainty(
    samples: np.ndarray,
    width: int,
    height: int,
    camera: PinholeCamera | None = None,
    calibration: RegionCalibration | float | None = None,
    levels: Sequence[float] = SPREAD_LEVELS,
    with_modes: bool = True,
    centre: np.ndarray | None = None,
) -> GazeUncertainty:
    """The :class:`GazeUncertainty` of ``samples`` ``[K, T, 2]`` in unit coordinates of a ``width x height`` frame:
    the one computation of spreads and regions behind ``gaze.csv``, ``gazeflow stream``, the pipeline and the web
    demo. ``calibration``: the model's (:func:`as_region_calibration`), None when it has none; its levels are
    computed beside ``levels``. ``centre``: the point estimate ``[T, 2]`` (unit coordinates) when the caller has it
    (default: the samples' mean)."""
    samples = _as_points(samples, "samples")
    calibration = as_region_calibration(calibration)
    fitted = () if calibration is None or calibration.levels is None else calibration.levels
    levels = tuple(sorted(set(_check_levels(levels)) | set(fitted)))
    pixels = unit_to_pixels(samples, width, height)
    centre = pixels.mean(axis=0) if centre is None else unit_to_pixels(np.asarray(centre, np.float64), width, height)
    spread_px = spread_radii(pixels, centre, levels)
    spread_deg = floor_deg = None
    if camera is not None:
        frame_camera = camera.for_frame(width, height)
        spread_deg = radius_quantiles(frame_camera.angle_between_deg(pixels, centre[None]), levels)
        if calibration is not None and calibration.min_radius_px > 0:
            beside = centre + np.array([calibration.min_radius_px, 0.0])
            floor_deg = frame_camera.angle_between_deg(beside, centre)
    modes = count_modes(pixels) if with_modes else np.ones(samples.shape[1], np.int64)
    return GazeUncertainty(levels, spread_px, spread_deg, modes, calibration, floor_deg)


def check_region_scale(scale: float, where: str = "region scale") -> float:
    """A region scale must be a finite positive number."""
    try:
        value = float(scale)
    except (TypeError, ValueError):
        value = float("nan")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{where} must be a finite positive number, got {scale!r}")
    return value


# --- the calibrated region -----------------------------------------------------------------------------------------


@dataclass
class CoverageData:
    """Held-out frames for the region: for each of ``N`` frames the true gaze's distance ``miss_px`` ``[N]`` from
    the point estimate, the spread radii ``radii_px`` ``[L, N]`` at ``levels``, and the clip ``clips`` ``[N]`` it
    belongs to (native pixels)."""

    levels: tuple[float, ...]
    miss_px: np.ndarray
    radii_px: np.ndarray
    clips: np.ndarray

    @property
    def frames(self) -> int:
        return int(self.miss_px.shape[0])

    @property
    def ratios(self) -> np.ndarray:
        """``[L, N]``: the miss over the spread radius (``0 / 0 = 0``, ``d / 0 = inf``), what a single scale
        multiplies."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.radii_px > 0, self.miss_px / self.radii_px, np.where(self.miss_px > 0, np.inf, 0.0))

    def scores(self, min_radius_px: float = MIN_RADIUS_PX) -> np.ndarray:
        """``[L, N]``: the nonconformity scores ``|g - m| / max(r_q, rho)`` (:mod:`.regions`), ``rho > 0``."""
        if not (math.isfinite(min_radius_px) and min_radius_px > 0):
            raise ValueError(f"min_radius_px must be a positive number of pixels, got {min_radius_px}")
        return self.miss_px / np.maximum(self.radii_px, min_radius_px)

    def coverage(self, calibration: RegionCalibration | float | None = None) -> np.ndarray:
        """``[L]``: the share of frames whose true gaze lies within the region of each level: the raw spread
        without a calibration, ``R_q`` of :meth:`~.regions.RegionCalibration.radius` with one (a number: a single
        scale)."""
        return self.covered(calibration).mean(axis=1)

    def covered(self, calibration: RegionCalibration | float | None = None) -> np.ndarray:
        """``[L, N]`` booleans: whether each frame's true gaze lies within the region of each level."""
        calibration = as_region_calibration(calibration)
        covered = []
        for index, level in enumerate(self.levels):
            if calibration is None:
                radius = self.radii_px[index]
            else:
                radius = calibration.radius(level, lambda fitted: self.radii_px[self.levels.index(fitted)])
            covered.append(self.miss_px <= radius)
        return np.asarray(covered, dtype=bool).reshape(len(self.levels), self.frames)

    def coverage_interval(
        self,
        calibration: RegionCalibration | float | None = None,
        confidence: float = COVERAGE_CONFIDENCE,
        resamples: int = COVERAGE_RESAMPLES,
        seed: int = 0,
    ) -> np.ndarray:
        """``[L, 2]``: a ``confidence`` interval of each level's coverage by the clip bootstrap (percentile): the
        clips are drawn with replacement ``resamples`` times and the share of covered frames is taken over each
        draw. Frames of one clip are not independent (a clip whose point estimate is off misses on many frames at
        once), so the clips, not the frames, are the units resampled; one clip gives a zero-width interval."""
        covered = self.covered(calibration)
        clip_ids, clip_of_frame = np.unique(self.clips, return_inverse=True)
        frames_per_clip = np.bincount(clip_of_frame, minlength=clip_ids.size).astype(np.float64)
        covered_per_clip = np.stack(
            [np.bincount(clip_of_frame, weights=row, minlength=clip_ids.size) for row in covered.astype(np.float64)]
        )  # [L, C]
        rng = np.random.default_rng(seed)
        draws = rng.multinomial(clip_ids.size, np.full(clip_ids.size, 1.0 / clip_ids.size), size=resamples)  # [B, C]
        shares = (draws @ covered_per_clip.T) / (draws @ frames_per_clip)[:, None]  # [B, L]
        tail = (1.0 - confidence) / 2
        return np.quantile(shares, [tail, 1.0 - tail], axis=0).T


def coverage_ratios(
    samples: np.ndarray, truth: np.ndarray, width: int, height: int, levels: Sequence[float] = REGION_LEVELS
) -> CoverageData:
    """:class:`CoverageData` of one clip: ``samples`` ``[K, T, 2]`` and the true gaze ``truth`` ``[T, 2]`` (unit
    coordinates; pass only the frames whose truth is a position on the frame). Distances in native pixels."""
    samples = _as_points(samples, "samples")
    truth = np.asarray(truth, np.float64)
    if truth.shape != samples.shape[1:]:
        raise ValueError(f"truth must be [T, 2] = {samples.shape[1:]}, got {truth.shape}")
    levels = _check_levels(levels)
    pixels = unit_to_pixels(samples, width, height)
    centre = pixels.mean(axis=0)
    radii = spread_radii(pixels, centre, levels)  # [L, T]
    miss = np.linalg.norm(unit_to_pixels(truth, width, height) - centre, axis=-1)  # [T]
    return CoverageData(levels, miss, radii, np.zeros(miss.shape[0], np.int64))


def merge_coverage(parts: Sequence[CoverageData]) -> CoverageData:
    """The frames of several clips together (all at the same levels), part ``i``'s clips numbered after part
    ``i - 1``'s."""
    if not parts:
        raise ValueError("no held-out frames to fit or score the region on")
    levels = parts[0].levels
    if any(part.levels != levels for part in parts):
        raise ValueError("coverage data of different levels cannot be merged")
    clips, offset = [], 0
    for part in parts:
        clips.append(part.clips + offset)
        offset += int(part.clips.max()) + 1 if part.frames else 0
    return CoverageData(
        levels,
        np.concatenate([part.miss_px for part in parts]),
        np.concatenate([part.radii_px for part in parts], axis=1),
        np.concatenate(clips),
    )


def fit_region_calibration(
    data: CoverageData,
    min_radius_px: float = MIN_RADIUS_PX,
    exchangeable: str = "frames",
    provenance: dict | None = None,
) -> RegionCalibration:
    """One factor per level of ``data``: the split-conformal quantile (:func:`~.regions.conformal_quantile`) of the
    scores ``|g - m| / max(r_q, rho)`` at that level, the frames or the clips taken as exchangeable (:mod:`.regions`
    says what each guarantees), raised to the largest quantile of the levels below it so that the regions are
    nested (:mod:`.regions`, "Nested regions"); the quantiles themselves go into the provenance."""
    if exchangeable not in ("frames", "clips"):
        raise ValueError(f"exchangeable must be 'frames' or 'clips', got {exchangeable!r}")
    if data.frames == 0:
        raise ValueError("no held-out frames to fit the region on")
    scores = data.scores(min_radius_px)
    clips = data.clips if exchangeable == "clips" else None
    quantiles = [conformal_quantile(scores[i], level, clips) for i, level in enumerate(data.levels)]
    factors = tuple(float(factor) for factor in np.maximum.accumulate(quantiles))
    provenance = {**(provenance or {}), "conformal_quantiles": quantiles}
    return RegionCalibration(data.levels, factors, float(min_radius_px), exchangeable, provenance)


def fit_region_scale(data: CoverageData) -> float:
    """The one scale ``s`` whose regions ``s r_q`` hold the truth closest to a share ``q`` of the frames, averaged
    over the levels (a version-1 calibration; the smallest such ``s``; coverage only changes at the ratios
    themselves, so they are the candidates, searched exactly)."""
    if data.frames == 0:
        raise ValueError("no held-out frames to fit the region scale on")
    ratios = data.ratios
    finite = np.unique(ratios[np.isfinite(ratios) & (ratios > 0)])
    if finite.size == 0:
        return 1.0  # every truth exactly on its point estimate or unreachable: no scale does better
    sorted_ratios = np.sort(ratios, axis=1)
    covered = np.stack([np.searchsorted(row, finite, side="right") for row in sorted_ratios]) / data.frames
    gaps = np.abs(covered - np.asarray(data.levels)[:, None]).mean(axis=0)
    return float(finite[int(np.argmin(gaps))])


def calibration_gap(data: CoverageData, calibration: RegionCalibration | float | None = None) -> float:
    """The mean over the levels of ``|coverage(q) - q|``."""
    return float(np.abs(data.coverage(calibration) - np.asarray(data.levels)).mean())


def reliability_table(
    data: CoverageData, calibration: RegionCalibration | float | None = None
) -> list[dict[str, float]]:
    """One row per level: ``nominal`` q, ``raw`` coverage of the uncalibrated region (the spread ``r_q``) and, given
    a calibration, its ``factor`` and ``calibrated`` coverage; ``interval``: the clip-bootstrap interval
    (:meth:`CoverageData.coverage_interval`) of the last observed coverage of the row (the calibrated one where
    there is one)."""
    calibration = as_region_calibration(calibration)
    raw = data.coverage(None)
    calibrated = data.coverage(calibration) if calibration is not None else None
    intervals = data.coverage_interval(calibration)
    rows = []
    for index, level in enumerate(data.levels):
        row = {"nominal": level, "raw": float(raw[index])}
        if calibration is not None:
            row["factor"] = float(calibration.factor_for(level)[1])
            row["calibrated"] = float(calibrated[index])
        row["interval"] = [float(intervals[index, 0]), float(intervals[index, 1])]
        rows.append(row)
    return rows


__all__ = [
    "SPREAD_LEVELS",
    "REGION_LEVELS",
    "MODE_NEIGHBOUR_SHARE",
    "MODE_MIN_SHARE",
    "GazeUncertainty",
    "CoverageData",
    "radius_quantiles",
    "spread_radii",
    "mode_bandwidth",
    "mean_shift",
    "count_modes",
    "as_region_calibration",
    "describe_uncertainty",
    "check_region_scale",
    "coverage_ratios",
    "merge_coverage",
    "fit_region_calibration",
    "fit_region_scale",
    "calibration_gap",
    "reliability_table",
]
