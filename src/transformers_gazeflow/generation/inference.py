"""The inference fast path: everything that makes sampling fast without changing its results.

What makes GazeFlow fast lives in three places:

* the windowed engine (:mod:`transformers_gazeflow.models.gazeflow.generation_gazeflow`): the per-clip condition
  (c_v, c_task, every block's keys and values) built once per window and shared by all K samples and S steps, and
  K x windows batched together;
* the attention kernels: ``scaled_dot_product_attention`` in the velocity network and the V-JEPA 2 encoder
  (``attn_implementation="sdpa"``, the default);
* this module: LoRA merged into the encoder weights, bf16 autocast, and optional ``torch.compile`` of the
  velocity network (``mode="reduce-overhead"`` replays the sampler's steps as CUDA graphs on a GPU).

The plain reference path does the same maths the slow way: eager encoder attention (``set_encoder_attention``), LoRA
unmerged, the condition recomputed for every network call with the features repeated K times
(``generate_trajectories(..., use_condition_cache=False)``), one window at a time (``window_batch_size=1``). In fp32
both paths agree to 1e-5 (tested); in bf16 (``autocast_context``) to bf16 tolerance.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from ..models.gazeflow.modeling_gazeflow import GazeFlowModel


def prepare_for_inference(model: GazeFlowModel, merge_lora: bool = True, compile: bool = False,
                          compile_mode: str | None = None, attn_implementation: str = "sdpa") -> GazeFlowModel:
    """Put ``model`` on the fast path, in place: eval mode, SDPA attention in the encoder, LoRA merged into the
    encoder weights (``merge_lora``), and optionally ``torch.compile`` of the velocity network (``compile``;
    ``compile_mode="reduce-overhead"`` captures CUDA graphs). Returns the model."""
    model.eval()
    set_encoder_attention(model, attn_implementation)
    if merge_lora and model.video_encoder.has_lora:
        model.merge_lora()
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


__all__ = ["prepare_for_inference", "set_encoder_attention", "autocast_context"]
