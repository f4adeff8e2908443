"""The synthetic_gaze builder used directly, as datasets 4+ requires (no load_dataset on scripts)."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.script_loading import load_script
from transformers_gazeflow.data.collator import GazeFlowDataCollator
from transformers_gazeflow.data.processing import GazeFlowVideoProcessor
from transformers_gazeflow.data.synthetic import MANIFEST_NAME, load_dataset_records
from transformers_gazeflow.models.gazeflow.windows import window_starts

BUILDER_FILE = Path(__file__).resolve().parents[2] / "datasets_scripts" / "synthetic_gaze" / "synthetic_gaze.py"


@pytest.fixture(scope="module")
def builder_module():
    module = load_script(BUILDER_FILE, "synthetic_gaze", register=True)
    yield module
    sys.modules.pop("synthetic_gaze", None)


@pytest.fixture(scope="module")
def tiny(builder_module, tmp_path_factory):
    root = tmp_path_factory.mktemp("synthetic")
    builder = builder_module.SyntheticGaze(
        data_dir=str(root / "clips"), config_name="tiny", cache_dir=str(root / "cache")
    )
    builder.download_and_prepare()
    return root, builder, {split: builder.as_dataset(split=split) for split in ("train", "validation", "test")}


def test_builder_generates_into_an_empty_data_dir_and_yields_the_unified_schema(tiny):
    root, builder, splits = tiny
    assert builder.name == "synthetic_gaze"
    settings, records = load_dataset_records(root / "clips")
    assert settings.num_clips == 6 and (settings.width, settings.height) == (64, 48)
    by_id = {r["clip_id"]: r for r in records}
    assert set(splits["train"].features) == {
        "clip_id",
        "video_path",
        "window_start",
        "num_frames",
        "fps",
        "width",
        "height",
        "gaze",
        "gaze_type",
        "valid",
        "action",
        "verb",
        "noun",
        "camera_model",
        "camera_params",
    }
    assert splits["train"].features["gaze_type"].feature.dtype == "int8"
    for split, dataset in splits.items():
        clips = [r for r in records if r["split"] == split]
        assert len(clips) >= 1
        expected = sum(len(window_starts(r["num_frames"], 64, 32)) if split == "train" else 1 for r in clips)
        assert len(dataset) == expected
        for example in dataset:
            record = by_id[example["clip_id"]]
            start, n = example["window_start"], example["num_frames"]
            assert n == min(64, record["num_frames"]) and start + n <= record["num_frames"]
            assert split == "train" or start == 0
            assert np.allclose(example["gaze"], np.asarray(record["gaze"])[start : start + n], atol=1e-6)
            assert example["gaze_type"] == record["gaze_type"][start : start + n]
            assert example["valid"] == record["valid"][start : start + n]
            assert example["action"] == record["task"] and example["verb"] == example["noun"] == -1
            assert Path(example["video_path"]).is_absolute() and Path(example["video_path"]).is_file()
            assert (example["width"], example["height"], example["fps"]) == (64, 48, 24.0)
    # the train windows cover each clip exactly as window_starts says
    long_clip = max(records, key=lambda r: r["num_frames"])
    if long_clip["split"] == "train":
        starts = sorted(e["window_start"] for e in splits["train"] if e["clip_id"] == long_clip["clip_id"])
        assert starts == window_starts(long_clip["num_frames"], 64, 32)


def test_builder_examples_collate_into_a_model_batch(tiny):
    _, _, splits = tiny
    examples = [splits["train"][i] for i in range(min(3, len(splits["train"])))]
    batch = GazeFlowDataCollator(GazeFlowVideoProcessor(size=32), num_frames=64)(examples)
    assert batch["pixel_values_videos"].shape == (len(examples), 64, 3, 32, 32)
    assert batch["gaze"].abs().max() <= 1
    for row, example in enumerate(examples):
        assert batch["valid_mask"][row].sum() == sum(example["valid"])
    # the numpy format (arrays instead of lists) collates to the same batch
    as_numpy = splits["train"].with_format("numpy")
    again = GazeFlowDataCollator(GazeFlowVideoProcessor(size=32), num_frames=64)(
        [as_numpy[i] for i in range(len(examples))]
    )
    for key in ("pixel_values_videos", "gaze", "valid_mask", "gaze_type", "window_start", "action"):
        assert torch.equal(again[key], batch[key]), key
    assert again["clip_id"] == batch["clip_id"]


def test_load_gaze_dataset_runs_the_same_builder(tiny):
    """The README's way: ``load_gaze_dataset("synthetic", ...)`` (no importlib), reusing the generated clips."""
    from transformers_gazeflow import load_gaze_dataset

    root, _, splits = tiny
    train = load_gaze_dataset(
        "synthetic", data_dir=root / "clips", split="train", config_name="tiny", cache_dir=root / "cache_loader"
    )
    assert train["clip_id"] == splits["train"]["clip_id"]
    assert train["window_start"] == splits["train"]["window_start"] and train["gaze"] == splits["train"]["gaze"]


def test_reusing_the_data_dir_and_option_overrides(builder_module, tiny):
    root, _, splits = tiny
    stamp = (root / "clips" / MANIFEST_NAME).stat().st_mtime_ns
    builder = builder_module.SyntheticGaze(
        data_dir=str(root / "clips"),
        config_name="tiny",
        window_frames=16,
        window_stride=8,
        windows="all",
        cache_dir=str(root / "cache2"),
    )
    builder.download_and_prepare()
    test = builder.as_dataset(split="test")
    assert (root / "clips" / MANIFEST_NAME).stat().st_mtime_ns == stamp  # nothing regenerated
    _, records = load_dataset_records(root / "clips")
    test_clips = [r for r in records if r["split"] == "test"]
    assert len(test) == sum(len(window_starts(r["num_frames"], 16, 8)) for r in test_clips)
    assert max(test["num_frames"]) <= 16

    other = builder_module.SyntheticGaze(
        data_dir=str(root / "clips"), config_name="tiny", seed=99, cache_dir=str(root / "cache3")
    )
    with pytest.raises(ValueError, match="other settings"):
        other.download_and_prepare()


def test_bad_options_and_missing_files(builder_module, tmp_path):
    with pytest.raises(ValueError, match="window_stride"):
        builder_module.SyntheticGaze(
            data_dir=str(tmp_path / "a"), config_name="tiny", window_stride=100, cache_dir=str(tmp_path / "cache")
        ).download_and_prepare()
    with pytest.raises(ValueError, match="windows must be one of"):
        builder_module.SyntheticGaze(
            data_dir=str(tmp_path / "a"), config_name="tiny", windows="last", cache_dir=str(tmp_path / "cache")
        ).download_and_prepare()
    with pytest.raises(ValueError, match="no reference loader.*parity='glc'"):
        builder_module.SyntheticGaze(
            data_dir=str(tmp_path / "a"), config_name="tiny", parity="glc", cache_dir=str(tmp_path / "cache")
        ).download_and_prepare()
    with pytest.raises(ValueError, match="num_tasks"):
        builder_module.SyntheticGaze(
            data_dir=str(tmp_path / "b"), config_name="tiny", num_tasks=12, cache_dir=str(tmp_path / "cache")
        ).download_and_prepare()
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "train_split1.txt").write_text("x")
    with pytest.raises(FileNotFoundError, match="synthetic_gaze.json not found"):
        builder_module.SyntheticGaze(
            data_dir=str(foreign), config_name="tiny", cache_dir=str(tmp_path / "cache")
        ).download_and_prepare()


def test_the_config_carries_every_generation_setting_with_its_default(builder_module):
    """The config's generation fields are SyntheticGazeSettings' own (one definition), plus the shared options."""
    from transformers_gazeflow.data.loading import GazeBuilderOptions
    from transformers_gazeflow.data.synthetic import SyntheticGazeSettings

    config = builder_module.SyntheticGazeConfig(name="x")
    assert config.settings() == SyntheticGazeSettings()
    assert isinstance(config, GazeBuilderOptions) and (config.window_frames, config.parity) == (64, "fixed")
    assert builder_module.SyntheticGazeConfig(name="y", seed=5, width=32).settings() == SyntheticGazeSettings(
        seed=5, width=32
    )


def test_without_data_dir_the_clips_go_under_the_cache(builder_module, tmp_path):
    builder = builder_module.SyntheticGaze(
        config_name="tiny", num_clips=3, max_frames=20, cache_dir=str(tmp_path / "cache")
    )
    builder.download_and_prepare()
    manifests = list((tmp_path / "cache" / "synthetic_gaze_clips").glob(f"tiny-*/{MANIFEST_NAME}"))
    assert len(manifests) == 1 and json.loads(manifests[0].read_text())["settings"]["num_clips"] == 3
    assert sum(len(builder.as_dataset(split=s)) for s in ("train", "validation", "test")) == 3


def test_a_single_clip_gives_only_a_train_split(builder_module, tmp_path):
    builder = builder_module.SyntheticGaze(
        data_dir=str(tmp_path / "one"),
        config_name="tiny",
        num_clips=1,
        max_frames=16,
        cache_dir=str(tmp_path / "cache"),
    )
    builder.download_and_prepare()
    assert set(builder.as_dataset()) == {"train"} and len(builder.as_dataset(split="train")) == 1


def test_the_gaze_target_can_be_found_from_the_model_input_pixels(tiny):
    """Learnability: on the processed 32x32 frames (after H.264), the centroid of the saturated pixels (the task's
    target; distractors and hands are unsaturated) predicts the gaze far better than the centre-bias baseline."""
    _, _, splits = tiny
    train = splits["train"]
    processor = GazeFlowVideoProcessor(size=32)
    batch = GazeFlowDataCollator(processor, num_frames=64)([train[i] for i in range(len(train))])
    rgb = processor.unnormalize(batch["pixel_values_videos"]).float()  # [B, W, S, S, 3]
    saturated = ((rgb.amax(-1) - rgb.amin(-1)) > 110).float()
    centres = (torch.arange(32) + 0.5) / 32 * 2 - 1  # pixel centres in model coordinates
    count = saturated.sum((-1, -2)).clamp(min=1)
    guess = torch.stack(
        [(saturated.sum(-2) * centres).sum(-1) / count, (saturated.sum(-1) * centres).sum(-1) / count], dim=-1
    )
    valid = batch["valid_mask"]
    blob_error = (guess - batch["gaze"]).norm(dim=-1)[valid].mean()
    centre_error = batch["gaze"].norm(dim=-1)[valid].mean()
    assert blob_error < 0.5 * centre_error


def test_a_cache_whose_videos_are_gone_is_rebuilt_from_the_data_dir(tiny, tmp_path):
    """A user deletes the rendered folder (or a run is killed and its folder removed) and runs again: the datasets
    cache still names the old videos, so the clips are rendered again rather than the run failing on a missing
    file."""
    import shutil

    from transformers_gazeflow import load_gaze_dataset

    root, _, _ = tiny
    clips, cache = tmp_path / "clips", tmp_path / "cache"
    shutil.copytree(root / "clips", clips)
    first = load_gaze_dataset("synthetic", data_dir=clips, split="test", config_name="tiny", cache_dir=cache)
    shutil.rmtree(clips)
    again = load_gaze_dataset("synthetic", data_dir=clips, split="test", config_name="tiny", cache_dir=cache)
    assert again["clip_id"] == first["clip_id"] and again["gaze"] == first["gaze"]
    assert all(Path(path).is_file() for path in again["video_path"])
