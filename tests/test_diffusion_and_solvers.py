"""The diffusion objective (epsilon prediction, cosine schedule, DDIM with the same S) against hand-rolled formulas,
and the few-step ODE solvers compared at equal network calls on an ODE with a known solution."""

import math

import pytest
import torch

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel, unit_to_model
from transformers_gazeflow.models.gazeflow.scheduling_gazeflow import (
    DDIMScheduler,
    FlowMatchingScheduler,
    cosine_alphas_cumprod,
    ddim_timesteps,
    draw_noise,
)


def tiny_diffusion(seed: int = 0, **overrides) -> GazeFlowModel:
    torch.manual_seed(seed)
    return GazeFlowModel(GazeFlowConfig.tiny(use_lora=False, objective="diffusion", **overrides)).eval()


# ---------------------------------------------------------------------------------------------------- schedule
def test_cosine_schedule_is_nichol_and_dhariwals():
    alphas_cumprod = cosine_alphas_cumprod(1000)

    def f(tau):
        return math.cos((tau + 0.008) / 1.008 * math.pi / 2) ** 2

    for t in (0, 10, 250, 500, 900):
        assert alphas_cumprod[t].item() == pytest.approx(f((t + 1) / 1000) / f(0), rel=1e-9)
    assert (alphas_cumprod[1:] < alphas_cumprod[:-1]).all() and 0 < alphas_cumprod[-1] < 1e-6
    betas = 1 - alphas_cumprod[1:] / alphas_cumprod[:-1]
    assert betas.max().item() == pytest.approx(0.999)  # the clip of the last betas


def test_ddim_timesteps_are_trailing():
    assert ddim_timesteps(5, 1000) == [999, 799, 599, 399, 199]
    assert ddim_timesteps(1, 1000) == [999]
    assert ddim_timesteps(3, 12) == [11, 7, 3]
    with pytest.raises(ValueError, match="num_steps"):
        ddim_timesteps(0, 1000)


@pytest.mark.parametrize("num_steps", [1, 2, 5, 50])
def test_ddim_with_the_true_noise_recovers_the_data_point_for_any_s(num_steps):
    """For data = one point g, eps(x_t) = (x_t - sqrt(ab) g) / sqrt(1 - ab) exactly; DDIM must land on g."""
    sampler = DDIMScheduler(num_steps, 1000)
    g = torch.tensor([0.4, -0.7], dtype=torch.float64)
    calls = []

    def eps_fn(x, tau, x0_hat):
        calls.append(x0_hat.clone())
        alpha_bar = float(sampler.alphas_cumprod[round(tau * 1000)])
        return (x - alpha_bar**0.5 * g) / (1 - alpha_bar) ** 0.5

    noise = torch.randn(16, 2, 3, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    result = sampler.sample(eps_fn, noise)
    assert torch.allclose(result, g.expand_as(result), atol=1e-6)
    assert len(calls) == num_steps and torch.equal(calls[0], torch.zeros_like(noise))
    if num_steps > 1:  # self-conditioning: each later call receives the previous clean estimate
        assert torch.allclose(calls[1], g.expand_as(noise), atol=1e-6)


# ---------------------------------------------------------------------------------------------------- model
def test_diffusion_loss_is_epsilon_prediction_on_the_cosine_schedule():
    model = tiny_diffusion(self_conditioning_prob=0.0)
    pixels = torch.randn(2, 8, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    gaze = unit_to_model(torch.rand(2, 8, 2, generator=torch.Generator().manual_seed(1)))
    out = model(pixel_values_videos=pixels, gaze=gaze, generator=torch.Generator().manual_seed(3))
    # each example draws t, then eps, from its own stream, spawned from the generator one seed at a time
    parent = torch.Generator().manual_seed(3)
    streams = [torch.Generator().manual_seed(int(torch.randint(2**62, (1,), generator=parent))) for _ in range(2)]
    timestep = torch.cat([torch.randint(0, 1000, (1,), generator=g) for g in streams])
    noise = torch.stack([torch.randn(8, 2, generator=g) for g in streams])
    assert torch.equal(out.target_velocity, noise)
    assert torch.allclose(out.flow_time, timestep / 1000)
    alpha_bar = cosine_alphas_cumprod(1000)[timestep].float().view(2, 1, 1)
    noisy = alpha_bar.sqrt() * gaze + (1 - alpha_bar).sqrt() * noise
    with torch.no_grad():
        condition = model.build_condition(model.encode_video(pixels), 8)
        expected = model.velocity(noisy.unsqueeze(1), (timestep / 1000).unsqueeze(1), condition).squeeze(1)
    assert torch.allclose(out.predicted_velocity, expected, atol=1e-5)
    assert torch.allclose(out.loss, ((expected - noise) ** 2).mean() / 1.0, atol=1e-5)


@pytest.mark.parametrize("num_steps", [1, 3, 5])
def test_diffusion_generate_is_a_hand_rolled_ddim(num_steps):
    model = tiny_diffusion()
    states = torch.randn(2, 16, 32, generator=torch.Generator().manual_seed(0))
    out = model.generate(
        encoder_hidden_states=states, num_samples=3, num_steps=num_steps, generator=torch.Generator().manual_seed(7)
    ).trajectories
    x = draw_noise((2, 3, 8, 2), torch.Generator().manual_seed(7), torch.device("cpu"))
    alphas_cumprod = cosine_alphas_cumprod(1000)
    condition = model.build_condition(states, 8)
    x0_hat = torch.zeros_like(x)
    timesteps = [round(1000 - i * 1000 / num_steps) - 1 for i in range(num_steps)]
    with torch.no_grad():
        for i, t in enumerate(timesteps):
            a_t = alphas_cumprod[t].item()
            a_prev = alphas_cumprod[timesteps[i + 1]].item() if i + 1 < num_steps else 1.0
            eps = model.velocity(x, t / 1000, condition, x0_hat)
            x0_hat = ((x - math.sqrt(1 - a_t) * eps) / math.sqrt(a_t)).clamp(-1, 1)
            x = math.sqrt(a_prev) * x0_hat + math.sqrt(1 - a_prev) * eps
    assert torch.allclose(out, ((x + 1) / 2).clamp(0, 1), atol=1e-5)
    with pytest.raises(ValueError, match="solver"):
        model.generate(encoder_hidden_states=states, solver="heun")


def test_diffusion_and_flow_matching_share_the_network():
    diffusion = tiny_diffusion()
    flow = GazeFlowModel(GazeFlowConfig.tiny(use_lora=False))
    assert diffusion.state_dict().keys() == flow.state_dict().keys()
    assert all(diffusion.state_dict()[k].shape == v.shape for k, v in flow.state_dict().items())


# ---------------------------------------------------------------------------------------------------- solvers
SIGMA_MIN, MU, SIGMA = 1e-3, torch.tensor([0.3, -0.2], dtype=torch.float64), 0.4


def gaussian_velocity(x, s, _self_condition):
    """The exact marginal OT velocity when the data are N(MU, SIGMA^2 I): E[x_1 - (1 - sigma_min) x_0 | x_s]."""
    a = 1 - (1 - SIGMA_MIN) * s
    return MU + (-(1 - SIGMA_MIN) * a + s * SIGMA**2) / (a * a + s * s * SIGMA**2) * (x - s * MU)


def solve_error(solver: str, num_steps: int) -> float:
    x0 = torch.randn(500, 1, 1, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    exact = MU + math.sqrt(SIGMA_MIN**2 + SIGMA**2) * x0  # the flow maps quantiles to quantiles
    return (FlowMatchingScheduler(num_steps, solver).sample(gaussian_velocity, x0) - exact).abs().max().item()


@pytest.mark.parametrize("solver", ["heun", "midpoint"])
@pytest.mark.parametrize("num_steps", [1, 2, 3, 5])
def test_second_order_solvers_beat_euler_at_equal_network_calls(solver, num_steps):
    calls = FlowMatchingScheduler(num_steps, solver).calls_per_step * num_steps
    assert calls == 2 * num_steps
    assert solve_error(solver, num_steps) < 0.5 * solve_error("euler", calls)


def test_solver_orders_on_the_known_ode():
    euler = solve_error("euler", 20) / solve_error("euler", 40)
    heun = solve_error("heun", 20) / solve_error("heun", 40)
    midpoint = solve_error("midpoint", 20) / solve_error("midpoint", 40)
    assert 1.7 < euler < 2.3  # first order: halving the step halves the error
    assert heun > 3.0 and midpoint > 3.0  # second order: a quarter (or better)
