"""The encoder side of GazeFlow after its backbone, E_psi's head: from V-JEPA 2's tokens to the condition
c = (c_v, c_task) (paper Section 3.1, Appendix C.1). The backbone, V-JEPA 2, is ``modeling_gazeflow_video_encoder``.

* :class:`GazeFlowSpatialEncoder` - W_proj's tokens plus a 2D sin-cos position encoding through pre-norm layers
  applied to each frame on its own (Eq. visual_condition): c_v. Optionally (``num_temporal_layers``, beyond the
  paper) :class:`GazeFlowTemporalEncoderLayer`'s first mix each spatial position across the window's frame groups.
* :class:`GazeFlowTaskTokenBank` - the top-down bank c_task = [p; q_1..q_M] (Eqs. task_slots, task_bank).
* :class:`GazeFlowConditionEncoder` - W_proj, the spatial encoder and the task bank together.
* :class:`GazeFlowCondition` - one clip's condition with every block's keys/values, built once and shared by the K
  samples and S steps (``GazeFlowModel.build_condition``). It is a pytree, so a velocity step taking it exports
  with ``torch.export``.

Each part returns its main tensor; asked for ``output_attentions`` / ``output_hidden_states`` it returns a
``ModelOutput`` carrying them (shapes in each docstring).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.utils._pytree as pytree
from torch import nn
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import BaseModelOutput
from transformers.utils import ModelOutput

from .configuration_gazeflow import GazeFlowConfig
from .modeling_gazeflow_attention import GazeFlowAttention, GazeFlowRingKeyValueCache, causal_attention_mask
from .modeling_gazeflow_causal import causal_task_bank
from .modeling_gazeflow_embeddings import sincos_2d_position_encoding
from .modeling_gazeflow_layers import GazeFlowMLP


# ---------------------------------------------------------------------------------------------------- condition
@dataclass
class GazeFlowCondition:
    """The per-clip condition c = (c_v, c_task) with every block's keys/values, computed once per clip.

    Attributes:
        visual_tokens: c_v, ``[B, G, N, d]``: spatial tokens after W_proj and the spatial encoder, one entry per
            group of ``frames_per_group`` consecutive frames that read the same encoder tokens.
        task_tokens: c_task = [p; q_1..q_M], ``[B, M + 1, d]``; the causal variant has a bank per group,
            ``[B, G, M + 1, d]`` (``task_per_frame``); None without the top-down path.
        visual_key_values: per block, keys and values of c_v, each ``[B, G, H, N, d_h]`` (None for a block without
            visual cross-attention).
        task_key_values: per block, keys and values of c_task, each ``[B, H, M + 1, d_h]`` or, per frame group,
            ``[B, G, H, M + 1, d_h]`` (None for a block without task cross-attention).
        num_frames: T, the frames of the window.
        frames_per_group: g; ``T = G * g``.
        task_per_frame: whether c_task has a bank per group (the causal variant).

    Every tensor has the clip batch B as its first dimension, so conditions can be sliced and concatenated by clip.
    """

    visual_tokens: torch.Tensor
    task_tokens: torch.Tensor | None
    visual_key_values: tuple[tuple[torch.Tensor, torch.Tensor] | None, ...]
    task_key_values: tuple[tuple[torch.Tensor, torch.Tensor] | None, ...]
    num_frames: int
    frames_per_group: int
    task_per_frame: bool = False

    @property
    def batch_size(self) -> int:
        return self.visual_tokens.shape[0]

    def select_clips(self, rows: slice) -> GazeFlowCondition:
        """The condition of the clips ``rows`` of the batch (views, no copy): the windows of a batch are built
        together and sampled one at a time."""

        def cut(tensor: torch.Tensor | None) -> torch.Tensor | None:
            return None if tensor is None else tensor[rows]

        def cut_pairs(pairs: tuple) -> tuple:
            return tuple(None if pair is None else (pair[0][rows], pair[1][rows]) for pair in pairs)

        return GazeFlowCondition(
            cut(self.visual_tokens),
            cut(self.task_tokens),
            cut_pairs(self.visual_key_values),
            cut_pairs(self.task_key_values),
            self.num_frames,
            self.frames_per_group,
            self.task_per_frame,
        )

    def dynamic_shapes(self, batch: object) -> list:
        """``torch.export`` dynamic-shape spec of this condition with its clip batch (every tensor's dimension 0)
        marked ``batch`` (e.g. ``torch.export.Dim("batch")``), in the form export expects for this pytree node."""
        return [pytree.tree_map(lambda _: {0: batch}, getattr(self, name)) for name in _CONDITION_TENSORS]


_CONDITION_TENSORS = ("visual_tokens", "task_tokens", "visual_key_values", "task_key_values")
_CONDITION_SIZES = ("num_frames", "frames_per_group", "task_per_frame")


def _flatten_condition(condition: GazeFlowCondition):
    return [getattr(condition, name) for name in _CONDITION_TENSORS], tuple(
        getattr(condition, name) for name in _CONDITION_SIZES
    )


def _flatten_condition_with_keys(condition: GazeFlowCondition):
    children, context = _flatten_condition(condition)
    return [(pytree.GetAttrKey(name), child) for name, child in zip(_CONDITION_TENSORS, children)], context


def _unflatten_condition(children, context) -> GazeFlowCondition:
    return GazeFlowCondition(*children, *context)


try:  # the tensors are the pytree's leaves; T, g and the per-frame flag are its (static) structure
    pytree.register_pytree_node(
        GazeFlowCondition,
        _flatten_condition,
        _unflatten_condition,
        serialized_type_name=f"{__name__}.GazeFlowCondition",
        flatten_with_keys_fn=_flatten_condition_with_keys,
    )
except ValueError:  # already registered (the module was imported twice under one name)
    pass


# ---------------------------------------------------------------------------------------------------- video encoder
# ---------------------------------------------------------------------------------------------------- c_v
class GazeFlowSpatialEncoderLayer(GradientCheckpointingLayer):
    """One pre-norm Transformer encoder layer over the N spatial tokens of a single frame (Appendix C.1).

    Returns the tokens and, with ``output_attentions``, the weights ``[B * G, H, N, N]`` (else None)."""

    def __init__(self, config: GazeFlowConfig):
        super().__init__()
        self.attention_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.attention = GazeFlowAttention(config)
        self.mlp_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.mlp = GazeFlowMLP(config.hidden_size, config.intermediate_size)

    def forward(
        self, tokens: torch.Tensor, output_attentions: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        update, weights = self.attention.self_attention(
            self.attention_norm(tokens), output_attentions=output_attentions
        )
        return self.add_update_and_mlp(tokens, update), weights

    def add_update_and_mlp(self, tokens: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
        """The layer after its attention: the attention's residual, then the pre-norm MLP's."""
        tokens = tokens + update
        return tokens + self.mlp(self.mlp_norm(tokens))


class GazeFlowTemporalEncoderLayer(GazeFlowSpatialEncoderLayer):
    """One pre-norm layer of divided space-time attention over time (beyond the paper; TimeSformer, Bertasius et
    al., ICML 2021): the sequences are the G frame groups of one spatial position, ``[B * N, G, d]``, row ``b * N +
    n`` position n of clip b. No temporal position encoding: a position attends to its own place in every group
    alike (or, with the causal mask, in the groups <= its own).

    Returns the tokens and, with ``output_attentions``, the weights ``[B * N, H, G, G]`` (else None)."""

    def forward(
        self, tokens: torch.Tensor, attention_mask: torch.Tensor | None = None, output_attentions: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The layer over the G groups of every spatial position, ``tokens [B * N, G, d]`` (``attention_mask``: the
        spatial encoder's ``temporal_attention_mask``, causal in the causal model).

        Twin of ``modeling_gazeflow_encoder.GazeFlowTemporalEncoderLayer.forward_newest``: change both; held equal by
        ``tests/test_temporal_layers.py::test_streamer_condition_past_the_window_equals_the_causal_encoder_on_the_last_w_frames``.
        """
        update, weights = self.attention.self_attention(
            self.attention_norm(tokens), attention_mask=attention_mask, output_attentions=output_attentions
        )
        return self.add_update_and_mlp(tokens, update), weights

    def forward_newest(
        self, tokens: torch.Tensor, cache: GazeFlowRingKeyValueCache, slot: torch.Tensor, slot_mask: torch.Tensor
    ) -> torch.Tensor:
        """The layer for the newest frame group only (the causal streamer): ``tokens [R, 1, d]`` (R = B * N
        positions) write their keys/values into ``slot`` of the ring ``cache`` (``[R, H, W, d_h]``, in place) and
        attend to every slot that holds a group (``slot_mask`` ``[W]``, additive): the causal layer's row of the
        newest group over the last W groups.

        Twin of ``modeling_gazeflow_encoder.GazeFlowTemporalEncoderLayer.forward``: change both; held equal by
        ``tests/test_temporal_layers.py::test_streamer_condition_past_the_window_equals_the_causal_encoder_on_the_last_w_frames``.
        """
        normed = self.attention_norm(tokens)
        keys, values = cache.write(slot, *self.attention.project_key_value(normed))
        query = self.attention.project_query(normed)  # [R, H, 1, d_h]
        update, _ = self.attention.attend(query, keys, values, slot_mask.view(1, 1, 1, -1))
        return self.add_update_and_mlp(tokens, update)


@dataclass
class GazeFlowSpatialEncoderOutput(BaseModelOutput):
    """Output of :class:`GazeFlowSpatialEncoder` asked for attentions or hidden states.

    Args:
        last_hidden_state: c_v ``[B, G, N, d]``.
        hidden_states: the position-encoded input, then every temporal layer's and every spatial layer's output,
            ``num_temporal_layers + num_spatial_layers + 1`` tensors ``[B * G, N, d]`` (row ``b * G + g``).
        attentions: every spatial layer's weights ``[B * G, H, N, N]``.
        temporal_attentions: every temporal layer's weights ``[B * N, H, G, G]`` (row ``b * N + n``: position n
            of clip b over the G groups); None without temporal layers.
    """

    temporal_attentions: tuple[torch.FloatTensor, ...] | None = None


class GazeFlowSpatialEncoder(nn.Module):
    """The visual-token encoder: 2D sin-cos position encoding, optional temporal layers, pre-norm spatial layers
    (Appendix C.1).

    The spatial layers work on each frame group on its own, ``[B * G, N, d]``. With ``config.num_temporal_layers``
    > 0 (beyond the paper, divided space-time attention), :class:`GazeFlowTemporalEncoderLayer`'s run first, each
    spatial position attending to the same position in the window's G groups (causal model: groups <= its own);
    with 0 (the default, the paper's) frames are never mixed. Input and output ``[B, G, N, d]``. With the output
    flags returns a :class:`GazeFlowSpatialEncoderOutput`: ``hidden_states`` the position-encoded input and every
    layer's output (temporal layers first, ``num_temporal_layers + num_spatial_layers + 1`` entries of
    ``[B * G, N, d]``, row ``b * G + g`` for group g of clip b, as the spatial layers compute them), ``attentions``
    every spatial layer's ``[B * G, H, N, N]``, ``temporal_attentions`` every temporal layer's ``[B * N, H, G, G]``.
    """

    def __init__(self, config: GazeFlowConfig):
        super().__init__()
        self.grid_size = config.token_grid_size
        self.hidden_size = config.hidden_size
        self.causal = config.causal
        self.register_buffer("position_encoding", self.compute_position_encoding(), persistent=False)
        self.temporal_layers = nn.ModuleList(
            [GazeFlowTemporalEncoderLayer(config) for _ in range(config.num_temporal_layers)]
        )
        self.layers = nn.ModuleList([GazeFlowSpatialEncoderLayer(config) for _ in range(config.num_spatial_layers)])
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def compute_position_encoding(self) -> torch.Tensor:
        """The fixed 2D sin-cos encoding (recomputed by ``_init_weights``: buffers are not saved)."""
        return sincos_2d_position_encoding(self.grid_size, self.hidden_size)

    def temporal_attention_mask(self, groups: int, device: torch.device) -> torch.Tensor | None:
        """The temporal layers' mask over the G groups: causal (group g attends to groups <= g) in the causal
        model, none otherwise."""
        return causal_attention_mask(groups, device) if self.causal else None

    def forward(
        self, tokens: torch.Tensor, output_attentions: bool = False, output_hidden_states: bool = False
    ) -> torch.Tensor | GazeFlowSpatialEncoderOutput:
        """c_v of every frame group of a window: W_proj's tokens ``[B, G, N, d]`` -> ``[B, G, N, d]`` (the class
        docstring says what the output flags add).

        Twin of ``modeling_gazeflow_encoder.GazeFlowSpatialEncoder.forward_newest``: change both; held equal by
        ``tests/test_temporal_layers.py::test_streamer_condition_past_the_window_equals_the_causal_encoder_on_the_last_w_frames``.
        """
        batch, groups, num_tokens, width = tokens.shape
        hidden = (tokens + self.position_encoding.to(tokens.dtype)).reshape(batch * groups, num_tokens, width)
        all_hidden_states = (hidden,) if output_hidden_states else None
        all_attentions = () if output_attentions else None
        temporal_attentions = () if output_attentions and len(self.temporal_layers) else None
        if len(self.temporal_layers):
            per_position = hidden.view(batch, groups, num_tokens, width).transpose(1, 2)
            per_position = per_position.reshape(batch * num_tokens, groups, width)  # [B * N, G, d]
            mask = self.temporal_attention_mask(groups, tokens.device)

            def per_group(rows: torch.Tensor) -> torch.Tensor:  # [B * N, G, d] -> [B * G, N, d]
                rows = rows.view(batch, num_tokens, groups, width).transpose(1, 2)
                return rows.reshape(batch * groups, num_tokens, width)

            for layer in self.temporal_layers:
                per_position, weights = layer(per_position, mask, output_attentions)
                if output_hidden_states:
                    all_hidden_states += (per_group(per_position),)
                if output_attentions:
                    temporal_attentions += (weights,)
            hidden = per_group(per_position)
        for layer in self.layers:
            hidden, weights = layer(hidden, output_attentions)
            if output_hidden_states:
                all_hidden_states += (hidden,)
            if output_attentions:
                all_attentions += (weights,)
        hidden = self.norm(hidden).view(batch, groups, num_tokens, width)
        if not (output_attentions or output_hidden_states):
            return hidden
        return GazeFlowSpatialEncoderOutput(
            last_hidden_state=hidden,
            hidden_states=all_hidden_states,
            attentions=all_attentions,
            temporal_attentions=temporal_attentions,
        )

    def forward_newest(
        self,
        tokens: torch.Tensor,
        temporal_caches: tuple[GazeFlowRingKeyValueCache, ...],
        slot: torch.Tensor,
        slot_mask: torch.Tensor,
    ) -> torch.Tensor:
        """c_v of the newest frame group in the causal streamer: ``tokens [B, N, d]`` -> ``[B, N, d]``; each
        temporal layer reads and writes its ring of the last W groups' keys/values (``temporal_caches``, one
        ``[B * N, H, W, d_h]`` ring per layer, written at ``slot``; ``slot_mask`` ``[W]`` additive). Within the first
        W groups this equals the causal :meth:`forward`'s row of the newest group; past them each layer attends to
        the last W groups, whose keys in a second or later temporal layer were computed with their own W-group
        context (a key/value cache's sliding window, as in the velocity network's frame self-attention).

        Twin of ``modeling_gazeflow_encoder.GazeFlowSpatialEncoder.forward``: change both; held equal by
        ``tests/test_temporal_layers.py::test_streamer_condition_past_the_window_equals_the_causal_encoder_on_the_last_w_frames``.
        """
        batch, num_tokens, width = tokens.shape
        hidden = tokens + self.position_encoding.to(tokens.dtype)
        if len(self.temporal_layers):
            rows = hidden.reshape(batch * num_tokens, 1, width)
            for layer, cache in zip(self.temporal_layers, temporal_caches, strict=True):
                rows = layer.forward_newest(rows, cache, slot, slot_mask)
            hidden = rows.view(batch, num_tokens, width)
        for layer in self.layers:
            hidden, _ = layer(hidden, False)
        return self.norm(hidden)


# ---------------------------------------------------------------------------------------------------- c_task
class GazeFlowTaskTokenBank(nn.Module):
    """The top-down task-token bank c_task = [p; q_1..q_M] (paper Eqs. task_slots and task_bank).

    Frame summaries V_bar_t are spatial means of c_v; p is their temporal mean; M learnable queries Q_task
    cross-attend (MHCA) to the T frame summaries. Frames of one group share one summary: a softmax over T keys in
    which every group appears g times equals the softmax over the G distinct keys, so the bank is computed on
    groups exactly.

    With ``num_task_queries=0`` only p is kept (no queries, no attention). In the causal variant the bank is
    per frame, over frames <= t (``modeling_gazeflow_causal.causal_task_bank``), ``[B, G, M + 1, d]``.
    Returns c_task; with ``output_attentions`` a ``BaseModelOutput`` whose ``attentions`` holds the queries'
    weights over the G summaries, ``[B, H, M, G]`` (causal: ``[B, H, G * M, G]``, query row ``g * M + m`` is query
    m of frame group g, masked past g).
    """

    def __init__(self, config: GazeFlowConfig):
        super().__init__()
        self.num_queries = config.num_task_queries
        self.causal = config.causal
        if self.num_queries > 0:
            self.queries = nn.Parameter(torch.zeros(config.num_task_queries, config.hidden_size))
            self.attention = GazeFlowAttention(config)

    def forward(self, visual_tokens: torch.Tensor, output_attentions: bool = False) -> torch.Tensor | BaseModelOutput:
        """c_task of c_v ``visual_tokens [B, G, N, d]`` (see the class docstring)."""
        frame_summaries = visual_tokens.mean(dim=2)  # V_bar: [B, G, d]
        if self.causal:
            task_tokens, weights = causal_task_bank(self, frame_summaries, output_attentions=output_attentions)
        else:
            task_tokens, weights = self.over_summaries(frame_summaries, output_attentions)
        if not output_attentions:
            return task_tokens
        return BaseModelOutput(last_hidden_state=task_tokens, attentions=(weights,))

    def over_summaries(
        self, frame_summaries: torch.Tensor, output_attentions: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """c_task = [p; q_1..q_M] ``[B, M + 1, d]`` over every given frame summary V_bar ``[B, G, d]``: p their mean,
        the M queries attending to them all (Eqs. task_slots, task_bank), and the queries' weights ``[B, H, M, G]``
        with ``output_attentions`` (else None). The windowed bank, and the causal bank's entry of the newest frame
        group (``causal_task_bank(..., last_only=True)``).

        Twin of ``modeling_gazeflow_causal.causal_task_bank``: change both; held equal by
        ``tests/test_causal_streaming.py::test_causal_task_bank_row_t_uses_frames_up_to_t_only``.
        """
        pooled = frame_summaries.mean(dim=1, keepdim=True)  # p: [B, 1, d]
        if self.num_queries == 0:
            return pooled, None
        batch = frame_summaries.shape[0]
        query = self.attention.project_query(self.queries.to(frame_summaries.dtype)).expand(batch, -1, -1, -1)
        key, value = self.attention.project_key_value(frame_summaries)
        task_queries, weights = self.attention.attend(query, key, value, output_attentions=output_attentions)
        return torch.cat([pooled, task_queries], dim=1), weights  # [p; q_1..q_M]: [B, M + 1, d]


# ---------------------------------------------------------------------------------------------------- grounding
class GazeFlowGroundingHead(nn.Module):
    """The auxiliary grounding head (beyond the paper; ``config.grounding_loss_weight > 0``): one linear score per
    spatial token of c_v, ``[B, G, N, d] -> [B, G, N]`` logits whose softmax over the N tokens of a frame group is
    trained to point at the recorded gaze (``modeling_gazeflow_objectives.grounding_loss``). It reads c_v only, so
    what it learns must be in the frames; the velocity network reads the same c_v."""

    def __init__(self, config: GazeFlowConfig):
        super().__init__()
        self.score = nn.Linear(config.hidden_size, 1)

    def forward(self, visual_tokens: torch.Tensor) -> torch.Tensor:
        return self.score(visual_tokens).squeeze(-1)


# ---------------------------------------------------------------------------------------------------- E_psi head
@dataclass
class GazeFlowConditionEncoderOutput(ModelOutput):
    """Output of :class:`GazeFlowConditionEncoder`.

    Args:
        visual_tokens: c_v ``[B, G, N, d]``.
        task_tokens: c_task ``[B, M + 1, d]`` (causal: ``[B, G, M + 1, d]``), None without the top-down path.
        spatial_hidden_states: the spatial encoder's input and per-layer outputs (temporal layers first), each
            ``[B * G, N, d]``.
        spatial_attentions: the spatial encoder's per-layer weights, each ``[B * G, H, N, N]``.
        task_bank_attentions: the task queries' weights over the frame summaries, ``[B, H, M, G]`` (causal:
            ``[B, H, G * M, G]``); None without task queries.
        temporal_attentions: the temporal layers' weights, each ``[B * N, H, G, G]``; None without them.
    """

    visual_tokens: torch.FloatTensor | None = None
    task_tokens: torch.FloatTensor | None = None
    spatial_hidden_states: tuple[torch.FloatTensor, ...] | None = None
    spatial_attentions: tuple[torch.FloatTensor, ...] | None = None
    task_bank_attentions: torch.FloatTensor | None = None
    temporal_attentions: tuple[torch.FloatTensor, ...] | None = None


class GazeFlowConditionEncoder(nn.Module):
    """E_psi after the backbone: W_proj (D -> d), the spatial encoder (-> c_v) and the task bank (-> c_task)."""

    def __init__(self, config: GazeFlowConfig):
        super().__init__()
        self.visual_projection = nn.Linear(config.encoder_config.hidden_size, config.hidden_size)
        self.spatial_encoder = GazeFlowSpatialEncoder(config)
        self.task_bank = GazeFlowTaskTokenBank(config) if config.uses_task_bank else None
        self.grounding_head = GazeFlowGroundingHead(config) if config.uses_grounding_head else None

    def forward(
        self, encoder_tokens: torch.Tensor, output_attentions: bool = False, output_hidden_states: bool = False
    ) -> GazeFlowConditionEncoderOutput:
        """``encoder_tokens [B, G, N, D]`` -> c_v ``[B, G, N, d]`` and c_task (or None)."""
        spatial = self.spatial_encoder(self.visual_projection(encoder_tokens), output_attentions, output_hidden_states)
        if isinstance(spatial, torch.Tensor):
            spatial = BaseModelOutput(last_hidden_state=spatial)
        task_tokens = bank_attentions = None
        if self.task_bank is not None:
            task_tokens = self.task_bank(spatial.last_hidden_state, output_attentions)
            if output_attentions:
                task_tokens, bank_attentions = task_tokens.last_hidden_state, task_tokens.attentions[0]
        return GazeFlowConditionEncoderOutput(
            visual_tokens=spatial.last_hidden_state,
            task_tokens=task_tokens,
            spatial_hidden_states=spatial.hidden_states,
            spatial_attentions=spatial.attentions,
            task_bank_attentions=bank_attentions,
            temporal_attentions=getattr(spatial, "temporal_attentions", None),
        )


__all__ = [
    "GazeFlowCondition",
    "GazeFlowSpatialEncoderLayer",
    "GazeFlowTemporalEncoderLayer",
    "GazeFlowSpatialEncoderOutput",
    "GazeFlowSpatialEncoder",
    "GazeFlowTaskTokenBank",
    "GazeFlowGroundingHead",
    "GazeFlowConditionEncoderOutput",
    "GazeFlowConditionEncoder",
]
