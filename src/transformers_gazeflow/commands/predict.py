"""One video through a loaded model into an output folder: the work behind ``gazeflow predict`` and ``gazeflow demo``.

:class:`GazePredictor` loads a model once (:func:`transformers_gazeflow.hub.model_folders.load_model`) and
:meth:`~GazePredictor.predict` streams a video through it (:meth:`GazeFlowPipeline.stream_chunks`), writing into the
output folder:

* ``overlay.mp4``: the original frames at the original fps and size with the heatmap, the K samples, the point
  estimate and its trail (and the true gaze when known) drawn on them (:mod:`transformers_gazeflow.outputs.overlay`),
  encoded in a background thread;
* ``gaze.csv``: one row per frame and sample plus the point estimate (:mod:`transformers_gazeflow.outputs.writers`),
  with degrees, event labels and the uncertainty of each frame (:mod:`transformers_gazeflow.outputs.readouts`); or,
  with ``PredictOptions.table_format = "parquet"`` (``--format parquet``), ``gaze.parquet``: the same numbers, one
  row per frame with the K samples as list columns (:mod:`transformers_gazeflow.outputs.gaze_parquet`);
* ``fixations.csv``, ``saccades.csv`` (the events of the point estimate and of each sample) and ``scanpaths.json``
  (the fixations for pysaliency);
* ``summary.json``: model, K, S, solver, window mode, seed, device, fps, size, frames, heatmap sigma, the camera, the
  event labeller, the region calibration, the wearer calibration, outputs and timings.

``PredictOptions.camera`` (``--fov`` / ``--intrinsics``; the metrics' 60 degree camera by default) turns pixels into
degrees; ``PredictOptions.calibration`` (``--calibration``) corrects every sample with a wearer calibration fitted
for this model (``gazeflow calibrate``), before anything is written.

Outputs are written under ``partial.*`` names and renamed when complete, ``summary.json`` last: a folder with a
``summary.json`` holds a finished prediction (what ``--resume`` looks for). When a run fails or is interrupted
(an exception, Ctrl-C, SIGTERM turned into an exception by the command), the partial files are deleted, the encoder
thread is stopped, and an output folder this run created is removed if it is left empty; earlier complete outputs
in the folder are left as they were.

The same loop serves the web demo (:mod:`transformers_gazeflow.commands.web_demo_jobs`):
:meth:`GazePredictor.from_pipeline` wraps a pipeline it already holds, ``on_chunk`` sees every finished chunk (its
progress bar, its x(t)/y(t) figure) and stops the run by raising (its Stop button: :class:`RunCancelled`), and
``PredictOptions.even_size`` pads odd overlays to the even size browsers play.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..data.gaze_types import OFF_FRAME, valid_mask
from ..data.output_safety import StagedFiles, check_outputs
from ..data.video_sources import VideoSource, open_video_source
from ..gaze.events import EventSettings
from ..gaze.regions import warn_on_sampler_mismatch
from ..gaze.wearer import WearerCalibration, calibration_for_model
from ..generation.resource_bounds import check_memory, windowed_memory
from ..generation.windowed import StageClock
from ..hub.model_folders import load_model, load_region_calibration, resolve_model
from ..metrics.heatmaps import HEATMAP_SIGMA_FRACTION, heatmap_sigma_px
from ..models.gazeflow.generation_gazeflow import SamplingSettings
from ..models.gazeflow.geometry import FieldOfView, FisheyeCamera, PinholeCamera
from ..outputs.overlay import READABLE_SHORT_SIDE, OverlayLegend, OverlayRenderer, OverlayVideoWriter
from ..outputs.readouts import ReadoutFiles
from ..outputs.writers import write_summary
from ..pipelines.egocentric_gaze import GazeFlowPipeline
from .batch import (
    TABLE_NAMES,
    IndexPart,
    Shard,
    finished_summary,
    make_output_dir,
    one_line,
    remove_if_empty,
)
from .output_policies import (
    PREDICTION_OUTPUTS,
    STREAMED_OUTPUTS,
    check_prediction_folder,
    prediction_keys,
    prediction_outputs,
)
from .overlay_frames import render_overlay_frame

if TYPE_CHECKING:
    from ..generation.windowed import GazeChunk

ChunkCallback = Callable[["GazeChunk", int, int], None]
"""``on_chunk(chunk, frames_done, frames_total)``: called after each chunk's rows are written; raising stops the run
(its partial files are removed)."""


class RunCancelled(Exception):
    """Raised by an ``on_chunk`` callback to stop a run on request (the web demo's Stop button)."""


@dataclass
class PredictOptions:
    """How to predict and what to write."""

    sampling: dict[str, Any] = field(default_factory=dict)
    """The sampling settings asked for, by field of :class:`SamplingSettings` (``num_samples``, ``num_steps``,
    ``solver``, ``window_mode``; absent or None: the model config's default), resolved once per run."""
    seed: int | None = 0
    start_frame: int | None = None
    end_frame: int | None = None
    trail: int = 8
    heatmap: bool = True
    heatmap_sigma_px: float | None = None
    heatmap_sigma_fraction: float | None = None
    overlay: bool = True
    quiet: bool = True
    even_size: bool = False
    """Pad an odd-sized overlay by one edge row/column to H.264 4:2:0, which browsers play (the web demo)."""
    camera: FieldOfView | PinholeCamera | FisheyeCamera | None = None
    """The camera for degrees (None: the metrics' 60 degree horizontal field of view)."""
    events: EventSettings | None = None
    """How frames are labelled fixation or saccade (None: I-VT at 30 deg/s)."""
    calibration: str | os.PathLike | WearerCalibration | None = None
    """A wearer calibration (``calib.json`` or the object) applied to every sample."""
    region: bool = False
    """Outline the calibrated 90% uncertainty region on the overlay."""
    overwrite: bool = False
    """Replace files at the outputs' names that no earlier prediction wrote (``commands.output_policies``)."""
    max_memory_gb: float | None = None
    """The memory the sampling may need, estimated before it allocates (None: the machine's memory)."""
    inputs: tuple[tuple[str, str], ...] = ()
    """Further files the run reads, ``(argument, path)`` (``--intrinsics``): no output may be one of them."""
    table_format: str = "csv"
    """The per-frame gaze table (``--format``): ``"csv"`` writes ``gaze.csv``, ``"parquet"`` ``gaze.parquet``."""

    def __post_init__(self) -> None:
        if self.table_format not in TABLE_NAMES:
            raise ValueError(f"table_format must be one of {tuple(TABLE_NAMES)}, got {self.table_format!r}")


@dataclass
class GroundTruth:
    """The known gaze of a video, indexed by frame: unit coordinates ``[T, 2]`` and gaze-type codes ``[T]``."""

    gaze: np.ndarray
    codes: np.ndarray

    def scored(self) -> np.ndarray:
        """Frames whose true gaze is a position on the frame: valid by the schema's rule (not untracked, not a
        blink) and not off-frame (an off-frame frame's point is only clamped to the border). ``[T]`` bool."""
        codes = np.asarray(self.codes)
        return valid_mask(codes) & (codes != OFF_FRAME)


STAGES_MEASURED = (
    "decode: the reading thread's time in PyAV (beside the model); wait_for_frames: the time the model's loop waited "
    "for frames (decoding was the bottleneck for that long); preprocess, encode, sample: on CUDA the time between "
    "CUDA events recorded around each stage on the stream without waiting (read once at the end), elsewhere the "
    "stage's wall time; write: gaze.csv and handing frames to the overlay thread; stream: the whole stream's wall "
    "time. Stages overlap, so they do not add up to predict_s"
)
"""How ``summary.json``'s ``timings.stages_s`` are measured (written next to them)."""


def describe_sigma(options: PredictOptions) -> str:
    """How the heatmap sigma was chosen, for ``summary.json``."""
    if options.heatmap_sigma_px is not None:
        return f"{options.heatmap_sigma_px:g} px (--heatmap-sigma)"
    if options.heatmap_sigma_fraction is not None:
        return f"{100 * options.heatmap_sigma_fraction:g}% of the frame width (--heatmap-sigma)"
    return f"{100 * HEATMAP_SIGMA_FRACTION:.2g}% of the frame width (the paper's 25 px at 640 px)"


def _progress(total: int | None, quiet: bool, description: str):
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="frame", desc=description, disable=quiet, file=sys.stderr, leave=False)


class GazePredictor:
    """A GazeFlow model loaded once for inference (``model``: a folder or Hub id; None: the bundled default);
    ``resize_dtype`` (``"float32"`` or ``"uint8"``) overrides its processor's resize precision."""

    def __init__(
        self,
        model: str | os.PathLike | None = None,
        device: str | None = None,
        dtype: str = "auto",
        compile: bool = False,
        resize_dtype: str | None = None,
        **pipeline_options: Any,
    ) -> None:
        started = time.perf_counter()
        self.location = resolve_model(model)
        self.pipe = GazeFlowPipeline(
            model=load_model(self.location), device=device, dtype=dtype, compile=compile, **pipeline_options
        )
        processor = self.pipe.video_processor
        if resize_dtype is not None and resize_dtype != processor.resize_dtype:  # the model's own by default
            self.pipe.video_processor = type(processor).from_dict({**processor.to_dict(), "resize_dtype": resize_dtype})
        self.load_s = time.perf_counter() - started

    @classmethod
    def from_pipeline(cls, pipe: GazeFlowPipeline, location: str, load_s: float = 0.0) -> GazePredictor:
        """A predictor over a pipeline already loaded from ``location`` (the web demo's cache of models)."""
        predictor = cls.__new__(cls)
        predictor.location, predictor.pipe, predictor.load_s = location, pipe, load_s
        return predictor

    @property
    def config(self):
        return self.pipe.model.config

    def wearer_calibration(self, options: PredictOptions) -> WearerCalibration | None:
        """The options' wearer calibration, read and checked against this model (one-line errors)."""
        if options.calibration is None:
            return None
        return calibration_for_model(options.calibration, self.pipe.model_fingerprint, self.location)

    def _readout_files(
        self,
        source,
        settings: SamplingSettings,
        options: PredictOptions,
        paths: dict[str, Path],
        truth: GroundTruth | None,
    ) -> ReadoutFiles:
        region_calibration = load_region_calibration(self.location)
        warn_on_sampler_mismatch(region_calibration, settings.noise_scale)
        return ReadoutFiles(
            paths[options.table_format],
            {key: paths[key] for key in ("fixations", "saccades", "scanpaths")},
            source.video_id,
            source.width,
            source.height,
            source.fps,
            settings.num_samples,
            (options.camera or FieldOfView()).for_frame(source.width, source.height),
            options.events,
            region_calibration,
            true_gaze=None if truth is None else truth.gaze,
            true_codes=None if truth is None else truth.codes,
            table_format=options.table_format,
        )

    def settings(self, options: PredictOptions) -> SamplingSettings:
        """The run's sampling settings: the options' over the model's defaults, resolved once here and passed
        down."""
        return SamplingSettings.resolve(self.config, **options.sampling)

    def predict(
        self,
        video: str | os.PathLike,
        output_dir: str | os.PathLike,
        options: PredictOptions,
        truth: GroundTruth | None = None,
        on_chunk: ChunkCallback | None = None,
    ) -> dict[str, Any]:
        """Predict gaze on ``video`` and write overlay/CSV/summary into ``output_dir``; returns the summary.
        ``on_chunk(chunk, frames_done, frames_total)`` is called after each chunk's rows are written (raise to
        stop)."""
        source = open_video_source(video, start_frame=options.start_frame, end_frame=options.end_frame)
        settings = self.settings(options)
        self.check_sizes(settings, source, options)
        sigma = heatmap_sigma_px(source.width, options.heatmap_sigma_px, options.heatmap_sigma_fraction)
        calibration = self.wearer_calibration(options)  # a calibration of another model: before anything is written
        out_dir = Path(output_dir)
        self.check_outputs(video, out_dir, options)
        created = make_output_dir(out_dir)
        final = {name: out_dir / file for name, file in PREDICTION_OUTPUTS.items()}
        # the streamed files, each under a temporary of its own (created here, never through a link); summary.json
        # is written whole by write_summary, last
        staged = StagedFiles()
        written = prediction_keys(options.table_format, options.overlay)
        partial = {key: staged.stage(final[key]) for key in STREAMED_OUTPUTS if key in written}
        table = options.table_format  # the key of the gaze table's file
        finished = False
        streamed = StreamedTotals(clock=StageClock(self.pipe.device))
        started = time.perf_counter()
        legend = OverlayLegend(settings.num_samples, options.heatmap, options.region, truth is not None)
        writer = _overlay_writer(partial["overlay"], source, options, sigma, legend) if options.overlay else None
        try:
            self._stream(source, settings, options, partial, writer, truth, calibration, on_chunk, streamed)
            outputs = {table: str(final[table]), "summary": str(final["summary"])}
            if writer is not None:
                writer.close()
                outputs["overlay"] = str(final["overlay"])
            predict_s = time.perf_counter() - started
            for name in (table, *streamed.readouts.pop("files")):
                staged.publish(final[name])
                outputs[name] = str(final[name])
            if writer is not None:
                staged.publish(final["overlay"])
            summary = self.summary(source, settings, options, sigma, streamed, calibration, outputs, predict_s)
            write_summary(final["summary"], summary)  # last: a folder with a summary.json holds a finished prediction
            finished = True
            return summary
        finally:
            if writer is not None and not finished:
                writer.abort()
            staged.discard()
            if not finished:
                remove_if_empty(created)

    def check_sizes(self, settings: SamplingSettings, source: VideoSource, options: PredictOptions) -> None:
        """The memory K and the frames need, estimated before sampling allocates it (``generation.
        resource_bounds``): past ``options.max_memory_gb`` (None: the machine's), a one-line refusal."""
        need = windowed_memory(
            self.config, settings.num_samples, self.pipe.inference_dtype.itemsize, (source.width, source.height)
        )
        check_memory(need, f"K={settings.num_samples}", options.max_memory_gb)

    def check_outputs(self, video: str | os.PathLike, out_dir: Path, options: PredictOptions) -> None:
        """No output may be an input (the video, the calibration, the model folder, ``options.inputs``), and files
        at the outputs' names that no earlier prediction wrote are kept unless ``options.overwrite``
        (``commands.output_policies``); before anything is written."""
        inputs = [("VIDEO", video), *options.inputs, ("--model", self.location)]
        if isinstance(options.calibration, (str, os.PathLike)):
            inputs.append(("--calibration", options.calibration))
        check_outputs(prediction_outputs(out_dir, table_format=options.table_format), inputs)
        check_prediction_folder(out_dir, options.overwrite, table_format=options.table_format)

    def _stream(
        self,
        source: VideoSource,
        settings: SamplingSettings,
        options: PredictOptions,
        partial: dict[str, Path],
        writer: OverlayVideoWriter | None,
        truth: GroundTruth | None,
        calibration: WearerCalibration | None,
        on_chunk: ChunkCallback | None,
        totals: StreamedTotals,
    ) -> None:
        """Stream the video through the model chunk by chunk (corrected by the wearer ``calibration``): its rows and
        readouts into the ``partial`` files, its frames (with the true gaze where it is scored and the 90% region)
        to the overlay ``writer``, then ``on_chunk``; adding up ``totals``."""
        scored = truth.scored() if truth is not None else None
        with (
            self._readout_files(source, settings, options, partial, truth) as csv_writer,
            _progress(source.expected_frames, options.quiet, source.video_id) as bar,
        ):
            for chunk in self.pipe.stream_chunks(
                source, settings, seed=options.seed, keep_frames=writer is not None, clock=totals.clock
            ):
                writing = time.perf_counter()
                chunk = corrected_chunk(chunk, calibration)
                first = source.start_frame + chunk.start
                region90 = csv_writer.write(first, chunk.trajectories).region(0.9)
                points = chunk.points
                totals.point_sum = totals.point_sum + points.sum(axis=0)
                totals.frames += chunk.num_frames
                bar.update(chunk.num_frames)
                if writer is not None:
                    for offset, frame in enumerate(chunk.frames):
                        index = first + offset
                        shown = (
                            truth.gaze[index] if scored is not None and index < len(scored) and scored[index] else None
                        )
                        writer.write((frame, chunk.trajectories[:, offset], points[offset], shown, region90[offset]))
                totals.write_s += time.perf_counter() - writing
                if on_chunk is not None:
                    on_chunk(chunk, totals.frames, source.expected_frames or totals.frames)
            totals.readouts = csv_writer.close()

    def summary(
        self,
        source: VideoSource,
        settings: SamplingSettings,
        options: PredictOptions,
        sigma: float,
        streamed: StreamedTotals,
        calibration: WearerCalibration | None,
        outputs: dict[str, str],
        predict_s: float,
    ) -> dict[str, Any]:
        """``summary.json`` of one prediction: video, model, sampling settings, frames, the mean point estimate,
        the heatmap, the readouts (:func:`readout_summary`), the output files and the timings (with each stage's,
        :data:`STAGES_MEASURED`)."""
        frames = max(streamed.frames, 1)
        return {
            "video": source.name,
            "video_id": source.video_id,
            "model": self.location,
            **settings.to_dict(),
            "seed": options.seed,
            "device": str(self.pipe.device),
            "dtype": str(self.pipe.inference_dtype).removeprefix("torch."),
            **{k: v for k, v in self.pipe.video_processor.to_dict().items() if k == "resize_dtype"},  # when not float32
            "fps": source.fps,
            "width": source.width,
            "height": source.height,
            "start_frame": source.start_frame,
            "frames": streamed.frames,
            "point_estimate": "per-frame mean of the K samples",
            "mean_point_norm": (streamed.point_sum / frames).tolist(),
            "heatmap": bool(options.overlay and options.heatmap),
            "heatmap_sigma_px": round(sigma, 3),
            "heatmap_sigma": describe_sigma(options),
            **readout_summary(streamed.readouts, options, calibration),
            "outputs": outputs,
            "timings": {
                "load_s": round(self.load_s, 3),
                "predict_s": round(predict_s, 3),
                "ms_per_frame": round(1000.0 * predict_s / frames, 2),
                "stages_s": {**streamed.clock.totals(), "write": round(streamed.write_s, 4)},
                "stages_measured": STAGES_MEASURED,
            },
        }


@dataclass
class StreamedTotals:
    """What a prediction measures while it streams: the frames done, the sum of their point estimates, what the
    readout files report when closed, the stages' clock and the time spent writing."""

    clock: StageClock
    frames: int = 0
    point_sum: np.ndarray = field(default_factory=lambda: np.zeros(2))
    readouts: dict[str, Any] = field(default_factory=dict)
    write_s: float = 0.0


def _overlay_writer(
    path: Path, source: VideoSource, options: PredictOptions, sigma: float, legend: OverlayLegend
) -> OverlayVideoWriter:
    """The overlay video's writer: it draws each frame in its own thread, in frame order, with ``legend`` burned in
    and a small video enlarged to a short side of at least ``READABLE_SHORT_SIDE`` (the command's and the web demo's
    overlay alike)."""
    renderer = OverlayRenderer(trail=options.trail, legend=legend, min_short_side=READABLE_SHORT_SIDE)

    def draw(item: tuple) -> np.ndarray:
        frame, samples, point, shown, region = item
        return render_overlay_frame(
            renderer,
            frame,
            samples,
            point,
            sigma,
            heatmap=options.heatmap,
            truth=shown,
            region_px=region if options.region else None,
        )

    return OverlayVideoWriter(path, fps=source.fps, render=draw, even_size=options.even_size)


def corrected_chunk(chunk: GazeChunk, calibration: WearerCalibration | None) -> GazeChunk:
    """The chunk with every sample corrected by a wearer calibration (and the point estimate their new mean)."""
    if calibration is None:
        return chunk
    corrected = calibration.apply(chunk.trajectories)
    return replace(chunk, trajectories=corrected, points=corrected.mean(axis=0))


def readout_summary(
    readouts: dict[str, Any], options: PredictOptions, calibration: WearerCalibration | None
) -> dict[str, Any]:
    """What ``summary.json`` says of the readouts: the camera (and whether it was given), the event labeller, the
    region calibration, event counts, the mean 90% spread (and region), and the wearer calibration applied."""
    applied = (
        None
        if calibration is None
        else {
            "file": None if isinstance(options.calibration, WearerCalibration) else str(options.calibration),
            "correction": calibration.model,
            "offset": list(calibration.offset),
            "scale": list(calibration.scale),
        }
    )
    return {**readouts, "camera_given": options.camera is not None, "wearer_calibration": applied}


def _index_row(
    video: Path, folder: Path, status: str, summary: dict | None = None, seconds: float | None = None, error: str = ""
) -> dict[str, Any]:
    summary = summary or {}
    if seconds is None:
        seconds = summary.get("timings", {}).get("predict_s", "")
    return {
        "video": str(video),
        "output_dir": str(folder),
        "frames": summary.get("frames", ""),
        "fps": summary.get("fps", ""),
        "seconds": "" if seconds == "" else round(float(seconds), 3),
        "status": status,
        "error": error,
    }


def is_video_error(err: BaseException) -> bool:
    """Errors that belong to one video of a batch (recorded as failed, the run goes on): a missing, unreadable or
    undecodable file, a frame range past its end, non-finite predictions on it."""
    from ..data.video import VideoDecodeError

    return isinstance(err, (VideoDecodeError, ValueError, OSError))


def run_batch(
    jobs: list[tuple[int, Path, Path]],
    output_dir: Path,
    options: PredictOptions,
    model: str | os.PathLike | None = None,
    device: str | None = None,
    shard: Shard | None = None,
    resume: bool = False,
    say=print,
    dtype: str = "auto",
    compile: bool = False,
    resize_dtype: str | None = None,
) -> tuple[list[dict[str, Any]], Path | None]:
    """Predict each ``(order, video, folder)`` of this process's share; a video that fails is recorded and the run
    goes on. With ``resume``, a video whose folder already holds its finished prediction is skipped. The model is
    loaded once, and only when some video needs it (a model that cannot be loaded stops the run before anything is
    written). Returns this process's index rows and ``index.csv`` if this process completed it
    (:class:`~transformers_gazeflow.commands.batch.IndexPart`)."""
    shard = shard if shard is not None else Shard()
    table = TABLE_NAMES[options.table_format]
    done = {order: finished_summary(folder, video, table) if resume else None for order, video, folder in jobs}
    needed = any(summary is None for summary in done.values())
    predictor = GazePredictor(model, device, dtype, compile, resize_dtype) if needed else None
    make_output_dir(output_dir)
    part = IndexPart(output_dir, shard)
    tag = f"[rank {shard.rank}] " if shard.world > 1 else ""
    for position, (order, video, folder) in enumerate(jobs, start=1):
        count = f"{tag}[{position}/{len(jobs)}] {video}"
        if done[order] is not None:
            part.add(order, _index_row(video, folder, "skipped", done[order]))
            say(f"gazeflow: {count}: skipped, already done in {folder}")
            continue
        started = time.perf_counter()
        try:
            summary = predictor.predict(video, folder, options)
        except Exception as err:
            if not is_video_error(err):
                raise
            part.add(
                order, _index_row(video, folder, "failed", seconds=time.perf_counter() - started, error=one_line(err))
            )
            say(f"gazeflow: {count}: failed: {one_line(err)}")
            continue
        part.add(order, _index_row(video, folder, "ok", summary))
        say(f"gazeflow: {count}: {summary['frames']} frames in {summary['timings']['predict_s']:.1f} s -> {folder}")
    return part.rows, part.finish()


def predict_video(
    video: str | os.PathLike,
    output_dir: str | os.PathLike,
    model: str | None = None,
    device: str | None = None,
    dtype: str = "auto",
    **options: Any,
) -> dict[str, Any]:
    """Load a model and predict one video into ``output_dir`` (``options``: the fields of :class:`PredictOptions`,
    and those of :class:`SamplingSettings` as keywords, e.g. ``num_samples=30``). Returns the summary."""
    sampling = {name: options.pop(name) for name in SamplingSettings.field_names() if name in options}
    options.setdefault("sampling", {}).update(sampling)
    return GazePredictor(model, device=device, dtype=dtype).predict(video, output_dir, PredictOptions(**options))


__all__ = [
    "PredictOptions",
    "GroundTruth",
    "GazePredictor",
    "RunCancelled",
    "predict_video",
    "run_batch",
    "is_video_error",
]
