"""The architectural ablation switches of the velocity network, one named module each (paper Sections 4.4-4.5).

* ``position_encoding`` -> :class:`GazeFlowFramePosition`: how a gaze token knows its frame index in the
  frame-to-frame self-attention. ``"rope"`` (default, Appendix C.2) rotates q and k by the frame index, so logits
  depend on frame offsets only; ``"learned"`` adds a learned absolute table ``[W, d]`` to the gaze tokens (Table
  pe_compare); ``"none"`` gives no position at all (the "- Temporal RoPE" row of Table ablation), which makes the
  self-attention permutation-equivariant over frames.
* ``task_guidance`` -> :class:`GazeFlowTaskConcat`: with ``"concat"`` the task bank c_task enters once, concatenated
  channel-wise to every gaze token's input and projected back to d (Table pe_compare, "Concat"); with
  ``"cross_attention"`` (default) it enters in every block through the gated task cross-attention.
* ``use_visual_cross_attention`` / ``use_task_cross_attention``: whether :class:`GazeFlowDenoiserBlock` builds its
  sub-layers (2) and (3) (``modeling_gazeflow_layers``), and whether the condition carries their keys/values.
* ``num_task_queries`` (M; 0 keeps only the pooled token p): ``GazeFlowTaskTokenBank``.
* ``objective``: ``modeling_gazeflow_objectives``; ``causal``: ``modeling_gazeflow_causal``.
"""

from __future__ import annotations

import torch
from torch import nn

from .configuration_gazeflow import GazeFlowConfig
from .modeling_gazeflow_layers import GazeFlowRotaryEmbedding


class GazeFlowFramePosition(nn.Module):
    """Frame position of the gaze tokens: RoPE angles for q/k, a learned absolute table, or nothing.

    ``positions`` are frame indices inside the window (``0 .. T - 1`` for a whole window; the streamer passes the
    index of the newest frame).
    """

    def __init__(self, config: GazeFlowConfig):
        super().__init__()
        self.mode = config.position_encoding
        self.rotary = GazeFlowRotaryEmbedding(config.head_dim, config.rope_theta) if self.mode == "rope" else None
        if self.mode == "learned":
            self.embedding = nn.Parameter(torch.zeros(config.num_frames, config.hidden_size))
            self.max_positions = config.num_frames

    def rotary_angles(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        """RoPE cosines and sines ``[len(positions), d_h]`` (``"rope"``), else None."""
        return self.rotary.at(positions) if self.rotary is not None else None

    def add_absolute(self, hidden_states: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """``hidden_states [..., T, d]`` plus the learned table's rows at ``positions`` (``"learned"``), else as is."""
        if self.mode != "learned":
            return hidden_states
        if positions.shape[0] > self.max_positions:  # the shape, not positions.max(): no wait for the device
            raise ValueError(f"position_encoding='learned' has a table of num_frames={self.max_positions} rows; "
                             f"a window of {positions.shape[0]} frames is out of range (use windows of at most "
                             f"{self.max_positions} frames)")
        return hidden_states + self.embedding[positions].to(hidden_states.dtype)


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


__all__ = ["GazeFlowFramePosition", "GazeFlowTaskConcat"]
