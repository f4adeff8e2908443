"""The recipe panel: the grounding task families a training recipe is measured on (``examples/recipe_panel.py``) and
the data each is written with.

A recipe tuned on a few families can learn those only; the panel asks whether it learns families that differ in what
carries the task. It holds :data:`PANEL`: the four families of ``data.synthetic_tasks_kept_aside`` (kept aside: built
by someone who had not seen the recipe, never used to choose its settings) and four families of
``data.synthetic_tasks`` with cues of other kinds (a shape, a corner stripe, an intermittent square, a ring anywhere on
the surface). Of these four, ``shape_cue`` and ``stripe_cue`` were held out when the recipe's settings were chosen,
while ``blinking_cue`` and ``ring_cue`` were the families the recipe's temporal layer and initialisation were chosen
on (docs/results.md): they are in the panel as the recipe's own ground, not as held-out evidence.

Every family is written with :data:`PANEL_CLIPS` clips of :data:`PANEL_FRAMES` frames (a fifth of them test clips)
from data seed :data:`PANEL_DATA_SEED`, at 128 x 96 except ``wide_occluded_shape_cue`` (192 x 80).

Success on a family is the model's test AAE at most ``SUCCESS_AAE_RATIO`` times Center Bias's
(``metrics.baselines.beats_center_bias``, the one home of that rule, which the training run's check on its validation
clips reads too); ``metrics.baselines.beats_both_priors`` is the stricter bar.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

from .synthetic_tasks import GroundingTaskSettings, TaskClip, write_task_egtea_layout
from .synthetic_tasks_kept_aside import KEPT_ASIDE_TASKS, KeptAsideSettings

PANEL_CLIPS = 300
PANEL_FRAMES = (64, 96)
"""Each clip's frame count is uniform in this range (both ends included)."""
PANEL_DATA_SEED = 7
SMOKE_DATA = {"num_clips": 8, "min_frames": 24, "max_frames": 32, "test_fraction": 0.25}
"""The data of a smoke run of the panel (``examples/recipe_panel.py --smoke``): a few short clips per family."""


@dataclass(frozen=True)
class PanelFamily:
    """One family of the panel: its name, the settings its data is written with, and whether it is kept aside."""

    name: str
    settings: GroundingTaskSettings

    @property
    def kept_aside(self) -> bool:
        return self.name in KEPT_ASIDE_TASKS


def _family(task: str, width: int = 128, height: int = 96) -> PanelFamily:
    settings_class = KeptAsideSettings if task in KEPT_ASIDE_TASKS else GroundingTaskSettings
    settings = settings_class(
        task=task,
        num_clips=PANEL_CLIPS,
        min_frames=PANEL_FRAMES[0],
        max_frames=PANEL_FRAMES[1],
        width=width,
        height=height,
        seed=PANEL_DATA_SEED,
    )
    return PanelFamily(task, settings)


PANEL: tuple[PanelFamily, ...] = (
    _family("flash_target"),
    _family("near_shade_cue"),
    _family("fast_crossing"),
    _family("wide_occluded_shape_cue", width=192, height=80),
    _family("shape_cue"),
    _family("stripe_cue"),
    _family("blinking_cue"),
    _family("ring_cue"),
)
PANEL_NAMES: tuple[str, ...] = tuple(family.name for family in PANEL)


def panel_family(name: str) -> PanelFamily:
    """The panel's family of that name; ``ValueError`` naming the panel's families otherwise."""
    for family in PANEL:
        if family.name == name:
            return family
    raise ValueError(f"unknown panel family {name!r}, expected one of {PANEL_NAMES}")


def write_panel_family(out_dir: str | os.PathLike, family: PanelFamily, smoke: bool = False) -> list[TaskClip]:
    """Write a family's clips in the raw EGTEA Gaze+ layout (``write_task_egtea_layout``) into the empty ``out_dir``;
    ``smoke``: :data:`SMOKE_DATA`'s few short clips instead of the panel's."""
    settings = dataclasses.replace(family.settings, **SMOKE_DATA) if smoke else family.settings
    return write_task_egtea_layout(out_dir, settings)


__all__ = [
    "PANEL",
    "PANEL_NAMES",
    "PANEL_CLIPS",
    "PANEL_FRAMES",
    "PANEL_DATA_SEED",
    "SMOKE_DATA",
    "PanelFamily",
    "panel_family",
    "write_panel_family",
]
