"""The three training objectives of GazeFlow's network (config ``objective``), one function each.

All three train the *same* network v_theta(x, s, c) with the same condition; only what its input and output mean
changes (paper Sections 3.2 and 4.4, Appendix F.4):

* ``"flow_matching"`` (default): the conditional flow-matching loss (Eq. cfm_loss) with the OT interpolant of
  Appendix E.4 and self-conditioning (Appendix D.2); the network predicts the velocity.
* ``"diffusion"``: DDPM-style epsilon prediction (Ho et al. 2020) with the cosine schedule of Nichol & Dhariwal
  (2021) over ``diffusion_timesteps`` discrete steps; the network reads x_t and tau = t / diffusion_timesteps through
  the same time embedding and predicts the noise; self-conditioning feeds the clean estimate x0_hat (Chen et al.,
  Analog Bits). Sampled with DDIM.
* ``"regression"``: a deterministic head over the same network and conditioning, predicting the trajectory
  directly from constant inputs (x = 0, s = :data:`REGRESSION_INPUT_TIME`, x1_hat = 0); masked MSE; K = 1.

Every loss is ``sum(m * (prediction - target)^2) / (2 * sum(m))`` over valid frames m (blinks, untracked and padding
frames excluded), the flow-matching normalisation. The noise processes (interpolants, targets, clean estimates) are
the scheduler's (``scheduling_gazeflow``); this module only draws, calls the network and compares. ``model`` is the
``GazeFlowModel`` (read through ``model.config`` and ``model.velocity`` only, so this module never imports it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .scheduling_gazeflow import REGRESSION_INPUT_TIME, DDIMScheduler, FlowMatchingScheduler, estimate_endpoint

GazeFlowModel = torch.nn.Module
"""Annotation of the ``GazeFlowModel`` argument: only ``model.config`` and ``model.velocity`` are used."""
GazeFlowCondition = Any
"""Annotation of the model's ``GazeFlowCondition``, passed through to ``model.velocity``."""


@dataclass
class ObjectiveOutput:
    loss: torch.Tensor
    prediction: torch.Tensor
    target: torch.Tensor
    time: torch.Tensor | None


def masked_mse(prediction: torch.Tensor, target: torch.Tensor, valid_mask: torch.Tensor) -> torch.Tensor:
    """``sum(m (prediction - target)^2) / (2 sum(m))`` over ``[B, T, 2]`` with ``valid_mask [B, T]``."""
    weights = valid_mask.to(prediction.dtype).unsqueeze(-1)
    squared_error = (prediction.float() - target.float()) ** 2 * weights
    return squared_error.sum() / (2 * weights.sum()).clamp_min(1.0)


def _random_state(generator: torch.Generator | None, device: torch.device) -> torch.device:
    return generator.device if generator is not None else device


def flow_matching_loss(model: GazeFlowModel, condition: GazeFlowCondition, gaze: torch.Tensor,
                       valid_mask: torch.Tensor, generator: torch.Generator | None) -> ObjectiveOutput:
    """Eq. cfm_loss: s ~ U(0, 1), x_0 ~ N(0, I), x_s = (1 - (1 - sigma_min) s) x_0 + s g, target
    u = g - (1 - sigma_min) x_0. With probability ``self_conditioning_prob`` a first, gradient-free pass gives
    x1_hat = x_s + (1 - s) v for the second pass; otherwise x1_hat = 0 (Appendix D.2)."""
    batch = gaze.shape[0]
    device, rand_device = gaze.device, _random_state(generator, gaze.device)
    sigma_min = model.config.sigma_min
    flow_time = torch.rand(batch, generator=generator, device=rand_device).to(device)
    noise = torch.randn(gaze.shape, generator=generator, device=rand_device).to(device=device, dtype=gaze.dtype)
    use_self_condition = bool(torch.rand((), generator=generator, device=rand_device)
                              < model.config.self_conditioning_prob)
    scheduler = FlowMatchingScheduler(sigma_min=sigma_min)
    s = flow_time.view(batch, 1, 1)
    sample = scheduler.add_noise(gaze, noise, s)
    target = scheduler.velocity_target(gaze, noise)

    sample_k, time_k = sample.unsqueeze(1), flow_time.unsqueeze(1)  # K = 1 trajectory per clip
    self_condition = torch.zeros_like(sample_k)
    if use_self_condition:
        with torch.no_grad():
            first = model.velocity(sample_k, time_k, condition, self_condition)
            self_condition = estimate_endpoint(sample_k, s.unsqueeze(1), first).detach()
    predicted = model.velocity(sample_k, time_k, condition, self_condition).squeeze(1)
    return ObjectiveOutput(masked_mse(predicted, target, valid_mask), predicted, target, flow_time)


def diffusion_loss(model: GazeFlowModel, condition: GazeFlowCondition, gaze: torch.Tensor,
                   valid_mask: torch.Tensor, generator: torch.Generator | None) -> ObjectiveOutput:
    """Epsilon prediction: t ~ U{0 .. N - 1}, eps ~ N(0, I), x_t = sqrt(alpha_bar_t) g + sqrt(1 - alpha_bar_t) eps,
    the network reads (x_t, tau = t / N) and predicts eps. Self-conditioning as in flow matching, with the clean
    estimate x0_hat = (x_t - sqrt(1 - alpha_bar_t) eps_hat) / sqrt(alpha_bar_t), clipped to [-1, 1]."""
    batch = gaze.shape[0]
    num_timesteps = model.config.diffusion_timesteps
    device, rand_device = gaze.device, _random_state(generator, gaze.device)
    timestep = torch.randint(0, num_timesteps, (batch,), generator=generator, device=rand_device).to(device)
    noise = torch.randn(gaze.shape, generator=generator, device=rand_device).to(device=device, dtype=gaze.dtype)
    use_self_condition = bool(torch.rand((), generator=generator, device=rand_device)
                              < model.config.self_conditioning_prob)
    scheduler = DDIMScheduler(num_timesteps=num_timesteps)
    alpha_bar = scheduler.alpha_bar_of(timestep, gaze)
    sample = scheduler.noised(gaze, noise, alpha_bar)
    tau = scheduler.model_time(timestep.float()).unsqueeze(1)

    sample_k = sample.unsqueeze(1)
    self_condition = torch.zeros_like(sample_k)
    if use_self_condition:
        with torch.no_grad():
            first = model.velocity(sample_k, tau, condition, self_condition)
            self_condition = scheduler.clean_estimate(sample_k, first, alpha_bar.unsqueeze(1)).detach()
    predicted = model.velocity(sample_k, tau, condition, self_condition).squeeze(1)
    return ObjectiveOutput(masked_mse(predicted, noise, valid_mask), predicted, noise, tau.squeeze(1))


def regression_loss(model: GazeFlowModel, condition: GazeFlowCondition, gaze: torch.Tensor,
                    valid_mask: torch.Tensor, generator: torch.Generator | None) -> ObjectiveOutput:
    """Masked MSE between the directly predicted trajectory and g (the "- Joint Distribution Modeling" row)."""
    predicted = regression_predict(model, condition, gaze.new_zeros(gaze.shape[0], 1, *gaze.shape[1:])).squeeze(1)
    return ObjectiveOutput(masked_mse(predicted, gaze, valid_mask), predicted, gaze, None)


def regression_predict(model: GazeFlowModel, condition: GazeFlowCondition, zeros: torch.Tensor) -> torch.Tensor:
    """The regression head's trajectory ``[B, 1, T, 2]``: the network at x = 0, s = REGRESSION_INPUT_TIME, x1_hat = 0."""
    return model.velocity(zeros, REGRESSION_INPUT_TIME, condition, zeros)


OBJECTIVE_LOSSES = {
    "flow_matching": flow_matching_loss,
    "diffusion": diffusion_loss,
    "regression": regression_loss,
}


def objective_loss(model: GazeFlowModel, condition: GazeFlowCondition, gaze: torch.Tensor, valid_mask: torch.Tensor,
                   generator: torch.Generator | None) -> ObjectiveOutput:
    """The training loss of ``model.config.objective``."""
    return OBJECTIVE_LOSSES[model.config.objective](model, condition, gaze, valid_mask, generator)


__all__ = [
    "ObjectiveOutput",
    "masked_mse",
    "flow_matching_loss",
    "diffusion_loss",
    "regression_loss",
    "regression_predict",
    "objective_loss",
]
