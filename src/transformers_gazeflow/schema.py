"""Conventions of the unified gaze schema, each in one place (``../shared/specs/data.md``, "Unified example schema").

The lowest layer of the package with :mod:`transformers_gazeflow.geometry`: it imports nothing of ours, and the data
layer, the metrics and the model all read their gaze-type codes and the valid rule from here.

* **Gaze-type codes** (field ``gaze_type``): 0 untracked, 1 fixation, 2 saccade, 3 blink/other, 4 off-frame.
* **The valid rule** (field ``valid``): a frame enters the training loss unless it is untracked or a blink/other
  frame. Off-frame frames are valid (their clamped point is the border, paper Section 3.5 / data.md).
* **Last-frame padding** (:func:`pad_last_frame`): a clip shorter than the model's window is padded by repeating its
  last frame, and the output is cut back (paper Appendix D.3, "clips shorter than W").
* **The point estimate** (:func:`point_estimate`): a frame's single gaze point is the mean of its K sampled
  positions (unit coordinates; the samples are clamped into the frame, so the mean is too).
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import torch

ArrayLike = TypeVar("ArrayLike", torch.Tensor, np.ndarray)

UNTRACKED = 0
FIXATION = 1
SACCADE = 2
BLINK_OR_OTHER = 3
OFF_FRAME = 4

GAZE_TYPE_CODES = (UNTRACKED, FIXATION, SACCADE, BLINK_OR_OTHER, OFF_FRAME)
"""Every unified gaze-type code, in order."""

GAZE_TYPE_NAMES = ("untracked", "fixation", "saccade", "blink/other", "off-frame")
"""Readable names of :data:`GAZE_TYPE_CODES`, indexed by code."""


def valid_mask(gaze_type: np.ndarray) -> np.ndarray:
    """``valid``: the frame enters the training loss: not untracked, not blink/other (data.md, field ``valid``)."""
    gaze_type = np.asarray(gaze_type)
    return (gaze_type != UNTRACKED) & (gaze_type != BLINK_OR_OTHER)


def pad_last_frame(frames: ArrayLike, length: int, axis: int = 1) -> ArrayLike:
    """Pad ``frames`` to ``length`` entries along ``axis`` by repeating the last one (Appendix D.3); longer or equal
    inputs come back unchanged."""
    missing = length - frames.shape[axis]
    if missing <= 0:
        return frames
    if isinstance(frames, torch.Tensor):
        last = frames.narrow(axis, frames.shape[axis] - 1, 1)
        sizes = list(frames.shape)
        sizes[axis] = missing
        return torch.cat([frames, last.expand(*sizes)], dim=axis)
    last = np.take(frames, [frames.shape[axis] - 1], axis=axis)
    return np.concatenate([frames, np.repeat(last, missing, axis=axis)], axis=axis)


def point_estimate(trajectories: ArrayLike, sample_axis: int = 0) -> ArrayLike:
    """The per-frame point estimate: the mean over the K samples along ``sample_axis`` (``[K, T, 2] -> [T, 2]`` by
    default, ``[B, K, T, 2] -> [B, T, 2]`` with ``sample_axis=1``)."""
    if isinstance(trajectories, torch.Tensor):
        return trajectories.mean(dim=sample_axis)
    return trajectories.mean(axis=sample_axis)


__all__ = ["UNTRACKED", "FIXATION", "SACCADE", "BLINK_OR_OTHER", "OFF_FRAME", "GAZE_TYPE_CODES", "GAZE_TYPE_NAMES",
           "valid_mask", "pad_last_frame", "point_estimate"]
