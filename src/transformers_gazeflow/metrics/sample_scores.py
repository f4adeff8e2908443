"""Proper scoring rules of the K sampled points of a frame against its true gaze: the energy score and the CRPS.

For a frame's samples ``X_1..X_K`` (native pixels) and the true gaze ``y``:

* **energy score** (Gneiting & Raftery 2007): ``ES = E|X - y| - 1/2 E|X - X'|`` with ``|.|`` the Euclidean norm in
  the image plane; lower is better, and it is strictly proper, so only the distribution the gaze is actually drawn
  from minimises its expectation (a sharp set in the wrong place and a spread set around the right place both
  pay). In one dimension it is the CRPS.
* **CRPS** per coordinate: the same with ``|.|`` the absolute difference of the x (or y) coordinates; reported as
  the mean of the two.

Two estimates from K samples, both computed:

* **fair** (Ferro 2014): ``(1/K) sum_k |X_k - y| - 1/(2 K (K - 1)) sum_{j != k} |X_j - X_k|``, the unbiased
  estimate of the score of the distribution the samples are drawn from: its expectation does not depend on K. It is
  the one the tables report, since methods are compared at different K (the model at its K = 16, the Random Walk at
  50).
* **plain**: ``(1/K) sum_k |X_k - y| - 1/(2 K^2) sum_{j, k} |X_j - X_k|``, the exact score of the empirical
  distribution of the K samples; it is larger than the fair estimate by ``E|X - X'| / (2K)`` on average, so it
  favours methods run at larger K.

A single point (K = 1: a regression head, Center Bias's centre) is a point forecast: its distribution is the point
mass, whose spread term is 0, and both estimates are ``|X - y|``.

:func:`sample_scores` averages per frame over the valid frames of a clip, then over clips (each clip counts once,
as the protocol's per-frame metrics).
"""

from __future__ import annotations

import numpy as np

from ..models.gazeflow.geometry import unit_to_pixels


def _points(samples, truth) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(samples, np.float64)
    y = np.asarray(truth, np.float64)
    if x.ndim < 2 or x.shape[0] < 1 or x.shape[1:] != y.shape:
        raise ValueError(f"samples must be [K, ...] over truth {y.shape} with K >= 1, got {x.shape}")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("samples and truth must be finite")
    return x, y


def _score(distance_to_truth: np.ndarray, pairwise: np.ndarray, fair: bool) -> np.ndarray:
    """``distance_to_truth [K, ...]`` and ``pairwise [K, K, ...]`` -> the score ``[...]``."""
    k = distance_to_truth.shape[0]
    accuracy = distance_to_truth.mean(axis=0)
    if k == 1:
        return accuracy  # a point forecast: the point mass has no spread
    pairs = k * (k - 1) if fair else k * k
    return accuracy - pairwise.sum(axis=(0, 1)) / (2.0 * pairs)


def energy_score(samples, truth, fair: bool = True) -> np.ndarray:
    """The energy score of ``samples [K, T, 2]`` against ``truth [T, 2]`` (the same units): ``[T]``, the fair
    estimate or (``fair=False``) the plain one (module docstring)."""
    x, y = _points(samples, truth)
    if x.shape[-1] != 2:
        raise ValueError(f"samples must be points [K, T, 2], got {x.shape}")
    to_truth = np.linalg.norm(x - y[None], axis=-1)
    pairwise = np.linalg.norm(x[:, None] - x[None, :], axis=-1)
    return _score(to_truth, pairwise, fair)


def crps(samples, truth, fair: bool = True) -> np.ndarray:
    """The CRPS of scalar ``samples [K, ...]`` against ``truth [...]``: the energy score in one dimension."""
    x, y = _points(samples, truth)
    return _score(np.abs(x - y[None]), np.abs(x[:, None] - x[None, :]), fair)


SAMPLE_SCORE_KEYS = ("energy_score_fair", "energy_score_plain", "crps_fair", "crps_plain")
"""The keys :func:`clip_sample_scores` and :func:`sample_scores` return (native pixels)."""


def clip_sample_scores(samples_px, truth_px, valid) -> dict[str, float] | None:
    """One clip's mean scores over its ``valid [T]`` frames: ``samples_px [K, T, 2]``, ``truth_px [T, 2]`` in native
    pixels (None when no frame is valid)."""
    valid = np.asarray(valid, bool)
    if not valid.any():
        return None
    x, y = _points(samples_px, truth_px)
    x, y = x[:, valid], y[valid]
    scores = {}
    for fair, name in ((True, "fair"), (False, "plain")):
        scores[f"energy_score_{name}"] = float(energy_score(x, y, fair).mean())
        scores[f"crps_{name}"] = float(crps(x, y, fair).mean())  # the mean over frames and the two coordinates
    return scores


def sample_scores(trajectories, gaze, valid, width: int, height: int) -> dict[str, float]:
    """Energy score and CRPS (fair and plain, native pixels) over a set of clips: each clip's mean over its valid
    frames, then the mean over clips. Per clip, in unit coordinates of a ``width x height`` frame:
    ``trajectories [K, T, 2]``, ``gaze [T, 2]``, ``valid [T]``."""
    trajectories, gaze, valid = list(trajectories), list(gaze), list(valid)
    if not len(trajectories) == len(gaze) == len(valid) or not trajectories:
        raise ValueError(
            f"need one gaze and one valid per clip, at least one clip: {len(trajectories)} trajectories, "
            f"{len(gaze)} gaze, {len(valid)} valid"
        )
    clips = []
    for samples, truth, keep in zip(trajectories, gaze, valid):
        scores = clip_sample_scores(
            unit_to_pixels(np.asarray(samples, np.float64), width, height),
            unit_to_pixels(np.asarray(truth, np.float64), width, height),
            keep,
        )
        if scores is not None:
            clips.append(scores)
    if not clips:
        raise ValueError("no clip has a valid frame")
    return {key: float(np.mean([clip[key] for clip in clips])) for key in SAMPLE_SCORE_KEYS}


__all__ = ["SAMPLE_SCORE_KEYS", "energy_score", "crps", "clip_sample_scores", "sample_scores"]
