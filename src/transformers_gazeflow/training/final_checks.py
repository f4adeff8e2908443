"""The checks on a training run once its loop is over, before its model is saved: that the data-parallel replicas
still hold the same weights (else :class:`~.run.TrainingError`), and whether its grounding left the plateau
(:mod:`.grounding_plateau`; kept in the trainer state, so in the model card, and a WARNING when it did not).
"""

from __future__ import annotations

import logging

import torch

from .grounding_plateau import describe_verdict, plateau_verdict
from .run import RUN_LOGGER, TrainingError, TrainingRun, TrainingSetup

logger = logging.getLogger(RUN_LOGGER)


def parameter_checksum(model: torch.nn.Module) -> float:
    """The sum of every parameter's entries, in float64: equal on replicas that hold the same weights."""
    return float(sum(p.detach().double().sum().item() for p in model.parameters()))


def check_replicas_agree(accelerator, run: TrainingRun) -> None:
    """``TrainingError`` when the processes' weights differ (a data-parallel run whose replicas diverged)."""
    checksum = parameter_checksum(accelerator.unwrap_model(run.model))
    checksums = accelerator.gather(torch.tensor([checksum], device=accelerator.device, dtype=torch.float64))
    print(f"[rank {accelerator.process_index}] parameter checksum {checksum:.10e}", flush=True)
    if not torch.allclose(checksums, checksums[0].expand_as(checksums), rtol=0, atol=1e-9):
        raise TrainingError(f"replicas diverged: parameter checksums {checksums.tolist()}")


def check_grounding_plateau(setup: TrainingSetup, run: TrainingRun) -> None:
    """After training: whether the run's grounding left its plateau (``training.grounding_plateau``), kept in the
    trainer state (and so the model card) and logged, as a WARNING naming what to do when it did not."""
    verdict = plateau_verdict(run.state.history, setup.grounding_reference)
    run.state.grounding_plateau = verdict
    if verdict is not None and not verdict["left_plateau"]:
        logger.warning(describe_verdict(verdict))
    else:
        logger.info("grounding plateau check: %s", describe_verdict(verdict))


__all__ = ["check_grounding_plateau", "check_replicas_agree", "parameter_checksum"]
