"""Building blocks of the GazeFlow velocity network and condition encoder (paper Appendix C).

Small named modules, each implementing one piece of the paper:

* the embeddings (``modeling_gazeflow_embeddings``, re-exported here): :func:`sinusoidal_embedding`,
  :class:`GazeFlowSinusoidalMLP`, :func:`sincos_2d_position_encoding` (Appendix C.1), :class:`GazeFlowRotaryEmbedding`
  and :func:`apply_rotary` (Appendix C.2).
* :func:`eager_attention_forward` and :class:`GazeFlowAttention` - multi-head attention through transformers'
  attention interface (``ALL_ATTENTION_FUNCTIONS``: ``"sdpa"``, ``"flex_attention"``, ...; this eager function is
  the fallback), so ``config._attn_implementation`` picks the kernel of every attention of the model. Keys/values
  can be projected once and reused (the per-clip condition cache).
* :func:`additive_attention_mask` / :func:`causal_attention_mask` - boolean "may attend" patterns as the additive
  masks every attention implementation reads (the causal variant's masks, Appendix F.4).
* :class:`GazeFlowDenoiserBlock` - the four pre-norm residual sub-layers of Appendix C.3 (Eqs. sa_out, ca_out,
  task_xattn), a ``GradientCheckpointingLayer`` whose tensors are all positional arguments.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
import torch.utils._pytree as pytree
from torch import nn
from transformers import initialization as init
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.utils import logging

from .configuration_gazeflow import GazeFlowConfig
from .modeling_gazeflow_embeddings import (  # re-exported: the embeddings' own module, one import for the model's parts
    COORDINATE_EMBEDDING_SCALE,
    TIME_EMBEDDING_SCALE,
    GazeFlowRotaryEmbedding,
    GazeFlowSinusoidalMLP,
    apply_rotary,
    apply_signed_rotary,
    embed_gaze,
    flow_time_tensor,
    sincos_2d_position_encoding,
    sinusoidal_embedding,
    sinusoidal_features,
    sinusoidal_frequencies,
    swap_pairs,
)

logger = logging.get_logger(__name__)

def additive_attention_mask(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A boolean "query may attend to key" pattern ``[..., L, S]`` as the additive float mask (0 where allowed,
    the dtype's lowest value elsewhere) that eager, SDPA and flex attention all read the same way."""
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill(
        ~allowed, torch.finfo(dtype).min)


def causal_attention_mask(length: int, device: torch.device) -> torch.Tensor:
    """``[1, 1, L, L]`` boolean mask letting frame t attend to frames <= t (the causal variant, Appendix F.4)."""
    index = torch.arange(length, device=device)
    return (index[None, :] <= index[:, None])[None, None]


def eager_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float = 0.0,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q k^T * scaling + mask) v, the plain matmul-softmax (transformers' eager convention).

    ``query [B, H, L, d_h]``, ``key``/``value [B, H, S, d_h]``, ``attention_mask`` additive, broadcastable to
    ``[B, H, L, S]``. Returns the context ``[B, L, H, d_h]`` and the weights ``[B, H, L, S]`` (rows sum to 1).
    """
    weights = torch.matmul(query, key.transpose(-1, -2)) * scaling
    if attention_mask is not None:
        weights = weights + attention_mask
    weights = nn.functional.softmax(weights, dim=-1, dtype=torch.float32).to(query.dtype)
    weights = nn.functional.dropout(weights, p=dropout, training=module.training)
    context = torch.matmul(weights, value).transpose(1, 2).contiguous()
    return context, weights


def attention_function(implementation: str | None) -> Callable[..., tuple[torch.Tensor, torch.Tensor | None]]:
    """The attention kernel registered under ``implementation`` in transformers' ``ALL_ATTENTION_FUNCTIONS``
    (``"sdpa"``, ``"flex_attention"``, a custom registered one), or :func:`eager_attention_forward` for ``"eager"``."""
    if implementation in (None, "eager"):
        return eager_attention_forward
    get_interface = getattr(ALL_ATTENTION_FUNCTIONS, "get_interface", None)
    if get_interface is not None:
        return get_interface(implementation, eager_attention_forward)
    return ALL_ATTENTION_FUNCTIONS[implementation]  # transformers releases before AttentionInterface.get_interface


def stacked_linear_weights(owner: nn.Module, layers: tuple[nn.Linear, ...]) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The weights and biases of ``layers`` (Linears reading the same input) stacked along the output dimension,
    so that one matmul gives their outputs side by side (each output column is the same dot product as in its own
    layer). Without autograd they are kept on ``owner`` between calls while every source weight is unchanged (same
    storage, same version counter, which in-place updates such as an optimizer step bump); with autograd (training)
    or under ``torch.compile`` they are stacked on every call."""
    params = [p for layer in layers for p in (layer.weight, layer.bias) if p is not None]
    if torch.compiler.is_compiling() or (torch.is_grad_enabled() and any(p.requires_grad for p in params)):
        return _stack_weights(layers)
    names = tuple(id(layer) for layer in layers)
    cached = owner.__dict__.setdefault("_stacked_weights", {}).get(names)
    state = tuple((p.data_ptr(), p._version, p.dtype, p.device) for p in params)
    if cached is None or cached[0] != state:
        # the sources are kept with the stack, so their storage cannot be reused by a later weight at the same address
        cached = (state, _stack_weights(layers), [p.detach() for p in params])
        owner.__dict__["_stacked_weights"][names] = cached
    return cached[1]


def _stack_weights(layers: tuple[nn.Linear, ...]) -> tuple[torch.Tensor, torch.Tensor | None]:
    weight = torch.cat([layer.weight for layer in layers])
    biases = [layer.bias for layer in layers]
    if all(bias is None for bias in biases):
        return weight, None
    biases = [torch.zeros(layer.out_features, dtype=weight.dtype, device=weight.device) if bias is None else bias
              for layer, bias in zip(layers, biases)]
    return weight, torch.cat(biases)


class GazeFlowAttention(nn.Module):
    """Multi-head attention (``H`` heads of ``d_h = d / H``) with layer-specific Q/K/V/O projections.

    The kernel is ``config._attn_implementation`` (transformers' attention interface; ``"eager"`` returns the
    weights). Keys and values are produced by :meth:`project_key_value` and passed to :meth:`attend` already split
    into heads, so that the keys/values of a condition can be computed once per clip and shared across samples and
    steps.
    """

    def __init__(self, config: GazeFlowConfig):
        super().__init__()
        self.config = config
        hidden_size = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.head_dim = hidden_size // self.num_heads
        self.scaling = self.head_dim ** -0.5
        self.is_causal = False  # causal patterns are passed as explicit masks, read alike by every kernel
        self.q_proj = nn.Linear(hidden_size, hidden_size)
        self.k_proj = nn.Linear(hidden_size, hidden_size)
        self.v_proj = nn.Linear(hidden_size, hidden_size)
        self.o_proj = nn.Linear(hidden_size, hidden_size)

    def split_heads(self, states: torch.Tensor) -> torch.Tensor:
        """``[..., L, d] -> [..., H, L, d_h]``."""
        return states.unflatten(-1, (self.num_heads, self.head_dim)).transpose(-3, -2)

    def project_key_value(self, context: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values of ``context [..., L, d]``, each ``[..., H, L, d_h]`` (one matmul for both)."""
        weight, bias = stacked_linear_weights(self, (self.k_proj, self.v_proj))
        key_value = F.linear(context, weight, bias).unflatten(-1, (2, self.num_heads, self.head_dim))
        return key_value.select(-3, 0).transpose(-3, -2), key_value.select(-3, 1).transpose(-3, -2)

    def project_query(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.split_heads(self.q_proj(hidden_states))

    def project_query_key_value(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """Queries, keys and values of ``hidden_states [B, L, d]`` from one matmul, ``[3, B, H, L, d_h]``."""
        weight, bias = stacked_linear_weights(self, (self.q_proj, self.k_proj, self.v_proj))
        projected = F.linear(hidden_states, weight, bias).unflatten(-1, (3, self.num_heads, self.head_dim))
        return projected.permute(2, 0, 3, 1, 4)

    def attention(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                  attention_mask: torch.Tensor | None = None,
                  output_attentions: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The configured kernel on heads-split ``query [B, H, L, d_h]`` and ``key``/``value [B, H, S, d_h]``:
        the context ``[B, L, H, d_h]`` (before the output projection) and, with ``output_attentions``, the weights
        ``[B, H, L, S]`` (None from kernels that never form them, e.g. SDPA, as in transformers).

        ``attention_mask``: a boolean "may attend" pattern broadcastable to ``[B, 1, L, S]`` (made additive in the
        query's dtype here, so autocast and every kernel read it alike) or an additive float mask.
        """
        implementation = self.config._attn_implementation
        if output_attentions and implementation not in (None, "eager"):
            logger.warning_once(
                f"output_attentions=True: attention weights are only formed by attn_implementation='eager'; this "
                f"model uses {implementation!r}, so they are returned as None (model.set_attn_implementation('eager'))")
        if attention_mask is not None:
            if attention_mask.dtype == torch.bool:
                attention_mask = additive_attention_mask(attention_mask, query.dtype)
            # one mask row per batch entry: flex attention indexes the mask by batch
            attention_mask = attention_mask.expand(query.shape[0], *attention_mask.shape[1:])
        context, weights = attention_function(implementation)(
            self, query, key, value, attention_mask, scaling=self.scaling, dropout=0.0, is_causal=False)
        return context, (weights if output_attentions else None)

    def attend(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
               attention_mask: torch.Tensor | None = None,
               output_attentions: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        """:meth:`attention`, then the output projection: the output ``[B, L, d]`` and the weights (or None)."""
        context, weights = self.attention(query, key, value, attention_mask, output_attentions)
        return self.o_proj(context.reshape(*context.shape[:-2], -1)), weights

    def self_attention(self, hidden_states: torch.Tensor, rotary: tuple[torch.Tensor, torch.Tensor] | None = None,
                       attention_mask: torch.Tensor | None = None, cache: GazeFlowKeyValueCache | None = None,
                       output_attentions: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Self-attention over ``hidden_states [B, L, d]``, with RoPE on queries and keys when ``rotary`` is given.

        With a ``cache`` (streaming), ``hidden_states`` are the newest frames only: their rotated keys and values
        are appended to the cache and the queries attend to every cached frame (all of them are in the past, so
        no mask is needed).
        """
        projected = self.project_query_key_value(hidden_states)
        if rotary is not None:  # queries and keys rotated together
            query_key = apply_signed_rotary(projected[:2], *rotary)
            query, key = query_key[0], query_key[1]
        else:
            query, key = projected[0], projected[1]
        value = projected[2]
        if cache is not None:
            key, value = cache.update(key, value)
            attention_mask = None
        return self.attend(query, key, value, attention_mask, output_attentions)


class GazeFlowKeyValueCache:
    """Keys/values ``[B, H, L, d_h]`` of past frames for one self-attention, kept for at most ``max_length`` frames
    (the window W: older frames drop out, so the per-frame work is bounded).

    The plain, growing form: every update concatenates and trims, so its shapes change over the first W frames. It
    is the reference that :class:`GazeFlowRingKeyValueCache` (static shapes, the streamer's) is checked against."""

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


@dataclass
class GazeFlowRingKeyValueCache:
    """Keys/values of the last W frames for one self-attention in W fixed slots (a ring buffer), ``key`` and
    ``value`` ``[N, H, W, d_h]``.

    Frame t is written to slot ``t mod W``, over the frame W frames older, in place (``index_copy_``): the shapes and
    the storage never change from frame 0 on, so a step using it compiles to one graph, replays as a CUDA graph and
    exports. Which slots hold a frame yet is an attention mask over the slots (``modeling_gazeflow_streaming``), not a
    slice; the slots' order is not the frames' order, which attention does not see (with RoPE the keys carry their
    own positions).
    """

    key: torch.Tensor
    value: torch.Tensor

    @classmethod
    def empty(cls, rows: int, heads: int, slots: int, head_dim: int, dtype: torch.dtype,
              device: torch.device | str) -> GazeFlowRingKeyValueCache:
        """A zero-filled cache of ``slots`` frames for ``rows`` query rows."""
        return cls(*(torch.zeros(rows, heads, slots, head_dim, dtype=dtype, device=device) for _ in range(2)))

    def write(self, slot: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write the newest frame's ``key``/``value [N, H, 1, d_h]`` into ``slot`` (``[1]`` int64) and return the
        whole buffers."""
        self.key.index_copy_(2, slot, key)
        self.value.index_copy_(2, slot, value)
        return self.key, self.value


try:  # a pytree of its two tensors, so that a step taking caches compiles and exports
    pytree.register_dataclass(GazeFlowRingKeyValueCache,
                              serialized_type_name=f"{__name__}.GazeFlowRingKeyValueCache")
except ValueError:  # already registered (the module was imported twice under one name)
    pass


class GazeFlowMLP(nn.Module):
    """Position-wise feed-forward layer d -> intermediate -> d with GELU."""

    def __init__(self, hidden_size: int, intermediate_size: int):
        super().__init__()
        self.fc1 = nn.Linear(hidden_size, intermediate_size)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(intermediate_size, hidden_size)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(hidden_states)))


LORA_FACTOR = "_gazeflow_lora_factor"
"""Attribute naming a peft LoRA factor Linear ``"A"`` or ``"B"`` (set by :func:`mark_lora_factors`): peft's factors
are plain ``nn.Linear`` modules, and transformers initialises modules one by one, so the role must be on the module."""


def mark_lora_factors(module: nn.Module) -> None:
    """Tag the A and B factor Linears of every peft LoRA layer under ``module`` (see :data:`LORA_FACTOR`)."""
    for layer in module.modules():
        if isinstance(getattr(layer, "lora_A", None), nn.ModuleDict):
            for adapter in layer.lora_A:
                setattr(layer.lora_A[adapter], LORA_FACTOR, "A")
                setattr(layer.lora_B[adapter], LORA_FACTOR, "B")


@torch.no_grad()
def init_standard_weights(module: nn.Module, std: float) -> None:
    """The initialisation shared by every part of GazeFlow (``_init_weights``): ``Linear``/``Conv3d`` weights
    truncated-normal(std) with zero biases; ``LayerNorm`` ones and zeros; peft LoRA factors get peft's own
    initialisation (A Kaiming-uniform, B = 0), so an adapter that a checkpoint does not provide starts as exactly no
    change to the base layer. Parameters loaded from a checkpoint are left alone (transformers' guarded init)."""
    factor = getattr(module, LORA_FACTOR, None)
    if factor == "A":
        init.kaiming_uniform_(module.weight, a=math.sqrt(5))
    elif factor == "B":
        init.zeros_(module.weight)
        if module.bias is not None:
            init.zeros_(module.bias)
    elif isinstance(module, (nn.Linear, nn.Conv3d)):
        init.trunc_normal_(module.weight, std=std)
        if module.bias is not None:
            init.zeros_(module.bias)
    elif isinstance(module, nn.LayerNorm):
        init.ones_(module.weight)
        init.zeros_(module.bias)


def _group_major(states: torch.Tensor, groups: int) -> torch.Tensor:
    """Gaze tokens ``[B, K, T, d]`` -> ``[B * G, g * K, d]`` (one copy): the g frames x K samples of a group become
    one block of rows that reads the group's keys (T = G * g)."""
    batch, samples, frames, width = states.shape
    states = states.view(batch, samples, groups, frames // groups, width).permute(0, 2, 3, 1, 4)
    return states.reshape(batch * groups, frames // groups * samples, width)


def _sample_major(states: torch.Tensor, batch: int, samples: int) -> torch.Tensor:
    """Per-group rows ``[B * G, g * K, d]`` back to gaze tokens ``[B, K, T, d]`` (a view, no copy)."""
    rows, width = states.shape[1:]
    groups = states.shape[0] // batch
    states = states.view(batch, groups, rows // samples, samples, width).permute(0, 3, 1, 2, 4)
    return states.reshape(batch, samples, groups * rows // samples, width)


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
        rotary = (rotary_cos, rotary_sin) if rotary_cos is not None else None
        visual_weights = task_weights = None

        # (1) time-aware self-attention over the T frames of each trajectory, RoPE on q and k
        flat = self.self_attention_norm(hidden_states).view(batch * samples, frames, width)
        update, self_weights = self.self_attention.self_attention(flat, rotary, self_attention_mask, cache,
                                                                  output_attentions)
        hidden_states = hidden_states + update.view(batch, samples, frames, width)

        # (2) per-frame visual cross-attention: the g frames of a group x K samples query that group's N tokens
        if self.visual_attention is not None:
            update, visual_weights = self._per_group_cross_attention(
                self.visual_attention, self.visual_attention_norm(hidden_states), visual_key, visual_value,
                output_attentions)
            hidden_states = hidden_states + update

        # (3) gated task cross-attention: all K x T tokens of a clip query its M + 1 task tokens (the causal
        #     variant: the tokens of frame t query frame t's own bank)
        if self.task_attention is not None:
            normed = self.task_attention_norm(hidden_states)
            if task_key.dim() == 5:  # a bank per group of frames
                update, task_weights = self._per_group_cross_attention(
                    self.task_attention, normed, task_key, task_value, output_attentions)
            else:
                query = self.task_attention.project_query(normed.flatten(1, 2))
                update, task_weights = self.task_attention.attend(query, task_key, task_value,
                                                                  output_attentions=output_attentions)
                update = update.view(batch, samples, frames, width)
                if task_weights is not None:  # [B, H, K * T, M + 1] -> [B * K, H, T, M + 1]
                    task_weights = task_weights.unflatten(2, (samples, frames)).transpose(1, 2).flatten(0, 1)
            hidden_states = hidden_states + torch.sigmoid(self.task_gate).to(update.dtype) * update

        # (4) feed-forward
        hidden_states = hidden_states + self.mlp(self.mlp_norm(hidden_states))
        return hidden_states, self_weights, visual_weights, task_weights

    @staticmethod
    def _per_group_cross_attention(
        attention: GazeFlowAttention, normed_states: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
        output_attentions: bool,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Cross-attention of gaze tokens ``[B, K, T, d]`` to per-group keys/values ``[B, G, H, S, d_h]``; returns
        the update ``[B, K, T, d]`` and the weights ``[B * K, H, T, S]`` (or None)."""
        batch, samples, _, width = normed_states.shape
        grouped = _group_major(normed_states, key.shape[1])  # the output projection is applied in this order too
        query = attention.q_proj(grouped).view(*grouped.shape[:2], attention.num_heads, attention.head_dim)
        context, weights = attention.attention(query.transpose(1, 2), key.flatten(0, 1), value.flatten(0, 1),
                                               output_attentions=output_attentions)
        update = _sample_major(attention.o_proj(context.reshape(*grouped.shape[:2], width)), batch, samples)
        if weights is not None:
            weights = _per_group_weights_to_frames(weights, batch, samples).flatten(0, 1)
        return update, weights


__all__ = [
    "TIME_EMBEDDING_SCALE",
    "COORDINATE_EMBEDDING_SCALE",
    "sinusoidal_frequencies",
    "sinusoidal_features",
    "sinusoidal_embedding",
    "sincos_2d_position_encoding",
    "GazeFlowSinusoidalMLP",
    "embed_gaze",
    "flow_time_tensor",
    "GazeFlowRotaryEmbedding",
    "apply_rotary",
    "apply_signed_rotary",
    "swap_pairs",
    "additive_attention_mask",
    "causal_attention_mask",
    "eager_attention_forward",
    "attention_function",
    "GazeFlowAttention",
    "GazeFlowKeyValueCache",
    "GazeFlowRingKeyValueCache",
    "GazeFlowMLP",
    "LORA_FACTOR",
    "mark_lora_factors",
    "init_standard_weights",
    "GazeFlowDenoiserBlock",
]
