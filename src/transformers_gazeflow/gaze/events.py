"""Fixations and saccades of gaze trajectories: I-VT (the default) or I-DT labelling, events, P(saccade).

Every frame of every series (the point estimate and each of the K samples, or a recorded gaze) gets a gaze-type code
of ``data.gaze_types``: fixation (1) or saccade (2), or, where the input says the eye was not tracked, its own code
(untracked 0, blink/other 3).

* **Angular velocity** of frame ``t``: the angle between the rays of frames ``t - 1`` and ``t`` (the camera's,
  ``geometry.Camera``: a pinhole or a fisheye) times the frame rate, in deg/s; the first frame of a tracked run has
  no incoming step and velocity 0.
* **I-VT** (velocity threshold; Salvucci & Goldberg, ETRA 2000): a frame is a saccade when its velocity is above
  the threshold, else a fixation. Default 30 deg/s (:data:`IVT_THRESHOLD_DEG_S`), the threshold Komogortsev et al.
  (IEEE TBME 57(11), 2010) found to classify best and the default of Tobii's I-VT filter (Olsen 2012). A frame is
  labelled by the step that brought the gaze to it, so a saccade between frames ``t - 1`` and ``t`` labels frame
  ``t``, and labels never wait for later frames.
* **I-DT** (dispersion threshold; Salvucci & Goldberg 2000): a window covering at least the minimum duration
  (``ceil(100 ms * fps)`` frames by default) whose dispersion ``(max x - min x) + (max y - min y)`` (degrees, on
  the Fick angles of the camera's ``angles_deg``) is at most the threshold (1 degree by default) starts a
  fixation, which grows while the dispersion stays within the threshold; a frame in no fixation is a saccade
  frame, as are the last frames of a tracked run too few to fill a window. A label waits at most the window's
  length.
* **Events**: maximal runs of fixation or saccade frames (:class:`Fixation`, :class:`Saccade`; any other code ends a
  run). A fixation's centroid is the mean of its frames' pixels (its degrees are the centroid's Fick angles) and its
  dispersion the I-DT dispersion of its frames; a saccade runs from its launch point (the frame before its first,
  when that frame was tracked) to its last frame: its amplitude is the angle between the two, its peak velocity the
  largest frame velocity in it. Both last ``frames / fps``, from their first frame's time.

:class:`EventLabeller` and :class:`EventRecorder` work chunk by chunk on a stream (what ``gazeflow predict`` uses);
:func:`detect_events` is the whole-array form (one chunk) and :func:`events_from_codes` turns recorded gaze-type
codes (a dataset's ground truth) into the same events.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..data.gaze_types import BLINK_OR_OTHER, FIXATION, SACCADE, UNTRACKED
from ..models.gazeflow.choices import EVENT_METHODS
from ..models.gazeflow.geometry import Camera, unit_to_pixels

IVT_THRESHOLD_DEG_S = 30.0
"""Default I-VT velocity threshold (deg/s; Komogortsev et al. 2010)."""
IDT_DISPERSION_DEG = 1.0
"""Default I-DT dispersion threshold (degrees; Salvucci & Goldberg 2000 suggest 0.5-1 degree)."""
IDT_MIN_DURATION_MS = 100.0
"""Default I-DT minimum fixation duration (ms; Salvucci & Goldberg 2000)."""


@dataclass(frozen=True)
class EventSettings:
    """How frames are labelled: ``method`` ``"ivt"`` or ``"idt"`` and their thresholds (see the module docstring)."""

    method: str = "ivt"
    velocity_threshold_deg_s: float = IVT_THRESHOLD_DEG_S
    dispersion_deg: float = IDT_DISPERSION_DEG
    min_duration_ms: float = IDT_MIN_DURATION_MS

    def __post_init__(self) -> None:
        if self.method not in EVENT_METHODS:
            raise ValueError(f"event method must be one of {EVENT_METHODS}, got {self.method!r}")
        for name in ("velocity_threshold_deg_s", "dispersion_deg"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number, got {value!r}")
        if not (
            isinstance(self.min_duration_ms, (int, float))
            and math.isfinite(self.min_duration_ms)
            and self.min_duration_ms >= 0
        ):
            raise ValueError(f"min_duration_ms must be a number >= 0, got {self.min_duration_ms!r}")

    def window_frames(self, fps: float) -> int:
        """I-DT's window: the fewest frames covering ``min_duration_ms`` (at least 1)."""
        return max(1, math.ceil(self.min_duration_ms * fps / 1000.0 - 1e-9))

    def to_dict(self) -> dict:
        if self.method == "ivt":
            return {"method": "ivt", "velocity_threshold_deg_s": self.velocity_threshold_deg_s}
        return {"method": "idt", "dispersion_deg": self.dispersion_deg, "min_duration_ms": self.min_duration_ms}


def _check_fps(fps: float) -> float:
    if not (isinstance(fps, (int, float, np.floating)) and math.isfinite(fps) and fps > 0):
        raise ValueError(f"fps must be a positive number, got {fps!r}")
    return float(fps)


@dataclass
class LabelledFrames:
    """Frames ``first .. first + n - 1`` of ``S`` series whose labels are decided: ``labels`` int ``[S, n]`` (gaze-type
    codes), ``velocity`` ``[S, n]`` deg/s, ``points_px`` ``[S, n, 2]``, ``tracked`` bool ``[n]`` and ``breaks`` bool
    ``[S, n]``: a frame that starts a new fixation right after another (I-DT; None: never)."""

    first: int
    labels: np.ndarray
    velocity: np.ndarray
    points_px: np.ndarray
    tracked: np.ndarray
    breaks: np.ndarray | None = None

    @property
    def num_frames(self) -> int:
        return int(self.labels.shape[1])


class _DispersionWindow:
    """I-DT for one series, frame by frame (see the module docstring); labels come out in order, at most a window
    late."""

    def __init__(self, window: int, threshold: float) -> None:
        self.window, self.threshold = window, threshold
        self.pending: list[np.ndarray] = []  # Fick angles of undecided frames
        self.bounds: np.ndarray | None = None  # [min x, min y, max x, max y] of the fixation growing, if any
        self.decided: list[int] = []
        self.breaks: list[bool] = []  # per decided frame: it opens a fixation (which may follow another directly)

    @staticmethod
    def _dispersion(bounds: np.ndarray) -> float:
        return float(bounds[2] - bounds[0] + bounds[3] - bounds[1])

    def push(self, angles: np.ndarray) -> None:
        self.pending.append(angles)
        while self.pending:
            if self.bounds is not None:
                point = self.pending[0]
                grown = np.r_[np.minimum(self.bounds[:2], point), np.maximum(self.bounds[2:], point)]
                if self._dispersion(grown) <= self.threshold:
                    self.bounds = grown
                    self._decide(FIXATION)
                    self.pending.pop(0)
                    continue
                self.bounds = None  # the fixation ends; this frame opens a new window
            if len(self.pending) < self.window:
                return
            opening = np.stack(self.pending[: self.window])
            bounds = np.r_[opening.min(0), opening.max(0)]
            if self._dispersion(bounds) <= self.threshold:
                self._decide(FIXATION, opens=True)
                for _ in range(self.window - 1):
                    self._decide(FIXATION)
                del self.pending[: self.window]
                self.bounds = bounds
            else:
                self._decide(SACCADE)
                self.pending.pop(0)

    def _decide(self, code: int, opens: bool = False) -> None:
        self.decided.append(code)
        self.breaks.append(opens)

    def end_run(self, code: int | None = None) -> None:
        """A tracked run ends (an untracked frame with ``code``, or the stream's end: None): frames left undecided
        are in no fixation."""
        for _ in self.pending:
            self._decide(SACCADE)
        self.pending, self.bounds = [], None
        if code is not None:
            self._decide(code)


class EventLabeller:
    """Labels ``num_series`` trajectories chunk by chunk (:meth:`push` then :meth:`finish`), carrying the last
    frame across chunks; returns the frames whose labels are decided (all of them for I-VT)."""

    def __init__(self, settings: EventSettings, camera: Camera, fps: float, num_series: int) -> None:
        self.settings, self.camera, self.fps = settings, camera, _check_fps(fps)
        self.num_series = int(num_series)
        self.previous: np.ndarray | None = None  # [S, 2] pixels of the last frame, None when it was not tracked
        self.next_frame = 0
        self.waiting: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []  # I-DT: frames not handed out
        self.windows = (
            [
                _DispersionWindow(settings.window_frames(self.fps), settings.dispersion_deg)
                for _ in range(self.num_series)
            ]
            if settings.method == "idt"
            else None
        )

    def _velocity(self, points: np.ndarray, tracked: np.ndarray) -> np.ndarray:
        before = np.concatenate(
            [points[:, :1] if self.previous is None else self.previous[:, None], points[:, :-1]], axis=1
        )
        had_before = np.r_[self.previous is not None, tracked[:-1]] & tracked
        angle = self.camera.angle_between_deg(before, points)
        return np.where(had_before[None], angle * self.fps, 0.0)

    def push(self, points_px: np.ndarray, codes: np.ndarray | None = None) -> LabelledFrames:
        """Label the next ``n`` frames: ``points_px`` ``[S, n, 2]``; ``codes`` ``[n]`` the input's gaze types where it
        knows them (untracked 0 and blink/other 3 frames are not tracked and keep their code; None: all tracked)."""
        points = np.asarray(points_px, np.float64)
        if points.ndim != 3 or points.shape[0] != self.num_series or points.shape[-1] != 2:
            raise ValueError(f"points_px must be [{self.num_series}, n, 2], got {points.shape}")
        n = points.shape[1]
        if n == 0:
            empty = np.zeros((self.num_series, 0))
            return LabelledFrames(self.next_frame, empty.astype(np.int64), empty, points, np.zeros(0, bool))
        codes = np.full(n, FIXATION) if codes is None else np.asarray(codes).reshape(n)
        tracked = (codes != UNTRACKED) & (codes != BLINK_OR_OTHER)
        velocity = self._velocity(points, tracked)
        self.previous = points[:, -1].copy() if tracked[-1] else None
        if self.windows is None:
            labels = np.where(velocity > self.settings.velocity_threshold_deg_s, SACCADE, FIXATION)
            labels = np.where(tracked[None], labels, codes[None]).astype(np.int64)
            first, self.next_frame = self.next_frame, self.next_frame + n
            return LabelledFrames(first, labels, velocity, points, tracked)
        angles = self.camera.angles_deg(points)
        for series, window in enumerate(self.windows):
            for t in range(n):
                window.push(angles[series, t]) if tracked[t] else window.end_run(int(codes[t]))
        self.waiting.append((points, velocity, tracked, codes))
        return self._hand_out()

    def finish(self) -> LabelledFrames:
        """The frames still undecided at the stream's end (I-DT), labelled."""
        if self.windows is None:
            return self.push(np.zeros((self.num_series, 0, 2)))
        for window in self.windows:
            window.end_run()
        return self._hand_out()

    def _hand_out(self) -> LabelledFrames:
        ready = min(len(window.decided) for window in self.windows)
        points = (
            np.concatenate([part[0] for part in self.waiting], axis=1)
            if self.waiting
            else np.zeros((self.num_series, 0, 2))
        )
        velocity = (
            np.concatenate([part[1] for part in self.waiting], axis=1)
            if self.waiting
            else np.zeros((self.num_series, 0))
        )
        tracked = np.concatenate([part[2] for part in self.waiting]) if self.waiting else np.zeros(0, bool)
        codes = np.concatenate([part[3] for part in self.waiting]) if self.waiting else np.zeros(0, np.int64)
        labels = np.array([window.decided[:ready] for window in self.windows], np.int64).reshape(self.num_series, ready)
        breaks = np.array([window.breaks[:ready] for window in self.windows], bool).reshape(self.num_series, ready)
        for window in self.windows:
            del window.decided[:ready], window.breaks[:ready]
        self.waiting = (
            [(points[:, ready:], velocity[:, ready:], tracked[ready:], codes[ready:])] if ready < len(tracked) else []
        )
        first, self.next_frame = self.next_frame, self.next_frame + ready
        return LabelledFrames(first, labels, velocity[:, :ready], points[:, :ready], tracked[:ready], breaks)


@dataclass(frozen=True)
class Fixation:
    """A fixation of series ``series``: frames ``start_frame .. end_frame`` (inclusive); centroid and dispersion
    in pixels and degrees (see the module docstring)."""

    series: int
    start_frame: int
    end_frame: int
    centroid_px: tuple[float, float]
    centroid_deg: tuple[float, float]
    dispersion_px: float
    dispersion_deg: float

    @property
    def sample_id(self) -> int:
        """The event's ``sample_id`` as ``gaze.csv`` and ``fixations.csv`` / ``saccades.csv`` write it, for a
        prediction's series order (series 0 the point estimate, series k + 1 sample k): -1 for the point estimate,
        0 .. K-1 for the samples."""
        return self.series - 1

    @property
    def frames(self) -> int:
        return self.end_frame - self.start_frame + 1


@dataclass(frozen=True)
class Saccade:
    """A saccade of series ``series``: frames ``start_frame .. end_frame`` (inclusive), from its launch point to its
    last frame's point (pixels), amplitude (pixels, degrees) and peak velocity (deg/s)."""

    series: int
    start_frame: int
    end_frame: int
    start_px: tuple[float, float]
    end_px: tuple[float, float]
    amplitude_px: float
    amplitude_deg: float
    peak_velocity_deg_s: float

    @property
    def sample_id(self) -> int:
        """The event's ``sample_id`` as ``gaze.csv`` and ``fixations.csv`` / ``saccades.csv`` write it, for a
        prediction's series order (series 0 the point estimate, series k + 1 sample k): -1 for the point estimate,
        0 .. K-1 for the samples."""
        return self.series - 1

    @property
    def frames(self) -> int:
        return self.end_frame - self.start_frame + 1


@dataclass
class _Segments:
    """Maximal runs of equal labels in held frames ``[S, m]``: ``series``, ``first`` and ``last`` (inclusive frame
    indices into the held frames) and ``code`` of each, ordered by series then start; ``closed`` says whether a
    later frame of its series ended it (the last run of each series may still grow)."""

    series: np.ndarray
    first: np.ndarray
    last: np.ndarray
    code: np.ndarray
    closed: np.ndarray


def _segments(labels: np.ndarray, breaks: np.ndarray, open_from: np.ndarray) -> _Segments:
    """The runs of each series ``s`` from its frame ``open_from[s]`` on: a run ends where the label changes or a
    frame ``breaks`` (opens a new fixation)."""
    frames = labels.shape[1]
    index = np.arange(frames)
    changes = np.zeros(labels.shape, bool)
    changes[:, 1:] = (labels[:, 1:] != labels[:, :-1]) | breaks[:, 1:]
    starts = (index[None] == open_from[:, None]) | (changes & (index[None] > open_from[:, None]))
    series, first = np.nonzero(starts)
    last_of_series = np.r_[series[1:] != series[:-1], True]
    last = np.where(last_of_series, frames, np.r_[first[1:], 0]) - 1
    return _Segments(series, first, last, labels[series, first], ~last_of_series)


def _run_extremes(values: np.ndarray, first: np.ndarray, stop: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The largest and the smallest of ``values[first[r] : stop[r]]`` (flat ``[N, ...]``) for each run ``r``
    (runs in order, not overlapping)."""
    padded = np.concatenate([values, values[:1]])  # reduceat takes no index past the last row
    bounds = np.stack([first, stop], 1).reshape(-1)
    return np.maximum.reduceat(padded, bounds)[::2], np.minimum.reduceat(padded, bounds)[::2]


def _sequential_means(points: np.ndarray, first: np.ndarray, count: np.ndarray) -> np.ndarray:
    """``[R, 2]``: the mean of each run ``points[first[r] : first[r] + count[r]]`` of flat points ``[N, 2]``, added
    row after row from the first as ``ndarray.mean(axis=0)`` adds them, so every bit is the same."""
    order = np.argsort(-count, kind="stable")
    first, count = first[order], count[order]
    sums = points[first].copy()
    for offset in range(1, int(count.max(initial=1))):
        runs = int(np.searchsorted(-count, -offset, side="left"))  # runs longer than offset
        sums[:runs] += points[first[:runs] + offset]
    means = np.empty_like(sums)
    means[order] = sums / count[:, None].astype(np.float64)
    return means


class EventRecorder:
    """Turns labelled frames (:class:`LabelledFrames`, in order, chunk by chunk) into :class:`Fixation` and
    :class:`Saccade` events, carrying open runs across chunks. ``frame_offset`` is added to frame numbers.

    The frames from the earliest first frame of a run still open are held; each chunk's runs are found with array
    operations over all series at once (:func:`_segments`), and the runs it closes are measured together."""

    def __init__(self, num_series: int, camera: Camera, frame_offset: int = 0) -> None:
        self.camera, self.frame_offset, self.num_series = camera, int(frame_offset), int(num_series)
        self.held: LabelledFrames | None = None  # the frames from the earliest open run's first frame on
        self.held_angles = np.zeros((self.num_series, 0, 2))  # their Fick angles
        self.open_from = np.zeros(self.num_series, np.int64)  # per series: where its open run starts in held
        self.before: np.ndarray | None = None  # [S, 2]: the point of the frame before held's first, if tracked
        self.fixations: list[Fixation] = []
        self.saccades: list[Saccade] = []

    def add(self, frames: LabelledFrames) -> None:
        """Record the runs of the next labelled frames."""
        if frames.num_frames == 0:
            return
        breaks = frames.breaks if frames.breaks is not None else np.zeros(frames.labels.shape, bool)
        angles = self.camera.angles_deg(frames.points_px)
        if self.held is None or self.held.num_frames == 0:
            self.held = LabelledFrames(
                frames.first, frames.labels, frames.velocity, frames.points_px, frames.tracked, breaks
            )
            self.held_angles = angles
        else:
            held = self.held
            self.held = LabelledFrames(
                held.first,
                np.concatenate([held.labels, frames.labels], 1),
                np.concatenate([held.velocity, frames.velocity], 1),
                np.concatenate([held.points_px, frames.points_px], 1),
                np.concatenate([held.tracked, frames.tracked]),
                np.concatenate([held.breaks, breaks], 1),
            )
            self.held_angles = np.concatenate([self.held_angles, angles], 1)
        self._record(closing_all=False)

    def _record(self, closing_all: bool) -> None:
        """Measure the held runs that are closed (all of them when ``closing_all``) and keep the frames of the
        others."""
        held = self.held
        frames = held.num_frames
        runs = _segments(held.labels, held.breaks, self.open_from)
        closed = runs.closed | closing_all
        recorded = np.isin(runs.code, (FIXATION, SACCADE))
        self._measure(runs, closed & recorded)
        still_open = ~runs.closed & recorded & (not closing_all)
        self.open_from = np.full(self.num_series, frames, np.int64)
        self.open_from[runs.series[still_open]] = runs.first[still_open]
        keep = int(self.open_from.min())
        if keep > 0:
            self.before = held.points_px[:, keep - 1].copy() if held.tracked[keep - 1] else None
        self.held = LabelledFrames(
            held.first + keep,
            held.labels[:, keep:],
            held.velocity[:, keep:],
            held.points_px[:, keep:],
            held.tracked[keep:],
            held.breaks[:, keep:],
        )
        self.held_angles = self.held_angles[:, keep:]
        self.open_from -= keep

    def _measure(self, runs: _Segments, chosen: np.ndarray) -> None:
        """Append the :class:`Fixation` and :class:`Saccade` of the ``chosen`` runs (see the module docstring)."""
        held, frames = self.held, self.held.num_frames
        if runs.series.size == 0:
            return
        flat_first = runs.series * frames + runs.first
        peak = _run_extremes(held.velocity.reshape(-1), flat_first, flat_first + runs.last - runs.first + 1)[0]
        peak = np.where(peak > 0.0, peak, 0.0)  # a run's peak starts at 0 (velocities are never negative)
        starts = (held.first + self.frame_offset + runs.first).tolist()
        ends = (held.first + self.frame_offset + runs.last).tolist()
        series = runs.series.tolist()
        self._fixations(runs, np.flatnonzero(chosen & (runs.code == FIXATION)), series, starts, ends)
        self._saccades(runs, np.flatnonzero(chosen & (runs.code == SACCADE)), series, starts, ends, peak)

    def _fixations(self, runs: _Segments, which: np.ndarray, series: list, starts: list, ends: list) -> None:
        if which.size == 0:
            return
        held, frames = self.held, self.held.num_frames
        count = runs.last[which] - runs.first[which] + 1
        flat_first = runs.series[which] * frames + runs.first[which]
        points, angles = held.points_px.reshape(-1, 2), self.held_angles.reshape(-1, 2)
        spans = []
        for values in (points, angles):
            largest, smallest = _run_extremes(values, flat_first, flat_first + count)
            spread = largest - smallest
            spans.append((spread[:, 0] + spread[:, 1]).tolist())
        centroid = _sequential_means(points, flat_first, count)
        centroid_deg = self.camera.angles_deg(centroid).tolist()
        for row, run in enumerate(which.tolist()):
            x, y = centroid[row].tolist()
            self.fixations.append(
                Fixation(
                    series[run],
                    starts[run],
                    ends[run],
                    (x, y),
                    tuple(centroid_deg[row]),
                    spans[0][row],
                    spans[1][row],
                )
            )

    def _saccades(
        self, runs: _Segments, which: np.ndarray, series: list, starts: list, ends: list, peak: np.ndarray
    ) -> None:
        if which.size == 0:
            return
        held = self.held
        first, rows = runs.first[which], runs.series[which]
        launch = held.points_px[rows, first].copy()  # a run without a tracked frame before it starts from its first
        inside = (first > 0) & held.tracked[np.maximum(first - 1, 0)]
        launch[inside] = held.points_px[rows[inside], first[inside] - 1]
        if self.before is not None:
            launch[first == 0] = self.before[rows[first == 0]]
        end = held.points_px[rows, runs.last[which]]
        step = end - launch
        amplitude_px = np.sqrt(step[:, 0] * step[:, 0] + step[:, 1] * step[:, 1]).tolist()
        amplitude_deg = self.camera.angle_between_deg(launch, end).tolist()
        launch, end, peak = launch.tolist(), end.tolist(), peak[which].tolist()
        for row, run in enumerate(which.tolist()):
            self.saccades.append(
                Saccade(
                    series[run],
                    starts[run],
                    ends[run],
                    tuple(launch[row]),
                    tuple(end[row]),
                    amplitude_px[row],
                    amplitude_deg[row],
                    peak[row],
                )
            )

    def finish(self) -> GazeEvents:
        if self.held is not None and self.held.num_frames:
            self._record(closing_all=True)
        order = lambda event: (event.series, event.start_frame)  # noqa: E731
        return GazeEvents(sorted(self.fixations, key=order), sorted(self.saccades, key=order))


@dataclass
class GazeEvents:
    """The fixations and saccades of a set of series, each list ordered by series then start frame; with
    :func:`detect_events` also the per-frame ``labels`` ``[S, T]`` and ``velocity`` ``[S, T]`` (deg/s)."""

    fixations: list[Fixation]
    saccades: list[Saccade]
    labels: np.ndarray | None = None
    velocity: np.ndarray | None = None

    def of_series(self, series: int) -> GazeEvents:
        return GazeEvents(
            [f for f in self.fixations if f.series == series], [s for s in self.saccades if s.series == series]
        )

    def of_sample(self, sample_id: int) -> GazeEvents:
        """The events of one ``sample_id`` of a prediction (-1: the point estimate; k: sample k), as the CSVs name
        them."""
        return self.of_series(sample_id + 1)


def saccade_probability(labels: np.ndarray) -> np.ndarray:
    """``[T]``: the share of the series (the K samples' labels ``[K, T]``) in a saccade at each frame."""
    labels = np.asarray(labels)
    return (labels == SACCADE).mean(axis=0) if labels.shape[0] else np.zeros(labels.shape[1])


def _series_pixels(points: np.ndarray, width: int, height: int) -> np.ndarray:
    points = np.asarray(points, np.float64)
    points = points[None] if points.ndim == 2 else points
    if points.ndim != 3 or points.shape[-1] != 2:
        raise ValueError(f"points must be [T, 2] or [S, T, 2] unit coordinates, got {points.shape}")
    if not np.isfinite(points).all():
        raise ValueError("points hold NaN or inf")
    return unit_to_pixels(points, width, height)


def detect_events(
    points: np.ndarray,
    width: int,
    height: int,
    fps: float,
    camera: Camera,
    settings: EventSettings | None = None,
    codes: np.ndarray | None = None,
    frame_offset: int = 0,
) -> GazeEvents:
    """Label ``points`` (``[T, 2]`` or ``[S, T, 2]`` unit coordinates of a ``width x height`` frame) and find their
    events. ``codes`` ``[T]``: the input's gaze types where it knows them (untracked and blink frames are left
    out); ``camera`` is taken to this frame size (``for_frame``)."""
    pixels = _series_pixels(points, width, height)
    camera = camera.for_frame(width, height)
    labeller = EventLabeller(settings or EventSettings(), camera, fps, pixels.shape[0])
    recorder = EventRecorder(pixels.shape[0], camera, frame_offset)
    parts = [labeller.push(pixels, codes), labeller.finish()]
    for part in parts:
        recorder.add(part)
    events = recorder.finish()
    events.labels = np.concatenate([part.labels for part in parts], axis=1)
    events.velocity = np.concatenate([part.velocity for part in parts], axis=1)
    return events


def events_from_codes(
    points: np.ndarray,
    codes: np.ndarray,
    width: int,
    height: int,
    fps: float,
    camera: Camera,
    frame_offset: int = 0,
) -> GazeEvents:
    """The events of recorded gaze labelled by its own gaze-type ``codes`` ``[T]`` (e.g. a dataset's ground truth):
    runs of fixation (1) and saccade (2) frames; velocities from the points as in :func:`detect_events`."""
    pixels = _series_pixels(points, width, height)
    if pixels.shape[0] != 1:
        raise ValueError("events_from_codes takes one trajectory [T, 2]")
    codes = np.asarray(codes).astype(np.int64).reshape(pixels.shape[1])
    camera = camera.for_frame(width, height)
    labelled = EventLabeller(EventSettings(), camera, fps, 1).push(pixels, codes)
    labelled.labels = codes[None].copy()
    recorder = EventRecorder(1, camera, frame_offset)
    recorder.add(labelled)
    events = recorder.finish()
    events.labels, events.velocity = labelled.labels, labelled.velocity
    return events


__all__ = [
    "IVT_THRESHOLD_DEG_S",
    "IDT_DISPERSION_DEG",
    "IDT_MIN_DURATION_MS",
    "EventSettings",
    "LabelledFrames",
    "EventLabeller",
    "EventRecorder",
    "Fixation",
    "Saccade",
    "GazeEvents",
    "saccade_probability",
    "detect_events",
    "events_from_codes",
]
