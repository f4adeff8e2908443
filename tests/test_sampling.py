import math

import pytest
import torch

from transformers_gazeflow import FlowMatchingScheduler, GazeFlowConfig, GazeFlowModel, model_to_unit
from transformers_gazeflow.models.gazeflow.generation_gazeflow import (
    SamplingSettings,
    generate_trajectories,
    sample_window,
)
from transformers_gazeflow.models.gazeflow.scheduling_gazeflow import draw_noise


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    model = GazeFlowModel(GazeFlowConfig.tiny()).eval()
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():  # give LoRA and every weight a visible effect
        for name, parameter in model.named_parameters():
            if "lora_" in name:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.2)
    return model


def features(model, batch=2, seed=0):
    pixels = torch.randn(batch, 8, 3, 32, 32, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        return model.encode_video(pixels)


@pytest.mark.parametrize("solver", ["euler", "heun", "midpoint"])
def test_condition_cache_equals_recomputing_every_call(model, solver):
    tokens = features(model)
    noise = torch.randn(2, 5, 8, 2, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        settings = SamplingSettings.resolve(model.config, num_steps=3, solver=solver)
        cached = sample_window(model, tokens, 8, noise, settings, use_condition_cache=True)
        reference = sample_window(model, tokens, 8, noise, settings, use_condition_cache=False)
    assert cached.shape == (2, 5, 8, 2)
    assert torch.allclose(cached, reference, atol=1e-5), (cached - reference).abs().max()
    assert not torch.allclose(cached[:, 0], cached[:, 1])  # the K samples differ


def test_euler_equals_a_hand_rolled_euler(model):
    tokens = features(model, batch=1)
    steps = 4
    noise = torch.randn(1, 3, 8, 2, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        sampled = sample_window(model, tokens, 8, noise, SamplingSettings.resolve(model.config, num_steps=steps))
        condition = model.build_condition(tokens, 8)
        x, x1_hat = noise.clone(), torch.zeros_like(noise)
        for i in range(steps):
            s = i / steps
            v = model.velocity(x, s, condition, x1_hat)
            x1_hat = x + (1 - s) * v  # self-conditioning: the previous step's endpoint estimate
            x = x + v / steps
    assert torch.allclose(sampled, x, atol=1e-6)


@pytest.mark.parametrize(
    "solver,expected",
    [
        ("euler", lambda h, n: (1 - h) ** n),
        ("heun", lambda h, n: (1 - h + h * h / 2) ** n),
        ("midpoint", lambda h, n: (1 - h + h * h / 2) ** n),
    ],
)
def test_solver_formulas_on_a_linear_field(solver, expected):
    """dx/ds = -x: each solver's amplification factor per step is known in closed form."""
    noise = torch.tensor([[[[1.0, -2.0]]]], dtype=torch.float64)
    result = FlowMatchingScheduler(5, solver).sample(lambda x, s, x1: -x, noise)
    assert torch.allclose(result, noise * expected(0.2, 5))
    assert abs(result[0, 0, 0, 0].item() - math.exp(-1)) < 0.1


def test_sampler_passes_the_self_conditioning_estimate():
    seen = []

    def velocity_fn(x, s, x1_hat):
        seen.append((s, x1_hat.clone()))
        return torch.ones_like(x)

    FlowMatchingScheduler(2, "euler").sample(velocity_fn, torch.zeros(1, 1, 1, 2))
    assert seen[0][0] == 0.0 and torch.equal(seen[0][1], torch.zeros(1, 1, 1, 2))
    # after step 0: x = 0, v = 1 at s = 0 -> x1_hat = 0 + (1 - 0) * 1 = 1
    assert seen[1][0] == 0.5 and torch.equal(seen[1][1], torch.ones(1, 1, 1, 2))


def test_seeds_make_samples_reproducible(model):
    pixels = torch.randn(1, 8, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    first = model.generate(
        pixel_values_videos=pixels, num_samples=4, num_steps=2, generator=torch.Generator().manual_seed(7)
    )
    again = model.generate(
        pixel_values_videos=pixels, num_samples=4, num_steps=2, generator=torch.Generator().manual_seed(7)
    )
    other = model.generate(
        pixel_values_videos=pixels, num_samples=4, num_steps=2, generator=torch.Generator().manual_seed(8)
    )
    assert torch.equal(first.trajectories, again.trajectories)
    assert not torch.allclose(first.trajectories, other.trajectories)
    assert first.trajectories.shape == (1, 4, 8, 2) and first.mean.shape == (1, 8, 2)
    assert torch.allclose(first.mean, first.trajectories.mean(dim=1))
    assert ((first.trajectories >= 0) & (first.trajectories <= 1)).all()


def test_sliding_windows_on_a_150_frame_video(model):
    pixels = torch.randn(1, 150, 3, 32, 32, generator=torch.Generator().manual_seed(3))
    kwargs = dict(num_samples=3, num_steps=2)
    long = model.generate(pixel_values_videos=pixels, generator=torch.Generator().manual_seed(0), **kwargs)
    assert long.trajectories.shape == (1, 3, 150, 2) and long.mean.shape == (1, 150, 2)
    # frames 0..3 are covered by the first window alone (the second starts at stride 4): equal to a one-window call
    single = model.generate(pixel_values_videos=pixels[:, :8], generator=torch.Generator().manual_seed(0), **kwargs)
    assert torch.allclose(long.trajectories[:, :, :4], single.trajectories[:, :, :4], atol=1e-6)
    # batching of windows does not change the result
    rebatched = model.generate(
        pixel_values_videos=pixels, generator=torch.Generator().manual_seed(0), window_batch_size=5, **kwargs
    )
    assert torch.allclose(long.trajectories, rebatched.trajectories, atol=1e-6)


def test_windows_are_blended_not_overwritten(model):
    pixels = torch.randn(1, 12, 3, 32, 32, generator=torch.Generator().manual_seed(4))
    kwargs = dict(num_samples=2, num_steps=2, window_mode="blend")
    both = model.generate(pixel_values_videos=pixels, generator=torch.Generator().manual_seed(0), **kwargs)
    generator = torch.Generator().manual_seed(0)
    first_noise = draw_noise((1, 2, 8, 2), generator, torch.device("cpu"))
    second_noise = draw_noise((1, 2, 8, 2), generator, torch.device("cpu"))
    with torch.no_grad():
        settings = SamplingSettings.resolve(model.config, num_samples=2, num_steps=2, solver="euler")
        first = sample_window(model, model.encode_video(pixels[:, :8]), 8, first_noise, settings)
        second = sample_window(model, model.encode_video(pixels[:, 4:]), 8, second_noise, settings)
    alpha = torch.arange(4.0).view(1, 1, 4, 1) / 4
    blended = (1 - alpha) * first[:, :, 4:] + alpha * second[:, :, :4]
    expected = torch.cat([first[:, :, :4], blended, second[:, :, 4:]], dim=2)
    assert torch.allclose(both.trajectories, model_to_unit(expected).clamp(0, 1), atol=1e-6)


def test_short_videos_are_padded_and_cut_back(model):
    pixels = torch.randn(1, 5, 3, 32, 32, generator=torch.Generator().manual_seed(5))
    short = model.generate(
        pixel_values_videos=pixels, num_samples=2, num_steps=2, generator=torch.Generator().manual_seed(0)
    )
    padded = torch.cat([pixels, pixels[:, -1:].expand(-1, 3, -1, -1, -1)], dim=1)
    full = model.generate(
        pixel_values_videos=padded, num_samples=2, num_steps=2, generator=torch.Generator().manual_seed(0)
    )
    assert short.trajectories.shape == (1, 2, 5, 2)
    assert torch.allclose(short.trajectories, full.trajectories[:, :, :5], atol=1e-6)
    one_frame = model.generate(pixel_values_videos=pixels[:, :1], num_samples=2, num_steps=1)
    assert one_frame.trajectories.shape == (1, 2, 1, 2)


def test_generate_from_encoder_hidden_states(model):
    tokens = features(model, batch=2)
    out = model.generate(
        encoder_hidden_states=tokens, num_samples=3, num_steps=2, generator=torch.Generator().manual_seed(0)
    )
    assert out.trajectories.shape == (2, 3, 8, 2)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(num_samples=0), "num_samples"),
        (dict(num_steps=0), "num_steps"),
        (dict(solver="rk4"), "solver"),
        (dict(window_batch_size=0), "window_batch_size"),
    ],
)
def test_bad_sampling_arguments(model, kwargs, message):
    pixels = torch.randn(1, 8, 3, 32, 32)
    with pytest.raises(ValueError, match=message):
        model.generate(pixel_values_videos=pixels, **kwargs)


def test_generate_needs_exactly_one_input(model):
    with pytest.raises(ValueError, match="exactly one"):
        model.generate()
    with pytest.raises(ValueError, match="exactly one"):
        generate_trajectories(
            model, pixel_values_videos=torch.randn(1, 8, 3, 32, 32), encoder_hidden_states=features(model, 1)
        )
    with pytest.raises(ValueError, match="encoder_hidden_states"):
        model.generate(encoder_hidden_states=torch.randn(1, 5, 32))
    with pytest.raises(ValueError, match="3 x 32 x 32"):
        model.generate(pixel_values_videos=torch.randn(1, 8, 3, 64, 64))
