"""The windowed engine fed from a stream of raw frames: the path of the ``egocentric-gaze`` pipeline and of
``gazeflow predict``.

:func:`stream_gaze` reads raw frames from any iterable and hands windows to the model's one loop over windows
(:func:`~transformers_gazeflow.models.gazeflow.generation_gazeflow.iter_window_predictions`) in batches of
``window_batch_size`` windows, as soon as their frames are known. The windows are those of ``window_starts``, found
without knowing the clip's length: a regular window ``[s, s + W)`` is not the last exactly when frame ``s + W``
exists, so it is ready once that frame arrives; when the stream ends, the last window is aligned to the end of the
clip (or, for a clip of at most ``W`` frames, padded).

Work is batched and kept off the host's critical path:

* the frames of a batch that are new are resized and normalised together, on the model's device (uint8 frames are
  moved there through pinned memory without waiting; the processor's own :meth:`preprocess` does the work, so its
  definition stays the one place the convention lives);
* the batch's windows are encoded in one encoder call and their conditions built in one call (the engine);
* nothing reads a value back from the device inside the loop: finished frames are copied to pinned host memory
  with non-blocking copies and handed out once their copy has completed (:class:`_HostCopies`).

At any time the stream holds at most ``window_batch_size`` windows of processed frames (``(n - 1) * stride + W + 1``
frames), the pending trajectories of a few windows and (``keep_frames``) the raw frames not yet handed out: memory
does not grow with the video. Streamed trajectories equal ``generate``'s on the same processed frames, and do not
depend on ``window_batch_size`` beyond floating-point rounding (tested).
"""

from __future__ import annotations

import time
from collections import defaultdict, deque
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

import numpy as np
import torch

from ..models.gazeflow.generation_gazeflow import (
    SampledFrames,
    SamplingSettings,
    Stage,
    Window,
    iter_window_predictions,
)
from ..models.gazeflow.modeling_gazeflow import GazeFlowModel
from ..models.gazeflow.windows import WindowPlan

DEFAULT_WINDOW_BATCH_SIZE = 8
"""Windows encoded together by :func:`stream_gaze` (and read ahead of the sampler)."""


@dataclass
class GazeChunk:
    """Finished frames handed out by :func:`stream_gaze`.

    Args:
        start: index of the chunk's first frame, counted from the first frame of the stream.
        trajectories: the K samples on these frames, ``[K, n, 2]`` float32 unit coordinates ``[0, 1]``.
        points: the point estimate of each frame (the mean of the K samples), ``[n, 2]`` unit coordinates.
        frames: the chunk's raw RGB frames ``[H, W, 3]`` uint8 (only with ``keep_frames``, else None).
    """

    start: int
    trajectories: np.ndarray
    points: np.ndarray
    frames: list[np.ndarray] | None = None

    @property
    def num_frames(self) -> int:
        return self.trajectories.shape[1]


def as_rgb_frame(frame, index: int, size: tuple[int, int] | None) -> np.ndarray:
    """Check one frame (numpy/torch/PIL, RGB ``[H, W, 3]`` or grayscale ``[H, W]``/``[H, W, 1]``, uint8) -> RGB."""
    if hasattr(frame, "convert") and hasattr(frame, "size"):  # a PIL image
        frame = np.asarray(frame.convert("RGB"))
    elif isinstance(frame, torch.Tensor):
        frame = frame.detach().cpu().numpy()
    if not isinstance(frame, np.ndarray):
        raise ValueError(f"frame {index}: expected an image array [H, W, 3] of uint8, got {type(frame).__name__}")
    if frame.dtype != np.uint8:
        raise ValueError(f"frame {index}: pixels must be uint8 (0..255), got dtype {frame.dtype}")
    if frame.ndim == 3 and frame.shape[2] == 1:
        frame = frame[..., 0]
    if frame.ndim == 2:
        frame = np.repeat(frame[..., None], 3, axis=2)
    if frame.ndim != 3 or frame.shape[2] != 3 or min(frame.shape[:2]) < 1:
        raise ValueError(f"frame {index}: expected shape [H, W, 3] (or grayscale [H, W]), got {frame.shape}")
    if size is not None and frame.shape[:2] != size:
        raise ValueError(
            f"frame {index} is {frame.shape[1]}x{frame.shape[0]} but the video's frames are "
            f"{size[1]}x{size[0]}: all frames of a video must have one size"
        )
    return frame


# ---------------------------------------------------------------------------------------------------- stage times
class StageClock:
    """Where a run's time goes, per stage, measured without serialising the pipeline.

    ``clock(name)`` is a context manager around device work (the engine's ``"encode"`` and ``"sample"``, the
    stream's ``"preprocess"``): on CUDA it records a pair of CUDA events on the current stream around the work (no
    wait), and the elapsed times are read once, by :meth:`totals`, after the last frame; on other devices, where
    the work is done when the call returns, it adds the span's wall time. Host work in other threads or outside the
    loop (decoding, writing) is added with :meth:`add`. A device span is the time between the events on the
    device's timeline, so it includes the gaps in which the device waited for the host to queue the stage's work.
    """

    def __init__(self, device: torch.device | str | None = None) -> None:
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        self.seconds: dict[str, float] = defaultdict(float)
        self._events: dict[str, list] = defaultdict(list)

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        if self.device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            yield
            end.record()
            self._events[name].append((start, end))
            return
        started = time.perf_counter()
        yield
        self.seconds[name] += time.perf_counter() - started

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] += seconds

    def totals(self) -> dict[str, float]:
        """Seconds per stage (waits for the device's last recorded event)."""
        totals = dict(self.seconds)
        for name, spans in self._events.items():
            if spans:
                spans[-1][1].synchronize()
            totals[name] = totals.get(name, 0.0) + sum(start.elapsed_time(end) for start, end in spans) / 1000.0
        return {name: round(seconds, 4) for name, seconds in sorted(totals.items())}


def _no_stage(name: str) -> nullcontext:
    return nullcontext()


# ---------------------------------------------------------------------------------------------------- frames in
def process_frames(processor, frames: list[np.ndarray], device: torch.device) -> torch.Tensor:
    """Resize and normalise raw frames ``[H, W, 3]`` uint8 together on ``device``: ``[n, 3, S, S]`` float32, by the
    processor's :meth:`preprocess` (moved there through pinned memory on CUDA, without waiting). On the host, frames
    are stacked as few at a time as the processor works on (``host_chunk_frames``): a stack of a whole batch of large
    frames would be mapped fresh, page by page."""
    if device.type == "cuda":
        batch = torch.empty((len(frames), *frames[0].shape), dtype=torch.uint8, pin_memory=True)
        np.stack(frames, out=batch.numpy())
        return processor.preprocess(batch.to(device, non_blocking=True))
    step = processor.host_chunk_frames(frames[0].shape)
    pieces = [processor.preprocess(np.stack(frames[i : i + step])) for i in range(0, len(frames), step)]
    return (pieces[0] if len(pieces) == 1 else torch.cat(pieces)).to(device)


@dataclass
class PreparedFrames:
    """Consecutive frames checked and processed ahead of the stream (by :class:`FramePreparer`, e.g. in the reading
    thread): the raw RGB frames and their processed form ``[n, 3, S, S]`` on the host."""

    raw: list[np.ndarray]
    processed: torch.Tensor


class FramePreparer:
    """Checks (:func:`as_rgb_frame`, counting frames across calls) and processes chunks of raw frames on the host,
    for a reading thread to run beside the model (``data.video.BackgroundFrames(..., transform=FramePreparer(p))``);
    :func:`stream_gaze` takes the :class:`PreparedFrames` it returns in place of raw frames."""

    def __init__(self, processor) -> None:
        self.processor = processor
        self.count = 0
        self.size: tuple[int, int] | None = None

    def __call__(self, chunk: list) -> list[PreparedFrames]:
        frames = []
        for frame in chunk:
            frame = as_rgb_frame(frame, self.count, self.size)
            self.size = frame.shape[:2]
            self.count += 1
            frames.append(frame)
        return [PreparedFrames(frames, process_frames(self.processor, frames, torch.device("cpu")))]


class _HostCopies:
    """Finished frames on their way to the host: on CUDA each piece is copied into pinned memory by a non-blocking
    copy, and handed out once the copy has completed (or, when ``depth`` pieces wait, once the oldest has), so the
    host never waits for the device while it still has work to queue; elsewhere pieces are handed out at once."""

    def __init__(self, device: torch.device, depth: int) -> None:
        self.cuda = device.type == "cuda"
        self.depth = depth
        self.pending: deque = deque()

    def put(self, start: int, trajectories: torch.Tensor, points: torch.Tensor) -> None:
        if not self.cuda:
            self.pending.append((start, trajectories.cpu().numpy(), points.cpu().numpy(), None))
            return
        host = [
            torch.empty(t.shape, dtype=t.dtype, pin_memory=True).copy_(t, non_blocking=True)
            for t in (trajectories, points)
        ]
        event = torch.cuda.Event()
        event.record()
        self.pending.append((start, host[0].numpy(), host[1].numpy(), event))

    def ready(self, final: bool = False) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """The pieces whose copies are complete, in order (all of them when ``final``)."""
        while self.pending:
            start, trajectories, points, event = self.pending[0]
            if event is not None and not event.query():
                if not final and len(self.pending) <= self.depth:
                    return
                event.synchronize()
            self.pending.popleft()
            yield start, trajectories, points


# ---------------------------------------------------------------------------------------------------- the stream
@torch.no_grad()
def stream_gaze(
    model: GazeFlowModel,
    processor,
    frames: Iterable,
    settings: SamplingSettings | None = None,
    generator: torch.Generator | None = None,
    keep_frames: bool = False,
    plan: WindowPlan | None = None,
    window_batch_size: int = DEFAULT_WINDOW_BATCH_SIZE,
    sampler=None,
    stage: Stage | None = None,
) -> Iterator[GazeChunk]:
    """Sample K gaze trajectories over a stream of frames, yielding finished frames chunk by chunk.

    ``frames`` yields RGB ``[H, W, 3]`` (or grayscale) uint8 frames of one size, as numpy arrays, tensors or PIL
    images; ``processor`` (a ``GazeFlowVideoProcessor``) resizes and normalises them, on the model's device, a
    batch of windows' new frames at a time. Chunks come in order and together cover every frame once. ``settings``:
    K, S, the solver and the window mode (``SamplingSettings``; None: the model's defaults). Raises ``ValueError``
    if the stream is empty or a frame is bad (naming the frame).

    ``plan`` (``windows.plan_windows``): ``frames`` are the plan's frames ``[decode_start, decode_stop)`` of a longer
    video, run with the windows of the whole video's grid; only frames ``[output_start, output_stop)`` are handed
    out, chunk starts counted from ``output_start``. ``window_batch_size``: windows encoded together (the stream
    reads that many windows ahead of the sampler; 1 runs each window as soon as it is known). ``sampler`` (default
    the engine's ``WindowSampler``) and ``stage`` (e.g. a :class:`StageClock`) are handed to the engine.
    """
    if not isinstance(window_batch_size, int) or isinstance(window_batch_size, bool) or window_batch_size < 1:
        raise ValueError(f"`window_batch_size` must be an int >= 1, got {window_batch_size!r}")
    settings = settings if settings is not None else SamplingSettings.resolve(model.config)
    stage = stage if stage is not None else _no_stage
    device = next(model.parameters()).device
    raw: deque[np.ndarray] = deque()  # raw frames not handed out yet (keep_frames only)
    windows = _window_batches(model, processor, frames, window_batch_size, device, stage, raw if keep_frames else None)
    first = 0 if plan is None else plan.output_start - plan.decode_start  # output frames, in stream indices
    stop = None if plan is None else plan.output_stop - plan.decode_start
    copies = _HostCopies(device, depth=2 * window_batch_size)
    pieces = iter_window_predictions(
        model,
        windows,
        settings,
        generator,
        skip_windows=0 if plan is None else plan.first_window,
        sampler=sampler,
        stage=stage,
    )
    for piece in pieces:
        _put_piece(copies, piece, first, stop)
        yield from _chunks(copies.ready(), raw if keep_frames else None)
    yield from _chunks(copies.ready(final=True), raw if keep_frames else None)


def _put_piece(copies: _HostCopies, piece: SampledFrames, first: int, stop: int | None) -> None:
    """Queue the part of ``piece`` inside the output range ``[first, stop)`` (raw frames outside it are dropped by
    :func:`_chunks`, which counts them from the piece's start)."""
    low = max(first, piece.start)
    high = piece.start + piece.num_frames if stop is None else min(stop, piece.start + piece.num_frames)
    if high <= low:
        copies.pending.append((piece.start, None, piece.num_frames, None))  # frames to drop, in order
        return
    if low > piece.start:
        copies.pending.append((piece.start, None, low - piece.start, None))
    copies.put(
        low - first,
        piece.trajectories[0, :, low - piece.start : high - piece.start],
        piece.mean[0, low - piece.start : high - piece.start],
    )
    if high < piece.start + piece.num_frames:
        copies.pending.append((high, None, piece.start + piece.num_frames - high, None))


def _chunks(ready: Iterator[tuple], raw: deque | None) -> Iterator[GazeChunk]:
    for start, trajectories, points in ready:
        if trajectories is None:  # frames outside the output range: their raw frames are dropped
            for _ in range(points if raw is not None else 0):
                raw.popleft()
            continue
        count = trajectories.shape[1]
        chunk_frames = [raw.popleft() for _ in range(count)] if raw is not None else None
        yield GazeChunk(start=start, trajectories=trajectories, points=points, frames=chunk_frames)


def _window_batches(
    model: GazeFlowModel,
    processor,
    frames: Iterable,
    batch_size: int,
    device: torch.device,
    stage: Stage,
    raw: deque | None,
) -> Iterator[list[Window]]:
    """Batches of ready windows ``(start, processed frames [1, n, 3, S, S])`` from a stream of raw frames (or of
    :class:`PreparedFrames`)."""
    window, stride = model.config.num_frames, model.config.window_stride
    processed = None  # processed frames [buffer_start, buffer_start + len), on the device
    buffer_start, count, next_regular = 0, 0, 0
    unprocessed: list[np.ndarray] = []  # raw frames [buffer_start + len(processed), count), to process
    prepared: list[torch.Tensor] = []  # or those frames already processed on the host
    ready: list[int] = []
    size: tuple[int, int] | None = None

    def run(starts: list[int], end: int) -> list[Window]:
        nonlocal processed, buffer_start
        if unprocessed or prepared:  # (the last batch may have no new frame)
            with stage("preprocess"):
                new = (
                    process_frames(processor, unprocessed, device)
                    if unprocessed
                    else torch.cat(prepared).to(device, non_blocking=True)
                )
                processed = new if processed is None else torch.cat([processed, new])
        unprocessed.clear()
        prepared.clear()
        batch = [
            (start, processed[start - buffer_start : min(start + window, end) - buffer_start][None]) for start in starts
        ]
        # later windows start after the batch's last one: earlier processed frames are never read again
        drop = starts[-1] + 1 - buffer_start
        processed, buffer_start = processed[drop:], buffer_start + drop
        return batch

    for item in frames:
        if isinstance(item, PreparedFrames):  # checked and processed already
            new_frames = item.raw
            prepared.append(item.processed)
        else:
            new_frames = [as_rgb_frame(item, count, size)]
            size = new_frames[0].shape[:2]
            unprocessed.extend(new_frames)
        for frame in new_frames:
            if raw is not None:
                raw.append(frame)
            count += 1
            if count == next_regular + window + 1:  # frame next_regular + W exists: that window is not the last one
                ready.append(next_regular)
                next_regular += stride
        if len(ready) >= batch_size:  # (a chunk of prepared frames can make several windows ready at once)
            yield run(ready, count)
            ready = []
    if count == 0:
        raise ValueError("the video has no frames to predict on")
    yield run([*ready, max(0, count - window)], count)


__all__ = [
    "GazeChunk",
    "StageClock",
    "PreparedFrames",
    "FramePreparer",
    "as_rgb_frame",
    "process_frames",
    "stream_gaze",
    "DEFAULT_WINDOW_BATCH_SIZE",
]
