"""Fast per-frame scoring of native-resolution maps for the evaluator (same numbers as ``saliency.py``, fewer passes).

A 640x480 map has 307,200 pixels and EGTEA has about 16,000 protocol frames: scoring each metric with its own
full-size temporaries (``saliency.py``, the readable reference) costs tens of passes over every map. This module
computes the same quantities with a handful of passes, using two exact shortcuts:

* The ground-truth map is separable (``G = g_y g_x^T / Z``), so ``sum(P G)`` is one matrix-vector product, and
  ``sum(G)``, ``sum(G^2)``, its minimum and the binary disc come from the two profiles.
* Counting pixels above a threshold (F1's ``#{P' > t}`` for 11 thresholds) and AUC-Judd's expected count of pixels
  above the fixated value under MIT's jitter use per-block minima and maxima (8x8 blocks): a block entirely above or
  below a threshold (for AUC: more than the jitter away from the fixated value) counts wholesale, a flat block counts
  its one value's probability, and only blocks that straddle it are compared pixel by pixel. Min-max normalisation
  is monotone, so the block decision on ``P'`` uses the block's extreme values through the very same float
  operations: the counts are exact.

KL and SIM are summed over the window where the ground-truth Gaussian exceeds ``1e-12`` of its peak (a box of
about 7.4 sigma around the gaze point); outside it the terms are bounded by the Gaussian's tail mass
(``4 * 37 * 1e-12``), far below the float32 resolution of the sums. The tests pin every output against the reference
functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..models.gazeflow.geometry import unit_to_pixels
from . import heatmaps as hm
from . import jitter as jit
from . import saliency as sal

WINDOW_LEVEL = 1e-12
"""KL and SIM are summed where the peak-1 ground-truth profiles exceed this level on both axes."""

_BLOCK_SIZES = (8, 4, 2, 1)


def _block_size(height: int, width: int) -> int:
    return next(b for b in _BLOCK_SIZES if height % b == 0 and width % b == 0)


def _span(profile: torch.Tensor, level: float) -> tuple[int, int]:
    """First and one-past-last index where ``profile > level`` (the profile is unimodal)."""
    idx = torch.nonzero(profile > level).reshape(-1)
    if idx.numel() == 0:  # a Gaussian centred in the frame always has its peak pixel above any level < 0.6
        k = int(torch.argmax(profile))
        return k, k + 1
    return int(idx[0]), int(idx[-1]) + 1


def _count_above(values: torch.Tensor, thresholds: torch.Tensor) -> torch.Tensor:
    """``#{v > t}`` for each threshold (exact): bucket = ``#{t < v}``, then a reversed cumulative count."""
    buckets = torch.bucketize(values, thresholds, right=False)
    histogram = torch.bincount(buckets, minlength=thresholds.numel() + 1).double()
    return histogram.flip(0).cumsum(0).flip(0)[1:]


def _gather_blocks(
    maps: torch.Tensor, size: int, frame: torch.Tensor, block_row: torch.Tensor, block_column: torch.Tensor
) -> torch.Tensor:
    """Pixels of the blocks ``(frame, block_row, block_column)`` of ``maps [F, H, W]`` as ``[n, size * size]`` (one
    take)."""
    height, width = maps.shape[-2:]
    first_pixel = frame * (height * width) + block_row * (size * width) + block_column * size
    offsets = (torch.arange(size).unsqueeze(-1) * width + torch.arange(size)).reshape(-1)
    return torch.take(maps, first_pixel.unsqueeze(-1) + offsets)


class NativeFrameScorer:
    """Scores the kept frames of one clip: maps ``[F, H, W]`` against ground-truth points ``[F, 2]``.

    Returns per-frame AUC-Judd, NSS (ddof 1), CC, KL, SIM, AAE (centre of mass) and the precision/recall counts per
    threshold, as ``saliency.py`` defines them on ``heatmaps.py``'s ground truth. Every score depends only on the
    map's shape, not its scale: AUC-Judd is the expectation of MIT's jitter at peak-1 scale (``auc_judd(maps,
    ties="expected", jitter=1e-7 * max)``) and F1/P/R threshold the plain min-max normalised map
    (``minmax_normalize``, no epsilon).
    """

    def __init__(self, sigma_px: float, thresholds, fov_deg: float, camera: Any = None) -> None:
        self.sigma_px = float(sigma_px)
        self.thresholds = np.asarray(thresholds, dtype=np.float64)
        self.fov_deg = float(fov_deg)
        self.camera = camera  # the AAE camera (saliency.angular_error); None: the pinhole of fov_deg
        self._work: tuple[torch.Tensor, torch.Tensor] | None = None

    def _buffers(self, size: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """Two reusable work buffers of at least ``size`` elements (fresh large allocations are slow)."""
        if self._work is None or self._work[0].numel() < size or self._work[0].dtype != dtype:
            self._work = (torch.empty(size, dtype=dtype), torch.empty(size, dtype=dtype))
        return self._work

    def _kl_sim(
        self,
        saliency_map: torch.Tensor,
        x_profile: torch.Tensor,
        y_profile: torch.Tensor,
        normaliser: float,
        truth_minimum: float,
        total: float,
        map_min: float,
        varies: bool,
    ) -> tuple[float, float]:
        """KL and SIM of one frame, summed over the window where the ground truth is not negligible, in place, in
        the map's dtype (the sums are then taken in float64)."""
        pixel_count = saliency_map.numel()
        top, bottom = _span(y_profile, WINDOW_LEVEL)
        left, right = _span(x_profile, WINDOW_LEVEL)
        window_height, window_width = bottom - top, right - left
        first_buffer, second_buffer = self._buffers(window_height * window_width, saliency_map.dtype)
        truth = first_buffer[: window_height * window_width].view(window_height, window_width)
        work = second_buffer[: window_height * window_width].view(window_height, window_width)
        torch.mul(
            y_profile[top:bottom, None].to(saliency_map.dtype),
            (x_profile[left:right] / normaliser).to(saliency_map.dtype)[None, :],
            out=truth,
        )  # sum-1 truth
        window = saliency_map[top:bottom, left:right]
        # KL: sum g * log(eps + g / (p / sum(p) + eps))
        torch.mul(window, 1.0 / total if total > 0 else 0.0, out=work).add_(sal.MIT_EPS)  # MIT: all-zero stays zero
        torch.div(truth, work, out=work).add_(sal.MIT_EPS).log_()
        kl = float(torch.dot(truth.view(-1), work.view(-1)))  # float32 sums use cascade summation: ~1e-7 relative
        # SIM: sum min(minmax(p) / sum, minmax(g) / sum); both sums are known in closed form
        if varies:
            torch.sub(window, map_min, out=work).mul_(1.0 / (total - pixel_count * map_min))
        else:
            work.fill_(1.0 / pixel_count)
        truth.sub_(truth_minimum).mul_(1.0 / (1.0 - pixel_count * truth_minimum))
        torch.minimum(truth, work, out=work)
        return kl, float(work.sum())

    def score(
        self, maps: torch.Tensor, gaze: np.ndarray, width: int, height: int, camera: Any = None
    ) -> dict[str, torch.Tensor]:
        """Scores of ``maps [F, height, width]`` (finite, non-negative; checked by the caller) against the unit
        gaze points ``gaze [F, 2]``: per-frame ``auc``, ``nss``, ``cc``, ``kl``, ``sim``, ``aae`` ``[F]`` and the
        counts ``tp``, ``predicted`` ``[F, thresholds]`` and ``positives`` ``[F]`` (float64). ``camera``: the AAE's
        camera for these frames (a clip's own), instead of the scorer's."""
        if tuple(maps.shape[1:]) != (height, width):
            raise ValueError(f"maps must be {height}x{width} (native), got {maps.shape[1]}x{maps.shape[2]}")
        maps = maps.contiguous()
        truth = _GroundTruth.of(gaze, width, height, self.sigma_px)
        sums = _MapSums.of(maps, truth)
        extremes = _BlockExtremes.of(maps)
        frame_indices = torch.arange(maps.shape[0])
        fixated_values = maps[frame_indices, truth.fixation[:, 1], truth.fixation[:, 0]]  # [F] in the map's dtype
        nss, cc = _nss_and_cc(sums, fixated_values, extremes, height * width)
        thresholds = torch.as_tensor(self.thresholds).to(maps.dtype)  # compared in the map's dtype, as GLC does
        true_positives, positives, kl, sim = self._disc_counts_and_divergences(maps, truth, sums, extremes, thresholds)
        return {
            "auc": _expected_auc_judd(maps, fixated_values, extremes),
            "nss": nss,
            "cc": cc,
            "kl": kl,
            "sim": sim,
            "aae": self._centre_of_mass_error(sums, truth, width, height, self.camera if camera is None else camera),
            "tp": true_positives,
            "predicted": _predicted_positive_counts(maps, extremes, thresholds),
            "positives": positives,
        }

    def _centre_of_mass_error(
        self, sums: _MapSums, truth: _GroundTruth, width: int, height: int, camera: Any
    ) -> torch.Tensor:
        """AAE ``[F]`` of each map's centre of mass (a map of zero mass points at the frame's centre, as
        ``saliency.predicted_point`` does)."""
        pixel_centres_x = torch.arange(width, dtype=torch.float64) + 0.5
        pixel_centres_y = torch.arange(height, dtype=torch.float64) + 0.5
        mass = torch.where(sums.total > 0, sums.total, torch.ones_like(sums.total))
        centre = torch.stack(
            ((sums.columns * pixel_centres_x).sum(-1) / mass, (sums.rows * pixel_centres_y).sum(-1) / mass), -1
        )
        centre[sums.total <= 0] = torch.tensor([width / 2, height / 2], dtype=centre.dtype)
        return sal.angular_error(centre, truth.gaze_pixels, width, height, self.fov_deg, camera)

    def _disc_counts_and_divergences(
        self,
        maps: torch.Tensor,
        truth: _GroundTruth,
        sums: _MapSums,
        extremes: _BlockExtremes,
        thresholds: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Frame by frame: the true positives ``[F, thresholds]`` inside the binary disc (counted in its bounding
        box, ``heatmaps.binary_gt_masks``' rule), the disc's pixel count ``[F]``, KL and SIM ``[F]``."""
        frames = maps.shape[0]
        true_positives = torch.zeros(frames, thresholds.numel(), dtype=torch.float64)
        positives = torch.zeros(frames, dtype=torch.float64)
        kl = torch.zeros(frames, dtype=torch.float64)
        sim = torch.zeros(frames, dtype=torch.float64)
        truth_minimum = truth.x_profile.amin(-1) * truth.y_profile.amin(-1) / truth.normaliser  # of the sum-1 map
        for frame in range(frames):
            x_profile, y_profile = truth.x_profile[frame], truth.y_profile[frame]
            top, bottom = _span(y_profile, hm.GLC_BINARY_LEVEL)
            left, right = _span(x_profile, hm.GLC_BINARY_LEVEL)
            disc = (y_profile[top:bottom, None] * x_profile[None, left:right]) > hm.GLC_BINARY_LEVEL
            normalised_box = (maps[frame, top:bottom, left:right] - extremes.map_min[frame]) / extremes.span[frame]
            true_positives[frame] = _count_above(normalised_box[disc], thresholds)
            positives[frame] = disc.sum()
            kl[frame], sim[frame] = self._kl_sim(
                maps[frame],
                x_profile,
                y_profile,
                float(truth.normaliser[frame]),
                float(truth_minimum[frame]),
                float(sums.total[frame]),
                float(extremes.map_min[frame]),
                bool(extremes.map_max[frame] > extremes.map_min[frame]),
            )
        return true_positives, positives, kl, sim


@dataclass(frozen=True)
class _GroundTruth:
    """The separable ground truth of each frame: the map is ``y_profile x_profile^T / normaliser`` (sum 1), from
    peak-1 Gaussian profiles ``x_profile [F, W]`` and ``y_profile [F, H]`` (float64) around ``gaze_pixels [F, 2]``;
    ``fixation [F, 2]`` is the fixated pixel (x, y)."""

    gaze_pixels: torch.Tensor
    x_profile: torch.Tensor
    y_profile: torch.Tensor
    normaliser: torch.Tensor
    fixation: torch.Tensor

    @classmethod
    def of(cls, gaze: np.ndarray, width: int, height: int, sigma_px: float) -> _GroundTruth:
        unit_gaze = torch.from_numpy(np.asarray(gaze, dtype=np.float64))
        gaze_pixels = unit_to_pixels(unit_gaze, width, height)
        x_profile = hm.gaussian_profiles(gaze_pixels[:, 0], width, sigma_px)
        y_profile = hm.gaussian_profiles(gaze_pixels[:, 1], height, sigma_px)
        return cls(
            gaze_pixels,
            x_profile,
            y_profile,
            x_profile.sum(-1) * y_profile.sum(-1),
            hm.fixation_pixels(unit_gaze, width, height),
        )


@dataclass(frozen=True)
class _MapSums:
    """Per frame (float64): the map's row sums ``[F, H]``, column sums ``[F, W]``, total, sum of squares, sum of the
    map times the sum-1 ground truth, and the ground truth's sum of squares ``[F]``."""

    rows: torch.Tensor
    columns: torch.Tensor
    total: torch.Tensor
    squares: torch.Tensor
    times_truth: torch.Tensor
    truth_squares: torch.Tensor

    @classmethod
    def of(cls, maps: torch.Tensor, truth: _GroundTruth) -> _MapSums:
        """Rows, columns and squares in a few passes; sum(P G) by one matrix-vector product per frame (the ground
        truth is separable)."""
        frames = maps.shape[0]
        rows = maps.sum(-1).double()
        squares = torch.linalg.vector_norm(maps.reshape(frames, -1), dim=-1).double() ** 2
        map_times_x_profile = torch.stack(
            [torch.mv(maps[frame], truth.x_profile[frame].to(maps.dtype)) for frame in range(frames)]
        )  # [F, H] (faster than one bmm)
        normaliser = truth.normaliser
        return cls(
            rows=rows,
            columns=maps.sum(-2).double(),
            total=rows.sum(-1),
            squares=squares,
            times_truth=(map_times_x_profile.double() * truth.y_profile).sum(-1) / normaliser,
            truth_squares=(truth.x_profile * truth.x_profile).sum(-1)
            * (truth.y_profile * truth.y_profile).sum(-1)
            / (normaliser * normaliser),
        )


@dataclass(frozen=True)
class _BlockExtremes:
    """Each map's minimum and maximum over blocks of ``size x size`` pixels (``[F, H / size, W / size]``), and over
    the whole map ``[F]``; ``span`` is ``map_max - map_min``, 1 for a constant map (which normalises to 0)."""

    size: int
    block_min: torch.Tensor
    block_max: torch.Tensor
    map_min: torch.Tensor
    map_max: torch.Tensor
    span: torch.Tensor

    @classmethod
    def of(cls, maps: torch.Tensor) -> _BlockExtremes:
        frames, height, width = maps.shape
        size = _block_size(height, width)
        # rows first (a contiguous elementwise reduction), then the small remainder
        row_blocks = maps.view(frames, height // size, size, width)
        block_max = row_blocks.amax(2).view(frames, height // size, width // size, size).amax(-1)
        block_min = row_blocks.amin(2).view(frames, height // size, width // size, size).amin(-1)
        map_min, map_max = block_min.amin(dim=(1, 2)), block_max.amax(dim=(1, 2))
        span = torch.where(map_max > map_min, map_max - map_min, torch.ones_like(map_max))
        return cls(size, block_min, block_max, map_min, map_max, span)

    @property
    def block_area(self) -> float:
        return float(self.size * self.size)


def _nss_and_cc(
    sums: _MapSums, fixated_values: torch.Tensor, extremes: _BlockExtremes, pixel_count: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """NSS (ddof 1; 0 for a constant map) and CC ``[F]`` from the sums alone."""
    mean = sums.total / pixel_count
    map_variance = torch.where(
        extremes.map_max > extremes.map_min, (sums.squares - sums.total * sums.total / pixel_count).clamp_min(0.0), 0.0
    )  # a constant map has no variance
    std = torch.sqrt(map_variance / (pixel_count - 1))
    nss = torch.where(std > 0, (fixated_values.double() - mean) / torch.where(std > 0, std, 1.0), 0.0)
    truth_variance = (sums.truth_squares - 1.0 / pixel_count).clamp_min(0.0)
    denominator = torch.sqrt(map_variance * truth_variance)
    cc = torch.where(
        denominator > 0,
        (sums.times_truth - sums.total / pixel_count) / torch.where(denominator > 0, denominator, 1.0),
        torch.zeros_like(denominator),
    )
    return nss, cc


def _expected_auc_judd(maps: torch.Tensor, fixated_values: torch.Tensor, extremes: _BlockExtremes) -> torch.Tensor:
    """AUC-Judd ``[F]``: the expectation of MIT's jitter (``jitter.py``) of 1e-7 of the map's peak (the scale MIT's
    maps, images in [0, 1], come at). Blocks entirely more than the jitter above (below) the fixated value count 1
    (0) per pixel, flat blocks count their one probability per pixel, the rest are computed pixel by pixel."""
    frames, height, width = maps.shape
    fixated = fixated_values.double().view(frames, 1, 1)
    band = (jit.MIT_JITTER * extremes.map_max.double()).view(frames, 1, 1)
    block_min, block_max = extremes.block_min.double(), extremes.block_max.double()
    flat_blocks = extremes.block_min == extremes.block_max
    whole_above = block_min > fixated + band
    whole_below = block_max < fixated - band
    expected_above = whole_above.sum(dim=(1, 2)).double() * extremes.block_area
    frame, block_row, block_column = torch.nonzero(flat_blocks & ~whole_above & ~whole_below, as_tuple=True)
    if frame.numel():
        probabilities = (
            jit.above_probability(
                block_min[frame, block_row, block_column] - fixated.view(frames)[frame], band.view(frames)[frame]
            )
            * extremes.block_area
        )
        expected_above += torch.zeros(frames, dtype=torch.float64).index_add_(0, frame, probabilities)
    frame, block_row, block_column = torch.nonzero(~(whole_above | whole_below | flat_blocks), as_tuple=True)
    if frame.numel():
        values = _gather_blocks(maps, extremes.size, frame, block_row, block_column).double()  # [n, size^2]
        probabilities = jit.above_probability(values - fixated.view(frames, 1)[frame], band.view(frames, 1)[frame]).sum(
            -1
        )
        expected_above += torch.zeros(frames, dtype=torch.float64).index_add_(0, frame, probabilities)
    return 1.0 - 0.5 * (expected_above - 0.5) / (height * width - 1)  # the fixated pixel ties with itself: 1/2


def _predicted_positive_counts(maps: torch.Tensor, extremes: _BlockExtremes, thresholds: torch.Tensor) -> torch.Tensor:
    """F1's ``#{P' > t}`` ``[F, thresholds]`` for the min-max normalised map P' (``saliency.minmax_normalize``'s
    float operations, applied to the block extremes). A block lies entirely above t_j for j < #{t < its min} and
    entirely at or below it for j >= #{t < its max}; in between it straddles t_j and its pixels are compared one by
    one."""
    frames, _, width = maps.shape
    count = thresholds.numel()
    map_min, span = extremes.map_min.view(frames, 1, 1), extremes.span.view(frames, 1, 1)
    normalised_min = (extremes.block_min - map_min) / span
    normalised_max = (extremes.block_max - map_min) / span
    first = torch.bucketize(normalised_min.reshape(frames, -1), thresholds, right=False)  # [F, blocks]
    last = torch.bucketize(normalised_max.reshape(frames, -1), thresholds, right=False)
    whole = torch.bincount(
        (first + (torch.arange(frames) * (count + 1)).unsqueeze(-1)).view(-1), minlength=frames * (count + 1)
    )
    predicted = whole.view(frames, count + 1).flip(-1).cumsum(-1).flip(-1)[:, 1:].double() * extremes.block_area
    frame, block = torch.nonzero(last > first, as_tuple=True)  # blocks straddling at least one threshold
    if frame.numel():
        blocks_per_row = width // extremes.size
        values = _gather_blocks(maps, extremes.size, frame, block // blocks_per_row, block % blocks_per_row)
        normalised = (values - map_min.view(frames, 1)[frame]) / span.view(frames, 1)[frame]
        # per block, #{pixels > t_j} for every j from one bucketize: bucket = #{t < v}, counted per block
        buckets = torch.bucketize(normalised, thresholds, right=False) + (
            torch.arange(frame.numel()) * (count + 1)
        ).unsqueeze(-1)
        histogram = torch.bincount(buckets.view(-1), minlength=frame.numel() * (count + 1)).view(-1, count + 1)
        threshold_index = torch.arange(count)
        straddled = (threshold_index >= first[frame, block].unsqueeze(-1)) & (
            threshold_index < last[frame, block].unsqueeze(-1)
        )  # [n, thresholds]
        hits = histogram.flip(-1).cumsum(-1).flip(-1)[:, 1:] * straddled
        predicted += torch.zeros(frames, count, dtype=torch.float64).index_add_(0, frame, hits.double())
    return predicted


__all__ = ["NativeFrameScorer", "WINDOW_LEVEL"]
