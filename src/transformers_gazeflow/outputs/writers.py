"""Writing predictions: the per-frame CSV (streamed chunk by chunk) and the JSON summary.

``gaze.csv`` has one row per frame and sample, plus one row per frame for the point estimate:

=============  ==============================================================================================
column         meaning
=============  ==============================================================================================
``video_id``   the video's file name without its extension (``video`` for in-memory frames)
``frame_idx``  frame number in the video, counted from 0 in presentation order
``t_ms``       the frame's time, ``frame_idx / fps * 1000`` ms from the stream's start
``x_norm``     x in ``[0, 1]`` of the frame width, origin at the left edge
``y_norm``     y in ``[0, 1]`` of the frame height, origin at the top edge (y grows downwards)
``x_px``       ``x_norm * width``, continuous pixels (pixel ``i`` covers ``[i, i + 1)``)
``y_px``       ``y_norm * height``
``sample_id``  ``0 .. K-1`` for the K sampled trajectories; ``-1`` for the point estimate (their mean)
=============  ==============================================================================================

Rows come frame by frame: the point estimate first, then the samples in order. When the true gaze is known
(``gazeflow demo``), three columns follow on every row, the same for all rows of a frame:

================  ===========================================================================================
``true_x_norm``   the true gaze x in ``[0, 1]`` of the width (empty where no position is known)
``true_y_norm``   the true gaze y in ``[0, 1]`` of the height
``true_code``     its gaze type (``data.gaze_types``): 0 untracked, 1 fixation, 2 saccade, 3 blink/other, 4 off-frame
================  ===========================================================================================

No row ever holds NaN: non-finite predictions stop the writer with an error (nothing of that chunk is written), and
``summary.json`` is always valid JSON (non-finite numbers become ``null``).
"""

from __future__ import annotations

import csv
import json
import math
import os
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from ..models.gazeflow.generation_gazeflow import point_estimate
from ..models.gazeflow.geometry import unit_to_pixels

CSV_COLUMNS = ("video_id", "frame_idx", "t_ms", "x_norm", "y_norm", "x_px", "y_px", "sample_id")
TRUTH_COLUMNS = ("true_x_norm", "true_y_norm", "true_code")
"""Extra columns when the true gaze is known (``gazeflow demo``)."""
POINT_ESTIMATE_ID = -1
"""``sample_id`` of the point-estimate rows (the per-frame mean of the K samples)."""


class GazeCsvWriter:
    """Write ``gaze.csv`` chunk by chunk, so a long video never needs all its rows in memory.

    ``true_gaze`` ``[T, 2]`` (unit coordinates) and ``true_codes`` ``[T]`` (gaze types), indexed by frame number, add
    the :data:`TRUTH_COLUMNS`.
    """

    def __init__(self, path: str | os.PathLike, video_id: str, width: int, height: int, fps: float,
                 true_gaze: np.ndarray | None = None, true_codes: np.ndarray | None = None) -> None:
        if fps <= 0:
            raise ValueError(f"fps must be positive, got {fps}")
        if (true_gaze is None) != (true_codes is None):
            raise ValueError("true_gaze and true_codes go together")
        if true_gaze is not None:
            true_gaze, true_codes = np.asarray(true_gaze, np.float64), np.asarray(true_codes)
            if true_gaze.ndim != 2 or true_gaze.shape[1] != 2 or true_codes.shape != true_gaze.shape[:1]:
                raise ValueError(f"true_gaze must be [T, 2] and true_codes [T], got {true_gaze.shape} and "
                                 f"{true_codes.shape}")
        self.true_gaze, self.true_codes = true_gaze, true_codes
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.video_id, self.width, self.height, self.fps = video_id, int(width), int(height), float(fps)
        self._file: TextIO = self.path.open("w", newline="", encoding="utf-8")
        self._writer = csv.writer(self._file)
        self._writer.writerow(CSV_COLUMNS + (TRUTH_COLUMNS if true_gaze is not None else ()))
        self.rows = 0

    def _truth(self, frame: int) -> tuple[str, ...]:
        if self.true_gaze is None:
            return ()
        if not 0 <= frame < len(self.true_codes):
            return "", "", ""
        x, y = self.true_gaze[frame]
        position = (f"{x:.6f}", f"{y:.6f}") if np.isfinite(x) and np.isfinite(y) else ("", "")
        return (*position, str(int(self.true_codes[frame])))

    def write(self, first_frame: int, trajectories: np.ndarray) -> None:
        """Rows of frames ``first_frame ..`` from their samples ``[K, n, 2]`` in unit coordinates."""
        trajectories = np.asarray(trajectories, dtype=np.float64)
        if trajectories.ndim != 3 or trajectories.shape[-1] != 2:
            raise ValueError(f"trajectories must be [K, n, 2], got {trajectories.shape}")
        finite = np.isfinite(trajectories).all(axis=(0, 2))
        if not finite.all():
            bad = first_frame + int(np.flatnonzero(~finite)[0])
            raise ValueError(f"{self.path.name}: the model predicted non-finite gaze (NaN or inf) at frame {bad}; "
                             "nothing of it is written (are the model's weights or the input frames broken?)")
        points = point_estimate(trajectories)[None]  # [1, n, 2]
        everything = np.concatenate([points, trajectories])  # [1 + K, n, 2]
        pixels = unit_to_pixels(everything, self.width, self.height)
        sample_ids = [POINT_ESTIMATE_ID, *range(trajectories.shape[0])]
        for offset in range(trajectories.shape[1]):
            frame = first_frame + offset
            t_ms = f"{frame * 1000.0 / self.fps:.3f}"
            truth = self._truth(frame)
            for row, sample_id in enumerate(sample_ids):
                x, y = everything[row, offset]
                px, py = pixels[row, offset]
                self._writer.writerow((self.video_id, frame, t_ms, f"{x:.6f}", f"{y:.6f}", f"{px:.2f}", f"{py:.2f}",
                                       sample_id, *truth))
            self.rows += len(sample_ids)

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> GazeCsvWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_gaze_csv(path: str | os.PathLike, prediction: Any) -> Path:
    """Write a pipeline output (:class:`~transformers_gazeflow.pipelines.egocentric_gaze.GazePrediction`) as
    ``gaze.csv``."""
    with GazeCsvWriter(path, prediction.video_id, prediction.width, prediction.height, prediction.fps) as writer:
        writer.write(int(prediction.frame_indices[0]), prediction.trajectories)
    return Path(path)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, np.generic):
        return _jsonable(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN or Infinity
    if isinstance(value, Path):
        return str(value)
    return value


def write_summary(path: str | os.PathLike, summary: dict[str, Any]) -> Path:
    """Write the JSON summary of a run atomically (numpy values and paths converted, non-finite numbers as
    ``null``): the file is either the previous one or the complete new one, always valid JSON."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(_jsonable(summary), indent=2, allow_nan=False) + "\n"
    partial = path.with_name(f"partial.{path.name}")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)
    return path


__all__ = ["CSV_COLUMNS", "TRUTH_COLUMNS", "POINT_ESTIMATE_ID", "GazeCsvWriter", "write_gaze_csv", "write_summary"]
