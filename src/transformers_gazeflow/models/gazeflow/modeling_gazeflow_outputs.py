"""The outputs of GazeFlow's forward, velocity call and sampling (``ModelOutput`` dataclasses, transformers'
convention: fields that were not asked for are None and left out of ``to_tuple()``)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers.utils import ModelOutput


@dataclass
class GazeFlowModelOutput(ModelOutput):
    """Output of :meth:`GazeFlowModel.forward` (training).

    Args:
        loss: the masked loss of ``config.objective`` (flow matching: Eq. cfm_loss), mean over valid frames and
            coordinates; with the grounding head (``config.grounding_loss_weight > 0``) plus
            ``grounding_loss_weight * grounding_loss``.
        predicted_velocity: the network's output ``[B, T, 2]``: v_theta(x_s, s, c) for flow matching, the noise
            estimate eps_hat for diffusion, the trajectory for regression.
        target_velocity: its target ``[B, T, 2]``: ``g - (1 - sigma_min) x_0`` for flow matching, the noise eps for
            diffusion, g for regression.
        flow_time: the times drawn for each clip, ``[B]``: s for flow matching, tau = t / N for diffusion, None
            for regression.
        encoder_hidden_states: (``output_hidden_states``, frames given) the V-JEPA 2 patch embeddings and every
            encoder layer's output, ``L_enc + 1`` tensors ``[B, (T / tubelet) * N, D]`` (causal variant: one
            causal window per frame, ``[B * T, (w / tubelet) * N, D]``).
        encoder_attentions: (``output_attentions``, frames given) every V-JEPA 2 layer's weights
            ``[B, H_enc, L, L]`` (causal: ``[B * T, H_enc, L, L]``).
        spatial_hidden_states: (``output_hidden_states``) the spatial encoder's input and per-layer outputs,
            ``num_temporal_layers + num_spatial_layers + 1`` tensors ``[B * G, N, d]`` (temporal layers first; row
            ``b * G + g``: frame group g of clip b).
        spatial_attentions: (``output_attentions``) every spatial encoder layer's weights ``[B * G, H, N, N]``.
        task_bank_attentions: (``output_attentions``) the M task queries' weights over the G frame summaries,
            ``[B, H, M, G]`` (causal: ``[B, H, G * M, G]``).
        hidden_states: (``output_hidden_states``) the velocity network's gaze tokens: the embeddings and every
            DenoiserBlock's output, ``num_hidden_layers + 1`` tensors ``[B, 1, T, d]`` (one trajectory per clip),
            for the network call that gave ``predicted_velocity``.
        attentions: (``output_attentions``) every block's frame self-attention weights ``[B, H, T, T]`` for that
            call.
        visual_cross_attentions: (``output_attentions``) every block's per-frame visual cross-attention
            ``[B, H, T, N]``: row t is frame t's gaze token over frame t's N spatial tokens.
        task_cross_attentions: (``output_attentions``) every block's task cross-attention ``[B, H, T, M + 1]``.
        objective_loss: (grounding head only) the loss of ``config.objective`` alone.
        grounding_loss: (grounding head only) L_ground, the auxiliary grounding cross-entropy (unweighted).
        grounding_logits: (grounding head only) the head's score of every spatial token, ``[B, G, N]``: its
            softmax over N is where the model expects the gaze in frame group g.
        temporal_attentions: (``output_attentions``, ``num_temporal_layers > 0``) every temporal layer's weights
            ``[B * N, H, G, G]``: row ``b * N + n`` is spatial position n of clip b over the G frame groups.

    Attention weights are formed by ``attn_implementation="eager"``; other kernels give None entries.
    """

    loss: torch.FloatTensor | None = None
    predicted_velocity: torch.FloatTensor | None = None
    target_velocity: torch.FloatTensor | None = None
    flow_time: torch.FloatTensor | None = None
    encoder_hidden_states: tuple[torch.FloatTensor, ...] | None = None
    encoder_attentions: tuple[torch.FloatTensor, ...] | None = None
    spatial_hidden_states: tuple[torch.FloatTensor, ...] | None = None
    spatial_attentions: tuple[torch.FloatTensor, ...] | None = None
    task_bank_attentions: torch.FloatTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None
    attentions: tuple[torch.FloatTensor, ...] | None = None
    visual_cross_attentions: tuple[torch.FloatTensor, ...] | None = None
    task_cross_attentions: tuple[torch.FloatTensor, ...] | None = None
    objective_loss: torch.FloatTensor | None = None
    grounding_loss: torch.FloatTensor | None = None
    grounding_logits: torch.FloatTensor | None = None
    temporal_attentions: tuple[torch.FloatTensor, ...] | None = None


@dataclass
class GazeFlowVelocityOutput(ModelOutput):
    """Output of one velocity-network call v_theta(x_s, s, c) when attentions or hidden states are asked for
    (:meth:`GazeFlowModel.velocity`, :class:`GazeFlowVelocityNetwork`).

    Args:
        velocity: ``[B, K, T, 2]``.
        hidden_states: the gaze tokens after the embeddings and after every DenoiserBlock, ``num_hidden_layers + 1``
            tensors ``[B, K, T, d]``.
        attentions: every block's frame self-attention weights ``[B * K, H, T, T]`` (row ``b * K + k``: sample k
            of clip b; causal variant: zero above the diagonal; streaming: ``[B * K, H, T, cached frames]``).
        visual_cross_attentions: every block's per-frame visual cross-attention ``[B * K, H, T, N]``: row t is
            frame t's gaze token over frame t's N spatial tokens (None entries without that sub-layer).
        task_cross_attentions: every block's task cross-attention ``[B * K, H, T, M + 1]`` over [p; q_1..q_M]
            (None entries without that sub-layer).

    Attention weights are formed by ``attn_implementation="eager"``; other kernels give None entries.
    """

    velocity: torch.FloatTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None
    attentions: tuple[torch.FloatTensor, ...] | None = None
    visual_cross_attentions: tuple[torch.FloatTensor, ...] | None = None
    task_cross_attentions: tuple[torch.FloatTensor, ...] | None = None


@dataclass
class GazeFlowGenerationOutput(ModelOutput):
    """Output of :meth:`GazeFlowModel.generate`.

    Args:
        trajectories: K sampled trajectories per clip, ``[B, K, T, 2]``, unit image coordinates ``[0, 1]`` with
            the origin at the top-left (x right, y down), clamped into the frame.
        mean: the per-frame mean over the K samples, ``[B, T, 2]``, unit coordinates.
    """

    trajectories: torch.FloatTensor | None = None
    mean: torch.FloatTensor | None = None


__all__ = ["GazeFlowModelOutput", "GazeFlowVelocityOutput", "GazeFlowGenerationOutput"]
