"""Ego4D gaze raw formats: gaze CSVs found by content, per-frame labels, GLC's clip lists and untracked intervals.

The raw layout of Ego4D's gaze subset (the gaze CSVs of its download). Reference behaviour: GLC (``BolinLai/GLC``:
``slowfast/datasets/ego4d_gaze.py``, ``data/preprocessing.py``).

What lives here, and nowhere else: Ego4D gaze CSVs, found by content (:func:`is_ego4d_gaze_csv`,
:func:`read_ego4d_gaze_csv`), the per-frame labelling (nearest sample in time, y flip, 40 px fixation rule;
:func:`ego4d_frame_labels`), GLC's clip lists and untracked intervals (:func:`parse_glc_clip_path`,
:func:`read_untracked_intervals`, :func:`ego4d_clip_starts`) and the clip-to-label alignment
(:func:`ego4d_label_rows`). A malformed row is skipped and counted by reason in a :class:`~.gaze_common.ParseReport`.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from itertools import repeat
from operator import itemgetter
from pathlib import Path

import numpy as np

from ..models.gazeflow.geometry import unit_to_pixels
from .gaze_common import (
    PARITY_FIXED,
    PARITY_GLC,
    UNTRACKED_FILL_GLC_EGO4D,
    GazeTrack,
    ParseReport,
    check_parity,
    decode_text_bytes,
    fill_untracked,
    read_text,
    read_text_bytes,
    tokens_to_float,
)
from .gaze_types import FIXATION, OFF_FRAME, SACCADE, UNTRACKED

# --- Ego4D constants (docs/specs/data.md, "Ego4D gaze subset") ---
EGO4D_GAZE_HEADER_PREFIX = "component_idx,component_timestamp_s,"
EGO4D_TIME_COLUMN = "component_timestamp_s"
EGO4D_X_COLUMN, EGO4D_Y_COLUMN = "norm_pos_x", "norm_pos_y"
EGO4D_MOTION_WIDTH, EGO4D_MOTION_HEIGHT = 1088, 1080  # the fixation threshold is measured at this size, always
EGO4D_FIXATION_MAX_PX = 40.0
EGO4D_CLIP_SECONDS = 5
EGO4D_NON_GAZE_FILES = frozenset({"manifest.csv", "manifest.ver"})
EGO4D_GLC_SKIPPED_VIDEOS = frozenset(
    {
        "4e07da0c-450f-4c37-95e9-e793cb5d8f7f",
        "5819e52c-4e12-4f86-ad69-76fc215dfbcb",
        "83081c5a-8456-44d8-af67-280034f8f0a6",
        "a77682da-cae7-4e68-8580-6cb47658b23f",
    }
)


def is_ego4d_gaze_csv(path: str | Path) -> bool:
    """Whether a file is an Ego4D gaze CSV, by its header (the download names them ``<uid>.mp4``;
    docs/specs/data.md)."""
    path = Path(path)
    if path.name in EGO4D_NON_GAZE_FILES or not path.is_file():
        return False
    with open(path, "rb") as handle:
        head = handle.read(4 * len(EGO4D_GAZE_HEADER_PREFIX) + 4)  # room for UTF-32 and a byte-order mark
    text, _ = decode_text_bytes(head)
    return text.startswith(EGO4D_GAZE_HEADER_PREFIX.encode())


@dataclass
class Ego4dGazeSamples:
    """Kept samples of an Ego4D gaze CSV, sorted by time: ``t`` seconds, ``x``/``y`` unit coords (top-left origin)."""

    t: np.ndarray
    x: np.ndarray
    y: np.ndarray
    report: ParseReport


def read_ego4d_gaze_csv(path: str | Path) -> Ego4dGazeSamples:
    """Read an Ego4D gaze CSV: time ``component_timestamp_s``, ``x = norm_pos_x``, ``y = 1 - norm_pos_y``.

    ``norm_pos_*`` have a bottom-left origin (docs/specs/data.md), hence the y flip. Rows with a wrong field count or a
    non-numeric time/position are skipped and counted. Rows are sorted by time (stably) if they are not. UTF-8,
    UTF-16 and UTF-32 files, with or without a byte-order mark, are read alike (:func:`~.gaze_common.read_text_bytes`).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Ego4D gaze file not found: {path}")
    if not is_ego4d_gaze_csv(path):
        raise ValueError(
            f"{path} is not an Ego4D gaze CSV: its header does not start with {EGO4D_GAZE_HEADER_PREFIX!r}"
        )
    data, encoding = read_text_bytes(path)  # UTF-16/32 and byte-order marks read as UTF-8
    lines = data.split(b"\n")
    if lines and not lines[-1].strip():
        lines.pop()
    header = [name.strip() for name in next(csv.reader([lines[0].decode("utf-8", errors="replace")]))]
    missing = [c for c in (EGO4D_TIME_COLUMN, EGO4D_X_COLUMN, EGO4D_Y_COLUMN) if c not in header]
    if missing:
        raise ValueError(f"{path}: the gaze CSV header lacks the column(s) {missing}")
    cols = [header.index(c) for c in (EGO4D_TIME_COLUMN, EGO4D_X_COLUMN, EGO4D_Y_COLUMN)]
    report = ParseReport(str(path), "ego4d gaze csv", rows_read=len(lines) - 1)
    if encoding:
        report.notes.append(encoding)
    rows = list(map(bytes.split, lines[1:], repeat(b",")))
    lengths = np.fromiter(map(len, rows), np.int64, len(rows))
    good = lengths == len(header)
    if not good.all():
        blank = sum(1 for i in np.flatnonzero(~good) if not lines[1 + i].strip())
        report.skip("blank line", blank)
        report.skip(f"field count is not {len(header)}", int((~good).sum()) - blank)
        rows = [rows[i] for i in np.flatnonzero(good)]
    t, ok_t = tokens_to_float(list(map(itemgetter(cols[0]), rows)))
    x, ok_x = tokens_to_float(list(map(itemgetter(cols[1]), rows)))
    y, ok_y = tokens_to_float(list(map(itemgetter(cols[2]), rows)))
    ok = ok_t & ok_x & ok_y
    report.skip("non-numeric or non-finite time/position", int((~ok).sum()))
    t, x, y = t[ok], x[ok], y[ok]
    if t.size > 1 and np.any(np.diff(t) < 0):
        order = np.argsort(t, kind="stable")
        t, x, y = t[order], x[order], y[order]
        report.notes.append("rows were not in time order and were sorted")
    report.rows_kept = int(t.size)
    return Ego4dGazeSamples(t, x, 1.0 - y, report)


def ego4d_frame_labels(samples: Ego4dGazeSamples, num_frames: int, fps: float, parity: str = PARITY_FIXED) -> GazeTrack:
    """Per-video-frame gaze of an Ego4D video (docs/specs/data.md, "Per video frame i", after GLC
    ``get_ego4d_frame_label``).

    Frame ``i`` takes the sample nearest in time to ``i / fps`` (ties go to the later sample). Frame 0 of a
    tracked run is a fixation; a later frame is a fixation when the distance from the previous frame's clamped
    point to this frame's raw point is <= 40 px measured at 1088x1080, else a saccade; a point outside [0, 1] is
    off-frame (4) and clamped.

    * ``parity="fixed"``: a frame is untracked when its nearest sample lies outside the frame's own time slot
      (more than half a frame period away: before the gaze starts, after it ends, or in a gap);
      untracked frames follow :func:`fill_untracked`.
    * ``parity="glc"``: GLC's loop: frames are labelled until its search pointer reaches the last two samples,
      all later frames are untracked at (0, 0).
    """
    check_parity(parity)
    if num_frames < 0 or fps <= 0:
        raise ValueError(f"need num_frames >= 0 and fps > 0, got {num_frames} and {fps}")
    t, n = samples.t, samples.t.shape[0]
    gaze = np.zeros((num_frames, 2), np.float64)
    gaze_type = np.full(num_frames, UNTRACKED, np.int8)
    if n and num_frames:
        ts = np.arange(num_frames) / float(fps)
        later = np.searchsorted(t, ts, side="left")  # first sample at or after the frame time
        earlier = np.clip(later - 1, 0, n - 1)
        later_c = np.clip(later, 0, n - 1)
        take_earlier = (later >= n) | ((later > 0) & (np.abs(t[earlier] - ts) < np.abs(t[later_c] - ts)))
        nearest = np.where(take_earlier, earlier, later_c)
        if parity == PARITY_GLC:
            pointer_before = np.r_[0, later[:-1]]  # GLC checks `j >= len(lines) - 2` before searching frame i
            tracked = np.cumprod((pointer_before < n - 2) & (later < n)).astype(bool)
        else:
            tracked = np.abs(t[nearest] - ts) <= 0.5 / float(fps)
        raw = np.stack([samples.x[nearest], samples.y[nearest]], axis=1)
        clamped = np.clip(raw, 0.0, 1.0)
        step = unit_to_pixels(raw[1:] - clamped[:-1], EGO4D_MOTION_WIDTH, EGO4D_MOTION_HEIGHT)
        moved = np.r_[False, np.hypot(step[:, 0], step[:, 1]) > EGO4D_FIXATION_MAX_PX]
        run_start = tracked & ~np.r_[False, tracked[:-1]]
        types = np.where(moved & ~run_start, SACCADE, FIXATION)
        outside = (raw < 0).any(axis=1) | (raw > 1).any(axis=1)
        types = np.where(outside, OFF_FRAME, types)
        gaze[tracked] = clamped[tracked]
        gaze_type[tracked] = types[tracked]
    if parity == PARITY_GLC:
        gaze[gaze_type == UNTRACKED] = UNTRACKED_FILL_GLC_EGO4D
    else:
        gaze = fill_untracked(gaze, gaze_type)
    report = samples.report
    untracked = int((gaze_type == UNTRACKED).sum())
    if untracked:
        report.notes.append(f"{untracked} of {num_frames} video frames have no gaze (untracked)")
    return GazeTrack(gaze.astype(np.float32), gaze_type, report)


def parse_ego4d_gaze(path: str | Path, num_frames: int, fps: float, parity: str = PARITY_FIXED) -> GazeTrack:
    """Read an Ego4D gaze CSV and label the ``num_frames`` frames of its video (``fps`` from the container)."""
    check_parity(parity)
    return ego4d_frame_labels(read_ego4d_gaze_csv(path), num_frames, fps, parity)


def ego4d_label_rows(first_frame: int, num_frames: int, video_frames: int, parity: str = PARITY_FIXED) -> np.ndarray:
    """Label rows of a clip starting at video frame ``first_frame`` (docs/specs/data.md, "Clip-to-label alignment").

    Local frame ``k`` reads video frame ``first_frame + k`` (CSTS; correct). Under ``parity="glc"`` it reads
    ``first_frame + k - 1``, which for a clip at t = 0 wraps to the video's last frame, as GLC's indexing does.
    """
    check_parity(parity)
    rows = np.arange(num_frames, dtype=np.int64) + first_frame
    if parity == PARITY_GLC:
        rows = (rows - 1) % max(video_frames, 1)
    return rows


_GLC_CLIP = re.compile(r"^(?:.*/)?(?P<uid>[^/]+?)_t(?P<start>\d+)_t(?P<end>\d+)(?:\.mp4)?$")


def parse_glc_clip_path(line: str) -> tuple[str, int, int]:
    """A line of GLC's Ego4D lists, ``<uid>/<uid>_t<start>_t<end>.mp4`` -> ``(uid, start_s, end_s)``."""
    match = _GLC_CLIP.match(line.strip().replace("\\", "/"))
    if match is None:
        raise ValueError(f"not a GLC Ego4D clip path (expected <uid>/<uid>_t<start>_t<end>.mp4): {line.strip()!r}")
    return match["uid"], int(match["start"]), int(match["end"])


def parse_hms(text: str) -> int:
    """``HH:MM:SS`` -> seconds (GLC's untracked-interval file)."""
    parts = text.strip().split(":")
    if len(parts) != 3:
        raise ValueError(f"expected HH:MM:SS, got {text!r}")
    hours, minutes, seconds = (int(p) for p in parts)
    return 3600 * hours + 60 * minutes + seconds


def read_untracked_intervals(path: str | Path) -> tuple[dict[str, list[tuple[int, int]]], ParseReport]:
    """GLC's ``ego4d_gaze_untracked.csv``: no header, CRLF, ``uid,HH:MM:SS,HH:MM:SS,code`` -> intervals per uid.

    The code column plays no part (docs/specs/data.md); a malformed row is skipped and counted.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"untracked-interval file not found: {path} (GLC's ego4d_gaze_untracked.csv, "
            "lines uid,HH:MM:SS,HH:MM:SS,code)"
        )
    report = ParseReport(str(path), "ego4d untracked intervals")
    intervals: dict[str, list[tuple[int, int]]] = {}
    for row in csv.reader(read_text(path, "GLC's untracked-interval file").splitlines()):
        if not row or not any(cell.strip() for cell in row):
            continue
        report.rows_read += 1
        try:
            uid, start, end = row[0].strip(), parse_hms(row[1]), parse_hms(row[2])
        except (IndexError, ValueError):
            report.skip("not uid,HH:MM:SS,HH:MM:SS,code", 1)
            continue
        intervals.setdefault(uid, []).append((start, end))
        report.rows_kept += 1
    return intervals, report


def ego4d_clip_starts(
    duration_s: float, intervals: list[tuple[int, int]] = (), clip_seconds: int = EGO4D_CLIP_SECONDS
) -> list[int]:
    """Start seconds of GLC's Ego4D clips (docs/specs/data.md, "Windows"; GLC ``clip_videos``).

    Starts ``range(0, int(duration), 5)``, stopping once a clip's end passes the duration; a clip is skipped when
    it meets an untracked interval ``[a, b]`` by the closed test ``not (end < a or start > b)`` (touching counts;
    an interval whose end is before its start skips nothing).
    """
    starts = []
    for start in range(0, int(duration_s), clip_seconds):
        end = start + clip_seconds
        if end > duration_s:
            break
        if any(not (end < a or start > b) for a, b in intervals):
            continue
        starts.append(start)
    return starts


__all__ = [
    "EGO4D_GAZE_HEADER_PREFIX",
    "EGO4D_TIME_COLUMN",
    "EGO4D_X_COLUMN",
    "EGO4D_Y_COLUMN",
    "EGO4D_MOTION_WIDTH",
    "EGO4D_MOTION_HEIGHT",
    "EGO4D_FIXATION_MAX_PX",
    "EGO4D_CLIP_SECONDS",
    "EGO4D_NON_GAZE_FILES",
    "EGO4D_GLC_SKIPPED_VIDEOS",
    "is_ego4d_gaze_csv",
    "Ego4dGazeSamples",
    "read_ego4d_gaze_csv",
    "ego4d_frame_labels",
    "parse_ego4d_gaze",
    "ego4d_label_rows",
    "parse_glc_clip_path",
    "parse_hms",
    "read_untracked_intervals",
    "ego4d_clip_starts",
]
