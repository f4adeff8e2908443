"""Multi-head attention of GazeFlow's velocity network and condition encoder (paper Appendix C), its kernels and its
key/value caches.

* :func:`eager_attention_forward` and :class:`GazeFlowAttention` - multi-head attention through transformers'
  attention interface (``ALL_ATTENTION_FUNCTIONS``: ``"sdpa"``, ``"flex_attention"``, ...; this eager function is
  the fallback), so ``config._attn_implementation`` picks the kernel of every attention of the model. Keys/values
  can be projected once and reused (the per-clip condition cache).
* :func:`single_query_attention_forward` - the same attention for one query per sequence (a cache's newest
  frame), registered in the attention interface as :data:`SINGLE_QUERY_ATTENTION` (the streamer's CPU kernel).
* :func:`additive_attention_mask` / :func:`causal_attention_mask` - boolean "may attend" patterns as the additive
  masks every attention implementation reads (the causal variant's masks, Appendix F.4).
* :class:`GazeFlowKeyValueCache` (growing, incremental decoding) and :class:`GazeFlowRingKeyValueCache` (W fixed
  slots, the streamer's) - the keys/values of past frames of one self-attention.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.utils._pytree as pytree
from torch import nn
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS, AttentionInterface
from transformers.utils import logging

from .configuration_gazeflow import GazeFlowConfig
from .modeling_gazeflow_rows import PairSwapped, linear_rows

logger = logging.get_logger(__name__)


def additive_attention_mask(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A boolean "query may attend to key" pattern ``[..., L, S]`` as the additive float mask (0 where allowed,
    the dtype's lowest value elsewhere) that eager, SDPA and flex attention all read the same way."""
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill(~allowed, torch.finfo(dtype).min)


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

    Twin of ``modeling_gazeflow_attention.single_query_attention_forward``: change both; held equal by
    ``tests/test_streamer_step.py::test_single_query_attention_equals_eager_and_is_registered``.
    Twin of ``sdpa_attention.sdpa_attention_forward``: change both; held equal by
    ``tests/test_model_contracts.py::test_eager_matches_sdpa_in_fp32``.
    """
    weights = torch.matmul(query, key.transpose(-1, -2)) * scaling
    if attention_mask is not None:
        weights = weights + attention_mask
    weights = nn.functional.softmax(weights, dim=-1, dtype=torch.float32).to(query.dtype)
    weights = nn.functional.dropout(weights, p=dropout, training=module.training)
    context = torch.matmul(weights, value).transpose(1, 2).contiguous()
    return context, weights


SINGLE_QUERY_ATTENTION = "gazeflow_single_query"
"""The name :func:`single_query_attention_forward` is registered under in transformers' attention interface."""


def single_query_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float = 0.0,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """softmax(q k^T * scaling + mask) v for one query per sequence (``L = 1``: incremental decoding, the newest
    frame attending to a key/value cache), as elementwise products and sums over the key axis.

    The same attention as :func:`eager_attention_forward` (float rounding aside), without the layout copies and
    batched-matmul folding a one-row product costs on a CPU: about half the ops SDPA dispatches there. On CUDA one
    fused SDPA kernel beats its five elementwise kernels, so callers choose it for CPUs only. ``query [B, H, 1, d_h]``
    (any strides), ``key``/``value [B, H, S, d_h]``, ``attention_mask`` additive ``[B or 1, H or 1, 1, S]``. Returns
    the context ``[B, 1, H, d_h]`` and no weights; other query lengths go to :func:`eager_attention_forward`.

    Twin of ``modeling_gazeflow_attention.eager_attention_forward``: change both; held equal by
    ``tests/test_streamer_step.py::test_single_query_attention_equals_eager_and_is_registered``.
    """
    if query.shape[-2] != 1:
        context, _ = eager_attention_forward(module, query, key, value, attention_mask, scaling, dropout)
        return context, None
    scores = (query * key).sum(-1)  # [B, H, S]
    if scaling != 1.0:
        scores = scores * scaling
    if attention_mask is not None:  # [..., 1, S] -> [..., S] (views: a dimension of size 1 drops from any strides)
        scores = scores + attention_mask.view(*attention_mask.shape[:-2], attention_mask.shape[-1])
    weights = (
        scores.softmax(-1)
        if scores.dtype == torch.float32
        else scores.softmax(-1, dtype=torch.float32).to(scores.dtype)
    )
    if dropout > 0.0:
        weights = nn.functional.dropout(weights, p=dropout, training=module.training)
    batch, heads, slots = weights.shape
    context = (weights.view(batch, heads, slots, 1) * value).sum(-2)  # [B, H, d_h]
    return context.view(batch, 1, heads, -1), None


AttentionInterface.register(SINGLE_QUERY_ATTENTION, single_query_attention_forward)


def attention_function(implementation: str | None) -> Callable[..., tuple[torch.Tensor, torch.Tensor | None]]:
    """The attention kernel registered under ``implementation`` in transformers' ``ALL_ATTENTION_FUNCTIONS``
    (``"sdpa"``, ``"flex_attention"``, a custom registered one), or :func:`eager_attention_forward` for ``"eager"``."""
    if implementation in (None, "eager"):
        return eager_attention_forward
    get_interface = getattr(ALL_ATTENTION_FUNCTIONS, "get_interface", None)
    if get_interface is not None:
        return get_interface(implementation, eager_attention_forward)
    return ALL_ATTENTION_FUNCTIONS[implementation]  # transformers releases before AttentionInterface.get_interface


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
        self.scaling = self.head_dim**-0.5
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
        rows = linear_rows(self, (self.k_proj, self.v_proj), context.reshape(-1, context.shape[-1]))
        key_value = rows.view(*context.shape[:-1], 2, self.num_heads, self.head_dim)
        return key_value.select(-3, 0).transpose(-3, -2), key_value.select(-3, 1).transpose(-3, -2)

    def project_query(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """Queries of ``hidden_states [..., L, d]``, ``[..., H, L, d_h]``."""
        rows = linear_rows(self, (self.q_proj,), hidden_states.reshape(-1, hidden_states.shape[-1]))
        return self.split_heads(rows.view(hidden_states.shape))

    def attention(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
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
                f"model uses {implementation!r}, so they are returned as None (model.set_attn_implementation('eager'))"
            )
        if attention_mask is not None:
            if attention_mask.dtype == torch.bool:
                attention_mask = additive_attention_mask(attention_mask, query.dtype)
            # one mask row per batch entry: flex attention indexes the mask by batch
            attention_mask = attention_mask.expand(query.shape[0], *attention_mask.shape[1:])
        context, weights = attention_function(implementation)(
            self, query, key, value, attention_mask, scaling=self.scaling, dropout=0.0, is_causal=False
        )
        return context, (weights if output_attentions else None)

    def output_rows(self, context: torch.Tensor) -> torch.Tensor:
        """The output projection of a kernel's context ``[B, L, H, d_h]`` as rows ``[B L, d]``."""
        width = self.num_heads * self.head_dim
        rows = context.view(-1, width) if context.is_contiguous() else context.reshape(-1, width)
        return linear_rows(self, (self.o_proj,), rows)

    def attend(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """:meth:`attention`, then the output projection: the output ``[B, L, d]`` and the weights (or None)."""
        context, weights = self.attention(query, key, value, attention_mask, output_attentions)
        return self.output_rows(context).view(*context.shape[:-2], -1), weights

    def self_attention(
        self,
        hidden_states: torch.Tensor,
        rotary: tuple[torch.Tensor, torch.Tensor] | None = None,
        attention_mask: torch.Tensor | None = None,
        cache: GazeFlowKeyValueCache | None = None,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Self-attention over ``hidden_states [N, L, d]`` (:meth:`self_attention_rows` on its rows): the output
        ``[N, L, d]`` and the weights (or None)."""
        sequences, length, width = hidden_states.shape
        update, weights = self.self_attention_rows(
            hidden_states.reshape(-1, width), sequences, rotary, attention_mask, cache, output_attentions
        )
        return update.view(sequences, length, width), weights

    def self_attention_rows(
        self,
        rows: torch.Tensor,
        sequences: int,
        rotary: tuple[torch.Tensor, torch.Tensor] | None = None,
        attention_mask: torch.Tensor | None = None,
        cache: GazeFlowKeyValueCache | None = None,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Self-attention within each of ``sequences`` sequences whose tokens are ``rows [N L, d]`` (sequence by
        sequence): the output rows ``[N L, d]`` and the weights ``[N, H, L, S]`` (or None).

        With ``rotary`` (:meth:`GazeFlowRotaryEmbedding.table` for the 2H query and key heads, ``[L, 2 d]`` each)
        queries and keys are rotated by RoPE (Appendix C.2): the projection also gives their pair-swapped copies
        (:class:`PairSwapped`), so the rotation is ``qk * cos + swapped * signed_sin``, two elementwise products.
        With a ``cache`` (incremental decoding), the rows are the newest frames only: their rotated keys and values
        are appended to the cache and the queries attend to every cached frame (all in the past: no mask).

        Twin of ``modeling_gazeflow_embeddings.apply_rotary``: change both; held equal by
        ``tests/test_twins.py::test_rope_forms_equal_apply_rotary``.
        """
        width = rows.shape[-1]
        length = rows.shape[0] // sequences
        heads = (self.num_heads, self.head_dim)
        if rotary is None:
            projected = linear_rows(self, (self.q_proj, self.k_proj, self.v_proj), rows)
            query_key = projected[:, : 2 * width].view(sequences, length, 2, *heads).permute(2, 0, 3, 1, 4)
        else:
            cos, signed_sin = rotary
            projected = linear_rows(
                self, (self.q_proj, self.k_proj, PairSwapped(self.q_proj), PairSwapped(self.k_proj), self.v_proj), rows
            ).view(sequences, length, -1)
            query_key = projected[..., : 2 * width] * cos + projected[..., 2 * width : 4 * width] * signed_sin
            query_key = query_key.view(sequences, length, 2, *heads).permute(2, 0, 3, 1, 4)
        query, key = query_key[0], query_key[1]
        value = projected[..., -width:].view(sequences, length, *heads).transpose(1, 2)
        if cache is not None:
            key, value = cache.update(key, value)
            attention_mask = None
        context, weights = self.attention(query, key, value, attention_mask, output_attentions)
        return self.output_rows(context), weights


class GazeFlowKeyValueCache:
    """Keys/values ``[B, H, L, d_h]`` of past frames for one self-attention, kept for at most ``max_length`` frames
    (the window W: older frames drop out, so the per-frame work is bounded).

    The plain, growing form: every update concatenates and trims, so its shapes change over the first W frames. It
    is the reference that :class:`GazeFlowRingKeyValueCache` (static shapes, the streamer's) is checked against.

    Twin of ``modeling_gazeflow_attention.GazeFlowRingKeyValueCache``: change both; held equal by
    ``tests/test_causal_streaming.py::test_streamer_equals_the_previous_streamer_past_the_window``.
    """

    def __init__(self, max_length: int):
        self.max_length = max_length
        self.key: torch.Tensor | None = None
        self.value: torch.Tensor | None = None

    def update(self, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.key is not None:
            key, value = torch.cat([self.key, key], dim=-2), torch.cat([self.value, value], dim=-2)
        self.key, self.value = key[..., -self.max_length :, :], value[..., -self.max_length :, :]
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

    Twin of ``modeling_gazeflow_attention.GazeFlowKeyValueCache``: change both; held equal by
    ``tests/test_causal_streaming.py::test_streamer_equals_the_previous_streamer_past_the_window``.
    """

    key: torch.Tensor
    value: torch.Tensor

    @classmethod
    def empty(
        cls, rows: int, heads: int, slots: int, head_dim: int, dtype: torch.dtype, device: torch.device | str
    ) -> GazeFlowRingKeyValueCache:
        """A zero-filled cache of ``slots`` frames for ``rows`` query rows."""
        return cls(*(torch.zeros(rows, heads, slots, head_dim, dtype=dtype, device=device) for _ in range(2)))

    def write(self, slot: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write the newest frame's ``key``/``value [N, H, 1, d_h]`` into ``slot`` (``[1]`` int64) and return the
        whole buffers."""
        self.key.index_copy_(2, slot, key)
        self.value.index_copy_(2, slot, value)
        return self.key, self.value


try:  # a pytree of its two tensors, so that a step taking caches compiles and exports
    pytree.register_dataclass(GazeFlowRingKeyValueCache, serialized_type_name=f"{__name__}.GazeFlowRingKeyValueCache")
except ValueError:  # already registered (the module was imported twice under one name)
    pass


__all__ = [
    "additive_attention_mask",
    "causal_attention_mask",
    "eager_attention_forward",
    "SINGLE_QUERY_ATTENTION",
    "single_query_attention_forward",
    "attention_function",
    "GazeFlowAttention",
    "GazeFlowKeyValueCache",
    "GazeFlowRingKeyValueCache",
]
