"""The training loop of ``examples/train.py``, from where a run's trainer state stands: gradient accumulation and
the optimizer step (AdamW, the cosine schedule, clipping), the EMA after each step, the log line every
``--logging_steps``, checkpoints every ``--checkpointing_steps``, and at each epoch's end the validation loss of the
EMA weights, the best-validation snapshot and early stopping.

:func:`train_epochs` can pause after a given step (a trial start's end) before any end-of-epoch work, so that a run
continued from a checkpoint written then is the same run as one never paused.
"""

from __future__ import annotations

import enum
import logging
from pathlib import Path

import torch
from tqdm.auto import tqdm

from ..data.collator import FLIP_STATE_KEY
from .early_stopping import early_stopping_min_steps, note_validation_loss, patience_spent
from .ema import cpu_state_dict
from .faults import fault_point
from .run import RUN_LOGGER, TrainingError, TrainingRun, TrainingSetup
from .trainer_state import CheckpointError
from .validation import model_inputs, validation_loss

logger = logging.getLogger(RUN_LOGGER)


class EpochEnd(enum.Enum):
    """How :func:`train_one_epoch` ended."""

    ALL_BATCHES = "all batches"  # the epoch's batches are done
    LAST_STEP = "last step"  # the run's last optimizer step is done (or was, in the checkpoint resumed from)
    PAUSED = "paused"  # a trial start's last step is done


def train_epochs(
    setup: TrainingSetup,
    run: TrainingRun,
    checkpoint_dir: Path,
    pause_at_step: int | None = None,
    description: str = "training",
) -> bool:
    """The training loop from where ``run.state`` stands: steps, the EMA, checkpoints every
    ``--checkpointing_steps`` into ``checkpoint_dir``, validation of the EMA weights at each epoch's end, the
    best-validation EMA snapshot, early stopping. Returns True when training is over (the last step, or early
    stopping); False when it paused after step ``pause_at_step`` (a trial start's end), before any end-of-epoch
    work, so that continuing from a checkpoint written now gives the same run as never pausing."""
    args, state = setup.args, run.state
    min_steps = early_stopping_min_steps(
        setup.max_train_steps, args.num_warmup_steps, getattr(args, "early_stopping_min_steps", None)
    )
    if patience_spent(state, args.early_stopping_patience, min_steps):  # a checkpoint written as early stopping hit
        return True
    progress = tqdm(
        total=setup.max_train_steps,
        initial=state.completed_steps,
        disable=not setup.accelerator.is_local_main_process,
        desc=description,
    )
    try:
        for epoch in range(state.epoch, setup.num_epochs):
            end = train_one_epoch(setup, run, epoch, progress, checkpoint_dir, pause_at_step)
            if end is EpochEnd.PAUSED:
                return False
            finish_epoch(setup, run, epoch, last_step=end is EpochEnd.LAST_STEP)
            if end is EpochEnd.LAST_STEP:
                break
            if patience_spent(state, args.early_stopping_patience, min_steps):
                logger.info(
                    "early stopping at step %d: no validation improvement for %d epochs (best: step %s)",
                    state.completed_steps,
                    state.epochs_without_improvement,
                    state.best_step,
                )
                break
    finally:
        progress.close()
    return True


def train_one_epoch(
    setup: TrainingSetup, run: TrainingRun, epoch: int, progress: tqdm, checkpoint_dir: Path, pause_at_step: int | None
) -> EpochEnd:
    """The optimizer steps of ``epoch`` from where ``run.state`` stands (a resumed epoch skips the batches it has
    already consumed)."""
    args, accelerator, state = setup.args, setup.accelerator, run.state
    run.model.train()
    run.train_loader.set_epoch(epoch)
    if state.completed_steps >= setup.max_train_steps:  # resumed from the last step's checkpoint: no step more
        return EpochEnd.LAST_STEP
    batches = run.train_loader
    if epoch == state.epoch and state.step_in_epoch > 0:
        batches = accelerator.skip_first_batches(
            run.train_loader, state.step_in_epoch * args.gradient_accumulation_steps
        )
    running_loss = 0.0
    for batch in batches:
        running_loss += accumulate_gradients(setup, run, batch, epoch)
        if not accelerator.sync_gradients:
            continue
        finish_optimizer_step(setup, run, epoch, running_loss, progress, checkpoint_dir)
        running_loss = 0.0
        if state.completed_steps >= setup.max_train_steps:
            return EpochEnd.LAST_STEP
        if pause_at_step is not None and state.completed_steps >= pause_at_step:
            return EpochEnd.PAUSED
    return EpochEnd.ALL_BATCHES


def accumulate_gradients(setup: TrainingSetup, run: TrainingRun, batch: dict, epoch: int) -> float:
    """Forward and backward of one batch under gradient accumulation (the optimizer steps when Accelerate syncs the
    gradients); returns the batch's share of the step's loss. ``TrainingError`` before the update when the loss is
    not finite on any process."""
    args, accelerator, state = setup.args, setup.accelerator, run.state
    with accelerator.accumulate(run.model):
        with accelerator.autocast():
            loss = run.model(**model_inputs(batch)).loss
        finite = accelerator.reduce(torch.isfinite(loss.detach()).float(), "min")
        if finite.item() < 1:
            raise TrainingError(
                f"non-finite training loss ({loss.item()}) at step {state.completed_steps + 1} (epoch "
                f"{epoch}); stopped before the update. Last good checkpoint: "
                f"{run.last_checkpoint or 'none saved yet'}"
            )
        accelerator.backward(loss)
        if FLIP_STATE_KEY in batch:
            run.flip_state = batch[FLIP_STATE_KEY]
        if accelerator.sync_gradients:
            accelerator.clip_grad_norm_(run.trainable, args.max_grad_norm)
        run.optimizer.step()
        run.scheduler.step()
        run.optimizer.zero_grad()
    return loss.detach().float().item() / args.gradient_accumulation_steps


def finish_optimizer_step(
    setup: TrainingSetup, run: TrainingRun, epoch: int, step_loss: float, progress: tqdm, checkpoint_dir: Path
) -> None:
    """After an optimizer step: the EMA, the step counters, the log line every ``--logging_steps``, a checkpoint
    every ``--checkpointing_steps`` (``TrainingError`` when the weights went NaN/inf)."""
    args, accelerator, state = setup.args, setup.accelerator, run.state
    run.ema.update_parameters(accelerator.unwrap_model(run.model))
    state.completed_steps += 1
    state.step_in_epoch += 1
    fault_point(f"step {state.completed_steps}")
    progress.update(1)
    if state.completed_steps % args.logging_steps == 0 or state.completed_steps == 1:
        lr = run.scheduler.get_last_lr()[0]
        progress.set_postfix(loss=f"{step_loss:.4f}", lr=f"{lr:.2e}")
        logger.info("step %d epoch %d loss %.5f lr %.3e", state.completed_steps, epoch, step_loss, lr)
        accelerator.log({"train/loss": step_loss, "train/lr": lr}, step=state.completed_steps)
    if args.checkpointing_steps and state.completed_steps % args.checkpointing_steps == 0:
        try:
            run.save(accelerator, checkpoint_dir)
        except CheckpointError as err:  # the weights went NaN/inf: that checkpoint would not be good
            raise TrainingError(f"{err}. Last good checkpoint: {run.last_checkpoint or 'none saved yet'}") from err


def finish_epoch(setup: TrainingSetup, run: TrainingRun, epoch: int, last_step: bool) -> None:
    """End of an epoch (or of training): validation with the EMA weights, the history, the best-validation EMA
    snapshot and the early-stopping count; the epoch counts as done unless training ended inside it."""
    args, accelerator, state = setup.args, setup.accelerator, run.state
    epoch_finished = not last_step or state.step_in_epoch >= setup.steps_per_epoch
    val_loss, val_grounding = (
        validation_loss(run.ema.module, run.validation_loader, accelerator, args.seed)
        if len(setup.validation_set)
        else (None, None)
    )
    record = {"epoch": epoch, "step": state.completed_steps, "validation_loss": val_loss}
    if val_grounding is not None:
        record["validation_grounding_loss"] = val_grounding
        logger.info("epoch %d validation grounding loss (EMA) %.5f", epoch, val_grounding)
    state.history.append(record)
    logger.info("epoch %d step %d validation loss (EMA) %s", epoch, state.completed_steps, val_loss)
    if val_loss is not None:
        accelerator.log({"validation/loss": val_loss}, step=state.completed_steps)
        if note_validation_loss(state, val_loss):
            run.best_ema_state = cpu_state_dict(run.ema.module)
    if epoch_finished:
        state.epoch, state.step_in_epoch = epoch + 1, 0


__all__ = ["EpochEnd", "train_epochs"]
