"""The causal streamer's per-frame step as a function of tensors (paper Appendix F.4): :class:`GazeFlowStreamerStep`
and its :class:`StreamerState`.

The API that ``GazeFlowStreamer``, the ``gazeflow stream`` command and the ONNX export build on::

    settings = SamplingSettings.resolve(model.config, num_samples=K, num_steps=S)   # K, S, the solver
    step = GazeFlowStreamerStep(model, settings, dtype=None)
    state = step.new_state(batch_size)                   # every buffer zero, frame index 0
    trajectories, mean = step(frame, noise, state)       # the state is updated in place
    trajectories, mean, new_state = step.functional(frame, noise, state)   # no side effect (export)
    state.zero_()                                        # a new stream in the same storage

``frame`` ``[B, 3, S, S]`` normalised pixels (any float dtype), ``noise`` the prior's draw ``[B, K, 1, 2]`` float32
(model coordinates; x_0 is it times the settings' ``noise_scale``); ``trajectories`` ``[B, K, 2]`` the K samples' gaze
at the frame in unit coordinates, clamped, float32; ``mean`` ``[B, 2]`` their mean. ``step`` is an ``nn.Module``: its
weights are buffers prepared once in ``dtype`` (the model's own dtype by default; ``torch.bfloat16`` on a GPU) and it
holds no stream state of its own. The prepared weights are a second copy of the encoder's and the velocity network's (in
``dtype``: half the fp32 model's size in bf16); W_proj, the spatial encoder and the task bank's attention are the
model's own modules when ``dtype`` is the model's, else cast copies. The model is never changed.

**The state** (a pytree of tensors, so it passes through ``torch.compile`` and ``torch.export``, both tested; every
shape fixed when it is made, none changes from frame 0 on; nothing is read back to the host per frame):

* ``frame_index`` ``[]`` int64: t, the index of the next frame. The ring slot ``t mod W`` and the RoPE angles are
  derived from it on the device (``modeling_gazeflow_streaming``);
* ``written`` ``[W]`` bool: which ring slots hold a frame (the attention masks and the task bank's mean read it);
* ``frames`` ``[B, w, 3, S, S]``: a ring of the last w = ``causal_encoder_frames`` frames; the encoder reads them in
  time order (an index, frames before the first read the first, as ``causal_encoder_windows`` pads);
* ``summaries`` ``[B, W, d]`` and ``summary_cache`` (keys/values ``[B, H, W, d_h]``): rings of the last W frame
  summaries V_bar of the causal task bank and their keys/values (None without the task bank / task queries);
* ``self_attention``: per sampler call (S x 1 or 2 calls) and per block, a ring of the newest gaze tokens'
  keys/values ``[B K, H, W, d_h]`` (``GazeFlowRingKeyValueCache``);
* ``temporal``: per temporal layer of the spatial encoder (``config.num_temporal_layers``; empty without them), a
  ring of the last W frames' keys/values at every spatial position, ``[B N, H, W, d_h]``;
* ``velocities`` ``[calls, B, K, 1, 2]`` float32 (``config.whitened_flow`` only, else None): the last frame's velocity
  at each sampler call, from which this frame's continues the AR(1) recursion v = L w over frames
  (``GazeFlowVelocityNetwork.read_head``); it runs on past W frames as the prior it is, where a W-frame window
  would start it again.

Past W frames each ring overwrites its oldest slot, so memory is fixed and the context slides: frame t attends to
frames t - W + 1 .. t, which with RoPE (offsets only) equals the model run on the last W frames with the same gaze
history; learned positions give the newest frame the table's last row. Within the first W frames the outputs equal
``model.generate`` on the prefix with the same noise. Positions are only ever compared with each other, so a stream
may start at any frame index (``state.frame_index.fill_(t0)`` before its first frame): RoPE angles are formed in
float64 and reduced mod 2 pi, and a stream at t = 10^7 equals the same stream at 0 (tested).

How the step runs (eager, ``torch.compile``, a captured CUDA graph) is :mod:`.streaming_runners`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.utils._pytree as pytree
from torch import nn

from ..models.gazeflow.generation_gazeflow import SamplingSettings, to_unit_predictions
from ..models.gazeflow.modeling_gazeflow import GazeFlowModel
from ..models.gazeflow.modeling_gazeflow_attention import GazeFlowRingKeyValueCache
from ..models.gazeflow.modeling_gazeflow_streaming import (
    GazeFlowStreamingCondition,
    GazeFlowStreamingVelocityNetwork,
    StreamingCondition,
    StreamingPositions,
    streaming_positions,
)
from ..models.gazeflow.modeling_gazeflow_streaming_encoder import GazeFlowStreamingVideoEncoder
from ..models.gazeflow.scheduling_gazeflow import Scheduler, continue_correlated


@dataclass
class StreamerState:
    """Everything a stream carries from one frame to the next, as fixed-size tensors (see the module docstring)."""

    frame_index: torch.Tensor
    written: torch.Tensor
    frames: torch.Tensor
    summaries: torch.Tensor | None
    summary_cache: GazeFlowRingKeyValueCache | None
    self_attention: tuple[tuple[GazeFlowRingKeyValueCache, ...], ...]
    temporal: tuple[GazeFlowRingKeyValueCache, ...] = ()
    velocities: torch.Tensor | None = None

    @property
    def batch_size(self) -> int:
        return self.frames.shape[0]

    def tensors(self) -> list[torch.Tensor]:
        """Every tensor of the state (the pytree's leaves, in its order)."""
        return pytree.tree_leaves(self)

    def zero_(self) -> StreamerState:
        """Forget the stream in place: frame index 0, every buffer zero (captured graphs keep reading the same
        storage)."""
        for tensor in self.tensors():
            tensor.zero_()
        return self

    def clone(self) -> StreamerState:
        return pytree.tree_map(torch.Tensor.clone, self)

    def nbytes(self) -> int:
        return sum(tensor.numel() * tensor.element_size() for tensor in self.tensors())


try:  # a pytree of tensors: compile and export take it as an input
    pytree.register_dataclass(StreamerState, serialized_type_name=f"{__name__}.StreamerState")
except ValueError:  # already registered (the module was imported twice under one name)
    pass


def scheduler_flow_times(scheduler: Scheduler) -> list[float]:
    """The flow time of each network call the scheduler's sampler makes, in order (the network reads them)."""
    times: list[float] = []

    def record(sample: torch.Tensor, flow_time: float, self_condition: torch.Tensor) -> torch.Tensor:
        times.append(float(flow_time))
        return torch.zeros_like(sample)

    scheduler.sample(record, torch.zeros(1, 1, 1, 2))
    return times


class GazeFlowStreamerStep(nn.Module):
    """One frame of causal GazeFlow, static: (frame, noise, state) -> (trajectories, mean), state updated in place.

    Per frame: the encoder on the frame's causal window, the condition (c_v, the task bank over the summary ring,
    every block's keys/values) once, then the scheduler's S steps (``num_steps`` x 1 or 2 network calls), each on
    the K gaze tokens of the newest frame with that call's ring caches. No Python branch reads a tensor, so the
    step traces to one graph (``torch.compile(step, fullgraph=True)``), replays as a CUDA graph and exports.

    Args:
        model: a causal :class:`GazeFlowModel` (``config.causal=True``), in eval mode.
        settings: K, S and the ODE solver (:class:`SamplingSettings`; None: the config's defaults).
        dtype: the dtype every weight is cast to once and the step computes in (default: the model's); the ODE
            state x_s stays float32. The model is left as it is (cast copies are made where needed).

    Twin of ``streaming_reference.ReferenceStreamer``: change both; held equal by
    ``tests/test_causal_streaming.py::test_streamer_equals_the_previous_streamer_past_the_window``.
    """

    def __init__(
        self,
        model: GazeFlowModel,
        settings: SamplingSettings | None = None,
        dtype: torch.dtype | None = None,
    ):
        super().__init__()
        config = model.config
        if not config.causal:
            raise ValueError(
                "GazeFlowStreamerStep needs a causal model (GazeFlowConfig(causal=True), paper Appendix "
                "F.4): the bidirectional model's output at frame t depends on later frames"
            )
        parameter = next(model.parameters())
        dtype = parameter.dtype if dtype is None else dtype
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise ValueError(f"`dtype` must be a floating torch.dtype (e.g. torch.bfloat16), got {dtype!r}")
        self.settings = settings if settings is not None else SamplingSettings.resolve(config)
        self.config, self.dtype = config, dtype
        self.scheduler = self.settings.scheduler(config)
        self.context = config.num_frames  # W
        self.encoder_frames, self.tokens_per_frame = config.causal_encoder_frames, config.tokens_per_frame
        self.video_encoder = GazeFlowStreamingVideoEncoder(
            model.video_encoder, self.encoder_frames, self.tokens_per_frame, dtype
        ).eval()
        self.condition = GazeFlowStreamingCondition(model, dtype)  # may share the model's modules: not .eval()'d
        self.velocity_network = GazeFlowStreamingVelocityNetwork(
            model.velocity_network, config, dtype, scheduler_flow_times(self.scheduler)
        ).eval()
        device = parameter.device
        self.register_buffer(
            "window_offsets", torch.arange(1 - self.encoder_frames, 1, device=device), persistent=False
        )

    @property
    def device(self) -> torch.device:
        return self.window_offsets.device

    def new_state(self, batch_size: int) -> StreamerState:
        """A zero state for a stream of ``batch_size`` clips (frame index 0), on the step's device."""
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ValueError(f"new_state: `batch_size` must be an int >= 1, got {batch_size!r}")
        config, device = self.config, self.device
        heads, head_dim, width = config.num_attention_heads, config.head_dim, config.hidden_size
        size, channels = config.image_size, config.encoder_config.in_chans

        def ring(rows: int) -> GazeFlowRingKeyValueCache:
            return GazeFlowRingKeyValueCache.empty(rows, heads, self.context, head_dim, self.dtype, device)

        condition = self.condition
        return StreamerState(
            frame_index=torch.zeros((), dtype=torch.int64, device=device),
            written=torch.zeros(self.context, dtype=torch.bool, device=device),
            frames=torch.zeros(batch_size, self.encoder_frames, channels, size, size, dtype=self.dtype, device=device),
            summaries=torch.zeros(batch_size, self.context, width, dtype=self.dtype, device=device)
            if condition.has_task_bank
            else None,
            summary_cache=ring(batch_size) if condition.num_queries > 0 else None,
            self_attention=tuple(
                tuple(ring(batch_size * self.settings.num_samples) for _ in self.velocity_network.blocks)
                for _ in range(self.velocity_network.num_calls)
            ),
            temporal=tuple(ring(batch_size * self.tokens_per_frame) for _ in range(config.num_temporal_layers)),
            velocities=torch.zeros(
                self.velocity_network.num_calls, batch_size, self.settings.num_samples, 1, 2, device=device
            )
            if config.whitened_flow
            else None,
        )

    def encode_frame(
        self, frame: torch.Tensor, state: StreamerState, positions: StreamingPositions
    ) -> StreamingCondition:
        """Frame t's condition: the frame written to the window ring (the stream's first frame to every slot: frames
        before it read it, as ``causal_encoder_windows`` pads), the encoder on frames t - w + 1 .. t in time order
        (the last tubelet's N tokens are frame t's), then :class:`GazeFlowStreamingCondition` (rings updated).

        Twin of ``modeling_gazeflow_causal.causal_encoder_windows``: change both; held equal by
        ``tests/test_causal_streaming.py::test_streamer_equals_the_causal_model_on_every_prefix``.
        """
        ring, window = state.frames, self.encoder_frames
        frame = frame.unsqueeze(1).to(ring.dtype)
        ring.copy_(torch.where(positions.first, frame.expand_as(ring), ring))
        ring.index_copy_(1, torch.remainder(positions.frame_index, window).view(1), frame)
        order = torch.remainder(positions.frame_index + self.window_offsets, window)
        tokens = self.video_encoder(ring.index_select(1, order))  # [B, N, D]
        return self.condition(tokens, state.summaries, state.summary_cache, positions, state.temporal)

    def sample(
        self, noise: torch.Tensor, condition: StreamingCondition, state: StreamerState, positions: StreamingPositions
    ) -> torch.Tensor:
        """The scheduler's sampler from x_0 = tau ``noise`` ``[B, K, 1, 2]`` (tau: the settings' ``noise_scale``) to
        x_1 (float32), call c of the network reading and writing the ring caches ``state.self_attention[c]``."""
        network = self.velocity_network
        frame = network.frame_inputs(positions, condition, noise.shape[0] * noise.shape[1])
        call = 0

        def velocity_fn(sample: torch.Tensor, flow_time: float, self_condition: torch.Tensor) -> torch.Tensor:
            nonlocal call
            if flow_time != network.flow_times[call]:  # Python floats: the scheduler and the prepared times agree
                raise RuntimeError(
                    f"streamer step: call {call} at flow time {flow_time}, prepared for {network.flow_times[call]}"
                )
            velocity = network(sample, self_condition, call, frame, positions, condition, state.self_attention[call])
            if state.velocities is not None:  # config.whitened_flow: v = L w, continued from the last frame's
                previous = state.velocities[call]
                velocity = continue_correlated(velocity, self.config.noise_correlation, previous, positions.first)
                previous.copy_(velocity)
            call += 1
            return velocity

        start = noise.float()
        if self.settings.noise_scale != 1:
            start = start * self.settings.noise_scale
        return self.scheduler.sample(velocity_fn, start)

    def forward(
        self, frame: torch.Tensor, noise: torch.Tensor, state: StreamerState
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Frame t's K samples ``[B, K, 2]`` and their mean ``[B, 2]`` (unit coordinates, clamped, float32); the
        state moves to frame t + 1 in place."""
        positions = streaming_positions(state.frame_index, state.written, self.dtype)
        condition = self.encode_frame(frame, state, positions)
        sample = self.sample(noise, condition, state, positions)
        state.frame_index.add_(1)
        return to_unit_predictions(sample[:, :, 0])

    def functional(
        self, frame: torch.Tensor, noise: torch.Tensor, state: StreamerState
    ) -> tuple[torch.Tensor, torch.Tensor, StreamerState]:
        """:meth:`forward` without side effects: the given state is left as it is and the next one returned (the
        form an exported graph without mutable inputs needs)."""
        state = state.clone()
        trajectories, mean = self(frame, noise, state)
        return trajectories, mean, state


__all__ = ["StreamerState", "GazeFlowStreamerStep", "scheduler_flow_times"]
