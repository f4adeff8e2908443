"""What makes a training step fast on a GPU, and only there: the CPU path keeps its exact behaviour.

``examples/train.py`` and ``benchmarks/bench_train.py`` share these pieces, so that the benchmark measures the step
that training runs:

* :func:`loader_options`: enough DataLoader workers to decode and process 64-frame windows as fast as the GPU trains
  on them, page-locked (pinned) batches for asynchronous host-to-device copies, persistent workers, a deeper
  prefetch queue. On the CPU: the worker count given (2 by default) and nothing else, as before.
* :class:`FrozenWeightCast`: the frozen encoder's matrix weights (every ``nn.Linear`` / ``nn.Conv*`` whose own
  parameters are all frozen, the bases of the LoRA layers included) cast once to the autocast dtype. Under bf16
  autocast a matrix product casts its weight to bf16 at every call (and again in a checkpointed recomputation);
  the one cast rounds the same way, so every product sees the same operands. Norms and every other frozen tensor
  keep float32 (they enter float32 arithmetic). The float32 originals stay on the CPU and are put back into the
  model that is saved (:meth:`FrozenWeightCast.restore`).
* :func:`adamw`: AdamW with the fused CUDA kernel on a GPU (one launch for every trainable tensor); ``implementation``
  asks for one of PyTorch's three AdamW implementations by name (``"fused"``, ``"foreach"``, ``"loop"``) on any device.
  A fused step marks the parameters it wrote as changed (their version counters), as the other two do.
* :func:`attention_kernels`: scaled dot-product attention by one of PyTorch's kernels (``"flash"``, ``"cudnn"``,
  ``"efficient"``, ``"math"``; the math one where it cannot run); :func:`attention_kernel_support` says which kernels
  can run an attention of a given shape on a device. The same attention, computed by another kernel.
* :func:`compile_encoder_layers`: ``torch.compile`` of each encoder layer (regional compilation: the 24 layers of
  ViT-L share one compiled graph, so it compiles in seconds, and the rest of the model stays eager).
"""

from __future__ import annotations

import contextlib
import os

import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

#: workers chosen on a GPU when none are given: one per free core, at most this many
AUTO_WORKERS_CAP = 12
#: workers on the CPU when none are given (train.py's default before the GPU settings)
CPU_DEFAULT_WORKERS = 2
#: batches each worker keeps ready on a GPU (PyTorch's default is 2)
GPU_PREFETCH_FACTOR = 4


def auto_workers(processes: int = 1, cpus: int | None = None) -> int:
    """DataLoader workers per training process on a GPU machine: the cores left after each process's own thread,
    shared between the processes, capped at :data:`AUTO_WORKERS_CAP`, at least 1."""
    cpus = (
        cpus
        if cpus is not None
        else len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else (os.cpu_count() or 1)
    )
    return max(1, min(AUTO_WORKERS_CAP, cpus // max(1, processes) - 1))


def loader_options(num_workers: int | None, device: torch.device | str, processes: int = 1) -> dict:
    """``DataLoader`` keyword arguments for ``device``: ``num_workers`` (None: :func:`auto_workers` on a GPU,
    :data:`CPU_DEFAULT_WORKERS` on the CPU), ``persistent_workers`` with workers, and on a GPU ``pin_memory`` and a
    ``prefetch_factor`` of :data:`GPU_PREFETCH_FACTOR`."""
    device = torch.device(device)
    if num_workers is not None and (isinstance(num_workers, bool) or num_workers < 0):
        raise ValueError(f"num_workers must be >= 0 or None (automatic), got {num_workers!r}")
    on_gpu = device.type == "cuda"
    workers = num_workers if num_workers is not None else (auto_workers(processes) if on_gpu else CPU_DEFAULT_WORKERS)
    options: dict = {"num_workers": workers, "persistent_workers": workers > 0}
    if on_gpu:
        options["pin_memory"] = True
        if workers > 0:
            options["prefetch_factor"] = GPU_PREFETCH_FACTOR
    return options


def _frozen_matmul_modules(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """The modules whose weights only feed matrix products and whose own parameters are all frozen."""
    kinds = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)
    return [
        (name, module)
        for name, module in model.named_modules()
        if isinstance(module, kinds)
        and any(True for _ in module.parameters(recurse=False))
        and not any(p.requires_grad for p in module.parameters(recurse=False))
    ]


class FrozenWeightCast:
    """The frozen matrix weights of ``model`` cast to ``dtype`` once (see the module docstring); ``names`` lists
    the parameters cast, ``originals`` holds their float32 values on the CPU."""

    def __init__(self, model: nn.Module, dtype: torch.dtype = torch.bfloat16) -> None:
        self.dtype = dtype
        self.originals: dict[str, torch.Tensor] = {}
        for module_name, module in _frozen_matmul_modules(model):
            for name, parameter in module.named_parameters(recurse=False):
                if parameter.dtype == dtype or not parameter.is_floating_point():
                    continue
                self.originals[f"{module_name}.{name}" if module_name else name] = parameter.detach().to(
                    "cpu", copy=True
                )
                parameter.data = parameter.data.to(dtype)

    @property
    def names(self) -> list[str]:
        return list(self.originals)

    def restore(self, model: nn.Module) -> nn.Module:
        """Put the float32 originals back into ``model`` (this model, or a copy of it such as the EMA's) by name;
        returns ``model``."""
        parameters = dict(model.named_parameters())
        missing = [name for name in self.originals if name not in parameters]
        if missing:
            raise ValueError(
                f"FrozenWeightCast.restore: the model has no parameters {missing[:3]} (a different "
                f"model than the one cast?)"
            )
        for name, original in self.originals.items():
            parameter = parameters[name]
            parameter.data = original.to(parameter.device, copy=True)
        return model

    def __len__(self) -> int:
        return len(self.originals)


#: PyTorch's AdamW implementations by name: one fused kernel per parameter group, multi-tensor ("foreach") kernels, or
#: one tensor at a time ("loop"); the same update, its arithmetic grouped differently
ADAMW_IMPLEMENTATIONS = {"fused": {"fused": True}, "foreach": {"foreach": True}, "loop": {"foreach": False}}


def adamw(
    parameters: list[torch.nn.Parameter], device: torch.device | str, implementation: str | None = None, **kwargs
) -> torch.optim.AdamW:
    """``torch.optim.AdamW(parameters, **kwargs)``: the ``implementation`` named (:data:`ADAMW_IMPLEMENTATIONS`), or
    with None fused on a GPU and PyTorch's default on the CPU."""
    if implementation is not None:
        if implementation not in ADAMW_IMPLEMENTATIONS:
            raise ValueError(
                f"adamw: implementation must be one of {sorted(ADAMW_IMPLEMENTATIONS)} or None, got {implementation!r}"
            )
        kwargs.update(ADAMW_IMPLEMENTATIONS[implementation])
    elif torch.device(device).type == "cuda":
        kwargs.setdefault("fused", True)
    optimizer = torch.optim.AdamW(parameters, **kwargs)
    if optimizer.defaults.get("fused"):
        optimizer.register_step_post_hook(_mark_parameters_updated)
    return optimizer


def _mark_parameters_updated(optimizer: torch.optim.Optimizer, args: tuple, kwargs: dict) -> None:
    """After a fused AdamW step: bump the version counter of every parameter it updated.

    The fused kernel writes the parameters in place without bumping their version counters (the loop and foreach
    implementations do), so whatever keys a cache on a tensor's version (``modeling_gazeflow_rows.linear_weights``,
    which the no-grad self-conditioning pass of training reads) would keep reading the weights of before the step.
    The bump costs no kernel."""
    torch.autograd.graph.increment_version(
        [p for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
    )


#: scaled dot-product attention's kernels by name (PyTorch's own choice among them depends on the device: on sm90 with
#: cuDNN newer than 9.15 it prefers cuDNN, elsewhere flash)
ATTENTION_KERNELS = {
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "math": SDPBackend.MATH,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
}


def attention_kernels(kernel: str | None) -> contextlib.AbstractContextManager:
    """A context in which ``F.scaled_dot_product_attention`` runs kernel ``kernel`` (:data:`ATTENTION_KERNELS`) and,
    where that kernel cannot run an attention's shape, dtype or device, the math kernel (never another fused one, so
    a kernel named is the kernel measured; :func:`attention_kernel_support` says where it runs); None: PyTorch's own
    choice. ``torch.compile`` bakes the kernel into the graph it traces, so compile inside the context."""
    if kernel is None:
        return contextlib.nullcontext()
    if kernel not in ATTENTION_KERNELS:
        raise ValueError(f"attention_kernels: the kernel must be one of {sorted(ATTENTION_KERNELS)}, got {kernel!r}")
    kernels = [ATTENTION_KERNELS[kernel]] + ([] if kernel == "math" else [SDPBackend.MATH])
    return sdpa_kernel(kernels, set_priority=True)


def attention_kernel_support(
    shape: tuple[int, int, int, int], dtype: torch.dtype, device: torch.device | str, requires_grad: bool = True
) -> dict[str, bool]:
    """Which fused kernels (flash, efficient, cudnn) can run an attention of ``shape`` ``[B, H, L, d_h]`` (queries, keys
    and values alike, no mask) in ``dtype`` on a CUDA ``device``, by PyTorch's own checks; empty off CUDA."""
    device = torch.device(device)
    if device.type != "cuda":
        return {}
    query, key, value = (torch.empty(shape, dtype=dtype, device=device, requires_grad=requires_grad) for _ in range(3))
    params = torch.backends.cuda.SDPAParams(query, key, value, None, 0.0, False, False)
    checks = {
        "flash": torch.backends.cuda.can_use_flash_attention,
        "efficient": torch.backends.cuda.can_use_efficient_attention,
        "cudnn": torch.backends.cuda.can_use_cudnn_attention,
    }
    return {name: bool(check(params)) for name, check in checks.items()}


def enable_gradient_checkpointing(model: nn.Module) -> None:
    """Gradient (activation) checkpointing of every layer, by the name the installed transformers gives it."""
    enable = getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable
    enable()


def compile_encoder_layers(model: nn.Module, **compile_kwargs) -> int:
    """``torch.compile`` each layer of the video encoder in place (``nn.Module.compile``: names, parameters and
    checkpoints are unchanged); returns how many were compiled."""
    layers = model.video_encoder.vjepa2.layer
    for layer in layers:
        layer.compile(**compile_kwargs)
    return len(layers)


__all__ = [
    "ADAMW_IMPLEMENTATIONS",
    "ATTENTION_KERNELS",
    "AUTO_WORKERS_CAP",
    "FrozenWeightCast",
    "adamw",
    "attention_kernel_support",
    "attention_kernels",
    "auto_workers",
    "compile_encoder_layers",
    "enable_gradient_checkpointing",
    "loader_options",
]
