"""Shared helpers of the metric tests: small synthetic clips in the unified schema (the ``pysaliency`` fixture, the
reference implementation behind a small compatibility shim, is in ``tests/conftest.py``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch


def make_clip(
    rng: np.random.Generator,
    clip_id: str,
    num_frames: int = 64,
    width: int = 64,
    height: int = 48,
    fixation_share: float = 0.75,
) -> dict:
    """A clip in the unified schema: a random walk of gaze in [0.05, 0.95], mostly fixations, a few blinks."""
    steps = rng.normal(0.0, 0.02, size=(num_frames, 2))
    gaze = np.clip(0.5 + np.cumsum(steps, axis=0), 0.05, 0.95)
    gaze_type = np.where(rng.random(num_frames) < fixation_share, 1, rng.choice([2, 3], size=num_frames))
    return {
        "clip_id": clip_id,
        "gaze": gaze.astype(np.float32),
        "gaze_type": gaze_type.astype(np.int8),
        "valid": gaze_type != 3,
        "width": width,
        "height": height,
    }


def noisy_trajectories(rng: np.random.Generator, clip: dict, num_samples: int = 5, noise: float = 0.05) -> np.ndarray:
    """K samples around the clip's ground truth, clipped into the frame."""
    g = np.asarray(clip["gaze"], dtype=np.float64)
    return np.clip(g[None] + rng.normal(0.0, noise, size=(num_samples, *g.shape)), 0.0, 1.0)


@pytest.fixture(autouse=True)
def _single_intra_op_thread():
    """The metric tests use tiny maps, for which torch's intra-op thread pool only adds wake-up latency (badly so on
    a shared machine); run each of them on one thread and restore the setting afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
