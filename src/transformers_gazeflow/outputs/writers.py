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

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ..data.atomic_files import atomic_write
from ..gaze.events import GazeEvents
from ..gaze.readout import FrameReadout
from ..models.gazeflow.generation_gazeflow import point_estimate
from ..models.gazeflow.geometry import pixels_to_unit, unit_to_pixels
from . import text_columns as text

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


class GazeTableWriter:
    """What every per-frame gaze table shares (``gaze.csv`` here, ``gaze.parquet`` in
    :mod:`.gaze_parquet`): its arguments, the check of each chunk, the true gaze of its frames, the rows written.

    ``true_gaze`` ``[T, 2]`` (unit coordinates) and ``true_codes`` ``[T]`` (gaze types), indexed by frame number, add
    the :data:`TRUTH_COLUMNS`; ``readouts`` adds the :data:`READOUT_COLUMNS` (each chunk then comes with its
    :class:`~transformers_gazeflow.gaze.readout.FrameReadout`).
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
        self.readouts = bool(readouts)
        self.rows = 0

    @property
    def truth_known(self) -> bool:
        """Whether the table has the :data:`TRUTH_COLUMNS`."""
        return self.true_gaze is not None

    def rows_of(self, first_frame: int, trajectories: np.ndarray, readout: FrameReadout | None) -> GazeRows:
        """The checked rows of a chunk (:meth:`check`; a readout exactly when the writer has ``readouts``)."""
        if self.readouts != (readout is not None):
            raise ValueError("a writer with readouts needs each chunk's readout, one without takes none")
        return GazeRows.of_chunk(self, first_frame, self.check(first_frame, trajectories))

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

    def truth(self, frames: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """The true gaze of ``frames`` ``[n]`` (None without one): unit positions ``[n, 2]`` (NaN where not known),
        gaze-type codes ``[n]``, and which frames are within the known ones ``[n]`` (the others have no code)."""
        if self.true_gaze is None:
            return None
        known = (frames >= 0) & (frames < len(self.true_codes))
        positions = np.full((len(frames), 2), np.nan)
        positions[known] = self.true_gaze[frames[known]]
        positions[~np.isfinite(positions).all(axis=1)] = np.nan  # a position is known whole or not at all
        codes = np.zeros(len(frames), np.int64)
        codes[known] = np.asarray(self.true_codes[frames[known]]).astype(np.int64)
        return positions, codes, known


class GazeCsvWriter(GazeTableWriter):
    """Write ``gaze.csv`` chunk by chunk, so a long video never needs all its rows in memory (the arguments:
    :class:`GazeTableWriter`)."""

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
        super().__init__(path, video_id, width, height, fps, true_gaze, true_codes, readouts)
        columns = CSV_COLUMNS + (READOUT_COLUMNS if self.readouts else ()) + (TRUTH_COLUMNS if self.truth_known else ())
        self._video_cell = text.csv_cell(video_id)
        self._file: BinaryIO = self.path.open("wb")
        self._file.write(text.csv_lines([text.from_strings([name]) for name in columns]))

    def write(self, first_frame: int, trajectories: np.ndarray, readout: FrameReadout | None = None) -> None:
        """Rows of frames ``first_frame ..`` from their samples ``[K, n, 2]`` in unit coordinates (and, for a writer
        with ``readouts``, their :class:`~transformers_gazeflow.gaze.readout.FrameReadout`). The chunk's cells are
        formatted column by column (:mod:`.text_columns`), exactly as ``f"{value:.6f}"`` and the csv module would
        write them one by one."""
        rows = self.rows_of(first_frame, trajectories, readout)
        if rows.num_frames == 0:
            return
        per_frame = np.repeat(np.arange(rows.num_frames), rows.series)  # each row's frame within the chunk
        x, y = text.fixed_point(rows.unit.T, 6).split(2)
        px, py = text.fixed_point(rows.pixels.T, 2).split(2)
        columns = [
            text.repeated(self._video_cell, len(per_frame)),
            text.integers(rows.frames).take(per_frame),
            text.fixed_point(rows.t_ms, 3).take(per_frame),
            x,
            y,
            px,
            py,
            text.integers(rows.sample_ids),
        ]
        if readout is not None:
            columns += _readout_columns(readout, rows.series)
        if rows.truth is not None:
            columns += [column.take(per_frame) for column in _truth_columns(*rows.truth)]
        self._file.write(text.csv_lines(columns))
        self.rows += len(per_frame)

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> GazeCsvWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class GazeRows:
    """The numbers of one chunk's rows, frame by frame and, within a frame, the point estimate then the K samples
    (what ``gaze.csv`` writes as text and ``gaze.parquet`` as columns).

    Args:
        frames: ``[n]`` the frames' numbers.
        t_ms: ``[n]`` their times, ``frame / fps * 1000``.
        unit: ``[n * (1 + K), 2]`` the rows' points in unit coordinates.
        pixels: ``[n * (1 + K), 2]`` the same in continuous pixels.
        sample_ids: ``[n * (1 + K)]`` -1 for the point estimate, ``0 .. K-1`` for the samples.
        truth: the true gaze of the frames (:meth:`GazeTableWriter.truth`), None when not known.
    """

    frames: np.ndarray
    t_ms: np.ndarray
    unit: np.ndarray
    pixels: np.ndarray
    sample_ids: np.ndarray
    truth: tuple[np.ndarray, np.ndarray, np.ndarray] | None

    @property
    def num_frames(self) -> int:
        return len(self.frames)

    @property
    def series(self) -> int:
        """``1 + K``: rows per frame."""
        return len(self.sample_ids) // max(len(self.frames), 1)

    @classmethod
    def of_chunk(cls, writer: GazeTableWriter, first_frame: int, trajectories: np.ndarray) -> GazeRows:
        """The rows of frames ``first_frame ..`` from their checked samples ``[K, n, 2]`` (float64)."""
        series, count = trajectories.shape[0] + 1, trajectories.shape[1]
        everything = np.concatenate([point_estimate(trajectories)[None], trajectories])  # [1 + K, n, 2]
        unit = everything.swapaxes(0, 1).reshape(-1, 2)
        frames = first_frame + np.arange(count)
        return cls(
            frames,
            frames * 1000.0 / writer.fps,
            unit,
            unit_to_pixels(unit, writer.width, writer.height),
            np.tile(np.arange(-1, series - 1), count),
            writer.truth(frames),
        )


def _readout_columns(readout: FrameReadout, series: int) -> list[text.TextColumn]:
    """The :data:`READOUT_COLUMNS` of a chunk's rows: degrees and labels on every row, the frame's cells on its
    point-estimate row only."""
    degrees = text.fixed_point(readout.degrees.swapaxes(0, 1).reshape(-1, 2).T, 3).split(2)
    labels = text.choices(readout.labels.T, EVENT_NAMES)
    u, frames = readout.uncertainty, readout.num_frames
    with_degrees = u.spread_deg is not None
    in_pixels = text.fixed_point(np.stack([u.spread(0.5), u.spread(0.9), u.region(0.9)]), 2).split(3)
    if with_degrees:
        in_degrees = text.fixed_point(
            np.stack([readout.p_saccade, u.spread(0.5, "deg"), u.spread(0.9, "deg"), u.region(0.9, "deg")]), 3
        ).split(4)
    else:
        in_degrees = [text.fixed_point(readout.p_saccade, 3), *[text.blanks(frames)] * 3]
    cells = [in_degrees[0], *in_pixels[:2], *in_degrees[1:3], in_pixels[2], in_degrees[3], text.integers(u.modes)]
    return [*degrees, labels, *(cell.spread(series) for cell in cells)]  # the frame's cells on its first row


def _truth_columns(positions: np.ndarray, codes: np.ndarray, known: np.ndarray) -> list[text.TextColumn]:
    """The :data:`TRUTH_COLUMNS` of frames (one cell per frame): empty where not known."""
    located = np.isfinite(positions[:, 0])
    x, y = text.fixed_point(np.where(located[:, None], positions, 0.0).T, 6).split(2)
    empty = text.blanks(len(codes))
    return [
        text.where(located, x, empty),
        text.where(located, y, empty),
        text.where(known, text.integers(codes), empty),
    ]


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
    names. Returns their paths. Cells are formatted a column at a time (:mod:`.text_columns`), exactly as
    ``f"{value:.3f}"`` and the csv module would write them one by one."""
    if isinstance(paths, (str, os.PathLike)):
        paths = (Path(paths) / FIXATIONS_NAME, Path(paths) / SACCADES_NAME)
    fixations, saccades = Path(paths[0]), Path(paths[1])
    ms, video = 1000.0 / fps, text.csv_cell(video_id)
    rows = np.array(
        [(f.start_frame, f.end_frame, *f.centroid_px, *f.centroid_deg, f.dispersion_px, f.dispersion_deg)
         for f in events.fixations],
        np.float64,
    ).reshape(-1, 8)  # fmt: skip
    centroid = rows[:, 2:4]
    columns = _event_cells(events.fixations, video, ms) + [
        *text.fixed_point(pixels_to_unit(centroid, width, height).T, 6).split(2),
        *text.fixed_point(centroid.T, 2).split(2),
        *text.fixed_point(rows[:, 4:6].T, 3).split(2),
        text.fixed_point(rows[:, 6], 2),
        text.fixed_point(rows[:, 7], 3),
    ]
    _write_table(fixations, FIXATION_COLUMNS, columns)
    rows = np.array(
        [(s.amplitude_px, s.amplitude_deg, s.peak_velocity_deg_s, *s.start_px, *s.end_px) for s in events.saccades],
        np.float64,
    ).reshape(-1, 7)
    ends = pixels_to_unit(rows[:, 3:7].reshape(-1, 2), width, height).reshape(-1, 4)  # launch point, last point
    columns = _event_cells(events.saccades, video, ms) + [
        text.fixed_point(rows[:, 0], 2),
        text.fixed_point(rows[:, 1], 3),
        text.fixed_point(rows[:, 2], 2),
        *text.fixed_point(ends.T, 6).split(4),
    ]
    _write_table(saccades, SACCADE_COLUMNS, columns)
    return fixations, saccades


def _event_cells(events: list, video_cell: str, ms: float) -> list[text.TextColumn]:
    """The cells every event row starts with: ``video_id, sample_id, start_frame, end_frame, start_ms,
    duration_ms``."""
    frames = np.array([(event.sample_id, event.start_frame, event.end_frame) for event in events], np.int64)
    frames = frames.reshape(-1, 3)
    times = np.stack([frames[:, 1] * ms, (frames[:, 2] - frames[:, 1] + 1) * ms])  # as int * float in Python
    return [
        text.repeated(video_cell, len(frames)),
        *(text.integers(frames[:, column]) for column in range(3)),
        *text.fixed_point(times, 3).split(2),
    ]


def _write_table(path: Path, names: tuple[str, ...], columns: list[text.TextColumn]) -> None:
    """A CSV file of the header ``names`` and the rows of ``columns``, as the csv module writes them."""
    with path.open("wb") as handle:
        handle.write(text.csv_lines([text.from_strings([name]) for name in names]))
        if len(columns[0]):
            handle.write(text.csv_lines(columns))


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
    "GazeTableWriter",
    "GazeCsvWriter",
    "GazeRows",
    "write_events",
    "write_summary",
]
