"""Coordinate conventions of GazeFlow, in one place.

Three frames of reference are used across the project:

* **unit** coordinates: ``(x, y)`` in ``[0, 1]`` of the native video frame, origin at the top-left corner,
  ``x`` to the right, ``y`` down. Datasets, the pipeline, CSV export and metrics speak this frame.
* **model** coordinates: ``[-1, 1]``, the space of the flow-matching state ``x_s`` (paper Section 3.2),
  obtained as ``2 * unit - 1``.
* **pixel** coordinates: ``unit * (width, height)``, continuous, so that pixel ``i`` covers ``[i, i + 1)``.
  This matches the EGTEA normalisation ``clip(px, 0, W - 1) / W`` of the reference loaders.

Every conversion between them lives here; nothing else in the package re-derives them.
"""

from __future__ import annotations

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


def patch_centres(grid_size: int, device: torch.device | str | None = None,
                  dtype: torch.dtype = torch.float32) -> torch.Tensor:
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
        return torch.tensor([width, height], dtype=like.dtype if like.is_floating_point() else torch.float32,
                            device=like.device)
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


__all__ = ["unit_to_model", "model_to_unit", "unit_to_pixels", "pixels_to_unit", "clamp_unit",
           "mirror_unit_horizontally", "patch_centres"]
