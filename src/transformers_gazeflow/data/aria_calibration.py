"""Project Aria calibrations: the RGB camera (FISHEYE624) of a recording's video, and the poses that put 3D eye gaze
into it.

What is read (a JSON object; from a ``.jsonl`` file, its first line that holds the RGB camera):

1. **An Aria device calibration**, as projectaria_tools writes and reads it: a factory calibration, or a line of MPS's
   ``online_calibration.jsonl`` (Ego-Exo4D ships one per take, ``takes/<take>/trajectory/online_calibration.jsonl``).
   Read from it: the ``CameraCalibrations`` entry whose ``Label`` is ``camera-rgb``, its ``Projection.Name``
   (``FisheyeRadTanThinPrism``), ``Projection.Params`` (15 numbers) and ``T_Device_Camera`` (``Translation``,
   ``UnitQuaternion`` ``[w, [x, y, z]]``); the image size from ``ImageSizes`` (online calibrations, by the entry's
   index), else the entry's ``ConfigData.ImageWidth`` / ``ImageHeight``, else Gen1's RGB sensor, 2880x2880. A
   calibration of the 2880 sensor describes the 1408x1408 frames Aria records by default (and Ego-Exo4D's videos)
   after projectaria_tools' rescale rule: a 32 px crop on each side, then half size.
2. **The minimal form**: ``{"model": "FISHEYE624", "params": [f, cx, cy, k0..k5, p0, p1, s0..s3], "width": W,
   "height": H}`` (projectaria_tools' order and pixel convention) for the raw, sensor-oriented frame, or for the video's
   upright frame with ``"upright": true``; optionally ``"T_Device_Camera"`` and ``"T_Device_CPF"`` as above (or 4x4
   matrices), which a 3D eye gaze needs.

Aria Gen1 videos (Ego-Exo4D's frame-aligned videos, projectaria_tools' ``vrs_to_mp4``) show the raw frame turned 90
degrees clockwise: :meth:`AriaCalibration.video_camera` is the camera of that upright frame.

A 3D eye-gaze point ``p`` of the central pupil frame (CPF) reaches the camera as ``T_Device_Camera^-1 T_Device_CPF p``
(:func:`project_cpf_points`), as projectaria_tools' ``get_gaze_vector_reprojection`` does. ``T_Device_Camera`` is the
file's; ``T_Device_CPF`` is the file's where it has one, else, with projectaria-tools installed (the ``[aria]``
extra), what its ``DeviceCalibration.get_transform_device_cpf()`` gives for the device's build (``DeviceClassInfo`` of
a factory calibration). With neither, the error names the file. An error about a file names the file and the field.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..models.gazeflow.geometry import FISHEYE624, FISHEYE624_NUM_PARAMS, FisheyeCamera
from .aria_gaze import ARIA_GAZE_RATE_HZ, AriaGazeSamples, MpsEyeGaze
from .gaze_common import read_text

RGB_LABEL = "camera-rgb"
ARIA_MODEL_NAME = "FisheyeRadTanThinPrism"
GEN1_RGB_SENSOR_SIZE = 2880
GEN1_RGB_RECORDED_SIZE = 1408
GEN1_RGB_CROP_PX = 32.0
NOMINAL_RGB_PARAMS = (
    1220.01943882295, 1461.091249679011, 1447.087207987354,
    0.411035882200732, -0.456468282322496, 0.038303075146701, 1.298336637403988, -1.770471163632234, 0.654993502244781,
    -7.9203062637e-05, 4.4207001233e-05,
    -0.000587384169463, 0.00056439365081, 0.000515794638327, 0.000235027249453,
)  # fmt: skip
"""Aria Gen1's RGB camera where a recording's own calibration is missing: the FISHEYE624 parameters of one unit's
2880x2880 sensor, from the first line of projectaria_tools' public MPS sample (``data/gen1/mps_sample/trajectory/
online_calibration.jsonl``). Units differ from it by a few pixels in focal length and principal point."""
NOMINAL_RGB_SOURCE = "the nominal Aria Gen1 RGB calibration (projectaria_tools' MPS sample)"


def quaternion_matrix(w: float, x: float, y: float, z: float) -> np.ndarray:
    """The rotation matrix ``[3, 3]`` of the quaternion ``w + xi + yj + zk`` (normalised first)."""
    q = np.asarray([w, x, y, z], np.float64)
    w, x, y, z = q / np.linalg.norm(q)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def _pose(value: Any, where: str) -> np.ndarray:
    """A rigid transform ``[4, 4]`` from ``{"Translation": [3], "UnitQuaternion": [w, [x, y, z]]}`` or a 4x4 list."""
    try:
        if isinstance(value, dict):
            w, (x, y, z) = value["UnitQuaternion"]
            pose = np.eye(4)
            pose[:3, :3] = quaternion_matrix(float(w), float(x), float(y), float(z))
            pose[:3, 3] = np.asarray(value["Translation"], np.float64).reshape(3)
        else:
            pose = np.asarray(value, np.float64).reshape(4, 4)
    except (KeyError, TypeError, ValueError):
        raise ValueError(
            f"{where}: expected {{'Translation': [x, y, z], 'UnitQuaternion': [w, [x, y, z]]}} or a 4x4 matrix"
        ) from None
    if not np.isfinite(pose).all():
        raise ValueError(f"{where}: the pose holds non-finite numbers")
    return pose


@dataclass(frozen=True)
class AriaCalibration:
    """A recording's RGB camera: ``camera`` (FISHEYE624 at the calibrated size, raw orientation unless ``upright``),
    the poses ``T_device_camera`` and ``T_device_cpf`` (``[4, 4]``, None where the file has none), where it was read
    (``source``) and the device calibration object itself (``device``, for projectaria-tools)."""

    camera: FisheyeCamera
    source: str
    upright: bool = False
    T_device_camera: np.ndarray | None = None
    T_device_cpf: np.ndarray | None = None
    device: dict | None = None

    def recorded_camera(self) -> FisheyeCamera:
        """The camera of the recorded frames (the video's before turning upright): a calibration of Gen1's
        2880x2880 RGB sensor is cropped by 32 px and halved to 1408x1408, any other is as calibrated."""
        camera = self.camera
        if not self.upright and (camera.width, camera.height) == (GEN1_RGB_SENSOR_SIZE, GEN1_RGB_SENSOR_SIZE):
            size = GEN1_RGB_RECORDED_SIZE
            return camera.scaled(size / (GEN1_RGB_SENSOR_SIZE - 2 * GEN1_RGB_CROP_PX), size, size, (32.0, 32.0))
        return camera

    def video_camera(self) -> FisheyeCamera:
        """The camera of the upright video (``for_frame`` then fits any resized copy, e.g. Ego-Exo4D's 448 one)."""
        return self.recorded_camera() if self.upright else self.recorded_camera().rotated_cw90()


def _first_json_object(path: Path) -> dict:
    text = read_text(path, "a camera calibration")
    try:
        found = json.loads(text)
    except json.JSONDecodeError:
        found = None
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                candidate = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}: line {number} is not JSON ({err.msg})") from None
            if isinstance(candidate, dict) and ("CameraCalibrations" in candidate or "params" in candidate):
                found = candidate
                break
    if not isinstance(found, dict):
        raise ValueError(
            f"{path}: expected a JSON object: an Aria device calibration (CameraCalibrations) or "
            '{"model": "FISHEYE624", "params": [15 numbers], "width": W, "height": H}'
        )
    return found


def _params(values: Any, where: str) -> list[float]:
    try:
        params = [float(v) for v in values]
    except (TypeError, ValueError):
        params = []
    if len(params) != FISHEYE624_NUM_PARAMS or not all(math.isfinite(v) for v in params):
        raise ValueError(f"{where}: expected {FISHEYE624_NUM_PARAMS} numbers (f, cx, cy, k0..k5, p0, p1, s0..s3)")
    return params


def _size(entry: dict, document: dict, index: int, where: str) -> tuple[int, int]:
    """The RGB image size of an Aria calibration entry: ``ImageSizes[index]``, ``ConfigData``, or Gen1's sensor."""
    try:
        if "ImageSizes" in document:
            width, height = document["ImageSizes"][index]
        elif "ConfigData" in entry:
            width, height = entry["ConfigData"]["ImageWidth"], entry["ConfigData"]["ImageHeight"]
        else:
            device_class = (document.get("DeviceClassInfo") or {}).get("DeviceClass", "Aria")
            if device_class != "Aria":
                raise ValueError(f"{where}: a {device_class} calibration needs ImageSizes or ConfigData")
            width = height = GEN1_RGB_SENSOR_SIZE
        return int(width), int(height)
    except (KeyError, IndexError, TypeError) as err:
        raise ValueError(f"{where}: no readable image size (ImageSizes or ConfigData: {err})") from None


def _from_device_calibration(document: dict, path: Path) -> AriaCalibration:
    cameras = document["CameraCalibrations"]
    if isinstance(cameras, str):  # MPS's online calibrations before June 2023 hold a Python repr here
        cameras = json.loads(cameras.replace("True", "true").replace("False", "false").replace("'", '"'))
        document = {**document, "CameraCalibrations": cameras}
    labels = [camera.get("Label") for camera in cameras if isinstance(camera, dict)]
    if RGB_LABEL not in labels:
        raise ValueError(f"{path}: CameraCalibrations has no entry with Label {RGB_LABEL!r} (labels: {labels})")
    index = labels.index(RGB_LABEL)
    entry, where = cameras[index], f"{path}: CameraCalibrations[{index}] ({RGB_LABEL})"
    name = (entry.get("Projection") or {}).get("Name")
    if name != ARIA_MODEL_NAME:
        raise ValueError(f"{where}: Projection.Name is {name!r}; the RGB camera read is {ARIA_MODEL_NAME} (FISHEYE624)")
    params = _params(entry["Projection"].get("Params"), f"{where}: Projection.Params")
    width, height = _size(entry, document, index, where)
    return AriaCalibration(
        FisheyeCamera(params, width, height),
        str(path),
        T_device_camera=_pose(entry["T_Device_Camera"], f"{where}: T_Device_Camera")
        if "T_Device_Camera" in entry
        else None,
        T_device_cpf=_pose(document["T_Device_CPF"], f"{path}: T_Device_CPF") if "T_Device_CPF" in document else None,
        device=document,
    )


def _from_minimal_form(document: dict, path: Path) -> AriaCalibration:
    model = str(document.get("model", "")).upper()
    if model not in (FISHEYE624, ARIA_MODEL_NAME.upper()):
        raise ValueError(f"{path}: model is {document.get('model')!r}; expected {FISHEYE624!r}")
    params = _params(document.get("params"), f"{path}: params")
    try:
        width, height = int(document["width"]), int(document["height"])
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"{path}: width and height: expected the frame size (pixels) the params are for") from None
    poses = {
        key: _pose(document[key], f"{path}: {key}") for key in ("T_Device_Camera", "T_Device_CPF") if key in document
    }
    return AriaCalibration(
        FisheyeCamera(params, width, height),
        str(path),
        upright=bool(document.get("upright", False)),
        T_device_camera=poses.get("T_Device_Camera"),
        T_device_cpf=poses.get("T_Device_CPF"),
    )


def read_aria_calibration(path: str | Path) -> AriaCalibration:
    """Read a camera calibration file (the forms of the module docstring)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"camera calibration file not found: {path}")
    document = _first_json_object(path)
    if "CameraCalibrations" in document:
        return _from_device_calibration(document, path)
    if "params" in document or "model" in document:
        return _from_minimal_form(document, path)
    raise ValueError(
        f"{path}: neither an Aria device calibration (no CameraCalibrations) nor the minimal form (no model, params)"
    )


def nominal_calibration() -> AriaCalibration:
    """Aria Gen1's RGB camera where a recording's own calibration is missing (:data:`NOMINAL_RGB_PARAMS`, raw
    orientation, the 2880 sensor: :meth:`AriaCalibration.video_camera` is the upright 1408 video's)."""
    return AriaCalibration(
        FisheyeCamera(NOMINAL_RGB_PARAMS, GEN1_RGB_SENSOR_SIZE, GEN1_RGB_SENSOR_SIZE), NOMINAL_RGB_SOURCE
    )


def read_video_camera(path: str | Path) -> FisheyeCamera:
    """The upright video's camera of a calibration file (:meth:`AriaCalibration.video_camera`)."""
    return read_aria_calibration(path).video_camera()


def _projectaria_calibration():
    try:
        from projectaria_tools.core import calibration
    except ImportError:
        return None
    return calibration


def _camera_from_cpf(calibration: AriaCalibration, aria: Any) -> np.ndarray:
    """``T_Camera_CPF`` ``[4, 4]`` = ``T_Device_Camera^-1 T_Device_CPF``: the file's poses; without ``T_Device_CPF``,
    projectaria-tools' ``get_transform_device_cpf()`` of the device calibration (what its
    ``get_gaze_vector_reprojection`` uses)."""
    where = calibration.source
    if calibration.T_device_camera is None:
        raise ValueError(f"{where}: projecting 3D eye gaze needs the RGB camera's pose T_Device_Camera")
    cpf = calibration.T_device_cpf
    if cpf is None:
        if aria is None or calibration.device is None or "DeviceClassInfo" not in calibration.device:
            raise ValueError(
                f"{where}: projecting 3D eye gaze needs the central pupil frame's pose: T_Device_CPF in the file, "
                "or a device calibration with DeviceClassInfo (a factory calibration) and projectaria-tools "
                "(pip install 'transformers-gazeflow[aria]')"
            )
        device = aria.device_calibration_from_json_string(json.dumps(calibration.device))
        if device is None:
            raise ValueError(f"{where}: projectaria-tools could not read this device calibration")
        cpf = device.get_transform_device_cpf().to_matrix()
    return np.linalg.inv(calibration.T_device_camera) @ cpf


def project_cpf_points(points_cpf: np.ndarray, calibration: AriaCalibration, backend: str = "auto") -> np.ndarray:
    """Pixels ``[n, 2]`` (continuous frame of the upright recorded video, :meth:`AriaCalibration.video_camera`) of
    CPF points ``[n, 3]`` (metres); NaN behind the camera or where a point is NaN. ``backend``: ``"projectaria"``
    (projectaria_tools' projection and, where the file lacks them, its CAD poses), ``"numpy"`` (our own FISHEYE624;
    the poses must be in the file) or ``"auto"`` (projectaria-tools where installed)."""
    if backend not in ("auto", "numpy", "projectaria"):
        raise ValueError(f"backend must be 'auto', 'numpy' or 'projectaria', got {backend!r}")
    aria = _projectaria_calibration() if backend != "numpy" else None
    if backend == "projectaria" and aria is None:
        raise ImportError("backend='projectaria' needs projectaria-tools: pip install 'transformers-gazeflow[aria]'")
    transform = _camera_from_cpf(calibration, aria)
    points = np.asarray(points_cpf, np.float64).reshape(-1, 3)
    in_camera = points @ transform[:3, :3].T + transform[:3, 3]
    camera = calibration.recorded_camera()
    if aria is None:
        pixels = camera.project(in_camera)
    else:
        from projectaria_tools.core.sophus import SE3

        projector = aria.CameraCalibration(
            RGB_LABEL, aria.CameraModelType.FISHEYE624, np.asarray(camera.params), SE3(), camera.width, camera.height,
            None, math.pi, "",
        )  # fmt: skip
        pixels = np.full((len(in_camera), 2), np.nan)
        ahead = np.isfinite(in_camera).all(-1) & (in_camera[:, 2] > 0)
        for i in np.flatnonzero(ahead):
            pixels[i] = np.asarray(projector.project_no_checks(in_camera[i])).reshape(2) + 0.5
    if calibration.upright:
        return pixels
    return np.stack([camera.height - pixels[:, 1], pixels[:, 0]], -1)  # raw (x, y) -> upright (H - y, x)


def mps_gaze_samples(
    gaze: MpsEyeGaze, calibration: AriaCalibration, video_start_us: float | None = None, backend: str = "auto"
) -> AriaGazeSamples:
    """MPS 3D eye gaze as samples on a video's frames: each row's CPF point projected into the upright video
    (:func:`project_cpf_points`, unit coordinates of :meth:`AriaCalibration.video_camera`), at
    ``(timestamp - video_start_us)`` seconds. ``video_start_us``: the device time of the video's frame 0 (None: the
    first row's, as where MPS ran on the same recording the video was exported from, both starting with it)."""
    camera = calibration.video_camera()
    pixels = project_cpf_points(gaze.points_cpf(), calibration, backend)
    points = pixels / np.asarray([camera.width, camera.height], np.float64)
    start = (gaze.timestamp_us[0] if gaze.timestamp_us.size else 0.0) if video_start_us is None else video_start_us
    steps = np.diff(gaze.timestamp_us)
    period = float(np.median(steps[steps > 0])) * 1e-6 if (steps > 0).any() else 1.0 / ARIA_GAZE_RATE_HZ
    gaze.report.rows_kept = int(gaze.timestamp_us.size)
    return AriaGazeSamples((gaze.timestamp_us - start) * 1e-6, points, period, gaze.report)


__all__ = [
    "RGB_LABEL",
    "GEN1_RGB_SENSOR_SIZE",
    "GEN1_RGB_RECORDED_SIZE",
    "NOMINAL_RGB_PARAMS",
    "nominal_calibration",
    "quaternion_matrix",
    "AriaCalibration",
    "read_aria_calibration",
    "read_video_camera",
    "project_cpf_points",
    "mps_gaze_samples",
]
