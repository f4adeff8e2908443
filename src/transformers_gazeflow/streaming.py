"""Streaming inference over a video of any length: decode -> process -> encode -> sample -> blend, window by window.

This is the engine under the ``egocentric-gaze`` pipeline and the ``gazeflow`` command. It reads frames one at a
time from any iterable (``data.video.iter_frames`` for a file), resizes and normalises each with the model's
processor, and runs a window through the encoder and the sampler as soon as its frames are known. Windows are
the ones of :func:`transformers_gazeflow.windows.window_starts`, found without knowing the clip's length in
advance: a regular window ``[s, s + W)`` is not the last one exactly when frame ``s + W`` exists, so it runs once
that frame arrives; when the stream ends, the last window is aligned to the end of the clip (or, for a clip of at
most ``W`` frames, padded by repeating its last frame). Window predictions are stitched by
:class:`~transformers_gazeflow.windows.StreamingBlender` and handed out as soon as they are final.

The noise of window ``i`` is the ``i``-th draw of shape ``[1, K, W, 2]`` from the generator, exactly as
:func:`transformers_gazeflow.sampling.generate_trajectories` draws it, so for the same processed frames and seed
the streamed trajectories equal ``model.generate``'s (tested to 1e-5). At any time the engine holds at most
``W + 1`` processed frames, the pending blended window and (with ``keep_frames``) the raw frames not yet handed
out (at most ``W + stride + 1``): memory does not grow with the video's length.

The **point estimate** of a frame is the mean of its K sampled positions (:func:`point_estimate`), the same as
``GazeFlowGenerationOutput.mean``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from .geometry import clamp_unit, model_to_unit
from .sampling import pad_window, sample_window
from .scheduling_gazeflow import draw_noise
from .validation import check_sampling_arguments
from .windows import StreamingBlender

if TYPE_CHECKING:
    from .data.processing import GazeFlowVideoProcessor
    from .modeling_gazeflow import GazeFlowModel


def point_estimate(trajectories: np.ndarray | torch.Tensor) -> np.ndarray | torch.Tensor:
    """The per-frame point estimate: the mean over the K samples, ``[K, T, 2] -> [T, 2]`` (unit coordinates).

    The samples lie in the frame (they are clamped to ``[0, 1]``), so the mean does too.
    """
    return trajectories.mean(axis=0) if isinstance(trajectories, np.ndarray) else trajectories.mean(dim=0)


@dataclass
class GazeChunk:
    """Finished frames handed out by :func:`stream_gaze`.

    Args:
        start: index of the chunk's first frame, counted from the first frame of the stream.
        trajectories: the K samples on these frames, ``[K, n, 2]`` float32 unit coordinates ``[0, 1]``.
        frames: the chunk's raw RGB frames ``[H, W, 3]`` uint8 (only with ``keep_frames``, else None).
    """

    start: int
    trajectories: np.ndarray
    frames: list[np.ndarray] | None = None

    @property
    def num_frames(self) -> int:
        return self.trajectories.shape[1]

    @property
    def points(self) -> np.ndarray:
        """The point estimate of each frame, ``[n, 2]`` unit coordinates."""
        return point_estimate(self.trajectories)


def _as_rgb_frame(frame, index: int, size: tuple[int, int] | None) -> np.ndarray:
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
    processor: GazeFlowVideoProcessor,
    frames: Iterable,
    num_samples: int,
    num_steps: int,
    solver: str = "euler",
    generator: torch.Generator | None = None,
    keep_frames: bool = False,
) -> Iterator[GazeChunk]:
    """Sample K gaze trajectories over a stream of frames, yielding finished frames chunk by chunk.

    ``frames`` yields RGB ``[H, W, 3]`` (or grayscale) uint8 frames of one size, as numpy arrays, tensors or PIL
    images. Chunks come in order and together cover every frame once. Raises ``ValueError`` if the stream is empty.
    """
    check_sampling_arguments(num_samples, num_steps, solver)
    config = model.config
    window, stride = config.num_frames, config.window_stride
    device = next(model.parameters()).device
    processed: list[torch.Tensor] = []  # processed frames [buffer_start, count), each [3, S, S]
    buffer_start = 0
    raw: deque[np.ndarray] = deque()  # raw frames not handed out yet (keep_frames only)
    blender = StreamingBlender(frame_dim=1)  # window values [K, W, 2], model coordinates
    size: tuple[int, int] | None = None
    count = 0
    next_regular = 0

    def run_window(start: int, stop: int) -> GazeChunk | None:
        nonlocal buffer_start
        clip = torch.stack(processed[start - buffer_start:stop - buffer_start]).unsqueeze(0)
        clip = pad_window(clip, window).to(device)
        tokens = model.encode_video(clip)
        noise = draw_noise((1, num_samples, window, 2), generator, device)
        sampled = sample_window(model, tokens, window, noise, num_steps, solver)[0].float().cpu()
        emitted = blender.emitted
        piece = blender.push(sampled, start)
        # later windows start after `start`: earlier processed frames are never read again
        del processed[:start + 1 - buffer_start]
        buffer_start = start + 1
        return None if piece is None else make_chunk(emitted, piece)

    def make_chunk(start: int, piece: torch.Tensor) -> GazeChunk:
        trajectories = clamp_unit(model_to_unit(piece)).numpy().astype(np.float32, copy=False)
        chunk_frames = [raw.popleft() for _ in range(trajectories.shape[1])] if keep_frames else None
        return GazeChunk(start=start, trajectories=trajectories, frames=chunk_frames)

    for frame in frames:
        frame = _as_rgb_frame(frame, count, size)
        size = frame.shape[:2]
        processed.append(processor.preprocess(frame[None])[0])
        if keep_frames:
            raw.append(frame)
        count += 1
        if count == next_regular + window + 1:  # frame next_regular + W exists: that window is not the last one
            chunk = run_window(next_regular, next_regular + window)
            next_regular += stride
            if chunk is not None:
                yield chunk
    if count == 0:
        raise ValueError("the video has no frames to predict on")
    chunk = run_window(max(0, count - window), count)
    if chunk is not None:
        yield chunk
    yield make_chunk(blender.emitted, blender.finish(count))


__all__ = ["GazeChunk", "point_estimate", "stream_gaze"]
