"""Significance between two methods: a paired Wilcoxon signed-rank test on frame-level scores (paper Appendix E.3,
"Significance testing": frame-level paired observations, since these scores are heavy-tailed)."""

from __future__ import annotations

import dataclasses
from typing import Literal

import numpy as np

from .protocol_records import EvaluationResult


@dataclasses.dataclass
class WilcoxonResult:
    """Paired Wilcoxon signed-rank test on matched per-frame scores (paper Appendix E.3, "Significance testing")."""

    metric: str
    statistic: float
    pvalue: float
    num_pairs: int
    median_difference: float


def paired_wilcoxon(
    a: EvaluationResult,
    b: EvaluationResult,
    metric: str,
    alternative: Literal["two-sided", "greater", "less"] = "two-sided",
) -> WilcoxonResult:
    """Paired Wilcoxon signed-rank test (``scipy.stats.wilcoxon``) of ``metric`` between two methods, frames matched
    by ``(clip_id, slot)``. Both results must cover the same frames. ``median_difference`` is median(a - b)."""
    from scipy.stats import wilcoxon

    if metric not in a.frame_scores or metric not in b.frame_scores:
        raise ValueError(f"metric must be one of {sorted(a.frame_scores)}, got {metric!r}")
    index_b = {key: i for i, key in enumerate(b.frame_keys)}
    if set(index_b) != set(a.frame_keys):
        only_a = len(set(a.frame_keys) - set(index_b))
        only_b = len(set(index_b) - set(a.frame_keys))
        raise ValueError(
            f"the two results cover different frames ({only_a} only in a, {only_b} only in b); "
            f"evaluate both methods on the same clips"
        )
    order = np.asarray([index_b[key] for key in a.frame_keys], dtype=np.int64)
    x = np.asarray(a.frame_scores[metric], dtype=np.float64)
    y = np.asarray(b.frame_scores[metric], dtype=np.float64)[order]
    keep = ~(np.isnan(x) | np.isnan(y))
    if keep.sum() < 1:
        raise ValueError(f"no paired frames with a defined {metric!r}")
    res = wilcoxon(x[keep], y[keep], alternative=alternative)
    return WilcoxonResult(
        metric, float(res.statistic), float(res.pvalue), int(keep.sum()), float(np.median(x[keep] - y[keep]))
    )


__all__ = ["WilcoxonResult", "paired_wilcoxon"]
