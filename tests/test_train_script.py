"""examples/train.py end to end on the tiny synthetic dataset: two processes, resume, the feature cache, bad input."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from torch.optim.swa_utils import AveragedModel

from tests.script_loading import load_script
from transformers_gazeflow.training import loop

REPO = Path(__file__).resolve().parents[1]
TRAIN = REPO / "examples" / "train.py"
TINY = [
    "--dataset_name",
    "synthetic",
    "--dataset_config",
    "tiny",
    "--config_preset",
    "tiny",
    "--per_device_train_batch_size",
    "2",
    "--dataloader_num_workers",
    "0",
    "--logging_steps",
    "1",
]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    cache = tmp_path_factory.mktemp("hf_datasets_cache")
    environment = {
        **os.environ,
        "HF_DATASETS_CACHE": str(cache),
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "OMP_NUM_THREADS": "1",
    }
    return environment


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("synthetic_tiny")


def run_train(args, env, launcher=None, check=True):
    command = (launcher or [sys.executable]) + [str(TRAIN)] + [str(a) for a in args]
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO, timeout=600)
    if check and result.returncode != 0:
        raise AssertionError(
            f"train.py failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}"
        )
    return result


def checksums(output: str) -> dict[int, float]:
    pattern = r"\[rank (\d+)\] parameter checksum ([-+0-9.eE]+)"
    return {int(rank): float(value) for rank, value in re.findall(pattern, output)}


def test_two_processes_on_cpu_keep_replicas_equal(tmp_path, env, data_dir):
    """... and a two-process checkpoint (one random state per process) resumes exactly with two processes."""
    # --standalone: a rendezvous on a free local port (a fixed port fails when another run holds it)
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    result = run_train(
        TINY
        + [
            "--data_dir",
            data_dir,
            "--output_dir",
            tmp_path / "run",
            "--max_train_steps",
            4,
            "--checkpointing_steps",
            2,
        ],
        {**env, "ACCELERATE_USE_CPU": "true"},
        launcher=torchrun,
    )
    sums = checksums(result.stdout + result.stderr)
    assert set(sums) == {0, 1}, result.stdout[-2000:]
    assert sums[0] == sums[1]
    assert "2 process(es) on cpu" in result.stderr
    assert (tmp_path / "run" / "model.safetensors").exists() and (tmp_path / "run" / "README.md").exists()
    # the validation success check: made once, on the main process (the other waits), and kept
    checked = json.loads((tmp_path / "run" / "trainer_state.json").read_text())["validation_success"]
    assert checked["clips"] == 1 and checked["learned"] in (True, False), checked
    assert (result.stdout + result.stderr).count("validation success check: predicted 1 validation clip(s)") == 1
    written = {p.name for p in (tmp_path / "run" / "step_2").iterdir()}
    assert {"rng_state_0.safetensors", "rng_state_1.safetensors"} <= written
    resumed = run_train(
        TINY
        + [
            "--data_dir",
            data_dir,
            "--output_dir",
            tmp_path / "resumed",
            "--max_train_steps",
            4,
            "--resume_from_checkpoint",
            tmp_path / "run" / "step_2",
        ],
        {**env, "ACCELERATE_USE_CPU": "true"},
        launcher=torchrun,
    )
    assert "resumed from" in resumed.stderr and checksums(resumed.stdout + resumed.stderr) == sums
    a, b = load_file(tmp_path / "run" / "model.safetensors"), load_file(tmp_path / "resumed" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[key], b[key]) for key in a)


@pytest.mark.parametrize("augmentation", [[], ["--horizontal_flip_probability", "0.5"]], ids=["plain", "flips"])
def test_resume_reaches_the_same_parameters(tmp_path, env, data_dir, augmentation):
    full = tmp_path / "full"
    run_train(
        TINY
        + augmentation
        + ["--data_dir", data_dir, "--output_dir", full, "--max_train_steps", 4, "--checkpointing_steps", 2],
        env,
    )
    assert sorted(p.name for p in full.glob("step_*")) == ["step_2", "step_4"]
    assert not list(full.glob(".tmp_step_*"))
    resumed = tmp_path / "resumed"
    result = run_train(
        TINY
        + augmentation
        + [
            "--data_dir",
            data_dir,
            "--output_dir",
            resumed,
            "--max_train_steps",
            4,
            "--resume_from_checkpoint",
            full / "step_2",
        ],
        env,
    )
    assert "resumed from" in result.stderr
    a = load_file(full / "model.safetensors")  # the EMA weights after step 4
    b = load_file(resumed / "model.safetensors")
    assert a.keys() == b.keys()
    for key in a:  # bit for bit, flips too (the loader's look-ahead batch draws its flips again, the same ones)
        assert torch.equal(a[key], b[key]), key
    card = (full / "README.md").read_text()
    assert "EMA" in card and "validation" in card.lower() and "synthetic" in card


def test_feature_cache_is_built_once_and_rebuilt_for_another_encoder(tmp_path, env, data_dir):
    cache_dir = tmp_path / "cache"
    args = TINY + [
        "--data_dir",
        data_dir,
        "--max_train_steps",
        2,
        "--no-use_lora",
        "--cache_features",
        "--feature_cache_dir",
        cache_dir,
    ]
    first = run_train(args + ["--output_dir", tmp_path / "a"], env)
    manifest = (cache_dir / "manifest.json").read_text()
    shards = sorted(cache_dir.glob("*.safetensors"))
    assert shards and "fingerprint" in manifest
    mtimes = [p.stat().st_mtime_ns for p in shards]
    second = run_train(args + ["--output_dir", tmp_path / "b"], env)
    assert "up to date" in second.stderr
    assert [p.stat().st_mtime_ns for p in sorted(cache_dir.glob("*.safetensors"))] == mtimes
    other = run_train(
        args + ["--output_dir", tmp_path / "c", "--config_overrides", "encoder_config.num_hidden_layers=1"], env
    )
    assert "different encoder or processor: rebuilding" in other.stderr
    assert (cache_dir / "manifest.json").read_text() != manifest
    assert "checksum" in first.stdout


def test_flip_augmentation_caches_mirrored_training_windows_only(tmp_path, env, data_dir):
    cache_dir = tmp_path / "cache"
    run_train(
        TINY
        + [
            "--data_dir",
            data_dir,
            "--max_train_steps",
            2,
            "--no-use_lora",
            "--cache_features",
            "--feature_cache_dir",
            cache_dir,
            "--horizontal_flip_probability",
            "0.5",
            "--output_dir",
            tmp_path / "out",
        ],
        env,
    )
    keys = list(json.loads((cache_dir / "manifest.json").read_text())["entries"])
    mirrored = {key.removesuffix(":hflip") for key in keys if key.endswith(":hflip")}
    plain = {key for key in keys if not key.endswith(":hflip")}
    # every training window has its mirrored copy; the validation windows (the rest) have none
    assert mirrored and mirrored < plain


def test_a_causal_model_trains_on_its_per_frame_cached_tokens_with_flips(tmp_path, env, data_dir):
    """``--config_overrides causal=True`` with the feature cache and flips: the cache holds one token group per frame
    (the causal encoder windows' tokens, plain and mirrored) and the saved model is causal and streams."""
    from safetensors import safe_open

    from transformers_gazeflow import GazeFlowModel
    from transformers_gazeflow.generation.online import GazeFlowStreamer

    cache_dir = tmp_path / "cache"
    run_train(
        TINY
        + [
            "--data_dir",
            data_dir,
            "--max_train_steps",
            2,
            "--no-use_lora",
            "--cache_features",
            "--feature_cache_dir",
            cache_dir,
            "--horizontal_flip_probability",
            "0.5",
            "--config_overrides",
            "causal=True",
            "--output_dir",
            tmp_path / "out",
        ],
        env,
    )
    model = GazeFlowModel.from_pretrained(tmp_path / "out").eval()
    config = model.config
    assert config.causal
    entries = json.loads((cache_dir / "manifest.json").read_text())["entries"]
    key = next(key for key in entries if key.endswith(":hflip"))
    with safe_open(str(cache_dir / entries[key]), framework="pt") as shard:
        tokens = shard.get_tensor(key)
    assert tokens.shape == (config.num_frames * config.tokens_per_frame, config.encoder_config.hidden_size)
    streamer = GazeFlowStreamer(model, num_samples=2, num_steps=1, generator=torch.Generator().manual_seed(0))
    out = streamer.push(torch.zeros(3, config.image_size, config.image_size))
    assert out.trajectories.shape == (1, 2, 2)


def test_feature_cache_needs_a_frozen_encoder_without_lora(tmp_path, env, data_dir):
    result = run_train(
        TINY + ["--data_dir", data_dir, "--output_dir", tmp_path, "--max_train_steps", 1, "--cache_features"],
        env,
        check=False,
    )
    assert result.returncode == 1 and "--cache_features needs a frozen encoder without LoRA" in result.stderr


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--dataset_name", "imagenet"], "--dataset_name"),
        (
            ["--dataset_name", "egtea", "--data_dir", "/nonexistent/egtea"],
            "--data_dir /nonexistent/egtea does not exist",
        ),
        (["--dataset_name", "egtea"], "--data_dir is required"),
        (["--resume_from_checkpoint", "/nonexistent/step_9"], "--resume_from_checkpoint: /nonexistent/step_9"),
        (["--horizontal_flip_probability", "1.5"], "--horizontal_flip_probability must be in [0, 1], got 1.5"),
        (["--learning_rate", "0"], "--learning_rate must be > 0, got 0.0"),
        (["--min_learning_rate", "1"], "--min_learning_rate must be in [0, --learning_rate], got 1.0"),
        (["--dataset_options", "window_stride=8"], "--dataset_options cannot set window_stride"),
        (["--dataset_options", "seed"], "--dataset_options: expected key=value, got 'seed'"),
    ],
)
def test_bad_arguments_name_themselves(tmp_path, env, extra, message):
    args = ["--dataset_name", "synthetic", "--output_dir", tmp_path] + extra
    result = run_train(args, env, check=False)
    assert result.returncode != 0 and message in result.stderr, result.stderr[-2000:]


def test_dataset_options_choose_the_draw_for_training_and_the_final_check(tmp_path, env):
    """--dataset_options over the tiny config (6 clips, seed 0): the run renders and trains on that draw (its
    validation_fraction is the builder's, not train.py's --validation_fraction), the validation success check reads
    the same draw's validation clips (read without the options, the folder's settings differ from the tiny config's
    and the builder refuses it) and the card names the options."""
    draw = "seed=11,num_clips=10,validation_fraction=0.3,test_fraction=0.2"
    data = tmp_path / "draw"
    run_train(
        TINY
        + ["--data_dir", data, "--dataset_options", draw, "--output_dir", tmp_path / "run", "--max_train_steps", 1],
        env,
    )
    settings = json.loads((data / "synthetic_gaze.json").read_text())["settings"]
    assert (settings["seed"], settings["num_clips"], settings["validation_fraction"]) == (11, 10, 0.3)
    checked = json.loads((tmp_path / "run" / "trainer_state.json").read_text())["validation_success"]
    assert checked["clips"] == 3, checked  # 30% of 10 clips
    card = (tmp_path / "run" / "README.md").read_text()
    assert "synthetic (tiny, seed=11, num_clips=10, validation_fraction=0.3, test_fraction=0.2)" in card


def test_a_folder_that_is_not_a_gazeflow_model(tmp_path, env, data_dir):
    from transformers import VJEPA2Config

    VJEPA2Config(hidden_size=32, num_hidden_layers=1, num_attention_heads=2).save_pretrained(tmp_path / "vjepa2")
    (tmp_path / "empty").mkdir()
    for folder, message in ((tmp_path / "vjepa2", "not a GazeFlow"), (tmp_path / "empty", "is not a GazeFlow model")):
        result = run_train(
            TINY + ["--data_dir", data_dir, "--output_dir", tmp_path / "out", "--model_name_or_path", folder],
            env,
            check=False,
        )
        assert result.returncode == 1 and message in result.stderr and "--model_name_or_path" in result.stderr


def test_a_model_folder_trains_with_its_own_processor_and_keeps_it(tmp_path, env, data_dir):
    """--model_name_or_path FOLDER: the folder's preprocessor_config.json processes the frames and is saved with the
    trained model (a default processor used to replace it)."""
    from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
    from transformers_gazeflow.data.processing import GazeFlowVideoProcessor
    from transformers_gazeflow.hub.model_folders import save_model_folder

    config = GazeFlowConfig.tiny()
    processor = GazeFlowVideoProcessor(
        size=config.image_size, image_mean=[0.5, 0.4, 0.3], image_std=[0.2, 0.3, 0.4], resample="bicubic"
    )
    assert processor != GazeFlowVideoProcessor(size=config.image_size)
    torch.manual_seed(0)
    save_model_folder(GazeFlowModel(config), tmp_path / "start", processor=processor)
    run_train(
        TINY
        + [
            "--data_dir",
            data_dir,
            "--output_dir",
            tmp_path / "out",
            "--model_name_or_path",
            tmp_path / "start",
            "--max_train_steps",
            1,
        ],
        env,
    )
    assert GazeFlowVideoProcessor.from_pretrained(tmp_path / "out") == processor


def test_non_finite_loss_stops_with_the_step_and_keeps_the_last_good_checkpoint(tmp_path, env, data_dir, monkeypatch):
    for key in ("HF_DATASETS_CACHE", "HF_HUB_OFFLINE", "OMP_NUM_THREADS"):
        monkeypatch.setenv(key, env[key])
    train = load_script(TRAIN, "gazeflow_train_script")
    original = train.GazeFlowModel.forward
    calls = {"n": 0}

    def failing_forward(self, *args, **kwargs):
        output = original(self, *args, **kwargs)
        if self.training:
            calls["n"] += 1
            if calls["n"] == 3:
                output.loss = output.loss * float("nan")
        return output

    monkeypatch.setattr(train.GazeFlowModel, "forward", failing_forward)
    # the run stops inside its loop, so its progress bar is never closed and would print after pytest's summary
    bar = loop.tqdm
    monkeypatch.setattr(loop, "tqdm", lambda *args, **kwargs: bar(*args, **{**kwargs, "disable": True}))
    with pytest.raises(train.TrainingError, match=r"non-finite training loss \(nan\) at step 3") as error:
        train.main(
            [
                str(a)
                for a in TINY
                + ["--data_dir", data_dir, "--output_dir", tmp_path, "--max_train_steps", 5, "--checkpointing_steps", 2]
            ]
        )
    assert "step_2" in str(error.value)
    assert (tmp_path / "step_2" / "trainer_state.json").exists()
    assert not (tmp_path / "step_4").exists() and not (tmp_path / "model.safetensors").exists()


def test_weights_gone_nan_are_not_checkpointed_and_the_last_good_checkpoint_is_named(
    tmp_path, env, data_dir, monkeypatch
):
    """An update that leaves NaN weights with a finite loss used to be saved as step_4, and the
    next step's NaN loss then called step_4 the last good checkpoint."""
    for key in ("HF_DATASETS_CACHE", "HF_HUB_OFFLINE", "OMP_NUM_THREADS"):
        monkeypatch.setenv(key, env[key])
    train = load_script(TRAIN, "gazeflow_train_script")
    original = AveragedModel.update_parameters
    calls = {"n": 0}

    def diverging_update(self, model):  # after step 4's update: one weight becomes NaN (the loss was finite)
        calls["n"] += 1
        if calls["n"] == 4:
            with torch.no_grad():
                next(model.parameters()).view(-1)[0] = float("nan")
        return original(self, model)

    monkeypatch.setattr(AveragedModel, "update_parameters", diverging_update)
    with pytest.raises(
        train.TrainingError,
        match=r"step_4: not written: the model's '.+' holds NaN or inf after "
        r"step 4\. Last good checkpoint: .*step_2$",
    ):
        train.main(
            [
                str(a)
                for a in TINY
                + ["--data_dir", data_dir, "--output_dir", tmp_path, "--max_train_steps", 6, "--checkpointing_steps", 2]
            ]
        )
    assert (tmp_path / "step_2" / "manifest.json").exists()
    assert not (tmp_path / "step_4").exists() and not (tmp_path / "model.safetensors").exists()
