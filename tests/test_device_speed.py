"""``training.device_speed``: the GPU settings of train.py leave the CPU's loader as it was, and the frozen weights cast
once to bf16 give the very same loss and gradients under bf16 autocast (checked on the CPU, whose autocast rounds
the weights the same way), and come back as float32 for saving; train.py with the cast and gradient checkpointing
saves the same model as without, and resumes to it."""

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.script_loading import load_script
from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
from transformers_gazeflow.training.device_speed import (
    AUTO_WORKERS_CAP,
    FrozenWeightCast,
    adamw,
    auto_workers,
    compile_encoder_layers,
    loader_options,
)


def test_the_cpu_loader_is_unchanged_and_the_gpu_loader_is_pinned_with_enough_workers():
    assert loader_options(None, "cpu") == {"num_workers": 2, "persistent_workers": True}
    assert loader_options(0, "cpu") == {"num_workers": 0, "persistent_workers": False}
    gpu = loader_options(None, "cuda")
    assert gpu["pin_memory"] and gpu["persistent_workers"] and gpu["prefetch_factor"] == 4
    assert gpu["num_workers"] == auto_workers()
    assert loader_options(0, "cuda") == {"num_workers": 0, "persistent_workers": False, "pin_memory": True}
    assert auto_workers(cpus=16) == AUTO_WORKERS_CAP and auto_workers(cpus=16, processes=4) == 3
    assert auto_workers(cpus=1) == 1
    with pytest.raises(ValueError, match="num_workers must be >= 0 or None"):
        loader_options(-1, "cpu")


def loss_and_gradients(model: GazeFlowModel, inputs: dict) -> tuple[torch.Tensor, dict]:
    torch.manual_seed(5)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model(**inputs, generator=torch.Generator().manual_seed(1)).loss
    loss.backward()
    return loss.detach(), {name: p.grad for name, p in model.named_parameters() if p.grad is not None}


def test_frozen_weights_cast_once_give_the_same_loss_and_gradients_under_bf16_autocast():
    torch.manual_seed(0)
    model = GazeFlowModel(GazeFlowConfig.tiny(use_lora=True)).train()
    cast_model = copy.deepcopy(model)
    cast = FrozenWeightCast(cast_model)
    parameters = dict(cast_model.named_parameters())
    assert len(cast) > 0 and all(parameters[name].dtype == torch.bfloat16 for name in cast.names)
    assert any(".base_layer." in name for name in cast.names)  # the LoRA layers' frozen bases
    assert not any("norm" in name for name in cast.names)  # norms compute in float32 under autocast
    assert all(parameters[name].dtype == torch.float32 for name in parameters if parameters[name].requires_grad)
    generator = torch.Generator().manual_seed(0)
    inputs = {
        "pixel_values_videos": torch.randn(2, 8, 3, 32, 32, generator=generator),
        "gaze": torch.rand(2, 8, 2, generator=generator) * 2 - 1,
    }
    expected_loss, expected = loss_and_gradients(model, inputs)
    loss, gradients = loss_and_gradients(cast_model, inputs)
    assert torch.equal(loss, expected_loss) and expected.keys() == gradients.keys() and len(expected) > 10
    for name, gradient in expected.items():
        assert torch.equal(gradients[name], gradient), name
    cast.restore(cast_model)
    for (name, original), (_, restored) in zip(model.named_parameters(), cast_model.named_parameters()):
        assert restored.dtype == torch.float32 and torch.equal(restored, original), name


def test_restore_names_a_model_that_was_not_cast():
    torch.manual_seed(0)
    cast = FrozenWeightCast(GazeFlowModel(GazeFlowConfig.tiny(use_lora=True)))
    with pytest.raises(ValueError, match="a different model than the one cast"):
        cast.restore(torch.nn.Linear(2, 2))


def test_adamw_is_the_plain_one_on_the_cpu_and_compile_keeps_the_parameter_names():
    torch.manual_seed(0)
    model = GazeFlowModel(GazeFlowConfig.tiny(use_lora=True))
    optimizer = adamw([p for p in model.parameters() if p.requires_grad], "cpu", lr=1e-3)
    assert not optimizer.defaults.get("fused") and optimizer.defaults["lr"] == 1e-3
    names = [name for name, _ in model.named_parameters()]
    assert compile_encoder_layers(model) == model.config.encoder_config.num_hidden_layers
    assert [name for name, _ in model.named_parameters()] == names


REPO = Path(__file__).resolve().parents[1]
TINY_BF16 = [
    "--dataset_name",
    "synthetic",
    "--dataset_config",
    "tiny",
    "--config_preset",
    "tiny",
    "--use_lora",
    "--mixed_precision",
    "bf16",
    "--per_device_train_batch_size",
    "2",
    "--dataloader_num_workers",
    "0",
    "--max_train_steps",
    "3",
    "--checkpointing_steps",
    "2",
]


def train(args: list, cache: Path, check: bool = True) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "HF_DATASETS_CACHE": str(cache),
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    result = subprocess.run(
        [sys.executable, str(REPO / "examples" / "train.py"), *map(str, args)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert not check or result.returncode == 0, result.stderr[-4000:]
    return result


def test_train_py_with_the_cast_and_checkpointing_saves_and_resumes_to_the_plain_runs_model(tmp_path):
    cache, data = tmp_path / "hf_cache", tmp_path / "data"
    train(TINY_BF16 + ["--data_dir", data, "--output_dir", tmp_path / "plain", "--no-frozen_weights_in_bf16"], cache)
    fast = TINY_BF16 + ["--data_dir", data, "--frozen_weights_in_bf16", "--gradient_checkpointing"]
    train(fast + ["--output_dir", tmp_path / "fast"], cache)
    train(
        fast + ["--output_dir", tmp_path / "resumed", "--resume_from_checkpoint", tmp_path / "fast" / "step_2"], cache
    )
    plain = load_file(tmp_path / "plain" / "model.safetensors")
    assert any("lora_" in key for key in plain)
    for run in ("fast", "resumed"):
        saved = load_file(tmp_path / run / "model.safetensors")
        assert saved.keys() == plain.keys()
        for key, value in plain.items():  # bit for bit, the frozen weights saved in float32
            assert saved[key].dtype == value.dtype and torch.equal(saved[key], value), (run, key)


def test_the_cast_without_bf16_autocast_is_named(tmp_path):
    result = train(
        [
            "--dataset_name",
            "synthetic",
            "--dataset_config",
            "tiny",
            "--config_preset",
            "tiny",
            "--data_dir",
            tmp_path / "data",
            "--output_dir",
            tmp_path / "run",
            "--max_train_steps",
            "1",
            "--mixed_precision",
            "no",
            "--frozen_weights_in_bf16",
            "--dataloader_num_workers",
            "0",
        ],
        tmp_path / "hf_cache",
        check=False,
    )
    assert result.returncode == 1
    assert (
        "train.py: error: --frozen_weights_in_bf16 needs bf16 autocast (--mixed_precision bf16), got "
        "--mixed_precision no" in result.stderr
    ), result.stderr[-2000:]


def test_the_one_gpu_recipe_is_the_papers_optimisation_with_the_fast_settings():
    from transformers_gazeflow.training.recipes import PAPER_ONE_GPU

    train_module = load_script(REPO / "examples" / "train.py", "gazeflow_train_device_speed")
    args = train_module.parse_args(
        ["--recipe", "paper-1gpu", "--dataset_name", "egtea", "--data_dir", "d", "--output_dir", "out"]
    )
    for name, value in PAPER_ONE_GPU.arguments.items():
        assert getattr(args, name) == value, name
    assert args.per_device_train_batch_size * args.gradient_accumulation_steps == 16  # the paper's effective batch
    assert (args.learning_rate, args.min_learning_rate, args.weight_decay, args.ema_decay) == (1e-4, 1e-6, 1e-4, 0.995)
    assert args.config_preset == "paper" and args.use_lora and args.torch_compile
    assert args.dataloader_num_workers is None  # one per free core on a GPU
    assert args.config_overrides in (None, "")
