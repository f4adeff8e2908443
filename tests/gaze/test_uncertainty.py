"""Uncertainty from the K samples: hand-computed spreads, modes of known point clouds, the single region scale's fit
on a known distribution, the reliability table (the per-level conformal factors: tests/gaze/test_regions.py)."""

import numpy as np
import pytest

from transformers_gazeflow.gaze.uncertainty import (
    REGION_LEVELS,
    CoverageData,
    count_modes,
    coverage_ratios,
    describe_uncertainty,
    fit_region_scale,
    mean_shift,
    merge_coverage,
    reliability_table,
)
from transformers_gazeflow.metrics.tables import reliability_table_markdown
from transformers_gazeflow.models.gazeflow.geometry import PinholeCamera


def test_spread_radii_by_hand():
    # 10 samples around (50, 50) px of a 100 x 100 frame at distances 1..10 px: r_50 is the 5th, r_90 the 9th
    angles = np.linspace(0, 2 * np.pi, 10, endpoint=False)
    distances = np.arange(1, 11, dtype=float)
    # symmetric pairs keep the mean on (50, 50): each distance twice, opposite
    points = np.concatenate(
        [
            np.stack([50 + distances * np.cos(angles), 50 + distances * np.sin(angles)], -1),
            np.stack([50 - distances * np.cos(angles), 50 - distances * np.sin(angles)], -1),
        ]
    )
    samples = (points / 100.0)[:, None, :]  # [20, 1, 2]
    u = describe_uncertainty(samples, 100, 100)
    assert u.spread(0.5)[0] == pytest.approx(5.0) and u.spread(0.9)[0] == pytest.approx(9.0)
    assert u.region(0.9)[0] == pytest.approx(9.0) and not u.region_calibrated
    calibrated = describe_uncertainty(samples, 100, 100, calibration=1.5)  # a version-1 file's single scale
    assert calibrated.region(0.9)[0] == pytest.approx(13.5) and calibrated.region_calibrated
    # degrees through a 90-degree camera: 5 px at the centre of a 100 px wide frame with f = 50 px
    camera = PinholeCamera.from_fov(100, 100, 90)
    u = describe_uncertainty(samples, 100, 100, camera)
    assert u.spread(0.5, "deg")[0] == pytest.approx(np.degrees(np.arctan(5 / 50)))
    with pytest.raises(ValueError, match="without a camera"):
        describe_uncertainty(samples, 100, 100).spread(0.5, "deg")


def _clouds(rng, frames, k, centres, sizes, sigma=1.0):
    parts = [rng.normal(0, sigma, (frames, size, 2)) + centre for centre, size in zip(centres, sizes)]
    return np.moveaxis(np.concatenate(parts, axis=1), 1, 0)  # [K, T, 2]


def test_modes_of_known_point_clouds():
    rng = np.random.default_rng(0)
    frames, k = 200, 30
    one = _clouds(rng, frames, k, [(0, 0)], [30]) + 100
    two = _clouds(rng, frames, k, [(0, 0), (8, 0)], [15, 15]) + 100
    three = _clouds(rng, frames, k, [(0, 0), (10, 0), (5, 9)], [10, 10, 10]) + 100
    for cloud, expected, share in ((one, 1, 0.99), (two, 2, 0.99), (three, 3, 0.95)):
        u = describe_uncertainty(cloud / 200.0, 200, 200)
        assert (u.modes == expected).mean() >= share, (expected, np.bincount(u.modes))
    # all samples on one point: one mode, zero spread
    still = np.full((8, 3, 2), 0.25)
    u = describe_uncertainty(still, 64, 64)
    assert u.modes.tolist() == [1, 1, 1] and u.spread(0.9).tolist() == [0, 0, 0]
    # a lone outlier is not a mode (fewer than 10% of the samples)
    lone = np.zeros((30, 1, 2)) + rng.normal(0, 1, (30, 1, 2))
    lone[0, 0] = (40, 40)
    assert count_modes(lone).tolist() == [1]


def test_modes_merge_endpoints_within_half_the_bandwidth():
    """Two groups of five points at -a and +a along x at bandwidth h: just above a = h the kernel density has two
    modes, close together, where mean-shift leaves the groups a little over h / 2 apart; just below, one mode whose
    climb stops a little short of h / 2 apart. The rule "endpoints within h / 2 form one mode" then gives 2 and 1,
    so a merge radius of 0.6 h or 0.4 h fails one of the two frames."""
    h = 3.0
    half_gaps = np.array([0.9975, 0.9875]) * h  # one frame each
    points = np.zeros((10, 2, 2)) + 50.0
    points[:5, :, 0] -= half_gaps
    points[5:, :, 0] += half_gaps
    ends = mean_shift(points, np.full(2, h))  # [2, T, K]
    gaps = ends[0].max(-1) - ends[0].min(-1)
    assert 0.55 * h < gaps[0] < 0.6 * h and 0.4 * h < gaps[1] < 0.5 * h  # the frames discriminate the radius
    assert np.abs(ends[0, :, :5] - ends[0, :, :1]).max() < 1e-9  # each group ends on one point
    assert count_modes(points, np.full(2, h)).tolist() == [2, 1]


def test_the_region_scale_fit_on_a_known_distribution():
    """Samples from N(0, I) and the truth from N(0, (2 I)): the region needs scale 2 at every level (2-D radii of a
    Gaussian scale with its sigma)."""
    rng = np.random.default_rng(1)
    frames, k = 3000, 200
    samples = 0.5 + 0.01 * rng.normal(0, 1, (k, frames, 2))
    truth = 0.5 + 0.02 * rng.normal(0, 1, (frames, 2))
    data = coverage_ratios(samples, truth, 100, 100)
    scale = fit_region_scale(data)
    assert scale == pytest.approx(2.0, rel=0.05)
    rows = reliability_table(data, scale)
    assert [row["nominal"] for row in rows] == list(REGION_LEVELS)
    for row in rows:
        assert row["raw"] < row["nominal"] - 0.15  # the raw spread is far too narrow
        assert row["calibrated"] == pytest.approx(row["nominal"], abs=0.03)
    text = reliability_table_markdown(rows, data.frames, "one scale")
    assert "| 0.90 |" in text and "factor f_q | observed (calibrated, one scale)" in text and "3000 frames" in text
    assert f"| {scale:.3f} |" in text


def test_the_fit_by_hand_and_edge_cases():
    # one level, four frames with ratios 0.5, 1, 2, 4: at q = 0.5 the smallest scale covering 2 of 4 is 1
    data = CoverageData((0.5,), np.array([0.5, 1.0, 2.0, 4.0]), np.ones((1, 4)), np.arange(4))
    assert fit_region_scale(data) == 1.0 and data.coverage(1.0).tolist() == [0.5]
    # a truth away from samples that all coincide is out of any region (inf); 0 / 0 is covered
    still = np.full((5, 2, 2), 0.5)
    ratios = coverage_ratios(still, np.array([[0.5, 0.5], [0.6, 0.5]]), 10, 10, levels=(0.5,)).ratios
    assert ratios.tolist() == [[0.0, np.inf]]
    merged = merge_coverage([data, data])
    assert merged.frames == 8
    with pytest.raises(ValueError, match="no held-out frames"):
        merge_coverage([])
    with pytest.raises(ValueError, match=r"samples must be \[K, T, 2\]"):
        describe_uncertainty(np.zeros((3, 2)), 10, 10)
    with pytest.raises(ValueError, match="region scale must be a finite positive"):
        describe_uncertainty(still, 10, 10, calibration=0.0)


def test_the_coverage_interval_resamples_clips_by_hand():
    """Clip A: 4 frames, all covered; clip B: 2 frames, none. Two clips drawn with replacement: AA (chance 1/4)
    covers 8 / 8, AB (1/2) 4 / 6, BB (1/4) 0 / 4. The 95% interval's tails (2.5%) fall in AA's and BB's mass: [0, 1];
    a 40% interval's (30%) both fall in AB's: [2/3, 2/3]. Frames resampled alone would give a narrower interval
    around 4 / 6 at 95%."""
    miss = np.array([0.5, 0.5, 0.5, 0.5, 2.0, 2.0])
    data = CoverageData((0.5,), miss, np.ones((1, 6)), np.array([0, 0, 0, 0, 1, 1]))
    np.testing.assert_allclose(data.coverage_interval(), [[0.0, 1.0]])
    np.testing.assert_allclose(data.coverage_interval(confidence=0.4), [[2 / 3, 2 / 3]])
    calibrated = data.coverage_interval(calibration=2.5)  # a scale of 2.5 covers every frame
    np.testing.assert_allclose(calibrated, [[1.0, 1.0]])
    one_clip = CoverageData((0.5,), miss, np.ones((1, 6)), np.zeros(6, np.int64))
    np.testing.assert_allclose(one_clip.coverage_interval(), [[4 / 6, 4 / 6]])


def test_the_reliability_table_gives_the_interval_of_the_observed_coverage():
    miss = np.array([0.5, 0.5, 0.5, 0.5, 2.0, 2.0])
    data = CoverageData((0.5,), miss, np.ones((1, 6)), np.array([0, 0, 0, 0, 1, 1]))
    (raw_row,) = reliability_table(data)
    assert raw_row["raw"] == pytest.approx(4 / 6) and raw_row["interval"] == pytest.approx([0.0, 1.0])
    (calibrated_row,) = reliability_table(data, 2.5)
    assert calibrated_row["calibrated"] == 1.0 and calibrated_row["interval"] == pytest.approx([1.0, 1.0])
    text = reliability_table_markdown([calibrated_row], data.frames)
    assert "95% interval (clips resampled) |" in text and "| 1.000 - 1.000 |" in text
