"""``gazeflow demo``: a generated egocentric clip with known gaze through the model, the truth beside the prediction.

A synthetic clip (:mod:`transformers_gazeflow.data.synthetic`, 256x192 at 24 fps, seed 7) is written to
``demo_input.mp4`` and predicted like any video (:class:`~transformers_gazeflow.commands.predict.GazePredictor`),
with its true gaze drawn on the overlay (a white cross, on frames where it is a position on the frame) and written to
``gaze.csv`` (``true_x_norm``, ``true_y_norm``, ``true_code`` on every row). ``summary.json`` gains ``demo``: the
mean distance (unit coordinates) from the true gaze of the point estimate and of the frame centre, over the frames
whose true gaze is valid and on the frame (:meth:`GroundTruth.scored`: not untracked, not a blink, not off-frame),
with the number of frames left out and why.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Any

import numpy as np

from ..data.atomic_files import atomic_write
from ..data.gaze_types import GAZE_TYPE_NAMES
from ..data.output_safety import check_outputs
from ..data.video import write_video
from ..outputs.writers import write_summary
from .batch import CSV_NAME, SUMMARY_NAME, make_output_dir, remove_if_empty
from .output_policies import check_prediction_folder, prediction_outputs
from .predict import GazePredictor, GroundTruth, PredictOptions

DEMO_VIDEO_NAME = "demo_input.mp4"


DEMO_CLIP_SIZE, DEMO_CLIP_FPS, DEMO_CLIP_SEED = (256, 192), 24.0, 7
"""The demo clip: 256x192 at 24 fps from the synthetic generator's seed 7 (``gazeflow demo`` and the web demo)."""


def demo_clip(num_frames: int = 96):
    """The demo clip of ``num_frames`` frames (a :class:`~transformers_gazeflow.data.synthetic.SyntheticClip`) and
    its true gaze as a :class:`GroundTruth`."""
    from ..data.synthetic import SyntheticGazeSettings, generate_clip

    width, height = DEMO_CLIP_SIZE
    settings = SyntheticGazeSettings(
        num_clips=1,
        min_frames=num_frames,
        max_frames=num_frames,
        width=width,
        height=height,
        fps=DEMO_CLIP_FPS,
        seed=DEMO_CLIP_SEED,
    )
    clip = generate_clip(settings, 0)
    return clip, GroundTruth(gaze=np.asarray(clip.gaze.gaze, np.float64), codes=np.asarray(clip.gaze.gaze_type))


def score_points(frames: np.ndarray, points: np.ndarray, truth: GroundTruth) -> dict[str, Any]:
    """Mean distance (unit coordinates) of the point estimates ``points`` ``[n, 2]`` of ``frames`` ``[n]`` and of the
    frame centre to the true gaze, over the scored frames of ``truth`` (:meth:`GroundTruth.scored`); with the counts
    of frames left out per gaze type."""
    frames = np.asarray(frames, dtype=np.int64)
    points = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    known = frames < len(truth.codes)
    scored = np.zeros(len(frames), bool)
    scored[known] = truth.scored()[frames[known]]
    codes = np.asarray(truth.codes)[frames[known & ~scored]]
    left_out = {GAZE_TYPE_NAMES[code]: int(np.sum(codes == code)) for code in np.unique(codes)}
    if not scored.any():
        return {
            "frames_scored": 0,
            "frames_left_out": left_out,
            "point_estimate_error": None,
            "frame_centre_error": None,
        }
    true_gaze = np.asarray(truth.gaze, np.float64)[frames[scored]]
    model_error = float(np.linalg.norm(points[scored] - true_gaze, axis=1).mean())
    centre_error = float(np.linalg.norm(true_gaze - 0.5, axis=1).mean())
    return {
        "frames_scored": int(scored.sum()),
        "frames_left_out": left_out,
        "scored_frames": "true gaze valid and on the frame (not untracked, blink/other or off-frame)",
        "point_estimate_error": round(model_error, 4),
        "frame_centre_error": round(centre_error, 4),
    }


def demo_scores(csv_path: Path, truth: GroundTruth) -> dict[str, Any]:
    """:func:`score_points` of the point-estimate rows of a ``gaze.csv``."""
    with csv_path.open(encoding="utf-8") as handle:
        rows = [row for row in csv.DictReader(handle) if int(row["sample_id"]) == -1]
    frames = np.array([int(r["frame_idx"]) for r in rows])
    points = np.array([[float(r["x_norm"]), float(r["y_norm"])] for r in rows]).reshape(-1, 2)
    return score_points(frames, points, truth)


def run_demo(
    output_dir: str | os.PathLike,
    num_frames: int = 96,
    model: str | os.PathLike | None = None,
    device: str | None = None,
    options: PredictOptions | None = None,
) -> dict[str, Any]:
    """Render the demo clip, predict on it and score the point estimate against the true gaze; returns the summary.

    The model is loaded before anything is written; if the run fails, what it wrote is removed."""
    if num_frames < 1:
        raise ValueError(f"--frames must be >= 1, got {num_frames}")
    options = options or PredictOptions()
    predictor = GazePredictor(model, device=device)
    out_dir = Path(output_dir)
    video = out_dir / DEMO_VIDEO_NAME
    check_outputs([*prediction_outputs(out_dir), ("--output-dir", video)], [("--model", predictor.location)])
    check_prediction_folder(out_dir, options.overwrite, extra=(DEMO_VIDEO_NAME,))
    created = make_output_dir(out_dir)
    finished = wrote = False
    try:
        clip, truth = demo_clip(num_frames)
        atomic_write(video, lambda temporary: write_video(temporary, clip.frames(), fps=clip.fps))
        wrote = True
        summary = predictor.predict(video, out_dir, options, truth=truth)
        summary["demo"] = demo_scores(out_dir / CSV_NAME, truth)
        write_summary(out_dir / SUMMARY_NAME, summary)
        finished = True
        return summary
    finally:
        if not finished:
            if wrote:
                video.unlink(missing_ok=True)
            remove_if_empty(created)


__all__ = [
    "DEMO_VIDEO_NAME",
    "DEMO_CLIP_SIZE",
    "DEMO_CLIP_FPS",
    "DEMO_CLIP_SEED",
    "demo_clip",
    "score_points",
    "demo_scores",
    "run_demo",
]
