"""Object views: can a token grid tell the objects apart by what the cue names (the recipe panel's anatomy)?

In a grounding task the gaze follows the object whose look (a shape, a colour) the cue names, so the condition c_v
must carry each object's look where the object is. A synthetic task clip (``data.synthetic_tasks.TaskClip``) knows
every object's track and look, so this can be measured on a frozen model:

* the **view** of object k in frame group g is the ``(2r + 1)^2`` neighbourhood of token cells around the cell that
  holds the object's centre in the group's first frame (:func:`token_cell`, :func:`token_neighbourhood`; zero
  outside the grid), flattened: the tokens a reader of that cell and its neighbours has;
* two pixel controls on the processed frame the encoder reads: the object-centred square crop
  (:func:`pixel_crop`: the object at a fixed place in the view, what a translation-invariant reader has) and the
  crop of the view's own token cells (:func:`cell_crop`: the same pixels as the token view, at the grid's offsets);
* a linear probe (``analysis.probing``: multinomial logistic regression, its weight decay chosen on held-out
  training clips) fitted on the views of the first clips and scored on the views of the others
  (:func:`probe_object_views`): split by clip, so no object scored was seen in training.

The chance row is the most frequent training class's share of the test views.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .probing import DEFAULT_WEIGHT_DECAYS, select_weight_decay, topk_correct


def token_cell(x: float, y: float, rows: int, cols: int) -> tuple[int, int]:
    """The ``(row, col)`` of the token cell holding the unit position ``(x, y)`` (x right, y down, in [0, 1]) on a
    ``rows x cols`` grid that tiles the frame; positions on or past an edge go to the edge's cells."""
    row = min(max(int(np.floor(y * rows)), 0), rows - 1)
    col = min(max(int(np.floor(x * cols)), 0), cols - 1)
    return row, col


def _padded_window(array: np.ndarray, top: int, left: int, height: int, width: int) -> np.ndarray:
    """``array [H, W, ...]``'s ``height x width`` window at ``(top, left)``, zero where it leaves the array."""
    window = np.zeros((height, width, *array.shape[2:]), dtype=np.float32)
    r0, r1 = max(top, 0), min(top + height, array.shape[0])
    c0, c1 = max(left, 0), min(left + width, array.shape[1])
    if r0 < r1 and c0 < c1:
        window[r0 - top : r1 - top, c0 - left : c1 - left] = array[r0:r1, c0:c1]
    return window


def token_neighbourhood(grid: np.ndarray, row: int, col: int, radius: int) -> np.ndarray:
    """The ``(2 radius + 1)^2`` cells of ``grid [rows, cols, D]`` centred on ``(row, col)``, zero outside the grid,
    flattened row by row to ``[(2 radius + 1)^2 * D]``."""
    side = 2 * radius + 1
    return _padded_window(grid, row - radius, col - radius, side, side).reshape(-1)


def _padded_crop(frame: np.ndarray, top: int, left: int, height: int, width: int) -> np.ndarray:
    """``frame [C, H, W]``'s window of that size at ``(top, left)``, zero where it leaves the frame, flattened
    channel by channel."""
    return np.moveaxis(_padded_window(np.moveaxis(frame, 0, -1), top, left, height, width), -1, 0).reshape(-1)


def pixel_crop(frame: np.ndarray, x: float, y: float, half: int) -> np.ndarray:
    """The ``2 half x 2 half`` window of ``frame [C, S, S]`` centred on the unit position ``(x, y)`` (the pixel
    corner nearest it), zero outside the frame, flattened."""
    size = frame.shape[-1]
    centre_x, centre_y = int(round(x * size)), int(round(y * size))
    return _padded_crop(frame, centre_y - half, centre_x - half, 2 * half, 2 * half)


def cell_crop(frame: np.ndarray, row: int, col: int, patch: int, radius: int) -> np.ndarray:
    """The pixels of the ``(2 radius + 1)^2`` token cells of side ``patch`` centred on cell ``(row, col)`` of
    ``frame [C, S, S]`` (what :func:`token_neighbourhood` reads there), zero outside the frame, flattened."""
    side = (2 * radius + 1) * patch
    return _padded_crop(frame, (row - radius) * patch, (col - radius) * patch, side, side)


@dataclass(frozen=True)
class ObjectViews:
    """Views of objects: ``features [n, F]``, class ``labels [n]`` and the ``clips [n]`` index each came from."""

    features: np.ndarray
    labels: np.ndarray
    clips: np.ndarray

    def __post_init__(self) -> None:
        count = len(self.labels)
        if np.ndim(self.features) != 2 or len(self.features) != count or len(self.clips) != count:
            raise ValueError(
                f"ObjectViews: features must be [n, F] with n = len(labels) = len(clips), got features "
                f"{np.shape(self.features)}, {count} labels and {len(self.clips)} clips"
            )

    @classmethod
    def stack(cls, features: Sequence[np.ndarray], labels: Sequence[int], clips: Sequence[int]) -> ObjectViews:
        if not features:
            raise ValueError("ObjectViews.stack: no views (no object was in any frame group)")
        return cls(np.stack(features).astype(np.float32), np.asarray(labels, np.int64), np.asarray(clips, np.int64))


def probe_object_views(
    views: ObjectViews,
    num_classes: int,
    test_fraction: float = 0.25,
    validation_fraction: float = 0.2,
    weight_decays: Sequence[float] = DEFAULT_WEIGHT_DECAYS,
) -> dict[str, float | int]:
    """Fit a linear probe on the views of the first clips and score it on the last ``test_fraction`` of them.

    Clips are split in order of their index: the last ``test_fraction`` are the test clips, and of the rest the last
    ``validation_fraction`` choose the weight decay. Returns the test ``accuracy``, the ``chance`` accuracy (always
    answering the most frequent training class), the kept ``weight_decay`` and the view counts per split."""
    if not 0 < test_fraction < 1 or not 0 < validation_fraction < 1:
        raise ValueError(f"fractions must be in (0, 1), got test {test_fraction}, validation {validation_fraction}")
    clip_ids = np.unique(views.clips)
    test_from = clip_ids[int(np.floor(len(clip_ids) * (1 - test_fraction)))]
    fit_ids = clip_ids[clip_ids < test_from]
    validation_from = fit_ids[int(np.floor(len(fit_ids) * (1 - validation_fraction)))] if len(fit_ids) else test_from
    train = views.clips < validation_from
    validation = (views.clips >= validation_from) & (views.clips < test_from)
    test = views.clips >= test_from
    if not (train.any() and validation.any() and test.any()):
        raise ValueError(
            f"probe_object_views: {len(clip_ids)} clips are too few for a train / validation / test split by clip"
        )
    probe, _ = select_weight_decay(
        views.features[train],
        views.labels[train],
        views.features[validation],
        views.labels[validation],
        num_classes,
        weight_decays,
    )
    most_frequent = int(np.bincount(views.labels[train], minlength=num_classes).argmax())
    return {
        "accuracy": float(topk_correct(probe.scores(views.features[test]), views.labels[test], 1).mean()),
        "chance": float(np.mean(views.labels[test] == most_frequent)),
        "weight_decay": probe.weight_decay,
        "train_views": int(train.sum()),
        "validation_views": int(validation.sum()),
        "test_views": int(test.sum()),
    }


__all__ = [
    "ObjectViews",
    "cell_crop",
    "pixel_crop",
    "probe_object_views",
    "token_cell",
    "token_neighbourhood",
]
