"""transformers-gazeflow: GazeFlow egocentric gaze prediction as a Hugging Face model.

This module only re-exports the public API, registers the model with the Auto classes and registers the
``egocentric-gaze`` pipeline task (its default model is the bundled one, ``default_model_path()``). It stays importable
without ``datasets``, ``evaluate`` and ``av`` (the GPU image has none of them): the data modules import those inside
the functions that need them.
"""

from transformers import AutoConfig, AutoModel
from transformers.pipelines import PIPELINE_REGISTRY

from .online_streaming import GazeFlowStreamer, GazeFlowStreamOutput
from .configuration_gazeflow import GazeFlowConfig
from .data.collator import GazeFlowDataCollator
from .schema import BLINK_OR_OTHER, FIXATION, OFF_FRAME, SACCADE, UNTRACKED, point_estimate
from .data.loading import ClipDroppedError, available_builders, gaze_builder, gaze_example_features, load_gaze_dataset
from .data.processing import GazeFlowVideoProcessor
from .data.synthetic import SyntheticGazeSettings, write_egtea_layout
from .data.video import VideoDecodeError, decode_frames, probe_video, write_video
from .geometry import clamp_unit, model_to_unit, pixels_to_unit, unit_to_model, unit_to_pixels
from .hub import ModelFolderError, default_model_available, default_model_path, load_model
from .modeling_gazeflow import (
    GazeFlowCondition,
    GazeFlowGenerationOutput,
    GazeFlowModel,
    GazeFlowModelOutput,
    GazeFlowPreTrainedModel,
)
from .pipeline_gazeflow import GazeFlowPipeline, GazeHeatmaps, GazePrediction
from .scheduling_gazeflow import DDIMScheduler, FlowMatchingScheduler, RegressionScheduler, scheduler_for
from .windowed_engine import GazeChunk, generate_trajectories, stream_gaze
from .windows import StreamingBlender, blend_windows, window_starts

__version__ = "0.1.0.dev0"

# The metrics (and scipy beneath them) load on first use: `transformers_gazeflow.GazeEvaluator` works, but
# `import transformers_gazeflow` stays light.
_LAZY_METRICS = ("GazeEvaluator", "evaluate_predictions", "paired_wilcoxon", "CenterBias", "RandomWalk",
                 "ClipGroundTruth", "ClipPrediction", "EvaluationResult", "render_heatmaps", "evaluate_module_path")


def __getattr__(name: str):
    if name in _LAZY_METRICS:
        from . import metrics

        return getattr(metrics, name)
    raise AttributeError(f"module 'transformers_gazeflow' has no attribute {name!r}")

AutoConfig.register(GazeFlowConfig.model_type, GazeFlowConfig, exist_ok=True)
AutoModel.register(GazeFlowConfig, GazeFlowModel, exist_ok=True)
PIPELINE_REGISTRY.register_pipeline(
    "egocentric-gaze", pipeline_class=GazeFlowPipeline, pt_model=AutoModel, type="video",
    default={"model": (str(default_model_path()), None)},
)

__all__ = [
    "__version__",
    "GazeFlowConfig",
    "GazeFlowModel",
    "GazeFlowPreTrainedModel",
    "GazeFlowModelOutput",
    "GazeFlowGenerationOutput",
    "GazeFlowCondition",
    "FlowMatchingScheduler",
    "DDIMScheduler",
    "RegressionScheduler",
    "scheduler_for",
    "GazeFlowStreamer",
    "GazeFlowStreamOutput",
    "generate_trajectories",
    "unit_to_model",
    "model_to_unit",
    "unit_to_pixels",
    "pixels_to_unit",
    "clamp_unit",
    "window_starts",
    "blend_windows",
    # data: datasets, processing, collation, video
    "load_gaze_dataset",
    "gaze_builder",
    "available_builders",
    "gaze_example_features",
    "ClipDroppedError",
    "GazeFlowVideoProcessor",
    "GazeFlowDataCollator",
    "write_egtea_layout",
    "SyntheticGazeSettings",
    "UNTRACKED",
    "FIXATION",
    "SACCADE",
    "BLINK_OR_OTHER",
    "OFF_FRAME",
    "probe_video",
    "decode_frames",
    "write_video",
    "StreamingBlender",
    "GazeFlowPipeline",
    "GazePrediction",
    "GazeHeatmaps",
    "stream_gaze",
    "GazeChunk",
    "point_estimate",
    "default_model_path",
    "default_model_available",
    "load_model",
    "ModelFolderError",
    "VideoDecodeError",
    *_LAZY_METRICS,
]
