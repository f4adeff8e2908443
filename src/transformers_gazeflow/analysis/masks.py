"""Where the hand and active-object masks of the attribution come from: pluggable mask sources.

A source answers :meth:`MaskSource.region_tokens` for one unified-schema example (a window of one clip): the hand,
object and union coverage of the model's token grid on each of the window's frames (:class:`RegionTokens`).

* :class:`SyntheticMaskSource`: the synthetic dataset's exact masks (``SyntheticClip.masks``), re-drawn from the
  dataset folder's settings (hand = ``"hand"``, object = the task's ``"target"``).
* :class:`MaskFolderSource`: masks made by any segmenter, in one of these layouts under one folder (the first found
  wins; ``<CLIP>`` is the example's ``clip_id``, frame numbers are 0-based frames of the video file, i.e.
  ``window_start + k``, zero-padded to 6 digits):

  1. ``<CLIP>.npz`` or ``<any folder>/<CLIP>.npz`` (what ``write_egtea_layout(write_masks=True)`` writes under
     ``masks/<VIDEO>/``): one array per region, ``[T, H, W]`` over every frame of the video;
  2. ``<CLIP>/<frame>.npz``: one array per region, ``[H, W]``;
  3. ``<CLIP>/<region>/<frame>.png``: one image per region and frame, non-zero pixels inside.

  Masks may be bool (pixels in or out), or float in [0, 1] (a soft mask, or coverage already on the token grid:
  the grid of a mask of the grid's size is the mask itself). ``H x W`` is the frame's own size or any other size
  over the same extent (the whole frame, as the processor keeps it). The union of hand and object is exact for
  bool masks; for float masks it is taken as ``min(1, hand + object)`` (regions assumed disjoint).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..data.masks import grid_coverage
from .attribution import RegionTokens


class MaskNotFoundError(FileNotFoundError):
    """No mask of a clip (or of one of its frames) in a mask source."""


class MaskSource(Protocol):
    def region_tokens(self, example: Mapping[str, Any], grid: tuple[int, int]) -> RegionTokens:
        """The window's coverage ``[num_frames, rows, cols]`` of hand, object and their union."""


def region_tokens_from_masks(hand: np.ndarray, obj: np.ndarray, grid: tuple[int, int]) -> RegionTokens:
    """Per-frame hand / object masks ``[T, H, W]`` (bool or [0, 1]) -> their coverage of a ``rows x cols`` grid."""
    hand, obj = np.asarray(hand), np.asarray(obj)
    if hand.shape != obj.shape or hand.ndim != 3:
        raise ValueError(f"hand and object masks must share one shape [T, H, W], got {hand.shape} and {obj.shape}")
    for name, mask in (("hand", hand), ("object", obj)):
        if mask.dtype != bool and (not np.isfinite(mask).all() or mask.min() < 0 or mask.max() > 1):
            raise ValueError(f"the {name} mask must be bool or in [0, 1], got values {mask.min()}..{mask.max()}")
    if hand.dtype == bool and obj.dtype == bool:
        either = hand | obj
    else:
        either = np.minimum(1.0, hand.astype(np.float64) + obj.astype(np.float64))
    return RegionTokens(grid_coverage(hand, grid), grid_coverage(obj, grid), grid_coverage(either, grid))


def _window(example: Mapping[str, Any]) -> tuple[str, int, int]:
    return str(example["clip_id"]), int(example["window_start"]), int(example["num_frames"])


class SyntheticMaskSource:
    """Exact masks of a synthetic dataset folder (``generate_dataset``'s layout), re-drawn per clip."""

    hand_region = "hand"
    object_region = "target"

    def __init__(self, data_dir: str | os.PathLike):
        from ..data.synthetic.dataset import load_dataset_records

        self.data_dir = Path(data_dir)
        self.settings, records = load_dataset_records(self.data_dir)
        self._indices = {record["clip_id"]: position for position, record in enumerate(records)}
        self._cache: tuple[tuple[str, tuple[int, int]], RegionTokens] | None = None

    def clip_region_tokens(self, clip_id: str, grid: tuple[int, int]) -> RegionTokens:
        if self._cache is not None and self._cache[0] == (clip_id, tuple(grid)):
            return self._cache[1]
        from ..data.synthetic.dataset import generate_clip

        index = self._clip_index(clip_id)
        clip = generate_clip(self.settings, index)
        masks = clip.masks().regions
        tokens = region_tokens_from_masks(masks[self.hand_region], masks[self.object_region], grid)
        self._cache = ((clip_id, tuple(grid)), tokens)
        return tokens

    def _clip_index(self, clip_id: str) -> int:
        prefix = f"synth_{self.settings.seed}_"
        if clip_id not in self._indices or not clip_id.startswith(prefix):
            raise MaskNotFoundError(f"{clip_id!r} is not a clip of the synthetic dataset in {self.data_dir}")
        return int(clip_id[len(prefix) :])

    def region_tokens(self, example: Mapping[str, Any], grid: tuple[int, int]) -> RegionTokens:
        clip_id, start, frames = _window(example)
        return self.clip_region_tokens(clip_id, grid).window(start, frames)


class MaskFolderSource:
    """Masks from a folder in one of the layouts of the module docstring; region names are configurable."""

    def __init__(self, folder: str | os.PathLike, hand_region: str = "hand", object_region: str = "object"):
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise FileNotFoundError(
                f"mask folder {self.folder} not found (expected <CLIP>.npz, <CLIP>/<frame>.npz "
                "or <CLIP>/<region>/<frame>.png under it)"
            )
        self.hand_region, self.object_region = hand_region, object_region
        self._cache: tuple[Path, dict[str, np.ndarray]] | None = None

    def _clip_file(self, clip_id: str) -> Path | None:
        direct = self.folder / f"{clip_id}.npz"
        if direct.is_file():
            return direct
        nested = sorted(self.folder.glob(f"*/{clip_id}.npz"))
        return nested[0] if nested else None

    def _read_npz(self, path: Path) -> dict[str, np.ndarray]:
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {name: data[name] for name in data.files}
        except (OSError, ValueError) as err:
            raise ValueError(f"{path}: expected an .npz of region masks ({err})") from None
        missing = [name for name in (self.hand_region, self.object_region) if name not in arrays]
        if missing:
            raise ValueError(
                f"{path}: has the arrays {sorted(arrays)}, lacks {missing} (hand/object region names "
                "are set with hand_region= / object_region=)"
            )
        return arrays

    def _frame_masks(self, clip_id: str, frame: int) -> tuple[np.ndarray, np.ndarray]:
        clip_dir = self.folder / clip_id
        npz = clip_dir / f"{frame:06d}.npz"
        if npz.is_file():
            arrays = self._read_npz(npz)
            return arrays[self.hand_region], arrays[self.object_region]
        masks = []
        for region in (self.hand_region, self.object_region):
            png = clip_dir / region / f"{frame:06d}.png"
            if not png.is_file():
                raise MaskNotFoundError(f"no mask of frame {frame} of {clip_id}: neither {npz} nor {png} exists")
            from PIL import Image

            try:
                with Image.open(png) as image:
                    masks.append(np.asarray(image.convert("L")) > 0)
            except OSError as err:
                raise ValueError(f"{png}: not a readable PNG mask ({err})") from None
        return masks[0], masks[1]

    def region_tokens(self, example: Mapping[str, Any], grid: tuple[int, int]) -> RegionTokens:
        clip_id, start, frames = _window(example)
        clip_file = self._clip_file(clip_id)
        if clip_file is not None:
            if self._cache is None or self._cache[0] != clip_file:
                self._cache = (clip_file, self._read_npz(clip_file))
            arrays = self._cache[1]
            hand, obj = arrays[self.hand_region], arrays[self.object_region]
            if hand.ndim != 3 or hand.shape[0] < start + frames:
                raise ValueError(
                    f"{clip_file}: the masks must be [T, H, W] over the video's frames; "
                    f"{hand.shape} does not reach frames {start}..{start + frames - 1}"
                )
            hand, obj = hand[start : start + frames], obj[start : start + frames]
        elif (self.folder / clip_id).is_dir():
            pairs = [self._frame_masks(clip_id, start + k) for k in range(frames)]
            try:
                hand, obj = np.stack([h for h, _ in pairs]), np.stack([o for _, o in pairs])
            except ValueError:
                raise ValueError(f"{self.folder / clip_id}: the frames' masks differ in size") from None
        else:
            raise MaskNotFoundError(
                f"no masks of {clip_id} in {self.folder}: expected {clip_id}.npz, "
                f"*/{clip_id}.npz or the folder {clip_id}/"
            )
        return region_tokens_from_masks(hand, obj, grid)


__all__ = ["MaskSource", "MaskNotFoundError", "region_tokens_from_masks", "SyntheticMaskSource", "MaskFolderSource"]
