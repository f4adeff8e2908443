"""A video ready to stream through the windowed engine: a file (probed, not decoded) or frames in memory, with its
frame rate, size and the frame range asked for (:func:`open_video_source`), and its frames read with a check that a
file did not end early (:func:`checked_frames`). The ``egocentric-gaze`` pipeline streams it; ``gazeflow predict``
and ``gazeflow calibrate`` open one to check a video before the model loads (this module imports numpy and PyAV's
prober only, no torch)."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .video import VideoDecodeError, iter_frames, probe_video

logger = logging.getLogger(__name__)

DEFAULT_FPS = 30.0
"""Frame rate assumed for in-memory frames given without ``fps=`` (it only sets the frame times)."""


@dataclass
class VideoSource:
    """A video ready to stream: where it comes from, its frame rate and size, and how to read its frames.

    ``open_frames()`` reads the requested frames ``[start_frame, start_frame + expected_frames)``;
    ``open_frames(first, stop)`` any frames of the video (the windows covering the range may reach past it).
    ``total_frames``: the whole video's length (its window grid), when known.
    """

    name: str
    video_id: str
    fps: float
    width: int
    height: int
    start_frame: int
    expected_frames: int | None
    open_frames: Callable[..., Iterator[np.ndarray]]
    total_frames: int | None = None


def _frame_range(start_frame: int | None, end_frame: int | None, total: int, name: str) -> tuple[int, int]:
    start = 0 if start_frame is None else int(start_frame)
    stop = total if end_frame is None else min(int(end_frame), total)
    if start < 0 or (end_frame is not None and int(end_frame) <= start):
        raise ValueError(f"bad frame range [{start_frame}, {end_frame}) for {name}: need 0 <= start_frame < end_frame")
    if start >= total:
        raise ValueError(f"start_frame {start} is past the end of {name} ({total} frames)")
    return start, stop


def open_video_source(
    video: Any, fps: float | None = None, start_frame: int | None = None, end_frame: int | None = None
) -> VideoSource:
    """Describe ``video`` (a path, a ``[T, H, W, 3]`` uint8 array/tensor or a list of PIL images) for streaming.

    Files are probed, not decoded (errors name the file: missing, empty, not a video, truncated); frames
    ``[start_frame, end_frame)`` are streamed later by ``open_frames()``.
    """
    if isinstance(video, (str, os.PathLike)):
        path = Path(video)
        info = probe_video(path)  # FileNotFoundError / VideoDecodeError naming the file
        start, stop = _frame_range(start_frame, end_frame, info.num_frames, str(path))
        return VideoSource(
            name=str(path),
            video_id=path.stem,
            fps=float(fps or info.fps),
            width=info.width,
            height=info.height,
            start_frame=start,
            expected_frames=stop - start,
            open_frames=lambda first=start, last=stop: iter_frames(path, first, last),
            total_frames=info.num_frames,
        )
    if isinstance(video, (list, tuple)) and video and all(hasattr(im, "convert") for im in video):
        video = np.stack([np.asarray(im.convert("RGB")) for im in video])
    torch = sys.modules.get("torch")  # a tensor exists only once torch is imported: probing imports no torch
    if torch is not None and isinstance(video, torch.Tensor):
        video = video.detach().cpu().numpy()
    if not isinstance(video, np.ndarray):
        raise ValueError(
            f"expected a video file path, a [T, H, W, 3] uint8 array or tensor, or a list of PIL images, "
            f"got {type(video).__name__}"
        )
    if video.dtype != np.uint8 or video.ndim not in (3, 4) or (video.ndim == 4 and video.shape[-1] not in (1, 3)):
        raise ValueError(
            f"in-memory video must be uint8 [T, H, W, 3] (or grayscale [T, H, W]), got {video.dtype} {video.shape}"
        )
    if video.shape[0] < 1:
        raise ValueError("in-memory video has no frames")
    if fps is None:
        logger.warning("no fps= given for in-memory frames: frame times assume %s fps", DEFAULT_FPS)
    start, stop = _frame_range(start_frame, end_frame, video.shape[0], "the in-memory video")
    return VideoSource(
        name="<array>",
        video_id="video",
        fps=float(fps or DEFAULT_FPS),
        width=int(video.shape[2]),
        height=int(video.shape[1]),
        start_frame=start,
        expected_frames=stop - start,
        open_frames=lambda first=start, last=stop: iter(video[first:last]),
        total_frames=int(video.shape[0]),
    )


def checked_frames(source: VideoSource, first: int | None = None, stop: int | None = None) -> Iterator[np.ndarray]:
    """The source's frames (``[first, stop)``, default the requested ones); a file that yields clearly fewer frames
    than its container announces is truncated."""
    first = source.start_frame if first is None else first
    count = 0
    for frame in source.open_frames() if stop is None else source.open_frames(first, stop):
        count += 1
        yield frame
    check_decoded_count(source.name, source.expected_frames if stop is None else stop - first, count, first)


def check_decoded_count(name: str, expected: int | None, count: int, first: int = 0) -> None:
    """A video file that decoded clearly fewer frames (``count``) than its container announces (``expected``, from
    frame ``first``) is truncated or damaged: :class:`VideoDecodeError` naming it (a frame or 1% short: a warning).
    ``gazeflow predict`` and ``gazeflow stream`` read files by this one rule."""
    if expected is not None and count < expected:
        if count < expected * 0.99 - 1:
            raise VideoDecodeError(
                f"cannot decode video {name}: its container announces {expected} frames "
                f"from frame {first} but decoding stopped after {count} "
                f"(truncated or damaged file)"
            )
        logger.warning("%s: %d frames decoded where the container announces %d", name, count, expected)


__all__ = ["VideoSource", "open_video_source", "checked_frames", "check_decoded_count", "DEFAULT_FPS"]
