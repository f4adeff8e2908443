"""Gaze trajectory dynamics metrics as an `evaluate` module: a thin wrapper over transformers_gazeflow.metrics."""

import datasets
import evaluate

from transformers_gazeflow.metrics.dynamics import trajectory_dynamics

_DESCRIPTION = """
Temporal dynamics of sampled gaze trajectories against the human one (GazeFlow paper, Section 4.1 and Appendix
E.3): average displacement error (ADE) and length-normalised dynamic time warping (DTW), each as the mean over the
K samples and the best of K, in native pixels; per-step displacement mean and median as ratios to the human ones;
Jensen-Shannon divergence (base e) between the displacement histograms (the paper's 100 linear bins over the union
range, and log-spaced bins: [0, 0.1 px) then 50 bins geomspace(0.1 px, max)); the Wasserstein-1 distance between the
step distributions in pixels and over the human mean step.
"""

_CITATION = """
@article{gazeflow,
  title={GazeFlow: egocentric gaze prediction by conditional flow matching},
}
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions: per clip, K sampled trajectories [K][T][2] of (x, y) in [0, 1] of the frame.
    references: per clip, the human trajectory [T][2] in [0, 1].
    valid: per clip, [T] booleans: which frames are tracked (invalid frames are skipped).
    width, height: the native frame size in pixels (metrics are in these pixels).
Returns:
    ade_mean, ade_best, dtw_mean, dtw_best, displacement_mean_ratio, displacement_median_ratio,
    displacement_jsd, displacement_log_jsd, displacement_w1_px, displacement_w1_relative and the raw displacement
    means and medians in pixels (the displacement keys only when some clip has two consecutive valid frames).
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class GazeDynamics(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "predictions": datasets.Sequence(datasets.Sequence(datasets.Sequence(datasets.Value("float32")))),
                    "references": datasets.Sequence(datasets.Sequence(datasets.Value("float32"))),
                    "valid": datasets.Sequence(datasets.Value("bool")),
                }
            ),
        )

    def _compute(self, predictions, references, valid, width, height):
        return trajectory_dynamics(predictions, references, valid, width, height)
