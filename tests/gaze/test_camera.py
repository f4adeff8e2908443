"""The pinhole camera of geometry.py: hand-computed angles, the metrics' angular error through the same function."""

import math

import numpy as np
import pytest
import torch

from transformers_gazeflow.metrics import saliency as sal
from transformers_gazeflow.models.gazeflow.geometry import (
    DEFAULT_HORIZONTAL_FOV_DEG,
    PinholeCamera,
    check_fov,
    ray_angle_deg,
)


def test_a_90_degree_camera_by_hand():
    camera = PinholeCamera.from_fov(640, 480, 90)
    assert (camera.fx, camera.fy, camera.cx, camera.cy) == pytest.approx((320, 320, 320, 240))
    assert camera.fov_deg == pytest.approx((90.0, 2 * math.degrees(math.atan(240 / 320))))
    # the right edge: 45 degrees to the right; the bottom edge: atan(240 / 320) down
    np.testing.assert_allclose(
        camera.angles_deg(np.array([[640.0, 240.0], [320.0, 480.0]])),
        [[45.0, 0.0], [0.0, math.degrees(math.atan(0.75))]],
        atol=1e-12,
    )
    # Fick angles: u = v = 1 -> azimuth 45, elevation atan(1 / sqrt(2)) (positive downwards)
    np.testing.assert_allclose(camera.angles_deg(np.array([640.0, 560.0])), [45.0, math.degrees(math.atan(2**-0.5))])
    corner = [-45.0, -math.degrees(math.atan(0.75 / 2**0.5))]
    np.testing.assert_allclose(camera.angles_deg(np.array([0.0, 0.0])), corner)
    assert float(camera.angle_between_deg(np.array([320.0, 240.0]), np.array([640.0, 240.0]))) == pytest.approx(45)
    # two rays 45 degrees either side: 90 apart
    assert float(camera.angle_between_deg(np.array([0.0, 240.0]), np.array([640.0, 240.0]))) == pytest.approx(90)


def test_a_vertical_field_of_view_and_intrinsics_for_another_frame_size():
    camera = PinholeCamera.from_fov(640, 480, 90, 90)
    assert camera.fy == pytest.approx(240)
    assert camera.fov_deg == pytest.approx((90, 90))
    halved = PinholeCamera(500.0, 400.0, 330.0, 250.0, 640, 480).for_frame(320, 240)
    assert (halved.fx, halved.fy, halved.cx, halved.cy, halved.width) == pytest.approx((250, 200, 165, 125, 320))
    # the same view: a point keeps its angles when the frame is resized
    full = PinholeCamera(500.0, 400.0, 330.0, 250.0, 640, 480)
    np.testing.assert_allclose(full.angles_deg(np.array([100.0, 60.0])), halved.angles_deg(np.array([50.0, 30.0])))
    unsized = PinholeCamera(500.0, 400.0, 330.0, 250.0)
    assert unsized.for_frame(640, 480).to_dict() == {
        "fx": 500,
        "fy": 400,
        "cx": 330,
        "cy": 250,
        "width": 640,
        "height": 480,
    }


def test_the_metrics_angular_error_is_the_cameras_angle():
    rng = np.random.default_rng(0)
    a, b = rng.uniform(0, 640, (50, 2)), rng.uniform(0, 480, (50, 2))
    camera = PinholeCamera.from_fov(640, 480, DEFAULT_HORIZONTAL_FOV_DEG)
    np.testing.assert_allclose(sal.angular_error(a, b, 640, 480).numpy(), camera.angle_between_deg(a, b), atol=1e-12)
    assert DEFAULT_HORIZONTAL_FOV_DEG == 60.0 and not hasattr(sal, "DEFAULT_FOV_DEG")  # one name, the geometry's
    # torch and numpy alike, and a non-square pixel focal pair stretches y before the angle
    t = ray_angle_deg(torch.tensor([10.0]), torch.tensor([0.0]), torch.tensor([0.0]), torch.tensor([10.0]), 100.0, 50.0)
    n = ray_angle_deg(np.array([10.0]), np.array([0.0]), np.array([0.0]), np.array([10.0]), 100.0, 50.0)
    expected = math.degrees(math.acos(1 / math.sqrt((1 + 0.01) * (1 + 0.04))))
    assert float(t) == pytest.approx(expected) and float(n[0]) == pytest.approx(expected)


@pytest.mark.parametrize("bad", [0, 180, -5, float("nan"), 200])
def test_a_field_of_view_out_of_range_is_refused(bad):
    with pytest.raises(ValueError, match=r"field of view must be in \(0, 180\) degrees"):
        check_fov(bad)
    with pytest.raises(ValueError, match="field of view"):
        PinholeCamera.from_fov(640, 480, 60, bad)


def test_bad_intrinsics_are_refused():
    with pytest.raises(ValueError, match="fx must be a positive number"):
        PinholeCamera(0.0, 1.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="cy must be a finite"):
        PinholeCamera(1.0, 1.0, 0.0, float("inf"))
    with pytest.raises(ValueError, match="width and height go together"):
        PinholeCamera(1.0, 1.0, 0.0, 0.0, width=10)
