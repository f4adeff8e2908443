"""Event metrics against recorded labels: onset matching by hand, a perfect prediction, a late one, blinks."""

import math

import numpy as np
import pytest

from tests.gaze.test_events import along_the_horizon
from transformers_gazeflow.data.gaze_types import BLINK_OR_OTHER, FIXATION, SACCADE
from transformers_gazeflow.metrics.events import event_metrics, flatten_event_metrics, matched_onsets
from transformers_gazeflow.metrics.tables import events_table_markdown

F, S = FIXATION, SACCADE
# 10 fps, a 60 degree camera on 640 x 480: fixations drift 0.1 degree per frame, saccades jump 10 degrees a frame
AZIMUTHS = [0, 0.1, 0.2, 10.2, 10.3, 10.4, 10.5, 20.5, 30.5, 30.6, 30.7, 30.8]
CODES = np.array([F, F, F, S, F, F, F, S, S, F, F, F])


def test_matched_onsets_by_hand():
    assert matched_onsets([0, 10, 20], [1, 12, 40], 2) == 2
    assert matched_onsets([0, 1, 2], [1], 5) == 1  # one to one
    assert matched_onsets([5, 9], [7], 1) == 0
    assert matched_onsets([], [1, 2], 3) == 0


def test_a_prediction_that_is_the_recording_scores_perfectly():
    gaze = along_the_horizon(AZIMUTHS)
    metrics = event_metrics([np.stack([gaze, gaze])], [gaze], [CODES], 10, 640, 480, fov_deg=90)
    samples, human = metrics["samples"], metrics["human"]
    assert human["fixations_per_clip"] == 3 and samples["fixations_per_clip"] == 3
    assert human["fixation_duration_mean_ms"] == pytest.approx(300)  # three fixations of 3 frames at 10 fps
    assert human["saccade_amplitude_mean_deg"] == pytest.approx((10 + 20) / 2)  # 10.2 - 0.2 and 30.5 - 10.5
    assert samples["fixation_f1"] == 1 and samples["saccade_f1"] == 1
    assert samples["fixation_duration_w1_ms"] == 0 and samples["saccade_amplitude_w1_deg"] == pytest.approx(0)
    assert samples["saccade_share"] == pytest.approx(3 / 12)
    assert metrics["labeller_on_recording"]["saccade_f1"] == 1  # I-VT reproduces these labels exactly
    flat = flatten_event_metrics(metrics)
    assert flat["human_fixations_per_clip"] == 3 and flat["point_estimate_saccade_f1"] == 1
    table = events_table_markdown("model", metrics)
    assert "| model (each sample) | 3.00 |" in table and "| Recording (dataset labels) |" in table


def test_late_saccades_match_only_within_the_onset_tolerance():
    late = along_the_horizon([0, 0.1, 0.2, 0.3, 10.3, 10.4, 10.5, 10.6, 20.6, 30.6, 30.7, 30.8])  # one frame late
    gaze = along_the_horizon(AZIMUTHS)
    within = event_metrics([late[None]], [gaze], [CODES], 10, 640, 480, fov_deg=90, onset_tolerance_ms=100)
    assert within["samples"]["saccade_f1"] == 1
    strict = event_metrics([late[None]], [gaze], [CODES], 10, 640, 480, fov_deg=90, onset_tolerance_ms=50)
    assert strict["samples"]["saccade_f1"] == 0 and strict["samples"]["saccade_precision"] == 0
    # a fixation starts at frame 0 in both: matched even at zero tolerance
    assert strict["samples"]["fixation_recall"] == pytest.approx(1 / 3)


def test_a_blink_splits_recorded_and_predicted_runs_alike():
    codes = CODES.copy()
    codes[5] = BLINK_OR_OTHER
    gaze = along_the_horizon(AZIMUTHS)
    metrics = event_metrics([gaze[None]], [gaze], [codes], 10, 640, 480, fov_deg=90)
    assert metrics["human"]["fixations_per_clip"] == 4 and metrics["samples"]["fixations_per_clip"] == 4
    assert metrics["samples"]["fixation_f1"] == 1


def test_no_saccade_anywhere_leaves_undefined_metrics_undefined():
    still = along_the_horizon([0.0] * 6)
    metrics = event_metrics([still[None]], [still], [np.full(6, F)], 10, 64, 48)
    assert math.isnan(metrics["samples"]["saccade_f1"]) and math.isnan(metrics["samples"]["saccade_amplitude_w1_deg"])
    assert metrics["samples"]["fixation_f1"] == 1


def test_bad_input_is_refused():
    still = along_the_horizon([0.0] * 6)
    with pytest.raises(ValueError, match="one prediction, reference and gaze_types per clip"):
        event_metrics([], [], [], 10, 64, 48)
    with pytest.raises(ValueError, match=r"clip 0: prediction must be \[K, T, 2\]"):
        event_metrics([still], [still], [np.full(6, F)], 10, 64, 48)
    with pytest.raises(ValueError, match="field of view"):
        event_metrics([still[None]], [still], [np.full(6, F)], 10, 64, 48, fov_deg=0)
    with pytest.raises(ValueError, match="one camera per clip or one for all, got 2 for 1 clips"):
        event_metrics([still[None]], [still], [np.full(6, F)], 10, 64, 48, camera=[None, None])


def test_each_clip_is_measured_through_its_own_camera():
    from transformers_gazeflow.models.gazeflow.geometry import FisheyeCamera

    gaze = along_the_horizon(AZIMUTHS)  # x = 320 + 320 tan(azimuth) px of a 640 x 480 frame
    fisheye = FisheyeCamera([320.0, 319.5, 239.5] + [0.0] * 12, 640, 480)  # equidistant: d px off axis is d / 320 rad
    args = ([np.stack([gaze, gaze])] * 2, [gaze] * 2, [CODES] * 2, 10, 640, 480)
    metrics = event_metrics(*args, fov_deg=90, camera=[None, fisheye])
    # the pinhole clip's saccades span 10 and 20 degrees; the fisheye clip's the pixel distance over f, in radians
    through_fisheye = [
        math.degrees(math.tan(math.radians(b)) - math.tan(math.radians(a))) for a, b in ((0.2, 10.2), (10.5, 30.5))
    ]
    expected = np.mean([10.0, 20.0, *through_fisheye])
    assert metrics["human"]["saccade_amplitude_mean_deg"] == pytest.approx(expected)
    assert event_metrics(*args, fov_deg=90)["human"]["saccade_amplitude_mean_deg"] == pytest.approx(15.0)


def test_large_saccades_count_the_jumps_and_tell_a_jump_from_a_drift_by_hand():
    from tests.gaze.test_events import CAMERA, HEIGHT, WIDTH
    from transformers_gazeflow.metrics.events import large_saccades

    # 10 fps on a 90 degree pinhole: two recorded jumps of 20 degrees (frames 5-6, launched at 4; frame 11, too near
    # the end to measure); a 2 degree/frame drift is 20 deg/s, under I-VT's 30
    recorded_azimuths = [0, 0, 0, 0, 0, 10, 20, 20, 20, 20, 20, 40]
    codes = np.array([F, F, F, F, F, S, S, F, F, F, F, S])
    still = [0] * 12
    drift = [2 * t for t in range(11)] + [20]
    samples = np.stack([along_the_horizon(a) for a in (recorded_azimuths, still, drift)])
    found = large_saccades(
        [samples], [along_the_horizon(recorded_azimuths)], [codes], [10.0], [WIDTH], [HEIGHT], [CAMERA]
    )
    assert found["recorded_per_100_frames"] == pytest.approx(100 * 2 / 12)
    assert found["samples_per_100_frames"] == pytest.approx(
        100 * 2 / 36
    )  # the copy's two; the still and the drift none
    assert found["measured"] == 1  # frames 0-10 around the first; the second has no 4 frames after it
    tan = lambda degrees: math.tan(math.radians(degrees))  # noqa: E731  pixels along the horizon: 320 tan(azimuth)
    largest = tan(20) - tan(10)  # the recording's larger frame step over the jump
    # net move over frames 0-10: the copy and the drift arrive (1), the still one does not (0): median 1
    assert found["net_move_ratio"] == pytest.approx(1.0)
    # largest step: the copy's is the recording's (1), the still's 0, the drift's its last 2 degrees (18 -> 20)
    assert found["largest_step_ratio"] == pytest.approx((tan(20) - tan(18)) / largest)
