"""Overlay drawing in numpy and PIL (no OpenCV): the heatmap, the K samples and a short trail of the point estimate,
drawn on the original frames at their native size.

* heatmap: the frame's map (``metrics.heatmaps.render_heatmaps``) scaled by its own maximum, coloured with a
  black-purple-orange-yellow ramp and blended in with an opacity that grows with the map's value, so the frame
  stays visible where the model puts no mass;
* samples: small cyan dots with a dark rim, one per sampled trajectory;
* point estimate: a white ring with a dark rim, and a trail of its last positions fading from green to white;
* ground truth (:func:`draw_ground_truth`, for analysis figures): a filled red disc, or where the recording left the
  frame (gaze type off-frame, clamped to the border) a hollow red ring with a yellow halo (paper Figure
  failure_cases).

Sizes scale with the frame (``min(H, W)``), so a 64x48 clip and a 1080p video both read well.
"""

from __future__ import annotations

from collections import deque

import numpy as np
from PIL import Image, ImageDraw

_RAMP = np.array([[0, 0, 0], [80, 18, 123], [182, 54, 121], [251, 136, 97], [252, 253, 191]], dtype=np.float64)


def _colour_table() -> np.ndarray:
    """256 RGB colours along the ramp (a magma-like map), uint8 ``[256, 3]``."""
    anchors = np.linspace(0.0, 1.0, len(_RAMP))
    levels = np.linspace(0.0, 1.0, 256)
    return np.stack([np.interp(levels, anchors, _RAMP[:, c]) for c in range(3)], axis=1).round().astype(np.uint8)


COLOUR_TABLE = _colour_table()


def blend_heatmap(frame: np.ndarray, heatmap: np.ndarray, max_alpha: float = 0.6) -> np.ndarray:
    """Blend a heatmap ``[H, W]`` (any non-negative scale) onto an RGB frame ``[H, W, 3]`` uint8."""
    if heatmap.shape != frame.shape[:2]:
        raise ValueError(f"heatmap {heatmap.shape} and frame {frame.shape[:2]} must have the same size")
    peak = float(heatmap.max())
    if peak <= 0:
        return frame.copy()
    level = np.clip(heatmap / peak, 0.0, 1.0)
    colours = COLOUR_TABLE[(level * 255).astype(np.uint8)].astype(np.float32)
    alpha = (max_alpha * level)[..., None].astype(np.float32)
    return (frame.astype(np.float32) * (1 - alpha) + colours * alpha).round().astype(np.uint8)


def _mix(a: tuple[int, int, int], b: tuple[int, int, int], t: float) -> tuple[int, int, int]:
    return tuple(int(round(x + (y - x) * t)) for x, y in zip(a, b))  # type: ignore[return-value]


def draw_gaze(frame: np.ndarray, samples_px: np.ndarray, point_px: np.ndarray | None = None,
              trail_px: np.ndarray | None = None) -> np.ndarray:
    """Draw the K samples ``[K, 2]``, the trail ``[n, 2]`` (oldest first) and the point estimate ``[2]`` (pixels)."""
    height, width = frame.shape[:2]
    unit = max(1.0, min(height, width) / 100.0)
    image = Image.fromarray(frame)
    draw = ImageDraw.Draw(image)
    if trail_px is not None and len(trail_px) >= 2:
        for i in range(1, len(trail_px)):
            colour = _mix((40, 220, 90), (255, 255, 255), i / (len(trail_px) - 1))
            (x0, y0), (x1, y1) = trail_px[i - 1], trail_px[i]
            draw.line([(float(x0), float(y0)), (float(x1), float(y1))], fill=colour, width=max(1, int(unit)))
    radius = max(1.5, 0.9 * unit)
    for x, y in np.asarray(samples_px, dtype=np.float64).reshape(-1, 2):
        draw.ellipse([x - radius, y - radius, x + radius, y + radius], fill=(0, 230, 255), outline=(0, 40, 60))
    if point_px is not None:
        x, y = (float(v) for v in point_px)
        ring = max(3.0, 2.5 * unit)
        draw.ellipse([x - ring - 1, y - ring - 1, x + ring + 1, y + ring + 1], outline=(0, 0, 0), width=1)
        draw.ellipse([x - ring, y - ring, x + ring, y + ring], outline=(255, 255, 255), width=max(1, int(unit * 0.8)))
    return np.asarray(image)


def draw_ground_truth(frame: np.ndarray, point_px: np.ndarray, off_frame: bool = False) -> np.ndarray:
    """Draw the recorded gaze ``[2]`` (pixels): a filled red disc with a dark rim, or with ``off_frame`` (the eye
    left the camera's view and the point is clamped to the border) a hollow red ring in a yellow halo."""
    height, width = frame.shape[:2]
    unit = max(1.0, min(height, width) / 100.0)
    image = Image.fromarray(np.asarray(frame, dtype=np.uint8))
    draw = ImageDraw.Draw(image)
    x, y = (float(v) for v in np.asarray(point_px, dtype=np.float64).reshape(2))
    if off_frame:
        ring, line = max(4.0, 3.5 * unit), max(2, int(round(unit)))
        draw.ellipse([x - ring - line, y - ring - line, x + ring + line, y + ring + line], outline=(255, 230, 0),
                     width=2 * line)
        draw.ellipse([x - ring, y - ring, x + ring, y + ring], outline=(230, 20, 20), width=line)
    else:
        radius = max(2.5, 2.0 * unit)
        draw.ellipse([x - radius - 1, y - radius - 1, x + radius + 1, y + radius + 1], fill=(40, 0, 0))
        draw.ellipse([x - radius, y - radius, x + radius, y + radius], fill=(230, 20, 20))
    return np.asarray(image)


class OverlayRenderer:
    """Draws frames one after another, keeping the trail of the last ``trail`` point estimates.

    ``render(frame, samples_px, point_px, heatmap)`` returns the overlay frame (same size, uint8 RGB).
    """

    def __init__(self, trail: int = 8, heatmap_alpha: float = 0.6) -> None:
        if trail < 0:
            raise ValueError(f"trail must be >= 0 frames, got {trail}")
        if not 0.0 <= heatmap_alpha <= 1.0:
            raise ValueError(f"heatmap_alpha must be in [0, 1], got {heatmap_alpha}")
        self.heatmap_alpha = heatmap_alpha
        self._trail: deque[np.ndarray] = deque(maxlen=trail + 1)

    def render(self, frame: np.ndarray, samples_px: np.ndarray, point_px: np.ndarray,
               heatmap: np.ndarray | None = None) -> np.ndarray:
        frame = np.asarray(frame)
        if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] != 3:
            raise ValueError(f"frame must be uint8 [H, W, 3], got {frame.dtype} {frame.shape}")
        self._trail.append(np.asarray(point_px, dtype=np.float64))
        out = blend_heatmap(frame, heatmap, self.heatmap_alpha) if heatmap is not None else frame
        trail = np.stack(self._trail) if len(self._trail) >= 2 else None
        return draw_gaze(out, samples_px, point_px, trail)


__all__ = ["COLOUR_TABLE", "blend_heatmap", "draw_gaze", "draw_ground_truth", "OverlayRenderer"]
