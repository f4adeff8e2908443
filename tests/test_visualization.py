"""Overlay drawing: heatmap blending, sample dots, the point-estimate trail, sizes kept."""

import numpy as np
import pytest

from transformers_gazeflow.metrics.heatmaps import render_heatmaps
from transformers_gazeflow.visualization import COLOUR_TABLE, OverlayRenderer, blend_heatmap, draw_gaze


def grey(height=48, width=64):
    return np.full((height, width, 3), 100, np.uint8)


def test_the_heatmap_shows_on_dark_and_on_bright_scenes():
    """Every level of the colour map that is drawn differs clearly from black and from white."""
    assert COLOUR_TABLE.shape == (256, 3) and COLOUR_TABLE.dtype == np.uint8
    heatmap = render_heatmaps(np.array([[[0.5, 0.5]]]), 64, 48, sigma=6.0)[0].numpy()
    for level in (0, 255):
        frame = np.full((48, 64, 3), level, np.uint8)
        out = blend_heatmap(frame, heatmap)
        at_peak = np.abs(out[24, 32].astype(int) - level).max()
        at_two_sigma = np.abs(out[24, 32 + 12].astype(int) - level).max()
        assert at_peak > 100 and at_two_sigma > 40, (level, at_peak, at_two_sigma)
        np.testing.assert_array_equal(out[:, :10], frame[:, :10])  # 3.5 sigma away: untouched


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
