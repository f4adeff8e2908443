"""The windowed engine: the one loop over sliding windows behind ``generate()``, the pipeline and evaluation.

A clip of any length is sampled window by window (paper Algorithm 1, Appendix D.3), each window through

    pad -> encode -> condition -> K x noise -> scheduler steps -> stitch -> unit coordinates + clamp -> K-mean

:func:`iter_window_predictions` is that loop, and the only one. It reads windows (first frame, processed frames) in
order, in batches that it encodes and samples together, and yields finished frames as soon as no later window can
change them. Two sources feed it:

* :func:`generate_trajectories` (``GazeFlowModel.generate``, evaluation): frames in memory ``[B, T, 3, S, S]``,
  the windows of :func:`~transformers_gazeflow.models.gazeflow.windows.window_starts`, ``window_batch_size`` at a time;
* ``transformers_gazeflow.generation.windowed.stream_gaze`` (the ``egocentric-gaze`` pipeline, the ``gazeflow``
  command): raw frames read one at a time from any iterable, each processed on arrival and each window run as soon
  as its frames are known, so memory does not grow with the video.

The noise of window i is the i-th draw of shape ``[B, K, W, 2]`` from the generator, so results do not depend on how
windows are batched or whether they are streamed (streamed trajectories equal ``generate``'s, tested), and a clip of
one window draws exactly what a single-window call draws. A clip shorter than ``W`` is padded by repeating its last
frame (``windows.pad_last_frame``) and cut back. Windows are stitched by ``windows.StreamingBlender``, then
:func:`to_unit_predictions` converts to unit coordinates, clamps into the frame and takes the point estimate
(:func:`point_estimate`): one function for every path.

**Joining windows** (``window_mode``):

* ``"blend"`` (the paper's Appendix D.3): windows are sampled independently and sample k of window i is ramped
  linearly into sample k of window i + 1 over their overlap. The two are unrelated draws, so the ramp manufactures
  motion (on 64-frame clips the median step grew to 2.3x human, against 1.3x for windows sampled alone).
* ``"coherent"`` (the default; beyond the paper): window i + 1 is sampled *conditioned on* the L frames it shares
  with the frames already sampled, by the replacement method (Song et al. 2021, "Score-Based Generative Modeling
  through SDEs", Appendix I.2, imputation; Ho et al. 2022, "Video Diffusion Models", Section 3.1, extending a video),
  carried over to the flow's probability path: at every network evaluation of every ODE step at time s, the overlap
  frames of x_s are set to the interpolant of the already-sampled trajectory g_prev with the *same* noise,
  x_s = (1 - (1 - sigma_min) s) x_0 + s g_prev (``FlowMatchingScheduler.add_noise``; DDIM: its own x_t), the new
  window's noise on the overlap frames being the noise those frames were sampled from; and their self-conditioning
  input, the network's estimate of the clean trajectory, is g_prev itself (known there). For the last tenth of the
  flow (``KNOWN_FRAMES_RELEASE``) the overlap frames are released and flow with the new ones, so the network
  reconciles the two (with many steps, frames held to the end left a jump where the new frames begin: boundary
  steps 3.1x the steps inside windows at S=50, 1.6x released). Sample k of window i + 1 then continues sample k of
  window i: on the overlap the new window's own output agrees with g_prev up to the network's error (with the
  bundled model at S=5, 4.5 px mean distance on 128x96 clips, against 13.5 px between independent windows), and the
  two are joined by the same linear ramp as in blend mode. Each of the K samples is one continuous trajectory
  through the whole video. Windows of a clip are sampled one after the other (window i + 1 needs window
  i); encoding stays batched, and clips and the K samples are batched together. The regression head reads no state,
  so its windows are only ramped. (Keeping g_prev over the whole overlap instead of ramping left a jump where the
  new frames begin: 7 px median at the bundled model's window boundaries against 1.6 px inside windows, S=5.)
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, fields
from functools import partial
from typing import Any, Protocol, TypeVar

import numpy as np
import torch

from .choices import WINDOW_MODES
from .configuration_gazeflow import GazeFlowConfig
from .geometry import clamp_unit, model_to_unit
from .modeling_gazeflow_checks import check_objective_sampling, check_pixel_values, check_sampling_arguments
from .scheduling_gazeflow import ModelFn, RegressionScheduler, Scheduler, correlate_noise, draw_noise, scheduler_for
from .windows import StreamingBlender, pad_last_frame, window_starts

ArrayLike = TypeVar("ArrayLike", torch.Tensor, np.ndarray)


class WindowedModel(Protocol):
    """What the engine reads of a ``GazeFlowModel``: its config and the three steps of a window (the model's module
    imports this one, so the engine names the steps instead of the class)."""

    config: GazeFlowConfig

    def parameters(self) -> Iterator[torch.nn.Parameter]: ...

    def encode_video(self, pixel_values_videos: torch.Tensor) -> torch.Tensor: ...

    def build_condition(self, encoder_hidden_states: torch.Tensor, num_frames: int, **kwargs: Any) -> Any: ...

    def velocity(
        self,
        sample: torch.Tensor,
        flow_time: Any,
        condition: Any,
        self_condition: torch.Tensor,
        time_embedding: torch.Tensor | None = None,
    ) -> torch.Tensor: ...

    def embed_flow_time(self, flow_time: Any, batch: int, samples: int, device: torch.device) -> torch.Tensor: ...


KNOWN_FRAMES_RELEASE = 0.9
"""Coherent windows hold the frames they share with earlier windows on their noised path until this far along the
flow (s, or 1 - (t + 1) / N for DDIM), then release them for the rest, so that the network reconciles them with the
new frames before the ramp joins the two (module docstring). Below it for every step at S <= 9 (Euler)."""

Window = tuple[int, torch.Tensor]
"""One window: its first frame and its processed frames ``[B, n, 3, S, S]`` (``n <= W``; fewer only for a clip
shorter than a window, padded here)."""


# ---------------------------------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class SamplingSettings:
    """K, S, the ODE solver, the window mode and the scale of x_0 of one sampling call, resolved once (:meth:`resolve`)
    from the call's arguments and the model's defaults and then passed down as one object: ``generate()``, the pipeline,
    the ``gazeflow`` command and the web demo resolve once; the windowed engine, the causal streamer's step and its ONNX
    export only read it (the scheduler of the steps: :meth:`scheduler`).

    Adding a sampling option: a field here with its default in :meth:`resolve` (and its check), the code that reads
    it, and its test; the ``gazeflow`` flag is one entry of ``commands.arguments.SAMPLING_FLAGS``, and the pipeline,
    ``GazeFlowStreamer`` and the web demo pass keyword arguments named after the fields through to :meth:`resolve`."""

    num_samples: int
    num_steps: int
    solver: str
    window_mode: str = "coherent"
    noise_scale: float = 1.0

    @classmethod
    def resolve(
        cls,
        config: GazeFlowConfig,
        *,
        num_samples: int | None = None,
        num_steps: int | None = None,
        solver: str | None = None,
        window_mode: str | None = None,
        noise_scale: float | None = None,
    ) -> SamplingSettings:
        """The settings of a sampling call: each argument left at None takes the model's default (``config``'s
        ``num_samples``, ``num_steps``, ``solver``, ``window_mode``, ``noise_scale``); all are checked against the
        config's objective (one-line ``ValueError`` naming the argument)."""
        settings = cls(
            num_samples=num_samples if num_samples is not None else config.num_samples,
            num_steps=num_steps if num_steps is not None else config.num_steps,
            solver=solver if solver is not None else config.solver,
            window_mode=window_mode if window_mode is not None else getattr(config, "window_mode", "coherent"),
            noise_scale=noise_scale if noise_scale is not None else getattr(config, "noise_scale", 1.0),
        )
        check_sampling_arguments(settings.num_samples, settings.num_steps, settings.solver, settings.noise_scale)
        check_objective_sampling(config, settings.num_samples, settings.solver)
        if settings.window_mode not in WINDOW_MODES:
            raise ValueError(f"`window_mode` must be one of {WINDOW_MODES}, got {settings.window_mode!r}")
        return settings

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The settings' fields, in order (the keyword arguments :meth:`resolve` takes)."""
        return tuple(field.name for field in fields(cls))

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict (``num_samples``, ``num_steps``, ``solver``, ``window_mode``, ``noise_scale``)."""
        return {name: getattr(self, name) for name in self.field_names()}

    def scheduler(self, config: GazeFlowConfig) -> Scheduler:
        """The scheduler whose steps these settings sample with, for the config's objective (S steps of the
        solver; DDIM; the regression head's one prediction)."""
        return scheduler_for(config, self.num_steps, self.solver)


# ---------------------------------------------------------------------------------------------------- one window
class TimeEmbeddings:
    """E_time(s) of every flow time a sampling run visits, computed once per run: a sampler visits the same S times
    (2S with Heun or midpoint) in every window, so each embedding is computed the first time and reused. Each is
    computed exactly as the network computes it inside a call (``embed_flow_time`` on the ``[B, K]`` flow times),
    so results do not change. Keyed by time, shape, device and autocast state."""

    def __init__(self, model: WindowedModel) -> None:
        self.model = model
        self._embeddings: dict[tuple, torch.Tensor] = {}

    def __call__(
        self, flow_time: float | torch.Tensor, batch: int, samples: int, device: torch.device
    ) -> torch.Tensor | None:
        if torch.is_tensor(flow_time):  # a traced or per-sample time: computed by the network itself
            return None
        key = (float(flow_time), batch, samples, str(device), _autocast_state(device.type))
        embedding = self._embeddings.get(key)
        if embedding is None:
            embedding = self._embeddings[key] = self.model.embed_flow_time(flow_time, batch, samples, device)
        return embedding


def _autocast_state(device_type: str) -> tuple:
    try:
        return torch.is_autocast_enabled(device_type), torch.get_autocast_dtype(device_type)
    except RuntimeError:  # a device type autocast does not know (meta)
        return False, None


def condition_velocity_fn(
    model: WindowedModel, condition: Any, time_embeddings: TimeEmbeddings | None = None
) -> ModelFn:
    """v_theta at a window's condition, for all K samples at once; ``time_embeddings`` reuses E_time(s) across calls."""

    def velocity_fn(sample: torch.Tensor, flow_time: float, self_condition: torch.Tensor) -> torch.Tensor:
        embedding = (
            None
            if time_embeddings is None
            else time_embeddings(flow_time, sample.shape[0], sample.shape[1], sample.device)
        )
        return model.velocity(sample, flow_time, condition, self_condition, time_embedding=embedding)

    return velocity_fn


def cached_velocity_fn(
    model: WindowedModel,
    encoder_hidden_states: torch.Tensor,
    num_frames: int,
    time_embeddings: TimeEmbeddings | None = None,
) -> ModelFn:
    """The fast path: the condition (c_v, c_task and every block's keys/values) is built once per clip here and
    reused by every call, for all K samples at once (never copied K times)."""
    return condition_velocity_fn(model, model.build_condition(encoder_hidden_states, num_frames), time_embeddings)


def recompute_velocity_fn(
    model: WindowedModel, encoder_hidden_states: torch.Tensor, num_frames: int, num_samples: int
) -> ModelFn:
    """The plain reference path, as the paper counts it (~100 GFLOPs per call): every call repeats the encoder
    tokens K times and recomputes W_proj, the per-frame spatial encoder, the task bank and all keys/values."""
    repeated = encoder_hidden_states.repeat_interleave(num_samples, dim=0)

    def velocity_fn(sample: torch.Tensor, flow_time: float, self_condition: torch.Tensor) -> torch.Tensor:
        batch, samples, frames, _ = sample.shape
        condition = model.build_condition(repeated, num_frames, share_group_tokens=False)
        flat = (batch * samples, 1, frames, 2)
        velocity = model.velocity(sample.reshape(flat), flow_time, condition, self_condition.reshape(flat))
        return velocity.view(batch, samples, frames, 2)

    return velocity_fn


def sample_with(
    model: WindowedModel,
    velocity_fn: ModelFn,
    noise: torch.Tensor,
    settings: SamplingSettings,
    known: torch.Tensor | None = None,
) -> torch.Tensor:
    """Integrate ``velocity_fn`` from x_0 = tau ``noise [B, K, T, 2]`` (tau: ``settings.noise_scale``) by the
    settings' scheduler for the config's objective; ``known`` ``[B, K, L, 2]``: the first L frames are already
    sampled (coherent windows, see :func:`sample_window`)."""
    scheduler = settings.scheduler(model.config)
    if settings.noise_scale != 1:
        noise = noise * settings.noise_scale
    if known is None or known.shape[2] == 0 or isinstance(scheduler, RegressionScheduler):
        return scheduler.sample(velocity_fn, noise)  # (the regression head reads no state: nothing to condition)
    overlap = known.shape[2]
    known_noise = noise[:, :, :overlap]

    def project(sample: torch.Tensor, time: float | int) -> torch.Tensor:
        if scheduler.progress(time) >= KNOWN_FRAMES_RELEASE:
            return sample
        return torch.cat([scheduler.add_noise(known, known_noise, time), sample[:, :, overlap:]], dim=2)

    def conditioned_fn(sample: torch.Tensor, time: float, self_condition: torch.Tensor) -> torch.Tensor:
        return velocity_fn(sample, time, torch.cat([known, self_condition[:, :, overlap:]], dim=2))

    return scheduler.sample(conditioned_fn, noise, project)


def sample_window(
    model: WindowedModel,
    encoder_hidden_states: torch.Tensor,
    num_frames: int,
    noise: torch.Tensor,
    settings: SamplingSettings,
    use_condition_cache: bool = True,
    known: torch.Tensor | None = None,
) -> torch.Tensor:
    """Trajectories ``[B, K, T, 2]`` in model coordinates for one window's encoder tokens and noise ``[B, K, T, 2]``,
    by the settings' scheduler for the config's objective (K is the noise's).

    ``known`` ``[B, K, L, 2]``: the window's first L frames are already sampled (coherent windows). Every state the
    network reads holds them at their noised value under the window's own noise, ``scheduler.add_noise(known,
    noise[:, :, :L], time)`` (the replacement method) until :data:`KNOWN_FRAMES_RELEASE`, and their
    self-conditioning input is their clean value (what x1_hat estimates, known here); see the module docstring.
    """
    if use_condition_cache:
        velocity_fn = cached_velocity_fn(model, encoder_hidden_states, num_frames, TimeEmbeddings(model))
    else:
        velocity_fn = recompute_velocity_fn(model, encoder_hidden_states, num_frames, noise.shape[1])
    return sample_with(model, velocity_fn, noise, settings, known)


class WindowSampler:
    """Samples windows from their condition with a run's settings (the engine's default): one call integrates one
    window, or a batch of independent windows, ``(condition, noise [B, K, W, 2], known [B, K, L, 2] or None) ->
    [B, K, W, 2]``. It keeps the run's :class:`TimeEmbeddings`. ``generation.inference`` wraps it to replay the
    steps as CUDA graphs."""

    def __init__(self, model: WindowedModel, settings: SamplingSettings) -> None:
        self.model, self.settings = model, settings
        self.time_embeddings = TimeEmbeddings(model)

    def __call__(self, condition: Any, noise: torch.Tensor, known: torch.Tensor | None = None) -> torch.Tensor:
        velocity_fn = condition_velocity_fn(self.model, condition, self.time_embeddings)
        return sample_with(self.model, velocity_fn, noise, self.settings, known)


# ---------------------------------------------------------------------------------------------------- the loop
@dataclass
class SampledFrames:
    """Finished frames from the engine.

    Attributes:
        start: index of the first frame.
        trajectories: K samples ``[B, K, n, 2]``, float32 unit coordinates ``[0, 1]`` (clamped into the frame).
        mean: the point estimate of each frame, ``[B, n, 2]``.
    """

    start: int
    trajectories: torch.Tensor
    mean: torch.Tensor

    @property
    def num_frames(self) -> int:
        return self.trajectories.shape[2]


def point_estimate(trajectories: ArrayLike, sample_axis: int = 0) -> ArrayLike:
    """The per-frame point estimate: the mean over the K samples along ``sample_axis`` (``[K, T, 2] -> [T, 2]`` by
    default, ``[B, K, T, 2] -> [B, T, 2]`` with ``sample_axis=1``)."""
    if isinstance(trajectories, torch.Tensor):
        return trajectories.mean(dim=sample_axis)
    return trajectories.mean(axis=sample_axis)


def to_unit_predictions(model_coordinates: torch.Tensor, sample_dim: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Samples in model coordinates -> (unit coordinates clamped into the frame, float32; their point estimate, the
    mean over ``sample_dim``). The one place every path turns model outputs into predictions."""
    trajectories = clamp_unit(model_to_unit(model_coordinates.float()))
    return trajectories, point_estimate(trajectories, sample_dim)


Stage = Callable[[str], AbstractContextManager]
"""``stage(name)``: a context manager around the engine's work on a batch of windows, ``"encode"`` (encoder and
condition) or ``"sample"`` (noise, scheduler steps, stitching); the pipeline times them with it."""


def _no_stage(name: str) -> AbstractContextManager:
    return contextlib.nullcontext()


def draw_window_noises(
    count: int, shape: tuple[int, ...], generator: torch.Generator | None, device: torch.device
) -> torch.Tensor:
    """The noise of ``count`` consecutive windows ``[count * B, K, W, 2]``, window i the i-th draw of ``shape`` from
    the generator (as one window at a time would draw it), moved to ``device`` in one copy that does not wait for the
    device (through pinned memory when drawn on the host for an accelerator)."""
    draw_device = generator.device if generator is not None else device
    noise = torch.cat([draw_noise(shape, generator, draw_device) for _ in range(count)])
    if noise.device == device:
        return noise
    if noise.device.type == "cpu" and device.type == "cuda":
        return noise.pin_memory().to(device, non_blocking=True)
    return noise.to(device)


def iter_window_predictions(
    model: WindowedModel,
    windows: Iterable[Sequence[Window]],
    settings: SamplingSettings,
    generator: torch.Generator | None = None,
    use_condition_cache: bool = True,
    skip_windows: int = 0,
    sampler: Callable[..., torch.Tensor] | None = None,
    stage: Stage = _no_stage,
) -> Iterator[SampledFrames]:
    """Sample and stitch windows, yielding finished frames in order (together they cover the clip once).

    ``windows`` yields batches of windows in order of their starts (as ``window_starts`` gives them), each window
    ``(first frame, frames [B, n, 3, S, S])``; a batch is encoded together (one encoder call and one condition
    build for all its windows), and sampled together in ``blend`` mode (one after the other, each conditioned on the
    frames before it, in ``coherent`` mode). The clip ends with the last window's last frame. ``skip_windows``:
    windows of the video before the first one given (their noise is drawn and dropped, so each window draws what
    it draws in a run over the whole video). ``sampler``: samples one window from its condition (default
    :class:`WindowSampler`); ``stage``: see :data:`Stage`. Nothing here reads a value back from the device: finished
    frames stay where the model is.
    """
    config = model.config
    window = config.num_frames
    device = next(model.parameters()).device
    coherent = settings.window_mode == "coherent"
    sampler = sampler if sampler is not None else WindowSampler(model, settings)
    # window values [B, K, W, 2], model coordinates, ramped over overlaps; for coherent windows also the noise each
    # frame was sampled from (a later window's overlap frames reuse it)
    blender = StreamingBlender(frame_dim=2)
    noise_of_frames = StreamingBlender(frame_dim=2, mode="keep") if coherent else None
    clip_end = 0

    def finished(start: int, values: torch.Tensor) -> SampledFrames:
        trajectories, mean = to_unit_predictions(values)
        return SampledFrames(start=start, trajectories=trajectories, mean=mean)

    for batch in windows:
        clips = batch[0][1].shape[0]
        shape = (clips, settings.num_samples, window, 2)
        if skip_windows:  # the noise of the video's windows before the first one run, drawn and dropped
            draw_window_noises(skip_windows, shape, generator, device)
            skip_windows = 0
        with stage("encode"):
            frames = torch.cat([pad_last_frame(clip, window) for _, clip in batch]).to(device, non_blocking=True)
            encoder_tokens = model.encode_video(frames)
            condition = model.build_condition(encoder_tokens, window) if use_condition_cache else None
        pieces = []
        with stage("sample"):
            noises = draw_window_noises(len(batch), shape, generator, device).split(clips)
            if not coherent:  # independent windows: sampled together, each from its own x_0 prior
                priors = torch.cat([correlate_noise(noise, config.noise_correlation) for noise in noises])
                sampled = _sample_batch(
                    model, sampler, condition, encoder_tokens, priors, settings, use_condition_cache
                ).split(clips)
            for index, ((start, clip), noise) in enumerate(zip(batch, noises)):
                if coherent:  # each window conditioned on the frames stitched so far, the previous ones included
                    rows = slice(index * clips, (index + 1) * clips)
                    window_sampler = (
                        partial(sampler, condition.select_clips(rows))
                        if use_condition_cache
                        else partial(_sample_recomputed, model, encoder_tokens[rows], settings)
                    )
                    values = sample_coherent_window(
                        window_sampler, noise, blender, noise_of_frames, start, config.noise_correlation
                    )
                else:
                    values = sampled[index]
                clip_end = max(clip_end, start + clip.shape[1])
                emitted = blender.emitted
                piece = blender.push(values, start)
                if piece is not None:
                    pieces.append(finished(emitted, piece))
        yield from pieces
    yield finished(blender.emitted, blender.finish(clip_end))


def _sample_recomputed(
    model: WindowedModel,
    encoder_tokens: torch.Tensor,
    settings: SamplingSettings,
    noise: torch.Tensor,
    known: torch.Tensor | None = None,
) -> torch.Tensor:
    """One window on the plain reference path (the condition recomputed at every call)."""
    return sample_window(
        model, encoder_tokens, model.config.num_frames, noise, settings, use_condition_cache=False, known=known
    )


def _sample_batch(
    model: WindowedModel,
    sampler: Callable[..., torch.Tensor],
    condition: Any,
    encoder_tokens: torch.Tensor,
    noise: torch.Tensor,
    settings: SamplingSettings,
    use_condition_cache: bool,
) -> torch.Tensor:
    if use_condition_cache:
        return sampler(condition, noise)
    return _sample_recomputed(model, encoder_tokens, settings, noise)


def sample_coherent_window(
    window_sampler: Callable[..., torch.Tensor],
    noise: torch.Tensor,
    stitched: StreamingBlender,
    noise_of_frames: StreamingBlender,
    start: int,
    noise_correlation: float = 0.0,
) -> torch.Tensor:
    """One coherent window starting at ``start``: its overlap with the frames stitched so far (``stitched``) is known,
    and sampled from the same noise (``noise_of_frames``, which then records this window's noise).
    ``window_sampler(noise, known)`` samples the window. ``noise`` holds the window's white draws; with
    ``noise_correlation`` rho > 0 its x_0 is the AR(1) prior over frames (``scheduling_gazeflow.correlate_noise``),
    and after a known overlap that prior continues from the overlap's last x_0, so the frames of the whole clip
    share one AR(1) process."""
    known = stitched.overlap(start)
    if known is None:
        noise = correlate_noise(noise, noise_correlation, frame_dim=2)
    else:
        overlap_noise = noise_of_frames.overlap(start)
        fresh = noise[:, :, known.shape[2] :]
        fresh = correlate_noise(fresh, noise_correlation, overlap_noise[:, :, -1:], frame_dim=2)
        noise = torch.cat([overlap_noise, fresh], dim=2)
    noise_of_frames.push(noise, start)
    return window_sampler(noise, known)


# ---------------------------------------------------------------------------------------------------- in memory
def generate_trajectories(
    model: WindowedModel,
    pixel_values_videos: torch.Tensor | None = None,
    encoder_hidden_states: torch.Tensor | None = None,
    settings: SamplingSettings | None = None,
    generator: torch.Generator | None = None,
    window_batch_size: int = 8,
    use_condition_cache: bool = True,
) -> SampledFrames:
    """K trajectories per clip ``[B, K, T, 2]`` and their point estimate ``[B, T, 2]``, unit coordinates, clamped.

    Frames ``[B, T, 3, S, S]`` of any length go through windows of ``config.num_frames`` (stride
    ``config.window_stride``), ``window_batch_size`` windows encoded and sampled together. Or give
    ``encoder_hidden_states`` ``[B, G * N, D]``: the tokens of one window of ``G * tubelet`` frames. ``settings``:
    K, S, the solver and the window mode (:class:`SamplingSettings`; None: the model's defaults).
    ``use_condition_cache=False`` recomputes the condition at every network call (the plain reference path, same
    results).
    """
    settings = settings if settings is not None else SamplingSettings.resolve(model.config)
    if (pixel_values_videos is None) == (encoder_hidden_states is None):
        raise ValueError(
            "generate: give exactly one of `pixel_values_videos` [B, T, 3, S, S] or "
            "`encoder_hidden_states` [B, G * N, D]"
        )
    if not isinstance(window_batch_size, int) or window_batch_size < 1:
        raise ValueError(f"`window_batch_size` must be an int >= 1, got {window_batch_size!r}")
    config = model.config
    device = next(model.parameters()).device

    if encoder_hidden_states is not None:
        tokens = config.tokens_per_frame
        if encoder_hidden_states.dim() != 3 or encoder_hidden_states.shape[1] % tokens != 0:
            raise ValueError(
                f"`encoder_hidden_states` must be [batch, tubelets * {tokens}, "
                f"{config.encoder_config.hidden_size}], got {tuple(encoder_hidden_states.shape)}"
            )
        num_frames = encoder_hidden_states.shape[1] // tokens * config.frames_per_encoder_group
        noise = draw_noise((encoder_hidden_states.shape[0], settings.num_samples, num_frames, 2), generator, device)
        noise = correlate_noise(noise, config.noise_correlation)
        sampled = sample_window(
            model, encoder_hidden_states.to(device), num_frames, noise, settings, use_condition_cache
        )
        trajectories, mean = to_unit_predictions(sampled)
        return SampledFrames(start=0, trajectories=trajectories, mean=mean)

    check_pixel_values(pixel_values_videos, config)
    total_frames = pixel_values_videos.shape[1]
    starts = window_starts(total_frames, config.num_frames, config.window_stride)
    windows = [(start, pixel_values_videos[:, start : start + config.num_frames]) for start in starts]
    batches = (windows[i : i + window_batch_size] for i in range(0, len(windows), window_batch_size))
    pieces = list(iter_window_predictions(model, batches, settings, generator, use_condition_cache))
    return SampledFrames(
        start=0,
        trajectories=torch.cat([p.trajectories for p in pieces], dim=2),
        mean=torch.cat([p.mean for p in pieces], dim=1),
    )


__all__ = [
    "SamplingSettings",
    "TimeEmbeddings",
    "condition_velocity_fn",
    "cached_velocity_fn",
    "recompute_velocity_fn",
    "sample_with",
    "sample_window",
    "WindowSampler",
    "Stage",
    "draw_window_noises",
    "sample_coherent_window",
    "SampledFrames",
    "point_estimate",
    "to_unit_predictions",
    "iter_window_predictions",
    "generate_trajectories",
]
