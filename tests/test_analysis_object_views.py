"""analysis.object_views (each view against hand-written arrays; the probe's clip split counted by hand) and
examples/object_probe.py end to end on a tiny random model."""

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from tests.script_loading import load_script
from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
from transformers_gazeflow.analysis.object_views import (
    ObjectViews,
    cell_crop,
    pixel_crop,
    probe_object_views,
    token_cell,
    token_neighbourhood,
)
from transformers_gazeflow.data.synthetic_tasks import GroundingTaskSettings
from transformers_gazeflow.data.synthetic_tasks_panel import panel_family

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "object_probe.py"


@pytest.mark.parametrize(
    "x, y, expected",
    [
        (0.0, 0.0, (0, 0)),
        (0.999, 0.5, (4, 7)),  # 0.5 * 8 = 4 -> row 4; 0.999 * 8 = 7.99 -> col 7
        (0.125, 0.124, (0, 1)),  # 0.125 * 8 = 1.0 starts col 1; 0.124 * 8 = 0.992 is still row 0
        (1.0, 1.0, (7, 7)),  # the far edge belongs to the last cells
        (-0.1, 1.3, (7, 0)),  # past an edge: the edge's cells
    ],
)
def test_token_cell_on_an_8_by_8_grid(x, y, expected):
    assert token_cell(x, y, 8, 8) == expected


def test_token_cell_on_a_grid_wider_than_tall():
    assert token_cell(0.5, 0.5, 2, 6) == (1, 3)
    assert token_cell(0.49, 0.49, 2, 6) == (0, 2)


def test_token_neighbourhood_pads_with_zeros_outside_the_grid():
    grid = (np.arange(3)[:, None] * 10 + np.arange(4)[None, :] + 1).astype(np.float32)[..., None]  # value 10r + c + 1
    corner = token_neighbourhood(grid, 0, 0, 1)
    assert corner.tolist() == [0, 0, 0, 0, 1, 2, 0, 11, 12]
    middle = token_neighbourhood(grid, 1, 2, 1)
    assert middle.tolist() == [2, 3, 4, 12, 13, 14, 22, 23, 24]
    assert token_neighbourhood(grid, 2, 3, 0).tolist() == [24]


def test_token_neighbourhood_keeps_each_cells_channels_together():
    grid = np.zeros((2, 2, 2), np.float32)
    grid[1, 1] = [5, 6]
    view = token_neighbourhood(grid, 1, 1, 1)  # 3 x 3 cells of 2 channels, the centre is cell (1, 1)
    assert view.shape == (18,)
    assert view[8:10].tolist() == [5, 6]
    assert np.count_nonzero(view) == 2


def test_cell_crop_reads_the_pixels_of_the_cells():
    frame = np.arange(64, dtype=np.float32).reshape(1, 8, 8)
    assert cell_crop(frame, 1, 1, 2, 0).tolist() == [18, 19, 26, 27]  # rows 2-3, cols 2-3
    edge = cell_crop(frame, 0, 0, 2, 1).reshape(6, 6)  # cells (-1..1) x (-1..1): the first two rows / cols are out
    assert np.all(edge[:2] == 0) and np.all(edge[:, :2] == 0)
    assert edge[2:, 2:].tolist() == frame[0, :4, :4].tolist()


def test_pixel_crop_is_centred_on_the_position_and_padded():
    frame = np.arange(64, dtype=np.float32).reshape(1, 8, 8)
    assert pixel_crop(frame, 0.5, 0.5, 1).tolist() == [27, 28, 35, 36]  # the corner (4, 4): rows 3-4, cols 3-4
    assert pixel_crop(frame, 0.0, 0.0, 1).tolist() == [0, 0, 0, 0]  # the corner (0, 0): only pixel (0, 0) is in
    assert pixel_crop(frame, 0.05, 0.05, 1).tolist() == [0, 0, 0, 0]  # rounds to the same corner
    frame[0, 0, 0] = 7
    assert pixel_crop(frame, 0.0, 0.0, 1).tolist() == [0, 0, 0, 7]


def test_object_views_refuse_mismatched_lengths():
    with pytest.raises(ValueError, match="n = len"):
        ObjectViews(np.zeros((3, 2)), np.zeros(3, int), np.zeros(2, int))
    with pytest.raises(ValueError, match="no views"):
        ObjectViews.stack([], [], [])


def views_of(features, labels, clips):
    return ObjectViews(np.asarray(features, np.float32), np.asarray(labels), np.asarray(clips))


def test_probe_splits_by_clip_and_reads_a_feature_that_carries_the_label():
    clips = np.repeat(np.arange(8), 2)  # 8 clips of 2 views
    labels = np.tile([0, 1], 8)
    labels[-1] = 0  # the test clips' labels: 0, 1, 0, 0
    rng = np.random.default_rng(0)
    features = np.concatenate([np.eye(2)[labels] * 4, rng.normal(size=(16, 3))], axis=1)
    result = probe_object_views(views_of(features, labels, clips), 2, test_fraction=0.25, validation_fraction=0.2)
    # test: clips 6 and 7 (4 views); of clips 0-5, floor(6 * 0.8) = 4 -> clips 4 and 5 validate (4 views)
    assert (result["train_views"], result["validation_views"], result["test_views"]) == (8, 4, 4)
    assert result["accuracy"] == 1.0
    assert result["chance"] == 0.75  # training classes tie at 4 views each: class 0 (lowest id) wins; 3 of 4 test views


def test_probe_is_at_chance_when_the_features_hold_nothing():
    rng = np.random.default_rng(1)
    clips = np.repeat(np.arange(80), 5)
    labels = rng.integers(0, 4, size=400)
    result = probe_object_views(views_of(rng.normal(size=(400, 6)), labels, clips), 4)
    assert result["accuracy"] < 0.4  # 4 balanced classes: 0.25 expected, 100 test views


def test_probe_refuses_too_few_clips_and_bad_fractions():
    two_clips = views_of(np.zeros((4, 1)), [0, 1, 0, 1], [0, 0, 1, 1])
    with pytest.raises(ValueError, match="too few"):
        probe_object_views(two_clips, 2)
    with pytest.raises(ValueError, match="fractions"):
        probe_object_views(two_clips, 2, test_fraction=1.0)


# ---------------------------------------------------------------------------------------------------- the script
def test_script_writes_every_row_with_the_views_of_each_object(tmp_path, tiny_sigma5_model_dir, capsys):
    script = load_script(SCRIPT, "object_probe_script")
    out = tmp_path / "out"
    argv = ["--family", "shape_cue", "--model_name_or_path", str(tiny_sigma5_model_dir), "--num_clips", "8"]
    assert script.main(argv + ["--encoders", "32x8", "--output_dir", str(out)]) == 0
    report = json.loads((out / "object_probe.json").read_text())
    rows = report["rows"]
    assert list(rows) == ["encoder", "c_v", "cell pixels", "object-centred pixels", "fresh random encoder 32x8"]
    assert report["classes"] == ["diamond", "disc", "square", "triangle"]
    settings = dataclasses.replace(panel_family("shape_cue").settings, seed=1)
    objects = [len(settings.generate_clip(i).objects) for i in range(8)]
    groups = 8 // 2  # the tiny model's 8-frame window, tubelets of 2
    views = [row["train_views"] + row["validation_views"] + row["test_views"] for row in rows.values()]
    assert views == [groups * sum(objects)] * 5
    assert rows["encoder"]["test_views"] == groups * sum(objects[6:])  # the last quarter of the clips
    markdown = (out / "object_probe.md").read_text()
    assert "pixels centred on the object (48x48)" in markdown  # as wide as the 3 x 3 cells of 16 pixels
    assert "pixels of the same cells (48x48, at the grid's offsets)" in markdown
    assert "| the run's encoder tokens (32x16), 3x3 cells |" in markdown
    assert "wrote" in capsys.readouterr().out


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--encoders", "64x5"], "the crop must be a multiple of the patch"),
        (["--encoders", "64"], "expected CROPxPATCH"),
        (["--num_clips", "4"], "--num_clips must be >= 8"),
        (["--radius", "-1"], "--radius must be >= 0"),
    ],
)
def test_script_rejects_bad_arguments(tmp_path, tiny_sigma5_model_dir, extra, message, capsys):
    script = load_script(SCRIPT, "object_probe_script")
    argv = ["--family", "shape_cue", "--model_name_or_path", str(tiny_sigma5_model_dir), "--output_dir", str(tmp_path)]
    with pytest.raises(SystemExit):
        script.parse_args(argv + extra)
    assert message in capsys.readouterr().err


def test_script_refuses_a_causal_model_in_one_line(tmp_path):
    folder = tmp_path / "causal"
    torch.manual_seed(0)
    GazeFlowModel(GazeFlowConfig.tiny(causal=True)).save_pretrained(folder)
    command = [sys.executable, str(SCRIPT), "--family", "shape_cue", "--model_name_or_path", str(folder)]
    result = subprocess.run(
        command + ["--num_clips", "8", "--output_dir", str(tmp_path / "out")], capture_output=True, text=True
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (  # after the weights' loading bar
        f"object_probe.py: error: --model_name_or_path {folder}: a windowed model expected, not a causal one"
    )
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_script_refuses_an_attribute_every_object_shares(tmp_path, tiny_sigma5_model_dir, monkeypatch):
    script = load_script(SCRIPT, "object_probe_script")
    one_shape = SimpleNamespace(objects=[SimpleNamespace(shape="disc")] * 3)  # refused before any frame is drawn
    monkeypatch.setattr(GroundingTaskSettings, "generate_clip", lambda settings, index: one_shape)
    argv = [
        "--family",
        "shape_cue",
        "--model_name_or_path",
        str(tiny_sigma5_model_dir),
        "--output_dir",
        str(tmp_path / "o"),
    ]
    with pytest.raises(ValueError, match="every object of shape_cue has the same one; nothing to probe"):
        script.main(argv)
    assert not (tmp_path / "o").exists()
