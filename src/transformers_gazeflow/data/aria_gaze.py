"""Project Aria eye gaze on the frames of a video: the 2D CSVs of Ego-Exo4D, MPS's 3D CSVs, and the time rule.

Two kinds of file, both from Aria's Machine Perception Services (MPS) at the eye cameras' 10 Hz:

* **2D** (Ego-Exo4D's ``general_eye_gaze_2d.csv`` / ``personalized_eye_gaze_2d.csv``): ``frame_num``,
  ``tracking_timestamp_us``, ``x``, ``y``; ``x, y`` in pixels of the upright 1408x1408 RGB frame, in
  projectaria_tools' pixel convention (pixel centres at integers, so unit ``x`` is ``(x + 0.5) / 1408``), empty where
  the row has no gaze. Row ``frame_num = n`` is the gaze at ``n`` gaze periods into the take's video (video frame
  ``3 n`` at 30 fps, as the Ego-Exo4D gaze tutorial reads it); the period is measured from ``tracking_timestamp_us``
  (10 Hz where the file has no usable timestamps). Without a ``frame_num`` column the timestamps (or, without
  them, the row order) place the rows, the first at frame 0.
* **3D** (MPS's ``general_eye_gaze.csv`` / ``personalized_eye_gaze.csv``): ``tracking_timestamp_us`` on the device
  clock, the gaze direction as ``yaw_rads_cpf`` and ``pitch_rads_cpf`` in the central pupil frame (CPF), and
  ``depth_m`` where known. Older and newer schemas are read alike: a file with per-eye ``left_yaw_rads_cpf`` /
  ``right_yaw_rads_cpf`` and no combined yaw has it computed as projectaria_tools does (the direction of the two rays'
  intersection); an empty or non-positive depth is 1 m (Aria's documented default). The direction is ``(tan yaw,
  tan pitch, 1)`` normalised, the gaze point ``depth`` metres along it (projectaria_tools'
  ``getEyeGazePointAtDepth``); :mod:`.aria_calibration` projects it into the RGB camera.

**The time rule** (:func:`frame_gaze`): video frame ``i`` (at ``i / fps``) takes the gaze sample nearest in time
when it lies within half a gaze period (ties go to the later sample), else it is untracked. At 10 Hz and 30 fps
each sample labels the frame at its time and the frame on either side (what the Ego-Exo4D tutorial's threefold
repetition does), a frame's gaze is at most 1/30 s old or early, and nothing is invented: a gap in the gaze
(an empty row, a missing row) leaves its frames untracked. Interpolating between samples 100 ms apart would place
gaze mid-saccade where the eye never was (a saccade lasts 20-80 ms), so the rule does not interpolate.

Gaze types: Aria's files carry no eye-movement labels, and 10 Hz cannot resolve saccades, so a tracked frame is a
fixation (code 1) and a point outside the frame is off-frame (4) and clamped; the fixation filter of the evaluation
protocol then keeps every tracked frame, as peers on Ego-Exo4D evaluate.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .gaze_common import GazeTrack, ParseReport, decode_text_bytes, fill_untracked, read_text
from .gaze_types import FIXATION, OFF_FRAME, UNTRACKED

ARIA_GAZE_RATE_HZ = 10.0
"""The eye cameras' rate behind MPS eye gaze, used where a 2D file has no usable timestamps."""
ARIA_UPRIGHT_SIZE = 1408
"""Width and height (pixels) of the upright RGB frame the 2D CSVs' ``x, y`` are measured in."""
ARIA_DEFAULT_DEPTH_M = 1.0
"""The gaze depth where a 3D row has none (projectaria_tools' tutorials use 1 m)."""
FRAME_COLUMNS = ("frame_num", "frame_number")
TIME_COLUMN = "tracking_timestamp_us"


def _header_name(name: str) -> str:
    return name.strip().strip("\ufeff").strip().lower()


def read_csv_columns(path: str | Path, what: str) -> tuple[dict[str, list[str]], int]:
    """The columns of a CSV (names stripped of blanks and a byte-order mark, lower-cased) as lists of cell
    strings, and the number of data rows; blank lines are skipped, short rows padded with empty cells."""
    lines = [line for line in read_text(path, what).splitlines() if line.strip()]
    if not lines:
        raise ValueError(f"{path}: {what} is empty (expected a header line)")
    rows = list(csv.reader(lines))
    header = [_header_name(name) for name in rows[0]]
    columns: dict[str, list[str]] = {name: [] for name in header}
    for row in rows[1:]:
        cells = row + [""] * (len(header) - len(row))
        for name, cell in zip(header, cells):
            columns[name].append(cell.strip())
    return columns, len(rows) - 1


def _numbers(cells: list[str]) -> np.ndarray:
    """Cells as float64, NaN where a cell is empty or not a finite number."""
    out = np.full(len(cells), np.nan)
    for i, cell in enumerate(cells):
        try:
            value = float(cell)
        except ValueError:
            continue
        out[i] = value if math.isfinite(value) else np.nan
    return out


@dataclass
class AriaGazeSamples:
    """Gaze samples on a video's clock: ``time_s`` (seconds from the video's frame 0, sorted), ``points`` unit
    coordinates ``[n, 2]`` (NaN where the sample has no gaze), ``period_s`` (the gaze period) and the report."""

    time_s: np.ndarray
    points: np.ndarray
    period_s: float
    report: ParseReport


def _gaze_period(frames: np.ndarray | None, stamps_us: np.ndarray | None) -> float:
    """The gaze period (s): the median timestamp step per ``frame_num`` step (per row without ``frame_num``),
    or 1 / 10 Hz where no two rows have increasing timestamps."""
    if stamps_us is None:
        return 1.0 / ARIA_GAZE_RATE_HZ
    index = frames if frames is not None else np.arange(stamps_us.size, dtype=np.float64)
    ok = np.isfinite(stamps_us) & np.isfinite(index)
    steps, spans = np.diff(stamps_us[ok]), np.diff(index[ok])
    good = (spans > 0) & (steps > 0)
    if not good.any():
        return 1.0 / ARIA_GAZE_RATE_HZ
    return float(np.median(steps[good] / spans[good])) * 1e-6


def read_gaze_2d_csv(path: str | Path, frame_size: int = ARIA_UPRIGHT_SIZE) -> AriaGazeSamples:
    """Read an Ego-Exo4D 2D eye-gaze CSV (see the module docstring); columns in any order, extra columns ignored.

    A row whose ``x`` or ``y`` is empty (or not a number) is a sample without gaze; a row without a place in time
    (its ``frame_num`` not a number) is skipped and counted."""
    columns, count = read_csv_columns(path, "an Aria 2D eye-gaze CSV")
    missing = [name for name in ("x", "y") if name not in columns]
    if missing:
        raise ValueError(f"{path}: the 2D eye-gaze CSV has no column {' or '.join(missing)} (header: {list(columns)})")
    report = ParseReport(str(path), "aria 2d eye gaze", rows_read=count)
    frame_column = next((name for name in FRAME_COLUMNS if name in columns), None)
    frames = _numbers(columns[frame_column]) if frame_column else None
    stamps = _numbers(columns[TIME_COLUMN]) if TIME_COLUMN in columns else None
    period = _gaze_period(frames, stamps)
    if frames is not None:
        time_s = frames * period
    elif stamps is not None and np.isfinite(stamps).any():
        time_s = (stamps - np.nanmin(stamps)) * 1e-6
        report.notes.append("no frame_num column: rows placed by tracking_timestamp_us, the first at frame 0")
    else:
        time_s = np.arange(count) * period
        report.notes.append("no frame_num nor timestamp column: rows placed by their order at 10 Hz")
    points = (np.stack([_numbers(columns["x"]), _numbers(columns["y"])], -1) + 0.5) / frame_size
    placed = np.isfinite(time_s)
    report.skip("no frame_num / timestamp", int((~placed).sum()))
    return _samples(time_s[placed], points[placed], period, report)


def _samples(time_s: np.ndarray, points: np.ndarray, period: float, report: ParseReport) -> AriaGazeSamples:
    points[~np.isfinite(points).all(-1)] = np.nan
    order = np.argsort(time_s, kind="stable")
    if np.any(np.diff(time_s) < 0):
        report.notes.append("rows were not in time order and were sorted")
    empty = int(np.isnan(points[:, 0]).sum())
    if empty:
        report.notes.append(f"{empty} row(s) have no gaze (empty x, y): their frames are untracked")
    report.rows_kept = int(time_s.size)
    return AriaGazeSamples(time_s[order], points[order], period, report)


@dataclass
class MpsEyeGaze:
    """MPS 3D eye gaze rows: ``timestamp_us`` (device clock), ``yaw``, ``pitch`` (radians, CPF) and ``depth_m``
    (:data:`ARIA_DEFAULT_DEPTH_M` where the file has none); NaN yaw/pitch where a row has no gaze."""

    timestamp_us: np.ndarray
    yaw: np.ndarray
    pitch: np.ndarray
    depth_m: np.ndarray
    report: ParseReport

    def points_cpf(self) -> np.ndarray:
        """The gaze points ``[n, 3]`` in the CPF (metres): ``depth`` along ``(tan yaw, tan pitch, 1)`` normalised."""
        direction = np.stack([np.tan(self.yaw), np.tan(self.pitch), np.ones_like(self.yaw)], -1)
        return direction / np.linalg.norm(direction, axis=-1, keepdims=True) * self.depth_m[:, None]


def combined_yaw(left_yaw: np.ndarray, right_yaw: np.ndarray) -> np.ndarray:
    """The combined yaw of per-eye yaws, as projectaria_tools' ``computeDepthAndCombinedGazeDirection`` defines it:
    the direction ``atan(x / z)`` of the two rays' intersection, eyes 63 mm apart on the x axis. ``x / z`` reduces to
    ``(tan left + tan right) / 2`` whatever the eyes' distance, which stays defined for parallel rays."""
    return np.arctan((np.tan(left_yaw) + np.tan(right_yaw)) / 2.0)


def is_mps_eye_gaze_csv(path: str | Path) -> bool:
    """Whether a file's header is an MPS 3D eye-gaze CSV's: a timestamp and a yaw (combined or per eye)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096)
    except OSError:
        return False
    text = decode_text_bytes(head)[0].decode("utf-8", errors="replace")
    header = {_header_name(name) for name in text.splitlines()[0].split(",")} if text.strip() else set()
    return TIME_COLUMN in header and ("yaw_rads_cpf" in header or "left_yaw_rads_cpf" in header)


def read_mps_eye_gaze_csv(path: str | Path) -> MpsEyeGaze:
    """Read an MPS 3D eye-gaze CSV (any of its schemas; see the module docstring)."""
    columns, count = read_csv_columns(path, "an MPS eye-gaze CSV")
    if TIME_COLUMN not in columns or "pitch_rads_cpf" not in columns:
        raise ValueError(
            f"{path}: an MPS eye-gaze CSV needs the columns {TIME_COLUMN} and pitch_rads_cpf (header: {list(columns)})"
        )
    report = ParseReport(str(path), "mps eye gaze", rows_read=count)
    if "yaw_rads_cpf" in columns:
        yaw = _numbers(columns["yaw_rads_cpf"])
    elif "left_yaw_rads_cpf" in columns and "right_yaw_rads_cpf" in columns:
        yaw = combined_yaw(_numbers(columns["left_yaw_rads_cpf"]), _numbers(columns["right_yaw_rads_cpf"]))
        report.notes.append("combined yaw from left_yaw_rads_cpf and right_yaw_rads_cpf")
    else:
        raise ValueError(f"{path}: an MPS eye-gaze CSV needs yaw_rads_cpf, or left_ and right_yaw_rads_cpf")
    pitch = _numbers(columns["pitch_rads_cpf"])
    depth = _numbers(columns["depth_m"]) if "depth_m" in columns else np.full(count, np.nan)
    depth = np.where(np.isfinite(depth) & (depth > 0), depth, ARIA_DEFAULT_DEPTH_M)
    stamps = _numbers(columns[TIME_COLUMN])
    placed = np.isfinite(stamps)
    report.skip("no tracking_timestamp_us", int((~placed).sum()))
    stamps, yaw, pitch, depth = stamps[placed], yaw[placed], pitch[placed], depth[placed]
    no_gaze = ~(np.isfinite(yaw) & np.isfinite(pitch))
    yaw[no_gaze], pitch[no_gaze] = np.nan, np.nan
    order = np.argsort(stamps, kind="stable")
    report.rows_kept = int(stamps.size)
    if no_gaze.any():
        report.notes.append(f"{int(no_gaze.sum())} row(s) have no gaze direction: their frames are untracked")
    return MpsEyeGaze(stamps[order], yaw[order], pitch[order], depth[order], report)


def nearest_samples(sample_times: np.ndarray, frame_times: np.ndarray, tolerance_s: float) -> np.ndarray:
    """For each frame time, the index of the sample nearest in time (ties: the later one), or -1 where that
    sample is more than ``tolerance_s`` away (or there is no sample). ``sample_times`` sorted."""
    n = sample_times.size
    if n == 0:
        return np.full(frame_times.shape, -1, np.int64)
    later = np.searchsorted(sample_times, frame_times, side="left")
    earlier, later_c = np.clip(later - 1, 0, n - 1), np.clip(later, 0, n - 1)
    take_earlier = (later >= n) | (
        (later > 0) & (frame_times - sample_times[earlier] < sample_times[later_c] - frame_times)
    )
    nearest = np.where(take_earlier, earlier, later_c)
    return np.where(np.abs(sample_times[nearest] - frame_times) <= tolerance_s + 1e-9, nearest, -1)


def frame_gaze(samples: AriaGazeSamples, num_frames: int, fps: float) -> GazeTrack:
    """Per-frame gaze of a video's ``num_frames`` frames at ``fps`` (the module docstring's time rule and codes);
    untracked frames follow :func:`~.gaze_common.fill_untracked`."""
    if num_frames < 0 or not fps > 0:
        raise ValueError(f"need num_frames >= 0 and fps > 0, got {num_frames} and {fps}")
    index = nearest_samples(samples.time_s, np.arange(num_frames) / float(fps), samples.period_s / 2)
    points = np.full((num_frames, 2), np.nan)
    points[index >= 0] = samples.points[index[index >= 0]]
    tracked = np.isfinite(points).all(-1)
    outside = tracked & ((points < 0) | (points > 1)).any(-1)
    gaze_type = np.where(tracked, np.where(outside, OFF_FRAME, FIXATION), UNTRACKED).astype(np.int8)
    gaze = fill_untracked(np.where(tracked[:, None], np.clip(points, 0.0, 1.0), 0.0), gaze_type)
    untracked = int((~tracked).sum())
    if untracked:
        samples.report.notes.append(f"{untracked} of {num_frames} video frames have no gaze (untracked)")
    return GazeTrack(gaze, gaze_type, samples.report)


__all__ = [
    "ARIA_GAZE_RATE_HZ",
    "ARIA_UPRIGHT_SIZE",
    "ARIA_DEFAULT_DEPTH_M",
    "read_csv_columns",
    "AriaGazeSamples",
    "read_gaze_2d_csv",
    "MpsEyeGaze",
    "combined_yaw",
    "is_mps_eye_gaze_csv",
    "read_mps_eye_gaze_csv",
    "nearest_samples",
    "frame_gaze",
]
