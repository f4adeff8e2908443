"""The exponential moving average (EMA) of the trained weights: validation, the best-weights choice and the saved
model all use it (paper Appendix E.4: decay 0.995).

After each optimizer step t the average follows the weights W_t as

    W_1^EMA = W_1,    W_t^EMA = d * W_{t-1}^EMA + (1 - d) * W_t    (t > 1),

with d = ``--ema_decay`` (torch's ``AveragedModel`` with ``get_ema_multi_avg_fn``; the buffers, e.g. norm
statistics, are copied from the model at each step rather than averaged). :func:`cpu_state_dict` keeps a snapshot of
the average as it stood at the best validation loss.
"""

from __future__ import annotations

import torch
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn


def exponential_moving_average(model: torch.nn.Module, decay: float) -> AveragedModel:
    """The EMA of ``model``'s parameters with decay ``decay``: a copy of ``model`` (on its device) that
    ``update_parameters(model)`` moves towards the current weights after each optimizer step; the first update
    copies them."""
    return AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(decay))


def cpu_state_dict(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A detached CPU copy of ``module``'s weights (the best-validation EMA snapshot)."""
    return {key: value.detach().to("cpu", copy=True) for key, value in module.state_dict().items()}


__all__ = ["cpu_state_dict", "exponential_moving_average"]
