"""Video files through PyAV: probing, decoding a frame range, streaming frames, and writing mp4.

PyAV (``av``) carries FFmpeg inside its wheels, so nothing else is needed (no system FFmpeg).
Frames are always returned as RGB ``uint8`` arrays ``[H, W, 3]``, whatever the stored pixel format
(grayscale and odd sizes included): swscale converts each decoded frame into a buffer of its own and the array is a
view of it (no copy after the conversion). Decoding a range seeks to the nearest key frame before it and decodes only
up to its end, so memory is bounded by the window, never by the video.

Frame ``i`` of a video is the ``i``-th frame in presentation order; its time is ``i / fps`` seconds after the
stream's start, where ``fps`` is the stream's average frame rate read from the container.
"""

from __future__ import annotations

import math
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

RGB_CONVERSION_THREADS = 1
"""Threads of swscale's conversion of each decoded frame to RGB (``VideoFrame.to_ndarray(threads=...)``; PyAV's
default, 0, starts one per core). One thread gives the same pixels and, measured at 256x256, 640x480 and 1080p, costs
less wall and CPU time per frame than the default: a frame is too small a piece of work to share among threads, and
decoding already runs FFmpeg's own threads beside it (``docs/benchmarks.md``, ``bench_decode.py``)."""


class VideoDecodeError(RuntimeError):
    """A video file exists but cannot be read as a video (zero bytes, truncated, not a video, no video stream)."""


@dataclass(frozen=True)
class VideoInfo:
    """What the container says about a video's first video stream."""

    path: str
    num_frames: int
    fps: float
    width: int
    height: int

    @property
    def duration_s(self) -> float:
        return self.num_frames / self.fps


def _import_av():
    try:
        import av
    except ImportError as err:  # pragma: no cover - av is an install requirement
        raise ImportError("video decoding needs PyAV: `pip install av`") from err
    return av


def _open(path: str | os.PathLike):
    av = _import_av()
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"video file not found: {path}")
    if path.is_dir():
        raise VideoDecodeError(f"expected a video file, got a directory: {path}")
    if path.stat().st_size == 0:
        raise VideoDecodeError(f"cannot decode video {path}: the file is empty (0 bytes)")
    try:
        container = av.open(str(path))
    except (av.error.FFmpegError, UnicodeDecodeError, ValueError) as err:
        raise VideoDecodeError(f"cannot decode video {path}: {err}") from err
    if not container.streams.video:
        container.close()
        raise VideoDecodeError(f"cannot decode video {path}: the file has no video stream")
    stream = container.streams.video[0]
    if stream.codec_context is None:  # FFmpeg opened the container but knows no decoder for the stream's codec
        container.close()
        raise VideoDecodeError(
            f"cannot decode video {path}: its video codec is unknown to FFmpeg here (re-encode it, e.g. as H.264)"
        )
    return container, stream


def _stream_fps(stream) -> Fraction:
    rate = stream.average_rate or stream.guessed_rate or stream.base_rate
    if not rate or rate <= 0:
        raise VideoDecodeError(f"cannot read the frame rate of {stream.container.name}")
    return Fraction(rate)


def _frame_index(frame, stream, fps: Fraction) -> int:
    """Presentation index of a decoded frame (or a demuxed packet) from its timestamp:
    ``(pts - start) * time_base * fps``."""
    if frame.pts is None or stream.time_base is None:
        return -1
    start = stream.start_time or 0
    return int(round(float((frame.pts - start) * stream.time_base * fps)))


def probe_video(path: str | os.PathLike, check_end: bool = False) -> VideoInfo:
    """Frame count, frame rate and size of a video, read from the container.

    Where the container does not store a frame count, the packets of the video stream are counted (demuxing
    only, no decoding). ``check_end=True`` also checks that the file holds the data of the last frame the container
    lists (the packets from the last key frame on are demuxed, not decoded): a file cut short after its index was
    written (an mp4 whose ``moov`` comes first) raises :class:`VideoDecodeError` naming the file, the frames listed
    and the last frame present. (An mp4 whose index comes last cannot even be opened once cut.)
    """
    av = _import_av()
    container, stream = _open(path)
    try:
        fps = _stream_fps(stream)
        num_frames = int(stream.frames or 0)
        counted = num_frames <= 0
        if counted:
            num_frames = sum(1 for packet in container.demux(stream) if packet.size > 0)
        width, height = int(stream.codec_context.width), int(stream.codec_context.height)
        last_present = _last_frame_present(container, stream, fps, num_frames) if check_end and not counted else None
    except av.error.FFmpegError as err:
        raise VideoDecodeError(f"cannot decode video {path}: {err}") from err
    finally:
        container.close()
    if num_frames <= 0 or width <= 0 or height <= 0:
        raise VideoDecodeError(f"cannot decode video {path}: no frames of a known size in its video stream")
    if last_present is not None and last_present < num_frames - 1:
        raise VideoDecodeError(
            f"cannot decode video {path}: the file is truncated (its container lists "
            f"{num_frames} frames, but the data ends after frame {last_present})"
        )
    return VideoInfo(path=str(path), num_frames=num_frames, fps=float(fps), width=width, height=height)


def _last_frame_present(container, stream, fps: Fraction, num_frames: int) -> int:
    """Index of the last frame whose packet is in the file (-1 if none): seek to the key frame at or before the last
    listed frame and demux (no decoding) to the end of the file."""
    if stream.time_base is None:
        return num_frames - 1  # no timestamps to check against
    target = int((stream.start_time or 0) + math.floor((num_frames - 1) / fps / stream.time_base))
    container.seek(target, stream=stream, backward=True, any_frame=False)
    last = -1
    for packet in container.demux(stream):
        if packet.size > 0:
            last = max(last, _frame_index(packet, stream, fps))
    return last


def iter_frames(path: str | os.PathLike, start: int = 0, stop: int | None = None) -> Iterator[np.ndarray]:
    """Yield RGB frames ``[H, W, 3]`` uint8 with indices in ``[start, stop)`` (``stop=None``: to the end).

    Seeks to the key frame at or before ``start`` first; if the container cannot seek exactly (the first frame
    after the seek lies past ``start``), decodes from the beginning instead. One frame is held at a time.
    """
    av = _import_av()
    if start < 0 or (stop is not None and stop < start):
        raise ValueError(f"bad frame range [{start}, {stop}) for {path}")
    container, stream = _open(path)
    try:
        fps = _stream_fps(stream)
        stream.thread_type = "AUTO"
        if start > 0 and stream.time_base is not None:
            target = int((stream.start_time or 0) + math.floor(start / fps / stream.time_base))
            container.seek(target, stream=stream, backward=True, any_frame=False)
        position = None
        for frame in container.decode(stream):
            index = _frame_index(frame, stream, fps)
            if position is None:
                if index > start or index < 0:  # the seek overshot, or no timestamps: decode from the start
                    if start > 0:
                        container.seek(0, stream=stream, backward=True, any_frame=False)
                        position = 0
                        yield from _count_from_start(container, stream, start, stop)
                        return
                    index = 0
                position = index
            else:
                position = index if index >= 0 else position + 1
            if position < start:
                continue
            if stop is not None and position >= stop:
                return
            yield frame.to_ndarray(format="rgb24", threads=RGB_CONVERSION_THREADS)
    except av.error.FFmpegError as err:
        raise VideoDecodeError(f"cannot decode video {path}: {err}") from err
    finally:
        container.close()


def _count_from_start(container, stream, start: int, stop: int | None) -> Iterator[np.ndarray]:
    for position, frame in enumerate(container.decode(stream)):
        if position < start:
            continue
        if stop is not None and position >= stop:
            return
        yield frame.to_ndarray(format="rgb24", threads=RGB_CONVERSION_THREADS)


class BackgroundFrames:
    """Read a frame iterator (:func:`iter_frames`, any iterable of frames) in a background thread, up to
    ``capacity`` frames ahead of the consumer, handed over ``chunk`` frames at a time: decoding then runs beside the
    model instead of in series with it (PyAV releases the GIL while FFmpeg decodes, with FFmpeg's own threads).

    Iterating yields the frames in order (or, with ``transform``, the items ``transform(chunk)`` returns for each
    chunk of frames, computed in the thread too); an error raised while reading is raised again in the consumer,
    with its traceback. Stopping early (``close()``, or the consuming generator being closed) stops the thread,
    which closes the source (and so its file) itself. ``read_s``: seconds the thread spent reading frames;
    ``wait_s``: seconds the consumer waited for them (both read after the iteration).
    """

    _END = object()

    def __init__(
        self, frames: Iterable, capacity: int = 64, chunk: int = 8, transform: Callable[[list], list] | None = None
    ) -> None:
        if capacity < 1 or chunk < 1:
            raise ValueError(f"capacity and chunk must be >= 1, got {capacity} and {chunk}")
        self._frames = frames
        self._chunk = chunk
        self._transform = transform
        self._queue: queue.Queue = queue.Queue(maxsize=max(1, capacity // chunk))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, name="gazeflow-decode", daemon=True)
        self.read_s = 0.0
        self.wait_s = 0.0

    def _put(self, item) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _deliver(self, chunk: list) -> bool:
        return self._put(self._transform(chunk) if self._transform is not None else chunk)

    def _read(self) -> None:
        iterator = iter(self._frames)
        chunk: list = []
        try:
            while not self._stop.is_set():
                started = time.perf_counter()
                frame = next(iterator, self._END)
                self.read_s += time.perf_counter() - started
                if frame is self._END:
                    break
                chunk.append(frame)
                if len(chunk) == self._chunk:
                    full, chunk = chunk, []
                    if not self._deliver(full):
                        return
            if chunk:
                full, chunk = chunk, []
                self._deliver(full)
            self._put(self._END)
        except BaseException as err:  # handed to the consumer after the frames read before it, raised there
            failure = err
            try:
                delivered = not chunk or self._deliver(chunk)
            except BaseException as earlier:  # the transform failed on one of those frames: that error first
                delivered, failure = True, earlier
            if delivered:
                self._put(failure)
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:
                close()

    def __iter__(self) -> Iterator:
        self._thread.start()
        try:
            while True:
                started = time.perf_counter()
                item = self._queue.get()
                self.wait_s += time.perf_counter() - started
                if item is self._END:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield from item
        finally:
            self.close()

    def close(self) -> None:
        """Stop the thread and wait for it (it closes the source)."""
        self._stop.set()
        while self._thread.is_alive():
            try:
                self._queue.get_nowait()
            except queue.Empty:
                self._thread.join(timeout=0.05)


class TimedFrames:
    """Frames read in the consumer's loop (no thread), timing the reads as :class:`BackgroundFrames` does."""

    def __init__(self, frames: Iterator[np.ndarray]) -> None:
        self.frames, self.read_s, self.wait_s = frames, 0.0, 0.0

    def __iter__(self) -> Iterator[np.ndarray]:
        while True:
            started = time.perf_counter()
            frame = next(self.frames, None)
            elapsed = time.perf_counter() - started
            self.read_s += elapsed
            self.wait_s += elapsed
            if frame is None:
                return
            yield frame

    def close(self) -> None:
        self.frames.close()


def decode_frames(
    path: str | os.PathLike, start: int = 0, num_frames: int | None = None, allow_short: bool = False
) -> np.ndarray:
    """Decode ``num_frames`` frames from ``start`` into one array ``[n, H, W, 3]`` uint8.

    Raises :class:`VideoDecodeError` naming the file when fewer frames than asked can be decoded, unless
    ``allow_short`` (then the frames that exist are returned; the collator pads by repeating the last one).
    """
    stop = None if num_frames is None else start + num_frames
    frames = list(iter_frames(path, start, stop))
    if not frames:
        raise VideoDecodeError(f"no frame could be decoded from {path} in the range [{start}, {stop})")
    if num_frames is not None and len(frames) < num_frames and not allow_short:
        raise VideoDecodeError(
            f"{path}: asked for frames [{start}, {stop}) but only {len(frames)} could be decoded from frame {start}"
        )
    return np.stack(frames)


def write_video(
    path: str | os.PathLike, frames: Iterable[np.ndarray], fps: float | Fraction, codec: str = "libx264", crf: int = 18
) -> Path:
    """Encode RGB uint8 frames ``[H, W, 3]`` (or ``[H, W]`` grayscale) into a video file, streaming.

    H.264 in 4:2:0 needs even sizes; odd sizes are written in 4:4:4, so any size round-trips.
    """
    av = _import_av()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rate = Fraction(fps).limit_denominator(1001) if not isinstance(fps, Fraction) else fps
    container = av.open(str(path), mode="w")
    stream = None
    try:
        for frame in frames:
            frame = np.asarray(frame)
            if frame.ndim == 2:
                frame = np.repeat(frame[..., None], 3, axis=2)
            if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] != 3:
                raise ValueError(
                    f"write_video({path}): frames must be uint8 [H, W, 3], got {frame.dtype} {frame.shape}"
                )
            if stream is None:
                height, width = frame.shape[:2]
                stream = container.add_stream(codec, rate=rate)
                stream.width, stream.height = width, height
                even = width % 2 == 0 and height % 2 == 0
                stream.pix_fmt = "yuv420p" if even else "yuv444p"
                if codec == "libx264":
                    stream.options = {"crf": str(crf)}
            elif frame.shape[:2] != (stream.height, stream.width):
                raise ValueError(
                    f"write_video({path}): frame size changed from {(stream.height, stream.width)} to {frame.shape[:2]}"
                )
            for packet in stream.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="rgb24")):
                container.mux(packet)
        if stream is None:
            raise ValueError(f"write_video({path}): no frames given")
        for packet in stream.encode():
            container.mux(packet)
    finally:
        container.close()
    return path


__all__ = [
    "VideoInfo",
    "VideoDecodeError",
    "probe_video",
    "iter_frames",
    "BackgroundFrames",
    "TimedFrames",
    "decode_frames",
    "write_video",
]
