"""Training on the device: ``examples/train.py`` with bf16 autocast, LoRA, EMA and a checkpoint resumed, and with its
encoder layers compiled; the frozen-feature cache built there; the evaluation loop's predictions there against the
CPU's (tiny synthetic dataset)."""

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
from transformers_gazeflow.data.collator import GazeFlowDataCollator
from transformers_gazeflow.data.processing import GazeFlowVideoProcessor
from transformers_gazeflow.training.datasets import load_training_splits
from transformers_gazeflow.training.evaluation import predict_clips
from transformers_gazeflow.training.feature_cache import FeatureCache, cache_fingerprint, example_key

from .conftest import FP32_TOLERANCE, assert_fp32_close, full_fp32

REPO = Path(__file__).resolve().parents[2]
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
def environment(tmp_path_factory, device):
    env = {
        **os.environ,
        "HF_DATASETS_CACHE": str(tmp_path_factory.mktemp("hf_datasets_cache")),
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "OMP_NUM_THREADS": "1",
    }
    if device.type == "cpu":
        env["ACCELERATE_USE_CPU"] = "true"
    return env


@pytest.fixture(scope="module")
def splits(tmp_path_factory, environment):
    saved = os.environ.get("HF_DATASETS_CACHE")
    os.environ["HF_DATASETS_CACHE"] = environment["HF_DATASETS_CACHE"]
    try:
        return load_training_splits(
            "synthetic", tmp_path_factory.mktemp("synthetic"), "tiny", window_frames=8, window_stride=4
        )
    finally:
        if saved is None:
            os.environ.pop("HF_DATASETS_CACHE", None)
        else:
            os.environ["HF_DATASETS_CACHE"] = saved


def train(args, env) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [sys.executable, str(REPO / "examples" / "train.py"), *map(str, args)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, f"train.py failed:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
    return result


def test_bf16_lora_ema_training_resumes_to_the_same_weights(device, environment, tmp_path, splits):
    data_dir = tmp_path / "data"
    args = TINY + ["--data_dir", data_dir, "--use_lora", "--mixed_precision", "bf16", "--max_train_steps", 4]
    full = train(args + ["--output_dir", tmp_path / "full", "--checkpointing_steps", 2], environment)
    assert f"mixed precision bf16, 1 process(es) on {device.type}" in full.stderr, full.stderr[-2000:]
    assert sorted(p.name for p in (tmp_path / "full").glob("step_*")) == ["step_2", "step_4"]
    resumed = train(
        args + ["--output_dir", tmp_path / "resumed", "--resume_from_checkpoint", tmp_path / "full" / "step_2"],
        environment,
    )
    assert "resumed from" in resumed.stderr
    first, second = (
        load_file(tmp_path / "full" / "model.safetensors"),
        load_file(tmp_path / "resumed" / "model.safetensors"),
    )  # the EMA weights after step 4
    assert first.keys() == second.keys() and any("lora_" in key for key in first)
    for key in first:  # bitwise on the CPU; on a GPU, backward kernels may add in another order
        assert torch.allclose(first[key].float(), second[key].float(), atol=1e-5, rtol=0), key
    model = GazeFlowModel.from_pretrained(tmp_path / "full").eval()
    out = model.generate(pixel_values_videos=torch.randn(1, 8, 3, 32, 32), num_samples=2, num_steps=2)
    assert torch.isfinite(out.trajectories).all()


def test_compiled_encoder_layers_train_to_the_eager_runs_weights(device, environment, tmp_path, splits):
    """``train.py --torch_compile`` (each encoder layer compiled) with the device's settings (frozen weights in bf16,
    fused AdamW, pinned batches) saves float32 weights within bf16 rounding of the eager run's. The CPU dry run
    traces with the aot_eager backend (no C++ code generation: minutes on a small CPU)."""
    args = TINY + ["--data_dir", tmp_path / "data", "--use_lora", "--mixed_precision", "bf16", "--max_train_steps", 3]
    backend = "inductor" if device.type == "cuda" else "aot_eager"
    train(args + ["--output_dir", tmp_path / "eager"], environment)
    train(
        args + ["--output_dir", tmp_path / "compiled", "--torch_compile", "--torch_compile_backend", backend],
        environment,
    )
    eager, compiled = (
        load_file(tmp_path / "eager" / "model.safetensors"),
        load_file(tmp_path / "compiled" / "model.safetensors"),
    )
    assert eager.keys() == compiled.keys()
    for key, value in eager.items():
        assert compiled[key].dtype == value.dtype == torch.float32, key
        assert torch.allclose(compiled[key], value, atol=2e-3, rtol=0), key


def test_feature_cache_built_on_the_device_equals_the_cpu(device, tmp_path, splits):
    train_set, validation_set = splits
    torch.manual_seed(0)
    model = GazeFlowModel(GazeFlowConfig.tiny(use_lora=False)).eval()
    processor = GazeFlowVideoProcessor(size=model.config.image_size)
    collator = GazeFlowDataCollator(processor, num_frames=8)
    fingerprint = cache_fingerprint(model, processor)
    with full_fp32():
        on_cpu = FeatureCache(tmp_path / "cpu", fingerprint).build(
            model, [train_set, validation_set], collator, batch_size=4
        )
        on_device_model = copy.deepcopy(model).to(device)
        assert cache_fingerprint(on_device_model, processor) == fingerprint  # the device is not part of the key
        on_device = FeatureCache(tmp_path / "device", fingerprint).build(
            on_device_model, [train_set, validation_set], collator, batch_size=4
        )
        with torch.autocast(device.type, dtype=torch.bfloat16):  # how train.py builds it (accelerator.autocast)
            in_bf16 = FeatureCache(tmp_path / "bf16", fingerprint).build(
                on_device_model, [train_set], collator, batch_size=4
            )
    for example in list(train_set) + list(validation_set):
        key = example_key(example)
        expected, got = on_cpu.load(key), on_device.load(key)
        assert got.device.type == "cpu" and got.dtype == torch.float32
        assert (got - expected).abs().max() < FP32_TOLERANCE, key
    for example in train_set:
        key = example_key(example)
        tokens = in_bf16.load(key)
        assert tokens.dtype == torch.float32, key  # stored in fp32 whatever the autocast
        assert (tokens - on_cpu.load(key)).abs().mean() < 5e-2, key


def test_evaluation_predictions_on_the_device_equal_the_cpu(device, splits):
    """``evaluation.predict_clips`` seeds each clip's noise on the CPU, so a seed gives the same samples on a GPU."""
    _, validation_set = splits
    examples = [validation_set[i] for i in range(min(3, len(validation_set)))]
    torch.manual_seed(0)
    model = GazeFlowModel(GazeFlowConfig.tiny()).eval()
    processor = GazeFlowVideoProcessor(size=model.config.image_size)
    with full_fp32():
        expected, _ = predict_clips(model, examples, processor, num_samples=4, num_steps=2, solver="euler", window=8)
        got, seconds = predict_clips(
            copy.deepcopy(model).to(device), examples, processor, num_samples=4, num_steps=2, solver="euler", window=8
        )
    assert seconds > 0 and len(got) == len(examples)
    for prediction, reference in zip(got, expected):
        assert_fp32_close(torch.as_tensor(prediction), torch.as_tensor(reference))
