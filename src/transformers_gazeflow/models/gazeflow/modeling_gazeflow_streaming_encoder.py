"""The V-JEPA 2 encoder on the causal streamer's fixed window, with its weights prepared once (paper Sec. 3.1,
Appendix C.1; the causal encoder window of Appendix F.4).

The streamer encodes, per frame, the same number of frames (``causal_encoder_frames``, the causal window ending at
the newest frame) and keeps only the last tubelet's N tokens (``modeling_gazeflow_causal.encode_frame_causal``).
Every token position of that window is the same at every frame, so what transformers' ``VJEPA2RopeAttention``
recomputes at each call (the 3D position ids and the rotary cosines and sines of the frame, height and width axes)
is computed here once, with V-JEPA 2's own formula in the run's dtype. The layers are the same computation with
their weights prepared once: LoRA adapters merged into a copy (the model keeps its adapters), cast to the run's
dtype, Q/K/V fused into one product (with RoPE's rotated copies of the queries and keys as extra columns), the
tokens as rows (each Linear one ``addmm``, each norm one kernel call); the last layer computes queries, the MLP and
the final norm for the last tubelet's tokens only (the only ones the streamer reads). Attention goes through the
encoder config's kernel (transformers' attention interface). Equal to ``GazeFlowVideoEncoder`` on the window up to
the rounding of the fused products (tested).
"""

from __future__ import annotations

import copy

import torch
from torch import nn
from torch.nn import functional
from transformers.activations import ACT2FN

from .modeling_gazeflow_attention import attention_function
from .modeling_gazeflow_embeddings import rotate_pairs
from .modeling_gazeflow_rows import PreparedRowLayers
from .modeling_gazeflow_video_encoder import vjepa2_rotary_tables


class GazeFlowStreamingEncoderLayer(PreparedRowLayers):
    """One ``VJEPA2Layer`` with prepared weights and fixed rotary tables: pre-norm RoPE self-attention, then the
    pre-norm MLP, each residual, on the tokens as rows ``[B L, D]``. ``last_tokens``: compute the output of the last
    ``last_tokens`` tokens only.

    The Q/K/V product also gives the queries and keys with each channel pair rotated a quarter turn (extra columns
    of the weight, a signed permutation: the same values as rotating the product), so RoPE is ``qk * cos +
    rotated * sin``, two products and a sum.

    Twin of ``modeling_vjepa2.VJEPA2Layer``: change both; held equal by
    ``tests/test_streamer_step.py::test_static_encoder_equals_the_video_encoder_on_the_window``.
    """

    is_causal = False  # read by transformers' attention functions

    def __init__(self, layer: nn.Module, config, dtype: torch.dtype, last_tokens: int | None = None):
        super().__init__()
        self.config = config
        attention = layer.attention
        self.num_heads, self.head_dim = attention.num_attention_heads, attention.attention_head_size
        self.hidden_size, self.scaling = attention.all_head_size, attention.scaling
        self.layer_norm_eps, self.last_tokens = config.layer_norm_eps, last_tokens
        self.activation = ACT2FN[config.hidden_act]
        projections = (attention.query, attention.key, attention.value)
        query_key = torch.cat([attention.query.weight, attention.key.weight]).t()  # [D, 2 D]
        tensors = {
            "norm1_weight": layer.norm1.weight,
            "norm1_bias": layer.norm1.bias,
            "qkv_weight": torch.cat([query_key, rotate_pairs(query_key), attention.value.weight.t()], dim=1),
            "proj_weight": attention.proj.weight.t(),
            "proj_bias": attention.proj.bias,
            "norm2_weight": layer.norm2.weight,
            "norm2_bias": layer.norm2.bias,
            "fc1_weight": layer.mlp.fc1.weight.t(),
            "fc1_bias": layer.mlp.fc1.bias,
            "fc2_weight": layer.mlp.fc2.weight.t(),
            "fc2_bias": layer.mlp.fc2.bias,
        }
        self.register_prepared(tensors, dtype)
        qkv_bias = None
        if all(p.bias is not None for p in projections):  # config.qkv_bias
            query_key_bias = torch.cat([attention.query.bias, attention.key.bias])
            qkv_bias = torch.cat([query_key_bias, rotate_pairs(query_key_bias), attention.value.bias])
            qkv_bias = qkv_bias.detach().to(dtype)
        self.register_buffer("qkv_bias", qkv_bias, persistent=False)

    def forward(self, hidden: torch.Tensor, rotary_cos: torch.Tensor, rotary_sin: torch.Tensor) -> torch.Tensor:
        """``hidden [B, L, D]`` -> ``[B, L', D]`` (L' = ``last_tokens`` or L); ``rotary_*`` ``[L, 2 D]`` for the
        query and key columns."""
        batch, length, width = hidden.shape
        normed = self.layer_norm("norm1", hidden.reshape(batch * length, width))
        qkv = torch.mm(normed, self.qkv_weight) if self.qkv_bias is None else self.linear("qkv", normed)
        qkv = qkv.view(batch, length, 5 * width)
        query_key = qkv[..., : 2 * width] * rotary_cos + qkv[..., 2 * width : 4 * width] * rotary_sin
        heads = (batch, length, self.num_heads, self.head_dim)
        query = query_key[..., :width].view(heads).transpose(1, 2)
        key = query_key[..., width:].view(heads).transpose(1, 2)
        value = qkv[..., 4 * width :].view(heads).transpose(1, 2)
        if self.last_tokens is not None:
            query, hidden = query[:, :, -self.last_tokens :], hidden[:, -self.last_tokens :]
            length = self.last_tokens
        context, _ = attention_function(self.config._attn_implementation)(
            self, query, key, value, None, scaling=self.scaling, dropout=0.0, is_causal=False
        )
        rows = hidden.reshape(batch * length, width) + self.linear("proj", context.reshape(batch * length, width))
        rows = rows + self.linear("fc2", self.activation(self.linear("fc1", self.layer_norm("norm2", rows))))
        return rows.view(batch, length, width)


class GazeFlowStreamingVideoEncoder(nn.Module):
    """``GazeFlowVideoEncoder`` on a window of ``window`` frames, returning the last tubelet's ``tokens_per_frame``
    tokens ``[B, N, D]`` (the newest frame's, in the causal model), with weights and rotary tables prepared once in
    ``dtype`` (module docstring).

    Twin of ``modeling_gazeflow_video_encoder.GazeFlowVideoEncoder``: change both; held equal by
    ``tests/test_streamer_step.py::test_static_encoder_equals_the_video_encoder_on_the_window``.
    """

    def __init__(self, video_encoder: nn.Module, window: int, tokens_per_frame: int, dtype: torch.dtype):
        super().__init__()
        encoder = copy.deepcopy(video_encoder)  # LoRA is merged into the copy only
        if encoder.has_lora:
            encoder.merge_lora()
        encoder = encoder.to(dtype)
        config, vjepa2 = encoder.config, encoder.vjepa2
        self.config, self.tokens_per_frame = config, tokens_per_frame
        projection = vjepa2.embeddings.patch_embeddings.proj
        self.stride = projection.stride
        self.register_buffer("patch_weight", projection.weight.detach().contiguous(), persistent=False)
        self.register_buffer("patch_bias", projection.bias.detach(), persistent=False)
        layers = vjepa2.layer
        num_tokens = window // config.tubelet_size * tokens_per_frame
        last_tokens = tokens_per_frame if num_tokens > tokens_per_frame else None  # the last layer's outputs kept
        self.layers = nn.ModuleList(
            [
                GazeFlowStreamingEncoderLayer(layer, config, dtype, last_tokens if i == len(layers) - 1 else None)
                for i, layer in enumerate(layers)
            ]
        )
        self.register_buffer("norm_weight", vjepa2.layernorm.weight.detach(), persistent=False)
        self.register_buffer("norm_bias", vjepa2.layernorm.bias.detach(), persistent=False)
        self.eps, self.hidden_size = config.layer_norm_eps, config.hidden_size
        cos, sin = vjepa2_rotary_tables(layers[0].attention, num_tokens, dtype, self.patch_weight.device)
        heads = config.num_attention_heads
        self.register_buffer("rotary_cos", cos.repeat(1, 2 * heads), persistent=False)  # [L, 2 D]: q then k heads
        self.register_buffer("rotary_sin", sin.repeat(1, 2 * heads), persistent=False)

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        """``frames [B, window, C, S, S]`` (time order) -> the last tubelet's tokens ``[B, N, D]``."""
        pixels = frames.permute(0, 2, 1, 3, 4).to(self.patch_weight.dtype)
        hidden = functional.conv3d(pixels, self.patch_weight, self.patch_bias, stride=self.stride)
        hidden = hidden.flatten(2).transpose(1, 2)  # [B, L, D]
        for layer in self.layers:
            hidden = layer(hidden, self.rotary_cos, self.rotary_sin)
        return functional.layer_norm(hidden, (self.hidden_size,), self.norm_weight, self.norm_bias, self.eps)


__all__ = ["GazeFlowStreamingEncoderLayer", "GazeFlowStreamingVideoEncoder"]
