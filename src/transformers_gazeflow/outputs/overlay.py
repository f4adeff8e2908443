"""The overlay video: the heatmap, the K samples, the point estimate with its trail (and, in the demo, the true gaze)
drawn on the original frames at their native size, and encoded to H.264 in a background thread.

* **heatmap**: the frame's map (``metrics.heatmaps.render_heatmaps``, the project's one renderer: the mean over K of
  peak-1 Gaussians) scaled by its own maximum, coloured blue -> cyan -> yellow -> red with an opacity that rises
  from 0 at 2% of the peak to ``max_alpha`` at half the peak. The saturated hues differ from both black and white,
  so the map shows on dark and on bright scenes, and pixels where the map is below 2% of its peak (beyond about
  2.8 sigma of a lone sample) are left exactly as they were. The map is rendered only on the box of the samples
  widened by 3.5 sigma (nothing outside reaches 2% of the peak) and blended in 16-bit integer arithmetic.
* **sigma**: ``metrics.heatmaps.HEATMAP_SIGMA_FRACTION`` of the frame width unless given in pixels
  (``metrics.heatmaps.heatmap_sigma_px``):
  the paper's 25 px at 640 px, so a 1280x720 overlay uses 50 px and a 256x192 one 10 px. (``config.heatmap_sigma``
  is the evaluation's sigma in native pixels of the dataset, :mod:`transformers_gazeflow.metrics`; the overlay does
  not read it.)
* **samples**: small cyan dots with a dark rim; **point estimate**: a white ring with a dark rim and a trail of its
  last positions fading from green to white; **true gaze** (``gazeflow demo``): a white cross in a thick black rim
  (white is far from every colour of the heatmap and from the saturated objects of a scene, and the rim separates
  it from a light background). Marks are drawn with PIL on the crop that holds them only. Sizes scale with
  ``min(H, W)``.
* **legend** (:class:`OverlayLegend`, what ``gazeflow predict`` and ``gazeflow demo`` burn in): a dark box in the
  top-left corner naming each mark shown, drawn with the marks' own colours (:func:`draw_legend`).
* **readable size** (``min_short_side``): a small video is drawn at an integer multiple of its size whose short side
  is at least that (``gazeflow predict``: 480 px, so 256x192 becomes 768x576): the frame and the heatmap are
  blended at the native size, then enlarged (bilinear), and the marks and the legend drawn at the new size. The
  coordinates written elsewhere (``gaze.csv``) stay the video's.
* :class:`OverlayVideoWriter` draws and encodes (libx264, ``preset=ultrafast``, ``crf=23``: the fastest preset,
  files about 1.5x those of ``veryfast`` at this quality) in a background thread, so both overlap the decoding and
  the model of the next frames (numpy, torch and FFmpeg release the GIL for their heavy work). With ``even_size``
  (the web demo) an odd height/width is padded by one repeated edge row/column (:func:`pad_to_even`), so the file is
  H.264 4:2:0, the only chroma format browsers play; without it odd sizes are encoded in 4:4:4 at the native size.
* **uncertainty region** (``--region``): the outline of the calibrated 90% region (a circle of the frame's
  ``region90_px`` around the point estimate, ``gaze.uncertainty``), a thin white line with a dark rim.
* **ground truth in analysis figures** (:func:`draw_ground_truth`): a filled red disc, or where the recording left
  the frame (gaze type off-frame, clamped to the border) a hollow red ring with a yellow halo (paper Figure
  failure_cases).
"""

from __future__ import annotations

import functools
import os
import queue
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

HEATMAP_ALPHA = 0.65
"""Opacity of the heatmap at and above half its peak."""

HEATMAP_CUTOFF = 0.02
"""Fraction of the map's peak below which a pixel is left untouched."""

_RAMP = np.array([[40, 70, 255], [0, 215, 255], [255, 240, 0], [255, 120, 0], [235, 20, 40]], dtype=np.float64)
SAMPLE_COLOUR, SAMPLE_RIM = (0, 230, 255), (0, 40, 60)
TRUTH_COLOUR, RIM = (255, 255, 255), (0, 0, 0)
POINT_COLOUR = (255, 255, 255)
READABLE_SHORT_SIDE = 480
"""The short side, in pixels, below which ``gazeflow predict`` enlarges the overlay (see the module docstring)."""


def _colour_table() -> np.ndarray:
    """256 RGB colours along the ramp, uint8 ``[256, 3]`` (index: the map's level, 0 = nothing, 255 = peak)."""
    anchors = np.linspace(0.0, 1.0, len(_RAMP))
    levels = np.linspace(0.0, 1.0, 256)
    return np.stack([np.interp(levels, anchors, _RAMP[:, c]) for c in range(3)], axis=1).round().astype(np.uint8)


@functools.lru_cache(maxsize=8)
def _blend_tables(max_alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Per level (0..255): the colour times its opacity and 256 minus the opacity, uint16 ``[256, 3]`` and ``[256]``.
    The opacity is 0 up to :data:`HEATMAP_CUTOFF` and rises to ``max_alpha`` at half the peak (a smooth edge, no ring
    where the map is cut); ``frame * (256 - a) + colour * a`` then fits in 16 bits."""
    levels = np.arange(256) / 255.0
    ramp = np.clip((levels - HEATMAP_CUTOFF) / (0.5 - HEATMAP_CUTOFF), 0.0, 1.0) ** 0.7
    alpha = np.round(256 * max_alpha * ramp).astype(np.uint16)
    return (COLOUR_TABLE.astype(np.uint16) * alpha[:, None]).astype(np.uint16), (256 - alpha).astype(np.uint16)


COLOUR_TABLE = _colour_table()


def blend_heatmap(
    frame: np.ndarray,
    heatmap: np.ndarray,
    max_alpha: float = HEATMAP_ALPHA,
    origin: tuple[int, int] = (0, 0),
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Blend a heatmap (any non-negative scale) onto an RGB frame ``[H, W, 3]`` uint8.

    ``heatmap`` covers the whole frame ``[H, W]``, or a box of it whose top-left pixel is ``origin`` (x, y).
    Only the pixels above :data:`HEATMAP_CUTOFF` of the map's peak (and the box around them) are touched, in 16-bit
    integer arithmetic. Writes into ``out`` (may be ``frame`` itself) or a copy of ``frame``; returns it."""
    x0, y0 = origin
    h, w = heatmap.shape
    if not (0 <= x0 and 0 <= y0 and x0 + w <= frame.shape[1] and y0 + h <= frame.shape[0]):
        raise ValueError(
            f"heatmap {heatmap.shape} at {origin} and frame {frame.shape[:2]} must have the same size "
            "(or the heatmap must be a box inside the frame)"
        )
    out = frame.copy() if out is None else out
    peak = float(heatmap.max()) if heatmap.size else 0.0
    if not peak > 0:
        return out
    threshold = HEATMAP_CUTOFF * peak
    rows = np.flatnonzero(heatmap.max(axis=1) > threshold)
    cols = np.flatnonzero(heatmap.max(axis=0) > threshold)
    if rows.size == 0 or cols.size == 0:
        return out
    level = heatmap[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1] * np.float32(255.0 / peak)
    level = np.minimum(level, 255.0, out=level).astype(np.uint8)
    coloured, keep = _blend_tables(float(max_alpha))
    target = out[y0 + rows[0] : y0 + rows[-1] + 1, x0 + cols[0] : x0 + cols[-1] + 1]
    mixed = target.astype(np.uint16)
    mixed *= np.take(keep, level)[..., None]  # np.take: a faster gather than fancy indexing
    mixed += np.take(coloured, level, axis=0)
    mixed >>= 8
    target[...] = mixed
    return out


def _mix(a: tuple[int, int, int], b: tuple[int, int, int], t: float) -> tuple[int, int, int]:
    return tuple(int(round(x + (y - x) * t)) for x, y in zip(a, b))  # type: ignore[return-value]


def draw_gaze(
    frame: np.ndarray,
    samples_px: np.ndarray,
    point_px: np.ndarray | None = None,
    trail_px: np.ndarray | None = None,
    truth_px: np.ndarray | None = None,
    in_place: bool = False,
    region_px: float | None = None,
) -> np.ndarray:
    """Draw the K samples ``[K, 2]``, the trail ``[n, 2]`` (oldest first), the point estimate ``[2]``, the outline of
    its uncertainty region (a circle of radius ``region_px`` around it) and the true gaze ``[2]`` (pixels; ``None``
    or non-finite: not drawn). Returns a new frame (``in_place``: ``frame`` itself); only the crop that holds the
    marks goes through PIL."""
    height, width = frame.shape[:2]
    unit = max(1.0, min(height, width) / 100.0)
    radius, ring, cross = max(1.5, 0.9 * unit), max(3.0, 2.5 * unit), max(4.0, 3.0 * unit)
    marks = [np.asarray(samples_px, dtype=np.float64).reshape(-1, 2)]
    for extra in (point_px, truth_px, trail_px):
        if extra is not None:
            marks.append(np.asarray(extra, dtype=np.float64).reshape(-1, 2))
    circle = (
        region_px is not None
        and point_px is not None
        and np.isfinite(region_px)
        and region_px > 0
        and np.isfinite(point_px).all()
    )
    if circle:
        marks.append(
            np.asarray(point_px, dtype=np.float64).reshape(1, 2) + [[-region_px, -region_px], [region_px, region_px]]
        )
    points = np.concatenate(marks)
    points = points[np.isfinite(points).all(axis=1)]
    out = frame if in_place else frame.copy()
    if points.size == 0:
        return out
    margin = cross + unit + 3
    x0, y0 = (int(max(0, np.floor(points[:, i].min() - margin))) for i in (0, 1))
    x1 = int(min(width, np.ceil(points[:, 0].max() + margin)))
    y1 = int(min(height, np.ceil(points[:, 1].max() + margin)))
    if x1 <= x0 or y1 <= y0:
        return out
    image = Image.fromarray(np.ascontiguousarray(out[y0:y1, x0:x1]))
    draw = ImageDraw.Draw(image)
    offset = np.array([x0, y0], dtype=np.float64)
    if trail_px is not None and len(trail_px) >= 2:
        trail = np.asarray(trail_px, dtype=np.float64) - offset
        for i in range(1, len(trail)):
            colour = _mix((40, 220, 90), (255, 255, 255), i / (len(trail) - 1))
            draw.line([tuple(trail[i - 1]), tuple(trail[i])], fill=colour, width=max(1, int(unit)))
    if circle:
        x, y = np.asarray(point_px, dtype=np.float64) - offset
        r = float(region_px)
        draw.ellipse([x - r - 1, y - r - 1, x + r + 1, y + r + 1], outline=RIM, width=1)
        draw.ellipse([x - r, y - r, x + r, y + r], outline=(255, 255, 255), width=max(1, int(unit * 0.5)))
    for x, y in np.asarray(samples_px, dtype=np.float64).reshape(-1, 2) - offset:
        draw.ellipse([x - radius, y - radius, x + radius, y + radius], fill=SAMPLE_COLOUR, outline=SAMPLE_RIM)
    if truth_px is not None and np.isfinite(truth_px).all():
        x, y = np.asarray(truth_px, dtype=np.float64) - offset
        for colour, thickness in ((RIM, max(4, int(unit * 1.2) + 4)), (TRUTH_COLOUR, max(1, int(unit * 1.2)))):
            draw.line([(x - cross, y - cross), (x + cross, y + cross)], fill=colour, width=thickness)
            draw.line([(x - cross, y + cross), (x + cross, y - cross)], fill=colour, width=thickness)
    if point_px is not None and np.isfinite(point_px).all():
        x, y = np.asarray(point_px, dtype=np.float64) - offset
        draw.ellipse([x - ring - 1, y - ring - 1, x + ring + 1, y + ring + 1], outline=RIM, width=1)
        draw.ellipse([x - ring, y - ring, x + ring, y + ring], outline=POINT_COLOUR, width=max(1, int(unit * 0.8)))
    out[y0:y1, x0:x1] = np.asarray(image)
    return out


@dataclass(frozen=True)
class OverlayLegend:
    """What the burned-in legend names: the K samples (``num_samples``), the point estimate and its trail, the
    heatmap, the 90% region and the true gaze, each only where it is drawn."""

    num_samples: int
    heatmap: bool = True
    region: bool = False
    truth: bool = False

    def entries(self) -> list[tuple[str, str]]:
        """``(mark, text)`` per line, in drawing order (``mark``: the swatch :func:`draw_legend` draws)."""
        rows = [("samples", f"{self.num_samples} sampled gaze points"), ("point", "point estimate (mean) + trail")]
        if self.heatmap:
            rows.append(("heatmap", "density of the samples"))
        if self.region:
            rows.append(("region", "90% region"))
        if self.truth:
            rows.append(("truth", "true gaze"))
        return rows


def _legend_font(size: int):
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=size)
    except (TypeError, ImportError, OSError):  # Pillow without FreeType: the fixed bitmap font
        return ImageFont.load_default()


def draw_legend(frame: np.ndarray, legend: OverlayLegend) -> np.ndarray:
    """Burn ``legend`` into the top-left corner of ``frame`` (in place; returned): a dark box, darkening what is
    behind it to a quarter, with one line per mark, its swatch drawn in the mark's colours and its name in white."""
    height, width = frame.shape[:2]
    unit = max(1.0, min(height, width) / 100.0)
    rows = legend.entries()
    font = _legend_font(max(10, int(round(2.6 * unit))))
    line = max(12, int(round(3.6 * unit)))
    swatch = line
    pad = max(3, int(unit))
    text_width = max(int(np.ceil(font.getlength(text))) for _, text in rows)
    box_w = min(width, pad * 3 + swatch + text_width)
    box_h = min(height, pad * 2 + line * len(rows))
    frame[:box_h, :box_w] = frame[:box_h, :box_w] // 4
    image = Image.fromarray(np.ascontiguousarray(frame[:box_h, :box_w]))
    draw = ImageDraw.Draw(image)
    for i, (mark, text) in enumerate(rows):
        cx, cy = pad + swatch / 2, pad + line * i + line / 2
        r = swatch * 0.3
        if mark == "samples":
            draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=SAMPLE_COLOUR, outline=SAMPLE_RIM)
        elif mark == "point":
            draw.ellipse([cx - r, cy - r, cx + r, cy + r], outline=POINT_COLOUR, width=max(1, int(unit * 0.8)))
        elif mark == "heatmap":
            for j in range(swatch):
                colour = tuple(int(c) for c in COLOUR_TABLE[int(255 * j / max(1, swatch - 1))])
                draw.line([(pad + j, cy - r), (pad + j, cy + r)], fill=colour)
        elif mark == "region":
            draw.ellipse([cx - r * 1.4, cy - r * 1.4, cx + r * 1.4, cy + r * 1.4], outline=POINT_COLOUR, width=1)
        else:
            thickness = max(1, int(unit * 1.2))
            draw.line([(cx - r, cy - r), (cx + r, cy + r)], fill=TRUTH_COLOUR, width=thickness)
            draw.line([(cx - r, cy + r), (cx + r, cy - r)], fill=TRUTH_COLOUR, width=thickness)
        draw.text((pad * 2 + swatch, cy), text, fill=(255, 255, 255), font=font, anchor="lm")
    frame[:box_h, :box_w] = np.asarray(image)
    return frame


def readable_scale(height: int, width: int, min_short_side: int | None) -> int:
    """The integer factor that brings the short side of a ``height`` x ``width`` frame to at least
    ``min_short_side`` (1 when it is there already, or when ``min_short_side`` is None)."""
    if not min_short_side:
        return 1
    return max(1, -(-int(min_short_side) // max(1, min(height, width))))


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
        draw.ellipse(
            [x - ring - line, y - ring - line, x + ring + line, y + ring + line], outline=(255, 230, 0), width=2 * line
        )
        draw.ellipse([x - ring, y - ring, x + ring, y + ring], outline=(230, 20, 20), width=line)
    else:
        radius = max(2.5, 2.0 * unit)
        draw.ellipse([x - radius - 1, y - radius - 1, x + radius + 1, y + radius + 1], fill=(40, 0, 0))
        draw.ellipse([x - radius, y - radius, x + radius, y + radius], fill=(230, 20, 20))
    return np.asarray(image)


class OverlayRenderer:
    """Draws frames one after another, keeping the trail of the last ``trail`` point estimates.

    ``render(frame, samples_px, point_px, heatmap, truth_px)`` returns the overlay frame (uint8 RGB; the frame's size
    times :func:`readable_scale` of ``min_short_side``), with ``legend`` burned in when given. Coordinates are in
    pixels of the frame as given.
    """

    def __init__(
        self,
        trail: int = 8,
        heatmap_alpha: float = HEATMAP_ALPHA,
        legend: OverlayLegend | None = None,
        min_short_side: int | None = None,
    ) -> None:
        if trail < 0:
            raise ValueError(f"trail must be >= 0 frames, got {trail}")
        if not 0.0 <= heatmap_alpha <= 1.0:
            raise ValueError(f"heatmap_alpha must be in [0, 1], got {heatmap_alpha}")
        self.heatmap_alpha = heatmap_alpha
        self.legend, self.min_short_side = legend, min_short_side
        self._trail: deque[np.ndarray] = deque(maxlen=trail + 1)

    def render(
        self,
        frame: np.ndarray,
        samples_px: np.ndarray,
        point_px: np.ndarray,
        heatmap: np.ndarray | None = None,
        truth_px: np.ndarray | None = None,
        heatmap_origin: tuple[int, int] = (0, 0),
        region_px: float | None = None,
    ) -> np.ndarray:
        """The overlay frame; ``heatmap`` is the whole frame's map or a box of it at ``heatmap_origin`` (x, y);
        ``region_px``: the radius of the uncertainty region to outline (None: none)."""
        frame = np.asarray(frame)
        if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] != 3:
            raise ValueError(f"frame must be uint8 [H, W, 3], got {frame.dtype} {frame.shape}")
        self._trail.append(np.asarray(point_px, dtype=np.float64))
        out = frame.copy()
        if heatmap is not None:
            blend_heatmap(out, heatmap, self.heatmap_alpha, origin=heatmap_origin, out=out)
        trail = np.stack(self._trail) if len(self._trail) >= 2 else None
        scale = readable_scale(out.shape[0], out.shape[1], self.min_short_side)
        if scale > 1:
            size = (out.shape[1] * scale, out.shape[0] * scale)
            out = np.asarray(Image.fromarray(out).resize(size, Image.Resampling.BILINEAR)).copy()
            samples_px, point_px = np.asarray(samples_px) * scale, np.asarray(point_px) * scale
            trail = None if trail is None else trail * scale
            truth_px = None if truth_px is None else np.asarray(truth_px) * scale
            region_px = None if region_px is None else region_px * scale
        out = draw_gaze(out, samples_px, point_px, trail, truth_px, in_place=True, region_px=region_px)
        return out if self.legend is None else draw_legend(out, self.legend)


def pad_to_even(frame: np.ndarray) -> np.ndarray:
    """Pad an odd height/width by one repeated edge row/column (H.264 4:2:0, what browsers play, needs even sizes);
    an even-sized frame is returned as it is. The picture and its pixel coordinates are unchanged."""
    height, width = frame.shape[:2]
    if height % 2 == 0 and width % 2 == 0:
        return frame
    return np.pad(frame, ((0, height % 2), (0, width % 2), (0, 0)), mode="edge")


def _checked_frame(frame: Any, path: Path) -> np.ndarray:
    frame = np.asarray(frame)
    if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] != 3:
        raise ValueError(f"{path}: frames must be uint8 [H, W, 3], got {frame.dtype} {frame.shape}")
    return np.ascontiguousarray(frame)


class OverlayVideoWriter:
    """Draw and encode overlay frames to an H.264 mp4 in a background thread (PyAV, libx264 ``preset``/``crf``; x264
    picks its own threads).

    ``write(item)`` queues an item (at most ``queued`` wait, so memory stays bounded) and re-raises an error of the
    thread; the thread turns each item into a frame with ``render(item)`` (default: the item is the RGB frame
    itself), so drawing runs beside the model too, and encodes it. ``close()`` flushes and finishes a decodable
    file; ``abort()`` stops and deletes it. Odd sizes are encoded in 4:4:4 (H.264 4:2:0 needs even sizes), as
    ``data.video.write_video`` does, or with ``even_size`` padded to even (:func:`pad_to_even`) and encoded in 4:2:0,
    which browsers play. Use as a context manager: an exception inside the block aborts.
    """

    _DONE = object()

    def __init__(
        self,
        path: str | os.PathLike,
        fps: float,
        preset: str = "ultrafast",
        crf: int = 23,
        queued: int = 8,
        render: Callable[[Any], np.ndarray] | None = None,
        even_size: bool = False,
    ) -> None:
        self.path = Path(path)
        self.even_size = even_size
        self.render = render
        self.fps = Fraction(fps).limit_denominator(1001)
        self.preset, self.crf = preset, crf
        self.frames = 0
        self._queue: queue.Queue = queue.Queue(maxsize=max(1, queued))
        self._error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._encode, name="gazeflow-overlay-encoder", daemon=True)
        self._thread.start()

    def _encode(self) -> None:
        try:
            import av

            container = av.open(str(self.path), mode="w")
            try:
                stream = None
                while True:
                    item = self._queue.get()
                    if item is self._DONE or self._stop.is_set():
                        break
                    frame = _checked_frame(self.render(item) if self.render is not None else item, self.path)
                    if self.even_size:
                        frame = np.ascontiguousarray(pad_to_even(frame))
                    if stream is None:
                        height, width = frame.shape[:2]
                        stream = container.add_stream("libx264", rate=self.fps)
                        stream.width, stream.height = width, height
                        stream.pix_fmt = "yuv420p" if width % 2 == 0 and height % 2 == 0 else "yuv444p"
                        stream.options = {"crf": str(self.crf), "preset": self.preset}
                    for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                        container.mux(packet)
                if stream is not None and not self._stop.is_set():
                    for packet in stream.encode():
                        container.mux(packet)
            finally:
                container.close()
        except BaseException as err:  # handed to the writing thread by write() / close()
            self._error = err
            self._stop.set()
            while True:  # unblock a writer waiting on a full queue
                try:
                    self._queue.get_nowait()
                except queue.Empty:
                    break

    def _raise_error(self) -> None:
        """Hand an error of the thread to the caller: the encoder's and the file system's as ``OSError`` naming the
        file, anything else (a drawing bug) as it is."""
        error = self._error
        if error is None:
            return
        if isinstance(error, OSError) or type(error).__module__.split(".")[0] == "av":
            raise OSError(f"cannot encode the overlay video {self.path}: {error}") from error
        raise error

    def write(self, item: Any) -> None:
        """Queue a frame (or, with ``render``, what ``render`` draws a frame from)."""
        if self.render is None:
            item = _checked_frame(item, self.path)
        while True:
            self._raise_error()
            try:
                self._queue.put(item, timeout=0.5)
                break
            except queue.Full:
                continue
        self.frames += 1

    def close(self) -> Path:
        """Flush the encoder and finish the file; returns its path."""
        if self._thread.is_alive():
            while self._thread.is_alive():
                try:
                    self._queue.put(self._DONE, timeout=0.5)
                    break
                except queue.Full:
                    continue
            self._thread.join()
        self._raise_error()
        if self.frames == 0:
            raise ValueError(f"{self.path}: no frames were written")
        return self.path

    def abort(self) -> None:
        """Stop encoding and delete the file."""
        self._stop.set()
        while self._thread.is_alive():
            try:
                self._queue.put_nowait(self._DONE)
            except queue.Full:
                try:
                    self._queue.get_nowait()
                except queue.Empty:
                    pass
            self._thread.join(timeout=0.1)
        self.path.unlink(missing_ok=True)

    def __enter__(self) -> OverlayVideoWriter:
        return self

    def __exit__(self, exc_type, exc, traceback) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


__all__ = [
    "HEATMAP_ALPHA",
    "HEATMAP_CUTOFF",
    "COLOUR_TABLE",
    "blend_heatmap",
    "draw_gaze",
    "draw_ground_truth",
    "draw_legend",
    "OverlayLegend",
    "OverlayRenderer",
    "readable_scale",
    "READABLE_SHORT_SIDE",
    "OverlayVideoWriter",
    "pad_to_even",
    "TRUTH_COLOUR",
]
