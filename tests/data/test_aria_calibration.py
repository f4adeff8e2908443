"""Project Aria calibration files: the forms read, the upright video's camera, and 3D eye gaze projected into it
(by hand, and against projectaria-tools where it is installed)."""

import json
import math

import numpy as np
import pytest

from transformers_gazeflow import FisheyeCamera
from transformers_gazeflow.data.aria_calibration import (
    AriaCalibration,
    project_cpf_points,
    quaternion_matrix,
    read_aria_calibration,
    read_video_camera,
)

from .egoexo4d_fixtures import ARIA_PARAMS, device_calibration, write_lines


def write_json(path, document):
    return write_lines(path, [json.dumps(document)])


def test_a_device_calibration_gives_the_upright_video_camera(tmp_path):
    calibration = read_aria_calibration(write_json(tmp_path / "calib.json", device_calibration()))
    assert calibration.camera.params == tuple(ARIA_PARAMS) and (
        calibration.camera.width,
        calibration.camera.height,
    ) == (
        1408,
        1408,
    )
    upright = calibration.video_camera()
    f, cx, cy = ARIA_PARAMS[:3]
    assert upright.params[:3] == (f, 1408 - 1 - cy, cx)  # turned clockwise: (H - 1 - cy, cx) in Aria's pixels
    assert np.allclose(calibration.T_device_camera[:3, :3] @ calibration.T_device_camera[:3, :3].T, np.eye(3))
    assert read_video_camera(tmp_path / "calib.json") == upright


def test_the_2880_sensor_calibration_is_cropped_and_halved_to_the_recorded_1408(tmp_path):
    full = [2 * ARIA_PARAMS[0], 2 * ARIA_PARAMS[1] + 32.5, 2 * ARIA_PARAMS[2] + 32.5] + ARIA_PARAMS[3:]
    calibration = read_aria_calibration(write_json(tmp_path / "factory.json", device_calibration(full, size=None)))
    assert (calibration.camera.width, calibration.camera.height) == (2880, 2880)  # no ConfigData: Gen1's sensor
    recorded = calibration.recorded_camera()
    # the rescale rule: f / 2, (c - 32 + 0.5) / 2 - 0.5, so this sensor calibration is ARIA_PARAMS at 1408
    assert (recorded.width, recorded.height) == (1408, 1408)
    assert np.allclose(recorded.params, ARIA_PARAMS)


def test_an_online_calibration_line_and_its_old_string_form(tmp_path):
    document = device_calibration(size=None)
    del document["DeviceClassInfo"], document["OriginSpecification"]
    document.update(tracking_timestamp_us=1, utc_timestamp_ns=2, ImageSizes=[[640, 480], [1408, 1408]])
    path = write_lines(tmp_path / "online_calibration.jsonl", [json.dumps(document), json.dumps(document), ""])
    assert read_aria_calibration(path).camera == FisheyeCamera(ARIA_PARAMS, 1408, 1408)
    old = {**document, "CameraCalibrations": str(document["CameraCalibrations"])}  # a Python repr, True and all
    path = write_lines(tmp_path / "old.jsonl", [json.dumps(old)])
    assert read_aria_calibration(path).camera == FisheyeCamera(ARIA_PARAMS, 1408, 1408)


def test_the_minimal_form(tmp_path):
    document = {"model": "FISHEYE624", "params": ARIA_PARAMS, "width": 1408, "height": 1408}
    raw = read_aria_calibration(write_json(tmp_path / "raw.json", document))
    assert raw.video_camera() == FisheyeCamera(ARIA_PARAMS, 1408, 1408).rotated_cw90()
    upright = read_aria_calibration(write_json(tmp_path / "up.json", {**document, "upright": True}))
    assert upright.video_camera() == FisheyeCamera(ARIA_PARAMS, 1408, 1408)
    assert upright.T_device_cpf is None


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"CameraCalibrations": [{"Label": "camera-slam-left"}]}, r"no entry with Label 'camera-rgb'"),
        (
            device_calibration(params=ARIA_PARAMS[:8]),
            r"CameraCalibrations\[1\] \(camera-rgb\): Projection\.Params: expected 15 numbers",
        ),
        (
            {"CameraCalibrations": [{"Label": "camera-rgb", "Projection": {"Name": "KannalaBrandtK3"}}]},
            r"Projection\.Name is 'KannalaBrandtK3'",
        ),
        ({"model": "PINHOLE", "params": ARIA_PARAMS}, r"model is 'PINHOLE'"),
        ({"model": "FISHEYE624", "params": ARIA_PARAMS}, r"width and height"),
        (
            {"model": "FISHEYE624", "params": ARIA_PARAMS, "width": 8, "height": 8, "T_Device_CPF": [1, 2]},
            r"T_Device_CPF",
        ),
        ({"fx": 1.0}, r"neither an Aria device calibration"),
    ],
)
def test_a_bad_file_is_a_one_line_error_naming_file_and_field(tmp_path, document, message):
    with pytest.raises(ValueError, match=r"bad\.json: .*" + message):
        read_aria_calibration(write_json(tmp_path / "bad.json", document))


def test_missing_and_non_json_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="camera calibration file not found"):
        read_aria_calibration(tmp_path / "nope.json")
    with pytest.raises(ValueError, match=r"x\.jsonl: line 1 is not JSON"):
        read_aria_calibration(write_lines(tmp_path / "x.jsonl", ["{oops", "{}"]))


def test_quaternion_matrix_by_hand():
    half = math.radians(90) / 2
    assert np.allclose(quaternion_matrix(math.cos(half), 0, 0, math.sin(half)), [[0, -1, 0], [1, 0, 0], [0, 0, 1]])
    assert np.allclose(quaternion_matrix(2.0, 0, 0, 0), np.eye(3))  # normalised first


def test_cpf_points_projected_by_hand():
    """Identity poses and no distortion: a CPF point theta off the axis lands f theta from the principal point, then
    turns upright."""
    camera = FisheyeCamera([500.0, 399.5, 299.5] + [0.0] * 12, 800, 600)
    calibration = AriaCalibration(camera, "hand", T_device_camera=np.eye(4), T_device_cpf=np.eye(4))
    theta = math.radians(20)
    point = np.array([[2 * math.sin(theta), 0.0, 2 * math.cos(theta)], [0.0, 0.0, -1.0]])
    pixels = project_cpf_points(point, calibration, backend="numpy")
    raw = (400 + 500 * theta, 300.0)
    assert np.allclose(pixels[0], [600 - raw[1], raw[0]])  # upright: (H - y, x)
    assert np.isnan(pixels[1]).all()  # behind the camera
    moved = AriaCalibration(camera, "hand", T_device_camera=np.eye(4), T_device_cpf=np.diag([1.0, 1, 1, 1]))
    moved.T_device_cpf[:3, 3] = [0.0, 0.0, 1.0]  # the CPF one metre in front of the camera: parallax
    assert np.allclose(project_cpf_points(np.array([[0.0, 0.0, 1.0]]), moved, backend="numpy"), [[300.0, 400.0]])


def test_without_the_cpf_pose_and_projectaria_the_error_says_what_is_needed(tmp_path):
    document = device_calibration()
    del document["DeviceClassInfo"]
    calibration = read_aria_calibration(write_json(tmp_path / "online.json", document))
    with pytest.raises(ValueError, match=r"online\.json: projecting 3D eye gaze needs the central pupil frame's pose"):
        project_cpf_points(np.array([[0.0, 0.0, 1.0]]), calibration, backend="numpy")
    with pytest.raises(ValueError, match="backend must be"):
        project_cpf_points(np.array([[0.0, 0.0, 1.0]]), calibration, backend="opencv")


def test_projection_matches_projectaria_tools_gaze_reprojection(tmp_path):
    pytest.importorskip("projectaria_tools", reason="projectaria-tools is the [aria] extra")
    from projectaria_tools.core import calibration as aria
    from projectaria_tools.core import mps
    from projectaria_tools.core.mps.utils import get_gaze_vector_reprojection

    full = [2 * ARIA_PARAMS[0], 2 * ARIA_PARAMS[1] + 32.5, 2 * ARIA_PARAMS[2] + 32.5] + ARIA_PARAMS[3:]
    document = device_calibration(full, size=None)
    ours = read_aria_calibration(write_json(tmp_path / "factory.json", document))
    device = aria.device_calibration_from_json_string(json.dumps(document))
    rgb = device.get_camera_calib("camera-rgb").rescale(np.array([1408, 1408]), 0.5, np.array([32.0, 32.0]))
    upright = aria.rotate_camera_calib_cw90deg(rgb)
    for yaw, pitch, depth in ((0.1, -0.2, 0.8), (-0.3, 0.25, 2.5), (0.0, 0.0, 1.0)):
        gaze = mps.EyeGaze()
        gaze.yaw, gaze.pitch, gaze.depth = yaw, pitch, depth
        expected = np.asarray(get_gaze_vector_reprojection(gaze, "camera-rgb", device, upright, depth, True)).ravel()
        point = np.asarray(mps.get_eyegaze_point_at_depth(yaw, pitch, depth)).reshape(1, 3)
        assert np.allclose(project_cpf_points(point, ours, backend="projectaria")[0], expected + 0.5, atol=1e-6)
        # our own projection with the same poses written into the file gives the same pixel
        with_poses = AriaCalibration(
            ours.camera,
            ours.source,
            T_device_camera=ours.T_device_camera,
            T_device_cpf=device.get_transform_device_cpf().to_matrix(),
        )
        assert np.allclose(project_cpf_points(point, with_poses, backend="numpy")[0], expected + 0.5, atol=1e-6)
