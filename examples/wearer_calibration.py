#!/usr/bin/env python
"""How much of a wearer's eye-tracker gaze a calibration needs: error before and after against seconds used.

Synthetic clips (``data.synthetic``) with known gaze stand in for a wearer: their tracker reads the true gaze with a
systematic offset (``--offset_deg``, degrees through the metrics' 60 degree camera), a little noise
(``--noise_deg``) and a few wild samples (``--outlier_share``), and misses the blinks and untracked frames the
simulation has. For each clip the model predicts once (the windows ``gazeflow calibrate`` and ``gazeflow predict``
run; a frame's prediction does not depend on the range asked for); then for each ``--seconds`` a calibration is
fitted on the first seconds of usable tracker gaze exactly as ``gazeflow calibrate`` fits it
(:func:`~transformers_gazeflow.data.tracker_gaze.usable_frames`,
:func:`~transformers_gazeflow.gaze.wearer.choose_and_fit`) and scored on the clips' last ``--eval_seconds`` (the
same frames for every budget, never used to fit), against the tracker's systematic reading (true gaze plus offset).

    python examples/wearer_calibration.py --output_dir runs/wearer_calibration
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from transformers_gazeflow.data.gaze_types import OFF_FRAME, valid_mask
from transformers_gazeflow.data.synthetic import SyntheticGazeSettings, generate_clip
from transformers_gazeflow.data.tracker_gaze import usable_frames
from transformers_gazeflow.data.video import write_video
from transformers_gazeflow.data.video_sources import open_video_source
from transformers_gazeflow.gaze.wearer import WearerCalibration, choose_and_fit
from transformers_gazeflow.hub.model_folders import load_model, resolve_model
from transformers_gazeflow.models.gazeflow.geometry import FieldOfView, pixels_to_unit, unit_to_pixels
from transformers_gazeflow.pipelines.egocentric_gaze import GazeFlowPipeline


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--model", default=None, help="model folder (default: the bundled model)")
    parser.add_argument("--clips", type=int, default=6)
    parser.add_argument("--clip_seconds", type=float, default=12.0)
    parser.add_argument("--eval_seconds", type=float, default=4.0)
    parser.add_argument("--seconds", type=float, nargs="+", default=[0.5, 1.0, 2.0, 4.0, 8.0])
    parser.add_argument("--offset_deg", type=float, nargs=2, default=[5.0, -3.0], help="tracker offset (x, y)")
    parser.add_argument("--noise_deg", type=float, default=0.5)
    parser.add_argument("--outlier_share", type=float, default=0.03)
    parser.add_argument("--seed", type=int, default=11)
    return parser.parse_args(argv)


def tracker_reading(
    truth: np.ndarray, width: int, height: int, offset_deg, rng, noise_deg: float, outlier_share: float
) -> tuple[np.ndarray, np.ndarray]:
    """The tracker's systematic reading (truth + offset, unit) and what it reports (+ noise and wild samples)."""
    camera = FieldOfView().for_frame(width, height)
    pixels = unit_to_pixels(truth, width, height)
    shift = camera.fx * np.tan(np.radians(offset_deg))  # degrees at the optical axis -> pixels
    systematic = pixels_to_unit(pixels + shift, width, height)
    noisy = pixels + shift + rng.normal(0, camera.fx * math.tan(math.radians(noise_deg)), pixels.shape)
    wild = rng.random(len(truth)) < outlier_share
    noisy[wild] = rng.uniform([0, 0], [width, height], (int(wild.sum()), 2))
    return systematic, pixels_to_unit(noisy, width, height)


def median_errors(points: np.ndarray, truth: np.ndarray, camera) -> tuple[float, float]:
    """Median distance between unit-coordinate points and the truth, in pixels and in degrees."""
    a, b = (unit_to_pixels(np.asarray(x, np.float64), camera.width, camera.height) for x in (points, truth))
    return float(np.median(np.linalg.norm(a - b, axis=1))), float(np.median(camera.angle_between_deg(a, b)))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    settings = SyntheticGazeSettings(
        num_clips=args.clips,
        min_frames=round(args.clip_seconds * 24),
        max_frames=round(args.clip_seconds * 24),
        width=128,
        height=96,
        fps=24.0,
        seed=args.seed,
    )
    pipe = GazeFlowPipeline(model=load_model(resolve_model(args.model)))
    rng = np.random.default_rng(args.seed)
    rows: dict[float, dict[str, list]] = {
        s: {"before": [], "after": [], "models": [], "frames": []} for s in args.seconds
    }
    floor = []  # the model against the true gaze: what a perfect correction of the offset leaves
    for index in range(args.clips):
        clip = generate_clip(settings, index)
        video = write_video(out / f"clip_{index}.mp4", clip.frames(), fps=clip.fps)
        width, height, fps = clip.width, clip.height, clip.fps
        codes = np.asarray(clip.gaze.gaze_type)
        systematic, reported = tracker_reading(
            np.asarray(clip.gaze.gaze, np.float64),
            width,
            height,
            args.offset_deg,
            rng,
            args.noise_deg,
            args.outlier_share,
        )
        outside = ((reported < 0) | (reported > 1)).any(axis=1)
        codes = np.where(outside & valid_mask(codes), OFF_FRAME, codes)  # what a tracker reports off the frame
        # the point estimate of the model's defaults and seed 0, as gazeflow calibrate and predict run it
        points = np.concatenate([chunk.points for chunk in pipe.stream_chunks(open_video_source(video))])
        evaluated = usable_frames(codes, fps, start_frame=int(clip.num_frames - args.eval_seconds * fps))
        camera = FieldOfView().for_frame(width, height)
        floor.append(median_errors(points[evaluated], np.asarray(clip.gaze.gaze)[evaluated], camera))
        for seconds in args.seconds:
            frames = usable_frames(codes, fps, seconds)
            frames = frames[frames < evaluated[0]]
            fitted, _ = choose_and_fit(
                unit_to_pixels(points[frames], width, height),
                unit_to_pixels(reported[frames], width, height),
                width,
                height,
            )
            calibration = WearerCalibration.from_correction(fitted, width, height, "", "")
            for key, guess in (("before", points), ("after", calibration.apply(points))):
                rows[seconds][key].append(median_errors(guess[evaluated], systematic[evaluated], camera))
            rows[seconds]["models"].append(fitted.model)
            rows[seconds]["frames"].append(int(frames.size))
        print(f"clip {index}: {clip.num_frames} frames predicted", flush=True)
    lines = [
        "| tracker seconds used | frames used (mean) | correction chosen | median error before (px / deg) | "
        "after (px / deg) |",
        "| ---: | ---: | --- | ---: | ---: |",
    ]
    record = {"args": vars(args), "rows": {}}
    for seconds, row in rows.items():
        before, after = np.mean(row["before"], axis=0), np.mean(row["after"], axis=0)
        chosen = ", ".join(f"{row['models'].count(m)} {m}" for m in sorted(set(row["models"])))
        lines.append(
            f"| {seconds:g} | {np.mean(row['frames']):.1f} | {chosen} | {before[0]:.2f} / {before[1]:.2f} | "
            f"{after[0]:.2f} / {after[1]:.2f} |"
        )
        record["rows"][str(seconds)] = {**row, "mean_before": before.tolist(), "mean_after": after.tolist()}
    low = np.mean(floor, axis=0)
    lines.append(f"| (the model against the true gaze, no offset) | | | | {low[0]:.2f} / {low[1]:.2f} |")
    record["model_vs_true_gaze"] = low.tolist()
    table = "\n".join(lines) + "\n"
    print(table)
    (out / "results.md").write_text(table)
    (out / "results.json").write_text(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
