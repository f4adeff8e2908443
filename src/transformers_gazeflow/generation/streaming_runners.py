"""How the streamer's step runs frame after frame: eagerly, compiled by ``torch.compile``, or replayed as a captured
CUDA graph (:func:`make_step_runner`).

A runner owns one :class:`~.streaming_step.StreamerState` and maps ``(frame, noise) -> (trajectories, mean)``, the
state moving on by one frame. The modes (``GazeFlowStreamer(compile=...)``):

* ``None`` - eager: the step's ops are dispatched one by one. The CPU path, and the fallback anywhere.
* ``"default"``, ``"reduce-overhead"``, ``"max-autotune"`` - ``torch.compile(step, mode=..., fullgraph=True,
  dynamic=False)``. The step is one graph with no graph break and no recompile over a stream (tested), and the
  state's tensors are marked as static addresses, so on CUDA ``"reduce-overhead"`` replays the compiled graph as a
  CUDA graph whose in-place state updates are allowed (cudagraph trees). Costs a compilation at the first frame.
* ``"cuda-graph"`` - the eager step captured once with ``torch.cuda.CUDAGraph``: static frame and noise buffers
  are copied in, the graph is replayed, the outputs copied out. No compiler is involved, so nothing can recompile
  or fall back silently; the kernels are the eager ones. The step is first run a few times on a scratch copy of the
  state (a side stream, as capture requires), so the stream's own state only ever sees real frames.

The noise is drawn before the step (``GazeFlowStreamer`` draws it with its generator, on its device) and copied
into the captured graph's static input: random number generation never runs inside a capture. Outputs are copied
out of the graph's static memory, so a frame's prediction stays valid after the next frame.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .streaming_step import GazeFlowStreamerStep, StreamerState

COMPILE_MODES = (None, "default", "reduce-overhead", "max-autotune", "cuda-graph")
"""What ``GazeFlowStreamer(compile=...)`` accepts."""

CUDA_GRAPH_WARMUP_FRAMES = 3
"""Eager frames run on a scratch state before a CUDA graph capture (lazy initialisation of kernels and workspaces
must not happen during capture)."""

StepRunner = Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


def check_compile_mode(mode: str | None, device: torch.device) -> None:
    """A one-line error for a mode that is not one of :data:`COMPILE_MODES` or cannot run on ``device``."""
    if mode not in COMPILE_MODES:
        raise ValueError(f"`compile` must be one of {COMPILE_MODES}, got {mode!r}")
    if mode == "cuda-graph" and device.type != "cuda":
        raise ValueError(
            f"compile='cuda-graph' needs the model on a CUDA device, it is on {device}; use "
            f"compile=None (eager) or a torch.compile mode such as 'default'"
        )


class EagerStepRunner:
    """The step called as it is."""

    def __init__(self, step: GazeFlowStreamerStep, state: StreamerState):
        self.step, self.state = step, state

    def __call__(self, frame: torch.Tensor, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.no_grad():
            return self.step(frame, noise, self.state)


class CompiledStepRunner:
    """``torch.compile`` of the step (one graph, static shapes); on CUDA with ``"reduce-overhead"`` the graph is
    replayed as a CUDA graph."""

    def __init__(self, step: GazeFlowStreamerStep, state: StreamerState, mode: str):
        self.state = state
        for tensor in state.tensors():  # mutated in place every frame: must keep their addresses under cudagraphs
            torch._dynamo.mark_static_address(tensor)
        self.compiled = torch.compile(step, mode=mode, fullgraph=True, dynamic=False)
        self.marks_steps = step.device.type == "cuda" and mode in ("reduce-overhead", "max-autotune")

    def __call__(self, frame: torch.Tensor, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.marks_steps:  # a new iteration: the previous frame's graph outputs may be overwritten
            torch.compiler.cudagraph_mark_step_begin()
        with torch.no_grad():
            trajectories, mean = self.compiled(frame, noise, self.state)
        return trajectories.clone(), mean.clone()


class CUDAGraphStepRunner:
    """The eager step captured once as a CUDA graph on static frame/noise buffers and the state's buffers."""

    def __init__(
        self,
        step: GazeFlowStreamerStep,
        state: StreamerState,
        frame_shape: tuple[int, ...],
        noise_shape: tuple[int, ...],
        warmup_frames: int = CUDA_GRAPH_WARMUP_FRAMES,
    ):
        device = step.device
        self.frame = torch.zeros(frame_shape, device=device)
        self.noise = torch.zeros(noise_shape, device=device)
        scratch = state.clone()
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side), torch.no_grad():
            for _ in range(warmup_frames):
                step(self.frame, self.noise, scratch)
        torch.cuda.current_stream(device).wait_stream(side)
        del scratch
        self.graph = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(self.graph):
            self.outputs = step(self.frame, self.noise, state)

    def __call__(self, frame: torch.Tensor, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.frame.copy_(frame)
        self.noise.copy_(noise)
        self.graph.replay()
        return tuple(output.clone() for output in self.outputs)


def make_step_runner(
    step: GazeFlowStreamerStep,
    state: StreamerState,
    mode: str | None,
    frame_shape: tuple[int, ...],
    noise_shape: tuple[int, ...],
) -> StepRunner:
    """The runner of ``mode`` (one of :data:`COMPILE_MODES`) for ``step`` on ``state``, for frames of
    ``frame_shape`` and noise of ``noise_shape``."""
    check_compile_mode(mode, step.device)
    if mode is None:
        return EagerStepRunner(step, state)
    if mode == "cuda-graph":
        return CUDAGraphStepRunner(step, state, frame_shape, noise_shape)
    return CompiledStepRunner(step, state, mode)


__all__ = [
    "COMPILE_MODES",
    "CUDA_GRAPH_WARMUP_FRAMES",
    "StepRunner",
    "check_compile_mode",
    "EagerStepRunner",
    "CompiledStepRunner",
    "CUDAGraphStepRunner",
    "make_step_runner",
]
