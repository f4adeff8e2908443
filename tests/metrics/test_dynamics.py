"""Dynamics: ADE, DTW (against brute force), displacements, JSD and the ratio statistics."""

from __future__ import annotations

import math

import numpy as np
import pytest

from transformers_gazeflow.metrics import dynamics as dyn


def _all_warping_paths(n: int, m: int):
    """Every monotone path from (0, 0) to (n-1, m-1) with steps (1,0), (0,1), (1,1), enumerated explicitly."""

    def extend(path):
        i, j = path[-1]
        if (i, j) == (n - 1, m - 1):
            yield path
            return
        for di, dj in ((1, 0), (0, 1), (1, 1)):
            if i + di < n and j + dj < m:
                yield from extend(path + [(i + di, j + dj)])

    yield from extend([(0, 0)])


def _dtw_brute(a: np.ndarray, b: np.ndarray) -> float:
    best = min(sum(np.linalg.norm(a[i] - b[j]) for i, j in path) for path in _all_warping_paths(len(a), len(b)))
    return best / len(a)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_dtw_matches_brute_force(n):
    rng = np.random.default_rng(n)
    pred = rng.random((4, n, 2)) * 100
    human = rng.random((n, 2)) * 100
    np.testing.assert_allclose(dyn.dtw(pred, human), [_dtw_brute(p, human) for p in pred], rtol=1e-12)


def test_dtw_uses_valid_frames_and_batches_with_padding():
    rng = np.random.default_rng(7)
    pred = rng.random((3, 6, 2)) * 50
    human = rng.random((6, 2)) * 50
    valid = np.array([True, False, True, True, False, True])
    np.testing.assert_allclose(dyn.dtw(pred, human, valid), [_dtw_brute(p[valid], human[valid]) for p in pred])
    # batched with different lengths and zero padding: each pair as if alone
    a = np.zeros((2, 5, 2))
    b = np.zeros((2, 5, 2))
    a[0, :3], b[0, :3] = pred[0, :3], human[:3]
    a[1, :5], b[1, :5] = pred[1, :5], human[:5]
    got = dyn.dtw_batched(a, b, np.array([3, 5]))
    np.testing.assert_allclose(got, [_dtw_brute(pred[0, :3], human[:3]), _dtw_brute(pred[1, :5], human[:5])])


def test_dtw_of_a_time_shift_is_below_ade():
    t = np.arange(20, dtype=float)
    human = np.stack((t * 3, np.zeros_like(t)), -1)
    shifted = np.stack(((t - 2).clip(0) * 3, np.zeros_like(t)), -1)  # the same path, 2 frames late
    assert dyn.ade(shifted, human)[0] == pytest.approx((3 + 6 * 18) / 20)
    assert dyn.dtw(shifted, human)[0] < 1.0  # warping absorbs the delay except at the end


def test_ade_hand_case_and_valid_mask():
    human = np.zeros((4, 2))
    pred = np.array([[[3.0, 4.0], [0, 0], [6.0, 8.0], [100.0, 0.0]]])
    assert dyn.ade(pred, human)[0] == pytest.approx((5 + 0 + 10 + 100) / 4)
    assert dyn.ade(pred, human, valid=[True, True, True, False])[0] == pytest.approx(5.0)
    with pytest.raises(ValueError, match="no valid frame"):
        dyn.ade(pred, human, valid=[False] * 4)
    with pytest.raises(ValueError, match="same number of frames"):
        dyn.ade(pred[:, :3], human)


def test_displacements_skip_invalid_steps():
    traj = np.array([[0, 0], [3, 4], [3, 4], [0, 0], [6, 8]], dtype=float)
    np.testing.assert_allclose(dyn.displacements(traj), [5, 0, 5, 10])
    np.testing.assert_allclose(dyn.displacements(traj, valid=[1, 1, 0, 1, 1]), [5, 10])


def test_jsd_equal_is_zero_and_disjoint_is_ln2():
    h = np.array([1.0, 2.0, 3.0, 0.0])
    assert dyn.jensen_shannon(h, 2 * h) == pytest.approx(0.0, abs=1e-15)
    assert dyn.jensen_shannon([1, 0], [0, 1]) == pytest.approx(math.log(2))
    with pytest.raises(ValueError, match="non-negative"):
        dyn.jensen_shannon([0, 0], [1, 0])


def test_displacement_statistics_ratios_and_union_range():
    human = np.array([1.0, 2.0, 3.0, 4.0, 10.0])
    pred = 2 * human
    stats = dyn.displacement_statistics(pred, human)
    assert stats["displacement_mean_ratio"] == pytest.approx(2.0)
    assert stats["displacement_median_ratio"] == pytest.approx(2.0)
    assert stats["displacement_jsd"] > 0.1
    assert dyn.displacement_statistics(human, human)["displacement_jsd"] == 0.0
    ph, hh, edges = dyn.displacement_histograms(pred, human)
    assert len(edges) == 101 and edges[0] == 1.0 and edges[-1] == 20.0  # union range of both sets
    assert ph.sum() == hh.sum() == 5
    with pytest.raises(ValueError, match="need displacements"):
        dyn.displacement_statistics([], human)


def test_bad_trajectory_inputs():
    with pytest.raises(ValueError, match=r"pred must have shape \[K, T, 2\]"):
        dyn.ade(np.zeros((2, 3, 3)), np.zeros((3, 2)))
    with pytest.raises(ValueError, match="NaN"):
        dyn.dtw(np.full((1, 3, 2), np.nan), np.zeros((3, 2)))
    with pytest.raises(ValueError, match="valid must have shape"):
        dyn.displacements(np.zeros((3, 2)), valid=[True])


# ----------------------------------------------------------------------------------------------------------- ungameable


def test_w1_of_shifted_samples_is_the_shift_and_matches_scipy():
    from scipy.stats import wasserstein_distance

    rng = np.random.default_rng(3)
    a = rng.exponential(2.0, 300)
    assert dyn.wasserstein1(a, a + 1.75) == pytest.approx(1.75, abs=1e-12)
    assert dyn.wasserstein1(a, a) == 0.0
    b = rng.exponential(3.0, 177)  # different sizes
    assert dyn.wasserstein1(a, b) == pytest.approx(wasserstein_distance(a, b), rel=1e-12)
    assert dyn.wasserstein1([0.0], [1.0, 3.0]) == pytest.approx(2.0)  # |0 - 1| / 2 + |0 - 3| / 2
    with pytest.raises(ValueError, match="need displacements on both sides"):
        dyn.wasserstein1([], [1.0])


def test_log_bin_edges():
    edges = dyn.log_bin_edges([0.0, 0.5], [2.0, 40.0], bins=4, floor_px=0.1)
    np.testing.assert_allclose(edges, [0.0, 0.1, 0.1 * 400**0.25, 0.1 * 400**0.5, 0.1 * 400**0.75, 40.0])
    assert dyn.log_bin_edges([0.0], [0.05])[-1] == pytest.approx(1.0)  # nothing past the floor: one decade
    with pytest.raises(ValueError, match="floor_px must be"):
        dyn.log_bin_edges([1.0], [1.0], floor_px=0.0)


def test_motionless_reference_hand_computed():
    """Human steps 59 x 0.2 px (fixation noise) and 41 x 10 px (saccades); a trajectory that never moves."""
    human = np.array([0.2] * 59 + [10.0] * 41)
    ref = dyn.motionless_reference(human)
    assert ref["displacement_mean_ratio"] == 0.0 and ref["displacement_median_ratio"] == 0.0
    assert ref["displacement_w1_px"] == pytest.approx(human.mean())  # W1 to a point mass at 0 is the mean
    assert ref["displacement_w1_relative"] == pytest.approx(1.0)
    # log bins: 0.2 px lies above the 0.1 px floor, so the two histograms are disjoint: ln 2, the maximum
    assert ref["displacement_log_jsd"] == pytest.approx(math.log(2))
    # the paper's linear bins: with saccades of 20 px the bins are 0.2 px wide, 0.15 px steps share the first bin
    # with 0 and the motionless trajectory looks 59% right (JSD 0.169); the log bins still see it (ln 2)
    wide = np.array([0.15] * 59 + [20.0] * 41)
    m = 0.5 * (1 + 0.59)
    expected = 0.5 * math.log(1 / m) + 0.5 * (0.59 * math.log(0.59 / m) + 0.41 * math.log(2))
    assert dyn.motionless_reference(wide)["displacement_jsd"] == pytest.approx(expected, rel=1e-12)
    assert dyn.motionless_reference(wide)["displacement_log_jsd"] == pytest.approx(math.log(2))


def test_standing_still_wins_the_linear_jsd_but_not_log_jsd_or_w1():
    """The gaming the log-bin JSD and W1 resist: most human steps are fixation noise (75% of |N(0, 0.2 px)|, saccades of
    5 px on average); a method whose fixations wander (|N(0, 1 px)|, 4.5x the human median step) and a trajectory that
    never moves. The paper's linear-bin JSD prefers standing still (0.12 vs 0.17); the log-bin JSD and W1 do not."""
    rng = np.random.default_rng(4)

    def steps(n, noise):
        small = np.abs(rng.normal(0, noise, int(n * 0.75)))
        return np.concatenate([small, rng.exponential(5.0, n - small.size)])

    human = steps(4000, 0.2)
    method = steps(4000, 1.0)
    still = dyn.motionless_reference(human)
    ours = dyn.displacement_statistics(method, human)
    assert ours["displacement_median_ratio"] > 3
    assert still["displacement_jsd"] < ours["displacement_jsd"]
    assert ours["displacement_log_jsd"] < 0.6 * still["displacement_log_jsd"]
    assert ours["displacement_w1_px"] < 0.5 * still["displacement_w1_px"]


def test_human_halves_reference_alternates_clips():
    per_clip = [np.array([1.0, 2.0]), np.array([3.0, 4.0]), np.array([]), np.array([5.0]), np.array([7.0])]
    ref = dyn.human_halves_reference(per_clip)  # with steps: clips 0, 1, 3, 4 -> halves {1, 2, 5} vs {3, 4, 7}
    assert ref["displacement_mean_ratio"] == pytest.approx((8 / 3) / (14 / 3))
    assert ref["displacement_w1_px"] == pytest.approx(dyn.wasserstein1([1, 2, 5], [3, 4, 7]))
    shifted = [np.arange(10.0), np.arange(10.0) + 0.5] * 3  # even clips are the odd ones shifted by -0.5
    assert dyn.human_halves_reference(shifted)["displacement_w1_px"] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="at least 2 clips with steps"):
        dyn.human_halves_reference([np.array([1.0]), np.array([])])


# ------------------------------------------------------------------------------------------------ sample_motion
def test_sample_motion_splits_the_steps_into_the_mean_trajectory_and_the_deviations_by_hand():
    """10 x 10 px. Samples A (0,0) (1,0) (1,0) and B (0,2) (1,2) (3,2) px: mean (0,1) (1,1) (2,1); deviations A
    (0,-1) (0,-1) (-1,-1), B the opposite. Steps: samples 1, 0, 1, 2 (median 1), mean 1, 1, deviations 0, 1, 0, 1
    (median 0.5); sizes 1, 1, sqrt 2 twice (median 1); lag-1: (1 + 1 + 1 + 1) / sqrt(4 * 6). Recorded gaze
    (0,0) (0.5,0) (0.5,0): steps 0.5, 0 (median 0.25). With frame 2 invalid only the first pair counts."""
    samples = np.array([[[0, 0], [1, 0], [1, 0]], [[0, 2], [1, 2], [3, 2]]], dtype=np.float64) / 10
    gaze = np.array([[0, 0], [0.5, 0], [0.5, 0]]) / 10
    every = dyn.sample_motion([samples], [gaze], [np.ones(3, bool)], 10, 10)
    assert every == pytest.approx(
        {
            "human_step_px": 0.25,
            "sample_step_px": 1.0,
            "mean_step_px": 1.0,
            "deviation_step_px": 0.5,
            "deviation_px": 1.0,
            "deviation_lag1": 4 / math.sqrt(24),
        }
    )
    first_two = dyn.sample_motion([samples], [gaze], [np.array([True, True, False])], 10, 10)
    assert first_two == pytest.approx(
        {
            "human_step_px": 0.5,
            "sample_step_px": 1.0,
            "mean_step_px": 1.0,
            "deviation_step_px": 0.0,
            "deviation_px": 1.0,
            "deviation_lag1": 1.0,
        }
    )


def test_sample_motion_pools_clips_and_refuses_clips_without_a_pair():
    """Two clips of one sample each: the mean is the sample, deviations 0 (lag-1 undefined: NaN)."""
    still = np.zeros((1, 2, 2))
    moving = np.array([[[0.0, 0.0], [0.3, 0.4]]])
    pooled = dyn.sample_motion([still, moving], [still[0], moving[0]], [np.ones(2, bool)] * 2, 10, 10)
    assert pooled["sample_step_px"] == pytest.approx(2.5)  # median of 0 and 5
    assert pooled["deviation_step_px"] == 0.0 and math.isnan(pooled["deviation_lag1"])
    with pytest.raises(ValueError, match="no clip has two consecutive valid frames"):
        dyn.sample_motion([moving], [moving[0]], [np.array([True, False])], 10, 10)
