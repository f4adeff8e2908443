"""Scenario ``"served_object"`` (the default, and the only one the bundled model was trained on): each clip's task
owns a target object whose colour and shape name the task; the gaze mostly serves it, with human-like dynamics.

The scene: a textured work surface through a panning, shaking head camera, the target and ``min_distractors`` to
``max_distractors`` neutral distractors, two hands reaching for them (:func:`~.scene.simulate_scene`). The gaze:
fixations on the target about 72% of the time, else on distractors, hands, the surface or off the frame, with
saccades, blinks and untracked runs (:func:`~.gaze.simulate_gaze`).
"""

from __future__ import annotations

import numpy as np

from .gaze import SimulatedGaze, simulate_gaze
from .scene import Scene, simulate_scene
from .settings import SyntheticGazeSettings


def generate_served_object(
    rng: np.random.Generator, settings: SyntheticGazeSettings, task: int, num_frames: int
) -> tuple[Scene, SimulatedGaze]:
    """The scene and gaze of one clip of task ``task`` with ``num_frames`` frames, drawn from ``rng``."""
    num_distractors = int(rng.integers(settings.min_distractors, settings.max_distractors + 1))
    scene = simulate_scene(
        rng, task, settings.num_tasks, num_frames, settings.fps, settings.width, settings.height, num_distractors
    )
    return scene, simulate_gaze(rng, scene, settings.fps)


__all__ = ["generate_served_object"]
