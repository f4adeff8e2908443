"""CSV and JSON export: columns, one row per frame and sample plus the point estimate, values and formats."""

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from transformers_gazeflow.data.video_sources import VideoSource
from transformers_gazeflow.models.gazeflow.generation_gazeflow import SamplingSettings
from transformers_gazeflow.outputs.writers import (
    CSV_COLUMNS,
    POINT_ESTIMATE_ID,
    TRUTH_COLUMNS,
    GazeCsvWriter,
    write_summary,
)
from transformers_gazeflow.pipelines.egocentric_gaze import build_prediction


def rows(path):
    with open(path, encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_csv_rows_in_chunks(tmp_path):
    trajectories = np.random.default_rng(0).random((3, 5, 2))
    with GazeCsvWriter(tmp_path / "gaze.csv", "clip", width=200, height=100, fps=25) as writer:
        writer.write(10, trajectories[:, :2])
        writer.write(12, trajectories[:, 2:])
    assert writer.rows == 5 * 4
    table = rows(tmp_path / "gaze.csv")
    assert tuple(table[0]) == CSV_COLUMNS and len(table) == 20
    first = table[:4]
    assert [int(r["sample_id"]) for r in first] == [POINT_ESTIMATE_ID, 0, 1, 2]
    assert {r["frame_idx"] for r in first} == {"10"} and first[0]["t_ms"] == "400.000"
    assert float(first[0]["x_norm"]) == pytest.approx(trajectories[:, 0, 0].mean(), abs=1e-6)
    assert float(first[2]["y_px"]) == pytest.approx(trajectories[1, 0, 1] * 100, abs=0.005)
    assert table[-1]["frame_idx"] == "14" and table[-1]["video_id"] == "clip"


def test_pipeline_output_to_csv(tmp_path):
    source = VideoSource(
        name="v.mp4",
        video_id="v",
        fps=10.0,
        width=64,
        height=48,
        start_frame=3,
        expected_frames=4,
        open_frames=lambda: iter(()),
    )
    settings = SamplingSettings(num_samples=2, num_steps=1, solver="euler")
    prediction = build_prediction(source, np.full((2, 4, 2), 0.5, np.float32), settings, 0, heatmap_sigma=5.0)
    with GazeCsvWriter(
        tmp_path / "g.csv", prediction.video_id, prediction.width, prediction.height, prediction.fps
    ) as writer:
        writer.write(int(prediction.frame_indices[0]), prediction.trajectories)
    table = rows(tmp_path / "g.csv")
    assert len(table) == 4 * 3 and table[0]["frame_idx"] == "3" and table[0]["t_ms"] == "300.000"
    assert {(r["x_px"], r["y_px"]) for r in table} == {("32.00", "24.00")}


def test_summary_json_converts_numpy(tmp_path):
    summary = {"a": np.float32(1.5), "b": np.arange(3), "c": Path("x"), "d": [np.int64(2)]}
    path = write_summary(tmp_path / "s.json", summary)
    assert json.loads(path.read_text()) == {"a": 1.5, "b": [0, 1, 2], "c": "x", "d": [2]}


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="fps"):
        GazeCsvWriter(tmp_path / "x.csv", "v", 10, 10, fps=0)
    with GazeCsvWriter(tmp_path / "y.csv", "v", 10, 10, fps=5) as writer:
        with pytest.raises(ValueError, match=r"\[K, n, 2\]"):
            writer.write(0, np.zeros((4, 2)))


def test_non_finite_gaze_is_never_written(tmp_path):
    trajectories = np.full((2, 3, 2), 0.5)
    trajectories[1, 2, 0] = np.nan
    with GazeCsvWriter(tmp_path / "gaze.csv", "v", 10, 10, fps=5) as writer:
        writer.write(0, trajectories[:, :2])
        with pytest.raises(ValueError, match="non-finite gaze .* at frame 7"):
            writer.write(5, trajectories)
    text = (tmp_path / "gaze.csv").read_text()
    assert "nan" not in text.lower() and len(rows(tmp_path / "gaze.csv")) == 2 * 3


def test_summary_is_always_valid_json(tmp_path):
    path = write_summary(
        tmp_path / "s.json",
        {"mean": [float("nan"), np.float32("inf")], "ok": 1.5, "nested": {"x": np.array([np.nan, 2.0])}},
    )
    assert json.loads(path.read_text()) == {"mean": [None, None], "ok": 1.5, "nested": {"x": [None, 2.0]}}
    assert not list(tmp_path.glob("partial.*"))


def test_truth_columns_follow_every_row_of_their_frame(tmp_path):
    gaze = np.array([[0.1, 0.2], [np.nan, np.nan], [0.5, 1.2]])
    codes = np.array([1, 0, 4])
    with GazeCsvWriter(tmp_path / "g.csv", "v", 100, 50, fps=10, true_gaze=gaze, true_codes=codes) as writer:
        writer.write(0, np.full((2, 3, 2), 0.5))
    table = rows(tmp_path / "g.csv")
    assert tuple(table[0]) == CSV_COLUMNS + TRUTH_COLUMNS and len(table) == 9
    assert [(r["true_x_norm"], r["true_y_norm"], r["true_code"]) for r in table[::3]] == [
        ("0.100000", "0.200000", "1"),
        ("", "", "0"),
        ("0.500000", "1.200000", "4"),
    ]
    assert len({(r["true_x_norm"], r["true_code"]) for r in table[:3]}) == 1
    with pytest.raises(ValueError, match="true_gaze must be"):
        GazeCsvWriter(tmp_path / "x.csv", "v", 10, 10, fps=5, true_gaze=np.zeros((3, 2)), true_codes=np.zeros(2))
