"""Online gaze prediction with the causal GazeFlow (paper Appendix F.4): :class:`GazeFlowStreamer`.

Online, not windowed: the windowed engine (``generation_gazeflow``, ``generation.windowed``) samples whole windows
and hands frames out once no later window can change them; this streamer emits each frame's gaze as soon as the frame
is seen (a camera loop, a file decoded frame by frame, an XR headset at 90 Hz). The causal model
(``GazeFlowConfig(causal=True)``, ``modeling_gazeflow_causal``) makes this exact: its output at frame t reads frames
<= t only, so per frame the streamer computes only what frame t adds, with bounded work:

* **encoder**: one V-JEPA 2 call on frame t's causal window (``causal_encoder_frames`` frames ending at t);
* **condition**: c_v(t), the causal task bank's entry over the last W frame summaries (W = ``num_frames``) and every
  block's visual/task keys and values, once per frame for all K samples and S steps;
* **sampler**: S ODE steps (``solver``: 1 or 2 network calls each) on the newest frame's K gaze tokens; the past
  frames' self-attention keys/values at each (network call, block) are kept for the last W frames.

The per-frame work is :class:`~.streaming_step.GazeFlowStreamerStep`, a function of (frame, noise, state) whose
state (:class:`~.streaming_step.StreamerState`) is fixed-size ring buffers with a slot mask, positions as tensors
and nothing read back to the host: the same shapes from frame 0 on, so it compiles to one graph and is captured as a
CUDA graph (``compile=``, :mod:`.streaming_runners`), with weights cast once to ``dtype`` (e.g. ``torch.bfloat16`` on
a GPU; autocast is not needed). Memory is fixed: ``streamer.state.nbytes()``.

**Guarantees** (tests): within the first W frames the outputs equal the causal model run on the prefix
(``model.generate``) with the same noise; past W frames the context slides: frame t attends to frames t - W + 1 .. t,
which with RoPE (offsets only) is the model on the last W frames with the same gaze history, and a learned position
table gives the newest frame its last row. RoPE angles are computed in float64 and reduced mod 2 pi, so a stream of
10^7 frames is as precise as its first frame (``modeling_gazeflow_streaming``).

**Tolerances**: in float32 the static step equals the previous, growing-cache streamer and ``model.generate`` on a
prefix to about 1e-6 in unit coordinates (tested at 1e-5; fused products and folded biases only round differently);
``compile="default"`` equals eager to float rounding (tested); bf16 (``dtype=torch.bfloat16``) follows bf16's 8-bit
mantissa, about 1e-2 (``tests/gpu``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from ..models.gazeflow.choices import STREAM_CPU_THREADS
from ..models.gazeflow.configuration_gazeflow import GazeFlowConfig
from ..models.gazeflow.generation_gazeflow import SamplingSettings
from ..models.gazeflow.modeling_gazeflow import GazeFlowModel
from ..models.gazeflow.scheduling_gazeflow import correlate_noise, draw_noise
from .streaming_runners import StepRunner, check_compile_mode, make_step_runner
from .streaming_step import GazeFlowStreamerStep, StreamerState


def stream_frames(frame: Any, config: GazeFlowConfig, processor: Any | None, batch_size: int | None) -> torch.Tensor:
    """A pushed frame as ``[B, 3, H, W]`` normalised pixels: raw uint8 ``[H, W, 3]`` / ``[B, H, W, 3]`` through the
    ``processor`` where there is one; a one-line ValueError naming the shape expected otherwise, or when the batch
    size differs from the stream's ``batch_size`` (None: not yet fixed)."""
    if processor is not None and not torch.is_floating_point(torch.as_tensor(frame)):
        frame = torch.as_tensor(frame)  # raw uint8 [H, W, 3] or [B, H, W, 3]: each frame resized and normalised
        frame = processor.preprocess(frame if frame.dim() == 4 else frame.unsqueeze(0))
    if not torch.is_tensor(frame) or frame.dim() not in (3, 4) or not frame.is_floating_point():
        shape = tuple(frame.shape) if torch.is_tensor(frame) else type(frame)
        raise ValueError(
            f"push: `frame` must be a float tensor [3, {config.image_size}, {config.image_size}] or "
            f"[B, 3, {config.image_size}, {config.image_size}] of normalised pixels (or raw uint8 "
            f"[H, W, 3] with a processor), got {shape}"
        )
    frame = frame.unsqueeze(0) if frame.dim() == 3 else frame
    expected = (config.encoder_config.in_chans, config.image_size, config.image_size)
    if tuple(frame.shape[1:]) != expected:
        raise ValueError(
            f"push: `frame` must be [B, {expected[0]}, {expected[1]}, {expected[2]}], got {tuple(frame.shape)}"
        )
    if batch_size is not None and frame.shape[0] != batch_size:
        raise ValueError(f"push: the stream has batch size {batch_size}, got a frame of {frame.shape[0]}")
    return frame


@dataclass
class GazeFlowStreamOutput:
    """The prediction for one frame.

    Attributes:
        frame_index: t, the index of the frame in the stream (0-based).
        trajectories: the K samples' gaze at frame t, ``[B, K, 2]``, unit coordinates ``[0, 1]`` (clamped).
        mean: their mean, ``[B, 2]``.
    """

    frame_index: int
    trajectories: torch.Tensor
    mean: torch.Tensor


class GazeFlowStreamer:
    """Causal, frame-by-frame GazeFlow inference on a static step (ring buffers, one graph per frame).

    Example:

    ```python
    >>> import torch
    >>> from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
    >>> from transformers_gazeflow.generation.online import GazeFlowStreamer
    >>> model = GazeFlowModel(GazeFlowConfig.tiny(causal=True)).eval()
    >>> streamer = GazeFlowStreamer(model, num_samples=4, num_steps=2, generator=torch.Generator().manual_seed(0))
    >>> for frame in torch.randn(10, 3, 32, 32):  # normalised frames, one at a time
    ...     out = streamer.push(frame)
    >>> out.frame_index, out.trajectories.shape, out.mean.shape
    (9, torch.Size([1, 4, 2]), torch.Size([1, 2]))
    ```

    Args:
        model: a causal :class:`GazeFlowModel` (``config.causal=True``), in eval mode.
        settings: K, S and the ODE solver (:class:`~transformers_gazeflow.models.gazeflow.generation_gazeflow.
            SamplingSettings`); or leave it None and give keyword arguments named after its fields
            (``num_samples=K``, ``num_steps=S``, ``solver=...``): each one not given is the config's default.
        generator: draws each frame's noise ``[B, K, 1, 2]`` (a seed makes the stream reproducible). With the
            model's ``noise_correlation`` rho > 0 the draw e_t is the innovation of the AR(1) prior over frames, and
            the step reads x_0[t] = rho x_0[t - 1] + sqrt(1 - rho^2) e_t (x_0[0] = e_0): the prior the windowed
            model samples a window from, continued frame by frame.
        processor: optional ``GazeFlowVideoProcessor``; then :meth:`push` also takes raw uint8 frames
            ``[H, W, 3]`` (or ``[B, H, W, 3]``) and processes them.
        compile: how the step runs (:data:`~.streaming_runners.COMPILE_MODES`): None (eager, the default and the
            CPU path), a ``torch.compile`` mode (``"reduce-overhead"``: compiled and replayed as a CUDA graph on a
            GPU; ``"default"``) or ``"cuda-graph"`` (the eager step captured with ``torch.cuda.CUDAGraph``). The
            compilation or capture happens at the first frame of a batch size.
        dtype: the dtype the step's weights are cast to once and it computes in (default: the model's), e.g.
            ``torch.bfloat16`` on a GPU. The model itself is not changed.
        threads: on the CPU, torch's intra-op threads are set to this when the streamer is built (default
            ``STREAM_CPU_THREADS`` of ``models.gazeflow.choices``, 1, as ``gazeflow stream``: a frame's work is too
            small to share out, and on 2 cores torch's default beside a decoding thread took several times longer
            per frame); torch's threads are the process's, so None leaves them as they are. Ignored elsewhere.
    """

    def __init__(
        self,
        model: GazeFlowModel,
        settings: SamplingSettings | None = None,
        *,
        generator: torch.Generator | None = None,
        processor=None,
        compile: str | None = None,
        dtype: torch.dtype | None = None,
        threads: int | None = STREAM_CPU_THREADS,
        **sampling: Any,
    ):
        if not model.config.causal:
            raise ValueError(
                "GazeFlowStreamer needs a causal model (GazeFlowConfig(causal=True), paper Appendix "
                "F.4): the bidirectional model's output at frame t depends on later frames"
            )
        check_compile_mode(compile, next(model.parameters()).device)
        if settings is not None and sampling:
            raise TypeError(
                f"GazeFlowStreamer: give `settings` or its fields as keywords, not both ({sorted(sampling)})"
            )
        if threads is not None and next(model.parameters()).device.type == "cpu":
            if threads < 1:
                raise ValueError(f"GazeFlowStreamer: threads must be >= 1 (or None), got {threads}")
            torch.set_num_threads(threads)
        self.model = model
        self.settings = settings if settings is not None else SamplingSettings.resolve(model.config, **sampling)
        self.step = GazeFlowStreamerStep(model, self.settings, dtype=dtype)
        self.scheduler = self.step.scheduler
        self.compile = compile
        self.generator = generator
        self.processor = processor
        self.context = model.config.num_frames  # W: frames of attention context kept
        self.state: StreamerState | None = None
        self.runner: StepRunner | None = None
        self.reset()

    def reset(self) -> None:
        """Forget the stream (start a new video). The buffers are zeroed in place, so a compiled or captured step
        is reused; a new batch size makes new buffers (and a new compilation or capture)."""
        self.frame_index = 0
        self.batch_size: int | None = None
        self.previous_noise: torch.Tensor | None = None  # x_0 of the last frame (the AR(1) prior continues from it)
        if self.state is not None:
            self.state.zero_()

    # ------------------------------------------------------------------ per-frame steps
    def _as_frames(self, frame: torch.Tensor) -> torch.Tensor:
        return stream_frames(frame, self.model.config, self.processor, self.batch_size)

    def _runner_for(self, batch: int) -> StepRunner:
        """The runner on this stream's state, made (buffers, compilation or capture) for a new batch size."""
        if self.state is None or self.state.batch_size != batch:
            self.state = self.step.new_state(batch)
            size, channels = self.model.config.image_size, self.model.config.encoder_config.in_chans
            self.runner = make_step_runner(
                self.step,
                self.state,
                self.compile,
                (batch, channels, size, size),
                (batch, self.settings.num_samples, 1, 2),
            )
        return self.runner

    @torch.no_grad()
    def push(self, frame: torch.Tensor, noise: torch.Tensor | None = None) -> GazeFlowStreamOutput:
        """Feed frame t (``[3, S, S]`` or ``[B, 3, S, S]``, normalised) and get its gaze.

        ``noise`` ``[B, K, 1, 2]`` (model coordinates) replaces the generator's draw for this frame (with the
        model's ``noise_correlation`` > 0, the AR(1) innovation e_t; see the class docstring).
        """
        device = self.step.device
        frame = self._as_frames(frame).to(device)
        batch = frame.shape[0]
        shape = (batch, self.settings.num_samples, 1, 2)
        if noise is not None and tuple(noise.shape) != shape:  # checked before the stream's state changes
            raise ValueError(f"push: `noise` must have shape {shape} (batch, K, 1 frame, 2), got {tuple(noise.shape)}")
        runner = self._runner_for(batch)
        if noise is None:
            noise = draw_noise(shape, self.generator, device)
        noise = correlate_noise(
            noise.to(device=device, dtype=torch.float32),
            self.model.config.noise_correlation,
            self.previous_noise,
            frame_dim=2,
        )
        trajectories, mean = runner(frame, noise)
        self.previous_noise = noise
        output = GazeFlowStreamOutput(self.frame_index, trajectories, mean)
        self.batch_size = batch
        self.frame_index += 1
        return output

    def stream(self, frames: Iterable[torch.Tensor]) -> Iterator[GazeFlowStreamOutput]:
        """Push every frame of an iterable (a camera loop, ``data.video.iter_frames`` with a processor) and yield
        each frame's prediction as soon as it is made."""
        for frame in frames:
            yield self.push(frame)

    @property
    def cached_frames(self) -> int:
        """Frames whose keys/values are in the ring buffers (at most W)."""
        return min(self.frame_index, self.context)


__all__ = ["GazeFlowStreamer", "GazeFlowStreamOutput", "stream_frames"]
