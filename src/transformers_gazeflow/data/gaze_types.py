"""Gaze-type codes and the valid rule of the unified example schema, in one place.

One of the conventions at the bottom of the package with the model folder's ``geometry`` and ``windows``: it imports
nothing of ours, and the readers, the synthetic data, the metrics and the commands read their codes from here.

* **Gaze-type codes** (field ``gaze_type``): 0 untracked, 1 fixation, 2 saccade, 3 blink/other, 4 off-frame.
* **The valid rule** (field ``valid``): a frame enters the training loss unless it is untracked or a blink/other
  frame. Off-frame frames are valid (their clamped point is the border, paper Section 3.5).
"""

from __future__ import annotations

import numpy as np

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
    """``valid``: the frame enters the training loss: not untracked, not blink/other (docs/specs/data.md, field
    ``valid``)."""
    gaze_type = np.asarray(gaze_type)
    return (gaze_type != UNTRACKED) & (gaze_type != BLINK_OR_OTHER)


__all__ = [
    "UNTRACKED",
    "FIXATION",
    "SACCADE",
    "BLINK_OR_OTHER",
    "OFF_FRAME",
    "GAZE_TYPE_CODES",
    "GAZE_TYPE_NAMES",
    "valid_mask",
]
