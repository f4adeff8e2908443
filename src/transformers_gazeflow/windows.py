"""Temporal windowing of long clips, in one place (paper Appendix E.3, "Sliding-Window Inference for Long Clips").

The velocity network is trained on windows of ``W`` frames (``config.num_frames``, 64 in the paper). A clip of
``T`` frames is covered by windows that start every ``stride`` frames (``config.window_stride``, ``W / 2``); the
last window is aligned to the end of the clip so that every frame is covered and no window runs past the clip.
A clip shorter than ``W`` is one window, padded by repeating its last frame and cut back afterwards.

Where two consecutive windows ``i`` and ``i + 1`` overlap, predictions are blended linearly along the frame axis:
``x_blend = (1 - a) x^(i) + a x^(i+1)`` with ``a = (tau - start_{i+1}) / L`` over the ``L`` overlapping frames.
With the regular stride ``L = W_s`` and this is exactly the paper's ``alpha_tau``; only the last, end-aligned
window can have a longer overlap, over which the same ramp is stretched.

Training data uses the same :func:`window_starts` so that training windows cover a whole clip (data layer), and
the sampler uses :func:`blend_windows` to stitch window predictions back together.
"""

from __future__ import annotations

import torch


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


def blend_windows(window_values: list[torch.Tensor], starts: list[int], num_frames: int, frame_dim: int) -> torch.Tensor:
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
            ramp = torch.arange(overlap, dtype=values.dtype, device=values.device) / overlap
            ramp = ramp.view(-1, *([1] * (values.dim() - 1)))
            out[start:start + overlap] = (1 - ramp) * out[start:start + overlap] + ramp * values[:overlap]
        out[start + overlap:start + length] = values[overlap:]
        covered_until = max(covered_until, start + length)
    if covered_until < num_frames:
        raise ValueError(f"windows cover only {covered_until} of {num_frames} frames")
    return out.movedim(0, frame_dim)


__all__ = ["window_starts", "blend_windows"]
