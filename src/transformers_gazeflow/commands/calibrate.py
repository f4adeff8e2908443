"""``gazeflow calibrate``: fit a wearer's correction of a model's gaze from a few seconds of the wearer's eye tracker.

:func:`calibrate_wearer` reads the tracker's gaze on the video's frames (:func:`~transformers_gazeflow.data.
tracker_gaze.read_tracker_gaze`: a ``gaze.csv``-like CSV, an Ego4D gaze CSV, an EGTEA BeGaze export, an Ego-Exo4D 2D
eye-gaze CSV, or an Aria recording's MPS 3D eye-gaze CSV with its ``camera_calibration``), keeps the
usable frames (:func:`~transformers_gazeflow.data.tracker_gaze.usable_frames`: tracked, not a blink, on the frame;
with ``seconds`` only those in the first ``seconds`` from the first one used), predicts the model's point estimate on
the frames they span (the same windows as ``gazeflow predict``, so the gaze corrected later is the gaze fitted here),
fits the correction (:mod:`transformers_gazeflow.gaze.wearer`: offset or offset + scale, robust, chosen by held-out
error) and writes it with the model's identity to ``calib.json``. ``gazeflow predict --calibration calib.json``
applies it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..data.tracker_gaze import read_tracker_gaze, usable_frames
from ..data.video_sources import open_video_source
from ..gaze.wearer import WearerCalibration, choose_and_fit, pixel_errors
from ..models.gazeflow.geometry import unit_to_pixels
from .predict import GazePredictor, PredictOptions


def predicted_points(
    predictor: GazePredictor, video: str | os.PathLike, first: int, stop: int, options: PredictOptions
) -> np.ndarray:
    """The model's point estimate ``[stop - first, 2]`` on frames ``[first, stop)`` of ``video``."""
    source = open_video_source(video, start_frame=first, end_frame=stop)
    settings = predictor.settings(options)
    predictor.check_sizes(settings, source, options)  # -k past the memory: refused before sampling allocates
    chunks = predictor.pipe.stream_chunks(source, settings, seed=options.seed)
    return np.concatenate([chunk.points for chunk in chunks])


def calibrate_wearer(
    video: str | os.PathLike,
    tracker: str | os.PathLike,
    output: str | os.PathLike,
    predictor: GazePredictor | None = None,
    model: str | None = None,
    device: str | None = None,
    seconds: float | None = None,
    start_frame: int | None = None,
    correction: str = "auto",
    options: PredictOptions | None = None,
    camera_calibration: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """Fit and write a wearer calibration (see the module docstring); returns what was done: the calibration, the
    frames and seconds used, and the median pixel error on them before and after."""
    started = time.perf_counter()
    options = options or PredictOptions()
    source = open_video_source(video)
    total = source.total_frames or source.expected_frames
    gaze = read_tracker_gaze(tracker, total, source.fps, Path(video).name, camera_calibration)
    frames = usable_frames(gaze.gaze_type, source.fps, seconds, start_frame)
    if frames.size == 0:
        since = f" from frame {start_frame}" if start_frame is not None else ""
        raise ValueError(
            f"{tracker}: no usable gaze rows on the {total} frames of {video}{since} ({gaze.kind}: every "
            f"row is missing, untracked, a blink, off the frame or outside the video's frames){gaze.hint}"
        )
    predictor = predictor or GazePredictor(model, device=device)
    points = predicted_points(predictor, video, int(frames[0]), int(frames[-1]) + 1, options)[frames - frames[0]]
    truth = gaze.gaze[frames]
    width, height = source.width, source.height
    fitted, held_out = choose_and_fit(
        unit_to_pixels(points, width, height), unit_to_pixels(truth, width, height), width, height, correction
    )
    before = float(np.median(pixel_errors(points, truth, width, height)))
    record = {
        "video": str(video),
        "tracker": str(tracker),
        "tracker_kind": gaze.kind,
        "frames": int(frames.size),
        "first_frame": int(frames[0]),
        "last_frame": int(frames[-1]),
        "seconds": float((frames[-1] - frames[0] + 1) / source.fps),
        "width": width,
        "height": height,
        "held_out_median_error_px": held_out,
        "asked": correction,
    }
    calibration = WearerCalibration.from_correction(
        fitted, width, height, predictor.location, predictor.pipe.model_fingerprint, record
    )
    after = float(np.median(pixel_errors(calibration.apply(points), truth, width, height)))
    calibration = WearerCalibration(
        calibration.model,
        calibration.offset,
        calibration.scale,
        calibration.model_name,
        calibration.model_fingerprint,
        {**record, "median_error_before_px": before, "median_error_after_px": after},
    )
    calibration.write(output)
    return {
        "calibration": calibration,
        "output": str(output),
        "frames": int(frames.size),
        "seconds": record["seconds"],
        "error_before_px": before,
        "error_after_px": after,
        "held_out_px": held_out,
        "seconds_taken": time.perf_counter() - started,
    }


__all__ = ["calibrate_wearer", "predicted_points"]
