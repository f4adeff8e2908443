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


@dataclass
class _Runs:
    """What the events of ``R`` runs are made of, so far: ``series``, ``code``, ``start`` (frame number) and
    ``count`` frames; the points' sum ``[R, 2]`` (added one after the other, as ``ndarray.mean(axis=0)`` adds them),
    the largest and smallest pixels and Fick angles ``[R, 2]``, the peak velocity, the launch point and the last
    point ``[R, 2]``."""

    series: np.ndarray
    code: np.ndarray
    start: np.ndarray
    count: np.ndarray
    total: np.ndarray
    high_px: np.ndarray
    low_px: np.ndarray
    high_deg: np.ndarray
    low_deg: np.ndarray
    peak: np.ndarray
    launch: np.ndarray
    end: np.ndarray

    def take(self, index: np.ndarray) -> _Runs:
        return _Runs(*(getattr(self, name)[index] for name in self.__dataclass_fields__))


def _sequential_sums(points: np.ndarray, first: np.ndarray, count: np.ndarray, carried: np.ndarray) -> np.ndarray:
    """``[R, 2]``: ``carried[r]`` (NaN: nothing) plus ``points[first[r]]``, ``points[first[r] + 1]``, ... one after
    the other, ``count[r]`` points of flat ``[N, 2]``: the order ``ndarray.mean(axis=0)`` adds them in."""
    order = np.argsort(-count, kind="stable")
    first, count = first[order], count[order]
    sums = points[first].copy()
    go_on = ~np.isnan(carried[order, 0])
    sums[go_on] = carried[order][go_on] + sums[go_on]
    for offset in range(1, int(count.max(initial=1))):
        runs = int(np.searchsorted(-count, -offset, side="left"))  # runs longer than offset
        sums[:runs] += points[first[:runs] + offset]
    out = np.empty_like(sums)
    out[order] = sums
    return out


class EventRecorder:
    """Turns labelled frames (:class:`LabelledFrames`, in order, chunk by chunk) into :class:`Fixation` and
    :class:`Saccade` events, carrying open runs across chunks. ``frame_offset`` is added to frame numbers.

    Each chunk's runs are found with array operations over all series at once (:func:`_segments`) and measured
    together; a run still open at the chunk's end is carried as its running sums and extremes (:class:`_Runs`), so
    memory does not grow with a run's length."""

    def __init__(self, num_series: int, camera: Camera, frame_offset: int = 0) -> None:
        self.camera, self.frame_offset, self.num_series = camera, int(frame_offset), int(num_series)
        self.open: _Runs | None = None  # one entry per series; code 0 where none is open
        self.last: np.ndarray | None = None  # [S, 2]: the previous frame's points, None when it was not tracked
        self.fixations: list[Fixation] = []
        self.saccades: list[Saccade] = []

    def add(self, frames: LabelledFrames) -> None:
        """Record the runs of the next labelled frames."""
        n = frames.num_frames
        if n == 0:
            return
        breaks = frames.breaks if frames.breaks is not None else np.zeros(frames.labels.shape, bool)
        runs = _segments(frames.labels, breaks, np.zeros(self.num_series, np.int64))
        carry = self.open
        goes_on = np.zeros(len(runs.series), bool)
        if carry is not None:
            rows = runs.series
            goes_on = (runs.first == 0) & (carry.code[rows] == runs.code) & ~breaks[rows, 0]
            goes_on &= np.isin(runs.code, (FIXATION, SACCADE))
            ended = np.ones(self.num_series, bool)
            ended[rows[goes_on]] = False
            self._emit(carry.take(np.flatnonzero(ended & np.isin(carry.code, (FIXATION, SACCADE)))))
        measured = self._measure(frames, runs, goes_on)
        recorded = np.isin(runs.code, (FIXATION, SACCADE))
        self._emit(measured.take(np.flatnonzero(runs.closed & recorded)))
        last = np.flatnonzero(~runs.closed)  # one per series
        self.open = measured.take(last)
        self.open.code = np.where(recorded[last], self.open.code, 0)
        self.last = frames.points_px[:, -1].copy() if frames.tracked[-1] else None

    def _measure(self, frames: LabelledFrames, runs: _Segments, goes_on: np.ndarray) -> _Runs:
        """The :class:`_Runs` of this chunk's runs, those that go on an open run joined to it."""
        n, points = frames.num_frames, frames.points_px
        flat, count = runs.series * n + runs.first, runs.last - runs.first + 1
        flat_points, flat_angles = points.reshape(-1, 2), self.camera.angles_deg(points).reshape(-1, 2)
        high_px, low_px = _run_extremes(flat_points, flat, flat + count)
        high_deg, low_deg = _run_extremes(flat_angles, flat, flat + count)
        peak = _run_extremes(frames.velocity.reshape(-1), flat, flat + count)[0]
        peak = np.where(peak > 0.0, peak, 0.0)  # a run's peak starts at 0 (velocities are never negative)
        rows, first = runs.series, runs.first
        launch = points[rows, first].copy()  # a run without a tracked frame before it starts from its first
        inside = (first > 0) & frames.tracked[np.maximum(first - 1, 0)]
        launch[inside] = points[rows[inside], first[inside] - 1]
        if self.last is not None:
            launch[first == 0] = self.last[rows[first == 0]]
        carried = np.full((len(rows), 2), np.nan)
        start = frames.first + self.frame_offset + first
        if goes_on.any():
            open_run = self.open.take(rows[goes_on])
            carried[goes_on] = open_run.total
            start[goes_on], count[goes_on], launch[goes_on] = (
                open_run.start,
                open_run.count + count[goes_on],
                open_run.launch,
            )
            high_px[goes_on] = np.maximum(open_run.high_px, high_px[goes_on])
            low_px[goes_on] = np.minimum(open_run.low_px, low_px[goes_on])
            high_deg[goes_on] = np.maximum(open_run.high_deg, high_deg[goes_on])
            low_deg[goes_on] = np.minimum(open_run.low_deg, low_deg[goes_on])
            peak[goes_on] = np.maximum(open_run.peak, peak[goes_on])
        total = _sequential_sums(flat_points, flat, runs.last - runs.first + 1, carried)
        end = points[rows, runs.last]
        return _Runs(rows, runs.code, start, count, total, high_px, low_px, high_deg, low_deg, peak, launch, end)

    def _emit(self, runs: _Runs) -> None:
        """Append the :class:`Fixation` and :class:`Saccade` of finished runs (see the module docstring)."""
        fixation, saccade = runs.take(runs.code == FIXATION), runs.take(runs.code == SACCADE)
        ends = lambda part: (part.series.tolist(), part.start.tolist(), (part.start + part.count - 1).tolist())  # noqa: E731
        if len(fixation.series):
            centroid = fixation.total / fixation.count[:, None].astype(np.float64)
            spans = [
                high - low for high, low in ((fixation.high_px, fixation.low_px), (fixation.high_deg, fixation.low_deg))
            ]
            dispersion_px, dispersion_deg = ((span[:, 0] + span[:, 1]).tolist() for span in spans)
            centre, centre_deg = centroid.tolist(), self.camera.angles_deg(centroid).tolist()
            for row, (series, start, end) in enumerate(zip(*ends(fixation))):
                self.fixations.append(
                    Fixation(
                        series,
                        start,
                        end,
                        tuple(centre[row]),
                        tuple(centre_deg[row]),
                        dispersion_px[row],
                        dispersion_deg[row],
                    )
                )
        if len(saccade.series):
            step = saccade.end - saccade.launch
            amplitude_px = np.sqrt(step[:, 0] * step[:, 0] + step[:, 1] * step[:, 1]).tolist()
            amplitude_deg = self.camera.angle_between_deg(saccade.launch, saccade.end).tolist()
            launch, end, peak = saccade.launch.tolist(), saccade.end.tolist(), saccade.peak.tolist()
            for row, (series, start, last) in enumerate(zip(*ends(saccade))):
                self.saccades.append(
                    Saccade(
                        series,
                        start,
                        last,
                        tuple(launch[row]),
                        tuple(end[row]),
                        amplitude_px[row],
                        amplitude_deg[row],
                        peak[row],
                    )
                )

    def finish(self) -> GazeEvents:
        if self.open is not None:
            self._emit(self.open.take(np.flatnonzero(np.isin(self.open.code, (FIXATION, SACCADE)))))
            self.open = None
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
