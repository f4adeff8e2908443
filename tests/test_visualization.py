"""Overlay drawing: heatmap blending, sample dots, the point-estimate trail, sizes kept."""

import numpy as np
import pytest

from transformers_gazeflow.metrics.heatmaps import render_heatmaps
from transformers_gazeflow.visualization import (
    COLOUR_TABLE,
    OverlayRenderer,
    blend_heatmap,
    draw_gaze,
    draw_ground_truth,
)


def grey(height=48, width=64):
    return np.full((height, width, 3), 100, np.uint8)


def test_colour_table_runs_dark_to_light():
    assert COLOUR_TABLE.shape == (256, 3) and COLOUR_TABLE.dtype == np.uint8
    brightness = COLOUR_TABLE.astype(int).sum(axis=1)
    assert brightness[0] == 0 and brightness[-1] > 600 and np.all(np.diff(brightness) >= -1)


def test_heatmap_is_blended_where_the_mass_is():
    frame = grey()
    heatmap = render_heatmaps(np.array([[[0.25, 0.5]]]), 64, 48, sigma=4.0)[0].numpy()
    out = blend_heatmap(frame, heatmap, max_alpha=0.6)
    assert out.shape == frame.shape and out.dtype == np.uint8
    assert np.abs(out[24, 16].astype(int) - 100).sum() > 50  # at the peak: coloured
    np.testing.assert_array_equal(out[:, 50:], frame[:, 50:])  # far away: the frame as it was
    np.testing.assert_array_equal(blend_heatmap(frame, np.zeros((48, 64))), frame)
    with pytest.raises(ValueError, match="same size"):
        blend_heatmap(frame, np.zeros((10, 10)))


def test_samples_and_point_are_drawn_at_their_pixels():
    frame = grey()
    out = draw_gaze(frame, samples_px=np.array([[10.0, 10.0], [50.0, 30.0]]), point_px=np.array([32.0, 24.0]))
    assert out.shape == frame.shape
    assert tuple(out[10, 10]) == (0, 230, 255) and tuple(out[30, 50]) == (0, 230, 255)  # sample dots
    ring = out[20:29, 28:37].reshape(-1, 3)
    assert (ring == 255).all(axis=1).any()  # the white ring of the point estimate
    assert tuple(out[0, 0]) == (100, 100, 100)


def test_ground_truth_is_a_red_disc_or_an_off_frame_ring():
    frame = grey()
    disc = draw_ground_truth(frame, np.array([32.0, 24.0]))
    assert tuple(disc[24, 32]) == (230, 20, 20) and tuple(disc[0, 0]) == (100, 100, 100)
    ring = draw_ground_truth(frame, np.array([63.9, 24.0]), off_frame=True)  # clamped to the right border
    assert tuple(ring[24, 63]) == (100, 100, 100)  # hollow: the centre is the frame
    colours = {tuple(c) for c in ring[14:35, 50:64].reshape(-1, 3)}
    assert (230, 20, 20) in colours and (255, 230, 0) in colours  # the red ring and its yellow halo
    assert frame[24, 32].tolist() == [100, 100, 100]  # the input is left as it was


def test_renderer_keeps_a_short_trail_and_odd_sizes():
    renderer = OverlayRenderer(trail=3)
    frame = grey(31, 17)
    for i in range(6):
        point = np.array([2.0 + 2 * i, 5.0 + 4 * i])
        out = renderer.render(frame, point[None], point, heatmap=np.ones((31, 17)))
        assert out.shape == (31, 17, 3) and out.dtype == np.uint8
    assert len(renderer._trail) == 4
    with pytest.raises(ValueError, match="trail"):
        OverlayRenderer(trail=-1)
    with pytest.raises(ValueError, match="uint8"):
        renderer.render(frame.astype(np.float32), point[None], point)
