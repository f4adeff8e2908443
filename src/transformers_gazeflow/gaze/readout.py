"""Everything a stream of K sampled trajectories tells, chunk by chunk: what ``gazeflow predict`` writes.

:class:`GazeReadout` takes the chunks of a video in order (``feed``), and hands back each chunk's
:class:`~.uncertainty.GazeUncertainty` at once and, as their event labels are decided (at once with I-VT, at most
I-DT's window later), :class:`FrameReadout` s: the frames' degrees, labels and P(saccade). ``finish`` hands out the
rest and :attr:`GazeReadout.events` then holds every fixation and saccade. Series 0 is the point estimate (the
per-frame mean of the samples), series ``1 + k`` sample ``k``. Memory stays bounded: only the undecided frames and
the events are held.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..data.gaze_types import SACCADE
from ..models.gazeflow.geometry import Camera, unit_to_pixels
from .events import EventLabeller, EventRecorder, EventSettings, GazeEvents, LabelledFrames
from .regions import RegionCalibration
from .uncertainty import GazeUncertainty, as_region_calibration, describe_uncertainty


@dataclass
class FrameReadout:
    """Frames ``first .. first + n - 1`` (frame numbers of the video) with everything known about them.

    Args:
        first: the first frame's number.
        trajectories: the K samples ``[K, n, 2]`` (unit coordinates).
        points: the point estimate ``[n, 2]`` (the samples' mean).
        degrees: Fick angles ``[1 + K, n, 2]`` (point estimate first; the camera's ``angles_deg``).
        labels: gaze-type codes ``[1 + K, n]`` (1 fixation, 2 saccade).
        p_saccade: ``[n]`` the share of the K samples in a saccade.
        uncertainty: the frames' :class:`~.uncertainty.GazeUncertainty`.
    """

    first: int
    trajectories: np.ndarray
    points: np.ndarray
    degrees: np.ndarray
    labels: np.ndarray
    p_saccade: np.ndarray
    uncertainty: GazeUncertainty

    @property
    def num_frames(self) -> int:
        return int(self.trajectories.shape[1])


class GazeReadout:
    """The readouts of one video's stream (see the module docstring). ``camera`` is taken to the frame size;
    ``region_calibration`` is the model's (``uncertainty.as_region_calibration``; None: none)."""

    def __init__(
        self,
        width: int,
        height: int,
        fps: float,
        camera: Camera,
        num_samples: int,
        events: EventSettings | None = None,
        region_calibration: RegionCalibration | float | None = None,
    ) -> None:
        self.width, self.height = int(width), int(height)
        self.camera = camera.for_frame(self.width, self.height)
        self.region_calibration = as_region_calibration(region_calibration)
        self.settings = events or EventSettings()
        self.labeller = EventLabeller(self.settings, self.camera, fps, num_samples + 1)
        self.recorder: EventRecorder | None = None
        self.pending: list[tuple[np.ndarray, GazeUncertainty]] = []  # fed frames whose labels are not decided yet
        self.next_frame: int | None = None
        self.events: GazeEvents | None = None

    def feed(self, first_frame: int, trajectories: np.ndarray) -> tuple[GazeUncertainty, list[FrameReadout]]:
        """Take the next chunk, frames ``first_frame ..`` with samples ``[K, n, 2]`` (unit coordinates, in order);
        return its uncertainty and the frames whose labels are now decided."""
        trajectories = np.asarray(trajectories, np.float32)
        if self.recorder is None:
            self.recorder = EventRecorder(trajectories.shape[0] + 1, self.camera, frame_offset=first_frame)
            self.next_frame = first_frame
        uncertainty = describe_uncertainty(trajectories, self.width, self.height, self.camera, self.region_calibration)
        self.pending.append((trajectories, uncertainty))
        samples = trajectories.astype(np.float64)
        series = np.concatenate([samples.mean(axis=0, keepdims=True), samples])
        return uncertainty, self._ready(self.labeller.push(unit_to_pixels(series, self.width, self.height)))

    def finish(self) -> list[FrameReadout]:
        """The frames still undecided; afterwards :attr:`events` holds every fixation and saccade."""
        ready = self._ready(self.labeller.finish()) if self.recorder is not None else []
        self.events = self.recorder.finish() if self.recorder is not None else GazeEvents([], [])
        return ready

    def _ready(self, labelled: LabelledFrames) -> list[FrameReadout]:
        if labelled.num_frames == 0:
            return []
        self.recorder.add(labelled)
        trajectories = np.concatenate([part[0] for part in self.pending], axis=1)
        uncertainty = GazeUncertainty.concatenate([part[1] for part in self.pending])
        n = labelled.num_frames
        rest = trajectories.shape[1] - n
        self.pending = [(trajectories[:, n:], uncertainty.frames(slice(n, None)))] if rest else []
        degrees = self.camera.angles_deg(labelled.points_px)
        points = trajectories[:, :n].astype(np.float64).mean(axis=0)
        readout = FrameReadout(
            self.next_frame,
            trajectories[:, :n],
            points,
            degrees,
            labelled.labels,
            (labelled.labels[1:] == SACCADE).mean(axis=0),
            uncertainty.frames(slice(0, n)),
        )
        self.next_frame += n
        return [readout]


__all__ = ["FrameReadout", "GazeReadout"]
