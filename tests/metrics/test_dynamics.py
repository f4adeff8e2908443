"""Dynamics: ADE, DTW (against brute force), displacements, JSD and the ratio statistics."""

from __future__ import annotations

import itertools
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
