"""The evaluator's fast scorer gives the reference functions' numbers (saliency.py on heatmaps.py's ground truth)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from transformers_gazeflow.metrics import heatmaps as hm
from transformers_gazeflow.metrics import saliency as sal
from transformers_gazeflow.metrics.scoring import NativeFrameScorer
from transformers_gazeflow.models.gazeflow.geometry import unit_to_pixels

W, H, SIGMA = 160, 120, 8.0
THRESHOLDS = np.linspace(0, 0.02, 11)


def _reference(maps: torch.Tensor, gaze: np.ndarray) -> dict:
    g = hm.render_gt_heatmaps(gaze, W, H, SIGMA, dtype=torch.float64)
    fix = hm.fixation_pixels(gaze, W, H)
    tp, predicted, positives = sal.precision_recall_counts(
        sal.minmax_normalize(maps), hm.binary_gt_masks(gaze, W, H, SIGMA), THRESHOLDS
    )
    gt_px = unit_to_pixels(torch.from_numpy(gaze), W, H)
    return {
        # MIT's jitter in expectation, at peak-1 scale: 1e-7 of each map's maximum
        "auc": torch.stack([sal.auc_judd(m, f, jitter=1e-7 * float(m.max())) for m, f in zip(maps, fix)]),
        "nss": sal.nss(maps, fix),
        "cc": sal.cc(maps, g.to(maps.dtype)),
        "kl": sal.kl_div(maps, g.to(maps.dtype)),
        "sim": sal.sim(maps, g.to(maps.dtype)),
        "aae": sal.angular_error(sal.center_of_mass(maps), gt_px, W, H),
        "tp": tp,
        "predicted": predicted,
        "positives": positives,
    }


def _cases(dtype):
    rng = np.random.default_rng(0)
    gaze = np.array([[0.5, 0.5], [0.02, 0.97], [1.0, 0.0], [0.31, 0.62]])
    traj = np.clip(gaze[None] + rng.normal(0, 0.08, size=(7, 4, 2)), 0, 1)
    yield "samples", hm.render_heatmaps(traj, W, H, SIGMA, dtype=dtype), gaze
    # one sample exactly on a pixel centre: mirrored pixels tie exactly (AUC's half rule, block straddling)
    one = np.array([[[40.5 / W, 60.5 / H]] * 4])
    yield "symmetric ties", hm.render_heatmaps(one, W, H, SIGMA / 3, dtype=dtype), gaze
    # a narrow blob far from the gaze: float32 underflows to exact zeros over most of the frame
    far = np.array([[[0.95, 0.05]] * 4])
    yield "zeros", hm.render_heatmaps(far, W, H, 2.0, dtype=dtype), gaze
    yield "constant", torch.full((4, H, W), 0.25, dtype=dtype), gaze
    yield "random", torch.from_numpy(rng.random((4, H, W))).to(dtype), gaze


@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-9), (torch.float32, 2e-5)])
def test_fast_scorer_equals_reference(dtype, tol):
    scorer = NativeFrameScorer(SIGMA, THRESHOLDS, 60.0)
    for name, maps, gaze in _cases(dtype):
        fast = scorer.score(maps, gaze, W, H)
        ref = _reference(maps, gaze)
        for key in ("tp", "predicted", "positives"):
            assert torch.equal(fast[key], ref[key].to(torch.float64)), (name, key)  # counts: exact
        for key in ("auc", "nss", "cc", "kl", "sim", "aae"):
            np.testing.assert_allclose(fast[key].numpy(), ref[key].numpy(), rtol=tol, atol=tol, err_msg=f"{name} {key}")


def test_fast_scorer_exact_auc_on_ties():
    """The block shortcut counts ties exactly: compare with the reference's exact integers on a tie-heavy map."""
    scorer = NativeFrameScorer(SIGMA, THRESHOLDS, 60.0)
    maps = torch.zeros(1, H, W)
    maps[0, 10:50, 20:90] = 1.0
    maps[0, 30:40, 30:40] = 2.0
    gaze = np.array([[25.5 / W, 15.5 / H]])  # on the plateau of ones
    fast = scorer.score(maps, gaze, W, H)["auc"]
    ref = sal.auc_judd(maps, hm.fixation_pixels(gaze, W, H), ties="half")
    assert float(fast) == float(ref)
    n = H * W
    assert float(ref) == pytest.approx(1 - 0.5 * (100 + 0.5 * (40 * 70 - 100 - 1)) / (n - 1))
