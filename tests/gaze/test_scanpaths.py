"""Scanpaths written as scanpaths.json and read back by pysaliency, the tool they are for."""

import json

import numpy as np
import pytest

from tests.gaze.test_events import CAMERA, HEIGHT, WIDTH, along_the_horizon
from transformers_gazeflow.gaze.events import detect_events
from transformers_gazeflow.gaze.scanpaths import load_fixation_trains, scanpath_record, write_scanpaths


def test_pysaliency_reads_the_fixations_back(tmp_path, pysaliency):
    point = along_the_horizon([0, 0.1, 0.2, 10, 10.1, 10.2, 10.3, -5, -5])
    sample = along_the_horizon([0, 0, 0, 0, 0, 8, 8, 8, 8])
    still = along_the_horizon([3] * 9)
    events = detect_events(np.stack([point, sample, still]), WIDTH, HEIGHT, 10, CAMERA)
    assert len(events.fixations) == 3 + 2 + 1
    path = write_scanpaths(tmp_path / "scanpaths.json", scanpath_record(events, 10, WIDTH, HEIGHT, "clip"))
    record = json.loads(path.read_text())
    trains = pysaliency.FixationTrains.from_fixation_trains(**record["fixation_trains"])  # the documented one line
    assert isinstance(load_fixation_trains(path), pysaliency.FixationTrains)
    read_back = list(trains.fixation_trains())
    assert len(read_back) == 3
    for (xs, ys, ts, n, subject), series in zip(read_back, range(3)):
        fixations = events.of_series(series).fixations
        np.testing.assert_allclose(xs, [f.centroid_px[0] for f in fixations])
        np.testing.assert_allclose(ys, [f.centroid_px[1] for f in fixations])
        np.testing.assert_allclose(ts, [f.start_frame / 10 for f in fixations])
        assert n == 0 and subject == series
    np.testing.assert_allclose(trains.duration, [f.frames / 10 for f in events.fixations])
    assert trains.scanpath_attributes["sample_id"].tolist() == [-1, 0, 1]
    assert len(trains.x) == 6 and trains.x_hist.shape == (6, 2)


def test_no_fixation_is_a_one_line_error(tmp_path):
    record = scanpath_record(
        detect_events(along_the_horizon([0, 20, 40]), WIDTH, HEIGHT, 10, CAMERA, None).of_series(99), 10, WIDTH, HEIGHT
    )
    path = write_scanpaths(tmp_path / "s.json", record)
    with pytest.raises(ValueError, match="holds no fixation"):
        load_fixation_trains(path)
