"""Metrics and the evaluation protocol of GazeFlow (paper Section 4.1 and Appendix E.3; docs/specs/evaluation.md).

Layers: ``heatmaps`` (the one renderer of maps) -> ``jitter`` (MIT's AUC jitter in expectation), ``saliency`` and
``dynamics`` (the maths), ``events`` (fixations and saccades against recorded labels) -> ``scoring`` (the
evaluator's fast path), ``protocol_records`` (what the protocol reads and returns) -> ``protocol`` (the evaluator)
-> ``significance`` (Wilcoxon), ``baselines`` (the priors), ``tables`` (markdown); the ``evaluate`` modules under
``evaluate_modules/`` wrap them (:func:`evaluate_module_path`).
Nothing here imports the model.
"""

from .baselines import CenterBias, RandomWalk
from .dynamics import (
    ade,
    displacement_statistics,
    displacements,
    dtw,
    human_halves_reference,
    jensen_shannon,
    motionless_reference,
    trajectory_dynamics,
    wasserstein1,
)
from .events import event_metrics, flatten_event_metrics
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
from .protocol import GazeEvaluator, evaluate_frames, evaluate_predictions
from .protocol_records import ClipGroundTruth, ClipPrediction, EvaluationResult, protocol_frame_indices
from .saliency import angular_error, auc_judd, cc, center_of_mass, glc_aae, glc_auc, kl_div, nss, sim
from .significance import WilcoxonResult, paired_wilcoxon
from .tables import dynamics_table_markdown, main_table_markdown

__all__ = [
    "CenterBias",
    "RandomWalk",
    "ade",
    "dtw",
    "displacements",
    "displacement_statistics",
    "jensen_shannon",
    "wasserstein1",
    "motionless_reference",
    "human_halves_reference",
    "trajectory_dynamics",
    "event_metrics",
    "flatten_event_metrics",
    "main_table_markdown",
    "dynamics_table_markdown",
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
