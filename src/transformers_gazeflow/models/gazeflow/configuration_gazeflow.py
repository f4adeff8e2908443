"""GazeFlow configuration: every knob of the model and its sampler, validated on construction.

Defaults follow the paper (Section 3, Appendices C-E.4) and our reading of what it leaves open: a V-JEPA 2 ViT-L
encoder (``encoder_config``), a d=256 velocity network with six
DenoiserBlocks of 8 heads, M=4 learnable task queries, 64-frame windows with stride 32, the OT interpolant with
``sigma_min = 1e-3``, self-conditioning with probability 0.5, and LoRA r=16 / alpha=32 / dropout 0.05 on the
encoder's query and value projections.
"""

from __future__ import annotations

from typing import Any

from transformers import PretrainedConfig, VJEPA2Config

SOLVERS = ("euler", "heun", "midpoint")
OBJECTIVES = ("flow_matching", "diffusion", "regression")
POSITION_ENCODINGS = ("rope", "learned", "none")
TASK_GUIDANCES = ("cross_attention", "concat")
WINDOW_MODES = ("coherent", "blend")
FLOW_TIME_SAMPLINGS = ("uniform", "late_quadratic", "logit_normal")


def _require(condition: bool, name: str, expected: str, value: Any) -> None:
    if not condition:
        raise ValueError(f"GazeFlowConfig: `{name}` must be {expected}, got {value!r}")


class GazeFlowConfig(PretrainedConfig):
    r"""Configuration of a [`GazeFlowModel`].

    Args:
        encoder_config (`VJEPA2Config` or `dict`, *optional*):
            The video encoder E_psi (paper Section 3.1). Defaults to `VJEPA2Config()`, the V-JEPA 2 ViT-L
            (hidden 1024, 24 layers, patch 16, tubelet 2, 256x256 input).
        hidden_size (`int`, defaults to 256): width d of the velocity network, of W_proj's output and of c_v.
        num_hidden_layers (`int`, defaults to 6): number L of DenoiserBlocks (Appendix C.3).
        num_attention_heads (`int`, defaults to 8): heads H of every attention (d_h = d / H).
        intermediate_size (`int`, defaults to 1024): inner width of every feed-forward layer.
        num_spatial_layers (`int`, defaults to 2): pre-norm Transformer layers of the per-frame spatial encoder.
        num_task_queries (`int`, defaults to 4): learnable task queries M of the task-token bank (Eq. task_slots).
        task_gate_init (`float`, defaults to -2.0): initial value of the task cross-attention gate g^(l).
        rope_theta (`float`, defaults to 10000.0): base of the 1D RoPE over frame index (Appendix C.2).
        num_frames (`int`, defaults to 64): window length W in frames (Appendix D.3).
        window_stride (`int`, defaults to 32): stride W_s between sliding windows (Appendix D.3).
        window_mode (`str`, defaults to `"coherent"`): how overlapping windows of a long clip are joined:
            `"coherent"` samples each window conditioned on the frames it shares with the previous one, so each of
            the K samples is one continuous trajectory (beyond the paper; see `generation_gazeflow`); `"blend"` samples
            windows independently and blends them linearly over the overlap (the paper's Appendix D.3).
        sigma_min (`float`, defaults to 1e-3): sigma_min of the OT interpolant (Appendix E.4).
        flow_time_sampling (`str`, defaults to `"uniform"`): how flow matching draws its training time s from one
            uniform u per example: `"uniform"` s = u (the paper's Algorithm 1), `"late_quadratic"`
            s = 1 - (1 - u)^2 (more draws near the data end, where sub-pixel precision is learned; beyond the
            paper) or `"logit_normal"` s = sigmoid(Phi^-1(u)) (Esser et al. 2024; beyond the paper). See
            `scheduling_gazeflow.flow_time_from_uniform`.
        self_conditioning_prob (`float`, defaults to 0.5): probability of self-conditioning in training (E.2).
        grounding_loss_weight (`float`, defaults to 0.0): weight lambda_g of the auxiliary grounding loss (beyond the
            paper): a linear head scores every spatial token of c_v per frame group, trained by cross-entropy to
            put its mass on the tokens around the recorded gaze, so c_v learns to mark *what is looked at* from the
            frames alone. The loss is `L_cfm + lambda_g * L_ground`; 0 is the paper's model (no head, no extra
            weights). See `modeling_gazeflow_objectives.grounding_loss`.
        grounding_sigma (`float`, defaults to 0.5): width of the grounding target, a Gaussian over the patch
            centres around the gaze point, in patch widths.
        num_samples (`int`, defaults to 30): default K, trajectories sampled per clip (1 for `objective="regression"`).
        num_steps (`int`, defaults to 5): default S, ODE steps per trajectory.
        solver (`str`, defaults to `"euler"`): ODE solver, one of `"euler"`, `"heun"`, `"midpoint"`.
        heatmap_sigma (`float`, defaults to 25.0): Gaussian sigma in native pixels for trajectory -> heatmap.
        use_lora (`bool`, defaults to `True`): add LoRA adapters to the encoder (Appendix E.4).
        lora_r, lora_alpha, lora_dropout, lora_target_modules: the LoRA settings (r=16, alpha=32, 0.05,
            `["query", "value"]`).
        freeze_encoder (`bool`, defaults to `True`): freeze the encoder's own weights (LoRA, if on, still trains).
        causal (`bool`, defaults to `False`): the causal variant of Appendix F.4: causal frame self-attention, a
            per-frame task bank over frames <= t, and per-frame encoder tokens from a causal window of
            `causal_encoder_frames` frames ending at t (see `modeling_gazeflow_causal`).
        causal_encoder_frames (`int`, defaults to 2): length of the causal encoder window (a multiple of the
            encoder's tubelet size); frame t reads the last tubelet (t-1, t) of the window of frames t-w+1..t.
        objective (`str`, defaults to `"flow_matching"`): the training objective and its sampler (Sections 3.2, 4.4,
            Appendix F.4): `"flow_matching"` (the paper's CFM, ODE solvers), `"diffusion"` (epsilon prediction,
            cosine schedule, DDIM with the same S) or `"regression"` (direct prediction, masked MSE, K=1).
        diffusion_timesteps (`int`, defaults to 1000): discrete training timesteps of the diffusion objective.
        use_visual_cross_attention (`bool`, defaults to `True`): the per-frame visual cross-attention sub-layer
            (bottom-up path, Eq. ca_out); False is the "- Bottom-up Visual Feature" ablation.
        use_task_cross_attention (`bool`, defaults to `True`): the top-down task path (task bank + task guidance);
            False is the "- Top-down Task Guidance" ablation.
        position_encoding (`str`, defaults to `"rope"`): frame position in the self-attention: `"rope"` (Appendix
            C.2), `"learned"` (an absolute table added to the gaze tokens, Table pe_compare) or `"none"`.
        task_guidance (`str`, defaults to `"cross_attention"`): how c_task enters: gated cross-attention in every
            block, or `"concat"`: channel-wise concatenation of the flattened bank to the gaze-token input.
        initializer_range (`float`, defaults to 0.02): std of the truncated-normal weight initialisation.
        layer_norm_eps (`float`, defaults to 1e-6): epsilon of every LayerNorm of the GazeFlow modules.
    """

    model_type = "gazeflow"
    sub_configs = {"encoder_config": VJEPA2Config}

    def __init__(
        self,
        encoder_config: VJEPA2Config | dict | None = None,
        hidden_size: int = 256,
        num_hidden_layers: int = 6,
        num_attention_heads: int = 8,
        intermediate_size: int = 1024,
        num_spatial_layers: int = 2,
        num_task_queries: int = 4,
        task_gate_init: float = -2.0,
        rope_theta: float = 10000.0,
        num_frames: int = 64,
        window_stride: int = 32,
        window_mode: str = "coherent",
        sigma_min: float = 1e-3,
        flow_time_sampling: str = "uniform",
        self_conditioning_prob: float = 0.5,
        grounding_loss_weight: float = 0.0,
        grounding_sigma: float = 0.5,
        num_samples: int | None = None,
        num_steps: int = 5,
        solver: str = "euler",
        heatmap_sigma: float = 25.0,
        use_lora: bool = True,
        lora_r: int = 16,
        lora_alpha: float = 32,
        lora_dropout: float = 0.05,
        lora_target_modules: list[str] | tuple[str, ...] | None = None,
        freeze_encoder: bool = True,
        causal: bool = False,
        causal_encoder_frames: int = 2,
        objective: str = "flow_matching",
        diffusion_timesteps: int = 1000,
        use_visual_cross_attention: bool = True,
        use_task_cross_attention: bool = True,
        position_encoding: str = "rope",
        task_guidance: str = "cross_attention",
        initializer_range: float = 0.02,
        layer_norm_eps: float = 1e-6,
        **kwargs,
    ):
        if encoder_config is None:
            encoder_config = VJEPA2Config()
        elif isinstance(encoder_config, dict):
            encoder_config = VJEPA2Config(**{k: v for k, v in encoder_config.items() if k != "model_type"})
        elif not isinstance(encoder_config, VJEPA2Config):
            raise ValueError(
                f"GazeFlowConfig: `encoder_config` must be a VJEPA2Config, a dict or None, got {type(encoder_config)}"
            )
        self.encoder_config = encoder_config
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.num_spatial_layers = num_spatial_layers
        self.num_task_queries = num_task_queries
        self.task_gate_init = task_gate_init
        self.rope_theta = rope_theta
        self.num_frames = num_frames
        self.window_stride = window_stride
        self.window_mode = window_mode
        self.sigma_min = sigma_min
        self.flow_time_sampling = flow_time_sampling
        self.self_conditioning_prob = self_conditioning_prob
        self.grounding_loss_weight = grounding_loss_weight
        self.grounding_sigma = grounding_sigma
        # K: 30 (the paper's recommendation), 1 for the deterministic regression head
        self.num_samples = num_samples if num_samples is not None else (1 if objective == "regression" else 30)
        self.num_steps = num_steps
        self.solver = solver
        self.heatmap_sigma = heatmap_sigma
        self.use_lora = use_lora
        self.lora_r = lora_r
        self.lora_alpha = lora_alpha
        self.lora_dropout = lora_dropout
        self.lora_target_modules = list(lora_target_modules) if lora_target_modules is not None else ["query", "value"]
        self.freeze_encoder = freeze_encoder
        self.causal = causal
        self.causal_encoder_frames = causal_encoder_frames
        self.objective = objective
        self.diffusion_timesteps = diffusion_timesteps
        self.use_visual_cross_attention = use_visual_cross_attention
        self.use_task_cross_attention = use_task_cross_attention
        self.position_encoding = position_encoding
        self.task_guidance = task_guidance
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        super().__init__(**kwargs)
        self.validate_gazeflow()

    # ------------------------------------------------------------------ validation
    def validate_gazeflow(self) -> None:
        """Check every value; raise a `ValueError` naming the field, the value and what was expected."""
        positive_ints = (
            "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "num_frames",
            "window_stride", "num_samples", "num_steps", "lora_r", "causal_encoder_frames", "diffusion_timesteps",
        )
        for name in positive_ints:
            value = getattr(self, name)
            _require(isinstance(value, int) and not isinstance(value, bool) and value >= 1, name, "an int >= 1", value)
        for name in ("num_spatial_layers", "num_task_queries"):
            value = getattr(self, name)
            _require(isinstance(value, int) and not isinstance(value, bool) and value >= 0, name, "an int >= 0", value)
        _require(self.hidden_size % self.num_attention_heads == 0, "hidden_size",
                 f"divisible by num_attention_heads={self.num_attention_heads}", self.hidden_size)
        head_dim = self.hidden_size // self.num_attention_heads
        _require(head_dim % 2 == 0, "hidden_size / num_attention_heads", "even (RoPE rotates pairs)", head_dim)
        _require(self.hidden_size % 4 == 0, "hidden_size", "divisible by 4 (2D sin-cos position encoding)",
                 self.hidden_size)
        _require(self.window_stride <= self.num_frames, "window_stride",
                 f"<= num_frames={self.num_frames} (windows must overlap or touch)", self.window_stride)
        tubelet = self.encoder_config.tubelet_size
        _require(self.num_frames % tubelet == 0, "num_frames",
                 f"a multiple of the encoder's tubelet_size={tubelet}", self.num_frames)
        _require(0.0 < self.sigma_min < 1.0, "sigma_min", "in (0, 1)", self.sigma_min)
        _require(self.flow_time_sampling in FLOW_TIME_SAMPLINGS, "flow_time_sampling",
                 f"one of {FLOW_TIME_SAMPLINGS}", self.flow_time_sampling)
        _require(0.0 <= self.self_conditioning_prob <= 1.0, "self_conditioning_prob", "in [0, 1]",
                 self.self_conditioning_prob)
        weight = self.grounding_loss_weight
        _require(isinstance(weight, (int, float)) and not isinstance(weight, bool) and weight >= 0,
                 "grounding_loss_weight", ">= 0 (0: no grounding head)", weight)
        _require(isinstance(self.grounding_sigma, (int, float)) and self.grounding_sigma > 0, "grounding_sigma",
                 "> 0 (patch widths)", self.grounding_sigma)
        _require(self.solver in SOLVERS, "solver", f"one of {SOLVERS}", self.solver)
        _require(self.window_mode in WINDOW_MODES, "window_mode", f"one of {WINDOW_MODES}", self.window_mode)
        _require(self.heatmap_sigma > 0, "heatmap_sigma", "> 0 (pixels)", self.heatmap_sigma)
        _require(self.rope_theta > 0, "rope_theta", "> 0", self.rope_theta)
        _require(self.lora_alpha > 0, "lora_alpha", "> 0", self.lora_alpha)
        _require(0.0 <= self.lora_dropout < 1.0, "lora_dropout", "in [0, 1)", self.lora_dropout)
        _require(len(self.lora_target_modules) > 0 and all(isinstance(m, str) for m in self.lora_target_modules),
                 "lora_target_modules", "a non-empty list of module names", self.lora_target_modules)
        for name in ("use_lora", "freeze_encoder", "causal", "use_visual_cross_attention", "use_task_cross_attention"):
            _require(isinstance(getattr(self, name), bool), name, "a bool", getattr(self, name))
        self.validate_variants()
        _require(self.initializer_range > 0, "initializer_range", "> 0", self.initializer_range)
        crop, patch = self.encoder_config.crop_size, self.encoder_config.patch_size
        _require(isinstance(patch, int) and crop % patch == 0, "encoder_config.crop_size",
                 f"a multiple of patch_size={patch}", crop)

    def validate_variants(self) -> None:
        """The ablation switches (paper Section 4.4-4.5, Appendix F.4) and how they combine."""
        _require(self.objective in OBJECTIVES, "objective", f"one of {OBJECTIVES}", self.objective)
        _require(self.position_encoding in POSITION_ENCODINGS, "position_encoding", f"one of {POSITION_ENCODINGS}",
                 self.position_encoding)
        _require(self.task_guidance in TASK_GUIDANCES, "task_guidance", f"one of {TASK_GUIDANCES}",
                 self.task_guidance)
        _require(self.use_task_cross_attention or self.task_guidance == "cross_attention", "task_guidance",
                 "'cross_attention' when use_task_cross_attention=False (there is no task path to concatenate)",
                 self.task_guidance)
        _require(self.objective == "flow_matching" or self.solver == "euler", "solver",
                 f"'euler' (the default) with objective={self.objective!r}: ODE solvers apply to flow_matching only "
                 "(diffusion samples with DDIM, regression predicts directly)", self.solver)
        _require(self.objective != "regression" or self.num_samples == 1, "num_samples",
                 "1 with objective='regression' (a deterministic head predicts one trajectory, K=1)", self.num_samples)
        tubelet = self.encoder_config.tubelet_size
        _require(self.causal_encoder_frames % tubelet == 0, "causal_encoder_frames",
                 f"a multiple of the encoder's tubelet_size={tubelet}", self.causal_encoder_frames)

    @property
    def uses_grounding_head(self) -> bool:
        """Whether the model has the auxiliary grounding head over c_v (``grounding_loss_weight > 0``)."""
        return self.grounding_loss_weight > 0

    @property
    def uses_task_bank(self) -> bool:
        """Whether the model builds c_task at all (the top-down path is on)."""
        return self.use_task_cross_attention

    @property
    def uses_task_cross_attention_layers(self) -> bool:
        """Whether each DenoiserBlock has the gated task cross-attention sub-layer (Eq. task_xattn)."""
        return self.use_task_cross_attention and self.task_guidance == "cross_attention"

    @property
    def frames_per_encoder_group(self) -> int:
        """Frames that read the same encoder tokens: a tubelet (2) for the bidirectional model, one frame for the
        causal model, whose every frame gets its own tokens from its causal window."""
        return 1 if self.causal else self.encoder_config.tubelet_size

    # ------------------------------------------------------------------ derived sizes
    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def image_size(self) -> int:
        """Side of the square frames the encoder reads (256 for V-JEPA 2 ViT-L)."""
        return self.encoder_config.crop_size

    @property
    def token_grid_size(self) -> int:
        """Side of the per-frame token grid: crop size / patch size (16 for the default encoder)."""
        return self.encoder_config.crop_size // self.encoder_config.patch_size

    @property
    def tokens_per_frame(self) -> int:
        """N, the spatial tokens per frame (16 x 16 = 256 for the default encoder)."""
        return self.token_grid_size ** 2

    @property
    def tubelet_size(self) -> int:
        return self.encoder_config.tubelet_size

    @classmethod
    def tiny(cls, **overrides) -> "GazeFlowConfig":
        """A tiny random-weights configuration for tests, demos and CPU smoke runs (32x32 frames, 8-frame windows)."""
        encoder = VJEPA2Config(
            crop_size=32, patch_size=16, tubelet_size=2, frames_per_clip=8, hidden_size=32, num_hidden_layers=2,
            num_attention_heads=2, mlp_ratio=2.0, pred_hidden_size=16, pred_num_hidden_layers=1,
            pred_num_attention_heads=2,
        )
        defaults: dict[str, Any] = dict(
            encoder_config=encoder, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
            num_spatial_layers=1, num_task_queries=2, num_frames=8, window_stride=4, num_samples=4, num_steps=3,
            lora_r=4, lora_alpha=8,
        )
        if overrides.get("objective") == "regression":
            defaults["num_samples"] = 1
        defaults.update(overrides)
        return cls(**defaults)


__all__ = ["GazeFlowConfig", "SOLVERS", "OBJECTIVES", "POSITION_ENCODINGS", "TASK_GUIDANCES", "WINDOW_MODES",
           "FLOW_TIME_SAMPLINGS"]
