"""The causal streamer (``GazeFlowStreamer``) on the device against the CPU, frame by frame, and its captured modes
(``compile="cuda-graph"``, ``"reduce-overhead"``) against eager on the device."""

import copy

import pytest
import torch

from transformers_gazeflow import GazeFlowStreamer

from .conftest import assert_bf16_close, assert_fp32_close, full_fp32, tiny_lora_model

FRAMES = 12  # more than the window W = 8: the key/value caches fill and then slide


def stream(model, frames, noises):
    device = next(model.parameters()).device
    streamer = GazeFlowStreamer(model, num_samples=4, num_steps=2, solver="heun")
    outputs = [streamer.push(frame.to(device), noise=noise.to(device)) for frame, noise in zip(frames, noises)]
    assert streamer.cached_frames == model.config.num_frames
    return torch.stack([o.trajectories.cpu() for o in outputs]), outputs


def test_streamer_on_the_device_equals_the_cpu(device):
    model = tiny_lora_model(causal=True)
    frames = torch.randn(FRAMES, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    noises = torch.randn(FRAMES, 1, 4, 1, 2, generator=torch.Generator().manual_seed(1))
    with full_fp32():
        expected, _ = stream(model, frames, noises)
        got, outputs = stream(copy.deepcopy(model).to(device), frames, noises)
    assert outputs[-1].trajectories.device.type == device.type and outputs[-1].frame_index == FRAMES - 1
    assert_fp32_close(got, expected)


def test_streamer_draws_its_noise_with_a_generator_on_the_device(device):
    model = copy.deepcopy(tiny_lora_model(causal=True)).to(device)
    runs = []
    for _ in range(2):
        streamer = GazeFlowStreamer(
            model, num_samples=4, num_steps=2, generator=torch.Generator(device=device).manual_seed(5)
        )
        frames = torch.randn(4, 2, 3, 32, 32, generator=torch.Generator().manual_seed(0)).to(device)  # batch of 2
        runs.append(torch.stack([streamer.push(frame).trajectories for frame in frames]))
    assert runs[0].shape == (4, 2, 4, 2) and runs[0].device.type == device.type
    assert torch.equal(runs[0], runs[1])  # a seed repeats the stream on the device


@pytest.mark.parametrize("mode", ["cuda-graph", "reduce-overhead"])
def test_captured_streamer_equals_eager_on_the_device(device, mode):
    """The static step captured as a CUDA graph (by hand, or by torch.compile's cudagraph trees) against the eager
    step, fp32, past W frames (the rings wrap), then after a reset (the same buffers, the same graph)."""
    if device.type != "cuda":
        pytest.skip(f"compile={mode!r} captures CUDA graphs: it needs a CUDA device")
    model = copy.deepcopy(tiny_lora_model(causal=True)).to(device)
    frames = torch.randn(FRAMES, 2, 3, 32, 32, generator=torch.Generator().manual_seed(0)).to(device)
    noises = torch.randn(FRAMES, 2, 4, 1, 2, generator=torch.Generator().manual_seed(1)).to(device)
    with full_fp32():
        eager = GazeFlowStreamer(model, num_samples=4, num_steps=2, solver="heun")
        captured = GazeFlowStreamer(model, num_samples=4, num_steps=2, solver="heun", compile=mode)
        expected = [eager.push(frame, noise=noise).trajectories for frame, noise in zip(frames, noises)]
        got = [captured.push(frame, noise=noise).trajectories for frame, noise in zip(frames, noises)]
        assert_fp32_close(torch.stack(got), torch.stack(expected))  # every output kept: none overwritten later
        captured.reset()
        again = [captured.push(frame, noise=noise).trajectories for frame, noise in zip(frames[:3], noises)]
    assert_fp32_close(torch.stack(again), torch.stack(expected[:3]))


def test_bf16_streamer_on_the_device_is_close_to_fp32_on_the_cpu(device):
    model = tiny_lora_model(causal=True)
    frames = torch.randn(FRAMES, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    noises = torch.randn(FRAMES, 1, 4, 1, 2, generator=torch.Generator().manual_seed(1))
    expected, _ = stream(model, frames, noises)
    streamer = GazeFlowStreamer(
        copy.deepcopy(model).to(device), num_samples=4, num_steps=2, solver="heun", dtype=torch.bfloat16
    )
    got = torch.stack(
        [
            streamer.push(frame.to(device), noise=noise.to(device)).trajectories.cpu()
            for frame, noise in zip(frames, noises)
        ]
    )
    assert_bf16_close(got, expected)
