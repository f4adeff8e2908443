"""The checks on a training run once its loop is over, before its model is saved: that the data-parallel replicas
still hold the same weights (else :class:`~.run.TrainingError`), whether it ended at its step cap while its
validation loss was still improving (:func:`.early_stopping.step_cap_verdict`), whether its grounding left the
plateau (:mod:`.grounding_plateau`), and whether the saved weights beat Center Bias on the validation clips
(:mod:`.validation_success`); the verdicts are in the model card, and a WARNING says when a run was cut while
improving, stalled, did not learn, or is *grounding weak* (the two last checks disagree).
"""

from __future__ import annotations

import logging
import time

import torch

from .datasets import load_protocol_clips
from .early_stopping import describe_step_cap, step_cap_verdict
from .grounding_plateau import describe_verdict, plateau_verdict
from .run import RUN_LOGGER, TrainingError, TrainingRun, TrainingSetup
from .validation_success import (
    describe_grounding_weak,
    describe_success,
    grounding_weak,
    measure_validation_success,
    skipped_verdict,
)

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


def check_step_cap(setup: TrainingSetup, run: TrainingRun) -> None:
    """After training: how the run ended (:func:`.early_stopping.step_cap_verdict`), logged, as a WARNING naming what
    to try when it reached its step cap with the validation loss still improving."""
    verdict = step_cap_verdict(run.state, setup.max_train_steps)
    still_improving = verdict is not None and verdict["still_improving"]
    (logger.warning if still_improving else logger.info)("step cap check: %s", describe_step_cap(verdict))


def check_grounding_plateau(setup: TrainingSetup, run: TrainingRun) -> None:
    """After training: whether the run's grounding left its plateau (``training.grounding_plateau``), kept in the
    trainer state (and so the model card) and logged, as a WARNING naming what to do when it did not."""
    verdict = plateau_verdict(run.state.history, setup.grounding_reference)
    run.state.grounding_plateau = verdict
    if verdict is not None and not verdict["left_plateau"]:
        logger.warning(describe_verdict(verdict))
    else:
        logger.info("grounding plateau check: %s", describe_verdict(verdict))


def check_validation_success(setup: TrainingSetup, run: TrainingRun, processor) -> None:
    """After training, on the main process only (it alone saves the trainer state; the check predicts unsharded): the
    saved weights against Center Bias on the validation clips (``training.validation_success``), kept in the trainer
    state and logged; a WARNING when the run did not learn, saying "grounding weak" where the stall check said the
    grounding left its plateau. Skipped, with the reason kept and logged, when switched off
    (``--no-validation_success_check``) or without a validation clip or a training clip to fit Center Bias on."""
    if not setup.accelerator.is_main_process:
        return
    args, state = setup.args, run.state
    if not args.validation_success_check:
        state.validation_success = skipped_verdict("switched off (--no-validation_success_check)")
    else:
        train_clips, validation_clips = load_protocol_clips(
            args.dataset_name, args.data_dir, args.dataset_config, args.validation_fraction, **args.dataset_options
        )
        if len(validation_clips) == 0:
            state.validation_success = skipped_verdict(
                "no validation clip (the dataset has no validation split and --validation_fraction "
                f"{args.validation_fraction} held out no clip)"
            )
        elif len(train_clips) == 0:
            state.validation_success = skipped_verdict("no training clip to fit Center Bias on")
        else:
            clips = [validation_clips[i] for i in range(len(validation_clips))]
            started, cpu_started = time.perf_counter(), time.process_time()
            state.validation_success = measure_validation_success(run.final_model(), processor, train_clips, clips)
            logger.info(  # the time goes to the log, not the trainer state (equal for a resumed run)
                "validation success check: predicted %d validation clip(s) in %.1f s (%.1f CPU s)",
                len(clips),
                time.perf_counter() - started,
                time.process_time() - cpu_started,
            )
    success = state.validation_success
    if grounding_weak(state.grounding_plateau, success):
        logger.warning(describe_grounding_weak(state.grounding_plateau, success))
    elif success["learned"] is False:
        logger.warning("validation success check: %s", describe_success(success))
    else:
        logger.info("validation success check: %s", describe_success(success))


__all__ = [
    "check_grounding_plateau",
    "check_replicas_agree",
    "check_step_cap",
    "check_validation_success",
    "parameter_checksum",
]
