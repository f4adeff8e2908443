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
  centre, for EGTEA Gaze+ and Ego4D alike. Fisheye cameras (Project Aria) are not modelled.

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
]
