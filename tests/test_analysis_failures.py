"""Failure analysis (analysis.failures): flags, errors and error shares computed by hand."""

import json

import numpy as np
import pytest

from transformers_gazeflow.analysis.failures import (
    FailureRule,
    clip_failures,
    failure_markdown,
    failure_summary,
    failures_json,
    flag_frames,
    point_errors,
    worst_clips,
)
from transformers_gazeflow.data.gaze_types import BLINK_OR_OTHER, FIXATION, OFF_FRAME, SACCADE

W, H = 100, 100


def test_off_frame_and_border_after_a_large_saccade_are_flagged():
    gaze = np.array(
        [
            [0.5, 0.5],
            [0.5, 0.5],
            [0.99, 0.5],
            [0.99, 0.5],
            [1.0, 0.5],
            [0.5, 0.99],
            [0.5, 0.99],
            [0.5, 0.99],
            [0.5, 0.99],
            [0.5, 0.99],
        ]
    )
    types = np.array(
        [FIXATION, FIXATION, SACCADE, FIXATION, OFF_FRAME, SACCADE, FIXATION, FIXATION, FIXATION, BLINK_OR_OTHER]
    )
    flags = flag_frames(gaze, types, W, H, FailureRule(border=0.02, saccade_amplitude=0.2, lookback=3))
    assert flags["off_frame"].tolist() == [False] * 4 + [True] + [False] * 5
    # frame 2: 0.49 of the width (0.35 of the diagonal) in one frame, ends at the border; frame 3 is still 0.35
    # from frame 0 (3 frames back); frame 5 jumps from (1.0, 0.5) to (0.5, 0.99); 6 and 7 are still that far from
    # frame 4, 8 is not (frames 5-7 are where it is now); frame 9 is a blink (not valid)
    assert flags["border_after_saccade"].tolist() == [False, False, True, True, False, True, True, True, False, False]
    short = flag_frames(gaze, types, W, H, FailureRule(lookback=1))
    assert short["border_after_saccade"].tolist() == [False, False, True, False, False, True] + [False] * 4


def test_errors_are_the_point_estimate_distance_in_pixels():
    gaze = np.array([[0.5, 0.5], [0.0, 0.0]])
    samples = np.array([[[0.4, 0.5], [0.0, 0.3]], [[0.6, 0.5], [0.0, 0.5]]])  # means (0.5, 0.5) and (0, 0.4)
    assert point_errors(gaze, samples, 200, 100).tolist() == [0.0, 40.0]
    with pytest.raises(ValueError, match=r"samples must be \[K, T, 2\]"):
        point_errors(gaze, samples[:, :1], 200, 100)


def test_summary_shares_by_hand():
    def clip(name, errors_at, types):
        gaze = np.full((len(types), 2), 0.5)
        samples = gaze[None] + np.array([[e / W, 0.0] for e in errors_at])[None]
        return clip_failures(name, gaze, np.array(types), samples, W, H)

    a = clip("a", [1.0, 1.0, 6.0], [FIXATION, FIXATION, OFF_FRAME])
    b = clip("b", [2.0, 9.0], [FIXATION, BLINK_OR_OTHER])  # the blink's error is not counted
    summary = failure_summary([a, b])
    assert summary["valid_frames"] == 4 and summary["mean_error_px"] == pytest.approx(2.5)
    off = summary["flags"]["off_frame"]
    assert off["frames"] == 1 and off["frame_share"] == 0.25 and off["error_share"] == pytest.approx(0.6)
    assert off["mean_error_px"] == pytest.approx(6.0)
    assert summary["unflagged_mean_error_px"] == pytest.approx(4 / 3)
    assert [c.clip_id for c in worst_clips([b, a], 1)] == ["a"]
    markdown = failure_markdown(summary, [a])
    assert "| off-frame truth (type 4) | 1 | 25.0% | 60.0% | 6.00 |" in markdown
    assert "| a | 2.67 | 3 | 1 | 0 |" in markdown
    data = json.loads(failures_json(summary, [a, b]))
    assert data["clips"][0]["flagged_error_share"] == pytest.approx(0.75)


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match=r"clipX: gaze must be \[T, 2\]"):
        clip_failures("clipX", np.zeros((3, 2)), np.zeros(2), np.zeros((1, 3, 2)), W, H)
    with pytest.raises(ValueError, match="saccade_amplitude must be in"):
        FailureRule(saccade_amplitude=0)
    with pytest.raises(ValueError, match="at least one clip"):
        failure_summary([])
