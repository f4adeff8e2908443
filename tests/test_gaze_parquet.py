"""``gazeflow predict --format parquet``: gaze.parquet read back by datasets and pandas holds the numbers of the same
run's gaze.csv; it is written like the CSV (staged, never harming a file the run was not asked to write); a missing
pyarrow is a one-line error."""

from __future__ import annotations

import csv
import io
import json
import sys
from contextlib import redirect_stderr, redirect_stdout

import numpy as np
import pytest

from transformers_gazeflow.commands.cli import main
from transformers_gazeflow.commands.predict import GazePredictor, PredictOptions, RunCancelled
from transformers_gazeflow.outputs import gaze_parquet
from transformers_gazeflow.outputs.gaze_parquet import GazeParquetWriter, import_pyarrow

from .pipeline_fixtures import (  # noqa: F401  (fixtures)
    NUM_SAMPLES,
    single_torch_thread,
    synthetic_clip_mp4,
    tiny_model_dir,
)

DECIMALS = {"t_ms": 3, "x_norm": 6, "y_norm": 6, "x_px": 2, "y_px": 2, "x_deg": 3, "y_deg": 3, "p_saccade": 3}
DECIMALS |= {"spread50_px": 2, "spread90_px": 2, "region90_px": 2}
DECIMALS |= {"spread50_deg": 3, "spread90_deg": 3, "region90_deg": 3}


def run(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        status = main([str(a) for a in argv])
    return status, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def both_formats(tmp_path_factory, synthetic_clip_mp4, tiny_model_dir):
    """One video predicted twice with the same seed: --format csv and --format parquet."""
    path, _ = synthetic_clip_mp4
    root = tmp_path_factory.mktemp("formats")
    for table in ("csv", "parquet"):
        argv = ["predict", path, "--model", tiny_model_dir, "-o", root / table, "--fov", "90", "-q", "--no-overlay"]
        status, _, stderr = run(*argv, "--format", table, "-k", NUM_SAMPLES)
        assert status == 0, stderr
    return root / "csv", root / "parquet"


def csv_rows(folder):
    with (folder / "gaze.csv").open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def test_parquet_read_by_pandas_holds_the_csvs_numbers(both_formats):
    import pandas as pd

    csv_folder, parquet_folder = both_formats
    table = pd.read_parquet(parquet_folder / "gaze.parquet")
    rows = csv_rows(csv_folder)
    per_frame = NUM_SAMPLES + 1
    assert len(rows) == len(table) * per_frame and len(table) == 30
    assert not (parquet_folder / "gaze.csv").exists()
    summary = json.loads((parquet_folder / "summary.json").read_text())
    assert summary["outputs"]["parquet"] == str(parquet_folder / "gaze.parquet") and "csv" not in summary["outputs"]
    for frame, record in table.iterrows():
        point, samples = rows[frame * per_frame], rows[frame * per_frame + 1 : (frame + 1) * per_frame]
        assert point["sample_id"] == "-1" and record["video_id"] == point["video_id"]
        assert str(record["frame_idx"]) == point["frame_idx"] and str(record["modes"]) == point["modes"]
        assert record["event"] == point["event"]
        for column, decimals in DECIMALS.items():
            assert f"{record[column]:.{decimals}f}" == point[column], column
        for axis in ("x_norm", "y_norm", "x_px", "y_px", "x_deg", "y_deg"):
            decimals = DECIMALS[axis]
            assert [f"{v:.{decimals}f}" for v in record[f"sample_{axis}"]] == [s[axis] for s in samples], axis
        assert list(record["sample_event"]) == [s["event"] for s in samples]


def test_parquet_loads_with_datasets_as_one_row_per_frame(both_formats, tmp_path):
    import datasets

    csv_folder, parquet_folder = both_formats
    loaded = datasets.load_dataset(
        "parquet", data_files=str(parquet_folder / "gaze.parquet"), split="train", cache_dir=str(tmp_path)
    )
    assert loaded.num_rows == 30 and loaded.features["sample_x_norm"].feature.dtype == "float64"
    rows = csv_rows(csv_folder)
    samples = np.array(loaded["sample_x_px"])  # [T, K]
    expected = np.array([float(r["x_px"]) for r in rows if r["sample_id"] != "-1"]).reshape(30, NUM_SAMPLES)
    np.testing.assert_allclose(samples, expected, atol=0.005)
    assert loaded["frame_idx"] == list(range(30))


def test_truth_and_row_groups_at_full_precision(tmp_path, monkeypatch):
    pq = pytest.importorskip("pyarrow.parquet")
    monkeypatch.setattr(gaze_parquet, "ROW_GROUP_FRAMES", 4)
    samples = np.random.default_rng(0).random((3, 10, 2))
    gaze, codes = np.array([[0.25, 0.75], [np.nan, np.nan]]), np.array([1, 3])
    with GazeParquetWriter(tmp_path / "g.parquet", "v", 100, 50, fps=10, true_gaze=gaze, true_codes=codes) as writer:
        writer.write(0, samples[:, :5])
        writer.write(5, samples[:, 5:])
    assert writer.rows == 10
    read = pq.ParquetFile(tmp_path / "g.parquet")
    assert read.metadata.num_row_groups == 3  # 5 + 5 frames in row groups of at least 4
    table = read.read().to_pydict()
    assert table["sample_x_norm"][7] == samples[:, 7, 0].tolist()
    assert table["x_norm"][7] == samples[:, 7, 0].mean() and table["y_px"][2] == samples[:, 2, 1].mean() * 50
    assert table["t_ms"][:3] == [0.0, 100.0, 200.0]
    assert table["true_x_norm"][:3] == [0.25, None, None] and table["true_code"][:3] == [1, 3, None]


def test_a_cancelled_run_leaves_an_earlier_table_whole(tmp_path, synthetic_clip_mp4, tiny_model_dir):
    path, _ = synthetic_clip_mp4
    out = tmp_path / "pred"
    predictor = GazePredictor(tiny_model_dir)
    options = PredictOptions(sampling={"num_samples": 2}, overlay=False, table_format="parquet")
    predictor.predict(path, out, options)
    before = (out / "gaze.parquet").read_bytes()
    (out / "gaze.csv").write_text("mine\n")  # not an output of a parquet run: never touched

    def stop(*_):
        raise RunCancelled("stop")

    with pytest.raises(RunCancelled):
        predictor.predict(path, out, PredictOptions(seed=7, overlay=False, table_format="parquet"), on_chunk=stop)
    assert (out / "gaze.parquet").read_bytes() == before and (out / "gaze.csv").read_text() == "mine\n"
    assert sorted(p.name for p in out.iterdir()) == [
        "fixations.csv",
        "gaze.csv",
        "gaze.parquet",
        "saccades.csv",
        "scanpaths.json",
        "summary.json",
    ]
    with pytest.raises(ValueError, match="table_format must be one of"):
        PredictOptions(table_format="xlsx")


def test_a_foreign_gaze_parquet_is_refused_without_overwrite(tmp_path, synthetic_clip_mp4, tiny_model_dir):
    path, _ = synthetic_clip_mp4
    out = tmp_path / "pred"
    out.mkdir()
    (out / "gaze.parquet").write_bytes(b"someone else's")
    argv = ["predict", path, "--model", tiny_model_dir, "-o", out, "-q", "--no-overlay", "--format", "parquet"]
    status, _, stderr = run(*argv)
    assert status == 1 and "gaze.parquet" in stderr and "--overwrite" in stderr and len(stderr.splitlines()) == 1
    assert (out / "gaze.parquet").read_bytes() == b"someone else's"
    status, _, stderr = run(*argv[:-2])  # the CSV's run does not write gaze.parquet: it goes ahead
    assert status == 0, stderr
    assert (out / "gaze.parquet").read_bytes() == b"someone else's" and (out / "gaze.csv").is_file()


def test_without_pyarrow_the_error_is_one_line_naming_the_install(tmp_path, monkeypatch, synthetic_clip_mp4):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pyarrow" else real(name, *a))
    path, _ = synthetic_clip_mp4
    status, _, stderr = run("predict", path, "-o", tmp_path / "out", "--format", "parquet")
    assert status == 1 and stderr.strip().endswith("pip install pyarrow") and len(stderr.splitlines()) == 1
    assert not (tmp_path / "out").exists()
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(ImportError, match="pip install pyarrow"):
        import_pyarrow()


def test_an_unknown_table_format_is_refused_by_name(tmp_path):
    from transformers_gazeflow.commands.output_policies import prediction_keys
    from transformers_gazeflow.models.gazeflow.geometry import FieldOfView
    from transformers_gazeflow.outputs.readouts import ReadoutFiles

    with pytest.raises(ValueError, match="table_format must be one of .*'xlsx'"):
        prediction_keys("xlsx")
    files = {key: tmp_path / key for key in ("fixations", "saccades", "scanpaths")}
    with pytest.raises(ValueError, match="table_format must be one of .*'xlsx'"):
        ReadoutFiles(tmp_path / "g", files, "v", 8, 8, 5.0, 2, FieldOfView(), table_format="xlsx")
    assert prediction_keys("parquet", overlay=False) == (
        "parquet",
        "fixations",
        "saccades",
        "scanpaths",
        "summary",
    )
