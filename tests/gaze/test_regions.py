"""The calibrated region's per-level conformal factors: the conformal quantile by hand, its coverage on exchangeable
draws against the finite-sample bound, what each exchangeable unit guarantees when frames come in dependent clips,
a heavy-tailed error model that one scale cannot fit, the floor, levels that were not fitted, and the file's
format (version 2, and version 1 meaning what it meant)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from transformers_gazeflow.gaze.regions import (
    MIN_RADIUS_PX,
    REGION_CALIBRATION_FORMAT,
    RegionCalibration,
    conformal_quantile,
    conformal_rank,
)
from transformers_gazeflow.gaze.uncertainty import (
    REGION_LEVELS,
    CoverageData,
    coverage_ratios,
    describe_uncertainty,
    fit_region_calibration,
    fit_region_scale,
    merge_coverage,
    reliability_table,
)
from transformers_gazeflow.models.gazeflow.geometry import PinholeCamera


def test_the_conformal_quantile_by_hand():
    scores = [3.0, 1.0, 2.0, 5.0, 4.0]
    # N = 5: q = 0.5 takes the ceil(6 * 0.5) = 3rd smallest, q = 0.8 the ceil(4.8) = 5th
    assert conformal_quantile(scores, 0.5) == 3.0 and conformal_quantile(scores, 0.8) == 5.0
    assert conformal_rank(0.9, 19) == 18  # 0.9 * 20 is 18, not 19 by a rounding error
    # q = 0.9 needs ceil(5.4) = 6 > 5 scores: at least ceil(0.9 / 0.1) = 9 frames
    with pytest.raises(ValueError, match="the 0.9 region needs at least 9 held-out frames, got 5"):
        conformal_quantile(scores, 0.9)
    # clips of unequal length: clip 0 holds 1, 2, 3, 4 (each weighs 1/4), clip 1 holds 10, clip 2 holds 0.5
    scores, clips = [1.0, 2.0, 3.0, 4.0, 10.0, 0.5], [0, 0, 0, 0, 1, 2]
    # frames: the ceil(7 * 0.5) = 4th smallest of 0.5, 1, 2, 3, 4, 10 is 3; clips: the weights reach
    # 0.5 * (3 + 1) = 2 clips at 4 (0.5 -> 1, 1 -> 1.25, 2 -> 1.5, 3 -> 1.75, 4 -> 2)
    assert conformal_quantile(scores, 0.5) == 3.0 and conformal_quantile(scores, 0.5, clips) == 4.0
    # one frame per clip: the clips rule is the frames rule
    assert (
        conformal_quantile([3.0, 1.0, 2.0, 5.0, 4.0], 0.6, clips=[0, 1, 2, 3, 4])
        == 4.0
        == conformal_quantile([3.0, 1.0, 2.0, 5.0, 4.0], 0.6)
    )
    with pytest.raises(ValueError, match="needs at least 3 held-out clips, got 2"):
        conformal_quantile([1.0, 2.0, 3.0], 0.75, clips=[0, 0, 1])


def test_conformal_coverage_on_exchangeable_draws_is_within_the_finite_sample_bound():
    """N = 19 calibration scores and one new score, all i.i.d. (continuous): the new score falls at or below the
    k-th smallest of the N with probability exactly k / (N + 1), and q <= k / (N + 1) < q + 1 / (N + 1)."""
    rng = np.random.default_rng(0)
    trials, n = 4000, 19
    draws = rng.exponential(1.0, (trials, n + 1))
    for level in (0.5, 0.8, 0.9):
        threshold = np.array([conformal_quantile(row[:n], level) for row in draws])
        coverage = float((draws[:, n] <= threshold).mean())
        exact = math.ceil(level * (n + 1) - 1e-9) / (n + 1)
        assert level <= exact < level + 1 / (n + 1)
        assert coverage == pytest.approx(exact, abs=4 * math.sqrt(exact * (1 - exact) / trials))


def test_frames_of_dependent_clips_keep_the_clip_guarantee_only_with_the_clips_rule():
    """9 clips of 4 frames whose frames share one score (fully dependent) and a new clip drawn like them, q = 0.75.
    The frames rule takes the ceil(37 * 0.75) = 28th of 36 scores, which is the 7th clip's: a new clip is covered
    with probability 7 / 10 = 0.70, below q (its bound ceil((N + 1) q) / (N + m) = 28 / 40 is tight here). The clips
    rule needs 0.75 * 10 = 7.5 clips: the 8th clip's score, covered with probability 8 / 10 >= q."""
    rng = np.random.default_rng(1)
    trials, clips, frames = 4000, 9, 4
    covered = {"frames": [], "clips": []}
    clip_ids = np.repeat(np.arange(clips), frames)
    for _ in range(trials):
        per_clip = rng.random(clips + 1)
        scores = np.repeat(per_clip[:clips], frames)
        covered["frames"].append(per_clip[-1] <= conformal_quantile(scores, 0.75))
        covered["clips"].append(per_clip[-1] <= conformal_quantile(scores, 0.75, clip_ids))
    sd = 4 * math.sqrt(0.25 * 0.75 / trials)
    assert np.mean(covered["frames"]) == pytest.approx(0.70, abs=sd)
    assert np.mean(covered["clips"]) == pytest.approx(0.80, abs=sd) and np.mean(covered["clips"]) >= 0.75


def _student_t_frames(rng, frames: int, k: int = 64, dof: float = 3.0):
    """Samples from N(c, I) (pixels of a 1000 x 1000 frame) and a true gaze c + e, e a 2-D Student-t of ``dof``
    degrees of freedom (heavier tails than the samples'): unit coordinates."""
    centre = rng.uniform(300, 700, (frames, 2))
    samples = centre + rng.normal(0, 1.0, (k, frames, 2)) * 4.0
    error = rng.normal(0, 1.0, (frames, 2)) * 4.0 / np.sqrt(rng.chisquare(dof, (frames, 1)) / dof)
    return samples / 1000.0, (centre + error) / 1000.0


def test_per_level_factors_reach_every_level_where_one_scale_cannot():
    """Student-t errors around Gaussian samples: the truth's distance grows faster with q than the samples' spread,
    so the single scale of a version-1 file misses some level by more than 0.05 on its own fitting frames; the
    per-level factors, fitted on other frames, reach every level within 0.015 on 20,000 fresh frames."""
    rng = np.random.default_rng(2)
    fit = coverage_ratios(*_student_t_frames(rng, 5000), 1000, 1000)
    fresh = coverage_ratios(*_student_t_frames(rng, 20000), 1000, 1000)
    scale = fit_region_scale(fit)
    assert np.abs(fit.coverage(scale) - np.asarray(REGION_LEVELS)).max() > 0.05
    calibration = fit_region_calibration(fit)
    assert calibration.levels == REGION_LEVELS and calibration.min_radius_px == MIN_RADIUS_PX
    assert calibration.factors[-1] / calibration.factors[0] > 1.3  # the levels need different factors
    np.testing.assert_allclose(fresh.coverage(calibration), REGION_LEVELS, atol=0.015)
    rows = reliability_table(fresh, calibration)
    assert [row["factor"] for row in rows] == list(calibration.factors)


def test_the_floor_keeps_a_point_forecast_a_disc():
    """A single sample (or samples on one point) has spread 0: its score divides by rho, so the region is the plain
    conformal disc f_q * rho around the point (a version-1 scale would leave it a point)."""
    rng = np.random.default_rng(3)
    truth = 0.5 + rng.normal(0, 0.01, (400, 2))  # 100 x 100 frame: errors of about 1 px
    samples = np.full((1, 400, 2), 0.5)
    data = coverage_ratios(samples, truth, 100, 100, levels=(0.5, 0.9))
    assert (data.radii_px == 0).all() and np.isinf(data.ratios).any()
    calibration = fit_region_calibration(data, min_radius_px=1.0)
    miss = np.sort(data.miss_px)
    assert calibration.factors == (miss[conformal_rank(0.5, 400) - 1], miss[conformal_rank(0.9, 400) - 1])
    u = describe_uncertainty(samples, 100, 100, calibration=calibration)
    np.testing.assert_array_equal(u.region(0.9), np.full(400, calibration.factors[1]))
    # the fitting frames themselves: ceil(401 q) of 400 inside, no more (no ties)
    assert data.coverage(calibration).tolist() == [201 / 400, 361 / 400]


def test_regions_of_levels_by_hand_and_levels_that_were_not_fitted():
    calibration = RegionCalibration((0.5, 0.9), (1.5, 2.5), min_radius_px=2.0, exchangeable="frames")
    assert calibration.factor_for(0.5) == (0.5, 1.5) and calibration.factor_for(0.9) == (0.9, 2.5)
    assert calibration.factor_for(0.7) == (0.9, 2.5)  # the next fitted level up: a conservative region
    with pytest.raises(ValueError, match=r"no calibrated region at level 0.95: .* levels \[0.5, 0.9\]"):
        calibration.factor_for(0.95)
    single = RegionCalibration.single_scale(2.0)
    assert single.factor_for(0.77) == (0.77, 2.0)
    # samples at 1..10 px right of (50, 50) and their mirror images: r_50 = 5, r_90 = 9 px
    distances = np.arange(1, 11, dtype=float)
    points = np.concatenate(
        [np.stack([50 + distances, np.full(10, 50.0)], -1), np.stack([50 - distances, np.full(10, 50.0)], -1)]
    )
    samples = np.concatenate([points[:, None], np.full((20, 1, 2), 50.0)], axis=1) / 100.0  # frame 1: all on m
    u = describe_uncertainty(samples, 100, 100, calibration=calibration)
    assert u.levels == (0.5, 0.9)
    np.testing.assert_allclose(u.region(0.9), [2.5 * 9, 2.5 * 2.0], rtol=1e-12)  # the floor on frame 1
    np.testing.assert_allclose(u.region(0.5), [1.5 * 5, 1.5 * 2.0], rtol=1e-12)
    np.testing.assert_array_equal(u.region(0.6), u.region(0.9))
    np.testing.assert_allclose(describe_uncertainty(samples, 100, 100, calibration=single).region(0.9), [18, 0])
    # in degrees: the factor times the angular spread, the floor as the angle of 2 px beside the point estimate
    camera = PinholeCamera.from_fov(100, 100, 90)  # f = 50 px
    u = describe_uncertainty(samples, 100, 100, camera, calibration)
    expected = 2.5 * np.degrees(np.arctan([9 / 50, 2 / 50]))
    np.testing.assert_allclose(u.region(0.9, "deg"), expected, rtol=1e-12)
    # the levels a calibration holds are computed beside the spread's own, and a chunk's frames keep them
    wide = RegionCalibration(REGION_LEVELS, (1.0,) * 6, 1.0, "frames")
    u = describe_uncertainty(samples, 100, 100, calibration=wide)
    assert u.levels == REGION_LEVELS and u.frames(slice(1, 2)).region(0.9).tolist() == [1.0]


def test_the_clip_numbers_of_merged_coverage():
    a = CoverageData((0.5,), np.ones(3), np.ones((1, 3)), np.zeros(3, np.int64))
    b = CoverageData((0.5,), np.ones(2), np.ones((1, 2)), np.zeros(2, np.int64))
    assert merge_coverage([a, b, a]).clips.tolist() == [0, 0, 0, 1, 1, 2, 2, 2]


def test_the_file_format_and_its_one_line_errors():
    calibration = RegionCalibration((0.5, 0.9), (1.25, 2.0), 1.0, "clips", {"split": "synthetic / validation"})
    record = calibration.to_record()
    assert record["format"] == REGION_CALIBRATION_FORMAT and record["version"] == 2
    assert record["levels"] == [0.5, 0.9] and record["factors"] == [1.25, 2.0] and record["split"].startswith("syn")
    again = RegionCalibration.from_record(record, "f.json")
    assert again == calibration and again.provenance == {"split": "synthetic / validation"}
    # version 1: one scale, every level, no floor (what the file meant when it was written)
    old = RegionCalibration.from_record({"scale": 1.12, "split": "synthetic / validation"}, "old.json")
    assert old.levels is None and old.factors == (1.12,) and old.min_radius_px == 0.0
    assert old.to_record() == {"scale": 1.12, "split": "synthetic / validation"}
    bad = [
        ([], r"f.json: \(top\): expected a JSON object"),
        ({"split": "x"}, "f.json: scale: expected the region scale"),
        ({"scale": 0}, r"f.json: scale: expected a finite number in \[0.01, 100\], got 0"),
        ({"scale": True}, "f.json: scale: expected a finite number"),
        ({**record, "version": 3}, "f.json: version: expected 2"),
        ({**record, "format": "other"}, "f.json: format: expected 'gazeflow-region-calibration'"),
        ({**record, "levels": [0.9, 0.5]}, r"f.json: levels: expected shares in \(0, 1\), increasing"),
        (
            {**record, "levels": [0.5, 1.0]},
            r"f.json: levels\[1\]: expected a finite number in \(0, 1\]|levels: expected",
        ),
        ({**record, "factors": [1.0]}, r"f.json: factors: expected one factor per level \(2\), got 1"),
        ({**record, "factors": [1.0, float("nan")]}, r"f.json: factors\[1\]: expected a finite number"),
        ({**record, "factors": [1.0, "2"]}, r"f.json: factors\[1\]: expected a finite number"),
        ({**record, "min_radius_px": -1}, "f.json: min_radius_px: expected a finite number in"),
        ({**record, "exchangeable": "pixels"}, "f.json: exchangeable: expected one of frames, clips"),
    ]
    for record_, message in bad:
        with pytest.raises(ValueError, match=message):
            RegionCalibration.from_record(record_, "f.json")


def test_factors_never_fall_with_the_level_so_regions_are_nested():
    """19 frames missing by 1..19 px, spread 1 px at q = 0.5 and 4 px at q = 0.9: the conformal quantiles are the
    ceil(20 * 0.5) = 10th score, 10 / 1 = 10, and the 18th, 18 / 4 = 4.5. Unraised, a new frame whose samples give
    both levels a 2 px radius would get a 0.9-region of 9 px inside a 0.5-region of 20 px; the 0.9 factor is raised
    to 10, and the quantiles are kept in the provenance."""
    miss = np.arange(1.0, 20.0)
    radii = np.stack([np.full(19, 1.0), np.full(19, 4.0)])
    data = CoverageData((0.5, 0.9), miss, radii, np.arange(19))
    calibration = fit_region_calibration(data, min_radius_px=1.0)
    assert calibration.factors == (10.0, 10.0)
    assert calibration.provenance["conformal_quantiles"] == [10.0, 4.5]
    radius = {q: calibration.radius(q, lambda fitted: np.array([2.0]))[0] for q in (0.5, 0.9)}
    assert radius == {0.5: 20.0, 0.9: 20.0}
    # every level still covers at least its share of the fitting frames: 10 of 19 within 10 px at q = 0.5, and at
    # q = 0.9 all 19 within 40 px (the raised factor only covers more than the quantile's 18)
    assert data.coverage(calibration).tolist() == [10 / 19, 1.0]
