"""How much memory a run's choices need, estimated from the model's config before anything is allocated, and the bound
on the one loop the user sizes (the ODE's S steps).

A run whose estimate passes the memory it may use is refused with one line giving the figure, its largest part and
the override (``--max-memory-gb``), instead of a ``MemoryError`` traceback or a machine swapping itself to a halt.
The estimates count the tensors that grow with the user's choices, so they are below what a run really takes (the
weights, the libraries, small per-frame work come on top): a refused run could never have fitted.

* **the causal streamer** (``gazeflow stream``, :func:`streamer_memory`): its state
  (``streaming_step.StreamerState``): per network call of the sampler (S x 1 for Euler, S x 2 for Heun and the
  midpoint rule) and per block, a key/value ring of the K gaze tokens over the W-frame context,
  ``2 K W d`` elements; the encoder's frame ring ``w x 3 x S_img x S_img``; the task bank's and the temporal layers'
  rings;
* **the windowed pipeline** (``gazeflow predict``, :func:`windowed_memory`): per window, the velocity network's
  hidden states, queries, keys and values over the K x W gaze tokens (``4 K W d``), and a batch of windows' new
  frames (``window_batch_size x stride`` frames, as uint8 and as normalised float32);
* **raw frames on stdin** (``--raw WxH``, :func:`raw_frame_memory`): the frames in flight (one read, one waiting,
  one in the model) and the two float32 copies the processor makes before resizing.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
"""Bytes per element of the precisions inference runs in (``models.gazeflow.choices.DTYPES``)."""
CALLS_PER_STEP = {"euler": 1, "heun": 2, "midpoint": 2}
"""Network calls per ODE step of each solver (``FlowMatchingScheduler.step``; a test counts them on the scheduler)."""
MAX_NUM_STEPS = 10_000
"""The most ODE steps S a run takes: every frame (stream) or window (predict) loops S times over the network, so S is
bounded like every loop; 2,000 times the default S."""
FRAMES_IN_FLIGHT = 3
GIGABYTE = 1e9
FALLBACK_MEMORY_BYTES = 16 * GIGABYTE
"""The limit when the machine's memory cannot be read."""


class ResourceBoundError(ValueError):
    """A run sized past what it may use: more memory than allowed (one line: the figure, its largest part, the
    override), or more ODE steps than :data:`MAX_NUM_STEPS`."""


@dataclass(frozen=True)
class MemoryEstimate:
    """The bytes a run's choices need, by part (``what``: the run, for the message)."""

    what: str
    parts: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.parts.values())

    def __add__(self, other: MemoryEstimate) -> MemoryEstimate:
        return MemoryEstimate(self.what, {**self.parts, **other.parts})


def _gigabytes(count: float) -> str:
    gigabytes = count / GIGABYTE
    return f"{gigabytes:,.0f} GB" if gigabytes >= 100 else f"{gigabytes:.3g} GB"


def calls_per_step(solver: str) -> int:
    if solver not in CALLS_PER_STEP:
        raise ValueError(f"solver {solver!r}: expected one of {', '.join(CALLS_PER_STEP)}")
    return CALLS_PER_STEP[solver]


def streamer_memory(
    config: Any, num_samples: int, num_steps: int, solver: str, dtype_bytes: int = 4, batch_size: int = 1
) -> MemoryEstimate:
    """The causal streamer's state for K = ``num_samples``, S = ``num_steps`` and ``solver``, in a dtype of
    ``dtype_bytes`` (see the module docstring); ``config``: the model's ``GazeFlowConfig``."""
    context, width = config.num_frames, config.hidden_size
    calls = num_steps * calls_per_step(solver)
    ring = 2 * context * width * dtype_bytes  # keys and values of one row over the context
    size = config.image_size
    return MemoryEstimate(
        "the stream",
        {
            "the sampler's key/value rings": calls * config.num_hidden_layers * batch_size * num_samples * ring,
            "the encoder's frame ring": batch_size * config.causal_encoder_frames * 3 * size * size * dtype_bytes,
            "the task bank's rings": batch_size * (context * width * dtype_bytes + ring),
            "the temporal layers' rings": config.num_temporal_layers * batch_size * config.tokens_per_frame * ring,
        },
    )


def windowed_memory(
    config: Any,
    num_samples: int,
    dtype_bytes: int = 4,
    frame_size: tuple[int, int] | None = None,
    window_batch_size: int = 8,
) -> MemoryEstimate:
    """The windowed pipeline's per-window sampling for K = ``num_samples`` and a batch of windows' new frames
    (``frame_size``: the video's ``(width, height)``, when known), in a dtype of ``dtype_bytes``."""
    tokens = num_samples * config.num_frames
    parts = {"the velocity network's K x W gaze tokens": 4 * tokens * config.hidden_size * dtype_bytes}
    new_frames = window_batch_size * config.window_stride
    if frame_size is not None:
        parts["a batch of windows' frames"] = new_frames * frame_size[0] * frame_size[1] * 3
    parts["a batch of windows' processed frames"] = new_frames * 3 * config.image_size**2 * 4
    return MemoryEstimate("the prediction", parts)


def raw_frame_memory(width: int, height: int) -> MemoryEstimate:
    """Raw RGB frames of ``width x height`` read from stdin (see the module docstring)."""
    pixels = width * height * 3
    return MemoryEstimate(
        "the stream",
        {f"{width}x{height} raw frames": FRAMES_IN_FLIGHT * pixels, "their float32 copies": 2 * 4 * pixels},
    )


def machine_memory_bytes() -> int:
    """This machine's physical memory (:data:`FALLBACK_MEMORY_BYTES` where it cannot be read)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        return int(FALLBACK_MEMORY_BYTES)


def check_memory(estimate: MemoryEstimate, choices: str, max_memory_gb: float | None = None) -> None:
    """Refuse ``estimate`` when it passes ``max_memory_gb`` (None: the machine's memory), naming the figure, the
    ``choices`` that made it (``"-k 100000000"``), its largest part and the override."""
    if max_memory_gb is not None and not (math.isfinite(max_memory_gb) and max_memory_gb > 0):
        raise ResourceBoundError(f"--max-memory-gb {max_memory_gb}: expected a positive number of gigabytes")
    limit = machine_memory_bytes() if max_memory_gb is None else max_memory_gb * GIGABYTE
    if estimate.total <= limit:
        return
    part, size = max(estimate.parts.items(), key=lambda item: item[1])
    allowed = f"--max-memory-gb {max_memory_gb:g}" if max_memory_gb is not None else "this machine's memory"
    raise ResourceBoundError(
        f"{choices}: {estimate.what} needs at least {_gigabytes(estimate.total)} ({part}: {_gigabytes(size)}), more "
        f"than {allowed} ({_gigabytes(limit)}); choose smaller values, or raise --max-memory-gb if the memory is there"
    )


def check_num_steps(num_steps: int | None, argument: str = "--num-steps") -> None:
    """Refuse S past :data:`MAX_NUM_STEPS` (None: the model's default, bounded by its config)."""
    if num_steps is not None and num_steps > MAX_NUM_STEPS:
        raise ResourceBoundError(
            f"{argument} {num_steps}: expected at most {MAX_NUM_STEPS} ODE steps (each frame or window loops S times "
            "over the network)"
        )


__all__ = [
    "DTYPE_BYTES",
    "CALLS_PER_STEP",
    "MAX_NUM_STEPS",
    "ResourceBoundError",
    "MemoryEstimate",
    "calls_per_step",
    "streamer_memory",
    "windowed_memory",
    "raw_frame_memory",
    "machine_memory_bytes",
    "check_memory",
    "check_num_steps",
]
