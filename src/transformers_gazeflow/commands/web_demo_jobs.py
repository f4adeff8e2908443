"""The web demo's work, without the web page: check an upload and its settings, then run it through the same loop
as ``gazeflow predict`` (:meth:`transformers_gazeflow.commands.predict.GazePredictor.predict`) into one job folder.

A job writes ``overlay.mp4`` (the command's overlay: its legend burned in, a small video enlarged to a readable size;
browser-playable H.264 4:2:0: odd sizes padded to even, ``PredictOptions.even_size``),
``gaze.csv`` (:mod:`.export`'s format) and ``summary.json``, and returns the K sampled trajectories for the x(t)/y(t)
figure (:func:`trajectory_figure`). The overlay, the heatmap sigma (a fraction of the frame width) and the CSV are the
command's. For the bundled demo clip (:func:`prepare_demo_clip`, ``gazeflow demo``'s clip, recognised by its
content) the true gaze is drawn on the overlay (the command's white cross), written to the CSV's truth columns and
the figure, and the summary scores the point estimate against it as ``gazeflow demo`` does
(:func:`transformers_gazeflow.commands.demo.score_points`: valid, on-frame frames only). A job reports progress per
chunk and stops at the next chunk when its ``cancel`` event is set (:class:`JobStopped`, nothing left behind).

Nothing here imports Gradio: :mod:`transformers_gazeflow.commands.web_demo` puts the page over these functions. Every
problem with an upload or a setting raises :class:`DemoInputError` with a one-line message naming the file (by its
own name, never the server's path) and what was expected; the page shows that message as it is.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..data.atomic_files import atomic_write, sha256_file
from ..data.video import VideoDecodeError, VideoInfo, iter_frames, probe_video, write_video
from ..hub.model_folders import ModelFolderError, load_model, resolve_model
from ..models.gazeflow.choices import SOLVERS, WINDOW_MODES
from ..models.gazeflow.generation_gazeflow import point_estimate
from ..outputs.writers import write_summary
from ..pipelines.egocentric_gaze import frame_times_ms
from .batch import CSV_NAME, OVERLAY_NAME, SUMMARY_NAME
from .demo import demo_clip, score_points
from .predict import GazePredictor, GroundTruth, PredictOptions, RunCancelled

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from ..pipelines.egocentric_gaze import GazeFlowPipeline

MAX_SAMPLES, MAX_STEPS = 64, 100
"""Upper bounds on K and S in the demo (each job's cost grows with K x S)."""
MAX_NOISE_SCALE = 2.0
"""The largest tau (``noise_scale``) the page takes: twice the paper's x_0 already leaves the frame often."""
TRUTH_HEX = "#000000"  # the plot's true gaze: the overlay's white cross would vanish on the plot's white
"""The true gaze's colour in the figure: the overlay's true-gaze marker's."""
DEMO_CLIP_NAME = "gazeflow_demo_clip.mp4"
DEMO_CLIP_FRAMES = 96
"""The web demo's clip: ``gazeflow demo``'s default clip (:func:`transformers_gazeflow.commands.demo.demo_clip`)."""

ProgressCallback = Callable[[int, int], None]


class DemoInputError(ValueError):
    """An upload or a setting the demo cannot run; the message is one readable line for the page (line breaks of
    wrapped messages, e.g. the Hub's, are folded)."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split()))


class JobStopped(DemoInputError):
    """The job was stopped on request (its ``cancel`` event) before it finished; nothing of it is kept."""


@dataclass(frozen=True)
class DemoLimits:
    """Hard limits on one job: upload size, duration of the frames to process, and the fewest frames that make a
    trajectory."""

    max_upload_mb: float = 100.0
    max_duration_s: float = 120.0
    min_frames: int = 2

    def __post_init__(self) -> None:
        if not self.max_upload_mb > 0 or not self.max_duration_s > 0:
            raise ValueError(
                f"limits must be positive, got max_upload_mb={self.max_upload_mb}, max_duration_s={self.max_duration_s}"
            )
        if self.min_frames < 1:
            raise ValueError(f"min_frames must be >= 1, got {self.min_frames}")

    @property
    def max_upload_bytes(self) -> int:
        """The size limit in bytes (1 MB = 2**20 bytes, as Gradio counts it)."""
        return int(self.max_upload_mb * (1 << 20))


@dataclass
class JobSettings(PredictOptions):
    """What the page's controls ask for: the ``gazeflow`` command's :class:`PredictOptions` (``None``: the model's
    default; ``end_frame`` is exclusive) and the model to run (None: the page's model)."""

    model: str | None = None


@dataclass
class JobResult:
    """One finished job: its files (all in the job folder), the summary, and what the figure draws."""

    overlay: Path
    csv: Path
    summary_path: Path
    summary: dict[str, Any]
    trajectories: np.ndarray  # [K, T, 2] unit coordinates
    times_s: np.ndarray  # [T] frame times in seconds
    truth: np.ndarray | None = None  # [T, 2] true gaze (demo clip), NaN where it is not valid
    message: str = ""


@dataclass(frozen=True)
class DemoClip:
    """The bundled demo clip: ``gazeflow demo``'s synthetic clip with its true gaze, recognised by size and SHA-256."""

    path: Path
    truth: GroundTruth
    size: int
    sha256: str

    @property
    def gaze(self) -> np.ndarray:
        """The true gaze, ``[T, 2]`` unit coordinates."""
        return self.truth.gaze

    @property
    def scored(self) -> np.ndarray:
        """``[T]`` bool: frames whose true gaze is a position on the frame (:meth:`GroundTruth.scored`)."""
        return self.truth.scored()

    def matches(self, path: str | os.PathLike) -> bool:
        path = Path(path)
        return path.is_file() and path.stat().st_size == self.size and sha256_file(path) == self.sha256

    def gaze_at(self, frame_indices: np.ndarray) -> np.ndarray:
        """The true gaze on these frames, ``[n, 2]``, NaN where it is not scored (untracked, blink, off-frame)."""
        frame_indices = np.asarray(frame_indices, dtype=np.int64)
        truth = np.full((len(frame_indices), 2), np.nan)
        keep = frame_indices < len(self.gaze)
        keep[keep] = self.scored[frame_indices[keep]]
        truth[keep] = self.gaze[frame_indices[keep]]
        return truth


def prepare_demo_clip(folder: str | os.PathLike) -> DemoClip:
    """Render the demo clip into ``folder`` once (later calls reuse the file) and return it with its true gaze.

    The clip is the one ``gazeflow demo`` renders (:func:`transformers_gazeflow.commands.demo.demo_clip`); the folder
    name carries the synthetic generator's version, so a changed generator renders a new clip instead of pairing stale
    pixels with new gaze.
    """
    from ..data.synthetic import GENERATOR_VERSION

    clip, truth = demo_clip(DEMO_CLIP_FRAMES)
    target = Path(folder) / f"demo_clip_v{GENERATOR_VERSION}"
    path = target / DEMO_CLIP_NAME
    if not path.is_file():
        target.mkdir(parents=True, exist_ok=True)
        atomic_write(path, lambda temporary: write_video(temporary, clip.frames(), fps=clip.fps))
    return DemoClip(path=path, truth=truth, size=path.stat().st_size, sha256=sha256_file(path))


class PipelineCache:
    """Loaded pipelines by model location (the last ``capacity`` used), shared by concurrent jobs.

    Loading happens under a lock, so two jobs asking for the same new model load it once. Inference itself runs
    without the lock: the pipeline's model is in eval mode and each job streams with its own generator.
    """

    def __init__(self, device: str | None = None, capacity: int = 2) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.device, self.capacity = device, capacity
        self._pipelines: OrderedDict[str, GazeFlowPipeline] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, model: str | None) -> tuple[str, GazeFlowPipeline]:
        """``(location, pipeline)`` for a model folder or Hub id (``None`` or blank: the bundled model)."""
        from ..pipelines.egocentric_gaze import GazeFlowPipeline

        model = model.strip() if isinstance(model, str) else model
        location = resolve_model(model or None)  # ModelFolderError naming a bad folder
        with self._lock:
            if location not in self._pipelines:
                pipe = GazeFlowPipeline(model=load_model(location), device=self.device)
                self._pipelines[location] = pipe
                while len(self._pipelines) > self.capacity:
                    self._pipelines.popitem(last=False)
            self._pipelines.move_to_end(location)
            return location, self._pipelines[location]


def check_upload(video: str | os.PathLike | None, limits: DemoLimits) -> VideoInfo:
    """Check an uploaded file before any work: present, not empty, within the size limit, a container FFmpeg opens
    with a video stream in a codec it decodes, and at least ``limits.min_frames`` frames."""
    if video is None or str(video).strip() == "":
        raise DemoInputError("no video: upload a video file (or click the demo clip) first")
    path = Path(video)
    name = path.name
    if not path.is_file():
        raise DemoInputError(f"{name}: the uploaded file is no longer on the server; upload it again")
    size = path.stat().st_size
    if size == 0:
        raise DemoInputError(f"{name} is empty (0 bytes): expected a video file")
    if size > limits.max_upload_bytes:
        raise DemoInputError(
            f"{name} is {size / (1 << 20):.1f} MB; this demo takes videos up to {limits.max_upload_mb:g} MB"
        )
    _check_decodable(path)
    try:
        info = probe_video(path)
    except VideoDecodeError as err:
        raise DemoInputError(f"{name} cannot be read as a video: {_without_path(err, path)}") from err
    if info.num_frames < limits.min_frames:
        raise DemoInputError(
            f"{name} has only {info.num_frames} frame{'s' if info.num_frames != 1 else ''}; gaze "
            f"prediction needs a video of at least {limits.min_frames} frames"
        )
    return info


def _without_path(err: Exception, path: Path) -> str:
    return str(err).replace(f"'{path}'", path.name).replace(str(path), path.name)


def _check_decodable(path: Path) -> None:
    """Open the container and decode its first frame: not-a-video, no video stream and unknown codecs fail here."""
    import av

    name = path.name
    try:
        container = av.open(str(path))
    except (av.error.FFmpegError, UnicodeDecodeError, ValueError) as err:
        reason = getattr(err, "strerror", None) or type(err).__name__
        raise DemoInputError(
            f"{name} is not a video file (FFmpeg: {reason}); expected a video such as an mp4, mov, mkv or webm"
        ) from err
    try:
        streams = container.streams.video
        if not streams:
            raise DemoInputError(f"{name} has no video stream (audio or data only); expected a video")
        if streams[0].codec_context is None:
            raise DemoInputError(
                f"{name} uses a video codec FFmpeg cannot decode here; re-encode it as H.264, e.g. "
                f"`ffmpeg -i {name} -c:v libx264 out.mp4`"
            )
    finally:
        container.close()
    try:
        first = next(iter_frames(path, 0, 1), None)
    except VideoDecodeError as err:
        raise DemoInputError(
            f"{name}: its first frame cannot be decoded ({_without_path(err, path)}); re-encode it as H.264"
        ) from err
    if first is None:
        raise DemoInputError(f"{name} has a video stream but no frame could be decoded from it")


def _page_number(value: Any, label: str, expected: str) -> float | None:
    """A page field's value as a float, None for an empty field; anything else names the field and ``expected``."""
    if value is None or (isinstance(value, str) and value.strip() == ""):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise DemoInputError(f"{label} must be {expected}, got {value!r}") from None


def _as_int(value: Any, label: str, minimum: int | None = None, maximum: int | None = None) -> int | None:
    number = _page_number(value, label, "a whole number")
    if number is None:
        return None
    if not np.isfinite(number) or number != int(number):
        raise DemoInputError(f"{label} must be a whole number, got {value!r}")
    number = int(number)
    if (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
        bounds = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
        raise DemoInputError(f"{label} must be {bounds}, got {number}")
    return number


def check_frame_range(
    info: VideoInfo, name: str, start_frame: Any, end_frame: Any, limits: DemoLimits
) -> tuple[int, int]:
    """``[start, stop)`` of the frames to process, within the video, at least ``min_frames`` long and within the
    duration limit."""
    start = _as_int(start_frame, "start frame", minimum=0) or 0
    end = _as_int(end_frame, "end frame", minimum=1)
    if start >= info.num_frames:
        raise DemoInputError(
            f"start frame {start} is past the end of {name} ({info.num_frames} frames, 0..{info.num_frames - 1})"
        )
    stop = info.num_frames if end is None else min(end, info.num_frames)
    if stop <= start:
        raise DemoInputError(f"end frame {end} must be after start frame {start} (the end frame is not included)")
    if stop - start < limits.min_frames:
        raise DemoInputError(
            f"frames [{start}, {stop}) of {name} are fewer than the {limits.min_frames} gaze prediction needs"
        )
    duration = (stop - start) / info.fps
    if duration > limits.max_duration_s + 1e-9:
        most = int(limits.max_duration_s * info.fps)
        raise DemoInputError(
            f"{name}: the {stop - start} frames to process last {duration:.1f} s; this demo processes "
            f"at most {limits.max_duration_s:g} s per run: set a frame range of at most {most} "
            f"frames ({info.fps:g} fps)"
        )
    return start, stop


def _as_positive(value: Any, label: str, maximum: float) -> float | None:
    """A number in (0, ``maximum``] as the page gives it, or None (the model's default) for 0 or an empty field (the
    page's number field sends 0 when emptied)."""
    number = _page_number(value, label, "a number")
    if number is None or number == 0:
        return None
    if not 0 < number <= maximum:
        raise DemoInputError(f"{label} must be a number in (0, {maximum:g}] (0: the model's own), got {value!r}")
    return number


def _choice(value: Any, label: str, choices: tuple[str, ...]) -> str | None:
    value = value or None
    if value is not None and value not in choices:
        raise DemoInputError(f"{label} must be one of {', '.join(choices)}, got {value!r}")
    return value


PAGE_SAMPLING_CHECKS: dict[str, Callable[[Any], Any]] = {
    "num_samples": lambda value: _as_int(value, "K (samples)", 1, MAX_SAMPLES),
    "num_steps": lambda value: _as_int(value, "S (steps)", 1, MAX_STEPS),
    "solver": lambda value: _choice(value, "solver", SOLVERS),
    "window_mode": lambda value: _choice(value, "window mode", WINDOW_MODES),
    "noise_scale": lambda value: _as_positive(value, "tau (noise scale)", MAX_NOISE_SCALE),
}
"""The page's sampling controls, by ``SamplingSettings`` field: each value as the page gives it (numbers as floats,
an empty choice) -> the value to resolve (None: the model's default), or a :class:`DemoInputError`."""


def job_options(settings: JobSettings, start: int, stop: int, seed: int | None) -> PredictOptions:
    """The job's options: K and S within the demo's bounds, the solver and window mode known, tau in (0,
    ``MAX_NOISE_SCALE``] (each None: the model's own), the checked frame range and seed, odd overlay sizes padded for
    browsers."""
    sampling = {name: PAGE_SAMPLING_CHECKS[name](settings.sampling.get(name)) for name in PAGE_SAMPLING_CHECKS}
    fields = {field.name: getattr(settings, field.name) for field in dataclasses.fields(PredictOptions)}
    fields.update(
        sampling={**settings.sampling, **sampling},
        seed=seed,
        start_frame=start,
        end_frame=stop,
        heatmap=bool(settings.heatmap),
        even_size=True,
    )
    return PredictOptions(**fields)


def run_job(
    video: str | os.PathLike | None,
    settings: JobSettings,
    job_dir: str | os.PathLike,
    pipelines: PipelineCache,
    limits: DemoLimits = DemoLimits(),
    demo_clip: DemoClip | None = None,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> JobResult:
    """Check ``video``, stream it through the model and write ``overlay.mp4``, ``gaze.csv`` and ``summary.json`` into
    ``job_dir`` (which the caller removes). ``on_progress(frames_done, frames_total)`` is called as frames finish;
    setting ``cancel`` stops the job at the next chunk (:class:`JobStopped`, its partial files removed).

    Raises :class:`DemoInputError` for anything wrong with the upload, the settings or the model."""
    started = time.perf_counter()
    info = check_upload(video, limits)
    path = Path(video)
    start, stop = check_frame_range(info, path.name, settings.start_frame, settings.end_frame, limits)
    seed = _as_int(settings.seed, "seed", minimum=0)
    try:
        location, pipe = pipelines.get(settings.model)
    except (ModelFolderError, OSError) as err:
        raise DemoInputError(f"model {settings.model!r}: {err}") from err
    predictor = GazePredictor.from_pipeline(pipe, location)
    options = job_options(settings, start, stop, seed)
    truth = demo_clip.truth if demo_clip is not None and demo_clip.matches(path) else None
    loaded = time.perf_counter()
    pieces: list[np.ndarray] = []

    def on_chunk(chunk, done: int, total: int) -> None:
        pieces.append(np.asarray(chunk.trajectories))
        if on_progress is not None:
            on_progress(done, total)
        if cancel is not None and cancel.is_set():
            raise RunCancelled(f"stopped after {done} of {total} frames")

    try:
        summary = predictor.predict(path, job_dir, options, truth=truth, on_chunk=on_chunk)
    except RunCancelled as err:
        raise JobStopped(f"{path.name}: {err}; nothing was kept") from err
    except VideoDecodeError as err:
        raise DemoInputError(f"{path.name} cannot be decoded to the end: {_without_path(err, path)}") from err
    except ValueError as err:  # the sampler's argument checks (e.g. K > 1 for a regression model)
        raise DemoInputError(f"{path.name}: {_without_path(err, path)}") from err
    out_dir = Path(job_dir)
    trajectories = np.concatenate(pieces, axis=1)
    frame_indices = start + np.arange(trajectories.shape[1])
    frames, timings = int(trajectories.shape[1]), summary["timings"]
    # what users download names no server path: the upload by its name, the outputs by theirs
    summary.update(video=path.name, outputs=[OVERLAY_NAME, CSV_NAME, SUMMARY_NAME])
    timings["load_s"] = round(loaded - started, 3)
    message = (
        f"{frames} frames of {path.name} in {timings['predict_s']:.1f} s ({timings['ms_per_frame']:.0f} "
        f"ms/frame); K={summary['num_samples']}, S={summary['num_steps']}, {summary['solver']}, "
        f"{summary['window_mode']} windows, tau {summary['noise_scale']:g}, seed {seed}. The point estimate makes "
        f"{summary['point_estimate_fixations']} fixations and {summary['point_estimate_saccades']} saccades "
        f"(I-VT, 60 degree camera); 90% of the samples lie within {summary['mean_spread90_px']:.1f} px of it "
        "on average (gaze.csv holds each frame's spread and each row's event)."
    )
    if truth is not None:
        summary["demo"] = score_points(frame_indices, point_estimate(trajectories), truth)
        demo = summary["demo"]
        if demo["frames_scored"]:
            message += (
                f" Demo clip: the point estimate lies {demo['point_estimate_error']:.3f} from the true gaze "
                f"(white cross) on average, the frame centre {demo['frame_centre_error']:.3f} (unit "
                f"coordinates, {demo['frames_scored']} frames with the gaze on the frame)."
            )
    write_summary(out_dir / SUMMARY_NAME, summary)
    return JobResult(
        overlay=out_dir / OVERLAY_NAME,
        csv=out_dir / CSV_NAME,
        summary_path=out_dir / SUMMARY_NAME,
        summary=summary,
        trajectories=trajectories,
        times_s=frame_times_ms(frame_indices, summary["fps"]) / 1000.0,
        truth=demo_clip.gaze_at(frame_indices) if truth is not None else None,
        message=message,
    )


def trajectory_figure(times_s: np.ndarray, trajectories: np.ndarray, truth: np.ndarray | None = None) -> Figure:
    """x(t) and y(t) of the point estimate (the per-frame mean of the K samples), the K samples as a faint band
    (their range, and each sample as a thin line), and the true gaze where known. ``trajectories``: ``[K, T, 2]``."""
    from matplotlib.figure import Figure

    trajectories = np.asarray(trajectories, dtype=np.float64)
    points = point_estimate(trajectories)
    num_samples = trajectories.shape[0]
    figure = Figure(figsize=(7.5, 4.6), dpi=100, layout="constrained")
    axes = figure.subplots(2, 1, sharex=True)
    for axis, (ax, label) in enumerate(zip(axes, ("x (0 = left edge)", "y (0 = top edge)"))):
        samples = trajectories[:, :, axis]
        ax.fill_between(
            times_s,
            samples.min(axis=0),
            samples.max(axis=0),
            color="#17becf",
            alpha=0.18,
            linewidth=0,
            label=f"K={num_samples} samples",
        )
        for sample in samples:
            ax.plot(times_s, sample, color="#17becf", alpha=min(0.35, 4.0 / num_samples), linewidth=0.6)
        ax.plot(times_s, points[:, axis], color="#1f4e9c", linewidth=1.8, label="point estimate (mean of K)")
        if truth is not None:
            ax.plot(times_s, truth[:, axis], color=TRUTH_HEX, linewidth=1.4, linestyle="--", label="true gaze")
        ax.set_ylim(0.0, 1.0)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[1].invert_yaxis()  # up on the plot is up in the frame
    axes[1].set_xlabel("time (s)")
    axes[0].legend(loc="upper right", fontsize=8, ncol=3, framealpha=0.85)
    axes[0].set_title("Gaze x(t) and y(t) in [0, 1] of the frame", fontsize=10)
    return figure


__all__ = [
    "DemoInputError",
    "JobStopped",
    "DemoLimits",
    "JobSettings",
    "JobResult",
    "DemoClip",
    "PipelineCache",
    "check_upload",
    "check_frame_range",
    "job_options",
    "prepare_demo_clip",
    "run_job",
    "trajectory_figure",
    "MAX_SAMPLES",
    "MAX_STEPS",
    "DEMO_CLIP_FRAMES",
]
