"""The energy score and the CRPS of a sample set, worked out by hand for tiny K; the fair estimate's expectation does
not move with K where the plain one's does; the evaluator and the evaluate module report them."""

from __future__ import annotations

import numpy as np
import pytest

from transformers_gazeflow.metrics.sample_scores import crps, energy_score, sample_scores


def test_the_energy_score_and_the_crps_by_hand():
    """K = 2 samples X1 = (0, 0) and X2 = (3, 4) (|X1 - X2| = 5), truth y = (0, 4): |X1 - y| = 4, |X2 - y| = 3.
    Energy score: plain (4 + 3) / 2 - (5 + 5) / (2 * 2^2) = 3.5 - 1.25 = 2.25; fair 3.5 - (5 + 5) / (2 * 2 * 1) = 1.0.
    CRPS of x (samples 0, 3; truth 0): plain 1.5 - (3 + 3) / 8 = 0.75, fair 1.5 - 6 / 4 = 0; of y (samples 0, 4;
    truth 4): plain 2 - 8 / 8 = 1, fair 2 - 8 / 4 = 0."""
    samples = np.array([[[0.0, 0.0]], [[3.0, 4.0]]])  # [K = 2, T = 1, 2]
    truth = np.array([[0.0, 4.0]])
    assert energy_score(samples, truth, fair=False).tolist() == [2.25]
    assert energy_score(samples, truth).tolist() == [1.0]
    assert crps(samples, truth, fair=False)[0].tolist() == [0.75, 1.0]
    assert crps(samples, truth)[0].tolist() == [0.0, 0.0]
    # K = 3 on a line (0, 1, 3 against 2): E|X - y| = (2 + 1 + 1) / 3 = 4/3; the pairs |0-1|, |0-3|, |1-3| sum to 6
    line = np.array([0.0, 1.0, 3.0])[:, None]
    assert crps(line, np.array([2.0]), fair=False)[0] == pytest.approx(4 / 3 - 12 / 18)
    assert crps(line, np.array([2.0]))[0] == pytest.approx(4 / 3 - 12 / 12)
    # one sample is a point forecast: both are its distance to the truth
    assert energy_score(samples[:1], truth).tolist() == energy_score(samples[:1], truth, fair=False).tolist() == [4.0]


def test_the_fair_estimate_does_not_move_with_k_where_the_plain_one_does():
    """Samples and truth from one N(0, I) in 2-D: the energy score of the true distribution is
    E|X - y| - E|X - X'| / 2 = sqrt(pi) - sqrt(pi) / 2 = sqrt(pi) / 2 (|X - Y| of two independent N(0, I) points is
    Rayleigh with sigma sqrt(2): mean sqrt(pi)). The fair estimate averages to it at K = 2 and K = 16; the plain one is
    above it by E|X - X'| / (2K) = sqrt(pi) / (2K)."""
    rng = np.random.default_rng(0)
    truth = rng.normal(size=(20000, 2))
    exact = np.sqrt(np.pi) / 2
    for k in (2, 16):
        samples = rng.normal(size=(k, 20000, 2))
        assert energy_score(samples, truth).mean() == pytest.approx(exact, abs=0.02)
        assert energy_score(samples, truth, fair=False).mean() == pytest.approx(
            exact + np.sqrt(np.pi) / (2 * k), abs=0.02
        )


def test_clips_count_once_and_invalid_frames_are_not_scored():
    # clip 0: two frames, K = 1, errors 10 and 20 px (frame 2 invalid: 1000 px off); clip 1: one frame, error 40 px
    gaze = [np.array([[0.5, 0.5], [0.5, 0.5], [0.5, 0.5]]), np.array([[0.5, 0.5]])]
    trajectories = [np.array([[[0.6, 0.5], [0.5, 0.7], [9.5, 0.5]]]), np.array([[[0.5, 0.9]]])]
    scores = sample_scores(trajectories, gaze, [[True, True, False], [True]], width=100, height=100)
    assert scores["energy_score_fair"] == pytest.approx((15 + 40) / 2)  # 15: clip 0's mean, 40: clip 1's
    assert scores["crps_plain"] == pytest.approx(((5 + 10) / 2 + 20) / 2)  # per frame the mean of |dx| and |dy|
    with pytest.raises(ValueError, match="no clip has a valid frame"):
        sample_scores(trajectories[:1], gaze[:1], [[False] * 3], 100, 100)
    with pytest.raises(ValueError, match=r"samples must be \[K, ...\] over truth"):
        energy_score(np.zeros((2, 3, 2)), np.zeros((4, 2)))
