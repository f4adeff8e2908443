"""What K samples tell, through the gazeflow command and the pipeline: degrees, events and uncertainty in gaze.csv,
fixations.csv, saccades.csv and scanpaths.json; gazeflow calibrate recovering a known tracker offset and
--calibration applying it; every bad input in one line."""

from __future__ import annotations

import csv
import io
import json
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import pytest

from transformers_gazeflow.commands.cli import main
from transformers_gazeflow.models.gazeflow.geometry import PinholeCamera
from transformers_gazeflow.outputs.writers import FIXATION_COLUMNS, READOUT_COLUMNS, SACCADE_COLUMNS

from .pipeline_fixtures import (  # noqa: F401  (fixtures)
    NUM_SAMPLES,
    single_torch_thread,
    synthetic_clip_mp4,
    tiny_model_dir,
)

OFFSET = np.array([0.12, -0.09])


def run(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        status = main([str(a) for a in argv])
    return status, out.getvalue(), err.getvalue()


def rows_of(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def points_of(folder: Path, samples: bool = False) -> np.ndarray:
    """The point estimate ``[T, 2]`` of a prediction's gaze.csv (``samples``: the samples ``[K, T, 2]``)."""
    rows = rows_of(folder / "gaze.csv")
    xy = np.array([[float(r["x_norm"]), float(r["y_norm"])] for r in rows]).reshape(-1, NUM_SAMPLES + 1, 2)
    return np.moveaxis(xy[:, 1:], 1, 0) if samples else xy[:, 0]


@pytest.fixture(scope="module")
def predicted(tmp_path_factory, synthetic_clip_mp4, tiny_model_dir):
    """gazeflow predict --fov 90 on the synthetic clip (64 x 48, 30 frames, 24 fps)."""
    path, _ = synthetic_clip_mp4
    out = tmp_path_factory.mktemp("readouts") / "pred"
    status, stdout, stderr = run("predict", path, "--model", tiny_model_dir, "-o", out, "--fov", "90", "-q", "--region")
    assert status == 0, stderr
    return path, out


def test_predict_with_a_field_of_view_writes_degrees_events_and_spreads(predicted):
    path, out = predicted
    rows = rows_of(out / "gaze.csv")
    assert tuple(rows[0])[8:] == READOUT_COLUMNS
    camera = PinholeCamera.from_fov(64, 48, 90)  # f = 32 px
    for row in rows[: NUM_SAMPLES + 1]:
        expected = camera.angles_deg(np.array([float(row["x_px"]), float(row["y_px"])]))
        np.testing.assert_allclose([float(row["x_deg"]), float(row["y_deg"])], expected, atol=0.01)
        assert row["event"] in ("fixation", "saccade")
    point, sample = rows[0], rows[1]
    assert float(point["spread90_px"]) >= float(point["spread50_px"]) >= 0 and int(point["modes"]) >= 1
    assert point["region90_px"] == point["spread90_px"]  # the tiny model has no region scale: the raw spread
    assert 0 <= float(point["p_saccade"]) <= 1 and sample["spread90_px"] == "" and sample["p_saccade"] == ""
    # P(saccade) is the share of the samples labelled saccade on that frame
    frame_rows = [r for r in rows if r["frame_idx"] == "5"]
    share = np.mean([r["event"] == "saccade" for r in frame_rows[1:]])
    assert float(frame_rows[0]["p_saccade"]) == pytest.approx(share, abs=1e-3)
    # the events files agree with the labels of gaze.csv, series by series
    fixations, saccades = rows_of(out / "fixations.csv"), rows_of(out / "saccades.csv")
    assert tuple(fixations[0]) == FIXATION_COLUMNS and (not saccades or tuple(saccades[0]) == SACCADE_COLUMNS)
    labelled = {(int(r["sample_id"]), int(r["frame_idx"])): r["event"] for r in rows}
    for event in fixations:
        frames = range(int(event["start_frame"]), int(event["end_frame"]) + 1)
        assert all(labelled[(int(event["sample_id"]), f)] == "fixation" for f in frames)
        assert float(event["duration_ms"]) == pytest.approx(len(frames) * 1000 / 24, abs=1e-3)
    assert sum(int(e["end_frame"]) - int(e["start_frame"]) + 1 for e in fixations + saccades) == len(rows)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["camera"]["fx"] == pytest.approx(32) and summary["camera_given"]
    assert summary["events"] == {"method": "ivt", "velocity_threshold_deg_s": 30.0}
    assert summary["point_estimate_fixations"] == sum(e["sample_id"] == "-1" for e in fixations)
    assert set(summary["outputs"]) >= {"fixations", "saccades", "scanpaths", "csv", "overlay"}
    record = json.loads((out / "scanpaths.json").read_text())
    assert record["fixation_trains"]["scanpath_attributes"]["sample_id"][0] == -1


def test_a_model_folders_region_calibration_reaches_gaze_csv_and_the_summary(tmp_path, predicted, tiny_model_dir):
    """The same clip, model and seed with a region_calibration.json in the folder: only the region columns change,
    to f_90 * max(spread90, rho) in pixels (rho as an angle beside the point estimate in degrees); a version-1 file
    still means its single scale times spread90."""
    import shutil

    path, plain = predicted
    folder = tmp_path / "model"
    shutil.copytree(tiny_model_dir, folder)
    record = {"format": "gazeflow-region-calibration", "version": 2, "exchangeable": "frames"}
    record.update(levels=[0.5, 0.9], factors=[1.5, 2.5], min_radius_px=0.75)
    (folder / "region_calibration.json").write_text(json.dumps(record))
    status, _, stderr = run(
        "predict", path, "--model", folder, "-o", tmp_path / "v2", "--fov", "90", "-q", "--no-overlay"
    )
    assert status == 0, stderr
    (folder / "region_calibration.json").write_text(json.dumps({"scale": 2.0}))
    status, _, stderr = run(
        "predict", path, "--model", folder, "-o", tmp_path / "v1", "--fov", "90", "-q", "--no-overlay"
    )
    assert status == 0, stderr
    camera = PinholeCamera.from_fov(64, 48, 90)  # f = 32 px
    region_columns = {"region90_px", "region90_deg"}
    points = 0
    for before, v2, v1 in zip(
        *(rows_of(folder_ / "gaze.csv") for folder_ in (plain, tmp_path / "v2", tmp_path / "v1"))
    ):
        assert {k: v for k, v in v2.items() if k not in region_columns} == {
            k: v for k, v in before.items() if k not in region_columns
        }
        if before["sample_id"] != "-1":
            assert v2["region90_px"] == v1["region90_px"] == ""
            continue
        points += 1
        spread_px, spread_deg = float(before["spread90_px"]), float(before["spread90_deg"])
        centre = np.array([float(before["x_px"]), float(before["y_px"])])
        floor_deg = float(camera.angle_between_deg(centre + [0.75, 0], centre))
        assert float(v2["region90_px"]) == pytest.approx(2.5 * max(spread_px, 0.75), abs=0.02)
        assert float(v2["region90_deg"]) == pytest.approx(2.5 * max(spread_deg, floor_deg), abs=0.003)
        assert float(v1["region90_px"]) == pytest.approx(2.0 * spread_px, abs=0.02)
        assert float(v1["region90_deg"]) == pytest.approx(2.0 * spread_deg, abs=0.003)
    assert points == 30
    summary = json.loads((tmp_path / "v2" / "summary.json").read_text())
    assert summary["region_calibration"]["factors"] == [1.5, 2.5] and summary["mean_region90_px"] > 0
    assert json.loads((plain / "summary.json").read_text())["region_calibration"] is None
    assert json.loads((tmp_path / "v1" / "summary.json").read_text())["region_calibration"] == {
        "version": 1,
        "scale": 2.0,
    }


def test_idt_and_intrinsics(tmp_path, synthetic_clip_mp4, tiny_model_dir):
    path, _ = synthetic_clip_mp4
    intrinsics = tmp_path / "camera.json"
    intrinsics.write_text(json.dumps({"fx": 64, "fy": 64, "cx": 64, "cy": 48, "width": 128, "height": 96}))
    status, _, stderr = run(
        "predict",
        path,
        "--model",
        tiny_model_dir,
        "-o",
        tmp_path / "o",
        "--intrinsics",
        intrinsics,
        "--events",
        "idt",
        "--dispersion",
        "2",
        "-q",
        "--no-overlay",
    )
    assert status == 0, stderr
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["camera"] == {"fx": 32, "fy": 32, "cx": 32, "cy": 24, "width": 64, "height": 48}  # rescaled
    assert summary["events"] == {"method": "idt", "dispersion_deg": 2.0, "min_duration_ms": 100.0}


def test_calibrate_recovers_a_known_tracker_offset_and_predict_applies_it(tmp_path, predicted, tiny_model_dir):
    path, out = predicted
    points = points_of(out)
    tracker = tmp_path / "tracker.csv"
    lines = ["frame_idx,x_norm,y_norm"]
    for frame, (x, y) in enumerate(points + OFFSET):  # off the frame: the reader leaves the frame out
        if frame in (3, 4):
            lines.append(f"{frame},,")  # a blink: no position
        elif frame == 7:
            lines.append(f"{frame},0.99,0.01")  # a wild sample
        else:
            lines.append(f"{frame},{x:.6f},{y:.6f}")
    tracker.write_text("\n".join(lines) + "\n")
    calib = tmp_path / "calib.json"
    status, stdout, stderr = run(
        "calibrate", path, "--gaze", tracker, "-o", calib, "--model", tiny_model_dir, "--correction", "offset"
    )
    assert status == 0, stderr
    usable = ((points + OFFSET >= 0) & (points + OFFSET <= 1)).all(axis=1)  # the tracker's gaze on the frame
    usable[[3, 4]], usable[7] = False, True  # the blinks out, the wild sample in
    assert f"offset from {usable.sum()} frames" in stdout and str(calib) in stdout
    record = json.loads(calib.read_text())
    np.testing.assert_allclose(record["offset"], OFFSET, atol=2e-3)
    assert record["model"]["name"] == str(tiny_model_dir) and record["fit"]["median_error_after_px"] < 0.2
    status, _, stderr = run(
        "predict",
        path,
        "--model",
        tiny_model_dir,
        "-o",
        tmp_path / "corrected",
        "-q",
        "--no-overlay",
        "--calibration",
        calib,
    )
    assert status == 0, stderr
    corrected = points_of(tmp_path / "corrected")
    expected = np.clip(points_of(out, samples=True) + record["offset"], 0, 1).mean(axis=0)  # each sample clamped
    np.testing.assert_allclose(corrected, expected, atol=2e-5)
    summary = json.loads((tmp_path / "corrected" / "summary.json").read_text())
    assert summary["wearer_calibration"]["correction"] == "offset"
    # the first second only (24 frames at 24 fps, blinks left out)
    status, stdout, _ = run(
        "calibrate", path, "--gaze", tracker, "-o", tmp_path / "short.json", "--model", tiny_model_dir, "--seconds", "1"
    )
    assert status == 0 and f"from {usable[:24].sum()} frames" in stdout


def test_the_pipeline_carries_readouts_and_applies_a_calibration(tmp_path, predicted, tiny_model_dir):
    from transformers import pipeline

    import transformers_gazeflow  # noqa: F401  (registers the task)
    from transformers_gazeflow.gaze.wearer import WearerCalibration

    path, out = predicted
    gaze = pipeline("egocentric-gaze", model=str(tiny_model_dir))
    plain = gaze(str(path), camera=(90, 70), return_uncertainty=True, return_events=True)
    assert plain.camera.fov_deg == pytest.approx((90, 70))
    assert plain.uncertainty.spread_deg.shape == (2, 30) and plain.uncertainty.modes.shape == (30,)
    assert {f.series for f in plain.events.fixations} <= set(range(NUM_SAMPLES + 1))
    np.testing.assert_allclose(plain.points, points_of(out), atol=1e-5)  # the command's samples
    calibration = WearerCalibration("offset", (0.05, -0.05), (1.0, 1.0), str(tiny_model_dir), gaze.model_fingerprint)
    shifted = gaze(str(path), calibration=calibration)
    np.testing.assert_allclose(shifted.points, np.clip(plain.trajectories + [0.05, -0.05], 0, 1).mean(0), atol=1e-6)
    other = WearerCalibration("offset", (0.05, -0.05), (1.0, 1.0), "another/model", "0" * 16)
    with pytest.raises(ValueError, match="fitted for the model another/model"):
        gaze(str(path), calibration=other)


def test_the_pipeline_applies_the_model_folders_region_calibration(tmp_path, predicted, tiny_model_dir):
    """The pipeline's regions are the model folder's factors times the spread (at least rho), as gaze.csv's."""
    import shutil

    from transformers import pipeline

    import transformers_gazeflow  # noqa: F401  (registers the task)

    path, _ = predicted
    folder = tmp_path / "model"
    shutil.copytree(tiny_model_dir, folder)
    record = {"format": "gazeflow-region-calibration", "version": 2, "exchangeable": "frames"}
    record.update(levels=[0.5, 0.9], factors=[1.5, 2.5], min_radius_px=0.75)
    (folder / "region_calibration.json").write_text(json.dumps(record))
    plain = pipeline("egocentric-gaze", model=str(tiny_model_dir))(str(path), return_uncertainty=True)
    calibrated = pipeline("egocentric-gaze", model=str(folder))(str(path), return_uncertainty=True)
    assert plain.uncertainty.calibration is None and calibrated.uncertainty.calibration.factors == (1.5, 2.5)
    spread = calibrated.uncertainty.spread(0.9)
    np.testing.assert_array_equal(spread, plain.uncertainty.spread(0.9))
    np.testing.assert_allclose(calibrated.uncertainty.region(0.9), 2.5 * np.maximum(spread, 0.75))
    np.testing.assert_array_equal(plain.uncertainty.region(0.9), spread)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--fov", "200"], "argument --fov: '200': expected a field of view in degrees"),
        (["--fov", "90,0"], "argument --fov: '90,0'"),
        (["--fov", "wide"], "argument --fov: 'wide'"),
        (["--intrinsics", "1,2,3"], "argument --intrinsics: '1,2,3': expected fx,fy,cx,cy"),
        (["--intrinsics", "0,1,2,3"], "'0,1,2,3': fx: expected a finite number in [0.001, 1000000], got 0.0"),
        (["--intrinsics", "missing.json"], "argument --intrinsics: missing.json: no such file (an intrinsics file)"),
        (["--fov", "90", "--intrinsics", "1,1,1,1"], "not allowed with argument"),
        (["--saccade-threshold", "0"], "argument --saccade-threshold: '0': expected a positive number"),
    ],
)
def test_bad_camera_and_event_arguments_are_one_line(tmp_path, argv, message):
    status, stdout, stderr = run("predict", "v.mp4", "-o", tmp_path / "o", *argv)
    assert status == 2 and stderr.startswith("gazeflow: error: ") and stderr.count("\n") == 1, stderr
    assert message in stderr, stderr
    assert not (tmp_path / "o").exists()


def test_bad_calibration_inputs_are_one_line(tmp_path, predicted, tiny_model_dir):
    path, out = predicted
    empty = tmp_path / "empty.csv"
    empty.write_text("frame_idx,x_norm,y_norm\n0,,\n1,1.5,0.2\n999,0.5,0.5\n")
    status, _, stderr = run("calibrate", path, "--gaze", empty, "-o", tmp_path / "c.json", "--model", tiny_model_dir)
    assert status == 1 and stderr.count("\n") == 1
    assert f"{empty}: no usable gaze rows on the 30 frames of {path}" in stderr
    junk = tmp_path / "junk.txt"
    junk.write_text("not gaze\n")
    status, _, stderr = run("calibrate", path, "--gaze", junk, "-o", tmp_path / "c.json", "--model", tiny_model_dir)
    assert status == 1 and "not a gaze file gazeflow reads" in stderr and stderr.count("\n") == 1
    status, _, stderr = run("calibrate", path, "--gaze", tmp_path / "none.csv", "-o", tmp_path / "c.json")
    assert status == 1 and "tracker gaze file not found" in stderr
    status, _, stderr = run("calibrate", path, "--gaze", empty, "-o", tmp_path / "c.json", "--seconds", "-2")
    assert status == 2 and "argument --seconds: '-2': expected a positive number" in stderr
    other = tmp_path / "other.json"
    other.write_text(
        json.dumps(
            {
                "format": "gazeflow-wearer-calibration",
                "version": 1,
                "correction": "offset",
                "offset": [0.1, 0.0],
                "scale": [1, 1],
                "model": {"name": "someone/else", "fingerprint": "0123456789abcdef"},
            }
        )
    )
    status, _, stderr = run(
        "predict", path, "--model", tiny_model_dir, "-o", tmp_path / "p", "--calibration", other, "-q"
    )
    assert status == 1 and stderr.count("\n") == 1
    assert f"{other} was fitted for the model someone/else (weights 0123456789abcdef), not for" in stderr
    assert not (tmp_path / "p").exists()
    not_json = tmp_path / "calib.json"
    not_json.write_text("{")
    status, _, stderr = run(
        "predict", path, "--model", tiny_model_dir, "-o", tmp_path / "p", "--calibration", not_json, "-q"
    )
    assert status == 1 and "not valid JSON" in stderr and stderr.count("\n") == 1
