"""Human-like synthetic gaze over a simulated scene: fixations that track an object with drift and jitter, saccades
over 2-4 frames with a minimum-jerk profile, blinks and untracked runs (invalid), off-frame glances (clamped).

The gaze mostly serves the task's target object (``Scene.objects[0]``); the rest of the time it visits distractors, the
hands, the surface, or leaves the frame. Codes follow the unified example schema: 0 untracked, 1 fixation, 2 saccade, 3
blink/other, 4 off-frame (clamped); ``valid`` = not untracked and not blink (both defined in ``data.gaze_types`` only).
Coordinates are unit ``[0, 1]``; a blink reports the last tracked position, and untracked frames follow the builders'
rule (:func:`~transformers_gazeflow.data.gaze_common.fill_untracked`: the last valid point is held), so no step is
invented by missing samples.

The fixation/saccade walk itself (:func:`walk_fixations` with a :class:`FixationWalk` of constants, and its pieces
:func:`fixation_frames`, :func:`drifting_fixation`, :func:`saccade_path`) is also the gaze of ``data.synthetic_tasks``'
grounding tasks, with their own constants and saccade lengths.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ...models.gazeflow.geometry import clamp_unit
from ..gaze_common import fill_untracked
from ..gaze_types import BLINK_OR_OTHER, FIXATION, OFF_FRAME, SACCADE, UNTRACKED, valid_mask
from .scene import Scene

# where a fixation goes: the task's target most of the time (what makes the task predictive of gaze)
FIXATION_CHOICES: dict[str, float] = {
    "target": 0.72,
    "distractor": 0.12,
    "hand": 0.06,
    "surface": 0.06,
    "off_frame": 0.04,
}
BLINK_RATE_HZ = 0.3
UNTRACKED_RATE_HZ = 0.15
MIN_SACCADE_AMPLITUDE = 0.025  # smaller re-fixations are folded into the drift (no saccade frames)


@dataclass(frozen=True)
class SimulatedGaze:
    """Simulated per-frame gaze of one synthetic clip (a real recording's parsed gaze is ``gaze_common.GazeTrack``).

    ``gaze`` is clamped to the frame, ``gaze_raw`` is the unclamped point (what an eye tracker reports, used by the
    EGTEA-layout writer), ``motion`` the eye movement before blinks/tracking losses are overlaid (1 fixation,
    2 saccade), ``fixated`` the index of the scene object being fixated (-1 for hands, surface, off-frame or a
    saccade).
    """

    gaze: np.ndarray  # float32 [T, 2]
    gaze_raw: np.ndarray  # float32 [T, 2]
    gaze_type: np.ndarray  # int8 [T]
    motion: np.ndarray  # int8 [T]
    fixated: np.ndarray  # int16 [T]

    @property
    def valid(self) -> np.ndarray:
        """bool [T]: the frame enters the loss (:func:`~transformers_gazeflow.data.gaze_types.valid_mask` of
        ``gaze_type``)."""
        return valid_mask(self.gaze_type)


@dataclass(frozen=True)
class FixationWalk:
    """The constants of a fixation/saccade walk over anchors (:func:`walk_fixations`), the gaze process both synthetic
    generators run (this module's scenes and ``data.synthetic_tasks``' grounding tasks, with their own constants).

    A fixation lasts a log-normal time (median ``median_s[0]`` s on the target, ``median_s[1]`` s elsewhere, sigma
    ``duration_sigma`` in log space, at least 2 frames), lands with an error N(0, ``landing_sigma``) per axis, drifts
    (a random walk of N(0, ``drift_sigma``) per frame and axis) and jitters (N(0, ``jitter_sigma``) per frame and
    axis); a saccade (minimum-jerk profile, :func:`saccade_path`) leads to it from the previous point.
    """

    median_s: tuple[float, float]
    duration_sigma: float
    landing_sigma: float
    drift_sigma: float
    jitter_sigma: float


SCENE_WALK = FixationWalk(
    median_s=(0.55, 0.28), duration_sigma=0.45, landing_sigma=0.015, drift_sigma=0.0015, jitter_sigma=0.001
)
"""The walk over a simulated scene: a median fixation of about 0.3 s, longer (pursuit-like) on the target."""


def min_jerk(u: np.ndarray) -> np.ndarray:
    """The minimum-jerk profile ``10 u^3 - 15 u^4 + 6 u^5`` of a movement's progress ``u`` in ``[0, 1]``."""
    return u**3 * (10 - 15 * u + 6 * u**2)


def saccade_path(start: np.ndarray, end: np.ndarray, steps: int) -> np.ndarray:
    """``[steps, 2]``: the points of a saccade of ``steps`` frames from ``start`` to ``end`` (a minimum-jerk profile,
    both ends left out)."""
    return start + (end - start) * min_jerk(np.arange(1, steps + 1) / (steps + 1))[:, None]


def fixation_frames(rng: np.random.Generator, fps: float, median_s: float, sigma: float) -> int:
    """A fixation's length in frames: log-normal, median ``median_s`` seconds, ``sigma`` in log space, at least 2."""
    return max(2, int(round(fps * median_s * math.exp(rng.normal(0, sigma)))))


def drifting_fixation(
    rng: np.random.Generator, centre: np.ndarray, length: int, drift_sigma: float, jitter_sigma: float
) -> tuple[np.ndarray, np.ndarray]:
    """``length`` fixation points around ``centre`` (``[2]`` or ``[length, 2]``): a random walk of
    N(0, ``drift_sigma``) steps plus a jitter of N(0, ``jitter_sigma``) per frame and axis. Returns the points and the
    walk ``[length, 2]``."""
    drift = np.cumsum(rng.normal(0, drift_sigma, (length, 2)), axis=0)
    return centre + drift + rng.normal(0, jitter_sigma, (length, 2)), drift


def walk_fixations(
    rng: np.random.Generator,
    num_frames: int,
    fps: float,
    walk: FixationWalk,
    choose_anchor: Callable[[int | None], tuple[np.ndarray, int]],
    saccade_frames: Callable[[float], int],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A sequence of fixations joined by saccades over ``num_frames`` frames (``walk``'s constants).

    ``choose_anchor(previous)`` picks what the next fixation follows (``previous``: the object index of the fixation
    before, None for the first): a track ``[T, 2]`` (unit) and its object index (0 the target, -1 no object).
    ``saccade_frames(amplitude)`` is the length in frames of a saccade of that amplitude (unit widths; 0: none, the
    re-fixation is folded into the drift). Returns the unclamped points ``[T, 2]`` (float64), the eye movement
    ``[T]`` (int8: :data:`FIXATION` or :data:`SACCADE`) and the fixated object ``[T]`` (int16, -1 for no object or a
    saccade).
    """
    raw = np.zeros((num_frames, 2))
    motion = np.full(num_frames, FIXATION, np.int8)
    fixated = np.full(num_frames, -1, np.int16)
    t, index = 0, None
    while t < num_frames:
        anchor, index = choose_anchor(index)
        median_s = walk.median_s[0] if index == 0 else walk.median_s[1]
        duration = fixation_frames(rng, fps, median_s, walk.duration_sigma)
        landing = rng.normal(0, walk.landing_sigma, 2)  # landing error of the saccade
        start = t
        steps = saccade_frames(float(np.linalg.norm(anchor[min(t, num_frames - 1)] + landing - raw[t - 1]))) if t else 0
        if steps:
            target = anchor[min(t + steps, num_frames - 1)] + landing
            frames = np.arange(t, min(t + steps, num_frames))
            raw[frames] = saccade_path(raw[t - 1], target, steps)[: len(frames)]
            motion[frames] = SACCADE
            start = t + steps
        stop = min(start + duration, num_frames)
        if start < stop:
            raw[start:stop], _ = drifting_fixation(
                rng, anchor[start:stop] + landing, stop - start, walk.drift_sigma, walk.jitter_sigma
            )
            motion[start:stop] = FIXATION
            fixated[start:stop] = index
        t = stop
    return raw, motion, fixated


def _choose_anchor(rng: np.random.Generator, scene: Scene) -> tuple[np.ndarray, int]:
    """Pick what the next fixation looks at: a track ``[T, 2]`` (unit) and the object index (-1 if no object)."""
    kinds = list(FIXATION_CHOICES)
    kind = kinds[rng.choice(len(kinds), p=np.array(list(FIXATION_CHOICES.values())))]
    num_frames = scene.num_frames
    if kind == "target":
        return scene.objects[0].track, 0
    if kind == "distractor" and len(scene.objects) > 1:
        index = 1 + int(rng.integers(len(scene.objects) - 1))
        return scene.objects[index].track, index
    if kind == "hand":
        return scene.hands[int(rng.integers(len(scene.hands)))], -1
    if kind == "off_frame":
        side = int(rng.integers(3))
        point = (
            [rng.uniform(-0.12, -0.03), rng.uniform(0.2, 0.9)]
            if side == 0
            else [rng.uniform(1.03, 1.12), rng.uniform(0.2, 0.9)]
            if side == 1
            else [rng.uniform(0.2, 0.8), rng.uniform(1.03, 1.1)]
        )
        return np.tile(point, (num_frames, 1)) - scene.camera + scene.camera[:1], -1
    point = rng.uniform([0.1, 0.1], [0.9, 0.9])  # a spot on the surface, fixed in the world
    return point - scene.camera + scene.camera[:1], -1


def _scene_saccade_frames(amplitude: float) -> int:
    """A saccade over a scene lasts 2-4 frames by its amplitude; below :data:`MIN_SACCADE_AMPLITUDE` there is none
    (the re-fixation is folded into the drift)."""
    if amplitude < MIN_SACCADE_AMPLITUDE:
        return 0
    return 2 if amplitude < 0.12 else 3 if amplitude < 0.3 else 4


def simulate_gaze(rng: np.random.Generator, scene: Scene, fps: float) -> SimulatedGaze:
    """Simulate the gaze of one clip over ``scene`` (see the module docstring for the model)."""
    num_frames = scene.num_frames
    raw, motion, fixated = walk_fixations(
        rng, num_frames, fps, SCENE_WALK, lambda previous: _choose_anchor(rng, scene), _scene_saccade_frames
    )
    gaze_type = motion.copy()
    gaze = np.asarray(clamp_unit(raw), np.float64)
    off = ((raw < 0) | (raw > 1)).any(axis=1)
    gaze_type[off] = OFF_FRAME
    for code, rate, lengths in ((UNTRACKED, UNTRACKED_RATE_HZ, (1, 6)), (BLINK_OR_OTHER, BLINK_RATE_HZ, (2, 4))):
        for _ in range(int(rng.poisson(rate * num_frames / fps))):
            first = int(rng.integers(num_frames))
            last = min(num_frames, first + int(rng.integers(lengths[0], lengths[1] + 1)))
            gaze_type[first:last] = code
    # a blink reports the last tracked point (raw too: the tracker sees nothing new); untracked frames have no sample
    # and take the coordinates every builder gives them (gaze_common.fill_untracked: the same held point where a
    # valid frame precedes them)
    for frame in np.flatnonzero(~valid_mask(gaze_type)):
        if frame > 0:
            gaze[frame] = gaze[frame - 1]
            raw[frame] = gaze[frame - 1]
    return SimulatedGaze(
        gaze=fill_untracked(gaze, gaze_type),
        gaze_raw=raw.astype(np.float32),
        gaze_type=gaze_type,
        motion=motion,
        fixated=fixated,
    )


__all__ = [
    "SimulatedGaze",
    "simulate_gaze",
    "FIXATION_CHOICES",
    "FixationWalk",
    "SCENE_WALK",
    "walk_fixations",
    "min_jerk",
    "saccade_path",
    "fixation_frames",
    "drifting_fixation",
]
