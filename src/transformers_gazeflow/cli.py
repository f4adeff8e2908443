"""The ``gazeflow`` command.

``gazeflow predict VIDEO [--model M] --output-dir DIR`` streams a video through the model and writes, into DIR:

* ``overlay.mp4``: the original frames at the original fps with the heatmap, the K samples and a short trail of
  the point estimate drawn on them (:mod:`transformers_gazeflow.visualization`);
* ``gaze.csv``: one row per frame and sample plus the point estimate (:mod:`transformers_gazeflow.export`);
* ``summary.json``: model, K, S, solver, seed, fps, size, frames, outputs and timings.

``gazeflow demo`` renders a synthetic egocentric clip with known gaze (``data.synthetic``), runs the bundled
default model on it (or ``--model``) and writes the same outputs, plus how far the point estimate lies from the
true gaze compared with the frame centre.

Bad input (a missing or undecodable video, an unknown model folder, a bad frame range) prints
``gazeflow: error: ...`` and exits with status 1; set ``GAZEFLOW_DEBUG=1`` for the traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .configuration_gazeflow import SOLVERS, WINDOW_MODES
from .data.video import VideoDecodeError, write_video
from .export import GazeCsvWriter, write_summary
from .geometry import unit_to_pixels
from .hub import ModelFolderError, load_model, resolve_model
from .pipeline_gazeflow import GazeFlowPipeline, open_video_source
from .visualization import OverlayRenderer

OVERLAY_NAME, CSV_NAME, SUMMARY_NAME = "overlay.mp4", "gaze.csv", "summary.json"
USER_ERRORS = (FileNotFoundError, VideoDecodeError, ModelFolderError, ValueError, OSError)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gazeflow", description="Egocentric gaze prediction with GazeFlow.")
    commands = parser.add_subparsers(dest="command", required=True)

    def add_common(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--model", default=None,
                         help="model folder or Hub id (default: the bundled model, offline)")
        sub.add_argument("--num-samples", "-k", type=int, default=None, help="K sampled trajectories (default: config)")
        sub.add_argument("--num-steps", "-s", type=int, default=None, help="S ODE steps (default: config)")
        sub.add_argument("--solver", choices=SOLVERS, default=None, help="ODE solver (default: config)")
        sub.add_argument("--window-mode", choices=WINDOW_MODES, default=None,
                         help="joining overlapping windows: coherent (each sample one continuous trajectory) or blend "
                              "(the paper's linear blend) (default: config)")
        sub.add_argument("--seed", type=int, default=0, help="noise seed (default 0)")
        sub.add_argument("--device", default=None, help="torch device, e.g. cpu or cuda (default: cpu)")
        sub.add_argument("--trail", type=int, default=8, help="frames in the point-estimate trail (default 8)")
        sub.add_argument("--no-heatmap", action="store_true", help="do not draw heatmaps on the overlay")
        sub.add_argument("--no-overlay", action="store_true", help="write only gaze.csv and summary.json")
        sub.add_argument("--threads", type=int, default=None, help="CPU threads for torch (default: torch's choice)")
        sub.add_argument("--quiet", "-q", action="store_true", help="no progress bar")

    predict = commands.add_parser("predict", help="predict gaze on a video file")
    predict.add_argument("video", help="a video file (anything PyAV/FFmpeg opens)")
    predict.add_argument("--output-dir", "-o", required=True, help="folder for overlay.mp4, gaze.csv, summary.json")
    predict.add_argument("--start-frame", type=int, default=None, help="first frame to process (default 0)")
    predict.add_argument("--end-frame", type=int, default=None, help="stop before this frame (default: the end)")
    add_common(predict)

    demo = commands.add_parser("demo", help="run the bundled model on a generated sample video")
    demo.add_argument("--output-dir", "-o", default="gazeflow_demo", help="output folder (default ./gazeflow_demo)")
    demo.add_argument("--frames", type=int, default=96, help="frames of the generated clip (default 96)")
    add_common(demo)

    app = commands.add_parser("app", help="serve the web demo (needs the [app] extra: gradio)")
    app.add_argument("--model", default=None, help="model the page starts with (default: the bundled model)")
    app.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
    app.add_argument("--port", type=int, default=None, help="port (default: Gradio's, 7860)")
    app.add_argument("--share", action="store_true", help="also make a public gradio.live link (off by default)")
    return parser


def _progress(total: int | None, quiet: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="frame", desc="gazeflow", disable=quiet, file=sys.stderr)


def predict_video(video: str | os.PathLike, output_dir: str | os.PathLike, model: str | None = None,
                  num_samples: int | None = None, num_steps: int | None = None, solver: str | None = None,
                  seed: int | None = 0, device: str | None = None, start_frame: int | None = None,
                  end_frame: int | None = None, trail: int = 8, heatmap: bool = True, overlay: bool = True,
                  quiet: bool = True, window_mode: str | None = None) -> dict[str, Any]:
    """Run one video through the model, streaming, and write overlay/CSV/summary into ``output_dir``.

    Returns the summary. Partial outputs are removed when the run fails.
    """
    started = time.perf_counter()
    source = open_video_source(video, start_frame=start_frame, end_frame=end_frame)  # checks the video first
    location = resolve_model(model)
    pipe = GazeFlowPipeline(model=load_model(location), device=device)
    loaded = time.perf_counter()
    config = pipe.model.config
    from .windowed_engine import sampling_settings

    settings = vars(sampling_settings(config, num_samples, num_steps, solver, window_mode))
    out_dir = Path(output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    final = {"overlay": out_dir / OVERLAY_NAME, "csv": out_dir / CSV_NAME, "summary": out_dir / SUMMARY_NAME}
    partial = {key: path.with_name(f"partial.{path.name}") for key, path in final.items()}
    renderer = OverlayRenderer(trail=trail)
    sigma = config.heatmap_sigma
    frames_done = 0
    point_sum = np.zeros(2)

    def overlay_frames(writer: GazeCsvWriter, bar) -> Iterator[np.ndarray]:
        nonlocal frames_done, point_sum
        from .metrics.heatmaps import render_heatmaps

        for chunk in pipe.stream_chunks(source, seed=seed, keep_frames=overlay, **settings):
            writer.write(source.start_frame + chunk.start, chunk.trajectories)
            point_sum = point_sum + chunk.points.sum(axis=0)
            frames_done += chunk.num_frames
            bar.update(chunk.num_frames)
            if not overlay:
                continue
            samples_px = unit_to_pixels(chunk.trajectories, source.width, source.height)
            points_px = unit_to_pixels(chunk.points, source.width, source.height)
            for i, frame in enumerate(chunk.frames):
                maps = (render_heatmaps(chunk.trajectories[:, i:i + 1], source.width, source.height, sigma=sigma)[0]
                        .numpy() if heatmap else None)
                yield renderer.render(frame, samples_px[:, i], points_px[i], maps)

    try:
        with GazeCsvWriter(partial["csv"], source.video_id, source.width, source.height, source.fps) as writer, \
                _progress(source.expected_frames, quiet) as bar:
            frames = overlay_frames(writer, bar)
            if overlay:
                write_video(partial["overlay"], frames, fps=source.fps)
            else:
                for _ in frames:
                    pass
        finished = time.perf_counter()
        outputs = {"csv": str(final["csv"]), "summary": str(final["summary"])}
        partial["csv"].replace(final["csv"])
        if overlay:
            partial["overlay"].replace(final["overlay"])
            outputs["overlay"] = str(final["overlay"])
        summary = {
            "video": source.name, "video_id": source.video_id, "model": location,
            "num_samples": settings["num_samples"], "num_steps": settings["num_steps"], "solver": settings["solver"],
            "window_mode": settings["window_mode"],
            "seed": seed, "device": str(pipe.device), "fps": source.fps, "width": source.width,
            "height": source.height, "start_frame": source.start_frame, "frames": frames_done,
            "point_estimate": "per-frame mean of the K samples",
            "mean_point_norm": (point_sum / max(frames_done, 1)).tolist(), "heatmap_sigma_px": sigma,
            "outputs": outputs,
            "timings": {"load_s": round(loaded - started, 3), "predict_s": round(finished - loaded, 3),
                        "ms_per_frame": round(1000.0 * (finished - loaded) / max(frames_done, 1), 2)},
        }
        write_summary(final["summary"], summary)
        return summary
    finally:
        for path in partial.values():
            path.unlink(missing_ok=True)


def run_demo(output_dir: str | os.PathLike, num_frames: int = 96, **options: Any) -> dict[str, Any]:
    """Render a synthetic clip with known gaze, predict on it and add the distances to the true gaze."""
    from .data.synthetic import SyntheticGazeSettings, generate_clip

    if num_frames < 1:
        raise ValueError(f"--frames must be >= 1, got {num_frames}")
    out_dir = Path(output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    resolve_model(options.get("model"))  # fail before rendering when there is no model
    settings = SyntheticGazeSettings(num_clips=1, min_frames=num_frames, max_frames=num_frames, width=256, height=192,
                                     fps=24.0, seed=7)
    clip = generate_clip(settings, 0)
    video = write_video(out_dir / "demo_input.mp4", clip.frames(), fps=clip.fps)
    summary = predict_video(video, out_dir, **options)
    summary["demo"] = demo_scores(out_dir / CSV_NAME, clip.gaze.gaze, clip.gaze.valid)
    write_summary(out_dir / SUMMARY_NAME, summary)
    return summary


def demo_scores(csv_path: Path, true_gaze: np.ndarray, valid: np.ndarray) -> dict[str, float]:
    """Mean distance (unit coordinates) of the point estimate and of the frame centre to the true gaze."""
    import csv

    with csv_path.open(encoding="utf-8") as handle:
        rows = [row for row in csv.DictReader(handle) if int(row["sample_id"]) == -1]
    points = np.array([[float(r["x_norm"]), float(r["y_norm"])] for r in rows])
    valid = np.asarray(valid, bool)[:len(points)]
    truth = np.asarray(true_gaze, np.float64)[:len(points)][valid]
    model_error = float(np.linalg.norm(points[valid] - truth, axis=1).mean())
    centre_error = float(np.linalg.norm(truth - 0.5, axis=1).mean())
    return {"frames_scored": int(valid.sum()), "point_estimate_error": round(model_error, 4),
            "frame_centre_error": round(centre_error, 4)}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gazeflow`` console script; returns the exit status."""
    args = build_parser().parse_args(argv)
    if args.command == "app":  # the web demo (transformers_gazeflow.web_demo); gradio is imported there only
        from .web_demo import serve

        return serve(model=args.model, host=args.host, port=args.port, share=args.share)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # our own bar is over frames; no "Loading weights" bar
    if args.threads is not None:
        import torch

        torch.set_num_threads(args.threads)
    options = dict(model=args.model, num_samples=args.num_samples, num_steps=args.num_steps, solver=args.solver,
                   window_mode=args.window_mode, seed=args.seed, device=args.device, trail=args.trail, heatmap=not args.no_heatmap,
                   overlay=not args.no_overlay, quiet=args.quiet)
    try:
        if args.command == "predict":
            summary = predict_video(args.video, args.output_dir, start_frame=args.start_frame,
                                    end_frame=args.end_frame, **options)
        else:
            summary = run_demo(args.output_dir, num_frames=args.frames, **options)
    except USER_ERRORS as err:
        if os.environ.get("GAZEFLOW_DEBUG"):
            raise
        print(f"gazeflow: error: {err}", file=sys.stderr)
        return 1
    timings = summary["timings"]
    print(f"gazeflow: {summary['frames']} frames of {summary['video']} in {timings['predict_s']:.1f} s "
          f"({timings['ms_per_frame']:.1f} ms/frame) -> {Path(summary['outputs']['csv']).parent}")
    if "demo" in summary:
        demo = summary["demo"]
        print(f"gazeflow: demo: point estimate {demo['point_estimate_error']:.3f} from the true gaze on average, "
              f"frame centre {demo['frame_centre_error']:.3f} (unit coordinates)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
