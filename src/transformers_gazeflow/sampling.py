"""Sampling GazeFlow trajectories: K samples, sliding windows.

The network only answers "the velocity at (x_s, s) given the condition" (:meth:`GazeFlowModel.velocity`); the
scheduler (``scheduling_gazeflow``) integrates it. This module runs windows through both (paper Algorithm 1,
Appendix D.3): :func:`generate_trajectories` encodes each window once, builds its condition once (shared by all K
samples and S steps), samples with the scheduler of the config's ``objective``, and blends windows
(``windows.blend_windows``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from .geometry import clamp_unit, model_to_unit
from .scheduling_gazeflow import ModelFn, draw_noise, scheduler_for
from .validation import check_objective_sampling, check_pixel_values, check_sampling_arguments
from .windows import blend_windows, window_starts

if TYPE_CHECKING:
    from .modeling_gazeflow import GazeFlowModel


def cached_velocity_fn(model: GazeFlowModel, encoder_hidden_states: torch.Tensor, num_frames: int) -> ModelFn:
    """The fast path: the condition (c_v, c_task and every block's keys/values) is built once per clip here and
    reused by every call, for all K samples at once (never copied K times)."""
    condition = model.build_condition(encoder_hidden_states, num_frames)

    def velocity_fn(sample: torch.Tensor, flow_time: float, self_condition: torch.Tensor) -> torch.Tensor:
        return model.velocity(sample, flow_time, condition, self_condition)

    return velocity_fn


def recompute_velocity_fn(model: GazeFlowModel, encoder_hidden_states: torch.Tensor, num_frames: int,
                          num_samples: int) -> ModelFn:
    """The plain reference path, as the paper counts it (~100 GFLOPs per call): every call repeats the encoder
    tokens K times and recomputes W_proj, the per-frame spatial encoder, the task bank and all keys/values."""
    repeated = encoder_hidden_states.repeat_interleave(num_samples, dim=0)

    def velocity_fn(sample: torch.Tensor, flow_time: float, self_condition: torch.Tensor) -> torch.Tensor:
        batch, samples, frames, _ = sample.shape
        condition = model.build_condition(repeated, num_frames, share_group_tokens=False)
        flat = (batch * samples, 1, frames, 2)
        velocity = model.velocity(sample.reshape(flat), flow_time, condition, self_condition.reshape(flat))
        return velocity.view(batch, samples, frames, 2)

    return velocity_fn


def sample_window(model: GazeFlowModel, encoder_hidden_states: torch.Tensor, num_frames: int, noise: torch.Tensor,
                  num_steps: int, solver: str, use_condition_cache: bool = True) -> torch.Tensor:
    """Trajectories ``[B, K, T, 2]`` in model coordinates for one window's encoder tokens and noise ``[B, K, T, 2]``."""
    if use_condition_cache:
        velocity_fn = cached_velocity_fn(model, encoder_hidden_states, num_frames)
    else:
        velocity_fn = recompute_velocity_fn(model, encoder_hidden_states, num_frames, noise.shape[1])
    return scheduler_for(model.config, num_steps, solver).sample(velocity_fn, noise)


def pad_window(frames: torch.Tensor, length: int) -> torch.Tensor:
    """Pad ``[B, t, ...]`` to ``length`` frames by repeating the last frame (Appendix D.3)."""
    missing = length - frames.shape[1]
    if missing <= 0:
        return frames
    return torch.cat([frames, frames[:, -1:].expand(-1, missing, *frames.shape[2:])], dim=1)


def generate_trajectories(
    model: GazeFlowModel,
    pixel_values_videos: torch.Tensor | None = None,
    encoder_hidden_states: torch.Tensor | None = None,
    num_samples: int = 30,
    num_steps: int = 5,
    solver: str = "euler",
    generator: torch.Generator | None = None,
    window_batch_size: int = 8,
    use_condition_cache: bool = True,
) -> torch.Tensor:
    """K trajectories per clip ``[B, K, T, 2]`` in unit coordinates ``[0, 1]`` (clamped into the frame).

    Frames go through windows of ``config.num_frames`` (stride ``config.window_stride``), each window encoded once;
    windows are batched ``window_batch_size`` at a time. The noise of window i is the i-th draw of shape
    ``[B, K, W, 2]`` from ``generator``, so a window's samples do not depend on how windows are batched, and a
    clip of one window draws exactly the noise a single-window call draws.
    """
    check_sampling_arguments(num_samples, num_steps, solver)
    check_objective_sampling(model.config, num_samples, solver)
    if (pixel_values_videos is None) == (encoder_hidden_states is None):
        raise ValueError("generate: give exactly one of `pixel_values_videos` [B, T, 3, S, S] or "
                         "`encoder_hidden_states` [B, G * N, D]")
    if window_batch_size < 1:
        raise ValueError(f"`window_batch_size` must be >= 1, got {window_batch_size}")
    config = model.config
    device = next(model.parameters()).device

    if encoder_hidden_states is not None:
        tokens = config.tokens_per_frame
        if encoder_hidden_states.dim() != 3 or encoder_hidden_states.shape[1] % tokens != 0:
            raise ValueError(f"`encoder_hidden_states` must be [batch, tubelets * {tokens}, "
                             f"{config.encoder_config.hidden_size}], got {tuple(encoder_hidden_states.shape)}")
        num_frames = encoder_hidden_states.shape[1] // tokens * config.frames_per_encoder_group
        batch = encoder_hidden_states.shape[0]
        noise = draw_noise((batch, num_samples, num_frames, 2), generator, device)
        trajectories = sample_window(model, encoder_hidden_states.to(device), num_frames, noise, num_steps, solver,
                                     use_condition_cache)
        return clamp_unit(model_to_unit(trajectories))

    check_pixel_values(pixel_values_videos, config)
    batch, total_frames = pixel_values_videos.shape[:2]
    window = config.num_frames
    starts = window_starts(total_frames, window, config.window_stride)
    noises = [draw_noise((batch, num_samples, window, 2), generator, device) for _ in starts]
    window_trajectories: list[torch.Tensor] = []
    for chunk in range(0, len(starts), window_batch_size):
        chunk_starts = starts[chunk:chunk + window_batch_size]
        frames = torch.cat([pad_window(pixel_values_videos[:, s:s + window], window) for s in chunk_starts])
        encoder_tokens = model.encode_video(frames.to(device))
        noise = torch.cat(noises[chunk:chunk + len(chunk_starts)])
        sampled = sample_window(model, encoder_tokens, window, noise, num_steps, solver, use_condition_cache)
        window_trajectories.extend(sampled.split(batch, dim=0))
    trajectories = blend_windows(window_trajectories, starts, total_frames, frame_dim=2)
    return clamp_unit(model_to_unit(trajectories))


__all__ = [
    "cached_velocity_fn",
    "recompute_velocity_fn",
    "sample_window",
    "pad_window",
    "generate_trajectories",
]
