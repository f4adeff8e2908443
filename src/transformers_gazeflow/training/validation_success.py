"""Whether a run learned its task, told on its own held-out clips: the check after training beside the stall check.

The stall check (:mod:`.grounding_plateau`) reads a proxy, the validation grounding loss; a run can cover half the
way from the centre-bias level to the floor and still not find the target at test time. This check measures what the
task asks: the saved weights (the best validation loss's EMA) predict the run's validation clips under the evaluation
protocol (one example per clip, its first protocol window, ``training.evaluation.predict_clips`` with
:data:`CHECK_SAMPLES` samples and :data:`CHECK_STEPS` solver steps), and their mean AAE is set against Center Bias's
fitted on the training clips (``training.evaluation.baseline_predictions``, both scored by
``training.evaluation.score``). The run *learned* when its AAE is at most ``SUCCESS_AAE_RATIO`` times Center Bias's
(``metrics.baselines.beats_center_bias``, the rule the recipe panel's test-time success reads).

Where the two checks disagree, the grounding left its plateau but the validation clips say the run did not learn,
the run is *grounding weak* (:func:`grounding_weak`), said in the log and the model card with what to try.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from ..metrics.baselines import SUCCESS_AAE_RATIO, beats_center_bias
from ..metrics.protocol_records import PROTOCOL_WINDOW
from ..models.gazeflow.generation_gazeflow import SamplingSettings
from .evaluation import baseline_predictions, predict_clips, score

CHECK_SAMPLES = 8
"""K of the check's predictions (a regression model's one): enough for a mean trajectory, cheap on a CPU."""
CHECK_STEPS = 5
"""S of the check's predictions."""
CHECK_SEED = 0
"""The seed of every clip's noise (``training.evaluation.clip_generator``), as ``examples/evaluate.py``'s default."""
WHAT_TO_TRY = (
    "What to try: train longer (a larger --max_train_steps), train again with another --seed, or let the run try "
    "several starts and continue the best (--trial_starts 2 or more); and before relying on this model, compare it "
    "with the priors on your test split (examples/evaluate.py --baseline center_bias and --baseline random_walk_free)"
)


def success_verdict(model_aae: float, center_bias_aae: float, clips: int, num_samples: int, num_steps: int) -> dict:
    """The check's record: ``learned`` (None when the AAEs cannot tell, e.g. no fixation frame to score), both AAEs
    in degrees, their ratio, the threshold, and what was measured (clips, K, S)."""
    record: dict[str, Any] = {"learned": None, "model_aae": None, "center_bias_aae": None, "aae_ratio": None}
    record.update(threshold=SUCCESS_AAE_RATIO, clips=clips, num_samples=num_samples, num_steps=num_steps)
    if not (math.isfinite(model_aae) and math.isfinite(center_bias_aae) and center_bias_aae > 0):
        record["skipped"] = (
            f"the AAEs cannot tell (model {model_aae:.4g} deg, Center Bias {center_bias_aae:.4g} deg: no fixation "
            "frame of a validation clip to score?)"
        )
        return record
    record.update(
        learned=beats_center_bias(model_aae, center_bias_aae),
        model_aae=round(model_aae, 4),
        center_bias_aae=round(center_bias_aae, 4),
        aae_ratio=round(model_aae / center_bias_aae, 4),
    )
    return record


def skipped_verdict(reason: str) -> dict:
    """The record of a check not made, with why (switched off, no validation clip, ...)."""
    return {"learned": None, "skipped": reason}


def grounding_weak(plateau: dict | None, success: dict | None) -> bool:
    """Whether the stall check says the grounding left its plateau while the validation clips say the run did not
    learn its task (each check's record; False where either was not made)."""
    return bool(plateau and plateau["left_plateau"] and success and success["learned"] is False)


def describe_success(success: dict | None) -> str:
    """One sentence for the log and the model card."""
    if success is None or success["learned"] is None:
        reason = "switched off" if success is None else success.get("skipped", "no verdict")
        return f"not made ({reason})"
    measured = (
        f"on {success['clips']} validation clips (K={success['num_samples']}, S={success['num_steps']}) its mean "
        f"angular error is {success['model_aae']:.2f} deg against Center Bias's {success['center_bias_aae']:.2f} "
        f"(ratio {success['aae_ratio']:.2f}; a model that learned its task is at most {success['threshold']:.2f})"
    )
    if success["learned"]:
        return f"learned: {measured}"
    return f"not learned: {measured}; the model is not clearly better than a fixed guess near the frame's centre"


def describe_grounding_weak(plateau: dict, success: dict) -> str:
    """What ``grounding weak`` means, for the log and the model card: the two checks' numbers and what to try."""
    return (
        f"grounding weak: the grounding loss left its plateau ({100 * plateau['progress']:.0f}% of the way from the "
        f"centre-bias level to the floor), yet on the {success['clips']} validation clips the model's gaze is not "
        f"clearly closer than Center Bias's (mean angular error {success['model_aae']:.2f} deg against "
        f"{success['center_bias_aae']:.2f}, ratio {success['aae_ratio']:.2f}; a run that learned its task is at most "
        f"{success['threshold']:.2f}): the model picked up part of the cue, not enough to follow the gaze. "
        + WHAT_TO_TRY
    )


def measure_validation_success(model, processor, train_clips: Sequence[dict], validation_clips: Sequence[dict]) -> dict:
    """The check on ``validation_clips`` (one example per clip, the protocol window): ``model``'s mean AAE against
    Center Bias fitted on ``train_clips`` (:func:`success_verdict`; nothing that varies between two runs of the same
    weights, such as its time, so a resumed run's trainer state equals an uninterrupted one's). The model predicts in
    this process alone (no data-parallel sharding) and in eval mode, restored after."""
    config = model.config
    num_samples = 1 if config.objective == "regression" else CHECK_SAMPLES
    settings = SamplingSettings.resolve(config, num_samples=num_samples, num_steps=CHECK_STEPS)
    was_training = model.training
    model.eval()
    try:
        predictions, _ = predict_clips(
            model,
            validation_clips,
            processor,
            settings.num_samples,
            settings.num_steps,
            settings.solver,
            CHECK_SEED,
            window=PROTOCOL_WINDOW,
        )
    finally:
        model.train(was_training)
    sigma = config.heatmap_sigma  # the AAE reads no map; the maps' sigma is the model's, as examples/evaluate.py's
    model_aae = score(validation_clips, predictions, sigma_px=sigma).metrics["aae"]
    center_bias = baseline_predictions("center_bias", train_clips, validation_clips)
    center_bias_aae = score(validation_clips, center_bias, sigma_px=sigma).metrics["aae"]
    verdict = success_verdict(
        float(model_aae), float(center_bias_aae), len(validation_clips), settings.num_samples, settings.num_steps
    )
    verdict["window"] = PROTOCOL_WINDOW
    return verdict


__all__ = [
    "CHECK_SAMPLES",
    "CHECK_SEED",
    "CHECK_STEPS",
    "WHAT_TO_TRY",
    "describe_grounding_weak",
    "describe_success",
    "grounding_weak",
    "measure_validation_success",
    "skipped_verdict",
    "success_verdict",
]
