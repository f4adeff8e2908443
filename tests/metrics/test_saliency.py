"""Saliency metrics: cross-checked against pysaliency (MIT benchmark conventions), hand-computed cases, GLC variants."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import ndimage

from transformers_gazeflow.metrics import heatmaps as hm
from transformers_gazeflow.metrics import saliency as sal

H, W = 24, 32


def _random_case(seed: int, num_fix: int = 4):
    rng = np.random.default_rng(seed)
    pred = rng.random((H, W)) ** 3  # continuous values: no ties
    gt = rng.random((H, W)) ** 5
    flat = rng.choice(H * W, size=num_fix, replace=False)  # distinct fixated pixels, as MIT's binary map
    fix = np.stack((flat % W, flat // W), axis=-1)  # (x, y)
    return pred, gt, fix


def _pysaliency_auc_judd(pysaliency, pred: np.ndarray, fix: np.ndarray, jitter: bool, random_seed: int = 42) -> float:
    from pysaliency.saliency_map_models import SaliencyMapModel

    class Fixed(SaliencyMapModel):
        def _saliency_map(self, stimulus):
            return pred

    stimuli = pysaliency.Stimuli([np.zeros((H, W, 3), dtype=np.uint8)])
    fixations = pysaliency.Fixations.create_without_history(
        fix[:, 0].astype(float), fix[:, 1].astype(float), np.zeros(len(fix), dtype=int)
    )
    return float(Fixed(caching=False).AUC_Judd(stimuli, fixations, jitter=jitter, random_seed=random_seed))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_auc_nss_cc_kl_match_pysaliency(pysaliency, seed):
    pred, gt, fix = _random_case(seed)
    for ties in ("jitter", "none"):
        ours = float(sal.auc_judd(pred, fix, ties=ties, generator=torch.Generator().manual_seed(seed)))
        assert ours == pytest.approx(_pysaliency_auc_judd(pysaliency, pred, fix, jitter=True), abs=1e-6)
    assert float(sal.auc_judd(pred, fix, ties="none")) == pytest.approx(
        _pysaliency_auc_judd(pysaliency, pred, fix, jitter=False), abs=1e-6
    )
    # one fixation per map: the deterministic "half" rule equals the others when nothing ties
    assert float(sal.auc_judd(pred, fix[:1], ties="half")) == pytest.approx(
        _pysaliency_auc_judd(pysaliency, pred, fix[:1], jitter=True), abs=1e-6
    )
    # NSS with pysaliency's population std (ddof=0); CC; MIT KL (prediction first, ground truth second)
    ref_nss = pysaliency.metrics.NSS(pred, fix[:, 0], fix[:, 1]).mean()
    assert float(sal.nss(pred, fix, ddof=0)) == pytest.approx(ref_nss, abs=1e-6)
    assert float(sal.cc(pred, gt)) == pytest.approx(pysaliency.metrics.CC(pred, gt), abs=1e-6)
    assert float(sal.kl_div(pred, gt)) == pytest.approx(pysaliency.metrics.MIT_KLDiv(pred, gt), abs=1e-6)


def _tail_heavy_case():
    """A peak-1 Gaussian (sigma 1.5 px) whose tails fall below MIT's 1e-7 jitter over 73% of the map, exact zeros in
    one corner, and fixations in the tail: the values around them are distinct but within the jitter."""
    ys, xs = np.mgrid[0:H, 0:W] + 0.5
    pred = np.exp(-((xs - 8) ** 2 + (ys - 6) ** 2) / (2 * 1.5**2))
    pred[:3, -4:] = 0.0
    return pred, np.array([[25, 18], [14, 6], [12, 9]])  # (x, y): deep tail, about 4 sigma, about 3 sigma


def _mit_auc_judd_draws(pred: np.ndarray, fix: np.ndarray, draws: int, seed: int, noise: str) -> np.ndarray:
    """MIT's AUC_Judd.m, transcribed and vectorised over independent draws of its jitter: jitter, min-max normalise,
    thresholds at the fixated values (descending), tp = i / N, fp = (#{S >= t} - i) / (P - N), trapezoid."""
    rng = np.random.default_rng(seed)
    flat = pred.reshape(-1)
    noise_draw = rng.random((draws, flat.size)) if noise == "uniform" else rng.standard_normal((draws, flat.size))
    s = flat + noise_draw * 1e-7
    s = (s - s.min(1, keepdims=True)) / (s.max(1, keepdims=True) - s.min(1, keepdims=True))
    idx = fix[:, 1] * pred.shape[1] + fix[:, 0]
    thr = -np.sort(-s[:, idx], axis=1)  # [draws, N]
    n, p = len(idx), flat.size
    i = np.arange(1, n + 1)
    above = (s[:, None, :] >= thr[:, :, None]).sum(-1)
    tp = np.concatenate([np.zeros((draws, 1)), np.broadcast_to(i / n, (draws, n)), np.ones((draws, 1))], 1)
    fp = np.concatenate([np.zeros((draws, 1)), (above - i) / (p - n), np.ones((draws, 1))], 1)
    return np.trapezoid(tp, fp, axis=1)


@pytest.mark.parametrize("num_fix", [1, 3])
def test_normal_noise_auc_is_the_expectation_of_pysaliency_jitter(pysaliency, num_fix):
    """With noise="normal" the expectation equals the average of pysaliency's AUC_Judd(jitter=True) over its seeds,
    where the old rule (exact ties only) read 0.12 lower on this map (it ranks the tail below 1e-7 in order; MIT does
    not). On this map the default (MIT's uniform noise) happens to agree too; the next test shows a frame where not."""
    pred, fix = _tail_heavy_case()
    fix = fix[:num_fix]
    draws = np.array([_pysaliency_auc_judd(pysaliency, pred, fix, jitter=True, random_seed=s) for s in range(150)])
    stderr = draws.std() / math.sqrt(draws.size)
    ours = float(sal.auc_judd(pred, fix, noise="normal"))  # pysaliency's jitter is randn * 1e-7
    assert abs(ours - draws.mean()) < 4 * stderr
    assert abs(float(sal.auc_judd(pred, fix)) - draws.mean()) < 4 * stderr  # MIT's uniform jitter: about the same
    if num_fix == 1:
        assert float(sal.auc_judd(pred, fix, ties="half")) - draws.mean() < -10 * stderr  # the old rule: far off


def test_the_default_follows_mit_not_pysaliency_which_differ_on_a_frame(pysaliency):
    """The default noise is MIT's uniform one (AUC_Judd.m), not pysaliency's normal one: on a frame whose values lie
    one jitter width above the fixated pixel's (a peak-1 Gaussian floored at 1e-7, fixation in an exact-zero corner)
    pysaliency ranks a quarter of them below it by chance and MIT none, and the two averages are 0.087 apart;
    noise="normal" is pysaliency's."""
    ys, xs = np.mgrid[0:H, 0:W] + 0.5
    pred = np.maximum(np.exp(-((xs - 8) ** 2 + (ys - 6) ** 2) / (2 * 1.5**2)), 1e-7)
    pred[:3, -4:] = 0.0
    fix = np.array([[30, 1]])  # (x, y), in the zero corner
    draws = np.array([_pysaliency_auc_judd(pysaliency, pred, fix, jitter=True, random_seed=s) for s in range(150)])
    stderr = draws.std() / math.sqrt(draws.size)
    assert abs(float(sal.auc_judd(pred, fix, noise="normal")) - draws.mean()) < 4 * stderr
    default = float(sal.auc_judd(pred, fix))
    assert draws.mean() - default > 0.08 and draws.mean() - default > 10 * stderr
    mit = _mit_auc_judd_draws(pred, fix, 2_000, seed=0, noise="uniform")  # AUC_Judd.m with its own jitter
    assert abs(default - mit.mean()) < 4 * mit.std() / math.sqrt(mit.size) + 1e-12


@pytest.mark.parametrize("noise", ["uniform", "normal"])
@pytest.mark.parametrize("fixated", [[0], [0, 1, 2], [3, 4, 5]])
def test_expected_auc_matches_mit_jitter_average(noise, fixated):
    """MIT's AUC_Judd.m with its jitter, averaged over 4,000 draws, against the closed form: one fixation, three in
    the tail, and three tied with each other and with many other pixels (the joint term of several fixations)."""
    pred, fix = _tail_heavy_case()
    pred[20:24, 0:6] = 3e-8  # a plateau of exact ties inside the jitter
    pred[21, 2] = 4e-8
    fix = np.concatenate([fix, [[1, 20], [3, 22], [2, 21]]])[fixated]
    draws = _mit_auc_judd_draws(pred, fix, 4_000, seed=len(fixated), noise=noise)
    expected = float(sal.auc_judd(pred, fix, noise=noise))
    assert abs(expected - draws.mean()) < 4 * draws.std() / math.sqrt(draws.size) + 1e-12
    # the seeded jitter of this module agrees too (another implementation of one draw)
    ours = [
        float(sal.auc_judd(pred, fix, ties="jitter", noise=noise, generator=torch.Generator().manual_seed(s)))
        for s in range(200)
    ]
    assert abs(expected - np.mean(ours)) < 4 * np.std(ours) / math.sqrt(len(ours)) + 1e-12


def test_expected_auc_hand_cases():
    from transformers_gazeflow.metrics.jitter import above_probability

    a = 1e-7
    # MIT's uniform jitter: the difference of two U(0, a) is triangular, its CDF piecewise quadratic
    diffs = torch.tensor([-2 * a, -a, -0.5 * a, 0.0, 0.5 * a, a, 2 * a], dtype=torch.float64)
    np.testing.assert_allclose(above_probability(diffs, a).numpy(), [0, 0, 0.125, 0.5, 0.875, 1, 1], atol=1e-15)
    # normal jitter of std a: the difference has std a sqrt(2)
    normal = float(above_probability(torch.tensor(a, dtype=torch.float64), a, "normal"))
    assert normal == pytest.approx(0.5 * math.erfc(-0.5), abs=1e-15)
    # no jitter: the step, half at an exact tie
    assert above_probability(diffs, 0.0).tolist() == [0, 0, 0, 0.5, 1, 1, 1]
    # one fixation at 0.5 among pixels 0.5 + 0.5a, 0.5 - 0.5a, 0.5 (tie), 1.0 and 0.0 (far)
    pred = np.array([[0.5, 0.5 + 0.5 * a, 0.5 - 0.5 * a, 0.5, 1.0, 0.0]])
    fp = (0.875 + 0.125 + 0.5 + 1 + 0) / 5
    assert float(sal.auc_judd(pred, [[0, 0]])) == pytest.approx(1 - 0.5 * fp, abs=1e-9)  # 0.5 +- 0.5a: rounding
    assert float(sal.auc_judd(pred, [[0, 0]], ties="half")) == pytest.approx(1 - 0.5 * (1 + 1 + 0.5) / 5, abs=1e-12)
    # an all-equal map: ranks are a uniform permutation, AUC = 1/2 + 1 / (2 (N + 1)) for N fixations
    flat = np.zeros((6, 8))
    for n in (1, 2, 3, 5):
        fix = [[k, k % 6] for k in range(n)]
        for jitter in (1e-7, 0.0):
            assert float(sal.auc_judd(flat, fix, jitter=jitter)) == pytest.approx(0.5 + 0.5 / (n + 1), abs=1e-12)
    # a ranking with no value within the jitter of another is unchanged by the expectation
    pred, _, fix = _random_case(6, num_fix=4)
    assert float(sal.auc_judd(pred, fix)) == pytest.approx(float(sal.auc_judd(pred, fix, ties="none")), abs=1e-12)


def test_deliberate_difference_nss_uses_sample_std(pysaliency):
    """MATLAB's NSS.m z-scores with std (N - 1); pysaliency with N. Ours defaults to MATLAB's: pinned ratio."""
    pred, _, fix = _random_case(3)
    n = H * W
    ref = pysaliency.metrics.NSS(pred, fix[:, 0], fix[:, 1]).mean()
    ours = float(sal.nss(pred, fix))
    assert ours == pytest.approx(ref * math.sqrt((n - 1) / n), abs=1e-9)
    assert abs(ours / ref - 1) > 5e-4  # a real difference (about 1 / 2N), not a rounding one


def test_deliberate_difference_sim_min_max_step(pysaliency):
    """MATLAB's similarity.m min-max normalises each map before normalising its sum; pysaliency.SIM does not."""
    pred, gt, _ = _random_case(4)
    pred = pred + 0.3  # a map with a positive floor: the two conventions now disagree
    ours = float(sal.sim(pred, gt))
    mm = lambda a: (a - a.min()) / (a.max() - a.min())  # noqa: E731
    assert ours == pytest.approx(pysaliency.metrics.SIM(mm(pred), mm(gt)), abs=1e-9)
    assert abs(ours - pysaliency.metrics.SIM(pred, gt)) > 1e-2


def test_hand_cases_perfect_uniform_shifted():
    gaze = np.array([[0.5, 0.5]])
    gt = hm.render_gt_heatmaps(gaze, W * 4, H * 4, sigma=6.0, dtype=torch.float64)
    fix = hm.fixation_pixels(gaze, W * 4, H * 4)
    # perfect: the prediction is the ground truth
    assert float(sal.cc(gt, gt)) == pytest.approx(1.0, abs=1e-12)
    assert float(sal.kl_div(gt, gt)) == pytest.approx(0.0, abs=1e-11)  # eps terms: about -N * eps
    assert float(sal.sim(gt, gt)) == pytest.approx(1.0, abs=1e-12)
    n = gt[0].numel()
    # the fixated pixel is one of the 4 equal maxima of a Gaussian centred on a pixel corner: 3 tied pixels above
    # it with probability 1/2 each
    assert float(sal.auc_judd(gt, fix, ties="half")) == pytest.approx(1 - 0.5 * 1.5 / (n - 1), abs=1e-12)
    # uniform: constant map
    uni = torch.ones_like(gt)
    assert float(sal.cc(uni, gt)) == 0.0
    assert float(sal.nss(uni, fix)) == 0.0
    assert float(sal.auc_judd(uni, fix, ties="half")) == pytest.approx(0.75, abs=1e-12)  # all ties: fp = 1/2
    assert float(sal.auc_judd(uni, fix, ties="none")) == pytest.approx(0.5, abs=1e-12)  # all counted above
    assert float(sal.sim(uni, gt)) == pytest.approx(float(torch.minimum(gt / gt.sum(), uni / uni.sum()).sum()))
    assert float(sal.kl_div(uni, gt)) == pytest.approx(float(torch.xlogy(gt, gt * n).sum()), rel=1e-9)
    # shifted: the same Gaussian 3 sigma away scores worse on every metric, and AAE sees the offset
    shifted = hm.render_gt_heatmaps(np.array([[0.5 + 18 / (W * 4), 0.5]]), W * 4, H * 4, sigma=6.0, dtype=torch.float64)
    # continuous Gaussians: sum(P G) = exp(-d^2 / (4 sigma^2)) / (4 pi sigma^2), sum(G^2) = 1 / (4 pi sigma^2)
    a = 1 / (4 * math.pi * 36)
    expected_cc = (math.exp(-(18**2) / (4 * 36)) * a - 1 / n) / (a - 1 / n)
    assert float(sal.cc(shifted, gt)) == pytest.approx(expected_cc, abs=2e-3)
    assert float(sal.sim(shifted, gt)) < 0.2 and float(sal.kl_div(shifted, gt)) > 1.0
    assert float(sal.auc_judd(shifted, fix, ties="half")) < float(sal.auc_judd(gt, fix, ties="half"))


def test_precision_recall_f1_at_known_threshold():
    pred = torch.zeros(1, 4, 5)
    pred[0, 1, 1:4] = torch.tensor([1.0, 0.5, 0.015])  # above 0.01: 1.0 and 0.5 (0.015 too); 0 elsewhere
    pred[0, 3, 0] = 0.005
    gt = torch.zeros(1, 4, 5, dtype=torch.bool)
    gt[0, 1, 1] = gt[0, 1, 2] = gt[0, 2, 2] = True
    tp, predicted, positives = sal.precision_recall_counts(pred, gt, [0.0, 0.01, 0.02])
    assert tp.tolist() == [[2.0, 2.0, 2.0]]
    assert predicted.tolist() == [[4.0, 3.0, 2.0]]  # > 0: 4 pixels; > 0.01: 3; > 0.02: 2
    assert positives.tolist() == [3.0]
    precision, recall = sal.precision_recall(tp, predicted, positives)
    assert precision[0, 1].item() == pytest.approx(2 / 3, abs=1e-6)
    assert recall[0, 1].item() == pytest.approx(2 / 3, abs=1e-6)
    assert sal.f1_from_pr(precision, recall)[0, 2].item() == pytest.approx(2 * 1 * (2 / 3) / (1 + 2 / 3), abs=1e-6)
    # pred > t is strict: a value exactly on the threshold (float32) is not predicted
    on = torch.tensor([[[0.0, 0.01]]], dtype=torch.float32)
    assert sal.precision_recall_counts(on, torch.ones(1, 1, 2, dtype=torch.bool), [0.01])[1].tolist() == [[0.0]]


def test_angular_error_known_offset_under_60_degree_fov():
    width, height = 640, 480
    focal = 320 / math.tan(math.radians(30))
    centre = torch.tensor([320.0, 240.0])
    # a point at the right border of the frame is exactly 30 degrees off the optical axis
    assert float(sal.angular_error(torch.tensor([640.0, 240.0]), centre, width, height)) == pytest.approx(30.0)
    # the same focal vertically
    dy = 100.0
    expected = math.degrees(math.atan(dy / focal))
    assert float(sal.angular_error(torch.tensor([320.0, 240.0 + dy]), centre, width, height)) == pytest.approx(expected)
    # off-axis pairs use the full 3D angle, not the pixel distance
    a, b = torch.tensor([600.0, 50.0]), torch.tensor([620.0, 60.0])
    r1 = np.array([280.0, -190.0, focal])
    r2 = np.array([300.0, -180.0, focal])
    ref = math.degrees(math.acos(r1 @ r2 / np.linalg.norm(r1) / np.linalg.norm(r2)))
    assert float(sal.angular_error(a, b, width, height)) == pytest.approx(ref, abs=1e-6)


def test_center_of_mass_uses_pixel_centres():
    m = torch.zeros(1, 4, 6, dtype=torch.float64)
    m[0, 1, 2] = 1.0
    m[0, 3, 4] = 3.0
    com = sal.center_of_mass(m)[0]
    assert com.tolist() == pytest.approx([(2.5 + 3 * 4.5) / 4, (1.5 + 3 * 3.5) / 4])


def _glc_auc_transcribed(pred: np.ndarray, label_xy: np.ndarray) -> float:
    """GLC's ``metrics.auc`` loop for one frame, transcribed line by line (the reference)."""
    predicted = ndimage.center_of_mass(pred)
    i, j = round(label_xy[1] * 63), round(label_xy[0] * 63)
    z = np.zeros(pred.shape)
    if np.isnan(predicted[0]) or np.isnan(predicted[1]):
        z[z.shape[0] // 2, z.shape[1] // 2] = 1
    else:
        z[int(predicted[0]), int(predicted[1])] = 1
    z = ndimage.gaussian_filter(z, 3.2)
    z = z - np.min(z)
    z = z / np.max(z)
    return 1 - float((z > z[i][j]).sum()) / pred.shape[1] / pred.shape[0]


@pytest.mark.filterwarnings("ignore:invalid value encountered")  # scipy's centre of mass of an all-zero map
def test_glc_auc_and_aae_match_glc_code():
    rng = np.random.default_rng(5)
    logits = torch.from_numpy(rng.normal(size=(6, 64, 64)).astype(np.float32)) * 3
    maps = hm.glc_minmax(hm.glc_frame_softmax(logits))
    labels = rng.random((6, 2))
    labels[0] = [1.0, 0.0]  # corners and edges of the crop
    ours = sal.glc_auc(maps, labels).numpy()
    ref = [_glc_auc_transcribed(maps[k].numpy(), labels[k]) for k in range(6)]
    np.testing.assert_array_equal(ours, ref)
    # a map whose mass sits exactly at the label cell: AAE against (x * 64, y * 64) is GLC's half-cell offset
    one = torch.zeros(1, 64, 64)
    one[0, 20, 40] = 1.0
    aae = sal.glc_aae(one, np.array([[40 / 64, 20 / 64]]))
    assert float(aae) == pytest.approx(0.0, abs=1e-12)
    focal = 32 / math.tan(math.pi / 6)
    aae = sal.glc_aae(one, np.array([[0.5, 0.5]]))  # centre of the crop against cell (20, 40)
    r1 = np.array([20 - 32, 40 - 32, focal])
    r2 = np.array([0.0, 0.0, focal])
    assert float(aae) == pytest.approx(math.degrees(math.atan2(np.linalg.norm(np.cross(r1, r2)), r1 @ r2)))
    # an all-zero map has no centre of mass: GLC's AUC falls back to the centre cell
    zero = torch.zeros(1, 64, 64)
    assert float(sal.glc_auc(zero, np.array([[0.5, 0.5]]))) == _glc_auc_transcribed(zero[0].numpy(), [0.5, 0.5])


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: sal.nss(np.full((4, 4), np.nan), [[0, 0]]), "saliency contains NaN"),
        (lambda: sal.cc(np.ones((4, 4)), np.ones((4, 5))), "same shape"),
        (lambda: sal.auc_judd(np.random.rand(4, 4), [[4, 0]]), "inside the 4x4 map"),
        (lambda: sal.auc_judd(np.random.rand(2, 4, 4), [[0, 0]]), "fixations must have shape"),
        (lambda: sal.auc_judd(np.random.rand(4, 4), [[0, 0], [1, 1]], ties="half"), "exactly one fixation"),
        (lambda: sal.auc_judd(np.random.rand(4, 4), [[0, 0], [0, 0]]), "distinct pixels"),
        (lambda: sal.auc_judd(np.random.rand(4, 4), [[0, 0]], ties="exact"), "ties must be one of"),
        (lambda: sal.auc_judd(np.random.rand(4, 4), [[0, 0]], noise="laplace"), "noise must be one of"),
        (lambda: sal.auc_judd(np.random.rand(4, 4), [[0, 0]], jitter=-1.0), "jitter must be"),
        (lambda: sal.kl_div(-np.ones((4, 4)), np.ones((4, 4))), "non-negative"),
        (lambda: sal.nss(np.random.rand(4, 4), [[0.5, 1.0]]), "integer pixel indices"),
        (lambda: sal.angular_error(np.zeros(2), np.zeros(3), 64, 48), "shape"),
    ],
)
def test_bad_input_names_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()
