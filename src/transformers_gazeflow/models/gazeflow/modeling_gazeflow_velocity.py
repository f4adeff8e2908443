"""The conditional velocity network of GazeFlow, v_theta(x_s, s, c) (paper Section 3.2, Appendix C): coordinate,
timestep and self-conditioning embeddings, L DenoiserBlocks and a linear head to a velocity in R^{2T}.
"""

from __future__ import annotations

import torch
from torch import nn

from .configuration_gazeflow import GazeFlowConfig
from .modeling_gazeflow_attention import GazeFlowKeyValueCache, causal_attention_mask
from .modeling_gazeflow_embeddings import (
    COORDINATE_EMBEDDING_SCALE,
    TIME_EMBEDDING_SCALE,
    GazeFlowRotaryEmbedding,
    GazeFlowSinusoidalMLP,
    embed_gaze,
)
from .modeling_gazeflow_encoder import GazeFlowCondition
from .modeling_gazeflow_layers import GazeFlowDenoiserBlock
from .modeling_gazeflow_outputs import GazeFlowVelocityOutput
from .modeling_gazeflow_rows import layer_norm_rows, linear_rows
from .modeling_gazeflow_variants import GazeFlowLearnedFramePosition, GazeFlowTaskConcat
from .scheduling_gazeflow import correlate_noise


class GazeFlowVelocityNetwork(nn.Module):
    """The conditional velocity network v_theta(x_s, s, c) (paper Section 3.2, Appendix C).

    Gaze tokens h_t = E_coord(x_s,t) + E_time(s) + E_self(x1_hat_t) (our reading of what the paper leaves open,
    ``docs/specs/model.md``), L DenoiserBlocks, then LayerNorm + Linear(d -> 2) per frame: a velocity in R^{2T}. The
    frame position is 1D RoPE on the self-attention's queries and keys (Appendix C.2); the ablations' learned position
    table and concatenated task bank come from ``modeling_gazeflow_variants``.

    ``forward`` is free of Python branches on tensor values, so it exports with ``torch.export`` (the condition is
    a pytree); input checks live in :meth:`GazeFlowModel.velocity`.

    Twin of ``modeling_gazeflow_streaming.GazeFlowStreamingVelocityNetwork``: change both; held equal by
    ``tests/test_causal_streaming.py::test_streamer_equals_the_causal_model_on_every_prefix``.
    """

    def __init__(self, config: GazeFlowConfig):
        super().__init__()
        self.causal = config.causal
        self.coordinate_embedding = GazeFlowSinusoidalMLP(2, config.hidden_size, COORDINATE_EMBEDDING_SCALE)
        self.time_embedding = GazeFlowSinusoidalMLP(1, config.hidden_size, TIME_EMBEDDING_SCALE)
        self.self_condition_embedding = GazeFlowSinusoidalMLP(2, config.hidden_size, COORDINATE_EMBEDDING_SCALE)
        self.rotary_embedding = (
            GazeFlowRotaryEmbedding(config.head_dim, config.rope_theta) if config.position_encoding == "rope" else None
        )
        self.frame_position = GazeFlowLearnedFramePosition(config) if config.position_encoding == "learned" else None
        self.task_concat = (
            GazeFlowTaskConcat(config) if config.use_task_cross_attention and config.task_guidance == "concat" else None
        )
        self.blocks = nn.ModuleList([GazeFlowDenoiserBlock(config) for _ in range(config.num_hidden_layers)])
        self.output_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.output_head = nn.Linear(config.hidden_size, 2)
        self.whitening_correlation = config.noise_correlation if config.whitened_flow else 0.0
        self.window_mean_head = nn.Linear(config.hidden_size, 2) if config.window_mean_velocity else None

    def forward(
        self,
        sample: torch.Tensor,
        flow_time: torch.Tensor | None,
        self_condition: torch.Tensor,
        condition: GazeFlowCondition,
        positions: torch.Tensor | None = None,
        caches: list[GazeFlowKeyValueCache] | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        time_embedding: torch.Tensor | None = None,
        previous_velocity: torch.Tensor | None = None,
    ) -> torch.Tensor | GazeFlowVelocityOutput:
        """``sample``, ``self_condition``: ``[B, K, T, 2]``; ``flow_time``: ``[B, K]``; returns the velocity
        ``[B, K, T, 2]``, or a :class:`GazeFlowVelocityOutput` with ``output_attentions`` / ``output_hidden_states``.

        ``positions`` (frame indices of the T tokens, default ``0 .. T - 1``) and ``caches`` (one growing
        self-attention key/value cache per block) feed the newest frames only: plain incremental decoding, the
        reference the causal streamer's static step (``modeling_gazeflow_streaming``, ring caches) is tested against.
        Given ``positions``, the caller checks them against a learned position table: reading their values here would
        wait for the device at every call.
        ``time_embedding``: E_time(s) ``[B, K, d]`` computed already (``flow_time`` is then not read).
        With ``config.whitened_flow`` the head's output w is read as v = L w over the T frames (:meth:`read_head`);
        ``previous_velocity`` ``[B, K, 1, 2]``, the velocity of the frame before the first one fed (incremental
        decoding), continues that recursion.
        """
        batch, samples, frames, _ = sample.shape
        hidden = self.embed(sample, flow_time, self_condition, condition, positions, time_embedding)
        rotary_cos, rotary_sin = self.rotary_tables(frames, positions, sample.device, hidden.dtype)
        mask = causal_attention_mask(frames, sample.device) if self.causal and caches is None else None

        all_hidden_states = [hidden] if output_hidden_states else None
        all_attentions = ([], [], []) if output_attentions else None  # self, visual cross, task cross
        caches = caches if caches is not None else [None] * len(self.blocks)
        for block, visual_kv, task_kv, cache in zip(
            self.blocks, condition.visual_key_values, condition.task_key_values, caches
        ):
            visual_key, visual_value = visual_kv if visual_kv is not None else (None, None)
            task_key, task_value = task_kv if task_kv is not None else (None, None)
            # every tensor positional: reentrant gradient checkpointing passes gradients to positional inputs only
            hidden, *weights = block(
                hidden,
                visual_key,
                visual_value,
                task_key,
                task_value,
                rotary_cos,
                rotary_sin,
                mask,
                cache=cache,
                output_attentions=output_attentions,
            )
            if output_hidden_states:
                all_hidden_states.append(hidden)
            if output_attentions:
                for collected, layer_weights in zip(all_attentions, weights):
                    collected.append(layer_weights)
        rows = layer_norm_rows(self.output_norm, hidden.reshape(-1, hidden.shape[-1]))
        head = linear_rows(self, (self.output_head,), rows).view(batch, samples, frames, -1)
        window_mean = None
        if self.window_mean_head is not None:
            window_mean = self.window_mean_head(rows.view(batch, samples, frames, -1).mean(dim=2))
        velocity = self.read_head(head, previous_velocity, window_mean)
        if not (output_attentions or output_hidden_states):
            return velocity
        self_weights, visual_weights, task_weights = (
            (tuple(w) for w in all_attentions) if output_attentions else (None, None, None)
        )
        return GazeFlowVelocityOutput(
            velocity=velocity,
            hidden_states=tuple(all_hidden_states) if output_hidden_states else None,
            attentions=self_weights,
            visual_cross_attentions=visual_weights,
            task_cross_attentions=task_weights,
        )

    def read_head(
        self,
        head: torch.Tensor,
        previous_velocity: torch.Tensor | None = None,
        window_mean: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The velocity in model coordinates from the head's output ``[B, K, T, 2]``: the output itself, or with
        ``config.whitened_flow`` the AR(1) recursion v = L w over frames (``scheduling_gazeflow.correlate_noise``,
        continued from ``previous_velocity`` when given); with ``window_mean`` c ``[B, K, 2]``
        (``config.window_mean_velocity``) v = c 1 + (I - P) L w, L w's mean over the frames replaced by c."""
        if not self.whitening_correlation:
            return head
        velocity = correlate_noise(head, self.whitening_correlation, previous_velocity, frame_dim=-2)
        if window_mean is None:
            return velocity
        return velocity - velocity.mean(dim=-2, keepdim=True) + window_mean.unsqueeze(-2)

    def embed(
        self,
        sample: torch.Tensor,
        flow_time: torch.Tensor | None,
        self_condition: torch.Tensor,
        condition: GazeFlowCondition,
        positions: torch.Tensor | None,
        time_embedding: torch.Tensor | None,
    ) -> torch.Tensor:
        """The gaze tokens ``[B, K, T, d]`` the blocks start from: E_coord(x_s) + E_self(x1_hat) + E_time(s), plus
        the learned frame position or through the concatenated task bank when the config asks (arguments as
        :meth:`forward`'s)."""
        frames = sample.shape[2]
        if time_embedding is None:
            time_embedding = self.time_embedding(flow_time)
        hidden = embed_gaze(
            self.coordinate_embedding, self.self_condition_embedding, sample, self_condition
        ) + time_embedding.unsqueeze(2)
        if self.frame_position is not None and positions is None and not torch.compiler.is_compiling():
            self.frame_position.check_last_position(frames - 1)  # a Python int: no device read
        if self.frame_position is not None:
            hidden = self.frame_position(
                hidden, torch.arange(frames, device=sample.device) if positions is None else positions
            )
        if self.task_concat is not None:
            hidden = self.task_concat(hidden, condition.task_tokens, condition.frames_per_group)
        return hidden

    def rotary_tables(
        self, frames: int, positions: torch.Tensor | None, device: torch.device, dtype: torch.dtype
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """RoPE's cosines and signed sines of the T frames (``positions``, default ``0 .. T - 1``) for the query and
        key heads side by side, ``[T, 2 d]`` each (None, None without RoPE)."""
        if self.rotary_embedding is None:
            return None, None
        heads = 2 * self.blocks[0].self_attention.num_heads
        if positions is not None:
            return self.rotary_embedding.tiled(self.rotary_embedding.signed(positions), heads, dtype)
        return self.rotary_embedding.table(frames, device, heads, dtype)


__all__ = ["GazeFlowVelocityNetwork"]
