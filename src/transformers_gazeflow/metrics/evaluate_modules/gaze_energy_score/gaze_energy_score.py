"""Proper scores of sampled gaze points as an `evaluate` module: a thin wrapper over transformers_gazeflow.metrics."""

import datasets
import evaluate

from transformers_gazeflow.metrics.sample_scores import sample_scores

_DESCRIPTION = """
Proper scoring rules of the K sampled gaze points of each frame against the true gaze, in native pixels (lower is
better): the energy score E|X - y| - E|X - X'| / 2 (Euclidean distances in the image plane; Gneiting and Raftery
2007) and the CRPS of each coordinate (the same in one dimension; the mean of x and y), each as the fair estimate
(Ferro 2014: the spread term over the K (K - 1) distinct pairs, unbiased for the score of the distribution the
samples come from, whatever K) and the plain one (over all K^2 pairs: the score of the K samples as an empirical
distribution, which favours larger K). One sample is a point forecast: both equal its distance to the truth. Each
clip's mean over its valid frames, then the mean over clips.
"""

_CITATION = """
@article{gneiting2007strictly,
  title={Strictly proper scoring rules, prediction, and estimation},
  author={Gneiting, Tilmann and Raftery, Adrian E},
  journal={Journal of the American Statistical Association},
  year={2007}
}
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions: per clip, K sampled trajectories [K][T][2] of (x, y) in [0, 1] of the frame.
    references: per clip, the true gaze [T][2] in [0, 1].
    valid: per clip, [T] booleans: which frames are tracked (the others are not scored).
    width, height: the native frame size in pixels (the scores are in these pixels).
Returns:
    energy_score_fair, energy_score_plain, crps_fair, crps_plain.
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class GazeEnergyScore(evaluate.Metric):
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
        return sample_scores(predictions, references, valid, width, height)
