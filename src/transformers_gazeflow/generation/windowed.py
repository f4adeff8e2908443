"""The windowed engine fed from a stream of raw frames: the path of the ``egocentric-gaze`` pipeline and of
``gazeflow predict``.

:func:`stream_gaze` reads raw frames one at a time from any iterable, processes each on arrival and hands each window
to the model's one loop over windows (:func:`~transformers_gazeflow.models.gazeflow.generation_gazeflow.
iter_window_predictions`) as soon as its frames are known. The windows are those of ``window_starts``, found without
knowing the clip's length: a regular window ``[s, s + W)`` is not the last exactly when frame ``s + W`` exists, so it
runs once that frame arrives; when the stream ends, the last window is aligned to the end of the clip (or, for a clip
of at most ``W`` frames, padded). At any time the stream holds at most ``W + 1`` processed frames, one pending window
of trajectories and (``keep_frames``) the raw frames not yet handed out (at most ``W + stride + 1``): memory does not
grow with the video. Streamed trajectories equal ``generate``'s on the same processed frames (tested).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import torch

from ..models.gazeflow.generation_gazeflow import SamplingSettings, Window, iter_window_predictions
from ..models.gazeflow.modeling_gazeflow import GazeFlowModel
from ..models.gazeflow.windows import WindowPlan


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
        raise ValueError(f"frame {index} is {frame.shape[1]}x{frame.shape[0]} but the video's frames are "
                         f"{size[1]}x{size[0]}: all frames of a video must have one size")
    return frame


@torch.no_grad()
def stream_gaze(
    model: GazeFlowModel,
    processor,
    frames: Iterable,
    settings: SamplingSettings | None = None,
    generator: torch.Generator | None = None,
    keep_frames: bool = False,
    plan: WindowPlan | None = None,
) -> Iterator[GazeChunk]:
    """Sample K gaze trajectories over a stream of frames, yielding finished frames chunk by chunk.

    ``frames`` yields RGB ``[H, W, 3]`` (or grayscale) uint8 frames of one size, as numpy arrays, tensors or PIL
    images; ``processor`` (a ``GazeFlowVideoProcessor``) resizes and normalises each. Chunks come in order and
    together cover every frame once. ``settings``: K, S, the solver and the window mode (``SamplingSettings``; None:
    the model's defaults). Raises ``ValueError`` if the stream is empty or a frame is bad (naming the frame).

    ``plan`` (``windows.plan_windows``): ``frames`` are the plan's frames ``[decode_start, decode_stop)`` of a longer
    video, run with the windows of the whole video's grid; only frames ``[output_start, output_stop)`` are handed
    out, chunk starts counted from ``output_start``.
    """
    settings = settings if settings is not None else SamplingSettings.resolve(model.config)
    window, stride = model.config.num_frames, model.config.window_stride
    raw: deque[np.ndarray] = deque()  # raw frames not handed out yet (keep_frames only)

    def windows() -> Iterator[list[Window]]:
        processed: list[torch.Tensor] = []  # processed frames [buffer_start, count), each [3, S, S]
        buffer_start, count, next_regular = 0, 0, 0
        size: tuple[int, int] | None = None

        def run(start: int, stop: int) -> list[Window]:
            nonlocal buffer_start
            clip = torch.stack(processed[start - buffer_start:stop - buffer_start]).unsqueeze(0)
            # later windows start after `start`: earlier processed frames are never read again
            del processed[:start + 1 - buffer_start]
            buffer_start = start + 1
            return [(start, clip)]

        for frame in frames:
            frame = as_rgb_frame(frame, count, size)
            size = frame.shape[:2]
            processed.append(processor.preprocess(frame[None])[0])
            if keep_frames:
                raw.append(frame)
            count += 1
            if count == next_regular + window + 1:  # frame next_regular + W exists: that window is not the last one
                yield run(next_regular, next_regular + window)
                next_regular += stride
        if count == 0:
            raise ValueError("the video has no frames to predict on")
        yield run(max(0, count - window), count)

    first = 0 if plan is None else plan.output_start - plan.decode_start  # output frames, in stream indices
    stop = None if plan is None else plan.output_stop - plan.decode_start
    skip = 0 if plan is None else plan.first_window
    for piece in iter_window_predictions(model, windows(), settings, generator, skip_windows=skip):
        piece_frames = [raw.popleft() for _ in range(piece.num_frames)] if keep_frames else None
        low = max(first, piece.start)
        high = piece.start + piece.num_frames if stop is None else min(stop, piece.start + piece.num_frames)
        if high <= low:
            continue
        cut = slice(low - piece.start, high - piece.start)
        yield GazeChunk(start=low - first, trajectories=piece.trajectories[0, :, cut].cpu().numpy(),
                        points=piece.mean[0, cut].cpu().numpy(),
                        frames=piece_frames[cut] if keep_frames else None)


__all__ = ["GazeChunk", "as_rgb_frame", "stream_gaze"]
