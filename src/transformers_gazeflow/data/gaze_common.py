"""What both raw gaze readers share: the ``parity`` modes, the untracked-frame rule, parse reports and tracks.

Both readers produce the unified example schema's gaze fields. The per-format readers build on this module:
:mod:`.egtea_format` (SMI BeGaze exports of EGTEA Gaze+) and :mod:`.ego4d_format` (Ego4D gaze CSVs). The gaze-type
codes and the ``valid`` rule live in :mod:`transformers_gazeflow.data.gaze_types`.

What lives here, and nowhere else:

* the ``parity`` modes: ``"fixed"`` (default, the spec's fixes) and ``"glc"`` (the reference loaders' quirks);
* the coordinates of untracked frames (:data:`UNTRACKED_FILL`, :func:`fill_untracked`);
* :class:`ParseReport` (rows read, kept, and skipped by reason: a malformed row is counted, never silently turned
  into data) and :class:`GazeTrack` (per-frame gaze of one recording);
* the vectorised token conversion both readers use (:func:`tokens_to_float`, :func:`floats_to_frame_index`);
* the text encodings a raw gaze file may come in (:func:`read_text_bytes`): UTF-8 or ASCII, UTF-8 with a
  byte-order mark, UTF-16 (little or big endian, with a byte-order mark, or without one, recognised by its NUL
  bytes) as Windows tools such as SMI BeGaze write "Unicode" text, and UTF-32 with a byte-order mark.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .gaze_types import UNTRACKED, valid_mask

logger = logging.getLogger(__name__)


# --- parity modes (docs/specs/data.md: `parity="glc"` reproduces the reference loaders' quirks; the default fixes
# them) ---
PARITY_FIXED = "fixed"
PARITY_GLC = "glc"
PARITY_MODES = (PARITY_FIXED, PARITY_GLC)

#: Coordinates of untracked frames (no gaze sample). They never enter the loss (``valid`` is False), but they are
#: in every example, so they follow one rule, :func:`fill_untracked`, for all builders: by default an untracked frame
#: holds the last valid point, and :data:`UNTRACKED_FILL` (the centre) is only used for a recording with no valid
#: frame at all. GLC's fixed values are reproduced only under ``parity="glc"`` (docs/specs/data.md: "The reference sets
#: untracked frames to (0.5, 0.5) ... Reproduce that only under parity='glc'"): the centre for EGTEA, (0, 0) for Ego4D
#: (docs/specs/data.md: "untracked coordinates (0, 0)").
UNTRACKED_FILL = (0.5, 0.5)
UNTRACKED_FILL_GLC_EGTEA = (0.5, 0.5)
UNTRACKED_FILL_GLC_EGO4D = (0.0, 0.0)


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
    point where the tracker lost the eye (GLC's centre fill, docs/specs/data.md, does; ``parity="glc"`` keeps it), and
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
        text = (
            f"{self.path} ({self.kind}): {self.rows_read} rows read, {self.rows_kept} kept, "
            f"{self.rows_skipped} skipped as malformed ({reasons})"
        )
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


def tokens_to_float(tokens: Sequence[bytes] | Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
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


def floats_to_frame_index(values: np.ndarray, ok: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Float values -> int64 frame indices; fractional or negative values are not ok."""
    ok = ok & (values >= 0) & (values == np.floor(np.where(ok, values, 0.0)))
    return np.where(ok, values, 0).astype(np.int64), ok


# ----------------------------------------------------------------------------------------------------------------
# Text encodings
# ----------------------------------------------------------------------------------------------------------------

_BYTE_ORDER_MARKS = (  # longest first: the UTF-32 LE mark starts with the UTF-16 LE one
    (b"\xff\xfe\x00\x00", "utf-32-le", "UTF-32 LE"),
    (b"\x00\x00\xfe\xff", "utf-32-be", "UTF-32 BE"),
    (b"\xef\xbb\xbf", "utf-8", "UTF-8"),
    (b"\xff\xfe", "utf-16-le", "UTF-16 LE"),
    (b"\xfe\xff", "utf-16-be", "UTF-16 BE"),
)


def _utf16_without_mark(head: bytes) -> str | None:
    """``"utf-16-le"``/``"utf-16-be"`` when ``head`` looks like ASCII text in UTF-16 without a byte-order mark (a NUL
    after, or before, nearly every character), else None."""
    pairs = len(head) // 2
    if pairs < 2:
        return None
    odd_nuls, even_nuls = head[1 : 2 * pairs : 2].count(0), head[0 : 2 * pairs : 2].count(0)
    if odd_nuls >= 0.9 * pairs and even_nuls < 0.1 * pairs:
        return "utf-16-le"
    if even_nuls >= 0.9 * pairs and odd_nuls < 0.1 * pairs:
        return "utf-16-be"
    return None


def _decode_wide(data: bytes, codec: str, note: str) -> tuple[bytes, str]:
    """UTF-16/32 ``data`` as UTF-8. A file cut inside its last character loses that partial character (so a row cut
    inside a token reads as a cut token, which the readers count); undecodable units elsewhere become U+FFFD."""
    unit = 4 if codec.startswith("utf-32") else 2
    cut = len(data) % unit
    if cut:
        data = data[:-cut]
        note += f"; the file ends inside a character ({cut} byte(s) dropped)"
    return data.decode(codec, errors="replace").encode("utf-8"), note


def decode_text_bytes(data: bytes) -> tuple[bytes, str | None]:
    """Raw text ``data`` as UTF-8 bytes (which the readers split on ASCII newlines and whitespace) and a note naming
    the encoding it was read in, or None for plain UTF-8/ASCII. A byte-order mark is dropped."""
    for mark, codec, name in _BYTE_ORDER_MARKS:
        if data.startswith(mark):
            note = f"read as {name} (byte-order mark)"
            if codec == "utf-8":
                return data[len(mark) :], note
            return _decode_wide(data[len(mark) :], codec, note)
    codec = _utf16_without_mark(data[:4096])
    if codec is not None:
        return _decode_wide(
            data, codec, f"read as UTF-16 {codec[-2:].upper()} (no byte-order mark; recognised by its NUL bytes)"
        )
    return data, None


def read_text_bytes(path: str | Path) -> tuple[bytes, str | None]:
    """The bytes of text file ``path`` as UTF-8, and a note naming its encoding (:func:`decode_text_bytes`)."""
    return decode_text_bytes(Path(path).read_bytes())


def read_text(path: str | Path, what: str) -> str:
    """Text file ``path`` (``what`` it is, for the error) as a string, in any encoding :func:`decode_text_bytes`
    reads. Bytes that are not text there raise a one-line ``ValueError`` naming the file and the first bad byte."""
    data, _ = read_text_bytes(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(
            f"{path}: {what} must be text in UTF-8, UTF-16 or UTF-32; byte {err.start} "
            f"({data[err.start : err.start + 1]!r}) is not UTF-8"
        ) from None


__all__ = [
    "PARITY_FIXED",
    "PARITY_GLC",
    "PARITY_MODES",
    "check_parity",
    "fill_untracked",
    "UNTRACKED_FILL",
    "UNTRACKED_FILL_GLC_EGTEA",
    "UNTRACKED_FILL_GLC_EGO4D",
    "ParseReport",
    "GazeTrack",
    "tokens_to_float",
    "floats_to_frame_index",
    "decode_text_bytes",
    "read_text_bytes",
    "read_text",
]
