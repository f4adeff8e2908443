"""Per-frame gaze saliency metrics as an `evaluate` module: a thin wrapper over transformers_gazeflow.metrics."""

import datasets
import evaluate

from transformers_gazeflow.metrics.protocol import evaluate_frames

_DESCRIPTION = """
Per-frame gaze saliency metrics of GazeFlow (paper Section 4.1 and Appendix E.3): AUC-Judd, NSS, CC, KL, SIM,
average angular error (AAE, centre of mass of the map, pinhole camera with a 60 degree horizontal field of view)
and adaptive F1 with precision and recall at the threshold chosen once over the whole set (GLC's rule).
Each example is one fixation frame: a predicted heatmap at the frame's native resolution and the ground-truth gaze
point in unit coordinates. The ground-truth map is a Gaussian of `sigma_px` pixels at that point.
For the full clip protocol (frames 0, 9, ..., 63, fixation filter, clip means, dynamics) use
`transformers_gazeflow.metrics.GazeEvaluator`.
"""

_CITATION = """
@article{gazeflow,
  title={GazeFlow: egocentric gaze prediction by conditional flow matching},
}
@article{bylinskii2019different,
  title={What do different evaluation metrics tell us about saliency models?},
  author={Bylinskii, Zoya and Judd, Tilke and Oliva, Aude and Torralba, Antonio and Durand, Fr{\\'e}do},
  journal={IEEE TPAMI},
  year={2019}
}
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions: list of heatmaps, each a list of rows [H][W] of non-negative floats.
    references: list of ground-truth gaze points (x, y) in [0, 1] of the frame, one per heatmap.
    sigma_px: Gaussian sigma of the ground-truth map in pixels of the heatmap (default 25).
    fov_deg: horizontal field of view used by the angular error (default 60).
Returns:
    auc, nss, cc, kl, sim, aae (means over frames), f1, precision, recall, threshold, num_frames.
Examples:
    >>> import evaluate
    >>> from transformers_gazeflow.metrics import evaluate_module_path
    >>> metric = evaluate.load(evaluate_module_path("gaze_saliency"))
    >>> metric.compute(predictions=[[[0.0, 1.0], [0.0, 0.0]]], references=[[0.75, 0.25]], sigma_px=1.0)["aae"] < 1
    True
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class GazeSaliency(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "predictions": datasets.Sequence(datasets.Sequence(datasets.Value("float32"))),
                    "references": datasets.Sequence(datasets.Value("float32"), length=2),
                }
            ),
        )

    def _compute(self, predictions, references, sigma_px=25.0, fov_deg=60.0):
        return evaluate_frames(predictions, references, sigma_px=sigma_px, fov_deg=fov_deg)
