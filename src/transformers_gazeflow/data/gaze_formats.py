"""Raw gaze files -> per-frame gaze arrays in the unified schema, with every conversion rule named once.

Spec: ``../shared/specs/data.md`` (sections "Unified example schema", "EGTEA Gaze+", "Ego4D gaze subset").
Reference behaviour: GLC (``BolinLai/GLC``: ``data/gaze_io_sample.py``, ``slowfast/datasets/egtea_gaze.py``,
``slowfast/datasets/ego4d_gaze.py``, ``data/preprocessing.py``).

What lives here, and nowhere else:

* the unified gaze-type codes, the ``valid`` rule and the coordinates of untracked frames (:data:`UNTRACKED` ...
  :data:`OFF_FRAME`, :func:`valid_mask`, :func:`fill_untracked`);
* the ``parity`` modes: ``"fixed"`` (default, the spec's fixes) and ``"glc"`` (the reference loaders' quirks);
* BeGaze (EGTEA) text exports, formats 1 and 2, read and written (:func:`read_begaze`, :func:`begaze_frames`,
  :func:`parse_begaze`, :func:`begaze_lines`), the EGTEA clip-name rule and the frame alignment ``F_start - 1 + k``
  (:func:`parse_egtea_clip_name`, :func:`format_egtea_clip_name`, :func:`egtea_gaze_rows`) and the class-index
  files (:func:`read_egtea_index`);
* Ego4D gaze CSVs, found by content (:func:`is_ego4d_gaze_csv`, :func:`read_ego4d_gaze_csv`), the per-frame
  labelling (nearest sample in time, y flip, 40 px fixation rule; :func:`ego4d_frame_labels`), GLC's clip lists and
  untracked intervals (:func:`parse_glc_clip_path`, :func:`read_untracked_intervals`, :func:`ego4d_clip_starts`)
  and the clip-to-label alignment (:func:`ego4d_label_rows`).

Parsing is vectorised with numpy: a malformed row is skipped and counted by reason in a :class:`ParseReport`,
never silently turned into data.
"""

from __future__ import annotations

import csv
import logging
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import repeat
from operator import itemgetter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..geometry import pixels_to_unit, unit_to_pixels
# the unified gaze-type codes and the valid rule live in ..schema; re-exported here for the readers' callers
from ..schema import BLINK_OR_OTHER, FIXATION, GAZE_TYPE_NAMES, OFF_FRAME, SACCADE, UNTRACKED, valid_mask

logger = logging.getLogger(__name__)


# --- parity modes (data.md: `parity="glc"` reproduces the reference loaders' quirks; the default fixes them) ---
PARITY_FIXED = "fixed"
PARITY_GLC = "glc"
PARITY_MODES = (PARITY_FIXED, PARITY_GLC)

#: Coordinates of untracked frames (no gaze sample). They never enter the loss (``valid`` is False), but they are
#: in every example, so they follow one rule, :func:`fill_untracked`, for all builders: by default an untracked frame
#: holds the last valid point, and :data:`UNTRACKED_FILL` (the centre) is only used for a recording with no valid
#: frame at all. GLC's fixed values are reproduced only under ``parity="glc"`` (data.md: "The reference sets untracked
#: frames to (0.5, 0.5) ... Reproduce that only under parity='glc'"): the centre for EGTEA, (0, 0) for Ego4D
#: (data.md: "untracked coordinates (0, 0)").
UNTRACKED_FILL = (0.5, 0.5)
UNTRACKED_FILL_GLC_EGTEA = (0.5, 0.5)
UNTRACKED_FILL_GLC_EGO4D = (0.0, 0.0)

# --- EGTEA Gaze+ / BeGaze constants (data.md, "EGTEA Gaze+") ---
BEGAZE_WIDTH, BEGAZE_HEIGHT = 1280, 960  # gaze pixel space of the BeGaze exports
BEGAZE_FPS = 24  # the F numbers of clip names and the format-2 timecodes count frames at 24 fps
BEGAZE_HEADER_LINES = 34
BEGAZE_SAMPLES_MARKER = "## Number of Samples:"
BEGAZE_TOKENS = {1: 7, 2: 26}  # whitespace-separated tokens per data row, by format
EGTEA_GLC_DROPPED_TEST_CLIPS = frozenset({"OP03-R01-PastaSalad-879780-892210-F021084-F021444"})

# --- Ego4D constants (data.md, "Ego4D gaze subset") ---
EGO4D_GAZE_HEADER_PREFIX = "component_idx,component_timestamp_s,"
EGO4D_TIME_COLUMN = "component_timestamp_s"
EGO4D_X_COLUMN, EGO4D_Y_COLUMN = "norm_pos_x", "norm_pos_y"
EGO4D_MOTION_WIDTH, EGO4D_MOTION_HEIGHT = 1088, 1080  # the fixation threshold is measured at this size, always
EGO4D_FIXATION_MAX_PX = 40.0
EGO4D_CLIP_SECONDS = 5
EGO4D_NON_GAZE_FILES = frozenset({"manifest.csv", "manifest.ver"})
EGO4D_GLC_SKIPPED_VIDEOS = frozenset({
    "4e07da0c-450f-4c37-95e9-e793cb5d8f7f",
    "5819e52c-4e12-4f86-ad69-76fc215dfbcb",
    "83081c5a-8456-44d8-af67-280034f8f0a6",
    "a77682da-cae7-4e68-8580-6cb47658b23f",
})


def check_parity(parity: str) -> str:
    """Validate a ``parity`` argument (``"fixed"`` or ``"glc"``)."""
    if parity not in PARITY_MODES:
        raise ValueError(f"parity must be one of {PARITY_MODES}, got {parity!r}")
    return parity


def fill_untracked(gaze: np.ndarray, gaze_type: np.ndarray) -> np.ndarray:
    """The default coordinates of untracked frames (code 0), the one rule all builders and the synthetic data follow.

    An untracked frame holds the point of the last valid frame before it (fixation, saccade or off-frame:
    :func:`valid_mask`); untracked frames before the first valid frame take the first valid frame's point; a
    recording with no valid frame is at :data:`UNTRACKED_FILL` (the centre). So a trajectory never jumps to a made-up
    point where the tracker lost the eye (GLC's centre fill, data.md, does; ``parity="glc"`` keeps it), and
    repeating the last point, as the collator does when padding, continues it. Blink frames keep their own samples.
    Returns a new float32 array ``[n, 2]``.
    """
    gaze = np.array(gaze, dtype=np.float32).reshape(-1, 2)
    gaze_type = np.asarray(gaze_type)
    if gaze_type.shape != (gaze.shape[0],):
        raise ValueError(f"gaze_type must have shape [{gaze.shape[0]}] to match gaze, got {gaze_type.shape}")
    untracked = gaze_type == UNTRACKED
    if not untracked.any():
        return gaze
    valid = valid_mask(gaze_type)
    if not valid.any():
        gaze[untracked] = UNTRACKED_FILL
        return gaze
    last_valid = np.maximum.accumulate(np.where(valid, np.arange(len(valid)), -1))
    source = np.where(last_valid >= 0, last_valid, int(np.argmax(valid)))
    gaze[untracked] = gaze[source[untracked]]
    return gaze


@dataclass
class ParseReport:
    """What happened to the rows of one raw gaze file: rows read, kept, and skipped as malformed (by reason)."""

    path: str
    kind: str
    rows_read: int = 0
    rows_kept: int = 0
    skipped: Counter = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)

    @property
    def rows_skipped(self) -> int:
        return int(sum(self.skipped.values()))

    def skip(self, reason: str, count: int) -> None:
        if count:
            self.skipped[reason] += int(count)

    def summary(self) -> str:
        reasons = ", ".join(f"{count} {reason}" for reason, count in sorted(self.skipped.items())) or "none"
        text = (f"{self.path} ({self.kind}): {self.rows_read} rows read, {self.rows_kept} kept, "
                f"{self.rows_skipped} skipped as malformed ({reasons})")
        return text + "".join(f"; {note}" for note in self.notes)

    def log(self) -> None:
        (logger.warning if self.rows_skipped else logger.info)(self.summary())


@dataclass
class GazeTrack:
    """Per-frame gaze of one recording: ``gaze`` float32 [n, 2] unit coordinates, ``gaze_type`` int8 [n]."""

    gaze: np.ndarray
    gaze_type: np.ndarray
    report: ParseReport

    def __len__(self) -> int:
        return int(self.gaze_type.shape[0])

    @property
    def valid(self) -> np.ndarray:
        return valid_mask(self.gaze_type)


# ----------------------------------------------------------------------------------------------------------------
# Vectorised token conversion (a bad token marks its row as malformed instead of failing the file)
# ----------------------------------------------------------------------------------------------------------------

def _to_float(tokens: Sequence[bytes] | Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Tokens (bytes or str) -> float64 values and an ``ok`` mask (non-numeric and non-finite tokens are not ok).

    One vectorised conversion; only where it fails is each token tried on its own, to find the bad ones.
    """
    if not len(tokens):
        return np.zeros(0, np.float64), np.zeros(0, bool)
    try:
        values = np.asarray(tokens).astype(np.float64)
    except ValueError:
        values = np.empty(len(tokens), np.float64)
        for i, token in enumerate(tokens):
            try:
                values[i] = float(token)
            except ValueError:
                values[i] = np.nan
    return values, np.isfinite(values)


def _to_frame_index(values: np.ndarray, ok: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Float values -> int64 frame indices; fractional or negative values are not ok."""
    ok = ok & (values >= 0) & (values == np.floor(np.where(ok, values, 0.0)))
    return np.where(ok, values, 0).astype(np.int64), ok


# ----------------------------------------------------------------------------------------------------------------
# EGTEA Gaze+: BeGaze text exports
# ----------------------------------------------------------------------------------------------------------------

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
    """``HH:MM:SS:FF`` -> frame ``(3600 HH + 60 MM + SS) * 24 + FF`` (data.md, BeGaze format 2) and an ``ok`` mask."""
    n = len(timecodes)
    if n and isinstance(timecodes[0], str):
        timecodes = [timecode.encode() for timecode in timecodes]
    ok = np.fromiter(map(bytes.count, timecodes, repeat(b":")), np.int64, n) == 3
    fields = np.full((n, 4), -1.0)
    if ok.any():
        selected = timecodes if ok.all() else [timecodes[i] for i in np.flatnonzero(ok)]
        values, ok_values = _to_float(b":".join(selected).split(b":"))
        fields[ok] = np.where(ok_values, values, -1.0).reshape(-1, 4)
    ok &= (fields >= 0).all(axis=1) & (fields == np.floor(fields)).all(axis=1)
    hh, mm, ss, ff = (np.where(ok, fields[:, i], 0).astype(np.int64) for i in range(4))
    return (3600 * hh + 60 * mm + ss) * BEGAZE_FPS + ff, ok


def begaze_frame_to_timecode(frame: int) -> str:
    """Frame on the 24 fps axis -> ``HH:MM:SS:FF``, the inverse of :func:`begaze_timecode_to_frame`."""
    seconds, ff = divmod(int(frame), BEGAZE_FPS)
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}:{ff:02d}"


def begaze_lines(samples: Iterable[tuple[int, float, float, int, str]], fmt: int = 1,
                 header: Sequence[str] = (), num_samples: int | None = None) -> list[str]:
    """The lines of a BeGaze text export of ``(time, px, py, frame, event)`` samples: what :func:`read_begaze` reads.

    Writes the layout data.md describes, from the constants above: :data:`BEGAZE_HEADER_LINES` ``##`` lines with
    ``## Number of Samples:`` on line 10 (format 1) or 11 (format 2), then one row per sample. Format 1 rows are
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
        rows = [f"{time}\tSMP\t1\t0\t0\t{px:.3f}\t{py:.3f}\t{zeros}\t{begaze_frame_to_timecode(frame)}\t{event}"
                for time, px, py, frame, event in samples]
    marker_line = 9 if fmt == 1 else 10  # 0-based
    own = list(header)
    if any(not line.startswith("##") for line in own) or len(own) > BEGAZE_HEADER_LINES - 2:
        raise ValueError(f"header must be at most {BEGAZE_HEADER_LINES - 2} lines starting with '##'")
    lines = ["## [BeGaze]"] + own[:marker_line - 1]
    lines += ["##"] * (marker_line - len(lines))
    lines.append(f"{BEGAZE_SAMPLES_MARKER}\t{len(rows) if num_samples is None else num_samples}")
    lines += own[marker_line - 1:]
    lines += ["##"] * (BEGAZE_HEADER_LINES - len(lines))
    return lines + rows


def _begaze_event_codes(events: Sequence[bytes] | Sequence[str]) -> np.ndarray:
    """BeGaze event -> unified code: ``Fixation`` 1, ``Saccade`` 2, anything else (``Blink``, ``-``, ...) 3."""
    if not len(events):
        return np.zeros(0, np.int8)
    events = np.asarray(events)
    fixation, saccade = (b"Fixation", b"Saccade") if events.dtype.kind == "S" else ("Fixation", "Saccade")
    return np.where(events == fixation, FIXATION, np.where(events == saccade, SACCADE, BLINK_OR_OTHER)).astype(np.int8)


def _begaze_format(lines: list[bytes], lengths: np.ndarray) -> tuple[int, str]:
    """Format 1 has ``## Number of Samples:`` on line 10, format 2 on line 11 (data.md); else sniff token counts."""
    marker = BEGAZE_SAMPLES_MARKER.encode()
    if len(lines) > 9 and marker in lines[9]:
        return 1, "header line 10"
    if len(lines) > 10 and marker in lines[10]:
        return 2, "header line 11"
    counts = Counter(lengths.tolist())
    best = max(BEGAZE_TOKENS, key=lambda fmt: counts.get(BEGAZE_TOKENS[fmt], 0))
    if counts.get(BEGAZE_TOKENS[best], 0) == 0:
        raise ValueError(f"not a BeGaze export: no '{BEGAZE_SAMPLES_MARKER}' on header line 10 or 11 "
                         "and no data row of 7 or 26 tokens")
    return best, "sniffed from row token counts"


def read_begaze(path: str | Path) -> BeGazeSamples:
    """Read the samples of an SMI BeGaze text export (formats 1 and 2), positionally (data.md, "Gaze text files").

    Header: the leading ``##`` lines (34 in the exports). Format 1 rows: ``Time Type Trial X Y Frame Event``
    (7 tokens). Format 2 rows: 26 tokens, x = token 6, y = token 7, frame from the timecode in token 25, event =
    last token. A row with another token count, a non-numeric coordinate or a bad frame is skipped and counted.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"BeGaze gaze file not found: {path}")
    lines = path.read_bytes().split(b"\n")  # bytes throughout: a CRLF's b"\r" is whitespace to bytes.split
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
        raise ValueError(f"{path}: {err}") from None
    report.kind = f"begaze format {fmt} ({how})"
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
        px, ok_x = _to_float(column(3))
        py, ok_y = _to_float(column(4))
        frame, ok_f = _to_frame_index(*_to_float(column(5)))
    else:
        px, ok_x = _to_float(column(5))
        py, ok_y = _to_float(column(6))
        frame, ok_f = begaze_timecode_to_frame(column(24))
    codes = _begaze_event_codes(column(expected - 1))
    report.skip("non-numeric or non-finite x/y", int((~(ok_x & ok_y)).sum()))
    report.skip("bad frame number or timecode", int(((ok_x & ok_y) & ~ok_f).sum()))
    keep = ok_x & ok_y & ok_f
    report.rows_kept = int(keep.sum())
    return BeGazeSamples(px[keep], py[keep], frame[keep], codes[keep], fmt, report)


def begaze_frames(samples: BeGazeSamples, parity: str = PARITY_FIXED) -> GazeTrack:
    """Per-frame gaze from BeGaze samples (data.md, "Several samples on one frame" and the untracked rule).

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
            outside = ((mean[:, 0] < 0) | (mean[:, 0] > BEGAZE_WIDTH - 1)
                       | (mean[:, 1] < 0) | (mean[:, 1] > BEGAZE_HEIGHT - 1))
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
    return EgteaClip(name, match["video"], int(match["start"]), int(match["end"]))


def format_egtea_clip_name(video: str, a: int | str, b: int | str, start_frame: int, end_frame: int) -> str:
    """The inverse of :func:`parse_egtea_clip_name`: ``<VIDEO>-<a>-<b>-F<start:06d>-F<end:06d>`` (data.md)."""
    name = f"{video}-{a}-{b}-F{int(start_frame):06d}-F{int(end_frame):06d}"
    if parse_egtea_clip_name(name).video != video:
        raise ValueError(f"<VIDEO> must be three '-'-separated tokens (e.g. OP01-R01-PastaSalad), got {video!r}")
    return name


def egtea_gaze_rows(start_frame: int, num_frames: int) -> np.ndarray:
    """Gaze rows of an EGTEA clip: local frame ``k`` reads row ``F_start - 1 + k`` (data.md, "Alignment")."""
    return np.arange(num_frames, dtype=np.int64) + (start_frame - 1)


def read_egtea_index(path: str | Path) -> list[str]:
    """``action_idx.txt`` (or ``verb_idx.txt``/``noun_idx.txt``): lines ``<name with spaces> <id>``, ids 1-based
    (data.md) -> names in id order (``names[id - 1]``). A line without a trailing integer id is an error."""
    path = Path(path)
    names: dict[int, str] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        name, _, index = line.strip().rpartition(" ")
        if not index.isdigit() or not name.strip() or int(index) < 1:
            raise ValueError(f"{path}, line {number}: expected '<name> <id>' with a 1-based id, got {line.strip()!r}")
        names[int(index)] = name.strip()
    if sorted(names) != list(range(1, len(names) + 1)):
        raise ValueError(f"{path}: ids are not 1..{len(names)}")
    return [names[i] for i in range(1, len(names) + 1)]


# ----------------------------------------------------------------------------------------------------------------
# Ego4D gaze CSVs
# ----------------------------------------------------------------------------------------------------------------

def is_ego4d_gaze_csv(path: str | Path) -> bool:
    """Whether a file is an Ego4D gaze CSV, by its header (the download names them ``<uid>.mp4``; data.md)."""
    path = Path(path)
    if path.name in EGO4D_NON_GAZE_FILES or not path.is_file():
        return False
    with open(path, "rb") as handle:
        head = handle.read(len(EGO4D_GAZE_HEADER_PREFIX) + 3)
    return head.lstrip(b"\xef\xbb\xbf").startswith(EGO4D_GAZE_HEADER_PREFIX.encode())


@dataclass
class Ego4dGazeSamples:
    """Kept samples of an Ego4D gaze CSV, sorted by time: ``t`` seconds, ``x``/``y`` unit coords (top-left origin)."""

    t: np.ndarray
    x: np.ndarray
    y: np.ndarray
    report: ParseReport


def read_ego4d_gaze_csv(path: str | Path) -> Ego4dGazeSamples:
    """Read an Ego4D gaze CSV: time ``component_timestamp_s``, ``x = norm_pos_x``, ``y = 1 - norm_pos_y``.

    ``norm_pos_*`` have a bottom-left origin (data.md), hence the y flip. Rows with a wrong field count or a
    non-numeric time/position are skipped and counted. Rows are sorted by time (stably) if they are not.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Ego4D gaze file not found: {path}")
    if not is_ego4d_gaze_csv(path):
        raise ValueError(f"{path} is not an Ego4D gaze CSV: its header does not start with {EGO4D_GAZE_HEADER_PREFIX!r}")
    lines = path.read_bytes().split(b"\n")
    if lines and not lines[-1].strip():
        lines.pop()
    header = [name.strip() for name in next(csv.reader([lines[0].decode("utf-8-sig", errors="replace")]))]
    missing = [c for c in (EGO4D_TIME_COLUMN, EGO4D_X_COLUMN, EGO4D_Y_COLUMN) if c not in header]
    if missing:
        raise ValueError(f"{path}: the gaze CSV header lacks the column(s) {missing}")
    cols = [header.index(c) for c in (EGO4D_TIME_COLUMN, EGO4D_X_COLUMN, EGO4D_Y_COLUMN)]
    report = ParseReport(str(path), "ego4d gaze csv", rows_read=len(lines) - 1)
    rows = list(map(bytes.split, lines[1:], repeat(b",")))
    lengths = np.fromiter(map(len, rows), np.int64, len(rows))
    good = lengths == len(header)
    if not good.all():
        blank = sum(1 for i in np.flatnonzero(~good) if not lines[1 + i].strip())
        report.skip("blank line", blank)
        report.skip(f"field count is not {len(header)}", int((~good).sum()) - blank)
        rows = [rows[i] for i in np.flatnonzero(good)]
    t, ok_t = _to_float(list(map(itemgetter(cols[0]), rows)))
    x, ok_x = _to_float(list(map(itemgetter(cols[1]), rows)))
    y, ok_y = _to_float(list(map(itemgetter(cols[2]), rows)))
    ok = ok_t & ok_x & ok_y
    report.skip("non-numeric or non-finite time/position", int((~ok).sum()))
    t, x, y = t[ok], x[ok], y[ok]
    if t.size > 1 and np.any(np.diff(t) < 0):
        order = np.argsort(t, kind="stable")
        t, x, y = t[order], x[order], y[order]
        report.notes.append("rows were not in time order and were sorted")
    report.rows_kept = int(t.size)
    return Ego4dGazeSamples(t, x, 1.0 - y, report)


def ego4d_frame_labels(samples: Ego4dGazeSamples, num_frames: int, fps: float,
                       parity: str = PARITY_FIXED) -> GazeTrack:
    """Per-video-frame gaze of an Ego4D video (data.md, "Per video frame i", after GLC ``get_ego4d_frame_label``).

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
    """Label rows of a clip starting at video frame ``first_frame`` (data.md, "Clip-to-label alignment").

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

    The code column plays no part (data.md); a malformed row is skipped and counted.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"untracked-interval file not found: {path} (GLC's ego4d_gaze_untracked.csv, "
                                "lines uid,HH:MM:SS,HH:MM:SS,code)")
    report = ParseReport(str(path), "ego4d untracked intervals")
    intervals: dict[str, list[tuple[int, int]]] = {}
    for row in csv.reader(path.read_text(encoding="utf-8-sig").splitlines()):
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


def ego4d_clip_starts(duration_s: float, intervals: list[tuple[int, int]] = (),
                      clip_seconds: int = EGO4D_CLIP_SECONDS) -> list[int]:
    """Start seconds of GLC's Ego4D clips (data.md, "Windows"; GLC ``clip_videos``).

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
    "UNTRACKED", "FIXATION", "SACCADE", "BLINK_OR_OTHER", "OFF_FRAME", "GAZE_TYPE_NAMES",
    "PARITY_FIXED", "PARITY_GLC", "PARITY_MODES", "check_parity", "valid_mask", "fill_untracked",
    "UNTRACKED_FILL", "UNTRACKED_FILL_GLC_EGTEA", "UNTRACKED_FILL_GLC_EGO4D",
    "ParseReport", "GazeTrack", "BeGazeSamples", "read_begaze", "begaze_frames", "parse_begaze",
    "begaze_timecode_to_frame", "begaze_frame_to_timecode", "begaze_lines", "EgteaClip", "parse_egtea_clip_name",
    "format_egtea_clip_name",
    "egtea_gaze_rows",
    "read_egtea_index",
    "is_ego4d_gaze_csv", "Ego4dGazeSamples", "read_ego4d_gaze_csv", "ego4d_frame_labels", "parse_ego4d_gaze",
    "ego4d_label_rows", "parse_glc_clip_path", "parse_hms", "read_untracked_intervals", "ego4d_clip_starts",
]
