"""Heatmap rendering, in one place (paper Appendix E.3, "Trajectory-to-heatmap conversion"; docs/specs/evaluation.md,
"Maps").

Everything that turns gaze points into maps lives here, and the evaluator, the baselines, the evaluate modules and
the pipeline all call it:

* :func:`render_heatmaps`: K predicted trajectories ``[K, T, 2]`` in unit coordinates -> per-frame maps ``[T, H, W]``
  at the native resolution: an isotropic Gaussian of ``sigma`` px (25 in the paper) on each sample, averaged over K.
  Each Gaussian has peak 1 (``exp(-d^2 / (2 sigma^2))``), so a map lies in ``[0, 1]``.
* Map scale: every score of ``protocol="paper"`` depends only on a map's shape, not its scale. MIT's AUC jitter is
  a fixed ``1e-7``, so AUC-Judd applies it at peak-1 scale (``1e-7`` of the map's maximum, the scale of MIT's image
  maps); F1/P/R threshold the plain min-max normalised map (``(p - min) / (max - min)``: the spec's "min-max
  normalised per frame"). GLC's own rescale adds a fixed ``1e-6`` to ``max - min``, which makes F1 depend on the scale
  (0.4518 vs 0.4525 for the same maps at peak-1 and at sum-1 scale); it is a division guard sized for GLC's
  softmax maps (sum 1 over 64x64 cells), so ``protocol="glc"`` keeps it and applies it at that scale: maps of ours
  are made distributions over GLC's grid first (:func:`glc_distribution`), GLC's own softmax maps are taken as they
  are. The renderer can therefore rescale a frame freely, and does so for frames whose samples all lie far outside
  the frame (``keep_shape=True``, used by the evaluator), whose maps would otherwise underflow to zero.
* :func:`render_gt_heatmaps`: the ground-truth fixation map, a Gaussian of ``sigma`` px at the gaze point,
  normalised to sum 1 over the frame.
* :func:`binary_gt_masks`: the binary ground truth of F1/P/R, pinned to GLC's rule (see :data:`GLC_BINARY_LEVEL`).
* The ``glc_*`` functions: GLC's own 64x64 pipeline (``protocol="glc"``): the 256 centre crop, the OpenCV Gaussian
  kernel (computed here without OpenCV), the ground-truth map and the softmax/min-max prediction map.

Pixel convention (``geometry.py``): pixel ``i`` covers ``[i, i + 1)``, so its centre is ``i + 0.5``; a unit point
``x`` lies at ``x * W`` px. Gaussians are evaluated at pixel centres and built separably (a map is a sum of outer
products of a column and a row profile, i.e. one ``[H, K] @ [K, W]`` matmul per frame).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..models.gazeflow.geometry import unit_to_pixels

DEFAULT_SIGMA_PX = 25.0
"""Gaussian bandwidth of predicted and ground-truth maps at native resolution (paper Appendix E.3)."""

HEATMAP_SIGMA_FRACTION = 25.0 / 640.0
"""Default heatmap sigma of overlays and pipeline heatmaps, as a fraction of the frame width: the paper's 25 px at
640 px (3.9%)."""


def heatmap_sigma_px(width: int, sigma_px: float | None = None, fraction: float | None = None) -> float:
    """The heatmap sigma in pixels for a frame ``width`` px wide: ``sigma_px`` when given, else ``fraction`` (default
    :data:`HEATMAP_SIGMA_FRACTION`) of the width."""
    if sigma_px is not None:
        if not sigma_px > 0:
            raise ValueError(f"heatmap sigma must be > 0 px, got {sigma_px}")
        return float(sigma_px)
    fraction = HEATMAP_SIGMA_FRACTION if fraction is None else fraction
    if not fraction > 0:
        raise ValueError(f"heatmap sigma must be > 0% of the width, got {fraction:%}")
    return float(fraction * width)


GLC_GRID = 64
"""GLC's map size (its 256 px crop at stride 4)."""

GLC_CROP = 256
"""GLC's test crop: short side resized to 256, then a centre crop of 256 x 256."""

GLC_KERNEL_SIZE = 19
"""GLC's ``DATA.GAUSSIAN_KERNEL``: OpenCV kernel of size 19 with OpenCV's default sigma (3.2 cells)."""

GLC_GT_THRESHOLD = 0.001
"""GLC's binary ground truth: ``gt > 0.001`` on its sum-1 64x64 map (``slowfast/utils/metrics.py``)."""

GLC_PRED_EPS = 1e-6
"""GLC's min-max of predictions: ``(p - min) / (max - min + 1e-6)`` (``tools/test_gaze_net.py``)."""


def opencv_default_sigma(ksize: int) -> float:
    """OpenCV's sigma for ``sigma <= 0``: ``0.3 * ((ksize - 1) * 0.5 - 1) + 0.8`` (3.2 for ksize 19)."""
    return 0.3 * ((ksize - 1) * 0.5 - 1) + 0.8


_OPENCV_SMALL_KERNELS = {
    1: [1.0],
    3: [0.25, 0.5, 0.25],
    5: [0.0625, 0.25, 0.375, 0.25, 0.0625],
    7: [0.03125, 0.109375, 0.21875, 0.28125, 0.21875, 0.109375, 0.03125],
}


def opencv_gaussian_kernel(ksize: int = GLC_KERNEL_SIZE, sigma: float = 0.0) -> np.ndarray:
    """The values of ``cv2.getGaussianKernel(ksize, sigma, cv2.CV_32F)``, computed without OpenCV.

    OpenCV uses a fixed table for odd ``ksize <= 7`` with ``sigma <= 0``; otherwise
    ``exp(-(i - (ksize - 1) / 2)^2 / (2 sigma^2))`` normalised to sum 1 (in double), then cast to float32. For
    ``ksize=19`` the 19 values equal OpenCV 5.0's bit for bit (pinned in the tests).
    """
    if ksize < 1 or ksize % 2 == 0:
        raise ValueError(f"ksize must be a positive odd integer, got {ksize}")
    if sigma <= 0 and ksize in _OPENCV_SMALL_KERNELS:
        return np.asarray(_OPENCV_SMALL_KERNELS[ksize], dtype=np.float32)
    sigma = sigma if sigma > 0 else opencv_default_sigma(ksize)
    x = np.arange(ksize, dtype=np.float64) - (ksize - 1) * 0.5
    kernel = np.exp(-(x * x) / (2.0 * sigma * sigma))
    return (kernel / kernel.sum()).astype(np.float32)


def _glc_kernel_peak() -> float:
    k = opencv_gaussian_kernel(GLC_KERNEL_SIZE)
    return float(k[GLC_KERNEL_SIZE // 2]) ** 2


GLC_BINARY_LEVEL = GLC_GT_THRESHOLD / _glc_kernel_peak()
"""Relative level of GLC's binary rule: ``0.001`` over the peak of GLC's 2D kernel (``0.01563``), about ``0.0640``.

The native protocol applies the same relative level to a peak-1 Gaussian of ``sigma`` px: the binary ground truth is
the disc where ``exp(-d^2 / (2 sigma^2)) > GLC_BINARY_LEVEL``, of radius ``sigma * sqrt(-2 ln level)`` (7.50 cells at
sigma 3.2 on GLC's grid, 58.6 px at sigma 25; docs/specs/evaluation.md, "Maps").
"""


def binary_gt_radius(sigma: float = DEFAULT_SIGMA_PX) -> float:
    """Radius (px) of the binary ground-truth disc for a Gaussian of ``sigma`` px (see :data:`GLC_BINARY_LEVEL`)."""
    return sigma * math.sqrt(-2.0 * math.log(GLC_BINARY_LEVEL))


def _check_size(width: int, height: int) -> None:
    if int(width) != width or int(height) != height or width < 1 or height < 1:
        raise ValueError(f"width and height must be positive integers (native pixels), got {width}x{height}")


def _as_tensor(x, name: str, dtype: torch.dtype) -> torch.Tensor:
    try:
        t = torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be array-like, got {type(x).__name__}") from err
    return t.to(dtype)


PROFILE_FLOOR = 1e-19
"""Profile values below this (more than 9.3 sigma from the centre) are set to exactly 0: the exponential of large
negative arguments takes a slow path, and the product of two profiles is then never a subnormal float (slow
arithmetic on x86). A map changes by at most ``1e-19`` of its peak: far below MIT's AUC jitter (``1e-7``), float32
resolution and the KL regulariser (``2.2e-16``)."""


def gaussian_profiles(
    centres_px: torch.Tensor, length: int, sigma: float, log_scale: torch.Tensor | None = None
) -> torch.Tensor:
    """Peak-1 Gaussian profiles ``exp(-((i + 0.5 - c)^2) / (2 sigma^2))`` at pixel centres ``i = 0..length-1``,
    with values below :data:`PROFILE_FLOOR` set to 0; times ``exp(log_scale)`` (``[...]``) when given, applied
    before the exponential so that far profiles can be brought back into range.

    ``centres_px [...]`` -> ``[..., length]`` (same dtype as ``centres_px``).
    """
    if sigma <= 0:
        raise ValueError(f"sigma must be positive (px), got {sigma}")
    grid = torch.arange(length, dtype=centres_px.dtype, device=centres_px.device) + 0.5
    d = (grid - centres_px.unsqueeze(-1)) / sigma
    arg = d.mul_(d).mul_(-0.5)
    if log_scale is not None:
        arg.add_(log_scale.unsqueeze(-1))
    floor = math.log(PROFILE_FLOOR)
    cut = arg < floor
    # exp() of large negative arguments takes a slow path: clamp first, then zero what lies below the floor
    return arg.clamp_(min=floor - 1.0).exp_().masked_fill_(cut, 0.0)


def _check_points(points: torch.Tensor, name: str, low: float, high: float) -> None:
    if not torch.isfinite(points).all():
        raise ValueError(f"{name} contains NaN or inf; expected finite unit coordinates")
    if points.numel() and (points.min() < low or points.max() > high):
        raise ValueError(
            f"{name} must be unit coordinates of the native frame in [{low}, {high}], got values in "
            f"[{float(points.min()):.4g}, {float(points.max()):.4g}] (model coordinates [-1, 1] or pixels?)"
        )


KEEP_SHAPE_LEVEL = 1e-6
"""``render_heatmaps(keep_shape=True)`` rescales a frame whose strongest sample would peak below this level inside
the frame (every sample more than about 5.3 sigma outside the frame's pixel centres)."""


def _outside_distance(px: torch.Tensor, length: int) -> torch.Tensor:
    """Distance (px) from ``px`` to the nearest pixel centre's coordinate range ``[0.5, length - 0.5]``."""
    return (0.5 - px).clamp(min=0.0) + (px - (length - 0.5)).clamp(min=0.0)


def _far_frame_profiles(px: torch.Tensor, width: int, height: int, sigma: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Profiles of frames whose samples all lie far outside, scaled so the frame's map is exact up to one factor.

    ``px [K, F, 2]`` float64. Sample k's x profile is scaled to peak 1 inside the frame (``exp(+ex_k^2 / 2 sigma^2)``,
    ``ex_k`` its distance to the pixel centres' range), its y profile likewise and also by
    ``exp(l_k - max_k l_k) <= 1`` with ``l_k = -(ex_k^2 + ey_k^2) / (2 sigma^2)``: the frame's map is the exact one
    times ``exp(-max_k l_k)``, the same factor for every pixel, with its strongest sample peaking at 1.
    """
    ex = _outside_distance(px[..., 0], width) / sigma
    ey = _outside_distance(px[..., 1], height) / sigma
    log_weight = -0.5 * (ex * ex + ey * ey)  # [K, F]
    relative = log_weight - log_weight.amax(0, keepdim=True)
    gx = gaussian_profiles(px[..., 0], width, sigma, log_scale=0.5 * ex * ex)
    gy = gaussian_profiles(px[..., 1], height, sigma, log_scale=0.5 * ey * ey + relative)
    return gx, gy


def render_heatmaps(
    trajectories,
    width: int,
    height: int,
    sigma: float = DEFAULT_SIGMA_PX,
    dtype: torch.dtype = torch.float32,
    keep_shape: bool = False,
) -> torch.Tensor:
    """Per-frame heatmaps of K sampled trajectories (paper Appendix E.3, "Trajectory-to-heatmap conversion").

    ``trajectories``: ``[K, T, 2]`` (x, y) unit coordinates of the native ``width x height`` frame (``[T, 2]`` is
    read as K = 1). Points may lie a little outside the frame (``[-0.5, 1.5]``); their Gaussians are cut by the
    frame. Returns ``[T, height, width]``: for each frame the mean over K of peak-1 Gaussians of ``sigma`` px.

    ``keep_shape=True`` (the evaluator's setting): a frame whose samples all lie so far outside that its map would
    peak below :data:`KEEP_SHAPE_LEVEL` (or underflow to all zeros past about 9.3 sigma) is rendered scaled up by
    one factor, so that its strongest sample peaks at 1 inside the frame and the map keeps its exact shape. Scores
    of the paper protocol depend only on a map's shape; every other frame is rendered exactly as with ``False``.
    """
    _check_size(width, height)
    pts = _as_tensor(trajectories, "trajectories", torch.float64)
    if pts.ndim == 2:
        pts = pts.unsqueeze(0)
    if pts.ndim != 3 or pts.shape[-1] != 2 or pts.shape[0] < 1:
        raise ValueError(f"trajectories must have shape [K, T, 2] with K >= 1, got {tuple(pts.shape)}")
    _check_points(pts, "trajectories", -0.5, 1.5)
    px = unit_to_pixels(pts, width, height)  # [K, T, 2] in float64, then profiles in the output dtype
    gx = gaussian_profiles(px[..., 0].to(dtype), width, sigma)  # [K, T, W]
    gy = gaussian_profiles(px[..., 1].to(dtype), height, sigma)  # [K, T, H]
    if keep_shape:
        nearest = (_outside_distance(px[..., 0], width) ** 2 + _outside_distance(px[..., 1], height) ** 2).amin(0)
        far = torch.nonzero(-0.5 * nearest / (sigma * sigma) < math.log(KEEP_SHAPE_LEVEL)).reshape(-1)
        if far.numel():
            far_x, far_y = _far_frame_profiles(px[:, far], width, height, sigma)
            gx[:, far], gy[:, far] = far_x.to(dtype), far_y.to(dtype)
    gy.mul_(1.0 / pts.shape[0])  # mean over K
    return torch.bmm(gy.permute(1, 2, 0), gx.permute(1, 0, 2))  # [T, H, W]


def render_gt_heatmaps(
    gaze,
    width: int,
    height: int,
    sigma: float = DEFAULT_SIGMA_PX,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Ground-truth fixation maps (docs/specs/evaluation.md, "Maps"): a Gaussian of ``sigma`` px at each gaze point.

    ``gaze``: ``[T, 2]`` unit coordinates in ``[0, 1]``. Returns ``[T, height, width]``, each frame summing to 1.
    """
    _check_size(width, height)
    g = _as_tensor(gaze, "gaze", torch.float64)
    if g.ndim != 2 or g.shape[-1] != 2:
        raise ValueError(f"gaze must have shape [T, 2], got {tuple(g.shape)}")
    _check_points(g, "gaze", 0.0, 1.0)
    px = unit_to_pixels(g, width, height)
    gx = gaussian_profiles(px[:, 0], width, sigma)  # [T, W], float64
    gy = gaussian_profiles(px[:, 1], height, sigma)  # [T, H]
    total = gx.sum(-1) * gy.sum(-1)  # separable sum of the outer product
    maps = gy.unsqueeze(-1) * (gx / total.unsqueeze(-1)).unsqueeze(-2)
    return maps.to(dtype)


def render_gaussian_map(centre, sigma_px, width: int, height: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """One static map: a peak-1 axis-aligned Gaussian at ``centre`` (unit (x, y)) with per-axis ``sigma_px = (sx, sy)``
    in native px (the Center Bias prior, paper Appendix E.2). Returns ``[height, width]``."""
    _check_size(width, height)
    c = _as_tensor(centre, "centre", torch.float64)
    if c.shape != (2,):
        raise ValueError(f"centre must be one unit point (x, y), got shape {tuple(c.shape)}")
    _check_points(c, "centre", 0.0, 1.0)
    sx, sy = (float(v) for v in np.broadcast_to(np.asarray(sigma_px, dtype=np.float64), (2,)))
    px = unit_to_pixels(c, width, height)
    gx = gaussian_profiles(px[0:1], width, sx)[0]
    gy = gaussian_profiles(px[1:2], height, sy)[0]
    return (gy.unsqueeze(-1) * gx.unsqueeze(-2)).to(dtype)


def fixation_pixels(gaze, width: int, height: int) -> torch.Tensor:
    """The fixated pixel ``(col, row) = (floor(x W), floor(y H))`` of each unit gaze point, clipped into the frame.

    ``gaze [..., 2]`` -> int64 ``[..., 2]`` (x, y). This is the pixel that AUC-Judd and NSS read.
    """
    _check_size(width, height)
    g = _as_tensor(gaze, "gaze", torch.float64)
    _check_points(g, "gaze", 0.0, 1.0)
    px = torch.floor(unit_to_pixels(g, width, height)).long()
    return torch.stack((px[..., 0].clamp(0, width - 1), px[..., 1].clamp(0, height - 1)), dim=-1)


def binary_gt_masks(gaze, width: int, height: int, sigma: float = DEFAULT_SIGMA_PX) -> torch.Tensor:
    """Binary ground truth of F1/P/R: pixels whose peak-1 Gaussian value exceeds :data:`GLC_BINARY_LEVEL`.

    ``gaze [T, 2]`` unit -> bool ``[T, height, width]``: a disc of radius :func:`binary_gt_radius` around each gaze
    point (pixel centres), cut by the frame.
    """
    _check_size(width, height)
    g = _as_tensor(gaze, "gaze", torch.float64)
    if g.ndim != 2 or g.shape[-1] != 2:
        raise ValueError(f"gaze must have shape [T, 2], got {tuple(g.shape)}")
    _check_points(g, "gaze", 0.0, 1.0)
    px = unit_to_pixels(g, width, height)
    gx = gaussian_profiles(px[:, 0], width, sigma)
    gy = gaussian_profiles(px[:, 1], height, sigma)
    return (gy.unsqueeze(-1) * gx.unsqueeze(-2)) > GLC_BINARY_LEVEL


# ----------------------------------------------------------------------------------------------------------------
# GLC's own 64x64 pipeline (protocol="glc"; docs/specs/evaluation.md, "GLC's own pipeline")
# ----------------------------------------------------------------------------------------------------------------


def glc_resized_size(width: int, height: int, crop: int = GLC_CROP) -> tuple[int, int]:
    """Frame size after GLC's short-side resize to ``crop`` (the long side floored), as ``(new_w, new_h)``."""
    _check_size(width, height)
    if width < height:
        return crop, int(math.floor(height * crop / width))
    return int(math.floor(width * crop / height)), crop


def glc_crop_gaze(gaze, width: int, height: int, crop: int = GLC_CROP, clip: bool = True) -> np.ndarray:
    """Gaze mapped into GLC's test crop: ``clip((x * new_w - off_x) / crop, 0, 1)`` with
    ``off = ceil((new - crop) / 2)``.

    ``gaze [..., 2]`` unit coordinates of the native frame -> float64 ``[..., 2]`` unit coordinates of the crop.
    ``clip=False`` keeps points that fall outside the crop outside (used for predicted samples, whose Gaussians
    are then cut by the crop).
    """
    new_w, new_h = glc_resized_size(width, height, crop)
    off_x = math.ceil((new_w - crop) / 2)
    off_y = math.ceil((new_h - crop) / 2)
    g = np.asarray(gaze, dtype=np.float64)
    if g.shape[-1:] != (2,):
        raise ValueError(f"gaze must have shape [..., 2], got {g.shape}")
    if not np.isfinite(g).all():
        raise ValueError("gaze contains NaN or inf; expected finite unit coordinates")
    xy = np.stack(((g[..., 0] * new_w - off_x) / crop, (g[..., 1] * new_h - off_y) / crop), axis=-1)
    return np.clip(xy, 0.0, 1.0) if clip else xy


def glc_native_to_grid(maps, width: int, height: int, crop: int = GLC_CROP, grid: int = GLC_GRID) -> torch.Tensor:
    """Bring native ``[F, height, width]`` maps into GLC's grid: the same short-side resize (bilinear) and centre crop
    as GLC's frames, then a ``crop / grid`` average pooling to ``[F, grid, grid]``. Used by ``protocol="glc"`` for
    predictions that are not already 64x64 (e.g. the Center Bias prior)."""
    m = _as_tensor(maps, "maps", torch.float32)
    if m.ndim != 3 or tuple(m.shape[-2:]) != (height, width):
        raise ValueError(f"maps must have shape [F, {height}, {width}] (native), got {tuple(m.shape)}")
    new_w, new_h = glc_resized_size(width, height, crop)
    off_x, off_y = math.ceil((new_w - crop) / 2), math.ceil((new_h - crop) / 2)
    r = torch.nn.functional.interpolate(m.unsqueeze(1), size=(new_h, new_w), mode="bilinear", align_corners=False)
    r = r[:, :, off_y : off_y + crop, off_x : off_x + crop]
    return torch.nn.functional.avg_pool2d(r, crop // grid).squeeze(1)


def glc_gt_heatmaps(gaze_crop, grid: int = GLC_GRID, ksize: int = GLC_KERNEL_SIZE) -> torch.Tensor:
    """GLC's ground-truth maps (``Egteagaze._get_gaussian_map`` plus its renormalisation), float32 ``[T, grid, grid]``.

    Centre cell ``(round(x * grid), round(y * grid))`` (round half to even), the float32 OpenCV kernel's outer
    product pasted and cut at the border, renormalised to sum 1 in float64 (uniform if nothing was pasted), stored as
    float32. ``gaze_crop [T, 2]``: unit coordinates of GLC's crop (:func:`glc_crop_gaze`).
    """
    g = np.asarray(gaze_crop, dtype=np.float64)
    if g.ndim != 2 or g.shape[-1] != 2:
        raise ValueError(f"gaze_crop must have shape [T, 2], got {g.shape}")
    if not np.isfinite(g).all():
        raise ValueError("gaze_crop contains NaN or inf")
    k1 = opencv_gaussian_kernel(ksize).reshape(-1, 1)
    kernel = k1 * k1.T  # float32, as cv2's CV_32F kernel times its transpose
    half = (ksize - 1) // 2
    out = np.zeros((g.shape[0], grid, grid), dtype=np.float64)
    for i, (x, y) in enumerate(g):
        mu_x, mu_y = round(x * grid), round(y * grid)
        left, right = max(mu_x - half, 0), min(mu_x + half, grid - 1)
        top, bottom = max(mu_y - half, 0), min(mu_y + half, grid - 1)
        if left < right and top < bottom:
            out[i, top : bottom + 1, left : right + 1] = kernel[
                half - mu_y + top : half + bottom - mu_y + 1, half - mu_x + left : half + right - mu_x + 1
            ]
        total = out[i].sum()
        if total == 0:
            out[i] += 1.0 / (grid * grid)
        elif total != 1:
            out[i] /= total
    return torch.from_numpy(out).float()


def glc_frame_softmax(logits, temperature: float = 2.0) -> torch.Tensor:
    """GLC's test-time prediction map: a softmax over each frame's cells of ``logits / temperature``
    (``[..., h, w]``)."""
    t = _as_tensor(logits, "logits", torch.float32)
    if t.ndim < 2:
        raise ValueError(f"logits must have shape [..., h, w], got {tuple(t.shape)}")
    flat = t.reshape(*t.shape[:-2], -1)
    return torch.softmax(flat / temperature, dim=-1).reshape(t.shape)


def glc_distribution(maps) -> torch.Tensor:
    """Maps of ours brought to GLC's scale before GLC's min-max: each ``[..., h, w]`` map divided by its sum, a
    distribution over the grid like GLC's softmax output (an all-zero map stays zero). GLC's ``+1e-6`` in
    :func:`glc_minmax` is a fixed amount, so F1/P/R under it depend on the scale it is applied at: this one."""
    t = _as_tensor(maps, "maps", torch.float32)
    if t.ndim < 2:
        raise ValueError(f"maps must have shape [..., h, w], got {tuple(t.shape)}")
    total = t.sum(dim=(-2, -1), keepdim=True)
    return t / torch.where(total > 0, total, torch.ones_like(total))


def glc_minmax(maps) -> torch.Tensor:
    """GLC's per-frame rescale ``(p - min) / (max - min + 1e-6)`` in float32 (``tools/test_gaze_net.py``)."""
    t = _as_tensor(maps, "maps", torch.float32)
    if t.ndim < 2:
        raise ValueError(f"maps must have shape [..., h, w], got {tuple(t.shape)}")
    flat = t.reshape(*t.shape[:-2], -1)
    lo = flat.min(dim=-1, keepdim=True)[0]
    hi = flat.max(dim=-1, keepdim=True)[0]
    return ((flat - lo) / (hi - lo + GLC_PRED_EPS)).reshape(t.shape)


__all__ = [
    "DEFAULT_SIGMA_PX",
    "HEATMAP_SIGMA_FRACTION",
    "heatmap_sigma_px",
    "GLC_GRID",
    "GLC_CROP",
    "GLC_KERNEL_SIZE",
    "GLC_GT_THRESHOLD",
    "GLC_BINARY_LEVEL",
    "GLC_PRED_EPS",
    "opencv_default_sigma",
    "opencv_gaussian_kernel",
    "binary_gt_radius",
    "gaussian_profiles",
    "PROFILE_FLOOR",
    "render_heatmaps",
    "render_gt_heatmaps",
    "render_gaussian_map",
    "fixation_pixels",
    "binary_gt_masks",
    "glc_resized_size",
    "glc_crop_gaze",
    "glc_gt_heatmaps",
    "glc_native_to_grid",
    "glc_frame_softmax",
    "glc_distribution",
    "glc_minmax",
    "KEEP_SHAPE_LEVEL",
]
