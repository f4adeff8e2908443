"""The architectural ablation switches of the velocity network, one named module each (paper Sections 4.4-4.5).

The paper's model runs through none of this file: its frame position is RoPE (``GazeFlowRotaryEmbedding`` in
``modeling_gazeflow_embeddings``) and its task bank enters through the gated task cross-attention of every block.

* ``position_encoding="learned"`` -> :class:`GazeFlowLearnedFramePosition`: a learned absolute table ``[W, d]``
  added to the gaze tokens instead of RoPE (Table pe_compare). ``"none"`` (the "- Temporal RoPE" row of Table
  ablation) builds neither, which makes the self-attention permutation-equivariant over frames.
* ``task_guidance="concat"`` -> :class:`GazeFlowTaskConcat`: the task bank c_task enters once, concatenated
  channel-wise to every gaze token's input and projected back to d (Table pe_compare, "Concat").
* ``use_visual_cross_attention`` / ``use_task_cross_attention``: whether ``GazeFlowDenoiserBlock`` builds its
  sub-layers (2) and (3) (``modeling_gazeflow_layers``), and whether the condition carries their keys/values.
* ``num_task_queries`` (M; 0 keeps only the pooled token p): ``GazeFlowTaskTokenBank``.
* ``objective``: ``modeling_gazeflow_objectives``; ``causal``: ``modeling_gazeflow_causal``.
"""

from __future__ import annotations

import torch
from torch import nn

from .configuration_gazeflow import GazeFlowConfig


class GazeFlowLearnedFramePosition(nn.Module):
    """``position_encoding="learned"``: a learned absolute position table ``[W, d]`` added to the gaze tokens.

    ``positions`` are frame indices inside the window (``0 .. T - 1`` for a whole window; the streamer passes the
    index of the newest frame, at most ``W - 1``).
    """

    def __init__(self, config: GazeFlowConfig):
        super().__init__()
        self.embedding = nn.Parameter(torch.zeros(config.num_frames, config.hidden_size))
        self.max_positions = config.num_frames

    def forward(self, hidden_states: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """``hidden_states [..., T, d]`` plus the table's rows at ``positions`` ``[T]``."""
        return hidden_states + self.embedding[positions].to(hidden_states.dtype)

    def check_last_position(self, last_position: int) -> None:
        """A frame index past the table is an error naming the table's size."""
        if last_position >= self.max_positions:
            raise ValueError(
                f"position_encoding='learned' has a table of num_frames={self.max_positions} rows; "
                f"frame index {last_position} is out of range (use windows of at most "
                f"{self.max_positions} frames)"
            )


class GazeFlowTaskConcat(nn.Module):
    """``task_guidance="concat"``: h_t <- Linear([h_t ; vec(c_task)]), d + (M + 1) d -> d, on the gaze-token input.

    c_task is ``[B, M + 1, d]`` (one bank per clip) or ``[B, G, M + 1, d]`` (the causal per-frame bank, one per
    group of ``frames_per_group`` frames).
    """

    def __init__(self, config: GazeFlowConfig):
        super().__init__()
        bank_width = (config.num_task_queries + 1) * config.hidden_size
        self.projection = nn.Linear(config.hidden_size + bank_width, config.hidden_size)

    def forward(self, hidden_states: torch.Tensor, task_tokens: torch.Tensor, frames_per_group: int) -> torch.Tensor:
        batch, samples, frames, _ = hidden_states.shape
        if task_tokens.dim() == 3:  # one bank per clip: the same vector for every frame
            bank = task_tokens.flatten(1).view(batch, 1, 1, -1).expand(batch, samples, frames, -1)
        else:  # a bank per group of frames
            bank = task_tokens.flatten(2).repeat_interleave(frames_per_group, dim=1)
            bank = bank.unsqueeze(1).expand(batch, samples, frames, -1)
        return self.projection(torch.cat([hidden_states, bank.to(hidden_states.dtype)], dim=-1))


__all__ = ["GazeFlowLearnedFramePosition", "GazeFlowTaskConcat"]
