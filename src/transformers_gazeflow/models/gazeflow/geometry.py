"""Coordinate conventions of GazeFlow, in one place.

Four frames of reference are used across the project:

* **unit** coordinates: ``(x, y)`` in ``[0, 1]`` of the native video frame, origin at the top-left corner,
  ``x`` to the right, ``y`` down. Datasets, the pipeline, CSV export and metrics speak this frame.
* **model** coordinates: ``[-1, 1]``, the space of the flow-matching state ``x_s`` (paper Section 3.2),
  obtained as ``2 * unit - 1``.
* **pixel** coordinates: ``unit * (width, height)``, continuous, so that pixel ``i`` covers ``[i, i + 1)``.
  This matches the EGTEA normalisation ``clip(px, 0, W - 1) / W`` of the reference loaders.
* **degrees**, through a pinhole camera (:class:`PinholeCamera`: focal lengths ``fx, fy`` and principal point
  ``cx, cy`` in pixels): a pixel is the ray ``((x - cx) / fx, (y - cy) / fy, 1)``. Its coordinates in degrees are
  Fick angles (:meth:`PinholeCamera.angles_deg`): ``x_deg`` the azimuth, positive to the right, and ``y_deg`` the
  elevation, positive *downwards* like ``y`` in the other frames (the usual "elevation up" is ``-y_deg``). Distances
  in degrees are always the angle between the two rays (:func:`ray_angle_deg`), never a difference of Fick angles.
  The metrics' angular error uses the same camera and the same function: a 60 degree horizontal field of view
  (:data:`DEFAULT_HORIZONTAL_FOV_DEG`, Huang et al. ECCV 2018), square pixels and the principal point at the frame
  centre, for EGTEA Gaze+ and Ego4D alike.
* **degrees through a fisheye camera** (:class:`FisheyeCamera`, Project Aria's RGB camera): a pixel is the ray its
  FISHEYE624 model unprojects (projectaria_tools' ``FisheyeRadTanThinPrism``: radial polynomial in the angle from the
  optical axis, tangential and thin-prism terms, one focal length), inverted by Newton's method as projectaria_tools
  does; Fick angles and distances in degrees as for the pinhole, from that ray. A pinhole ``--fov`` is wrong on such
  video away from the centre.

Every conversion between them lives here; nothing else in the package re-derives them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import torch

ArrayLike = TypeVar("ArrayLike", torch.Tensor, np.ndarray)


def unit_to_model(points: ArrayLike) -> ArrayLike:
    """Map unit coordinates ``[0, 1]`` to model coordinates ``[-1, 1]`` (``2 x - 1``)."""
    return points * 2.0 - 1.0


def model_to_unit(points: ArrayLike) -> ArrayLike:
    """Map model coordinates ``[-1, 1]`` to unit coordinates ``[0, 1]`` (``(x + 1) / 2``)."""
    return (points + 1.0) * 0.5


def mirror_unit_horizontally(points: ArrayLike) -> ArrayLike:
    """The unit-coordinate points ``[..., 2]`` of a frame mirrored left to right: ``(x, y) -> (1 - x, y)``."""
    mirrored = points.clone() if isinstance(points, torch.Tensor) else np.array(points, copy=True)
    mirrored[..., 0] = 1.0 - mirrored[..., 0]
    return mirrored


def patch_centres(
    grid_size: int, device: torch.device | str | None = None, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """Model coordinates ``[N, 2]`` (``N = grid_size ** 2``) of the centres of a ``grid_size x grid_size`` token
    grid over the whole frame, in the encoder's token order (row-major: token ``row * grid_size + col`` covers
    columns ``[col, col + 1) / grid_size`` and rows ``[row, row + 1) / grid_size`` of the frame, in unit
    coordinates). The processor resizes the whole frame, so the grid covers exactly what the gaze is measured on."""
    if not isinstance(grid_size, int) or grid_size < 1:
        raise ValueError(f"patch_centres: grid_size must be an int >= 1, got {grid_size!r}")
    centres_1d = (torch.arange(grid_size, device=device, dtype=dtype) + 0.5) / grid_size
    rows, cols = torch.meshgrid(centres_1d, centres_1d, indexing="ij")
    return unit_to_model(torch.stack([cols.reshape(-1), rows.reshape(-1)], dim=-1))


def _frame_size(width: float, height: float, like: ArrayLike) -> ArrayLike:
    if width <= 0 or height <= 0:
        raise ValueError(f"frame size must be positive, got width={width}, height={height}")
    if isinstance(like, torch.Tensor):
        return torch.tensor(
            [width, height], dtype=like.dtype if like.is_floating_point() else torch.float32, device=like.device
        )
    return np.asarray([width, height], dtype=np.float64)


def unit_to_pixels(points: ArrayLike, width: float, height: float) -> ArrayLike:
    """Map unit coordinates to continuous pixel coordinates of a ``width x height`` frame (``x * W``, ``y * H``)."""
    return points * _frame_size(width, height, points)


def pixels_to_unit(points: ArrayLike, width: float, height: float) -> ArrayLike:
    """Map continuous pixel coordinates of a ``width x height`` frame to unit coordinates (``px / W``, ``py / H``)."""
    return points / _frame_size(width, height, points)


def clamp_unit(points: ArrayLike) -> ArrayLike:
    """Clamp unit coordinates into the frame ``[0, 1]`` (off-frame points land on the border)."""
    if isinstance(points, torch.Tensor):
        return points.clamp(0.0, 1.0)
    return np.clip(points, 0.0, 1.0)


# --- degrees: a pinhole camera ------------------------------------------------------------------------------------

DEFAULT_HORIZONTAL_FOV_DEG = 60.0
"""Horizontal field of view of the camera the metrics' angular error assumes (AAE; Huang et al. ECCV 2018): focal
``(W / 2) / tan(30 deg)``, the same focal vertically, principal point at the frame centre, on EGTEA Gaze+ and Ego4D
alike (the datasets ship no intrinsics for their scene cameras)."""


def _finite_positive(value: float, what: str) -> float:
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{what} must be a positive number of pixels, got {value}")
    return value


@dataclass(frozen=True)
class PinholeCamera:
    """A pinhole camera in the pixels of a frame: focal lengths ``fx, fy`` and principal point ``cx, cy`` (pixels, in
    the continuous pixel frame of :func:`unit_to_pixels`). ``width``/``height``: the frame size the intrinsics were
    measured at, when known (:meth:`for_frame` rescales them to another size of the same view)."""

    fx: float
    fy: float
    cx: float
    cy: float
    width: int | None = None
    height: int | None = None

    def __post_init__(self) -> None:
        _finite_positive(self.fx, "fx")
        _finite_positive(self.fy, "fy")
        for name in ("cx", "cy"):
            if not math.isfinite(float(getattr(self, name))):
                raise ValueError(f"{name} must be a finite number of pixels, got {getattr(self, name)}")
        if (self.width is None) != (self.height is None):
            raise ValueError("a camera's width and height go together")
        if self.width is not None and not (int(self.width) >= 1 and int(self.height) >= 1):
            raise ValueError(f"frame size must be positive, got width={self.width}, height={self.height}")

    @classmethod
    def from_fov(
        cls,
        width: int,
        height: int,
        horizontal_deg: float = DEFAULT_HORIZONTAL_FOV_DEG,
        vertical_deg: float | None = None,
    ) -> PinholeCamera:
        """The camera of a ``width x height`` frame seeing ``horizontal_deg`` across (``vertical_deg`` top to
        bottom; None: square pixels, ``fy = fx``), principal point at the centre: ``fx = (W / 2) / tan(h / 2)``."""
        fx = (width / 2) / math.tan(math.radians(check_fov(horizontal_deg, "horizontal")) / 2)
        fy = (
            fx
            if vertical_deg is None
            else (height / 2) / math.tan(math.radians(check_fov(vertical_deg, "vertical")) / 2)
        )
        return cls(fx, fy, width / 2, height / 2, int(width), int(height))

    def for_frame(self, width: int, height: int) -> PinholeCamera:
        """These intrinsics for a ``width x height`` frame: unchanged without a recorded size or at the same size;
        scaled by ``width / self.width`` and ``height / self.height`` otherwise (the same view, resized)."""
        if self.width is None or (int(width), int(height)) == (self.width, self.height):
            return (
                self
                if self.width is not None
                else PinholeCamera(self.fx, self.fy, self.cx, self.cy, int(width), int(height))
            )
        sx, sy = width / self.width, height / self.height
        return PinholeCamera(self.fx * sx, self.fy * sy, self.cx * sx, self.cy * sy, int(width), int(height))

    @property
    def fov_deg(self) -> tuple[float, float]:
        """Horizontal and vertical field of view (degrees) over the recorded frame size, if the principal point is
        centred (otherwise the angles the two halves add up to)."""
        if self.width is None:
            raise ValueError("the camera has no frame size")
        h = math.degrees(math.atan(self.cx / self.fx) + math.atan((self.width - self.cx) / self.fx))
        v = math.degrees(math.atan(self.cy / self.fy) + math.atan((self.height - self.cy) / self.fy))
        return h, v

    def angles_deg(self, points_px: ArrayLike) -> ArrayLike:
        """Fick angles ``[..., 2]`` (degrees) of pixel points ``[..., 2]``: azimuth ``atan(u)`` and elevation
        ``atan2(v, sqrt(1 + u^2))`` (positive downwards) of the ray ``(u, v, 1)``, ``u = (x - cx) / fx``,
        ``v = (y - cy) / fy``."""
        xp = torch if isinstance(points_px, torch.Tensor) else np
        u = (points_px[..., 0] - self.cx) / self.fx
        v = (points_px[..., 1] - self.cy) / self.fy
        azimuth = xp.arctan2(u, xp.ones_like(u))
        elevation = xp.arctan2(v, xp.sqrt(1.0 + u * u))
        return xp.rad2deg(xp.stack([azimuth, elevation], -1))

    def angle_between_deg(self, a_px: ArrayLike, b_px: ArrayLike) -> ArrayLike:
        """The angle (degrees) between the rays of pixel points ``a_px`` and ``b_px`` ``[..., 2]`` -> ``[...]``."""
        return ray_angle_deg(
            a_px[..., 0] - self.cx,
            a_px[..., 1] - self.cy,
            b_px[..., 0] - self.cx,
            b_px[..., 1] - self.cy,
            self.fx,
            self.fy,
        )

    def to_dict(self) -> dict:
        """``fx, fy, cx, cy`` (and ``width, height`` when known) as plain numbers, for JSON."""
        values = {"fx": float(self.fx), "fy": float(self.fy), "cx": float(self.cx), "cy": float(self.cy)}
        if self.width is not None:
            values.update(width=int(self.width), height=int(self.height))
        return values


@dataclass(frozen=True)
class FieldOfView:
    """A camera given by its field of view (degrees): :meth:`for_frame` is the pinhole camera of a frame size,
    principal point at the centre (:meth:`PinholeCamera.from_fov`; ``vertical_deg`` None: square pixels)."""

    horizontal_deg: float = DEFAULT_HORIZONTAL_FOV_DEG
    vertical_deg: float | None = None

    def __post_init__(self) -> None:
        check_fov(self.horizontal_deg, "horizontal")
        if self.vertical_deg is not None:
            check_fov(self.vertical_deg, "vertical")

    def for_frame(self, width: int, height: int) -> PinholeCamera:
        return PinholeCamera.from_fov(width, height, self.horizontal_deg, self.vertical_deg)

    def to_dict(self) -> dict:
        return {
            "horizontal_fov_deg": float(self.horizontal_deg),
            "vertical_fov_deg": None if self.vertical_deg is None else float(self.vertical_deg),
        }


def check_fov(degrees: float, which: str = "horizontal") -> float:
    """A field of view in degrees must lie in (0, 180) (a pinhole camera sees less than a half space)."""
    value = float(degrees)
    if not (math.isfinite(value) and 0 < value < 180):
        raise ValueError(f"{which} field of view must be in (0, 180) degrees for a pinhole camera, got {degrees}")
    return value


def ray_angle_deg(
    ax: ArrayLike, ay: ArrayLike, bx: ArrayLike, by: ArrayLike, fx: float, fy: float | None = None
) -> ArrayLike:
    """The angle (degrees) between the rays of two image points given as offsets from the principal point in
    pixels, under focal lengths ``fx, fy`` (``fy`` None: ``fx``): rays ``(x, y * fx / fy, fx)``, angle
    ``atan2(|r1 x r2|, r1 . r2)`` (accurate at every angle, unlike ``acos`` of the normalised dot product). Torch
    tensors or numpy arrays, broadcast against each other."""
    xp = torch if isinstance(ax, torch.Tensor) else np
    aspect = 1.0 if fy is None or fy == fx else fx / fy
    ay, by = (ay, by) if aspect == 1.0 else (ay * aspect, by * aspect)
    cross_x = ay * fx - fx * by
    cross_y = fx * bx - ax * fx
    cross_z = ax * by - ay * bx
    cross = xp.sqrt(cross_x * cross_x + cross_y * cross_y + cross_z * cross_z)
    dot = ax * bx + ay * by + fx * fx
    return xp.rad2deg(xp.arctan2(cross, dot))


# --- degrees: a fisheye camera (FISHEYE624) ----------------------------------------------------------------------

FISHEYE624 = "FISHEYE624"
"""The name of Project Aria's camera model (projectaria_tools' ``FisheyeRadTanThinPrism``, JSON name of the same)."""
FISHEYE624_NUM_PARAMS = 15
"""FISHEYE624's parameters, in projectaria_tools' order: ``f, cx, cy, k0..k5, p0, p1, s0..s3``."""
_NEWTON_ITERATIONS = 50  # projectaria_tools' CameraNewtonsMethod::kMaxIterations
_NEWTON_TOLERANCE = 1e-7  # its convergence tolerance for doubles
_SOPHUS_EPSILON = 1e-10  # Sophus::Constants<double>::epsilon(), its guard on a vanishing derivative


def _float64_points(points: ArrayLike) -> tuple[np.ndarray, object]:
    """``points`` as a float64 numpy array, and a function that turns a result back into the input's kind."""
    if isinstance(points, torch.Tensor):
        dtype = points.dtype if points.is_floating_point() else torch.float64
        device = points.device
        return points.detach().to("cpu", torch.float64).numpy(), lambda out: torch.from_numpy(out).to(device, dtype)
    return np.asarray(points, dtype=np.float64), lambda out: out


def _angle_between_rays_deg(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The angle (degrees) between 3D rays ``[..., 3]``: ``atan2(|a x b|, a . b)``, accurate at every angle."""
    return np.rad2deg(np.arctan2(np.linalg.norm(np.cross(a, b), axis=-1), (a * b).sum(-1)))


@dataclass(frozen=True)
class FisheyeCamera:
    """Project Aria's FISHEYE624 camera in the pixels of a ``width x height`` frame (projectaria_tools'
    ``FisheyeRadTanThinPrism<6, true, true, true>``, ``core/calibration/camera_projections/FisheyeRadTanThinPrism.h``).

    ``params`` = ``(f, cx, cy, k0..k5, p0, p1, s0..s3)`` as projectaria_tools stores them, in its pixel convention
    (pixel centres at integers): its pixel ``(u, v)`` is ``(u + 0.5, v + 0.5)`` in the continuous pixel frame of
    :func:`unit_to_pixels`, which every method here takes and returns. A ray ``(x, y, z)`` projects as: ``(a, b) =
    (x, y) / z``, ``r = |(a, b)|``, ``theta = atan(r)``, ``(xr, yr) = theta (1 + k0 theta^2 + ... + k5 theta^12)
    (a, b) / r``; plus the tangential term ``((2 xr^2 + rd^2) p0 + 2 xr yr p1, (2 yr^2 + rd^2) p1 + 2 xr yr p0)``
    and the thin-prism term ``(s0 rd^2 + s1 rd^4, s2 rd^2 + s3 rd^4)`` (``rd^2 = xr^2 + yr^2``); times ``f``, plus
    ``(cx, cy)``. Without distortion it is the equidistant fisheye: a pixel ``d`` pixels from the principal point
    sees ``d / f`` radians off the optical axis. Unprojection inverts it by Newton's method, as projectaria_tools
    does (tangential and thin-prism terms first, then the radial polynomial in ``theta``).
    """

    params: tuple[float, ...]
    width: int
    height: int

    def __post_init__(self) -> None:
        values = tuple(float(v) for v in np.asarray(self.params, dtype=np.float64).reshape(-1))
        if len(values) != FISHEYE624_NUM_PARAMS or not all(math.isfinite(v) for v in values):
            raise ValueError(
                f"FISHEYE624 takes {FISHEYE624_NUM_PARAMS} finite parameters (f, cx, cy, k0..k5, p0, p1, s0..s3), "
                f"got {list(values)}"
            )
        _finite_positive(values[0], "the focal length f")
        if not (int(self.width) >= 1 and int(self.height) >= 1):
            raise ValueError(f"frame size must be positive, got width={self.width}, height={self.height}")
        object.__setattr__(self, "params", values)
        object.__setattr__(self, "width", int(self.width))
        object.__setattr__(self, "height", int(self.height))

    def _distort(self, xr: np.ndarray, yr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The tangential and thin-prism terms added to the radially distorted ``(xr, yr)``."""
        p0, p1, s0, s1, s2, s3 = self.params[9:]
        rd2 = xr * xr + yr * yr
        twice_dot = 2.0 * (xr * p0 + yr * p1)
        u = xr + twice_dot * xr + rd2 * p0 + s0 * rd2 + s1 * rd2 * rd2
        v = yr + twice_dot * yr + rd2 * p1 + s2 * rd2 + s3 * rd2 * rd2
        return u, v

    def _undistort(self, u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(xr, yr)`` whose :meth:`_distort` is ``(u, v)``: Newton's method from ``(u, v)``, each point stopping
        once its correction is below the tolerance (projectaria_tools' ``compute_xr_yr_from_uvDistorted``)."""
        p0, p1, s0, s1, s2, s3 = self.params[9:]
        xr, yr = u.copy(), v.copy()
        active = np.ones(u.shape, bool)
        for _ in range(_NEWTON_ITERATIONS):
            if not active.any():
                break
            est_u, est_v = self._distort(xr, yr)
            rd2 = xr * xr + yr * yr
            off_diagonal = 2.0 * (xr * p1 + yr * p0)
            prism_x, prism_y = 2.0 * (s0 + 2.0 * s1 * rd2), 2.0 * (s2 + 2.0 * s3 * rd2)
            j00 = 1.0 + 6.0 * xr * p0 + 2.0 * yr * p1 + xr * prism_x
            j01 = off_diagonal + yr * prism_x
            j10 = off_diagonal + xr * prism_y
            j11 = 1.0 + 6.0 * yr * p1 + 2.0 * xr * p0 + yr * prism_y
            det = j00 * j11 - j01 * j10
            du, dv = u - est_u, v - est_v
            step_x = np.where(active, (j11 * du - j01 * dv) / det, 0.0)
            step_y = np.where(active, (j00 * dv - j10 * du) / det, 0.0)
            xr, yr = xr + step_x, yr + step_y
            active &= step_x * step_x + step_y * step_y >= _NEWTON_TOLERANCE**2
        return xr, yr

    def _theta_of_radius(self, radius: np.ndarray) -> np.ndarray:
        """``theta`` with ``theta (1 + k0 theta^2 + ... + k5 theta^12) = radius``: Newton's method from ``radius``,
        kept inside the half space (projectaria_tools' ``getThetaFromNorm_xr_yr``)."""
        ks = self.params[3:9]
        theta = radius.copy()
        active = np.ones(radius.shape, bool)
        for _ in range(_NEWTON_ITERATIONS):
            if not active.any():
                break
            theta2 = theta * theta
            power, radial, slope = theta2.copy(), np.ones_like(theta), np.ones_like(theta)
            for i, k in enumerate(ks):
                radial += power * k
                slope += (2 * i + 3) * k * power
                power = power * theta2
            residual = radius - radial * theta
            nudge = np.where(residual * slope > 0, 10.0, -10.0) * _SOPHUS_EPSILON
            step = np.where(np.abs(slope) > _SOPHUS_EPSILON, residual / np.where(slope == 0, 1.0, slope), nudge)
            step = np.where(active, step, 0.0)
            theta = theta + step
            active &= np.abs(step) >= _NEWTON_TOLERANCE
            theta = np.where(active & (np.abs(theta) >= math.pi / 2), 0.999 * math.pi / 2, theta)
        return theta

    def project(self, rays: ArrayLike) -> ArrayLike:
        """Pixels ``[..., 2]`` (continuous frame) of camera-frame points or rays ``[..., 3]``; NaN behind the camera
        (``z <= 0``)."""
        points, back = _float64_points(rays)
        f, cx, cy = self.params[:3]
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(points[..., 2] > 0, points[..., 2], np.nan)
            a, b = points[..., 0] / z, points[..., 1] / z
            r = np.hypot(a, b)
            theta = np.arctan(r)
            theta2, power, radial = theta * theta, theta * theta, np.ones_like(theta)
            for k in self.params[3:9]:
                radial += power * k
                power = power * theta2
            scale = radial * np.where(r < np.finfo(np.float64).eps, 1.0, theta / np.where(r == 0, 1.0, r))
            u, v = self._distort(scale * a, scale * b)
        return back(np.stack([f * u + cx + 0.5, f * v + cy + 0.5], -1))

    def unproject(self, points_px: ArrayLike) -> ArrayLike:
        """The rays ``(x, y, 1)`` ``[..., 3]`` of pixels ``[..., 2]`` (continuous frame), as projectaria_tools'
        ``unproject`` returns them."""
        pixels, back = _float64_points(points_px)
        f, cx, cy = self.params[:3]
        xr, yr = self._undistort((pixels[..., 0] - 0.5 - cx) / f, (pixels[..., 1] - 0.5 - cy) / f)
        norm = np.hypot(xr, yr)
        theta = self._theta_of_radius(norm)
        scale = np.where(norm == 0, 0.0, np.tan(theta) / np.where(norm == 0, 1.0, norm))
        return back(np.stack([scale * xr, scale * yr, np.ones_like(norm)], -1))

    def scaled(self, scale: float, width: int, height: int, offset: tuple[float, float] = (0.0, 0.0)) -> FisheyeCamera:
        """This camera for a frame cropped by ``offset`` pixels (left, top) and then resized by ``scale`` to
        ``width x height`` (projectaria_tools' ``CameraCalibration.rescale``: ``f * s``, ``s (c - offset + 0.5) -
        0.5``; the distortion is unchanged)."""
        f, cx, cy = self.params[:3]
        s = _finite_positive(scale, "scale")
        centre = (s * (cx - offset[0] + 0.5) - 0.5, s * (cy - offset[1] + 0.5) - 0.5)
        return FisheyeCamera((f * s, *centre, *self.params[3:]), width, height)

    def rotated_cw90(self) -> FisheyeCamera:
        """This camera for its frame turned 90 degrees clockwise (Aria's upright RGB video: pixel ``(u, v)`` of the
        raw frame is ``(H - 1 - v, u)``; projectaria_tools' ``rotateCameraCalibCW90Deg``)."""
        f, cx, cy, *ks = self.params[:9]
        p0, p1, s0, s1, s2, s3 = self.params[9:]
        return FisheyeCamera((f, self.height - 1 - cy, cx, *ks, -p1, p0, -s2, -s3, s0, s1), self.height, self.width)

    def for_frame(self, width: int, height: int) -> FisheyeCamera:
        """This camera for a ``width x height`` copy of its frame: itself at the same size, else :meth:`scaled`
        uniformly (a fisheye keeps one focal length, so the copy must keep the aspect ratio)."""
        if (int(width), int(height)) == (self.width, self.height):
            return self
        scale_x, scale_y = width / self.width, height / self.height
        if not math.isclose(scale_x, scale_y, rel_tol=1e-3):
            raise ValueError(
                f"a FISHEYE624 camera of a {self.width}x{self.height} frame cannot describe a {width}x{height} frame "
                "(only uniform resizes keep its single focal length)"
            )
        return self.scaled(scale_x, int(width), int(height))

    def angles_deg(self, points_px: ArrayLike) -> ArrayLike:
        """Fick angles ``[..., 2]`` (degrees) of pixel points ``[..., 2]``: azimuth ``atan2(x, z)`` and elevation
        ``atan2(y, sqrt(x^2 + z^2))`` (positive downwards) of the unprojected ray ``(x, y, z)``."""
        pixels, back = _float64_points(points_px)
        ray = self.unproject(pixels)
        azimuth = np.arctan2(ray[..., 0], ray[..., 2])
        elevation = np.arctan2(ray[..., 1], np.hypot(ray[..., 0], ray[..., 2]))
        return back(np.rad2deg(np.stack([azimuth, elevation], -1)))

    def angle_between_deg(self, a_px: ArrayLike, b_px: ArrayLike) -> ArrayLike:
        """The angle (degrees) between the rays of pixel points ``a_px`` and ``b_px`` ``[..., 2]`` -> ``[...]``."""
        a, back = _float64_points(a_px)
        b, _ = _float64_points(b_px)
        return back(_angle_between_rays_deg(self.unproject(a), self.unproject(b)))

    def to_dict(self) -> dict:
        """``model`` (FISHEYE624), ``params`` (projectaria_tools' order and pixel convention), ``width``,
        ``height``, for JSON."""
        return {"model": FISHEYE624, "params": list(self.params), "width": self.width, "height": self.height}


Camera = PinholeCamera | FisheyeCamera
"""Any camera degrees are measured through (``for_frame``, ``angles_deg``, ``angle_between_deg``, ``to_dict``)."""


# --- a camera in the unified example schema ----------------------------------------------------------------------

NO_CAMERA = "none"
"""``camera_model`` of an example that carries no camera: the caller's camera applies (``--camera``, else the pinhole
of ``--fov_deg``), as for EGTEA Gaze+ and Ego4D, whose scene cameras ship no intrinsics."""
PINHOLE = "PINHOLE"
"""``camera_model`` of a pinhole camera; its ``camera_params``: ``fx, fy, cx, cy`` (pixels of the example's frame)."""
CAMERA_MODELS = (NO_CAMERA, PINHOLE, FISHEYE624)


def camera_to_fields(camera: Camera | None) -> tuple[str, list[float]]:
    """An example's ``camera_model`` and ``camera_params`` (docs/specs/data.md): :data:`NO_CAMERA` and no numbers for
    None, :data:`PINHOLE` and ``fx, fy, cx, cy``, or :data:`FISHEYE624` and its 15 parameters (projectaria_tools' order
    and pixel convention). The camera must be the one of the example's frame (``width x height``)."""
    if camera is None:
        return NO_CAMERA, []
    if isinstance(camera, PinholeCamera):
        return PINHOLE, [float(camera.fx), float(camera.fy), float(camera.cx), float(camera.cy)]
    if isinstance(camera, FisheyeCamera):
        return FISHEYE624, list(camera.params)
    raise TypeError(f"an example's camera is a PinholeCamera, a FisheyeCamera or None, got {type(camera).__name__}")


def camera_from_fields(model: str | None, params, width: int, height: int) -> Camera | None:
    """The camera an example's ``camera_model`` and ``camera_params`` describe for its ``width x height`` frame (the
    inverse of :func:`camera_to_fields`); None for :data:`NO_CAMERA` (or an empty model)."""
    name = NO_CAMERA if model is None else str(model).strip()
    values = [] if params is None else [float(v) for v in np.asarray(params, dtype=np.float64).reshape(-1)]
    if name in ("", NO_CAMERA):
        if values:
            raise ValueError(f"camera_model {NO_CAMERA!r} takes no camera_params, got {len(values)} numbers")
        return None
    if name.upper() == PINHOLE:
        if len(values) != 4:
            raise ValueError(f"camera_model {PINHOLE!r} takes 4 camera_params (fx, fy, cx, cy), got {len(values)}")
        return PinholeCamera(*values, int(width), int(height))
    if name.upper() == FISHEYE624:
        return FisheyeCamera(tuple(values), int(width), int(height))
    raise ValueError(f"camera_model must be one of {CAMERA_MODELS}, got {model!r}")


__all__ = [
    "unit_to_model",
    "model_to_unit",
    "unit_to_pixels",
    "pixels_to_unit",
    "clamp_unit",
    "mirror_unit_horizontally",
    "patch_centres",
    "DEFAULT_HORIZONTAL_FOV_DEG",
    "PinholeCamera",
    "FieldOfView",
    "check_fov",
    "ray_angle_deg",
    "FISHEYE624",
    "FISHEYE624_NUM_PARAMS",
    "FisheyeCamera",
    "Camera",
    "NO_CAMERA",
    "PINHOLE",
    "CAMERA_MODELS",
    "camera_to_fields",
    "camera_from_fields",
]
