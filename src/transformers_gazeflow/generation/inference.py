"""The inference fast path: everything that makes sampling fast without changing its results.

What makes GazeFlow fast lives in four places:

* the windowed engine (:mod:`transformers_gazeflow.models.gazeflow.generation_gazeflow`): the per-clip condition (c_v,
  c_task, every block's keys and values) built once per window and shared by all K samples and S steps, windows
  encoded in batches, K x windows batched together, E_time(s) computed once per run;
* the attention kernels: ``scaled_dot_product_attention`` in the velocity network and the V-JEPA 2 encoder
  (``attn_implementation="sdpa"``, the default), with queries, keys and values from one matmul and the encoder's
  RoPE tables computed once per shape (``GazeFlowVideoEncoder.fuse_attention``);
* this module: LoRA merged into the encoder weights, the weights cast once to the inference dtype (bf16 on CUDA by
  default: :func:`resolve_inference_dtype`; no per-op autocast), optional ``torch.compile`` of the velocity network,
  and :class:`CUDAGraphWindowSampler`, which replays each window's S scheduler steps as one CUDA graph;
* the stream (``generation.windowed``): decoding in a thread, preprocessing on the device, no host read inside the
  window loop.

The plain reference path does the same maths the slow way: eager encoder attention (``set_encoder_attention``), LoRA
unmerged, the condition recomputed for every network call with the features repeated K times
(``generate_trajectories(..., use_condition_cache=False)``), one window at a time (``window_batch_size=1``). In fp32
both paths agree to 1e-5 (tested); in bf16 (``autocast_context`` or bf16 weights) to bf16 tolerance.
"""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from collections.abc import Iterator
from typing import Any

import torch
import torch.utils._pytree as pytree

from ..models.gazeflow.choices import DTYPES
from ..models.gazeflow.generation_gazeflow import WindowSampler
from ..models.gazeflow.modeling_gazeflow import GazeFlowModel

logger = logging.getLogger(__name__)

INFERENCE_DTYPES = {name: getattr(torch, name) for name in DTYPES}
"""The dtypes the weights can be cast to for inference (``--dtype``; ``"auto"``: :func:`resolve_inference_dtype`)."""


def resolve_inference_dtype(dtype: str | torch.dtype | None, device: torch.device | str) -> torch.dtype:
    """The dtype the weights run in: ``"auto"`` (or None) is bfloat16 on CUDA (float16 on a GPU without bf16) and
    float32 elsewhere (CPU, MPS); a name of :data:`INFERENCE_DTYPES` or a ``torch.dtype`` is taken as given."""
    device = torch.device(device)
    if dtype is None or dtype == "auto":
        if device.type != "cuda":
            return torch.float32
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if isinstance(dtype, torch.dtype):
        if dtype not in INFERENCE_DTYPES.values():
            raise ValueError(f"`dtype` must be one of {sorted(INFERENCE_DTYPES)} or 'auto', got {dtype}")
        return dtype
    if dtype not in INFERENCE_DTYPES:
        raise ValueError(f"`dtype` must be 'auto' or one of {sorted(INFERENCE_DTYPES)}, got {dtype!r}")
    return INFERENCE_DTYPES[dtype]


def prepare_for_inference(
    model: GazeFlowModel,
    merge_lora: bool = True,
    compile: bool = False,
    compile_mode: str | None = None,
    attn_implementation: str = "sdpa",
    dtype: torch.dtype | None = None,
    fuse_attention: bool = True,
) -> GazeFlowModel:
    """Put ``model`` on the fast path, in place: eval mode, SDPA attention in the encoder, LoRA merged into the
    encoder weights (``merge_lora``), the encoder's attention fused (``fuse_attention``: one matmul for queries,
    keys and values, RoPE tables computed once), the weights cast to ``dtype`` (None: left as they are), and
    optionally ``torch.compile`` of the velocity network (``compile``; ``compile_mode="reduce-overhead"`` captures
    CUDA graphs per network call). Returns the model."""
    model.eval()
    set_encoder_attention(model, attn_implementation)
    if merge_lora and model.video_encoder.has_lora:
        model.merge_lora()
    if fuse_attention:
        model.video_encoder.fuse_attention()
    if dtype is not None:
        model.to(dtype)
    if compile:
        # static shapes: the flow time enters as a tensor, so one graph serves every solver step
        network = model.velocity_network
        compiled = torch.compile(network.forward, mode=compile_mode, dynamic=False)
        if compile_mode in CUDA_GRAPH_COMPILE_MODES:
            # a CUDA graph replay returns its output in a static buffer that the next replay overwrites, while Heun
            # keeps a step's first velocity across its second call and a clip keeps each window's samples: copy the
            # output ([B, K, T, 2], a few KB) out before anything else runs
            network.forward = lambda *args, **kwargs: compiled(*args, **kwargs).clone()
        else:
            network.forward = compiled
    return model


CUDA_GRAPH_COMPILE_MODES = ("reduce-overhead", "max-autotune")
"""``torch.compile`` modes that replay CUDA graphs on a GPU (their outputs live in static buffers)."""


def set_encoder_attention(model: GazeFlowModel, attn_implementation: str) -> None:
    """Choose the encoder's attention kernel: ``"sdpa"`` (fast) or ``"eager"`` (the plain matmul-softmax)."""
    if attn_implementation not in ("sdpa", "eager"):
        raise ValueError(f"`attn_implementation` must be 'sdpa' or 'eager', got {attn_implementation!r}")
    model.video_encoder.vjepa2.config._attn_implementation = attn_implementation


@contextlib.contextmanager
def autocast_context(model: GazeFlowModel, dtype: torch.dtype | None) -> Iterator[None]:
    """bf16/fp16 autocast on the model's device (``dtype=None``: full precision). The ODE state x_s stays fp32:
    only the network's matmuls run in ``dtype``."""
    if dtype is None or dtype == torch.float32:
        yield
        return
    device_type = next(model.parameters()).device.type
    with torch.autocast(device_type=device_type, dtype=dtype):
        yield


# ---------------------------------------------------------------------------------------------------- CUDA graphs
class CUDAGraphWindowSampler:
    """The engine's window sampler with each window's S scheduler steps (every network call, the coherent
    projection, the self-conditioning updates) replayed as one CUDA graph.

    A window's steps are a few hundred small kernels whose cost on a GPU is launching them; a replay launches them
    all at once. Graphs are captured per input shapes (the first window of a clip, the regular windows, the last
    one differ in their known overlap): the first ``warmup`` calls of a shape run eagerly (they also fill the run's
    caches, which the graph then reads: E_time(s), the stacked weights, the RoPE table), the next one captures the
    graph and replays it once, timed against the eager call; a graph that is not faster is dropped and that shape
    stays eager (what "captured when it pays" means here). Each call copies its condition, noise and known frames
    into the graph's input buffers, replays, and returns a copy of the output. A shape whose capture fails stays
    eager (logged once). Outputs equal the eager sampler's (the same kernels on the same inputs)."""

    def __init__(self, sampler: WindowSampler, warmup: int = 1) -> None:
        self.sampler = sampler
        self.warmup = warmup
        self.graphs: dict[tuple, Any] = {}
        self.calls: Counter = Counter()
        self.eager_events: dict[tuple, tuple] = {}
        self.pool = None

    def __call__(self, condition: Any, noise: torch.Tensor, known: torch.Tensor | None = None) -> torch.Tensor:
        leaves, spec = pytree.tree_flatten((condition, noise, known))
        key = (str(spec), tuple((tuple(t.shape), t.dtype) if torch.is_tensor(t) else t for t in leaves))
        entry = self.graphs.get(key)
        if entry is None:
            self.calls[key] += 1
            if self.calls[key] <= self.warmup:
                return self._timed_eager(key, condition, noise, known)
            entry = self.graphs[key] = self._capture(key, leaves, spec)
            if entry is not False:
                return self._replay(entry, leaves, time_it=True, key=key)
        if entry is False:
            return self.sampler(condition, noise, known)
        return self._replay(entry, leaves)

    def _timed_eager(self, key: tuple, condition: Any, noise: torch.Tensor, known: torch.Tensor | None):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        output = self.sampler(condition, noise, known)
        end.record()
        self.eager_events[key] = (start, end)
        return output

    def _capture(self, key: tuple, leaves: list, spec) -> Any:
        inputs = [t.clone() if torch.is_tensor(t) else t for t in leaves]
        condition, noise, known = pytree.tree_unflatten(inputs, spec)
        graph = torch.cuda.CUDAGraph()
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # a warm-up on a side stream, as torch.cuda.graph asks
                self.sampler(condition, noise, known)
            torch.cuda.current_stream().wait_stream(side)
            with torch.cuda.graph(graph, pool=self.pool):
                output = self.sampler(condition, noise, known)
        except RuntimeError as err:
            logger.warning("CUDA graph capture of a window's sampling steps failed, sampling eagerly: %s", err)
            return False
        self.pool = graph.pool()
        return graph, [t for t in inputs if torch.is_tensor(t)], output

    def _replay(self, entry: Any, leaves: list, time_it: bool = False, key: tuple | None = None) -> torch.Tensor:
        graph, inputs, output = entry
        for static, value in zip(inputs, (t for t in leaves if torch.is_tensor(t))):
            static.copy_(value, non_blocking=True)
        if not time_it:
            graph.replay()
            return output.clone()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        result = output.clone()
        end.synchronize()  # once per shape: does the graph pay?
        eager = self.eager_events.pop(key, None)
        replay_ms = start.elapsed_time(end)
        if eager is not None and eager[0].elapsed_time(eager[1]) <= replay_ms:
            self.graphs[key] = False
        return result


def window_sampler(model: GazeFlowModel, settings, cuda_graphs: bool | None = None) -> Any:
    """The sampler a run uses: the engine's :class:`WindowSampler`, wrapped in :class:`CUDAGraphWindowSampler` when
    ``cuda_graphs`` (None: on a CUDA device)."""
    sampler = WindowSampler(model, settings)
    device = next(model.parameters()).device
    if cuda_graphs is None:
        cuda_graphs = device.type == "cuda"
    if cuda_graphs and device.type != "cuda":
        raise ValueError(f"CUDA graphs need a CUDA device, the model is on {device}")
    return CUDAGraphWindowSampler(sampler) if cuda_graphs else sampler


__all__ = [
    "prepare_for_inference",
    "set_encoder_attention",
    "autocast_context",
    "resolve_inference_dtype",
    "INFERENCE_DTYPES",
    "CUDAGraphWindowSampler",
    "window_sampler",
    "CUDA_GRAPH_COMPILE_MODES",
]
