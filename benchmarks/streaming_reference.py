"""The causal streamer as it was before the static step (``GazeFlowStreamerStep``): kept as the reference the static
step is checked against past the first W frames (``tests/test_causal_streaming.py``; ``bench_streaming.py`` times
it), where ``model.generate`` on a prefix no longer applies (the sliding context). Simple and slow: deques of frames
and summaries, key/value caches that grow by ``cat`` and are trimmed to W, the model's own
``GazeFlowVelocityNetwork`` with a cache per block and network call."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator

import torch

from transformers_gazeflow.generation.online import GazeFlowStreamOutput, stream_frames
from transformers_gazeflow.models.gazeflow.generation_gazeflow import SamplingSettings, to_unit_predictions
from transformers_gazeflow.models.gazeflow.modeling_gazeflow import GazeFlowModel
from transformers_gazeflow.models.gazeflow.modeling_gazeflow_attention import GazeFlowKeyValueCache
from transformers_gazeflow.models.gazeflow.modeling_gazeflow_causal import causal_task_tokens, encode_frame_causal
from transformers_gazeflow.models.gazeflow.scheduling_gazeflow import draw_noise, scheduler_for


class ReferenceStreamer:
    """The streamer as it was before the static step: Python deques, growing key/value caches
    (``GazeFlowKeyValueCache``), the model's own velocity network with ``caches=`` per call.

    Twin of ``streaming_step.GazeFlowStreamerStep``: change both; held equal by
    ``tests/test_causal_streaming.py::test_streamer_equals_the_previous_streamer_past_the_window``.
    """

    def __init__(
        self,
        model: GazeFlowModel,
        num_samples: int | None = None,
        num_steps: int | None = None,
        solver: str | None = None,
        generator: torch.Generator | None = None,
        processor=None,
    ):
        config = model.config
        if not config.causal:
            raise ValueError(
                "GazeFlowStreamer needs a causal model (GazeFlowConfig(causal=True), paper Appendix "
                "F.4): the bidirectional model's output at frame t depends on later frames"
            )
        self.model = model
        settings = SamplingSettings.resolve(config, num_samples=num_samples, num_steps=num_steps, solver=solver)
        self.num_samples, self.num_steps, self.solver = settings.num_samples, settings.num_steps, settings.solver
        self.scheduler = scheduler_for(config, self.num_steps, self.solver)
        self.generator = generator
        self.processor = processor
        self.context = config.num_frames  # W: frames of attention context kept
        self.reset()

    def reset(self) -> None:
        """Forget the stream (start a new video)."""
        self.frame_index = 0
        self.recent_frames: deque[torch.Tensor] = deque(maxlen=self.model.config.causal_encoder_frames)
        self.frame_summaries: deque[torch.Tensor] = deque(maxlen=self.context)
        self.caches: list[list[GazeFlowKeyValueCache]] = []  # [network call of the sampler][block]
        self.velocities: list[torch.Tensor] = []  # [network call]: the last frame's velocity (whitened_flow)
        self.batch_size: int | None = None

    # ------------------------------------------------------------------ per-frame steps
    def _as_frames(self, frame: torch.Tensor) -> torch.Tensor:
        return stream_frames(frame, self.model.config, self.processor, self.batch_size)

    def _frame_condition(self, frame: torch.Tensor):
        """Encoder tokens of frame t from its causal window, then the model's condition encoder: c_v(t) and, over the
        frame summaries of the last W frames, the causal task bank's newest entry c_task(t); then their keys/values
        (``model.condition_from_tokens``)."""
        model, config = self.model, self.model.config
        self.recent_frames.append(frame)
        tokens = encode_frame_causal(
            model.video_encoder,
            torch.stack(tuple(self.recent_frames), dim=1),
            config.causal_encoder_frames,
            config.tokens_per_frame,
        )
        condition_encoder = model.condition_encoder
        visual = condition_encoder(tokens.unsqueeze(1)).visual_tokens  # c_v(t) [B, 1, N, d]
        task = None
        if condition_encoder.task_bank is not None:
            self.frame_summaries.append(visual.mean(dim=2))  # V_bar_t, the task bank's frame summary
            task = causal_task_tokens(
                condition_encoder.task_bank, torch.cat(tuple(self.frame_summaries), dim=1), last_only=True
            )
        return model.condition_from_tokens(visual, task, num_frames=1, frames_per_group=1)

    def _position(self) -> int:
        if self.model.config.position_encoding == "learned":
            return min(self.frame_index, self.context - 1)
        return self.frame_index

    @torch.no_grad()
    def push(self, frame: torch.Tensor, noise: torch.Tensor | None = None) -> GazeFlowStreamOutput:
        """Feed frame t (``[3, S, S]`` or ``[B, 3, S, S]``, normalised) and get its gaze.

        ``noise`` ``[B, K, 1, 2]`` (model coordinates) replaces the generator's draw for this frame.
        """
        device = next(self.model.parameters()).device
        frame = self._as_frames(frame).to(device)
        batch = frame.shape[0]
        shape = (batch, self.num_samples, 1, 2)
        if noise is not None and tuple(noise.shape) != shape:  # checked before the stream's state changes
            raise ValueError(f"push: `noise` must have shape {shape} (batch, K, 1 frame, 2), got {tuple(noise.shape)}")
        condition = self._frame_condition(frame)
        if noise is None:
            noise = draw_noise(shape, self.generator, device)
        position = self._position()
        network = self.model.velocity_network
        if network.frame_position is not None:  # checked on the Python int: the network never reads the device
            network.frame_position.check_last_position(position)
        positions = torch.full((1,), position, device=device)  # no blocking host->device copy per frame
        call = 0

        def velocity_fn(sample: torch.Tensor, flow_time: float, self_condition: torch.Tensor) -> torch.Tensor:
            nonlocal call
            if call == len(self.caches):
                self.caches.append([GazeFlowKeyValueCache(self.context) for _ in network.blocks])
            times = torch.full((batch, self.num_samples), float(flow_time), device=device)
            previous = self.velocities[call] if call < len(self.velocities) else None
            velocity = network(
                sample,
                times,
                self_condition,
                condition,
                positions=positions,
                caches=self.caches[call],
                previous_velocity=previous,
            )
            self.velocities[call : call + 1] = [velocity]  # config.whitened_flow continues from it at the next frame
            call += 1
            return velocity

        sample = self.scheduler.sample(velocity_fn, noise.to(device=device, dtype=torch.float32))
        trajectories, mean = to_unit_predictions(sample[:, :, 0])
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
        """Frames whose keys/values are cached (at most W)."""
        return self.caches[0][0].length if self.caches else 0
