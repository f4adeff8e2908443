"""``--trial_starts N``: train up to N starts of ``--trial_steps`` steps each, continue the best (beyond the paper).

A run can stall on the grounding plateau (docs/results.md, the section on the stall), and whether it does is an
event of the optimisation's path: seeds stall independently. So start ``t`` is seeded with ``--seed`` + t (the
initialisation outside the encoder, the data order, the flips, the noise), all starts share the encoder of
``--seed`` (one draw, one feature cache), and each runs on the full run's learning-rate schedule until step
``--trial_steps``, where it is checkpointed and scored on the validation windows (EMA). A further start is trained
only while every start so far ended on the plateau (:func:`~.grounding_plateau.left_plateau`), so a run that does
not stall costs no more steps than a plain run; then the start with the lowest :func:`trial_score` is continued
from its checkpoint (:func:`~.resume.start_run`).
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Callable

import torch
from accelerate.utils import set_seed

from .checkpointing import begin_lineage
from .grounding_plateau import PLATEAU_PROGRESS, left_plateau
from .loop import train_epochs
from .run import RUN_LOGGER, TrainingSetup, prepare_run
from .validation import validation_loss

logger = logging.getLogger(RUN_LOGGER)

TRIAL_RECORDS = "trial_starts.json"
"""Every start's record, written beside the starts' folders (``<output_dir>/trials/``): the chosen start's checkpoint
was saved before the records were known, so a run resumed from it reads them here."""


def build_start_model(build_model: Callable[[], torch.nn.Module], seed: int, encoder_state: dict) -> torch.nn.Module:
    """The model of trial start ``seed``: ``build_model()`` initialised under ``seed``, with the run's one encoder
    draw."""
    set_seed(seed)
    model = build_model()
    model.video_encoder.load_state_dict(encoder_state)
    return model


def trial_score_name(record: dict) -> str:
    """Which loss :func:`trial_score` reads for ``record``."""
    return "validation grounding loss" if record.get("validation_grounding_loss") is not None else "validation loss"


def trial_score(record: dict) -> float:
    """What chooses among trial starts (lower is better): the validation grounding loss (EMA) where the model has the
    grounding head (whether c_v has found the target; a run that stalls shows there first, docs/results.md), else the
    validation loss of ``config.objective``."""
    grounding = record.get("validation_grounding_loss")
    return grounding if grounding is not None else record["validation_loss"]


def run_trial_starts(
    setup: TrainingSetup,
    first_model: torch.nn.Module,
    build_model: Callable[[], torch.nn.Module],
    encoder_state: dict,
    output_dir: Path,
) -> tuple[dict, list[dict]]:
    """Train up to ``--trial_starts`` starts (the module docstring), each built by ``build_model`` under its seed
    with the encoder ``encoder_state`` (the draw of ``--seed``). Each start ends with a checkpoint in
    ``<output_dir>/trials/seed_<seed>/`` and its validation losses (EMA); the folders of the starts not chosen are
    removed (a checkpoint of the paper's model is gigabytes). Start 0 is the plain run of ``--seed``
    (``first_model`` as built for it). Returns the chosen start's record (lowest :func:`trial_score`) and every
    start's."""
    args, accelerator = setup.args, setup.accelerator
    if not len(setup.validation_set):
        raise ValueError(
            f"--trial_starts {args.trial_starts}: no validation windows to choose a start by (set "
            f"--validation_fraction above 0, or use --trial_starts 1)"
        )
    pause_at = min(args.trial_steps, setup.max_train_steps)
    records: list[dict] = []
    for index in range(args.trial_starts):
        seed = args.seed + index
        model = first_model if index == 0 else build_start_model(build_model, seed, encoder_state)
        records.append(train_trial_start(setup, model, index, seed, output_dir, pause_at))
        del model
        accelerator.free_memory()
        if left_plateau(records[-1].get("grounding_progress")):
            if index + 1 < args.trial_starts:
                logger.info(
                    "trial start %d has left the grounding plateau (%.0f%% of the way): continuing it, no "
                    "further start",
                    index + 1,
                    100 * records[-1]["grounding_progress"],
                )
            break
    chosen = min(records, key=trial_score)
    logger.info(
        "trial starts: continuing seed %d's (the lowest %s, %.5f)",
        chosen["seed"],
        trial_score_name(chosen),
        trial_score(chosen),
    )
    note_trial_starts_on_plateau(records)
    if accelerator.is_main_process:  # the starts not continued: their losses stay in the log, card and state
        for record in records:
            if record is not chosen:
                shutil.rmtree(Path(record["checkpoint"]).parent, ignore_errors=True)
        (output_dir / "trials" / TRIAL_RECORDS).write_text(json.dumps(records, indent=1), encoding="utf-8")
    accelerator.wait_for_everyone()
    return chosen, records


def train_trial_start(
    setup: TrainingSetup, model: torch.nn.Module, index: int, seed: int, output_dir: Path, pause_at: int
) -> dict:
    """Start ``index`` (seeded with ``seed``, the global generators already seeded for ``model``) trained until
    step ``pause_at`` in a fresh ``<output_dir>/trials/seed_<seed>/``, checkpointed there and scored: its record
    (seed, step, validation losses (EMA), whether training finished, its checkpoint, and the grounding progress
    where the reference levels tell it)."""
    args, accelerator = setup.args, setup.accelerator
    trial_dir = output_dir / "trials" / f"seed_{seed}"
    if accelerator.is_main_process and trial_dir.exists():
        shutil.rmtree(trial_dir)  # a previous invocation's start: never mixed into this one's
    if accelerator.is_main_process:
        trial_dir.mkdir(parents=True)
    begin_lineage(trial_dir, None, accelerator)
    run = prepare_run(setup, model, seed)
    logger.info("trial start %d of %d (seed %d): %d steps", index + 1, args.trial_starts, seed, pause_at)
    finished = train_epochs(
        setup, run, trial_dir, pause_at_step=pause_at, description=f"trial start {index + 1}/{args.trial_starts}"
    )
    checkpoint = run.save(accelerator, trial_dir)  # before the validation below: a loader's start draws a seed
    val_loss, val_grounding = validation_loss(run.ema.module, run.validation_loader, accelerator, args.seed)
    record = {
        "seed": seed,
        "step": run.state.completed_steps,
        "validation_loss": val_loss,
        "validation_grounding_loss": val_grounding,
        "finished": finished,
        "checkpoint": str(checkpoint),
    }
    if setup.grounding_reference is not None and val_grounding is not None:
        record["grounding_progress"] = setup.grounding_reference.progress(val_grounding)
    logger.info(
        "trial start %d (seed %d) at step %d: validation loss (EMA) %.5f%s",
        index + 1,
        seed,
        record["step"],
        val_loss,
        f", grounding {val_grounding:.5f}" if val_grounding is not None else "",
    )
    return record


def saved_trial_records(checkpoint: Path) -> list[dict]:
    """The trial starts' records saved beside a chosen start's ``checkpoint`` (``trials/seed_<s>/step_<n>``), or
    none where it is not a trial start's."""
    records = checkpoint.parent.parent / TRIAL_RECORDS
    return json.loads(records.read_text(encoding="utf-8")) if records.is_file() else []


def note_trial_starts_on_plateau(records: list[dict]) -> None:
    """A warning when no trial start's validation grounding loss has left its plateau yet (every start's
    ``grounding_progress`` known and short of :func:`~.grounding_plateau.left_plateau`): the continued run may
    stall; the check at the end of training says whether it did (a start on the plateau at its end still leaves it
    later in some runs)."""
    progress = [record.get("grounding_progress") for record in records]
    if not progress or any(value is None or left_plateau(value) for value in progress):
        return
    logger.warning(
        "no trial start's grounding has left its plateau yet (progress %s of the way from the centre-bias "
        "level to the floor, against %.0f%% for a run that left it): the continued run may stall; the "
        "check at the end of training will say",
        ", ".join(f"{100 * value:.0f}%" for value in progress),
        100 * PLATEAU_PROGRESS,
    )


__all__ = [
    "build_start_model",
    "note_trial_starts_on_plateau",
    "run_trial_starts",
    "saved_trial_records",
    "trial_score",
    "trial_score_name",
]
