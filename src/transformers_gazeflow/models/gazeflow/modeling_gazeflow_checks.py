"""Input checks for the model and the sampler: each bad input gets a ValueError naming the argument, the shape or
range received and the one expected. Kept apart so that modeling and sampling read as the paper does."""

from __future__ import annotations

import math

import torch

from .choices import SOLVERS
from .configuration_gazeflow import GazeFlowConfig


def check_pixel_values(pixel_values_videos: torch.Tensor, config: GazeFlowConfig) -> None:
    """``pixel_values_videos`` must be a float tensor ``[B, T, 3, S, S]`` with S the encoder's input size."""
    size = config.image_size
    expected = f"[batch, frames, 3, {size}, {size}]"
    if not torch.is_tensor(pixel_values_videos):
        raise ValueError(f"`pixel_values_videos` must be a torch.Tensor {expected}, got {type(pixel_values_videos)}")
    if pixel_values_videos.dim() != 5:
        raise ValueError(
            f"`pixel_values_videos` must have 5 dimensions {expected}, got shape {tuple(pixel_values_videos.shape)}"
        )
    _, frames, channels, height, width = pixel_values_videos.shape
    if channels != config.encoder_config.in_chans or (height, width) != (size, size):
        raise ValueError(
            f"`pixel_values_videos` frames must be {config.encoder_config.in_chans} x {size} x {size} "
            f"(shape {expected}; resize whole frames with the processor), got shape "
            f"{tuple(pixel_values_videos.shape)}"
        )
    if frames < 1:
        raise ValueError(f"`pixel_values_videos` has no frames: shape {tuple(pixel_values_videos.shape)}")
    if not pixel_values_videos.is_floating_point():
        raise ValueError(
            f"`pixel_values_videos` must be a float tensor of normalised frames, got dtype "
            f"{pixel_values_videos.dtype} (use the processor to convert uint8 frames)"
        )


def check_encoder_hidden_states(
    encoder_hidden_states: torch.Tensor, num_frames: int, config: GazeFlowConfig
) -> torch.Tensor:
    """Check encoder tokens of a ``num_frames`` window and return them as ``[B, G, N, D]``, G = num_frames / tubelet
    (the causal variant: G = num_frames, one token group per frame)."""
    group, tokens_per_frame = config.frames_per_encoder_group, config.tokens_per_frame
    hidden = config.encoder_config.hidden_size
    if num_frames < 1 or num_frames % group != 0:
        raise ValueError(
            f"the window must have a positive multiple of the encoder's tubelet_size={group} frames, "
            f"got num_frames={num_frames}"
        )
    groups = num_frames // group
    unit = "frames (causal: one token group per frame)" if config.causal else "tubelets"
    expected = f"[batch, {groups * tokens_per_frame}, {hidden}] ({groups} {unit} x {tokens_per_frame} tokens)"
    if not torch.is_tensor(encoder_hidden_states) or encoder_hidden_states.dim() != 3:
        shape = (
            tuple(encoder_hidden_states.shape)
            if torch.is_tensor(encoder_hidden_states)
            else type(encoder_hidden_states)
        )
        raise ValueError(f"`encoder_hidden_states` must be a tensor {expected}, got {shape}")
    batch, length, width = encoder_hidden_states.shape
    if length != groups * tokens_per_frame or width != hidden:
        raise ValueError(
            f"`encoder_hidden_states` for {num_frames} frames must have shape {expected}, "
            f"got {tuple(encoder_hidden_states.shape)}"
        )
    return encoder_hidden_states.view(batch, groups, tokens_per_frame, hidden)


def check_training_targets(gaze: torch.Tensor, valid_mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Validate the flow-matching targets; returns ``(gaze, valid_mask)`` with invalid frames' gaze made finite.

    ``gaze`` must be ``[B, T, 2]`` in model coordinates ``[-1, 1]``; on frames where ``valid_mask`` is True it must
    be finite and in range (these enter the loss). Invalid frames (blink, untracked, padding) do not enter the loss,
    so a NaN there is replaced by the centre (0, 0) and other values are clamped into range, rather than rejected.
    """
    if not torch.is_tensor(gaze) or gaze.dim() != 3 or gaze.shape[-1] != 2:
        shape = tuple(gaze.shape) if torch.is_tensor(gaze) else type(gaze)
        raise ValueError(f"`gaze` must be a tensor [batch, frames, 2] in model coordinates [-1, 1], got {shape}")
    if not gaze.is_floating_point():
        raise ValueError(f"`gaze` must be a float tensor, got dtype {gaze.dtype}")
    if valid_mask is None:
        valid_mask = torch.ones(gaze.shape[:2], dtype=torch.bool, device=gaze.device)
    if not torch.is_tensor(valid_mask) or tuple(valid_mask.shape) != tuple(gaze.shape[:2]):
        shape = tuple(valid_mask.shape) if torch.is_tensor(valid_mask) else type(valid_mask)
        raise ValueError(
            f"`valid_mask` must have shape {tuple(gaze.shape[:2])} (batch, frames) like `gaze`, got {shape}"
        )
    valid_mask = valid_mask.bool()
    if not torch.compiler.is_compiling():  # these read tensor values: checked eagerly, outside traced graphs
        valid_gaze = gaze[valid_mask]
        if not torch.isfinite(valid_gaze).all():
            bad = (~torch.isfinite(gaze).all(-1) & valid_mask).nonzero()[0].tolist()
            raise ValueError(
                f"`gaze` has a non-finite value at (batch, frame) {tuple(bad)} on a valid frame; "
                f"mark the frame invalid in `valid_mask` or fix the data"
            )
        if valid_gaze.numel() and valid_gaze.abs().max() > 1.0 + 1e-5:
            raise ValueError(
                f"`gaze` must lie in model coordinates [-1, 1] (unit coordinates x map to 2x - 1), got "
                f"values in [{valid_gaze.min().item():.4f}, {valid_gaze.max().item():.4f}]"
            )
    finite = torch.nan_to_num(gaze, nan=0.0, posinf=0.0, neginf=0.0).clamp(-1.0, 1.0)
    gaze = torch.where(valid_mask.unsqueeze(-1), gaze, finite)
    return gaze, valid_mask


def check_sampling_arguments(num_samples: int, num_steps: int, solver: str, noise_scale: float = 1.0) -> None:
    if not isinstance(num_samples, int) or num_samples < 1:
        raise ValueError(f"`num_samples` (K) must be an int >= 1, got {num_samples!r}")
    if not isinstance(num_steps, int) or num_steps < 1:
        raise ValueError(f"`num_steps` (S) must be an int >= 1, got {num_steps!r}")
    if solver not in SOLVERS:
        raise ValueError(f"`solver` must be one of {SOLVERS}, got {solver!r}")
    if isinstance(noise_scale, bool) or not isinstance(noise_scale, (int, float)) or not 0 < noise_scale < math.inf:
        raise ValueError(f"`noise_scale` (tau) must be a number > 0, got {noise_scale!r}")


def check_objective_sampling(config: GazeFlowConfig, num_samples: int, solver: str) -> None:
    """The regression head gives one trajectory (K = 1); ODE solvers apply to flow matching only."""
    if config.objective == "regression" and num_samples != 1:
        raise ValueError(
            f"`num_samples` (K) must be 1 with objective='regression' (a deterministic head predicts one "
            f"trajectory), got {num_samples}"
        )
    if config.objective != "flow_matching" and solver != "euler":
        sampler = "DDIM" if config.objective == "diffusion" else "one call"
        raise ValueError(
            f"`solver`={solver!r} applies to objective='flow_matching' only; objective="
            f"{config.objective!r} samples with {sampler} (leave solver at its default 'euler')"
        )


__all__ = [
    "check_objective_sampling",
    "check_pixel_values",
    "check_encoder_hidden_states",
    "check_training_targets",
    "check_sampling_arguments",
]
