"""Writers of small Ego-Exo4D and Aria MPS raw-format fixtures, laid out as the egoexo download CLI writes them.

Nothing here is real data: ``takes.json`` and ``annotations/splits.json`` with the fields the builder reads (and a few
it ignores), tiny upright videos (a "full" one and, for some takes, the ``downscaled/448`` copy at another size),
2D eye-gaze CSVs (``frame_num,tracking_timestamp_us,x,y`` in pixels of the upright 1408 frame, empty x, y where there
is no gaze) and MPS 3D eye-gaze CSVs in their schemas.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from .raw_fixtures import write_clip

GAZE_2D_HEADER = ("frame_num", "tracking_timestamp_us", "x", "y")
DEVICE_START_US = 123_456_789  # the device clock of the first gaze row (arbitrary: only differences count)


def gaze_2d_lines(
    x: list[float | None],
    y: list[float | None],
    columns: tuple[str, ...] = GAZE_2D_HEADER,
    period_us: int = 100_000,
    frame_nums: list[int] | None = None,
) -> list[str]:
    """The lines of a 2D eye-gaze CSV: row ``n`` has ``frame_num = frame_nums[n]`` (default ``n``), a timestamp
    ``period_us`` per frame_num step, and ``x[n], y[n]`` (None: an empty cell). ``columns`` orders the columns."""
    frame_nums = list(range(len(x))) if frame_nums is None else frame_nums
    lines = [",".join(columns)]
    for n, xi, yi in zip(frame_nums, x, y):
        cells = {
            "frame_num": str(n),
            "frame_number": str(n),
            "tracking_timestamp_us": str(DEVICE_START_US + n * period_us),
            "x": "" if xi is None else f"{xi:.3f}",
            "y": "" if yi is None else f"{yi:.3f}",
        }
        lines.append(",".join(cells[c] for c in columns))
    return lines


def write_lines(path: Path, lines: list[str], bom: bool = False, crlf: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    newline = "\r\n" if crlf else "\n"
    with open(path, "w", encoding="utf-8-sig" if bom else "utf-8", newline="") as handle:
        handle.write(newline.join(lines) + newline)
    return path


@dataclass
class FixtureTake:
    """One take of the fixture: its files (None: not written) and where it goes."""

    uid: str
    name: str
    split: str | None  # as splits.json spells it; None: not in splits.json
    frames: int = 0  # frames of the full video (0: no full video)
    downscaled_frames: int = 0  # frames of the 448 copy (0: none)
    gaze_2d: dict[str, list[str]] = field(default_factory=dict)  # file name -> lines
    gaze_3d: dict[str, list[str]] = field(default_factory=dict)
    has_gaze: bool | None = True
    downloaded: bool = True
    in_takes_json: bool = True
    aria: str = "aria01"
    calibration: list[str] | None = None  # the lines of trajectory/online_calibration.jsonl (None: not written)


def take_entry(take: FixtureTake) -> dict:
    """A takes.json entry: the fields the builder reads, and others a real entry has."""
    rgb = {"cam_id": take.aria, "stream_id": "214-1", "relative_path": f"frame_aligned_videos/{take.aria}_214-1.mp4"}
    return {
        "take_uid": take.uid,
        "take_name": take.name,
        "root_dir": f"takes/{take.name}",
        "university_id": "fixture",
        "frame_aligned_videos": {
            take.aria: {"rgb": {**rgb, "is_collage": False}, "slam-left": {"cam_id": take.aria, "relative_path": None}},
            "cam01": {"0": {"cam_id": "cam01", "relative_path": "frame_aligned_videos/cam01.mp4", "is_collage": False}},
        },
        "has_trimmed_eye_gaze": take.has_gaze,
        "has_trimmed_vrs": True,
    }


def make_egoexo4d_root(root: Path, takes: list[FixtureTake], size: int = 32, small: int = 16) -> Path:
    """An Ego-Exo4D download with ``takes``: takes.json, annotations/splits.json (capitalised split names, as the
    download CLI lower-cases them) and each downloaded take's files."""
    entries = [take_entry(t) for t in takes if t.in_takes_json]
    write_lines(root / "takes.json", [json.dumps(entries, indent=1)])
    splits = {"take_uid_to_split": {t.uid: t.split for t in takes if t.split is not None}}
    splits["take_uid_to_benchmark"] = {t.uid: ["gaze"] for t in takes}
    write_lines(root / "annotations" / "splits.json", [json.dumps(splits)])
    (root / "takes").mkdir(parents=True, exist_ok=True)
    for take in takes:
        if not take.downloaded:
            continue
        folder = root / "takes" / take.name
        folder.mkdir(parents=True, exist_ok=True)
        video = f"{take.aria}_214-1.mp4"
        if take.frames:
            write_clip(folder / "frame_aligned_videos" / video, take.frames, fps=30, height=size, width=size)
        if take.downscaled_frames:
            path = folder / "frame_aligned_videos" / "downscaled" / "448" / video
            write_clip(path, take.downscaled_frames, fps=30, height=small, width=small)
        for name, lines in {**take.gaze_2d, **take.gaze_3d}.items():
            write_lines(folder / "eye_gaze" / name, lines)
        if take.calibration is not None:
            write_lines(folder / "trajectory" / "online_calibration.jsonl", take.calibration)
    return root


def mps_lines(
    yaw: list[float | None], pitch: list[float], depth: list[float | None], schema: str = "current", start_us: int = 0
) -> list[str]:
    """An MPS 3D eye-gaze CSV at 10 Hz: ``schema`` ``"current"`` (combined yaw, then bounds, depth, session),
    ``"legacy"`` (yaw, pitch, depth first) or ``"vergence"`` (per-eye yaws, no combined yaw, eye origins)."""
    rows = []
    for n, (yi, pi, di) in enumerate(zip(yaw, pitch, depth)):
        t = str(start_us + n * 100_000)
        y_cell, d_cell = ("" if yi is None else f"{yi:.9f}"), ("" if di is None else f"{di:.6f}")
        if schema == "current":
            rows.append(f"{t},{y_cell},{pi:.9f},-0.1,-0.1,0.1,0.1,{d_cell},session-1")
        elif schema == "legacy":
            rows.append(f"{t},{y_cell},{pi:.9f},{d_cell},-0.1,-0.1,0.1,0.1")
        else:
            rows.append(f"{t},{y_cell},{y_cell},{pi:.9f},{d_cell},0,0,0,0,0,0,0.0315,0,0,-0.0315,0,0,session-1")
    header = {
        "current": "tracking_timestamp_us,yaw_rads_cpf,pitch_rads_cpf,yaw_low_rads_cpf,pitch_low_rads_cpf,"
        "yaw_high_rads_cpf,pitch_high_rads_cpf,depth_m,session_uid",
        "legacy": "tracking_timestamp_us,yaw_rads_cpf,pitch_rads_cpf,depth_m,yaw_low_rads_cpf,pitch_low_rads_cpf,"
        "yaw_high_rads_cpf,pitch_high_rads_cpf",
        "vergence": "tracking_timestamp_us,left_yaw_rads_cpf,right_yaw_rads_cpf,pitch_rads_cpf,depth_m,"
        "left_yaw_low_rads_cpf,right_yaw_low_rads_cpf,pitch_low_rads_cpf,left_yaw_high_rads_cpf,"
        "right_yaw_high_rads_cpf,pitch_high_rads_cpf,tx_left_eye_cpf,ty_left_eye_cpf,tz_left_eye_cpf,"
        "tx_right_eye_cpf,ty_right_eye_cpf,tz_right_eye_cpf,session_uid",
    }[schema]
    return [header] + rows


# an RGB camera of a plausible Aria unit at 1408x1408 (made-up numbers of the right size), raw orientation
ARIA_PARAMS = [610.0, 715.0, 705.0, 0.41, -0.47, 0.04, 1.3, -1.77, 0.65, 8e-5, 6e-4, -1.1e-3, 6e-4, -2.3e-3, 1.7e-3]


def device_calibration(params: list[float] = ARIA_PARAMS, size: int | None = 1408, **extra) -> dict:
    """An Aria device calibration as projectaria_tools writes it (factory form; ``size`` None: no ConfigData)."""
    rgb = {
        "Label": "camera-rgb",
        "Projection": {"Name": "FisheyeRadTanThinPrism", "Params": list(params), "Description": "see header"},
        "T_Device_Camera": {"Translation": [-0.0044, -0.0132, -0.0039], "UnitQuaternion": [0.94, [0.33, 0.034, 0.042]]},
        "SerialNumber": "fixture",
        "Calibrated": True,
    }
    if size is not None:
        rgb["ConfigData"] = {"ImageWidth": size, "ImageHeight": size, "MaxSolidAngle": 1.0}
    slam = {
        **rgb,
        "Label": "camera-slam-left",
        "T_Device_Camera": {"Translation": [0, 0, 0], "UnitQuaternion": [1, [0, 0, 0]]},
    }
    slam.pop("ConfigData", None)
    return {
        "DeviceClassInfo": {"BuildVersion": "DVT-S", "DeviceClass": "Aria"},
        "OriginSpecification": {"ChildLabel": "camera-slam-left", "Type": "Custom"},
        "CameraCalibrations": [slam, rgb],
        **extra,
    }


def online_calibration_lines(params_per_line: list[list[float]]) -> list[str]:
    """MPS's ``online_calibration.jsonl``: one device calibration per line (no DeviceClassInfo, no ImageSizes: the RGB
    camera is the 2880x2880 sensor's), each with its ``tracking_timestamp_us``."""
    lines = []
    for n, params in enumerate(params_per_line):
        document = device_calibration(params, size=None)
        document.pop("DeviceClassInfo"), document.pop("OriginSpecification")
        lines.append(json.dumps({"tracking_timestamp_us": DEVICE_START_US + n * 1_000_000, **document}))
    return lines
