"""How GazeFlow's weights start (``GazeFlowPreTrainedModel._init_weights``, ``GazeFlowVideoEncoder._init_weights``).

* :func:`init_standard_weights` - truncated-normal Linears and convolutions, unit layer norms, peft's own LoRA
  initialisation for the factors :func:`mark_lora_factors` tags (an adapter a checkpoint lacks starts as no change);
* :func:`init_mimetic_query_key` - mimetic initialisation of a self-attention's queries and keys
  (``config.spatial_attention_init="mimetic"``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
from torch import nn
from transformers import initialization as init

if TYPE_CHECKING:
    from .modeling_gazeflow_attention import GazeFlowAttention


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


MIMETIC_QUERY_KEY = (0.7, 0.7)
"""(alpha, beta) of mimetic initialisation's W_q^T W_k ~ alpha Z + beta I: the values Trockman & Kolter (2023)
give for self-attention, used as they are (not tuned here)."""


@torch.no_grad()
def init_mimetic_query_key(
    attention: GazeFlowAttention, alpha: float = MIMETIC_QUERY_KEY[0], beta: float = MIMETIC_QUERY_KEY[1]
) -> None:
    """Mimetic initialisation of a self-attention's queries and keys (Trockman & Kolter, "Mimetic Initialization
    of Self-Attention Layers", ICML 2023): for every head h, ``W_q^h [d_h, d]`` and ``W_k^h`` are the rank-d_h
    factors of ``M = alpha Z + beta I`` (``Z ~ N(0, 1/d)``, by SVD ``M = U S V^T``: ``W_q^h = (U S^1/2)^T``,
    ``W_k^h = (V S^1/2)^T`` over the d_h largest singular values), so that ``q . k = x^T W_q^hT W_k^h x'`` is
    close to ``beta x . x'`` plus noise, and the query and key biases are zero. A token then starts by attending to
    the tokens that look like it, instead of to all tokens alike (``q . k ~ 0`` under a small normal
    initialisation, where the product W_q^T W_k sits at a saddle). Draws from torch's global generator; parameters
    loaded from a checkpoint are left alone (transformers' guarded init)."""
    width = attention.q_proj.in_features
    queries, keys = [], []
    for _ in range(attention.num_heads):
        target = alpha * torch.randn(width, width) / math.sqrt(width) + beta * torch.eye(width)
        left, singular, right_t = torch.linalg.svd(target)
        root = singular[: attention.head_dim].sqrt()
        queries.append((left[:, : attention.head_dim] * root).T)
        keys.append(right_t[: attention.head_dim] * root.unsqueeze(-1))
    weight = attention.q_proj.weight
    init.copy_(weight, torch.cat(queries).to(weight.dtype))
    init.copy_(attention.k_proj.weight, torch.cat(keys).to(weight.dtype))
    for bias in (attention.q_proj.bias, attention.k_proj.bias):
        init.zeros_(bias)


__all__ = ["LORA_FACTOR", "mark_lora_factors", "init_standard_weights", "MIMETIC_QUERY_KEY", "init_mimetic_query_key"]
