"""GazeFlow: egocentric gaze trajectories by conditional flow matching (paper Section 3, Appendices C-E).

The model has three parts, each a small named module:

* :class:`GazeFlowVideoEncoder` - E_psi's bottom-up backbone: the V-JEPA 2 encoder (transformers
  ``VJEPA2Encoder``, the encoder path of ``VJEPA2Model``; the predictor is never built nor run), optionally with
  LoRA adapters through ``peft``.
* :class:`GazeFlowConditionEncoder` - from encoder tokens to the condition c = (c_v, c_task): the projection
  W_proj, the per-frame spatial-token encoder, and the task-token bank (Eqs. visual_condition, task_slots,
  task_bank). :meth:`GazeFlowModel.build_condition` also precomputes every block's visual and task keys/values,
  so that one clip's condition is computed once and shared by all K samples and S steps.
* :class:`GazeFlowVelocityNetwork` - v_theta(x_s, s, c): coordinate, timestep and self-conditioning embeddings,
  six DenoiserBlocks and a linear head to a velocity in R^{2T} (Section 3.2, Appendix C.3).

:meth:`GazeFlowModel.forward` returns the conditional flow-matching loss (Eq. cfm_loss with the OT interpolant of
Appendix E.4 and self-conditioning of Appendix D.2); :meth:`GazeFlowModel.generate` samples trajectories through
:mod:`transformers_gazeflow.sampling`, which owns solvers, seeds, self-conditioning state and sliding windows.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from transformers import PreTrainedModel, VJEPA2Config
from transformers import initialization as init
from transformers.models.vjepa2.modeling_vjepa2 import VJEPA2Encoder
from transformers.utils import ModelOutput

from .configuration_gazeflow import GazeFlowConfig
from .modeling_gazeflow_causal import causal_task_tokens, encode_video_causal
from .modeling_gazeflow_layers import (
    COORDINATE_EMBEDDING_SCALE,
    TIME_EMBEDDING_SCALE,
    GazeFlowAttention,
    GazeFlowDenoiserBlock,
    GazeFlowKeyValueCache,
    GazeFlowRotaryEmbedding,
    GazeFlowSinusoidalMLP,
    GazeFlowSpatialEncoderLayer,
    sincos_2d_position_encoding,
)
from .modeling_gazeflow_objectives import objective_loss
from .modeling_gazeflow_variants import GazeFlowFramePosition, GazeFlowTaskConcat
from .validation import check_encoder_hidden_states, check_pixel_values, check_training_targets


# ---------------------------------------------------------------------------------------------------- outputs
@dataclass
class GazeFlowModelOutput(ModelOutput):
    """Output of :meth:`GazeFlowModel.forward` (training).

    Args:
        loss: the masked loss of ``config.objective`` (flow matching: Eq. cfm_loss), mean over valid frames and
            coordinates.
        predicted_velocity: the network's output ``[B, T, 2]``: v_theta(x_s, s, c) for flow matching, the noise
            estimate eps_hat for diffusion, the trajectory for regression.
        target_velocity: its target ``[B, T, 2]``: ``g - (1 - sigma_min) x_0`` for flow matching, the noise eps for
            diffusion, g for regression.
        flow_time: the times drawn for each clip, ``[B]``: s for flow matching, tau = t / N for diffusion, None
            for regression.
    """

    loss: torch.FloatTensor | None = None
    predicted_velocity: torch.FloatTensor | None = None
    target_velocity: torch.FloatTensor | None = None
    flow_time: torch.FloatTensor | None = None


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


@dataclass
class GazeFlowCondition:
    """The per-clip condition c = (c_v, c_task) with every block's keys/values, computed once per clip.

    Attributes:
        visual_tokens: c_v, ``[B, G, N, d]``: spatial tokens after W_proj and the spatial encoder, one entry per
            group of ``frames_per_group`` consecutive frames that read the same encoder tokens.
        task_tokens: c_task = [p; q_1..q_M], ``[B, M + 1, d]``; the causal variant has a bank per group,
            ``[B, G, M + 1, d]`` (``task_per_frame``); None without the top-down path.
        visual_key_values: per block, keys and values of c_v, each ``[B * G, H, N, d_h]`` (None for a block without
            visual cross-attention).
        task_key_values: per block, keys and values of c_task, each ``[B, H, M + 1, d_h]`` or, per frame,
            ``[B * G, H, M + 1, d_h]`` (None for a block without task cross-attention).
        num_frames: T, the frames of the window.
        frames_per_group: g; ``T = G * g``.
    """

    visual_tokens: torch.Tensor
    task_tokens: torch.Tensor
    visual_key_values: tuple[tuple[torch.Tensor, torch.Tensor], ...]
    task_key_values: tuple[tuple[torch.Tensor, torch.Tensor], ...]
    num_frames: int
    frames_per_group: int
    task_per_frame: bool = False

    @property
    def batch_size(self) -> int:
        return self.visual_tokens.shape[0]


# ---------------------------------------------------------------------------------------------------- modules
class GazeFlowVideoEncoder(nn.Module):
    """The V-JEPA 2 ViT-L encoder path (paper Section 3.1, "Bottom-Up Feature Extraction"; Appendix C.1).

    Input frames ``[B, T, 3, 256, 256]``; output the last hidden state ``[B, (T / 2) * N, D]`` with N = 16 x 16
    spatial tokens per tubelet of 2 frames. LoRA adapters (Appendix E.4) are injected with ``peft`` by
    :meth:`add_lora`.
    """

    def __init__(self, config: VJEPA2Config):
        super().__init__()
        self.config = config
        self.vjepa2 = VJEPA2Encoder(config)

    def forward(self, pixel_values_videos: torch.Tensor) -> torch.Tensor:
        return self.vjepa2(pixel_values_videos=pixel_values_videos).last_hidden_state

    def add_lora(self, r: int, alpha: float, dropout: float, target_modules: list[str]) -> None:
        from peft import LoraConfig, inject_adapter_in_model

        lora_config = LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=list(target_modules))
        inject_adapter_in_model(lora_config, self.vjepa2)

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


class GazeFlowSpatialEncoder(nn.Module):
    """Per-frame spatial-token encoder: 2D sin-cos position encoding + pre-norm layers (Appendix C.1).

    Works on each frame on its own and never mixes frames: input and output ``[B, G, N, d]``.
    """

    def __init__(self, config: GazeFlowConfig):
        super().__init__()
        self.grid_size = config.image_size // config.encoder_config.patch_size
        self.hidden_size = config.hidden_size
        self.register_buffer("position_encoding", self.compute_position_encoding(), persistent=False)
        self.layers = nn.ModuleList([GazeFlowSpatialEncoderLayer(config) for _ in range(config.num_spatial_layers)])
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def compute_position_encoding(self) -> torch.Tensor:
        """The fixed 2D sin-cos encoding (recomputed by ``_init_weights``: buffers are not saved)."""
        return sincos_2d_position_encoding(self.grid_size, self.hidden_size)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        batch, groups, num_tokens, width = tokens.shape
        hidden = (tokens + self.position_encoding.to(tokens.dtype)).reshape(batch * groups, num_tokens, width)
        for layer in self.layers:
            hidden = layer(hidden)
        return self.norm(hidden).view(batch, groups, num_tokens, width)


class GazeFlowTaskTokenBank(nn.Module):
    """The top-down task-token bank c_task = [p; q_1..q_M] (paper Eqs. task_slots and task_bank).

    Frame summaries V_bar_t are spatial means of c_v; p is their temporal mean; M learnable queries Q_task
    cross-attend (MHCA) to the T frame summaries. Frames of one group share one summary: a softmax over T keys in
    which every group appears g times equals the softmax over the G distinct keys, so the bank is computed on
    groups exactly.


    With ``num_task_queries=0`` only p is kept (no queries, no attention). In the causal variant the bank is
    per frame, over frames <= t (``modeling_gazeflow_causal.causal_task_tokens``), ``[B, G, M + 1, d]``.
    """

    def __init__(self, config: GazeFlowConfig):
        super().__init__()
        self.num_queries = config.num_task_queries
        self.causal = config.causal
        if self.num_queries > 0:
            self.queries = nn.Parameter(torch.zeros(config.num_task_queries, config.hidden_size))
            self.attention = GazeFlowAttention(config.hidden_size, config.num_attention_heads)

    def forward(self, visual_tokens: torch.Tensor) -> torch.Tensor:
        frame_summaries = visual_tokens.mean(dim=2)  # V_bar: [B, G, d]
        if self.causal:
            return causal_task_tokens(self, frame_summaries)
        pooled = frame_summaries.mean(dim=1, keepdim=True)  # p: [B, 1, d]
        if self.num_queries == 0:
            return pooled
        batch = visual_tokens.shape[0]
        query = self.attention.project_query(self.queries.to(visual_tokens.dtype)).expand(batch, -1, -1, -1)
        key, value = self.attention.project_key_value(frame_summaries)
        task_queries = self.attention.attend(query, key, value)  # q_1..q_M: [B, M, d]
        return torch.cat([pooled, task_queries], dim=1)


class GazeFlowConditionEncoder(nn.Module):
    """E_psi after the backbone: W_proj (D -> d), the spatial encoder (-> c_v) and the task bank (-> c_task)."""

    def __init__(self, config: GazeFlowConfig):
        super().__init__()
        self.visual_projection = nn.Linear(config.encoder_config.hidden_size, config.hidden_size)
        self.spatial_encoder = GazeFlowSpatialEncoder(config)
        self.task_bank = GazeFlowTaskTokenBank(config) if config.uses_task_bank else None

    def forward(self, encoder_tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``encoder_tokens [B, G, N, D]`` -> (c_v ``[B, G, N, d]``, c_task ``[B, M + 1, d]`` or None)."""
        visual_tokens = self.spatial_encoder(self.visual_projection(encoder_tokens))
        return visual_tokens, self.task_bank(visual_tokens) if self.task_bank is not None else None


class GazeFlowVelocityNetwork(nn.Module):
    """The conditional velocity network v_theta(x_s, s, c) (paper Section 3.2, Appendix C).

    Gaze tokens h_t = E_coord(x_s,t) + E_time(s) + E_self(x1_hat_t) (our reading of what the paper leaves open,
    ``model.md``), L DenoiserBlocks, then LayerNorm + Linear(d -> 2) per frame: a velocity in R^{2T}. The frame
    position (``position_encoding``) and, with ``task_guidance="concat"``, the task bank enter through
    ``modeling_gazeflow_variants``.
    """

    def __init__(self, config: GazeFlowConfig):
        super().__init__()
        self.coordinate_embedding = GazeFlowSinusoidalMLP(2, config.hidden_size, COORDINATE_EMBEDDING_SCALE)
        self.time_embedding = GazeFlowSinusoidalMLP(1, config.hidden_size, TIME_EMBEDDING_SCALE)
        self.self_condition_embedding = GazeFlowSinusoidalMLP(2, config.hidden_size, COORDINATE_EMBEDDING_SCALE)
        self.frame_position = GazeFlowFramePosition(config)
        self.task_concat = GazeFlowTaskConcat(config) if config.use_task_cross_attention and \
            config.task_guidance == "concat" else None
        self.blocks = nn.ModuleList([GazeFlowDenoiserBlock(config) for _ in range(config.num_hidden_layers)])
        self.output_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.output_head = nn.Linear(config.hidden_size, 2)

    def forward(self, sample: torch.Tensor, flow_time: torch.Tensor, self_condition: torch.Tensor,
                condition: GazeFlowCondition, positions: torch.Tensor | None = None,
                caches: list[GazeFlowKeyValueCache] | None = None) -> torch.Tensor:
        """``sample``, ``self_condition``: ``[B, K, T, 2]``; ``flow_time``: ``[B, K]``; returns ``[B, K, T, 2]``.

        ``positions`` (frame indices of the T tokens, default ``0 .. T - 1``) and ``caches`` (one self-attention
        key/value cache per block) are for the causal streamer, which feeds the newest frame only.
        """
        hidden = (self.coordinate_embedding(sample) + self.self_condition_embedding(self_condition)
                  + self.time_embedding(flow_time).unsqueeze(2))
        if positions is None:
            positions = torch.arange(sample.shape[2], device=sample.device)
        hidden = self.frame_position.add_absolute(hidden, positions)
        if self.task_concat is not None:
            hidden = self.task_concat(hidden, condition.task_tokens, condition.frames_per_group)
        rotary = self.frame_position.rotary_angles(positions)
        caches = caches if caches is not None else [None] * len(self.blocks)
        for block, visual_kv, task_kv, cache in zip(self.blocks, condition.visual_key_values,
                                                    condition.task_key_values, caches):
            hidden = block(hidden, rotary, visual_kv, task_kv, condition.frames_per_group, condition.task_per_frame,
                           cache)
        return self.output_head(self.output_norm(hidden))


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

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        std = self.config.initializer_range
        if isinstance(module, (nn.Linear, nn.Conv3d)):
            init.trunc_normal_(module.weight, std=std)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, nn.LayerNorm):
            init.ones_(module.weight)
            init.zeros_(module.bias)
        elif isinstance(module, GazeFlowDenoiserBlock):
            if module.task_attention is not None:
                init.constant_(module.task_gate, self.config.task_gate_init)
        elif isinstance(module, GazeFlowTaskTokenBank):
            if module.num_queries > 0:
                init.trunc_normal_(module.queries, std=std)
        elif isinstance(module, GazeFlowFramePosition):
            if module.mode == "learned":
                init.trunc_normal_(module.embedding, std=std)
        elif isinstance(module, GazeFlowSpatialEncoder):
            init.copy_(module.position_encoding, module.compute_position_encoding())
        elif isinstance(module, GazeFlowRotaryEmbedding):
            init.copy_(module.inv_freq, module.compute_inv_freq())


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
        # the encoder follows the attention implementation chosen for the whole model (SDPA by default)
        config.encoder_config._attn_implementation = config._attn_implementation or "sdpa"
        self.video_encoder = GazeFlowVideoEncoder(config.encoder_config)
        self.condition_encoder = GazeFlowConditionEncoder(config)
        self.velocity_network = GazeFlowVelocityNetwork(config)
        self.post_init()
        if config.use_lora:
            self.video_encoder.add_lora(config.lora_r, config.lora_alpha, config.lora_dropout,
                                        config.lora_target_modules)
        self.set_encoder_trainability()

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

    def encode_video(self, pixel_values_videos: torch.Tensor) -> torch.Tensor:
        """Encoder tokens ``[B, (T / tubelet) * N, D]`` of normalised frames ``[B, T, 3, S, S]``.

        The causal variant returns per-frame tokens ``[B, T * N, D]``, frame t's from the encoder run on its causal
        window of ``causal_encoder_frames`` frames ending at t (``modeling_gazeflow_causal``).
        With a frozen encoder and no LoRA, runs without autograd (nothing in it trains).
        """
        check_pixel_values(pixel_values_videos, self.config)
        needs_grad = torch.is_grad_enabled() and any(p.requires_grad for p in self.video_encoder.parameters())
        with torch.set_grad_enabled(needs_grad):
            if self.config.causal:
                return encode_video_causal(self.video_encoder, pixel_values_videos,
                                           self.config.causal_encoder_frames, self.config.tokens_per_frame)
            return self.video_encoder(pixel_values_videos)

    # ------------------------------------------------------------------ condition
    def build_condition(self, encoder_hidden_states: torch.Tensor, num_frames: int,
                        share_group_tokens: bool = True) -> GazeFlowCondition:
        """The per-clip condition c = (c_v, c_task) and every block's visual/task keys and values.

        ``encoder_hidden_states`` ``[B, (T / tubelet) * N, D]`` are the encoder's tokens of a T-frame window; frame
        t reads tubelet floor(t / tubelet) (causal variant: ``[B, T * N, D]``, a group of tokens per frame). With ``share_group_tokens`` (the default), the frames of a tubelet
        share one entry of c_v and one set of keys/values; without it, tokens are first copied out per frame,
        which is the plain per-frame computation the paper describes (identical results, tubelet-times the work).
        """
        group = self.config.frames_per_encoder_group
        tokens = check_encoder_hidden_states(encoder_hidden_states, num_frames, self.config)
        if share_group_tokens:
            frames_per_group = group
        else:
            frame_to_group = torch.arange(num_frames, device=tokens.device) // group
            tokens = tokens.index_select(1, frame_to_group)
            frames_per_group = 1
        visual_tokens, task_tokens = self.condition_encoder(tokens)
        return self.condition_from_tokens(visual_tokens, task_tokens, num_frames, frames_per_group)

    def condition_from_tokens(self, visual_tokens: torch.Tensor, task_tokens: torch.Tensor | None, num_frames: int,
                              frames_per_group: int) -> GazeFlowCondition:
        """Every block's keys/values of c_v and c_task (only for the sub-layers the block has)."""
        batch, groups = visual_tokens.shape[:2]
        flat_visual = visual_tokens.reshape(batch * groups, *visual_tokens.shape[2:])
        task_per_frame = task_tokens is not None and task_tokens.dim() == 4
        flat_task = task_tokens.flatten(0, 1) if task_per_frame else task_tokens
        visual_kv, task_kv = [], []
        for block in self.velocity_network.blocks:
            visual = block.visual_attention
            task = block.task_attention
            visual_kv.append(visual.project_key_value(flat_visual) if visual is not None else None)
            task_kv.append(task.project_key_value(flat_task) if task is not None else None)
        return GazeFlowCondition(visual_tokens, task_tokens, tuple(visual_kv), tuple(task_kv), num_frames,
                                 frames_per_group, task_per_frame)

    def velocity(self, sample: torch.Tensor, flow_time: torch.Tensor | float, condition: GazeFlowCondition,
                 self_condition: torch.Tensor | None = None) -> torch.Tensor:
        """v_theta(x_s, s, c): ``sample [B, K, T, 2]`` (model coordinates), ``flow_time`` s as a float or
        ``[B, K]``, ``self_condition`` x1_hat ``[B, K, T, 2]`` (zeros when None). Returns ``[B, K, T, 2]``."""
        batch, samples, frames, _ = sample.shape
        if batch != condition.batch_size or frames != condition.num_frames:
            raise ValueError(
                f"velocity: `sample` has shape {tuple(sample.shape)} but the condition is for {condition.batch_size} "
                f"clips of {condition.num_frames} frames (expected [{condition.batch_size}, K, "
                f"{condition.num_frames}, 2])"
            )
        if not torch.is_tensor(flow_time):  # filled on the device: torch.tensor(s, device=...) would be a blocking copy
            flow_time = torch.full((), float(flow_time), device=sample.device)
        flow_time = flow_time.to(device=sample.device, dtype=torch.float32).expand(batch, samples)
        if self_condition is None:
            self_condition = torch.zeros_like(sample)
        return self.velocity_network(sample, flow_time, self_condition, condition)

    # ------------------------------------------------------------------ training
    def forward(
        self,
        pixel_values_videos: torch.Tensor | None = None,
        gaze: torch.Tensor | None = None,
        valid_mask: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
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

        Flow matching: with s ~ U(0, 1) and x_0 ~ N(0, I): x_s = (1 - (1 - sigma_min) s) x_0 + s g, target
        u = g - (1 - sigma_min) x_0, loss = sum(m * (v_theta - u)^2) / (2 * sum(m)). With probability
        ``self_conditioning_prob`` per step a first, gradient-free pass gives x1_hat = x_s + (1 - s) v, fed to the
        second pass; otherwise x1_hat = 0.
        """
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        if gaze is None:
            raise ValueError("forward: `gaze` [B, T, 2] is required (it computes the training loss); "
                             "use `generate()` to sample trajectories")
        gaze, valid_mask = check_training_targets(gaze, valid_mask)
        batch, frames, _ = gaze.shape
        if encoder_hidden_states is None:
            if pixel_values_videos is None:
                raise ValueError("forward: give `pixel_values_videos` [B, T, 3, S, S] or `encoder_hidden_states`")
            check_pixel_values(pixel_values_videos, self.config)
            if pixel_values_videos.shape[:2] != (batch, frames):
                raise ValueError(f"forward: `pixel_values_videos` has {tuple(pixel_values_videos.shape[:2])} "
                                 f"(batch, frames) but `gaze` has {(batch, frames)}")
            encoder_hidden_states = self.encode_video(pixel_values_videos)
        condition = self.build_condition(encoder_hidden_states, frames)
        result = objective_loss(self, condition, gaze, valid_mask, generator)
        output = GazeFlowModelOutput(loss=result.loss, predicted_velocity=result.prediction,
                                     target_velocity=result.target, flow_time=result.time)
        return output if return_dict else output.to_tuple()

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
    ) -> GazeFlowGenerationOutput | tuple:
        """Sample K gaze trajectories per clip with S ODE steps (paper Algorithm 1, Appendices D.2-D.3); with
        ``objective="diffusion"`` S DDIM steps, with ``objective="regression"`` one direct prediction (K = 1).

        Args:
            pixel_values_videos: normalised frames ``[B, T, 3, S, S]`` of any length T >= 1; longer than
                ``config.num_frames`` -> sliding windows with a linear blend; shorter -> padded by repeating the
                last frame and cut back. T frames in, T frames out.
            encoder_hidden_states: instead of frames, encoder tokens ``[B, G * N, D]`` of one window of
                ``G * tubelet`` frames.
            num_samples, num_steps, solver: K, S and the ODE solver (defaults from the config).
            generator: a ``torch.Generator`` for the initial noise: the same seed gives the same samples.
            window_batch_size: windows encoded and sampled together.
        """
        from .sampling import generate_trajectories

        return_dict = return_dict if return_dict is not None else self.config.return_dict
        trajectories = generate_trajectories(
            self, pixel_values_videos=pixel_values_videos, encoder_hidden_states=encoder_hidden_states,
            num_samples=num_samples if num_samples is not None else self.config.num_samples,
            num_steps=num_steps if num_steps is not None else self.config.num_steps,
            solver=solver if solver is not None else self.config.solver,
            generator=generator, window_batch_size=window_batch_size,
        )
        output = GazeFlowGenerationOutput(trajectories=trajectories, mean=trajectories.mean(dim=1))
        return output if return_dict else output.to_tuple()


__all__ = [
    "GazeFlowModel",
    "GazeFlowPreTrainedModel",
    "GazeFlowModelOutput",
    "GazeFlowGenerationOutput",
    "GazeFlowCondition",
    "GazeFlowVideoEncoder",
    "GazeFlowConditionEncoder",
    "GazeFlowSpatialEncoder",
    "GazeFlowTaskTokenBank",
    "GazeFlowVelocityNetwork",
]
