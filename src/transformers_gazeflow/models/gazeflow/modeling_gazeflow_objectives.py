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
frames excluded), the flow-matching normalisation. Each example draws its time, noise and self-conditioning coin from
its own random stream, so its loss does not depend on its batch neighbours for a fixed seed, and an ``eval()``
forward is deterministic (``scheduling_gazeflow.example_generators``). The noise processes (interpolants, targets,
clean estimates) are the scheduler's (``scheduling_gazeflow``); this module only draws, calls the network and
compares. ``model`` is the ``GazeFlowModel``, read through ``model.config``, ``model.training`` and
``model.velocity`` only (:class:`ObjectiveModel`), so this module never imports it. With ``output_attentions`` /
``output_hidden_states`` the loss's network call (the last one: a self-conditioning pass comes before it) returns the
network's attentions / hidden states, kept in :attr:`ObjectiveOutput.network_outputs`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from .configuration_gazeflow import GazeFlowConfig
from .modeling_gazeflow_encoder import GazeFlowCondition
from .modeling_gazeflow_outputs import GazeFlowVelocityOutput
from .scheduling_gazeflow import (
    REGRESSION_INPUT_TIME,
    DDIMScheduler,
    FlowMatchingScheduler,
    GeneratorArgument,
    TrainingNoise,
    draw_eval_noise,
    draw_training_noise,
    estimate_endpoint,
    example_generators,
    whiten_frames,
)


class ObjectiveModel(Protocol):
    """What an objective reads of a ``GazeFlowModel`` (the model's module imports this one, so the objectives name
    what they use instead of the class): its config, whether it is training, and v_theta."""

    config: GazeFlowConfig
    training: bool

    def velocity(
        self,
        sample: torch.Tensor,
        flow_time: torch.Tensor | float,
        condition: GazeFlowCondition,
        self_condition: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> torch.Tensor | GazeFlowVelocityOutput: ...


@dataclass
class ObjectiveOutput:
    """A training loss with the network's prediction ``[B, T, 2]``, its target, the drawn times ``[B]`` (None for
    regression) and, when asked for, the network's attentions / hidden states at the loss's call."""

    loss: torch.Tensor
    prediction: torch.Tensor
    target: torch.Tensor
    time: torch.Tensor | None
    network_outputs: GazeFlowVelocityOutput | None = None


def _loss_network_call(
    model: ObjectiveModel,
    sample: torch.Tensor,
    flow_time: torch.Tensor | float,
    condition: GazeFlowCondition,
    self_condition: torch.Tensor,
    output_attentions: bool,
    output_hidden_states: bool,
) -> tuple[torch.Tensor, GazeFlowVelocityOutput | None]:
    """The network call whose output enters the loss (K = 1): its prediction ``[B, T, 2]`` and, with
    ``output_attentions`` / ``output_hidden_states``, the network's :class:`GazeFlowVelocityOutput`."""
    output = model.velocity(
        sample,
        flow_time,
        condition,
        self_condition,
        output_attentions=output_attentions,
        output_hidden_states=output_hidden_states,
    )
    if isinstance(output, GazeFlowVelocityOutput):
        return output.velocity.squeeze(1), output
    return output.squeeze(1), None


def masked_mse(prediction: torch.Tensor, target: torch.Tensor, valid_mask: torch.Tensor) -> torch.Tensor:
    """``sum(m (prediction - target)^2) / (2 sum(m))`` over ``[B, T, 2]`` with ``valid_mask [B, T]``."""
    weights = valid_mask.to(prediction.dtype).unsqueeze(-1)
    squared_error = (prediction.float() - target.float()) ** 2 * weights
    return squared_error.sum() / (2 * weights.sum()).clamp_min(1.0)


def frame_whitened_mse(
    prediction: torch.Tensor, target: torch.Tensor, valid_mask: torch.Tensor, correlation: float
) -> torch.Tensor:
    """:func:`masked_mse` in the AR(1) prior's whitened frame coordinates (``config.whitened_flow``): the residual
    r = prediction - target ``[B, T, 2]`` mapped to e = L^-1 r (``scheduling_gazeflow.whiten_frames``), frame t's
    term counted where frames t and t - 1 are both valid (frame 0 where it is), over ``2 sum(m)``."""
    residual = whiten_frames(prediction.float() - target.float(), correlation, frame_dim=1)
    mask = valid_mask.to(residual.dtype)
    pairs = torch.cat([mask[:, :1], mask[:, 1:] * mask[:, :-1]], dim=1).unsqueeze(-1)
    return (residual**2 * pairs).sum() / (2 * mask.sum()).clamp_min(1.0)


def window_mean_mse(prediction: torch.Tensor, target: torch.Tensor, valid_mask: torch.Tensor) -> torch.Tensor:
    """The plain squared residual of each window's mean alone: ``sum_b n_b ||mean_b(r)||^2 / (2 sum(m))`` with
    r = prediction - target ``[B, T, 2]`` averaged over the n_b valid frames of example b, i.e. ||P r||^2 over
    ``2 sum(m)`` with P the projection onto the constant trajectories (the part of :func:`masked_mse` that a
    constant offset of the whole window carries)."""
    mask = valid_mask.to(torch.float32).unsqueeze(-1)
    frames = mask.sum(dim=1)
    residual_sum = ((prediction.float() - target.float()) * mask).sum(dim=1)
    per_example = (residual_sum**2).sum(dim=-1, keepdim=True) / frames.clamp_min(1.0)
    return per_example.sum() / (2 * mask.sum()).clamp_min(1.0)


def window_centred(trajectory: torch.Tensor, valid_mask: torch.Tensor) -> torch.Tensor:
    """(I - P) x: ``trajectory`` ``[B, T, 2]`` less its mean over each example's valid frames (``valid_mask``
    ``[B, T]``), the part of a window that moves within it."""
    mask = valid_mask.to(torch.float32).unsqueeze(-1)
    mean = (trajectory.float() * mask).sum(dim=1, keepdim=True) / mask.sum(dim=1, keepdim=True).clamp_min(1.0)
    return trajectory.float() - mean


def flow_loss(predicted: torch.Tensor, target: torch.Tensor, valid_mask: torch.Tensor, config) -> torch.Tensor:
    """The flow-matching loss of Eq. cfm_loss on ``[B, T, 2]``: :func:`masked_mse` ||v - u||^2, or with
    ``config.whitened_flow`` a ||L^-1 (v - u)||^2 + (1 - a) ||v - u||^2 + lambda ||P (v - u)||^2, a =
    ``config.whitened_loss_share``, lambda = ``config.whitened_mean_loss_weight`` and P the projection onto
    constant trajectories (:func:`window_mean_mse`); with ``config.window_mean_velocity`` ||P (v - u)||^2 +
    ||L^-1 (I - P) (v - u)||^2 (:func:`window_centred`). Every such loss is a positive definite quadratic form in
    v - u, so its minimiser is still E[u | x_s]: the terms only choose which errors training charges most."""
    if not config.whitened_flow:
        return masked_mse(predicted, target, valid_mask)
    if config.window_mean_velocity:
        moving = frame_whitened_mse(
            window_centred(predicted, valid_mask),
            window_centred(target, valid_mask),
            valid_mask,
            config.noise_correlation,
        )
        return window_mean_mse(predicted, target, valid_mask) + moving
    loss = frame_whitened_mse(predicted, target, valid_mask, config.noise_correlation)
    share = config.whitened_loss_share
    if share != 1:
        loss = share * loss + (1 - share) * masked_mse(predicted, target, valid_mask)
    if config.whitened_mean_loss_weight > 0:
        loss = loss + config.whitened_mean_loss_weight * window_mean_mse(predicted, target, valid_mask)
    return loss


def _training_noise(
    model: ObjectiveModel, gaze: torch.Tensor, generator: GeneratorArgument, num_timesteps: int | None = None
) -> TrainingNoise:
    """Each example's draws from its own stream (``scheduling_gazeflow.example_generators``); in eval mode without a
    generator, fixed draws, the same for every example (``scheduling_gazeflow.draw_eval_noise``), so a clip's loss
    is the same on every call and in any batch, the global RNG is untouched, and the loss exports."""
    if generator is None and not model.training:
        return draw_eval_noise(
            tuple(gaze.shape),
            model.config.self_conditioning_prob,
            gaze.device,
            gaze.dtype,
            num_timesteps,
            flow_time_sampling=model.config.flow_time_sampling,
            noise_correlation=model.config.noise_correlation,
        )
    generators = example_generators(generator, gaze.shape[0], deterministic=False)
    return draw_training_noise(
        tuple(gaze.shape),
        generators,
        model.config.self_conditioning_prob,
        gaze.device,
        gaze.dtype,
        num_timesteps,
        flow_time_sampling=model.config.flow_time_sampling,
        noise_correlation=model.config.noise_correlation,
    )


def _self_condition(model: ObjectiveModel, use_self_condition: torch.Tensor, first_pass) -> torch.Tensor | None:
    """x1_hat of the second pass: the gradient-free first pass's estimate for the examples whose coin came up, zeros
    for the others, chosen by a per-example mask (no Python branch on a tensor, so the loss traces). The first pass
    runs whenever ``self_conditioning_prob > 0`` (a config constant); None when it is 0."""
    if model.config.self_conditioning_prob <= 0:
        return None
    with torch.no_grad():
        estimate = first_pass()
    mask = use_self_condition.view(-1, *([1] * (estimate.dim() - 1)))
    return torch.where(mask, estimate, torch.zeros_like(estimate)).detach()


def flow_matching_loss(
    model: ObjectiveModel,
    condition: GazeFlowCondition,
    gaze: torch.Tensor,
    valid_mask: torch.Tensor,
    generator: GeneratorArgument,
    output_attentions: bool = False,
    output_hidden_states: bool = False,
) -> ObjectiveOutput:
    """Eq. cfm_loss with each example's s ~ U(0, 1), x_0 ~ N(0, I) and self-conditioning coin drawn from its own
    stream (:func:`flow_matching_objective` does the rest)."""
    return flow_matching_objective(
        model,
        condition,
        gaze,
        valid_mask,
        _training_noise(model, gaze, generator),
        output_attentions,
        output_hidden_states,
    )


def flow_matching_objective(
    model: ObjectiveModel,
    condition: GazeFlowCondition,
    gaze: torch.Tensor,
    valid_mask: torch.Tensor,
    draws: TrainingNoise,
    output_attentions: bool = False,
    output_hidden_states: bool = False,
) -> ObjectiveOutput:
    """Eq. cfm_loss for given draws: x_s = (1 - (1 - sigma_min) s) x_0 + s g, target u = g - (1 - sigma_min) x_0.
    An example whose coin came up (probability ``self_conditioning_prob``) reads x1_hat = x_s + (1 - s) v from a
    first, gradient-free pass; the others read x1_hat = 0 (Appendix D.2)."""
    scheduler = FlowMatchingScheduler(sigma_min=model.config.sigma_min)
    flow_time, noise = draws.time, draws.noise
    s = flow_time.view(-1, 1, 1)
    sample = scheduler.add_noise(gaze, noise, s)
    target = scheduler.velocity_target(gaze, noise)

    sample_k, time_k = sample.unsqueeze(1), flow_time.unsqueeze(1)  # K = 1 trajectory per clip
    zeros = torch.zeros_like(sample_k)
    self_condition = _self_condition(
        model,
        draws.self_condition,
        lambda: estimate_endpoint(sample_k, s.unsqueeze(1), model.velocity(sample_k, time_k, condition, zeros)),
    )
    predicted, network_outputs = _loss_network_call(
        model,
        sample_k,
        time_k,
        condition,
        zeros if self_condition is None else self_condition,
        output_attentions,
        output_hidden_states,
    )
    loss = flow_loss(predicted, target, valid_mask, model.config)
    return ObjectiveOutput(loss, predicted, target, flow_time, network_outputs)


def diffusion_loss(
    model: ObjectiveModel,
    condition: GazeFlowCondition,
    gaze: torch.Tensor,
    valid_mask: torch.Tensor,
    generator: GeneratorArgument,
    output_attentions: bool = False,
    output_hidden_states: bool = False,
) -> ObjectiveOutput:
    """Epsilon prediction: each example's t ~ U{0 .. N - 1}, eps ~ N(0, I) and coin from its own stream;
    x_t = sqrt(alpha_bar_t) g + sqrt(1 - alpha_bar_t) eps, the network reads (x_t, tau = t / N) and predicts eps.
    Self-conditioning as in flow matching, with the clean estimate
    x0_hat = (x_t - sqrt(1 - alpha_bar_t) eps_hat) / sqrt(alpha_bar_t), clipped to [-1, 1]."""
    scheduler = DDIMScheduler(num_timesteps=model.config.diffusion_timesteps)
    draws = _training_noise(model, gaze, generator, scheduler.num_timesteps)
    timestep, noise = draws.time, draws.noise
    alpha_bar = scheduler.alpha_bar_of(timestep, gaze)
    sample = scheduler.noised(gaze, noise, alpha_bar)
    tau = scheduler.model_time(timestep.float()).unsqueeze(1)

    sample_k = sample.unsqueeze(1)
    zeros = torch.zeros_like(sample_k)
    self_condition = _self_condition(
        model,
        draws.self_condition,
        lambda: scheduler.clean_estimate(
            sample_k, model.velocity(sample_k, tau, condition, zeros), alpha_bar.unsqueeze(1)
        ),
    )
    predicted, network_outputs = _loss_network_call(
        model,
        sample_k,
        tau,
        condition,
        zeros if self_condition is None else self_condition,
        output_attentions,
        output_hidden_states,
    )
    return ObjectiveOutput(masked_mse(predicted, noise, valid_mask), predicted, noise, tau.squeeze(1), network_outputs)


def regression_loss(
    model: ObjectiveModel,
    condition: GazeFlowCondition,
    gaze: torch.Tensor,
    valid_mask: torch.Tensor,
    generator: GeneratorArgument,
    output_attentions: bool = False,
    output_hidden_states: bool = False,
) -> ObjectiveOutput:
    """Masked MSE between the directly predicted trajectory and g (the "- Joint Distribution Modeling" row): the
    network at x = 0, s = REGRESSION_INPUT_TIME, x1_hat = 0."""
    zeros = gaze.new_zeros(gaze.shape[0], 1, *gaze.shape[1:])
    predicted, network_outputs = _loss_network_call(
        model, zeros, REGRESSION_INPUT_TIME, condition, zeros, output_attentions, output_hidden_states
    )
    return ObjectiveOutput(masked_mse(predicted, gaze, valid_mask), predicted, gaze, None, network_outputs)


def grounding_targets(
    gaze: torch.Tensor, valid_mask: torch.Tensor, token_centres: torch.Tensor, sigma: float, groups: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The targets of L_ground (:func:`grounding_loss`): ``(group_targets [B, G, N], group_weights [B, G])``.

    Each valid frame's target is a softmax over the ``N`` tokens of ``-|centre_n - g_t|^2 / (2 sigma^2)``; a group's
    target is the mean over its valid frames (all zeros without one), ``group_weights`` its count of valid frames.
    ``gaze [B, T, 2]`` in model coordinates, ``valid_mask [B, T]``, ``T`` a multiple of ``groups``."""
    batch, frames = gaze.shape[:2]
    num_tokens = token_centres.shape[0]
    if frames % groups != 0:
        raise ValueError(f"grounding_loss: {frames} frames do not split into {groups} groups")
    squared_distance = (gaze.float().unsqueeze(2) - token_centres.float().view(1, 1, num_tokens, 2)).pow(2).sum(-1)
    frame_targets = torch.softmax(-squared_distance / (2 * sigma**2), dim=-1)  # [B, T, N]
    frame_weights = valid_mask.to(frame_targets.dtype)
    group_targets = (frame_targets * frame_weights.unsqueeze(-1)).view(batch, groups, -1, num_tokens).sum(2)
    group_weights = frame_weights.view(batch, groups, -1).sum(2)  # valid frames per group
    return group_targets / group_weights.clamp_min(1.0).unsqueeze(-1), group_weights


def grounding_loss(
    token_logits: torch.Tensor, gaze: torch.Tensor, valid_mask: torch.Tensor, token_centres: torch.Tensor, sigma: float
) -> torch.Tensor:
    """The auxiliary grounding loss L_ground (beyond the paper; ``config.grounding_loss_weight``).

    ``token_logits [B, G, N]``: the grounding head's score of each spatial token of each frame group (G groups of
    ``T / G`` frames that read the same tokens); ``gaze [B, T, 2]`` in model coordinates; ``valid_mask [B, T]``;
    ``token_centres [N, 2]``: the tokens' centres in model coordinates (``geometry.patch_centres``); ``sigma``: the
    target's width in model units. Each valid frame's target is a softmax over the tokens of
    ``-|centre_n - g_t|^2 / (2 sigma^2)``, a Gaussian around its gaze normalised over the grid; a group's target is
    the mean over its valid frames. The loss is the cross-entropy between the targets and ``softmax(token_logits)``,
    averaged over the groups with at least one valid frame (0 when there is none)."""
    batch, groups, num_tokens = token_logits.shape
    if token_centres.shape != (num_tokens, 2):
        raise ValueError(f"grounding_loss: token_centres {tuple(token_centres.shape)} is not ({num_tokens}, 2)")
    group_targets, group_weights = grounding_targets(gaze, valid_mask, token_centres, sigma, groups)
    cross_entropy = -(group_targets * torch.log_softmax(token_logits.float(), dim=-1)).sum(-1)  # [B, G]
    has_valid = (group_weights > 0).to(cross_entropy.dtype)
    return (cross_entropy * has_valid).sum() / has_valid.sum().clamp_min(1.0)


OBJECTIVE_LOSSES = {
    "flow_matching": flow_matching_loss,
    "diffusion": diffusion_loss,
    "regression": regression_loss,
}


def objective_loss(
    model: ObjectiveModel,
    condition: GazeFlowCondition,
    gaze: torch.Tensor,
    valid_mask: torch.Tensor,
    generator: GeneratorArgument,
    output_attentions: bool = False,
    output_hidden_states: bool = False,
) -> ObjectiveOutput:
    """The training loss of ``model.config.objective``. ``generator``: one ``torch.Generator``, a list of one per
    example, or None (the global RNG in training, a fixed seed in eval mode); see ``scheduling_gazeflow``.
    ``output_attentions`` / ``output_hidden_states``: keep the network's at the loss's call
    (:attr:`ObjectiveOutput.network_outputs`)."""
    return OBJECTIVE_LOSSES[model.config.objective](
        model, condition, gaze, valid_mask, generator, output_attentions, output_hidden_states
    )


__all__ = [
    "ObjectiveModel",
    "ObjectiveOutput",
    "masked_mse",
    "frame_whitened_mse",
    "flow_loss",
    "flow_matching_loss",
    "flow_matching_objective",
    "diffusion_loss",
    "regression_loss",
    "objective_loss",
    "grounding_loss",
    "grounding_targets",
]
