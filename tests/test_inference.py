import copy
import json

import pytest
import torch

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
from transformers_gazeflow.generation.inference import autocast_context, prepare_for_inference, set_encoder_attention
from transformers_gazeflow.models.gazeflow.generation_gazeflow import SamplingSettings, generate_trajectories

from .conftest import run_python


@pytest.fixture(scope="module")
def model_with_lora():
    torch.manual_seed(0)
    model = GazeFlowModel(GazeFlowConfig.tiny()).eval()
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_" in name:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.2)
    return model


@torch.no_grad()
def reference_path(model, pixels, **kwargs):
    """The plain reference path, on a copy: eager encoder attention, LoRA as separate adapters, the condition
    recomputed at every network call for K repeated features, one window at a time, fp32."""
    reference = copy.deepcopy(model).float().eval()
    set_encoder_attention(reference, "eager")
    generator = kwargs.pop("generator", None)
    settings = SamplingSettings.resolve(reference.config, **kwargs)
    return generate_trajectories(
        reference, pixels, settings=settings, generator=generator, window_batch_size=1, use_condition_cache=False
    )


def test_fast_path_matches_the_reference_path_in_fp32(model_with_lora):
    pixels = torch.randn(2, 21, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    kwargs = dict(num_samples=4, num_steps=3, solver="heun")
    reference = reference_path(model_with_lora, pixels, generator=torch.Generator().manual_seed(0), **kwargs)
    fast_model = prepare_for_inference(copy.deepcopy(model_with_lora))
    assert not fast_model.video_encoder.has_lora and model_with_lora.video_encoder.has_lora
    fast = fast_model.generate(pixels, generator=torch.Generator().manual_seed(0), window_batch_size=8, **kwargs)
    assert fast.trajectories.shape == reference.trajectories.shape == (2, 4, 21, 2)
    assert torch.allclose(fast.trajectories, reference.trajectories, atol=1e-5), (
        (fast.trajectories - reference.trajectories).abs().max()
    )


def test_bf16_autocast_stays_within_bf16_tolerance(model_with_lora):
    pixels = torch.randn(1, 8, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    fast_model = prepare_for_inference(copy.deepcopy(model_with_lora))
    full = fast_model.generate(pixels, num_samples=8, num_steps=3, generator=torch.Generator().manual_seed(0))
    with autocast_context(fast_model, torch.bfloat16):
        half = fast_model.generate(pixels, num_samples=8, num_steps=3, generator=torch.Generator().manual_seed(0))
    assert half.trajectories.dtype == torch.float32
    difference = (half.trajectories - full.trajectories).abs()
    assert difference.max() > 0  # bf16 really ran
    assert difference.mean() < 2e-2 and difference.max() < 1e-1, (difference.mean(), difference.max())


def test_encoder_attention_choice_is_checked(model_with_lora):
    with pytest.raises(ValueError, match="attn_implementation"):
        set_encoder_attention(copy.deepcopy(model_with_lora), "flash")


COMPILE_CHECK = """
import copy, json, torch
from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
from transformers_gazeflow.generation.inference import prepare_for_inference
torch.manual_seed(0)
model = GazeFlowModel(GazeFlowConfig.tiny()).eval()
pixels = torch.randn(1, 8, 3, 32, 32, generator=torch.Generator().manual_seed(2))
eager_model = prepare_for_inference(copy.deepcopy(model))
compiled_model = prepare_for_inference(copy.deepcopy(model), compile=True)
eager = eager_model.generate(pixels, num_samples=4, num_steps=6, generator=torch.Generator().manual_seed(0))
with torch._dynamo.config.patch(error_on_recompile=True):
    compiled = compiled_model.generate(pixels, num_samples=4, num_steps=6,
                                       generator=torch.Generator().manual_seed(0))
    again = compiled_model.generate(pixels, num_samples=4, num_steps=6, generator=torch.Generator().manual_seed(0))
print(json.dumps({
    "max_difference": (compiled.trajectories - eager.trajectories).abs().max().item(),
    "repeat_identical": torch.equal(again.trajectories, compiled.trajectories),
    "graphs": torch._dynamo.utils.counters["stats"]["unique_graphs"],
}))
"""


def test_compiled_velocity_network_matches_eager_without_recompiling():
    """``prepare_for_inference(compile=True)``: one graph serves every solver step (time enters as a tensor), and
    the compiled sampler reproduces the eager fast path in fp32. Run in a fresh interpreter: inductor's C++ build
    imports setuptools, which refuses to load once another test's import has pulled in the stdlib ``distutils``,
    and dynamo's caches are process-wide."""
    report = json.loads(run_python(COMPILE_CHECK).strip().splitlines()[-1])
    assert report["graphs"] == 1, report  # compiled, once, for all 6 Euler steps (a recompile would have raised)
    assert report["max_difference"] < 1e-5, report
    assert report["repeat_identical"], report
