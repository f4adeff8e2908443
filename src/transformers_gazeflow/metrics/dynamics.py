"""Temporal-dynamics metrics (paper Section 4.1, "Temporal Dynamics Alignment", and Appendix E.3;
docs/specs/evaluation.md).

* ADE: mean Euclidean distance between a predicted and the human trajectory over the valid frames.
* DTW: exact dynamic time warping with Euclidean cost (steps (1, 0), (0, 1), (1, 1)), divided by the number of
  valid frames. Both in native pixels (the paper reports them x 10^2 px), per sample, then mean over K and best of K.
* Displacements: per-step ``|g_t - g_{t-1}|`` in native px over valid consecutive frames; mean and median as ratios
  to the human values; Jensen-Shannon divergence (base e) between the two histograms, 100 bins over the union range
  (``displacement_jsd``, the paper's, kept for comparability).
* Step-distribution distances that a motionless trajectory cannot game (beyond the paper): the paper's linear bins are
  about 0.4 px wide on 128 px frames, so most human fixation steps share the first bin with a trajectory that never
  moves (which then scores 0.17, better than any sampler). ``displacement_log_jsd`` is the JSD over log-spaced bins: a
  first bin ``[0, floor)`` (``floor = 0.1`` px by default: sub-pixel tracker noise and exact zeros), then ``bins = 50``
  bins with edges ``geomspace(floor, max, bins + 1)`` up to the largest step of either set (the union range), so small
  steps are resolved in proportion to their size. ``displacement_w1_px`` is the Wasserstein-1
  distance between the two step distributions (``integral |F_pred - F_human|``, no bins at all) in px, and
  ``displacement_w1_relative`` the same divided by the human mean step (a motionless trajectory scores exactly 1).
* References for every dynamics table (:func:`motionless_reference`, :func:`human_halves_reference`): the scores of a
  trajectory that never moves, and the floor that sampling noise alone gives: the human steps of alternating clips
  compared with each other.

Trajectories are ``[K, T, 2]`` (or ``[T, 2]``) in native pixels here; convert unit coordinates with
``transformers_gazeflow.models.gazeflow.geometry.unit_to_pixels`` first.
"""

from __future__ import annotations

import numpy as np

JSD_BINS = 100
"""Bins of the displacement histograms (paper Appendix E.3)."""

LOG_JSD_BINS = 50
"""Log-spaced bins of ``displacement_log_jsd`` above the floor (plus the first bin ``[0, floor)``)."""

LOG_BIN_FLOOR_PX = 0.1
"""Upper edge (native px) of the first log-JSD bin ``[0, floor)``, where motionless steps and sub-pixel noise fall."""


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


def _steps(a, b, name_a: str = "pred_disp", name_b: str = "human_disp") -> tuple[np.ndarray, np.ndarray]:
    """Two step sets as sorted float64 copies (one copy each: a method's K x steps can be millions), checked."""
    a = np.array(a, dtype=np.float64).reshape(-1)
    b = np.array(b, dtype=np.float64).reshape(-1)
    if a.size == 0 or b.size == 0:
        raise ValueError(f"need displacements on both sides, got {a.size} in {name_a} and {b.size} in {name_b}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError(f"{name_a} and {name_b} must be finite step lengths")
    a.sort()
    b.sort()
    return a, b


def _median_of_sorted(x: np.ndarray) -> float:
    """``np.median`` of a sorted array, without its copy."""
    return float((x[(x.size - 1) // 2] + x[x.size // 2]) / 2)


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

    The dynamic programme runs along anti-diagonals (cells ``i + j = d``), each a few vectorised operations over
    the diagonal and B, keeping only the last two diagonals in memory. Cells beyond a pair's length never feed cells
    inside it, so padding is harmless; a pair's result is read on its own last diagonal.
    """
    b, n = pred.shape[:2]
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.shape != (b,) or (lengths < 1).any() or (lengths > n).any():
        raise ValueError(f"lengths must be [B] = [{b}] integers in [1, {n}], got {lengths}")
    pred = np.asarray(pred, dtype=np.float64)
    human = np.asarray(human, dtype=np.float64)
    px, py = np.ascontiguousarray(pred[..., 0].T), np.ascontiguousarray(pred[..., 1].T)  # [n, B]
    hx, hy = np.ascontiguousarray(human[..., 0].T), np.ascontiguousarray(human[..., 1].T)
    # acc[i + 1] holds the cost of cell (i, d - i) on diagonal d; the entries just outside a diagonal are +inf
    prev2 = np.full((n + 1, b), np.inf)
    prev1 = np.full((n + 1, b), np.inf)
    cur = np.full((n + 1, b), np.inf)
    work_a, work_b = np.empty((n, b)), np.empty((n, b))  # reused: large temporaries are slow to allocate
    prev1[1] = np.sqrt((px[0] - hx[0]) ** 2 + (py[0] - hy[0]) ** 2)
    out = np.empty(b)
    last_diag = 2 * (lengths - 1)
    done = last_diag == 0
    out[done] = prev1[1, done]
    cols = np.arange(b)
    for d in range(1, 2 * n - 1):
        lo, hi = max(0, d - n + 1), min(n - 1, d)
        m = hi - lo + 1
        a, c = work_a[:m], work_b[:m]
        # Euclidean cost of cells (i, d - i), i = lo..hi
        np.subtract(px[lo : hi + 1], hx[d - hi : d - lo + 1][::-1], out=a)
        np.multiply(a, a, out=a)
        np.subtract(py[lo : hi + 1], hy[d - hi : d - lo + 1][::-1], out=c)
        np.multiply(c, c, out=c)
        np.add(a, c, out=a)
        np.sqrt(a, out=a)
        np.minimum(prev1[lo + 1 : hi + 2], prev1[lo : hi + 1], out=c)  # (i, j - 1) and (i - 1, j)
        np.minimum(c, prev2[lo : hi + 1], out=c)  # (i - 1, j - 1)
        np.add(c, a, out=cur[lo + 1 : hi + 2])
        cur[lo] = np.inf  # the neighbours later diagonals read outside this one's cells
        if hi + 2 <= n:
            cur[hi + 2] = np.inf
        ends = last_diag == d
        if ends.any():
            out[ends] = cur[lengths[ends], cols[ends]]
        prev2, prev1, cur = prev1, cur, prev2
    return out / lengths


def displacements(traj, valid=None) -> np.ndarray:
    """Per-step displacements ``|g_t - g_{t-1}|`` (px) where frames ``t - 1`` and ``t`` are both valid.

    ``traj [K, T, 2]`` or ``[T, 2]`` -> flat array of all samples' steps (K x steps).
    """
    t = _traj(traj, "traj")
    v = _valid(valid, t.shape[1])
    keep = v[1:] & v[:-1]
    steps = np.linalg.norm(np.diff(t, axis=1), axis=-1)  # [K, T-1]
    return steps[:, keep].reshape(-1)


def clip_steps(samples_px, recorded_px, valid) -> tuple[np.ndarray, np.ndarray]:
    """One clip's :func:`displacements` of the samples ``[K, T, 2]`` and of the recorded gaze ``[T, 2]`` (px), as
    ``metrics.protocol.GazeEvaluator`` pools them over clips before :func:`displacement_statistics`: cast to
    float32, so that figures computed elsewhere from these steps equal the evaluator's to the last digit."""
    return (
        displacements(samples_px, valid).astype(np.float32),
        displacements(recorded_px, valid).astype(np.float32),
    )


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
    return _linear_histograms(*_steps(pred_disp, human_disp), bins)


def _linear_histograms(a: np.ndarray, b: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`displacement_histograms` of two sorted arrays."""
    lo = min(a[0], b[0])
    hi = max(a[-1], b[-1])
    if hi <= lo:
        hi = lo + 1.0
    edges = np.linspace(lo, hi, bins + 1)
    return np.histogram(a, edges)[0].astype(np.float64), np.histogram(b, edges)[0].astype(np.float64), edges


def log_bin_edges(pred_disp, human_disp, bins: int = LOG_JSD_BINS, floor_px: float = LOG_BIN_FLOOR_PX) -> np.ndarray:
    """Edges of the log-JSD histograms: ``0``, then ``geomspace(floor_px, max, bins + 1)`` with ``max`` the largest
    step of either set (``bins + 1`` bins in all). If no step reaches past the floor, ``max = 10 * floor_px``."""
    a, b = _steps(pred_disp, human_disp)
    return _log_edges(max(a[-1], b[-1]), bins, floor_px)


def _log_edges(largest: float, bins: int, floor_px: float) -> np.ndarray:
    if bins < 1:
        raise ValueError(f"bins must be >= 1, got {bins}")
    if not (np.isfinite(floor_px) and floor_px > 0):
        raise ValueError(f"floor_px must be a positive number of pixels, got {floor_px}")
    hi = largest if largest > floor_px else 10.0 * floor_px
    return np.concatenate([[0.0], np.geomspace(floor_px, hi, bins + 1)])


def wasserstein1(a, b) -> float:
    """Wasserstein-1 (earth mover's) distance between two empirical 1D distributions, exactly:
    ``integral |F_a(x) - F_b(x)| dx`` over the merged sorted values (the same as ``scipy.stats.wasserstein_distance``).
    Two samples of one distribution shifted by ``c`` are at distance ``|c|``."""
    return _wasserstein1_sorted(*_steps(a, b, "a", "b"))


def _wasserstein1_sorted(a: np.ndarray, b: np.ndarray, chunk: int = 1 << 20) -> float:
    """:func:`wasserstein1` of two sorted float64 arrays, over the merged values in chunks (bounded temporaries)."""
    merged = np.concatenate([a, b])
    merged.sort(kind="stable")  # two sorted runs: a linear merge
    total = 0.0
    for lo in range(0, merged.size - 1, chunk):
        x = merged[lo : min(lo + chunk, merged.size - 1)]
        gap = merged[lo + 1 : lo + 1 + x.size] - x  # F_a - F_b is constant on each gap between merged values
        cdf = np.searchsorted(a, x, side="right") / a.size
        cdf -= np.searchsorted(b, x, side="right") / b.size
        total += float(np.abs(cdf, out=cdf) @ gap)
    return total


def displacement_statistics(
    pred_disp, human_disp, bins: int = JSD_BINS, log_bins: int = LOG_JSD_BINS, floor_px: float = LOG_BIN_FLOOR_PX
) -> dict[str, float]:
    """Step-length statistics of a method against human (module docstring): mean and median as ratios to human
    (pred / human), the paper's linear-bin JSD (``displacement_jsd``), the log-bin JSD (``displacement_log_jsd``),
    the Wasserstein-1 distance in px (``displacement_w1_px``) and over the human mean (``displacement_w1_relative``).

    Also returns the raw means and medians in px (``*_px``). Ratios to a human statistic of 0 (a motionless human
    set) are undefined: NaN.
    """
    a, b = _steps(pred_disp, human_disp)
    ha, hb, _ = _linear_histograms(a, b, bins)
    edges = _log_edges(max(a[-1], b[-1]), log_bins, floor_px)
    la, lb = np.histogram(a, edges)[0].astype(np.float64), np.histogram(b, edges)[0].astype(np.float64)
    mean_a, mean_b = float(a.mean()), float(b.mean())
    med_a, med_b = _median_of_sorted(a), _median_of_sorted(b)
    w1 = _wasserstein1_sorted(a, b)
    return {
        "displacement_mean_ratio": mean_a / mean_b if mean_b > 0 else float("nan"),
        "displacement_median_ratio": med_a / med_b if med_b > 0 else float("nan"),
        "displacement_jsd": jensen_shannon(ha, hb),
        "displacement_log_jsd": jensen_shannon(la, lb),
        "displacement_w1_px": w1,
        "displacement_w1_relative": w1 / mean_b if mean_b > 0 else float("nan"),
        "displacement_mean_px": mean_a,
        "displacement_median_px": med_a,
        "human_displacement_mean_px": mean_b,
        "human_displacement_median_px": med_b,
    }


def motionless_reference(human_disp, **kwargs) -> dict[str, float]:
    """:func:`displacement_statistics` of a trajectory that never moves (every step 0) against ``human_disp``: the
    floor any method must beat. Its W1 is the human mean step (``displacement_w1_relative = 1``), its ratios 0."""
    b = np.asarray(human_disp, dtype=np.float64).reshape(-1)
    return displacement_statistics(np.zeros(max(b.size, 1)), b, **kwargs)


def human_halves_reference(human_disp_per_clip, **kwargs) -> dict[str, float]:
    """:func:`displacement_statistics` of human against human: the steps of clips 0, 2, 4, ... (as the "method")
    against those of clips 1, 3, 5, ... (alternating clips, in the order given). What the statistics read when two
    sets differ only by which clips they hold: no method can be expected to score better.

    ``human_disp_per_clip``: one array of human steps per clip (clips without a step are skipped). Needs at least two
    clips with steps.
    """
    clips = [np.asarray(d, dtype=np.float64).reshape(-1) for d in human_disp_per_clip]
    clips = [d for d in clips if d.size]
    if len(clips) < 2:
        raise ValueError(f"the human-vs-human reference needs at least 2 clips with steps, got {len(clips)}")
    return displacement_statistics(np.concatenate(clips[0::2]), np.concatenate(clips[1::2]), **kwargs)


def trajectory_dynamics(trajectories, gaze, valid, width: int, height: int, bins: int = JSD_BINS) -> dict[str, float]:
    """Dynamics over a set of clips (paper Appendix E.3): ADE and DTW (mean over K and best of K, averaged over
    clips) and the displacement statistics pooled over all clips (absent when no clip has two consecutive valid
    frames). Inputs per clip, in unit coordinates of a ``width x height`` frame: ``trajectories [K, T, 2]``,
    ``gaze [T, 2]``, ``valid [T]``."""
    from ..models.gazeflow.geometry import unit_to_pixels

    trajectories, gaze, valid = list(trajectories), list(gaze), list(valid)
    if not trajectories:
        raise ValueError("trajectories is empty: nothing to evaluate")
    if not len(trajectories) == len(gaze) == len(valid):
        raise ValueError(
            f"need one gaze and one valid per clip: {len(trajectories)} trajectories, {len(gaze)} gaze, "
            f"{len(valid)} valid"
        )
    sums = {"ade_mean": [], "ade_best": [], "dtw_mean": [], "dtw_best": []}
    disp_pred, disp_human = [], []
    for i, (tr, g, v) in enumerate(zip(trajectories, gaze, valid)):
        p = unit_to_pixels(_traj(tr, f"trajectories[{i}]"), width, height)
        h = unit_to_pixels(_traj(g, f"gaze[{i}]")[0], width, height)
        v = np.asarray(v, dtype=bool)
        if not v.any():
            continue
        a, d = ade(p, h, v), dtw(p, h, v)
        sums["ade_mean"].append(a.mean())
        sums["ade_best"].append(a.min())
        sums["dtw_mean"].append(d.mean())
        sums["dtw_best"].append(d.min())
        disp_pred.append(displacements(p, v))
        disp_human.append(displacements(h, v))
    if not sums["ade_mean"]:
        raise ValueError("no clip has a valid frame")
    out = {k: float(np.mean(v)) for k, v in sums.items()}
    pred_d, human_d = np.concatenate(disp_pred), np.concatenate(disp_human)
    if pred_d.size and human_d.size:
        out.update(displacement_statistics(pred_d, human_d, bins))
    return out


def sample_motion(trajectories, gaze, valid, width: int, height: int) -> dict[str, float]:
    """Where a sample set's per-frame steps come from, pooled over clips (inputs as :func:`trajectory_dynamics`'s):
    each sample x^k is the mean trajectory m = mean_k x^k (what the K samples agree on) plus its deviation
    d^k = x^k - m. Medians in pixels over consecutive valid frames: the recorded gaze's step (``human_step_px``), the
    samples' (``sample_step_px``), the mean trajectory's (``mean_step_px``), the deviations' (``deviation_step_px``),
    and the deviation's size per valid frame (``deviation_px``); ``deviation_lag1`` is the lag-1 correlation of the
    deviations over those pairs, sum d_t . d_t+1 / sqrt(sum |d_t|^2 sum |d_t+1|^2) (1: each sample keeps its offset
    from the others; a posterior over where a fixation is keeps it within the fixation)."""
    from ..models.gazeflow.geometry import unit_to_pixels

    steps = {"human": [], "sample": [], "mean": [], "deviation": []}
    sizes, products, before, after = [], 0.0, 0.0, 0.0
    for i, (tr, g, v) in enumerate(zip(trajectories, gaze, valid, strict=True)):
        samples = unit_to_pixels(_traj(tr, f"trajectories[{i}]"), width, height).astype(np.float64)
        human = unit_to_pixels(_traj(g, f"gaze[{i}]")[0], width, height).astype(np.float64)
        v = _valid(v, samples.shape[1])
        pairs = v[1:] & v[:-1]
        mean = samples.mean(axis=0)
        deviation = samples - mean
        for name, series in (
            ("human", human[None]),
            ("sample", samples),
            ("mean", mean[None]),
            ("deviation", deviation),
        ):
            steps[name].append(np.linalg.norm(np.diff(series, axis=1), axis=-1)[:, pairs].ravel())
        sizes.append(np.linalg.norm(deviation, axis=-1)[:, v].ravel())
        first, second = deviation[:, :-1][:, pairs], deviation[:, 1:][:, pairs]
        products += float((first * second).sum())
        before, after = before + float((first**2).sum()), after + float((second**2).sum())
    pooled = {name: np.concatenate(parts) for name, parts in steps.items()}
    if not pooled["human"].size:
        raise ValueError("no clip has two consecutive valid frames")
    out = {f"{name}_step_px": float(np.median(values)) for name, values in pooled.items()}
    out["deviation_px"] = float(np.median(np.concatenate(sizes)))
    out["deviation_lag1"] = products / np.sqrt(before * after) if before > 0 and after > 0 else float("nan")
    return out


__all__ = [
    "JSD_BINS",
    "LOG_JSD_BINS",
    "LOG_BIN_FLOOR_PX",
    "ade",
    "dtw",
    "dtw_batched",
    "displacements",
    "clip_steps",
    "jensen_shannon",
    "displacement_histograms",
    "displacement_statistics",
    "log_bin_edges",
    "wasserstein1",
    "motionless_reference",
    "human_halves_reference",
    "trajectory_dynamics",
    "sample_motion",
]
