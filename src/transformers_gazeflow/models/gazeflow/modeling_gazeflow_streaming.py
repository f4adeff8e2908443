"""The causal model's per-frame computation with static shapes: what the online streamer runs (paper Appendix F.4).

The causal model (``modeling_gazeflow_causal``) makes frame t's output depend on frames <= t only, so a streamer
computes, per frame, only what frame t adds. These are the pieces of that per-frame step in a form whose shapes are
the same from frame 0 on and which reads no tensor value on the host, so the step can be compiled to one graph,
replayed as a CUDA graph and exported:

* :class:`GazeFlowStreamingCondition` - frame t's condition from its encoder tokens: c_v(t) (W_proj and the spatial
  encoder, the model's own modules; temporal layers, if any, over a ring of the last W frames' keys/values), the
  causal task bank c_task(t) over the last W frame summaries kept in a ring buffer (only the newest summary is
  projected to keys/values), and every block's visual / task keys and values projected for all blocks in one matrix
  product, once per frame for all K samples and S steps.
* :class:`GazeFlowStreamingVelocityNetwork` - v_theta on the newest frame's K gaze tokens, one network call of the
  sampler: the blocks of ``GazeFlowVelocityNetwork`` (Eqs. sa_out, ca_out, task_xattn) with their weights prepared
  once (cast to the run's dtype, Q/K/V fused, the attention scale folded into the query columns, the flow-time
  embedding of each sampler call and the embedding biases folded into one bias per call; frame t's RoPE rotation
  folded into the Q/K/V projection once per frame for all S calls) and the self-attention's keys/values in
  :class:`~.modeling_gazeflow_attention.GazeFlowRingKeyValueCache` buffers (one per call and block). On a CPU the
  newest query attends to the ring through the single-query kernel registered in transformers' attention
  interface (``modeling_gazeflow_attention.single_query_attention_forward``).
* :class:`StreamingPositions` and :func:`streaming_positions` - what frame t's index gives every part: the ring slot
  ``t mod W``, the mask of the slots that hold a frame (the last ``min(t + 1, W)``) and their count.
* :func:`rotary_phases` - RoPE angles of a frame index reduced mod 2 pi in float64 (see below).

**Positions over a long stream.** RoPE rotates the query and key of frame t by ``t * theta^(-2j / d_h)``
(Appendix C.2); the logit of a query and a key depends on their offset only. A key is rotated once, when its frame
is written to the ring, by its absolute index t, and every query by its own t. Absolute indices grow without bound:
a float32 angle t * theta^(-2j / d_h) near t = 10^5 is rounded by up to 4e-3 rad (half its ulp), a query-key offset
by twice that, and from t = 10^7 (31 hours at 90 Hz) on the rotation is noise (ulp 1 rad). :func:`rotary_phases`
therefore forms the angle in float64 (rounded by 1e-9 rad at t = 10^7, 1e-6 rad at t = 10^10) and reduces it mod
2 pi before the cosine, so frame 10^7's rotated keys carry the same float32/bf16 rounding of cos and sin as frame
0's (tested: a stream started at t = 10^7 equals the same stream started at 0). The alternative, storing keys
unrotated and rotating all W cached keys by their offset to the newest frame at every call, would cost W times the
rotation work and several more kernels per block and call. Learned positions take the row of the newest frame in
the window, min(t, W - 1), as before.

Everything here is the model's own computation rearranged: the streamer built on it equals the causal model run on
the same prefix with the same noise within the first W frames (tests); the rearrangements (fused products, folded
biases) change float32 results by rounding only (about 1e-6).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional

from .configuration_gazeflow import GazeFlowConfig
from .modeling_gazeflow_attention import (
    SINGLE_QUERY_ATTENTION,
    GazeFlowAttention,
    GazeFlowRingKeyValueCache,
    attention_function,
)
from .modeling_gazeflow_embeddings import (
    COORDINATE_EMBEDDING_SCALE,
    rotate_pairs,
    sinusoidal_features,
    sinusoidal_frequencies,
)
from .modeling_gazeflow_layers import GazeFlowDenoiserBlock
from .modeling_gazeflow_rows import PreparedRowLayers

ONE_TURN = 2 * math.pi
"""RoPE angles are reduced modulo one turn."""


def rotary_phases(frame_index: torch.Tensor, inverse_frequencies: torch.Tensor) -> torch.Tensor:
    """RoPE angles ``t * theta^(-2j / d_h)`` of the frame index ``t`` (an int64 tensor) reduced mod 2 pi, float64.

    ``inverse_frequencies`` are the model's (float32) frequencies in any layout; the product and the reduction are
    exact to float64 rounding, so the angle of frame 10^7 is as precise as that of frame 0 (module docstring)."""
    angles = frame_index.to(torch.float64) * inverse_frequencies.to(torch.float64)
    return torch.remainder(angles, ONE_TURN)


@dataclass
class StreamingPositions:
    """Where frame t goes and what the rings hold once it is there (every field a tensor: nothing is read on the
    host). All rings of a stream share the slot ``t mod W``.

    Attributes:
        frame_index: ``[]`` int64, t (RoPE rotates by it).
        slot: ``[1]`` int64, ``t mod W``: the ring slot frame t is written to.
        slot_mask: ``[W]`` additive mask in the run's dtype: 0 for the slots holding a frame (at most the last W,
            frame t's included), the dtype's lowest value for slots not written yet.
        count: ``[]`` int64, how many slots hold a frame (``min(t + 1, W)`` for a stream started at frame 0).
        first: ``[]`` bool, whether frame t is the stream's first.
    """

    frame_index: torch.Tensor
    slot: torch.Tensor
    slot_mask: torch.Tensor
    count: torch.Tensor
    first: torch.Tensor


def streaming_positions(frame_index: torch.Tensor, written: torch.Tensor, dtype: torch.dtype) -> StreamingPositions:
    """:class:`StreamingPositions` of frame ``frame_index`` (``[]`` int64) for rings of ``len(written)`` slots;
    ``written`` ``[W]`` bool (which slots hold a frame, the state's) is updated in place to include frame t's slot.

    A slot is valid because a frame was written to it, not because of t: a stream may start at any frame index
    (a stream resumed at t = 10^7 behaves as one started at 0, which is how the long-stream test runs)."""
    slots = written.shape[0]
    slot = torch.remainder(frame_index, slots).view(1)
    first = ~written.any()
    written.index_fill_(0, slot, True)
    slot_mask = torch.where(written, 0.0, torch.finfo(dtype).min).to(dtype)
    return StreamingPositions(frame_index, slot, slot_mask, written.sum(), first)


def cast_copy(module: nn.Module, dtype: torch.dtype) -> nn.Module:
    """``module`` itself when its parameters are already ``dtype``, else a copy cast to ``dtype`` (the model is
    left as it is)."""
    parameter = next(module.parameters(), None)
    if parameter is None or parameter.dtype == dtype:
        return module
    return copy.deepcopy(module).to(dtype)


# ---------------------------------------------------------------------------------------------------- condition
class GazeFlowStreamingCondition(nn.Module):
    """Frame t's condition from its encoder tokens, for all K samples and every sampler call (once per frame).

    c_v(t) = SpatialEnc(W_proj Z_t) (Eq. visual_condition, the model's modules; its temporal layers, if any, attend
    to the keys/values of the last W frames kept in one ring per layer), V_bar_t its spatial mean written to
    the summary ring, and the causal task bank's entry c_task(t) = [p_t; q_1(t)..q_M(t)] over the ring's summaries
    (``modeling_gazeflow_causal.causal_task_bank`` with ``last_only``): p_t their mean, the M task queries (projected
    once, here) attending to their keys/values, of which only the newest is projected per frame. Then the keys and
    values of c_v(t) and c_task(t) for every block (``GazeFlowModel.condition_from_tokens``), one product each.

    Twin of ``modeling_gazeflow.GazeFlowModel.condition_from_tokens``: change both; held equal by
    ``tests/test_causal_streaming.py::test_streamer_equals_the_causal_model_on_every_prefix``.
    """

    def __init__(self, model: nn.Module, dtype: torch.dtype):
        super().__init__()
        config: GazeFlowConfig = model.config
        encoder = model.condition_encoder
        self.hidden_size, self.head_dim = config.hidden_size, config.head_dim
        self.num_heads = config.num_attention_heads
        self.visual_projection = cast_copy(encoder.visual_projection, dtype)
        self.spatial_encoder = cast_copy(encoder.spatial_encoder, dtype)
        bank = encoder.task_bank
        self.has_task_bank = bank is not None
        self.num_queries = bank.num_queries if bank is not None else 0
        if self.num_queries > 0:
            self.bank_attention = cast_copy(bank.attention, dtype)
            with torch.no_grad():
                queries = self.bank_attention.project_query(bank.queries.detach().to(dtype))  # [H, M, d_h]
            self.register_buffer("task_queries", queries.unsqueeze(0), persistent=False)
        blocks = model.velocity_network.blocks
        self.visual_blocks = [i for i, block in enumerate(blocks) if block.visual_attention is not None]
        self.task_blocks = [i for i, block in enumerate(blocks) if block.task_attention is not None]
        self.num_blocks = len(blocks)
        for name, attentions in (
            ("visual", [blocks[i].visual_attention for i in self.visual_blocks]),
            ("task", [blocks[i].task_attention for i in self.task_blocks]),
        ):
            weight, bias = self._fused_key_value(attentions, dtype)
            self.register_buffer(f"{name}_key_value_weight", weight, persistent=False)
            self.register_buffer(f"{name}_key_value_bias", bias, persistent=False)

    @staticmethod
    def _fused_key_value(attentions: list[GazeFlowAttention], dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
        """Every block's K and V projections side by side: ``[d, 2 L d]`` and ``[2 L d]`` (block-major, K then V)."""
        if not attentions:
            return torch.empty(0, dtype=dtype), torch.empty(0, dtype=dtype)
        projections = [p for attention in attentions for p in (attention.k_proj, attention.v_proj)]
        weight = torch.cat([p.weight.detach() for p in projections]).t().to(dtype).contiguous()
        return weight, torch.cat([p.bias.detach() for p in projections]).to(dtype)

    def _block_key_values(
        self, tokens: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, blocks: list[int]
    ) -> tuple[tuple[torch.Tensor, torch.Tensor] | None, ...]:
        """Per block, keys and values ``[B, H, L, d_h]`` of ``tokens [B, L, d]`` (None for blocks without the
        sub-layer)."""
        if not blocks:
            return (None,) * self.num_blocks
        batch, length, width = tokens.shape
        projected = torch.addmm(bias, tokens.reshape(batch * length, width), weight)
        projected = projected.view(batch, length, 2 * len(blocks), self.num_heads, self.head_dim)
        heads = projected.permute(2, 0, 3, 1, 4).contiguous().unbind(0)  # 2 L x [B, H, L, d_h]
        key_values: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * self.num_blocks
        for position, block in enumerate(blocks):
            key_values[block] = (heads[2 * position], heads[2 * position + 1])
        return tuple(key_values)

    def task_bank(
        self,
        visual_tokens: torch.Tensor,
        summaries: torch.Tensor,
        summary_cache: GazeFlowRingKeyValueCache | None,
        positions: StreamingPositions,
    ) -> torch.Tensor:
        """c_task(t) ``[B, M + 1, d]`` over the summary ring, after writing V_bar_t (in place) into it.

        Twin of ``modeling_gazeflow_causal.causal_task_bank``: change both; held equal by
        ``tests/test_causal_streaming.py::test_streamer_equals_the_causal_model_on_every_prefix``.
        """
        summary = visual_tokens.mean(dim=1, keepdim=True)  # V_bar_t [B, 1, d]
        summaries.index_copy_(1, positions.slot, summary)
        pooled = summaries.sum(dim=1, keepdim=True) / positions.count.to(summaries.dtype)  # p_t; unwritten: 0
        if self.num_queries == 0:
            return pooled
        keys, values = summary_cache.write(positions.slot, *self.bank_attention.project_key_value(summary))
        batch = summaries.shape[0]
        query = self.task_queries.expand(batch, -1, -1, -1)
        mask = positions.slot_mask.view(1, 1, 1, -1)
        task_queries, _ = self.bank_attention.attend(query, keys, values, mask)  # [B, M, d]
        return torch.cat([pooled, task_queries], dim=1)

    def forward(
        self,
        encoder_tokens: torch.Tensor,
        summaries: torch.Tensor | None,
        summary_cache: GazeFlowRingKeyValueCache | None,
        positions: StreamingPositions,
        temporal_caches: tuple[GazeFlowRingKeyValueCache, ...] = (),
    ) -> StreamingCondition:
        """``encoder_tokens [B, N, D]`` of frame t -> :class:`StreamingCondition`; the rings (``temporal_caches``:
        one per temporal layer of the spatial encoder, ``[B * N, H, W, d_h]``) are updated in place."""
        visual = self.spatial_encoder.forward_newest(  # c_v [B, N, d]
            self.visual_projection(encoder_tokens), temporal_caches, positions.slot, positions.slot_mask
        )
        task = self.task_bank(visual, summaries, summary_cache, positions) if self.has_task_bank else None
        visual_kv = self._block_key_values(
            visual, self.visual_key_value_weight, self.visual_key_value_bias, self.visual_blocks
        )
        task_kv = (
            self._block_key_values(task, self.task_key_value_weight, self.task_key_value_bias, self.task_blocks)
            if task is not None
            else (None,) * self.num_blocks
        )
        return StreamingCondition(visual, task, visual_kv, task_kv)


@dataclass
class StreamingCondition:
    """Frame t's condition: c_v(t) ``[B, N, d]``, c_task(t) ``[B, M + 1, d]`` (None without the top-down path) and
    every block's keys/values of each, ``[B, H, N, d_h]`` and ``[B, H, M + 1, d_h]`` (None where a block lacks the
    sub-layer)."""

    visual_tokens: torch.Tensor
    task_tokens: torch.Tensor | None
    visual_key_values: tuple[tuple[torch.Tensor, torch.Tensor] | None, ...]
    task_key_values: tuple[tuple[torch.Tensor, torch.Tensor] | None, ...]


# ---------------------------------------------------------------------------------------------------- network
class GazeFlowStreamingBlock(PreparedRowLayers):
    """One ``GazeFlowDenoiserBlock`` on the newest frame's gaze tokens ``[B K, d]``, its weights prepared once.

    (1) self-attention: the query and the key of frame t (RoPE-rotated by t) and its value, then the K samples'
    queries attend to the ring of the last W frames' keys (slots not written yet masked); (2) visual and (3) gated
    task cross-attention to frame t's keys/values; (4) the MLP. Attention goes through the configured kernel
    (``config._attn_implementation``, transformers' attention interface).

    Twin of ``modeling_gazeflow_layers.GazeFlowDenoiserBlock``: change both; held equal by
    ``tests/test_causal_streaming.py::test_streamer_equals_the_causal_model_on_every_prefix``.
    """

    is_causal = False  # read by transformers' attention functions: masks are explicit

    def __init__(self, block: GazeFlowDenoiserBlock, config: GazeFlowConfig, dtype: torch.dtype, rotary: bool):
        super().__init__()
        self.config = config
        self.hidden_size, self.head_dim = config.hidden_size, config.head_dim
        self.num_heads = config.num_attention_heads
        self.scaling = self.head_dim**-0.5
        self.layer_norm_eps = config.layer_norm_eps
        self.rotary = rotary
        self.has_visual = block.visual_attention is not None
        self.has_task = block.task_attention is not None
        attention = block.self_attention
        # [2d, d]: q (with the attention's scale 1 / sqrt(d_h) folded in) then k
        weight = torch.cat([attention.q_proj.weight.detach() * self.scaling, attention.k_proj.weight.detach()])
        bias = torch.cat([attention.q_proj.bias.detach() * self.scaling, attention.k_proj.bias.detach()])
        value_weight, value_bias = attention.v_proj.weight.detach(), attention.v_proj.bias.detach()
        if rotary:  # q and k, their pair-swapped copies and v apart: rotated once per frame (rotated_projection)
            self.register_prepared(
                {
                    "qk_weight": weight.t(),
                    "qk_bias": bias,
                    "qk_swapped_weight": rotate_pairs(weight.t()),
                    "qk_swapped_bias": rotate_pairs(bias),
                    "value_weight": value_weight.t(),
                    "value_bias": value_bias,
                },
                dtype,
            )
        else:
            self.register_prepared(
                {"qkv_weight": torch.cat([weight, value_weight]).t(), "qkv_bias": torch.cat([bias, value_bias])}, dtype
            )
        self.prepare_linear("self_out", attention.o_proj, dtype)
        self.prepare_layer_norm("self_norm", block.self_attention_norm, dtype)
        if self.has_visual:
            self.prepare_layer_norm("visual_norm", block.visual_attention_norm, dtype)
            self.prepare_linear("visual_query", block.visual_attention.q_proj, dtype)
            self.prepare_linear("visual_out", block.visual_attention.o_proj, dtype)
        if self.has_task:
            self.prepare_layer_norm("task_norm", block.task_attention_norm, dtype)
            self.prepare_linear("task_query", block.task_attention.q_proj, dtype)
            self.prepare_linear("task_out", block.task_attention.o_proj, dtype)
            self.register_prepared({"task_gate": torch.sigmoid(block.task_gate.detach())}, dtype)
        self.prepare_layer_norm("mlp_norm", block.mlp_norm, dtype)
        self.prepare_linear("fc1", block.mlp.fc1, dtype)
        self.prepare_linear("fc2", block.mlp.fc2, dtype)

    def _attend(
        self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None
    ) -> torch.Tensor:
        """The configured attention kernel: context ``[B', L, H, d_h]``."""
        context, _ = attention_function(self.config._attn_implementation)(
            self, query, key, value, mask, scaling=self.scaling, dropout=0.0, is_causal=False
        )
        return context

    def _attend_single_query(
        self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        """The newest frame's query (already scaled) against the ring: context ``[B K, 1, H, d_h]``. On a CPU, for
        the math kernels (``sdpa``, ``eager``), :data:`SINGLE_QUERY_ATTENTION`, the same attention in half the ops;
        elsewhere the configured kernel (on CUDA one fused SDPA kernel)."""
        implementation = self.config._attn_implementation
        if query.device.type == "cpu" and implementation in (None, "eager", "sdpa"):
            implementation = SINGLE_QUERY_ATTENTION
        context, _ = attention_function(implementation)(
            self, query, key, value, mask, scaling=1.0, dropout=0.0, is_causal=False
        )
        return context

    def rotated_projection(
        self, rotary_cos: torch.Tensor, rotary_sin: torch.Tensor, rows: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The self-attention's Q/K/V projection ``(W^T [d, 3 d], b)`` with frame t's RoPE rotation (Appendix C.2)
        folded into its query and key columns: ``x W_rot + b_rot`` is ``(x W + b) * cos + (x W_swap + b_swap) *
        sin`` (``rotary_*`` ``[2 d]``), made once per frame for every sampler call (all rows of a call are frame
        t). The bias is broadcast to the ``rows`` of a call on a CPU (``PreparedRowLayers``)."""
        weight = torch.cat(
            [torch.addcmul(self.qk_weight * rotary_cos, self.qk_swapped_weight, rotary_sin), self.value_weight], dim=1
        )
        bias = torch.cat([torch.addcmul(self.qk_bias * rotary_cos, self.qk_swapped_bias, rotary_sin), self.value_bias])
        return weight, (bias.expand(rows, -1) if bias.device.type == "cpu" else bias)

    def _self_attention(
        self,
        hidden: torch.Tensor,
        cache: GazeFlowRingKeyValueCache,
        projection: tuple[torch.Tensor, torch.Tensor] | None,
        frame: StreamingFrameInputs,
        positions: StreamingPositions,
    ) -> torch.Tensor:
        rows, width = hidden.shape
        normed = self.layer_norm("self_norm", hidden)
        if projection is None:
            projected = self.linear("qkv", normed)
        else:
            projected = torch.addmm(projection[1], normed, projection[0])
        split = (rows, self.num_heads, 1, self.head_dim)
        keys, values = cache.write(
            positions.slot, projected[:, width : 2 * width].view(split), projected[:, 2 * width :].view(split)
        )
        context = self._attend_single_query(projected[:, :width].view(split), keys, values, frame.self_attention_mask)
        return hidden + self.linear("self_out", context.reshape(rows, width))

    def _cross_attention(
        self, hidden: torch.Tensor, name: str, key_value: tuple[torch.Tensor, torch.Tensor], batch: int
    ) -> torch.Tensor:
        """The update of per-frame cross-attention ``name`` ("visual" or "task"): the K samples of each clip query
        its frame's keys/values (``_per_group_cross_attention`` with one frame)."""
        rows, width = hidden.shape
        query = self.linear(f"{name}_query", self.layer_norm(f"{name}_norm", hidden))
        query = query.view(batch, rows // batch, self.num_heads, self.head_dim).transpose(1, 2)  # [B, H, K, d_h]
        context = self._attend(query, *key_value, None)  # [B, K, H, d_h]
        return self.linear(f"{name}_out", context.reshape(rows, width))

    def forward(
        self,
        hidden: torch.Tensor,
        cache: GazeFlowRingKeyValueCache,
        projection: tuple[torch.Tensor, torch.Tensor] | None,
        frame: StreamingFrameInputs,
        positions: StreamingPositions,
        visual_kv: tuple[torch.Tensor, torch.Tensor] | None,
        task_kv: tuple[torch.Tensor, torch.Tensor] | None,
        batch: int,
    ) -> torch.Tensor:
        """``hidden [B K, d]`` -> ``[B K, d]``; ``projection`` the block's :meth:`rotated_projection` of frame t
        (None without RoPE)."""
        hidden = self._self_attention(hidden, cache, projection, frame, positions)
        if self.has_visual:
            hidden = hidden + self._cross_attention(hidden, "visual", visual_kv, batch)
        if self.has_task:
            hidden = torch.addcmul(hidden, self.task_gate, self._cross_attention(hidden, "task", task_kv, batch))
        update = functional.gelu(self.linear("fc1", self.layer_norm("mlp_norm", hidden)))
        return hidden + self.linear("fc2", update)


@dataclass
class StreamingFrameInputs:
    """What every network call of frame t shares (built once per frame by
    :meth:`GazeFlowStreamingVelocityNetwork.frame_inputs`).

    Attributes:
        call_biases: ``[calls, d]`` (on a CPU broadcast to ``[calls, B K, d]``): per sampler call, the constant
            part of the gaze-token input (the embeddings' biases, E_time(s) of that call, the learned position's row).
        concat_bias: ``[B K, d]``, the concatenated task bank's share of ``task_guidance="concat"``'s projection
            (with its bias), else None.
        self_attention_mask: ``[1, 1, 1, W]`` additive mask of the ring slots.
        projections: per block, the self-attention's Q/K/V projection with frame t's RoPE rotation folded in
            (:meth:`GazeFlowStreamingBlock.rotated_projection`; None without RoPE).
    """

    call_biases: torch.Tensor
    concat_bias: torch.Tensor | None
    self_attention_mask: torch.Tensor
    projections: tuple[tuple[torch.Tensor, torch.Tensor] | None, ...]


class GazeFlowStreamingVelocityNetwork(PreparedRowLayers):
    """v_theta(x_s, s, c) on the newest frame's K gaze tokens: ``GazeFlowVelocityNetwork`` with T = 1 and a ring
    key/value cache per block (Section 3.2, Appendix C; the causal variant of Appendix F.4).

    The input embedding h = E_coord(x_s) + E_self(x1_hat) + E_time(s) (+ the learned position, or through the
    concatenated task bank) is two products: the two sinusoidal MLPs' first layers as one block-diagonal product,
    their second layers as one product whose bias carries both biases and E_time(s) of the call (the sampler's flow
    times are known when the streamer is built: ``flow_times``).

    Twin of ``modeling_gazeflow_velocity.GazeFlowVelocityNetwork``: change both; held equal by
    ``tests/test_causal_streaming.py::test_streamer_equals_the_causal_model_on_every_prefix``.
    """

    def __init__(self, network: nn.Module, config: GazeFlowConfig, dtype: torch.dtype, flow_times: list[float]):
        super().__init__()
        self.hidden_size, self.dtype = config.hidden_size, dtype
        self.flow_times = list(flow_times)
        self.rotary = network.rotary_embedding is not None
        self.blocks = nn.ModuleList(
            [GazeFlowStreamingBlock(block, config, dtype, self.rotary) for block in network.blocks]
        )
        coordinate, self_condition = network.coordinate_embedding, network.self_condition_embedding
        with torch.no_grad():
            times = torch.tensor(self.flow_times, dtype=torch.float32, device=coordinate.linear_in.weight.device)
            time_embeddings = network.time_embedding(times).float()  # E_time(s) of each sampler call [calls, d]
        frequencies = sinusoidal_frequencies(coordinate.feature_size // coordinate.num_inputs, device=times.device)
        self.register_buffer("frequencies", frequencies, persistent=False)
        # float32 as the angles: the same product as the Python float, without wrapping it at every call
        self.register_buffer(
            "coordinate_scale", torch.tensor(COORDINATE_EMBEDDING_SCALE, device=times.device), persistent=False
        )
        first = torch.block_diag(coordinate.linear_in.weight.detach(), self_condition.linear_in.weight.detach())
        second = torch.cat([coordinate.linear_out.weight.detach(), self_condition.linear_out.weight.detach()], dim=1)
        output_bias = coordinate.linear_out.bias.detach() + self_condition.linear_out.bias.detach()
        buffers = {
            "embedding_in_weight": first.t(),
            "embedding_in_bias": torch.cat([coordinate.linear_in.bias, self_condition.linear_in.bias]),
            "embedding_out_weight": second.t(),
            "call_biases": output_bias + time_embeddings,
            "output_norm_weight": network.output_norm.weight,
            "output_norm_bias": network.output_norm.bias,
            "output_weight": network.output_head.weight.t(),
            "output_bias": network.output_head.bias,
        }
        if self.rotary:  # frequencies of the q and k columns: per head, each pair's frequency twice
            pairs = network.rotary_embedding.inv_freq.repeat_interleave(2)
            buffers["rotary_frequencies"] = pairs.repeat(2 * config.num_attention_heads)
        self.learned_positions = network.frame_position is not None
        if self.learned_positions:
            buffers["position_table"] = network.frame_position.embedding
        self.task_concat = network.task_concat is not None
        if self.task_concat:
            projection = network.task_concat.projection
            buffers["concat_hidden_weight"] = projection.weight[:, : config.hidden_size].t()
            buffers["concat_bank_weight"] = projection.weight[:, config.hidden_size :].t()
            buffers["concat_bias"] = projection.bias
        for name, tensor in buffers.items():
            keep = torch.float64 if name == "rotary_frequencies" else dtype
            self.register_buffer(name, tensor.detach().to(keep).contiguous(), persistent=False)
        self.layer_norm_eps = config.layer_norm_eps

    @property
    def num_calls(self) -> int:
        return len(self.flow_times)

    def frame_inputs(
        self, positions: StreamingPositions, condition: StreamingCondition, rows: int
    ) -> StreamingFrameInputs:
        """The per-frame constants of every call of frame t, for ``rows = B K`` gaze tokens."""
        biases, concat_bias = self.call_biases, None
        if self.learned_positions:  # the newest frame's row in the window: min(t, W - 1)
            biases = biases + self.position_table.index_select(0, (positions.count - 1).view(1))
        if self.task_concat:  # [h; vec(c_task)] W^T = h W_h^T + vec(c_task) W_c^T, the second once per frame
            batch = condition.task_tokens.shape[0]
            bank = torch.addmm(self.concat_bias, condition.task_tokens.reshape(batch, -1), self.concat_bank_weight)
            concat_bias = bank.repeat_interleave(rows // batch, dim=0)  # [B K, d]
        projections = (None,) * len(self.blocks)
        if self.rotary:
            phases = rotary_phases(positions.frame_index, self.rotary_frequencies)
            cos, sin = phases.cos().to(self.dtype), phases.sin().to(self.dtype)
            projections = tuple(block.rotated_projection(cos, sin, rows) for block in self.blocks)
        mask = positions.slot_mask.view(1, 1, 1, -1)  # broadcast over the B K rows and the heads
        if biases.device.type == "cpu":  # each call's bias broadcast to the rows once (PreparedRowLayers)
            biases = biases.unsqueeze(1).expand(-1, rows, -1)
        return StreamingFrameInputs(biases, concat_bias, mask, projections)

    def embed(
        self, sample: torch.Tensor, self_condition: torch.Tensor, call: int, frame: StreamingFrameInputs
    ) -> torch.Tensor:
        """The gaze tokens' input ``[B K, d]`` of call ``call``: E_coord(x_s) + E_self(x1_hat) + E_time(s_call)
        (+ the learned position; then the concatenated task bank's projection)."""
        rows = sample.shape[0] * sample.shape[1]
        values = torch.cat([sample, self_condition], dim=-1).view(rows, 4)  # x, y of x_s, then of x1_hat
        features = sinusoidal_features(values, self.frequencies, self.coordinate_scale).view(rows, 2 * self.hidden_size)
        features = features if features.dtype == self.dtype else features.to(self.dtype)
        hidden = functional.silu(self.linear("embedding_in", features))
        hidden = self.linear("embedding_out", hidden, frame.call_biases[call])
        if frame.concat_bias is not None:
            hidden = torch.addmm(frame.concat_bias, hidden, self.concat_hidden_weight)
        return hidden

    def forward(
        self,
        sample: torch.Tensor,
        self_condition: torch.Tensor,
        call: int,
        frame: StreamingFrameInputs,
        positions: StreamingPositions,
        condition: StreamingCondition,
        caches: tuple[GazeFlowRingKeyValueCache, ...],
    ) -> torch.Tensor:
        """The velocity ``[B, K, 1, 2]`` (float32) at ``sample``/``self_condition`` ``[B, K, 1, 2]`` (float32), for
        the sampler's call number ``call`` (its flow time is ``flow_times[call]``); ``caches`` are that call's ring
        caches, one per block, updated in place."""
        batch, samples = sample.shape[:2]
        hidden = self.embed(sample, self_condition, call, frame)
        for block, cache, projection, visual_kv, task_kv in zip(
            self.blocks, caches, frame.projections, condition.visual_key_values, condition.task_key_values
        ):
            hidden = block(hidden, cache, projection, frame, positions, visual_kv, task_kv, batch)
        velocity = self.linear("output", self.layer_norm("output_norm", hidden))
        velocity = velocity.view(batch, samples, 1, 2)
        return velocity if velocity.dtype == torch.float32 else velocity.float()


__all__ = [
    "rotary_phases",
    "StreamingPositions",
    "streaming_positions",
    "cast_copy",
    "GazeFlowStreamingCondition",
    "StreamingCondition",
    "GazeFlowStreamingBlock",
    "StreamingFrameInputs",
    "GazeFlowStreamingVelocityNetwork",
]
