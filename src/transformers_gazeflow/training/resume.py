"""Where a training run starts: from the checkpoint of ``--resume_from_checkpoint`` (its run's seed, data order and
random state), from the chosen trial start's checkpoint after ``--trial_starts`` (:mod:`.trial_starts`), or fresh
under ``--seed``; in each case the run's checkpoint lineage (``checkpoints.json``) begins there.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Callable

import torch
from accelerate.utils import set_seed

from .checkpointing import begin_lineage, select_checkpoint
from .ema import cpu_state_dict
from .run import RUN_LOGGER, TrainingRun, TrainingSetup, prepare_run
from .trainer_state import TrainerState
from .trial_starts import build_start_model, run_trial_starts, saved_trial_records

logger = logging.getLogger(RUN_LOGGER)


def checkpoint_to_resume(args: argparse.Namespace, output_dir: Path, accelerator) -> Path | None:
    """The verified checkpoint of ``--resume_from_checkpoint`` (None without it)."""
    try:
        return (
            select_checkpoint(args.resume_from_checkpoint, output_dir, accelerator)
            if args.resume_from_checkpoint
            else None
        )
    except FileNotFoundError as err:
        if args.resume_from_checkpoint == "latest" and (output_dir / "trials").is_dir():
            raise FileNotFoundError(
                f"{err}; {output_dir / 'trials'} holds the trial starts of a run stopped before "
                f"it continued one: rerun the command without --resume_from_checkpoint (the trial "
                f"starts begin again)"
            ) from err
        raise


def start_run(
    setup: TrainingSetup,
    model: torch.nn.Module,
    build_model: Callable[[], torch.nn.Module],
    resume_from: Path | None,
    output_dir: Path,
) -> tuple[TrainingRun, dict | None]:
    """The run to train: after ``--trial_starts`` the chosen start's continuation (and its record), else the run of
    ``--seed`` or of the checkpoint resumed from (with the trial starts' records, also where that checkpoint is the
    chosen start's own, saved before they were known); its lineage begun. ``model`` is the one built under ``--seed``;
    ``build_model`` builds another (a further trial start's, or the chosen start's to restore its checkpoint
    into)."""
    args, accelerator = setup.args, setup.accelerator
    trials: list[dict] = []
    chosen_trial: dict | None = None
    if args.trial_starts > 1 and resume_from is None:
        encoder_state = cpu_state_dict(model.video_encoder)
        chosen_trial, trials = run_trial_starts(setup, model, build_model, encoder_state, output_dir)
        resume_from, run_seed = Path(chosen_trial["checkpoint"]), chosen_trial["seed"]
        # its weights, optimizer and random state come from the chosen start's checkpoint
        model = build_start_model(build_model, run_seed, encoder_state)
    else:
        if args.trial_starts > 1:
            logger.info("--trial_starts %d: resuming, so no new trial starts", args.trial_starts)
        resumed_state = TrainerState.load(resume_from) if resume_from is not None else None
        run_seed = resumed_state.seed if resumed_state is not None and resumed_state.seed is not None else args.seed
        if resume_from is not None:
            if run_seed != args.seed:
                logger.info("resuming the run of seed %d (its checkpoint's data order and random state)", run_seed)
            set_seed(run_seed)  # the data order of the checkpoint's run; its random state is restored below
    run = prepare_run(setup, model, run_seed)
    if resume_from is not None:
        run.restore(accelerator, resume_from)
        logger.info("resumed from %s at step %d (epoch %d)", resume_from, run.state.completed_steps, run.state.epoch)
        trials = trials or run.state.trial_starts or saved_trial_records(resume_from)  # a chosen start's: not saved
    if trials:
        run.state.trial_starts = trials
    begin_lineage(output_dir, resume_from, accelerator)
    return run, chosen_trial


__all__ = ["checkpoint_to_resume", "start_run"]
