"""The readout files of one video, written as its chunks stream in: ``gaze.csv`` (or ``gaze.parquet``) with its
readout columns, ``fixations.csv``, ``saccades.csv`` and ``scanpaths.json`` (what ``gazeflow predict`` writes).

:class:`ReadoutFiles` wraps a gaze table writer (:data:`TABLE_WRITERS`) and a
:class:`~transformers_gazeflow.gaze.readout.GazeReadout`: :meth:`~ReadoutFiles.write` takes each chunk's samples
and returns its uncertainty (for the overlay's region outline); rows are written as their event labels are decided;
:meth:`~ReadoutFiles.close` writes the events and the scanpaths and returns what ``summary.json`` says of them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from ..gaze.events import EventSettings
from ..gaze.readout import GazeReadout
from ..gaze.regions import RegionCalibration
from ..gaze.scanpaths import scanpath_record, write_scanpaths
from ..gaze.uncertainty import GazeUncertainty
from ..models.gazeflow.geometry import Camera
from .gaze_parquet import GazeParquetWriter
from .writers import GazeCsvWriter, write_events

SCANPATHS_NAME = "scanpaths.json"
TABLE_WRITERS = {"csv": GazeCsvWriter, "parquet": GazeParquetWriter}
"""The per-frame gaze table's writer by ``--format``: ``gaze.csv`` (:mod:`.writers`), ``gaze.parquet``
(:mod:`.gaze_parquet`)."""


class ReadoutFiles:
    """The gaze table at ``table_path`` (``gaze.csv``, or ``gaze.parquet`` with ``table_format="parquet"``) with
    readouts, and ``fixations.csv``, ``saccades.csv``, ``scanpaths.json`` at
    ``files["fixations"]``, ``files["saccades"]``, ``files["scanpaths"]`` once closed (the paths the caller staged:
    ``gazeflow predict`` writes each under a temporary it created and renames it when the video is done).
    ``true_gaze`` / ``true_codes`` as for :class:`~transformers_gazeflow.outputs.writers.GazeCsvWriter`."""

    def __init__(
        self,
        table_path: str | os.PathLike,
        files: dict[str, Path],
        video_id: str,
        width: int,
        height: int,
        fps: float,
        num_samples: int,
        camera: Camera,
        events: EventSettings | None = None,
        region_calibration: RegionCalibration | None = None,
        true_gaze: np.ndarray | None = None,
        true_codes: np.ndarray | None = None,
        table_format: str = "csv",
    ) -> None:
        self.files, self.video_id = {key: Path(files[key]) for key in ("fixations", "saccades", "scanpaths")}, video_id
        self.width, self.height, self.fps = int(width), int(height), float(fps)
        self.readout = GazeReadout(width, height, fps, camera, num_samples, events, region_calibration)
        if table_format not in TABLE_WRITERS:
            raise ValueError(f"table_format must be one of {tuple(TABLE_WRITERS)}, got {table_format!r}")
        writer = TABLE_WRITERS[table_format]
        self.table = writer(table_path, video_id, width, height, fps, true_gaze, true_codes, readouts=True)
        self.frames, self.spread90_sum, self.region90_sum = 0, 0.0, 0.0

    def write(self, first_frame: int, trajectories: np.ndarray) -> GazeUncertainty:
        """Take the next chunk's samples ``[K, n, 2]`` (unit coordinates); write the rows whose labels are known."""
        self.table.check(first_frame, trajectories)
        uncertainty, ready = self.readout.feed(first_frame, trajectories)
        for part in ready:
            self.table.write(part.first, part.trajectories, part)
        self.frames += uncertainty.modes.shape[0]
        self.spread90_sum += float(uncertainty.spread(0.9).sum())
        if uncertainty.region_calibrated:
            self.region90_sum += float(uncertainty.region(0.9).sum())
        return uncertainty

    def close(self) -> dict[str, Any]:
        """Write the last rows, the events and the scanpaths; returns the summary's ``readouts`` entry."""
        for part in self.readout.finish():
            self.table.write(part.first, part.trajectories, part)
        self.table.close()
        events = self.readout.events
        fixations, saccades = write_events(
            (self.files["fixations"], self.files["saccades"]), events, self.video_id, self.width, self.height, self.fps
        )
        scanpaths = write_scanpaths(
            self.files["scanpaths"], scanpath_record(events, self.fps, self.width, self.height, self.video_id)
        )
        point = events.of_series(0)
        return {
            "files": {"fixations": fixations, "saccades": saccades, "scanpaths": scanpaths},
            "camera": self.readout.camera.to_dict(),
            "events": self.readout.settings.to_dict(),
            "point_estimate_fixations": len(point.fixations),
            "point_estimate_saccades": len(point.saccades),
            "sample_fixations": len(events.fixations) - len(point.fixations),
            "sample_saccades": len(events.saccades) - len(point.saccades),
            "mean_spread90_px": self.spread90_sum / max(self.frames, 1),
            **self._regions(),
        }

    def _regions(self) -> dict[str, Any]:
        """The calibration the regions used (None: the raw spread) and, with one, the mean 90% region."""
        calibration = self.readout.region_calibration
        if calibration is None:
            return {"region_calibration": None}
        mean = self.region90_sum / max(self.frames, 1)
        return {"region_calibration": calibration.summary(), "mean_region90_px": mean}

    def abort(self) -> None:
        self.table.close()

    def __enter__(self) -> ReadoutFiles:
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        if exc_type is not None:
            self.abort()


__all__ = ["SCANPATHS_NAME", "TABLE_WRITERS", "ReadoutFiles"]
