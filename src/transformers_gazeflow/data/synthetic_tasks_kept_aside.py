"""Grounding task families kept aside: built apart from the training recipe, never used to choose its settings.

They measure whether a recipe learns what it was not tuned on (a panel of families, ``data.synthetic_tasks_panel``),
so none of them may be used to choose a recipe's settings (:data:`KEPT_ASIDE_TASKS`); a family that has been used so
leaves the tuple. They differ from ``data.synthetic_tasks``' families, and from each other, in what carries the task:
an event on the target instead of a cue patch, near-identical objects, fast crossing motion, a wide frame with a large
occluder. Each has one documented rule:

===========================  ==========================================================================================
task                         rule (what a model must read to find the target)
===========================  ==========================================================================================
``flash_target``             no cue patch: 4-6 objects (``min_objects + 1`` to ``max_objects + 2``) of one shape and
                             one colour, all wandering alike; the target alone *flashes*: it is drawn white
                             (:data:`FLASH_COLOR`) for :data:`FLASH_FRAMES` frames, a flash starting every 10-20
                             frames (:data:`FLASH_INTERVAL_FRAMES`, the first one within the first interval). The cue is
                             a brief, repeated event on the object itself.
``near_shade_cue``           a cue square at the middle of the *left edge* shows a shade; 4-5 objects
                             (``min_objects + 1`` to ``max_objects + 1``) of one shape, each a distinct shade of one
                             hue (:data:`NEAR_SHADES`, 22 levels apart per channel); the target is the object of the
                             cue's shade.
``fast_crossing``            no cue: 3-4 objects of one shape and one colour; the others wander slowly
                             (:data:`SLOW_WANDER`: never faster than 0.3 frame widths per second), the target sweeps
                             across the frame in straight lines at 0.45-0.7 frame widths per second
                             (:data:`FAST_SPEED`), bouncing off the walls at 0.1 and 0.9 and crossing the others'
                             paths: the target is the fastest object in every frame.
``wide_occluded_shape_cue``  a *wide* frame (width at least twice the height); a cue at the middle of the *right edge*
                             shows a white shape; 3-4 objects of one colour and distinct shapes; one grey panel
                             (0.2-0.3 of the frame wide, full height) drifts slowly across (:data:`PANEL_SPEED`),
                             hiding what passes behind it; the gaze makes a saccade back to the target after every
                             fixation away from it (as ``data.synthetic_tasks.OCCLUDED_TASKS``). The target is the
                             object of the cue's shape.
===========================  ==========================================================================================

Conventions are ``data.synthetic_tasks``' (unit coordinates, ``objects[0]`` the target, the gaze process of
:func:`~.synthetic_tasks.simulate_task_gaze`, the surface, the flat drawing, the EGTEA-layout writer): a clip is
fully determined by ``(settings, clip index)``. Objects' and cues' sizes follow the frame's *height* (they are those of
``data.synthetic_tasks`` in a 4:3 frame), so a wide frame does not make them larger. :class:`KeptAsideSettings` draws
these families; ``write_task_egtea_layout(out_dir, KeptAsideSettings(...))`` writes them in the raw EGTEA layout.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .synthetic.scene import SceneObject, place_apart, smooth_path
from .synthetic_tasks import (
    OBJECT_COLORS,
    SHAPES,
    GroundingTaskSettings,
    TaskClip,
    paint_flat_shape,
    render_task_frame,
    simulate_task_gaze,
    task_background,
)

KEPT_ASIDE_TASKS: tuple[str, ...] = ("flash_target", "near_shade_cue", "fast_crossing", "wide_occluded_shape_cue")
"""Families kept aside: not to be used to choose a recipe's settings (only to measure a recipe once chosen)."""
OCCLUDED_KEPT_ASIDE_TASKS: tuple[str, ...] = ("wide_occluded_shape_cue",)
"""Families with an occluder and a saccade back to the target after every fixation away from it."""
EXTRA_OBJECTS: dict[str, tuple[int, int]] = {"flash_target": (1, 2), "near_shade_cue": (1, 1)}
"""Objects a family adds to ``(min_objects, max_objects)`` (``flash_target``: 4-6 at the defaults)."""
FLASH_COLOR = (250, 250, 250)
FLASH_FRAMES = 2
FLASH_INTERVAL_FRAMES = (10, 20)
"""``flash_target``: frames from one flash's start to the next (uniform, both ends included)."""
NEAR_SHADES: tuple[tuple[int, int, int], ...] = tuple((60 + 22 * k, 140 + 22 * k, 70 + 22 * k) for k in range(5))
"""``near_shade_cue``: five shades of one green, darkest first, 22 levels apart in each channel."""
NEAR_SHADE_NAMES: tuple[str, ...] = tuple(f"green shade {k + 1}" for k in range(len(NEAR_SHADES)))
CUE_COLOR = (245, 245, 245)
"""``wide_occluded_shape_cue``: the colour of the cue's shape."""
FAST_SPEED = (0.45, 0.7)
"""``fast_crossing``: the target's speed, frame widths per second (uniform per clip; the same pixel speed on both
axes)."""
SLOW_WANDER = (0.06, (0.05, 0.25))
"""``fast_crossing``'s other objects: ``smooth_path``'s amplitude and frequency band (Hz). Its three sinusoids per
axis weigh at most ``sqrt(3) * sqrt(2) * 0.06`` together, so an axis moves at most ``2 pi 0.25 * 0.147 = 0.23`` of
the frame per second, and an object at most ``0.23 * sqrt(1 + (3/4)^2) = 0.29`` frame widths per second at 4:3."""
PANEL_SPEED = (0.05, 0.12)
"""``wide_occluded_shape_cue``: the occluder panel's speed, frame widths per second (uniform per clip)."""
OCCLUDER_HALF_WIDTH = (0.1, 0.15)
WALLS = (0.1, 0.9)
"""Where the fast target and the occluder panel bounce (unit coordinates)."""
REFERENCE_ASPECT = 128 / 96
"""The width/height of ``data.synthetic_tasks``' default frame: sizes in frame widths are scaled by
``REFERENCE_ASPECT / (width / height)``, so they stay the same share of the frame's height."""
OBJECT_RADIUS = (0.06, 0.075)
"""An object's radius at :data:`REFERENCE_ASPECT`, in frame widths (uniform per object)."""
CUE_HALF_SIZE = 0.06
"""Half the side of the cue's glyph, in frame heights (a 12 x 12 pixel square at 128 x 96)."""
CUE_CENTRES = {"near_shade_cue": (0.06, 0.5), "wide_occluded_shape_cue": (0.96, 0.5)}
"""Where a family's cue sits (unit coordinates): the middle of the left or right edge."""
CUE_FRAME_SHADE = 25.0
"""The dark frame drawn 2 pixels wide around a cue glyph."""


@dataclass(frozen=True)
class KeptAsideSettings(GroundingTaskSettings):
    """:class:`~.synthetic_tasks.GroundingTaskSettings` for the kept-aside families (:data:`KEPT_ASIDE_TASKS`); a
    ``wide_occluded_shape_cue`` frame must be at least twice as wide as it is tall."""

    TASKS: ClassVar[tuple[str, ...]] = KEPT_ASIDE_TASKS
    task: str = "flash_target"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.task == "wide_occluded_shape_cue" and self.width < 2 * self.height:
            raise ValueError(
                f"wide_occluded_shape_cue needs width >= 2 * height (a wide frame), got {self.width} x {self.height}"
            )

    def generate_clip(self, index: int) -> KeptAsideClip:
        return generate_kept_aside_clip(self, index)

    def label_names(self) -> tuple[str, ...]:
        """What a clip's ``label`` names: a shade, a shape, or the target itself (no cue: label 0)."""
        return {"near_shade_cue": NEAR_SHADE_NAMES, "wide_occluded_shape_cue": SHAPES}.get(self.task, ("the target",))


@dataclass(frozen=True)
class KeptAsideClip(TaskClip):
    """A clip of a kept-aside family: a :class:`~.synthetic_tasks.TaskClip` whose cue (if any) sits at
    :data:`CUE_CENTRES` at :data:`CUE_HALF_SIZE`, and whose target is drawn :data:`FLASH_COLOR` in the frames where
    ``flash`` (bool ``[T]``, ``flash_target`` only, else None) is set."""

    flash: np.ndarray | None = None

    def frame(self, t: int) -> np.ndarray:
        """Frame ``t`` as RGB uint8 ``[H, W, 3]``: surface, objects (the target flashing or not), the occluder panel,
        then the cue in its dark frame."""
        objects = self.objects
        if self.flash is not None and self.flash[t]:
            objects = (dataclasses.replace(objects[0], color=FLASH_COLOR), *objects[1:])
        frame = render_task_frame(dataclasses.replace(self, objects=objects, cue=None), t).astype(np.float32)
        if self.cue is not None:
            _draw_edge_cue(frame, self)
        return np.clip(frame, 0, 255).astype(np.uint8)


def _draw_edge_cue(frame: np.ndarray, clip: KeptAsideClip) -> None:
    """The cue glyph (a filled square for a shade, else the named shape) in a dark frame at :data:`CUE_CENTRES`."""
    height, width = frame.shape[:2]
    shape, color = clip.cue
    cx, cy = CUE_CENTRES[clip.task][0] * width, CUE_CENTRES[clip.task][1] * height
    half = CUE_HALF_SIZE * height
    frame[max(int(cy - half - 2), 0) : int(cy + half + 2), max(int(cx - half - 2), 0) : int(cx + half + 2)] = (
        CUE_FRAME_SHADE
    )
    if shape == "square":
        frame[int(cy - half) : int(cy + half), int(cx - half) : int(cx + half)] = color
    else:
        paint_flat_shape(frame, cx, cy, shape, half * 1.25, 0.0, color)


def bounce(position: np.ndarray, walls: tuple[float, float] = WALLS) -> np.ndarray:
    """Positions of a point moving freely from ``walls[0]`` (``position`` measured from there) folded back between
    the walls: a straight path that bounces off them."""
    span = walls[1] - walls[0]
    return walls[0] + span - np.abs((position - walls[0]) % (2 * span) - span)


def _fast_track(rng: np.random.Generator, settings: KeptAsideSettings, num_frames: int) -> np.ndarray:
    """``fast_crossing``'s target: a straight path at :data:`FAST_SPEED` bouncing off :data:`WALLS`."""
    aspect = settings.width / settings.height
    speed, angle = rng.uniform(*FAST_SPEED), rng.uniform(0, 2 * math.pi)
    velocity = speed * np.array([math.cos(angle), math.sin(angle) * aspect]) / settings.fps  # unit per frame
    start = rng.uniform(0.15, 0.85, 2)
    return bounce(start + velocity * np.arange(num_frames)[:, None])


def _looks(rng: np.random.Generator, task: str, count: int) -> tuple[list[tuple[str, tuple]], int, tuple | None]:
    """Each object's ``(shape, colour)`` (target first), the clip's label and its cue ``(glyph, colour)``."""
    shape = SHAPES[int(rng.integers(len(SHAPES)))]
    if task == "near_shade_cue":
        shades = rng.permutation(len(NEAR_SHADES))[:count]
        return [(shape, NEAR_SHADES[i]) for i in shades], int(shades[0]), ("square", NEAR_SHADES[int(shades[0])])
    color = OBJECT_COLORS[int(rng.integers(len(OBJECT_COLORS)))]
    if task == "wide_occluded_shape_cue":
        shapes = rng.permutation(len(SHAPES))[:count]
        return [(SHAPES[i], color) for i in shapes], int(shapes[0]), (SHAPES[int(shapes[0])], CUE_COLOR)
    return [(shape, color)] * count, 0, None  # flash_target, fast_crossing: alike objects, no cue


def _objects(
    rng: np.random.Generator, settings: KeptAsideSettings, num_frames: int
) -> tuple[tuple[SceneObject, ...], int, tuple | None]:
    """The family's objects (target first), its label and its cue."""
    task = settings.task
    low, high = EXTRA_OBJECTS.get(task, (0, 0))
    count = int(rng.integers(settings.min_objects + low, settings.max_objects + high + 1))
    homes = place_apart(rng, [], count, (0.2, 0.22), (0.82, 0.8), min_distance=0.22, attempts=50)
    looks, label, cue = _looks(rng, task, count)
    scale = REFERENCE_ASPECT * settings.height / settings.width
    objects = []
    for k, ((shape, color), home) in enumerate(zip(looks, homes)):
        if task == "fast_crossing":
            wander = smooth_path(rng, num_frames, settings.fps, *SLOW_WANDER) if k else None
            track = _fast_track(rng, settings, num_frames) if k == 0 else np.clip(home + wander, 0.1, 0.9)
        else:
            track = np.clip(home + smooth_path(rng, num_frames, settings.fps, 0.08, (0.08, 0.35)), 0.1, 0.9)
        angle = rng.uniform(0, 2 * np.pi) + rng.normal(0, 0.5) * np.arange(num_frames) / settings.fps
        objects.append(SceneObject(shape, color, float(rng.uniform(*OBJECT_RADIUS) * scale), track, angle))
    return tuple(objects), label, cue


def _occluders(rng: np.random.Generator, settings: KeptAsideSettings, num_frames: int) -> tuple[np.ndarray, ...]:
    """``wide_occluded_shape_cue``: one full-height panel drifting at :data:`PANEL_SPEED`, bouncing off
    :data:`WALLS` (its centre); none for the other families."""
    if settings.task not in OCCLUDED_KEPT_ASIDE_TASKS:
        return ()
    half = rng.uniform(*OCCLUDER_HALF_WIDTH)
    speed = rng.choice([-1, 1]) * rng.uniform(*PANEL_SPEED) / settings.fps
    x = bounce(rng.uniform(0.15, 0.85) + speed * np.arange(num_frames))
    ones = np.ones(num_frames)
    return (np.stack([x - half, 0 * ones, x + half, ones], axis=1),)


def _flashes(rng: np.random.Generator, settings: KeptAsideSettings, num_frames: int) -> np.ndarray | None:
    """``flash_target``'s flash frames (bool ``[T]``): starts :data:`FLASH_INTERVAL_FRAMES` apart, the first within
    the first interval, each :data:`FLASH_FRAMES` long; None for the other families."""
    if settings.task != "flash_target":
        return None
    low, high = FLASH_INTERVAL_FRAMES
    flash = np.zeros(num_frames, bool)
    start = int(rng.integers(0, high))
    while start < num_frames:
        flash[start : start + FLASH_FRAMES] = True
        start += int(rng.integers(low, high + 1))
    return flash


def generate_kept_aside_clip(settings: KeptAsideSettings, index: int) -> KeptAsideClip:
    """Simulate clip ``index`` of a kept-aside family (no pixels are drawn until its frames are asked for)."""
    if not isinstance(settings, KeptAsideSettings):
        raise TypeError(f"settings must be KeptAsideSettings, got {type(settings).__name__}")
    if not 0 <= index < settings.num_clips:
        raise ValueError(f"index must be in [0, {settings.num_clips}), got {index}")
    rng = np.random.default_rng([settings.seed, 1000 + KEPT_ASIDE_TASKS.index(settings.task), index])
    num_frames = int(rng.integers(settings.min_frames, settings.max_frames + 1))
    background = task_background(rng, settings.height, settings.width)
    objects, label, cue = _objects(rng, settings, num_frames)
    occluders = _occluders(rng, settings, num_frames)
    back_and_forth = settings.task in OCCLUDED_KEPT_ASIDE_TASKS
    gaze, gaze_type, fixated = simulate_task_gaze(rng, objects, num_frames, settings.fps, back_and_forth)
    return KeptAsideClip(
        clip_id=f"{settings.task}_{settings.seed}_{index:05d}",
        task=settings.task,
        label=label,
        width=settings.width,
        height=settings.height,
        fps=float(settings.fps),
        background=background,
        objects=objects,
        occluders=occluders,
        cue=cue,
        gaze=gaze,
        gaze_type=gaze_type,
        fixated=fixated,
        flash=_flashes(rng, settings, num_frames),
    )


__all__ = [
    "KEPT_ASIDE_TASKS",
    "OCCLUDED_KEPT_ASIDE_TASKS",
    "KeptAsideSettings",
    "KeptAsideClip",
    "generate_kept_aside_clip",
    "bounce",
    "FLASH_COLOR",
    "FLASH_FRAMES",
    "FLASH_INTERVAL_FRAMES",
    "NEAR_SHADES",
    "FAST_SPEED",
    "SLOW_WANDER",
    "PANEL_SPEED",
    "CUE_CENTRES",
    "CUE_HALF_SIZE",
]
