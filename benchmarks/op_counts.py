"""Aten ops counted with ``torch.profiler``: the stable proxy for a step's host cost (counts do not move with a
machine's load, unlike its timings), used by ``bench_pipeline.py --ops`` and ``bench_streaming.py``."""

from __future__ import annotations

from collections.abc import Callable

import torch

VIEW_AND_ALLOCATION_OPS = {
    "aten::as_strided",
    "aten::view",
    "aten::transpose",
    "aten::t",
    "aten::expand",
    "aten::unsqueeze",
    "aten::squeeze",
    "aten::slice",
    "aten::select",
    "aten::permute",
    "aten::reshape",
    "aten::_reshape_alias",
    "aten::flatten",
    "aten::unflatten",
    "aten::narrow",
    "aten::resolve_conj",
    "aten::resolve_neg",
    "aten::empty",
    "aten::empty_strided",
    "aten::empty_like",
    "aten::detach",
    "aten::alias",
    "aten::split",
    "aten::unbind",
    "aten::chunk",
    "aten::_unsafe_view",
    "aten::contiguous",
    "aten::to",
    "aten::lift_fresh",
    "aten::result_type",
    "aten::view_as",
    "aten::expand_as",
    "aten::movedim",
    "aten::split_with_sizes",
    "aten::unsafe_split",
}
"""Aten ops that launch no kernel on a GPU (views, metadata, allocations, conversions to the same dtype)."""


def count_aten_ops(fn: Callable[[], object], cuda: bool = False) -> dict:
    """Run ``fn`` under ``torch.profiler`` and count what it dispatched: ``all`` aten ops (nested ones included),
    ``compute`` (those that are not views, allocations or no-op conversions, nested ones included: an upper bound
    on the kernels a GPU would launch), ``top_level`` (those our Python code dispatched, not an aten op's
    children) and with ``cuda`` the CUDA kernels launched (``cuda_kernels``, else None). ``fn`` synchronises the
    device itself when it needs to."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as profiler:
        fn()
    events = profiler.events()
    aten = [e for e in events if e.name.startswith("aten::")]
    top = [e for e in aten if e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::")]
    kernels = [e for e in events if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA]
    return {
        "all": len(aten),
        "compute": sum(e.name not in VIEW_AND_ALLOCATION_OPS for e in aten),
        "top_level": len(top),
        "cuda_kernels": len(kernels) if cuda else None,
    }
