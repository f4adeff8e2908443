"""Per-frame masks of image regions (e.g. the hands and the active object) and their coverage of a token grid.

A region mask is bool ``[T, H, W]`` on the video's own pixel grid (pixel ``(i, j)`` covers ``[j, j + 1) x [i, i + 1)``,
the frame convention of ``geometry.py``). A model sees the frame as a grid of ``rows x cols`` patch tokens over the
same extent, so a region's share of each token is the covered fraction of that cell, area-weighted
(:func:`grid_coverage`; exact for any frame and grid sizes, divisible or not). The synthetic scenes emit exact masks
(:meth:`~transformers_gazeflow.data.synthetic.dataset.SyntheticClip.masks`); :class:`RegionMasks` saves and loads
them as one ``.npz`` per clip.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np


def _cell_weights(num_pixels: int, num_cells: int) -> np.ndarray:
    """``[num_cells, num_pixels]``: the share of cell ``c`` that pixel ``p`` covers (each row sums to 1)."""
    edges = np.arange(num_cells + 1) * (num_pixels / num_cells)
    pixels = np.arange(num_pixels)
    overlap = np.minimum(pixels[None] + 1, edges[1:, None]) - np.maximum(pixels[None], edges[:-1, None])
    return np.clip(overlap, 0.0, None) / (num_pixels / num_cells)


def grid_coverage(masks: np.ndarray, grid: tuple[int, int]) -> np.ndarray:
    """The fraction of each cell of a ``rows x cols`` grid that ``masks`` (bool or [0, 1], ``[..., H, W]``) covers:
    float32 ``[..., rows, cols]``, area-weighted over the pixels each cell overlaps."""
    masks = np.asarray(masks)
    if masks.ndim < 2 or 0 in masks.shape[-2:]:
        raise ValueError(f"masks must be [..., H, W] with H, W >= 1, got shape {masks.shape}")
    if len(grid) != 2 or any(isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1 for n in grid):
        raise ValueError(f"grid must be (rows, cols) of positive ints, got {grid!r}")
    height, width = masks.shape[-2:]
    rows, cols = _cell_weights(height, int(grid[0])), _cell_weights(width, int(grid[1]))
    return np.einsum("rh,...hw,cw->...rc", rows, masks.astype(np.float64), cols).astype(np.float32)


@dataclass(frozen=True)
class RegionMasks:
    """Per-frame masks of named regions of one clip: ``regions[name]`` bool ``[T, H, W]`` on the frame's pixel grid,
    and, where a token grid was asked for, ``tokens[name]`` float32 ``[T, rows, cols]`` (:func:`grid_coverage`)."""

    regions: dict[str, np.ndarray]
    tokens: dict[str, np.ndarray] | None = None

    def __post_init__(self) -> None:
        shapes = {name: np.shape(mask) for name, mask in self.regions.items()}
        if not shapes or len(set(shapes.values())) != 1 or len(next(iter(shapes.values()))) != 3:
            raise ValueError(f"regions must be one or more bool masks of one shape [T, H, W], got {shapes}")

    @property
    def num_frames(self) -> int:
        return int(next(iter(self.regions.values())).shape[0])

    def on_grid(self, grid: tuple[int, int]) -> RegionMasks:
        """The same masks with ``tokens`` on a ``rows x cols`` grid."""
        return RegionMasks(self.regions, {name: grid_coverage(mask, grid) for name, mask in self.regions.items()})

    def save(self, path: str | os.PathLike) -> Path:
        """Write the pixel masks as one compressed ``.npz`` (one bool array ``[T, H, W]`` per region)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as handle:
            np.savez_compressed(handle, **{name: np.asarray(mask, bool) for name, mask in self.regions.items()})
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> RegionMasks:
        """Read masks written by :meth:`save`; a file that is not such an ``.npz`` raises naming it."""
        path = Path(path)
        try:
            with np.load(path, allow_pickle=False) as data:
                regions = {name: data[name].astype(bool) for name in data.files}
            return cls(regions)
        except (OSError, ValueError) as err:
            raise ValueError(f"{path}: expected an .npz of bool region masks [T, H, W] ({err})") from None


__all__ = ["grid_coverage", "RegionMasks"]
