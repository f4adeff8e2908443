"""The EGTEA Gaze+ builder end to end on files made from scratch: synthetic clips written in the raw
EGTEA layout (``write_egtea_layout``: mp4 clips, BeGaze format-1 text at 1280x960, CRLF split files, both gaze file
names) -> ``load_gaze_dataset("egtea", ...)`` in both parity modes -> the examples hold what the writer says a
parser must read back -> the collator turns them into model inputs."""

import numpy as np
import pytest
import torch

from transformers_gazeflow.data.collator import GazeFlowDataCollator
from transformers_gazeflow.data.gaze_types import UNTRACKED, valid_mask
from transformers_gazeflow.data.loading import load_gaze_dataset
from transformers_gazeflow.data.processing import GazeFlowVideoProcessor
from transformers_gazeflow.data.synthetic import SyntheticGazeSettings, write_egtea_layout
from transformers_gazeflow.models.gazeflow.windows import window_starts

# 4 tiny clips (34, 47, 42 and 17 frames; 2 train, 2 test) with every gaze type in them: 15 untracked frames,
# blinks, saccades and off-frame samples (the test checks that they are there)
SETTINGS = SyntheticGazeSettings(num_clips=4, min_frames=16, max_frames=48, width=32, height=24, seed=40)
WINDOW, STRIDE = 16, 8
GAZE_ATOL = 1e-5  # of the frame: 0.013 px of the 1280x960 gaze space (3-decimal text, float32)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    root = tmp_path_factory.mktemp("egtea_from_scratch")
    clips = write_egtea_layout(root, SETTINGS, clips_per_session=2, session_kinds=("OP", "P"))
    return root, clips


@pytest.fixture(scope="module")
def built(written, tmp_path_factory):
    root, _ = written
    cache = tmp_path_factory.mktemp("cache")
    return {
        parity: load_gaze_dataset(
            "egtea",
            data_dir=root,
            cache_dir=cache,
            parity=parity,
            windows="all",
            window_frames=WINDOW,
            window_stride=STRIDE,
        )
        for parity in ("fixed", "glc")
    }


def test_the_written_layout_exercises_every_gaze_type_and_both_gaze_file_names(written):
    root, clips = written
    types = np.concatenate([clip.expected_type for clip in clips])
    assert np.bincount(types, minlength=5).min() > 0  # untracked, fixation, saccade, blink, off-frame
    assert sorted(p.name for p in (root / "gaze_data").iterdir()) == [
        "OP01-R01-Synthetic.txt",
        "P02-R02-Synthetic-GazeData.txt",
    ]
    assert {clip.split for clip in clips} == {"train", "test"}
    assert max(clip.clip.num_frames for clip in clips) > 2 * WINDOW


@pytest.mark.parametrize("parity", ["fixed", "glc"])
def test_examples_read_back_what_the_writer_wrote(written, built, parity):
    _, clips = written
    dataset = built[parity]
    assert set(dataset) == {"train", "test"}
    untracked_checked = [0]
    for clip in clips:
        examples = sorted(
            (e for e in dataset[clip.split] if e["clip_id"] == clip.name), key=lambda e: e["window_start"]
        )
        total = clip.clip.num_frames
        # windows cover the whole clip, as window_starts says
        assert [e["window_start"] for e in examples] == window_starts(total, WINDOW, STRIDE)
        assert {e["num_frames"] for e in examples} == {min(WINDOW, total)}
        covered = np.zeros(total, bool)
        expected_type = clip.expected_type if parity == "fixed" else clip.expected_type_glc
        for example in examples:
            window = slice(example["window_start"], example["window_start"] + example["num_frames"])
            covered[window] = True
            types = np.asarray(example["gaze_type"], np.int8)
            gaze = np.asarray(example["gaze"], np.float32)
            np.testing.assert_array_equal(types, expected_type[window], err_msg=f"{parity} {clip.name}")
            tracked = types != UNTRACKED
            np.testing.assert_allclose(
                gaze[tracked],
                clip.expected_gaze[window][tracked],
                atol=GAZE_ATOL,
                rtol=0,
                err_msg=f"{parity} {clip.name}",
            )
            if parity == "glc":  # GLC's loader puts untracked frames at the centre (docs/specs/data.md)
                np.testing.assert_allclose(gaze[~tracked], 0.5)
            else:  # by default they hold the last valid point (gaze_common.fill_untracked)
                valid = valid_mask(types)
                for k in np.flatnonzero(~tracked):
                    before = np.flatnonzero(valid[:k])
                    if before.size:
                        np.testing.assert_array_equal(gaze[k], gaze[before[-1]])
                        untracked_checked[0] += 1
            np.testing.assert_array_equal(example["valid"], valid_mask(expected_type[window]))
            assert (example["action"], example["verb"], example["noun"]) == (
                clip.action - 1,
                clip.verb - 1,
                clip.noun - 1,
            )
            assert (example["width"], example["height"], example["fps"]) == (SETTINGS.width, SETTINGS.height, 24.0)
            assert example["video_path"] == str(clip.video_path.resolve())
        assert covered.all()
    assert parity == "glc" or untracked_checked[0] > 5


def test_only_glc_parity_loses_the_off_frame_code(written, built):
    _, clips = written
    codes = {parity: np.concatenate([np.asarray(e["gaze_type"]) for e in built[parity]["train"]]) for parity in built}
    assert (codes["fixed"] == 4).any() and not (codes["glc"] == 4).any()
    assert len(codes["fixed"]) == len(codes["glc"])


def test_the_test_split_defaults_to_the_first_window(written, built, tmp_path):
    root, clips = written
    test = load_gaze_dataset(
        "egtea", data_dir=root, split="test", cache_dir=tmp_path, window_frames=WINDOW, window_stride=STRIDE
    )
    assert sorted(test["clip_id"]) == sorted(c.name for c in clips if c.split == "test")
    assert set(test["window_start"]) == {0}


def test_the_collator_turns_built_examples_into_model_inputs(written, built):
    _, clips = written
    by_name = {clip.name: clip for clip in clips}
    train = built["fixed"]["train"]
    examples = [train[i] for i in range(len(train))][:4]
    num_frames = WINDOW + 4  # longer than the windows: the collator pads by repeating the last frame
    batch = GazeFlowDataCollator(GazeFlowVideoProcessor(size=32), num_frames=num_frames)(examples)
    assert batch["pixel_values_videos"].shape == (len(examples), num_frames, 3, 32, 32)
    assert batch["pixel_values_videos"].dtype == torch.float32 and torch.isfinite(batch["pixel_values_videos"]).all()
    for row, example in enumerate(examples):
        clip = by_name[example["clip_id"]]
        window = slice(example["window_start"], example["window_start"] + WINDOW)
        valid = torch.from_numpy(valid_mask(clip.expected_type[window]))
        assert torch.equal(batch["valid_mask"][row, :WINDOW], valid) and not batch["valid_mask"][row, WINDOW:].any()
        expected = torch.from_numpy(2 * clip.expected_gaze[window] - 1)  # model coordinates
        assert torch.allclose(batch["gaze"][row, :WINDOW][valid], expected[valid], atol=2 * GAZE_ATOL)
        assert torch.equal(
            batch["pixel_values_videos"][row, WINDOW:],
            batch["pixel_values_videos"][row, WINDOW - 1 : WINDOW].expand(4, -1, -1, -1),
        )
    assert batch["clip_id"] == [e["clip_id"] for e in examples]
    assert batch["action"].tolist() == [by_name[e["clip_id"]].action - 1 for e in examples]
