"""The per-wearer correction: a known offset recovered despite outliers, the model chosen by held-out error, the
calibration file and its model check; the tracker files it reads (gaze.csv, EGTEA BeGaze, Ego4D)."""

import json

import numpy as np
import pytest

from tests.data.raw_fixtures import write_begaze, write_ego4d_gaze_csv
from transformers_gazeflow.data.gaze_types import BLINK_OR_OTHER, FIXATION, UNTRACKED
from transformers_gazeflow.data.tracker_gaze import read_tracker_gaze
from transformers_gazeflow.gaze.wearer import WearerCalibration, calibration_for_model, choose_and_fit, fit_correction


def test_a_known_offset_is_recovered_despite_outliers():
    rng = np.random.default_rng(0)
    predicted = rng.uniform(20, 620, (120, 2))
    tracker = predicted + [12.0, -7.0] + rng.normal(0, 2, (120, 2))
    tracker[::8] += rng.normal(0, 150, (15, 2))  # one frame in eight far off (a bad tracker sample)
    correction = fit_correction(predicted, tracker, 640, 480)
    assert correction.offset_px == pytest.approx((12.0, -7.0), abs=0.6)
    plain_mean = (tracker - predicted).mean(axis=0)  # what a least-squares offset would give
    assert np.abs(plain_mean - [12, -7]).max() > 2 * np.abs(np.array(correction.offset_px) - [12, -7]).max()
    # exact data by hand: one offset, no noise
    exact = fit_correction(np.array([[10.0, 20.0], [30.0, 40.0]]), np.array([[13.0, 18.0], [33.0, 38.0]]), 64, 48)
    assert exact.offset_px == pytest.approx((3.0, -2.0)) and exact.scale == (1.0, 1.0)


def test_the_model_is_chosen_by_held_out_error():
    rng = np.random.default_rng(1)
    predicted = rng.uniform(20, 620, (200, 2))
    centre = np.array([320.0, 240.0])
    offset_only = predicted + [5.0, 5.0] + rng.normal(0, 3, (200, 2))
    correction, errors = choose_and_fit(predicted, offset_only, 640, 480)
    assert correction.model == "offset" and set(errors) == {"offset", "offset_scale"}
    scaled = centre + 1.2 * (predicted - centre) + [5.0, -10.0] + rng.normal(0, 3, (200, 2))
    correction, errors = choose_and_fit(predicted, scaled, 640, 480)
    assert correction.model == "offset_scale" and errors["offset_scale"] < 0.5 * errors["offset"]
    assert correction.scale == pytest.approx((1.2, 1.2), abs=0.02)
    assert correction.offset_px == pytest.approx((5.0, -10.0), abs=1.0)
    few, errors = choose_and_fit(predicted[:10], scaled[:10], 640, 480)
    assert few.model == "offset" and errors == {}  # too few frames to compare: the offset
    # a few seconds on one object: the gaze spans a tenth of the frame, which fixes an offset but not a scale
    narrow = centre + 0.1 * (predicted - centre)
    narrow_tracker = centre + 1.2 * (narrow - centre) + [5.0, -10.0] + rng.normal(0, 3, (200, 2))
    one_object, errors = choose_and_fit(narrow, narrow_tracker, 640, 480)
    assert one_object.model == "offset" and errors == {}


def test_the_calibration_file_round_trips_and_refuses_another_model(tmp_path):
    correction = fit_correction(np.zeros((1, 2)), np.array([[64.0, -48.0]]), 640, 480)
    calibration = WearerCalibration.from_correction(correction, 640, 480, "models/a", "0123abcd", {"frames": 1})
    assert calibration.offset == pytest.approx((0.1, -0.1))
    path = calibration.write(tmp_path / "calib.json")
    again = WearerCalibration.read(path)
    assert again == calibration
    np.testing.assert_allclose(
        again.apply(np.array([[0.5, 0.5], [0.95, 0.05]])), [[0.6, 0.4], [1.0, 0.0]], atol=1e-6
    )  # clamped to the frame
    again.check_model("0123abcd", "models/a")
    with pytest.raises(ValueError, match="fitted for the model models/a .* not for models/b"):
        again.check_model("ffff", "models/b", where=str(path))
    (tmp_path / "other.json").write_text(json.dumps({"format": "something else"}))
    with pytest.raises(ValueError, match="not a gazeflow calibration file"):
        WearerCalibration.read(tmp_path / "other.json")
    record = json.loads(path.read_text())
    record["scale"] = [0, 1]
    (tmp_path / "bad.json").write_text(json.dumps(record))
    with pytest.raises(ValueError, match=r"bad.json: scale\[0\]: expected a finite number in \[0.01, 100\], got 0$"):
        WearerCalibration.read(tmp_path / "bad.json")
    with pytest.raises(FileNotFoundError, match="calibration file not found"):
        WearerCalibration.read(tmp_path / "missing.json")


def test_the_one_check_of_a_calibration_against_a_model_reads_a_file_or_takes_the_object(tmp_path):
    """What the pipeline and ``gazeflow predict`` both run: a path is read, an object taken as it is, and either is
    refused for another model's weights, the error naming the file (or "the calibration") and the model."""
    calibration = WearerCalibration("offset", (0.1, 0.0), (1.0, 1.0), "models/a", "0123abcd")
    path = calibration.write(tmp_path / "calib.json")
    assert calibration_for_model(path, "0123abcd", "models/a") == calibration
    assert calibration_for_model(calibration, "0123abcd", "here") is calibration
    with pytest.raises(ValueError, match=f"^{path} was fitted for the model models/a .* not for models/b "):
        calibration_for_model(str(path), "ffff", "models/b")
    with pytest.raises(ValueError, match="^the calibration was fitted for the model models/a .* not for the model"):
        calibration_for_model(calibration, "ffff", "the model")
    with pytest.raises(FileNotFoundError, match="calibration file not found"):
        calibration_for_model(tmp_path / "missing.json", "0123abcd", "models/a")


def test_tracker_gaze_from_a_gaze_csv(tmp_path):
    path = tmp_path / "tracker.csv"
    path.write_text(
        "frame_idx,x_norm,y_norm,sample_id\n0,0.1,0.2,-1\n0,0.9,0.9,0\n1,,,-1\n2,1.5,0.5,-1\n"
        "3,0.3,0.4,-1\n3,0.5,0.6,-1\n9,0.5,0.5,-1\n"
    )
    gaze = read_tracker_gaze(path, 5, 24)
    assert gaze.gaze_type.tolist() == [FIXATION, UNTRACKED, UNTRACKED, FIXATION, UNTRACKED]
    np.testing.assert_allclose(gaze.gaze[[0, 3]], [[0.1, 0.2], [0.4, 0.5]])  # sample rows ignored, a frame averaged
    coded = tmp_path / "coded.csv"
    coded.write_text("frame_idx,x_norm,y_norm,gaze_type\n0,0.1,0.2,3\n1,0.2,0.2,2\n")
    assert read_tracker_gaze(coded, 2, 24).gaze_type.tolist() == [BLINK_OR_OTHER, 2]


def test_a_tracker_csv_with_a_byte_order_mark_or_spaced_header_reads_like_plain_utf8(tmp_path):
    rows = "frame_idx,x_norm,y_norm,gaze_type\n0,0.1,0.2,1\n1,0.3,0.4,2\n"
    plain, marked, wide = tmp_path / "plain.csv", tmp_path / "marked.csv", tmp_path / "wide.csv"
    plain.write_text(rows)
    marked.write_bytes(b"\xef\xbb\xbf" + rows.encode())
    wide.write_bytes(rows.replace(",", ", ").encode("utf-16"))  # UTF-16 with its mark, cells after ", "
    expected = read_tracker_gaze(plain, 3, 24)
    assert expected.gaze_type.tolist() == [FIXATION, 2, UNTRACKED]
    for other in (marked, wide):
        again = read_tracker_gaze(other, 3, 24)
        assert again.kind == "gaze CSV" and again.gaze_type.tolist() == expected.gaze_type.tolist()
        np.testing.assert_array_equal(again.gaze, expected.gaze)


@pytest.mark.parametrize("code", ["300", "-1", "5", "99999999999999999999"])
def test_a_tracker_gaze_type_outside_the_codes_is_one_line_naming_file_line_and_column(tmp_path, code):
    path = tmp_path / "tracker.csv"
    path.write_text(f"frame_idx,x_norm,y_norm,gaze_type\n0,0.1,0.2,1\n1,0.3,0.4,{code}\n")
    with pytest.raises(ValueError) as caught:
        read_tracker_gaze(path, 2, 24)
    assert str(caught.value) == (
        f"{path}: line 3: gaze_type: expected a gaze-type code (0 untracked, 1 fixation, 2 saccade, 3 blink/other, "
        f"4 off-frame), got {code!r}"
    )


def test_tracker_gaze_from_egtea_and_ego4d_files(tmp_path):
    samples = [(640.0, 480.0, frame, "Fixation") for frame in range(0, 30)]
    begaze = write_begaze(tmp_path / "OP01-R01-PastaSalad.txt", samples)
    clip = read_tracker_gaze(begaze, 4, 24, "OP01-R01-PastaSalad-1000-2000-F000011-F000014.mp4")
    assert clip.kind == "EGTEA BeGaze export" and clip.gaze_type.tolist() == [FIXATION] * 4
    np.testing.assert_allclose(clip.gaze, 0.5)
    t = np.arange(0, 4, 1 / 30)
    ego4d = write_ego4d_gaze_csv(tmp_path / "uid.mp4", t, np.full_like(t, 0.25), np.full_like(t, 0.75))
    gaze = read_tracker_gaze(ego4d, 30, 30, "uid_t2_t3.mp4")  # a GLC clip from second 2
    assert gaze.kind == "Ego4D gaze CSV" and (gaze.gaze_type != UNTRACKED).all()
    np.testing.assert_allclose(gaze.gaze, [[0.25, 0.25]] * 30, atol=1e-6)  # y flipped to top-left origin
    past_the_end = read_tracker_gaze(ego4d, 30, 30, "uid_t5_t6.mp4")
    assert (past_the_end.gaze_type == UNTRACKED).all()
    junk = tmp_path / "junk.txt"
    junk.write_text("hello\nworld\n")
    with pytest.raises(ValueError, match="not a gaze file gazeflow reads"):
        read_tracker_gaze(junk, 5, 24)
    with pytest.raises(FileNotFoundError, match="tracker gaze file not found"):
        read_tracker_gaze(tmp_path / "nope.csv", 5, 24)
