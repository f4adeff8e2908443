"""GazeFlow configuration: every knob of the model and its sampler, as typed fields checked on construction.

The fields are a strict dataclass (``huggingface_hub.dataclasses.strict``, as every transformers config since 5.4):
each field's type and allowed values are checked whenever it is set, at construction and on assignment, and the
checks that relate several fields (``validate_*``) run once the config is built and again before it is saved.
Either way a wrong value raises :class:`GazeFlowConfigError`, one line naming the field and what was expected.

Defaults follow the paper (Section 3, Appendices C-E.4) and our reading of what it leaves open: a V-JEPA 2 ViT-L
encoder (``encoder_config``), a d=256 velocity network with six DenoiserBlocks of 8 heads, M=4 learnable task
queries, 64-frame windows with stride 32, the OT interpolant with ``sigma_min = 1e-3``, self-conditioning with
probability 0.5, and LoRA r=16 / alpha=32 / dropout 0.05 on the encoder's query and value projections.

**Where the sampling defaults live.** K (``num_samples``), S (``num_steps``), the ``solver``, the ``window_mode`` and
the ``noise_scale`` of x_0 are the trained model's recommended way to sample it, and they stay here, in ``config.json``,
beside the architecture: every model folder written so far (the bundled ones, remote-code folders, users' checkpoints)
carries them there and loads unchanged, and ``AutoModel``, the pipeline and ``trust_remote_code`` read ``config.json``
and nothing else. They are read in one place only, ``generation_gazeflow.SamplingSettings.resolve`` (a call's arguments
over these defaults, checked against the objective once); the engine, the streamer, the pipeline, the command, the web
demo and the model card take the resolved object. ``heatmap_sigma`` is the evaluation protocol's map width in native
pixels of the data the model was trained on (``examples/evaluate.py``'s default ``--sigma_px``); overlays and pipeline
heatmaps scale theirs with the frame instead (``metrics.heatmaps.heatmap_sigma_px``).

Note for readers: this module must not use ``from __future__ import annotations``: the strict checks read the
fields' annotations as types, and string annotations are not checked.
"""

import re
from collections.abc import Callable
from typing import Any

from huggingface_hub.dataclasses import strict, validated_field
from huggingface_hub.errors import (
    StrictDataclassClassValidationError,
    StrictDataclassError,
    StrictDataclassFieldValidationError,
)
from transformers import PreTrainedConfig, VJEPA2Config

from .choices import SOLVERS, WINDOW_MODES

OBJECTIVES = ("flow_matching", "diffusion", "regression")
POSITION_ENCODINGS = ("rope", "learned", "none")
TASK_GUIDANCES = ("cross_attention", "concat")
SPATIAL_ATTENTION_INITS = ("normal", "mimetic")
FLOW_TIME_SAMPLINGS = ("uniform", "late_quadratic", "logit_normal")


class GazeFlowConfigError(ValueError, StrictDataclassError):
    """A :class:`GazeFlowConfig` value that is not allowed, in one line: ``GazeFlowConfig: `field` must be ..., got
    ...``. A ``ValueError``, and a ``StrictDataclassError`` like the errors of transformers' own configs.

    ``field`` names the field (``encoder_config.<name>`` inside the encoder's config); ``problem`` is the rest."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"GazeFlowConfig: `{field}` {problem}")
        self.field = field
        self.problem = problem


# ---------------------------------------------------------------------------------------------- field makers
def _field(expected: str, valid: Callable[[Any], bool] | None = None, **default: Any) -> Any:
    """A dataclass field whose values (already of the annotated type) must satisfy ``valid``; ``expected`` says what
    is allowed, for the error message. ``default`` is ``default=...`` or ``default_factory=...``."""

    def check(value: Any) -> None:
        if valid is not None and not valid(value):
            raise ValueError(f"must be {expected}, got {value!r}")

    return validated_field(check, metadata={"expected": expected}, **default)


def _count(default: int, minimum: int = 1) -> Any:
    return _field(f"an int >= {minimum}", lambda value: value >= minimum, default=default)


def _choice(default: str, choices: tuple[str, ...]) -> Any:
    return _field(f"one of {choices}", lambda value: value in choices, default=default)


def _flag(default: bool) -> Any:
    return _field("a bool", default=default)


def _number(default: float, expected: str = "a number", valid: Callable[[Any], bool] | None = None) -> Any:
    return _field(expected, valid, default=default)


def _type_text(annotation: Any) -> str:
    return getattr(annotation, "__name__", None) or str(annotation)


def _expected(config_class: type, name: str) -> str:
    """What a field of ``config_class`` allows: its ``expected`` text, else its annotated type."""
    field = config_class.__dataclass_fields__.get(name)
    if field is None:
        return "valid"
    return field.metadata.get("expected") or _type_text(field.type)


def _field_error(
    config_class: type, err: StrictDataclassFieldValidationError, name: str, value: Any, prefix: str = ""
) -> GazeFlowConfigError:
    """A strict field error (two lines: the field, then its cause) as one :class:`GazeFlowConfigError` line."""
    cause = err.__cause__
    if isinstance(cause, TypeError):
        problem = f"must be {_expected(config_class, name)}, got {type(value).__name__} {value!r}"
    else:
        problem = str(cause)
    return GazeFlowConfigError(prefix + name, problem)


def _encoder_config(value: VJEPA2Config | dict | None) -> VJEPA2Config:
    """``encoder_config`` as given (a dict as in ``config.json``; None: the default ViT-L) as a VJEPA2Config."""
    if value is None:
        return VJEPA2Config()
    if isinstance(value, VJEPA2Config):
        return value
    values = dict(value)
    model_type = values.pop("model_type", VJEPA2Config.model_type)
    if model_type != VJEPA2Config.model_type:
        raise GazeFlowConfigError(
            "encoder_config.model_type", f"must be 'vjepa2' (a V-JEPA 2 encoder), got {model_type!r}"
        )
    try:
        return VJEPA2Config(**values)
    except (StrictDataclassError, ValueError, TypeError) as err:
        named = re.match(r"Validation error for field '([^']+)'", str(err))  # how @strict names a field
        if isinstance(err, StrictDataclassFieldValidationError) and named:
            name = named.group(1)
            raise _field_error(VJEPA2Config, err, name, values.get(name), prefix="encoder_config.") from err
        raise GazeFlowConfigError(
            "encoder_config", f"is not a valid VJEPA2Config: {' '.join(str(err).split())}"
        ) from err


def _errors_in_one_line(cls: type) -> type:
    """Turn the two-line errors of ``@strict`` (the field or validator, then the cause) into
    :class:`GazeFlowConfigError` lines, for assignments (``__setattr__``) and for the ``validate_*`` checks
    (``validate``, run after construction and before saving)."""
    strict_setattr, strict_validate = cls.__setattr__, cls.validate

    def __setattr__(self, name: str, value: Any) -> None:
        try:
            strict_setattr(self, name, value)
        except StrictDataclassFieldValidationError as err:
            raise _field_error(cls, err, name, value) from err.__cause__

    def validate(self) -> None:
        try:
            strict_validate(self)
        except StrictDataclassClassValidationError as err:
            if isinstance(err.__cause__, GazeFlowConfigError):
                raise err.__cause__ from None
            raise

    validate.__is_defined_by_strict_decorator__ = True  # a subclass decorated with @strict may replace it
    cls.__setattr__, cls.validate = __setattr__, validate
    return cls


def _require(condition: bool, name: str, expected: str, value: Any) -> None:
    if not condition:
        raise GazeFlowConfigError(name, f"must be {expected}, got {value!r}")


# ---------------------------------------------------------------------------------------------- the config
@_errors_in_one_line
@strict
class GazeFlowConfig(PreTrainedConfig):
    r"""
    This is the configuration class to store the configuration of a [`GazeFlowModel`]: the velocity network of
    conditional flow matching over gaze trajectories (paper Section 3), its video encoder, its training objective and
    the default settings of its sampler. Instantiating it with the defaults gives the paper's model.

    Configuration objects inherit from [`PreTrainedConfig`] and can be used to control the model outputs. Read the
    documentation from [`PreTrainedConfig`] for more information.

    Args:
        encoder_config (`VJEPA2Config` or `dict`, *optional*):
            The video encoder E_psi (Section 3.1). A dict (as in `config.json`) becomes a `VJEPA2Config`; `None` is
            `VJEPA2Config()`, the V-JEPA 2 ViT-L (hidden 1024, 24 layers, patch 16, tubelet 2, 256x256 input).
        hidden_size (`int`, *optional*, defaults to 256):
            Width d of the velocity network, of W_proj's output and of c_v.
        num_hidden_layers (`int`, *optional*, defaults to 6):
            Number L of DenoiserBlocks (Appendix C.3).
        num_attention_heads (`int`, *optional*, defaults to 8):
            Heads H of every attention (d_h = d / H, even for RoPE).
        intermediate_size (`int`, *optional*, defaults to 1024):
            Inner width of every feed-forward layer.
        num_spatial_layers (`int`, *optional*, defaults to 2):
            Pre-norm Transformer layers of the per-frame spatial encoder.
        num_temporal_layers (`int`, *optional*, defaults to 0):
            Pre-norm layers of divided space-time attention (beyond the paper; TimeSformer, Bertasius et al., ICML
            2021) run before the spatial layers: each spatial position attends to the same position in every frame
            group of the window (causal variant: in the groups <= its own), with no temporal position encoding. It
            lets c_v of a frame carry what other frames show at that place (e.g. a cue visible only in some
            frames). 0 (the default) is the paper's per-frame spatial encoder, which never mixes frames.
        num_task_queries (`int`, *optional*, defaults to 4):
            Learnable task queries M of the task-token bank (Eq. task_slots).
        task_gate_init (`float`, *optional*, defaults to -2.0):
            Initial value of the task cross-attention gate g^(l).
        rope_theta (`float`, *optional*, defaults to 10000.0):
            Base of the 1D RoPE over frame index (Appendix C.2).
        num_frames (`int`, *optional*, defaults to 64):
            Window length W in frames (Appendix D.3); a multiple of the encoder's tubelet size.
        window_stride (`int`, *optional*, defaults to 32):
            Stride W_s between sliding windows (Appendix D.3), at most `num_frames`.
        window_mode (`str`, *optional*, defaults to `"coherent"`):
            How overlapping windows of a long clip are joined: `"coherent"` samples each window conditioned on the
            frames it shares with the previous one, so each of the K samples is one continuous trajectory (beyond
            the paper; see `generation_gazeflow`); `"blend"` samples windows independently and blends them linearly
            over the overlap (Appendix D.3).
        sigma_min (`float`, *optional*, defaults to 1e-3):
            sigma_min of the OT interpolant (Appendix E.4), in (0, 1).
        flow_time_sampling (`str`, *optional*, defaults to `"uniform"`):
            How flow matching draws its training time s from one uniform u per example: `"uniform"` s = u (the
            paper's Algorithm 1), `"late_quadratic"` s = 1 - (1 - u)^2 (more draws near the data end, where
            sub-pixel precision is learned; beyond the paper) or `"logit_normal"` s = sigmoid(Phi^-1(u)) (Esser et
            al. 2024; beyond the paper). See `scheduling_gazeflow.flow_time_from_uniform`.
        noise_correlation (`float`, *optional*, defaults to 0.0):
            Lag-1 correlation rho over frames of the base noise x_0 (Eq. bg:cfm), in [0, 1). 0 is the paper's
            x_0 ~ N(0, I), independent across frames; rho > 0 draws x_0 ~ N(0, Sigma), Sigma_tu = rho^|t - u|, a
            stationary AR(1) (Ornstein-Uhlenbeck) process over the frames of a window with unit variance, in
            training and in sampling alike (beyond the paper; functional flow matching, Kerrigan et al. 2024).
            Residual noise that an unconverged sampler leaves in a trajectory is then smooth over frames instead
            of a white frame-to-frame jitter. See `scheduling_gazeflow.correlate_noise`.
        whitened_flow (`bool`, *optional*, defaults to `False`):
            With `noise_correlation` rho > 0, run the flow in the prior's whitened frame coordinates e = L^-1 x
            (x = L e the AR(1) recursion of `scheduling_gazeflow.correlate_noise`): the velocity network's head
            gives the velocity there, w, read as v = L w over the window's frames (the same recursion: each frame's
            velocity is rho times the previous frame's plus sqrt(1 - rho^2) times its own head output), and the
            flow-matching loss is measured there, ||L^-1 (v - u)||^2 = (v - u)^T Sigma^-1 (v - u). The network still
            reads x_s in model coordinates. An error of the head that is independent from frame to frame then moves
            a sample by sqrt(1 - rho^2) of it between frames rather than by all of it (beyond the paper; with
            rho = 0 or `False` the paper's Eq. cfm_loss).
        whitened_loss_share (`float`, *optional*, defaults to 1.0):
            With `whitened_flow`, the share a in [0, 1] of the whitened term in the flow-matching loss
            a ||L^-1 (v - u)||^2 + (1 - a) ||v - u||^2 (the head still read as v = L w). 1 is the whitened loss
            alone, which charges a slow offset of the whole trajectory (1 - rho) / (1 + rho) times the plain loss
            and a frame-to-frame jitter about (1 + rho^2) / (1 - rho^2) times it; a < 1 restores part of the charge
            on the slow component, where the gaze is (beyond the paper).
        whitened_mean_loss_weight (`float`, *optional*, defaults to 0.0):
            With `whitened_flow`, the weight lambda >= 0 of a plain loss on each window's mean residual added to the
            whitened loss, lambda ||P (v - u)||^2 with P the projection onto constant trajectories: 1 charges a
            constant offset of the window what the plain loss does, about (1 + rho) / (1 - rho) times the whitened
            loss's charge, and leaves the frame-to-frame terms whitened (beyond the paper).
        window_mean_velocity (`bool`, *optional*, defaults to `False`):
            With `whitened_flow`, the window's mean velocity is an output of its own, c = Linear(the mean of the
            head's normalised gaze tokens over frames), and the frame outputs w only shape the motion around it:
            v = c 1 + (I - P) L w, P the projection onto constant trajectories. The loss charges the mean plainly
            and the rest whitened, ||P (v - u)||^2 + ||L^-1 (I - P) (v - u)||^2: where the window is, is learned
            as Eq. cfm_loss learns it, the motion within it as the whitened flow does (beyond the paper). Windowed
            models only (c reads every frame of the window).
        time_grid_power (`float`, *optional*, defaults to 1.0):
            The sampler's flow-time grid s_i = 1 - (1 - i / S)^p, i = 0..S: 1 is the paper's uniform Euler grid
            (Appendix D.2); p > 1 spends more of the S steps near the data end s = 1 (beyond the paper). See
            `scheduling_gazeflow.FlowMatchingScheduler`.
        self_conditioning_prob (`float`, *optional*, defaults to 0.5):
            Probability of self-conditioning in training (Appendix E.2).
        grounding_loss_weight (`float`, *optional*, defaults to 0.0):
            Weight lambda_g of the auxiliary grounding loss (beyond the paper): a linear head scores every spatial
            token of c_v per frame group, trained by cross-entropy to put its mass on the tokens around the recorded
            gaze, so c_v learns to mark *what is looked at* from the frames alone. The loss is
            `L_cfm + lambda_g * L_ground`; 0 is the paper's model (no head, no extra weights). See
            `modeling_gazeflow_objectives.grounding_loss`.
        grounding_sigma (`float`, *optional*, defaults to 0.5):
            Width of the grounding target, a Gaussian over the patch centres around the gaze point, in patch widths.
        num_samples (`int`, *optional*):
            Default K, trajectories sampled per clip: 30 (the paper's recommendation) when not given, 1 for
            `objective="regression"` (which allows only 1).
        num_steps (`int`, *optional*, defaults to 5):
            Default S, ODE steps per trajectory.
        solver (`str`, *optional*, defaults to `"euler"`):
            ODE solver, one of `"euler"`, `"heun"`, `"midpoint"` (other than Euler for `"flow_matching"` only).
        noise_scale (`float`, *optional*, defaults to 1.0):
            Default standard deviation tau of the sampler's x_0: sampling starts from x_0 = tau e with e the prior's
            draw (N(0, I) in the paper's Algorithm 1, or the AR(1) prior of `noise_correlation`), a sampling
            temperature; 1 is the paper's sampler, tau < 1 trades the samples' spread for steadier trajectories
            (beyond the paper). Training always draws at tau = 1.
        heatmap_sigma (`float`, *optional*, defaults to 25.0):
            Gaussian sigma in native pixels for trajectory -> heatmap.
        use_lora (`bool`, *optional*, defaults to `True`):
            Add LoRA adapters to the encoder (Appendix E.4).
        lora_r (`int`, *optional*, defaults to 16):
            LoRA rank r.
        lora_alpha (`float`, *optional*, defaults to 32):
            LoRA scale alpha.
        lora_dropout (`float`, *optional*, defaults to 0.05):
            Dropout on the LoRA input, in [0, 1).
        lora_target_modules (`list[str]`, *optional*, defaults to `["query", "value"]`):
            The encoder's linear layers that get LoRA adapters.
        freeze_encoder (`bool`, *optional*, defaults to `True`):
            Freeze the encoder's own weights (LoRA, if on, still trains).
        causal (`bool`, *optional*, defaults to `False`):
            The causal variant of Appendix F.4: causal frame self-attention, a per-frame task bank over frames
            <= t, and per-frame encoder tokens from a causal window of `causal_encoder_frames` frames ending at t
            (see `modeling_gazeflow_causal`).
        causal_encoder_frames (`int`, *optional*, defaults to 2):
            Length of the causal encoder window (a multiple of the encoder's tubelet size); frame t reads the last
            tubelet (t-1, t) of the window of frames t-w+1..t.
        objective (`str`, *optional*, defaults to `"flow_matching"`):
            The training objective and its sampler (Sections 3.2, 4.4, Appendix F.4): `"flow_matching"` (the
            paper's CFM, ODE solvers), `"diffusion"` (epsilon prediction, cosine schedule, DDIM with the same S) or
            `"regression"` (direct prediction, masked MSE, K=1).
        diffusion_timesteps (`int`, *optional*, defaults to 1000):
            Discrete training timesteps of the diffusion objective.
        use_visual_cross_attention (`bool`, *optional*, defaults to `True`):
            The per-frame visual cross-attention sub-layer (bottom-up path, Eq. ca_out); `False` is the
            "- Bottom-up Visual Feature" ablation.
        use_task_cross_attention (`bool`, *optional*, defaults to `True`):
            The top-down task path (task bank + task guidance); `False` is the "- Top-down Task Guidance" ablation.
        position_encoding (`str`, *optional*, defaults to `"rope"`):
            Frame position in the self-attention: `"rope"` (Appendix C.2), `"learned"` (an absolute table added to
            the gaze tokens, Table pe_compare) or `"none"`.
        task_guidance (`str`, *optional*, defaults to `"cross_attention"`):
            How c_task enters: gated cross-attention in every block, or `"concat"`: channel-wise concatenation of
            the flattened bank to the gaze-token input (needs `use_task_cross_attention=True`).
        initializer_range (`float`, *optional*, defaults to 0.02):
            Std of the truncated-normal weight initialisation.
        spatial_attention_init (`str`, *optional*, defaults to `"normal"`):
            How the spatial encoder's self-attention (its temporal layers' too) starts (beyond the paper): `"normal"`
            like every other layer (truncated normal of `initializer_range`: q.k ~ 0, every token attends to all
            tokens alike), or
            `"mimetic"`: mimetic initialisation (Trockman & Kolter, 2023), each head's W_q^T W_k ~ 0.7 Z + 0.7 I
            (Z ~ N(0, 1/d)), so that from the first step a token attends more to the tokens that look like it
            (`modeling_gazeflow_initialization.init_mimetic_query_key`). Only training from scratch reads it.
        layer_norm_eps (`float`, *optional*, defaults to 1e-6):
            Epsilon of every LayerNorm of the GazeFlow modules.

    Example:

    ```python
    >>> from transformers_gazeflow import GazeFlowConfig, GazeFlowModel

    >>> config = GazeFlowConfig.tiny()  # 32x32 frames, 8-frame windows: for tests and CPU smoke runs
    >>> model = GazeFlowModel(config)
    >>> config.num_frames = 6  # checked on assignment: an int >= 1
    ```
    """

    model_type = "gazeflow"
    sub_configs = {"encoder_config": VJEPA2Config}

    encoder_config: VJEPA2Config | dict | None = _field("a VJEPA2Config, a dict or None", default=None)
    hidden_size: int = _count(256)
    num_hidden_layers: int = _count(6)
    num_attention_heads: int = _count(8)
    intermediate_size: int = _count(1024)
    num_spatial_layers: int = _count(2, minimum=0)
    num_temporal_layers: int = _count(0, minimum=0)
    num_task_queries: int = _count(4, minimum=0)
    task_gate_init: float | int = _number(-2.0)
    rope_theta: float | int = _number(10000.0, "a number > 0", lambda value: value > 0)
    num_frames: int = _count(64)
    window_stride: int = _count(32)
    window_mode: str = _choice("coherent", WINDOW_MODES)
    sigma_min: float | int = _number(1e-3, "a number in (0, 1)", lambda value: 0.0 < value < 1.0)
    flow_time_sampling: str = _choice("uniform", FLOW_TIME_SAMPLINGS)
    noise_correlation: float | int = _number(0.0, "a number in [0, 1) (0: independent frames)", lambda v: 0 <= v < 1)
    whitened_flow: bool = _flag(False)
    whitened_loss_share: float | int = _number(
        1.0, "a number in [0, 1] (1: the whitened loss alone)", lambda v: 0 <= v <= 1
    )
    whitened_mean_loss_weight: float | int = _number(0.0, "a number >= 0 (0: no mean term)", lambda v: v >= 0)
    window_mean_velocity: bool = _flag(False)
    time_grid_power: float | int = _number(1.0, "a number >= 1 (1: the paper's uniform grid)", lambda v: v >= 1)
    self_conditioning_prob: float | int = _number(0.5, "a number in [0, 1]", lambda value: 0.0 <= value <= 1.0)
    grounding_loss_weight: float | int = _number(0.0, "a number >= 0 (0: no grounding head)", lambda value: value >= 0)
    grounding_sigma: float | int = _number(0.5, "a number > 0 (patch widths)", lambda value: value > 0)
    num_samples: int | None = _field(
        "an int >= 1 (or None: 30, 1 for regression)", lambda value: value is None or value >= 1, default=None
    )
    num_steps: int = _count(5)
    solver: str = _choice("euler", SOLVERS)
    noise_scale: float | int = _number(1.0, "a number > 0 (1: the paper's x_0)", lambda v: 0 < v < float("inf"))
    heatmap_sigma: float | int = _number(25.0, "a number > 0 (pixels)", lambda value: value > 0)
    use_lora: bool = _flag(True)
    lora_r: int = _count(16)
    lora_alpha: float | int = _number(32, "a number > 0", lambda value: value > 0)
    lora_dropout: float | int = _number(0.05, "a number in [0, 1)", lambda value: 0.0 <= value < 1.0)
    lora_target_modules: list[str] | tuple[str, ...] = _field(
        "a non-empty list of module names", lambda value: len(value) > 0, default_factory=lambda: ["query", "value"]
    )
    freeze_encoder: bool = _flag(True)
    causal: bool = _flag(False)
    causal_encoder_frames: int = _count(2)
    objective: str = _choice("flow_matching", OBJECTIVES)
    diffusion_timesteps: int = _count(1000)
    use_visual_cross_attention: bool = _flag(True)
    use_task_cross_attention: bool = _flag(True)
    position_encoding: str = _choice("rope", POSITION_ENCODINGS)
    task_guidance: str = _choice("cross_attention", TASK_GUIDANCES)
    initializer_range: float | int = _number(0.02, "a number > 0", lambda value: value > 0)
    spatial_attention_init: str = _choice("normal", SPATIAL_ATTENTION_INITS)
    layer_norm_eps: float | int = _number(1e-6)

    def __post_init__(self, **kwargs):
        self.encoder_config = _encoder_config(self.encoder_config)
        if self.num_samples is None:  # K: 30 (the paper's recommendation), 1 for the deterministic regression head
            self.num_samples = 1 if self.objective == "regression" else 30
        self.lora_target_modules = list(self.lora_target_modules)
        super().__post_init__(**kwargs)

    # ------------------------------------------------------------------ checks across fields (run by @strict)
    def validate_architecture(self) -> None:
        """Widths that the layers need: d splits into H even heads (RoPE rotates pairs) and into the four parts of
        the 2D sin-cos position encoding; the encoder's frames split into whole patches."""
        _require(
            self.hidden_size % self.num_attention_heads == 0,
            "hidden_size",
            f"divisible by num_attention_heads={self.num_attention_heads}",
            self.hidden_size,
        )
        if self.head_dim % 2:
            raise GazeFlowConfigError(
                "num_attention_heads",
                "must be a divisor of hidden_size that leaves an even "
                f"head size d_h (RoPE rotates pairs), got {self.num_attention_heads} "
                f"(d_h = {self.hidden_size} / {self.num_attention_heads} = {self.head_dim})",
            )
        _require(
            self.hidden_size % 4 == 0, "hidden_size", "divisible by 4 (2D sin-cos position encoding)", self.hidden_size
        )
        crop, patch = self.encoder_config.crop_size, self.encoder_config.patch_size
        _require(
            isinstance(patch, int) and crop % patch == 0,
            "encoder_config.crop_size",
            f"a multiple of patch_size={patch}",
            crop,
        )

    def validate_windows(self) -> None:
        """Windows that overlap or touch (W_s <= W) and frame counts in whole tubelets of the encoder."""
        _require(
            self.window_stride <= self.num_frames,
            "window_stride",
            f"<= num_frames={self.num_frames} (windows must overlap or touch)",
            self.window_stride,
        )
        tubelet = self.tubelet_size
        _require(
            self.num_frames % tubelet == 0,
            "num_frames",
            f"a multiple of the encoder's tubelet_size={tubelet}",
            self.num_frames,
        )
        _require(
            self.causal_encoder_frames % tubelet == 0,
            "causal_encoder_frames",
            f"a multiple of the encoder's tubelet_size={tubelet}",
            self.causal_encoder_frames,
        )

    def validate_variants(self) -> None:
        """How the ablation switches (paper Section 4.4-4.5, Appendix F.4) combine."""
        _require(
            self.use_task_cross_attention or self.task_guidance == "cross_attention",
            "task_guidance",
            "'cross_attention' when use_task_cross_attention=False (there is no task path to concatenate)",
            self.task_guidance,
        )
        _require(
            self.objective == "flow_matching" or self.solver == "euler",
            "solver",
            f"'euler' (the default) with objective={self.objective!r}: ODE solvers apply to flow_matching only "
            "(diffusion samples with DDIM, regression predicts directly)",
            self.solver,
        )
        _require(
            not self.whitened_flow or (self.objective == "flow_matching" and self.noise_correlation > 0),
            "whitened_flow",
            f"False unless objective='flow_matching' and noise_correlation > 0 (the flow's coordinates are the AR(1) "
            f"prior's; objective={self.objective!r}, noise_correlation={self.noise_correlation!r})",
            self.whitened_flow,
        )
        _require(
            self.whitened_flow or self.whitened_loss_share == 1,
            "whitened_loss_share",
            "1 (the default) unless whitened_flow=True (it splits the whitened flow's loss)",
            self.whitened_loss_share,
        )
        _require(
            self.whitened_flow or self.whitened_mean_loss_weight == 0,
            "whitened_mean_loss_weight",
            "0 (the default) unless whitened_flow=True (it adds to the whitened flow's loss)",
            self.whitened_mean_loss_weight,
        )
        _require(
            not self.window_mean_velocity
            or (self.whitened_flow and not self.causal)
            and (self.whitened_loss_share, self.whitened_mean_loss_weight) == (1, 0),
            "window_mean_velocity",
            "False unless whitened_flow=True with causal=False and the whitened loss alone (whitened_loss_share 1, "
            "whitened_mean_loss_weight 0)",
            self.window_mean_velocity,
        )
        _require(
            self.objective != "regression" or self.num_samples == 1,
            "num_samples",
            "1 with objective='regression' (a deterministic head predicts one trajectory, K=1)",
            self.num_samples,
        )

    # ------------------------------------------------------------------ derived switches
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
        """d_h = d / H."""
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
        return self.token_grid_size**2

    @property
    def tubelet_size(self) -> int:
        """Frames per encoder tubelet (2 for V-JEPA 2)."""
        return self.encoder_config.tubelet_size

    @classmethod
    def tiny(cls, **overrides) -> "GazeFlowConfig":
        """A tiny random-weights configuration for tests, demos and CPU smoke runs (32x32 frames, 8-frame windows)."""
        encoder = VJEPA2Config(
            crop_size=32,
            patch_size=16,
            tubelet_size=2,
            frames_per_clip=8,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            mlp_ratio=2.0,
            pred_hidden_size=16,
            pred_num_hidden_layers=1,
            pred_num_attention_heads=2,
        )
        defaults: dict[str, Any] = dict(
            encoder_config=encoder,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            num_spatial_layers=1,
            num_task_queries=2,
            num_frames=8,
            window_stride=4,
            num_samples=4,
            num_steps=3,
            lora_r=4,
            lora_alpha=8,
        )
        if overrides.get("objective") == "regression":
            defaults["num_samples"] = 1
        defaults.update(overrides)
        return cls(**defaults)


__all__ = [
    "GazeFlowConfig",
    "GazeFlowConfigError",
    "OBJECTIVES",
    "POSITION_ENCODINGS",
    "TASK_GUIDANCES",
    "FLOW_TIME_SAMPLINGS",
    "SPATIAL_ATTENTION_INITS",
]
