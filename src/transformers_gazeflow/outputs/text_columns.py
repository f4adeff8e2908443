"""CSV text of whole numpy columns, byte for byte what Python's formatting writes for each value.

A :class:`TextColumn` holds one column's cells as bytes, right-aligned in a ``[N, W]`` array with each cell's
length; :func:`csv_lines` joins columns into CSV lines with one boolean selection, so a chunk of rows costs a few
array operations instead of a Python call per cell.

:func:`fixed_point` is ``f"{value:.{decimals}f}"``: the exact binary value of the double rounded to ``decimals``
places, a tie to the even last digit (``0.125`` -> ``0.12``), the sign kept on a negative value that rounds to zero
(``-0.0001`` -> ``-0.000``). The exact product ``value * 10**decimals`` is the rounded product plus its error, found
without rounding by Dekker's product (T. J. Dekker, "A floating-point technique for extending the available
precision", Numer. Math. 18, 1971), so the rounding is decided on the exact value, not on a rounded one. Values
this cannot represent exactly (non-finite, or past ``2**50`` once scaled) are formatted by Python itself.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

_SPLITTER = 134217729.0  # 2**27 + 1: Veltkamp's split of a double into two 26-bit halves
_EXACT_LIMIT = 2.0**50  # scaled magnitudes below this round exactly by the steps of _scaled_integers
_POWERS = 10 ** np.arange(19, dtype=np.int64)
_SPACE, _MINUS, _POINT, _ZERO = ord(" "), ord("-"), ord("."), ord("0")
_FOUR_DIGITS = (
    np.frombuffer("".join(f"{n:04d}"[::-1] for n in range(10_000)).encode("ascii"), np.uint8).view(np.uint32).copy()
)
"""The four ASCII digits of ``0 .. 9999``, least significant first, as one 32-bit word each (its bytes in memory
order)."""


@dataclass(frozen=True)
class TextColumn:
    """``N`` cells: ``chars`` ``[N, W]`` uint8 with each cell's bytes right-aligned, ``lengths`` ``[N]``."""

    chars: np.ndarray
    lengths: np.ndarray

    def __len__(self) -> int:
        return int(self.lengths.shape[0])

    def take(self, index: np.ndarray) -> TextColumn:
        """The cells at ``index`` (repeated or reordered)."""
        return TextColumn(self.chars[index], self.lengths[index])

    def split(self, parts: int) -> list[TextColumn]:
        """``parts`` equal columns, one after the other (the columns of an array formatted in one call)."""
        size = len(self) // parts
        return [
            TextColumn(self.chars[i * size : (i + 1) * size], self.lengths[i * size : (i + 1) * size])
            for i in range(parts)
        ]

    def spread(self, every: int) -> TextColumn:
        """``len(self) * every`` cells: each cell followed by ``every - 1`` empty ones."""
        chars = np.zeros((len(self) * every, self.chars.shape[1]), np.uint8)
        lengths = np.zeros(len(self) * every, np.int64)
        chars[::every], lengths[::every] = self.chars, self.lengths
        return TextColumn(chars, lengths)

    def cells(self) -> list[str]:
        """The cells as Python strings (for tests and error messages)."""
        width = self.chars.shape[1]
        return [bytes(row[width - n :]).decode("utf-8") for row, n in zip(self.chars, self.lengths.tolist())]


def from_strings(cells: Sequence[str]) -> TextColumn:
    """A column of the given cells (UTF-8)."""
    encoded = [cell.encode("utf-8") for cell in cells]
    lengths = np.array([len(cell) for cell in encoded], np.int64)
    width = int(lengths.max(initial=0))
    joined = b"".join(cell.rjust(width) for cell in encoded)
    return TextColumn(np.frombuffer(joined, np.uint8).reshape(len(encoded), width), lengths)


def repeated(cell: str, count: int) -> TextColumn:
    """``count`` copies of one cell."""
    encoded = np.frombuffer(cell.encode("utf-8"), np.uint8)
    return TextColumn(np.broadcast_to(encoded, (count, encoded.size)), np.full(count, encoded.size, np.int64))


def csv_cell(text: str) -> str:
    """``text`` as the csv module writes it in a row (quoted where it holds a comma, a quote or a line break)."""
    buffer = io.StringIO()
    csv.writer(buffer).writerow((text, ""))  # its quoting depends on the line terminator: the default one
    return buffer.getvalue().removesuffix(",\r\n")


def choices(codes: np.ndarray, names: dict[int, str]) -> TextColumn:
    """The cell ``names[code]`` for each code (an empty cell for a code not named)."""
    codes = np.asarray(codes).astype(np.int64).reshape(-1)
    known = sorted(names)
    table = from_strings([*(names[code] for code in known), ""])
    index = np.full(codes.shape, len(known), np.int64)
    for position, code in enumerate(known):
        index[codes == code] = position
    return TextColumn(table.chars[index], table.lengths[index])


def _digit_chars(magnitudes: np.ndarray, most: int) -> np.ndarray:
    """``[N, most]``: the ASCII digits of each integer magnitude below ``10**most``, least significant first (zeros
    past its own digits), four at a time from :data:`_FOUR_DIGITS`."""
    groups = -(-most // 4)
    quads = np.empty((magnitudes.size, groups), np.uint32)
    rest = magnitudes
    for group in range(groups):
        higher = rest // 10_000
        quads[:, group] = _FOUR_DIGITS[rest - higher * 10_000]
        rest = higher
    return quads.view(np.uint8)[:, :most]


def _digits(magnitudes: np.ndarray, negative: np.ndarray, decimals: int) -> TextColumn:
    """The text of ``±magnitude / 10**decimals`` for integer magnitudes: at least one digit before the point."""
    count = np.maximum(np.searchsorted(_POWERS, magnitudes, side="right"), decimals + 1)
    most = int(count.max(initial=decimals + 1))  # an empty column still has room for its point
    point = int(decimals > 0)
    digits = _digit_chars(magnitudes, most)  # [N, most], least significant first
    backwards = np.empty((magnitudes.size, most + point + 1), np.uint8)  # each cell's bytes from its right end
    backwards[:, :decimals] = digits[:, :decimals]
    backwards[:, decimals : decimals + point] = _POINT
    whole = np.arange(decimals, most)  # the places before the point: blank past the number's own digits
    backwards[:, decimals + point : -1] = np.where(whole < count[:, None], digits[:, decimals:], _SPACE)
    backwards[:, -1] = _SPACE
    lengths = count + point + negative
    rows = np.flatnonzero(negative)
    backwards[rows, lengths[rows] - 1] = _MINUS
    return TextColumn(backwards[:, ::-1], lengths)


def integers(values: np.ndarray) -> TextColumn:
    """``str(int(value))`` of each integer."""
    values = np.asarray(values).astype(np.int64).reshape(-1)
    return _digits(np.abs(values), values < 0, 0)


def _split(value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    scaled = _SPLITTER * value
    high = scaled - (scaled - value)
    return high, value - high


def _scaled_integers(values: np.ndarray, decimals: int) -> np.ndarray:
    """``values * 10**decimals`` rounded to the nearest integer, a tie to even, decided on the exact product."""
    scale = 10.0**decimals
    product = values * scale
    nearest = np.rint(product)
    rest = product - nearest  # exact (|rest| <= 0.5); the exact product is nearest + rest + its rounding error
    scaled = nearest.astype(np.int64)
    # the rounding error is at most half an ulp of the product: only a rest that close to +-0.5 can round otherwise
    close = np.flatnonzero(np.abs(np.abs(rest) - 0.5) <= np.abs(product) * 2.0**-52)
    if close.size:
        value, product, rest = values[close], product[close], rest[close]
        value_high, value_low = _split(value)
        scale_high, scale_low = _split(np.float64(scale))
        error = ((value_high * scale_high - product) + value_high * scale_low + value_low * scale_high) + (
            value_low * scale_low
        )  # product + error == value * scale exactly (Dekker)
        odd = (scaled[close] & 1) == 1
        above, below = rest - 0.5, rest + 0.5  # exact wherever the comparisons can come out true
        up = (above > -error) | ((above == -error) & odd)
        down = (below < -error) | ((below == -error) & odd)
        scaled[close] += up.astype(np.int64) - down
    return scaled


def fixed_point(values: np.ndarray, decimals: int) -> TextColumn:
    """``f"{value:.{decimals}f}"`` of each value (see the module docstring); ``decimals`` 0 to 15."""
    if not 0 <= decimals <= 15:
        raise ValueError(f"decimals must be 0 to 15, got {decimals}")
    values = np.asarray(values, np.float64).reshape(-1)
    if not np.all(np.abs(values) < _EXACT_LIMIT / 10.0**decimals):  # NaN, inf, or too large to round exactly here
        return from_strings([f"{value:.{decimals}f}" for value in values.tolist()])
    scaled = _scaled_integers(values, decimals)
    return _digits(np.abs(scaled), np.signbit(values), decimals)


def blanks(count: int) -> TextColumn:
    """``count`` empty cells."""
    return TextColumn(np.zeros((count, 0), np.uint8), np.zeros(count, np.int64))


def where(mask: np.ndarray, column: TextColumn, other: TextColumn) -> TextColumn:
    """``column``'s cell where ``mask`` is true, ``other``'s elsewhere."""
    width = max(column.chars.shape[1], other.chars.shape[1])
    mask = np.asarray(mask, bool)
    chars = np.where(mask[:, None], _padded(column, width), _padded(other, width))
    return TextColumn(chars, np.where(mask, column.lengths, other.lengths))


def _padded(column: TextColumn, width: int) -> np.ndarray:
    missing = width - column.chars.shape[1]
    if missing == 0:
        return column.chars
    return np.concatenate([np.full((len(column), missing), _SPACE, np.uint8), column.chars], axis=1)


def csv_lines(columns: Sequence[TextColumn], line_end: bytes = b"\r\n") -> bytes:
    """The rows of ``columns`` (each of the same length) as CSV lines: cells joined by commas, each line ended by
    ``line_end`` (the csv module's default, ``\\r\\n``). Cells are written as they are: quote one that needs it
    first (:func:`csv_cell`)."""
    rows = len(columns[0])
    separator, ending = np.frombuffer(b",", np.uint8), np.frombuffer(line_end, np.uint8)
    parts, lengths = [], np.empty((rows, 2 * len(columns)), np.int64)  # each cell's length, then its separator's
    for index, column in enumerate(columns):
        if len(column) != rows:
            raise ValueError(f"column {index} has {len(column)} cells, expected {rows}")
        after = separator if index < len(columns) - 1 else ending
        parts += [column.chars, np.broadcast_to(after, (rows, after.size))]
        lengths[:, 2 * index], lengths[:, 2 * index + 1] = column.lengths, after.size
    widths = np.array([part.shape[1] for part in parts])
    part_of = np.repeat(np.arange(len(parts)), widths)  # [W]: the part each byte of a line belongs to
    from_right = np.cumsum(widths)[part_of] - 1 - np.arange(widths.sum())  # [W]: bytes after it in its part
    return np.concatenate(parts, axis=1)[lengths[:, part_of] > from_right].tobytes()  # the cells right-aligned


__all__ = [
    "TextColumn",
    "from_strings",
    "repeated",
    "csv_cell",
    "choices",
    "integers",
    "fixed_point",
    "blanks",
    "where",
    "csv_lines",
]
