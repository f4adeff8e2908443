"""The ``gazeflow`` arguments of the readouts (the camera, the event labeller, a wearer calibration, the region
outline) and of ``gazeflow calibrate``. Plain Python like the command's parser: nothing heavy is imported until
:func:`readout_options` builds the objects.

* ``--fov H[,V]``: the camera's horizontal (and vertical) field of view in degrees, each in (0, 180); without V the
  pixels are square. ``--intrinsics fx,fy,cx,cy`` (pixels of the video's frames) or ``--intrinsics FILE.json`` (an
  object with ``fx``, ``fy``, ``cx``, ``cy`` and, optionally, ``width`` and ``height``: the frame size they were
  measured at, rescaled to the video's), or a Project Aria calibration (``FILE.json`` / ``FILE.jsonl``: a device
  calibration with ``CameraCalibrations``, or ``{"model": "FISHEYE624", "params": [...], ...}``; read by
  :mod:`~transformers_gazeflow.data.aria_calibration`): the fisheye camera of the upright Aria video. Neither: the
  metrics' 60 degree horizontal field of view.
* ``gazeflow calibrate --camera CALIB.json``: the recording's Aria calibration, which an MPS 3D eye-gaze CSV needs.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from ..models.gazeflow.choices import CORRECTIONS, EVENT_METHODS


def _number(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(text)
    return value


def field_of_view(text: str) -> tuple[float, float | None]:
    """``--fov``: ``H`` or ``H,V`` degrees, each in (0, 180)."""
    parts = text.split(",")
    try:
        values = [_number(part) for part in parts]
    except ValueError:
        values = []
    if len(values) not in (1, 2) or len(parts) != len(values) or not all(0 < v < 180 for v in values):
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected a field of view in degrees, horizontal or "
            "horizontal,vertical, each in (0, 180) (e.g. 90 or 90,60)"
        )
    return values[0], (values[1] if len(values) == 2 else None)


FISHEYE_CALIBRATION = "calibration_file"
"""The key :func:`intrinsics` returns a Project Aria calibration file under (read by :func:`readout_options`)."""
_FISHEYE_KEYS = ("CameraCalibrations", "params", "model")


class Intrinsics(dict):
    """Checked intrinsics (``fx``, ``fy``, ``cx``, ``cy``; ``width``, ``height`` when given) and ``file``, the JSON
    file they were read from (None for ``fx,fy,cx,cy``): no output of the run may overwrite it."""

    file: str | None = None


def intrinsics(text: str) -> Intrinsics:
    """``--intrinsics``: ``fx,fy,cx,cy`` (pixels) or a JSON file holding them, checked by the intrinsics' one schema
    (``data.interface_files.camera_intrinsics``: finite, plausible values; one line naming the file and the field),
    or a Project Aria calibration file (``{"calibration_file": path}``, read by ``data.aria_calibration``)."""
    from ..data.interface_files import InterfaceFileError, camera_intrinsics, read_json_object

    try:
        if text.lower().endswith((".json", ".jsonl")) or Path(text).is_file():
            path = Path(text).expanduser()
            if path.suffix.lower() == ".jsonl" and path.is_file():  # an Aria online calibration: one record a line
                found = Intrinsics({FISHEYE_CALIBRATION: str(path)})
            else:
                values = read_json_object(path, "an intrinsics file")
                if any(key in values for key in _FISHEYE_KEYS):  # read by data.aria_calibration's own checks
                    found = Intrinsics({FISHEYE_CALIBRATION: str(path)})
                else:
                    found = Intrinsics(camera_intrinsics(values, text))
            found.file = str(path)
            return found
        parts = text.split(",")
        try:
            numbers = [float(part) for part in parts]
        except ValueError:
            numbers = []
        if len(parts) != 4 or len(numbers) != 4:
            raise argparse.ArgumentTypeError(f"{text!r}: expected fx,fy,cx,cy in pixels (numbers) or a .json file")
        return Intrinsics(camera_intrinsics(dict(zip(("fx", "fy", "cx", "cy"), numbers)), repr(text)))
    except InterfaceFileError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _positive(kind: type, meaning: str):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not (math.isfinite(value) and value > 0):
            raise argparse.ArgumentTypeError(f"{text!r}: expected a positive number ({meaning})")
        return value

    return parse


def add_camera_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("degrees (the camera)").add_mutually_exclusive_group()
    group.add_argument(
        "--fov",
        type=field_of_view,
        default=None,
        metavar="H[,V]",
        help="the camera's field of view in degrees, horizontal[,vertical] (default: 60 horizontal, "
        "square pixels: the metrics' angular-error camera)",
    )
    group.add_argument(
        "--intrinsics",
        type=intrinsics,
        default=None,
        metavar="FX,FY,CX,CY|FILE.json",
        help="the camera's focal lengths and principal point in pixels, or a JSON file with fx, fy, "
        "cx, cy (and width, height when measured at another frame size), or a Project Aria calibration "
        "(device calibration .json/.jsonl or {model: FISHEYE624, params, width, height}): the fisheye "
        "camera of the upright Aria video",
    )


def add_readout_arguments(parser: argparse.ArgumentParser) -> None:
    """``gazeflow predict``'s readout options: camera, event labeller, wearer calibration, region outline."""
    add_camera_arguments(parser)
    group = parser.add_argument_group("fixations, saccades and calibration")
    group.add_argument(
        "--events",
        choices=EVENT_METHODS,
        default="ivt",
        help="fixation/saccade labeller: ivt (velocity threshold) or idt (dispersion threshold)",
    )
    group.add_argument(
        "--saccade-threshold",
        type=_positive(float, "deg/s"),
        default=30.0,
        metavar="DEG_S",
        help="I-VT: a frame faster than this (deg/s) is a saccade (Komogortsev et al. 2010)",
    )
    group.add_argument(
        "--dispersion",
        type=_positive(float, "degrees"),
        default=1.0,
        metavar="DEG",
        help="I-DT: the largest dispersion of a fixation, degrees (Salvucci & Goldberg 2000)",
    )
    group.add_argument(
        "--min-fixation-ms",
        type=_positive(float, "milliseconds"),
        default=100.0,
        metavar="MS",
        help="I-DT: the shortest fixation, ms (Salvucci & Goldberg 2000)",
    )
    group.add_argument(
        "--calibration",
        default=None,
        metavar="CALIB.json",
        help="correct every sample with this wearer calibration (from 'gazeflow calibrate', for the same model)",
    )
    group.add_argument(
        "--region", action="store_true", help="outline the calibrated 90%% uncertainty region on the overlay"
    )


def add_calibrate_arguments(parser: argparse.ArgumentParser) -> None:
    """``gazeflow calibrate``'s own arguments (the model and runtime ones are the command's usual)."""
    parser.add_argument("video", help="the wearer's video")
    parser.add_argument(
        "--gaze",
        required=True,
        metavar="TRACKER",
        help="the wearer's eye-tracker gaze on that video: a CSV with frame_idx, x_norm, y_norm "
        "(as gaze.csv), an Ego4D gaze CSV or an EGTEA Gaze+ BeGaze export",
    )
    parser.add_argument("--output", "-o", required=True, metavar="CALIB.json", help="where the calibration goes")
    parser.add_argument(
        "--camera",
        default=None,
        metavar="ARIA_CALIB.json",
        help="the recording's Project Aria camera calibration (device calibration .json/.jsonl or the minimal "
        "FISHEYE624 form), which an MPS 3D eye-gaze CSV needs to be projected into the video",
    )
    parser.add_argument(
        "--seconds",
        type=_positive(float, "seconds of tracker gaze"),
        default=None,
        help="use the first SECONDS of usable tracker gaze only (default: all of it)",
    )
    parser.add_argument(
        "--start-frame",
        type=int,
        default=None,
        help="the first frame to use (default: the first with usable tracker gaze)",
    )
    parser.add_argument(
        "--correction",
        choices=CORRECTIONS,
        default="auto",
        help="offset, offset_scale, or auto: the one with the lower held-out error",
    )


def readout_options(args: argparse.Namespace) -> dict[str, Any]:
    """The :class:`~transformers_gazeflow.commands.predict.PredictOptions` fields of the readout arguments."""
    from ..gaze.events import EventSettings
    from ..models.gazeflow.geometry import FieldOfView, PinholeCamera

    camera, inputs = None, ()
    if getattr(args, "fov", None) is not None:
        camera = FieldOfView(*args.fov)
    elif getattr(args, "intrinsics", None) is not None:
        if FISHEYE_CALIBRATION in args.intrinsics:
            from ..data.aria_calibration import read_video_camera

            camera = read_video_camera(args.intrinsics[FISHEYE_CALIBRATION])
        else:
            camera = PinholeCamera(**args.intrinsics)
        inputs = (("--intrinsics", args.intrinsics.file),) if getattr(args.intrinsics, "file", None) else ()
    if not hasattr(args, "events"):
        return {"camera": camera, "inputs": inputs}
    events = EventSettings(args.events, args.saccade_threshold, args.dispersion, args.min_fixation_ms)
    return {
        "camera": camera,
        "events": events,
        "calibration": args.calibration,
        "region": args.region,
        "inputs": inputs,
    }


__all__ = [
    "field_of_view",
    "Intrinsics",
    "intrinsics",
    "FISHEYE_CALIBRATION",
    "add_camera_arguments",
    "add_readout_arguments",
    "add_calibrate_arguments",
    "readout_options",
]
