"""Where the training loop stands (:class:`TrainerState`, ``trainer_state.json``): what a checkpoint holds besides
the weights, optimizer and random state, and what the final model folder keeps of its run (the validation history,
the best step, the trial starts, the plateau check, the check on the validation clips).

Read back with its shape checked field by field: a file that is not a trainer state ends in a
:class:`CheckpointError` naming the file and the field, never in a traceback from deep inside the loop.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..data.atomic_files import fsync_file

TRAINER_STATE = "trainer_state.json"


class CheckpointError(ValueError):
    """A checkpoint (or a trainer state) that cannot be trusted or used. The message starts with the file (or folder) at
    fault."""


_OPTIONAL_STATE_FIELDS = ("best_step", "seed", "trial_starts", "grounding_plateau", "validation_success")
"""Trainer-state fields that older checkpoints lack (their default applies)."""


@dataclass
class TrainerState:
    """What the loop needs besides the weights and optimizer to continue exactly where it stopped."""

    completed_steps: int = 0
    epoch: int = 0
    step_in_epoch: int = 0  # optimizer steps already taken in ``epoch``
    best_validation_loss: float | None = None
    best_step: int | None = None  # the step whose EMA weights scored best_validation_loss (``best_ema.safetensors``)
    epochs_without_improvement: int = 0
    history: list[dict] = field(default_factory=list)
    accelerator_step: int = 0  # Accelerate's micro-batch counter for gradient accumulation
    num_processes: int = 1  # a resume needs as many (each process's random state is part of the state)
    seed: int | None = None  # the run's seed (its data order); a trial start's differs from --seed
    trial_starts: list[dict] = field(default_factory=list)  # --trial_starts: each start's seed, step, losses
    grounding_plateau: dict | None = None  # after training: whether grounding left its plateau (grounding_plateau)
    validation_success: dict | None = None  # after training: whether it beats Center Bias there (validation_success)

    def save(self, folder: Path) -> None:
        path = Path(folder) / TRAINER_STATE
        path.write_text(json.dumps(asdict(self), indent=2))
        fsync_file(path)

    @classmethod
    def load(cls, folder: Path) -> "TrainerState":
        """Read ``folder/trainer_state.json``; ``CheckpointError`` naming the file and field when it is not one."""
        path = Path(folder) / TRAINER_STATE
        data = read_json(path)
        if not isinstance(data, dict):
            raise CheckpointError(f"{path}: not a trainer state (a JSON {type(data).__name__}, expected an object)")
        names = list(cls.__dataclass_fields__)
        unexpected = sorted(set(data) - set(names))
        if unexpected:
            raise CheckpointError(f"{path}: not a trainer state (unexpected {unexpected}; expected the fields {names})")
        kinds = {
            "history": (list,),
            "best_validation_loss": (float, int, type(None)),
            "best_step": (int, type(None)),
            "seed": (int, type(None)),
            "trial_starts": (list,),
            "grounding_plateau": (dict, type(None)),
            "validation_success": (dict, type(None)),
        }
        for name in names:
            if name not in data and name in _OPTIONAL_STATE_FIELDS:  # written before the field existed
                continue
            if name not in data:
                raise CheckpointError(f"{path}: {name} is missing")
            value, expected = data[name], kinds.get(name, (int,))
            if isinstance(value, bool) or not isinstance(value, expected):
                raise CheckpointError(
                    f"{path}: {name} is {value!r}, expected {' or '.join(kind.__name__ for kind in expected)}"
                )
            if expected in ((int,), (int, type(None))) and value is not None and value < 0:
                raise CheckpointError(f"{path}: {name} is {value}, expected >= 0")
        return cls(**data)


def read_json(path: Path) -> Any:
    """Parse a JSON file we wrote; ``CheckpointError`` naming the file for a missing, unreadable or bad one."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as err:
        raise CheckpointError(f"{path}: missing") from err
    except (OSError, UnicodeDecodeError) as err:
        raise CheckpointError(f"{path}: unreadable ({err})") from err
    except json.JSONDecodeError as err:
        raise CheckpointError(f"{path}: invalid JSON ({err})") from err


__all__ = ["CheckpointError", "TRAINER_STATE", "TrainerState", "read_json"]
