"""Procedural egocentric-like scenes: a textured work surface seen by a panning, shaking head camera, with moving
objects and hands reaching for them. Motion is simulated first (:func:`simulate_scene`, cheap, no pixels), frames
are drawn afterwards one at a time (:func:`render_frame`), so a long clip never needs all its frames in memory.

Every position is in **unit** coordinates of the frame (``geometry``): ``(0, 0)`` top-left, ``(1, 1)`` bottom-right,
pixel ``i`` covering ``[i, i + 1)``. Each task owns one *target* object whose colour and shape identify the task
(saturated colours, one per task); distractors are neutral (white, grey, brown, ...), so the object the gaze
serves is visible in the pixels and a model can learn it.

The surface's waves (:func:`surface_waves`), the objects' homes (:func:`place_apart`) and smooth paths
(:func:`smooth_path`), and their shapes and drawing (:func:`outline_distance`, :func:`paint_shape`) are also those
of ``data.synthetic_tasks``' grounding tasks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...models.gazeflow.geometry import unit_to_pixels

# one saturated colour and one shape per task (the task's "served" object); at most len(TASK_COLORS) tasks
TASK_COLORS: tuple[tuple[int, int, int], ...] = (
    (225, 35, 35),
    (35, 190, 60),
    (40, 90, 235),
    (240, 215, 30),
    (215, 45, 205),
    (30, 205, 215),
    (250, 130, 15),
    (125, 45, 190),
)
TASK_COLOR_NAMES: tuple[str, ...] = ("red", "green", "blue", "yellow", "magenta", "cyan", "orange", "purple")
SHAPES: tuple[str, ...] = ("disc", "square", "triangle", "diamond", "bar")
TASK_SHAPES: tuple[str, ...] = ("disc", "square", "triangle", "diamond")
DISTRACTOR_COLORS: tuple[tuple[int, int, int], ...] = (
    (240, 240, 235),
    (70, 70, 75),
    (135, 100, 70),
    (175, 175, 160),
    (20, 20, 25),
)
SURFACE_COLORS: tuple[tuple[int, int, int], ...] = ((150, 118, 85), (125, 125, 120), (190, 180, 160), (95, 85, 75))
SKIN_COLORS: tuple[tuple[int, int, int], ...] = ((225, 180, 150), (190, 140, 105), (140, 95, 70))
MAX_TASKS = len(TASK_COLORS)
HAND_RADIUS = 0.075  # in units of the frame width
OBJECT_SHADING = 0.15
"""Objects are lit from above: their colour times ``1 + 0.15`` at their top edge down to ``1 - 0.15`` at the bottom."""
OUTLINE_PX = 1.2
"""Width (pixels) of an object's dark outline, drawn at :data:`OUTLINE_SHADE` of its colour."""
OUTLINE_SHADE = 0.45


@dataclass(frozen=True)
class SceneObject:
    """One object: its look and its screen track (unit coords, ``[T, 2]``) and rotation (radians, ``[T]``)."""

    shape: str
    color: tuple[int, int, int]
    radius: float  # in units of the frame width
    track: np.ndarray
    angle: np.ndarray


@dataclass(frozen=True)
class Scene:
    """Everything needed to draw a clip: background texture, camera path, objects (target first) and hands."""

    width: int
    height: int
    texture: np.ndarray  # float32 [H + 2 my, W + 2 mx, 3]
    margin: tuple[int, int]  # (mx, my) texture margin in pixels
    camera: np.ndarray  # [T, 2] camera offset (pan + shake) in unit coords; screen = world - camera
    brightness: np.ndarray  # [T] global illumination factor
    objects: tuple[SceneObject, ...]  # objects[0] is the task's target
    hands: tuple[np.ndarray, ...]  # each [T, 2] screen position of a hand (unit)
    hand_anchors: tuple[tuple[float, float], ...]  # where each forearm leaves the frame (unit)
    skin: tuple[int, int, int]

    @property
    def num_frames(self) -> int:
        return int(self.camera.shape[0])

    @property
    def target(self) -> SceneObject:
        return self.objects[0]


def task_home(task: int, num_tasks: int) -> np.ndarray:
    """Where the task's target object tends to sit on screen: tasks are spread on an ellipse around the centre."""
    angle = 2 * math.pi * task / num_tasks + math.pi / 4
    return np.array([0.5 + 0.26 * math.cos(angle), 0.5 + 0.22 * math.sin(angle)])


def smooth_path(
    rng: np.random.Generator,
    num_frames: int,
    fps: float,
    amplitude: float,
    frequencies: tuple[float, float],
    components: int = 3,
) -> np.ndarray:
    """A smooth 2-D wander around 0: a sum of ``components`` sinusoids per axis with random frequencies (Hz) in
    ``frequencies`` and random phases, of standard deviation about ``amplitude`` (unit coords). Smooth velocity,
    like hand-moved objects and head pans, unlike a random walk."""
    seconds = np.arange(num_frames)[:, None, None] / fps
    freq = rng.uniform(*frequencies, (1, components, 2))
    phase = rng.uniform(0, 2 * np.pi, (1, components, 2))
    weight = rng.uniform(0.5, 1.0, (1, components, 2))
    weight *= amplitude * math.sqrt(2) / np.sqrt((weight**2).sum(axis=1, keepdims=True))
    return (weight * np.sin(2 * np.pi * freq * seconds + phase)).sum(axis=1)


def place_apart(
    rng: np.random.Generator,
    points: list[np.ndarray],
    count: int,
    low: tuple[float, float],
    high: tuple[float, float],
    min_distance: float,
    attempts: int,
) -> list[np.ndarray]:
    """``points`` and ``count`` more (unit coordinates), each drawn uniformly in the box ``[low, high]`` and drawn
    again, up to ``attempts`` times in all, until it lies more than ``min_distance`` from every point before it (the
    last draw is kept when none does): objects' homes spread over the frame."""
    points = list(points)
    for _ in range(count):
        for _attempt in range(attempts):
            candidate = rng.uniform(list(low), list(high))
            if all(np.linalg.norm(candidate - point) > min_distance for point in points):
                break
        points.append(candidate)
    return points


def surface_waves(
    rng: np.random.Generator, height: int, width: int, count: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A surface's smooth colour waves: the mean of ``count`` plane waves of random direction, up to ``count`` cycles
    across the frame per axis, and random phase, with the pixel grid's unit coordinates ``u``, ``v`` (float32
    ``[H, W]`` each, ``u = x / W``, ``v = y / H``) they are drawn on."""
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    u, v = xx / width, yy / height
    waves = np.zeros_like(u)
    for _ in range(count):
        fx, fy = rng.uniform(-count, count, 2)
        waves += np.sin(2 * np.pi * (fx * u + fy * v) + rng.uniform(0, 2 * np.pi)) / count
    return u, v, waves


def _texture(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A work-surface texture: a counter and a darker edge, smooth colour waves, tiles and fine grain."""
    base = np.asarray(SURFACE_COLORS[rng.integers(len(SURFACE_COLORS))], np.float32)
    other = np.asarray(SURFACE_COLORS[rng.integers(len(SURFACE_COLORS))], np.float32) * 0.6
    edge = rng.uniform(0.65, 0.9)
    u, v, waves = surface_waves(rng, height, width, count=4)
    tiles = rng.uniform(4, 9)
    grid = ((u * tiles) % 1 < 0.04) | ((v * tiles * width / height) % 1 < 0.04)
    texture = np.where((v > edge + 0.03 * np.sin(6 * u))[..., None], other, base)
    texture = texture * (1 + 0.15 * waves[..., None]) * np.where(grid, 0.75, 1.0)[..., None]
    texture = texture + rng.normal(0, 5, texture.shape).astype(np.float32)
    return np.clip(texture, 0, 255).astype(np.float32)


def simulate_scene(
    rng: np.random.Generator,
    task: int,
    num_tasks: int,
    num_frames: int,
    fps: float,
    width: int,
    height: int,
    num_distractors: int,
) -> Scene:
    """Simulate the camera, objects and hands of one clip (no pixels yet)."""
    mx, my = int(math.ceil(0.25 * width)), int(math.ceil(0.25 * height))
    texture = _texture(rng, height + 2 * my, width + 2 * mx)
    # camera: slow pan (mean-reverting, bounded by the texture margin) plus per-frame head shake and a few bumps
    pan = smooth_path(rng, num_frames, fps, 0.05, (0.03, 0.25))
    shake = rng.normal(0, 0.002, (num_frames, 2))
    shake[1:] = 0.5 * (shake[1:] + shake[:-1])
    for bump_at in np.flatnonzero(rng.random(num_frames) < 0.2 / fps):
        length = min(num_frames - bump_at, 6)
        shake[bump_at : bump_at + length] += rng.normal(0, 0.012, 2) * np.linspace(1, 0, length)[:, None]
    camera = np.clip(pan + shake, [-0.24, -0.24], [0.24, 0.24])

    objects = []
    home = task_home(task, num_tasks)
    # distractor homes spread over the frame, away from the target
    homes = place_apart(rng, [home], num_distractors, (0.12, 0.15), (0.88, 0.85), min_distance=0.2, attempts=20)
    for k, object_home in enumerate(homes):
        if k == 0:
            shape, color = TASK_SHAPES[task % len(TASK_SHAPES)], TASK_COLORS[task]
            radius, amplitude, band = rng.uniform(0.07, 0.09), 0.07, (0.1, 0.45)
        else:
            shape = SHAPES[rng.integers(len(SHAPES))]
            color = DISTRACTOR_COLORS[rng.integers(len(DISTRACTOR_COLORS))]
            radius, amplitude, band = rng.uniform(0.05, 0.085), 0.03, (0.05, 0.2)
        world = object_home + smooth_path(rng, num_frames, fps, amplitude, band)
        angle = rng.uniform(0, 2 * np.pi) + rng.normal(0, 0.6) * np.arange(num_frames) / fps
        objects.append(SceneObject(shape, color, float(radius), world - camera, angle))

    # hands come in from the bottom edge: the right one reaches for the target, the left one for a distractor
    anchors = ((0.72 + rng.normal(0, 0.05), 1.25), (0.28 + rng.normal(0, 0.05), 1.25))
    hands = []
    for h, anchor in enumerate(anchors):
        goal_track = objects[0].track if h == 0 else objects[1 + rng.integers(num_distractors)].track
        below = np.array([0.0, 1.6 * objects[0].radius * width / height])
        reach = np.clip(
            (0.75 if h == 0 else 0.45) + smooth_path(rng, num_frames, fps, 0.15, (0.1, 0.6))[:, :1], 0.2, 0.95
        )
        hands.append(np.asarray(anchor) + reach * (goal_track + below - np.asarray(anchor)))
    brightness = 1 + 0.04 * np.sin(
        2 * np.pi * rng.uniform(0.1, 0.5) * np.arange(num_frames) / fps + rng.uniform(0, 2 * np.pi)
    )
    return Scene(
        width=width,
        height=height,
        texture=texture,
        margin=(mx, my),
        camera=camera,
        brightness=brightness.astype(np.float32),
        objects=tuple(objects),
        hands=tuple(hands),
        hand_anchors=anchors,
        skin=SKIN_COLORS[rng.integers(len(SKIN_COLORS))],
    )


def _box(frame: np.ndarray, x0: float, y0: float, x1: float, y1: float):
    """Integer pixel box clipped to the frame, and the pixel-centre grids inside it (``None`` when empty)."""
    height, width = frame.shape[:2]
    ix0, iy0 = max(int(math.floor(x0)), 0), max(int(math.floor(y0)), 0)
    ix1, iy1 = min(int(math.ceil(x1)) + 1, width), min(int(math.ceil(y1)) + 1, height)
    if ix0 >= ix1 or iy0 >= iy1:
        return None
    ys, xs = np.mgrid[iy0:iy1, ix0:ix1].astype(np.float32) + 0.5
    return (slice(iy0, iy1), slice(ix0, ix1)), xs, ys


def _composite(frame: np.ndarray, region, signed_distance: np.ndarray, color: np.ndarray) -> None:
    """Blend a shape given its signed distance (pixels, negative inside) with a one-pixel antialiased edge."""
    alpha = np.clip(0.5 - signed_distance, 0.0, 1.0)[..., None]
    frame[region] = frame[region] * (1 - alpha) + color * alpha


def outline_distance(shape: str, qx: np.ndarray, qy: np.ndarray, radius: float, inner_radius: float = 0.0):
    """Signed distance (pixels, negative inside) of points ``(qx, qy)`` given in a shape's own frame (centred on it,
    unrotated) to the outline of a shape of size ``radius``: a disc, square, triangle, diamond or bar, or a ring
    between ``inner_radius`` and ``radius``."""
    if shape == "disc":
        return np.hypot(qx, qy) - radius
    if shape == "square":
        return np.maximum(np.abs(qx), np.abs(qy)) - 0.8 * radius
    if shape == "triangle":
        return np.maximum.reduce([-qy, 0.866 * qx + 0.5 * qy, -0.866 * qx + 0.5 * qy]) - 0.5 * radius
    if shape == "diamond":
        return (np.abs(qx) + np.abs(qy)) * 0.7071 - 0.72 * radius
    if shape == "bar":
        return np.maximum(np.abs(qx) - radius, np.abs(qy) - 0.4 * radius)
    if shape == "ring":
        return np.abs(np.hypot(qx, qy) - (radius + inner_radius) / 2) - (radius - inner_radius) / 2
    raise ValueError(f"unknown shape {shape!r}, expected one of {SHAPES + ('ring',)}")


def _shape_distance(
    xs: np.ndarray, ys: np.ndarray, cx: float, cy: float, shape: str, radius: float, angle: float, inner_radius=0.0
) -> np.ndarray:
    """Signed distance (pixels, negative inside) of pixel centres ``xs``/``ys`` to the outline of a shape centred at
    ``(cx, cy)`` and turned by ``angle`` (:func:`outline_distance`)."""
    dx, dy = xs - cx, ys - cy
    c, s = math.cos(angle), math.sin(angle)
    return outline_distance(shape, c * dx + s * dy, -s * dx + c * dy, radius, inner_radius)


def _shape_box(frame: np.ndarray, cx: float, cy: float, radius: float):
    return _box(frame, cx - radius - 1, cy - radius - 1, cx + radius + 1, cy + radius + 1)


def paint_shape(
    frame: np.ndarray,
    box,
    cx: float,
    cy: float,
    shape: str,
    radius: float,
    angle: float,
    color: tuple[int, int, int],
    shading: float = OBJECT_SHADING,
    inner_radius: float = 0.0,
) -> None:
    """Draw a shape centred at pixel ``(cx, cy)`` into ``box`` (``(region, xs, ys)`` as :func:`_box` gives; None
    draws nothing): its colour lit from above by ``shading`` (0: flat), a dark outline (:data:`OUTLINE_PX` wide,
    :data:`OUTLINE_SHADE` of the colour) and a one-pixel antialiased edge."""
    if box is None:
        return
    region, xs, ys = box
    sd = _shape_distance(xs, ys, cx, cy, shape, radius, angle, inner_radius)
    body = np.asarray(color, np.float32)
    if shading:
        body = body * (1.0 + shading * np.clip(-(ys - cy) / radius, -1, 1))[..., None]
    body = np.where((sd > -OUTLINE_PX)[..., None], body * OUTLINE_SHADE, body)
    _composite(frame, region, sd, body)


def _arm_parts(frame: np.ndarray, hand: np.ndarray, anchor: np.ndarray, radius: float):
    """The forearm (a capsule from the frame's bottom edge to the hand) and the hand (an ellipse) as
    ``(region, signed distance, shade)`` pieces in drawing order (pieces entirely outside the frame are left out)."""
    arm_r, (hx, hy), (ax, ay) = 0.6 * radius, hand, anchor
    box = _box(frame, min(hx, ax) - arm_r, min(hy, ay) - arm_r, max(hx, ax) + arm_r, max(hy, ay) + arm_r)
    if box is not None:
        region, xs, ys = box
        seg = np.array([ax - hx, ay - hy])
        length2 = max(float(seg @ seg), 1e-6)
        along = np.clip(((xs - hx) * seg[0] + (ys - hy) * seg[1]) / length2, 0, 1)
        yield region, np.hypot(xs - hx - along * seg[0], ys - hy - along * seg[1]) - arm_r, 0.85
    box = _box(frame, hx - radius, hy - radius, hx + radius, hy + radius)
    if box is not None:
        region, xs, ys = box
        yield region, (np.hypot((xs - hx) / 1.0, (ys - hy) / 0.8) - radius) * 0.9, 1.0


def _paint_arm(
    frame: np.ndarray, hand: np.ndarray, anchor: np.ndarray, radius: float, skin: tuple[int, int, int]
) -> None:
    """A forearm and its hand (:func:`_arm_parts`) in skin colour, the forearm a little darker."""
    for region, sd, shade in _arm_parts(frame, hand, anchor, radius):
        _composite(frame, region, sd, np.asarray(skin, np.float32) * shade)


def _hand_pixels(scene: Scene, t: int):
    """Frame ``t``'s hands as drawn: ``(hand centre, forearm anchor)`` in pixels, and the hand radius in pixels."""
    width, height = scene.width, scene.height
    for hand, anchor in zip(scene.hands, scene.hand_anchors):
        yield unit_to_pixels(hand[t], width, height), unit_to_pixels(np.asarray(anchor), width, height)


def render_frame(scene: Scene, t: int) -> np.ndarray:
    """Draw frame ``t`` as RGB uint8 ``[H, W, 3]``."""
    width, height = scene.width, scene.height
    mx, my = scene.margin
    offset = unit_to_pixels(scene.camera[t], width, height)
    ox = int(np.clip(round(mx + offset[0]), 0, 2 * mx))
    oy = int(np.clip(round(my + offset[1]), 0, 2 * my))
    frame = scene.texture[oy : oy + height, ox : ox + width] * scene.brightness[t]
    for obj in scene.objects[1:] + scene.objects[:1]:  # the target is drawn last among objects: never hidden by one
        cx, cy = unit_to_pixels(obj.track[t], width, height)
        radius = obj.radius * width
        paint_shape(frame, _shape_box(frame, cx, cy, radius), cx, cy, obj.shape, radius, float(obj.angle[t]), obj.color)
    for hand, anchor in _hand_pixels(scene, t):
        _paint_arm(frame, hand, anchor, HAND_RADIUS * width, scene.skin)
    return np.clip(frame, 0, 255).astype(np.uint8)


def render_masks(scene: Scene, t: int) -> dict[str, np.ndarray]:
    """Exact masks of frame ``t``, bool ``[H, W]``: ``"hand"`` (both hands with their forearms) and ``"target"``
    (the visible part of the task's target object: what a hand covers is left out; the target is drawn over every
    other object). Same geometry as :func:`render_frame`: a pixel is inside a shape when the shape covers at least
    half of it (its antialiasing weight is >= 0.5, i.e. the signed distance at the pixel centre is <= 0)."""
    width, height = scene.width, scene.height
    hand = np.zeros((height, width), bool)
    for centre, anchor in _hand_pixels(scene, t):
        for region, sd, _ in _arm_parts(hand, centre, anchor, HAND_RADIUS * width):
            hand[region] |= sd <= 0
    target = np.zeros((height, width), bool)
    obj = scene.target
    cx, cy = unit_to_pixels(obj.track[t], width, height)
    box = _shape_box(target, cx, cy, obj.radius * width)
    if box is not None:
        region, xs, ys = box
        target[region] = _shape_distance(xs, ys, cx, cy, obj.shape, obj.radius * width, float(obj.angle[t])) <= 0
    return {"hand": hand, "target": target & ~hand}


def render_frames(scene: Scene):
    """Yield the clip's frames one at a time (memory bounded by one frame)."""
    for t in range(scene.num_frames):
        yield render_frame(scene, t)


__all__ = [
    "Scene",
    "SceneObject",
    "simulate_scene",
    "render_frame",
    "render_frames",
    "render_masks",
    "task_home",
    "smooth_path",
    "place_apart",
    "surface_waves",
    "outline_distance",
    "paint_shape",
    "TASK_COLORS",
    "TASK_COLOR_NAMES",
    "TASK_SHAPES",
    "DISTRACTOR_COLORS",
    "MAX_TASKS",
]
