"""The two prior-only baselines (paper Section 4.1, "Simple Priors", and Appendix E.2, "Prior-only references").

* :class:`CenterBias`: a static 2D Gaussian at the image centre whose per-axis standard deviation is the fixation
  spread of the train split; as a trajectory model it always predicts the centre.
* :class:`RandomWalk`: a first-order Markov prior: the next point is the previous frame's ground-truth gaze (the
  clip's centroid at t = 0) plus isotropic Gaussian noise whose sigma matches the train split's frame-to-frame
  displacement. It sees no video.

Both fit on train clips in the unified schema (``gaze`` unit [T, 2], ``gaze_type``, ``valid``, ``width``,
``height``) and return :class:`~transformers_gazeflow.metrics.protocol_records.ClipPrediction` objects that
:class:`~transformers_gazeflow.metrics.protocol.GazeEvaluator` scores like any model.

What beating them means (one home for the recipe panel's test-time success and the training run's check on its
validation clips): :func:`beats_center_bias`, an AAE at most :data:`SUCCESS_AAE_RATIO` times Center Bias's, a clear
margin (a fifth less angular error) rather than any improvement, since a model that reads nothing of the video but the
gaze statistics already matches Center Bias; :func:`beats_both_priors`, the stricter bar: better than Center Bias and
the free Random Walk on AUC, F1 and AAE at once.
"""

from __future__ import annotations

import dataclasses
import math
import zlib
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import torch

from ..data.gaze_types import FIXATION
from ..models.gazeflow.geometry import clamp_unit, pixels_to_unit, unit_to_pixels
from .heatmaps import render_gaussian_map
from .protocol_records import ClipGroundTruth, ClipPrediction


def _clips(clips: Iterable[Any]) -> Iterable[ClipGroundTruth]:
    for i, c in enumerate(clips):
        yield ClipGroundTruth.from_any(c, where=f"train clip {i}", window=None)  # fit on every frame


@dataclasses.dataclass
class CenterBias:
    """Center Bias prior: a Gaussian at the frame centre with per-axis spread ``sigma_unit = (sx, sy)`` (fractions of
    the frame's width and height)."""

    sigma_unit: tuple[float, float]

    @classmethod
    def fit(cls, train_clips: Iterable[Any], fixations_only: bool = True) -> "CenterBias":
        """Per-axis standard deviation (about the mean) of the train split's gaze points, in unit coordinates.

        ``fixations_only`` keeps fixation frames (unified code 1), else every valid frame.
        """
        pts = []
        for gt in _clips(train_clips):
            keep = gt.gaze_type == FIXATION if fixations_only else gt.valid
            pts.append(gt.gaze[keep])
        allpts = np.concatenate(pts) if pts else np.zeros((0, 2))
        if allpts.shape[0] < 2:
            raise ValueError(
                f"train_clips must hold at least 2 {'fixation' if fixations_only else 'valid'} frames, "
                f"got {allpts.shape[0]}"
            )
        sx, sy = allpts.std(axis=0)
        if sx <= 0 or sy <= 0:
            raise ValueError(f"the train gaze has no spread on one axis (std {sx:.3g}, {sy:.3g})")
        return cls((float(sx), float(sy)))

    def heatmap(self, width: int, height: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The static prior map ``[height, width]`` (peak 1)."""
        return render_gaussian_map(
            (0.5, 0.5), (self.sigma_unit[0] * width, self.sigma_unit[1] * height), width, height, dtype
        )

    def predict(self, ground_truth: Any) -> ClipPrediction:
        """The prediction for a clip: the static map for every frame and the constant centre trajectory."""
        gt = ClipGroundTruth.from_any(ground_truth)
        traj = np.full((1, gt.gaze.shape[0], 2), 0.5)
        return ClipPrediction(trajectories=traj, heatmaps=self.heatmap(gt.width, gt.height))


def clip_seed(seed: int, clip_id: str) -> int:
    """The random seed of one clip: from ``seed`` and the clip id, so a clip's noise does not depend on the order
    or batching of clips (used by the Random Walk prior and by model evaluation)."""
    return (seed * 1_000_003 + zlib.crc32(clip_id.encode("utf-8"))) % (2**63 - 1)


RANDOM_WALK_ANCHORS = ("ground_truth", "free")


@dataclasses.dataclass
class RandomWalk:
    """Random Walk prior: isotropic Gaussian steps of ``sigma_px`` (native px), fitted on train displacements.

    Two readings of the paper's description (Appendix E.2) are offered, and evaluation reports say which was used:

    * ``anchor="ground_truth"``: the paper's wording. Frame t is drawn around the previous frame's ground truth,
      ``x_t = g_{t-1} + N(0, sigma^2 I)`` (the clip centroid at t = 0). Every step restarts from the truth, so on
      data whose gaze moves little between frames it is close to an oracle.
    * ``anchor="free"``: a free-running first-order Markov walk, ``x_t = x_{t-1} + N(0, sigma^2 I)`` from
      ``x_0 = `` the clip centroid plus the same noise, clamped into the frame at each step; after t = 0 it uses no
      ground truth. (The paper's published Random Walk figures, below Center Bias in AUC, behave like this one.)
    """

    sigma_px: float
    anchor: str = "ground_truth"

    def __post_init__(self) -> None:
        if self.anchor not in RANDOM_WALK_ANCHORS:
            raise ValueError(f"RandomWalk anchor must be one of {RANDOM_WALK_ANCHORS}, got {self.anchor!r}")

    @classmethod
    def fit(cls, train_clips: Iterable[Any], anchor: str = "ground_truth") -> "RandomWalk":
        """Isotropic sigma from the train split's frame-to-frame steps over valid consecutive frames (native px):
        the maximum-likelihood ``sqrt(mean(dx^2 + dy^2) / 2)`` of a zero-mean 2D Gaussian step."""
        sq, n = 0.0, 0
        for gt in _clips(train_clips):
            px = unit_to_pixels(gt.gaze, gt.width, gt.height)
            keep = gt.valid[1:] & gt.valid[:-1]
            d = np.diff(px, axis=0)[keep]
            sq += float((d * d).sum())
            n += int(keep.sum())
        if n == 0:
            raise ValueError("train_clips have no pair of valid consecutive frames to fit the step sigma")
        return cls(math.sqrt(sq / n / 2.0), anchor)

    def sample(self, ground_truth: Any, num_samples: int = 50, seed: int = 0) -> np.ndarray:
        """``[K, T, 2]`` unit trajectories for a clip; the noise is seeded by ``seed`` and the clip id, so a clip gets
        the same samples whatever order clips come in."""
        if num_samples < 1:
            raise ValueError(f"num_samples must be >= 1, got {num_samples}")
        gt = ClipGroundTruth.from_any(ground_truth)
        t = gt.gaze.shape[0]
        px = unit_to_pixels(gt.gaze, gt.width, gt.height)
        centroid = px[gt.valid].mean(0) if gt.valid.any() else np.array([gt.width / 2, gt.height / 2])
        rng = np.random.default_rng(clip_seed(seed, gt.clip_id))
        noise = rng.normal(0.0, self.sigma_px, size=(num_samples, t, 2))
        if self.anchor == "free":
            samples = np.empty_like(noise)
            position = np.broadcast_to(centroid, (num_samples, 2))
            upper = np.array([gt.width, gt.height], dtype=np.float64)
            for i in range(t):
                position = np.clip(position + noise[:, i], 0.0, upper)
                samples[:, i] = position
            return pixels_to_unit(samples, gt.width, gt.height)
        prev = np.empty((t, 2))
        last = centroid
        for i in range(t):
            prev[i] = last  # the last valid ground truth before frame i (the centroid before any)
            if gt.valid[i]:
                last = px[i]
        return clamp_unit(pixels_to_unit(prev[None] + noise, gt.width, gt.height))

    def predict(self, ground_truth: Any, num_samples: int = 50, seed: int = 0) -> ClipPrediction:
        """The prediction for a clip as K sampled trajectories."""
        return ClipPrediction(trajectories=self.sample(ground_truth, num_samples, seed))


SUCCESS_AAE_RATIO = 0.8
"""A model succeeds when its AAE is at most this times Center Bias's on the same clips (:func:`beats_center_bias`)."""


def beats_center_bias(aae: float, center_bias_aae: float) -> bool:
    """Whether a model's AAE is at most :data:`SUCCESS_AAE_RATIO` of Center Bias's on the same clips."""
    return aae <= SUCCESS_AAE_RATIO * center_bias_aae


def beats_both_priors(model: Mapping[str, float], *priors: Mapping[str, float]) -> bool:
    """Whether ``model``'s ``auc`` and ``f1`` are above, and its ``aae`` below, every prior's (each a dict of the
    three)."""
    return all(
        model["auc"] > prior["auc"] and model["f1"] > prior["f1"] and model["aae"] < prior["aae"] for prior in priors
    )


__all__ = [
    "CenterBias",
    "RandomWalk",
    "RANDOM_WALK_ANCHORS",
    "SUCCESS_AAE_RATIO",
    "beats_both_priors",
    "beats_center_bias",
    "clip_seed",
]
