"""Fixations and saccades: a known sequence labelled exactly (I-VT and I-DT), events by hand, blinks, streaming
equals the whole array, P(saccade), events from recorded codes."""

import math

import numpy as np
import pytest

from transformers_gazeflow.data.gaze_types import BLINK_OR_OTHER, FIXATION, OFF_FRAME, SACCADE, UNTRACKED
from transformers_gazeflow.gaze.events import (
    EventLabeller,
    EventRecorder,
    EventSettings,
    detect_events,
    events_from_codes,
    saccade_probability,
)
from transformers_gazeflow.models.gazeflow.geometry import PinholeCamera

WIDTH, HEIGHT = 640, 480
CAMERA = PinholeCamera.from_fov(WIDTH, HEIGHT, 90)  # f = 320 px


def along_the_horizon(azimuths_deg):
    """Unit points on the horizontal line through the centre at the given azimuths (degrees)."""
    x = 320 + 320 * np.tan(np.radians(azimuths_deg))
    return np.stack([x / WIDTH, np.full_like(x, 0.5)], -1)


# at 10 fps: a 0.1 degree/frame drift is 1 deg/s; the jump of 10 degrees in one frame is 100 deg/s
AZIMUTHS = [0, 0.1, 0.2, 0.3, 10.3, 10.4, 10.5, 10.6, 10.7, 10.8]


def test_ivt_labels_a_known_sequence_exactly():
    events = detect_events(along_the_horizon(AZIMUTHS), WIDTH, HEIGHT, 10, CAMERA)
    assert events.labels.tolist() == [[1, 1, 1, 1, 2, 1, 1, 1, 1, 1]]
    np.testing.assert_allclose(events.velocity[0], [0, 1, 1, 1, 100, 1, 1, 1, 1, 1], atol=1e-9)
    first, second = events.fixations
    assert (first.start_frame, first.end_frame, first.frames) == (0, 3, 4)
    assert (second.start_frame, second.end_frame) == (5, 9)
    assert first.dispersion_deg == pytest.approx(0.3) and second.dispersion_deg == pytest.approx(0.4)
    assert first.centroid_px[1] == pytest.approx(240) and second.centroid_deg[1] == pytest.approx(0)
    assert first.centroid_px[0] == pytest.approx(np.mean(320 + 320 * np.tan(np.radians(AZIMUTHS[:4]))))
    (saccade,) = events.saccades
    assert (saccade.start_frame, saccade.end_frame) == (4, 4)
    assert saccade.amplitude_deg == pytest.approx(10.0)  # from the launch point (frame 3) to frame 4
    assert saccade.peak_velocity_deg_s == pytest.approx(100.0)
    assert saccade.start_px[0] == pytest.approx(320 + 320 * math.tan(math.radians(0.3)))


def test_the_threshold_decides_and_a_two_frame_saccade_is_one_event():
    azimuths = [0, 0, 0, 4, 8, 8, 8]  # 40 deg/s twice at 10 fps
    events = detect_events(along_the_horizon(azimuths), WIDTH, HEIGHT, 10, CAMERA)
    assert events.labels.tolist() == [[1, 1, 1, 2, 2, 1, 1]]
    (saccade,) = events.saccades
    assert (saccade.start_frame, saccade.end_frame, saccade.frames) == (3, 4, 2)
    assert saccade.amplitude_deg == pytest.approx(8.0) and saccade.peak_velocity_deg_s == pytest.approx(40.0)
    slow = detect_events(
        along_the_horizon(azimuths), WIDTH, HEIGHT, 10, CAMERA, EventSettings(velocity_threshold_deg_s=50)
    )
    assert slow.labels.tolist() == [[1] * 7] and len(slow.fixations) == 1 and not slow.saccades


def test_blinks_and_untracked_frames_keep_their_codes_and_split_events():
    codes = np.array([1, 1, 1, 1, 2, 1, BLINK_OR_OTHER, 1, 1, UNTRACKED])
    events = detect_events(along_the_horizon(AZIMUTHS), WIDTH, HEIGHT, 10, CAMERA, codes=codes)
    assert events.labels.tolist() == [[1, 1, 1, 1, 2, 1, 3, 1, 1, 0]]
    assert events.velocity[0, 7] == 0  # the first frame after the blink has no incoming step
    assert [(f.start_frame, f.end_frame) for f in events.fixations] == [(0, 3), (5, 5), (7, 8)]


def test_idt_labels_a_known_sequence_exactly():
    # 30 fps: a 100 ms window is 3 frames; dispersion 1 degree
    azimuths = [0, 0.1, 0.2, 0.3, 5, 10.3, 10.4, 10.5, 10.6, 10.7, 10.8, 20, 20.1]
    events = detect_events(along_the_horizon(azimuths), WIDTH, HEIGHT, 30, CAMERA, EventSettings("idt"))
    # frame 4 opens no window (its window spans 5 degrees): a saccade; the last two frames cannot fill a window
    assert events.labels.tolist() == [[1, 1, 1, 1, 2, 1, 1, 1, 1, 1, 1, 2, 2]]
    assert [(f.start_frame, f.end_frame) for f in events.fixations] == [(0, 3), (5, 10)]
    assert events.fixations[1].dispersion_deg == pytest.approx(0.5)
    assert [(s.start_frame, s.end_frame) for s in events.saccades] == [(4, 4), (11, 12)]
    # two fixations with no frame between them stay two events
    jump = detect_events(
        along_the_horizon([0, 0.1, 0.2, 10, 10.1, 10.2]), WIDTH, HEIGHT, 30, CAMERA, EventSettings("idt")
    )
    assert jump.labels.tolist() == [[1] * 6] and [(f.start_frame, f.end_frame) for f in jump.fixations] == [
        (0, 2),
        (3, 5),
    ]


@pytest.mark.parametrize("method", ["ivt", "idt"])
def test_streaming_chunk_by_chunk_equals_the_whole_array(method):
    rng = np.random.default_rng(0)
    steps = rng.normal(0, 0.004, (4, 150, 2)) + (rng.random((4, 150, 1)) < 0.06) * rng.normal(0, 0.08, (4, 150, 2))
    points = np.clip(0.5 + np.cumsum(steps, axis=1), 0, 1)
    codes = np.where(rng.random(150) < 0.05, BLINK_OR_OTHER, FIXATION)
    settings = EventSettings(method)
    whole = detect_events(points, WIDTH, HEIGHT, 30, CAMERA, settings, codes=codes)
    assert whole.fixations and whole.saccades
    labeller, recorder = EventLabeller(settings, CAMERA, 30, 4), EventRecorder(4, CAMERA)
    pixels, labels = points * [WIDTH, HEIGHT], []
    for start in range(0, 150, 7):
        part = labeller.push(pixels[:, start : start + 7], codes[start : start + 7])
        recorder.add(part)
        labels.append(part.labels)
    part = labeller.finish()
    recorder.add(part)
    labels.append(part.labels)
    streamed = recorder.finish()
    np.testing.assert_array_equal(np.concatenate(labels, axis=1), whole.labels)
    assert streamed.fixations == whole.fixations and streamed.saccades == whole.saccades


def test_saccade_probability_across_samples():
    still, jumping = along_the_horizon([0, 0, 0, 0]), along_the_horizon([0, 0, 10, 10])
    events = detect_events(np.stack([still, still, still, jumping]), WIDTH, HEIGHT, 10, CAMERA)
    assert saccade_probability(events.labels).tolist() == [0, 0, 0.25, 0]
    assert [s.series for s in events.saccades] == [3] and events.of_series(3).saccades == events.saccades


def test_events_from_recorded_codes():
    codes = np.array([FIXATION, FIXATION, SACCADE, SACCADE, FIXATION, OFF_FRAME, FIXATION, FIXATION])
    points = along_the_horizon([0, 0, 3, 6, 6, 40, 6, 6])
    events = events_from_codes(points, codes, WIDTH, HEIGHT, 10, CAMERA, frame_offset=100)
    assert [(f.start_frame, f.end_frame) for f in events.fixations] == [(100, 101), (104, 104), (106, 107)]
    (saccade,) = events.saccades
    assert (saccade.start_frame, saccade.end_frame) == (102, 103) and saccade.amplitude_deg == pytest.approx(6)


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="event method must be one of"):
        EventSettings("ikf")
    with pytest.raises(ValueError, match="velocity_threshold_deg_s must be a positive number"):
        EventSettings(velocity_threshold_deg_s=0)
    with pytest.raises(ValueError, match="fps must be a positive number"):
        detect_events(along_the_horizon([0, 1]), WIDTH, HEIGHT, 0, CAMERA)
    with pytest.raises(ValueError, match="points hold NaN"):
        detect_events(np.full((3, 2), np.nan), WIDTH, HEIGHT, 10, CAMERA)
