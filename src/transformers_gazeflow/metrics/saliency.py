"""Per-frame saliency metrics, vectorised over a batch of maps (paper Section 4.1 and Appendix E.3;
docs/specs/evaluation.md).

All functions take maps ``[..., H, W]`` (torch tensors or numpy arrays; computed in their floating dtype, float64 for
anything else) and return one float64 score per map (``[...]``). Conventions follow the MIT saliency benchmark
(``cvzoya/saliency``, ``code_forMetrics/*.m``), cross-checked against ``pysaliency`` in the tests; the deliberate
differences from ``pysaliency`` are:

* :func:`nss` z-scores with the sample standard deviation (MATLAB ``std``, N - 1), ``pysaliency.NSS`` with N.
* :func:`sim` min-max normalises both maps before normalising their sums (MATLAB ``similarity.m``);
  ``pysaliency.SIM`` only shifts negative maps and normalises the sums.

Fixations are pixel indices ``(x, y) = (col, row)`` (see ``heatmaps.fixation_pixels``).
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
import torch

from ..models.gazeflow.geometry import DEFAULT_HORIZONTAL_FOV_DEG, PinholeCamera, ray_angle_deg
from .heatmaps import GLC_GRID
from .jitter import MIT_JITTER, JitterNoise, above_probability, check_noise, expected_auc_judd

AucTies = Literal["expected", "jitter", "half", "none"]
AUC_TIES = ("expected", "jitter", "half", "none")
"""How :func:`auc_judd` ranks values within MIT's jitter of each other (``"expected"``: the default)."""

MIT_EPS = 2.2204e-16
"""MATLAB's ``eps`` as the MIT benchmark's KL uses it."""

GLC_THRESHOLDS = np.linspace(0.0, 0.02, 11)
"""GLC's adaptive-F1 thresholds on the min-max normalised prediction (``slowfast/utils/metrics.py``)."""

GLC_AUC_SIGMA = 3.2
"""Sigma (cells) of GLC's AUC blur of the one-hot centre of mass."""


def _maps(x, name: str) -> torch.Tensor:
    t = x if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x))
    if not t.is_floating_point():
        t = t.to(torch.float64)
    if t.ndim < 2 or t.shape[-1] < 1 or t.shape[-2] < 1:
        raise ValueError(f"{name} must have shape [..., H, W], got {tuple(t.shape)}")
    if not torch.isfinite(t).all():
        raise ValueError(f"{name} contains NaN or inf; expected finite maps")
    return t


def _fixations(fixations, maps: torch.Tensor, name: str = "fixations") -> torch.Tensor:
    """``[..., N, 2]`` or ``[..., 2]`` (one fixation per map) int pixel (x, y) -> int64 ``[..., N, 2]``, checked."""
    f = fixations if isinstance(fixations, torch.Tensor) else torch.as_tensor(np.asarray(fixations))
    if f.is_floating_point():
        if not torch.isfinite(f).all() or not torch.equal(f, f.floor()):
            raise ValueError(f"{name} must be integer pixel indices (x, y); got non-integer values")
    f = f.long()
    batch = maps.shape[:-2]
    if f.shape == (*batch, 2):
        f = f.unsqueeze(-2)
    if f.ndim != len(batch) + 2 or f.shape[:-2] != batch or f.shape[-1] != 2 or f.shape[-2] < 1:
        raise ValueError(
            f"{name} must have shape [..., N, 2] or [..., 2] matching the maps' batch {tuple(batch)}, "
            f"got {tuple(f.shape)}"
        )
    h, w = maps.shape[-2:]
    if (f[..., 0] < 0).any() or (f[..., 0] >= w).any() or (f[..., 1] < 0).any() or (f[..., 1] >= h).any():
        raise ValueError(f"{name} must lie inside the {w}x{h} map (0 <= x < {w}, 0 <= y < {h})")
    return f


def _read(maps: torch.Tensor, fix: torch.Tensor) -> torch.Tensor:
    """Values of ``maps [..., H, W]`` at ``fix [..., N, 2]`` -> ``[..., N]``."""
    w = maps.shape[-1]
    flat = maps.reshape(*maps.shape[:-2], -1)
    return torch.gather(flat, -1, fix[..., 1] * w + fix[..., 0])


def _same_shape(a: torch.Tensor, b: torch.Tensor, na: str, nb: str) -> None:
    if a.shape != b.shape:
        raise ValueError(f"{na} and {nb} must have the same shape, got {tuple(a.shape)} and {tuple(b.shape)}")


def auc_judd(
    saliency,
    fixations,
    ties: AucTies = "expected",
    generator: torch.Generator | None = None,
    jitter: float = MIT_JITTER,
    noise: JitterNoise = "uniform",
) -> torch.Tensor:
    """AUC-Judd (MIT ``AUC_Judd.m``; Judd et al. 2012; paper Section 4.1, "AUC").

    Thresholds are the prediction's values at the N fixated pixels (distinct pixels, as MIT's binary fixation map);
    at the i-th highest, the hit rate is ``i / N`` and the false-positive rate ``(#{S >= t} - i) / (HW - N)``;
    (0, 0) and (1, 1) are added and the curve is integrated by trapezoids.

    MIT first adds ``jitter * U(0, 1)`` noise to every pixel (``noise="uniform"``, the default; pysaliency adds
    ``jitter * N(0, 1)``, ``noise="normal"``), at the map's own scale, so every value within about ``jitter`` of
    another is ranked at random. ``ties`` says how that is handled:

    * ``"expected"`` (default): the exact expectation of AUC-Judd over that noise (:mod:`.jitter`): deterministic,
      and what MIT's jittered scores average to. It agrees with pysaliency's ``AUC_Judd(jitter=True)`` only with
      ``noise="normal"``: the two noises rank values within a few ``jitter`` of the fixated one differently, and the
      default differs from pysaliency's average by up to about 0.13 on a frame (half the largest gap between the
      two noises' rank probabilities, for values about 0.75 ``jitter`` from the fixated one). ``jitter=0`` is the
      limit of a vanishing jitter.
    * ``"jitter"``: one draw of the noise (seeded by ``generator``), as MIT does.
    * ``"half"``: bit-exact ties counted above with probability 1/2, everything else in order (needs N = 1). This
      was the default before and equals ``"expected"`` with ``jitter=0``; it differs from MIT wherever values lie
      within the jitter of the fixated one without being equal (e.g. Gaussian tails beyond about 5.7 sigma of a
      peak-1 map), reading up to 0.03 higher over a set. Kept only to compare with figures recorded with it.
    * ``"none"``: ties counted above (``S >= t``, MIT without jitter).
    """
    s = _maps(saliency, "saliency")
    fix = _fixations(fixations, s)
    n_fix = fix.shape[-2]
    npix = s.shape[-1] * s.shape[-2]
    if npix <= n_fix:
        raise ValueError(f"saliency maps need more pixels ({npix}) than fixations ({n_fix})")
    if ties not in AUC_TIES:
        raise ValueError(f"ties must be one of {AUC_TIES}, got {ties!r}")
    check_noise(noise)
    if not (math.isfinite(jitter) and jitter >= 0):
        raise ValueError(f"jitter must be a finite non-negative noise scale, got {jitter}")
    flat = s.reshape(*s.shape[:-2], -1)
    index = fix[..., 1] * s.shape[-1] + fix[..., 0]  # [..., N]
    if n_fix > 1 and bool((torch.sort(index, dim=-1)[0].diff(dim=-1) == 0).any()):
        raise ValueError("fixations must be distinct pixels (MIT's binary fixation map); got a repeated pixel")
    if ties == "expected" or ties == "half":
        if ties == "half" and n_fix != 1:
            raise ValueError(f"ties='half' needs exactly one fixation per map, got {n_fix}")
        scale = jitter if ties == "expected" else 0.0
        if n_fix == 1:  # fp = sum over the other pixels of P(jittered s_j >= jittered s_f); the fixation's own is 1/2
            exceed = (
                above_probability(
                    flat.to(torch.float64) - torch.gather(flat, -1, index).to(torch.float64), scale, noise
                ).sum(-1)
                - 0.5
            )
            return 1.0 - 0.5 * exceed / (npix - 1)
        rows, idx = flat.reshape(-1, npix), index.reshape(-1, n_fix)
        out = [expected_auc_judd(rows[b], idx[b], scale, noise) for b in range(rows.shape[0])]
        return torch.tensor(out, dtype=torch.float64).reshape(flat.shape[:-1])
    if ties == "jitter":
        shape = flat.shape
        draw = (
            torch.rand(shape, generator=generator, dtype=torch.float64)
            if noise == "uniform"
            else torch.randn(shape, generator=generator, dtype=torch.float64)
        )
        flat = flat.to(torch.float64) + draw * jitter
    thr = torch.gather(flat, -1, index)  # [..., N]
    thr = torch.sort(thr, dim=-1, descending=True)[0]
    above = (flat.unsqueeze(-2) >= thr.unsqueeze(-1)).sum(-1, dtype=torch.float64)  # [..., N]
    i = torch.arange(1, n_fix + 1, dtype=torch.float64)
    tp = torch.cat([torch.zeros_like(above[..., :1]), i.expand_as(above) / n_fix, torch.ones_like(above[..., :1])], -1)
    fp = torch.cat(
        [torch.zeros_like(above[..., :1]), (above - i) / (npix - n_fix), torch.ones_like(above[..., :1])], -1
    )
    return torch.trapezoid(tp, fp, dim=-1)


def nss(saliency, fixations, ddof: int = 1) -> torch.Tensor:
    """NSS (MIT ``NSS.m``): the prediction z-scored (``ddof=1``, MATLAB's ``std``) read at the fixations, averaged.

    ``pysaliency.NSS`` uses ``ddof=0``; the ratio between the two is ``sqrt((HW - 1) / HW)``. A constant map (no
    spread to z-score by; MATLAB gives NaN) scores 0: it singles out no pixel.
    """
    s = _maps(saliency, "saliency")
    fix = _fixations(fixations, s)
    flat = s.reshape(*s.shape[:-2], -1)
    mean = flat.mean(-1, keepdim=True)
    std = flat.std(-1, correction=ddof, keepdim=True)
    constant = flat.amax(-1, keepdim=True) == flat.amin(-1, keepdim=True)
    std = torch.where(constant, torch.zeros_like(std), std)
    z = torch.where(std > 0, (_read(s, fix) - mean) / torch.where(std > 0, std, torch.ones_like(std)), 0.0)
    return z.mean(-1).to(torch.float64)


def cc(saliency, gt_maps) -> torch.Tensor:
    """Linear correlation coefficient CC (MIT ``CC.m``): Pearson correlation of the two maps' pixels.

    Computed from sums, ``(sum PG - n mean_P mean_G) / sqrt(var_P var_G)``; 0 where a map is constant (MATLAB
    gives NaN; a constant map has no linear relation to anything).
    """
    p = _maps(saliency, "saliency")
    g = _maps(gt_maps, "gt_maps")
    _same_shape(p, g, "saliency", "gt_maps")
    pf = p.reshape(*p.shape[:-2], -1)
    gf = g.reshape(*g.shape[:-2], -1)
    pc = pf - pf.mean(-1, keepdim=True)
    gc = gf - gf.mean(-1, keepdim=True)
    num = (pc * gc).sum(-1)
    den = torch.sqrt((pc * pc).sum(-1) * (gc * gc).sum(-1))
    return torch.where(den > 0, num / torch.where(den > 0, den, torch.ones_like(den)), torch.zeros_like(num)).to(
        torch.float64
    )


def kl_div(saliency, gt_maps, eps: float = MIT_EPS) -> torch.Tensor:
    """KL divergence of the prediction from the ground truth (MIT ``KLdiv.m``; ``pysaliency.MIT_KLDiv``).

    Both maps normalised to sum 1, then ``sum G * log(eps + G / (P + eps))`` with ``eps = 2.2204e-16``. As in
    ``KLdiv.m`` (``if any(map(:))``), an all-zero map is left at zero: an all-zero prediction scores
    ``sum G log(eps + G / eps)`` (finite, large), not an error.
    """
    p = _maps(saliency, "saliency")
    g = _maps(gt_maps, "gt_maps")
    _same_shape(p, g, "saliency", "gt_maps")
    if (p < 0).any() or (g < 0).any():
        raise ValueError("saliency and gt_maps must be non-negative for KL")
    pf = p.reshape(*p.shape[:-2], -1)
    gf = g.reshape(*g.shape[:-2], -1)
    psum = pf.sum(-1, keepdim=True)
    gsum = gf.sum(-1, keepdim=True)
    pn = pf / torch.where(psum > 0, psum, torch.ones_like(psum))  # KLdiv.m: "if any(map1(:))", a zero map stays zero
    gn = gf / torch.where(gsum > 0, gsum, torch.ones_like(gsum))
    return (gn * torch.log(eps + gn / (pn + eps))).sum(-1).to(torch.float64)


def _minmax_sum1(flat: torch.Tensor) -> torch.Tensor:
    lo = flat.min(-1, keepdim=True)[0]
    hi = flat.max(-1, keepdim=True)[0]
    span = hi - lo
    mm = torch.where(span > 0, (flat - lo) / torch.where(span > 0, span, torch.ones_like(span)), torch.ones_like(flat))
    return mm / mm.sum(-1, keepdim=True)


def sim(saliency, gt_maps) -> torch.Tensor:
    """Similarity SIM (MIT ``similarity.m``): min-max normalise each map (a constant map becomes all ones),
    normalise to sum 1, and sum the pixelwise minimum. ``pysaliency.SIM`` skips the min-max step."""
    p = _maps(saliency, "saliency")
    g = _maps(gt_maps, "gt_maps")
    _same_shape(p, g, "saliency", "gt_maps")
    pn = _minmax_sum1(p.reshape(*p.shape[:-2], -1))
    gn = _minmax_sum1(g.reshape(*g.shape[:-2], -1))
    return torch.minimum(pn, gn).sum(-1).to(torch.float64)


def minmax_normalize(saliency, eps: float = 0.0) -> torch.Tensor:
    """Per-map ``(p - min) / (max - min + eps)``: the rescale before thresholding for F1/P/R.

    ``eps=0`` (default; the paper protocol): plain min-max, so F1/P/R do not depend on the map's scale; a constant map
    becomes all zeros (nothing is predicted above any threshold: P = R = 0). ``eps=GLC_PRED_EPS`` is GLC's own rescale
    (``tools/test_gaze_net.py``), whose ``1e-6`` is a fixed amount and so raises the effective thresholds by a factor
    ``1 + 1e-6 / (max - min)``: F1 then depends on the scale (0.4518 vs 0.4525 for the same maps at peak-1 and at
    sum-1 scale); ``protocol="glc"`` applies it at GLC's scale (see ``heatmaps.glc_minmax``).
    """
    s = _maps(saliency, "saliency")
    flat = s.reshape(*s.shape[:-2], -1)
    lo = flat.min(-1, keepdim=True)[0]
    hi = flat.max(-1, keepdim=True)[0]
    den = hi - lo + eps
    return ((flat - lo) / torch.where(den > 0, den, torch.ones_like(den))).reshape(s.shape)


def precision_recall_counts(pred_normalized, binary_gt, thresholds=GLC_THRESHOLDS) -> tuple[torch.Tensor, ...]:
    """Counts behind F1/P/R (GLC ``adaptive_f1``): for each threshold ``t``, ``pred > t`` against the binary GT.

    ``pred_normalized [..., H, W]`` (min-max normalised), ``binary_gt [..., H, W]`` bool. Returns
    ``(tp, predicted_positives)`` of shape ``[..., len(thresholds)]`` and ``gt_positives`` ``[...]`` (float64).
    """
    p = _maps(pred_normalized, "pred_normalized")
    gt = binary_gt if isinstance(binary_gt, torch.Tensor) else torch.as_tensor(np.asarray(binary_gt))
    if gt.dtype != torch.bool:
        raise ValueError(f"binary_gt must be a bool mask, got dtype {gt.dtype}")
    _same_shape(p, gt, "pred_normalized", "binary_gt")
    th = torch.as_tensor(np.asarray(thresholds, dtype=np.float64)).to(p.dtype)
    if th.ndim != 1 or th.numel() < 1 or not bool((th[1:] >= th[:-1]).all()):
        raise ValueError("thresholds must be a non-empty, non-decreasing 1D sequence")
    flat = p.reshape(*p.shape[:-2], -1)
    gflat = gt.reshape(*gt.shape[:-2], -1)
    # bucket b = #{thresholds < value}: value > t_j  <=>  b > j (exact comparisons, one pass)
    buckets = torch.bucketize(flat, th, right=False)
    nb = th.numel() + 1
    lead = flat.shape[:-1]
    offsets = torch.arange(int(np.prod(lead)) if lead else 1).reshape(*lead, 1) * nb if lead else 0
    idx = buckets + offsets
    total = int(np.prod(lead)) * nb if lead else nb
    hist_all = torch.bincount(idx.reshape(-1), minlength=total).reshape(*lead, nb).to(torch.float64)
    hist_gt = torch.bincount(idx[gflat].reshape(-1), minlength=total).reshape(*lead, nb).to(torch.float64)
    # #{b > j} = sum over buckets j+1..nb-1 (a reversed cumulative sum)
    above_all = hist_all.flip(-1).cumsum(-1).flip(-1)[..., 1:]
    above_gt = hist_gt.flip(-1).cumsum(-1).flip(-1)[..., 1:]
    return above_gt, above_all, gflat.sum(-1, dtype=torch.float64)


def precision_recall(tp: torch.Tensor, predicted: torch.Tensor, gt_positives: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Per-frame ``P = tp / (pred + 1e-6)``, ``R = tp / (gt + 1e-6)`` (GLC ``adaptive_f1``), per threshold."""
    return tp / (predicted + 1e-6), tp / (gt_positives.unsqueeze(-1) + 1e-6)


def f1_from_pr(precision, recall):
    """``F1 = 2 P R / (P + R + 1e-6)`` (GLC), on averaged P and R or per frame."""
    return 2 * precision * recall / (precision + recall + 1e-6)


def center_of_mass(saliency) -> torch.Tensor:
    """Centre of mass of each map in continuous pixel coordinates ``(x, y)`` (pixel ``i`` centred at ``i + 0.5``).

    The predicted gaze point of a heatmap for AAE (docs/specs/evaluation.md, "AAE"). ``[..., H, W]`` -> ``[..., 2]``; a
    map summing to zero has no centre: NaN.
    """
    s = _maps(saliency, "saliency")
    h, w = s.shape[-2:]
    rows = s.sum(-1)  # [..., H]
    cols = s.sum(-2)  # [..., W]
    total = rows.sum(-1)
    x = (cols * (torch.arange(w, dtype=s.dtype) + 0.5)).sum(-1) / total
    y = (rows * (torch.arange(h, dtype=s.dtype) + 0.5)).sum(-1) / total
    return torch.stack((x, y), -1).to(torch.float64)


def predicted_point(saliency) -> torch.Tensor:
    """The gaze point a map predicts for AAE: its :func:`center_of_mass`, or the frame centre ``(W / 2, H / 2)`` for
    an all-zero map, which has no centre of mass (the fallback GLC's own AUC uses). ``[..., H, W]`` -> ``[..., 2]``."""
    s = _maps(saliency, "saliency")
    com = center_of_mass(s)
    empty = s.reshape(*s.shape[:-2], -1).sum(-1) == 0
    centre = torch.tensor([s.shape[-1] / 2, s.shape[-2] / 2], dtype=torch.float64)
    return torch.where(empty.unsqueeze(-1), centre, com)


def angular_error(
    pred_px, gt_px, width: int, height: int, fov_deg: float = DEFAULT_HORIZONTAL_FOV_DEG, camera: Any = None
) -> torch.Tensor:
    """Angular error in degrees between two image points (AAE; Huang et al. ECCV 2018).

    The camera is ``geometry.PinholeCamera.from_fov(width, height, fov_deg)``: focal ``f = (W / 2) / tan(fov / 2)``
    (60 degree horizontal field of view), the same focal vertically, principal point at the frame centre; the angle
    between the rays is ``geometry.ray_angle_deg`` (``atan2(|r1 x r2|, r1 . r2)``). ``camera`` (a ``geometry``
    camera: ``PinholeCamera``, ``FieldOfView`` or ``FisheyeCamera``, e.g. Project Aria's calibrated RGB camera) takes
    its place, at ``camera.for_frame(width, height)``. Points ``[..., 2]`` in continuous native pixels.
    """
    p = torch.as_tensor(np.asarray(pred_px) if not isinstance(pred_px, torch.Tensor) else pred_px).to(torch.float64)
    g = torch.as_tensor(np.asarray(gt_px) if not isinstance(gt_px, torch.Tensor) else gt_px).to(torch.float64)
    if p.shape != g.shape or p.shape[-1:] != (2,):
        raise ValueError(f"pred_px and gt_px must both have shape [..., 2], got {tuple(p.shape)} and {tuple(g.shape)}")
    if camera is not None:
        return camera.for_frame(width, height).angle_between_deg(p, g)
    if not 0 < fov_deg < 180:
        raise ValueError(f"fov_deg must be in (0, 180), got {fov_deg}")
    return PinholeCamera.from_fov(width, height, fov_deg).angle_between_deg(p, g)


# ----------------------------------------------------------------------------------------------------------------
# GLC's own variants (protocol="glc"; docs/specs/evaluation.md, "GLC's own pipeline")
# ----------------------------------------------------------------------------------------------------------------


def glc_center_of_mass(maps) -> np.ndarray:
    """``scipy.ndimage.center_of_mass`` of each map, as GLC calls it: (row, col) index coordinates ``[B, 2]``.

    Called per frame on the float32 map exactly as GLC does (scipy sums the float32 map in float32 for the total),
    so that the result matches GLC bit for bit; NaN where a map sums to 0.
    """
    from scipy import ndimage

    m = np.asarray(maps if not isinstance(maps, torch.Tensor) else maps.numpy())
    if m.ndim != 3:
        raise ValueError(f"maps must have shape [B, h, w], got {m.shape}")
    out = np.empty((m.shape[0], 2), dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        for k in range(m.shape[0]):
            out[k] = ndimage.center_of_mass(m[k])
    return out


def glc_auc(pred_maps, gaze_crop) -> torch.Tensor:
    """GLC's AUC variant (``slowfast/utils/metrics.py: auc``) per frame.

    A one-hot at ``int()`` of the prediction's centre of mass (centre cell if undefined), blurred with
    ``scipy.ndimage.gaussian_filter(sigma=3.2)``, min-max normalised, read at ``(round(y * 63), round(x * 63))``;
    score ``1 - #(z > z_gt) / (h * w)``. Done frame by frame with scipy's own filter, as GLC does, so that ties
    between mirrored cells break exactly as in GLC. ``pred_maps [B, h, w]``, ``gaze_crop [B, 2]`` unit coordinates
    of GLC's crop.
    """
    from scipy import ndimage

    m = np.asarray(pred_maps if not isinstance(pred_maps, torch.Tensor) else pred_maps.numpy())
    g = np.asarray(gaze_crop, dtype=np.float64)
    if m.ndim != 3 or g.shape != (m.shape[0], 2):
        raise ValueError(f"pred_maps must be [B, h, w] and gaze_crop [B, 2], got {m.shape} and {g.shape}")
    b, h, w = m.shape
    com = glc_center_of_mass(m)
    out = np.empty(b, dtype=np.float64)
    for k in range(b):
        z = np.zeros((h, w))
        if np.isnan(com[k, 0]) or np.isnan(com[k, 1]):
            z[h // 2, w // 2] = 1
        else:
            z[int(com[k, 0]), int(com[k, 1])] = 1
        z = ndimage.gaussian_filter(z, GLC_AUC_SIGMA)
        z = z - np.min(z)
        z = z / np.max(z)
        at = z[round(g[k, 1] * (h - 1))][round(g[k, 0] * (w - 1))]
        out[k] = 1 - float((z > at).sum()) / w / h
    return torch.from_numpy(out)


def glc_aae(pred_maps, gaze_crop, grid: int = GLC_GRID) -> torch.Tensor:
    """GLC's AAE (``slowfast/utils/metrics.py: average_angle_error``) per frame, degrees.

    Centre of mass (row, col) against ``(y * 64, x * 64)``, rays ``(row - 32, col - 32, 32 / tan(pi / 6))``,
    angle ``atan2(|cross|, dot)``. A map with no mass (all zero, e.g. GLC's min-max of an all-equal map) has no centre
    of mass, where GLC's code would return NaN: it predicts the centre cell ``(h // 2, w // 2)``, the fallback GLC's
    own AUC uses (and :func:`predicted_point`'s rule).
    """
    m = np.asarray(pred_maps if not isinstance(pred_maps, torch.Tensor) else pred_maps.numpy())
    g = np.asarray(gaze_crop, dtype=np.float64)
    if m.ndim != 3 or g.shape != (m.shape[0], 2):
        raise ValueError(f"pred_maps must be [B, h, w] and gaze_crop [B, 2], got {m.shape} and {g.shape}")
    com = glc_center_of_mass(m)
    com[np.isnan(com).any(-1)] = (m.shape[1] // 2, m.shape[2] // 2)
    com = torch.from_numpy(com)
    half = grid / 2
    focal = half / math.tan(math.pi / 6)
    gt_r = torch.from_numpy(g[:, 1] * grid)
    gt_c = torch.from_numpy(g[:, 0] * grid)
    return ray_angle_deg(com[:, 0] - half, com[:, 1] - half, gt_r - half, gt_c - half, focal)


__all__ = [
    "MIT_EPS",
    "GLC_THRESHOLDS",
    "AUC_TIES",
    "auc_judd",
    "nss",
    "cc",
    "kl_div",
    "sim",
    "minmax_normalize",
    "precision_recall_counts",
    "precision_recall",
    "f1_from_pr",
    "center_of_mass",
    "predicted_point",
    "angular_error",
    "glc_center_of_mass",
    "glc_auc",
    "glc_aae",
]
