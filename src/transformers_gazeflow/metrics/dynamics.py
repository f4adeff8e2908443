"""Temporal-dynamics metrics (paper Section 4.1, "Temporal Dynamics Alignment", and Appendix E.3; spec evaluation.md).

* ADE: mean Euclidean distance between a predicted and the human trajectory over the valid frames.
* DTW: exact dynamic time warping with Euclidean cost (steps (1, 0), (0, 1), (1, 1)), divided by the number of
  valid frames. Both in native pixels (the paper reports them x 10^2 px), per sample, then mean over K and best of K.
* Displacements: per-step ``|g_t - g_{t-1}|`` in native px over valid consecutive frames; mean and median as ratios
  to the human values; Jensen-Shannon divergence (base e) between the two histograms, 100 bins over the union range.

Trajectories are ``[K, T, 2]`` (or ``[T, 2]``) in native pixels here; convert unit coordinates with
``transformers_gazeflow.geometry.unit_to_pixels`` first.
"""

from __future__ import annotations

import numpy as np

JSD_BINS = 100
"""Bins of the displacement histograms (paper Appendix E.3)."""


def _traj(x, name: str) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim == 2:
        a = a[None]
    if a.ndim != 3 or a.shape[-1] != 2 or a.shape[0] < 1:
        raise ValueError(f"{name} must have shape [K, T, 2] or [T, 2], got {np.shape(x)}")
    if not np.isfinite(a).all():
        raise ValueError(f"{name} contains NaN or inf; expected finite pixel coordinates")
    return a


def _valid(valid, num_frames: int) -> np.ndarray:
    if valid is None:
        return np.ones(num_frames, dtype=bool)
    v = np.asarray(valid)
    if v.shape != (num_frames,):
        raise ValueError(f"valid must have shape [T] = [{num_frames}], got {v.shape}")
    return v.astype(bool)


def _pair(pred, human, valid) -> tuple[np.ndarray, np.ndarray]:
    p = _traj(pred, "pred")
    h = _traj(human, "human")
    if h.shape[0] != 1:
        raise ValueError(f"human must be one trajectory [T, 2], got {np.shape(human)}")
    if p.shape[1] != h.shape[1]:
        raise ValueError(f"pred and human must have the same number of frames, got {p.shape[1]} and {h.shape[1]}")
    v = _valid(valid, p.shape[1])
    if not v.any():
        raise ValueError("valid has no valid frame: ADE/DTW are undefined")
    return p[:, v], h[0, v]


def ade(pred, human, valid=None) -> np.ndarray:
    """ADE per sample: mean over valid frames of ``|pred_t - human_t|`` (px). ``pred [K, T, 2]`` -> ``[K]``."""
    p, h = _pair(pred, human, valid)
    return np.linalg.norm(p - h[None], axis=-1).mean(-1)


def dtw(pred, human, valid=None) -> np.ndarray:
    """Length-normalised DTW per sample (px): the minimum total Euclidean cost of a monotone alignment of the valid
    frames (steps (1, 0), (0, 1), (1, 1), from the first to the last frame of both), divided by the number of valid
    frames. ``pred [K, T, 2]`` -> ``[K]``.
    """
    p, h = _pair(pred, human, valid)
    lengths = np.full(p.shape[0], p.shape[1])
    return dtw_batched(p, np.broadcast_to(h, p.shape), lengths)


def dtw_batched(pred: np.ndarray, human: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Exact DTW of many pairs at once: ``pred, human [B, n, 2]`` px, pair ``b`` using its first ``lengths[b]``
    frames; returns the alignment cost divided by ``lengths[b]`` (``[B]``).

    The dynamic programme runs along anti-diagonals, stored skewed so that each step is a few contiguous slices,
    vectorised over B. Cells beyond a pair's length never feed cells inside it, so padding is harmless.
    """
    b, n = pred.shape[:2]
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.shape != (b,) or (lengths < 1).any() or (lengths > n).any():
        raise ValueError(f"lengths must be [B] = [{b}] integers in [1, {n}], got {lengths}")
    # pairwise costs, laid out [i (pred), j (human), B] so that every DP step below reads contiguous blocks
    pt = np.ascontiguousarray(np.moveaxis(pred, 0, -1))  # [n, 2, B]
    ht = np.ascontiguousarray(np.moveaxis(human, 0, -1))
    dx = pt[:, None, 0] - ht[None, :, 0]
    dy = pt[:, None, 1] - ht[None, :, 1]
    cost = np.sqrt(dx * dx + dy * dy)  # [n, n, B] (np.hypot is several times slower)
    # skewed: diagonal d = i + j (0-based cells), position i; cost_s[d, i] = cost[i, d - i]
    d_idx = np.arange(2 * n - 1)[:, None]
    i_idx = np.arange(n)[None, :]
    j_idx = np.clip(d_idx - i_idx, 0, n - 1)
    cost_s = cost[i_idx, j_idx]  # [2n-1, n, B] (cells outside the square are never read)
    acc = np.full((2 * n - 1, n + 1, b), np.inf)  # acc[d, i + 1] for cell (i, d - i); row 0 is a +inf guard
    acc[0, 1] = cost_s[0, 0]
    for d in range(1, 2 * n - 1):
        lo, hi = max(0, d - n + 1), min(n - 1, d)
        best = np.minimum(acc[d - 1, lo + 1 : hi + 2], acc[d - 1, lo : hi + 1])  # (i, j - 1) and (i - 1, j)
        if d >= 2:
            np.minimum(best, acc[d - 2, lo : hi + 1], out=best)  # (i - 1, j - 1)
        np.add(best, cost_s[d, lo : hi + 1], out=acc[d, lo + 1 : hi + 2])
    last = lengths - 1
    return acc[2 * last, last + 1, np.arange(b)] / lengths


def displacements(traj, valid=None) -> np.ndarray:
    """Per-step displacements ``|g_t - g_{t-1}|`` (px) where frames ``t - 1`` and ``t`` are both valid.

    ``traj [K, T, 2]`` or ``[T, 2]`` -> flat array of all samples' steps (K x steps).
    """
    t = _traj(traj, "traj")
    v = _valid(valid, t.shape[1])
    keep = v[1:] & v[:-1]
    steps = np.linalg.norm(np.diff(t, axis=1), axis=-1)  # [K, T-1]
    return steps[:, keep].reshape(-1)


def jensen_shannon(p, q) -> float:
    """Jensen-Shannon divergence (base e) of two histograms (normalised to sum 1 here)."""
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    if p.shape != q.shape or p.ndim != 1:
        raise ValueError(f"histograms must be 1D of the same length, got {p.shape} and {q.shape}")
    if (p < 0).any() or (q < 0).any() or p.sum() <= 0 or q.sum() <= 0:
        raise ValueError("histograms must be non-negative with a positive total")
    p = p / p.sum()
    q = q / q.sum()
    m = 0.5 * (p + q)

    def _kl(a: np.ndarray) -> float:
        nz = a > 0
        return float((a[nz] * np.log(a[nz] / m[nz])).sum())

    return 0.5 * _kl(p) + 0.5 * _kl(q)


def displacement_histograms(pred_disp, human_disp, bins: int = JSD_BINS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Histograms of two displacement sets over ``bins`` equal bins spanning the union of their ranges.

    Returns ``(pred_hist, human_hist, edges)``. A degenerate range (all values equal) gets a unit-wide bin range.
    """
    a = np.asarray(pred_disp, dtype=np.float64).reshape(-1)
    b = np.asarray(human_disp, dtype=np.float64).reshape(-1)
    if a.size == 0 or b.size == 0:
        raise ValueError(f"need displacements on both sides, got {a.size} predicted and {b.size} human")
    lo = min(a.min(), b.min())
    hi = max(a.max(), b.max())
    if hi <= lo:
        hi = lo + 1.0
    edges = np.linspace(lo, hi, bins + 1)
    return np.histogram(a, edges)[0].astype(np.float64), np.histogram(b, edges)[0].astype(np.float64), edges


def displacement_statistics(pred_disp, human_disp, bins: int = JSD_BINS) -> dict[str, float]:
    """Mean and median displacement as ratios to human (pred / human) and the JSD of their histograms.

    Also returns the raw means and medians in px (``*_px``).
    """
    a = np.asarray(pred_disp, dtype=np.float64).reshape(-1)
    b = np.asarray(human_disp, dtype=np.float64).reshape(-1)
    ha, hb, _ = displacement_histograms(a, b, bins)
    mean_a, mean_b = float(a.mean()), float(b.mean())
    med_a, med_b = float(np.median(a)), float(np.median(b))
    return {
        "displacement_mean_ratio": mean_a / mean_b if mean_b > 0 else float("nan"),
        "displacement_median_ratio": med_a / med_b if med_b > 0 else float("nan"),
        "displacement_jsd": jensen_shannon(ha, hb),
        "displacement_mean_px": mean_a,
        "displacement_median_px": med_a,
        "human_displacement_mean_px": mean_b,
        "human_displacement_median_px": med_b,
    }


__all__ = [
    "JSD_BINS",
    "ade",
    "dtw",
    "dtw_batched",
    "displacements",
    "jensen_shannon",
    "displacement_histograms",
    "displacement_statistics",
]
