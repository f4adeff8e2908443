import numpy as np
import pytest
import torch

from transformers_gazeflow.data.collator import FLIP_STATE_KEY, GazeFlowDataCollator
from transformers_gazeflow.data.processing import GazeFlowVideoProcessor
from transformers_gazeflow.data.video import decode_frames, write_video

from ..conftest import gradient_frames


def _example(path, n, start=0, width=64, height=48, clip="clip-a", seed=0, **extra):
    rng = np.random.default_rng(seed)
    valid = np.ones(n, bool)
    valid[1] = False
    gaze_type = np.ones(n, np.int8)
    gaze_type[1] = 3
    example = {
        "clip_id": clip,
        "video_path": str(path),
        "window_start": start,
        "num_frames": n,
        "fps": 24.0,
        "width": width,
        "height": height,
        "gaze": rng.uniform(0, 1, (n, 2)).astype(np.float32).tolist(),
        "gaze_type": gaze_type.tolist(),
        "valid": valid.tolist(),
        "action": 3,
        "verb": -1,
        "noun": -1,
    }
    example.update(extra)
    return example


@pytest.fixture
def tiny_clip(tmp_path):
    frames = gradient_frames(20, 48, 64)
    return write_video(tmp_path / "tiny.mp4", frames, fps=24), frames


def test_shapes_gaze_range_padding_and_metadata(tiny_clip):
    path, _ = tiny_clip
    proc = GazeFlowVideoProcessor(size=16)
    collate = GazeFlowDataCollator(proc, num_frames=8)
    full = _example(path, 8, start=4, clip="full", seed=1)
    short = _example(path, 5, start=15, clip="short", seed=2, action=7)
    del short["verb"], short["noun"]
    batch = collate([full, short])

    assert batch["pixel_values_videos"].shape == (2, 8, 3, 16, 16)
    assert batch["pixel_values_videos"].dtype == torch.float32
    assert batch["gaze"].shape == (2, 8, 2) and batch["gaze"].dtype == torch.float32
    assert batch["valid_mask"].shape == (2, 8) and batch["valid_mask"].dtype == torch.bool
    assert batch["gaze"].min() >= -1 and batch["gaze"].max() <= 1
    # gaze goes through geometry.unit_to_model: 2 x - 1
    assert torch.allclose(batch["gaze"][0], torch.tensor(full["gaze"]) * 2 - 1)
    assert torch.allclose(batch["gaze"][1, :5], torch.tensor(short["gaze"]) * 2 - 1)

    # padding repeats the last frame (and last gaze point) and marks the padded frames invalid
    pixels = batch["pixel_values_videos"][1]
    for k in range(5, 8):
        assert torch.equal(pixels[k], pixels[4])
        assert torch.equal(batch["gaze"][1, k], batch["gaze"][1, 4])
    assert not torch.equal(pixels[3], pixels[4])
    assert batch["valid_mask"][1].tolist() == [True, False, True, True, True, False, False, False]
    assert batch["valid_mask"][0].tolist() == [True, False] + [True] * 6
    assert batch["gaze_type"][1].tolist() == [1, 3, 1, 1, 1, 0, 0, 0]

    # metadata passes through
    assert batch["clip_id"] == ["full", "short"]
    assert batch["window_start"].tolist() == [4, 15] and batch["num_frames"].tolist() == [8, 5]
    assert batch["width"].tolist() == [64, 64] and batch["height"].tolist() == [48, 48]
    assert batch["fps"].tolist() == [24.0, 24.0]
    assert batch["action"].tolist() == [3, 7] and batch["verb"].tolist() == [-1, -1]
    assert batch["noun"].tolist() == [-1, -1]


def test_the_decoded_window_is_the_examples_window(tiny_clip):
    path, _ = tiny_clip
    proc = GazeFlowVideoProcessor(size=16)
    batch = GazeFlowDataCollator(proc, num_frames=6)([_example(path, 6, start=9)])
    expected = proc.preprocess(decode_frames(path, 9, 6))
    assert torch.equal(batch["pixel_values_videos"][0], expected)
    other = proc.preprocess(decode_frames(path, 10, 6))
    assert not torch.equal(batch["pixel_values_videos"][0], other)


def test_window_from_a_real_mp4(bikes_mp4):
    proc = GazeFlowVideoProcessor(size=32)
    example = _example(bikes_mp4, 12, start=200, width=640, height=272, fps=25.0)
    batch = GazeFlowDataCollator(proc, num_frames=16)([example])
    assert batch["pixel_values_videos"].shape == (1, 16, 3, 32, 32)
    expected = proc.preprocess(decode_frames(bikes_mp4, 200, 12))
    assert torch.equal(batch["pixel_values_videos"][0, :12], expected)
    assert torch.equal(batch["pixel_values_videos"][0, 15], expected[-1])
    assert batch["valid_mask"][0, 12:].sum() == 0 and batch["fps"].item() == 25.0


def test_untracked_nan_gaze_becomes_finite_and_invalid(tiny_clip):
    path, _ = tiny_clip
    example = _example(path, 4)
    example["gaze"][1] = [float("nan"), float("nan")]  # frame 1 is invalid in _example
    batch = GazeFlowDataCollator(GazeFlowVideoProcessor(size=8), num_frames=4)([example])
    assert torch.isfinite(batch["gaze"]).all() and not batch["valid_mask"][0, 1]


@pytest.mark.parametrize(
    "change,match",
    [
        ({"num_frames": 9}, r"num_frames must be in \[1, 8\]"),
        ({"gaze": [[0.5, 0.5]] * 3}, r"gaze must have shape \[num_frames, 2\]"),
        ({"valid": [True] * 3}, r"valid must have shape"),
        ({"gaze_type": [1, 1, 1, 9]}, r"gaze_type codes must be in \(0, 1, 2, 3, 4\)"),
        ({"gaze": [[0.5, 0.5], [0.5, 0.5], [320.0, 0.5], [0.5, 0.5]]}, r"unit coordinates in \[0, 1\].*\[2\]"),
        ({"gaze": [[0.5, 0.5], [0.5, 0.5], [float("nan"), 0.5], [0.5, 0.5]]}, r"not finite on valid frames \[2\]"),
        ({"width": 640, "height": 480}, "says 640x480 but .* decodes to 64x48"),
        ({"window_start": -1}, "window_start must be >= 0"),
    ],
)
def test_bad_examples_raise_naming_the_field(tiny_clip, change, match):
    path, _ = tiny_clip
    example = _example(path, 4, clip="bad-clip")
    example.update(change)
    with pytest.raises(ValueError, match=match):
        GazeFlowDataCollator(GazeFlowVideoProcessor(size=8), num_frames=8)([_example(path, 4), example])


def test_missing_fields_and_bad_arguments(tiny_clip):
    path, _ = tiny_clip
    collate = GazeFlowDataCollator(GazeFlowVideoProcessor(size=8), num_frames=8)
    example = _example(path, 4)
    del example["video_path"]
    with pytest.raises(ValueError, match=r"examples\[0\] lacks .*video_path"):
        collate([example])
    with pytest.raises(ValueError, match="non-empty list"):
        collate([])
    with pytest.raises(ValueError, match="processor must be a GazeFlowVideoProcessor"):
        GazeFlowDataCollator(object(), num_frames=8)
    with pytest.raises(ValueError, match="num_frames must be a positive int"):
        GazeFlowDataCollator(GazeFlowVideoProcessor(size=8), num_frames=0)


def test_missing_video_file_is_named(tmp_path):
    example = _example(tmp_path / "gone.mp4", 4)
    with pytest.raises(FileNotFoundError, match="gone.mp4"):
        GazeFlowDataCollator(GazeFlowVideoProcessor(size=8), num_frames=4)([example])


def test_horizontal_flip_mirrors_frames_and_gaze_together(tiny_clip):
    path, _ = tiny_clip
    proc = GazeFlowVideoProcessor(size=16)
    examples = [_example(path, 8, start=2, seed=3), _example(path, 5, start=15, clip="short", seed=4)]
    plain = GazeFlowDataCollator(proc, num_frames=8)(examples)
    mirrored = GazeFlowDataCollator(proc, num_frames=8, horizontal_flip_probability=1.0)(examples)
    # the gradient frames are not left-right symmetric, so a mirror is a real change
    assert not torch.equal(mirrored["pixel_values_videos"], plain["pixel_values_videos"])
    assert torch.equal(mirrored["pixel_values_videos"], plain["pixel_values_videos"].flip(-1))
    # unit x -> 1 - x is model x -> -x; y, validity and the gaze types do not change
    assert torch.allclose(mirrored["gaze"][..., 0], -plain["gaze"][..., 0], atol=1e-6)
    assert torch.equal(mirrored["gaze"][..., 1], plain["gaze"][..., 1])
    assert torch.equal(mirrored["valid_mask"], plain["valid_mask"])
    assert torch.equal(mirrored["gaze_type"], plain["gaze_type"])
    assert examples[0]["gaze"] == _example(path, 8, start=2, seed=3)["gaze"]  # the example itself is untouched


def test_horizontal_flip_draws_per_example_from_the_seeded_generator(tiny_clip):
    path, _ = tiny_clip
    proc = GazeFlowVideoProcessor(size=16)
    examples = [_example(path, 4, start=i, seed=i) for i in range(12)]
    plain = GazeFlowDataCollator(proc, num_frames=4)(examples)
    collate = GazeFlowDataCollator(proc, num_frames=4, horizontal_flip_probability=0.5)

    def flipped_rows():
        batch = collate(examples)
        rows = []
        for i in range(len(examples)):
            same = torch.equal(batch["gaze"][i], plain["gaze"][i])
            mirror = torch.allclose(batch["gaze"][i, :, 0], -plain["gaze"][i, :, 0], atol=1e-6)
            assert same != mirror  # each example is either untouched or mirrored whole
            assert torch.equal(
                batch["pixel_values_videos"][i],
                plain["pixel_values_videos"][i].flip(-1) if mirror else plain["pixel_values_videos"][i],
            )
            rows.append(mirror)
        return rows

    torch.manual_seed(5)
    first = flipped_rows()
    torch.manual_seed(5)
    assert flipped_rows() == first  # reproducible under the training seed
    assert 0 < sum(first) < len(examples)  # a mix at p = 0.5 (12 draws: both outcomes)
    # p = 0 draws nothing from the generator, so an unaugmented run's random stream is unchanged
    torch.manual_seed(5)
    GazeFlowDataCollator(proc, num_frames=4)(examples)
    after = torch.rand(())
    torch.manual_seed(5)
    assert torch.equal(torch.rand(()), after)


@pytest.mark.parametrize("bad", [-0.1, 1.5, "0.5", True, float("nan")])
def test_a_bad_flip_probability_is_named(bad):
    with pytest.raises(ValueError, match=r"horizontal_flip_probability must be a number in \[0, 1\]"):
        GazeFlowDataCollator(GazeFlowVideoProcessor(size=8), num_frames=4, horizontal_flip_probability=bad)


def test_a_flip_generator_draws_alone_and_each_batch_carries_its_state(tiny_clip):
    """With ``flip_generator`` the draws leave torch's global generator alone, and a collator set to a batch's
    ``flip_generator_state`` draws the next batch's flips again (what a resumed training run relies on)."""
    path, _ = tiny_clip
    proc = GazeFlowVideoProcessor(size=16)
    examples = [_example(path, 4, start=i, seed=i) for i in range(12)]
    plain = GazeFlowDataCollator(proc, num_frames=4)(examples)
    assert FLIP_STATE_KEY not in plain

    def mirrored_rows(batch):
        return [
            bool(torch.allclose(batch["gaze"][i, :, 0], -plain["gaze"][i, :, 0], atol=1e-6))
            for i in range(len(examples))
        ]

    collate = GazeFlowDataCollator(
        proc, num_frames=4, horizontal_flip_probability=0.5, flip_generator=torch.Generator().manual_seed(7)
    )
    global_before = torch.get_rng_state()
    first, second = collate(examples), collate(examples)
    assert torch.equal(torch.get_rng_state(), global_before)  # the global stream is the model's noise alone
    assert 0 < sum(mirrored_rows(first)) < len(examples)
    assert mirrored_rows(first) != mirrored_rows(second)  # the stream goes on from batch to batch

    again = GazeFlowDataCollator(
        proc, num_frames=4, horizontal_flip_probability=0.5, flip_generator=torch.Generator().manual_seed(0)
    )
    again.flip_generator.set_state(first[FLIP_STATE_KEY])  # the state after the first batch's draws
    assert mirrored_rows(again(examples)) == mirrored_rows(second)
    with pytest.raises(ValueError, match="flip_generator must be a torch.Generator or None, got int"):
        GazeFlowDataCollator(proc, num_frames=4, horizontal_flip_probability=0.5, flip_generator=7)
