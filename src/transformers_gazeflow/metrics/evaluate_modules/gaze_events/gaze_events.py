"""Fixation and saccade metrics as an `evaluate` module: a thin wrapper over transformers_gazeflow.metrics.events."""

import datasets
import evaluate

from transformers_gazeflow.gaze.events import EventSettings
from transformers_gazeflow.metrics import events

_DESCRIPTION = """
Fixations and saccades of sampled gaze trajectories against a recording's own gaze-type labels (fixation 1,
saccade 2; untracked 0 and blink 3 frames are left out of both). Each of the K samples (and the point estimate,
their mean) is labelled by I-VT at 30 deg/s (Komogortsev et al. 2010) or I-DT (Salvucci & Goldberg 2000) through
a pinhole camera of the given horizontal field of view; the metrics are fixations per clip, fixation durations
(mean, median, Wasserstein-1 to the recording's, ms), saccade amplitudes (mean, median, Wasserstein-1, degrees),
event-level precision, recall and F1 per type with an onset tolerance, and the share of frames in a saccade.
"""

_CITATION = """
@article{gazeflow,
  title={GazeFlow: egocentric gaze prediction by conditional flow matching},
}
@inproceedings{salvucci2000,
  title={Identifying fixations and saccades in eye-tracking protocols},
  author={Salvucci, Dario D. and Goldberg, Joseph H.},
  booktitle={ETRA},
  year={2000}
}
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions: per clip, K sampled trajectories [K][T][2] of (x, y) in [0, 1] of the frame.
    references: per clip, the recorded trajectory [T][2] in [0, 1].
    gaze_types: per clip, [T] unified gaze-type codes (0 untracked, 1 fixation, 2 saccade, 3 blink, 4 off-frame).
    fps, width, height: the clips' frame rate and native size (one value for all clips).
    fov_deg: horizontal field of view of the camera (default 60, the angular error's).
    method: "ivt" (default) or "idt"; velocity_threshold_deg_s (30), dispersion_deg (1), min_duration_ms (100).
    onset_tolerance_ms: the event-level F1's onset tolerance (default 100).
Returns:
    the K samples' metrics under their own names (fixations_per_clip, fixation_duration_mean_ms,
    fixation_duration_median_ms, fixation_duration_w1_ms, saccade_amplitude_mean_deg, saccade_amplitude_median_deg,
    saccade_amplitude_w1_deg, fixation_precision/recall/f1, saccade_precision/recall/f1, saccade_share), and the same
    prefixed point_estimate_, labeller_on_recording_ (the labeller on the recorded gaze) and human_ (the recording).
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class GazeEvents(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "predictions": datasets.Sequence(datasets.Sequence(datasets.Sequence(datasets.Value("float32")))),
                    "references": datasets.Sequence(datasets.Sequence(datasets.Value("float32"))),
                    "gaze_types": datasets.Sequence(datasets.Value("int8")),
                }
            ),
        )

    def _compute(
        self,
        predictions,
        references,
        gaze_types,
        fps,
        width,
        height,
        fov_deg=60.0,
        method="ivt",
        velocity_threshold_deg_s=30.0,
        dispersion_deg=1.0,
        min_duration_ms=100.0,
        onset_tolerance_ms=100.0,
    ):
        settings = EventSettings(method, velocity_threshold_deg_s, dispersion_deg, min_duration_ms)
        metrics = events.event_metrics(
            predictions, references, gaze_types, fps, width, height, fov_deg, settings, onset_tolerance_ms
        )
        return events.flatten_event_metrics(metrics)
