"""transformers-gazeflow: GazeFlow egocentric gaze prediction as a Hugging Face model.

This module only re-exports the public API and registers GazeFlow with transformers, and it does both lazily:
``import transformers_gazeflow`` imports neither torch nor transformers (so the ``gazeflow`` command starts fast).
A name is imported from its module on first use (``transformers_gazeflow.GazeFlowModel``), and the Auto classes and
the ``egocentric-gaze`` pipeline task are registered the moment transformers' own auto or pipeline modules are
imported (:mod:`transformers_gazeflow.registration`), so this works in a fresh interpreter::

    import transformers_gazeflow
    from transformers import AutoModel, pipeline
    model = AutoModel.from_pretrained("path/to/model")
    gaze = pipeline("egocentric-gaze")            # the bundled default model

The package stays importable without ``datasets``, ``evaluate`` and ``av`` (the GPU image has none of them): the data
modules import those inside the functions that need them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .registration import install as _install_registration

__version__ = "0.1.0.dev0"

# public name -> the module (relative to this package) that is its one home
_EXPORTS: dict[str, str] = {
    # the model
    "GazeFlowConfig": "models.gazeflow.configuration_gazeflow",
    "GazeFlowModel": "models.gazeflow.modeling_gazeflow",
    "GazeFlowPreTrainedModel": "models.gazeflow.modeling_gazeflow",
    "GazeFlowModelOutput": "models.gazeflow.modeling_gazeflow_outputs",
    "GazeFlowGenerationOutput": "models.gazeflow.modeling_gazeflow_outputs",
    "GazeFlowCondition": "models.gazeflow.modeling_gazeflow_encoder",
    "FlowMatchingScheduler": "models.gazeflow.scheduling_gazeflow",
    "DDIMScheduler": "models.gazeflow.scheduling_gazeflow",
    "RegressionScheduler": "models.gazeflow.scheduling_gazeflow",
    "scheduler_for": "models.gazeflow.scheduling_gazeflow",
    "generate_trajectories": "models.gazeflow.generation_gazeflow",
    "GazeFlowStreamer": "generation.online",
    "GazeFlowStreamOutput": "generation.online",
    # conventions
    "unit_to_model": "models.gazeflow.geometry",
    "model_to_unit": "models.gazeflow.geometry",
    "unit_to_pixels": "models.gazeflow.geometry",
    "pixels_to_unit": "models.gazeflow.geometry",
    "clamp_unit": "models.gazeflow.geometry",
    "PinholeCamera": "models.gazeflow.geometry",
    "FieldOfView": "models.gazeflow.geometry",
    "FisheyeCamera": "models.gazeflow.geometry",
    "UNTRACKED": "data.gaze_types",
    "FIXATION": "data.gaze_types",
    "SACCADE": "data.gaze_types",
    "BLINK_OR_OTHER": "data.gaze_types",
    "OFF_FRAME": "data.gaze_types",
    "window_starts": "models.gazeflow.windows",
    "blend_windows": "models.gazeflow.windows",
    "StreamingBlender": "models.gazeflow.windows",
    # data: datasets, processing, collation, video
    "load_gaze_dataset": "data.loading",
    "gaze_builder": "data.loading",
    "available_builders": "data.loading",
    "gaze_example_features": "data.loading",
    "ClipDroppedError": "data.loading",
    "GazeFlowVideoProcessor": "data.processing",
    "GazeFlowDataCollator": "data.collator",
    "write_egtea_layout": "data.synthetic",
    "SyntheticGazeSettings": "data.synthetic",
    "probe_video": "data.video",
    "decode_frames": "data.video",
    "write_video": "data.video",
    "VideoDecodeError": "data.video",
    # the user's face: pipeline, model folders
    "GazeFlowPipeline": "pipelines.egocentric_gaze",
    "GazePrediction": "pipelines.egocentric_gaze",
    "GazeHeatmaps": "pipelines.egocentric_gaze",
    "stream_gaze": "generation.windowed",
    "GazeChunk": "generation.windowed",
    "point_estimate": "models.gazeflow.generation_gazeflow",
    "default_model_path": "hub.model_folders",
    "default_model_available": "hub.model_folders",
    "load_model": "hub.model_folders",
    "save_model_folder": "hub.model_folders",
    "ModelFolderError": "hub.model_folders",
    # what K samples tell: uncertainty, events, a wearer's calibration, scanpaths
    "describe_uncertainty": "gaze.uncertainty",
    "detect_events": "gaze.events",
    "EventSettings": "gaze.events",
    "WearerCalibration": "gaze.wearer",
    "load_fixation_trains": "gaze.scanpaths",
    # metrics (and scipy beneath them)
    "GazeEvaluator": "metrics",
    "evaluate_predictions": "metrics",
    "paired_wilcoxon": "metrics",
    "CenterBias": "metrics",
    "RandomWalk": "metrics",
    "ClipGroundTruth": "metrics",
    "ClipPrediction": "metrics",
    "EvaluationResult": "metrics",
    "render_heatmaps": "metrics",
    "evaluate_module_path": "metrics",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'transformers_gazeflow' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


if TYPE_CHECKING:  # static analysers and IDEs see the real names
    from .data.collator import GazeFlowDataCollator
    from .data.gaze_types import BLINK_OR_OTHER, FIXATION, OFF_FRAME, SACCADE, UNTRACKED
    from .data.loading import (
        ClipDroppedError,
        available_builders,
        gaze_builder,
        gaze_example_features,
        load_gaze_dataset,
    )
    from .data.processing import GazeFlowVideoProcessor
    from .data.synthetic import SyntheticGazeSettings, write_egtea_layout
    from .data.video import VideoDecodeError, decode_frames, probe_video, write_video
    from .gaze.events import EventSettings, detect_events
    from .gaze.scanpaths import load_fixation_trains
    from .gaze.uncertainty import describe_uncertainty
    from .gaze.wearer import WearerCalibration
    from .generation.online import GazeFlowStreamer, GazeFlowStreamOutput
    from .generation.windowed import GazeChunk, stream_gaze
    from .hub.model_folders import (
        ModelFolderError,
        default_model_available,
        default_model_path,
        load_model,
        save_model_folder,
    )
    from .metrics import (
        CenterBias,
        ClipGroundTruth,
        ClipPrediction,
        EvaluationResult,
        GazeEvaluator,
        RandomWalk,
        evaluate_module_path,
        evaluate_predictions,
        paired_wilcoxon,
        render_heatmaps,
    )
    from .models.gazeflow.configuration_gazeflow import GazeFlowConfig
    from .models.gazeflow.generation_gazeflow import generate_trajectories, point_estimate
    from .models.gazeflow.geometry import (
        FieldOfView,
        FisheyeCamera,
        PinholeCamera,
        clamp_unit,
        model_to_unit,
        pixels_to_unit,
        unit_to_model,
        unit_to_pixels,
    )
    from .models.gazeflow.modeling_gazeflow import GazeFlowModel, GazeFlowPreTrainedModel
    from .models.gazeflow.modeling_gazeflow_encoder import GazeFlowCondition
    from .models.gazeflow.modeling_gazeflow_outputs import GazeFlowGenerationOutput, GazeFlowModelOutput
    from .models.gazeflow.scheduling_gazeflow import (
        DDIMScheduler,
        FlowMatchingScheduler,
        RegressionScheduler,
        scheduler_for,
    )
    from .models.gazeflow.windows import StreamingBlender, blend_windows, window_starts
    from .pipelines.egocentric_gaze import GazeFlowPipeline, GazeHeatmaps, GazePrediction

_install_registration()
