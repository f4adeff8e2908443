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
    nt = thresholds.numel()
    buckets = torch.bucketize(values, thresholds, right=False)
    hist = torch.bincount(buckets, minlength=nt + 1).double()
    return hist.flip(0).cumsum(0).flip(0)[1:]


def _gather_blocks(p: torch.Tensor, b: int, fi: torch.Tensor, bi: torch.Tensor, bj: torch.Tensor) -> torch.Tensor:
    """Pixels of blocks ``(frame fi, block row bi, block col bj)`` of ``p [F, H, W]`` as ``[n, b * b]`` (one take)."""
    h, w = p.shape[-2:]
    base = fi * (h * w) + bi * (b * w) + bj * b
    offsets = (torch.arange(b).unsqueeze(-1) * w + torch.arange(b)).reshape(-1)
    return torch.take(p, base.unsqueeze(-1) + offsets)


class NativeFrameScorer:
    """Scores the kept frames of one clip: maps ``[F, H, W]`` against ground-truth points ``[F, 2]``.

    Returns per-frame AUC-Judd, NSS (ddof 1), CC, KL, SIM, AAE (centre of mass) and the precision/recall counts per
    threshold, as ``saliency.py`` defines them on ``heatmaps.py``'s ground truth. Every score depends only on the
    map's shape, not its scale: AUC-Judd is the expectation of MIT's jitter at peak-1 scale (``auc_judd(maps,
    ties="expected", jitter=1e-7 * max)``) and F1/P/R threshold the plain min-max normalised map
    (``minmax_normalize``, no epsilon).
    """

    def __init__(self, sigma_px: float, thresholds, fov_deg: float) -> None:
        self.sigma_px = float(sigma_px)
        self.thresholds = np.asarray(thresholds, dtype=np.float64)
        self.fov_deg = float(fov_deg)
        self._work: tuple[torch.Tensor, torch.Tensor] | None = None

    def _buffers(self, size: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """Two reusable work buffers of at least ``size`` elements (fresh large allocations are slow)."""
        if self._work is None or self._work[0].numel() < size or self._work[0].dtype != dtype:
            self._work = (torch.empty(size, dtype=dtype), torch.empty(size, dtype=dtype))
        return self._work

    def _kl_sim(self, p: torch.Tensor, gx: torch.Tensor, gy: torch.Tensor, z: float, gmin: float, s1: float,
                lo: float, varies: bool) -> tuple[float, float]:
        """KL and SIM of one frame, summed over the window where the ground truth is not negligible, in place, in
        the map's dtype (the sums are then taken in float64)."""
        n = p.numel()
        y0, y1 = _span(gy, WINDOW_LEVEL)
        x0, x1 = _span(gx, WINDOW_LEVEL)
        hh, ww = y1 - y0, x1 - x0
        b1, b2 = self._buffers(hh * ww, p.dtype)
        g = b1[: hh * ww].view(hh, ww)
        q = b2[: hh * ww].view(hh, ww)
        torch.mul(gy[y0:y1, None].to(p.dtype), (gx[x0:x1] / z).to(p.dtype)[None, :], out=g)  # the sum-1 ground truth
        pw = p[y0:y1, x0:x1]
        # KL: sum g * log(eps + g / (p / s1 + eps))
        torch.mul(pw, 1.0 / s1 if s1 > 0 else 0.0, out=q).add_(sal.MIT_EPS)  # MIT: an all-zero map stays zero
        torch.div(g, q, out=q).add_(sal.MIT_EPS).log_()
        kl = float(torch.dot(g.view(-1), q.view(-1)))  # float32 sums use cascade summation: ~1e-7 relative
        # SIM: sum min(minmax(p) / sum, minmax(g) / sum); both sums are known in closed form
        if varies:
            torch.sub(pw, lo, out=q).mul_(1.0 / (s1 - n * lo))
        else:
            q.fill_(1.0 / n)
        g.sub_(gmin).mul_(1.0 / (1.0 - n * gmin))
        torch.minimum(g, q, out=q)
        return kl, float(q.sum())

    def score(self, maps: torch.Tensor, gaze: np.ndarray, width: int, height: int) -> dict[str, torch.Tensor]:
        """Scores of ``maps [F, height, width]`` (finite, non-negative; checked by the caller) against the unit
        gaze points ``gaze [F, 2]``: per-frame ``auc``, ``nss``, ``cc``, ``kl``, ``sim``, ``aae`` ``[F]`` and the
        counts ``tp``, ``predicted`` ``[F, thresholds]`` and ``positives`` ``[F]`` (float64)."""
        f, h, w = maps.shape
        if (h, w) != (height, width):
            raise ValueError(f"maps must be {height}x{width} (native), got {h}x{w}")
        dt = maps.dtype
        n = h * w
        p = maps.contiguous()
        gz = torch.from_numpy(np.asarray(gaze, dtype=np.float64))
        gpx = unit_to_pixels(gz, width, height)
        gx = hm.gaussian_profiles(gpx[:, 0], w, self.sigma_px)  # [F, W] float64, peak 1
        gy = hm.gaussian_profiles(gpx[:, 1], h, self.sigma_px)  # [F, H]
        z = gx.sum(-1) * gy.sum(-1)

        # ---- sums: rows, columns, squares, and sum(P G) by one matrix-vector product
        rows = p.sum(-1).double()  # [F, H]
        cols = p.sum(-2).double()  # [F, W]
        s1 = rows.sum(-1)
        s2 = torch.linalg.vector_norm(p.reshape(f, -1), dim=-1).double() ** 2
        pgx = torch.stack([torch.mv(p[k], gx[k].to(dt)) for k in range(f)])  # [F, H] (faster than one bmm)
        spg = (pgx.double() * gy).sum(-1) / z
        sg2 = (gx * gx).sum(-1) * (gy * gy).sum(-1) / (z * z)

        fix = hm.fixation_pixels(gz, width, height)  # [F, 2] (x, y)
        frames = torch.arange(f)
        s_fix = p[frames, fix[:, 1], fix[:, 0]]  # [F] in the map's dtype

        xs = torch.arange(w, dtype=torch.float64) + 0.5
        ys = torch.arange(h, dtype=torch.float64) + 0.5
        mass = torch.where(s1 > 0, s1, torch.ones_like(s1))
        com = torch.stack(((cols * xs).sum(-1) / mass, (rows * ys).sum(-1) / mass), -1)
        com[s1 <= 0] = torch.tensor([width / 2, height / 2], dtype=com.dtype)  # saliency.predicted_point's rule
        aae = sal.angular_error(com, gpx, width, height, self.fov_deg)

        # ---- block extremes, then exact counts for AUC and for F1's predicted positives
        b = _block_size(h, w)
        # rows first (a contiguous elementwise reduction), then the small remainder
        bmax = p.view(f, h // b, b, w).amax(2).view(f, h // b, w // b, b).amax(-1)  # [F, hb, wb]
        bmin = p.view(f, h // b, b, w).amin(2).view(f, h // b, w // b, b).amin(-1)
        lo = bmin.amin(dim=(1, 2))
        hi = bmax.amax(dim=(1, 2))
        area = float(b * b)

        mean = s1 / n
        var_p = torch.where(hi > lo, (s2 - s1 * s1 / n).clamp_min(0.0), 0.0)  # a constant map has no variance
        std1 = torch.sqrt(var_p / (n - 1))
        nss = torch.where(std1 > 0, (s_fix.double() - mean) / torch.where(std1 > 0, std1, 1.0), 0.0)  # constant: 0
        var_g = (sg2 - 1.0 / n).clamp_min(0.0)
        den = torch.sqrt(var_p * var_g)
        cc = torch.where(den > 0, (spg - s1 / n) / torch.where(den > 0, den, 1.0), torch.zeros_like(den))

        # AUC-Judd: the expectation of MIT's jitter (jitter.py) of 1e-7 of the map's peak (the scale MIT's maps, images
        # in [0, 1], come at). Blocks entirely more than the jitter above (below) the fixated value count 1 (0) per
        # pixel, flat blocks count their one probability per pixel, the rest are computed pixel by pixel.
        sf = s_fix.double().view(f, 1, 1)
        band = (jit.MIT_JITTER * hi.double()).view(f, 1, 1)
        bmin64, bmax64 = bmin.double(), bmax.double()
        flat_blocks = bmin == bmax
        whole_above = bmin64 > sf + band
        whole_below = bmax64 < sf - band
        exceed = whole_above.sum(dim=(1, 2)).double() * area
        fi, bi, bj = torch.nonzero(flat_blocks & ~whole_above & ~whole_below, as_tuple=True)
        if fi.numel():
            probs = jit.above_probability(bmin64[fi, bi, bj] - sf.view(f)[fi], band.view(f)[fi]) * area
            exceed += torch.zeros(f, dtype=torch.float64).index_add_(0, fi, probs)
        fi, bi, bj = torch.nonzero(~(whole_above | whole_below | flat_blocks), as_tuple=True)
        if fi.numel():
            vals = _gather_blocks(p, b, fi, bi, bj).double()  # [n, b*b]
            probs = jit.above_probability(vals - sf.view(f, 1)[fi], band.view(f, 1)[fi]).sum(-1)
            exceed += torch.zeros(f, dtype=torch.float64).index_add_(0, fi, probs)
        auc = 1.0 - 0.5 * (exceed - 0.5) / (n - 1)  # the fixated pixel ties with itself: 1/2

        # min-max normalisation exactly as saliency.minmax_normalize does it, applied to block extremes
        span = torch.where(hi > lo, hi - lo, torch.ones_like(hi))  # a constant map normalises to 0
        lo3, den3 = lo.view(f, 1, 1), span.view(f, 1, 1)
        nmin = (bmin - lo3) / den3
        nmax = (bmax - lo3) / den3
        th = torch.as_tensor(self.thresholds).to(dt)  # thresholds compared in the map's dtype, as GLC does
        nt = th.numel()
        # a block lies entirely above t_j for j < #{t < nmin} and entirely at or below it for j >= #{t < nmax};
        # in between it straddles t_j and its pixels are compared one by one
        first = torch.bucketize(nmin.reshape(f, -1), th, right=False)  # [F, blocks]
        last = torch.bucketize(nmax.reshape(f, -1), th, right=False)
        whole = torch.bincount((first + (torch.arange(f) * (nt + 1)).unsqueeze(-1)).view(-1), minlength=f * (nt + 1))
        predicted = whole.view(f, nt + 1).flip(-1).cumsum(-1).flip(-1)[:, 1:].double() * area  # [F, nt]
        fi, blk = torch.nonzero(last > first, as_tuple=True)  # blocks straddling at least one threshold
        if fi.numel():
            bi, bj = blk // (w // b), blk % (w // b)
            vals = _gather_blocks(p, b, fi, bi, bj)
            vn = (vals - lo3.view(f, 1)[fi]) / den3.view(f, 1)[fi]
            # per block, #{pixels > t_j} for every j from one bucketize: bucket = #{t < v}, counted per block
            buckets = torch.bucketize(vn, th, right=False) + (torch.arange(fi.numel()) * (nt + 1)).unsqueeze(-1)
            hist = torch.bincount(buckets.view(-1), minlength=fi.numel() * (nt + 1)).view(-1, nt + 1)
            j = torch.arange(nt)
            straddled = (j >= first[fi, blk].unsqueeze(-1)) & (j < last[fi, blk].unsqueeze(-1))  # [n, nt]
            hits = hist.flip(-1).cumsum(-1).flip(-1)[:, 1:] * straddled
            predicted += torch.zeros(f, nt, dtype=torch.float64).index_add_(0, fi, hits.double())

        # ---- true positives inside the binary disc's bounding box (heatmaps.binary_gt_masks' rule)
        tp = torch.zeros(f, nt, dtype=torch.float64)
        positives = torch.zeros(f, dtype=torch.float64)
        kl = torch.zeros(f, dtype=torch.float64)
        simv = torch.zeros(f, dtype=torch.float64)
        gmin = gx.amin(-1) * gy.amin(-1) / z  # minimum of the sum-1 ground-truth map
        for k in range(f):
            y0, y1 = _span(gy[k], hm.GLC_BINARY_LEVEL)
            x0, x1 = _span(gx[k], hm.GLC_BINARY_LEVEL)
            mask = (gy[k, y0:y1, None] * gx[k, None, x0:x1]) > hm.GLC_BINARY_LEVEL
            box = (p[k, y0:y1, x0:x1] - lo[k]) / span[k]
            tp[k] = _count_above(box[mask], th)
            positives[k] = mask.sum()
            kl[k], simv[k] = self._kl_sim(p[k], gx[k], gy[k], float(z[k]), float(gmin[k]), float(s1[k]),
                                          float(lo[k]), bool(hi[k] > lo[k]))
        return {
            "auc": auc,
            "nss": nss,
            "cc": cc,
            "kl": kl,
            "sim": simv,
            "aae": aae,
            "tp": tp,
            "predicted": predicted,
            "positives": positives,
        }


__all__ = ["NativeFrameScorer", "WINDOW_LEVEL"]
