"""The analysis figures: each PNG is opened and checked (size, not blank, the role / region colours drawn)."""

import numpy as np
import pytest
from PIL import Image

pytest.importorskip("matplotlib", reason="the analysis figures need matplotlib (pip install -e '.[analysis]')")

from transformers_gazeflow.analysis.attention import ROLE_COLOURS, roles_from_clip_weights  # noqa: E402
from transformers_gazeflow.analysis.attribution import RegionAttribution  # noqa: E402
from transformers_gazeflow.analysis.figures import (  # noqa: E402
    REGION_COLOURS,
    FailureRow,
    attribution_scatter_figure,
    evenly_spaced,
    failure_cases_figure,
    group_breakdown_figure,
    self_attention_grid_figure,
    self_attention_offset_figure,
)

from .test_analysis_attention import G, look_ahead, look_back, split  # noqa: E402


def opened(path, min_size=(300, 200)):
    """The PNG as an RGB array; it must be at least ``min_size`` and far from one flat colour."""
    with Image.open(path) as image:
        assert image.format == "PNG"
        assert image.size[0] >= min_size[0] and image.size[1] >= min_size[1], image.size
        pixels = np.asarray(image.convert("RGB")).astype(int)
    assert pixels.std() > 10  # not blank
    assert (pixels < 250).any(axis=2).mean() > 0.02  # something drawn on more than 2% of the canvas
    return pixels


def has_colour(pixels, hex_colour, tolerance=12, min_pixels=20):
    rgb = np.array([int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)])
    return (np.abs(pixels - rgb).max(axis=2) <= tolerance).sum() >= min_pixels


@pytest.fixture(scope="module")
def roles():
    weights = np.stack([np.stack([look_back(), look_ahead()]), np.stack([split(), np.eye(G)])])  # 2 layers x 2 heads
    return roles_from_clip_weights([(weights, G)], grid=G)


def test_self_attention_figures(tmp_path, roles):
    grid = opened(self_attention_grid_figure(roles, tmp_path / "grid.png"))
    for role in ("look-back", "look-ahead", "split", "local"):
        assert has_colour(grid, ROLE_COLOURS[role]), role  # each cell is framed in its role's colour
    curves = opened(self_attention_offset_figure(roles, tmp_path / "offset.png"))
    for role in ("look-back", "look-ahead", "split", "local"):
        assert has_colour(curves, ROLE_COLOURS[role], min_pixels=10), role


def attribution():
    result = RegionAttribution()
    rng = np.random.default_rng(0)
    for clip in range(8):
        mass = rng.dirichlet([2, 3, 5], size=(3, 4))
        result.add(f"c{clip}", mass, group=clip % 3)
    return result


def test_attribution_figures(tmp_path):
    scatter = opened(attribution_scatter_figure(attribution(), tmp_path / "scatter.png"))
    assert scatter.shape[0] > 300
    breakdown = opened(group_breakdown_figure(attribution(), tmp_path / "groups.png", ["cut", "take", "open"]))
    for region in ("hand", "object", "background"):
        assert has_colour(breakdown, REGION_COLOURS[region], min_pixels=200), region
    unlabelled = RegionAttribution()
    unlabelled.add("c", np.full((1, 1, 3), 1 / 3))
    with pytest.raises(ValueError, match="needs labels"):
        group_breakdown_figure(unlabelled, tmp_path / "none.png")


def test_failure_figure(tmp_path):
    frames = np.full((8, 48, 64, 3), 90, np.uint8)
    truth = np.tile([32.0, 24.0], (8, 1))
    truth[5] = [63.9, 24.0]
    samples = np.tile([[10.0, 10.0], [50.0, 40.0]], (8, 1, 1))
    off = np.zeros(8, bool)
    off[5] = True
    row = FailureRow("clip 1, 12.3 px", frames, truth, samples, off, list(range(0, 64, 8)))
    pixels = opened(failure_cases_figure([row, row], tmp_path / "failures.png"))
    assert has_colour(pixels, "#00e6ff", tolerance=30) and has_colour(pixels, "#e61414", tolerance=30)
    assert has_colour(pixels, "#ffe600", tolerance=30, min_pixels=5)  # the off-frame halo
    assert evenly_spaced(64) == [0, 9, 18, 27, 36, 45, 54, 63] and evenly_spaced(3) == [0, 1, 2]
