"""The causal variant of GazeFlow (paper Appendix F.4; ``../shared/specs/model.md``, "Left open"): ``causal=True``.

The paper's causal model "adds a causal mask to the time-aware self-attention, builds the task-token bank from past
and current frames, and extracts visual features with a causal sliding window". Everything the causal switch
changes lives here or is named from here:

1. **Causal frame self-attention**: ``GazeFlowDenoiserBlock`` runs its frame self-attention with ``is_causal``;
   the gaze token of frame t attends to frames <= t only.
2. **Causal encoder window** (:func:`causal_encoder_windows`, :func:`encode_video_causal`): V-JEPA 2 encodes
   2-frame tubelets, and its attention mixes every tubelet of a clip, so the bidirectional model's tokens for frame
   t depend on the whole window. In the causal model every frame t gets its own tokens: the encoder runs on the
   ``w = causal_encoder_frames`` frames ``t - w + 1 .. t`` (frames before the first one are the first frame repeated)
   and frame t reads the tokens of the window's *last* tubelet, ``(t - 1, t)``. The encoder never sees a frame later
   than t, and each frame's tokens are computed once, so a streamer can cache them. With the default ``w = 2`` the
   encoder reads exactly one tubelet ``(t - 1, t)``; larger ``w`` gives the encoder more past context at ``w / 2``
   times the cost. The encoder tokens are then ``[B, T * N, D]``, one group of N tokens per frame
   (``config.frames_per_encoder_group == 1``).
3. **Causal task bank** (:func:`causal_task_tokens`): a bank per frame, c_task(t) = [p_t; q_1(t)..q_M(t)] with
   p_t the mean of the frame summaries V_bar_0..V_bar_t and the M task queries attending to V_bar_0..V_bar_t only.
   Each frame's gaze tokens read their own frame's bank, like the per-frame visual cross-attention.

Together: the output for frame t is unchanged by any frame later than t (tested through the encoder).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

if TYPE_CHECKING:
    from .modeling_gazeflow import GazeFlowTaskTokenBank, GazeFlowVideoEncoder


def causal_encoder_windows(pixel_values_videos: torch.Tensor, window: int) -> torch.Tensor:
    """The causal window of every frame: ``[B, T, 3, S, S] -> [B * T, window, 3, S, S]``, window t holding frames
    ``t - window + 1 .. t`` (indices below 0 read frame 0)."""
    batch, frames = pixel_values_videos.shape[:2]
    index = torch.arange(frames, device=pixel_values_videos.device)[:, None] + torch.arange(
        1 - window, 1, device=pixel_values_videos.device)[None, :]
    windows = pixel_values_videos[:, index.clamp_min(0)]  # [B, T, window, 3, S, S]
    return windows.reshape(batch * frames, window, *pixel_values_videos.shape[2:])


def encode_video_causal(video_encoder: GazeFlowVideoEncoder, pixel_values_videos: torch.Tensor, window: int,
                        tokens_per_frame: int, frames_per_chunk: int = 64) -> torch.Tensor:
    """Per-frame causal encoder tokens ``[B, T * N, D]``: frame t's N tokens are the last tubelet's tokens of the
    encoder run on frames ``t - window + 1 .. t`` only. Windows are encoded ``frames_per_chunk`` at a time."""
    batch, frames = pixel_values_videos.shape[:2]
    windows = causal_encoder_windows(pixel_values_videos, window)
    tokens = [video_encoder(chunk)[:, -tokens_per_frame:] for chunk in windows.split(frames_per_chunk)]
    tokens = torch.cat(tokens)  # [B * T, N, D]
    return tokens.reshape(batch, frames * tokens_per_frame, tokens.shape[-1])


def encode_frame_causal(video_encoder: GazeFlowVideoEncoder, recent_frames: torch.Tensor, window: int,
                        tokens_per_frame: int) -> torch.Tensor:
    """Encoder tokens ``[B, N, D]`` of the newest frame from its causal window (the streamer's per-frame call).

    ``recent_frames [B, t', 3, S, S]`` are the last ``t' <= window`` frames seen, the newest last; a stream shorter
    than the window is padded with its first frame, as :func:`causal_encoder_windows` does.
    """
    missing = window - recent_frames.shape[1]
    if missing > 0:
        recent_frames = torch.cat([recent_frames[:, :1].expand(-1, missing, *recent_frames.shape[2:]),
                                   recent_frames], dim=1)
    return video_encoder(recent_frames[:, -window:])[:, -tokens_per_frame:]


def causal_task_tokens(bank: GazeFlowTaskTokenBank, frame_summaries: torch.Tensor,
                       last_only: bool = False) -> torch.Tensor:
    """The per-frame task bank ``[B, G, M + 1, d]`` from frame summaries V_bar ``[B, G, d]``: entry g is
    [p_g; q_1(g)..q_M(g)] computed from summaries 0..g only (Eqs. task_slots and task_bank restricted to the past).

    With ``last_only`` only the newest entry ``[B, 1, M + 1, d]`` is computed, from all given summaries (the
    streamer passes the summaries of its window).
    """
    batch, groups, width = frame_summaries.shape
    counts = torch.arange(1, groups + 1, device=frame_summaries.device, dtype=frame_summaries.dtype)
    if last_only:
        pooled = frame_summaries.mean(dim=1, keepdim=True)  # [B, 1, d]
    else:
        pooled = frame_summaries.cumsum(dim=1) / counts[:, None]  # p_g: running mean
    pooled = pooled.unsqueeze(2)
    if bank.num_queries == 0:
        return pooled
    attention, num_queries = bank.attention, bank.num_queries
    query = attention.project_query(bank.queries.to(frame_summaries.dtype))  # [H, M, d_h]
    key, value = attention.project_key_value(frame_summaries)  # [B, H, G, d_h]
    rows = 1 if last_only else groups
    query = query.unsqueeze(0).repeat(1, 1, rows, 1).expand(batch, -1, -1, -1)  # [B, H, rows * M, d_h]
    if last_only:
        context = F.scaled_dot_product_attention(query, key, value)
    else:
        query_group = torch.arange(groups, device=frame_summaries.device).repeat_interleave(num_queries)
        allowed = torch.arange(groups, device=frame_summaries.device)[None, :] <= query_group[:, None]
        context = F.scaled_dot_product_attention(query, key, value, attn_mask=allowed)
    task_queries = attention.o_proj(attention.merge_heads(context)).view(batch, rows, num_queries, width)
    return torch.cat([pooled, task_queries], dim=2)


__all__ = ["causal_encoder_windows", "encode_video_causal", "encode_frame_causal", "causal_task_tokens"]
