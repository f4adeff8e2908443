"""The layers of GazeFlow's velocity network (paper Appendix C.3) and the feed-forward layer of its encoders.

* :class:`GazeFlowMLP` - the position-wise feed-forward layer (GELU) of the DenoiserBlock and the spatial encoder;
* :class:`GazeFlowDenoiserBlock` - the four pre-norm residual sub-layers of Appendix C.3 (Eqs. sa_out, ca_out,
  task_xattn), a ``GradientCheckpointingLayer`` whose tensors are all positional arguments.

The attention they run is ``modeling_gazeflow_attention``'s; the rotary tables come from
``modeling_gazeflow_embeddings``.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.modeling_layers import GradientCheckpointingLayer

from .configuration_gazeflow import GazeFlowConfig
from .modeling_gazeflow_attention import GazeFlowAttention, GazeFlowKeyValueCache
from .modeling_gazeflow_rows import layer_norm_rows, linear_rows


class GazeFlowMLP(nn.Module):
    """Position-wise feed-forward layer d -> intermediate -> d with GELU."""

    def __init__(self, hidden_size: int, intermediate_size: int):
        super().__init__()
        self.fc1 = nn.Linear(hidden_size, intermediate_size)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(intermediate_size, hidden_size)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """``[..., d] -> [..., d]``, each Linear one matmul on the rows."""
        rows = hidden_states if hidden_states.dim() == 2 else hidden_states.reshape(-1, hidden_states.shape[-1])
        rows = linear_rows(self, (self.fc2,), self.act(linear_rows(self, (self.fc1,), rows)))
        return rows if hidden_states.dim() == 2 else rows.view(hidden_states.shape)


def _group_major(rows: torch.Tensor, shape: tuple[int, int, int], groups: int) -> torch.Tensor:
    """Gaze-token rows ``[B K T, d]`` (sample by sample, ``shape`` = (B, K, T)) -> ``[B * G, g * K, d]`` (one copy):
    the g frames x K samples of a group become one block of rows that reads the group's keys (T = G * g)."""
    batch, samples, frames = shape
    grouped = rows.view(batch, samples, groups, frames // groups, -1).permute(0, 2, 3, 1, 4)
    return grouped.reshape(batch * groups, frames // groups * samples, -1)


def _from_group_major(rows: torch.Tensor, shape: tuple[int, int, int], groups: int) -> torch.Tensor:
    """Rows in :func:`_group_major`'s order ``[B G g K, d]`` as gaze tokens ``[B, K, G, g, d]`` (a view, no copy),
    to be added to rows viewed the same way."""
    batch, samples, frames = shape
    return rows.view(batch, groups, frames // groups, samples, -1).permute(0, 3, 1, 2, 4)


def _merge_batch_and_groups(states: torch.Tensor) -> torch.Tensor:
    """Per-group keys or values ``[B, G, H, S, d_h]`` -> ``[B * G, H, S, d_h]`` (a view when the strides allow)."""
    if states.stride(0) == states.shape[1] * states.stride(1):
        return states.view(-1, *states.shape[2:])
    return states.flatten(0, 1)


def _per_group_weights_to_frames(weights: torch.Tensor, batch: int, samples: int) -> torch.Tensor:
    """Per-group attention weights ``[B * G, H, g * K, S]`` -> ``[B, K, H, T, S]`` (row t: frame t's query)."""
    groups = weights.shape[0] // batch
    heads, rows, keys = weights.shape[1:]
    weights = weights.view(batch, groups, heads, rows // samples, samples, keys)
    return weights.permute(0, 4, 2, 1, 3, 5).reshape(batch, samples, heads, groups * rows // samples, keys)


class GazeFlowDenoiserBlock(GradientCheckpointingLayer):
    """One DenoiserBlock: four pre-norm residual sub-layers on the gaze tokens h (paper Appendix C.3).

    1. frame-to-frame self-attention with RoPE on q and k (Eq. sa_out); causal mask in the causal variant (F.4);
    2. per-frame visual cross-attention: token h_t reads only frame t's N spatial tokens V_t, no gate (Eq. ca_out);
       built only with ``use_visual_cross_attention`` (the bottom-up ablation switch lives here);
    3. task cross-attention to c_task, scaled by the channel-wise gate sigma(g^(l)) (Eq. task_xattn); built only
       when ``use_task_cross_attention`` and ``task_guidance == "cross_attention"``;
    4. feed-forward.

    Gaze tokens come as ``[B, K, T, d]``: B clips, K trajectories per clip, T frames. The visual keys/values are
    stored per *group* of frames that share the same encoder tokens (``frames_per_group`` consecutive frames: a
    V-JEPA 2 tubelet, since frame t reads tubelet floor(t / 2); one frame in the causal variant),
    ``[B, G, H, N, d_h]`` with ``G = T / frames_per_group``; the task keys/values are ``[B, H, M + 1, d_h]`` (one
    bank per clip) or, for the causal per-frame bank, ``[B, G, H, M + 1, d_h]`` read per group like the visual
    ones. Neither is ever copied K times: queries are laid out so that every sample of a clip attends to the same
    keys in one attention call.

    Every tensor is a positional argument, so that reentrant gradient checkpointing sees (and returns gradients
    for) the condition's keys/values too. Returns ``(h, self_attention, visual_cross_attention,
    task_cross_attention)``: with ``output_attentions`` the weights ``[B * K, H, T, S]`` (row ``b * K + k`` for
    sample k of clip b; S = T, N, M + 1; the self-attention's is the very tensor the kernel used), else None.

    Twin of ``modeling_gazeflow_streaming.GazeFlowStreamingBlock``: change both; held equal by
    ``tests/test_causal_streaming.py::test_streamer_equals_the_causal_model_on_every_prefix``.
    """

    def __init__(self, config: GazeFlowConfig):
        super().__init__()
        d = config.hidden_size
        self.self_attention_norm = nn.LayerNorm(d, eps=config.layer_norm_eps)
        self.self_attention = GazeFlowAttention(config)
        self.visual_attention = self.task_attention = None
        if config.use_visual_cross_attention:
            self.visual_attention_norm = nn.LayerNorm(d, eps=config.layer_norm_eps)
            self.visual_attention = GazeFlowAttention(config)
        if config.uses_task_cross_attention_layers:
            self.task_attention_norm = nn.LayerNorm(d, eps=config.layer_norm_eps)
            self.task_attention = GazeFlowAttention(config)
            self.task_gate = nn.Parameter(torch.full((d,), float(config.task_gate_init)))
        self.mlp_norm = nn.LayerNorm(d, eps=config.layer_norm_eps)
        self.mlp = GazeFlowMLP(d, config.intermediate_size)

    def forward(
        self,
        hidden_states: torch.Tensor,
        visual_key: torch.Tensor | None,
        visual_value: torch.Tensor | None,
        task_key: torch.Tensor | None,
        task_value: torch.Tensor | None,
        rotary_cos: torch.Tensor | None = None,
        rotary_sin: torch.Tensor | None = None,
        self_attention_mask: torch.Tensor | None = None,
        cache: GazeFlowKeyValueCache | None = None,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
        batch, samples, frames, width = hidden_states.shape
        # sample by sample, frame by frame: every Linear is one addmm
        rows = hidden_states.view(-1, width) if hidden_states.is_contiguous() else hidden_states.reshape(-1, width)
        rotary = None
        if rotary_cos is not None:
            rotary = (
                (rotary_cos, rotary_sin)
                if rotary_cos.dtype == rows.dtype
                else (rotary_cos.to(rows.dtype), rotary_sin.to(rows.dtype))
            )
        visual_weights = task_weights = None

        # (1) time-aware self-attention over the T frames of each trajectory, RoPE on q and k
        normed = layer_norm_rows(self.self_attention_norm, rows)
        update, self_weights = self.self_attention.self_attention_rows(
            normed, batch * samples, rotary, self_attention_mask, cache, output_attentions
        )
        rows = rows + update

        # (2) per-frame visual cross-attention: the g frames of a group x K samples query that group's N tokens
        if self.visual_attention is not None:
            update, visual_weights = self._per_group_cross_attention(
                self.visual_attention,
                layer_norm_rows(self.visual_attention_norm, rows),
                (batch, samples, frames),
                visual_key,
                visual_value,
                output_attentions,
            )
            rows = (rows.view(update.shape) + update).view(-1, width)

        # (3) gated task cross-attention: all K x T tokens of a clip query its M + 1 task tokens (the causal
        #     variant: the tokens of frame t query frame t's own bank)
        if self.task_attention is not None:
            update, task_weights = self._task_cross_attention(
                layer_norm_rows(self.task_attention_norm, rows),
                (batch, samples, frames),
                task_key,
                task_value,
                output_attentions,
            )
            gate = torch.sigmoid(self.task_gate)
            gate = gate if gate.dtype == update.dtype else gate.to(update.dtype)
            if update.dim() == 2:  # a bank per clip: the rows' own order
                rows = rows + gate * update
            else:  # per group: as the visual update
                rows = (rows.view(update.shape) + gate * update).view(-1, width)

        # (4) feed-forward
        rows = rows + self.mlp(layer_norm_rows(self.mlp_norm, rows))
        return rows.view(batch, samples, frames, width), self_weights, visual_weights, task_weights

    def _task_cross_attention(
        self,
        normed_rows: torch.Tensor,
        shape: tuple[int, int, int],
        key: torch.Tensor,
        value: torch.Tensor,
        output_attentions: bool,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The task cross-attention's update (rows ``[B K T, d]`` for a bank per clip, ``[B, K, G, g, d]`` for a bank
        per group of frames) and its weights ``[B * K, H, T, M + 1]`` (or None)."""
        attention = self.task_attention
        if key.dim() == 5:  # a bank per group of frames
            return self._per_group_cross_attention(attention, normed_rows, shape, key, value, output_attentions)
        batch, samples, frames = shape
        query = linear_rows(attention, (attention.q_proj,), normed_rows)
        query = query.view(batch, samples * frames, attention.num_heads, attention.head_dim).transpose(1, 2)
        context, weights = attention.attention(query, key, value, output_attentions=output_attentions)
        if weights is not None:  # [B, H, K * T, M + 1] -> [B * K, H, T, M + 1]
            weights = weights.unflatten(2, (samples, frames)).transpose(1, 2).flatten(0, 1)
        return attention.output_rows(context), weights

    @staticmethod
    def _per_group_cross_attention(
        attention: GazeFlowAttention,
        normed_rows: torch.Tensor,
        shape: tuple[int, int, int],
        key: torch.Tensor,
        value: torch.Tensor,
        output_attentions: bool,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Cross-attention of the gaze tokens' rows (``shape`` = (B, K, T)) to per-group keys/values
        ``[B, G, H, S, d_h]``; returns the update ``[B, K, G, g, d]`` (a view) and the weights ``[B * K, H, T, S]``
        (or None)."""
        batch, samples, frames = shape
        groups = key.shape[1]
        query = _group_major(linear_rows(attention, (attention.q_proj,), normed_rows), shape, groups)
        query = query.view(*query.shape[:2], attention.num_heads, attention.head_dim).transpose(1, 2)
        context, weights = attention.attention(
            query, _merge_batch_and_groups(key), _merge_batch_and_groups(value), output_attentions=output_attentions
        )
        update = _from_group_major(attention.output_rows(context), shape, groups)
        if weights is not None:
            weights = _per_group_weights_to_frames(weights, batch, samples).flatten(0, 1)
        return update, weights


__all__ = ["GazeFlowMLP", "GazeFlowDenoiserBlock"]
