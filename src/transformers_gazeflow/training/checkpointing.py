"""Checkpoints that a resume can trust: written under a temporary name, renamed into place when complete.

A checkpoint folder ``step_<N>`` holds Accelerate's ``save_state`` output (model, optimizer, scheduler, EMA,
random states of every process) plus ``trainer_state.json``, written last. An interrupted save leaves only a
``.tmp_step_<N>`` folder, which :func:`find_checkpoint` never returns.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

TRAINER_STATE = "trainer_state.json"
_STEP_DIR = re.compile(r"^step_(\d+)$")


@dataclass
class TrainerState:
    """What the loop needs besides Accelerate's state to continue exactly where it stopped."""

    completed_steps: int = 0
    epoch: int = 0
    step_in_epoch: int = 0  # optimizer steps already taken in ``epoch``
    best_validation_loss: float | None = None
    epochs_without_improvement: int = 0
    history: list[dict] = field(default_factory=list)

    def save(self, folder: Path) -> None:
        (folder / TRAINER_STATE).write_text(json.dumps(asdict(self), indent=2))

    @classmethod
    def load(cls, folder: Path) -> "TrainerState":
        return cls(**json.loads((folder / TRAINER_STATE).read_text()))


def save_checkpoint(accelerator, output_dir: str | os.PathLike, state: TrainerState) -> Path:
    """``accelerator.save_state`` into ``output_dir/step_<N>`` atomically (temporary folder, then rename)."""
    output_dir = Path(output_dir)
    final = output_dir / f"step_{state.completed_steps}"
    partial = output_dir / f".tmp_step_{state.completed_steps}"
    if accelerator.is_main_process and partial.exists():
        shutil.rmtree(partial)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(partial))
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        state.save(partial)  # written last: its presence marks a complete checkpoint
        if final.exists():
            shutil.rmtree(final)
        os.replace(partial, final)
    accelerator.wait_for_everyone()
    return final


def find_checkpoint(path: str | os.PathLike, output_dir: str | os.PathLike) -> Path:
    """Resolve ``--resume_from_checkpoint``: a checkpoint folder, or ``latest`` (the newest complete ``step_<N>``
    under ``output_dir``). Raises ``FileNotFoundError`` naming the argument when there is none."""
    if str(path) == "latest":
        candidates = [p for p in Path(output_dir).glob("step_*")
                      if _STEP_DIR.match(p.name) and (p / TRAINER_STATE).exists()]
        if not candidates:
            raise FileNotFoundError(f"--resume_from_checkpoint latest: no complete checkpoint (step_<N>/{TRAINER_STATE}) "
                                    f"under --output_dir {output_dir}")
        return max(candidates, key=lambda p: int(_STEP_DIR.match(p.name).group(1)))
    folder = Path(path)
    if not folder.is_dir():
        raise FileNotFoundError(f"--resume_from_checkpoint: {folder} does not exist (expected a step_<N> folder "
                                f"written by examples/train.py, or 'latest')")
    if not (folder / TRAINER_STATE).exists():
        raise FileNotFoundError(f"--resume_from_checkpoint: {folder} is not a complete checkpoint (no {TRAINER_STATE}; "
                                f"an interrupted save is never trusted)")
    return folder


__all__ = ["TrainerState", "save_checkpoint", "find_checkpoint", "TRAINER_STATE"]
