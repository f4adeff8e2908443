"""Early stopping on the validation loss and the best-weights choice (paper Appendix E.4: patience 15 epochs).

After each epoch's validation the trainer state keeps the lowest validation loss so far and its step
(:func:`note_validation_loss`: only a strictly lower loss counts as an improvement, so a tie keeps the earlier
weights), and counts the epochs since; training stops once that count reaches ``--early_stopping_patience``
(:func:`patience_spent`). Where the run has no validation windows nothing is noted and it never stops early.
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


def patience_spent(state: TrainerState, patience: int) -> bool:
    """Whether ``patience`` epochs in a row have passed without a new best validation loss."""
    return state.epochs_without_improvement >= patience


__all__ = ["note_validation_loss", "patience_spent"]
