"""Choosing a trained model's sampling temperature tau (``GazeFlowConfig.noise_scale``: x_0 = tau e) on a
validation split: what ``examples/choose_noise_scale.py`` runs.

A few-step sampler leaves each sample with white per-frame jitter around what the K samples agree on; a tau below 1
shrinks that deviation, and the samples' steps and saccade share with it, at the price of a narrower sample set (the
energy score charges it; the uncertainty regions' factors are refitted at the chosen tau). The rule
(:func:`choose_noise_scale`): among the candidate taus, the **largest** whose samples move no faster and jump no
more often than the recorded gaze on the validation clips:

* the samples' median per-frame step at most ``max_step_ratio`` (1.25) times the recorded gaze's (pooled over clips
  and samples: the dynamics table's ``displacement_median_ratio``, paper Appendix E.3), and
* the share of a sample's tracked frames that I-VT labels saccade at most ``max_share_ratio`` (1.33) times the
  recording's (the dataset's own gaze-type labels: the events table's ``human`` row).

The largest, because tau = 1 is the distribution the model was trained to sample and each step below it trades
spread for smoothness: of the taus that meet both bounds it is the one that smooths least. Both figures fall as tau
falls, so the rule has no lower bound of its own; a chosen tau whose saccade share is below :data:`MIN_SHARE_RATIO`
(0.75) of the recording's is reported as such (:attr:`DynamicsCheck.too_few_saccades`: the two targets conflict for
that model). None when no candidate meets both bounds: the model's sampler stays as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from ..metrics.dynamics import LOG_BIN_FLOOR_PX, clip_steps, displacement_statistics
from ..metrics.protocol_records import PROTOCOL_WINDOW
from ..models.gazeflow.geometry import unit_to_pixels
from .evaluation import event_report, predict_clips

NOISE_SCALE_GRID = (1.0, 0.95, 0.9, 0.85, 0.8, 0.75, 0.7, 0.65, 0.6, 0.55, 0.5)
MAX_STEP_RATIO = 1.25
MAX_SHARE_RATIO = 1.33
MIN_SHARE_RATIO = 0.75


@dataclass(frozen=True)
class DynamicsCheck:
    """One candidate tau's samples against the recorded gaze on the validation clips."""

    noise_scale: float
    median_step_ratio: float  # the samples' median per-frame step over the recorded gaze's
    log_jsd: float  # the log-binned step histograms' Jensen-Shannon divergence (reported, not part of the rule)
    saccade_share: float  # share of a sample's tracked frames labelled saccade by I-VT
    recorded_saccade_share: float  # the same share in the dataset's labels of the recorded gaze

    @property
    def share_ratio(self) -> float:
        return self.saccade_share / self.recorded_saccade_share if self.recorded_saccade_share > 0 else float("nan")

    @property
    def too_few_saccades(self) -> bool:
        """The samples' saccade share below :data:`MIN_SHARE_RATIO` of the recording's (reported, not the rule)."""
        return bool(self.share_ratio < MIN_SHARE_RATIO)

    def passes(self, max_step_ratio: float = MAX_STEP_RATIO, max_share_ratio: float = MAX_SHARE_RATIO) -> bool:
        """True when both of the rule's bounds hold (a NaN figure fails)."""
        return bool(self.median_step_ratio <= max_step_ratio and self.share_ratio <= max_share_ratio)

    def to_dict(self) -> dict[str, float]:
        return {**asdict(self), "share_ratio": self.share_ratio, "too_few_saccades": self.too_few_saccades}


def choose_noise_scale(
    checks: Sequence[DynamicsCheck], max_step_ratio: float = MAX_STEP_RATIO, max_share_ratio: float = MAX_SHARE_RATIO
) -> float | None:
    """The largest ``noise_scale`` among ``checks`` that :meth:`DynamicsCheck.passes`; None when none does."""
    passing = [check.noise_scale for check in checks if check.passes(max_step_ratio, max_share_ratio)]
    return max(passing) if passing else None


def measure_dynamics(
    model,
    examples: Sequence[dict],
    processor,
    noise_scale: float,
    num_samples: int,
    num_steps: int,
    solver: str,
    seed: int = 0,
    online: bool = False,
    fov_deg: float = 60.0,
    window: int = PROTOCOL_WINDOW,
) -> DynamicsCheck:
    """Sample ``examples`` at ``noise_scale`` (as ``examples/evaluate.py`` does: each clip's first ``window`` frames,
    the protocol's :data:`PROTOCOL_WINDOW` unless a longer window takes in whole clips, each clip with its own
    seeded generator) and measure the rule's figures; the model's config is restored afterwards."""
    kept = model.config.noise_scale
    model.config.noise_scale = float(noise_scale)
    try:
        predictions, _ = predict_clips(
            model, examples, processor, num_samples, num_steps, solver, seed, window=window, online=online
        )
    finally:
        model.config.noise_scale = kept
    dynamics = step_statistics(examples, predictions)
    events = event_report(examples, predictions, fov_deg)["metrics"]
    return DynamicsCheck(
        noise_scale=float(noise_scale),
        median_step_ratio=_number(dynamics.get("displacement_median_ratio")),
        log_jsd=_number(dynamics.get("displacement_log_jsd")),
        saccade_share=_number(events["samples"].get("saccade_share")),
        recorded_saccade_share=_number(events["human"].get("saccade_share")),
    )


def step_statistics(examples: Sequence[dict], predictions: Sequence[np.ndarray]) -> dict[str, float]:
    """The dynamics table's step figures (paper Appendix E.3: ``displacement_median_ratio``, ``displacement_log_jsd``,
    ...) of the samples ``[K, n, 2]`` against each example's recorded gaze, over every frame sampled and tracked.
    The evaluator's computation (``metrics.protocol.GazeEvaluator``: each clip's ``metrics.dynamics.clip_steps`` in
    its native pixels, pooled over clips and samples), without its cut to the protocol's first 64 frames, so that
    whole clips are measured whole, and without the saliency maps it renders besides. (``metrics.dynamics.
    trajectory_dynamics`` pools float64 steps of one frame size and adds ADE and DTW: not the evaluator's figures.)"""
    sample_steps, recorded_steps = [], []
    for example, samples in zip(examples, predictions, strict=True):
        valid = np.asarray(example["valid"], bool)
        if not valid.any():
            continue
        width, height = int(example["width"]), int(example["height"])
        samples_px = unit_to_pixels(np.asarray(samples, np.float64), width, height)
        recorded_px = unit_to_pixels(np.asarray(example["gaze"], np.float64), width, height)
        samples_clip, recorded_clip = clip_steps(samples_px, recorded_px, valid)
        sample_steps.append(samples_clip)
        recorded_steps.append(recorded_clip)
    if not sample_steps:
        return {}
    return displacement_statistics(
        np.concatenate(sample_steps), np.concatenate(recorded_steps), floor_px=LOG_BIN_FLOOR_PX
    )


def _number(value) -> float:
    """A figure of the reports as a float (None, as the reports write an undefined figure: NaN)."""
    return float("nan") if value is None else float(np.float64(value))
