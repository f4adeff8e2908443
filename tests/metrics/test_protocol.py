"""The evaluator: protocol frames, fixation filter, aggregation, batching invariance, GLC parity, Wilcoxon, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from transformers_gazeflow.metrics import heatmaps as hm
from transformers_gazeflow.metrics import protocol as proto
from transformers_gazeflow.metrics import saliency as sal
from transformers_gazeflow.metrics.protocol import GazeEvaluator, evaluate_predictions
from transformers_gazeflow.metrics.protocol_records import ClipPrediction, protocol_frame_indices
from transformers_gazeflow.metrics.significance import paired_wilcoxon
from transformers_gazeflow.models.gazeflow.geometry import unit_to_pixels

from .conftest import make_clip, noisy_trajectories

SIGMA = 4.0


@pytest.fixture(scope="module")
def tiny_set():
    rng = np.random.default_rng(0)
    clips = [make_clip(rng, f"clip{i}", num_frames=n) for i, n in enumerate([64, 64, 20, 64, 40, 64, 90])]
    preds = [noisy_trajectories(rng, c, num_samples=5)[:, :64] for c in clips]
    return clips, preds


def test_protocol_frames():
    assert protocol_frame_indices(64).tolist() == [0, 9, 18, 27, 36, 45, 54, 63]
    assert protocol_frame_indices(200).tolist() == [0, 9, 18, 27, 36, 45, 54, 63]
    assert protocol_frame_indices(20).tolist() == [0, 9, 18, 19, 19, 19, 19, 19]
    with pytest.raises(ValueError, match="num_frames"):
        protocol_frame_indices(0)


def _same(a, b):
    assert a.metrics.keys() == b.metrics.keys()
    for k in a.metrics:
        assert a.metrics[k] == b.metrics[k] or (np.isnan(a.metrics[k]) and np.isnan(b.metrics[k])), k
    assert a.frame_keys == b.frame_keys
    for k in a.frame_scores:
        np.testing.assert_array_equal(a.frame_scores[k], b.frame_scores[k])


@pytest.mark.parametrize("protocol", ["paper", "glc"])
def test_one_batch_or_many_gives_identical_results(tiny_set, protocol, monkeypatch):
    clips, preds = tiny_set
    whole = evaluate_predictions(clips, preds, protocol=protocol, sigma_px=SIGMA)
    ev = GazeEvaluator(protocol=protocol, sigma_px=SIGMA)
    for lo, hi in [(0, 2), (2, 3), (3, 7)]:
        ev.add_batch(clips[lo:hi], preds[lo:hi])
    _same(whole, ev.compute())
    monkeypatch.setattr(proto, "_DTW_FLUSH_CLIPS", 2)  # DTW computed in several flushes
    ev = GazeEvaluator(protocol=protocol, sigma_px=SIGMA)
    for c, p in zip(clips, preds):
        ev.add(c, p)
    _same(whole, ev.compute())
    # compute() can be called midway and again after more clips
    ev = GazeEvaluator(protocol=protocol, sigma_px=SIGMA)
    ev.add_batch(clips[:3], preds[:3])
    ev.compute()
    ev.add_batch(clips[3:], preds[3:])
    _same(whole, ev.compute())


def test_fixation_filter_and_frame_keys():
    rng = np.random.default_rng(1)
    clip = make_clip(rng, "only27", fixation_share=0.0)
    clip["gaze_type"][:] = 2
    clip["gaze_type"][27] = 1
    short = make_clip(rng, "short", num_frames=20)
    short["gaze_type"][:] = 1
    res = evaluate_predictions(
        [clip, short], [noisy_trajectories(rng, clip), noisy_trajectories(rng, short)], sigma_px=SIGMA
    )
    # one kept frame (slot 3) in the first clip; all 8 slots (frames 0, 9, 18, 19 x5) in the short clip
    assert res.frame_keys == [("only27", 3)] + [("short", s) for s in range(8)]
    assert res.metrics["num_frames"] == 9 and res.metrics["num_clips_scored"] == 2
    # clip -> set aggregation: each clip counts once
    aucs = res.frame_scores["auc"]
    assert res.metrics["auc"] == pytest.approx((aucs[0] + aucs[1:].mean()) / 2)
    preds = [noisy_trajectories(np.random.default_rng(9), c) for c in (clip, short)]
    framewise = evaluate_predictions([clip, short], preds, sigma_px=SIGMA, aggregation="frame")
    clipwise = evaluate_predictions([clip, short], preds, sigma_px=SIGMA)
    assert framewise.metrics["auc"] == pytest.approx(framewise.frame_scores["auc"].mean())
    assert framewise.metrics["auc"] != clipwise.metrics["auc"]


def test_clip_without_fixation_counts_for_dynamics_only(tiny_set):
    rng = np.random.default_rng(2)
    clip = make_clip(rng, "nofix")
    clip["gaze_type"][:] = 2
    clips, preds = tiny_set
    res = evaluate_predictions(clips[:2] + [clip], preds[:2] + [noisy_trajectories(rng, clip)], sigma_px=SIGMA)
    assert res.metrics["num_clips"] == 3 and res.metrics["num_clips_scored"] == 2
    assert "nofix" not in res.clip_ids
    with pytest.raises(ValueError, match="none of the 1 clips has a fixation"):
        evaluate_predictions([clip], [noisy_trajectories(rng, clip)])


def test_adaptive_f1_threshold_chosen_once_over_the_set(tiny_set):
    clips, preds = tiny_set
    res = evaluate_predictions(clips, preds, sigma_px=SIGMA)
    curve = res.pr_curve
    f1 = 2 * curve["precision"] * curve["recall"] / (curve["precision"] + curve["recall"] + 1e-6)
    best = int(np.argmax(f1))
    assert res.metrics["threshold"] == curve["thresholds"][best]
    assert res.metrics["f1"] == pytest.approx(f1[best])
    # P and R are averages over every kept frame (not per clip) at that single threshold
    assert res.metrics["precision"] == pytest.approx(res.frame_scores["precision"].mean())
    assert res.metrics["recall"] == pytest.approx(res.frame_scores["recall"].mean())


def test_heatmap_predictions_equal_rendered_trajectories(tiny_set):
    clips, preds = tiny_set
    maps = [
        ClipPrediction(
            heatmaps=hm.render_heatmaps(p, c["width"], c["height"], SIGMA), heatmap_frames=list(range(p.shape[1]))
        )
        for c, p in zip(clips, preds)
    ]
    a = evaluate_predictions(clips, preds, sigma_px=SIGMA)
    b = evaluate_predictions(clips, maps, sigma_px=SIGMA)
    for k in ("auc", "nss", "cc", "kl", "sim", "aae", "f1", "precision", "recall"):
        assert b.metrics[k] == a.metrics[k], k
    assert "ade_mean" in a.metrics and "ade_mean" not in b.metrics  # heatmaps alone have no dynamics
    # a low-resolution map is upsampled (bilinear) to the native frame
    low = [
        ClipPrediction(heatmaps=torch.rand(8, 12, 16), heatmap_frames=protocol_frame_indices(len(c["gaze"])))
        for c in clips[:1]
    ]
    assert np.isfinite(evaluate_predictions(clips[:1], low, sigma_px=SIGMA).metrics["auc"])


def _glc_reference(clips, logits_per_clip):
    """GLC's test pipeline, transcribed: frame softmax (temperature 2), min-max, adaptive_f1 and auc on fixations."""
    preds, labels_hm, labels = [], [], []
    for clip, logits in zip(clips, logits_per_clip):
        frames = protocol_frame_indices(len(clip["gaze"]))
        p = torch.softmax(logits[frames].reshape(8, -1) / 2, dim=-1)
        p = (p - p.min(-1, keepdim=True)[0]) / (p.max(-1, keepdim=True)[0] - p.min(-1, keepdim=True)[0] + 1e-6)
        preds.append(p.reshape(8, 64, 64))
        crop = hm.glc_crop_gaze(np.asarray(clip["gaze"], dtype=np.float64)[frames], clip["width"], clip["height"])
        labels_hm.append(hm.glc_gt_heatmaps(crop))
        labels.append(np.concatenate([crop, np.asarray(clip["gaze_type"])[frames, None]], -1))
    preds, labels_hm = torch.stack(preds), torch.stack(labels_hm)
    labels = torch.from_numpy(np.stack(labels))
    thresholds = np.linspace(0, 0.02, 11)
    binary_labels = (labels_hm > 0.001).int()
    tp, fg_labels, fg_preds = [], [], []
    for t in thresholds:
        binary_preds = (preds > t).int()
        tp.append((binary_preds * binary_labels).sum(dim=(2, 3)).float())
        fg_labels.append(binary_labels.sum(dim=(2, 3)).float())
        fg_preds.append(binary_preds.sum(dim=(2, 3)).float())
    tp, fg_labels, fg_preds = (torch.stack(x).reshape(len(thresholds), -1) for x in (tp, fg_labels, fg_preds))
    keep = torch.where(labels.reshape(-1, 3)[:, 2] == 1)[0]
    recall = (tp[:, keep] / (fg_labels[:, keep] + 1e-6)).mean(dim=1)
    precision = (tp[:, keep] / (fg_preds[:, keep] + 1e-6)).mean(dim=1)
    f1 = (2 * recall * precision) / (recall + precision + 1e-6)
    best = int(torch.argmax(f1))
    flat = preds.reshape(-1, 64, 64)[keep]
    lab = labels.reshape(-1, 3)[keep].numpy()
    auc = float(np.mean(sal.glc_auc(flat, lab[:, :2]).numpy()))
    return float(f1[best]), float(recall[best]), float(precision[best]), thresholds[best], auc


def test_glc_protocol_reproduces_glc_pipeline():
    rng = np.random.default_rng(3)
    clips = [make_clip(rng, f"g{i}", num_frames=n, width=640, height=480) for i, n in enumerate([64, 30, 64])]
    logits = [torch.from_numpy(rng.normal(size=(len(c["gaze"]), 64, 64)).astype(np.float32)) * 4 for c in clips]
    for c, lg in zip(clips, logits):  # make the logits informative: a bump at the gaze
        crop = hm.glc_crop_gaze(np.asarray(c["gaze"], dtype=np.float64), 640, 480)
        lg += 8 * hm.glc_gt_heatmaps(crop) / hm.glc_gt_heatmaps(crop).amax(dim=(1, 2), keepdim=True)
    preds = [ClipPrediction(heatmaps=hm.glc_frame_softmax(lg)) for lg in logits]
    res = evaluate_predictions(clips, preds, protocol="glc")
    f1, recall, precision, threshold, auc = _glc_reference(clips, logits)
    assert res.metrics["f1"] == pytest.approx(f1, abs=1e-6)
    assert res.metrics["recall"] == pytest.approx(recall, abs=1e-6)
    assert res.metrics["precision"] == pytest.approx(precision, abs=1e-6)
    assert res.metrics["threshold"] == threshold
    assert res.metrics["auc"] == pytest.approx(auc, abs=1e-12)  # GLC pools frames: aggregation="frame"


def test_paired_wilcoxon(tiny_set):
    from scipy.stats import wilcoxon

    clips, preds = tiny_set
    rng = np.random.default_rng(4)
    worse = [np.clip(p + rng.normal(0, 0.2, p.shape), 0, 1) for p in preds]
    a = evaluate_predictions(clips, preds, sigma_px=SIGMA)
    b = evaluate_predictions(clips[::-1], worse[::-1], sigma_px=SIGMA)  # same frames, other order
    res = paired_wilcoxon(a, b, "aae")
    order = [b.frame_keys.index(k) for k in a.frame_keys]
    ref = wilcoxon(a.frame_scores["aae"], b.frame_scores["aae"][order])
    assert res.pvalue == pytest.approx(ref.pvalue) and res.num_pairs == len(a.frame_keys)
    assert res.median_difference < 0  # the noisier method has larger angular errors
    assert paired_wilcoxon(a, b, "f1").num_pairs == len(a.frame_keys)
    c = evaluate_predictions(clips[:3], preds[:3], sigma_px=SIGMA)
    with pytest.raises(ValueError, match="cover different frames"):
        paired_wilcoxon(a, c, "auc")
    with pytest.raises(ValueError, match="metric must be one of"):
        paired_wilcoxon(a, b, "accuracy")


def test_memory_stays_scalar(tiny_set):
    clips, preds = tiny_set
    ev = GazeEvaluator(sigma_px=SIGMA)
    ev.add_batch(clips, preds)
    pixels = clips[0]["width"] * clips[0]["height"]
    stored = [
        a
        for v in vars(ev).values()
        if isinstance(v, (list, dict))
        for a in (v.values() if isinstance(v, dict) else [v])
        for a in (a if isinstance(a, list) else [a])
        if isinstance(a, np.ndarray)
    ]
    assert stored and max(a.size for a in stored) < pixels  # per-frame scalars and displacements, never maps


@pytest.mark.parametrize(
    "gt_change, pred, match",
    [
        ({}, np.zeros((5, 10, 2)), "trajectories cover 10 frames, the ground truth 64"),
        ({}, np.full((5, 64, 2), np.nan), "trajectories contain NaN"),
        ({}, np.full((5, 64, 2), -0.9), "unit coordinates"),
        ({}, {"heatmaps": np.full((64, 48, 64), np.nan)}, "heatmaps contain NaN"),
        ({}, {"heatmaps": np.ones((8, 48, 64)), "heatmap_frames": list(range(8))}, "lack protocol frame"),
        ({}, {"heatmaps": -np.ones((48, 64))}, "non-negative"),
        ({}, {"maps": np.ones((48, 64))}, "unknown key"),
        ({"gaze": np.full((64, 2), 1.5)}, np.zeros((5, 64, 2)), r"gaze must be unit coordinates in \[0, 1\]"),
        ({"gaze_type": np.full(64, 7)}, np.zeros((5, 64, 2)), "gaze_type must hold unified codes"),
        ({"valid": np.ones(3, bool)}, np.zeros((5, 64, 2)), r"valid must have shape \[T\] = \[64\]"),
        ({"width": 0}, np.zeros((5, 64, 2)), "width and height"),
        ({"width": 1, "height": 1}, np.zeros((5, 64, 2)), "one pixel"),
    ],
)
def test_bad_input_says_what_and_where(gt_change, pred, match):
    clip = make_clip(np.random.default_rng(5), "bad")
    clip.update(gt_change)
    with pytest.raises(ValueError, match=match) as err:
        GazeEvaluator(sigma_px=SIGMA).add(clip, pred)
    assert "'bad'" in str(err.value)


def test_bad_streams_and_settings(tiny_set):
    clips, preds = tiny_set
    with pytest.raises(ValueError, match="no clips were added"):
        GazeEvaluator().compute()
    with pytest.raises(ValueError, match="predictions has more items"):
        evaluate_predictions(clips[:2], preds[:3])
    with pytest.raises(ValueError, match="same length"):
        GazeEvaluator().add_batch(clips[:2], preds[:1])
    ev = GazeEvaluator(sigma_px=SIGMA)
    ev.add(clips[0], preds[0])
    with pytest.raises(ValueError, match="added twice"):
        ev.add(clips[0], preds[0])
    with pytest.raises(ValueError, match="protocol must be"):
        GazeEvaluator(protocol="mit")
    with pytest.raises(ValueError, match="log_bin_floor_px must be a positive"):
        GazeEvaluator(log_bin_floor_px=0.0)
    with pytest.raises(ValueError, match="64x64"):
        GazeEvaluator(protocol="glc").add(clips[0], {"heatmaps": np.ones((30, 40))})


# ------------------------------------------------------------------------------------------------------------ map scale


def _native_maps(clips, preds, scale: str):
    out = []
    for c, p in zip(clips, preds):
        maps = hm.render_heatmaps(p, c["width"], c["height"], SIGMA, dtype=torch.float64)
        if scale == "sum1":
            maps = maps / maps.sum(dim=(1, 2), keepdim=True)
        out.append(ClipPrediction(heatmaps=maps, heatmap_frames=list(range(p.shape[1]))))
    return out


@pytest.mark.parametrize("protocol", ["paper", "glc"])
def test_scores_do_not_depend_on_the_map_scale(tiny_set, protocol):
    """The same maps at peak-1 and at sum-1 scale score the same on every metric. GLC's fixed
    +1e-6 in its min-max would not give that: the paper protocol thresholds the plain min-max map, and the glc protocol
    brings maps of ours to GLC's own scale (sum 1 over its grid) before GLC's min-max."""
    clips, preds = tiny_set
    peak = evaluate_predictions(
        clips, _native_maps(clips, preds, "peak1"), protocol=protocol, sigma_px=SIGMA, dtype=torch.float64
    )
    sum1 = evaluate_predictions(
        clips, _native_maps(clips, preds, "sum1"), protocol=protocol, sigma_px=SIGMA, dtype=torch.float64
    )
    tol = 1e-9 if protocol == "paper" else 1e-6  # GLC's pipeline computes in float32
    for k in peak.metrics:
        assert sum1.metrics[k] == pytest.approx(peak.metrics[k], rel=tol, abs=1e-12), k
    np.testing.assert_allclose(sum1.pr_curve["f1"], peak.pr_curve["f1"], rtol=tol)
    # GLC's rescale at the maps' own scale does depend on it: the thresholds move by 1e-6 / (max - min)
    maps = _native_maps(clips[:1], preds[:1], "sum1")[0].heatmaps
    glc_style = sal.minmax_normalize(maps, eps=hm.GLC_PRED_EPS)
    assert not torch.equal(glc_style > 0.02, sal.minmax_normalize(maps) > 0.02)


# ------------------------------------------------------------------------------------------------ degenerate inputs


def _far_outside_clip():
    rng = np.random.default_rng(11)
    clip = make_clip(rng, "far", num_frames=16, width=64, height=48)
    clip["gaze_type"][:] = 1
    traj = np.empty((3, 16, 2))
    traj[..., 0] = rng.uniform(-0.5, -0.45, size=(3, 16))  # 29-32 px left of the frame: 9.5-10.6 sigma at sigma 3
    traj[..., 1] = rng.uniform(0.2, 0.8, size=(3, 16))
    return clip, traj


def test_samples_far_outside_the_frame_are_scored_by_their_shape():
    """Every sample about 10 sigma outside the frame (inside the accepted [-0.5, 1.5]) used to
    render an all-zero map and raise ZeroDivisionError; the map is now rendered to scale and scored by its shape, as
    the exact (unfloored, float64) Gaussians score."""
    clip, traj = _far_outside_clip()
    sigma = 3.0
    # threshold 0 counts every pixel above the map's minimum, which depends on where rendering underflows
    # (heatmaps.PROFILE_FLOOR), not on the map's shape: the F1 sweep here starts above it
    thresholds = np.linspace(0.002, 0.02, 10)
    res = evaluate_predictions([clip], [traj], sigma_px=sigma, thresholds=thresholds)
    # the reference: the exact maps in float64, each divided by its maximum (the scores depend on shape only)
    ys, xs = np.mgrid[0:48, 0:64] + 0.5
    px = traj * np.array([64, 48])
    log_maps = -((xs[None, None] - px[..., 0, None, None]) ** 2 + (ys[None, None] - px[..., 1, None, None]) ** 2)
    log_maps = log_maps / (2 * sigma**2)  # [K, T, H, W]
    peak = log_maps.max(axis=(0, 2, 3), keepdims=True)
    exact = np.exp(log_maps - peak).mean(0)  # [T, H, W], finite and shaped (the true maps peak near e^-45)
    assert np.exp(peak).max() < 1e-19
    ref = evaluate_predictions(
        [clip], [{"heatmaps": exact}], sigma_px=sigma, dtype=torch.float64, thresholds=thresholds
    )
    for k in ("auc", "nss", "cc", "kl", "sim", "aae", "f1", "precision", "recall"):
        assert res.metrics[k] == pytest.approx(ref.metrics[k], rel=2e-5, abs=1e-6), k
    assert res.metrics["aae"] > 20  # the maps lean on the left border, far from the gaze
    # the glc protocol renders them to scale as well
    assert np.isfinite(evaluate_predictions([clip], [traj], protocol="glc").metrics["kl"])


def test_all_zero_and_all_equal_maps_are_scored_by_the_reference_rules():
    """An all-equal prediction (GLC min-max -> all zero) used to raise in KL under protocol='glc', where GLC scores
    P = R = 0. Every metric now follows its reference's rule for such maps (documented in saliency.py)."""
    rng = np.random.default_rng(12)
    clip = make_clip(rng, "flat", num_frames=16, width=64, height=48)
    clip["gaze_type"][:] = 1
    for protocol, maps in (
        ("glc", np.full((16, 64, 64), 0.3, np.float32)),
        ("paper", np.zeros((16, 48, 64))),
        ("paper", np.full((16, 48, 64), 0.3)),
    ):
        res = evaluate_predictions([clip], [{"heatmaps": maps}], protocol=protocol, sigma_px=SIGMA)
        m = res.metrics
        assert m["precision"] == 0.0 and m["recall"] == 0.0 and m["f1"] == 0.0, protocol  # nothing predicted
        assert m["nss"] == 0.0 and m["cc"] == 0.0, protocol
        assert all(np.isfinite(v) for v in m.values()), protocol
        if protocol == "paper":
            assert m["auc"] == pytest.approx(0.75)  # every pixel ties: MIT's jitter ranks them at random
            # AAE: the map predicts the frame centre (no centre of mass when all zero; the centre when constant)
            gaze_px = unit_to_pixels(
                torch.as_tensor(clip["gaze"][protocol_frame_indices(16)], dtype=torch.float64), 64, 48
            )
            centre = torch.tensor([32.0, 24.0], dtype=torch.float64).expand_as(gaze_px)
            assert m["aae"] == pytest.approx(float(sal.angular_error(centre, gaze_px, 64, 48).mean()), abs=1e-4)
    # KL of an all-zero prediction: MIT's KLdiv.m leaves it at zero, sum G log(eps + G / eps)
    g = hm.render_gt_heatmaps(np.array([[0.3, 0.6]]), 64, 48, SIGMA, dtype=torch.float64)
    zero = torch.zeros_like(g)
    assert float(sal.kl_div(zero, g)) == pytest.approx(float((g * torch.log(sal.MIT_EPS + g / sal.MIT_EPS)).sum()))
    aae = sal.glc_aae(torch.zeros(1, 64, 64), np.array([[0.5, 0.5]]))
    assert float(aae) == pytest.approx(0.0, abs=1e-12)  # no mass: GLC's centre cell, the crop's centre


def test_single_valid_frame_and_one_sample():
    """One valid frame: ADE/DTW are scored, there is no step to compare, so the displacement statistics are absent
    (documented in EvaluationResult). K = 1: best of K equals the mean."""
    rng = np.random.default_rng(13)
    clip = make_clip(rng, "single")
    clip["gaze_type"][:] = 3  # blinks: not valid
    clip["gaze_type"][9] = 1
    clip["valid"] = clip["gaze_type"] != 3
    res = evaluate_predictions([clip], [noisy_trajectories(rng, clip, num_samples=1)], sigma_px=SIGMA)
    assert res.metrics["ade_mean"] == res.metrics["ade_best"] and res.metrics["num_frames"] == 1
    assert "displacement_jsd" not in res.metrics and "displacement_w1_px" not in res.metrics


# -------------------------------------------------------------------------------------------------------- dynamics rows


def test_dynamics_references_and_tables(tiny_set):
    """The result carries the motionless and human-vs-human rows; a method that never moves scores exactly the
    motionless row; to_dict is valid JSON; the dynamics table prints both rows beside the methods."""
    import json

    from transformers_gazeflow.metrics import dynamics as dyn
    from transformers_gazeflow.metrics.tables import dynamics_table_markdown, main_table_markdown

    clips, preds = tiny_set
    res = evaluate_predictions(clips, preds, sigma_px=SIGMA)
    refs = res.dynamics_references
    assert set(refs) == {"motionless", "human_halves"}
    for key in ("displacement_log_jsd", "displacement_w1_px", "displacement_w1_relative"):
        assert np.isfinite(res.metrics[key]), key
    assert refs["motionless"]["displacement_w1_relative"] == pytest.approx(1.0)
    # the human halves: clips 0, 2, 4, 6 against 1, 3, 5 (every clip here has steps)
    px = [unit_to_pixels(np.asarray(c["gaze"], dtype=np.float64)[:64], c["width"], c["height"]) for c in clips]
    steps = [dyn.displacements(p, np.asarray(c["valid"])[:64]).astype(np.float32) for p, c in zip(px, clips)]
    want = dyn.displacement_statistics(np.concatenate(steps[0::2]), np.concatenate(steps[1::2]))
    for key, value in want.items():
        assert refs["human_halves"][key] == pytest.approx(value, rel=1e-9), key
    # a trajectory that never moves scores the motionless row
    still = [np.full((2, min(len(c["gaze"]), 64), 2), 0.5) for c in clips]
    still_res = evaluate_predictions(clips, still, sigma_px=SIGMA)
    for key, value in refs["motionless"].items():
        if not key.startswith("human_"):
            assert still_res.metrics[key] == pytest.approx(value, rel=1e-9, abs=1e-12), key
    # to_dict: JSON-ready, NaN as null
    res.metrics["undefined"] = float("nan")
    text = json.dumps(res.to_dict(), allow_nan=False)
    back = json.loads(text)
    assert back["metrics"]["undefined"] is None and back["metrics"]["f1"] == pytest.approx(res.metrics["f1"])
    assert back["dynamics_references"]["motionless"]["displacement_w1_relative"] == pytest.approx(1.0)
    table = dynamics_table_markdown({"ours": res.metrics}, res.dynamics_references)
    lines = table.splitlines()
    assert "JSD (log bins)" in lines[0] and "W1 (px)" in lines[0] and len(lines) == 5
    assert lines[3].startswith("| Motionless (never moves) | - |") and lines[4].startswith("| Human vs human")
    assert f"{res.metrics['displacement_w1_px']:.3f}" in lines[2]
    assert main_table_markdown({"ours": res.metrics}).splitlines()[2].startswith(f"| ours | {res.metrics['auc']:.3f} |")
