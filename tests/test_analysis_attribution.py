"""Hand / object attribution (analysis.attribution) and the mask sources (analysis.masks), by hand."""

import json

import numpy as np
import pytest
from PIL import Image

from transformers_gazeflow.analysis.attribution import (
    RegionAttribution,
    RegionTokens,
    region_attention_mass,
    tubelet_region_tokens,
)
from transformers_gazeflow.analysis.masks import (
    MaskFolderSource,
    MaskNotFoundError,
    SyntheticMaskSource,
    region_tokens_from_masks,
)


def tokens_2x2(hand, obj):
    """Coverage [T, 2, 2] from per-frame lists of 4 token values; the regions are disjoint here."""
    hand, obj = np.asarray(hand, float).reshape(-1, 2, 2), np.asarray(obj, float).reshape(-1, 2, 2)
    return RegionTokens(hand, obj, hand + obj)


def test_mass_on_known_masks_by_hand():
    # two frames of one tubelet; hand on token 0 in both frames, object on token 1 in frame 1 only
    regions = tokens_2x2([[1, 0, 0, 0], [1, 0, 0, 0]], [[0, 0, 0, 0], [0, 1, 0, 0]])
    per_frame = tubelet_region_tokens(regions, tubelet=2)
    assert per_frame.shape == (3, 2, 4)
    assert per_frame[:, 0].tolist() == per_frame[:, 1].tolist() == [[1, 0, 0, 0], [0, 0.5, 0, 0], [0, 0.5, 1, 1]]
    weights = np.array([[0.5, 0.5, 0, 0], [0.25, 0.25, 0.25, 0.25]])
    # hand 0.5 + 0.25; object 0.5 * 0.5 + 0.25 * 0.5; background 0.5 * 0.5 + (0.25 * 0.5 + 0.25 + 0.25)
    mass = region_attention_mass(weights, per_frame)
    assert np.allclose(mass, np.array([0.75, 0.375, 0.875]) / 2.0)
    # only frame 0
    assert np.allclose(region_attention_mass(weights, per_frame, np.array([True, False])), [0.5, 0.25, 0.25])


def test_frame_t_reads_the_tokens_of_tubelet_t_div_2():
    hand = np.zeros((4, 4))
    hand[2:, 3] = 1  # the hand is on token 3 of frames 2 and 3 (tubelet 1) only
    regions = tokens_2x2(hand, np.zeros((4, 4)))
    per_frame = tubelet_region_tokens(regions, tubelet=2)
    weights = np.tile([0.0, 0.0, 0.0, 1.0], (4, 1))  # every frame looks at token 3
    per_row = [region_attention_mass(weights[t : t + 1], per_frame[:, t : t + 1]) for t in range(4)]
    assert [r.tolist() for r in per_row] == [[0, 0, 1], [0, 0, 1], [1, 0, 0], [1, 0, 0]]
    # a tubelet cut short by the clip's end averages the frames it has
    odd = tubelet_region_tokens(tokens_2x2(hand[:3], np.zeros((3, 4))), tubelet=2)
    assert odd[0, 2].tolist() == [0, 0, 0, 1]


def test_layers_and_heads_broadcast_and_mass_sums_to_one():
    rng = np.random.default_rng(0)
    weights = rng.dirichlet(np.ones(4), size=(3, 2, 6))  # [L=3, H=2, T=6, N=4]
    hand = rng.uniform(0, 0.5, size=(6, 2, 2))
    regions = RegionTokens(hand, 0.5 * (1 - hand - 0.1), np.clip(hand + 0.5 * (1 - hand - 0.1), 0, 1))
    mass = region_attention_mass(weights, tubelet_region_tokens(regions, 2))
    assert mass.shape == (3, 2, 3) and np.allclose(mass.sum(-1), 1.0)


def test_overlapping_regions_count_for_both_before_normalising():
    hand = np.array([[[True, True]]])
    obj = np.array([[[False, True]]])  # pixel 1 is in both
    tokens = region_tokens_from_masks(hand, obj, (1, 1))
    assert (tokens.hand.item(), tokens.object.item(), tokens.either.item()) == (1.0, 0.5, 1.0)
    mass = region_attention_mass(np.ones((1, 1)), tubelet_region_tokens(tokens, 1))
    assert np.allclose(mass, [1 / 1.5, 0.5 / 1.5, 0.0])


def test_attribution_means_stds_and_groups():
    attribution = RegionAttribution()
    attribution.add("a", np.tile([0.2, 0.3, 0.5], (2, 2, 1)), group=1)
    attribution.add("b", np.tile([0.4, 0.1, 0.5], (2, 2, 1)), group=1)
    attribution.add("c", np.tile([0.0, 0.0, 1.0], (2, 2, 1)), group=0)
    attribution.add("d", np.tile([0.0, 0.0, 1.0], (2, 2, 1)), group=-1)  # unlabelled: in the means, in no group
    assert np.allclose(attribution.mean()[0, 0], [0.15, 0.1, 0.75])
    assert np.allclose(
        attribution.std()[1, 1], np.std([[0.2, 0.3, 0.5], [0.4, 0.1, 0.5], [0, 0, 1], [0, 0, 1]], axis=0)
    )
    groups = attribution.by_group()
    assert list(groups) == [1, 0] and np.allclose(groups[1], [[0.3, 0.2, 0.5]] * 2)
    data = json.loads(json.dumps(attribution.to_json(["cut", "take"])))
    assert set(data["groups"]) == {"take", "cut"} and data["groups"]["take"]["clips"] == 2
    assert "| all | all | 15.0 | 10.0 | 75.0 |" in attribution.markdown()
    with pytest.raises(ValueError, match="same layers and heads"):
        attribution.add("e", np.zeros((1, 2, 3)))


def example(clip_id="clipA", start=0, frames=2):
    return {"clip_id": clip_id, "window_start": start, "num_frames": frames}


def test_mask_folder_layouts(tmp_path):
    hand = np.zeros((5, 4, 6), bool)
    hand[:, :2, :3] = True  # top-left quarter
    obj = np.zeros((5, 4, 6), bool)
    obj[3:, 2:, 3:] = True  # bottom-right quarter from frame 3 on
    expected = region_tokens_from_masks(hand[2:4], obj[2:4], (2, 2))
    # 1. one npz per clip, possibly one folder down (masks/<VIDEO>/<CLIP>.npz)
    (tmp_path / "per_clip" / "VIDEO").mkdir(parents=True)
    np.savez(tmp_path / "per_clip" / "VIDEO" / "clipA.npz", hand=hand, target=obj)
    source = MaskFolderSource(tmp_path / "per_clip", object_region="target")
    got = source.region_tokens(example(start=2), (2, 2))
    assert np.array_equal(got.hand, expected.hand) and np.array_equal(got.either, expected.either)
    assert got.hand[0].tolist() == [[1, 0], [0, 0]] and got.object[1].tolist() == [[0, 0], [0, 1]]
    # 2. one npz per frame; 3. one png per region and frame
    for t in range(5):
        (tmp_path / "per_frame" / "clipA").mkdir(parents=True, exist_ok=True)
        np.savez(tmp_path / "per_frame" / "clipA" / f"{t:06d}.npz", hand=hand[t], object=obj[t])
        for region, mask in (("hand", hand[t]), ("object", obj[t])):
            (tmp_path / "png" / "clipA" / region).mkdir(parents=True, exist_ok=True)
            Image.fromarray(mask.astype(np.uint8) * 255).save(tmp_path / "png" / "clipA" / region / f"{t:06d}.png")
    for layout in ("per_frame", "png"):
        got = MaskFolderSource(tmp_path / layout).region_tokens(example(start=2), (2, 2))
        assert np.array_equal(got.object, expected.object), layout


def test_mask_folder_errors_name_what_is_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="mask folder .* not found"):
        MaskFolderSource(tmp_path / "nope")
    source = MaskFolderSource(tmp_path)
    with pytest.raises(MaskNotFoundError, match="no masks of clipA in .*clipA.npz"):
        source.region_tokens(example(), (2, 2))
    np.savez(tmp_path / "clipA.npz", hand=np.zeros((2, 4, 4), bool))
    with pytest.raises(ValueError, match=r"clipA.npz: has the arrays \['hand'\], lacks \['object'\]"):
        source.region_tokens(example(), (2, 2))
    np.savez(tmp_path / "clipA.npz", hand=np.zeros((2, 4, 4), bool), object=np.zeros((2, 4, 4), bool))
    with pytest.raises(ValueError, match="does not reach frames 1..2"):
        source.region_tokens(example(start=1), (2, 2))
    (tmp_path / "clipB" / "hand").mkdir(parents=True)
    with pytest.raises(MaskNotFoundError, match="no mask of frame 0 of clipB"):
        source.region_tokens(example("clipB"), (2, 2))
    (tmp_path / "bad.npz").write_text("not an npz")
    with pytest.raises(ValueError, match="bad.npz: expected an .npz of region masks"):
        source.region_tokens(example("bad"), (2, 2))
    with pytest.raises(ValueError, match=r"must be bool or in \[0, 1\]"):
        region_tokens_from_masks(np.full((1, 2, 2), 2.0), np.zeros((1, 2, 2)), (1, 1))


def test_synthetic_masks_match_the_clips_own(tmp_path):
    from transformers_gazeflow.data.synthetic import SyntheticGazeSettings, generate_clip, generate_dataset

    settings = SyntheticGazeSettings(num_clips=2, min_frames=8, max_frames=10, width=32, height=24)
    generate_dataset(tmp_path, settings)
    source = SyntheticMaskSource(tmp_path)
    clip = generate_clip(settings, 1)
    masks = clip.masks(token_grid=(2, 2))
    got = source.region_tokens(example(clip.clip_id, start=2, frames=4), (2, 2))
    assert np.array_equal(got.hand, masks.tokens["hand"][2:6])
    assert np.array_equal(got.object, masks.tokens["target"][2:6])
    assert got.hand.sum() > 0
    with pytest.raises(MaskNotFoundError, match="is not a clip of the synthetic dataset"):
        source.region_tokens(example("synth_0_00009"), (2, 2))
