"""GazeFlow: egocentric gaze trajectories by conditional flow matching (paper Section 3, Appendices C-E).

The model has three parts, each a small named module:

* the encoder side E_psi: :class:`GazeFlowVideoEncoder` (``modeling_gazeflow_video_encoder``: V-JEPA 2, optionally
  with LoRA) and :class:`GazeFlowConditionEncoder` (``modeling_gazeflow_encoder``: W_proj, the per-frame spatial
  encoder and the task-token bank: Eqs. visual_condition, task_slots, task_bank). :meth:`GazeFlowModel.build_condition`
  also precomputes every block's visual and task keys/values, so that one clip's condition is computed once and
  shared by all K samples and S steps.
* :class:`GazeFlowVelocityNetwork` (``modeling_gazeflow_velocity``) - v_theta(x_s, s, c): coordinate, timestep and
  self-conditioning embeddings, six DenoiserBlocks and a linear head to a velocity in R^{2T} (Section 3.2, Appendix
  C.3).

:meth:`GazeFlowModel.forward` returns the conditional flow-matching loss (Eq. cfm_loss with the OT interpolant of
Appendix E.4 and self-conditioning of Appendix D.2); :meth:`GazeFlowModel.generate` samples trajectories through
:mod:`transformers_gazeflow.models.gazeflow.generation_gazeflow` (sliding windows, K samples, seeds) and the scheduler
(:mod:`transformers_gazeflow.models.gazeflow.scheduling_gazeflow`: solvers and self-conditioning state).

Every attention goes through transformers' attention interface (``config._attn_implementation``: ``"sdpa"`` by
default, ``"eager"`` to get attention weights, ``"flex_attention"``), set with
``from_pretrained(..., attn_implementation=...)`` or :meth:`~transformers.PreTrainedModel.set_attn_implementation`;
it reaches the nested V-JEPA 2 encoder through its sub-config.
"""

from __future__ import annotations

import copy
import json
import os

import torch
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel
from transformers import initialization as init
from transformers.modeling_outputs import BaseModelOutput

from .configuration_gazeflow import GazeFlowConfig
from .generation_gazeflow import SamplingSettings, generate_trajectories
from .geometry import patch_centres
from .modeling_gazeflow_causal import encode_video_causal
from .modeling_gazeflow_checks import check_encoder_hidden_states, check_pixel_values, check_training_targets
from .modeling_gazeflow_embeddings import GazeFlowRotaryEmbedding, GazeFlowSinusoidalMLP, flow_time_tensor
from .modeling_gazeflow_encoder import (
    GazeFlowCondition,
    GazeFlowConditionEncoder,
    GazeFlowConditionEncoderOutput,
    GazeFlowSpatialEncoder,
    GazeFlowTaskTokenBank,
)
from .modeling_gazeflow_initialization import init_mimetic_query_key, init_standard_weights
from .modeling_gazeflow_layers import GazeFlowDenoiserBlock
from .modeling_gazeflow_objectives import grounding_loss, objective_loss
from .modeling_gazeflow_outputs import GazeFlowGenerationOutput, GazeFlowModelOutput, GazeFlowVelocityOutput
from .modeling_gazeflow_variants import GazeFlowLearnedFramePosition
from .modeling_gazeflow_velocity import GazeFlowVelocityNetwork
from .modeling_gazeflow_video_encoder import GazeFlowVideoEncoder


# ---------------------------------------------------------------------------------------------------- model
class GazeFlowPreTrainedModel(PreTrainedModel):
    config_class = GazeFlowConfig
    config: GazeFlowConfig
    base_model_prefix = "gazeflow"
    main_input_name = "pixel_values_videos"
    input_modalities = "video"
    supports_gradient_checkpointing = True
    _no_split_modules = ["GazeFlowDenoiserBlock", "GazeFlowSpatialEncoderLayer", "VJEPA2Layer"]
    _supports_sdpa = True
    _supports_flex_attn = True

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        """Every weight the model defines (``init_standard_weights`` for Linear, LayerNorm and LoRA layers), so a
        checkpoint missing some keys loads with those initialised as at construction. The V-JEPA 2 encoder is its
        own ``PreTrainedModel`` and initialises itself the same way."""
        std = self.config.initializer_range
        init_standard_weights(module, std)
        if isinstance(module, GazeFlowDenoiserBlock):
            if module.task_attention is not None:
                init.constant_(module.task_gate, self.config.task_gate_init)
        elif isinstance(module, GazeFlowTaskTokenBank):
            if module.num_queries > 0:
                init.trunc_normal_(module.queries, std=std)
        elif isinstance(module, GazeFlowLearnedFramePosition):
            init.trunc_normal_(module.embedding, std=std)
        elif isinstance(module, GazeFlowSpatialEncoder):
            init.copy_(module.position_encoding, module.compute_position_encoding())
            if self.config.spatial_attention_init == "mimetic":  # after the layers' Linears: children come first
                for layer in (*module.temporal_layers, *module.layers):
                    init_mimetic_query_key(layer.attention)
        elif isinstance(module, GazeFlowRotaryEmbedding):
            init.copy_(module.inv_freq, module.compute_inv_freq())
        elif isinstance(module, GazeFlowSinusoidalMLP):
            init.copy_(module.frequencies, module.compute_frequencies())
            init.constant_(module.scale_tensor, module.scale)


_HUB_KWARGS = ("cache_dir", "force_download", "local_files_only", "proxies", "revision", "subfolder", "token")


def _checkpoint_keys(pretrained_model_name_or_path, kwargs: dict) -> set[str] | None:
    """The weight names of a checkpoint, from a given ``state_dict`` or the safetensors header(s) (no tensor is
    read); None when they cannot be known that way."""
    if kwargs.get("state_dict") is not None:
        return set(kwargs["state_dict"])
    if pretrained_model_name_or_path is None:
        return None
    from safetensors import safe_open
    from transformers.utils import cached_file

    hub = {key: kwargs[key] for key in _HUB_KWARGS if key in kwargs}
    found = dict(_raise_exceptions_for_missing_entries=False, _raise_exceptions_for_connection_errors=False)
    index = cached_file(pretrained_model_name_or_path, "model.safetensors.index.json", **found, **hub)
    if index is not None:
        with open(index, encoding="utf-8") as file:
            return set(json.load(file)["weight_map"])
    single = cached_file(pretrained_model_name_or_path, "model.safetensors", **found, **hub)
    if single is None:
        return None
    with safe_open(single, framework="pt") as file:
        return set(file.keys())


def _is_plain_encoder_checkpoint(keys: set[str], lora_targets: list[str]) -> bool:
    """Whether checkpoint ``keys`` hold the encoder's LoRA target layers under their plain names (no adapters)."""
    if any("lora_" in key or ".base_layer." in key for key in keys):
        return False
    return any(
        key.startswith("video_encoder.") and key.endswith(".weight") and key.split(".")[-2] in lora_targets
        for key in keys
    )


class GazeFlowModel(GazeFlowPreTrainedModel):
    """GazeFlow: video -> distribution over gaze trajectories, trained by conditional flow matching.

    Example:

    ```python
    >>> import torch
    >>> from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
    >>> model = GazeFlowModel(GazeFlowConfig.tiny()).eval()
    >>> video = torch.randn(1, 8, 3, 32, 32)  # [B, T, 3, H, W], normalised frames
    >>> out = model.generate(pixel_values_videos=video, num_samples=4, num_steps=2)
    >>> out.trajectories.shape, out.mean.shape
    (torch.Size([1, 4, 8, 2]), torch.Size([1, 8, 2]))
    ```
    """

    def __init__(self, config: GazeFlowConfig):
        super().__init__(config)
        # a PreTrainedModel of `config.encoder_config`: transformers resolves its attention implementation
        self.video_encoder = GazeFlowVideoEncoder(config.encoder_config)
        if config.use_lora:  # before post_init: the adapters are initialised (B = 0) by `_init_weights` with the rest
            self.video_encoder.add_lora(
                config.lora_r, config.lora_alpha, config.lora_dropout, config.lora_target_modules
            )
        self.condition_encoder = GazeFlowConditionEncoder(config)
        self.velocity_network = GazeFlowVelocityNetwork(config)
        self.post_init()
        self.set_encoder_trainability()

    def get_input_embeddings(self) -> nn.Module:
        """The V-JEPA 2 patch embedding (so ``enable_input_require_grads`` reaches the encoder's input)."""
        return self.video_encoder.get_input_embeddings()

    def set_input_embeddings(self, value: nn.Module) -> None:
        """Replace the V-JEPA 2 patch embedding (the counterpart of :meth:`get_input_embeddings`)."""
        self.video_encoder.set_input_embeddings(value)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *model_args, **kwargs):
        """``PreTrainedModel.from_pretrained``, plus one case: a plain checkpoint (its encoder's LoRA target layers
        stored under their own names, no adapters) loaded with ``use_lora=True`` becomes the plain model with
        zero-initialised adapters added (B = 0), i.e. exactly the plain model's function until trained. (Built
        with adapters first, peft's ``base_layer`` names would not match those keys and the encoder's weights would
        be re-initialised.) With ``output_loading_info`` the adapters are listed as missing keys."""
        config = kwargs.get("config")
        # a config object (of this class, or of its copy in a remote-code folder), else read from the path
        if not isinstance(config, PretrainedConfig) and pretrained_model_name_or_path is not None:
            hub = {key: kwargs[key] for key in _HUB_KWARGS if key in kwargs}
            source = config if isinstance(config, (str, os.PathLike)) else pretrained_model_name_or_path
            config = cls.config_class.from_pretrained(source, **hub)
        use_lora = bool(kwargs.get("use_lora", getattr(config, "use_lora", False)))
        keys = _checkpoint_keys(pretrained_model_name_or_path, kwargs) if use_lora else None
        targets = kwargs.get("lora_target_modules", getattr(config, "lora_target_modules", ()))
        if not keys or not _is_plain_encoder_checkpoint(keys, targets):
            return super().from_pretrained(pretrained_model_name_or_path, *model_args, **kwargs)
        if isinstance(kwargs.get("config"), PretrainedConfig):
            kwargs["config"] = copy.deepcopy(kwargs["config"])
            kwargs["config"].use_lora = False
        else:
            kwargs["use_lora"] = False
        loaded = super().from_pretrained(pretrained_model_name_or_path, *model_args, **kwargs)
        model = loaded[0] if isinstance(loaded, tuple) else loaded
        model.add_lora()
        if isinstance(loaded, tuple):
            loaded[1]["missing_keys"] = set(loaded[1]["missing_keys"]) | {
                name for name, _ in model.named_parameters() if "lora_" in name
            }
        return loaded

    # ------------------------------------------------------------------ encoder, LoRA, trainability
    def set_encoder_trainability(self) -> None:
        """With ``freeze_encoder`` the encoder's own weights are frozen; LoRA weights (if any) stay trainable."""
        for name, parameter in self.video_encoder.named_parameters():
            parameter.requires_grad_(not self.config.freeze_encoder or "lora_" in name)

    def add_lora(self) -> None:
        """Inject LoRA adapters into the encoder with the config's r/alpha/dropout/targets (e.g. after loading
        pretrained V-JEPA 2 weights into a model built with ``use_lora=False``)."""
        if self.video_encoder.has_lora:
            raise ValueError("the encoder already has LoRA adapters")
        c = self.config
        self.video_encoder.add_lora(c.lora_r, c.lora_alpha, c.lora_dropout, c.lora_target_modules)
        self.initialize_weights()  # only the new adapters: every other module is already marked initialised
        self.config.use_lora = True
        self.set_encoder_trainability()

    def merge_lora(self) -> "GazeFlowModel":
        """Merge the LoRA updates into the encoder weights for export/inference; the config then says
        ``use_lora=False`` so the saved folder loads as a plain model. Returns ``self``."""
        if not self.video_encoder.has_lora:
            raise ValueError("merge_lora: the encoder has no LoRA adapters (config.use_lora is False)")
        self.video_encoder.merge_lora()
        self.config.use_lora = False
        self.set_encoder_trainability()
        return self

    def load_encoder_weights(self, vjepa2_name_or_path: str, **from_pretrained_kwargs) -> None:
        """Load a pretrained V-JEPA 2 checkpoint (hub id or local folder of ``VJEPA2Model``) into the encoder.

        Only the encoder's weights are copied; the checkpoint's predictor is dropped. Call before LoRA is added
        (build the model with ``use_lora=False``, load, then :meth:`add_lora`).
        """
        from transformers import VJEPA2Model

        if self.video_encoder.has_lora:
            raise ValueError("load_encoder_weights: load the V-JEPA 2 weights before adding LoRA (use_lora=False)")
        source = VJEPA2Model.from_pretrained(vjepa2_name_or_path, **from_pretrained_kwargs)
        self.video_encoder.vjepa2.load_state_dict(source.encoder.state_dict())

    def encode_video(
        self, pixel_values_videos: torch.Tensor, output_attentions: bool = False, output_hidden_states: bool = False
    ) -> torch.Tensor | BaseModelOutput:
        """Encoder tokens ``[B, (T / tubelet) * N, D]`` of normalised frames ``[B, T, 3, S, S]`` (a
        ``BaseModelOutput`` with every layer's states / weights when asked; see :class:`GazeFlowVideoEncoder`).

        The causal variant returns per-frame tokens ``[B, T * N, D]``, frame t's from the encoder run on its causal
        window of ``causal_encoder_frames`` frames ending at t (``modeling_gazeflow_causal``).
        With a frozen encoder and no LoRA, runs without autograd (nothing in it trains).
        """
        check_pixel_values(pixel_values_videos, self.config)
        needs_grad = torch.is_grad_enabled() and any(p.requires_grad for p in self.video_encoder.parameters())
        flags = dict(output_attentions=output_attentions, output_hidden_states=output_hidden_states)
        with torch.set_grad_enabled(needs_grad):
            if self.config.causal:
                return encode_video_causal(
                    self.video_encoder,
                    pixel_values_videos,
                    self.config.causal_encoder_frames,
                    self.config.tokens_per_frame,
                    **flags,
                )
            return self.video_encoder(pixel_values_videos, **flags)

    # ------------------------------------------------------------------ condition
    def build_condition(
        self, encoder_hidden_states: torch.Tensor, num_frames: int, share_group_tokens: bool = True
    ) -> GazeFlowCondition:
        """The per-clip condition c = (c_v, c_task) and every block's visual/task keys and values.

        ``encoder_hidden_states`` ``[B, (T / tubelet) * N, D]`` are the encoder's tokens of a T-frame window; frame
        t reads tubelet floor(t / tubelet) (causal variant: ``[B, T * N, D]``, a group of tokens per frame). With
        ``share_group_tokens`` (the default), the frames of a tubelet share one entry of c_v and one set of
        keys/values; without it, tokens are first copied out per frame, which is the plain per-frame computation
        the paper describes (identical results, tubelet-times the work).
        """
        return self.encode_condition(encoder_hidden_states, num_frames, share_group_tokens)[0]

    def encode_condition(
        self,
        encoder_hidden_states: torch.Tensor,
        num_frames: int,
        share_group_tokens: bool = True,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> tuple[GazeFlowCondition, GazeFlowConditionEncoderOutput]:
        """:meth:`build_condition`, also returning the condition encoder's output (c_v, c_task and, when asked, the
        spatial encoder's and task bank's states / weights)."""
        group = self.config.frames_per_encoder_group
        tokens = check_encoder_hidden_states(encoder_hidden_states, num_frames, self.config)
        if share_group_tokens:
            frames_per_group = group
        else:
            frame_to_group = torch.arange(num_frames, device=tokens.device) // group
            tokens = tokens.index_select(1, frame_to_group)
            frames_per_group = 1
        encoded = self.condition_encoder(tokens, output_attentions, output_hidden_states)
        condition = self.condition_from_tokens(encoded.visual_tokens, encoded.task_tokens, num_frames, frames_per_group)
        return condition, encoded

    def condition_from_tokens(
        self, visual_tokens: torch.Tensor, task_tokens: torch.Tensor | None, num_frames: int, frames_per_group: int
    ) -> GazeFlowCondition:
        """Every block's keys/values of c_v (``[B, G, H, N, d_h]``) and c_task (``[B, H, M + 1, d_h]``, or per group
        ``[B, G, H, M + 1, d_h]``), only for the sub-layers the block has.

        Twin of ``modeling_gazeflow_streaming.GazeFlowStreamingCondition``: change both; held equal by
        ``tests/test_causal_streaming.py::test_streamer_equals_the_causal_model_on_every_prefix``.
        """
        task_per_frame = task_tokens is not None and task_tokens.dim() == 4
        visual_kv, task_kv = [], []
        for block in self.velocity_network.blocks:
            visual, task = block.visual_attention, block.task_attention
            visual_kv.append(visual.project_key_value(visual_tokens) if visual is not None else None)
            task_kv.append(task.project_key_value(task_tokens) if task is not None else None)
        return GazeFlowCondition(
            visual_tokens, task_tokens, tuple(visual_kv), tuple(task_kv), num_frames, frames_per_group, task_per_frame
        )

    def velocity(
        self,
        sample: torch.Tensor,
        flow_time: torch.Tensor | float,
        condition: GazeFlowCondition,
        self_condition: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        time_embedding: torch.Tensor | None = None,
    ) -> torch.Tensor | GazeFlowVelocityOutput:
        """v_theta(x_s, s, c): ``sample [B, K, T, 2]`` (model coordinates), ``flow_time`` s as a float or
        ``[B, K]``, ``self_condition`` x1_hat ``[B, K, T, 2]`` (zeros when None). Returns ``[B, K, T, 2]``, or with
        ``output_attentions`` / ``output_hidden_states`` a :class:`GazeFlowVelocityOutput` holding every block's
        gaze self-attention ``[B * K, H, T, T]``, visual cross-attention ``[B * K, H, T, N]``, task
        cross-attention ``[B * K, H, T, M + 1]`` and gaze tokens ``[B, K, T, d]`` at this flow time (weights need
        ``attn_implementation="eager"``). ``time_embedding``: E_time(s) ``[B, K, d]`` (:meth:`embed_flow_time`)."""
        batch, samples, frames, _ = sample.shape
        if batch != condition.batch_size or frames != condition.num_frames:
            raise ValueError(
                f"velocity: `sample` has shape {tuple(sample.shape)} but the condition is for {condition.batch_size} "
                f"clips of {condition.num_frames} frames (expected [{condition.batch_size}, K, "
                f"{condition.num_frames}, 2])"
            )
        if time_embedding is None:
            flow_time = flow_time_tensor(flow_time, batch, samples, sample.device)
        if self_condition is None:
            self_condition = torch.zeros_like(sample)
        return self.velocity_network(
            sample,
            flow_time,
            self_condition,
            condition,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            time_embedding=time_embedding,
        )

    def embed_flow_time(
        self, flow_time: torch.Tensor | float, batch: int, samples: int, device: torch.device
    ) -> torch.Tensor:
        """E_time(s) ``[B, K, d]`` exactly as :meth:`velocity` computes it for ``flow_time`` (a float or ``[B, K]``),
        for callers that evaluate the network at the same time many times."""
        return self.velocity_network.time_embedding(flow_time_tensor(flow_time, batch, samples, device))

    # ------------------------------------------------------------------ training
    def forward(
        self,
        pixel_values_videos: torch.Tensor | None = None,
        gaze: torch.Tensor | None = None,
        valid_mask: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> GazeFlowModelOutput | tuple:
        r"""The training loss of ``config.objective``: by default the conditional flow-matching loss (paper Eq.
        cfm_loss, Appendix E.4 interpolant, Appendix D.2); see ``modeling_gazeflow_objectives``.

        Args:
            pixel_values_videos: normalised frames ``[B, T, 3, S, S]`` (or give ``encoder_hidden_states``).
            gaze: ground-truth trajectories g ``[B, T, 2]`` in *model* coordinates ``[-1, 1]``
                (``geometry.unit_to_model`` of unit coordinates; the collator does this).
            valid_mask: ``[B, T]`` bool, frames that enter the loss (blink, untracked and padding frames are False).
                Defaults to all True. Non-finite gaze on invalid frames is ignored (replaced by the centre).
            encoder_hidden_states: precomputed encoder tokens ``[B, (T / tubelet) * N, D]``, e.g. from a frozen-
                feature cache; then ``pixel_values_videos`` is not needed.
            generator: optional ``torch.Generator`` for s, x_0 and the self-conditioning coin.
            output_attentions, output_hidden_states: return every layer's attention weights / states (encoder,
                spatial encoder, task bank, velocity network; see :class:`GazeFlowModelOutput`). Default: the
                config's.
            kwargs: accepted and unused (trainers pass loss bookkeeping such as ``num_items_in_batch``).

        Flow matching: with s ~ U(0, 1) and x_0 ~ N(0, I): x_s = (1 - (1 - sigma_min) s) x_0 + s g, target
        u = g - (1 - sigma_min) x_0, loss = sum(m * (v_theta - u)^2) / (2 * sum(m)). With probability
        ``self_conditioning_prob`` per step a first, gradient-free pass gives x1_hat = x_s + (1 - s) v, fed to the
        second pass; otherwise x1_hat = 0.
        """
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        output_attentions = output_attentions if output_attentions is not None else self.config.output_attentions
        output_hidden_states = (
            output_hidden_states if output_hidden_states is not None else self.config.output_hidden_states
        )
        flags = dict(output_attentions=output_attentions, output_hidden_states=output_hidden_states)
        if gaze is None:
            raise ValueError(
                "forward: `gaze` [B, T, 2] is required (it computes the training loss); "
                "use `generate()` to sample trajectories"
            )
        gaze, valid_mask = check_training_targets(gaze, valid_mask)
        frames = gaze.shape[1]
        encoder_hidden_states, encoder_outputs = self._encoder_tokens_for_loss(
            pixel_values_videos, encoder_hidden_states, gaze, flags
        )
        condition, condition_outputs = self.encode_condition(encoder_hidden_states, frames, **flags)
        result = objective_loss(self, condition, gaze, valid_mask, generator, **flags)
        velocity_outputs = result.network_outputs or GazeFlowVelocityOutput()
        loss, ground_loss, grounding_logits = result.loss, None, None
        if self.condition_encoder.grounding_head is not None:
            grounding_logits = self.condition_encoder.grounding_head(condition.visual_tokens)
            ground_loss = self.grounding_loss(grounding_logits, gaze, valid_mask)
            loss = loss + self.config.grounding_loss_weight * ground_loss
        output = GazeFlowModelOutput(
            loss=loss,
            predicted_velocity=result.prediction,
            target_velocity=result.target,
            flow_time=result.time,
            encoder_hidden_states=encoder_outputs.hidden_states,
            encoder_attentions=encoder_outputs.attentions,
            spatial_hidden_states=condition_outputs.spatial_hidden_states,
            spatial_attentions=condition_outputs.spatial_attentions,
            task_bank_attentions=condition_outputs.task_bank_attentions if output_attentions else None,
            temporal_attentions=condition_outputs.temporal_attentions,
            hidden_states=velocity_outputs.hidden_states,
            attentions=velocity_outputs.attentions,
            visual_cross_attentions=velocity_outputs.visual_cross_attentions,
            task_cross_attentions=velocity_outputs.task_cross_attentions,
            objective_loss=result.loss if ground_loss is not None else None,
            grounding_loss=ground_loss,
            grounding_logits=grounding_logits,
        )
        return output if return_dict else output.to_tuple()

    def _encoder_tokens_for_loss(
        self,
        pixel_values_videos: torch.Tensor | None,
        encoder_hidden_states: torch.Tensor | None,
        gaze: torch.Tensor,
        flags: dict,
    ) -> tuple[torch.Tensor, BaseModelOutput]:
        """:meth:`forward`'s encoder tokens (given, or of ``pixel_values_videos``, checked against ``gaze``'s batch
        and frames) and the encoder's per-layer outputs (empty unless ``flags`` ask for them)."""
        if encoder_hidden_states is not None:
            return encoder_hidden_states, BaseModelOutput()
        if pixel_values_videos is None:
            raise ValueError("forward: give `pixel_values_videos` [B, T, 3, S, S] or `encoder_hidden_states`")
        check_pixel_values(pixel_values_videos, self.config)
        batch, frames = gaze.shape[:2]
        if pixel_values_videos.shape[:2] != (batch, frames):
            raise ValueError(
                f"forward: `pixel_values_videos` has {tuple(pixel_values_videos.shape[:2])} "
                f"(batch, frames) but `gaze` has {(batch, frames)}"
            )
        encoded = self.encode_video(pixel_values_videos, **flags)
        if isinstance(encoded, BaseModelOutput):
            return encoded.last_hidden_state, encoded
        return encoded, BaseModelOutput()

    def grounding_loss(
        self, grounding_logits: torch.Tensor, gaze: torch.Tensor, valid_mask: torch.Tensor
    ) -> torch.Tensor:
        """L_ground of ``grounding_logits [B, G, N]`` against ``gaze [B, T, 2]`` (model coordinates) on the
        ``valid_mask [B, T]`` frames: the target is a Gaussian of ``config.grounding_sigma`` patch widths around
        each frame's gaze over the token grid (see ``modeling_gazeflow_objectives.grounding_loss``)."""
        grid_size = self.config.token_grid_size
        centres = patch_centres(grid_size, device=grounding_logits.device)
        sigma = self.config.grounding_sigma * 2.0 / grid_size  # patch widths -> model units (the frame spans 2)
        return grounding_loss(grounding_logits, gaze, valid_mask, centres, sigma)

    # ------------------------------------------------------------------ sampling
    @torch.no_grad()
    def generate(
        self,
        pixel_values_videos: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        num_samples: int | None = None,
        num_steps: int | None = None,
        solver: str | None = None,
        generator: torch.Generator | None = None,
        window_batch_size: int = 8,
        return_dict: bool | None = None,
        window_mode: str | None = None,
        noise_scale: float | None = None,
    ) -> GazeFlowGenerationOutput | tuple:
        """Sample K gaze trajectories per clip with S ODE steps (paper Algorithm 1, Appendices D.2-D.3); with
        ``objective="diffusion"`` S DDIM steps, with ``objective="regression"`` one direct prediction (K = 1).

        Args:
            pixel_values_videos: normalised frames ``[B, T, 3, S, S]`` of any length T >= 1; longer than
                ``config.num_frames`` -> sliding windows joined as ``window_mode`` says; shorter -> padded by
                repeating the last frame and cut back. T frames in, T frames out.
            encoder_hidden_states: instead of frames, encoder tokens ``[B, G * N, D]`` of one window of
                ``G * tubelet`` frames.
            num_samples, num_steps, solver: K, S and the ODE solver (defaults from the config).
            generator: a ``torch.Generator`` for the initial noise: the same seed gives the same samples.
            window_batch_size: windows encoded and sampled together.
            window_mode: ``"coherent"`` (each window sampled conditioned on the frames it shares with the previous
                one: every sample is one continuous trajectory) or ``"blend"`` (the paper's independent windows with
                a linear blend); default from the config (see ``generation_gazeflow``).
            noise_scale: tau, the standard deviation of x_0 = tau e (1: Algorithm 1's N(0, I); below 1 a sampling
                temperature); default from the config.
        """
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        sampling = dict(
            num_samples=num_samples,
            num_steps=num_steps,
            solver=solver,
            window_mode=window_mode,
            noise_scale=noise_scale,
        )
        sampled = generate_trajectories(
            self,
            pixel_values_videos=pixel_values_videos,
            encoder_hidden_states=encoder_hidden_states,
            settings=SamplingSettings.resolve(self.config, **sampling),
            generator=generator,
            window_batch_size=window_batch_size,
        )
        output = GazeFlowGenerationOutput(trajectories=sampled.trajectories, mean=sampled.mean)
        return output if return_dict else output.to_tuple()


__all__ = [
    "GazeFlowModel",
    "GazeFlowPreTrainedModel",
]
