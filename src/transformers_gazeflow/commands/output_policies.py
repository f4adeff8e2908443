"""What each ``gazeflow`` command writes, and when it may replace a file that is already there.

Before it opens anything, every command refuses an output that is one of its inputs, lies in an input folder or is
another of its outputs (:func:`~transformers_gazeflow.data.output_safety.check_outputs`). Then, for a file already
at an output's name:

* ``predict``, ``demo`` (and the web demo's jobs) write, per video, ``overlay.mp4``, ``gaze.csv`` (``gaze.parquet``
  with ``--format parquet``), ``fixations.csv``, ``saccades.csv``, ``scanpaths.json`` and ``summary.json`` (a batch
  also ``index.csv``; the other format's table of an earlier prediction is left as it was): the
  files of an earlier prediction are replaced as before (the folder's ``summary.json`` is a prediction's); a file at
  those names in a folder without one, or a link, is refused without ``--overwrite``;
* ``stream`` writes ``--csv FILE`` and ``--summary FILE``: an earlier stream's CSV (its header, with or without the
  region column) or summary (its fields) is replaced; any other file, or a link, is refused without ``--overwrite``;
* ``calibrate`` writes ``--output CALIB.json``: an earlier calibration (``calib.json``'s format) is replaced; any
  other file, or a link, is refused without ``--overwrite``;
* ``export-streamer`` replaces ``--output-dir DIR`` whole: a new or empty folder, or an earlier export (its
  ``streamer.json``); a folder holding an export's file names but no earlier export only with ``--overwrite``; a
  folder holding anything an export does not write is refused even with ``--overwrite``.

Other files in an output folder are never touched. ``--overwrite`` replaces a file, never what a link points to:
outputs are renamed into place (:class:`~transformers_gazeflow.data.output_safety.StagedFiles`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ..data.interface_files import (
    CALIBRATION_FORMAT,
    STREAMER_FORMAT,
    InterfaceFileError,
    prediction_summary,
    read_json_object,
)
from ..data.output_safety import (
    UnsafeOutputError,
    check_outputs,
    first_line,
    foreign_entries,
    json_object_in,
    refuse_foreign,
)
from .batch import CSV_NAME, INDEX_NAME, OVERLAY_NAME, PARQUET_NAME, SUMMARY_NAME, TABLE_NAMES

FIXATIONS_NAME, SACCADES_NAME, SCANPATHS_NAME = "fixations.csv", "saccades.csv", "scanpaths.json"
"""``outputs.writers`` / ``outputs.readouts``' names (not imported from there: they import numpy; a test keeps them
equal)."""
PREDICTION_OUTPUTS = {
    "overlay": OVERLAY_NAME,
    "csv": CSV_NAME,
    "parquet": PARQUET_NAME,
    "fixations": FIXATIONS_NAME,
    "saccades": SACCADES_NAME,
    "scanpaths": SCANPATHS_NAME,
    "summary": SUMMARY_NAME,
}
"""The files a prediction may write, by key (the gaze table is ``csv`` or ``parquet``, by ``--format``: one of them);
all but ``summary`` are streamed under temporaries (:data:`STREAMED_OUTPUTS`), ``summary.json`` is written whole,
last."""
STREAMED_OUTPUTS = ("overlay", "csv", "parquet", "fixations", "saccades", "scanpaths")


def prediction_keys(table_format: str = "csv", overlay: bool = True) -> tuple[str, ...]:
    """The keys of :data:`PREDICTION_OUTPUTS` that one prediction writes: its gaze table by ``table_format`` (a key
    of ``batch.TABLE_NAMES``), the overlay when asked for."""
    if table_format not in TABLE_NAMES:
        raise ValueError(f"table_format must be one of {tuple(TABLE_NAMES)}, got {table_format!r}")
    skipped = {*TABLE_NAMES} - {table_format} | (set() if overlay else {"overlay"})
    return tuple(key for key in PREDICTION_OUTPUTS if key not in skipped)


PREDICTION_FILES = tuple(PREDICTION_OUTPUTS[key] for key in prediction_keys())
"""The files of a prediction with the default ``gaze.csv``."""
EXPORT_FILES = ("step.onnx", "streamer.json", "preprocessor_config.json", "config.json")
STREAM_FIELDS = ("frame", "time_s", "x", "y", "x_px", "y_px", "r50_px", "r90_px", "latency_ms")
STREAM_REGION_FIELDS = ("region90_px",)
"""``commands.stream``'s ``FIELDS`` and ``REGION_FIELDS`` (a model with a region calibration adds them)."""
STREAM_SUMMARY_FIELDS = ("source", "backend", "stopped", "frames", "latency_ms")


def prediction_outputs(
    folder: str | os.PathLike, argument: str = "--output-dir", table_format: str = "csv"
) -> list[tuple[str, Path]]:
    """``(argument, path)`` of every file a prediction writes into ``folder`` (for ``check_outputs``)."""
    return [(argument, Path(folder) / PREDICTION_OUTPUTS[key]) for key in prediction_keys(table_format)]


def check_prediction_folder(
    folder: str | os.PathLike,
    overwrite: bool = False,
    argument: str = "--output-dir",
    extra: tuple[str, ...] = (),
    table_format: str = "csv",
) -> None:
    """A prediction replaces an earlier prediction's files (and ``extra``, the demo's clip); any other file at their
    names (or a link) is refused without ``overwrite``, naming it and why (see the module docstring)."""
    folder = Path(folder)
    names = [PREDICTION_OUTPUTS[key] for key in prediction_keys(table_format)]
    there = [name for name in (*names, *extra) if os.path.lexists(folder / name)]
    if not there or overwrite:
        return
    links = [name for name in there if (folder / name).is_symlink()]
    if links:
        reason = f"{', '.join(links)} {'is a symbolic link' if len(links) == 1 else 'are symbolic links'}"
    else:
        try:
            summary = folder / SUMMARY_NAME
            prediction_summary(read_json_object(summary, "a prediction's summary.json"), str(summary))
            return
        except InterfaceFileError as err:
            reason = f"{', '.join(there)} {'is' if len(there) == 1 else 'are'} not an earlier prediction's ({err})"
    raise UnsafeOutputError(
        f"{argument} {folder}: {reason}; pass --overwrite to replace them, or choose another folder"
    )


def check_prediction_outputs(
    videos: list[Path], folders: list[Path], output_dir: Path, location: str, options, batch: bool
) -> None:
    """``gazeflow predict``'s outputs, before the model loads: no file of any video's folder (nor a batch's
    ``index.csv``) may be one of the run's inputs (the videos, the calibration, ``--intrinsics``, the model folder);
    a lone video's folder must hold no file at the outputs' names that an earlier prediction did not write (a
    batch's video with such a folder is recorded as failed when its turn comes)."""
    inputs = [("VIDEO", video) for video in videos] + list(options.inputs)
    if isinstance(options.calibration, (str, os.PathLike)):
        inputs.append(("--calibration", options.calibration))
    if Path(location).is_dir():
        inputs.append(("--model", location))
    table = options.table_format
    outputs = [output for folder in folders for output in prediction_outputs(folder, table_format=table)]
    check_outputs(outputs + ([("--output-dir", output_dir / INDEX_NAME)] if batch else []), inputs)
    if not batch:
        check_prediction_folder(folders[0], options.overwrite, table_format=table)


def check_calibration_output(args, location: str) -> None:
    """``gazeflow calibrate --output``: never the video, the tracker file, the ``--camera`` calibration or a file of
    the model folder, and a file there that is not an earlier calibration only with ``--overwrite``."""
    inputs = [("VIDEO", args.video), ("--gaze", args.gaze)]
    if getattr(args, "camera", None) is not None:
        inputs.append(("--camera", args.camera))
    if Path(location).is_dir():
        inputs.append(("--model", location))
    check_outputs([("--output", args.output)], inputs)
    check_output_files([("--output", args.output, "calibrate")], args.overwrite)


def is_stream_csv(path: Path) -> bool:
    return first_line(path) in (",".join(STREAM_FIELDS), ",".join(STREAM_FIELDS + STREAM_REGION_FIELDS))


def is_stream_summary(path: Path) -> bool:
    record = json_object_in(path)
    return record is not None and all(key in record for key in STREAM_SUMMARY_FIELDS)


def is_calibration(path: Path) -> bool:
    record = json_object_in(path)
    return record is not None and record.get("format") == CALIBRATION_FORMAT


def check_output_files(outputs: Iterable[tuple[str, str | os.PathLike, str]], overwrite: bool = False) -> None:
    """Refuse an existing ``(argument, path, command)`` output that the command did not write (see the module
    docstring); ``command`` is ``"stream --csv"``, ``"stream --summary"`` or ``"calibrate"``."""
    recognise = {"stream --csv": is_stream_csv, "stream --summary": is_stream_summary, "calibrate": is_calibration}
    for argument, path, command in outputs:
        refuse_foreign(argument, path, recognise[command], f"gazeflow {command.split()[0]}", overwrite)


def check_export_folder(folder: str | os.PathLike, overwrite: bool = False, argument: str = "--output-dir") -> None:
    """``export-streamer`` replaces its folder whole: a new or empty folder, or an earlier export; a folder holding an
    export's names but no earlier export only with ``overwrite``; one holding anything else never."""
    folder = Path(folder)
    if os.path.lexists(folder) and not folder.is_dir():
        raise UnsafeOutputError(f"{argument} {folder}: is an existing file, expected a folder")
    foreign = foreign_entries(folder, EXPORT_FILES)
    links = [name for name in foreign if name in EXPORT_FILES]
    others = [name for name in foreign if name not in EXPORT_FILES]
    if others:
        raise UnsafeOutputError(
            f"{argument} {folder}: holds {', '.join(others[:3])}{' ...' if len(others) > 3 else ''}, which an export "
            "does not write, and the export replaces the folder whole; choose a new or empty folder"
        )
    if overwrite or not any((folder / name).exists() or (folder / name).is_symlink() for name in EXPORT_FILES):
        return
    interface = json_object_in(folder / "streamer.json")
    if not links and interface is not None and interface.get("format") == STREAMER_FORMAT:
        return
    what = f"{', '.join(links)} {'is a link' if len(links) == 1 else 'are links'}" if links else "no earlier export"
    raise UnsafeOutputError(
        f"{argument} {folder}: holds an export's file names but {what} (its streamer.json); pass --overwrite to "
        "replace the folder, or choose another one"
    )


__all__ = [
    "PREDICTION_OUTPUTS",
    "STREAMED_OUTPUTS",
    "PREDICTION_FILES",
    "prediction_keys",
    "EXPORT_FILES",
    "prediction_outputs",
    "check_prediction_folder",
    "check_prediction_outputs",
    "check_calibration_output",
    "check_output_files",
    "check_export_folder",
    "is_stream_csv",
    "is_stream_summary",
    "is_calibration",
]
