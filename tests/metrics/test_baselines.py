"""Center Bias and Random Walk: fitted on a train split, scored by the same evaluator."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from transformers_gazeflow.metrics import CenterBias, RandomWalk, evaluate_predictions

from .conftest import make_clip, noisy_trajectories


def test_center_bias_fits_per_axis_spread_and_renders_a_centred_gaussian():
    rng = np.random.default_rng(0)
    train = [make_clip(rng, f"t{i}") for i in range(5)]
    cb = CenterBias.fit(train)
    fix = np.concatenate([c["gaze"][c["gaze_type"] == 1] for c in train])
    assert cb.sigma_unit == pytest.approx(tuple(fix.std(axis=0)), rel=1e-6)
    m = CenterBias((0.1, 0.2)).heatmap(100, 50)
    assert m.shape == (50, 100)
    # separable Gaussian of 10 px (x) and 10 px (y) at (50, 25): the four centre pixels hold the maximum
    assert float(m.max()) == pytest.approx(math.exp(-0.5 * (0.5 / 10) ** 2 * 2), rel=1e-6)
    assert float(m[25, 50 + 10]) == pytest.approx(math.exp(-0.5 * ((10.5 / 10) ** 2 + (0.5 / 10) ** 2)), rel=1e-6)
    with pytest.raises(ValueError, match="at least 2 fixation"):
        CenterBias.fit([dict(train[0], gaze_type=np.zeros(64, np.int8))])


def test_random_walk_fits_step_sigma_and_is_a_markov_prior():
    rng = np.random.default_rng(1)
    width, height, sigma = 640, 480, 6.0
    steps = rng.normal(0, sigma, size=(5000, 2))
    px = 320 + np.cumsum(steps, axis=0) * 0.01 + steps  # independent-ish steps of sigma px
    gaze = np.clip(np.stack((px[:, 0] / width, px[:, 1] / height), -1), 0, 1)
    clip = {
        "clip_id": "walk",
        "gaze": gaze,
        "gaze_type": np.ones(5000, np.int8),
        "valid": np.ones(5000, bool),
        "width": width,
        "height": height,
    }
    rw = RandomWalk.fit([clip])
    d = np.diff(gaze * [width, height], axis=0)
    assert rw.sigma_px == pytest.approx(math.sqrt((d**2).sum(1).mean() / 2))
    test = make_clip(rng, "test", width=width, height=height)
    test["valid"][10] = False
    s = rw.sample(test, num_samples=400, seed=3)
    assert s.shape == (400, 64, 2)
    gpx = np.asarray(test["gaze"], dtype=np.float64) * [width, height]
    valid = np.asarray(test["valid"])
    centroid = gpx[valid].mean(0)
    tol = 4 * rw.sigma_px / math.sqrt(400)
    mean_px = s.mean(0) * [width, height]
    # frame t is centred on the last valid ground truth before it (the centroid before any)
    for t in range(64):
        before = np.nonzero(valid[:t])[0]
        centre = gpx[before[-1]] if before.size else centroid
        assert np.abs(mean_px[t] - centre).max() < tol, t
    # seeded per clip: the same samples whatever the order of clips
    np.testing.assert_array_equal(rw.sample(test, 5, seed=3), rw.sample(test, 5, seed=3))
    assert not np.array_equal(rw.sample(test, 5, seed=3), rw.sample(test, 5, seed=4))


def test_free_random_walk_uses_no_ground_truth_after_the_start():
    rng = np.random.default_rng(4)
    train = [make_clip(rng, f"t{i}", width=96, height=72) for i in range(4)]
    free = RandomWalk.fit(train, anchor="free")
    assert free.sigma_px == RandomWalk.fit(train).sigma_px and free.anchor == "free"
    clip = make_clip(rng, "v", width=96, height=72)
    # the gaze path played backwards: the same valid points (same centroid), a different path
    reversed_clip = dict(
        clip,
        gaze=np.asarray(clip["gaze"])[::-1].copy(),
        valid=np.asarray(clip["valid"])[::-1].copy(),
        gaze_type=np.asarray(clip["gaze_type"])[::-1].copy(),
    )
    a, b = free.sample(clip, 16, seed=1), free.sample(reversed_clip, 16, seed=1)
    np.testing.assert_allclose(a, b, atol=1e-9)  # same centroid, same seed: the walk ignores the gaze path
    anchored = RandomWalk.fit(train)
    assert not np.allclose(anchored.sample(clip, 16, seed=1), anchored.sample(reversed_clip, 16, seed=1))
    steps = np.diff(a * [96, 72], axis=1)
    inside = (
        (a[:, 1:] > 0.01).all(-1) & (a[:, 1:] < 0.99).all(-1) & (a[:, :-1] > 0.01).all(-1) & (a[:, :-1] < 0.99).all(-1)
    )
    assert np.sqrt((steps[inside] ** 2).sum(-1).mean() / 2) == pytest.approx(free.sigma_px, rel=0.2)
    assert ((a >= 0) & (a <= 1)).all()
    with pytest.raises(ValueError, match="anchor"):
        RandomWalk(1.0, anchor="teleport")


def test_baselines_run_through_the_evaluator():
    rng = np.random.default_rng(2)
    train = [make_clip(rng, f"t{i}", width=96, height=72) for i in range(6)]
    test = [make_clip(rng, f"v{i}", width=96, height=72) for i in range(4)]
    cb, rw = CenterBias.fit(train), RandomWalk.fit(train)
    r_cb = evaluate_predictions(test, [cb.predict(c) for c in test], sigma_px=4.0)
    r_rw = evaluate_predictions(test, [rw.predict(c, num_samples=8) for c in test], sigma_px=4.0)
    r_gt = evaluate_predictions(test, [noisy_trajectories(rng, c, 8, noise=0.01) for c in test], sigma_px=4.0)
    for r in (r_cb, r_rw, r_gt):
        assert 0.5 <= r.metrics["auc"] <= 1.0 and np.isfinite(r.metrics["f1"])
    assert r_cb.metrics["displacement_mean_ratio"] == 0.0  # a constant centre never moves
    assert r_gt.metrics["aae"] < r_cb.metrics["aae"]  # near-perfect predictions beat the prior
    glc = evaluate_predictions(test, [cb.predict(c) for c in test], protocol="glc")
    assert np.isfinite(glc.metrics["auc"])


def test_center_bias_map_is_static_for_every_frame():
    cb = CenterBias((0.2, 0.2))
    pred = cb.predict(make_clip(np.random.default_rng(3), "c"))
    assert isinstance(pred.heatmaps, torch.Tensor) and pred.heatmaps.shape == (48, 64)
    np.testing.assert_array_equal(pred.trajectories, np.full((1, 64, 2), 0.5))
