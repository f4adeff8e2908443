"""The files a user hands gazeflow, each checked by one schema here before it is used.

* ``streamer.json`` of an export folder: :func:`streamer_interface`, then :func:`check_streamer_graph` against the
  graph's own inputs and outputs (``gazeflow stream --backend onnxruntime``);
* ``calib.json``, a wearer calibration: :func:`wearer_calibration` (``gaze.wearer.WearerCalibration``);
* the ``--intrinsics`` JSON file, or ``fx,fy,cx,cy``: :func:`camera_intrinsics`;
* ``region_calibration.json`` of a model folder, version 2 (a factor per level) or 1 (one scale):
  :func:`region_calibration` (``gaze.regions.RegionCalibration.from_record``, read by ``hub.model_folders``);
* ``summary.json`` read back by ``gazeflow predict --resume``: :func:`prediction_summary`;
* a part of a batch's ``index.csv`` (``.gazeflow_index/part-R-of-N.csv``): :func:`index_part_row`.

(The wearer's tracker CSV, read row by row, is checked by its one reader, ``data.tracker_gaze``, against the
gaze-type codes.)

JSON is read by :func:`read_json_object`: UTF-8 (a byte-order mark allowed), at most :data:`MAX_JSON_BYTES`, an
object at the top; ``NaN``, ``Infinity`` and numbers past a float (``1e400``) are refused where they are read, never
turned into ``inf``. Numbers are JSON numbers (the string ``"12"`` is not 12, nor ``(1, 2)``), finite and within a
plausible range for their field. Every failure is an :class:`InterfaceFileError` (a ``ValueError``): one line naming
the file and the field, ``<file>: <field>: expected <what>, got <value>``.

One of the conventions at the bottom of the package (it imports nothing of ours): every layer that reads one of
these files, from the gaze maths to the commands, checks it here, and the writers take the format names from here.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

MAX_JSON_BYTES = 1 << 24
"""The largest interface JSON file read (16 MiB; every one gazeflow writes is a few kilobytes)."""

# --- the formats (the writers take their names from here)
STREAMER_FORMAT = "gazeflow-streamer-step/1"
STREAMER_INPUTS, STREAMER_OUTPUTS = ("frame", "noise"), ("gaze_samples", "gaze_point")
STATE_PREFIX, NEXT_PREFIX = "state.", "next_"
TENSOR_DTYPES = {"float32": 4, "float16": 2, "float64": 8, "int64": 8, "int32": 4, "bool": 1}
"""The dtypes a streamer's tensors may have (numpy's, which the onnxruntime backend feeds), with their bytes per
element."""
ONNX_TENSOR_TYPES = {
    "tensor(float)": "float32",
    "tensor(float16)": "float16",
    "tensor(double)": "float64",
    "tensor(int64)": "int64",
    "tensor(int32)": "int32",
    "tensor(bool)": "bool",
}
"""onnxruntime's names of the graph's input types -> the dtype names of ``streamer.json``."""
MAX_TENSOR_ELEMENTS = 1 << 34
CALIBRATION_FORMAT, CALIBRATION_VERSION = "gazeflow-wearer-calibration", 1
OFFSET_LIMIT = 1.0
"""A wearer offset moves the gaze by less than a frame: past one frame width/height every point would sit on the
border."""
SCALE_RANGE = (0.01, 100.0)
"""A wearer scale or a region scale within two orders of magnitude of 1 (``1e-300`` pins every point to one spot)."""
REGION_CALIBRATION_FORMAT, REGION_CALIBRATION_VERSION = "gazeflow-region-calibration", 2
"""``region_calibration.json``: version 2 holds a factor per level; a file without ``version`` is version 1, one
``scale`` at every level."""
MAX_REGION_FACTOR = 1e6
"""The largest region factor (and floor, pixels) a file may hold: a disc a million times the spread is no region."""
FOCAL_RANGE_PX = (1e-3, 1e6)
PRINCIPAL_POINT_LIMIT_PX = 1e6
MAX_FRAME_SIDE = 1 << 16
"""Intrinsics: focal lengths and principal point in pixels, a frame at most 65,536 pixels a side."""
INDEX_STATUSES = ("ok", "failed", "skipped")


class InterfaceFileError(ValueError):
    """An interface file that does not hold what gazeflow expects: one line naming the file and the field."""


# ------------------------------------------------------------------------------------------- reading JSON
def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def fail(where: str, field: str, expected: str, value: Any = ...) -> InterfaceFileError:
    """The one-line error of a field (``value`` shown when given)."""
    got = "" if value is ... else f", got {_shown(value)}"
    return InterfaceFileError(f"{where}: {field}: expected {expected}{got}")


class _NotANumber(str):
    """A JSON number no float holds (``1e400``) or a constant JSON does not allow (``NaN``), kept as its text until
    :func:`parse_json_object` names the field it sits in."""


def _first_not_a_number(value: Any, at: str = "") -> tuple[str, str] | None:
    if isinstance(value, _NotANumber):
        return at or "(top)", str(value)
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        found = _first_not_a_number(item, f"{at}[{key}]" if isinstance(key, int) else f"{at}.{key}" if at else key)
        if found is not None:
            return found
    return None


def parse_json_object(text: str, where: str) -> dict[str, Any]:
    """``text`` as a JSON object; ``NaN``, ``Infinity`` and numbers a float cannot hold (``1e400``) are refused naming
    their field, never read as ``inf``."""

    def finite(number: str) -> float | _NotANumber:
        value = float(number)
        return value if math.isfinite(value) else _NotANumber(number)

    def integer(number: str) -> int | _NotANumber:
        try:
            return int(number)
        except ValueError:  # past Python's limit on digits
            return _NotANumber(number[:20] + "...")

    try:
        record = json.loads(text, parse_float=finite, parse_constant=_NotANumber, parse_int=integer)
    except json.JSONDecodeError as err:
        raise InterfaceFileError(f"{where}: not valid JSON ({err})") from None
    except RecursionError:
        raise InterfaceFileError(f"{where}: nested too deeply to be a gazeflow file") from None
    found = _first_not_a_number(record)
    if found is not None:
        raise InterfaceFileError(f"{where}: {found[0]}: expected a finite number, got {found[1][:40]}")
    if not isinstance(record, dict):
        raise InterfaceFileError(f"{where}: expected a JSON object {{...}} at the top, got {type(record).__name__}")
    return record


def read_json_object(path: str | os.PathLike, what: str) -> dict[str, Any]:
    """The JSON object of ``path`` (``what`` it is, for the errors): missing, too large, not UTF-8, not JSON, not an
    object: one line naming the file."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_JSON_BYTES:
            raise InterfaceFileError(f"{path}: {path.stat().st_size} bytes is too large for {what}")
        data = path.read_bytes()
    except FileNotFoundError:
        raise InterfaceFileError(f"{path}: no such file ({what})") from None
    except IsADirectoryError:
        raise InterfaceFileError(f"{path}: is a folder, expected {what}") from None
    except OSError as err:
        raise InterfaceFileError(f"{path}: cannot read {what} ({err.strerror or err})") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InterfaceFileError(f"{path}: {what} must be UTF-8 text; byte {err.start} is not") from None
    return parse_json_object(text, str(path))


# ------------------------------------------------------------------------------------------- fields
def field(record: dict[str, Any], key: str, where: str, expected: str, prefix: str = "") -> Any:
    """``record[key]``, or the one-line error saying it is missing."""
    if not isinstance(record, dict) or key not in record:
        raise fail(where, prefix + key, f"{expected} (the field is missing)")
    return record[key]


def number(
    value: Any,
    where: str,
    name: str,
    low: float = -math.inf,
    high: float = math.inf,
    integer: bool = False,
    low_open: bool = False,
) -> float | int:
    """A JSON number (not a string, not a bool), finite, in ``[low, high]`` (``(low, high]`` with ``low_open``); with
    ``integer`` a whole number, returned as an ``int``."""
    expected = ("an integer" if integer else "a finite number") + _range_text(low, high, low_open)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise fail(where, name, expected, value)
    try:
        as_float = float(value)
    except OverflowError:
        raise fail(where, name, expected, value) from None
    whole = as_float.is_integer() if math.isfinite(as_float) else False
    inside = math.isfinite(as_float) and (low < as_float if low_open else low <= as_float) and as_float <= high
    if not inside or (integer and not whole):
        raise fail(where, name, expected, value)
    return int(value) if integer else as_float


def _bound(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e16 else f"{value:g}"


def _range_text(low: float, high: float, low_open: bool = False) -> str:
    if math.isinf(low) and math.isinf(high):
        return ""
    if math.isinf(high):
        return f" {'>' if low_open else '>='} {_bound(low)}"
    if math.isinf(low):
        return f" <= {_bound(high)}"
    return f" in {'(' if low_open else '['}{_bound(low)}, {_bound(high)}]"


def number_pair(value: Any, where: str, name: str, low: float, high: float) -> tuple[float, float]:
    """A JSON list of exactly two numbers, each in ``[low, high]``."""
    if not isinstance(value, list) or len(value) != 2:
        raise fail(where, name, f"a list of two numbers [x, y], each{_range_text(low, high)}", value)
    return tuple(number(item, where, f"{name}[{i}]", low, high) for i, item in enumerate(value))


def text_field(value: Any, where: str, name: str, choices: Sequence[str] | None = None) -> str:
    """A non-empty JSON string (one of ``choices`` when given)."""
    expected = f"one of {', '.join(choices)}" if choices else "a non-empty string"
    if not isinstance(value, str) or not value or (choices is not None and value not in choices):
        raise fail(where, name, expected, value)
    return value


def is_plain_name(name: Any) -> bool:
    """Whether ``name`` is one file name inside its folder: a non-empty string, not only dots (``.``, ``..``), without
    a path separator (``/``, ``\\``), a NUL or another control character, at most 255 bytes of UTF-8."""
    return (
        isinstance(name, str)
        and bool(name)
        and set(name) != {"."}
        and not any(char in "/\\" or ord(char) < 32 or char == "\x7f" for char in name)
        and len(name.encode("utf-8", "surrogatepass")) <= 255
    )


# ------------------------------------------------------------------------------------------- the schemas
def camera_intrinsics(record: dict[str, Any], where: str) -> dict[str, float | int]:
    """A pinhole camera: ``fx``, ``fy`` (focal lengths, pixels, in :data:`FOCAL_RANGE_PX`), ``cx``, ``cy`` (the
    principal point, pixels, within :data:`PRINCIPAL_POINT_LIMIT_PX`) and, optionally and together, the frame
    ``width`` and ``height`` they were measured at (integers in ``[1, MAX_FRAME_SIDE]``)."""
    found: dict[str, float | int] = {}
    for key in ("fx", "fy"):
        found[key] = number(field(record, key, where, "a focal length in pixels"), where, key, *FOCAL_RANGE_PX)
    for key in ("cx", "cy"):
        value = field(record, key, where, "a principal point coordinate in pixels")
        found[key] = number(value, where, key, -PRINCIPAL_POINT_LIMIT_PX, PRINCIPAL_POINT_LIMIT_PX)
    sizes = [key for key in ("width", "height") if record.get(key) is not None]
    if len(sizes) == 1:
        raise InterfaceFileError(f"{where}: width, height: a frame size needs both (only {sizes[0]} is given)")
    for key in sizes:
        found[key] = number(record[key], where, key, 1, MAX_FRAME_SIDE, integer=True)
    return found


def wearer_calibration(record: dict[str, Any], where: str, corrections: Sequence[str]) -> dict[str, Any]:
    """``calib.json``: ``format`` and ``version`` (:data:`CALIBRATION_FORMAT`, :data:`CALIBRATION_VERSION`),
    ``correction`` (one of ``corrections``: ``choices.CALIBRATION_MODELS``, passed by the reader), ``offset`` [x, y]
    in frame widths/heights within :data:`OFFSET_LIMIT`, ``scale`` [x, y] in :data:`SCALE_RANGE` (exactly [1, 1] for
    an ``offset`` correction), ``model`` {``name``, ``fingerprint``} and an optional ``fit`` object. Returns the
    checked fields."""
    if record.get("format") != CALIBRATION_FORMAT:
        raise fail(
            where,
            "format",
            f"{CALIBRATION_FORMAT!r}: this is not a gazeflow calibration file (written by 'gazeflow calibrate')",
            record.get("format"),
        )
    if field(record, "version", where, "the file's version") != CALIBRATION_VERSION:
        raise fail(where, "version", f"{CALIBRATION_VERSION} (the version this gazeflow reads)", record["version"])
    correction = text_field(field(record, "correction", where, "a correction"), where, "correction", corrections)
    offset = number_pair(field(record, "offset", where, "[x, y]"), where, "offset", -OFFSET_LIMIT, OFFSET_LIMIT)
    scale = number_pair(field(record, "scale", where, "[x, y]"), where, "scale", *SCALE_RANGE)
    if correction == "offset" and scale != (1.0, 1.0):
        raise fail(where, "scale", "[1, 1] for an offset correction (offset_scale corrects the scale)", list(scale))
    model = field(record, "model", where, "{name, fingerprint}")
    if not isinstance(model, dict):
        raise fail(where, "model", "an object {name, fingerprint}", model)
    name = text_field(field(model, "name", where, "the model's name", "model."), where, "model.name")
    fingerprint = text_field(
        field(model, "fingerprint", where, "the model's fingerprint", "model."), where, "model.fingerprint"
    )
    fit = record.get("fit") or {}
    if not isinstance(fit, dict):
        raise fail(where, "fit", "an object", fit)
    return {
        "correction": correction,
        "offset": offset,
        "scale": scale,
        "model_name": name,
        "model_fingerprint": fingerprint,
        "fit": fit,
    }


def region_calibration(record: dict[str, Any], where: str, units: Sequence[str]) -> dict[str, Any]:
    """``region_calibration.json`` (``gaze.regions.RegionCalibration``), one of two versions:

    * version 2 (``format`` :data:`REGION_CALIBRATION_FORMAT`, ``version`` :data:`REGION_CALIBRATION_VERSION`):
      ``levels``, shares in (0, 1), increasing; ``factors`` f_q, one per level, each in ``[0, MAX_REGION_FACTOR]``;
      ``min_radius_px`` rho in ``[0, MAX_REGION_FACTOR]``; ``exchangeable``, one of ``units`` (the conformal fit's
      unit: ``gaze.regions.EXCHANGEABLE_UNITS``, passed by the reader);
    * version 1 (no ``version``): one ``scale`` in :data:`SCALE_RANGE` at every level.

    Either may say ``noise_scale``, the tau of the samples the factors were fitted on (> 0; absent: 1, the paper's
    x_0). Returns ``levels`` (None for version 1), ``factors``, ``min_radius_px`` and ``exchangeable`` (None for
    version 1); other fields (how it was fitted) are the caller's."""
    if not isinstance(record, dict):
        raise fail(where, "(top)", "a JSON object", type(record).__name__)
    if "noise_scale" in record:
        number(record["noise_scale"], where, "noise_scale", 0, math.inf, low_open=True)
    if "version" not in record:  # version 1: one scale at every level, no floor
        value = field(record, "scale", where, "the region scale (a version-1 file) or a 'version'")
        scale = number(value, where, "scale", *SCALE_RANGE)
        return {"levels": None, "factors": (scale,), "min_radius_px": 0.0, "exchangeable": None}
    version = record["version"]
    if isinstance(version, bool) or version != REGION_CALIBRATION_VERSION:
        expected = f"{REGION_CALIBRATION_VERSION} (or no version: a single 'scale')"
        raise fail(where, "version", expected, version)
    if record.get("format") != REGION_CALIBRATION_FORMAT:
        raise fail(where, "format", repr(REGION_CALIBRATION_FORMAT), record.get("format"))
    lists = {}
    for name, low, high, low_open in (("levels", 0, 1, True), ("factors", 0, MAX_REGION_FACTOR, False)):
        values = field(record, name, where, "a non-empty list of numbers")
        if not isinstance(values, list) or not values:
            raise fail(where, name, "a non-empty list of numbers", values)
        lists[name] = tuple(number(v, where, f"{name}[{i}]", low, high, False, low_open) for i, v in enumerate(values))
    levels, factors = lists["levels"], lists["factors"]
    if len(factors) != len(levels):
        raise fail(where, "factors", f"one factor per level ({len(levels)})", len(factors))
    if levels[-1] >= 1 or any(b <= a for a, b in zip(levels, levels[1:])):
        raise fail(where, "levels", "shares in (0, 1), increasing", list(levels))
    radius = field(record, "min_radius_px", where, "rho, native pixels")
    min_radius = number(radius, where, "min_radius_px", 0, MAX_REGION_FACTOR)
    exchangeable = text_field(record.get("exchangeable"), where, "exchangeable", units)
    return {"levels": levels, "factors": factors, "min_radius_px": min_radius, "exchangeable": exchangeable}


def prediction_summary(record: dict[str, Any], where: str) -> dict[str, Any]:
    """``summary.json`` of a finished prediction as ``--resume`` reads it back: ``video`` (a string), ``frames`` (an
    integer >= 0), ``fps`` (> 0) and ``timings.predict_s`` (>= 0)."""
    text_field(field(record, "video", where, "the video's path"), where, "video")
    number(field(record, "frames", where, "a frame count"), where, "frames", 0, math.inf, integer=True)
    number(field(record, "fps", where, "a frame rate"), where, "fps", 0, math.inf, low_open=True)
    timings = field(record, "timings", where, "an object with predict_s")
    number(field(timings, "predict_s", where, "seconds", "timings."), where, "timings.predict_s", 0)
    return record


def index_part_row(row: dict[str, Any], where: str, line: int) -> dict[str, Any]:
    """A row of an index part (CSV: every cell text): ``order`` a whole number >= 0 and ``status`` one of
    :data:`INDEX_STATUSES`."""
    order = row.get("order")
    if not isinstance(order, str) or not order.isdigit():
        raise fail(where, f"line {line}: order", "a whole number >= 0", order)
    text_field(row.get("status"), where, f"line {line}: status", INDEX_STATUSES)
    return row


# ------------------------------------------------------------------------------------------- streamer.json
def _tensor_entries(value: Any, where: str, name: str) -> list[tuple[str, tuple[int, ...], str]]:
    if not isinstance(value, list) or not value:
        raise fail(where, name, "a list of tensors {name, shape, dtype}", value)
    entries, seen = [], set()
    for index, entry in enumerate(value):
        at = f"{name}[{index}]"
        if not isinstance(entry, dict):
            raise fail(where, at, "an object {name, shape, dtype}", entry)
        tensor = text_field(field(entry, "name", where, "a name", at + "."), where, at + ".name")
        shape = field(entry, "shape", where, "a list of sizes", at + ".")
        if not isinstance(shape, list) or len(shape) > 8:
            raise fail(where, at + ".shape", "a list of at most 8 sizes", shape)
        sizes = tuple(number(size, where, f"{at}.shape[{i}]", 0, 1 << 31, True) for i, size in enumerate(shape))
        if math.prod(sizes) > MAX_TENSOR_ELEMENTS:
            raise fail(where, at + ".shape", f"at most {MAX_TENSOR_ELEMENTS} elements", shape)
        dtype = text_field(field(entry, "dtype", where, "a dtype", at + "."), where, at + ".dtype", list(TENSOR_DTYPES))
        if tensor in seen:
            raise fail(where, at + ".name", "a name used once", tensor)
        seen.add(tensor)
        entries.append((tensor, sizes, dtype))
    return entries


def streamer_interface(record: dict[str, Any], folder: str | os.PathLike, where: str) -> dict[str, Any]:
    """``streamer.json`` of an export folder: ``format`` (:data:`STREAMER_FORMAT`); ``file``, one file name of a
    regular file inside ``folder`` (never a path out of it, nor a link leaving it); ``num_samples`` K and
    ``num_steps`` S (integers >= 1); optionally ``noise_scale``, the standard deviation of x_0 (> 0), and
    ``noise_correlation``, the AR(1) prior's rho over frames in [0, 1);
    ``inputs`` ``frame`` [1, 3, S, S] float32, ``noise`` [1, K, 1, 2] float32, then the ``state.*`` tensors;
    ``outputs`` ``gaze_samples`` [1, K, 2], ``gaze_point`` [1, 2], then ``next_state.*`` matching the state inputs
    one for one. Returns the record with ``path`` (the graph file), ``inputs`` and ``outputs`` as
    ``(name, shape, dtype)`` and ``state_bytes``."""
    if record.get("format") != STREAMER_FORMAT:
        raise fail(where, "format", f"{STREAMER_FORMAT!r} (export again with this version)", record.get("format"))
    name = field(record, "file", where, "the graph's file name")
    if not is_plain_name(name):
        raise fail(where, "file", f"one file name inside {folder} (no path)", name)
    folder_real = os.path.realpath(folder)
    path = Path(folder) / name
    if os.path.dirname(os.path.realpath(path)) != folder_real or not path.is_file():
        raise fail(where, "file", f"a file inside {folder} (not a link out of it)", name)
    k = number(field(record, "num_samples", where, "K"), where, "num_samples", 1, 1 << 24, True)
    number(field(record, "num_steps", where, "S"), where, "num_steps", 1, 1 << 24, True)
    if "noise_scale" in record:  # the standard deviation of x_0; absent: 1, the paper's
        number(record["noise_scale"], where, "noise_scale", 0, math.inf, low_open=True)
    if "noise_correlation" in record:  # the AR(1) prior's rho over frames; absent: independent frames
        rho = number(record["noise_correlation"], where, "noise_correlation", 0, 1)
        if rho >= 1:
            raise fail(where, "noise_correlation", "a number in [0, 1) (0: independent frames)", rho)
    inputs = _tensor_entries(field(record, "inputs", where, "a list of tensors"), where, "inputs")
    outputs = _tensor_entries(field(record, "outputs", where, "a list of tensors"), where, "outputs")
    if [entry[0] for entry in inputs[:2]] != list(STREAMER_INPUTS):
        raise fail(where, "inputs", f"{', '.join(STREAMER_INPUTS)} first", [entry[0] for entry in inputs[:2]])
    frame, noise, state = inputs[0], inputs[1], inputs[2:]
    if len(frame[1]) != 4 or frame[1][:2] != (1, 3) or frame[1][2] != frame[1][3] or frame[2] != "float32":
        raise fail(where, "inputs[0]", "frame of shape [1, 3, S, S] float32", [list(frame[1]), frame[2]])
    if noise[1] != (1, k, 1, 2) or noise[2] != "float32":
        raise fail(where, "inputs[1]", f"noise of shape [1, {k}, 1, 2] float32", [list(noise[1]), noise[2]])
    if not state or any(not entry[0].startswith(STATE_PREFIX) for entry in state):
        raise fail(where, "inputs", f"the state tensors after frame and noise, named {STATE_PREFIX}*")
    expected = [
        (STREAMER_OUTPUTS[0], (1, k, 2), "float32"),
        (STREAMER_OUTPUTS[1], (1, 2), "float32"),
        *((NEXT_PREFIX + entry[0], entry[1], entry[2]) for entry in state),
    ]
    for index, (want, have) in enumerate(zip(expected, outputs)):
        if want != have:
            source = f" (as inputs[{index}] {state[index - 2][0]})" if index >= 2 else ""
            raise fail(
                where,
                f"outputs[{index}]",
                f"{want[0]} {list(want[1])} {want[2]}{source}",
                [have[0], list(have[1]), have[2]],
            )
    if len(outputs) != len(expected):
        raise fail(where, "outputs", f"{len(expected)} tensors (gaze, point, one next_ per state input)", len(outputs))
    state_bytes = sum(math.prod(shape) * TENSOR_DTYPES[dtype] for _, shape, dtype in state)
    return {**record, "path": path, "inputs": inputs, "outputs": outputs, "state_bytes": state_bytes}


def check_streamer_graph(
    interface: dict[str, Any],
    graph_inputs: Iterable[tuple[str, Sequence[Any], str]],
    graph_outputs: Iterable[tuple[str, Sequence[Any], str]],
    where: str,
) -> None:
    """The graph's own inputs and outputs (``(name, shape, type)`` as onnxruntime gives them: types such as
    ``tensor(float)``) are exactly those :func:`streamer_interface` checked: the same names in the same order, every
    shape fixed and equal, every type the ``streamer.json`` dtype."""
    for kind, listed, actual in (
        ("inputs", interface["inputs"], list(graph_inputs)),
        ("outputs", interface["outputs"], list(graph_outputs)),
    ):
        names = [entry[0] for entry in actual]
        if names != [entry[0] for entry in listed]:
            missing = [entry[0] for entry in listed if entry[0] not in names] or names
            raise fail(where, kind, f"the graph's {kind} ({len(names)} of them, starting {names[:3]})", missing[:3])
        for (name, shape, dtype), (_, graph_shape, graph_type) in zip(listed, actual):
            if tuple(graph_shape) != shape or ONNX_TENSOR_TYPES.get(graph_type) != dtype:
                raise fail(
                    where,
                    f"{kind} {name}",
                    f"the graph's {list(graph_shape)} {ONNX_TENSOR_TYPES.get(graph_type, graph_type)}",
                    [list(shape), dtype],
                )


__all__ = [
    "InterfaceFileError",
    "read_json_object",
    "parse_json_object",
    "number",
    "number_pair",
    "text_field",
    "is_plain_name",
    "camera_intrinsics",
    "wearer_calibration",
    "region_calibration",
    "prediction_summary",
    "index_part_row",
    "streamer_interface",
    "check_streamer_graph",
    "STREAMER_FORMAT",
    "CALIBRATION_FORMAT",
    "CALIBRATION_VERSION",
    "REGION_CALIBRATION_FORMAT",
    "REGION_CALIBRATION_VERSION",
    "MAX_REGION_FACTOR",
    "OFFSET_LIMIT",
    "SCALE_RANGE",
]
