import numpy as np
import pytest
import torch

from transformers_gazeflow import (
    blend_windows,
    clamp_unit,
    model_to_unit,
    pixels_to_unit,
    unit_to_model,
    unit_to_pixels,
    window_starts,
)


def test_unit_model_round_trip_and_corners():
    points = torch.tensor([[0.0, 0.0], [1.0, 1.0], [0.5, 0.25]])
    model = unit_to_model(points)
    assert torch.equal(model, torch.tensor([[-1.0, -1.0], [1.0, 1.0], [0.0, -0.5]]))
    assert torch.allclose(model_to_unit(model), points)
    assert np.allclose(model_to_unit(unit_to_model(points.numpy())), points.numpy())


def test_pixels_follow_the_egtea_normalisation():
    # EGTEA gaze pixel 1279 of a 1280-wide space normalises to 1279 / 1280 (data spec); back to pixels exactly.
    unit = pixels_to_unit(np.array([[1279.0, 959.0]]), 1280, 960)
    assert np.allclose(unit, [[1279 / 1280, 959 / 960]])
    assert np.allclose(unit_to_pixels(unit, 1280, 960), [[1279.0, 959.0]])
    t = unit_to_pixels(torch.tensor([[0.5, 0.5]], dtype=torch.float64), 640, 480)
    assert t.dtype == torch.float64 and torch.equal(t, torch.tensor([[320.0, 240.0]], dtype=torch.float64))


def test_bad_frame_size_is_rejected():
    with pytest.raises(ValueError, match="width=0"):
        unit_to_pixels(np.zeros((1, 2)), 0, 10)


def test_clamp_unit():
    assert torch.equal(clamp_unit(torch.tensor([-0.2, 0.3, 1.5])), torch.tensor([0.0, 0.3, 1.0]))


@pytest.mark.parametrize(
    "num_frames,expected",
    [(1, [0]), (64, [0]), (65, [0, 1]), (96, [0, 32]), (150, [0, 32, 64, 86]), (128, [0, 32, 64])],
)
def test_window_starts_cover_the_clip(num_frames, expected):
    starts = window_starts(num_frames, 64, 32)
    assert starts == expected
    covered = np.zeros(num_frames, bool)
    for s in starts:
        covered[s : s + 64] = True
    assert covered.all() and all(s + 64 <= max(num_frames, 64) for s in starts)


def test_window_starts_rejects_bad_arguments():
    with pytest.raises(ValueError, match="num_frames"):
        window_starts(0, 64, 32)
    with pytest.raises(ValueError, match="stride"):
        window_starts(100, 64, 65)


def test_blend_is_the_paper_ramp_over_a_regular_overlap():
    starts = window_starts(96, 64, 32)
    a = torch.zeros(64)
    b = torch.ones(64)
    out = blend_windows([a, b], starts, 96, frame_dim=0)
    assert out.shape == (96,)
    assert torch.equal(out[:32], torch.zeros(32))
    # alpha_tau = (tau - start_{i+1}) / W_s over the overlap [32, 64)
    assert torch.allclose(out[32:64], torch.arange(32) / 32.0)
    assert torch.equal(out[64:], torch.ones(32))


def test_blend_of_identical_windows_is_the_identity():
    full = torch.randn(2, 150, 3)
    starts = window_starts(150, 64, 32)
    pieces = [full[:, s : s + 64] for s in starts]
    assert torch.allclose(blend_windows(pieces, starts, 150, frame_dim=1), full, atol=1e-6)


def test_blend_cuts_a_short_single_window_back():
    values = torch.arange(64.0)
    assert torch.equal(blend_windows([values], [0], 10, frame_dim=0), torch.arange(10.0))


def test_last_frame_padding_rule_for_tensors_and_arrays():
    from transformers_gazeflow.models.gazeflow.windows import pad_last_frame

    frames = torch.arange(6.0).view(1, 3, 2)
    padded = pad_last_frame(frames, 5)
    assert padded.shape == (1, 5, 2) and torch.equal(padded[0, 3:], frames[0, 2:].expand(2, 2))
    assert pad_last_frame(frames, 3) is frames and pad_last_frame(frames, 2) is frames
    array = np.arange(6).reshape(3, 2)
    assert np.array_equal(pad_last_frame(array, 4, axis=0), [[0, 1], [2, 3], [4, 5], [4, 5]])


def test_point_estimate_is_the_mean_of_the_samples():
    from transformers_gazeflow.models.gazeflow.generation_gazeflow import point_estimate

    samples = np.array([[[0.0, 0.2]], [[1.0, 0.4]]])  # [K=2, T=1, 2]
    assert np.allclose(point_estimate(samples), [[0.5, 0.3]])
    batched = torch.from_numpy(samples)[None]  # [B=1, K, T, 2]
    assert torch.allclose(point_estimate(batched, sample_axis=1), torch.tensor([[[0.5, 0.3]]], dtype=torch.float64))


@pytest.mark.parametrize(
    "num_frames,start,end,starts,first,decode",
    [
        (96, 0, None, (0, 32), 0, (0, 96)),
        (150, 0, 64, (0, 32), 0, (0, 96)),  # frame 63 is also covered by the window at 32
        (150, 70, 80, (32, 64), 1, (32, 128)),
        (150, 120, None, (64, 86), 2, (64, 150)),  # the last window is aligned to the video's end
        (150, 140, None, (86,), 3, (86, 150)),
        (40, 5, 33, (0,), 0, (0, 40)),  # one window: a video shorter than W
    ],
)
def test_plan_windows_takes_the_whole_videos_grid(num_frames, start, end, starts, first, decode):
    from transformers_gazeflow.models.gazeflow.windows import plan_windows

    plan = plan_windows(num_frames, 64, 32, start, end)
    assert plan.starts == starts and plan.first_window == first
    assert (plan.decode_start, plan.decode_stop) == decode
    assert (plan.output_start, plan.output_stop) == (start, num_frames if end is None else end)
    grid = window_starts(num_frames, 64, 32)
    assert grid[first : first + len(starts)] == list(starts)  # a run of the whole video's grid
    # every requested frame is covered, and every window run covers one
    for frame in range(start, plan.output_stop):
        assert any(s <= frame < s + 64 for s in plan.starts)
    assert all(s < plan.output_stop and s + 64 > start for s in plan.starts)


def test_plan_windows_rejects_a_bad_range():
    from transformers_gazeflow.models.gazeflow.windows import plan_windows

    with pytest.raises(ValueError, match="frame range"):
        plan_windows(50, 16, 8, 10, 10)
    with pytest.raises(ValueError, match="frame range"):
        plan_windows(50, 16, 8, 0, 51)


def test_mirroring_unit_points_flips_x_and_leaves_the_input():
    from transformers_gazeflow.models.gazeflow.geometry import mirror_unit_horizontally

    points = np.array([[0.2, 0.7], [1.0, 0.0]], dtype=np.float32)
    mirrored = mirror_unit_horizontally(points)
    np.testing.assert_array_equal(mirrored, np.array([[0.8, 0.7], [0.0, 0.0]], dtype=np.float32))
    assert mirrored.dtype == np.float32 and points[0, 0] == np.float32(0.2)
    tensor = torch.tensor([[[0.25, 0.5]]])
    assert torch.equal(mirror_unit_horizontally(tensor), torch.tensor([[[0.75, 0.5]]]))
    assert tensor[0, 0, 0] == 0.25
