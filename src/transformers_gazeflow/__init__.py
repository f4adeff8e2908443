"""transformers-gazeflow: GazeFlow egocentric gaze prediction as a Hugging Face model.

This module only re-exports the public API and registers the model with the Auto classes.
"""

from .geometry import clamp_unit, model_to_unit, pixels_to_unit, unit_to_model, unit_to_pixels
from .windows import blend_windows, window_starts

__version__ = "0.1.0.dev0"

__all__ = [
    "__version__",
    "unit_to_model",
    "model_to_unit",
    "unit_to_pixels",
    "pixels_to_unit",
    "clamp_unit",
    "window_starts",
    "blend_windows",
]
