"""Region masks and their token-grid coverage (``data/masks.py``), and the synthetic scenes' exact hand and target
masks (``data/synthetic/scene.py``: ``render_masks``), checked against the frames they are drawn with."""

import dataclasses

import numpy as np
import pytest

from transformers_gazeflow.data.masks import RegionMasks, grid_coverage
from transformers_gazeflow.data.synthetic import SyntheticGazeSettings, generate_clip, render_frame, write_egtea_layout

SETTINGS = SyntheticGazeSettings(num_clips=6, min_frames=16, max_frames=20, width=64, height=48, seed=5)


def test_grid_coverage_by_hand():
    mask = np.zeros((4, 4), bool)
    mask[:2, :2] = True
    np.testing.assert_array_equal(grid_coverage(mask, (2, 2)), [[1, 0], [0, 0]])
    np.testing.assert_array_equal(grid_coverage(mask, (1, 1)), [[0.25]])
    np.testing.assert_array_equal(grid_coverage(mask, (4, 4)), mask.astype(np.float32))
    one = np.zeros((3, 3), bool)
    one[1, 1] = True  # the centre pixel is split in four between the cells of a 2x2 grid (each cell 1.5 x 1.5 px)
    np.testing.assert_allclose(grid_coverage(one, (2, 2)), np.full((2, 2), 0.25 / 2.25), rtol=1e-6)
    np.testing.assert_allclose(grid_coverage(np.ones((2, 5, 7), bool), (3, 2)), 1.0, rtol=1e-6)  # leading dims kept
    rng = np.random.default_rng(0)
    random = rng.random((5, 11)) < 0.3
    for grid in ((1, 1), (2, 3), (5, 11), (4, 7)):  # equal cells: the mean coverage is the covered fraction
        assert grid_coverage(random, grid).mean() == pytest.approx(random.mean(), rel=1e-6)
    with pytest.raises(ValueError, match=r"grid must be \(rows, cols\) of positive ints"):
        grid_coverage(mask, (0, 2))
    with pytest.raises(ValueError, match=r"masks must be \[..., H, W\]"):
        grid_coverage(np.zeros(4), (1, 1))


def _change(a, b):
    return np.abs(a.astype(int) - b.astype(int)).sum(axis=-1)


def _check_mask(mask, change):
    """``mask`` is where drawing a shape changed the frame by at least half (antialiasing weight >= 0.5): every
    masked pixel changed, and a change away from the mask (beyond its one-pixel edge) is a faint antialiased edge,
    such as a forearm grazing the frame's border from outside, under half the change inside."""
    assert (change[mask] > 0).mean() >= 0.99
    full = np.median(change[mask])
    assert change[~_dilate(mask)].max(initial=0) < 0.5 * full


def _dilate(mask):
    padded = np.pad(mask, 1)
    return np.logical_or.reduce(
        [
            padded[1 + dy : 1 + dy + mask.shape[0], 1 + dx : 1 + dx + mask.shape[1]]
            for dy in (-1, 0, 1)
            for dx in (-1, 0, 1)
        ]
    )


@pytest.mark.parametrize("index", range(6))
def test_synthetic_masks_are_where_the_frames_draw_the_hands_and_the_target(index):
    """Drawing the frame without the target (or the hands) changes exactly the masked pixels, up to the one-pixel
    antialiased edge: the masks are the frames' own geometry, not an approximation."""
    clip = generate_clip(SETTINGS, index)
    scene = clip.scene
    target = scene.objects[0]
    away = dataclasses.replace(target, track=target.track + 10.0)  # drawn nowhere
    no_target = dataclasses.replace(scene, objects=(away, *scene.objects[1:]))
    no_hands = dataclasses.replace(
        scene,
        hands=tuple(h + 10.0 for h in scene.hands),
        hand_anchors=tuple((x + 10.0, y + 10.0) for x, y in scene.hand_anchors),
    )
    masks = clip.masks()
    assert masks.regions["hand"].shape == masks.regions["target"].shape == (clip.num_frames, 48, 64)
    assert masks.regions["target"].any(axis=(1, 2)).mean() > 0.5 and masks.regions["hand"].any()
    for t in range(0, clip.num_frames, 3):
        frame = render_frame(scene, t)
        hand, visible = masks.regions["hand"][t], masks.regions["target"][t]
        assert not (hand & visible).any()
        if visible.any():  # under a hand the target leaves no trace
            _check_mask(visible, _change(frame, render_frame(no_target, t)) * ~hand)
        _check_mask(hand, _change(frame, render_frame(no_hands, t)))


def test_masks_on_a_token_grid_save_and_load(tmp_path):
    clip = generate_clip(SETTINGS, 1)
    masks = clip.masks(token_grid=(6, 8))
    for name in ("hand", "target"):
        tokens = masks.tokens[name]
        assert tokens.shape == (clip.num_frames, 6, 8) and tokens.dtype == np.float32
        assert tokens.min() >= 0 and tokens.max() <= 1
        np.testing.assert_allclose(tokens, grid_coverage(masks.regions[name], (6, 8)))
        np.testing.assert_allclose(tokens.mean(axis=(1, 2)), masks.regions[name].mean(axis=(1, 2)), rtol=1e-5)
    loaded = RegionMasks.load(masks.save(tmp_path / "m.npz"))
    assert sorted(loaded.regions) == ["hand", "target"] and loaded.num_frames == clip.num_frames
    for name in loaded.regions:
        np.testing.assert_array_equal(loaded.regions[name], masks.regions[name])
    (tmp_path / "bad.npz").write_text("not an npz")
    with pytest.raises(ValueError, match="bad.npz: expected an .npz of bool region masks"):
        RegionMasks.load(tmp_path / "bad.npz")


def test_the_egtea_layout_writes_masks_only_when_asked(tmp_path):
    small = SyntheticGazeSettings(num_clips=2, min_frames=16, max_frames=18, width=32, height=24, seed=2)
    plain = write_egtea_layout(tmp_path / "plain", small)
    assert not (tmp_path / "plain" / "masks").exists()
    written = write_egtea_layout(tmp_path / "masked", small, write_masks=True)
    for clip in written:
        masks = RegionMasks.load(tmp_path / "masked" / "masks" / clip.session / f"{clip.name}.npz")
        np.testing.assert_array_equal(masks.regions["target"], clip.clip.masks().regions["target"])
    assert [c.name for c in plain] == [c.name for c in written]
