"""What the model card of a trained model says about its training (``hub.model_folders.save_model_folder`` writes
the card): the command, data, schedule, optimizer, the trial starts, which weights were saved, whether the step cap
cut it while the validation loss still improved, the plateau check and the check on the validation clips, line by
line, and a warning in its limitations when the grounding did not leave its plateau or the model did not beat
Center Bias on the validation clips ("grounding weak" where the two disagree).
"""

from __future__ import annotations

import json

from .early_stopping import describe_step_cap, step_cap_verdict
from .grounding_plateau import describe_verdict
from .run import TrainingRun, TrainingSetup, effective_batch
from .trial_starts import trial_score, trial_score_name
from .validation_success import describe_grounding_weak, describe_success, grounding_weak


def model_card_sections(setup: TrainingSetup, run: TrainingRun, command: str, wall_seconds: float) -> dict[str, str]:
    """The card's ``title``, ``description``, ``training`` section (:func:`training_record`, one ``- key: value``
    line each) and ``limitations``, as ``save_model_folder`` takes them."""
    args, state = setup.args, run.state
    training = training_record(setup, run, command, wall_seconds)
    warning = limitation_warning(state.grounding_plateau, state.validation_success)
    return {
        "title": f"GazeFlow trained on {args.dataset_name}",
        "description": f"A GazeFlow model trained by `examples/train.py` on {args.dataset_name}; it holds the EMA "
        f"weights ({args.ema_decay}) "
        + (
            f"of step {state.best_step}, the best validation loss ({state.best_validation_loss:.5f})."
            if run.keeps_best_weights
            else f"of the last step ({state.completed_steps})."
        ),
        "training": "\n".join(f"- {key}: {value}" for key, value in training.items()),
        "limitations": (f"**Warning: {warning}.** " if warning else "")
        + "Evaluate it with `examples/evaluate.py` on the split you care about before relying on it.",
    }


def training_record(setup: TrainingSetup, run: TrainingRun, command: str, wall_seconds: float) -> dict:
    """The model card's training section, line by line: command, data, schedule, optimizer, the trial starts and
    which weights were saved."""
    args, accelerator, state = setup.args, setup.accelerator, run.state
    training = {
        "command": command,
        "dataset": f"{args.dataset_name} ({args.dataset_config or 'default config'}"
        + "".join(f", {key}={value}" for key, value in args.dataset_options.items())
        + f"), data_dir {args.data_dir}",
        "windows": f"{len(setup.train_set)} train / {len(setup.validation_set)} validation",
        "steps": f"{state.completed_steps} optimizer steps, {state.epoch} epochs",
        "optimizer": f"AdamW (0.9, 0.999), lr {args.learning_rate} cosine to {args.min_learning_rate}, "
        f"weight decay {args.weight_decay}, grad clip {args.max_grad_norm}",
        "batch": f"effective {effective_batch(setup)} ({args.per_device_train_batch_size} x "
        f"{accelerator.num_processes} processes x {args.gradient_accumulation_steps} accumulation)",
        "precision": setup.mixed_precision,
        "recipe": args.recipe or "none (every argument as given)",
        "EMA": f"{args.ema_decay} (this model holds the EMA weights)",
        "feature cache": bool(args.cache_features),
        "wall time": f"{wall_seconds:.0f} s",
    }
    if state.trial_starts:
        training["trial starts"] = describe_trial_starts(state.trial_starts, state.seed)
    training["best validation loss (EMA)"] = state.best_validation_loss
    training["saved weights"] = describe_saved_weights(run)
    training["validation loss per epoch (EMA)"] = json.dumps([r["validation_loss"] for r in state.history])
    training["step cap"] = describe_step_cap(step_cap_verdict(state, setup.max_train_steps))
    plateau, success = state.grounding_plateau, state.validation_success
    if setup.grounding_reference is not None:
        weak = grounding_weak(plateau, success)
        weak_words = "grounding weak (the validation success check below says the model did not learn): "
        training["grounding plateau check"] = (weak_words if weak else "") + describe_verdict(plateau)
    training["validation success check"] = describe_success(success)
    return training


def limitation_warning(plateau: dict | None, success: dict | None) -> str | None:
    """The card's warning: "grounding weak" (with what to try) where the grounding left its plateau but the model did
    not learn on the validation clips, else the stall check's verdict when the grounding stalled, else the
    validation check's when the model did not learn; None for a run neither check faults."""
    if grounding_weak(plateau, success):
        return describe_grounding_weak(plateau, success)
    if plateau is not None and not plateau["left_plateau"]:
        return describe_verdict(plateau)
    if success is not None and success["learned"] is False:
        return "the validation success check says " + describe_success(success)
    return None


def describe_saved_weights(run: TrainingRun) -> str:
    """Which EMA weights the model folder holds: the best validation loss's, or the last step's (no validation
    split, or ``--final_weights last``)."""
    state = run.state
    if state.best_step is None:
        return f"the EMA weights of the last step ({state.completed_steps}; no validation split to choose by)"
    best_record = next((r for r in state.history if r["step"] == state.best_step), None)
    best = (
        f"the EMA weights at step {state.best_step} (epoch {best_record['epoch'] if best_record else '?'}), the "
        f"best validation loss: {state.best_validation_loss:.5f}"
    )
    if run.keeps_best_weights:
        return best
    return f"the EMA weights of the last step ({state.completed_steps}; --final_weights last), not {best}"


def describe_trial_starts(records: list[dict], continued_seed: int | None) -> str:
    """The model card's line on the trial starts: each start's seed and score, and which one was continued."""
    starts = ", ".join(f"seed {r['seed']} {trial_score(r):.5f} (step {r['step']})" for r in records)
    if len(records) == 1:
        first, progress = records[0], records[0].get("grounding_progress")
        share = f" ({100 * progress:.0f}% of the way)" if progress is not None else ""
        return (
            f"one start: it had left the grounding plateau at step {first['step']}{share}, so no further start; "
            f"{trial_score_name(first)} (EMA) {trial_score(first):.5f}; continued: seed {continued_seed}'s"
        )
    return (
        f"{len(records)} starts sharing one encoder draw; {trial_score_name(records[0])} (EMA) at their end: "
        f"{starts}; continued: seed {continued_seed}'s"
    )


__all__ = [
    "describe_saved_weights",
    "describe_trial_starts",
    "limitation_warning",
    "model_card_sections",
    "training_record",
]
