"""Metrics and the evaluation protocol of GazeFlow (paper Section 4.1 and Appendix E.3; spec evaluation.md).

Layers: ``heatmaps`` (the one renderer of maps) -> ``saliency`` and ``dynamics`` (the maths) -> ``protocol`` (the
evaluator, Wilcoxon) -> ``baselines`` (the priors); the ``evaluate`` modules under ``evaluate_modules/`` wrap them
(:func:`evaluate_module_path`). Nothing here imports the model.
"""

from .baselines import CenterBias, RandomWalk
from .dynamics import ade, displacement_statistics, displacements, dtw, jensen_shannon, trajectory_dynamics
from .heatmaps import (
    DEFAULT_SIGMA_PX,
    binary_gt_masks,
    glc_crop_gaze,
    glc_frame_softmax,
    glc_gt_heatmaps,
    opencv_gaussian_kernel,
    render_gt_heatmaps,
    render_heatmaps,
)
from .modules import EVALUATE_MODULES, evaluate_module_path
from .protocol import (
    ClipGroundTruth,
    ClipPrediction,
    EvaluationResult,
    GazeEvaluator,
    WilcoxonResult,
    evaluate_frames,
    evaluate_predictions,
    paired_wilcoxon,
    protocol_frame_indices,
)
from .saliency import angular_error, auc_judd, cc, center_of_mass, glc_aae, glc_auc, kl_div, nss, sim

__all__ = [
    "CenterBias",
    "RandomWalk",
    "ade",
    "dtw",
    "displacements",
    "displacement_statistics",
    "jensen_shannon",
    "trajectory_dynamics",
    "DEFAULT_SIGMA_PX",
    "render_heatmaps",
    "render_gt_heatmaps",
    "binary_gt_masks",
    "opencv_gaussian_kernel",
    "glc_crop_gaze",
    "glc_gt_heatmaps",
    "glc_frame_softmax",
    "EVALUATE_MODULES",
    "evaluate_module_path",
    "ClipGroundTruth",
    "ClipPrediction",
    "EvaluationResult",
    "GazeEvaluator",
    "WilcoxonResult",
    "evaluate_predictions",
    "evaluate_frames",
    "paired_wilcoxon",
    "protocol_frame_indices",
    "auc_judd",
    "nss",
    "cc",
    "kl_div",
    "sim",
    "center_of_mass",
    "angular_error",
    "glc_auc",
    "glc_aae",
]
