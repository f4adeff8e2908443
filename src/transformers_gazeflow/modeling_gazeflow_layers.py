"""Building blocks of the GazeFlow velocity network and condition encoder (paper Appendix C).

Small named modules, each implementing one piece of the paper:

* :func:`sinusoidal_embedding` - the sinusoidal features under the timestep, coordinate and self-conditioning
  embeddings (our reading of what Section 3.2 leaves open, ``../shared/specs/model.md``).
* :func:`sincos_2d_position_encoding` - the 2D sinusoidal spatial position encoding (Appendix C.1).
* :class:`GazeFlowRotaryEmbedding` - 1D RoPE over the frame index, base theta (Appendix C.2).
* :class:`GazeFlowAttention` - multi-head attention with separate Q/K/V/O projections and SDPA; keys/values can
  be projected once and reused (the per-clip condition cache).
* :class:`GazeFlowSpatialEncoderLayer` - a pre-norm Transformer layer over one frame's N spatial tokens (C.1).
* :class:`GazeFlowDenoiserBlock` - the four pre-norm residual sub-layers of Appendix C.3.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from transformers.modeling_layers import GradientCheckpointingLayer

from .configuration_gazeflow import GazeFlowConfig

TIME_EMBEDDING_SCALE = 1000.0
"""The flow time s in [0, 1] is embedded as DiT embeds its timestep t = 1000 s."""

COORDINATE_EMBEDDING_SCALE = 100.0
"""Coordinates in [-1, 1] (x_s and x1_hat) get frequencies up to 100 rad per unit: fine enough for a pixel of a
640 px frame after the MLP, while keeping the embedding smooth (its Lipschitz constant bounds how much a small
change of x_s, e.g. an ODE solver's error, can change v_theta)."""


def sinusoidal_embedding(values: torch.Tensor, dim: int, scale: float, max_period: float = 10000.0) -> torch.Tensor:
    """Sinusoidal features ``[cos(scale v w_j), sin(scale v w_j)]``, ``w_j = max_period^(-j / (dim / 2))``.

    ``values`` of shape ``[...]`` give features ``[..., dim]``.
    """
    half = dim // 2
    exponent = torch.arange(half, dtype=torch.float32, device=values.device) / half
    frequencies = torch.exp(-math.log(max_period) * exponent)
    angles = values.float().unsqueeze(-1) * scale * frequencies
    return torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1)


def sincos_2d_position_encoding(grid_size: int, dim: int) -> torch.Tensor:
    """2D sin-cos position encoding of a ``grid_size x grid_size`` token grid, ``[grid_size**2, dim]`` (App. C.1).

    Half of the channels encode the row, half the column, each with sin and cos at ``dim / 4`` frequencies
    ``10000^(-i / (dim / 4))`` (the MAE / ViT convention). Tokens are in row-major order, as V-JEPA 2 emits them.
    """
    quarter = dim // 4
    omega = 1.0 / 10000 ** (torch.arange(quarter, dtype=torch.float64) / quarter)
    rows, cols = torch.meshgrid(torch.arange(grid_size, dtype=torch.float64),
                                torch.arange(grid_size, dtype=torch.float64), indexing="ij")
    row_angles = rows.reshape(-1, 1) * omega
    col_angles = cols.reshape(-1, 1) * omega
    encoding = torch.cat([row_angles.sin(), row_angles.cos(), col_angles.sin(), col_angles.cos()], dim=1)
    return encoding.float()


class GazeFlowSinusoidalMLP(nn.Module):
    """Sinusoidal features followed by a 2-layer MLP (Linear -> SiLU -> Linear) to width d.

    Used for the flow time s (per trajectory), the gaze coordinates x_s and the self-conditioning input x1_hat
    (per frame, each of the two coordinates getting d/2 features).
    """

    def __init__(self, num_inputs: int, hidden_size: int, scale: float):
        super().__init__()
        self.num_inputs = num_inputs
        self.scale = scale
        self.feature_size = hidden_size
        self.linear_in = nn.Linear(hidden_size, hidden_size)
        self.act = nn.SiLU()
        self.linear_out = nn.Linear(hidden_size, hidden_size)

    def forward(self, values: torch.Tensor) -> torch.Tensor:
        if self.num_inputs == 1:
            features = sinusoidal_embedding(values, self.feature_size, self.scale)
        else:
            per_input = self.feature_size // self.num_inputs
            features = torch.cat([sinusoidal_embedding(values[..., i], per_input, self.scale)
                                  for i in range(self.num_inputs)], dim=-1)
        features = features.to(self.linear_in.weight.dtype)
        return self.linear_out(self.act(self.linear_in(features)))


class GazeFlowRotaryEmbedding(nn.Module):
    """1D rotary position embedding over the frame index p (paper Appendix C.2).

    Each query/key pair ``(q_2j, q_2j+1)`` is rotated by ``phi_{p,j} = p * theta^(-2j / d_h)``; values are not
    rotated, so the attention logit depends only on the frame offset ``p - p'``.
    """

    def __init__(self, head_dim: int, theta: float):
        super().__init__()
        self.head_dim, self.theta = head_dim, theta
        self.register_buffer("inv_freq", self.compute_inv_freq(), persistent=False)

    def compute_inv_freq(self) -> torch.Tensor:
        """theta^(-2j / d_h) for j = 0 .. d_h / 2 - 1 (recomputed by ``_init_weights`` after loading)."""
        return self.theta ** (-torch.arange(0, self.head_dim, 2, dtype=torch.float32) / self.head_dim)

    def forward(self, num_positions: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """Cosines and sines ``[num_positions, head_dim]``, each angle repeated for the two channels of a pair."""
        return self.at(torch.arange(num_positions, device=device))

    def at(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Cosines and sines ``[len(positions), head_dim]`` at the given frame indices."""
        angles = positions.float()[:, None] * self.inv_freq.to(positions.device)[None, :]
        angles = angles.repeat_interleave(2, dim=-1)
        return angles.cos(), angles.sin()


def apply_rotary(states: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate the interleaved channel pairs of ``states [..., T, d_h]`` by the RoPE angles (Appendix C.2)."""
    pairs = states.unflatten(-1, (-1, 2))
    rotated = torch.stack((-pairs[..., 1], pairs[..., 0]), dim=-1).flatten(-2)
    return states * cos.to(states.dtype) + rotated * sin.to(states.dtype)


class GazeFlowAttention(nn.Module):
    """Multi-head attention (``H`` heads of ``d_h = d / H``) with layer-specific Q/K/V/O projections, via SDPA.

    Keys and values are produced by :meth:`project_key_value` and passed to :meth:`forward` already split into
    heads, so that the keys/values of a condition can be computed once per clip and shared across samples/steps.
    """

    def __init__(self, hidden_size: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = hidden_size // num_heads
        self.q_proj = nn.Linear(hidden_size, hidden_size)
        self.k_proj = nn.Linear(hidden_size, hidden_size)
        self.v_proj = nn.Linear(hidden_size, hidden_size)
        self.o_proj = nn.Linear(hidden_size, hidden_size)

    def split_heads(self, states: torch.Tensor) -> torch.Tensor:
        """``[..., L, d] -> [..., H, L, d_h]``."""
        return states.unflatten(-1, (self.num_heads, self.head_dim)).transpose(-3, -2)

    @staticmethod
    def merge_heads(states: torch.Tensor) -> torch.Tensor:
        """``[..., H, L, d_h] -> [..., L, d]``."""
        return states.transpose(-3, -2).flatten(-2)

    def project_key_value(self, context: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values of ``context [..., L, d]``, each ``[..., H, L, d_h]``."""
        return self.split_heads(self.k_proj(context)), self.split_heads(self.v_proj(context))

    def project_query(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.split_heads(self.q_proj(hidden_states))

    def attend(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
               is_causal: bool = False) -> torch.Tensor:
        """SDPA over heads-split tensors ``[B, H, L, d_h]``, then the output projection; returns ``[B, L, d]``."""
        context = F.scaled_dot_product_attention(query, key, value, is_causal=is_causal)
        return self.o_proj(self.merge_heads(context))

    def self_attention(self, hidden_states: torch.Tensor, rotary: tuple[torch.Tensor, torch.Tensor] | None = None,
                       is_causal: bool = False, cache: "GazeFlowKeyValueCache | None" = None) -> torch.Tensor:
        """Self-attention over ``hidden_states [B, L, d]``, with RoPE on queries and keys when ``rotary`` is given.

        With a ``cache`` (streaming), ``hidden_states`` are the newest frames only: their rotated keys and values
        are appended to the cache and the queries attend to every cached frame (all of them are in the past, so
        no mask is needed).
        """
        query = self.project_query(hidden_states)
        key, value = self.project_key_value(hidden_states)
        if rotary is not None:
            query, key = apply_rotary(query, *rotary), apply_rotary(key, *rotary)
        if cache is not None:
            key, value = cache.update(key, value)
            return self.attend(query, key, value)
        return self.attend(query, key, value, is_causal=is_causal)


class GazeFlowKeyValueCache:
    """Keys/values ``[B, H, L, d_h]`` of past frames for one self-attention, kept for at most ``max_length`` frames
    (the window W: older frames drop out, so the per-frame work is bounded)."""

    def __init__(self, max_length: int):
        self.max_length = max_length
        self.key: torch.Tensor | None = None
        self.value: torch.Tensor | None = None

    def update(self, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.key is not None:
            key, value = torch.cat([self.key, key], dim=-2), torch.cat([self.value, value], dim=-2)
        self.key, self.value = key[..., -self.max_length:, :], value[..., -self.max_length:, :]
        return self.key, self.value

    @property
    def length(self) -> int:
        return 0 if self.key is None else self.key.shape[-2]


class GazeFlowMLP(nn.Module):
    """Position-wise feed-forward layer d -> intermediate -> d with GELU."""

    def __init__(self, hidden_size: int, intermediate_size: int):
        super().__init__()
        self.fc1 = nn.Linear(hidden_size, intermediate_size)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(intermediate_size, hidden_size)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(hidden_states)))


class GazeFlowSpatialEncoderLayer(GradientCheckpointingLayer):
    """One pre-norm Transformer encoder layer over the N spatial tokens of a single frame (Appendix C.1)."""

    def __init__(self, config: GazeFlowConfig):
        super().__init__()
        self.attention_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.attention = GazeFlowAttention(config.hidden_size, config.num_attention_heads)
        self.mlp_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.mlp = GazeFlowMLP(config.hidden_size, config.intermediate_size)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        tokens = tokens + self.attention.self_attention(self.attention_norm(tokens))
        return tokens + self.mlp(self.mlp_norm(tokens))


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
    ``[B * G, H, N, d_h]`` with ``G = T / frames_per_group``; the task keys/values are ``[B, H, M + 1, d_h]`` (one
    bank per clip) or, for the causal per-frame bank, ``[B * G, H, M + 1, d_h]`` read per group like the visual
    ones. Neither is ever copied K times: queries are laid out so that every sample of a clip attends to the same
    keys in one SDPA call.
    """

    def __init__(self, config: GazeFlowConfig):
        super().__init__()
        d = config.hidden_size
        self.causal = config.causal
        self.self_attention_norm = nn.LayerNorm(d, eps=config.layer_norm_eps)
        self.self_attention = GazeFlowAttention(d, config.num_attention_heads)
        self.visual_attention = self.task_attention = None
        if config.use_visual_cross_attention:
            self.visual_attention_norm = nn.LayerNorm(d, eps=config.layer_norm_eps)
            self.visual_attention = GazeFlowAttention(d, config.num_attention_heads)
        if config.uses_task_cross_attention_layers:
            self.task_attention_norm = nn.LayerNorm(d, eps=config.layer_norm_eps)
            self.task_attention = GazeFlowAttention(d, config.num_attention_heads)
            self.task_gate = nn.Parameter(torch.full((d,), float(config.task_gate_init)))
        self.mlp_norm = nn.LayerNorm(d, eps=config.layer_norm_eps)
        self.mlp = GazeFlowMLP(d, config.intermediate_size)

    def forward(
        self,
        hidden_states: torch.Tensor,
        rotary: tuple[torch.Tensor, torch.Tensor] | None,
        visual_key_value: tuple[torch.Tensor, torch.Tensor] | None,
        task_key_value: tuple[torch.Tensor, torch.Tensor] | None,
        frames_per_group: int,
        task_per_frame: bool = False,
        cache: GazeFlowKeyValueCache | None = None,
    ) -> torch.Tensor:
        batch, samples, frames, width = hidden_states.shape

        # (1) time-aware self-attention over the T frames of each trajectory, RoPE on q and k
        flat = self.self_attention_norm(hidden_states).reshape(batch * samples, frames, width)
        update = self.self_attention.self_attention(flat, rotary=rotary, is_causal=self.causal, cache=cache)
        hidden_states = hidden_states + update.view(batch, samples, frames, width)

        # (2) per-frame visual cross-attention: the g frames of a group x K samples query that group's N tokens
        if self.visual_attention is not None:
            hidden_states = hidden_states + self._per_group_cross_attention(
                self.visual_attention, self.visual_attention_norm(hidden_states), visual_key_value, frames_per_group)

        # (3) gated task cross-attention: all K x T tokens of a clip query its M + 1 task tokens (the causal
        #     variant: the tokens of frame t query frame t's own bank)
        if self.task_attention is not None:
            normed = self.task_attention_norm(hidden_states)
            if task_per_frame:
                update = self._per_group_cross_attention(self.task_attention, normed, task_key_value,
                                                         frames_per_group)
            else:
                query = self.task_attention.project_query(normed.flatten(1, 2))
                update = self.task_attention.attend(query, *task_key_value).view(batch, samples, frames, width)
            hidden_states = hidden_states + torch.sigmoid(self.task_gate).to(update.dtype) * update

        # (4) feed-forward
        return hidden_states + self.mlp(self.mlp_norm(hidden_states))

    @staticmethod
    def _per_group_cross_attention(attention: GazeFlowAttention, normed_states: torch.Tensor,
                                   key_value: tuple[torch.Tensor, torch.Tensor], frames_per_group: int) -> torch.Tensor:
        batch, samples, frames, width = normed_states.shape
        groups = frames // frames_per_group
        heads, head_dim = attention.num_heads, attention.head_dim
        query = attention.q_proj(normed_states)
        # [B, K, G, g, H, d_h] -> [B, G, H, g, K, d_h] -> [B * G, H, g * K, d_h]
        query = query.view(batch, samples, groups, frames_per_group, heads, head_dim)
        query = query.permute(0, 2, 4, 3, 1, 5).reshape(batch * groups, heads, frames_per_group * samples, head_dim)
        key, value = key_value
        context = F.scaled_dot_product_attention(query, key, value)
        # back to [B, K, T, d]
        context = context.view(batch, groups, heads, frames_per_group, samples, head_dim)
        context = context.permute(0, 4, 1, 3, 2, 5).reshape(batch, samples, frames, width)
        return attention.o_proj(context)


__all__ = [
    "sinusoidal_embedding",
    "sincos_2d_position_encoding",
    "GazeFlowSinusoidalMLP",
    "GazeFlowRotaryEmbedding",
    "apply_rotary",
    "GazeFlowAttention",
    "GazeFlowKeyValueCache",
    "GazeFlowMLP",
    "GazeFlowSpatialEncoderLayer",
    "GazeFlowDenoiserBlock",
]
