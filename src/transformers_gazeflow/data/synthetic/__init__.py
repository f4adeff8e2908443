"""``synthetic_gaze``: procedural, seeded, egocentric-like clips with known gaze, rendered to real mp4 files.

This ``__init__`` only re-exports. The modules, lowest first:

* :mod:`.scene`: the simulated scene (camera, moving objects, hands) and its drawing, one frame at a time;
* :mod:`.gaze`: human-like gaze over a scene (fixations, saccades, blinks, untracked runs, off-frame glances);
* :mod:`.settings`: :class:`SyntheticGazeSettings`, everything that determines a dataset;
* :mod:`.scenarios`: the registry of scene/gaze generators (``settings.scenario``), one module each:
  :mod:`.served_object` (the default);
* :mod:`.dataset`: one clip from ``(seed, index)``, and the dataset folder the ``synthetic_gaze``
  builder reads (:func:`generate_dataset`, :func:`load_dataset_records`);
* :mod:`.egtea_layout`: the same clips written in the raw EGTEA Gaze+ layout (:func:`write_egtea_layout`).
"""

from .dataset import (
    ANNOTATIONS_NAME,
    FORMAT_VERSION,
    GENERATOR_VERSION,
    LAYOUT_HELP,
    MANIFEST_NAME,
    READABLE_GENERATOR_VERSIONS,
    RECORD_KEYS,
    SPLITS,
    TASK_VERBS,
    VIDEO_DIR,
    SyntheticClip,
    clip_record,
    clip_task,
    generate_clip,
    generate_dataset,
    load_dataset_records,
    split_assignment,
    task_names,
)
from .egtea_layout import WrittenEgteaClip, write_egtea_layout
from .gaze import FIXATION_CHOICES, SimulatedGaze, simulate_gaze
from .scenarios import SCENARIOS, Scenario, ScenarioGenerator, get_scenario, register_scenario
from .scene import (
    DISTRACTOR_COLORS,
    MAX_TASKS,
    TASK_COLOR_NAMES,
    TASK_COLORS,
    TASK_SHAPES,
    Scene,
    SceneObject,
    render_frame,
    render_frames,
    render_masks,
    simulate_scene,
    task_home,
)
from .served_object import generate_served_object
from .settings import DEFAULT_SCENARIO, SyntheticGazeSettings

__all__ = [
    "SyntheticGazeSettings",
    "SyntheticClip",
    "generate_clip",
    "generate_dataset",
    "load_dataset_records",
    "split_assignment",
    "task_names",
    "clip_task",
    "clip_record",
    "SPLITS",
    "MANIFEST_NAME",
    "ANNOTATIONS_NAME",
    "VIDEO_DIR",
    "FORMAT_VERSION",
    "GENERATOR_VERSION",
    "READABLE_GENERATOR_VERSIONS",
    "RECORD_KEYS",
    "TASK_VERBS",
    "LAYOUT_HELP",
    "WrittenEgteaClip",
    "write_egtea_layout",
    "SimulatedGaze",
    "simulate_gaze",
    "FIXATION_CHOICES",
    "Scene",
    "SceneObject",
    "simulate_scene",
    "render_frame",
    "render_frames",
    "render_masks",
    "task_home",
    "TASK_COLORS",
    "TASK_COLOR_NAMES",
    "TASK_SHAPES",
    "DISTRACTOR_COLORS",
    "MAX_TASKS",
    "Scenario",
    "ScenarioGenerator",
    "SCENARIOS",
    "DEFAULT_SCENARIO",
    "register_scenario",
    "get_scenario",
    "generate_served_object",
]
