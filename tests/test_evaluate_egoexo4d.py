"""examples/evaluate.py on an Ego-Exo4D download (generated raw-format fixture): Center Bias and the Random Walk scored
by the protocol (AUC, F1, AAE), the AAE through each take's own fisheye camera at the size served, or through one
Project Aria calibration's fisheye (``--camera``) or the pinhole with ``--ignore_example_cameras``."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from transformers_gazeflow.models.gazeflow.geometry import FisheyeCamera

from .data.egoexo4d_fixtures import FixtureTake, gaze_2d_lines, make_egoexo4d_root, online_calibration_lines

REPO = Path(__file__).resolve().parents[1]
EVALUATE = REPO / "examples" / "evaluate.py"
SIZE = 128  # the fixture's video: an upright Aria frame at 128 x 128
F_1408 = 610.0  # an equidistant fisheye (no distortion) at the 1408 frame, principal point at its centre
PARAMS = [F_1408, 703.5, 703.5] + [0.0] * 12
TRUTH_X = 1197.0  # the validation take's gaze: 493.5 px right of the principal point (pixels of the 1408 frame)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    return {**os.environ, "HF_DATASETS_CACHE": str(tmp_path_factory.mktemp("hf")), "OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def egoexo_root(tmp_path_factory):
    spread_x = [300.0 + 40 * (n % 20) for n in range(30)]
    spread_y = [500.0 + 30 * (n % 10) for n in range(30)]
    takes = [
        FixtureTake(
            "u1", "train_1", "train", frames=90, gaze_2d={"general_eye_gaze_2d.csv": gaze_2d_lines(spread_x, spread_y)}
        ),
        FixtureTake(
            "u2",
            "val_2",
            "val",
            frames=90,
            gaze_2d={"personalized_eye_gaze_2d.csv": gaze_2d_lines([TRUTH_X] * 30, [703.5] * 30)},
        ),
    ]
    return make_egoexo4d_root(tmp_path_factory.mktemp("egoexo4d"), takes, size=SIZE)


@pytest.fixture(scope="module")
def camera_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("aria") / "camera.json"
    path.write_text(json.dumps({"model": "FISHEYE624", "params": PARAMS, "width": 1408, "height": 1408}))
    return path


def evaluate(env, out, *extra):
    argv = ["--dataset_name", "egoexo4d", "--split", "validation", "--train_split", "train", "--output_dir", out]
    result = subprocess.run(
        [sys.executable, str(EVALUATE), *map(str, argv), *map(str, extra)],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=600,
    )
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-4000:]}"
    return json.loads((Path(out) / "results.json").read_text()), result.stdout


@pytest.mark.parametrize("baseline", ["center_bias", "random_walk"])
def test_baselines_on_egoexo4d_through_the_fisheye(tmp_path, env, egoexo_root, camera_file, baseline):
    common = ("--data_dir", egoexo_root, "--baseline", baseline, "--sigma_px", 4)
    fisheye, _ = evaluate(env, tmp_path / "fisheye", *common, "--camera", camera_file, "--ignore_example_cameras")
    pinhole, stdout = evaluate(env, tmp_path / "pinhole", *common, "--ignore_example_cameras")
    assert "example_cameras" not in fisheye and "example_cameras" not in pinhole
    for results in (fisheye, pinhole):
        assert results["clips"] == 1 and all(k in results["metrics"] for k in ("auc", "f1", "precision", "aae"))
        assert 0 <= results["metrics"]["auc"] <= 1
    assert fisheye["camera"] == {"model": "FISHEYE624", "params": PARAMS, "width": 1408, "height": 1408}
    assert fisheye["camera"] == FisheyeCamera(PARAMS, 1408, 1408).rotated_cw90().to_dict()  # symmetric: turns alike
    assert pinhole["camera"] == {"horizontal_fov_deg": 60.0}
    assert "AAE through a 60 degree pinhole" in stdout and "--camera" in stdout
    # the scores that do not use degrees are the same; the AAE is the fisheye's
    for key in ("auc", "f1", "nss"):
        assert fisheye["metrics"][key] == pytest.approx(pinhole["metrics"][key], nan_ok=True)
    if baseline == "center_bias":  # a map centred on the frame: its point is the centre, within half a pixel
        offset = (TRUTH_X - 703.5) * SIZE / 1408  # px of the 128 frame from the principal point
        focal = F_1408 * SIZE / 1408
        assert fisheye["metrics"]["aae"] == pytest.approx(math.degrees(offset / focal), abs=math.degrees(0.6 / focal))
        pinhole_focal = (SIZE / 2) / math.tan(math.radians(30))
        assert pinhole["metrics"]["aae"] == pytest.approx(
            math.degrees(math.atan(offset / pinhole_focal)), abs=math.degrees(0.6 / pinhole_focal)
        )


def equidistant_sensor(f_1408: float) -> list[float]:
    """An undistorted FISHEYE624 on Aria Gen1's 2880 sensor whose 1408 video has focal ``f_1408`` and its principal
    point at the centre (2880 -> 1408: a 32 px crop, then half size)."""
    return [2 * f_1408, 1439.5, 1439.5] + [0.0] * 12


@pytest.fixture(scope="module")
def two_camera_root(tmp_path_factory):
    """A validation split of two takes served at different sizes, each with its own camera: ``val_full`` (the full
    video, 128 px, f 610 at 1408) and ``val_small`` (the 448 copy, 64 px here, f 500 at 1408)."""
    spread = [300.0 + 40 * (n % 20) for n in range(30)], [500.0 + 30 * (n % 10) for n in range(30)]
    truth = gaze_2d_lines([TRUTH_X] * 30, [703.5] * 30)
    takes = [
        FixtureTake("u1", "train_1", "train", frames=90, gaze_2d={"general_eye_gaze_2d.csv": gaze_2d_lines(*spread)}),
        FixtureTake(
            "u2",
            "val_full",
            "val",
            frames=90,
            gaze_2d={"general_eye_gaze_2d.csv": truth},
            calibration=online_calibration_lines([equidistant_sensor(610.0)]),
        ),
        FixtureTake(
            "u3",
            "val_small",
            "val",
            frames=90,
            downscaled_frames=90,
            gaze_2d={"general_eye_gaze_2d.csv": truth},
            calibration=online_calibration_lines([equidistant_sensor(500.0)]),
        ),
    ]
    return make_egoexo4d_root(tmp_path_factory.mktemp("egoexo4d_two"), takes, size=SIZE, small=SIZE // 2)


def test_each_take_is_measured_through_its_own_camera(tmp_path, env, two_camera_root):
    common = ("--data_dir", two_camera_root, "--baseline", "center_bias", "--sigma_px", 4)
    results, stdout = evaluate(env, tmp_path / "own", *common)
    assert results["clips"] == 2 and "degrees of 2 of 2 clips through the camera each carries (FISHEYE624" in stdout
    cameras = results["example_cameras"]
    for clip, f_1408, size in (("val_full_t0_t3", 610.0, SIZE), ("val_small_t0_t3", 500.0, SIZE // 2)):
        scale = size / 1408
        assert cameras[clip]["width"] == cameras[clip]["height"] == size
        assert cameras[clip]["params"] == pytest.approx(
            [f_1408 * scale, 704 * scale - 0.5, 704 * scale - 0.5] + [0] * 12
        )
    scores = np.load(tmp_path / "own" / "frame_scores.npz")
    keys = scores["keys"].tolist()
    for clip, f_1408, size in (("val_full_t0_t3", 610.0, SIZE), ("val_small_t0_t3", 500.0, SIZE // 2)):
        aae = [scores["aae"][i] for i, key in enumerate(keys) if key.startswith(f"{clip}#")]
        assert len(aae) == 8  # every protocol frame is a fixation
        # Center Bias points at the frame centre, the principal point: an equidistant fisheye sees d / f rad there,
        # whatever the size served (d and f scale alike)
        focal = f_1408 * size / 1408
        expected = math.degrees((TRUTH_X - 703.5) / f_1408)
        assert np.mean(aae) == pytest.approx(expected, abs=math.degrees(0.6 / focal))
    assert results["metrics"]["aae"] == pytest.approx(
        np.mean([math.degrees(493.5 / f) for f in (610.0, 500.0)]), abs=1.6
    )
    # --ignore_example_cameras: the protocol's 60 degree pinhole for both, at each one's size (the same angle)
    pinhole, _ = evaluate(env, tmp_path / "pinhole", *common, "--ignore_example_cameras")
    focal = 704 / math.tan(math.radians(30))  # at 1408 px; offsets and focal scale alike with the size
    expected = math.degrees(math.atan((TRUTH_X - 703.5) / focal))
    assert "example_cameras" not in pinhole
    assert pinhole["metrics"]["aae"] == pytest.approx(expected, abs=math.degrees(0.6 / (focal * 64 / 1408)))


def test_the_pinhole_note_names_the_protocols_field_of_view_not_the_events(capsys):
    """The AAE always goes through the protocol's 60 degree pinhole; --fov_deg only sets the events' camera, so the
    note printed for Ego-Exo4D clips without a camera of their own must not call --fov_deg the AAE's."""
    from tests.script_loading import load_script

    evaluate = load_script(EVALUATE, "evaluate_for_note")
    args = evaluate.parse_args(
        ["--baseline", "center_bias", "--dataset_name", "egoexo4d", "--data_dir", "D", "--fov_deg", "90"]
    )
    assert (
        evaluate.evaluation_camera(args, [{"camera_model": "none", "camera_params": [], "width": 64, "height": 64}])
        is None
    )
    printed = capsys.readouterr().out
    assert "AAE through a 60 degree pinhole" in printed and "--fov_deg 90" in printed
