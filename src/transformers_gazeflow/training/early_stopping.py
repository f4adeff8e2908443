"""Early stopping on the validation loss and the best-weights choice (paper Appendix E.4: patience 15 epochs).

After each epoch's validation the trainer state keeps the lowest validation loss so far and its step
(:func:`note_validation_loss`: only a strictly lower loss counts as an improvement, so a tie keeps the earlier
weights), and counts the epochs since; training stops once that count reaches ``--early_stopping_patience``
(:func:`patience_spent`). Where the run has no validation windows nothing is noted and it never stops early.

A run cannot stop before it has had the chance to learn: patience is only spent once the learning-rate warm-up is
over and a quarter of the run's steps are done (:func:`early_stopping_min_steps`, ``--early_stopping_min_steps``).
On a small dataset an epoch is a handful of steps, and the validation loss of the first epochs (the EMA still close
to the initial weights, the warm-up's small learning rate) is noise: counting it stopped a 200-step run at step 12.
"""

from __future__ import annotations

from .trainer_state import TrainerState


def note_validation_loss(state: TrainerState, loss: float) -> bool:
    """Record an epoch's validation ``loss`` in ``state`` at ``state.completed_steps``: a new best (the first one,
    or strictly below ``state.best_validation_loss``) becomes ``best_validation_loss`` and ``best_step`` and resets
    ``epochs_without_improvement``; any other adds one to it. Returns whether it was a new best (the caller then
    keeps a snapshot of the weights that scored it)."""
    if state.best_validation_loss is None or loss < state.best_validation_loss:
        state.best_validation_loss, state.epochs_without_improvement = loss, 0
        state.best_step = state.completed_steps
        return True
    state.epochs_without_improvement += 1
    return False


def early_stopping_min_steps(max_train_steps: int, num_warmup_steps: int, requested: int | None = None) -> int:
    """The step before which early stopping never ends a run: ``requested`` when given, otherwise the end of the
    warm-up or a quarter of the run's steps, whichever is later."""
    if requested is not None:
        return requested
    return max(num_warmup_steps, max_train_steps // 4)


def patience_spent(state: TrainerState, patience: int, min_steps: int = 0) -> bool:
    """Whether ``patience`` epochs in a row have passed without a new best validation loss, once at least
    ``min_steps`` optimizer steps are done."""
    return state.completed_steps >= min_steps and state.epochs_without_improvement >= patience


__all__ = ["early_stopping_min_steps", "note_validation_loss", "patience_spent"]
