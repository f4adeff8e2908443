"""Synthetic grounding tasks: clips whose gaze target is decided by what the frames show, one documented rule each.

A ladder for finding out whether (and from what) a model reads the video (grounding). Every clip shows a still,
softly textured surface with a few moving objects (drawn flat with ``data.synthetic.scene``'s waves, paths and shapes);
the gaze is a fixation/saccade process (``data.synthetic.gaze.walk_fixations`` with :data:`TASK_WALK`) that follows
one *target* object most of the time. What makes an object the target is the task's rule:

=======================  =============================================================================================
task                     rule (what a model must read to find the target)
=======================  =============================================================================================
``moving_object``        rung 1: the only moving object; the others (same colour and shape) stand still.
``fixed_colour``         rung 2: the red object among distractors of other colours (red is the target in every clip).
``colour_cue``           rung 3: a cue square in the top-left corner shows a colour; the target is the object of that
                         colour among 3-4 objects of distinct colours (the colours change from clip to clip).
``colour_cue_occluded``  rung 4: ``colour_cue`` plus grey bars drifting over the scene (they hide objects, the
                         target too) and more saccades away from the target, each followed by a saccade back.
``shape_cue``            a held-out task (not used to choose settings): the cue shows a shape; the objects share one
                         colour and have distinct shapes; the target is the object of the cue's shape.
``corner_colour_cue``    a second held-out task (added after ``shape_cue`` had been scored once, and not used to
                         choose settings either): a cue disc in the *bottom-right* corner shows a colour; the target
                         is the object of that colour among 3-4 objects of distinct colours *and* random shapes.
``occluded_corner_cue``  a third held-out task (added after the horizontal-flip augmentation was chosen, to check the
                         recipe once more): a cue *diamond* in the *top-right* corner shows a colour; the target is the
                         object of that colour among 3-4 objects of distinct colours and random shapes, with the
                         occluder bars and the saccades away and back of ``colour_cue_occluded``.
``stripe_cue``           a fourth held-out task, added after trial starts were chosen, never used to choose settings:
                         a cue *stripe* (a horizontal bar, about 3 times as long as it is tall) in the *bottom-left*
                         corner shows a colour; the target is the object of that colour among 3-5 objects (one more
                         than the other tasks' 3-4: ``max_objects + 1``) of distinct colours and random shapes, with
                         the occluder bars and the saccades away and back of ``colour_cue_occluded``.
``blinking_cue``         a held-out family with an *intermittent* cue: a cue square at the *top centre* shows the
                         target's colour in some frames only (shown for 4-12 frames, then only its dark empty frame for
                         4-12 frames, and so on, with a random phase per clip), among 3-4 objects of distinct colours
                         and random shapes, with the occluder bars and the saccades away and back of
                         ``colour_cue_occluded``.
``ring_cue``             a held-out family with a cue *of another kind*: no corner patch, but a still *ring* in the
                         target's colour lying on the surface at a place that changes from clip to clip (anywhere
                         along the top or bottom margin), among 3-4 moving objects of distinct colours and random
                         shapes: the cue has to be found by what it looks like, not by where it is.
=======================  =============================================================================================

Everything is in unit coordinates of the frame (``geometry``: ``(0, 0)`` top-left, ``(1, 1)`` bottom-right) and
fully determined by ``(settings, clip index)``.

The gaze process (all tasks): a sequence of fixations joined by saccades.

* Fixation anchor: the target with probability :data:`TARGET_PROBABILITY` (the tasks of :data:`OCCLUDED_TASKS`:
  every fixation away from the target is followed by one on the target); otherwise another object (2/3) or a still
  point on the surface (1/3). A fixation on an object follows it (smooth pursuit).
* Fixation duration: log-normal, median 0.40 s on the target and 0.25 s elsewhere (sigma 0.45 in log space), at
  least 2 frames. Within a fixation: a landing error N(0, 0.012) per axis, a drift (random walk, 0.0012 per frame
  per axis) and a jitter N(0, 0.0008).
* Saccade: the main sequence, duration ``21 ms + 2.2 ms/deg * amplitude`` over a :data:`FIELD_OF_VIEW_DEG` wide
  frame, at least one frame, minimum-jerk profile; its frames are coded 2 (saccade), fixation frames 1.
* Blinks: :data:`BLINK_RATE_HZ` per second, 2-3 frames each, coded 3 (invalid), holding the last point.

:func:`simulate_fixation_saccade` is the same kind of process with no scene at all (fixations that drift in place):
the known truth of the pure-dynamics probe, ``examples/dynamics_probe.py``.

Writers: :func:`write_task_egtea_layout` writes a task's clips in the raw EGTEA Gaze+ layout (the EGTEA builder
reads them; one gaze sample per frame), so ``examples/train.py --dataset_name egtea`` and ``examples/evaluate.py``
run on them unchanged. Task families kept aside from choosing training settings: ``data.synthetic_tasks_kept_aside``.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from .egtea_format import (
    BEGAZE_EVENTS,
    BEGAZE_FPS,
    BEGAZE_HEIGHT,
    BEGAZE_WIDTH,
    begaze_lines,
    begaze_time_us,
    egtea_clip_name_at,
)
from .gaze_types import BLINK_OR_OTHER
from .synthetic.egtea_layout import write_split_and_index_files
from .synthetic.gaze import FixationWalk, drifting_fixation, fixation_frames, saccade_path, walk_fixations
from .synthetic.scene import (
    TASK_COLOR_NAMES,
    TASK_COLORS,
    TASK_SHAPES,
    SceneObject,
    paint_shape,
    place_apart,
    smooth_path,
    surface_waves,
)
from .video import write_video

TASK_NAMES: tuple[str, ...] = (
    "moving_object",
    "fixed_colour",
    "colour_cue",
    "colour_cue_occluded",
    "shape_cue",
    "corner_colour_cue",
    "occluded_corner_cue",
    "stripe_cue",
    "blinking_cue",
    "ring_cue",
)
LADDER: tuple[str, ...] = TASK_NAMES[:4]
"""The four rungs, easiest first; ``shape_cue``, ``corner_colour_cue``, ``occluded_corner_cue``, ``stripe_cue``,
``blinking_cue`` and ``ring_cue`` are kept apart as held-out tasks."""
OCCLUDED_TASKS: tuple[str, ...] = ("colour_cue_occluded", "occluded_corner_cue", "stripe_cue", "blinking_cue")
"""Tasks with occluder bars and a saccade back to the target after every fixation away from it."""

OBJECT_COLORS: tuple[tuple[int, int, int], ...] = TASK_COLORS[:6]
"""The objects' colours: the first six of the ``synthetic_gaze`` scenes' task colours (red, green, blue, yellow,
magenta, cyan)."""
OBJECT_COLOR_NAMES: tuple[str, ...] = TASK_COLOR_NAMES[:6]
SHAPES: tuple[str, ...] = TASK_SHAPES
OCCLUDER_COLOR = (128, 128, 128)
FIELD_OF_VIEW_DEG = 60.0
TARGET_PROBABILITY = 0.8
BLINK_RATE_HZ = 0.2
TASK_WALK = FixationWalk(
    median_s=(0.40, 0.25), duration_sigma=0.45, landing_sigma=0.012, drift_sigma=0.0012, jitter_sigma=0.0008
)
"""The tasks' fixation/saccade walk (``data.synthetic.gaze.walk_fixations``, the module docstring's numbers)."""
CUE_CENTRE = (0.07, 0.09)
CORNER_CUE_CENTRE = (0.93, 0.91)
TOP_RIGHT_CUE_CENTRE = (0.93, 0.09)
BOTTOM_LEFT_CUE_CENTRE = (0.08, 0.91)
TOP_CENTRE_CUE_CENTRE = (0.5, 0.08)
CUE_CENTRES = {
    "corner_colour_cue": CORNER_CUE_CENTRE,
    "occluded_corner_cue": TOP_RIGHT_CUE_CENTRE,
    "stripe_cue": BOTTOM_LEFT_CUE_CENTRE,
    "blinking_cue": TOP_CENTRE_CUE_CENTRE,
}
"""Where a task's cue sits when not at :data:`CUE_CENTRE` (top-left); ``ring_cue``'s place is drawn per clip
(``TaskClip.cue_centre``)."""
CUE_HALF_SIZE = 0.045
STRIPE_HALF_SIZE = (0.06, 0.02)
"""Half length and half height of ``stripe_cue``'s cue bar, in frame widths (a 15 x 5 pixel bar at 128 x 96)."""
CUE_GLYPHS = {
    "corner_colour_cue": "disc",
    "occluded_corner_cue": "diamond",
    "stripe_cue": "stripe",
    "blinking_cue": "square",
    "ring_cue": "ring",
}
"""The glyph of a colour cue task's cue (objects of random shapes)."""
CUE_PHASE_FRAMES = (4, 12)
"""``blinking_cue``: the cue is shown, then hidden, for a uniform 4-12 frames each time (both ends included)."""
RING_RADII = (0.065, 0.03)
"""``ring_cue``: outer and inner radius of the cue ring, in frame widths (8 and 4 pixels at 128 x 96; an object's
radius is 0.06-0.075); its centre is
drawn per clip, x uniform in [0.1, 0.9] and y 0.07 (top margin) or 0.93 (bottom margin)."""
EXTRA_OBJECTS = {"stripe_cue": 1}
"""Objects a task may draw beyond ``settings.max_objects`` (``stripe_cue``: ``min_objects`` to ``max_objects + 1``)."""


@dataclass(frozen=True)
class GroundingTaskSettings:
    """Everything that determines a task's clips (equal settings give identical clips).

    A clip has ``min_objects`` to ``max_objects`` objects, one more at most for the tasks of :data:`EXTRA_OBJECTS`
    (``stripe_cue``: 3-5 at the defaults). ``TASKS`` are the families these settings draw (:meth:`generate_clip`).
    """

    TASKS: ClassVar[tuple[str, ...]] = TASK_NAMES
    task: str = "colour_cue"
    num_clips: int = 200
    min_frames: int = 48
    max_frames: int = 96
    width: int = 128
    height: int = 96
    fps: float = 24.0
    seed: int = 0
    min_objects: int = 3
    max_objects: int = 4
    test_fraction: float = 0.2

    def __post_init__(self) -> None:
        if self.task not in self.TASKS:
            raise ValueError(f"task must be one of {self.TASKS}, got {self.task!r}")
        for name, minimum in (
            ("num_clips", 1),
            ("min_frames", 2),
            ("max_frames", 2),
            ("width", 16),
            ("height", 16),
            ("seed", 0),
            ("min_objects", 2),
            ("max_objects", 2),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
                raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
        if self.max_frames < self.min_frames:
            raise ValueError(f"max_frames ({self.max_frames}) must be >= min_frames ({self.min_frames})")
        if self.max_objects < self.min_objects or self.max_objects > len(SHAPES):
            raise ValueError(
                f"need min_objects <= max_objects <= {len(SHAPES)}, got {self.min_objects}, {self.max_objects}"
            )
        if not (isinstance(self.fps, (int, float)) and self.fps > 0):
            raise ValueError(f"fps must be a positive number, got {self.fps!r}")
        if not 0 <= self.test_fraction < 1:
            raise ValueError(f"test_fraction must be in [0, 1), got {self.test_fraction!r}")

    def generate_clip(self, index: int) -> TaskClip:
        return generate_task_clip(self, index)

    def label_names(self) -> tuple[str, ...]:
        """What a clip's ``label`` names, by label (the EGTEA layout's action names)."""
        return SHAPES if self.task == "shape_cue" else OBJECT_COLOR_NAMES


@dataclass(frozen=True)
class TaskClip:
    """One clip of a grounding task: its scene (drawn on demand by :meth:`frames`) and its gaze.

    ``objects[0]`` is the target; ``label`` is what the cue names (a colour index for the colour tasks, a shape index
    for ``shape_cue``, 0 otherwise); ``fixated`` is, per frame, the index of the object the gaze serves (-1: a point
    on the surface or a saccade). ``cue_visible`` (``blinking_cue``, else None: always shown) and ``cue_centre``
    (``ring_cue``, else None: the task's fixed place) are the cue's own schedule and place.
    """

    clip_id: str
    task: str
    label: int
    width: int
    height: int
    fps: float
    background: np.ndarray  # float32 [H, W, 3]
    objects: tuple[SceneObject, ...]
    occluders: tuple[np.ndarray, ...]  # each [T, 4]: x0, y0, x1, y1 (unit) of a bar drawn over the objects
    cue: tuple[str, tuple[int, int, int]] | None  # (shape, colour) of the cue glyph, or None
    gaze: np.ndarray  # float32 [T, 2]
    gaze_type: np.ndarray  # int8 [T]: 1 fixation, 2 saccade, 3 blink
    fixated: np.ndarray  # int16 [T]
    cue_visible: np.ndarray | None = None  # bool [T] (``blinking_cue``): whether the cue shows its colour in frame t
    cue_centre: tuple[float, float] | None = None  # (x, y) unit, where the cue is drawn when not the task's fixed place

    @property
    def num_frames(self) -> int:
        return int(self.gaze.shape[0])

    @property
    def target(self) -> SceneObject:
        return self.objects[0]

    def frame(self, t: int) -> np.ndarray:
        return render_task_frame(self, t)

    def frames(self):
        for t in range(self.num_frames):
            yield self.frame(t)

    def render(self) -> np.ndarray:
        return np.stack(list(self.frames()))


# ---------------------------------------------------------------------------------------------------- scene


def task_background(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A still, low-contrast surface: a muted base colour, smooth waves and fine grain."""
    base = rng.uniform(110, 170, 3).astype(np.float32)
    _, _, waves = surface_waves(rng, height, width, count=3)
    texture = base * (1 + 0.08 * waves[..., None]) + rng.normal(0, 4, (height, width, 3))
    return np.clip(texture, 0, 255).astype(np.float32)


def _objects(
    rng: np.random.Generator, settings: GroundingTaskSettings, num_frames: int
) -> tuple[tuple[SceneObject, ...], int, tuple[str, tuple[int, int, int]] | None]:
    """The task's objects (target first), the cue's label and the cue glyph."""
    task = settings.task
    count = int(rng.integers(settings.min_objects, settings.max_objects + 1 + EXTRA_OBJECTS.get(task, 0)))
    homes = place_apart(rng, [], count, (0.2, 0.22), (0.82, 0.8), min_distance=0.22, attempts=50)  # away from cues
    label, cue = 0, None
    if task == "moving_object":
        shape, color = SHAPES[int(rng.integers(len(SHAPES)))], OBJECT_COLORS[int(rng.integers(len(OBJECT_COLORS)))]
        looks = [(shape, color)] * count
    elif task == "fixed_colour":
        others = rng.permutation(np.arange(1, len(OBJECT_COLORS)))[: count - 1]
        looks = [(SHAPES[int(rng.integers(len(SHAPES)))], OBJECT_COLORS[i]) for i in [0, *others]]
    elif task in ("colour_cue", "colour_cue_occluded"):
        colors = rng.permutation(len(OBJECT_COLORS))[:count]
        shape = SHAPES[int(rng.integers(len(SHAPES)))]
        looks = [(shape, OBJECT_COLORS[i]) for i in colors]
        label, cue = int(colors[0]), ("square", OBJECT_COLORS[int(colors[0])])
    elif task in CUE_GLYPHS:  # corner_colour_cue, occluded_corner_cue, stripe_cue
        colors = rng.permutation(len(OBJECT_COLORS))[:count]
        looks = [(SHAPES[int(rng.integers(len(SHAPES)))], OBJECT_COLORS[i]) for i in colors]
        label, cue = int(colors[0]), (CUE_GLYPHS[task], OBJECT_COLORS[int(colors[0])])
    else:  # shape_cue
        shapes = rng.permutation(len(SHAPES))[:count]
        color = OBJECT_COLORS[int(rng.integers(len(OBJECT_COLORS)))]
        looks = [(SHAPES[i], color) for i in shapes]
        label, cue = int(shapes[0]), (SHAPES[int(shapes[0])], (245, 245, 245))
    objects = []
    for k, ((shape, color), home) in enumerate(zip(looks, homes)):
        still = task == "moving_object" and k > 0
        path = np.zeros((num_frames, 2)) if still else smooth_path(rng, num_frames, settings.fps, 0.08, (0.08, 0.35))
        track = np.clip(home + path, 0.1, 0.9)
        spin = 0.0 if still else rng.normal(0, 0.5)
        angle = rng.uniform(0, 2 * np.pi) + spin * np.arange(num_frames) / settings.fps
        objects.append(SceneObject(shape, color, float(rng.uniform(0.06, 0.075)), track, angle))
    return tuple(objects), label, cue


def _occluders(rng: np.random.Generator, settings: GroundingTaskSettings, num_frames: int) -> tuple[np.ndarray, ...]:
    """:data:`OCCLUDED_TASKS`: 1-2 vertical grey bars (0.08-0.12 wide) sweeping across the frame."""
    if settings.task not in OCCLUDED_TASKS:
        return ()
    bars = []
    for _ in range(int(rng.integers(1, 3))):
        half = rng.uniform(0.04, 0.06)
        speed = rng.choice([-1, 1]) * rng.uniform(0.15, 0.35) / settings.fps  # frame widths per frame
        x = rng.uniform(0.15, 0.85) + speed * np.arange(num_frames)
        x = 0.15 + np.abs((x - 0.15) % 1.4 - 0.7)  # bounce between 0.15 and 0.85
        bars.append(np.stack([x - half, np.full(num_frames, 0.18), x + half, np.full(num_frames, 1.0)], axis=1))
    return tuple(bars)


def _cue_schedule(
    rng: np.random.Generator, settings: GroundingTaskSettings, num_frames: int
) -> tuple[np.ndarray | None, tuple[float, float] | None]:
    """The cue's visibility per frame (``blinking_cue``: shown and hidden in turns of :data:`CUE_PHASE_FRAMES`
    frames, starting in a random phase) and its place (``ring_cue``: see :data:`RING_RADII`); None for the tasks
    whose cue is always shown at a fixed place. Draws nothing for the other tasks."""
    if settings.task == "blinking_cue":
        visible = np.zeros(num_frames, bool)
        shown, t = bool(rng.random() < 0.5), 0
        low, high = CUE_PHASE_FRAMES
        while t < num_frames:
            length = int(rng.integers(low, high + 1))
            visible[t : t + length] = shown
            shown, t = not shown, t + length
        return visible, None
    if settings.task == "ring_cue":
        return None, (float(rng.uniform(0.1, 0.9)), 0.07 if rng.random() < 0.5 else 0.93)
    return None, None


# ---------------------------------------------------------------------------------------------------- gaze
def saccade_frames(amplitude: float, fps: float) -> int:
    """Frames a saccade of ``amplitude`` (unit widths) lasts by the main sequence, ``21 ms + 2.2 ms/deg``, >= 1."""
    duration_ms = 21.0 + 2.2 * amplitude * FIELD_OF_VIEW_DEG
    return max(1, int(round(duration_ms * fps / 1000.0)))


def simulate_task_gaze(
    rng: np.random.Generator,
    objects: tuple[SceneObject, ...],
    num_frames: int,
    fps: float,
    back_and_forth: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gaze ``[T, 2]``, type ``[T]`` and fixated object ``[T]`` over the objects (the module docstring's process:
    :data:`TASK_WALK` over the anchors :data:`TARGET_PROBABILITY` chooses, main-sequence saccades, then blinks)."""

    def choose_anchor(previous: int | None) -> tuple[np.ndarray, int]:
        away = previous is not None and previous != 0
        if (away and back_and_forth) or rng.random() < TARGET_PROBABILITY:
            return objects[0].track, 0
        if len(objects) > 1 and rng.random() < 2 / 3:
            index = 1 + int(rng.integers(len(objects) - 1))
            return objects[index].track, index
        return np.tile(rng.uniform(0.15, 0.85, 2), (num_frames, 1)), -1

    gaze, gaze_type, fixated = walk_fixations(
        rng, num_frames, fps, TASK_WALK, choose_anchor, lambda amplitude: saccade_frames(amplitude, fps)
    )
    gaze = np.clip(gaze, 0.01, 0.99)
    for _ in range(int(rng.poisson(BLINK_RATE_HZ * num_frames / fps))):
        first = int(rng.integers(1, num_frames))
        last = min(num_frames, first + int(rng.integers(2, 4)))
        gaze_type[first:last] = BLINK_OR_OTHER
        gaze[first:last] = gaze[first - 1]
    return gaze.astype(np.float32), gaze_type, fixated


FIXATION_MEDIAN_S = 0.25
"""Median fixation duration of :func:`simulate_fixation_saccade` (log-normal, sigma 0.5 in log space)."""
SACCADE_MEDIAN_AMPLITUDE = 0.12
"""Median saccade amplitude of :func:`simulate_fixation_saccade` (log-normal, sigma 0.6), in frame widths."""
FIXATION_DRIFT = 0.0015
FIXATION_JITTER = 0.0008


def simulate_fixation_saccade(
    rng: np.random.Generator, num_windows: int, num_frames: int, fps: float = 24.0
) -> np.ndarray:
    """Windows ``[n, T, 2]`` (unit coordinates) of a pure fixation/saccade process, with no scene at all: the
    known truth of the pure-dynamics probe (``examples/dynamics_probe.py``).

    Each window starts at a uniform point of ``[0.2, 0.8]^2`` inside a fixation already under way (a uniform part of
    its duration is left). A fixation lasts a log-normal time (median :data:`FIXATION_MEDIAN_S`, sigma 0.5, at least
    2 frames) and drifts: a random walk of :data:`FIXATION_DRIFT` per frame and axis plus a jitter of
    :data:`FIXATION_JITTER` per frame and axis. A saccade follows: a log-normal amplitude (median
    :data:`SACCADE_MEDIAN_AMPLITUDE`, sigma 0.6, within ``[0.03, 0.5]``) in a uniform direction, its end kept within
    ``[0.05, 0.95]``; its duration is the main sequence (:func:`saccade_frames`) and its frames follow a minimum-jerk
    profile. At 24 fps the median step (a fixation frame) is about 0.0029 frame widths, the mean about 0.02.
    """
    if isinstance(num_windows, bool) or not isinstance(num_windows, (int, np.integer)) or num_windows < 0:
        raise ValueError(f"num_windows must be an int >= 0, got {num_windows!r}")
    if isinstance(num_frames, bool) or not isinstance(num_frames, (int, np.integer)) or num_frames < 2:
        raise ValueError(f"num_frames must be an int >= 2, got {num_frames!r}")
    out = np.empty((num_windows, num_frames, 2))
    for window in range(num_windows):
        position = rng.uniform(0.2, 0.8, 2)
        points: list[np.ndarray] = []
        first = True
        while len(points) < num_frames:
            duration = fixation_frames(rng, fps, FIXATION_MEDIAN_S, 0.5)
            if first:
                duration, first = int(rng.integers(1, duration + 1)), False
            fixation, drift = drifting_fixation(rng, position, duration, FIXATION_DRIFT, FIXATION_JITTER)
            points.extend(fixation)
            position = position + drift[-1]
            amplitude = float(np.clip(SACCADE_MEDIAN_AMPLITUDE * math.exp(rng.normal(0, 0.6)), 0.03, 0.5))
            angle = rng.uniform(0, 2 * math.pi)
            target = np.clip(position + amplitude * np.array([math.cos(angle), math.sin(angle)]), 0.05, 0.95)
            points.extend(saccade_path(position, target, saccade_frames(float(np.linalg.norm(target - position)), fps)))
            position = target
        out[window] = np.asarray(points[:num_frames])
    return out


# ---------------------------------------------------------------------------------------------------- clips
def clip_split(settings: GroundingTaskSettings, index: int) -> str:
    """``"test"`` for a seeded ``test_fraction`` of the clips (at least one when there are 3 or more), else train."""
    order = np.random.default_rng([settings.seed, 1 << 20]).permutation(settings.num_clips)
    num_test = int(round(settings.test_fraction * settings.num_clips))
    if settings.num_clips >= 3 and settings.test_fraction > 0:
        num_test = max(num_test, 1)
    return "test" if index in set(order[:num_test].tolist()) else "train"


def generate_task_clip(settings: GroundingTaskSettings, index: int) -> TaskClip:
    """Simulate clip ``index`` of a task (no pixels are drawn until its frames are asked for)."""
    if not 0 <= index < settings.num_clips:
        raise ValueError(f"index must be in [0, {settings.num_clips}), got {index}")
    rng = np.random.default_rng([settings.seed, TASK_NAMES.index(settings.task), index])
    num_frames = int(rng.integers(settings.min_frames, settings.max_frames + 1))
    background = task_background(rng, settings.height, settings.width)
    objects, label, cue = _objects(rng, settings, num_frames)
    occluders = _occluders(rng, settings, num_frames)
    gaze, gaze_type, fixated = simulate_task_gaze(
        rng, objects, num_frames, settings.fps, back_and_forth=settings.task in OCCLUDED_TASKS
    )
    cue_visible, cue_centre = _cue_schedule(rng, settings, num_frames)
    return TaskClip(
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
        cue_visible=cue_visible,
        cue_centre=cue_centre,
    )


# ---------------------------------------------------------------------------------------------------- drawing
def paint_flat_shape(
    frame: np.ndarray, cx: float, cy: float, shape: str, radius: float, angle: float, color: tuple[int, int, int]
) -> None:
    """Draw a shape centred at pixel ``(cx, cy)`` flat (no light from above, unlike the ``synthetic_gaze`` scenes),
    with the scenes' outline and edge (``scene.paint_shape``), in a box reaching 2 pixels beyond ``radius`` to the
    top/left and 3 (exclusive) to the bottom/right; ``"ring"`` is ``ring_cue``'s cue ring, its inner radius
    :data:`RING_RADII`'s ratio of ``radius``."""
    height, width = frame.shape[:2]
    x0, x1 = max(int(cx - radius - 2), 0), min(int(cx + radius + 3), width)
    y0, y1 = max(int(cy - radius - 2), 0), min(int(cy + radius + 3), height)
    if x0 >= x1 or y0 >= y1:
        return
    ys, xs = np.mgrid[y0:y1, x0:x1].astype(np.float32) + 0.5
    inner = RING_RADII[1] / RING_RADII[0] * radius if shape == "ring" else 0.0
    box = ((slice(y0, y1), slice(x0, x1)), xs, ys)
    paint_shape(frame, box, cx, cy, shape, radius, angle, color, shading=0.0, inner_radius=inner)


def render_task_frame(clip: TaskClip, t: int) -> np.ndarray:
    """Frame ``t`` of a clip as RGB uint8 ``[H, W, 3]``: surface, objects (target among them, in random order
    of drawing fixed per clip), occluder bars over them, then the cue (:func:`_draw_cue`; ``stripe_cue``: a bar of
    :data:`STRIPE_HALF_SIZE` in a frame of its own shape)."""
    width, height = clip.width, clip.height
    frame = clip.background.copy()
    for obj in clip.objects[::-1]:
        cx, cy = obj.track[t, 0] * width, obj.track[t, 1] * height
        paint_flat_shape(frame, cx, cy, obj.shape, obj.radius * width, float(obj.angle[t]), obj.color)
    for bar in clip.occluders:
        x0, y0, x1, y1 = bar[t]
        frame[int(y0 * height) : int(math.ceil(y1 * height)), max(int(x0 * width), 0) : int(math.ceil(x1 * width))] = (
            OCCLUDER_COLOR
        )
    if clip.cue is not None:
        _draw_cue(frame, clip, t)
    return np.clip(frame, 0, 255).astype(np.uint8)


def _draw_cue(frame: np.ndarray, clip: TaskClip, t: int) -> None:
    """The cue of frame ``t``: a glyph in a dark frame at the task's place (a frame 2 pixels wider than the glyph on
    every side; hidden frames of ``blinking_cue`` show the dark frame only), or ``ring_cue``'s ring on the surface."""
    height, width = frame.shape[:2]
    shape, color = clip.cue
    centre = clip.cue_centre or CUE_CENTRES.get(clip.task, CUE_CENTRE)
    cx, cy = centre[0] * width, centre[1] * height
    if shape == "ring":
        paint_flat_shape(frame, cx, cy, "ring", RING_RADII[0] * width, 0.0, color)
        return
    half = CUE_HALF_SIZE * width
    hx, hy = (STRIPE_HALF_SIZE[0] * width, STRIPE_HALF_SIZE[1] * width) if shape == "stripe" else (half, half)
    frame[max(int(cy - hy - 2), 0) : int(cy + hy + 2), max(int(cx - hx - 2), 0) : int(cx + hx + 2)] = 25.0
    if clip.cue_visible is not None and not clip.cue_visible[t]:
        return
    if shape in ("square", "stripe"):
        frame[int(cy - hy) : int(cy + hy), int(cx - hx) : int(cx + hx)] = color
    else:
        paint_flat_shape(frame, cx, cy, shape, half * 1.25, 0.0, color)


# ---------------------------------------------------------------------------------------------------- writers
EGTEA_SESSION_CLIPS = 4


def write_task_egtea_layout(out_dir: str | os.PathLike, settings: GroundingTaskSettings) -> list[TaskClip]:
    """Write a task's clips in the raw EGTEA Gaze+ layout (``cropped_clips/``, ``gaze_data/``, ``train_split1.txt``,
    ``test_split1.txt``, ``action_idx.txt``), readable by the EGTEA builder with its default options.

    Sessions of :data:`EGTEA_SESSION_CLIPS` clips, each clip's F numbers following the previous one's; one BeGaze
    sample per frame (``Fixation``/``Saccade``/``Blink`` rows, pixels of the 1280x960 gaze space); a clip's action
    is its cue label + 1 (1-based, as in the split files). ``settings.fps`` must be 24 (EGTEA's frame axis).
    Returns the clips in index order.
    """
    if settings.fps != BEGAZE_FPS:
        raise ValueError(
            f"settings.fps must be 24 for the EGTEA layout (its F numbers count 24 fps frames), got {settings.fps}"
        )
    out_dir = Path(out_dir)
    if (out_dir / "train_split1.txt").exists():
        raise FileExistsError(f"{out_dir} already holds an EGTEA layout (train_split1.txt); use an empty folder")
    clips, lines = [], {"train": [], "test": []}
    header = ["## Sample Rate:\t24", f"## Calibration Area:\t{BEGAZE_WIDTH}\t{BEGAZE_HEIGHT}"]
    header.append("## Format:\tTime Type Trial X Y Frame Event")
    for first in range(0, settings.num_clips, EGTEA_SESSION_CLIPS):
        session = f"OP{first // EGTEA_SESSION_CLIPS + 1:02d}-R01-{settings.task.replace('_', '')}"
        rows, cursor = [], 1
        for index in range(first, min(first + EGTEA_SESSION_CLIPS, settings.num_clips)):
            clip = settings.generate_clip(index)
            f_start, f_end = cursor + 5, cursor + 5 + clip.num_frames - 1
            name = egtea_clip_name_at(session, f_start, f_end)
            write_video(out_dir / "cropped_clips" / session / f"{name}.mp4", clip.frames(), fps=24)
            pixels = clip.gaze.astype(np.float64) * np.array([BEGAZE_WIDTH, BEGAZE_HEIGHT])
            for k, frame in enumerate(range(f_start - 1, f_end)):
                event = BEGAZE_EVENTS[int(clip.gaze_type[k])]
                rows.append((begaze_time_us(frame), float(pixels[k, 0]), float(pixels[k, 1]), frame, event))
            lines[clip_split(settings, index)].append(f"{name} {clip.label + 1} {clip.label + 1} {clip.label + 1}")
            clips.append(clip)
            cursor = f_end + 1
        (out_dir / "gaze_data").mkdir(parents=True, exist_ok=True)
        (out_dir / "gaze_data" / f"{session}.txt").write_text(
            "\n".join(begaze_lines(rows, fmt=1, header=header)) + "\n", encoding="utf-8"
        )
    names = [f"look at {label}" for label in settings.label_names()]
    write_split_and_index_files(out_dir, lines, {kind: names for kind in ("action", "verb", "noun")})
    return clips


__all__ = [
    "TASK_NAMES",
    "LADDER",
    "OCCLUDED_TASKS",
    "GroundingTaskSettings",
    "TaskClip",
    "generate_task_clip",
    "render_task_frame",
    "simulate_task_gaze",
    "simulate_fixation_saccade",
    "saccade_frames",
    "clip_split",
    "write_task_egtea_layout",
    "CUE_PHASE_FRAMES",
    "RING_RADII",
]
