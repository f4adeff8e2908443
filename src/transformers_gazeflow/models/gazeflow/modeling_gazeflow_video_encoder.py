"""The bottom-up backbone of GazeFlow's encoder side E_psi: V-JEPA 2 (paper Section 3.1, Appendix C.1).

* :class:`GazeFlowVideoEncoder` - the V-JEPA 2 encoder (transformers ``VJEPA2Encoder``, the encoder path of
  ``VJEPA2Model``; the predictor is never built nor run), optionally with LoRA adapters through ``peft`` (Appendix
  E.4). A ``PreTrainedModel`` of its own config (``GazeFlowConfig.encoder_config``), as transformers' composite
  models hold their sub-models, so that ``attn_implementation`` reaches it through transformers' own dispatch.
* :class:`GazeFlowFusedRopeAttention` - transformers' V-JEPA 2 attention computed with fewer kernels (inference).
* :func:`vjepa2_rotary_tables` - V-JEPA 2's 3D RoPE tables of a token count, computed once (the fused attention's
  and the streamer's encoder, ``modeling_gazeflow_streaming_encoder``).
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import PreTrainedModel, VJEPA2Config
from transformers.modeling_outputs import BaseModelOutput
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.vjepa2.modeling_vjepa2 import VJEPA2Encoder, VJEPA2RopeAttention
from transformers.models.vjepa2.modeling_vjepa2 import eager_attention_forward as vjepa2_eager_attention_forward

from .modeling_gazeflow_embeddings import apply_signed_rotary
from .modeling_gazeflow_initialization import init_standard_weights, mark_lora_factors
from .modeling_gazeflow_rows import linear_rows

ROPE_BASE = 10000.0
"""V-JEPA 2's rotary base (``rotate_queries_or_keys``: ``omega = 1 / 10000^(2j / D)``)."""


class GazeFlowVideoEncoder(PreTrainedModel):
    """The V-JEPA 2 ViT-L encoder path (paper Section 3.1, "Bottom-Up Feature Extraction"; Appendix C.1).

    Input frames ``[B, T, 3, 256, 256]``; output the last hidden state ``[B, (T / 2) * N, D]`` with N = 16 x 16
    spatial tokens per tubelet of 2 frames. With ``output_hidden_states`` / ``output_attentions`` returns a
    ``BaseModelOutput``: ``hidden_states`` the patch embeddings and every layer's output (``L + 1`` entries of
    ``[B, (T / 2) * N, D]``), ``attentions`` every layer's weights ``[B, H_enc, (T / 2) * N, (T / 2) * N]``
    (``attn_implementation="eager"``). LoRA adapters (Appendix E.4) are injected with ``peft`` by :meth:`add_lora`.

    Twin of ``modeling_gazeflow_streaming_encoder.GazeFlowStreamingVideoEncoder``: change both; held equal by
    ``tests/test_streamer_step.py::test_static_encoder_equals_the_video_encoder_on_the_window``.
    """

    config_class = VJEPA2Config
    config: VJEPA2Config
    main_input_name = "pixel_values_videos"
    input_modalities = "video"
    supports_gradient_checkpointing = True
    _no_split_modules = ["VJEPA2Layer"]
    _supports_sdpa = True
    _supports_flex_attn = True

    def __init__(self, config: VJEPA2Config):
        super().__init__(config)
        self.vjepa2 = VJEPA2Encoder(config)
        self.post_init()

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        init_standard_weights(module, self.config.initializer_range)

    def get_input_embeddings(self) -> nn.Module:
        """The 3D patch embedding (tubelet x patch convolution), the encoder's input embedding."""
        return self.vjepa2.embeddings.patch_embeddings

    def set_input_embeddings(self, value: nn.Module) -> None:
        """Replace the 3D patch embedding (it maps frames ``[B, C, T, S, S]`` to tokens ``[B, T/2 * N, D]``)."""
        self.vjepa2.embeddings.patch_embeddings = value

    def forward(
        self, pixel_values_videos: torch.Tensor, output_attentions: bool = False, output_hidden_states: bool = False
    ) -> torch.Tensor | BaseModelOutput:
        encoder = self.vjepa2
        hidden_states = encoder.embeddings(pixel_values_videos)
        if (
            self.training
            and torch.is_grad_enabled()
            and not hidden_states.requires_grad
            and any(layer.gradient_checkpointing for layer in encoder.layer)
        ):
            # reentrant checkpointing returns gradients only to inputs that require them: under a frozen patch
            # embedding the LoRA weights inside the layers would get none (what `enable_input_require_grads` does)
            hidden_states.requires_grad_(True)
        all_hidden_states = (hidden_states,) if output_hidden_states else None
        all_attentions = () if output_attentions else None
        for layer in encoder.layer:
            hidden_states, weights = layer(hidden_states, None)
            if output_hidden_states:
                all_hidden_states += (hidden_states,)
            if output_attentions:
                all_attentions += (weights,)
        hidden_states = encoder.layernorm(hidden_states)
        if not (output_attentions or output_hidden_states):
            return hidden_states
        return BaseModelOutput(
            last_hidden_state=hidden_states, hidden_states=all_hidden_states, attentions=all_attentions
        )

    def fuse_attention(self) -> None:
        """Run every V-JEPA 2 attention through :class:`GazeFlowFusedRopeAttention` (the same weights, one matmul for
        queries, keys and values, RoPE tables computed once per shape): the same outputs as transformers' module
        (bit for bit in fp32 on CPU), with a fraction of its kernels. Idempotent; for inference (the inference fast
        path calls it after merging LoRA)."""
        for module in self.vjepa2.modules():
            if type(module) is VJEPA2RopeAttention:
                module.__class__ = GazeFlowFusedRopeAttention

    def add_lora(self, r: int, alpha: float, dropout: float, target_modules: list[str]) -> None:
        """Inject peft LoRA adapters (peft's init: B = 0). ``GazeFlowModel`` then initialises them with the rest of
        the model through ``_init_weights`` (the same scheme), which is also what initialises adapters that a
        loaded checkpoint does not provide."""
        from peft import LoraConfig, inject_adapter_in_model

        lora_config = LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=list(target_modules))
        inject_adapter_in_model(lora_config, self.vjepa2)
        mark_lora_factors(self.vjepa2)

    @property
    def has_lora(self) -> bool:
        return any("lora_" in name for name, _ in self.named_parameters())

    def merge_lora(self) -> None:
        """Fold every LoRA update into its base weight and put the plain ``nn.Linear`` back."""
        from peft.tuners.lora import LoraLayer

        for name, module in list(self.named_modules()):
            if isinstance(module, LoraLayer):
                module.merge()
                parent_name, _, child_name = name.rpartition(".")
                setattr(self.get_submodule(parent_name) if parent_name else self, child_name, module.get_base_layer())


def vjepa2_rotary_tables(
    attention: nn.Module, num_tokens: int, dtype: torch.dtype, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """Cosines and sines ``[num_tokens, d_h]`` with which ``VJEPA2RopeAttention`` rotates the queries and keys of
    ``num_tokens`` tokens: its depth (frame), height and width sections of the head as transformers'
    ``rotate_queries_or_keys`` computes them (in ``dtype``, the activations' dtype, and its sections' layout), the
    rest of the head unrotated (cosine 1, sine 0).

    Twin of ``modeling_vjepa2.rotate_queries_or_keys``: change both; held equal by
    ``tests/test_streaming_pipeline.py::test_the_fused_encoder_attention_equals_transformers_bit_for_bit``.
    """
    positions = attention.get_position_ids(torch.empty(1, num_tokens, 0, device=device))  # frame, height, width ids
    cosines, sines = [], []
    for position, width in zip(positions, (attention.d_dim, attention.h_dim, attention.w_dim)):
        omega = torch.arange(width // 2, dtype=dtype, device=device)
        omega /= width / 2.0
        omega = 1.0 / ROPE_BASE**omega
        angles = position.unsqueeze(-1) * omega  # [L, width / 2]
        cosines.append(angles.cos().repeat(1, 2))
        sines.append(angles.sin().repeat(1, 2))
    rest = attention.attention_head_size - sum(c.shape[-1] for c in cosines)
    cosines.append(torch.ones(num_tokens, rest, dtype=dtype, device=device))
    sines.append(torch.zeros(num_tokens, rest, dtype=dtype, device=device))
    return torch.cat(cosines, dim=-1), torch.cat(sines, dim=-1)


def _signed_rotary_tables(
    attention: nn.Module, num_tokens: int, dtype: torch.dtype, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`vjepa2_rotary_tables` with the sine negated on each pair's first channel, as
    ``modeling_gazeflow_embeddings.apply_signed_rotary`` reads it."""
    cos, sin = vjepa2_rotary_tables(attention, num_tokens, dtype, device)
    sign = torch.ones(attention.attention_head_size, dtype=dtype, device=device)
    sign[0::2] = -1
    return cos, sin * sign


class GazeFlowFusedRopeAttention(VJEPA2RopeAttention):
    """transformers' V-JEPA 2 attention with its weights used as they are, computed with fewer kernels: queries,
    keys and values from one matmul (``linear_rows``), queries and keys rotated together, and the RoPE
    tables of a token count computed once (:func:`vjepa2_rotary_tables`) instead of at every call for each section
    of q and of k. The attention kernel is still ``config._attn_implementation`` through
    ``ALL_ATTENTION_FUNCTIONS``. Only the plain forward (no position mask) is fused; a mask goes to the parent's.

    Twin of ``modeling_vjepa2.VJEPA2RopeAttention``: change both; held equal by
    ``tests/test_streaming_pipeline.py::test_the_fused_encoder_attention_equals_transformers_bit_for_bit``.
    """

    def forward(
        self, hidden_states: torch.Tensor, position_mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        if position_mask is not None:
            return super().forward(hidden_states, position_mask)
        batch, tokens, width = hidden_states.shape
        projected = linear_rows(self, (self.query, self.key, self.value), hidden_states.reshape(-1, width))
        projected = projected.view(batch, tokens, 3, self.num_attention_heads, self.attention_head_size).permute(
            2, 0, 3, 1, 4
        )
        cos, signed_sin = self._rope_tables(tokens, projected.dtype, projected.device)
        query_key = apply_signed_rotary(projected[:2], cos, signed_sin)
        attention_interface = ALL_ATTENTION_FUNCTIONS.get_interface(
            self.config._attn_implementation, vjepa2_eager_attention_forward
        )
        context, weights = attention_interface(
            self,
            query_key[0],
            query_key[1],
            projected[2],
            None,
            is_causal=self.is_causal,
            scaling=self.scaling,
            dropout=0.0 if not self.training else self.dropout_prob,
        )
        return linear_rows(self, (self.proj,), context.reshape(-1, self.all_head_size)).view(batch, tokens, -1), weights

    def _rope_tables(self, tokens: int, dtype: torch.dtype, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        key = (tokens, dtype, str(device))
        if torch.compiler.is_compiling():
            return _signed_rotary_tables(self, tokens, dtype, device)
        tables = self.__dict__.setdefault("_rope_table_cache", {})
        if key not in tables:
            tables.clear()
            tables[key] = _signed_rotary_tables(self, tokens, dtype, device)
        return tables[key]


__all__ = ["GazeFlowVideoEncoder", "GazeFlowFusedRopeAttention", "ROPE_BASE", "vjepa2_rotary_tables"]
