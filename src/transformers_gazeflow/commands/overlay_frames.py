"""One frame of ``gazeflow predict``'s overlay: the samples' heatmap rendered on their box only, then the marks
(``outputs.overlay.OverlayRenderer``), from unit coordinates."""

from __future__ import annotations

import numpy as np

from ..models.gazeflow.geometry import unit_to_pixels
from ..outputs.overlay import OverlayRenderer

HEATMAP_BOX_SIGMAS = 3.5
"""The heatmap is rendered on the samples' box widened by this many sigma: beyond it no pixel reaches the 2% of
the map's peak below which the overlay draws nothing (``outputs.overlay.HEATMAP_CUTOFF``)."""


def render_overlay_frame(
    renderer: OverlayRenderer,
    frame: np.ndarray,
    samples: np.ndarray,
    point: np.ndarray,
    sigma_px: float,
    heatmap: bool = True,
    truth: np.ndarray | None = None,
    region_px: float | None = None,
) -> np.ndarray:
    """One overlay frame: ``samples`` ``[K, 2]``, ``point`` ``[2]`` and ``truth`` ``[2]`` in unit coordinates;
    ``region_px``: the radius of the uncertainty region to outline (None: none)."""
    from ..metrics.heatmaps import render_heatmaps  # the project's one trajectory -> map renderer

    height, width = frame.shape[:2]
    samples_px = unit_to_pixels(np.asarray(samples, np.float64), width, height)
    truth_px = unit_to_pixels(np.asarray(truth, np.float64), width, height) if truth is not None else None
    maps, origin = None, (0, 0)
    if heatmap:
        reach = HEATMAP_BOX_SIGMAS * sigma_px
        x0, y0 = (int(max(0, np.floor(samples_px[:, i].min() - reach))) for i in (0, 1))
        x1 = int(min(width, np.ceil(samples_px[:, 0].max() + reach)))
        y1 = int(min(height, np.ceil(samples_px[:, 1].max() + reach)))
        if x1 > x0 and y1 > y0:  # the box's own unit coordinates: the same Gaussians at the same pixel centres
            inside = (samples_px - [x0, y0]) / [x1 - x0, y1 - y0]
            maps, origin = render_heatmaps(inside[:, None], x1 - x0, y1 - y0, sigma=sigma_px)[0].numpy(), (x0, y0)
    return renderer.render(
        frame,
        samples_px,
        unit_to_pixels(point, width, height),
        maps,
        truth_px,
        heatmap_origin=origin,
        region_px=region_px,
    )


__all__ = ["HEATMAP_BOX_SIGMAS", "render_overlay_frame"]
