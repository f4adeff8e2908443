"""Shared helpers of the pipeline/CLI tests: tiny random GazeFlow folders and small videos with known content."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
from transformers_gazeflow.data.processing import GazeFlowVideoProcessor
from transformers_gazeflow.data.video import write_video

NUM_SAMPLES, NUM_STEPS = 4, 3  # GazeFlowConfig.tiny() defaults: K = 4, S = 3, 8-frame windows, stride 4


def save_tiny_model(folder: Path, seed: int = 0, with_processor: bool = True, **config_overrides) -> Path:
    """A tiny random GazeFlow model folder (32x32 frames, 8-frame windows, stride 4, K=4, S=3; ``config_overrides``
    go to ``GazeFlowConfig.tiny``)."""
    torch.manual_seed(seed)
    model = GazeFlowModel(GazeFlowConfig.tiny(**config_overrides))
    model.save_pretrained(folder)
    if with_processor:
        GazeFlowVideoProcessor(size=32).save_pretrained(folder)
    return folder


def random_video(num_frames: int, height: int = 48, width: int = 64, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (num_frames, height, width, 3), dtype=np.uint8)


@pytest.fixture(autouse=True)
def single_torch_thread():
    """Tiny models run faster on one thread, and the test machine's cores are shared: restore the setting after."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("tiny_gazeflow"))


@pytest.fixture(scope="session")
def synthetic_clip_mp4(tmp_path_factory):
    """A synthetic egocentric clip with known gaze, written to mp4: (path, clip)."""
    from transformers_gazeflow.data.synthetic import SyntheticGazeSettings, generate_clip

    settings = SyntheticGazeSettings(num_clips=1, min_frames=30, max_frames=30, width=64, height=48, fps=24.0, seed=3)
    clip = generate_clip(settings, 0)
    path = write_video(tmp_path_factory.mktemp("synthetic") / "synthetic_clip.mp4", clip.frames(), fps=clip.fps)
    return path, clip


@pytest.fixture(scope="session")
def not_a_gazeflow_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("bert_like")
    (folder / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 8}))
    return folder


def faststart_truncated_mp4(folder: Path, num_frames: int = 40) -> Path:
    """An mp4 whose index (moov) comes first, cut in the middle of its frame data: it opens, then runs out."""
    import av

    path = folder / "faststart.mp4"
    container = av.open(str(path), mode="w", options={"movflags": "faststart"})
    stream = container.add_stream("libx264", rate=24)
    stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
    for frame in random_video(num_frames, seed=5):
        for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
            container.mux(packet)
    for packet in stream.encode():
        container.mux(packet)
    container.close()
    data = path.read_bytes()
    truncated = folder / "truncated_faststart.mp4"
    truncated.write_bytes(data[: len(data) // 2])
    return truncated
