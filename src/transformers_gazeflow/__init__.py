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
    "GazeFlowConfig": "configuration_gazeflow",
    "GazeFlowModel": "modeling_gazeflow",
    "GazeFlowPreTrainedModel": "modeling_gazeflow",
    "GazeFlowModelOutput": "modeling_gazeflow",
    "GazeFlowGenerationOutput": "modeling_gazeflow",
    "GazeFlowCondition": "modeling_gazeflow",
    "FlowMatchingScheduler": "scheduling_gazeflow",
    "DDIMScheduler": "scheduling_gazeflow",
    "RegressionScheduler": "scheduling_gazeflow",
    "scheduler_for": "scheduling_gazeflow",
    "generate_trajectories": "windowed_engine",
    "GazeFlowStreamer": "online_streaming",
    "GazeFlowStreamOutput": "online_streaming",
    # conventions
    "unit_to_model": "geometry",
    "model_to_unit": "geometry",
    "unit_to_pixels": "geometry",
    "pixels_to_unit": "geometry",
    "clamp_unit": "geometry",
    "UNTRACKED": "schema",
    "FIXATION": "schema",
    "SACCADE": "schema",
    "BLINK_OR_OTHER": "schema",
    "OFF_FRAME": "schema",
    "window_starts": "windows",
    "blend_windows": "windows",
    "StreamingBlender": "windows",
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
    "GazeFlowPipeline": "pipeline_gazeflow",
    "GazePrediction": "pipeline_gazeflow",
    "GazeHeatmaps": "pipeline_gazeflow",
    "stream_gaze": "windowed_engine",
    "GazeChunk": "windowed_engine",
    "point_estimate": "schema",
    "default_model_path": "hub",
    "default_model_available": "hub",
    "load_model": "hub",
    "save_model_folder": "hub",
    "ModelFolderError": "hub",
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
    from .configuration_gazeflow import GazeFlowConfig
    from .data.collator import GazeFlowDataCollator
    from .data.loading import ClipDroppedError, available_builders, gaze_builder, gaze_example_features, load_gaze_dataset
    from .data.processing import GazeFlowVideoProcessor
    from .data.synthetic import SyntheticGazeSettings, write_egtea_layout
    from .data.video import VideoDecodeError, decode_frames, probe_video, write_video
    from .geometry import clamp_unit, model_to_unit, pixels_to_unit, unit_to_model, unit_to_pixels
    from .hub import ModelFolderError, default_model_available, default_model_path, load_model, save_model_folder
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
    from .modeling_gazeflow import (
        GazeFlowCondition,
        GazeFlowGenerationOutput,
        GazeFlowModel,
        GazeFlowModelOutput,
        GazeFlowPreTrainedModel,
    )
    from .pipeline_gazeflow import GazeFlowPipeline, GazeHeatmaps, GazePrediction
    from .online_streaming import GazeFlowStreamer, GazeFlowStreamOutput
    from .scheduling_gazeflow import DDIMScheduler, FlowMatchingScheduler, RegressionScheduler, scheduler_for
    from .schema import BLINK_OR_OTHER, FIXATION, OFF_FRAME, SACCADE, UNTRACKED, point_estimate
    from .windowed_engine import GazeChunk, generate_trajectories, stream_gaze
    from .windows import StreamingBlender, blend_windows, window_starts

_install_registration()
