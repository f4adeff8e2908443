"""The one renderer: trajectory maps, ground-truth maps, the binary disc, GLC's 64x64 pipeline."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from transformers_gazeflow.metrics import heatmaps as hm
from transformers_gazeflow.models.gazeflow.geometry import unit_to_pixels

# cv2.getGaussianKernel(19, 0, cv2.CV_32F) as printed by opencv-python-headless 5.0.0 (OpenCV is not a dependency)
OPENCV_KERNEL_19 = [
    0.002395199378952384,
    0.005493384785950184,
    0.01142685767263174,
    0.021557679399847984,
    0.036886345595121384,
    0.05724238604307175,
    0.08056718856096268,
    0.1028459370136261,
    0.11907058954238892,
    0.12502886354923248,
    0.11907058954238892,
    0.1028459370136261,
    0.08056718856096268,
    0.05724238604307175,
    0.036886345595121384,
    0.021557679399847984,
    0.01142685767263174,
    0.005493384785950184,
    0.002395199378952384,
]


def test_opencv_kernel_bit_exact():
    k = hm.opencv_gaussian_kernel(19)
    assert k.dtype == np.float32
    np.testing.assert_array_equal(k, np.asarray(OPENCV_KERNEL_19, dtype=np.float32))
    assert hm.opencv_default_sigma(19) == pytest.approx(3.2)
    np.testing.assert_array_equal(hm.opencv_gaussian_kernel(5), [0.0625, 0.25, 0.375, 0.25, 0.0625])
    with pytest.raises(ValueError, match="odd"):
        hm.opencv_gaussian_kernel(4)


def test_render_is_mean_of_peak_one_gaussians_at_pixel_centres():
    width, height, sigma = 40, 30, 3.0
    traj = np.array([[[0.25, 0.5], [0.1, 0.9]], [[0.75, 0.5], [0.1, 0.9]]])  # K=2, T=2
    maps = hm.render_heatmaps(traj, width, height, sigma=sigma, dtype=torch.float64)
    assert maps.shape == (2, height, width)
    ys, xs = np.mgrid[0:height, 0:width] + 0.5
    expected = np.zeros((2, height, width))
    for k in range(2):
        for t in range(2):
            px, py = traj[k, t, 0] * width, traj[k, t, 1] * height
            expected[t] += np.exp(-((xs - px) ** 2 + (ys - py) ** 2) / (2 * sigma**2)) / 2
    np.testing.assert_allclose(maps.numpy(), expected, atol=1e-12)
    assert float(maps[1].max()) == pytest.approx(1.0, abs=0.03)  # both samples on one point: peak ~1


def test_render_rejects_bad_trajectories():
    with pytest.raises(ValueError, match=r"trajectories must have shape \[K, T, 2\]"):
        hm.render_heatmaps(np.zeros((2, 3, 3)), 10, 10)
    with pytest.raises(ValueError, match="NaN"):
        hm.render_heatmaps(np.full((1, 2, 2), np.nan), 10, 10)
    with pytest.raises(ValueError, match="model coordinates"):
        hm.render_heatmaps(np.full((1, 2, 2), -0.9), 10, 10)
    with pytest.raises(ValueError, match="width and height"):
        hm.render_heatmaps(np.zeros((1, 2, 2)), 0, 10)


def test_ground_truth_map_sums_to_one_and_peaks_at_gaze():
    gaze = np.array([[0.5, 0.5], [0.0, 1.0], [0.3, 0.7]])
    maps = hm.render_gt_heatmaps(gaze, 64, 48, sigma=4.0, dtype=torch.float64)
    np.testing.assert_allclose(maps.sum(dim=(1, 2)).numpy(), 1.0, atol=1e-12)
    peak = maps[2].argmax()
    assert (int(peak) % 64, int(peak) // 64) == tuple(hm.fixation_pixels(gaze[2:], 64, 48)[0].tolist())
    with pytest.raises(ValueError, match=r"gaze must be unit coordinates of the native frame in \[0.0, 1.0\]"):
        hm.render_gt_heatmaps(np.array([[0.5, 1.2]]), 64, 48)


def test_binary_disc_rule_matches_glc_level():
    # GLC's rule gt > 0.001 on its sum-1 map is 0.064 of the kernel's peak; on a native sigma-25 map, a ~58.6 px disc
    peak = float(hm.opencv_gaussian_kernel(19)[9]) ** 2
    assert hm.GLC_BINARY_LEVEL == pytest.approx(0.001 / peak)
    assert hm.GLC_BINARY_LEVEL == pytest.approx(0.0640, abs=5e-4)
    assert hm.binary_gt_radius(25.0) == pytest.approx(58.6, abs=0.1)
    assert hm.binary_gt_radius(hm.opencv_default_sigma(19)) == pytest.approx(7.5, abs=0.01)
    mask = hm.binary_gt_masks(np.array([[0.5, 0.5]]), 640, 480, sigma=25.0)[0]
    ys, xs = np.mgrid[0:480, 0:640] + 0.5
    disc = (xs - 320) ** 2 + (ys - 240) ** 2 < hm.binary_gt_radius(25.0) ** 2
    assert torch.equal(mask, torch.from_numpy(disc))
    # GLC's own binary ground truth in the interior of the 64x64 grid: a disc of 177 cells
    glc = hm.glc_gt_heatmaps(np.array([[0.5, 0.5]]))
    assert int((glc > hm.GLC_GT_THRESHOLD).sum()) == 177


def _glc_get_gaussian_map(center, kernel_size=19):
    """GLC's ``Egteagaze._get_gaussian_map`` + normalisation, transcribed (with the kernel values from OpenCV)."""
    heatmap = np.zeros((64, 64))
    h, w = heatmap.shape
    mu_x, mu_y = round(center[0]), round(center[1])
    left, right = max(mu_x - (kernel_size - 1) // 2, 0), min(mu_x + (kernel_size - 1) // 2, w - 1)
    top, bottom = max(mu_y - (kernel_size - 1) // 2, 0), min(mu_y + (kernel_size - 1) // 2, h - 1)
    if not (left >= right or top >= bottom):
        k1 = np.asarray(OPENCV_KERNEL_19, dtype=np.float32).reshape(-1, 1)
        k2 = k1 * k1.T
        k_left = (kernel_size - 1) // 2 - mu_x + left
        k_right = (kernel_size - 1) // 2 + right - mu_x
        k_top = (kernel_size - 1) // 2 - mu_y + top
        k_bottom = (kernel_size - 1) // 2 + bottom - mu_y
        heatmap[top : bottom + 1, left : right + 1] = k2[k_top : k_bottom + 1, k_left : k_right + 1]
    d_sum = heatmap.sum()
    if d_sum == 0:
        heatmap += 1 / (64 * 64)
    elif d_sum != 1:
        heatmap /= d_sum
    return torch.as_tensor(heatmap).float()


def test_glc_gt_maps_match_glc_code_including_borders_and_half_rounding():
    rng = np.random.default_rng(0)
    labels = np.concatenate([rng.random((20, 2)), [[0, 0], [1, 1], [1, 0], [2.5 / 64, 0.5], [3.5 / 64, 0.5]]])
    ours = hm.glc_gt_heatmaps(labels)
    for k, (x, y) in enumerate(labels):
        assert torch.equal(ours[k], _glc_get_gaussian_map((x * 64, y * 64))), k
    # round half to even: 2.5 -> 2 and 3.5 -> 4
    assert int(ours[-2].argmax()) % 64 == 2 and int(ours[-1].argmax()) % 64 == 4


def test_glc_crop_mapping_egtea_and_ego4d():
    assert hm.glc_resized_size(640, 480) == (341, 256)
    assert hm.glc_resized_size(1088, 1080) == (257, 256)
    # EGTEA: offset ceil((341 - 256) / 2) = 43 px of the resized frame
    g = hm.glc_crop_gaze(np.array([[0.5, 0.5], [0.0, 0.25], [1.0, 1.0]]), 640, 480)
    np.testing.assert_allclose(g, [[(0.5 * 341 - 43) / 256, 0.5], [0.0, 0.25], [1.0, 1.0]])
    g = hm.glc_crop_gaze(np.array([[0.5, 0.5]]), 1088, 1080)
    np.testing.assert_allclose(g, [[(0.5 * 257 - 1) / 256, 0.5]])
    raw = hm.glc_crop_gaze(np.array([[0.0, 0.5]]), 640, 480, clip=False)
    assert raw[0, 0] == pytest.approx(-43 / 256)


def test_glc_softmax_and_minmax():
    logits = torch.tensor([[[0.0, 2.0], [4.0, 6.0]]])
    p = hm.glc_frame_softmax(logits, temperature=2.0)
    np.testing.assert_allclose(
        p.reshape(-1).numpy(), torch.softmax(torch.tensor([0.0, 1.0, 2.0, 3.0]), 0).numpy(), rtol=1e-6
    )
    mm = hm.glc_minmax(p)
    assert float(mm.min()) == 0.0 and float(mm.max()) == pytest.approx(1.0, abs=1e-5) and float(mm.max()) < 1.0


def test_unit_to_pixel_convention_is_geometry_s():
    # the renderer places a point at unit * size (geometry.unit_to_pixels), its Gaussian centred there
    pt = np.array([[[0.3, 0.6]]])
    m = hm.render_heatmaps(pt, 100, 50, sigma=2.0, dtype=torch.float64)[0]
    px = unit_to_pixels(pt[0, 0], 100, 50)
    com_x = float((m.sum(0) * (torch.arange(100) + 0.5)).sum() / m.sum())
    assert com_x == pytest.approx(px[0], abs=1e-6)
    assert math.isclose(float((m.sum(1) * (torch.arange(50) + 0.5)).sum() / m.sum()), px[1], abs_tol=1e-6)


def test_keep_shape_rescales_only_frames_whose_samples_all_lie_far_outside():
    width, height, sigma = 40, 30, 2.0
    traj = np.array(
        [
            [[0.5, 0.5], [-0.5, 0.3], [1.4, 1.45], [-0.2, 0.5]],
            [[0.6, 0.4], [-0.5, 0.7], [1.3, 1.5], [0.1, 0.5]],
        ]
    )  # frame 0: inside; 1 and 2: every sample far outside (9-22 sigma); 3: one sample inside
    plain = hm.render_heatmaps(traj, width, height, sigma)
    kept = hm.render_heatmaps(traj, width, height, sigma, keep_shape=True)
    assert torch.equal(kept[[0, 3]], plain[[0, 3]])  # bit for bit where a sample is near
    assert float(plain[1].max()) == 0.0  # underflow past the profile floor: no shape left
    assert 0.0 < float(plain[2].max()) < 1e-20  # tiny: about to
    ys, xs = np.mgrid[0:height, 0:width] + 0.5
    for t in (1, 2):
        px = traj[:, t] * np.array([width, height])
        logs = -((xs[None] - px[:, 0, None, None]) ** 2 + (ys[None] - px[:, 1, None, None]) ** 2) / (2 * sigma**2)
        exact = np.exp(logs - logs.max()).mean(0)  # the true map divided by its largest sample's peak in the frame
        scale = float(kept[t].max()) / exact.max()
        assert 0.49 < scale <= 1.0  # one factor for the whole frame: the strongest of the K = 2 samples peaks at 1 / K
        big = exact > 1e-12 * exact.max()  # the floor (PROFILE_FLOOR per axis) cuts the far tail only
        np.testing.assert_allclose(kept[t].numpy()[big], (scale * exact)[big], rtol=2e-5)
