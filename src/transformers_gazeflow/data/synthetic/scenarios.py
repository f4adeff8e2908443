"""The registry of synthetic scenarios: what a clip's scene holds and what its gaze serves.

A *scenario* is one documented generator ``generate(rng, settings, task, num_frames) -> (Scene, SimulatedGaze)``:
given the clip's random stream (seeded by ``(seed, clip index)``, after the clip length was drawn from it), the
settings, the clip's task (``0 .. num_tasks - 1``) and its length, it returns the simulated scene (drawn by
:func:`~.scene.render_frame`, target object first) and the gaze over it. ``SyntheticGazeSettings.scenario`` picks one
by name; everything else (clip ids, splits, tasks, the dataset folder, the EGTEA layout, masks) is shared.

Adding one (e.g. a rung of a ladder of grounding tasks) is one new module with its ``generate_<name>`` function and
its docstring, plus one line in :data:`SCENARIOS` below; or, from outside the package, :func:`register_scenario`.
A new scenario must never change the clips of an existing one (stored datasets compare settings, not pixels).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .gaze import SimulatedGaze
from .scene import Scene
from .served_object import generate_served_object
from .settings import SyntheticGazeSettings

ScenarioGenerator = Callable[[np.random.Generator, SyntheticGazeSettings, int, int], tuple[Scene, SimulatedGaze]]


@dataclass(frozen=True)
class Scenario:
    """A named scene/gaze generator and what it shows (its module's docstring says how)."""

    name: str
    generate: ScenarioGenerator
    description: str


SCENARIOS: dict[str, Scenario] = {
    scenario.name: scenario
    for scenario in (
        Scenario(
            "served_object",
            generate_served_object,
            "the gaze mostly serves the task's target object (its colour and shape name the task) among "
            "distractors and hands",
        ),
    )
}


def register_scenario(name: str, generate: ScenarioGenerator, description: str, *, replace: bool = False) -> Scenario:
    """Add a scenario under ``name`` (``replace=True`` to overwrite one: never a built-in one's meaning)."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"scenario name must be an identifier such as 'served_object', got {name!r}")
    if not callable(generate):
        raise ValueError(
            f"generate must be callable (rng, settings, task, num_frames) -> (Scene, SimulatedGaze), "
            f"got {type(generate).__name__}"
        )
    if name in SCENARIOS and not replace:
        raise ValueError(f"scenario {name!r} is already registered; pass replace=True to overwrite it")
    SCENARIOS[name] = Scenario(name, generate, description)
    return SCENARIOS[name]


def get_scenario(name: str) -> Scenario:
    """The scenario registered as ``name``; an unknown name raises naming the known ones."""
    if name not in SCENARIOS:
        raise ValueError(
            f"unknown synthetic scenario {name!r}: expected one of {sorted(SCENARIOS)} "
            "(or register one with register_scenario)"
        )
    return SCENARIOS[name]


__all__ = ["Scenario", "ScenarioGenerator", "SCENARIOS", "register_scenario", "get_scenario"]
