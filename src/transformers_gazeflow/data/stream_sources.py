"""Where ``gazeflow stream`` gets its frames, and the thread that decodes them while the model runs.

A source is a video file, a camera (``/dev/video0``: PyAV's ``v4l2`` input), a stream URL that PyAV opens (``rtsp://``,
``http(s)://``, ``udp://``, ...), or raw RGB frames on stdin (``-`` with ``--raw WIDTHxHEIGHT``: W * H * 3 bytes per
frame, row-major, no header). :func:`open_source` opens it at once, so that a bad source fails before the model loads,
with one line naming it.

:class:`FrameFeed` decodes in a background thread (PyAV's decoder has its own threads besides) and hands frames to
the model loop, so decoding frame t + 1 overlaps the model's work on frame t. It has two modes:

* **every frame** (files and stdin by default): the decoder stays at most ``depth`` frames ahead and waits for the
  model; no frame is dropped;
* **real time** (``--realtime``; cameras and URLs by default): frames arrive at the source's rate (a file is paced
  at its frame rate) and when the model is still busy with an earlier frame, the waiting frame is replaced by the
  newer one: it is *dropped* and counted. The model always gets the newest frame, as a headset needs.

A frame's *arrival*, where the command's per-frame latency starts: in real time, the moment the feed hands it over
(decoded, and for a paced file at its due time), so the wait behind the model's previous frame counts; frame by
frame, the moment the model takes it (decoding ran ahead, in parallel, and the source waits for the model).
"""

from __future__ import annotations

import io
import os
import re
import stat
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:  # numpy is imported where frames are made: checking the command line imports nothing heavy
    import numpy as np

URL_PATTERN = re.compile(r"(rtsps?|rtmps?|https?|udp|tcp|srt|rtp)://\S+", re.IGNORECASE)
CAMERA_PREFIX = "/dev/"
STDIN = "-"


class SourceError(ValueError):
    """A source that cannot be opened or read (missing camera, unreachable URL, truncated stdin frame)."""


@dataclass
class SourceFrame:
    """One frame of a source.

    Attributes:
        index: its position in the source, from 0 (dropped frames leave gaps).
        time_s: its time in seconds from the source's first frame (files: index / fps; cameras and URLs: the
            container's timestamps; stdin: index / ``--fps``, or its arrival time without it).
        pixels: RGB uint8 ``[H, W, 3]``.
        arrival: ``time.perf_counter()`` when the feed handed it over.
    """

    index: int
    time_s: float
    pixels: np.ndarray
    arrival: float = 0.0


def parse_raw_size(text: str) -> tuple[int, int]:
    """``--raw WIDTHxHEIGHT`` -> ``(width, height)``; a ValueError naming the text otherwise."""
    match = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*", text)
    if not match or int(match.group(1)) < 1 or int(match.group(2)) < 1:
        raise ValueError(f"{text!r}: expected WIDTHxHEIGHT in pixels, both >= 1 (e.g. 640x480)")
    return int(match.group(1)), int(match.group(2))


def source_kind(text: str) -> str:
    """``"stdin"``, ``"camera"``, ``"url"`` or ``"file"``."""
    if text == STDIN:
        return "stdin"
    if text.startswith(CAMERA_PREFIX):
        return "camera"
    if URL_PATTERN.fullmatch(text):
        return "url"
    return "file"


class AVSource:
    """A file, camera or URL opened with PyAV; frames decoded to RGB uint8."""

    def __init__(self, name: str, kind: str, container, stream, fps: float | None, expected_frames: int | None = None):
        self.name, self.kind, self.container, self.stream, self.fps = name, kind, container, stream, fps
        self.width, self.height = int(stream.codec_context.width), int(stream.codec_context.height)
        self.live = kind != "file"
        self.expected_frames = expected_frames

    def frames(self) -> Iterator[tuple[int, float, np.ndarray]]:
        """The decoded frames; a file that stops clearly short of the frames its container announces is truncated
        (``video_sources.check_decoded_count``, the rule ``gazeflow predict`` reads files by)."""
        import av

        from .video_sources import check_decoded_count

        first_time, count = None, 0
        try:
            for index, frame in enumerate(self.container.decode(self.stream)):
                if self.live and frame.time is not None:
                    first_time = frame.time if first_time is None else first_time
                    time_s = frame.time - first_time
                else:
                    time_s = index / self.fps if self.fps else 0.0
                count += 1
                yield index, float(time_s), frame.to_ndarray(format="rgb24")
        except av.error.FFmpegError as err:
            raise SourceError(f"cannot decode {self.kind} {self.name}: {err}") from err
        check_decoded_count(self.name, self.expected_frames, count)

    def close(self) -> None:
        self.container.close()


class RawStdinSource:
    """Raw RGB frames of a known size on a byte stream (stdin): W * H * 3 bytes per frame."""

    kind, live = "stdin", False

    def __init__(self, width: int, height: int, stream: BinaryIO, fps: float | None = None):
        self.name, self.width, self.height, self.fps, self.stream = "stdin", width, height, fps, stream
        self.frame_bytes = width * height * 3

    def frames(self) -> Iterator[tuple[int, float, np.ndarray]]:
        import numpy as np

        started = None
        index = 0
        while True:
            buffer = bytearray(self.frame_bytes)
            view, filled = memoryview(buffer), 0
            while filled < self.frame_bytes:
                count = self.stream.readinto(view[filled:])
                if not count:
                    break
                filled += count
            if filled == 0 and index == 0:
                raise SourceError(
                    f"stdin: no frame: the input ended before its first {self.width}x{self.height} RGB frame "
                    f"({self.frame_bytes} bytes)"
                )
            if filled == 0:
                return
            if filled < self.frame_bytes:
                raise SourceError(
                    f"stdin: frame {index} is truncated: {filled} of {self.frame_bytes} bytes "
                    f"({self.width}x{self.height} RGB; is --raw {self.width}x{self.height} the frames' "
                    "size?)"
                )
            now = time.perf_counter()
            started = now if started is None else started
            time_s = index / self.fps if self.fps else now - started
            yield index, time_s, np.frombuffer(buffer, dtype=np.uint8).reshape(self.height, self.width, 3)
            index += 1

    def close(self) -> None:
        pass


def check_raw_length(stream: BinaryIO, width: int, height: int) -> None:
    """Where stdin is a file (``< frames.rgb``) its length is known before a frame is read: empty, or not a whole
    number of ``width x height`` RGB frames, is a :class:`SourceError` naming the sizes (a pipe's length is not
    known; its frames are checked as they arrive, :class:`RawStdinSource`)."""
    try:
        info = os.fstat(stream.fileno())
        position = stream.tell() if stat.S_ISREG(info.st_mode) else None
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return
    if position is None:
        return
    remaining, frame_bytes = info.st_size - position, width * height * 3
    if remaining <= 0:
        raise SourceError(f"stdin: no frame: the input is empty (expected {width}x{height} RGB frames)")
    if remaining % frame_bytes:
        raise SourceError(
            f"stdin: {remaining} bytes are not a whole number of {width}x{height} RGB frames ({frame_bytes} bytes "
            f"each: {remaining // frame_bytes} whole and {remaining % frame_bytes} bytes over): is --raw "
            f"{width}x{height} the frames' size?"
        )


def open_source(
    text: str,
    raw_size: tuple[int, int] | None = None,
    fps: float | None = None,
    options: dict[str, str] | None = None,
    timeout_s: float = 10.0,
    stdin: BinaryIO | None = None,
) -> AVSource | RawStdinSource:
    """Open ``SOURCE`` (see the module docstring); errors are one line naming it (:class:`SourceError`,
    ``FileNotFoundError``, ``VideoDecodeError``)."""
    kind = source_kind(text)
    if kind == "stdin":
        if raw_size is None:
            raise SourceError("SOURCE - reads raw RGB frames from stdin and needs their size: --raw WIDTHxHEIGHT")
        import sys

        stream = stdin if stdin is not None else sys.stdin.buffer
        check_raw_length(stream, *raw_size)
        return RawStdinSource(*raw_size, stream, fps)
    if raw_size is not None:
        raise SourceError(f"--raw is for raw frames on stdin (SOURCE -), not for {text}")
    import av

    if kind == "camera":
        if not os.path.exists(text):
            raise SourceError(f"camera not found: {text} (no such device; `v4l2-ctl --list-devices` lists them)")
        opener = dict(format="v4l2", options=options or {})
    elif kind == "url":
        opener = dict(options=options or {}, timeout=timeout_s)
    else:
        from .video import probe_video

        expected = probe_video(text).num_frames  # a missing, empty or non-video file: one line naming it
        opener = dict(options=options or {})
    try:
        container = av.open(text, **opener)
    except (av.error.FFmpegError, OSError, UnicodeDecodeError, ValueError) as err:
        raise SourceError(f"cannot open {kind} {text}: {' '.join(str(err).split())}") from err
    if not container.streams.video or container.streams.video[0].codec_context is None:
        container.close()
        raise SourceError(f"{kind} {text} has no video stream that FFmpeg here can decode")
    stream = container.streams.video[0]
    stream.thread_type = "AUTO" if kind == "file" else "SLICE"  # frame threads would delay live frames
    rate = stream.average_rate or stream.guessed_rate or stream.base_rate
    name, fps = (text if kind != "file" else str(Path(text))), (float(rate) if rate else None)
    return AVSource(name, kind, container, stream, fps, expected if kind == "file" else None)


class FrameFeed:
    """Decodes a source in a background thread and hands its frames over one at a time (see the module docstring).

    Args:
        source: from :func:`open_source`.
        realtime: hand over the newest frame and drop a waiting one when a newer arrives; otherwise every frame,
            the decoder at most ``depth`` frames ahead.
        pace: release each frame at its time (a file played at its frame rate).
    """

    def __init__(self, source, realtime: bool, pace: bool = False, depth: int = 1):
        self.source, self.realtime, self.pace, self.depth = source, realtime, pace, depth
        self.pending: deque[SourceFrame] = deque()
        self.condition = threading.Condition()
        self.finished = False
        self.error: BaseException | None = None
        self.decoded = 0
        self.dropped = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._decode, name="gazeflow-stream-decoder", daemon=True)

    def start(self) -> FrameFeed:
        self.thread.start()
        return self

    def _decode(self) -> None:
        started = time.perf_counter()
        try:
            for index, time_s, pixels in self.source.frames():
                if self.pace:  # sleep until the frame is due (woken early by stop())
                    self.stopping.wait(max(0.0, started + time_s - time.perf_counter()))
                if self.stopping.is_set():
                    return
                self._hand_over(SourceFrame(index, time_s, pixels, time.perf_counter()))
        except BaseException as err:  # noqa: BLE001 - handed to the main thread, which raises it
            self.error = err
        finally:
            with self.condition:
                self.finished = True
                self.condition.notify_all()

    def _hand_over(self, frame: SourceFrame) -> None:
        with self.condition:
            self.decoded += 1
            if self.realtime:
                while self.pending:  # the model is behind: the waiting frame gives way to the newer one
                    self.pending.popleft()
                    self.dropped += 1
            else:
                while len(self.pending) >= self.depth and not self.stopping.is_set():
                    self.condition.wait(0.1)
            self.pending.append(frame)
            self.condition.notify_all()

    def __iter__(self) -> Iterator[SourceFrame]:
        while True:
            with self.condition:
                while not self.pending and not self.finished:
                    self.condition.wait(0.1)
                if self.pending:
                    frame = self.pending.popleft()
                    if not self.realtime:  # decoded ahead, in parallel: it arrives when the model takes it
                        frame.arrival = time.perf_counter()
                    self.condition.notify_all()
                elif self.error is not None:
                    raise self.error
                else:
                    return
            yield frame

    def stop(self) -> None:
        """Stop decoding and close the source (the thread is a daemon: a blocked camera read cannot hold the exit)."""
        self.stopping.set()
        with self.condition:
            self.condition.notify_all()
        self.thread.join(timeout=2.0)
        if not self.thread.is_alive():
            self.source.close()


__all__ = ["SourceError", "SourceFrame", "FrameFeed", "open_source", "parse_raw_size", "source_kind"]
