"""Early stopping on the validation loss and the best-weights choice (paper Appendix E.4: patience 15 epochs).

After each epoch's validation the trainer state keeps the lowest validation loss so far and its step
(:func:`note_validation_loss`: only a strictly lower loss counts as an improvement, so a tie keeps the earlier
weights), and counts the epochs since; training stops once that count reaches ``--early_stopping_patience``
(:func:`patience_spent`). Where the run has no validation windows nothing is noted and it never stops early.

When a run ends at its step cap instead, :func:`step_cap_verdict` says whether its validation loss was still
improving there (its best at one of its last two validations): then more steps, or more data, may help, and the
log and the model card say so.

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


STILL_IMPROVING_VALIDATIONS = 2
"""A run "still improving" at its step cap had its best validation loss at one of its last this many validations."""


def step_cap_verdict(state: TrainerState, max_train_steps: int) -> dict | None:
    """How the run ended, from its trainer state: ``reached_cap`` (it took all ``max_train_steps`` steps, so early
    stopping did not end it), ``still_improving`` (it reached the cap with its best validation loss at one of its
    last :data:`STILL_IMPROVING_VALIDATIONS` validations), the best and last steps and the validations since the best.
    None for a run without validation (nothing to judge by)."""
    if state.best_step is None:
        return None
    reached_cap = state.completed_steps >= max_train_steps
    return {
        "reached_cap": reached_cap,
        "still_improving": reached_cap and state.epochs_without_improvement < STILL_IMPROVING_VALIDATIONS,
        "best_step": state.best_step,
        "last_step": state.completed_steps,
        "max_train_steps": max_train_steps,
        "validations_since_best": state.epochs_without_improvement,
    }


def describe_step_cap(verdict: dict | None) -> str:
    """One line for the log and the model card on :func:`step_cap_verdict`'s verdict."""
    if verdict is None:
        return "not judged (no validation split)"
    best = f"best validation loss at step {verdict['best_step']}"
    if not verdict["reached_cap"]:
        return f"not reached: early stopping ended the run at step {verdict['last_step']} ({best})"
    since = verdict["validations_since_best"]
    if verdict["still_improving"]:
        where = "the last validation" if since == 0 else "the validation before the last"
        return (
            f"reached ({verdict['max_train_steps']} steps) while the validation loss was still improving ({best}, "
            "at " + where + "): more steps (--max_train_steps) or more data may help"
        )
    return (
        f"reached ({verdict['max_train_steps']} steps); the validation loss had stopped improving ({best}, "
        f"{since} validations before the end)"
    )


__all__ = [
    "STILL_IMPROVING_VALIDATIONS",
    "describe_step_cap",
    "early_stopping_min_steps",
    "note_validation_loss",
    "patience_spent",
    "step_cap_verdict",
]
