"""Writing predictions: the per-frame CSV (streamed chunk by chunk), the events' CSVs and the JSON summary.

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

Rows come frame by frame: the point estimate first, then the samples in order. With the readouts of
:mod:`transformers_gazeflow.gaze.readout` (what ``gazeflow predict`` writes), :data:`READOUT_COLUMNS` follow; the
first three on every row, the others, which describe the frame, on its point-estimate row only (empty on the
sample rows):

=================  ==========================================================================================
``x_deg``          the row's azimuth in degrees through the camera (``geometry.PinholeCamera``), right positive
``y_deg``          its elevation in degrees, positive *downwards* like ``y_norm``
``event``          ``fixation`` or ``saccade`` (``gaze.events``: I-VT by default)
``p_saccade``      the share of the K samples in a saccade on this frame
``spread50_px``    radius around the point estimate holding 50% of the samples, native pixels
``spread90_px``    the same for 90% of the samples
``spread50_deg``   ``spread50_px`` as the angle between rays, degrees
``spread90_deg``   ``spread90_px`` in degrees
``region90_px``    the calibrated 90% region's radius: the model's 90% factor times ``spread90_px`` (at least one
                   native pixel; ``gaze.regions``), the raw spread when the model folder has no
                   ``region_calibration.json``
``region90_deg``   the same in degrees
``modes``          the number of modes of the K samples (``gaze.uncertainty``)
=================  ==========================================================================================

When the true gaze is known
(``gazeflow demo``), three columns follow on every row, the same for all rows of a frame:

================  ===========================================================================================
``true_x_norm``   the true gaze x in ``[0, 1]`` of the width (empty where no position is known)
``true_y_norm``   the true gaze y in ``[0, 1]`` of the height
``true_code``     its gaze type (``data.gaze_types``): 0 untracked, 1 fixation, 2 saccade, 3 blink/other, 4 off-frame
================  ===========================================================================================

``fixations.csv`` and ``saccades.csv`` (:func:`write_events`) hold one row per event of the point estimate
(``sample_id`` -1) and of each sample, ordered by ``sample_id`` then start:

* fixations: ``video_id, sample_id, start_frame, end_frame, start_ms, duration_ms, x_norm, y_norm, x_px, y_px,
  x_deg, y_deg`` (the centroid), ``dispersion_px, dispersion_deg`` (I-DT's ``(max x - min x) + (max y - min y)``);
* saccades: ``video_id, sample_id, start_frame, end_frame, start_ms, duration_ms, amplitude_px, amplitude_deg,
  peak_velocity_deg_s, start_x_norm, start_y_norm, end_x_norm, end_y_norm`` (from the launch point to the last
  frame's point).

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

from ..data.atomic_files import atomic_write
from ..gaze.events import GazeEvents
from ..gaze.readout import FrameReadout
from ..models.gazeflow.generation_gazeflow import point_estimate
from ..models.gazeflow.geometry import pixels_to_unit, unit_to_pixels

CSV_COLUMNS = ("video_id", "frame_idx", "t_ms", "x_norm", "y_norm", "x_px", "y_px", "sample_id")
TRUTH_COLUMNS = ("true_x_norm", "true_y_norm", "true_code")
"""Extra columns when the true gaze is known (``gazeflow demo``)."""
READOUT_COLUMNS = (
    "x_deg",
    "y_deg",
    "event",
    "p_saccade",
    "spread50_px",
    "spread90_px",
    "spread50_deg",
    "spread90_deg",
    "region90_px",
    "region90_deg",
    "modes",
)
"""Columns of the readouts (``gazeflow predict``): degrees, event labels, uncertainty."""
FIXATION_COLUMNS = (
    "video_id",
    "sample_id",
    "start_frame",
    "end_frame",
    "start_ms",
    "duration_ms",
    "x_norm",
    "y_norm",
    "x_px",
    "y_px",
    "x_deg",
    "y_deg",
    "dispersion_px",
    "dispersion_deg",
)
SACCADE_COLUMNS = (
    "video_id",
    "sample_id",
    "start_frame",
    "end_frame",
    "start_ms",
    "duration_ms",
    "amplitude_px",
    "amplitude_deg",
    "peak_velocity_deg_s",
    "start_x_norm",
    "start_y_norm",
    "end_x_norm",
    "end_y_norm",
)
EVENT_NAMES = {1: "fixation", 2: "saccade"}
POINT_ESTIMATE_ID = -1
"""``sample_id`` of the point-estimate rows (the per-frame mean of the K samples)."""


class GazeCsvWriter:
    """Write ``gaze.csv`` chunk by chunk, so a long video never needs all its rows in memory.

    ``true_gaze`` ``[T, 2]`` (unit coordinates) and ``true_codes`` ``[T]`` (gaze types), indexed by frame number, add
    the :data:`TRUTH_COLUMNS`.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        video_id: str,
        width: int,
        height: int,
        fps: float,
        true_gaze: np.ndarray | None = None,
        true_codes: np.ndarray | None = None,
        readouts: bool = False,
    ) -> None:
        if fps <= 0:
            raise ValueError(f"fps must be positive, got {fps}")
        if (true_gaze is None) != (true_codes is None):
            raise ValueError("true_gaze and true_codes go together")
        if true_gaze is not None:
            true_gaze, true_codes = np.asarray(true_gaze, np.float64), np.asarray(true_codes)
            if true_gaze.ndim != 2 or true_gaze.shape[1] != 2 or true_codes.shape != true_gaze.shape[:1]:
                raise ValueError(
                    f"true_gaze must be [T, 2] and true_codes [T], got {true_gaze.shape} and {true_codes.shape}"
                )
        self.true_gaze, self.true_codes = true_gaze, true_codes
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.video_id, self.width, self.height, self.fps = video_id, int(width), int(height), float(fps)
        self._file: TextIO = self.path.open("w", newline="", encoding="utf-8")
        self._writer = csv.writer(self._file)
        self.readouts = bool(readouts)
        self._writer.writerow(
            CSV_COLUMNS + (READOUT_COLUMNS if self.readouts else ()) + (TRUTH_COLUMNS if true_gaze is not None else ())
        )
        self.rows = 0

    def check(self, first_frame: int, trajectories: np.ndarray) -> np.ndarray:
        """Samples ``[K, n, 2]`` as float64, or a one-line error: a wrong shape, non-finite gaze (naming the frame)."""
        trajectories = np.asarray(trajectories, dtype=np.float64)
        if trajectories.ndim != 3 or trajectories.shape[-1] != 2:
            raise ValueError(f"trajectories must be [K, n, 2], got {trajectories.shape}")
        finite = np.isfinite(trajectories).all(axis=(0, 2))
        if not finite.all():
            bad = first_frame + int(np.flatnonzero(~finite)[0])
            raise ValueError(
                f"{self.path.name}: the model predicted non-finite gaze (NaN or inf) at frame {bad}; "
                "nothing of it is written (are the model's weights or the input frames broken?)"
            )
        return trajectories

    def _truth(self, frame: int) -> tuple[str, ...]:
        if self.true_gaze is None:
            return ()
        if not 0 <= frame < len(self.true_codes):
            return "", "", ""
        x, y = self.true_gaze[frame]
        position = (f"{x:.6f}", f"{y:.6f}") if np.isfinite(x) and np.isfinite(y) else ("", "")
        return (*position, str(int(self.true_codes[frame])))

    def write(self, first_frame: int, trajectories: np.ndarray, readout: FrameReadout | None = None) -> None:
        """Rows of frames ``first_frame ..`` from their samples ``[K, n, 2]`` in unit coordinates (and, for a writer
        with ``readouts``, their :class:`~transformers_gazeflow.gaze.readout.FrameReadout`)."""
        if self.readouts != (readout is not None):
            raise ValueError("a writer with readouts needs each chunk's readout, one without takes none")
        trajectories = self.check(first_frame, trajectories)
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
                extra = _readout_cells(readout, row, offset) if readout is not None else ()
                self._writer.writerow(
                    (
                        self.video_id,
                        frame,
                        t_ms,
                        f"{x:.6f}",
                        f"{y:.6f}",
                        f"{px:.2f}",
                        f"{py:.2f}",
                        sample_id,
                        *extra,
                        *truth,
                    )
                )
            self.rows += len(sample_ids)

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> GazeCsvWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _readout_cells(readout: FrameReadout, row: int, offset: int) -> tuple[str, ...]:
    """The :data:`READOUT_COLUMNS` of one row (``row`` 0: the point estimate, which also gets the frame's cells)."""
    x_deg, y_deg = readout.degrees[row, offset]
    cells = (f"{x_deg:.3f}", f"{y_deg:.3f}", EVENT_NAMES.get(int(readout.labels[row, offset]), ""))
    if row != 0:
        return cells + ("",) * 8
    u = readout.uncertainty
    degrees = [f"{u.spread(q, 'deg')[offset]:.3f}" for q in (0.5, 0.9)] if u.spread_deg is not None else ["", ""]
    region_deg = f"{u.region(0.9, 'deg')[offset]:.3f}" if u.spread_deg is not None else ""
    return cells + (
        f"{readout.p_saccade[offset]:.3f}",
        *(f"{u.spread(q)[offset]:.2f}" for q in (0.5, 0.9)),
        *degrees,
        f"{u.region(0.9)[offset]:.2f}",
        region_deg,
        str(int(u.modes[offset])),
    )


FIXATIONS_NAME, SACCADES_NAME = "fixations.csv", "saccades.csv"


def write_events(
    paths: tuple[str | os.PathLike, str | os.PathLike] | str | os.PathLike,
    events: GazeEvents,
    video_id: str,
    width: int,
    height: int,
    fps: float,
) -> tuple[Path, Path]:
    """Write ``fixations.csv`` and ``saccades.csv`` (see the module docstring) of events whose series 0 is the point
    estimate and series ``1 + k`` sample ``k``; ``paths``: the two files, or a folder to write them in under their
    names. Returns their paths."""
    if isinstance(paths, (str, os.PathLike)):
        paths = (Path(paths) / FIXATIONS_NAME, Path(paths) / SACCADES_NAME)
    fixations, saccades = Path(paths[0]), Path(paths[1])
    ms = 1000.0 / fps
    with fixations.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(FIXATION_COLUMNS)
        for f in events.fixations:
            x, y = pixels_to_unit(np.asarray(f.centroid_px), width, height)
            writer.writerow(
                (
                    video_id,
                    f.sample_id,
                    f.start_frame,
                    f.end_frame,
                    f"{f.start_frame * ms:.3f}",
                    f"{f.frames * ms:.3f}",
                    f"{x:.6f}",
                    f"{y:.6f}",
                    f"{f.centroid_px[0]:.2f}",
                    f"{f.centroid_px[1]:.2f}",
                    f"{f.centroid_deg[0]:.3f}",
                    f"{f.centroid_deg[1]:.3f}",
                    f"{f.dispersion_px:.2f}",
                    f"{f.dispersion_deg:.3f}",
                )
            )
    with saccades.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(SACCADE_COLUMNS)
        for s in events.saccades:
            start = pixels_to_unit(np.asarray(s.start_px), width, height)
            end = pixels_to_unit(np.asarray(s.end_px), width, height)
            writer.writerow(
                (
                    video_id,
                    s.sample_id,
                    s.start_frame,
                    s.end_frame,
                    f"{s.start_frame * ms:.3f}",
                    f"{s.frames * ms:.3f}",
                    f"{s.amplitude_px:.2f}",
                    f"{s.amplitude_deg:.3f}",
                    f"{s.peak_velocity_deg_s:.2f}",
                    f"{start[0]:.6f}",
                    f"{start[1]:.6f}",
                    f"{end[0]:.6f}",
                    f"{end[1]:.6f}",
                )
            )
    return fixations, saccades


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
    return atomic_write(path, json.dumps(_jsonable(summary), indent=2, allow_nan=False) + "\n")


__all__ = [
    "CSV_COLUMNS",
    "TRUTH_COLUMNS",
    "READOUT_COLUMNS",
    "FIXATION_COLUMNS",
    "SACCADE_COLUMNS",
    "POINT_ESTIMATE_ID",
    "FIXATIONS_NAME",
    "SACCADES_NAME",
    "GazeCsvWriter",
    "write_events",
    "write_summary",
]
