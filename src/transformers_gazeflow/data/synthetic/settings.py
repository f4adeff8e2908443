"""The settings that determine a synthetic dataset: two equal settings give identical clips (:mod:`.dataset`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from .scene import MAX_TASKS

#: the scenario of ``SyntheticGazeSettings()`` (:mod:`.scenarios`), the one the bundled model was trained on
DEFAULT_SCENARIO = "served_object"


@dataclass(frozen=True)
class SyntheticGazeSettings:
    """Everything that determines a synthetic dataset (two equal settings give identical clips)."""

    num_clips: int = 8
    min_frames: int = 16
    max_frames: int = 80
    width: int = 128
    height: int = 96
    fps: float = 24.0
    num_tasks: int = 4
    seed: int = 0
    min_distractors: int = 2
    max_distractors: int = 4
    validation_fraction: float = 0.1
    test_fraction: float = 0.1
    #: the scene/gaze generator, by name (:mod:`.scenarios`; checked against the registry when clips are made)
    scenario: str = DEFAULT_SCENARIO

    def __post_init__(self) -> None:
        def positive_int(name: str, minimum: int = 1) -> None:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
                raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")

        positive_int("num_clips")
        positive_int("min_frames")
        positive_int("max_frames")
        positive_int("width", 16)
        positive_int("height", 16)
        positive_int("min_distractors", 1)
        positive_int("max_distractors", 1)
        positive_int("seed", 0)
        if self.max_frames < self.min_frames:
            raise ValueError(f"max_frames ({self.max_frames}) must be >= min_frames ({self.min_frames})")
        if self.max_distractors < self.min_distractors:
            raise ValueError(
                f"max_distractors ({self.max_distractors}) must be >= min_distractors ({self.min_distractors})"
            )
        tasks = self.num_tasks
        if isinstance(tasks, bool) or not isinstance(tasks, int) or not 1 <= tasks <= MAX_TASKS:
            raise ValueError(f"num_tasks must be an int in [1, {MAX_TASKS}] (one colour per task), got {tasks!r}")
        if not (isinstance(self.fps, (int, float)) and self.fps > 0):
            raise ValueError(f"fps must be a positive number, got {self.fps!r}")
        for name in ("validation_fraction", "test_fraction"):
            if not 0 <= getattr(self, name) < 1:
                raise ValueError(f"{name} must be in [0, 1), got {getattr(self, name)!r}")
        if self.validation_fraction + self.test_fraction >= 1:
            raise ValueError(
                "validation_fraction + test_fraction must leave clips for training, got "
                f"{self.validation_fraction} + {self.test_fraction}"
            )
        if not isinstance(self.scenario, str) or not self.scenario.isidentifier():
            raise ValueError(
                f"scenario must be the name of a synthetic scenario such as 'served_object', got {self.scenario!r}"
            )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> SyntheticGazeSettings:
        known = {f.name for f in fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise ValueError(f"unknown synthetic_gaze settings {sorted(unknown)} (known: {sorted(known)})")
        return cls(**values)


__all__ = ["SyntheticGazeSettings", "DEFAULT_SCENARIO"]
