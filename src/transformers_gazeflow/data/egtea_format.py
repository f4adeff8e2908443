"""EGTEA Gaze+ raw formats: SMI BeGaze text exports (read and written), clip names, frame alignment, class indexes.

The raw layout of the EGTEA Gaze+ download. Reference behaviour: GLC (``BolinLai/GLC``:
``data/gaze_io_sample.py``, ``slowfast/datasets/egtea_gaze.py``).

What lives here, and nowhere else: BeGaze exports, formats 1 and 2, read and written (:func:`read_begaze`,
:func:`begaze_frames`, :func:`parse_begaze`, :func:`begaze_lines`), the EGTEA clip-name rule and the frame alignment
``F_start - 1 + k`` (:func:`parse_egtea_clip_name`, :func:`format_egtea_clip_name`, :func:`egtea_gaze_rows`) and the
class-index files (:func:`read_egtea_index`). Parsing is vectorised with numpy: a malformed row is skipped and counted
by reason in a :class:`~.gaze_common.ParseReport`, never silently turned into data.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import itemgetter
from pathlib import Path

import numpy as np

from ..models.gazeflow.geometry import pixels_to_unit
from .gaze_common import (
    PARITY_FIXED,
    PARITY_GLC,
    UNTRACKED_FILL_GLC_EGTEA,
    GazeTrack,
    ParseReport,
    check_parity,
    fill_untracked,
    floats_to_frame_index,
    read_text,
    read_text_bytes,
    tokens_to_float,
)
from .gaze_types import BLINK_OR_OTHER, FIXATION, OFF_FRAME, SACCADE, UNTRACKED

# --- EGTEA Gaze+ / BeGaze constants (docs/specs/data.md, "EGTEA Gaze+") ---
BEGAZE_WIDTH, BEGAZE_HEIGHT = 1280, 960  # gaze pixel space of the BeGaze exports
BEGAZE_FPS = 24  # the F numbers of clip names and the format-2 timecodes count frames at 24 fps
BEGAZE_HEADER_LINES = 34
BEGAZE_SAMPLES_MARKER = "## Number of Samples:"
BEGAZE_TOKENS = {1: 7, 2: 26}  # whitespace-separated tokens per data row, by format
EGTEA_GLC_DROPPED_TEST_CLIPS = frozenset({"OP03-R01-PastaSalad-879780-892210-F021084-F021444"})


@dataclass
class BeGazeSamples:
    """The kept samples of one BeGaze file, in file order: raw pixels (1280x960 space), frame, unified type."""

    px: np.ndarray
    py: np.ndarray
    frame: np.ndarray
    gaze_type: np.ndarray
    format: int
    report: ParseReport


def begaze_timecode_to_frame(timecodes: Sequence[bytes] | Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """``HH:MM:SS:FF`` -> frame ``(3600 HH + 60 MM + SS) * 24 + FF`` (docs/specs/data.md, BeGaze format 2) and an ``ok``
    mask."""
    n = len(timecodes)
    if n and isinstance(timecodes[0], str):
        timecodes = [timecode.encode() for timecode in timecodes]
    ok = np.fromiter(map(bytes.count, timecodes, repeat(b":")), np.int64, n) == 3
    fields = np.full((n, 4), -1.0)
    if ok.any():
        selected = timecodes if ok.all() else [timecodes[i] for i in np.flatnonzero(ok)]
        values, ok_values = tokens_to_float(b":".join(selected).split(b":"))
        fields[ok] = np.where(ok_values, values, -1.0).reshape(-1, 4)
    ok &= (fields >= 0).all(axis=1) & (fields == np.floor(fields)).all(axis=1)
    hh, mm, ss, ff = (np.where(ok, fields[:, i], 0).astype(np.int64) for i in range(4))
    return (3600 * hh + 60 * mm + ss) * BEGAZE_FPS + ff, ok


def begaze_frame_to_timecode(frame: int) -> str:
    """Frame on the 24 fps axis -> ``HH:MM:SS:FF``, the inverse of :func:`begaze_timecode_to_frame`."""
    seconds, ff = divmod(int(frame), BEGAZE_FPS)
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}:{ff:02d}"


def begaze_lines(
    samples: Iterable[tuple[int, float, float, int, str]],
    fmt: int = 1,
    header: Sequence[str] = (),
    num_samples: int | None = None,
) -> list[str]:
    """The lines of a BeGaze text export of ``(time, px, py, frame, event)`` samples: what :func:`read_begaze` reads.

    Writes the layout docs/specs/data.md describes, from the constants above: :data:`BEGAZE_HEADER_LINES` ``##`` lines
    with ``## Number of Samples:`` on line 10 (format 1) or 11 (format 2), then one row per sample. Format 1 rows are
    ``Time Type Trial X Y Frame Event``; format 2 rows have 26 tokens with x, y as tokens 6, 7, the frame as the
    timecode of token 25 and the event last (the other tokens are zeros). ``header``: your own ``##`` lines, placed
    after ``## [BeGaze]`` around the samples line; ``num_samples`` overrides the count written there (the reference
    calls it unreliable). Pixels are written with 3 decimals.
    """
    if fmt not in BEGAZE_TOKENS:
        raise ValueError(f"fmt must be one of {sorted(BEGAZE_TOKENS)} (BeGaze formats), got {fmt!r}")
    if fmt == 1:
        rows = [f"{time}\tSMP\t1\t{px:.3f}\t{py:.3f}\t{frame}\t{event}" for time, px, py, frame, event in samples]
    else:
        zeros = "\t".join(["0"] * (BEGAZE_TOKENS[2] - 9))
        rows = [
            f"{time}\tSMP\t1\t0\t0\t{px:.3f}\t{py:.3f}\t{zeros}\t{begaze_frame_to_timecode(frame)}\t{event}"
            for time, px, py, frame, event in samples
        ]
    marker_line = 9 if fmt == 1 else 10  # 0-based
    own = list(header)
    if any(not line.startswith("##") for line in own) or len(own) > BEGAZE_HEADER_LINES - 2:
        raise ValueError(f"header must be at most {BEGAZE_HEADER_LINES - 2} lines starting with '##'")
    lines = ["## [BeGaze]"] + own[: marker_line - 1]
    lines += ["##"] * (marker_line - len(lines))
    lines.append(f"{BEGAZE_SAMPLES_MARKER}\t{len(rows) if num_samples is None else num_samples}")
    lines += own[marker_line - 1 :]
    lines += ["##"] * (BEGAZE_HEADER_LINES - len(lines))
    return lines + rows


def _begaze_event_codes(events: Sequence[bytes] | Sequence[str]) -> np.ndarray:
    """BeGaze event -> unified code: ``Fixation`` 1, ``Saccade`` 2, anything else (``Blink``, ``-``, ...) 3."""
    if not len(events):
        return np.zeros(0, np.int8)
    events = np.asarray(events)
    fixation, saccade = (b"Fixation", b"Saccade") if events.dtype.kind == "S" else ("Fixation", "Saccade")
    return np.where(events == fixation, FIXATION, np.where(events == saccade, SACCADE, BLINK_OR_OTHER)).astype(np.int8)


#: The event names a BeGaze row may be cut inside of (a file whose last write was interrupted): a proper prefix of
#: one of them (``Fixat``) is a cut row, skipped and counted, never read as "anything else" (blink/other).
BEGAZE_EVENT_NAMES = ("Fixation", "Saccade", "Blink")
BEGAZE_EVENTS: dict[int, str] = dict(zip((FIXATION, SACCADE, BLINK_OR_OTHER), BEGAZE_EVENT_NAMES))
"""The event a writer gives a sample of each unified code (what :func:`_begaze_event_codes` reads back)."""
_CUT_EVENT_TOKENS = sorted({name[:end].encode() for name in BEGAZE_EVENT_NAMES for end in range(1, len(name))})


def _begaze_cut_events(events: Sequence[bytes]) -> np.ndarray:
    """Rows whose event token is a proper prefix of a BeGaze event name (:data:`BEGAZE_EVENT_NAMES`)."""
    if not len(events):
        return np.zeros(0, bool)
    return np.isin(np.asarray(events), _CUT_EVENT_TOKENS)


def _begaze_format(lines: list[bytes], lengths: np.ndarray) -> tuple[int, str]:
    """Format 1 has ``## Number of Samples:`` on line 10, format 2 on line 11 (docs/specs/data.md); else sniff token
    counts."""
    marker = BEGAZE_SAMPLES_MARKER.encode()
    if len(lines) > 9 and marker in lines[9]:
        return 1, "header line 10"
    if len(lines) > 10 and marker in lines[10]:
        return 2, "header line 11"
    counts = Counter(lengths.tolist())
    best = max(BEGAZE_TOKENS, key=lambda fmt: counts.get(BEGAZE_TOKENS[fmt], 0))
    if counts.get(BEGAZE_TOKENS[best], 0) == 0:
        raise ValueError(
            f"not a BeGaze export: no '{BEGAZE_SAMPLES_MARKER}' on header line 10 or 11 "
            "and no data row of 7 or 26 tokens"
        )
    return best, "sniffed from row token counts"


def read_begaze(path: str | Path) -> BeGazeSamples:
    """Read the samples of an SMI BeGaze text export (formats 1 and 2), positionally (docs/specs/data.md, "Gaze text
    files").

    Header: the leading ``##`` lines (34 in the exports). Format 1 rows: ``Time Type Trial X Y Frame Event``
    (7 tokens). Format 2 rows: 26 tokens, x = token 6, y = token 7, frame from the timecode in token 25, event =
    last token. A row with another token count, a non-numeric coordinate, a bad frame or an event cut short (a
    proper prefix of ``Fixation``, ``Saccade`` or ``Blink``: the last row of an interrupted write) is skipped and
    counted. UTF-8, UTF-16 and UTF-32 files, with or without a byte-order mark, are read alike
    (:func:`~.gaze_common.read_text_bytes`); the report's notes name any encoding other than plain UTF-8.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"BeGaze gaze file not found: {path}")
    data, encoding = read_text_bytes(path)  # UTF-16 "Unicode" exports and byte-order marks read as UTF-8
    lines = data.split(b"\n")  # bytes throughout: a CRLF's b"\r" is whitespace to bytes.split
    if lines and not lines[-1].strip():
        lines.pop()
    header = 0
    while header < len(lines) and lines[header].startswith(b"##"):
        header += 1
    rows = list(map(bytes.split, lines[header:]))
    lengths = np.fromiter(map(len, rows), np.int64, len(rows))
    report = ParseReport(str(path), "begaze", rows_read=len(rows))
    try:
        fmt, how = _begaze_format(lines, lengths[lengths > 0])
    except ValueError as err:
        raise ValueError(f"{path}: {err}" + (f" ({encoding})" if encoding else "")) from None
    report.kind = f"begaze format {fmt} ({how})"
    if encoding:
        report.notes.append(encoding)
    expected = BEGAZE_TOKENS[fmt]
    good = lengths == expected
    if not good.all():
        bad = np.flatnonzero(~good)
        comment = sum(1 for i in bad if lengths[i] and rows[i][0].startswith(b"#"))
        report.skip("blank line", int((lengths == 0).sum()))
        report.skip("comment line after the header", comment)
        report.skip(f"token count is not {expected}", int(bad.size - comment - (lengths == 0).sum()))
        rows = [rows[i] for i in np.flatnonzero(good)]
    column = lambda index: list(map(itemgetter(index), rows))  # noqa: E731
    if fmt == 1:
        px, ok_x = tokens_to_float(column(3))
        py, ok_y = tokens_to_float(column(4))
        frame, ok_f = floats_to_frame_index(*tokens_to_float(column(5)))
    else:
        px, ok_x = tokens_to_float(column(5))
        py, ok_y = tokens_to_float(column(6))
        frame, ok_f = begaze_timecode_to_frame(column(24))
    events = column(expected - 1)
    codes = _begaze_event_codes(events)
    ok_event = ~_begaze_cut_events(events)
    report.skip("non-numeric or non-finite x/y", int((~(ok_x & ok_y)).sum()))
    report.skip("bad frame number or timecode", int(((ok_x & ok_y) & ~ok_f).sum()))
    report.skip("event cut short (a prefix of Fixation, Saccade or Blink)", int((ok_x & ok_y & ok_f & ~ok_event).sum()))
    keep = ok_x & ok_y & ok_f & ok_event
    report.rows_kept = int(keep.sum())
    return BeGazeSamples(px[keep], py[keep], frame[keep], codes[keep], fmt, report)


def begaze_frames(samples: BeGazeSamples, parity: str = PARITY_FIXED) -> GazeTrack:
    """Per-frame gaze from BeGaze samples (docs/specs/data.md, "Several samples on one frame" and the untracked rule).

    One row per frame ``0 .. max(frame)``; a frame with no sample is untracked (code 0). The type of a frame is
    its last sample's type. Coordinates are normalised as ``clip(px, 0, 1279) / 1280``, ``clip(py, 0, 959) / 960``.

    * ``parity="fixed"``: the true mean of the frame's samples; a fixation or saccade frame whose mean lies
      outside the 1280x960 frame is marked off-frame (4); untracked frames follow :func:`fill_untracked`.
    * ``parity="glc"``: GLC's running pairwise average ``(old + new) / 2`` in file order; code 4 is never kept
      (GLC's overwrite bug); untracked frames get (0.5, 0.5) as GLC's EGTEA loader sets them.
    """
    check_parity(parity)
    n = samples.frame.shape[0]
    num_frames = int(samples.frame.max()) + 1 if n else 0
    gaze = np.zeros((num_frames, 2), np.float64)
    gaze_type = np.full(num_frames, UNTRACKED, np.int8)
    if n:
        order = np.argsort(samples.frame, kind="stable")
        frames = samples.frame[order]
        starts = np.r_[True, frames[1:] != frames[:-1]]
        ends = np.r_[frames[1:] != frames[:-1], True]
        group = np.cumsum(starts) - 1
        group_size = np.diff(np.r_[np.flatnonzero(starts), n])[group]
        if parity == PARITY_GLC:  # ((s1 + s2) / 2 + s3) / 2 ...: weights 1/2^(m-1) for s1, 1/2^(m-r) for s_r
            rank = np.arange(n) - np.flatnonzero(starts)[group]
            weight = np.where(rank == 0, 0.5 ** (group_size - 1), 0.5 ** (group_size - rank))
        else:
            weight = 1.0 / group_size
        xy = np.stack([samples.px[order], samples.py[order]], axis=1)
        mean = np.stack([np.bincount(group, weights=xy[:, i] * weight) for i in range(2)], axis=1)
        if parity == PARITY_GLC:  # GLC stores its running average in float32 (equal to it within float32 rounding)
            mean = mean.astype(np.float32).astype(np.float64)
        tracked = frames[ends]
        types = samples.gaze_type[order][ends]
        if parity == PARITY_FIXED:
            outside = (
                (mean[:, 0] < 0) | (mean[:, 0] > BEGAZE_WIDTH - 1) | (mean[:, 1] < 0) | (mean[:, 1] > BEGAZE_HEIGHT - 1)
            )
            types = np.where(outside & ((types == FIXATION) | (types == SACCADE)), OFF_FRAME, types)
        clamped = np.stack([np.clip(mean[:, 0], 0, BEGAZE_WIDTH - 1), np.clip(mean[:, 1], 0, BEGAZE_HEIGHT - 1)], 1)
        gaze[tracked] = pixels_to_unit(clamped, BEGAZE_WIDTH, BEGAZE_HEIGHT)
        gaze_type[tracked] = types
    if parity == PARITY_GLC:
        gaze[gaze_type == UNTRACKED] = UNTRACKED_FILL_GLC_EGTEA
        return GazeTrack(gaze.astype(np.float32), gaze_type, samples.report)
    return GazeTrack(fill_untracked(gaze, gaze_type), gaze_type, samples.report)


def parse_begaze(path: str | Path, parity: str = PARITY_FIXED) -> GazeTrack:
    """Read a BeGaze export and turn it into per-frame gaze (:func:`read_begaze` then :func:`begaze_frames`)."""
    check_parity(parity)
    return begaze_frames(read_begaze(path), parity)


_EGTEA_CLIP = re.compile(r"^(?P<video>[^-]+-[^-]+-[^-]+)-.+-F(?P<start>\d+)-F(?P<end>\d+)$")


@dataclass(frozen=True)
class EgteaClip:
    """An EGTEA clip name ``<VIDEO>-<a>-<b>-F<start>-F<end>``; F numbers are session frames at 24 fps."""

    name: str
    video: str
    start_frame: int
    end_frame: int


def parse_egtea_clip_name(name: str) -> EgteaClip:
    """Parse a clip name (a folder prefix and ``.mp4`` are tolerated): ``<VIDEO>`` = first three ``-`` tokens."""
    name = name.strip().replace("\\", "/").rsplit("/", 1)[-1]
    if name.endswith(".mp4"):
        name = name[:-4]
    match = _EGTEA_CLIP.match(name)
    if match is None:
        raise ValueError(f"not an EGTEA clip name (expected <VIDEO>-<a>-<b>-F<start>-F<end>): {name!r}")
    if int(match["end"]) < int(match["start"]):
        raise ValueError(
            f"not an EGTEA clip name: its F<end> is before its F<start> (expected F<start> <= F<end>): {name!r}"
        )
    return EgteaClip(name, match["video"], int(match["start"]), int(match["end"]))


def format_egtea_clip_name(video: str, a: int | str, b: int | str, start_frame: int, end_frame: int) -> str:
    """The inverse of :func:`parse_egtea_clip_name`: ``<VIDEO>-<a>-<b>-F<start:06d>-F<end:06d>``
    (docs/specs/data.md)."""
    name = f"{video}-{a}-{b}-F{int(start_frame):06d}-F{int(end_frame):06d}"
    if parse_egtea_clip_name(name).video != video:
        raise ValueError(f"<VIDEO> must be three '-'-separated tokens (e.g. OP01-R01-PastaSalad), got {video!r}")
    return name


def egtea_clip_name_at(video: str, start_frame: int, end_frame: int) -> str:
    """The name of the clip of session ``video`` spanning F numbers ``start_frame``..``end_frame``, its ``a``/``b``
    the times (ms) where it starts and ends on the session's :data:`BEGAZE_FPS` axis."""
    a, b = int(round((start_frame - 1) / BEGAZE_FPS * 1000)), int(round(end_frame / BEGAZE_FPS * 1000))
    return format_egtea_clip_name(video, a, b, start_frame, end_frame)


def begaze_time_us(frame: int) -> int:
    """The BeGaze ``Time`` (microseconds) of a sample on session frame ``frame`` (0-based, :data:`BEGAZE_FPS`)."""
    return int(round(frame / BEGAZE_FPS * 1e6))


def egtea_gaze_rows(start_frame: int, num_frames: int) -> np.ndarray:
    """Gaze rows of an EGTEA clip: local frame ``k`` reads row ``F_start - 1 + k`` (docs/specs/data.md, "Alignment")."""
    return np.arange(num_frames, dtype=np.int64) + (start_frame - 1)


def read_egtea_index(path: str | Path) -> list[str]:
    """``action_idx.txt`` (or ``verb_idx.txt``/``noun_idx.txt``): lines ``<name with spaces> <id>``, ids 1-based
    (docs/specs/data.md) -> names in id order (``names[id - 1]``). A line without a trailing integer id is an error."""
    path = Path(path)
    names: dict[int, str] = {}
    for number, line in enumerate(read_text(path, "a class-index file").splitlines(), 1):
        if not line.strip():
            continue
        name, _, index = line.strip().rpartition(" ")
        if not index.isdigit() or not name.strip() or int(index) < 1:
            raise ValueError(f"{path}, line {number}: expected '<name> <id>' with a 1-based id, got {line.strip()!r}")
        names[int(index)] = name.strip()
    if sorted(names) != list(range(1, len(names) + 1)):
        raise ValueError(f"{path}: ids are not 1..{len(names)}")
    return [names[i] for i in range(1, len(names) + 1)]


__all__ = [
    "BEGAZE_WIDTH",
    "BEGAZE_HEIGHT",
    "BEGAZE_FPS",
    "BEGAZE_HEADER_LINES",
    "BEGAZE_SAMPLES_MARKER",
    "BEGAZE_TOKENS",
    "BEGAZE_EVENT_NAMES",
    "BEGAZE_EVENTS",
    "EGTEA_GLC_DROPPED_TEST_CLIPS",
    "BeGazeSamples",
    "read_begaze",
    "begaze_frames",
    "parse_begaze",
    "begaze_timecode_to_frame",
    "begaze_frame_to_timecode",
    "begaze_lines",
    "begaze_time_us",
    "EgteaClip",
    "parse_egtea_clip_name",
    "format_egtea_clip_name",
    "egtea_clip_name_at",
    "egtea_gaze_rows",
    "read_egtea_index",
]
