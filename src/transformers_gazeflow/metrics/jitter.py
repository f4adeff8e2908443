"""MIT's AUC-Judd jitter, in expectation: the exact expected AUC-Judd under MIT's tie-breaking noise.

MIT's ``AUC_Judd.m`` adds ``rand * 1e-7`` (uniform on ``[0, 1e-7)``) to every pixel of the map before ranking;
``pysaliency``'s ``AUC_Judd(jitter=True)`` adds ``randn * 1e-7``. Values closer than the jitter are then ranked at
random: not only bit-exact ties but every near-tie, e.g. Gaussian tails beyond about 5.7 sigma of a peak-1 map, whose
values are all below ``1e-7``. This module computes the *expectation* of AUC-Judd over that noise, exactly:

* **One fixated value** ``s_f`` **and another value** ``s_j``: the jittered ``s_j`` is at or above the jittered
  ``s_f`` with probability ``F(s_j - s_f)``, the CDF of the difference ``D = e_j - e_f`` of two jitters
  (:func:`above_probability`). For MIT's uniform jitter of width ``a``, ``D`` is triangular on ``[-a, a]`` and
  ``F(x) = (x + a)^2 / (2 a^2)`` on ``[-a, 0]``, ``1 - (a - x)^2 / (2 a^2)`` on ``[0, a]`` (a piecewise-quadratic
  CDF; 0 below, 1 above). For pysaliency's normal jitter of std ``a``, ``F(x) = Phi(x / (a sqrt 2))``. At ``a = 0``
  (no jitter) ``F`` is the step with ``1/2`` at an exact tie.
* **AUC-Judd** (MIT's trapezoid over the fixations' values as thresholds, with (0, 0) and (1, 1) added) of N
  fixations among ``N + M`` pixels equals, once all values are distinct (as jitter makes them),
  ``(1 / (N M)) sum_j [a_j + 1/2 [a_j < N]]`` over the M non-fixated pixels ``j``, ``a_j`` = the number of fixations
  above ``j``. Its expectation needs ``E a_j = sum_f (1 - F(s_j - s_f))`` and ``P(a_j = N)``, the probability that
  every jittered fixation lies above the jittered ``s_j`` (:func:`expected_auc_judd`). For N = 1 this is
  ``1 - fp / 2`` with ``fp = sum_j F(s_j - s_f) / M``.

``P(a_j = N) = E[Q(s_j + e_j)]`` with ``Q(y) = prod_f P(s_f + e_f > y)`` the survival function of the lowest jittered
fixation. For uniform jitter ``Q`` is a piecewise polynomial that vanishes a jitter width above the lowest fixation,
and ``E[Q(s_j + e_j)]`` is its integral over ``[s_j, s_j + a]``, computed exactly by Gauss-Legendre quadrature on each
polynomial piece. For normal jitter it is a Gauss-Hermite quadrature of a smooth integrand (64 nodes: accurate to
about 1e-12).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import torch

MIT_JITTER = 1e-7
"""Width of MIT's uniform jitter (``rand / 10000000`` in ``AUC_Judd.m``), and std of pysaliency's normal one."""

JitterNoise = Literal["uniform", "normal"]
JITTER_NOISES = ("uniform", "normal")
"""``"uniform"``: MIT's ``U(0, a)`` jitter; ``"normal"``: pysaliency's ``N(0, a^2)``."""

NORMAL_CUTOFF = 12.0
"""Beyond this many standard deviations of the jitter difference, a normal-jitter probability is 0 or 1 in float64
(``Phi(-12) = 1.8e-33``)."""

_HERMITE_NODES = 64
_QUADRATURE_CHUNK = 1 << 20


def check_noise(noise: str) -> None:
    if noise not in JITTER_NOISES:
        raise ValueError(f"noise must be one of {JITTER_NOISES}, got {noise!r}")


def band_halfwidth(scale: float, noise: JitterNoise = "uniform") -> float:
    """Half-width of the band of differences ``s_j - s_f`` whose :func:`above_probability` is neither 0 nor 1."""
    return float(scale) if noise == "uniform" else NORMAL_CUTOFF * math.sqrt(2.0) * float(scale)


def above_probability(diff, scale, noise: JitterNoise = "uniform") -> torch.Tensor:
    """``P(s_j + e_j >= s_f + e_f)`` for ``diff = s_j - s_f`` under jitter of width (uniform) or std (normal)
    ``scale`` (a float or a tensor broadcasting against ``diff``), in float64. ``scale = 0``: 1 above, 1/2 at an exact
    tie, 0 below."""
    check_noise(noise)
    d = torch.as_tensor(diff).to(torch.float64)
    a = torch.as_tensor(scale, dtype=torch.float64)
    safe = torch.where(a > 0, a, torch.ones_like(a))
    if noise == "uniform":
        t = (d / safe).clamp(-1.0, 1.0)
        p = torch.where(t <= 0, 0.5 * (1.0 + t) ** 2, 1.0 - 0.5 * (1.0 - t) ** 2)
    else:
        p = 0.5 * torch.erfc(-d / (2.0 * safe))  # Phi(d / (a sqrt 2))
    step = (d > 0).to(torch.float64) + 0.5 * (d == 0).to(torch.float64)
    return torch.where(a > 0, p, step)


def _gauss_legendre(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Gauss-Legendre nodes and weights on ``[0, 1]`` (exact for polynomials of degree ``<= 2n - 1``)."""
    x, w = np.polynomial.legendre.leggauss(n)
    return torch.from_numpy((x + 1.0) / 2.0), torch.from_numpy(w / 2.0)


def _survival_uniform(y: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """``Q(y) = prod_f clip(1 + u_f - y, 0, 1)`` (fixations at ``u_f >= 0`` in jitter widths above the lowest one)."""
    return (1.0 + u - y.unsqueeze(-1)).clamp(0.0, 1.0).prod(-1)


def _all_above_uniform(w: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """``P(every jittered fixation > jittered s_j)`` under uniform jitter, for pixels at ``w = (s_j - m0) / a`` and
    fixations at ``u = (s_f - m0) / a`` (``m0`` the lowest fixation, so ``min u = 0``; only ``u < 1`` matter).

    ``= integral over [w, w + 1] of Q``; ``Q = 1`` below 0 and ``0`` above 1, a polynomial of degree ``<= K`` between
    consecutive ``u``: cumulative integrals at the breakpoints, then one Gauss-Legendre piece per query end.
    """
    u = torch.sort(u[u < 1.0])[0]
    k = u.numel()
    nodes, weights = _gauss_legendre(k // 2 + 1)
    breaks = torch.cat([u, torch.ones(1, dtype=torch.float64)])  # [K + 1]; breaks[0] = 0
    left, width = breaks[:-1], breaks[1:] - breaks[:-1]
    pieces = (_survival_uniform(left.unsqueeze(-1) + width.unsqueeze(-1) * nodes, u) * weights).sum(-1) * width
    cumulative = torch.cat([torch.zeros(1, dtype=torch.float64), pieces.cumsum(0)])  # R at the breakpoints

    step = max(1, _QUADRATURE_CHUNK // (nodes.numel() * k))

    def antiderivative(y: torch.Tensor) -> torch.Tensor:  # R(y) = integral of Q over [0, y], y in [0, 1]
        out = torch.empty_like(y)
        for lo in range(0, y.numel(), step):
            yc = y[lo : lo + step]
            i = (torch.searchsorted(breaks, yc, right=True) - 1).clamp(0, k)
            start = breaks[i]
            span = yc - start
            q = _survival_uniform(start.unsqueeze(-1) + span.unsqueeze(-1) * nodes, u)
            out[lo : lo + step] = cumulative[i] + (q * weights).sum(-1) * span
        return out

    lower = w.clamp(0.0, 1.0)
    upper = (w + 1.0).clamp(0.0, 1.0)
    return (-w).clamp(0.0, 1.0) + antiderivative(upper) - antiderivative(lower)


def _all_above_normal(s: torch.Tensor, sf: torch.Tensor, a: float) -> torch.Tensor:
    """``P(every jittered fixation > jittered s_j)`` under normal jitter of std ``a``: ``E_z[Q(s_j + a z)]`` by
    Gauss-Hermite quadrature, ``Q(y) = prod_f Phi((s_f - y) / a)``."""
    z, wz = np.polynomial.hermite_e.hermegauss(_HERMITE_NODES)
    z = torch.from_numpy(z)
    wz = torch.from_numpy(wz / math.sqrt(2.0 * math.pi))
    near = sf[sf < sf.min() + 4 * NORMAL_CUTOFF * a]
    out = torch.empty_like(s)
    step = max(1, _QUADRATURE_CHUNK // (z.numel() * near.numel()))
    for lo in range(0, s.numel(), step):
        y = s[lo : lo + step].unsqueeze(-1) + a * z  # [P, nodes]
        q = (0.5 * torch.erfc((y.unsqueeze(-1) - near) / (a * math.sqrt(2.0)))).prod(-1)  # Phi((s_f - y) / a)
        out[lo : lo + step] = (q * wz).sum(-1)
    return out


def _dense_ranks(values: torch.Tensor, spacing: float) -> torch.Tensor:
    """Values replaced by ``spacing * rank`` (equal values share a rank): the zero-jitter limit with jitter 1."""
    _, inverse = torch.unique(values, return_inverse=True)
    return inverse.to(torch.float64) * spacing


def expected_auc_judd(
    flat: torch.Tensor, fixations: torch.Tensor, scale: float, noise: JitterNoise = "uniform"
) -> float:
    """Expected AUC-Judd of one map over MIT's (``"uniform"``) or pysaliency's (``"normal"``) jitter of ``scale``.

    ``flat [P]``: the map's values; ``fixations [N]``: distinct flat indices of the fixated pixels (``N < P``).
    ``scale = 0`` is the limit of a vanishing jitter: exact ties ranked at random, everything else in order.
    """
    check_noise(noise)
    s_all = flat.to(torch.float64)
    a = float(scale)
    if a <= 0:  # the limit: ties stay ties, every other difference is far beyond the jitter
        s_all = _dense_ranks(s_all, 4.0 * band_halfwidth(1.0, noise))
        a = 1.0
    n = fixations.numel()
    sf = s_all[fixations]
    keep = torch.ones(s_all.numel(), dtype=torch.bool)
    keep[fixations] = False
    s = s_all[keep]
    m = s.numel()
    if n == 1:
        return float(1.0 - 0.5 * above_probability(s - sf, a, noise).sum() / m)
    band = band_halfwidth(a, noise)
    # E a_j: pixels with no fixation within the band count the fixations above them; the others sum the CDF
    sorted_f = torch.sort(sf)[0]
    within = torch.searchsorted(sorted_f, s + band, right=True) - torch.searchsorted(sorted_f, s - band, right=False)
    rows = torch.nonzero(within > 0).reshape(-1)
    counted = n - torch.searchsorted(sorted_f, s, right=True)  # fixations strictly above s_j (exact far away)
    counted[rows] = 0
    expected_above = counted.to(torch.float64).sum()
    if rows.numel():
        expected_above += (1.0 - above_probability(s[rows].unsqueeze(-1) - sf, a, noise)).sum()
    # P(a_j = N): 1 well below the lowest fixation, 0 well above it
    m0 = float(sf.min())
    all_above = (s < m0 - band).to(torch.float64)
    mid = torch.nonzero((s >= m0 - band) & (s <= m0 + band)).reshape(-1)
    if mid.numel():
        if noise == "uniform":
            all_above[mid] = _all_above_uniform((s[mid] - m0) / a, (sf - m0) / a)
        else:
            all_above[mid] = _all_above_normal(s[mid], sf, a)
    return float((expected_above + 0.5 * (1.0 - all_above).sum()) / (n * m))


__all__ = ["MIT_JITTER", "JITTER_NOISES", "NORMAL_CUTOFF", "above_probability", "band_halfwidth", "expected_auc_judd"]
