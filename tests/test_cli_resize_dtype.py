"""``gazeflow predict --resize-dtype uint8``: the processor's fast resize, asked for on the command line, is used,
recorded in summary.json and moves the trajectories only slightly; without the flag nothing changes."""

import csv
import json

import numpy as np

from transformers_gazeflow.commands.cli import main
from transformers_gazeflow.commands.predict import GazePredictor

from .pipeline_fixtures import (  # noqa: F401  (fixtures)
    single_torch_thread,
    synthetic_clip_mp4,
    tiny_model_dir,
)


def _samples(folder) -> np.ndarray:
    with (folder / "gaze.csv").open(encoding="utf-8") as handle:
        return np.array([[float(row["x_norm"]), float(row["y_norm"])] for row in csv.DictReader(handle)])


def test_resize_dtype_uint8_is_used_and_recorded(tmp_path, synthetic_clip_mp4, tiny_model_dir):
    path, _ = synthetic_clip_mp4
    common = ["predict", str(path), "--model", str(tiny_model_dir), "--no-overlay", "-k", "3", "-s", "2", "-q"]
    assert main([*common, "-o", str(tmp_path / "exact")]) == 0
    assert main([*common, "-o", str(tmp_path / "fast"), "--resize-dtype", "uint8"]) == 0
    exact = json.loads((tmp_path / "exact" / "summary.json").read_text())
    fast = json.loads((tmp_path / "fast" / "summary.json").read_text())
    assert "resize_dtype" not in exact and fast["resize_dtype"] == "uint8"
    difference = np.abs(_samples(tmp_path / "fast") - _samples(tmp_path / "exact"))
    assert 0 < difference.max() < 0.05  # other pixels, the same video: nearby trajectories


def test_the_predictor_keeps_the_models_resize_unless_asked(tiny_model_dir):
    assert GazePredictor(str(tiny_model_dir)).pipe.video_processor.resize_dtype == "float32"
    fast = GazePredictor(str(tiny_model_dir), resize_dtype="uint8").pipe.video_processor
    assert fast.resize_dtype == "uint8" and fast.size == GazePredictor(str(tiny_model_dir)).pipe.video_processor.size
