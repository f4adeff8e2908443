"""The causal variant of GazeFlow (paper Appendix F.4, with our reading of what it leaves open): ``causal=True``.

The paper's causal model "adds a causal mask to the time-aware self-attention, builds the task-token bank from past
and current frames, and extracts visual features with a causal sliding window". Everything the causal switch
changes lives here or is named from here:

1. **Causal frame self-attention**: ``GazeFlowVelocityNetwork`` gives every block's frame self-attention the mask
   ``modeling_gazeflow_attention.causal_attention_mask``: the gaze token of frame t attends to frames <= t only.
2. **Causal encoder window** (:func:`causal_encoder_windows`, :func:`encode_video_causal`): V-JEPA 2 encodes
   2-frame tubelets, and its attention mixes every tubelet of a clip, so the bidirectional model's tokens for frame
   t depend on the whole window. In the causal model every frame t gets its own tokens: the encoder runs on the
   ``w = causal_encoder_frames`` frames ``t - w + 1 .. t`` (frames before the first one are the first frame repeated)
   and frame t reads the tokens of the window's *last* tubelet, ``(t - 1, t)``. The encoder never sees a frame later
   than t, and each frame's tokens are computed once, so a streamer can cache them. With the default ``w = 2`` the
   encoder reads exactly one tubelet ``(t - 1, t)``; larger ``w`` gives the encoder more past context at ``w / 2``
   times the cost. The encoder tokens are then ``[B, T * N, D]``, one group of N tokens per frame
   (``config.frames_per_encoder_group == 1``).
3. **Causal task bank** (:func:`causal_task_bank`): a bank per frame, c_task(t) = [p_t; q_1(t)..q_M(t)] with
   p_t the mean of the frame summaries V_bar_0..V_bar_t and the M task queries attending to V_bar_0..V_bar_t only.
   Each frame's gaze tokens read their own frame's bank, like the per-frame visual cross-attention.

Together: the output for frame t is unchanged by any frame later than t (tested through the encoder).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from transformers.modeling_outputs import BaseModelOutput

VideoEncoder = Callable[..., "torch.Tensor | BaseModelOutput"]
"""A video encoder (``GazeFlowVideoEncoder``): frames ``[B, t, 3, S, S]`` -> tokens ``[B, (t / tubelet) * N, D]``,
or a ``BaseModelOutput`` when called with ``output_attentions`` / ``output_hidden_states``."""


def causal_encoder_windows(pixel_values_videos: torch.Tensor, window: int) -> torch.Tensor:
    """The causal window of every frame: ``[B, T, 3, S, S] -> [B * T, window, 3, S, S]``, window t holding frames
    ``t - window + 1 .. t`` (indices below 0 read frame 0).

    Twin of ``streaming_step.GazeFlowStreamerStep.encode_frame``: change both; held equal by
    ``tests/test_causal_streaming.py::test_streamer_equals_the_causal_model_on_every_prefix``.
    """
    batch, frames = pixel_values_videos.shape[:2]
    index = (
        torch.arange(frames, device=pixel_values_videos.device)[:, None]
        + torch.arange(1 - window, 1, device=pixel_values_videos.device)[None, :]
    )
    windows = pixel_values_videos[:, index.clamp_min(0)]  # [B, T, window, 3, S, S]
    return windows.reshape(batch * frames, window, *pixel_values_videos.shape[2:])


def encode_video_causal(
    video_encoder: VideoEncoder,
    pixel_values_videos: torch.Tensor,
    window: int,
    tokens_per_frame: int,
    frames_per_chunk: int = 64,
    output_attentions: bool = False,
    output_hidden_states: bool = False,
) -> torch.Tensor | BaseModelOutput:
    """Per-frame causal encoder tokens ``[B, T * N, D]``: frame t's N tokens are the last tubelet's tokens of the
    encoder run on frames ``t - window + 1 .. t`` only. Windows are encoded ``frames_per_chunk`` at a time.

    With ``output_attentions`` / ``output_hidden_states`` returns a ``BaseModelOutput`` whose per-layer entries are
    those of the B * T causal windows, ``[B * T, (window / tubelet) * N, D]`` and ``[B * T, H, L, L]``.
    """
    batch, frames = pixel_values_videos.shape[:2]
    windows = causal_encoder_windows(pixel_values_videos, window)
    flags = dict(output_attentions=output_attentions, output_hidden_states=output_hidden_states)
    outputs = [video_encoder(chunk, **flags) for chunk in windows.split(frames_per_chunk)]
    if not (output_attentions or output_hidden_states):
        outputs = [BaseModelOutput(last_hidden_state=tokens) for tokens in outputs]
    tokens = torch.cat([out.last_hidden_state[:, -tokens_per_frame:] for out in outputs])  # [B * T, N, D]
    tokens = tokens.reshape(batch, frames * tokens_per_frame, tokens.shape[-1])
    if not (output_attentions or output_hidden_states):
        return tokens

    def per_layer(name: str) -> tuple[torch.Tensor, ...] | None:
        if getattr(outputs[0], name) is None:
            return None
        return tuple(
            torch.cat(layer) if layer[0] is not None else None
            for layer in zip(*(getattr(out, name) for out in outputs))
        )

    return BaseModelOutput(
        last_hidden_state=tokens, hidden_states=per_layer("hidden_states"), attentions=per_layer("attentions")
    )


def encode_frame_causal(
    video_encoder: VideoEncoder, recent_frames: torch.Tensor, window: int, tokens_per_frame: int
) -> torch.Tensor:
    """Encoder tokens ``[B, N, D]`` of the newest frame from its causal window (the streamer's per-frame call).

    ``recent_frames [B, t', 3, S, S]`` are the last ``t' <= window`` frames seen, the newest last; a stream shorter
    than the window is padded with its first frame, as :func:`causal_encoder_windows` does.
    """
    missing = window - recent_frames.shape[1]
    if missing > 0:
        recent_frames = torch.cat(
            [recent_frames[:, :1].expand(-1, missing, *recent_frames.shape[2:]), recent_frames], dim=1
        )
    return video_encoder(recent_frames[:, -window:])[:, -tokens_per_frame:]


def causal_task_bank(
    bank: nn.Module, frame_summaries: torch.Tensor, last_only: bool = False, output_attentions: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The per-frame task bank ``[B, G, M + 1, d]`` of a ``GazeFlowTaskTokenBank`` from frame summaries V_bar
    ``[B, G, d]``: entry g is [p_g; q_1(g)..q_M(g)] computed from summaries 0..g only (Eqs. task_slots and
    task_bank restricted to the past; the restriction is an attention mask, so every attention kernel applies it).

    With ``last_only`` only the newest entry ``[B, 1, M + 1, d]`` is computed, from all given summaries: the
    windowed bank's computation (``GazeFlowTaskTokenBank.over_summaries``; a reference streamer passes the summaries
    of its window). With ``output_attentions`` also returns the queries' weights over the summaries,
    ``[B, H, rows * M, G]`` (rows = G, or 1 with ``last_only``; row ``g * M + m`` is query m of group g; masked
    entries are 0).

    Twin of ``modeling_gazeflow_streaming.GazeFlowStreamingCondition.task_bank``: change both; held equal by
    ``tests/test_causal_streaming.py::test_streamer_equals_the_causal_model_on_every_prefix``.
    Twin of ``modeling_gazeflow_encoder.GazeFlowTaskTokenBank.over_summaries``: change both; held equal by
    ``tests/test_causal_streaming.py::test_causal_task_bank_row_t_uses_frames_up_to_t_only``.
    """
    if last_only:  # the newest entry reads every summary: the windowed bank's computation
        task_tokens, weights = bank.over_summaries(frame_summaries, output_attentions)
        return task_tokens.unsqueeze(1), weights
    batch, groups, width = frame_summaries.shape
    counts = torch.arange(1, groups + 1, device=frame_summaries.device, dtype=frame_summaries.dtype)
    pooled = (frame_summaries.cumsum(dim=1) / counts[:, None]).unsqueeze(2)  # p_g: running mean, [B, G, 1, d]
    if bank.num_queries == 0:
        return pooled, None
    attention, num_queries = bank.attention, bank.num_queries
    query = attention.project_query(bank.queries.to(frame_summaries.dtype))  # [H, M, d_h]
    key, value = attention.project_key_value(frame_summaries)  # [B, H, G, d_h]
    query = query.unsqueeze(0).repeat(1, 1, groups, 1).expand(batch, -1, -1, -1)  # [B, H, G * M, d_h]
    query_group = torch.arange(groups, device=frame_summaries.device).repeat_interleave(num_queries)
    allowed = torch.arange(groups, device=frame_summaries.device)[None, :] <= query_group[:, None]
    output, weights = attention.attend(query, key, value, allowed[None, None], output_attentions)
    task_queries = output.view(batch, groups, num_queries, width)
    return torch.cat([pooled, task_queries], dim=2), weights


def causal_task_tokens(bank: nn.Module, frame_summaries: torch.Tensor, last_only: bool = False) -> torch.Tensor:
    """The per-frame task bank ``[B, G, M + 1, d]`` (or ``[B, 1, M + 1, d]`` with ``last_only``) of
    :func:`causal_task_bank`, without the attention weights."""
    return causal_task_bank(bank, frame_summaries, last_only)[0]


__all__ = [
    "causal_encoder_windows",
    "encode_video_causal",
    "encode_frame_causal",
    "causal_task_bank",
    "causal_task_tokens",
]
