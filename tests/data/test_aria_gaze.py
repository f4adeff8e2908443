"""Aria eye-gaze files (Ego-Exo4D's 2D CSVs, MPS's 3D CSVs) and the rule that puts 10 Hz gaze on video frames."""

import math

import numpy as np
import pytest

from transformers_gazeflow.data import gaze_types as codes
from transformers_gazeflow.data.aria_gaze import (
    AriaGazeSamples,
    combined_yaw,
    frame_gaze,
    is_mps_eye_gaze_csv,
    nearest_samples,
    read_gaze_2d_csv,
    read_mps_eye_gaze_csv,
)
from transformers_gazeflow.data.gaze_common import ParseReport

from .egoexo4d_fixtures import gaze_2d_lines, mps_lines, write_lines


def unit(px):
    return (px + 0.5) / 1408  # projectaria_tools' pixel centres at integers -> unit coordinates of the 1408 frame


def test_each_frame_takes_the_sample_within_half_a_period(tmp_path):
    path = write_lines(tmp_path / "g.csv", gaze_2d_lines([100.0, 200.0, 300.0, 400.0, 500.0], [700.0] * 5))
    track = frame_gaze(read_gaze_2d_csv(path), num_frames=15, fps=30)
    # row n is at n / 10 s; frame i at i / 30 s takes row round(i / 3): frames 3n - 1, 3n, 3n + 1 read row n
    rows = [0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4]
    assert np.allclose(track.gaze[:14, 0], unit(np.array([100.0, 200.0, 300.0, 400.0, 500.0])[rows]))
    assert np.allclose(track.gaze[:, 1], unit(700.0))
    # frame 14 (0.467 s) is 67 ms from the last row, more than half a period: untracked, holding the last point
    assert track.gaze_type.tolist() == [codes.FIXATION] * 14 + [codes.UNTRACKED]
    assert track.gaze[14, 0] == pytest.approx(unit(500.0))


def test_an_empty_row_leaves_its_frames_untracked_and_nothing_is_interpolated(tmp_path):
    path = write_lines(tmp_path / "g.csv", gaze_2d_lines([100.0, 200.0, None, 400.0], [700.0, 700.0, None, 700.0]))
    samples = read_gaze_2d_csv(path)
    assert samples.report.rows_read == 4 and samples.report.rows_kept == 4
    assert any("1 row(s) have no gaze" in note for note in samples.report.notes)
    track = frame_gaze(samples, num_frames=10, fps=30)
    assert track.gaze_type.tolist() == [1, 1, 1, 1, 1, 0, 0, 0, 1, 1]  # row 2 covered frames 5, 6, 7
    assert np.allclose(track.gaze[5:8, 0], unit(200.0))  # they hold the last valid point (fill_untracked)


def test_ties_go_to_the_later_sample_and_the_period_comes_from_the_timestamps(tmp_path):
    # 2 Hz rows (500 ms apart) and a 4 fps video: frame 1 at 0.25 s lies halfway between rows 0 and 1
    lines = gaze_2d_lines([100.0, 200.0, 300.0], [700.0] * 3, period_us=500_000)
    samples = read_gaze_2d_csv(write_lines(tmp_path / "g.csv", lines))
    assert samples.period_s == pytest.approx(0.5)
    track = frame_gaze(samples, num_frames=5, fps=4)
    assert np.allclose(track.gaze[:, 0], unit(np.array([100.0, 200.0, 200.0, 300.0, 300.0])))
    assert (track.gaze_type == codes.FIXATION).all()  # every frame is within 0.25 s of a row


def test_nearest_samples_by_hand():
    times = np.array([0.0, 0.1, 0.2])
    frames = np.array([-0.06, -0.04, 0.04, 0.05, 0.06, 0.26])
    assert nearest_samples(times, frames, 0.05).tolist() == [-1, 0, 0, 1, 1, -1]  # 0.05: a tie, the later one
    assert nearest_samples(np.zeros(0), frames, 0.05).tolist() == [-1] * 6


def test_a_point_off_the_frame_is_off_frame_and_clamped(tmp_path):
    path = write_lines(tmp_path / "g.csv", gaze_2d_lines([1500.0, 703.5], [-20.0, 703.5]))
    track = frame_gaze(read_gaze_2d_csv(path), num_frames=4, fps=30)
    assert track.gaze_type.tolist() == [codes.OFF_FRAME, codes.OFF_FRAME, codes.FIXATION, codes.FIXATION]
    assert track.gaze[0].tolist() == [1.0, 0.0]
    assert np.allclose(track.gaze[3], [0.5, 0.5])  # pixel 703.5 of 1408 is the frame's middle


@pytest.mark.parametrize(
    "variant",
    ["bom_crlf", "column_order", "frame_number", "no_timestamps", "extra_column"],
)
def test_file_variants_read_alike(tmp_path, variant):
    x, y = [100.0, None, 300.0, 400.0], [600.0, None, 650.0, 700.0]
    reference = read_gaze_2d_csv(write_lines(tmp_path / "ref.csv", gaze_2d_lines(x, y)))
    if variant == "bom_crlf":
        path = write_lines(tmp_path / "v.csv", gaze_2d_lines(x, y), bom=True, crlf=True)
    elif variant == "column_order":
        path = write_lines(
            tmp_path / "v.csv", gaze_2d_lines(x, y, columns=("y", "x", "tracking_timestamp_us", "frame_num"))
        )
    elif variant == "frame_number":
        path = write_lines(
            tmp_path / "v.csv", gaze_2d_lines(x, y, columns=("frame_number", "tracking_timestamp_us", "x", "y"))
        )
    elif variant == "no_timestamps":
        path = write_lines(tmp_path / "v.csv", gaze_2d_lines(x, y, columns=("frame_num", "x", "y")))
    else:
        lines = gaze_2d_lines(x, y)
        lines = [lines[0] + ",confidence"] + [line + ",0.9" for line in lines[1:]]
        path = write_lines(tmp_path / "v.csv", lines)
    samples = read_gaze_2d_csv(path)
    assert np.allclose(samples.time_s, reference.time_s)
    assert np.allclose(samples.points, reference.points, equal_nan=True)


def test_without_frame_num_the_timestamps_place_the_rows(tmp_path):
    lines = gaze_2d_lines([100.0, 200.0, 300.0], [700.0] * 3, columns=("tracking_timestamp_us", "x", "y"))
    samples = read_gaze_2d_csv(write_lines(tmp_path / "g.csv", lines))
    assert np.allclose(samples.time_s, [0.0, 0.1, 0.2]) and samples.period_s == pytest.approx(0.1)
    assert any("tracking_timestamp_us" in note for note in samples.report.notes)


def test_a_row_without_a_place_in_time_is_counted(tmp_path):
    lines = gaze_2d_lines([100.0, 200.0], [700.0] * 2) + ["abc,5,300,700"]
    samples = read_gaze_2d_csv(write_lines(tmp_path / "g.csv", lines))
    assert samples.report.rows_read == 3 and samples.report.rows_kept == 2 and samples.report.rows_skipped == 1


def test_a_file_without_x_or_y_is_a_one_line_error(tmp_path):
    path = write_lines(tmp_path / "g.csv", ["frame_num,tracking_timestamp_us,gaze_x", "0,1,2"])
    with pytest.raises(ValueError, match=r"g\.csv: the 2D eye-gaze CSV has no column x or y"):
        read_gaze_2d_csv(path)
    with pytest.raises(ValueError, match="is empty"):
        read_gaze_2d_csv(write_lines(tmp_path / "empty.csv", [""]))


def test_frame_gaze_checks_its_arguments():
    samples = AriaGazeSamples(np.zeros(1), np.full((1, 2), 0.5), 0.1, ParseReport("x", "y"))
    with pytest.raises(ValueError, match="fps > 0"):
        frame_gaze(samples, 3, 0.0)


# --- MPS 3D eye gaze ------------------------------------------------------------------------------------------------

YAW, PITCH, DEPTH = [0.1, None, -0.2, 0.3], [0.05, 0.0, -0.1, 0.2], [0.8, 0.8, None, 2.0]


@pytest.mark.parametrize("schema", ["current", "legacy"])
def test_mps_schemas_read_alike(tmp_path, schema):
    path = write_lines(tmp_path / "general_eye_gaze.csv", mps_lines(YAW, PITCH, DEPTH, schema, start_us=5_000_000))
    assert is_mps_eye_gaze_csv(path)
    gaze = read_mps_eye_gaze_csv(path)
    assert gaze.timestamp_us.tolist() == [5_000_000, 5_100_000, 5_200_000, 5_300_000]
    assert np.allclose(gaze.yaw, [0.1, np.nan, -0.2, 0.3], equal_nan=True)  # an empty yaw: no gaze
    assert np.isnan(gaze.pitch[1]) and np.allclose(gaze.pitch[[0, 2, 3]], [0.05, -0.1, 0.2])
    assert gaze.depth_m.tolist() == [0.8, 0.8, 1.0, 2.0]  # an empty depth: Aria's 1 m
    point = gaze.points_cpf()[0]
    direction = np.array([math.tan(0.1), math.tan(0.05), 1.0])
    assert np.allclose(point, 0.8 * direction / np.linalg.norm(direction))


def test_per_eye_yaws_combine_as_projectaria_tools_defines_it(tmp_path):
    left, right = np.array([0.1, -0.3, 0.2]), np.array([0.3, -0.1, 0.2])
    # the two rays from (+-0.0315, 0, 0) meet at x = 0.0315 (tl + tr) / (tr - tl), z = 0.063 / (tr - tl)
    tl, tr = np.tan(left[:2]), np.tan(right[:2])
    assert np.allclose(combined_yaw(left, right)[:2], np.arctan((0.0315 * (tl + tr) / (tr - tl)) / (0.063 / (tr - tl))))
    assert combined_yaw(left, right)[2] == pytest.approx(0.2)  # parallel rays: their common direction
    lines = mps_lines([0.2], [0.1], [1.5], "vergence")
    gaze = read_mps_eye_gaze_csv(write_lines(tmp_path / "v.csv", lines))
    assert gaze.yaw[0] == pytest.approx(0.2) and gaze.depth_m[0] == pytest.approx(1.5)


def test_mps_errors_name_the_file(tmp_path):
    path = write_lines(tmp_path / "bad.csv", ["tracking_timestamp_us,pitch_rads_cpf", "1,0.1"])
    assert not is_mps_eye_gaze_csv(path)
    with pytest.raises(ValueError, match=r"bad\.csv: an MPS eye-gaze CSV needs yaw_rads_cpf"):
        read_mps_eye_gaze_csv(path)


def test_mps_reading_matches_projectaria_tools(tmp_path):
    mps = pytest.importorskip("projectaria_tools.core.mps", reason="projectaria-tools is the [aria] extra")
    yaw, pitch, depth = [0.1, -0.2, 0.3], [0.05, -0.1, 0.2], [0.8, 1.3, 2.0]
    for schema in ("current", "legacy"):
        path = write_lines(tmp_path / f"{schema}.csv", mps_lines(yaw, pitch, depth, schema))
        theirs = mps.read_eyegaze(str(path))
        ours = read_mps_eye_gaze_csv(path)
        assert np.allclose(ours.yaw, [g.yaw for g in theirs], atol=1e-6)
        assert np.allclose(ours.pitch, [g.pitch for g in theirs], atol=1e-6)
        assert np.allclose(ours.depth_m, [g.depth for g in theirs], atol=1e-6)
        expected = [mps.get_eyegaze_point_at_depth(g.yaw, g.pitch, g.depth) for g in theirs]
        assert np.allclose(ours.points_cpf(), np.asarray(expected).reshape(-1, 3), atol=1e-6)
    _, combined, _ = mps.compute_depth_and_combined_gaze_direction(0.1, 0.3, 0.05)
    assert combined_yaw(np.array([0.1]), np.array([0.3]))[0] == pytest.approx(combined, abs=1e-6)
