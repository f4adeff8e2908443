"""Failure analysis (paper Section 4.8 Limitations, Appendix A.3, Figure failure_cases): where the error is, and
how much of it the frames whose recorded gaze left the camera's view carry.

Per clip (:func:`clip_failures`): the per-frame error of the point estimate (the mean of the K samples,
``streaming.point_estimate``) against the recorded gaze, in native pixels, on valid frames (schema's valid rule);
and two flags per frame (:func:`flag_frames`):

* ``off_frame``: gaze type 4 (the recording is clamped to the image border: the eye left the field of view);
* ``border_after_saccade``: not off-frame, the recorded gaze lies within ``border`` (a fraction of the frame's
  width / height) of an edge, and it moved at least ``saccade_amplitude`` (a fraction of the frame's diagonal)
  within the previous ``lookback`` frames: a large saccade ending at the border.

:func:`failure_summary` reports, over all clips, the share of valid frames flagged and the share of the total error
they carry (if flagged frames were ordinary, the two would be about equal), and the mean error on flagged vs other
frames.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from ..data.gaze_types import OFF_FRAME, valid_mask
from ..models.gazeflow.generation_gazeflow import point_estimate
from ..models.gazeflow.geometry import unit_to_pixels

FLAGS = ("off_frame", "border_after_saccade")


@dataclass(frozen=True)
class FailureRule:
    """The thresholds of :func:`flag_frames` (fractions of the frame)."""

    border: float = 0.02
    saccade_amplitude: float = 0.2
    lookback: int = 3

    def __post_init__(self) -> None:
        if not 0 <= self.border < 0.5:
            raise ValueError(f"border must be in [0, 0.5) (a fraction of the frame), got {self.border!r}")
        if not 0 < self.saccade_amplitude <= 1.5:
            raise ValueError(
                f"saccade_amplitude must be in (0, 1.5] (a fraction of the frame diagonal), "
                f"got {self.saccade_amplitude!r}"
            )
        if isinstance(self.lookback, bool) or not isinstance(self.lookback, int) or self.lookback < 1:
            raise ValueError(f"lookback must be an int >= 1 (frames), got {self.lookback!r}")


def _check_track(gaze: np.ndarray, gaze_type: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    gaze, gaze_type = np.asarray(gaze, np.float64), np.asarray(gaze_type, np.int64)
    if gaze.ndim != 2 or gaze.shape[1] != 2 or gaze_type.shape != (gaze.shape[0],) or gaze.shape[0] == 0:
        raise ValueError(
            f"{name}: gaze must be [T, 2] and gaze_type [T] with T >= 1, got {gaze.shape} and {gaze_type.shape}"
        )
    return gaze, gaze_type


def flag_frames(
    gaze: np.ndarray,
    gaze_type: np.ndarray,
    width: int,
    height: int,
    rule: FailureRule = FailureRule(),
    name: str = "clip",
) -> dict[str, np.ndarray]:
    """bool ``[T]`` per flag of :data:`FLAGS`, on valid frames only (``gaze`` in unit coordinates)."""
    gaze, gaze_type = _check_track(gaze, gaze_type, name)
    valid = valid_mask(gaze_type)
    off_frame = valid & (gaze_type == OFF_FRAME)
    edge = np.minimum(np.minimum(gaze[:, 0], 1 - gaze[:, 0]), np.minimum(gaze[:, 1], 1 - gaze[:, 1]))
    at_border = edge <= rule.border
    pixels = unit_to_pixels(gaze, width, height)
    diagonal = float(np.hypot(width, height))
    jumped = np.zeros(len(gaze), bool)
    for k in range(1, rule.lookback + 1):
        if k >= len(gaze):
            break
        step = np.linalg.norm(pixels[k:] - pixels[:-k], axis=1) / diagonal
        jumped[k:] |= (step >= rule.saccade_amplitude) & valid[:-k]
    return {"off_frame": off_frame, "border_after_saccade": valid & ~off_frame & at_border & jumped}


def point_errors(gaze: np.ndarray, samples: np.ndarray, width: int, height: int) -> np.ndarray:
    """``[T]`` pixel distance between the point estimate of ``samples [K, T, 2]`` and ``gaze [T, 2]`` (unit)."""
    samples = np.asarray(samples, np.float64)
    if samples.ndim != 3 or samples.shape[1:] != np.shape(gaze):
        raise ValueError(f"samples must be [K, T, 2] for gaze [T, 2] = {np.shape(gaze)}, got {samples.shape}")
    estimate = unit_to_pixels(point_estimate(samples), width, height)
    return np.linalg.norm(estimate - unit_to_pixels(np.asarray(gaze, np.float64), width, height), axis=1)


@dataclass
class ClipFailures:
    """One clip's per-frame errors (px, NaN on invalid frames) and flags."""

    clip_id: str
    errors: np.ndarray
    flags: dict[str, np.ndarray]
    width: int
    height: int

    @property
    def valid(self) -> np.ndarray:
        return np.isfinite(self.errors)

    @property
    def flagged(self) -> np.ndarray:
        return np.logical_or.reduce([self.flags[f] for f in FLAGS])

    @property
    def mean_error(self) -> float:
        return float(np.nanmean(self.errors)) if self.valid.any() else float("nan")

    def to_json(self) -> dict:
        return {
            "clip_id": self.clip_id,
            "mean_error_px": self.mean_error,
            "valid_frames": int(self.valid.sum()),
            **{f"{flag}_frames": int(self.flags[flag].sum()) for flag in FLAGS},
            "flagged_error_share": _share(self.errors[self.valid & self.flagged], self.errors[self.valid]),
        }


def _share(part: np.ndarray, whole: np.ndarray) -> float:
    total = float(np.sum(whole))
    return float(np.sum(part)) / total if total > 0 else float("nan")


def clip_failures(
    clip_id: str,
    gaze: np.ndarray,
    gaze_type: np.ndarray,
    samples: np.ndarray,
    width: int,
    height: int,
    rule: FailureRule = FailureRule(),
) -> ClipFailures:
    """Errors and flags of one clip (``gaze [T, 2]`` unit, ``gaze_type [T]``, ``samples [K, T, 2]`` unit)."""
    gaze, gaze_type = _check_track(gaze, gaze_type, clip_id)
    errors = point_errors(gaze, samples, width, height)
    errors = np.where(valid_mask(gaze_type), errors, np.nan)
    return ClipFailures(clip_id, errors, flag_frames(gaze, gaze_type, width, height, rule, clip_id), width, height)


def failure_summary(clips: Sequence[ClipFailures], rule: FailureRule = FailureRule()) -> dict:
    """Over all clips: frames and error shares per flag and for either flag, and mean errors."""
    if not clips:
        raise ValueError("failure_summary needs at least one clip")
    errors = np.concatenate([c.errors for c in clips])
    valid = np.isfinite(errors)
    if not valid.any():
        raise ValueError("no clip has a valid frame to score")
    rows = {}
    masks = {flag: np.concatenate([c.flags[flag] for c in clips]) for flag in FLAGS}
    masks["either"] = np.logical_or.reduce(list(masks.values()))
    for name, mask in masks.items():
        flagged = valid & mask
        rows[name] = {
            "frames": int(flagged.sum()),
            "frame_share": float(flagged.sum() / valid.sum()),
            "error_share": _share(errors[flagged], errors[valid]),
            "mean_error_px": float(errors[flagged].mean()) if flagged.any() else None,
        }
    others = valid & ~masks["either"]
    return {
        "clips": len(clips),
        "valid_frames": int(valid.sum()),
        "mean_error_px": float(errors[valid].mean()),
        "unflagged_mean_error_px": float(errors[others].mean()) if others.any() else None,
        "rule": asdict(rule),
        "flags": rows,
    }


def worst_clips(clips: Sequence[ClipFailures], count: int) -> list[ClipFailures]:
    """The ``count`` clips with the largest mean error (ties: input order)."""
    scored = [c for c in clips if c.valid.any()]
    return sorted(scored, key=lambda c: -c.mean_error)[:count]


def failure_markdown(summary: dict, worst: Sequence[ClipFailures]) -> str:
    names = {
        "off_frame": "off-frame truth (type 4)",
        "border_after_saccade": "at the border after a large saccade",
        "either": "either",
    }
    lines = [
        "| Frames | count | share of valid frames | share of the error | mean error (px) |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for key, row in summary["flags"].items():
        mean = "-" if row["mean_error_px"] is None else f"{row['mean_error_px']:.2f}"
        lines.append(
            f"| {names[key]} | {row['frames']} | {100 * row['frame_share']:.1f}% | "
            f"{100 * row['error_share']:.1f}% | {mean} |"
        )
    other = summary["unflagged_mean_error_px"]
    lines.append(
        f"| neither | {summary['valid_frames'] - summary['flags']['either']['frames']} | - | - | "
        f"{'-' if other is None else f'{other:.2f}'} |"
    )
    lines += [
        "",
        f"{summary['clips']} clips, {summary['valid_frames']} valid frames, mean error "
        f"{summary['mean_error_px']:.2f} px.",
        "",
        "| Worst clips | mean error (px) | valid frames | off-frame | border after saccade |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for clip in worst:
        lines.append(
            f"| {clip.clip_id} | {clip.mean_error:.2f} | {int(clip.valid.sum())} | "
            f"{int(clip.flags['off_frame'].sum())} | {int(clip.flags['border_after_saccade'].sum())} |"
        )
    return "\n".join(lines)


def failures_json(summary: dict, clips: Sequence[ClipFailures]) -> str:
    return json.dumps({"summary": summary, "clips": [c.to_json() for c in clips]}, indent=2)


__all__ = [
    "FLAGS",
    "FailureRule",
    "flag_frames",
    "point_errors",
    "ClipFailures",
    "clip_failures",
    "failure_summary",
    "worst_clips",
    "failure_markdown",
    "failures_json",
]
