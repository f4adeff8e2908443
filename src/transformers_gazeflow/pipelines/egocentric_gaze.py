"""The ``egocentric-gaze`` pipeline: gaze trajectories for a video in one line.

```python
import transformers_gazeflow  # registers the task
from transformers import pipeline

gaze = pipeline("egocentric-gaze", model="path/to/model")  # or no model: the bundled default
out = gaze("video.mp4", num_samples=30, num_steps=5)  # seed=0 by default: the same call gives the same samples
out["points_px"]  # [T, 2] point estimate per frame (the mean of the K samples), pixels
out = gaze("video.mp4", camera=90, return_uncertainty=True, return_events=True, calibration="calib.json")
out.uncertainty.spread(0.9, "deg"), out.uncertainty.modes, out.events.fixations  # gaze.uncertainty / gaze.events
```

Inputs: a video file (anything PyAV opens), a ``[T, H, W, 3]`` uint8 array or tensor (grayscale ``[T, H, W]`` too),
or a list of PIL images; for in-memory frames pass ``fps=`` (30 when not given). Long videos stream window by
window through decode -> processor -> encoder -> sampler -> blend
(:mod:`transformers_gazeflow.models.gazeflow.generation_gazeflow`), so memory does not grow with the video's length;
only the small per-frame outputs are collected. Heatmaps are rendered on demand (:class:`GazeHeatmaps`), never held
for the whole video.
"""

from __future__ import annotations

import copy
import inspect
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import Pipeline

from ..data.video import BackgroundFrames, TimedFrames
from ..data.video_sources import VideoSource, checked_frames, open_video_source
from ..gaze.events import EventSettings, GazeEvents, detect_events
from ..gaze.regions import RegionCalibration, warn_on_sampler_mismatch
from ..gaze.uncertainty import GazeUncertainty, describe_uncertainty
from ..gaze.wearer import WearerCalibration, calibration_for_model
from ..generation.inference import prepare_for_inference, resolve_inference_dtype, window_sampler
from ..generation.windowed import DEFAULT_WINDOW_BATCH_SIZE, FramePreparer, GazeChunk, StageClock, stream_gaze
from ..hub.model_folders import (
    ModelFolderError,
    check_finite_weights,
    load_region_calibration,
    load_video_processor,
    model_fingerprint,
)
from ..metrics.heatmaps import heatmap_sigma_px
from ..models.gazeflow.generation_gazeflow import SamplingSettings, point_estimate
from ..models.gazeflow.geometry import FieldOfView, FisheyeCamera, PinholeCamera, unit_to_pixels
from ..models.gazeflow.windows import plan_windows

DEFAULT_SEED = 0
"""Noise seed when a call gives none, as the ``gazeflow`` command's ``--seed``: the same call gives the same samples.
Pass ``seed=None`` for fresh noise from torch's global generator on every call."""

_UNSET = object()


class GazeHeatmaps:
    """Per-frame heatmaps of a prediction, rendered on demand at the native size, never all held at once.

    ``heatmaps[t]`` is frame ``t``'s map ``[H, W]``; ``heatmaps[a:b]`` renders frames ``a..b-1`` ``[n, H, W]``;
    :meth:`iter_chunks` walks the video a few frames at a time. Each map is the mean over the K samples of
    peak-1 Gaussians of ``sigma`` px (``metrics.heatmaps.render_heatmaps``, the project's one renderer).
    """

    def __init__(self, trajectories: np.ndarray, width: int, height: int, sigma: float) -> None:
        self.trajectories = trajectories
        self.width, self.height, self.sigma = int(width), int(height), float(sigma)

    def __len__(self) -> int:
        return self.trajectories.shape[1]

    def render(self, start: int, stop: int) -> np.ndarray:
        """Maps of frames ``[start, stop)``, ``[n, H, W]`` float32 in ``[0, 1]``."""
        if not 0 <= start < stop <= len(self):
            raise IndexError(f"frame range [{start}, {stop}) is outside the {len(self)} frames")
        from ..metrics.heatmaps import render_heatmaps  # imported on first use: metrics pulls in scipy

        maps = render_heatmaps(self.trajectories[:, start:stop], self.width, self.height, sigma=self.sigma)
        return maps.numpy()

    def __getitem__(self, index: int | slice) -> np.ndarray:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                raise IndexError("heatmaps support contiguous slices only (step 1)")
            if stop <= start:
                return np.zeros((0, self.height, self.width), np.float32)
            return self.render(start, stop)
        index = int(index) + (len(self) if int(index) < 0 else 0)
        return self.render(index, index + 1)[0]

    def iter_chunks(self, chunk_frames: int = 16) -> Iterator[tuple[int, np.ndarray]]:
        """Yield ``(first_frame, maps [n, H, W])`` over the whole video, ``chunk_frames`` frames at a time."""
        for start in range(0, len(self), chunk_frames):
            yield start, self.render(start, min(start + chunk_frames, len(self)))

    def __repr__(self) -> str:
        return f"GazeHeatmaps(frames={len(self)}, size={self.width}x{self.height}, sigma={self.sigma})"


@dataclass
class GazePrediction:
    """The pipeline's output for one video (numpy arrays; also readable as a dict: ``out["points_px"]``).

    Coordinates: unit ``[0, 1]`` of the frame with the origin at the top-left (x right, y down), and continuous
    pixels ``unit * (width, height)`` (``geometry.py``). The point estimate is the per-frame mean of the K samples.
    """

    video: str
    video_id: str
    trajectories: np.ndarray  # [K, T, 2] unit
    trajectories_px: np.ndarray  # [K, T, 2] pixels
    points: np.ndarray  # [T, 2] unit
    points_px: np.ndarray  # [T, 2] pixels
    frame_indices: np.ndarray  # [T] frame numbers in the video
    times_ms: np.ndarray  # [T] frame times, ms from the stream's start
    fps: float
    width: int
    height: int
    num_samples: int
    num_steps: int
    solver: str
    window_mode: str  # how overlapping windows were joined: "coherent" or "blend"
    seed: int | None
    heatmaps: GazeHeatmaps | None = field(default=None, repr=False)
    # the camera of the degrees below (``return_uncertainty``/``return_events``)
    camera: PinholeCamera | FisheyeCamera | None = None
    uncertainty: GazeUncertainty | None = field(default=None, repr=False)  # spread, modes, region per frame
    events: GazeEvents | None = field(default=None, repr=False)  # series 0: the point estimate; 1 + k: sample k
    noise_scale: float = 1.0  # tau, the standard deviation of x_0 (1: the paper's sampler)

    @property
    def num_frames(self) -> int:
        return int(self.frame_indices.shape[0])

    def keys(self) -> list[str]:
        return [f.name for f in fields(self)]

    def __getitem__(self, key: str) -> Any:
        if key not in self.keys():
            raise KeyError(f"{key!r}: a GazePrediction has {self.keys()}")
        return getattr(self, key)

    def to_dict(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in self.keys()}


class GazeFlowPipeline(Pipeline):
    """Egocentric gaze prediction with GazeFlow (task ``"egocentric-gaze"``).

    Call parameters: ``num_samples`` (K), ``num_steps`` (S), ``solver``, ``window_mode`` (``"coherent"`` or ``"blend"``,
    see ``generation_gazeflow``), ``noise_scale`` (tau, the standard deviation of x_0; defaults from the model's
    config), ``seed`` (noise seed, default :data:`DEFAULT_SEED` = 0 like the ``gazeflow`` command: the same seed gives
    the same samples; ``seed=None`` draws fresh noise on every call), ``return_heatmaps`` (attach a lazy
    :class:`GazeHeatmaps`), ``heatmap_sigma`` (px; default 3.9% of the frame width, the paper's 25 px at 640 px:
    :func:`~transformers_gazeflow.metrics.heatmaps.heatmap_sigma_px`), ``start_frame`` / ``end_frame`` (frame range, end
    exclusive; a range runs the windows of the whole video's grid that cover it, so a frame's prediction does not depend
    on the range's ends) and ``fps`` (in-memory frames). What K samples tell beyond their mean: ``return_uncertainty``
    (``GazePrediction.uncertainty``: spread radii, modes, the calibrated region;
    :mod:`transformers_gazeflow.gaze.uncertainty`), ``return_events`` (``GazePrediction.events``: fixations and
    saccades, I-VT by default or ``events=EventSettings(...)``), through ``camera`` (a horizontal field of view in
    degrees, ``(h, v)``, a ``FieldOfView``, ``PinholeCamera`` or ``FisheyeCamera``; default the metrics' 60 degrees),
    and ``calibration`` (a ``calib.json`` or ``WearerCalibration`` of this model, from ``gazeflow calibrate``: applied
    to every sample). ``device`` is chosen when the pipeline is built (``pipeline(..., device="cuda")``). Returns a
    :class:`GazePrediction` per video.

    Construction parameters (besides transformers' ``model``, ``device``): ``dtype`` of the weights (``"auto"``:
    bfloat16 on CUDA, float32 elsewhere; ``"float32"``, ``"bfloat16"``, ``"float16"`` or a ``torch.dtype``),
    ``window_batch_size`` (windows encoded together and read ahead of the sampler, default 8),
    ``decode_in_thread`` (read frames in a background thread, default True), ``cuda_graphs`` (replay each window's
    sampling steps as a CUDA graph; None: on CUDA, for each window shape where the replay is faster than eager
    sampling) and ``compile`` (``torch.compile`` the velocity network).

    The pipeline runs its own copy of the model it is given, put on the inference fast path (eval mode, SDPA, LoRA
    merged, attention fused, the weights in ``dtype``): the caller's model is left as it was (its weights,
    ``config.use_lora`` and training mode), at the cost of holding the weights twice while the caller keeps its
    model. :meth:`save_pretrained` writes that copy (in ``dtype``).
    """

    _load_processor = False
    _load_image_processor = False
    _load_video_processor = False
    _load_feature_extractor = False
    _load_tokenizer = False

    def __init__(
        self,
        model: Any,
        *args,
        dtype: str | torch.dtype | None = "auto",
        window_batch_size: int = DEFAULT_WINDOW_BATCH_SIZE,
        decode_in_thread: bool = True,
        cuda_graphs: bool | None = None,
        compile: bool = False,
        **kwargs,
    ) -> None:
        super().__init__(copy.deepcopy(model), *args, **kwargs)  # the fast path below changes the model in place
        model_type = getattr(self.model.config, "model_type", None)
        if model_type != "gazeflow" or not hasattr(self.model, "encode_video"):
            source = getattr(self.model, "name_or_path", "") or "the model given"
            raise ModelFolderError(
                f"{source}: the egocentric-gaze pipeline needs a GazeFlow model, got "
                f"{type(self.model).__name__} (model_type {model_type!r})"
            )
        check_finite_weights(self.model, getattr(self.model, "name_or_path", "") or "the model given")
        if self.video_processor is None:
            self.video_processor = load_video_processor(getattr(self.model, "name_or_path", None), self.model.config)
        self.model_fingerprint = model_fingerprint(self.model)  # the weights as given, before LoRA is merged
        if not isinstance(window_batch_size, int) or isinstance(window_batch_size, bool) or window_batch_size < 1:
            raise ValueError(f"`window_batch_size` must be an int >= 1, got {window_batch_size!r}")
        self.window_batch_size = window_batch_size
        self.decode_in_thread = bool(decode_in_thread)
        self.inference_dtype = resolve_inference_dtype(dtype, self.device)
        if cuda_graphs and self.device.type != "cuda":
            raise ValueError(f"cuda_graphs=True needs a CUDA device, the pipeline runs on {self.device}")
        self.cuda_graphs = cuda_graphs
        prepare_for_inference(self.model, dtype=self.inference_dtype, compile=compile)

    def _sanitize_parameters(
        self,
        seed: Any = _UNSET,
        return_heatmaps: bool | None = None,
        heatmap_sigma: float | None = None,
        start_frame: int | None = None,
        end_frame: int | None = None,
        fps: float | None = None,
        camera: Any = None,
        return_uncertainty: bool | None = None,
        return_events: bool | None = None,
        events: EventSettings | None = None,
        calibration: Any = None,
        **sampling,
    ):
        """The call's parameters for each step; ``sampling``: the fields of :class:`SamplingSettings` (K, S, the
        solver, the window mode), resolved once in :meth:`_forward`."""
        unknown = sorted(set(sampling) - set(SamplingSettings.field_names()))
        if unknown:
            own = inspect.signature(type(self)._sanitize_parameters).parameters.values()
            known = [
                *SamplingSettings.field_names(),
                *(p.name for p in own if p.name != "self" and p.kind != p.VAR_KEYWORD),
            ]
            raise TypeError(f"egocentric-gaze: unknown parameter(s) {unknown}; known: {', '.join(known)}")
        preprocess = {
            k: v for k, v in dict(fps=fps, start_frame=start_frame, end_frame=end_frame).items() if v is not None
        }
        forward = {name: value for name, value in sampling.items() if value is not None}
        if seed is not _UNSET:
            forward["seed"] = seed
        postprocess = {
            k: v
            for k, v in dict(
                return_heatmaps=return_heatmaps,
                heatmap_sigma=heatmap_sigma,
                camera=camera,
                return_uncertainty=return_uncertainty,
                return_events=return_events,
                events=events,
                calibration=calibration,
            ).items()
            if v is not None
        }
        return preprocess, forward, postprocess

    def __call__(self, inputs: Any, **kwargs) -> GazePrediction | list[GazePrediction]:
        """Predict gaze for one video (a path, an array/tensor, a list of PIL images) or a list of videos."""
        if isinstance(inputs, (list, tuple)) and inputs and all(hasattr(im, "convert") for im in inputs):
            inputs = np.stack([np.asarray(im.convert("RGB")) for im in inputs])  # one video of PIL frames
        elif isinstance(inputs, tuple):
            inputs = list(inputs)
        return super().__call__(inputs, **kwargs)

    def save_pretrained(self, save_directory: str | os.PathLike, **kwargs: Any) -> None:
        """Write a complete model folder (also what ``push_to_hub`` uploads): weights and config (safetensors), the
        processor, the model card (the source folder's ``README.md`` when it has one) and the remote code for
        ``trust_remote_code=True`` (:func:`transformers_gazeflow.hub.model_folders.save_model_folder`, the one writer
        of model folders). ``kwargs`` of the base class (``safe_serialization``, ``max_shard_size``) are accepted and
        ignored."""
        from ..hub.model_folders import save_model_folder

        if kwargs.pop("push_to_hub", False):
            raise ValueError("save_pretrained(push_to_hub=True) is not supported: call pipe.push_to_hub(repo_id)")
        source_card = Path(str(getattr(self.model, "name_or_path", "") or "")) / "README.md"
        source = str(getattr(self.model, "name_or_path", "") or "")
        save_model_folder(
            self.model,
            save_directory,
            processor=self.video_processor,
            remote_code=True,
            description="A GazeFlow model saved from the egocentric-gaze pipeline.",
            card=source_card if source_card.is_file() else None,
            region_calibration=load_region_calibration(source) if Path(source).is_dir() else None,
        )

    # ------------------------------------------------------------------ the three steps
    def preprocess(
        self, inputs: Any, fps: float | None = None, start_frame: int | None = None, end_frame: int | None = None
    ) -> dict[str, VideoSource]:
        return {"source": open_video_source(inputs, fps=fps, start_frame=start_frame, end_frame=end_frame)}

    def stream_chunks(
        self,
        source: VideoSource,
        settings: SamplingSettings | None = None,
        seed: int | None = DEFAULT_SEED,
        keep_frames: bool = False,
        clock: StageClock | None = None,
    ) -> Iterator[GazeChunk]:
        """Stream a source through the model: finished :class:`~transformers_gazeflow.generation.windowed.GazeChunk`
        s in order (with their raw frames when ``keep_frames``), for callers that consume frames as they come.
        ``settings``: K, S, the solver and the window mode (``SamplingSettings``; None: the model's defaults). A
        frame range runs the windows of the whole video's grid that cover it (``windows.plan_windows``), so a
        frame's prediction does not depend on the range's ends. Frames are read in a background thread
        (``decode_in_thread``; on the CPU the thread also checks and processes them) and windows run
        ``window_batch_size`` at a time; ``clock`` (a ``StageClock``) collects the time of each stage (decode: the
        reading thread's time, processing included on the CPU)."""
        generator = torch.Generator().manual_seed(int(seed)) if seed is not None else None
        plan = None
        if source.total_frames is not None and source.expected_frames is not None:
            config = self.model.config
            plan = plan_windows(
                source.total_frames,
                config.num_frames,
                config.window_stride,
                source.start_frame,
                source.start_frame + source.expected_frames,
            )
        frames = checked_frames(source) if plan is None else checked_frames(source, plan.decode_start, plan.decode_stop)
        if self.decode_in_thread:  # on the CPU the thread also checks and processes the frames, beside the model
            host = self.device.type == "cpu"
            reader = BackgroundFrames(frames, transform=FramePreparer(self.video_processor) if host else None)
        else:
            reader = TimedFrames(frames)
        settings = settings if settings is not None else SamplingSettings.resolve(self.model.config)
        sampler = self.window_sampler(settings)
        started = time.perf_counter()
        try:  # stream_gaze runs without autograd
            yield from stream_gaze(
                self.model,
                self.video_processor,
                reader,
                settings,
                generator=generator,
                keep_frames=keep_frames,
                plan=plan,
                window_batch_size=self.window_batch_size,
                sampler=sampler,
                stage=clock,
            )
        finally:
            reader.close()
            if clock is not None:
                clock.add("decode", reader.read_s)
                clock.add("wait_for_frames", reader.wait_s)
                clock.add("stream", time.perf_counter() - started)

    def window_sampler(self, settings: SamplingSettings):
        """The run's window sampler for ``settings``, kept across videos (its E_time(s) and, on CUDA, its captured
        graphs serve every video sampled with the same settings)."""
        samplers = self.__dict__.setdefault("_window_samplers", {})
        if settings not in samplers:
            samplers[settings] = window_sampler(self.model, settings, self.cuda_graphs)
        return samplers[settings]

    def _forward(
        self, model_inputs: dict[str, VideoSource], seed: int | None = DEFAULT_SEED, **sampling: Any
    ) -> dict[str, Any]:
        source = model_inputs["source"]
        settings = SamplingSettings.resolve(self.model.config, **sampling)
        pieces = [chunk.trajectories for chunk in self.stream_chunks(source, settings, seed)]
        return {"source": source, "trajectories": np.concatenate(pieces, axis=1), "seed": seed, "settings": settings}

    def postprocess(
        self,
        model_outputs: dict[str, Any],
        return_heatmaps: bool = False,
        heatmap_sigma: float | None = None,
        camera: Any = None,
        return_uncertainty: bool = False,
        return_events: bool = False,
        events: EventSettings | None = None,
        calibration: Any = None,
    ) -> GazePrediction:
        source: VideoSource = model_outputs["source"]
        trajectories = model_outputs["trajectories"]
        if calibration is not None:
            trajectories = self.wearer_calibration(calibration).apply(trajectories)
        prediction = build_prediction(
            source,
            trajectories,
            model_outputs["settings"],
            model_outputs["seed"],
            heatmap_sigma=heatmap_sigma_px(source.width, heatmap_sigma),
            return_heatmaps=return_heatmaps,
        )
        if return_uncertainty or return_events:
            region = load_region_calibration(getattr(self.model, "name_or_path", None) or None)
            warn_on_sampler_mismatch(region, prediction.noise_scale)
            add_readouts(prediction, camera, return_uncertainty, return_events, events, region)
        return prediction

    def wearer_calibration(self, calibration: str | os.PathLike | WearerCalibration) -> WearerCalibration:
        """A wearer calibration (a ``calib.json`` path or the object), checked to be this model's."""
        name = getattr(self.model, "name_or_path", "") or "the pipeline's model"
        return calibration_for_model(calibration, self.model_fingerprint, name)


def frame_times_ms(frame_indices: np.ndarray, fps: float) -> np.ndarray:
    """Frame ``i`` is shown ``i / fps`` seconds after the stream's start (``data/video.py``), here in ms."""
    return np.asarray(frame_indices, dtype=np.float64) * (1000.0 / fps)


def build_prediction(
    source: VideoSource,
    trajectories: np.ndarray,
    settings: SamplingSettings,
    seed: int | None,
    heatmap_sigma: float,
    return_heatmaps: bool = False,
) -> GazePrediction:
    """Assemble a :class:`GazePrediction` from a source and its ``[K, T, 2]`` unit trajectories."""
    trajectories = np.asarray(trajectories, dtype=np.float32)
    points = point_estimate(trajectories)
    frame_indices = source.start_frame + np.arange(trajectories.shape[1], dtype=np.int64)
    return GazePrediction(
        video=source.name,
        video_id=source.video_id,
        trajectories=trajectories,
        trajectories_px=unit_to_pixels(trajectories, source.width, source.height).astype(np.float32),
        points=points,
        points_px=unit_to_pixels(points, source.width, source.height).astype(np.float32),
        frame_indices=frame_indices,
        times_ms=frame_times_ms(frame_indices, source.fps),
        fps=source.fps,
        width=source.width,
        height=source.height,
        num_samples=settings.num_samples,
        num_steps=settings.num_steps,
        solver=settings.solver,
        window_mode=settings.window_mode,
        noise_scale=settings.noise_scale,
        seed=seed,
        heatmaps=GazeHeatmaps(trajectories, source.width, source.height, heatmap_sigma) if return_heatmaps else None,
    )


def camera_of(camera: Any, width: int, height: int) -> PinholeCamera | FisheyeCamera:
    """The camera of a ``camera=`` argument for a ``width x height`` frame: None (the metrics' 60 degree horizontal
    field of view), a horizontal field of view in degrees, ``(horizontal, vertical)``, a ``FieldOfView``, a
    ``PinholeCamera`` or a ``FisheyeCamera`` (Project Aria's RGB camera)."""
    if camera is None:
        camera = FieldOfView()
    elif isinstance(camera, (int, float)):
        camera = FieldOfView(float(camera))
    elif isinstance(camera, (tuple, list)):
        camera = FieldOfView(*camera)
    if not isinstance(camera, (FieldOfView, PinholeCamera, FisheyeCamera)):
        raise ValueError(
            f"camera must be a field of view in degrees, (horizontal, vertical), a FieldOfView, a "
            f"PinholeCamera or a FisheyeCamera, got {type(camera).__name__}"
        )
    return camera.for_frame(width, height)


def add_readouts(
    prediction: GazePrediction,
    camera: Any = None,
    uncertainty: bool = True,
    events: bool = True,
    settings: EventSettings | None = None,
    region_calibration: RegionCalibration | float | None = None,
) -> GazePrediction:
    """Attach the camera, the per-frame :class:`~transformers_gazeflow.gaze.uncertainty.GazeUncertainty` (its
    regions calibrated by ``region_calibration``, the model folder's) and the fixations and saccades (series 0 the
    point estimate, ``1 + k`` sample ``k``) to a prediction."""
    prediction.camera = camera_of(camera, prediction.width, prediction.height)
    if uncertainty:
        prediction.uncertainty = describe_uncertainty(
            prediction.trajectories, prediction.width, prediction.height, prediction.camera, region_calibration
        )
    if events:
        series = np.concatenate([prediction.points[None], prediction.trajectories]).astype(np.float64)
        prediction.events = detect_events(
            series,
            prediction.width,
            prediction.height,
            prediction.fps,
            prediction.camera,
            settings,
            frame_offset=int(prediction.frame_indices[0]),
        )
    return prediction


__all__ = [
    "GazeFlowPipeline",
    "GazePrediction",
    "GazeHeatmaps",
    "build_prediction",
    "add_readouts",
    "camera_of",
    "frame_times_ms",
    "DEFAULT_SEED",
]
