"""Whether a run's grounding left its plateau: the stall check of ``examples/train.py`` (beyond the paper).

The grounding loss L_ground (``modeling_gazeflow_objectives.grounding_loss``) of a run that learns a dataset's rule
falls in two stages: within an epoch to about the level of a *centre bias* (one fixed map of where the gaze tends to
be), then, once c_v singles out the looked-at thing, towards the *floor* (the targets' own entropy, what a perfect
predictor gets). A run that *stalls* stays near the first level: its head points at candidate objects without
knowing which one the gaze follows (docs/results.md, the section on the stall). Both levels are read from the data
alone, so the check needs no setting per dataset:

* ``centre_bias``: L_ground on the validation windows of a constant map, the training windows' mean target or the
  uniform map, whichever scores lower (on a small or skewed validation split the mean map can score worse than the
  uniform one);
* ``floor``: the mean entropy of the validation windows' targets;
* ``progress = (centre_bias - best) / (centre_bias - floor)``, ``best`` the lowest validation L_ground (EMA).

A run *left the plateau* when ``progress >= PLATEAU_PROGRESS`` (:func:`left_plateau`, the one test the end-of-run
check and the trial starts both make). The threshold lies between the progress of the runs that learned a cue rule
and of those that stalled, and above what a predictor that spreads its mass evenly over the candidate objects covers
(that predictor needs the objects' positions, so it cannot be the reference here); the runs it was chosen from are
listed in docs/results.md.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Iterable

import numpy as np
import torch

from ..models.gazeflow.geometry import patch_centres, unit_to_model
from ..models.gazeflow.modeling_gazeflow_objectives import grounding_targets

PLATEAU_PROGRESS = 0.30
"""The share of the way from the centre-bias level to the floor a run's best validation L_ground must cover."""
MAX_REFERENCE_WINDOWS = 4096
"""Windows read per split for the reference levels (evenly spaced when a split has more)."""
STALL_ADVICE = (
    "the model likely spreads its gaze over the candidate objects (or the centre) instead of the one the "
    "gaze follows. What to do: train "
    "again with another --seed (a stall is an event of the optimisation's path, and seeds stall "
    "independently), and before relying on this model compare it with the priors: examples/evaluate.py "
    "--baseline center_bias and --baseline random_walk_free on the same split"
)


@dataclass(frozen=True)
class GroundingReference:
    """The two levels that place a validation L_ground (see the module docstring)."""

    centre_bias: float
    floor: float

    def progress(self, loss: float) -> float | None:
        """The share of the way from ``centre_bias`` to ``floor`` that ``loss`` covers (None when the two levels
        coincide: gaze that never moves leaves nothing to ground)."""
        span = self.centre_bias - self.floor
        return (self.centre_bias - loss) / span if span > 1e-6 else None


def left_plateau(progress: float | None) -> bool:
    """Whether a run whose best validation L_ground covers ``progress`` of the way from the centre-bias level to the
    floor has left the plateau: at least :data:`PLATEAU_PROGRESS` (False where the progress cannot be told)."""
    return progress is not None and progress >= PLATEAU_PROGRESS


def window_targets(
    dataset: Any, config: Any, max_windows: int = MAX_REFERENCE_WINDOWS
) -> tuple[torch.Tensor, torch.Tensor]:
    """L_ground's targets of a split's windows: ``(group_targets [W, G, N], group_weights [W, G])`` for at most
    ``max_windows`` windows, evenly spaced (``grounding_targets`` on each window's gaze, padded to the model's
    ``num_frames`` with invalid frames; a frame with a non-finite gaze counts as invalid)."""
    count = len(dataset)
    step = max(1, math.ceil(count / max_windows))
    rows = dataset.select(range(0, count, step)) if step > 1 else dataset
    frames = config.num_frames
    gaze = np.zeros((len(rows), frames, 2), np.float32)
    valid = np.zeros((len(rows), frames), bool)
    for index, (points, flags) in enumerate(zip(rows["gaze"], rows["valid"])):
        points = np.asarray(points, np.float32).reshape(-1, 2)[:frames]
        flags = np.asarray(flags, bool)[: len(points)] & np.isfinite(points).all(axis=1)
        gaze[index, : len(points)] = np.nan_to_num(points)
        valid[index, : len(points)] = flags
    grid = config.token_grid_size
    groups = frames // config.frames_per_encoder_group
    sigma = config.grounding_sigma * 2.0 / grid  # patch widths -> model units, as GazeFlowModel.grounding_loss
    return grounding_targets(
        unit_to_model(torch.from_numpy(gaze)), torch.from_numpy(valid), patch_centres(grid), sigma, groups
    )


def reference_levels(train_set: Any, validation_set: Any, config: Any) -> GroundingReference | None:
    """The centre-bias level and the floor of L_ground on ``validation_set`` (see the module docstring); None
    without a validation window with a valid frame, or without one in ``train_set``."""
    if not len(train_set) or not len(validation_set):
        return None
    train_targets, train_weights = window_targets(train_set, config)
    has_valid = train_weights > 0
    if not has_valid.any():
        return None
    centre_map = train_targets[has_valid].mean(0)  # [N]: the mean target of the training groups
    targets, weights = window_targets(validation_set, config)
    has_valid = weights > 0
    if not has_valid.any():
        return None
    scored = targets[has_valid]  # [K, N]
    centre_bias = -(scored * centre_map.clamp_min(1e-12).log()).sum(-1).mean()
    uniform = math.log(scored.shape[-1])  # the uniform map's cross-entropy against any target
    floor = -(scored * scored.clamp_min(1e-12).log()).sum(-1).mean()
    return GroundingReference(centre_bias=min(float(centre_bias), uniform), floor=float(floor))


def plateau_verdict(history: Iterable[dict], reference: GroundingReference | None) -> dict | None:
    """The check on a run's validation history (``TrainerState.history``): ``left_plateau``, the best validation
    L_ground (EMA) and its step, the two levels, ``progress`` and the threshold; None when it cannot be told (no
    reference, or no validation L_ground in the history)."""
    scored = [record for record in history if record.get("validation_grounding_loss") is not None]
    if reference is None or not scored:
        return None
    best = min(scored, key=lambda record: record["validation_grounding_loss"])
    progress = reference.progress(best["validation_grounding_loss"])
    if progress is None:
        return None
    return {
        "left_plateau": left_plateau(progress),
        "progress": round(progress, 4),
        "threshold": PLATEAU_PROGRESS,
        "best_validation_grounding_loss": best["validation_grounding_loss"],
        "best_step": best["step"],
        **{key: round(value, 5) for key, value in asdict(reference).items()},
    }


def describe_verdict(verdict: dict | None) -> str:
    """One paragraph for the log and the model card."""
    if verdict is None:
        return "not made (no validation grounding loss to read, or gaze that never moves)"
    where = (
        f"best validation grounding loss (EMA) {verdict['best_validation_grounding_loss']:.4f} at step "
        f"{verdict['best_step']}: {100 * verdict['progress']:.0f}% of the way from the centre-bias level "
        f"{verdict['centre_bias']:.4f} to the targets' floor {verdict['floor']:.4f} (a run that left the "
        f"plateau covers at least {100 * verdict['threshold']:.0f}%)"
    )
    if verdict["left_plateau"]:
        return f"grounding left its plateau: {where}"
    return f"grounding did not leave its plateau: {where}; {STALL_ADVICE}"


__all__ = [
    "GroundingReference",
    "PLATEAU_PROGRESS",
    "STALL_ADVICE",
    "describe_verdict",
    "left_plateau",
    "plateau_verdict",
    "reference_levels",
    "window_targets",
]
