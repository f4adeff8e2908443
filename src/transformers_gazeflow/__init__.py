"""transformers-gazeflow: GazeFlow egocentric gaze prediction as a Hugging Face model.

This module only re-exports the public API and registers the model with the Auto classes.
"""

from transformers import AutoConfig, AutoModel

from .configuration_gazeflow import GazeFlowConfig
from .geometry import clamp_unit, model_to_unit, pixels_to_unit, unit_to_model, unit_to_pixels
from .modeling_gazeflow import (
    GazeFlowCondition,
    GazeFlowGenerationOutput,
    GazeFlowModel,
    GazeFlowModelOutput,
    GazeFlowPreTrainedModel,
)
from .sampling import FlowMatchingSampler, generate_trajectories
from .streaming import GazeFlowStreamer, GazeFlowStreamOutput
from .windows import blend_windows, window_starts

__version__ = "0.1.0.dev0"

AutoConfig.register(GazeFlowConfig.model_type, GazeFlowConfig, exist_ok=True)
AutoModel.register(GazeFlowConfig, GazeFlowModel, exist_ok=True)

__all__ = [
    "__version__",
    "GazeFlowConfig",
    "GazeFlowModel",
    "GazeFlowPreTrainedModel",
    "GazeFlowModelOutput",
    "GazeFlowGenerationOutput",
    "GazeFlowCondition",
    "FlowMatchingSampler",
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
]
