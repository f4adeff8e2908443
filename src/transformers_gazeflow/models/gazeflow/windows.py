"""Temporal windowing of long clips, in one place (paper Appendix D.3, "Sliding-Window Inference for Long Clips").

The velocity network is trained on windows of ``W`` frames (``config.num_frames``, 64 in the paper). A clip of
``T`` frames is covered by windows that start every ``stride`` frames (``config.window_stride``, ``W / 2``); the
last window is aligned to the end of the clip so that every frame is covered and no window runs past the clip.
A clip shorter than ``W`` is one window, padded by repeating its last frame and cut back afterwards.

Where two consecutive windows ``i`` and ``i + 1`` overlap, predictions are blended linearly along the frame axis:
``x_blend = (1 - a) x^(i) + a x^(i+1)`` with ``a = (tau - start_{i+1}) / L`` over the ``L`` overlapping frames.
With the regular stride ``L = W_s`` and this is exactly the paper's ``alpha_tau``; only the last, end-aligned
window can have a longer overlap, over which the same ramp is stretched.

With coherent windows (``window_mode="coherent"``, the windowed engine) window ``i + 1`` is sampled conditioned on
the frames it shares with window ``i``, so the two nearly agree there (the shared frames are held until the last
tenth of the flow, then released); the outputs are still ramped over the overlap as above, and a second
:class:`StreamingBlender` with ``mode="keep"`` keeps, per frame, the noise x_0 of the window that sampled it first,
so the next window reuses it.

A frame range of a longer video runs the windows of the *whole video's* grid that cover it (:func:`plan_windows`),
so a frame's prediction does not change with where the requested range starts or ends.

Training data uses the same :func:`window_starts` so that training windows cover a whole clip (data layer), and
the windowed engine uses :class:`StreamingBlender` to stitch window predictions back together.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import torch

ArrayLike = TypeVar("ArrayLike", torch.Tensor, np.ndarray)


def pad_last_frame(frames: ArrayLike, length: int, axis: int = 1) -> ArrayLike:
    """Pad ``frames`` to ``length`` entries along ``axis`` by repeating the last one (Appendix D.3); longer or equal
    inputs come back unchanged."""
    missing = length - frames.shape[axis]
    if missing <= 0:
        return frames
    if isinstance(frames, torch.Tensor):
        last = frames.narrow(axis, frames.shape[axis] - 1, 1)
        sizes = list(frames.shape)
        sizes[axis] = missing
        return torch.cat([frames, last.expand(*sizes)], dim=axis)
    last = np.take(frames, [frames.shape[axis] - 1], axis=axis)
    return np.concatenate([frames, np.repeat(last, missing, axis=axis)], axis=axis)


def window_starts(num_frames: int, window: int, stride: int) -> list[int]:
    """First frame of each window covering ``num_frames`` frames.

    Windows start at ``0, stride, 2 * stride, ...``; the last one starts at ``num_frames - window`` so that it
    ends exactly at the clip's end. A clip of at most ``window`` frames has the single start ``0``.
    """
    if num_frames < 1:
        raise ValueError(f"num_frames must be >= 1, got {num_frames}")
    if window < 1 or stride < 1:
        raise ValueError(f"window and stride must be >= 1, got window={window}, stride={stride}")
    if stride > window:
        raise ValueError(f"stride ({stride}) must not exceed the window ({window}): frames would be left uncovered")
    if num_frames <= window:
        return [0]
    last = num_frames - window
    starts = list(range(0, last, stride))
    starts.append(last)
    return starts


@dataclass(frozen=True)
class WindowPlan:
    """The windows to run for frames ``[output_start, output_stop)`` of a video of ``num_frames`` frames.

    Window starts come from the whole video's grid (:func:`window_starts` of the whole video), whatever range is
    asked for, and only the windows covering the range run: so a predicted frame depends only on the frames of the
    windows that cover it (with ``window_mode="blend"`` exactly; coherent windows also depend on the windows before
    them, from the first one run). The frames ``[decode_start, decode_stop)`` are the ones those windows read.

    Attributes:
        starts: first frames of the windows to run, in video frame indices.
        first_window: the index of ``starts[0]`` on the whole video's grid (window i draws the i-th noise).
        decode_start, decode_stop: the frames to read.
        output_start, output_stop: the frames asked for.
    """

    starts: tuple[int, ...]
    first_window: int
    decode_start: int
    decode_stop: int
    output_start: int
    output_stop: int


def plan_windows(
    num_frames: int, window: int, stride: int, start_frame: int = 0, end_frame: int | None = None
) -> WindowPlan:
    """The windows of the whole video's grid that cover frames ``[start_frame, end_frame)`` (end: the video's)."""
    end_frame = num_frames if end_frame is None else end_frame
    if not 0 <= start_frame < end_frame <= num_frames:
        raise ValueError(
            f"frame range [{start_frame}, {end_frame}) must lie within the video's {num_frames} frames "
            f"and hold at least one frame"
        )
    grid = window_starts(num_frames, window, stride)
    chosen = [i for i, start in enumerate(grid) if start < end_frame and start + window > start_frame]
    starts = tuple(grid[i] for i in chosen)
    return WindowPlan(
        starts=starts,
        first_window=chosen[0],
        decode_start=starts[0],
        decode_stop=min(starts[-1] + window, num_frames),
        output_start=start_frame,
        output_stop=end_frame,
    )


def _ramp_blend(earlier: torch.Tensor, later: torch.Tensor) -> torch.Tensor:
    """The linear overlap blend ``(1 - a) x^(i) + a x^(i+1)``, ``a = j / L`` for the ``L`` overlapping frames ``j``
    (frame axis first; ``earlier`` and ``later`` both hold exactly the overlap)."""
    overlap = earlier.shape[0]
    ramp = torch.arange(overlap, dtype=later.dtype, device=later.device) / overlap
    ramp = ramp.view(-1, *([1] * (later.dim() - 1)))
    return (1 - ramp) * earlier + ramp * later


def blend_windows(
    window_values: list[torch.Tensor], starts: list[int], num_frames: int, frame_dim: int
) -> torch.Tensor:
    """Stitch per-window predictions into one sequence of ``num_frames`` frames with the linear overlap blend.

    ``window_values[i]`` holds the prediction of window ``i`` along dimension ``frame_dim`` (its length is the
    window length, or fewer frames for a clip shorter than a window); ``starts`` are the windows' first frames,
    as given by :func:`window_starts`.
    """
    if len(window_values) != len(starts) or not window_values:
        raise ValueError(f"need one prediction per window start, got {len(window_values)} and {len(starts)}")
    first = window_values[0].movedim(frame_dim, 0)
    out = first.new_zeros((num_frames, *first.shape[1:]))
    covered_until = 0  # frames [0, covered_until) hold their final value or the previous window's part
    for values, start in zip(window_values, starts):
        values = values.movedim(frame_dim, 0)
        length = min(values.shape[0], num_frames - start)
        values = values[:length]
        overlap = max(0, covered_until - start)
        if overlap > 0:
            out[start : start + overlap] = _ramp_blend(out[start : start + overlap], values[:overlap])
        out[start + overlap : start + length] = values[overlap:]
        covered_until = max(covered_until, start + length)
    if covered_until < num_frames:
        raise ValueError(f"windows cover only {covered_until} of {num_frames} frames")
    return out.movedim(0, frame_dim)


STITCH_MODES = ("blend", "keep")


class StreamingBlender:
    """:func:`blend_windows`, one window at a time: the same linear overlap blend, with frames handed back as soon as
    no later window can change them, so a long video is stitched holding at most one window of frames.

    ``mode="keep"`` stitches coherent windows: over an overlap the frames keep the values they already have (the
    earlier windows'), and the new window only adds the frames past them. :meth:`overlap` gives those values, for
    sampling the new window conditioned on them.

    Push the windows in order of their starts (as :func:`window_starts` gives them, or as a stream discovers them:
    every start after the first must lie after the previous start and no later than the end of the frames covered
    so far). :meth:`push` returns the frames before the new window's start, which are final; :meth:`finish` returns
    the rest, cut to the clip's length. Concatenated, the returned pieces equal ``blend_windows`` of all windows
    (tested), for any windows whose frames lie within the clip (a single window may run past a shorter clip's end:
    it is cut by :meth:`finish`, as ``blend_windows`` cuts it).
    """

    def __init__(self, frame_dim: int, mode: str = "blend") -> None:
        if mode not in STITCH_MODES:
            raise ValueError(f"`mode` must be one of {STITCH_MODES}, got {mode!r}")
        self.frame_dim = frame_dim
        self.mode = mode
        self._pending: torch.Tensor | None = None  # frames [emitted, covered_until), frame axis first
        self._emitted = 0
        self._last_start: int | None = None

    @property
    def emitted(self) -> int:
        """Frames handed back so far (frames ``[0, emitted)`` are final)."""
        return self._emitted

    @property
    def covered_until(self) -> int:
        """End of the frames covered by the windows pushed so far."""
        return self._emitted + (0 if self._pending is None else self._pending.shape[0])

    def push(self, values: torch.Tensor, start: int) -> torch.Tensor | None:
        """Blend in the prediction of the window starting at ``start``; return the frames ``[emitted, start)``, now
        final, along ``frame_dim`` (``None`` when there are none)."""
        values = values.movedim(self.frame_dim, 0)
        if self._last_start is None:
            if start != 0:
                raise ValueError(f"the first window must start at frame 0, got {start}")
            self._pending, self._last_start = values.clone(), 0
            return None
        if start <= self._last_start or start > self.covered_until:
            raise ValueError(
                f"window start {start} must lie after the previous start {self._last_start} and at or "
                f"before the end of the covered frames {self.covered_until}"
            )
        cut = start - self._emitted
        finished, pending = self._pending[:cut], self._pending[cut:]
        overlap = pending.shape[0]
        if overlap > values.shape[0]:
            raise ValueError(
                f"the window at {start} ({values.shape[0]} frames) ends inside the frames already covered "
                f"(up to {self.covered_until}); windows must reach past the previous one"
            )
        blended = values.clone()
        if overlap > 0:
            blended[:overlap] = pending if self.mode == "keep" else _ramp_blend(pending, values[:overlap])
        self._pending, self._last_start = blended, start
        self._emitted = start
        return finished.movedim(0, self.frame_dim) if finished.shape[0] else None

    def overlap(self, start: int) -> torch.Tensor | None:
        """The current values of the frames ``[start, covered_until)`` a window starting at ``start`` shares with the
        windows pushed so far, along ``frame_dim`` (``None`` when it shares none)."""
        if self._pending is None or start >= self.covered_until:
            return None
        if start < self._emitted:
            raise ValueError(f"frames before {self._emitted} were handed back already; cannot read them from {start}")
        return self._pending[start - self._emitted :].movedim(0, self.frame_dim)

    def finish(self, num_frames: int) -> torch.Tensor:
        """The remaining frames ``[emitted, num_frames)`` along ``frame_dim``; the blender is then spent."""
        if self._pending is None:
            raise ValueError("finish: no window was pushed")
        if num_frames > self.covered_until or num_frames <= self._emitted:
            raise ValueError(
                f"finish: the windows cover frames [{self._emitted}, {self.covered_until}) still pending, "
                f"cannot end the clip at {num_frames} frames"
            )
        rest = self._pending[: num_frames - self._emitted]
        self._pending, self._emitted = None, num_frames
        return rest.movedim(0, self.frame_dim)


__all__ = [
    "pad_last_frame",
    "window_starts",
    "WindowPlan",
    "plan_windows",
    "blend_windows",
    "STITCH_MODES",
    "StreamingBlender",
]
