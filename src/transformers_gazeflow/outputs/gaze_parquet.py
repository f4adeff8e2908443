"""``gaze.parquet`` (``gazeflow predict --format parquet``): the numbers of ``gaze.csv``, one row per frame, the K
samples as list columns (pyarrow, imported when a table is opened).

Its columns hold the numbers the CSV's cells are formatted from (:mod:`.writers`), at full precision (float64):
formatting a value as the CSV's column says (``f"{x_norm:.6f}"``) gives the CSV's cell.

==================  ====================  ==========================================================================
column              type                  meaning
==================  ====================  ==========================================================================
``video_id``        string                the video's file name without its extension
``frame_idx``       int64                 frame number in the video, from 0
``t_ms``            double                ``frame_idx / fps * 1000``
``x_norm``          double                the point estimate (the samples' mean), x in ``[0, 1]`` of the width
``y_norm``          double                its y in ``[0, 1]`` of the height, downwards
``x_px``, ``y_px``  double                the same in continuous pixels
``sample_x_norm``   list<double>          the K samples' x (item ``k``: ``sample_id`` k of the CSV)
``sample_y_norm``   list<double>          their y
``sample_x_px``     list<double>          their x in pixels
``sample_y_px``     list<double>          their y in pixels
==================  ====================  ==========================================================================

With the readouts (what ``gazeflow predict`` writes), the CSV's :data:`~.writers.READOUT_COLUMNS` of the point
estimate's row follow under the same names (``x_deg``, ``y_deg``: double; ``event``: string; ``p_saccade``,
``spread50_px``, ``spread90_px``, ``spread50_deg``, ``spread90_deg``, ``region90_px``, ``region90_deg``: double,
the degrees null without a camera; ``modes``: int64), then the samples' ``sample_x_deg``, ``sample_y_deg``
(list<double>) and ``sample_event`` (list<string>). With a known true gaze, ``true_x_norm``, ``true_y_norm``
(double) and ``true_code`` (int64) close the row. A cell the CSV leaves empty is null here.

Rows are written in row groups of :data:`ROW_GROUP_FRAMES` frames (the last one shorter).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..gaze.readout import FrameReadout
from .writers import EVENT_NAMES, GazeRows, GazeTableWriter

ROW_GROUP_FRAMES = 4096
"""Frames per row group of ``gaze.parquet``."""
PYARROW_INSTALL = "pip install pyarrow"


def import_pyarrow() -> tuple[Any, Any]:
    """``(pyarrow, pyarrow.parquet)``, or a one-line error naming the install."""
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError as err:
        raise ImportError(f"--format parquet needs pyarrow, which is not installed: {PYARROW_INSTALL}") from err
    return pyarrow, pyarrow.parquet


def parquet_schema(pa: Any, readouts: bool, truth: bool) -> Any:
    """The table's schema (see the module docstring)."""
    double, doubles = pa.float64(), pa.list_(pa.float64())
    fields = [("video_id", pa.string()), ("frame_idx", pa.int64()), ("t_ms", double)]
    fields += [(name, double) for name in ("x_norm", "y_norm", "x_px", "y_px")]
    fields += [(f"sample_{name}", doubles) for name in ("x_norm", "y_norm", "x_px", "y_px")]
    if readouts:
        fields += [("x_deg", double), ("y_deg", double), ("event", pa.string()), ("p_saccade", double)]
        fields += [(f"{kind}{level}_{unit}", double) for kind, level, unit in _RADII]
        fields += [("modes", pa.int64())]
        fields += [("sample_x_deg", doubles), ("sample_y_deg", doubles), ("sample_event", pa.list_(pa.string()))]
    if truth:
        fields += [("true_x_norm", double), ("true_y_norm", double), ("true_code", pa.int64())]
    return pa.schema(fields)


_RADII = (
    ("spread", 50, "px"),
    ("spread", 90, "px"),
    ("spread", 50, "deg"),
    ("spread", 90, "deg"),
    ("region", 90, "px"),
    ("region", 90, "deg"),
)


class GazeParquetWriter(GazeTableWriter):
    """Write ``gaze.parquet`` chunk by chunk (the arguments: :class:`~.writers.GazeTableWriter`); ``rows`` counts
    frames."""

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
        self._pa, parquet = import_pyarrow()
        self.schema = parquet_schema(self._pa, self.readouts, self.truth_known)
        self._file = self.path.open("wb")
        self._writer = parquet.ParquetWriter(self._file, self.schema)
        self._batches: list[Any] = []
        self._waiting = 0  # frames in self._batches
        self._closed = False

    def write(self, first_frame: int, trajectories: np.ndarray, readout: FrameReadout | None = None) -> None:
        """Rows of frames ``first_frame ..`` from their samples ``[K, n, 2]`` in unit coordinates (and, with
        ``readouts``, their :class:`~transformers_gazeflow.gaze.readout.FrameReadout`)."""
        rows = self.rows_of(first_frame, trajectories, readout)
        if rows.num_frames == 0:
            return
        columns = self._frame_columns(rows) + (_readout_columns(self._pa, readout) if readout is not None else [])
        if rows.truth is not None:
            columns += _truth_columns(self._pa, *rows.truth)
        self._batches.append(self._pa.record_batch(columns, schema=self.schema))
        self._waiting += rows.num_frames
        self.rows += rows.num_frames
        if self._waiting >= ROW_GROUP_FRAMES:
            self._flush()

    def _frame_columns(self, rows: GazeRows) -> list[Any]:
        pa, frames = self._pa, rows.num_frames
        unit = rows.unit.reshape(frames, rows.series, 2)
        pixels = rows.pixels.reshape(frames, rows.series, 2)
        points = [pa.array(array[:, 0, axis]) for array in (unit, pixels) for axis in (0, 1)]
        samples = [_lists(pa, array[:, 1:, axis]) for array in (unit, pixels) for axis in (0, 1)]
        video = pa.array([self.video_id] * frames, pa.string())
        return [video, pa.array(rows.frames.astype(np.int64)), pa.array(rows.t_ms), *points, *samples]

    def _flush(self, whole: bool = False) -> None:
        """Write the waiting frames in row groups of :data:`ROW_GROUP_FRAMES` (``whole``: the shorter last one too)."""
        table = self._pa.Table.from_batches(self._batches, schema=self.schema)
        ready = table.num_rows if whole else table.num_rows - table.num_rows % ROW_GROUP_FRAMES
        if ready:
            self._writer.write_table(table.slice(0, ready), row_group_size=ROW_GROUP_FRAMES)
        self._batches = table.slice(ready).to_batches()
        self._waiting = table.num_rows - ready

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._flush(whole=True)
            self._writer.close()
        finally:
            self._file.close()

    def __enter__(self) -> GazeParquetWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _lists(pa: Any, values: np.ndarray, kind: Any = None) -> Any:
    """A list column of ``[n, K]`` values: row ``i`` the list ``values[i]``."""
    frames, width = values.shape
    offsets = pa.array(np.arange(0, frames * width + 1, width, dtype=np.int32))
    return pa.ListArray.from_arrays(offsets, pa.array(values.reshape(-1), kind))


def _event_names(labels: np.ndarray) -> np.ndarray:
    """The event name of each gaze-type code (None for a code that is neither fixation nor saccade)."""
    names = np.full(labels.shape, None, object)
    for code, name in EVENT_NAMES.items():
        names[labels == code] = name
    return names


def _readout_columns(pa: Any, readout: FrameReadout) -> list[Any]:
    """The readout columns of a chunk (see the module docstring); series 0 of the readout is the point estimate."""
    u, frames = readout.uncertainty, readout.num_frames
    degrees = np.asarray(readout.degrees, np.float64).swapaxes(0, 1)  # [n, 1 + K, 2]
    events = _event_names(np.asarray(readout.labels).T)  # [n, 1 + K]
    radii = []
    for kind, level, unit in _RADII:
        if unit == "deg" and u.spread_deg is None:
            radii.append(pa.nulls(frames, pa.float64()))
            continue
        measure = u.spread if kind == "spread" else u.region
        radii.append(pa.array(np.asarray(measure(level / 100, unit), np.float64)))
    return [
        pa.array(degrees[:, 0, 0]),
        pa.array(degrees[:, 0, 1]),
        pa.array(events[:, 0], pa.string()),
        pa.array(np.asarray(readout.p_saccade, np.float64)),
        *radii,
        pa.array(np.asarray(u.modes).astype(np.int64)),
        _lists(pa, degrees[:, 1:, 0]),
        _lists(pa, degrees[:, 1:, 1]),
        _lists(pa, events[:, 1:], pa.string()),
    ]


def _truth_columns(pa: Any, positions: np.ndarray, codes: np.ndarray, known: np.ndarray) -> list[Any]:
    """``true_x_norm``, ``true_y_norm`` (null where no position is known) and ``true_code`` (null past the codes)."""
    located = np.isfinite(positions[:, 0])
    x, y = (pa.array(np.where(located, positions[:, axis], 0.0), mask=~located) for axis in (0, 1))
    return [x, y, pa.array(codes, mask=~known)]


__all__ = ["ROW_GROUP_FRAMES", "GazeParquetWriter", "import_pyarrow", "parquet_schema"]
