"""The GPU tests: everything that has a ``device="cuda"`` path, run on a GPU and compared with the CPU.

They run on the device named by ``GAZEFLOW_TEST_DEVICE`` (default ``cuda``) and are skipped, with the reason, when
that is CUDA and no GPU is visible. ``benchmarks/gpu_suite.sh --device cpu`` dry-runs them on the CPU
(``GAZEFLOW_TEST_DEVICE=cpu``) so that they cannot rot: each test then compares the CPU against itself where it
compares the GPU against the CPU, which checks the test's own code and every call it makes.

Tolerances (documented here, used by the tests):

* fp32 on the GPU against fp32 on the CPU: 1e-4 in unit coordinates, with TF32 off (cuDNN allows TF32 for
  convolutions by default, which V-JEPA 2's patch embedding is; :func:`full_fp32` turns it off);
* bf16 autocast on the GPU against fp32 on the CPU: mean |difference| < 2e-2 and max < 1e-1 in unit coordinates
  (the bound ``tests/test_inference.py`` uses for bf16 on the CPU; bf16 keeps 8 bits of mantissa, and the ODE
  integrates the network's error over S steps).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import pytest
import torch

DEVICE_VARIABLE = "GAZEFLOW_TEST_DEVICE"
FP32_TOLERANCE = 1e-4
BF16_MEAN_TOLERANCE = 2e-2
BF16_MAX_TOLERANCE = 1e-1


def gpu_test_device() -> torch.device:
    return torch.device(os.environ.get(DEVICE_VARIABLE, "cuda"))


def pytest_collection_modifyitems(config, items):
    device = gpu_test_device()
    if device.type != "cuda" or torch.cuda.is_available():
        return
    skip = pytest.mark.skip(
        reason=f"tests/gpu need a CUDA GPU (torch.cuda.is_available() is False); set "
        f"{DEVICE_VARIABLE}=cpu to dry-run them on the CPU"
    )
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def device() -> torch.device:
    return gpu_test_device()


@contextlib.contextmanager
def full_fp32() -> Iterator[None]:
    """fp32 matmuls and convolutions without TF32 (cuDNN's default allows it for convolutions)."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def assert_bf16_close(got: torch.Tensor, expected: torch.Tensor) -> None:
    difference = (got.float().cpu() - expected.float().cpu()).abs()
    assert difference.mean() < BF16_MEAN_TOLERANCE and difference.max() < BF16_MAX_TOLERANCE, (
        f"bf16 vs fp32: mean |difference| {difference.mean():.3e}, max {difference.max():.3e}"
    )


def assert_fp32_close(got: torch.Tensor, expected: torch.Tensor) -> None:
    difference = (got.float().cpu() - expected.float().cpu()).abs().max()
    assert difference < FP32_TOLERANCE, f"fp32 on the device vs the CPU: max |difference| {difference:.3e}"


def tiny_lora_model(**overrides):
    """A tiny random GazeFlow with LoRA adapters that do something (B != 0), seeded, on the CPU, eval mode."""
    from transformers_gazeflow import GazeFlowConfig, GazeFlowModel

    torch.manual_seed(0)
    model = GazeFlowModel(GazeFlowConfig.tiny(**overrides)).eval()
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.2)
    return model


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A saved tiny GazeFlow folder (weights, config, processor) with working LoRA adapters."""
    from transformers_gazeflow.data.processing import GazeFlowVideoProcessor

    folder = tmp_path_factory.mktemp("tiny_gazeflow")
    model = tiny_lora_model()
    model.save_pretrained(folder)
    GazeFlowVideoProcessor(size=model.config.image_size).save_pretrained(folder)
    return folder
