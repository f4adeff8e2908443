"""GazeFlow's model folder: configuration, network (modeling and its parts), scheduler, the windowed sampling behind
``generate()`` and the conventions they follow (``geometry``: coordinate frames; ``windows``: the window grid).

Self-contained as a transformers model folder is: its modules import torch, transformers, peft and numpy, and each
other, never the rest of the package, so ``trust_remote_code`` copies the folder as it is
(:mod:`transformers_gazeflow.hub.remote_code`). Names load on first use::

    from transformers_gazeflow.models.gazeflow import GazeFlowConfig, GazeFlowModel
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "GazeFlowConfig": "configuration_gazeflow",
    "GazeFlowModel": "modeling_gazeflow",
    "GazeFlowPreTrainedModel": "modeling_gazeflow",
    "FlowMatchingScheduler": "scheduling_gazeflow",
    "SamplingSettings": "generation_gazeflow",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)
