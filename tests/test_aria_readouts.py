"""Project Aria through the command: ``gazeflow predict --intrinsics`` with a FISHEYE624 calibration (degrees through
the fisheye), the tracker reader on Ego-Exo4D 2D and MPS 3D eye-gaze CSVs, and ``gazeflow calibrate --camera``."""

from __future__ import annotations

import csv
import io
import json
import math
from contextlib import redirect_stderr, redirect_stdout

import numpy as np
import pytest

from transformers_gazeflow.commands.cli import main
from transformers_gazeflow.data.tracker_gaze import read_tracker_gaze
from transformers_gazeflow.models.gazeflow.geometry import FisheyeCamera

from .data.egoexo4d_fixtures import gaze_2d_lines, mps_lines, write_lines
from .pipeline_fixtures import (  # noqa: F401  (fixtures)
    NUM_SAMPLES,
    single_torch_thread,
    synthetic_clip_mp4,
    tiny_model_dir,
)

# a fisheye of the synthetic clip's raw (sensor-oriented) 48 x 64 frame: upright, the clip's 64 x 48
RAW = [40.0, 23.5, 31.5, 0.02, -0.01, 0.0, 0.0, 0.0, 0.0, 1e-3, -2e-3, 0.0, 0.0, 0.0, 0.0]
IDENTITY = {"Translation": [0, 0, 0], "UnitQuaternion": [1, [0, 0, 0]]}


def run(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        status = main([str(a) for a in argv])
    return status, out.getvalue(), err.getvalue()


@pytest.fixture()
def aria_json(tmp_path):
    path = tmp_path / "aria.json"
    document = {"model": "FISHEYE624", "params": RAW, "width": 48, "height": 64}
    path.write_text(json.dumps({**document, "T_Device_Camera": IDENTITY, "T_Device_CPF": IDENTITY}))
    return path


def test_predict_reads_degrees_through_the_fisheye(tmp_path, aria_json, synthetic_clip_mp4, tiny_model_dir):
    path, _ = synthetic_clip_mp4
    status, _, stderr = run(
        "predict",
        path,
        "--model",
        tiny_model_dir,
        "-o",
        tmp_path / "o",
        "--intrinsics",
        aria_json,
        "-q",
        "--no-overlay",
    )
    assert status == 0, stderr
    upright = FisheyeCamera(RAW, 48, 64).rotated_cw90()
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["camera"] == upright.to_dict() and summary["camera_given"]
    with (tmp_path / "o" / "gaze.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows[: NUM_SAMPLES + 1]:
        expected = upright.angles_deg(np.array([float(row["x_px"]), float(row["y_px"])]))
        np.testing.assert_allclose([float(row["x_deg"]), float(row["y_deg"])], expected, atol=0.01)


def test_a_bad_aria_calibration_is_one_line(tmp_path, synthetic_clip_mp4, tiny_model_dir):
    path, _ = synthetic_clip_mp4
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"model": "FISHEYE624", "params": RAW[:10], "width": 48, "height": 64}))
    status, _, stderr = run("predict", path, "--model", tiny_model_dir, "-o", tmp_path / "o", "--intrinsics", bad, "-q")
    assert status == 1 and stderr.count("\n") == 1
    assert f"{bad}: params: expected 15 numbers" in stderr


def upright_points(num_frames: int) -> np.ndarray:
    """Unit points of a slow sweep across the upright 64 x 48 frame."""
    t = np.arange(num_frames) / num_frames
    return np.stack([0.2 + 0.6 * t, 0.3 + 0.3 * t], -1)


def mps_rows_of(points: np.ndarray) -> tuple[list[float], list[float]]:
    """Yaw and pitch (CPF = camera, identity poses) whose projection is each upright unit point."""
    upright = FisheyeCamera(RAW, 48, 64).rotated_cw90()
    ray = upright.unproject(points * [64, 48])  # in the upright camera; the raw camera's is (y, -x, z)
    raw = np.stack([ray[:, 1], -ray[:, 0], ray[:, 2]], -1)
    return list(np.arctan(raw[:, 0] / raw[:, 2])), list(np.arctan(raw[:, 1] / raw[:, 2]))


def test_tracker_reader_on_an_mps_3d_csv_with_its_calibration(tmp_path, aria_json):
    points = upright_points(12)
    yaw, pitch = mps_rows_of(points)
    yaw[4] = None  # a row without gaze
    path = write_lines(tmp_path / "general_eye_gaze.csv", mps_lines(yaw, pitch, [0.5] * 12, start_us=7_000_000))
    gaze = read_tracker_gaze(path, 34, 30, "rec.mp4", calibration=aria_json)  # 10 Hz rows on 30 fps frames
    assert gaze.kind == "MPS 3D eye-gaze CSV"
    rows = np.round(np.arange(34) / 3).astype(int)  # frame i: row round(i / 3)
    tracked = rows != 4
    np.testing.assert_allclose(gaze.gaze[tracked], points[rows[tracked]], atol=1e-7)
    assert (gaze.gaze_type[~tracked] == 0).all() and (gaze.gaze_type[tracked] == 1).all()
    with pytest.raises(ValueError, match=r"general_eye_gaze\.csv: an MPS 3D eye-gaze CSV needs the recording's camera"):
        read_tracker_gaze(path, 34, 30)


def test_tracker_reader_on_an_egoexo4d_2d_csv(tmp_path):
    x, y = [100.0, 300.0, None], [200.0, 400.0, None]
    path = write_lines(tmp_path / "personalized_eye_gaze_2d.csv", gaze_2d_lines(x, y))
    gaze = read_tracker_gaze(path, 9, 30)
    assert gaze.kind == "Ego-Exo4D 2D eye-gaze CSV"
    np.testing.assert_allclose(gaze.gaze[:5], (np.array([[100, 200]] * 2 + [[300, 400]] * 3) + 0.5) / 1408)
    assert gaze.gaze_type.tolist() == [1, 1, 1, 1, 1, 0, 0, 0, 0]


def test_calibrate_recovers_an_offset_from_mps_gaze(tmp_path, aria_json, synthetic_clip_mp4, tiny_model_dir):
    path, _ = synthetic_clip_mp4
    predicted = tmp_path / "pred"
    status, _, stderr = run("predict", path, "--model", tiny_model_dir, "-o", predicted, "-q", "--no-overlay")
    assert status == 0, stderr
    with (predicted / "gaze.csv").open(encoding="utf-8") as handle:
        rows = [r for r in csv.DictReader(handle) if r["sample_id"] == "-1"]
    points = np.array([[float(r["x_norm"]), float(r["y_norm"])] for r in rows])
    offset = np.array([0.05, -0.04])
    yaw, pitch = mps_rows_of(np.clip(points + offset, 0.02, 0.98))
    period_us = round(1e6 / 24)  # MPS rows as often as the 24 fps frames: one row per frame
    lines = mps_lines(yaw, pitch, [1.0] * len(yaw))
    lines = [lines[0]] + [f"{n * period_us}," + line.split(",", 1)[1] for n, line in enumerate(lines[1:])]
    tracker = write_lines(tmp_path / "general_eye_gaze.csv", lines)
    calib = tmp_path / "calib.json"
    argv = ("calibrate", path, "--gaze", tracker, "-o", calib, "--model", tiny_model_dir, "--correction", "offset")
    status, _, stderr = run(*argv)
    assert status == 1 and "needs the recording's camera calibration" in stderr and stderr.count("\n") == 1
    status, stdout, stderr = run(*argv, "--camera", aria_json)
    assert status == 0, stderr
    record = json.loads(calib.read_text())
    assert record["fit"]["tracker_kind"] == "MPS 3D eye-gaze CSV"
    np.testing.assert_allclose(record["offset"], offset, atol=5e-3)
    assert math.isfinite(record["fit"]["median_error_after_px"])


def test_calibrate_recovers_an_offset_from_an_egoexo4d_2d_csv(tmp_path, synthetic_clip_mp4, tiny_model_dir):
    """The 2D files need no camera: pixels of the upright 1408 frame, unit (x + 0.5) / 1408 at any video size."""
    path, _ = synthetic_clip_mp4
    predicted = tmp_path / "pred"
    status, _, stderr = run("predict", path, "--model", tiny_model_dir, "-o", predicted, "-q", "--no-overlay")
    assert status == 0, stderr
    with (predicted / "gaze.csv").open(encoding="utf-8") as handle:
        rows = [r for r in csv.DictReader(handle) if r["sample_id"] == "-1"]
    points = np.array([[float(r["x_norm"]), float(r["y_norm"])] for r in rows])
    offset = np.array([-0.03, 0.06])
    pixels = np.clip(points + offset, 0.02, 0.98) * 1408 - 0.5
    lines = gaze_2d_lines(list(pixels[:, 0]), list(pixels[:, 1]), period_us=round(1e6 / 24))  # a row per 24 fps frame
    tracker = write_lines(tmp_path / "personalized_eye_gaze_2d.csv", lines)
    calib = tmp_path / "calib.json"
    argv = ("calibrate", path, "--gaze", tracker, "-o", calib, "--model", tiny_model_dir, "--correction", "offset")
    status, _, stderr = run(*argv)
    assert status == 0, stderr
    record = json.loads(calib.read_text())
    assert record["fit"]["tracker_kind"] == "Ego-Exo4D 2D eye-gaze CSV"
    np.testing.assert_allclose(record["offset"], offset, atol=5e-3)


def test_intrinsics_tells_an_aria_calibration_from_pinhole_intrinsics(tmp_path):
    from transformers_gazeflow.commands.readout_arguments import FISHEYE_CALIBRATION, intrinsics

    pinhole = tmp_path / "camera.json"
    pinhole.write_text(json.dumps({"fx": 64, "fy": 64, "cx": 64, "cy": 48}))
    assert intrinsics(str(pinhole)) == {"fx": 64.0, "fy": 64.0, "cx": 64.0, "cy": 48.0}
    for name, text in (
        ("device.json", json.dumps({"CameraCalibrations": []})),
        ("minimal.json", "\ufeff" + json.dumps({"model": "FISHEYE624", "params": RAW})),  # with a byte-order mark
        ("online_calibration.jsonl", json.dumps({"CameraCalibrations": []}) + "\n"),
    ):
        (tmp_path / name).write_text(text, encoding="utf-8")
        assert intrinsics(str(tmp_path / name)) == {FISHEYE_CALIBRATION: str(tmp_path / name)}
