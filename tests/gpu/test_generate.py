"""``GazeFlowModel.generate`` on the device against the CPU: fp32 to 1e-4, bf16 autocast to bf16 tolerance, a model
loaded straight onto the device, the fast path (merged LoRA) and a sampler that never waits for the host."""

import copy

import torch

from transformers_gazeflow import GazeFlowModel
from transformers_gazeflow.generation.inference import prepare_for_inference

from .conftest import assert_bf16_close, assert_fp32_close, full_fp32, tiny_lora_model

# two clips of 21 frames: 4 windows of 8 frames (stride 4), the last one aligned to the clip's end
PIXELS = torch.randn(2, 21, 3, 32, 32, generator=torch.Generator().manual_seed(0))
SETTINGS = dict(num_samples=4, num_steps=3)


def generate(model, pixels=PIXELS, **kwargs):
    """Trajectories on the CPU; the noise comes from a CPU generator, so both devices sample the same x_0."""
    device = next(model.parameters()).device
    out = model.generate(
        pixel_values_videos=pixels.to(device), generator=torch.Generator().manual_seed(0), **{**SETTINGS, **kwargs}
    )
    assert out.trajectories.device == device
    return out.trajectories.cpu()


def test_fp32_on_the_device_equals_the_cpu(device):
    model = tiny_lora_model()
    with full_fp32():
        for solver in ("euler", "heun"):
            expected = generate(model, solver=solver)
            got = generate(copy.deepcopy(model).to(device), solver=solver)
            assert_fp32_close(got, expected)


def test_bf16_autocast_on_the_device_stays_within_bf16_tolerance(device):
    model = tiny_lora_model()
    expected = generate(model)
    on_device = copy.deepcopy(model).to(device)
    with torch.autocast(device.type, dtype=torch.bfloat16):
        got = generate(on_device)
    assert got.dtype == torch.float32
    assert (got - expected).abs().max() > 0  # bf16 really ran
    assert_bf16_close(got, expected)


def test_a_model_loaded_onto_the_device_and_put_on_the_fast_path_equals_the_cpu(device, tiny_model_dir):
    """``from_pretrained(device_map=...)`` rebuilds the non-persistent buffers (2D position encoding, RoPE
    frequencies) on the device; ``prepare_for_inference`` merges LoRA into the weights there."""
    expected_model = GazeFlowModel.from_pretrained(tiny_model_dir).eval()
    model = GazeFlowModel.from_pretrained(tiny_model_dir, device_map=str(device)).eval()
    assert next(model.parameters()).device.type == device.type
    assert model.video_encoder.has_lora
    for name, buffer in model.named_buffers():
        assert buffer.device.type == device.type, name
        assert torch.allclose(buffer.cpu(), dict(expected_model.named_buffers())[name]), name
    with full_fp32():
        expected = generate(expected_model)
        assert_fp32_close(generate(model), expected)
        prepare_for_inference(model)
        assert not model.video_encoder.has_lora
        assert_fp32_close(generate(model), expected)


def test_sampling_from_encoder_tokens_never_waits_for_the_host(device):
    """Once the tokens are on the device, sampling (condition, S Euler steps, K samples) issues no synchronising
    call: CUDA's sync debug mode raises on any. (On the CPU there is nothing to synchronise.)"""
    model = copy.deepcopy(tiny_lora_model()).to(device)
    pixels = PIXELS[:1, :8].to(device)
    with torch.no_grad():
        tokens = model.encode_video(pixels)
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
    try:
        out = model.generate(encoder_hidden_states=tokens, num_samples=8, num_steps=5)
    finally:
        if device.type == "cuda":
            torch.cuda.set_sync_debug_mode("default")
    assert out.trajectories.shape == (1, 8, 8, 2) and out.trajectories.device.type == device.type
    assert bool(torch.isfinite(out.trajectories).all())
