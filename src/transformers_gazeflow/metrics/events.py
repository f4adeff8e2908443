"""Event metrics: predicted fixations and saccades against a dataset's recorded ones.

Ground truth is the dataset's own gaze-type codes (``data.gaze_types``: runs of fixation and of saccade frames,
:func:`~transformers_gazeflow.gaze.events.events_from_codes`); predictions are each of the K samples (and, apart,
the point estimate) labelled by :func:`~transformers_gazeflow.gaze.events.detect_events` (I-VT at 30 deg/s by
default), with the frames the recording did not track (untracked, blink/other) left out of both, so a blink splits
predicted and recorded runs alike. Angles use one pinhole camera for every clip (60 degree horizontal field of
view by default, the angular error's), or a given camera, or each clip's own (an example's ``camera_model``).

Per method, over all clips (a sample's events are pooled with every other sample's):

* ``fixations_per_clip``: the mean number of fixations in a clip (per sample), and the recording's;
* fixation durations (ms): mean, median and the Wasserstein-1 distance between the predicted and recorded
  distributions (``fixation_duration_w1_ms``);
* saccade amplitudes (degrees): mean, median, Wasserstein-1 (``saccade_amplitude_w1_deg``);
* event-level F1 per type with an onset tolerance (:data:`ONSET_TOLERANCE_MS`, 100 ms by default): a predicted
  event matches a recorded one of the same type whose first frame lies within the tolerance, one to one (the
  largest such matching, found by a sweep in onset order); precision = matched / predicted, recall = matched /
  recorded, counted over all clips and samples (each sample is compared with the recording);
* ``saccade_share``: the share of tracked frames in a saccade.

:func:`event_metrics` also gives the recording's own values (``human_*``) and the same metrics for I-VT run on the
recorded gaze (``labeller_on_recording``): how far the labeller alone is from the dataset's labels.
:func:`flatten_event_metrics` puts them in one flat dict (the ``evaluate`` module's and ``results.json``'s form).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..data.gaze_types import BLINK_OR_OTHER, FIXATION, SACCADE, UNTRACKED
from ..gaze.events import EventSettings, GazeEvents, detect_events, events_from_codes
from ..models.gazeflow.geometry import DEFAULT_HORIZONTAL_FOV_DEG, PinholeCamera, check_fov
from .dynamics import wasserstein1

EVENT_ROWS = ("samples", "point_estimate", "labeller_on_recording", "human")
"""The rows :func:`event_metrics` returns: the K samples, their mean, the labeller on the recorded gaze, the
recording's own labels."""

ONSET_TOLERANCE_MS = 100.0
"""Onset tolerance of the event-level F1 (ms): about 2-3 video frames at 24-30 fps."""


def matched_onsets(predicted: Sequence[int], recorded: Sequence[int], tolerance: float) -> int:
    """The most one-to-one pairs ``(p, r)`` with ``|p - r| <= tolerance`` (a sweep over both sorted lists: for points
    on a line this greedy matching is a largest one)."""
    p, r = sorted(predicted), sorted(recorded)
    i = j = matched = 0
    while i < len(p) and j < len(r):
        if abs(p[i] - r[j]) <= tolerance:
            matched, i, j = matched + 1, i + 1, j + 1
        elif p[i] < r[j]:
            i += 1
        else:
            j += 1
    return matched


@dataclass
class _Tally:
    """Pooled events of one method."""

    durations_ms: list[float] = field(default_factory=list)
    amplitudes_deg: list[float] = field(default_factory=list)
    fixation_counts: list[int] = field(default_factory=list)
    matched: dict[int, int] = field(default_factory=lambda: {FIXATION: 0, SACCADE: 0})
    predicted: dict[int, int] = field(default_factory=lambda: {FIXATION: 0, SACCADE: 0})
    recorded: dict[int, int] = field(default_factory=lambda: {FIXATION: 0, SACCADE: 0})
    saccade_frames: int = 0
    tracked_frames: int = 0

    def add(self, events: GazeEvents, truth: GazeEvents, labels: np.ndarray, fps: float, tolerance: float) -> None:
        self.durations_ms += [f.frames * 1000.0 / fps for f in events.fixations]
        self.amplitudes_deg += [s.amplitude_deg for s in events.saccades]
        self.fixation_counts.append(len(events.fixations))
        for code, mine, theirs in (
            (FIXATION, events.fixations, truth.fixations),
            (SACCADE, events.saccades, truth.saccades),
        ):
            self.matched[code] += matched_onsets(
                [e.start_frame for e in mine], [e.start_frame for e in theirs], tolerance
            )
            self.predicted[code] += len(mine)
            self.recorded[code] += len(theirs)
        self.saccade_frames += int((labels == SACCADE).sum())
        self.tracked_frames += int(((labels == FIXATION) | (labels == SACCADE)).sum())

    def metrics(self, human: _Tally | None) -> dict[str, float]:
        out = {
            "fixations_per_clip": _mean(self.fixation_counts),
            "fixation_duration_mean_ms": _mean(self.durations_ms),
            "fixation_duration_median_ms": _median(self.durations_ms),
            "saccade_amplitude_mean_deg": _mean(self.amplitudes_deg),
            "saccade_amplitude_median_deg": _median(self.amplitudes_deg),
            "saccade_share": self.saccade_frames / self.tracked_frames if self.tracked_frames else math.nan,
        }
        for code, name in ((FIXATION, "fixation"), (SACCADE, "saccade")):
            precision = self.matched[code] / self.predicted[code] if self.predicted[code] else math.nan
            recall = self.matched[code] / self.recorded[code] if self.recorded[code] else math.nan
            out[f"{name}_precision"], out[f"{name}_recall"] = precision, recall
            out[f"{name}_f1"] = (
                2 * precision * recall / (precision + recall)
                if precision + recall > 0
                else (0.0 if precision == precision and recall == recall else math.nan)
            )
        if human is not None:
            out["fixation_duration_w1_ms"] = _w1(self.durations_ms, human.durations_ms)
            out["saccade_amplitude_w1_deg"] = _w1(self.amplitudes_deg, human.amplitudes_deg)
        return out


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else math.nan


def _median(values: Sequence[float]) -> float:
    return float(np.median(values)) if len(values) else math.nan


def _w1(a: Sequence[float], b: Sequence[float]) -> float:
    return wasserstein1(a, b) if len(a) and len(b) else math.nan


def _tracked_codes(codes: np.ndarray) -> np.ndarray:
    """The recording's untracked and blink frames, kept out of the predictions' labelling (others: tracked)."""
    return np.where((codes == UNTRACKED) | (codes == BLINK_OR_OTHER), codes, FIXATION)


def _clip_camera(own: Any, width: int, height: int, fov_deg: float) -> Any:
    """A clip's camera at its frame size: its own (``for_frame``), else the pinhole of ``fov_deg``."""
    return PinholeCamera.from_fov(width, height, fov_deg) if own is None else own.for_frame(width, height)


def event_metrics(
    predictions: Sequence[np.ndarray],
    references: Sequence[np.ndarray],
    gaze_types: Sequence[np.ndarray],
    fps: float | Sequence[float],
    width: int | Sequence[int],
    height: int | Sequence[int],
    fov_deg: float = DEFAULT_HORIZONTAL_FOV_DEG,
    settings: EventSettings | None = None,
    onset_tolerance_ms: float = ONSET_TOLERANCE_MS,
    camera: Any = None,
) -> dict[str, dict[str, float]]:
    """Event metrics (see the module docstring) of per-clip predictions ``[K, T, 2]`` against the recorded gaze
    ``[T, 2]`` and its codes ``[T]`` (unit coordinates; ``fps``, ``width``, ``height`` per clip or one for all).
    ``camera`` (a ``geometry`` camera, e.g. a ``FisheyeCamera``, at each clip's size) replaces the pinhole of
    ``fov_deg``; a list or tuple gives one per clip (a clip's own camera; None: the pinhole of ``fov_deg``).
    Returns ``{"samples": ..., "point_estimate": ..., "labeller_on_recording": ..., "human": ...}``."""
    if not (len(predictions) == len(references) == len(gaze_types)) or not predictions:
        raise ValueError(
            f"need one prediction, reference and gaze_types per clip, got {len(predictions)}, "
            f"{len(references)} and {len(gaze_types)}"
        )
    settings, fov_deg = settings or EventSettings(), check_fov(fov_deg)
    count = len(predictions)
    per_clip = [np.broadcast_to(np.asarray(v, np.float64), (count,)) for v in (fps, width, height)]
    cameras = list(camera) if isinstance(camera, (list, tuple)) else [camera] * count
    if len(cameras) != count:
        raise ValueError(f"need one camera per clip or one for all, got {len(cameras)} for {count} clips")
    tallies = {name: _Tally() for name in EVENT_ROWS}
    for index in range(count):
        rate, w, h = float(per_clip[0][index]), int(per_clip[1][index]), int(per_clip[2][index])
        samples = np.asarray(predictions[index], np.float64)
        gaze, codes = np.asarray(references[index], np.float64), np.asarray(gaze_types[index]).astype(np.int64)
        if samples.ndim != 3 or samples.shape[1:] != gaze.shape or gaze.shape != (codes.shape[0], 2):
            raise ValueError(
                f"clip {index}: prediction must be [K, T, 2] and reference [T, 2] with T = "
                f"len(gaze_types), got {samples.shape}, {gaze.shape} and {codes.shape}"
            )
        clip_camera = _clip_camera(cameras[index], w, h, fov_deg)
        tolerance = onset_tolerance_ms * rate / 1000.0
        truth = events_from_codes(gaze, codes, w, h, rate, clip_camera)
        tallies["human"].add(truth, truth, truth.labels[0], rate, tolerance)
        tracked = _tracked_codes(codes)
        series = np.concatenate([samples.mean(axis=0, keepdims=True), samples, gaze[None]])
        found = detect_events(series, w, h, rate, clip_camera, settings, codes=tracked)
        for name, rows in (
            ("point_estimate", [0]),
            ("samples", range(1, len(series) - 1)),
            ("labeller_on_recording", [len(series) - 1]),
        ):
            for row in rows:
                tallies[name].add(found.of_series(row), truth, found.labels[row], rate, tolerance)
    human = tallies["human"]
    return {name: tally.metrics(None if name == "human" else human) for name, tally in tallies.items()}


LARGE_SACCADE_DEG = 6.0
"""What :func:`large_saccades` calls a large saccade (degrees). The synthetic dataset's recorded saccades are
bimodal, corrective ones under 3 degrees and the jumps between objects above 6; a reading aid, not the paper's."""
FOLLOW_MARGIN_FRAMES = 4
"""Frames on each side of a recorded saccade over which :func:`large_saccades` measures a sample's move."""


def _following(
    gaze_px: np.ndarray, samples_px: np.ndarray, launch: int, last: int, margin: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """Each sample's net move and largest frame step over ``launch - margin .. last + margin``, against the recorded
    jump's (``launch .. last``); None where the span leaves the clip."""
    first, stop = launch - margin, last + margin
    if first < 0 or stop >= len(gaze_px):
        return None
    jump, span = gaze_px[launch : last + 1], samples_px[:, first : stop + 1]
    net = np.linalg.norm(span[:, -1] - span[:, 0], axis=-1) / np.linalg.norm(jump[-1] - jump[0])
    largest = np.linalg.norm(np.diff(span, axis=1), axis=-1).max(axis=1)
    return net, largest / np.linalg.norm(np.diff(jump, axis=0), axis=-1).max()


def large_saccades(
    predictions: Sequence[np.ndarray],
    references: Sequence[np.ndarray],
    gaze_types: Sequence[np.ndarray],
    fps: Sequence[float],
    width: Sequence[int],
    height: Sequence[int],
    cameras: Sequence[Any],
    fov_deg: float = DEFAULT_HORIZONTAL_FOV_DEG,
    min_amplitude_deg: float = LARGE_SACCADE_DEG,
    margin_frames: int = FOLLOW_MARGIN_FRAMES,
) -> dict[str, float]:
    """Whether the samples make the recording's large saccades, per clip of samples ``[K, T, 2]``, recorded gaze
    ``[T, 2]`` and its codes ``[T]`` (unit coordinates; ``cameras`` one per clip, None: the pinhole of ``fov_deg``,
    as :func:`event_metrics`):

    * ``recorded_per_100_frames`` / ``samples_per_100_frames``: saccades of at least ``min_amplitude_deg`` per 100
      tracked frames, the recording's (its own labels) and a sample's (I-VT, as :func:`event_metrics`);
    * at each recorded large saccade with ``margin_frames`` frames on both sides (``measured`` of them), each
      sample's move over that span (launch frame - margin to last frame + margin) against the recording's over the
      saccade (launch to last frame), in pixels: ``net_move_ratio`` (the distance between the span's ends; 1: it
      arrives as far) and ``largest_step_ratio`` (its largest frame step against the recording's largest; about 1:
      it jumps, well under 1: it drifts there or not at all); medians over saccades and samples.
    """
    recorded = sampled = recorded_frames = sampled_frames = measured = 0
    net_ratios, step_ratios = [], []
    for index, samples in enumerate(predictions):
        rate, w, h = float(fps[index]), int(width[index]), int(height[index])
        camera = _clip_camera(cameras[index], w, h, fov_deg)
        gaze, codes = np.asarray(references[index], np.float64), np.asarray(gaze_types[index]).astype(np.int64)
        truth = events_from_codes(gaze, codes, w, h, rate, camera)
        found = detect_events(np.asarray(samples, np.float64), w, h, rate, camera, codes=_tracked_codes(codes))
        large = [s for s in truth.saccades if s.amplitude_deg >= min_amplitude_deg]
        recorded += len(large)
        sampled += sum(s.amplitude_deg >= min_amplitude_deg for s in found.saccades)
        recorded_frames += int(np.isin(truth.labels, (FIXATION, SACCADE)).sum())
        sampled_frames += int(np.isin(found.labels, (FIXATION, SACCADE)).sum())
        scale = np.array([w, h], np.float64)
        gaze_px, samples_px = gaze * scale, np.asarray(samples, np.float64) * scale
        for saccade in large:
            followed = _following(gaze_px, samples_px, saccade.start_frame - 1, saccade.end_frame, margin_frames)
            if followed is not None:
                measured += 1
                net_ratios += list(followed[0])
                step_ratios += list(followed[1])
    return {
        "recorded_per_100_frames": 100.0 * recorded / recorded_frames if recorded_frames else math.nan,
        "samples_per_100_frames": 100.0 * sampled / sampled_frames if sampled_frames else math.nan,
        "measured": float(measured),
        "net_move_ratio": _median(net_ratios),
        "largest_step_ratio": _median(step_ratios),
    }


def flatten_event_metrics(metrics: dict[str, dict[str, float]]) -> dict[str, float]:
    """:func:`event_metrics`' rows in one dict: the samples' keys as they are, the others prefixed
    (``point_estimate_``, ``labeller_on_recording_``, ``human_``)."""
    flat = dict(metrics["samples"])
    for row in EVENT_ROWS[1:]:
        flat.update({f"{row}_{key}": value for key, value in metrics[row].items()})
    return flat


__all__ = [
    "EVENT_ROWS",
    "FOLLOW_MARGIN_FRAMES",
    "LARGE_SACCADE_DEG",
    "ONSET_TOLERANCE_MS",
    "matched_onsets",
    "event_metrics",
    "flatten_event_metrics",
    "large_saccades",
]
