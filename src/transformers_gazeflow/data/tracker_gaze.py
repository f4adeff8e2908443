"""A wearer's eye-tracker gaze on the frames of one video, from the files ``gazeflow calibrate --gaze`` reads.

Five kinds of file, told apart by content:

* a **CSV with** ``frame_idx``, ``x_norm`` and ``y_norm`` columns (unit coordinates, origin top-left), as
  ``gazeflow predict`` writes ``gaze.csv``: when it has a ``sample_id`` column only the point-estimate rows (-1)
  are read, and a ``gaze_type`` (or ``true_code``) column gives each row's gaze-type code (one of
  ``gaze_types.GAZE_TYPE_CODES``: another number is a one-line error naming the file, the line and the column);
  several rows on one frame are averaged. A row whose position is empty, not a number or outside ``[0, 1]`` (a
  blink, a lost eye, a glance off the frame) leaves its frame untracked. The file may be UTF-8 with or without a
  byte-order mark, UTF-16 or UTF-32 (``gaze_common.read_text``);
* an **Ego4D gaze CSV** (:mod:`.ego4d_format`): labelled on the video's frames; a video named like GLC's clips,
  ``<uid>_t<start>_t<end>.mp4``, reads the frames from second ``start`` on;
* an **EGTEA Gaze+ BeGaze export** (:mod:`.egtea_format`): a video named like an EGTEA clip,
  ``<VIDEO>-<a>-<b>-F<start>-F<end>.mp4``, reads rows ``F_start - 1 + k``; another video reads row ``k``;
* an **Ego-Exo4D 2D eye-gaze CSV** (``general_eye_gaze_2d.csv``, ``personalized_eye_gaze_2d.csv``; columns ``x``, ``y``
  and ``frame_num`` or ``tracking_timestamp_us``; :mod:`.aria_gaze`): pixels of the upright 1408 frame at 10 Hz, on the
  take's video frames by :func:`~.aria_gaze.frame_gaze`'s time rule;
* an **MPS 3D eye-gaze CSV** of a wearer's own Aria recording (``general_eye_gaze.csv``, ``personalized_eye_gaze.csv``:
  ``tracking_timestamp_us``, ``yaw_rads_cpf``, ``pitch_rads_cpf``, ...): projected into the video through the
  recording's ``calibration`` (:mod:`.aria_calibration`; projectaria-tools where installed), its first row at the
  video's frame 0, then the same time rule.

Frames the file does not cover are untracked (code 0).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .aria_calibration import AriaCalibration, mps_gaze_samples, read_aria_calibration
from .aria_gaze import frame_gaze, is_mps_eye_gaze_csv, read_gaze_2d_csv, read_mps_eye_gaze_csv
from .ego4d_format import is_ego4d_gaze_csv, parse_ego4d_gaze, parse_glc_clip_path
from .egtea_format import egtea_gaze_rows, parse_begaze, parse_egtea_clip_name
from .gaze_common import read_text
from .gaze_types import FIXATION, GAZE_TYPE_CODES, GAZE_TYPE_NAMES, OFF_FRAME, UNTRACKED, valid_mask

CSV_REQUIRED = ("frame_idx", "x_norm", "y_norm")
ARIA_2D_REQUIRED = ("x", "y")
ARIA_2D_PLACE = ("frame_num", "frame_number", "tracking_timestamp_us")
CODE_COLUMNS = ("gaze_type", "true_code")


@dataclass
class TrackerGaze:
    """Per-frame tracker gaze of a video's ``T`` frames: ``gaze`` ``[T, 2]`` unit coordinates, ``gaze_type`` ``[T]``
    codes (untracked where the file has nothing usable) and ``kind``, the format read; ``hint``: what the rows left
    out look like when that tells the likely mistake (pixels in the unit-coordinate columns), else empty."""

    gaze: np.ndarray
    gaze_type: np.ndarray
    kind: str
    hint: str = ""


def _gaze_type(cell: str | None, column: str | None, path: Path, line: int) -> int | None:
    """A row's gaze-type code (FIXATION without a code column or with an empty cell; None: not an integer, the row is
    skipped); a number that is not a gaze-type code is a one-line error."""
    if column is None or cell in (None, ""):
        return FIXATION
    try:
        code = int(cell)
    except ValueError:
        return None
    if code not in GAZE_TYPE_CODES:
        codes = ", ".join(f"{c} {name}" for c, name in zip(GAZE_TYPE_CODES, GAZE_TYPE_NAMES))
        raise ValueError(f"{path}: line {line}: {column}: expected a gaze-type code ({codes}), got {cell[:20]!r}")
    return code


def _read_gaze_csv(path: Path, text: str, num_frames: int) -> TrackerGaze:
    reader = csv.DictReader(text.splitlines())
    reader.fieldnames = [name.strip() for name in reader.fieldnames or []]
    rows = list(reader)
    use_rows = (
        [row for row in rows if row.get("sample_id") in (None, "", "-1")] if rows and "sample_id" in rows[0] else rows
    )
    code_column = next((name for name in CODE_COLUMNS if rows and name in rows[0]), None)
    sums, counts = np.zeros((num_frames, 2)), np.zeros(num_frames)
    codes = np.full(num_frames, UNTRACKED, np.int8)
    lines = {id(row): number for number, row in enumerate(rows, start=2)}
    largest, beyond = np.zeros(2), 0  # rows whose coordinates are finite numbers past the frame's [0, 1]
    for row in use_rows:
        try:
            frame, x, y = int(row["frame_idx"]), float(row["x_norm"]), float(row["y_norm"])
        except (TypeError, ValueError):
            continue
        code = _gaze_type(row.get(code_column) if code_column else None, code_column, path, lines[id(row)])
        if code is None:
            continue
        if math.isfinite(x) and math.isfinite(y) and not (0 <= x <= 1 and 0 <= y <= 1):
            largest, beyond = np.maximum(largest, (x, y)), beyond + 1
            continue
        if not (0 <= frame < num_frames and math.isfinite(x) and math.isfinite(y)):
            continue
        sums[frame] += (x, y)
        counts[frame] += 1
        codes[frame] = code
    gaze = np.where(counts[:, None] > 0, sums / np.maximum(counts, 1)[:, None], 0.5)
    hint = ""
    if beyond > counts.sum() and largest.max() > 2:  # most numeric rows past the frame, by more than a frame
        hint = (
            f"; {beyond} rows have x_norm/y_norm up to ({largest[0]:g}, {largest[1]:g}), which look like pixels: "
            "x_norm and y_norm are unit coordinates, [0, 1] of the frame width and height (divide pixels by the "
            "video's width and height)"
        )
    return TrackerGaze(gaze, np.where(counts > 0, codes, UNTRACKED).astype(np.int8), "gaze CSV", hint)


def _text_and_header(path: Path) -> tuple[str | None, list[str] | None]:
    """The file as text (any encoding ``read_text`` reads, a byte-order mark dropped) and its first line's cells."""
    try:
        text = read_text(path, "a gaze CSV")
    except (ValueError, OSError):
        return None, None
    header = next(csv.reader([text.split("\n", 1)[0]]), [])
    return text, [name.strip() for name in header]


def _aria_gaze(
    path: Path, header: list[str] | None, num_frames: int, fps: float, calibration: str | Path | AriaCalibration | None
) -> TrackerGaze | None:
    """An Ego-Exo4D 2D or an MPS 3D eye-gaze CSV on the video's frames, or None for another kind of file."""
    names = {name.lower() for name in header or ()}
    if all(name in names for name in ARIA_2D_REQUIRED) and any(name in names for name in ARIA_2D_PLACE):
        track = frame_gaze(read_gaze_2d_csv(path), num_frames, fps)
        return TrackerGaze(track.gaze, track.gaze_type, "Ego-Exo4D 2D eye-gaze CSV")
    if not is_mps_eye_gaze_csv(path):
        return None
    if calibration is None:
        raise ValueError(
            f"{path}: an MPS 3D eye-gaze CSV needs the recording's camera calibration to be projected into the video "
            "(an Aria device calibration JSON or the minimal FISHEYE624 form; gazeflow calibrate --camera CALIB.json)"
        )
    if not isinstance(calibration, AriaCalibration):
        calibration = read_aria_calibration(calibration)
    track = frame_gaze(mps_gaze_samples(read_mps_eye_gaze_csv(path), calibration), num_frames, fps)
    return TrackerGaze(track.gaze, track.gaze_type, "MPS 3D eye-gaze CSV")


def _rows_of(track_gaze: np.ndarray, track_types: np.ndarray, rows: np.ndarray, kind: str) -> TrackerGaze:
    inside = (rows >= 0) & (rows < len(track_types))
    gaze = np.full((rows.shape[0], 2), 0.5)
    codes = np.full(rows.shape[0], UNTRACKED, np.int8)
    gaze[inside] = track_gaze[rows[inside]]
    codes[inside] = track_types[rows[inside]]
    return TrackerGaze(gaze, codes, kind)


def read_tracker_gaze(
    path: str | Path,
    num_frames: int,
    fps: float,
    video_name: str = "",
    calibration: str | Path | AriaCalibration | None = None,
) -> TrackerGaze:
    """The tracker gaze of the ``num_frames`` frames of a video (``video_name``: its file name, which aligns EGTEA
    and Ego4D clips) from ``path`` (see the module docstring); a file of another kind is a one-line error.
    ``calibration``: the recording's Aria camera calibration (a file or :class:`~.aria_calibration.AriaCalibration`),
    which an MPS 3D eye-gaze CSV needs."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"tracker gaze file not found: {path}")
    text, header = _text_and_header(path)
    if header is not None and all(name in header for name in CSV_REQUIRED):
        return _read_gaze_csv(path, text, num_frames)
    aria = _aria_gaze(path, header, num_frames, fps, calibration)
    if aria is not None:
        return aria
    if is_ego4d_gaze_csv(path):
        try:
            _, start_s, _ = parse_glc_clip_path(Path(video_name).name)
        except ValueError:
            start_s = 0
        first = int(round(start_s * fps))
        track = parse_ego4d_gaze(path, first + num_frames, fps)
        return _rows_of(track.gaze, track.gaze_type, np.arange(num_frames) + first, "Ego4D gaze CSV")
    try:
        track = parse_begaze(path)
    except ValueError as err:
        raise ValueError(
            f"{path}: not a gaze file gazeflow reads: expected a CSV with columns "
            f"{', '.join(CSV_REQUIRED)} (as gaze.csv), an Ego4D gaze CSV, an Ego-Exo4D 2D or MPS 3D eye-gaze CSV, "
            f"or an EGTEA BeGaze export ({err})"
        ) from None
    try:
        rows = egtea_gaze_rows(parse_egtea_clip_name(Path(video_name).name).start_frame, num_frames)
    except ValueError:
        rows = np.arange(num_frames)
    return _rows_of(track.gaze, track.gaze_type, rows, "EGTEA BeGaze export")


def usable_frames(
    codes: np.ndarray, fps: float, seconds: float | None = None, start_frame: int | None = None
) -> np.ndarray:
    """The frames a calibration fits on: tracker gaze valid and on the frame, from ``start_frame`` (default: the
    first such frame) and, with ``seconds``, before ``start + seconds * fps``."""
    codes = np.asarray(codes)
    frames = np.flatnonzero(valid_mask(codes) & (codes != OFF_FRAME))
    if start_frame is not None:
        frames = frames[frames >= start_frame]
    if seconds is not None and frames.size:
        frames = frames[frames < frames[0] + seconds * fps]
    return frames


__all__ = ["TrackerGaze", "read_tracker_gaze", "usable_frames", "CSV_REQUIRED"]
