"""geometry.FisheyeCamera (Project Aria's FISHEYE624): hand-built cases, the frame transforms, the metrics through it,
and values computed with projectaria-tools where it is installed (the ``[aria]`` extra)."""

import math

import numpy as np
import pytest
import torch

from transformers_gazeflow import FisheyeCamera, PinholeCamera
from transformers_gazeflow.metrics import GazeEvaluator, angular_error

# a plausible Aria RGB camera at 1408x1408 (made-up numbers of the right size)
ARIA = [610.0, 715.0, 705.0, 0.41, -0.47, 0.04, 1.3, -1.77, 0.65, 8e-5, 6e-4, -1.1e-3, 6e-4, -2.3e-3, 1.7e-3]


def equidistant(f=500.0, cx=399.5, cy=299.5, width=800, height=600):
    """FISHEYE624 with no distortion: the equidistant fisheye, a pixel d from the principal point sees d / f rad."""
    return FisheyeCamera([f, cx, cy] + [0.0] * 12, width, height)


def test_equidistant_fisheye_angle_is_distance_over_focal():
    camera = equidistant()
    centre = np.array([400.0, 300.0])  # Aria's principal point (399.5, 299.5) is our continuous (400, 300)
    for distance in (0.0, 50.0, 300.0, 700.0):
        for direction in ((1.0, 0.0), (0.0, -1.0), (0.6, 0.8)):
            point = centre + distance * np.array(direction)
            assert camera.angle_between_deg(centre, point) == pytest.approx(math.degrees(distance / 500.0), abs=1e-9)
    # two off-centre points: the angle between their rays, each theta = d / f from the axis
    a, b = centre + [250.0, 0.0], centre + [0.0, 250.0]
    theta = 250.0 / 500.0
    ray_a, ray_b = np.array([math.sin(theta), 0, math.cos(theta)]), np.array([0, math.sin(theta), math.cos(theta)])
    assert camera.angle_between_deg(a, b) == pytest.approx(math.degrees(math.acos(ray_a @ ray_b)), abs=1e-9)


def test_equidistant_projection_by_hand():
    camera = equidistant()
    theta = math.radians(40.0)
    ray = np.array([math.sin(theta) * 0.6, math.sin(theta) * 0.8, math.cos(theta)])
    assert np.allclose(camera.project(ray), [400 + 500 * theta * 0.6, 300 + 500 * theta * 0.8], atol=1e-9)
    assert np.isnan(camera.project(np.array([0.1, 0.0, -1.0]))).all()  # behind the camera


def test_a_pinhole_gets_aria_degrees_wrong_away_from_the_centre():
    camera, centre = equidistant(), np.array([400.0, 300.0])
    pinhole = PinholeCamera(500.0, 500.0, 400.0, 300.0)
    near, far = centre + [10.0, 0.0], centre + [390.0, 0.0]
    assert float(pinhole.angle_between_deg(centre, near)) == pytest.approx(
        camera.angle_between_deg(centre, near), rel=1e-3
    )
    assert camera.angle_between_deg(centre, far) - float(pinhole.angle_between_deg(centre, far)) > 6.0  # 44.7 vs 38


def test_distortion_round_trip_and_angles_against_the_rays():
    camera = FisheyeCamera(ARIA, 1408, 1408)
    pixels = np.random.default_rng(0).uniform(20, 1388, (400, 2))
    rays = camera.unproject(pixels)
    assert rays.shape == (400, 3) and np.allclose(rays[:, 2], 1.0)
    assert np.abs(camera.project(rays) - pixels).max() < 1e-6
    fick = camera.angles_deg(pixels)
    assert np.allclose(fick[:, 0], np.degrees(np.arctan2(rays[:, 0], rays[:, 2])))
    assert np.allclose(fick[:, 1], np.degrees(np.arctan2(rays[:, 1], np.hypot(rays[:, 0], rays[:, 2]))))


def test_torch_points_come_back_as_torch():
    camera = FisheyeCamera(ARIA, 1408, 1408)
    a = torch.tensor([[700.0, 700.0], [100.0, 1300.0]], dtype=torch.float64)
    b = torch.tensor([[800.0, 650.0], [120.0, 1290.0]], dtype=torch.float64)
    angle = camera.angle_between_deg(a, b)
    assert isinstance(angle, torch.Tensor) and angle.dtype == torch.float64
    assert np.allclose(angle.numpy(), camera.angle_between_deg(a.numpy(), b.numpy()))


def test_turning_upright_and_resizing_keep_every_ray():
    camera = FisheyeCamera(ARIA, 1408, 1408)
    upright = camera.rotated_cw90()
    x, y = np.random.default_rng(1).uniform(-0.8, 0.8, (2, 50))
    raw = camera.project(np.stack([x, y, np.ones_like(x)], -1))
    # the upright camera is the raw one turned clockwise: the ray (x, y, z) is (-y, x, z) there, its pixel (H - v, u)
    assert np.allclose(
        upright.project(np.stack([-y, x, np.ones_like(x)], -1)), np.stack([1408 - raw[:, 1], raw[:, 0]], -1)
    )
    small = upright.for_frame(448, 448)
    ray = np.stack([x, y, np.ones_like(x)], -1)
    assert np.allclose(small.project(ray), upright.project(ray) * 448 / 1408)  # a resized copy: pixels scale
    assert upright.for_frame(1408, 1408) is upright
    with pytest.raises(ValueError, match="only uniform resizes"):
        camera.for_frame(1408, 704)


def test_bad_parameters_are_one_line_errors():
    with pytest.raises(ValueError, match="15 finite parameters"):
        FisheyeCamera(ARIA[:14], 1408, 1408)
    with pytest.raises(ValueError, match="focal length f"):
        FisheyeCamera([-1.0] + ARIA[1:], 1408, 1408)
    with pytest.raises(ValueError, match="frame size"):
        FisheyeCamera(ARIA, 0, 1408)


def test_the_aae_goes_through_the_given_camera():
    camera = equidistant(width=800, height=600)
    centre = torch.tensor([[400.0, 300.0]], dtype=torch.float64)
    far = torch.tensor([[790.0, 300.0]], dtype=torch.float64)
    assert float(angular_error(far, centre, 800, 600, camera=camera)) == pytest.approx(math.degrees(390 / 500))
    # the same camera at another size of the same view: the same rays
    assert float(angular_error(far / 2, centre / 2, 400, 300, camera=camera)) == pytest.approx(math.degrees(390 / 500))
    pinhole = float(angular_error(far, centre, 800, 600))  # the protocol's 60 degree pinhole
    assert pinhole == pytest.approx(math.degrees(math.atan(390 / (400 / math.tan(math.radians(30))))))


def test_the_evaluator_scores_aae_through_its_camera():
    height = width = 64
    gaze = np.full((64, 2), 0.5)
    gaze[:, 0] = 0.9  # the truth off-centre, the prediction at the centre
    truth = {"clip_id": "c", "gaze": gaze, "gaze_type": np.ones(64, np.int8), "valid": np.ones(64, bool)}
    truth.update(width=width, height=height)
    at_centre = np.full((1, 64, 2), 0.5)  # one sample at the frame centre: its map's centre of mass is (32, 32)
    camera = equidistant(f=40.0, cx=31.5, cy=31.5, width=width, height=height)
    scores = {}
    for name, kwargs in (("pinhole", {}), ("fisheye", {"camera": camera})):
        evaluator = GazeEvaluator(sigma_px=2.0, **kwargs)
        evaluator.add(truth, at_centre)
        scores[name] = evaluator.compute().metrics["aae"]
    assert scores["fisheye"] == pytest.approx(math.degrees((0.9 * 64 - 32) / 40.0), abs=1e-4)  # float32 maps
    assert scores["pinhole"] == pytest.approx(
        math.degrees(math.atan((0.9 * 64 - 32) / (32 / math.tan(math.pi / 6)))), abs=1e-4
    )


# --- against projectaria-tools (the [aria] extra) --------------------------------------------------------------------


@pytest.fixture(scope="module")
def aria_calibration():
    return pytest.importorskip("projectaria_tools.core.calibration", reason="projectaria-tools is the [aria] extra")


def aria_camera(calibration, params, size=1408):
    from projectaria_tools.core.sophus import SE3

    return calibration.CameraCalibration(
        "camera-rgb", calibration.CameraModelType.FISHEYE624, np.asarray(params), SE3(), size, size, None, math.pi, ""
    )


def test_projection_and_unprojection_match_projectaria_tools(aria_calibration):
    reference = aria_camera(aria_calibration, ARIA)
    camera = FisheyeCamera(ARIA, 1408, 1408)
    rng = np.random.default_rng(2)
    rays = np.c_[rng.uniform(-1.5, 1.5, (300, 2)), np.ones(300)]
    expected = np.array([reference.project_no_checks(ray) for ray in rays]) + 0.5  # its pixel centres at integers
    assert np.abs(camera.project(rays) - expected).max() < 1e-9
    pixels = rng.uniform(0, 1408, (300, 2))
    expected_rays = np.array([reference.unproject_no_checks(p - 0.5) for p in pixels])
    assert np.abs(camera.unproject(pixels) - expected_rays).max() < 1e-9


def test_rotation_and_rescale_match_projectaria_tools(aria_calibration):
    reference = aria_camera(aria_calibration, ARIA)
    camera = FisheyeCamera(ARIA, 1408, 1408)
    upright = aria_calibration.rotate_camera_calib_cw90deg(reference)
    assert np.allclose(upright.get_projection_params(), camera.rotated_cw90().params, atol=1e-12)
    cropped = reference.rescale(np.array([704, 704]), 0.25, np.array([32.0, 32.0]))
    assert np.allclose(cropped.get_projection_params(), camera.scaled(0.25, 704, 704, (32.0, 32.0)).params, atol=1e-12)
    half = reference.rescale(np.array([448, 448]), 448 / 1408)
    assert np.allclose(half.get_projection_params(), camera.for_frame(448, 448).params, atol=1e-12)


# --- a camera in the unified example schema (camera_model, camera_params) --------------------------------------------


def test_cameras_as_example_fields_and_back():
    from transformers_gazeflow.models.gazeflow.geometry import PinholeCamera, camera_from_fields, camera_to_fields

    assert camera_to_fields(None) == ("none", [])
    assert camera_from_fields("none", [], 64, 48) is None and camera_from_fields("", None, 64, 48) is None
    pinhole = PinholeCamera(50.0, 52.0, 31.0, 23.5, 64, 48)
    assert camera_to_fields(pinhole) == ("PINHOLE", [50.0, 52.0, 31.0, 23.5])
    assert camera_from_fields("PINHOLE", [50.0, 52.0, 31.0, 23.5], 64, 48) == pinhole
    fisheye = FisheyeCamera([30.0, 31.5, 23.5] + [0.0] * 12, 64, 48)
    model, params = camera_to_fields(fisheye)
    assert model == "FISHEYE624" and params == [30.0, 31.5, 23.5] + [0.0] * 12
    assert camera_from_fields(model, np.asarray(params), 64, 48) == fisheye
    with pytest.raises(ValueError, match="camera_model must be one of"):
        camera_from_fields("KANNALA_BRANDT_K3", [1.0] * 8, 64, 48)
    with pytest.raises(ValueError, match="takes 4 camera_params"):
        camera_from_fields("PINHOLE", [50.0, 52.0, 31.0], 64, 48)
    with pytest.raises(ValueError, match="takes no camera_params"):
        camera_from_fields("none", [1.0], 64, 48)
    with pytest.raises(ValueError, match="FISHEYE624 takes 15"):
        camera_from_fields("FISHEYE624", [30.0, 31.5, 23.5], 64, 48)
    with pytest.raises(TypeError, match="PinholeCamera, a FisheyeCamera or None"):
        camera_to_fields("aria")
