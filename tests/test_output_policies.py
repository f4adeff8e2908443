"""When each ``gazeflow`` command may replace a file already at an output's name (commands/output_policies.py): its
own earlier outputs as before, anything else (or a link) only with ``--overwrite``, and an export folder holding
what an export does not write never; and video names that never lead a batch out of its folder."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from transformers_gazeflow.commands import output_policies
from transformers_gazeflow.commands.batch import INDEX_NAME, PARTS_DIR, output_folders
from transformers_gazeflow.commands.output_policies import (
    PREDICTION_FILES,
    check_export_folder,
    check_output_files,
    check_prediction_folder,
)
from transformers_gazeflow.data.output_safety import UnsafeOutputError
from transformers_gazeflow.outputs import readouts, writers

SUMMARY = {"video": "a.mp4", "frames": 3, "fps": 24.0, "timings": {"predict_s": 0.5}}


def test_the_policies_name_the_writers_files():
    assert output_policies.FIXATIONS_NAME == writers.FIXATIONS_NAME
    assert output_policies.SACCADES_NAME == writers.SACCADES_NAME
    assert output_policies.SCANPATHS_NAME == readouts.SCANPATHS_NAME
    from transformers_gazeflow.commands.stream import FIELDS, REGION_FIELDS

    assert output_policies.STREAM_FIELDS == FIELDS
    assert output_policies.STREAM_REGION_FIELDS == REGION_FIELDS


def test_a_prediction_replaces_an_earlier_prediction_and_nothing_else(tmp_path):
    check_prediction_folder(tmp_path / "new")  # nothing there
    (tmp_path / "notes.txt").write_text("mine")
    check_prediction_folder(tmp_path)  # other files are never touched: nothing to refuse
    (tmp_path / "gaze.csv").write_text("the wearer's tracker\n")
    with pytest.raises(UnsafeOutputError) as caught:
        check_prediction_folder(tmp_path)
    assert str(caught.value) == (
        f"--output-dir {tmp_path}: gaze.csv is not an earlier prediction's ({tmp_path / 'summary.json'}: no such file "
        "(a prediction's summary.json)); pass --overwrite to replace them, or choose another folder"
    )
    check_prediction_folder(tmp_path, overwrite=True)
    (tmp_path / "summary.json").write_text(json.dumps({**SUMMARY, "frames": "3"}))
    with pytest.raises(UnsafeOutputError, match=r"summary.json: frames: expected an integer >= 0, got '3'\)"):
        check_prediction_folder(tmp_path)
    (tmp_path / "summary.json").write_text(json.dumps(SUMMARY))
    check_prediction_folder(tmp_path)  # an earlier prediction: replaced as before
    os.symlink(tmp_path / "notes.txt", tmp_path / "overlay.mp4")
    with pytest.raises(UnsafeOutputError, match=r": overlay.mp4 is a symbolic link; pass --overwrite"):
        check_prediction_folder(tmp_path)
    with pytest.raises(UnsafeOutputError, match="demo_input.mp4"):
        (tmp_path / "overlay.mp4").unlink()
        (tmp_path / "summary.json").unlink()
        (tmp_path / "demo_input.mp4").write_bytes(b"video")
        check_prediction_folder(tmp_path, extra=("demo_input.mp4",))
    assert set(PREDICTION_FILES) == {"overlay.mp4", "gaze.csv", "fixations.csv", "saccades.csv"} | {
        "scanpaths.json",
        "summary.json",
    }


def test_stream_and_calibrate_outputs_replace_only_their_own_files(tmp_path):
    stream_csv, summary, calib, other = (tmp_path / name for name in ("s.csv", "s.json", "c.json", "other.txt"))
    stream_csv.write_text(",".join(output_policies.STREAM_FIELDS) + "\n0,0.0,0.5\n")
    summary.write_text(
        json.dumps({"source": "a.mp4", "backend": "torch", "stopped": "end", "frames": 1, "latency_ms": {}})
    )
    calib.write_text(json.dumps({"format": "gazeflow-wearer-calibration"}))
    other.write_text("precious")
    check_output_files([("--csv", stream_csv, "stream --csv"), ("--summary", summary, "stream --summary")])
    check_output_files([("--output", calib, "calibrate"), ("--csv", tmp_path / "new.csv", "stream --csv")])
    region_csv = tmp_path / "region.csv"  # a stream of a model with a region calibration: one more column
    region_csv.write_text(",".join(output_policies.STREAM_FIELDS + ("region90_px",)) + "\n0,0.0,0.5\n")
    check_output_files([("--csv", region_csv, "stream --csv")])
    for argument, command in (("--csv", "stream --csv"), ("--summary", "stream --summary"), ("--output", "calibrate")):
        with pytest.raises(UnsafeOutputError) as caught:
            check_output_files([(argument, other, command)])
        word = command.split()[0]
        assert str(caught.value) == (
            f"{argument} {other}: exists and was not written by gazeflow {word}; pass --overwrite to replace it, or "
            "choose another path"
        )
        check_output_files([(argument, other, command)], overwrite=True)
    with pytest.raises(UnsafeOutputError, match="s.csv: exists and was not written by gazeflow calibrate"):
        check_output_files([("--output", stream_csv, "calibrate")])


def test_an_export_folder_is_new_empty_or_an_earlier_export(tmp_path):
    check_export_folder(tmp_path / "new")
    check_export_folder(tmp_path)  # empty
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(UnsafeOutputError, match=r"holds an export's file names but no earlier export"):
        check_export_folder(tmp_path)
    check_export_folder(tmp_path, overwrite=True)
    (tmp_path / "streamer.json").write_text(json.dumps({"format": "gazeflow-streamer-step/1"}))
    check_export_folder(tmp_path)
    os.symlink(tmp_path / "config.json", tmp_path / "step.onnx")
    with pytest.raises(UnsafeOutputError, match=r"but step.onnx is a link \(its streamer.json\); pass --overwrite"):
        check_export_folder(tmp_path)
    (tmp_path / "notes").mkdir()
    for overwrite in (False, True):
        with pytest.raises(UnsafeOutputError, match=r"holds notes, which an export does not write"):
            check_export_folder(tmp_path, overwrite=overwrite)
    with pytest.raises(UnsafeOutputError, match="is an existing file, expected a folder"):
        check_export_folder(tmp_path / "config.json")


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (["...mp4", "..mp4", "a.mp4"], ["__", "_", "a"]),
        (["index.csv.mp4", ".gazeflow_index.mp4", "b.mp4"], [INDEX_NAME, PARTS_DIR, "b"]),
        (["x/a.mp4", "y/a.mp4"], ["a", "a"]),
    ],
)
def test_video_names_give_folders_inside_the_output_folder(tmp_path, names, expected):
    videos = [tmp_path / name for name in names]
    folders = output_folders(videos, Path("out"))
    assert all(folder.parent == Path("out") for folder in folders)
    assert len(set(folders)) == len(folders)
    for folder, stem in zip(folders, expected):
        reserved = stem in (INDEX_NAME, PARTS_DIR) or expected.count(stem) > 1
        assert (
            folder.name == stem
            if not reserved
            else (folder.name.startswith(stem + "-") and len(folder.name) == len(stem) + 9)
        )


def test_the_example_scripts_never_write_over_the_model_they_read(tmp_path, capsys):
    """train.py's final model and evaluate.py's results may sit beside the model folder's files (an evaluation in
    its run's folder), never over one of them; refused before anything starts."""
    from .conftest import REPO
    from .script_loading import load_script

    model = tmp_path / "run"
    model.mkdir()
    for name in ("config.json", "model.safetensors", "results.json"):
        (model / name).write_text("the user's\n")
    before = {path.name: path.read_text() for path in model.iterdir()}
    train = load_script(REPO / "examples" / "train.py", "train_output_check")
    argv = ["--dataset_name", "synthetic", "--data_dir", str(tmp_path / "data"), "--model_name_or_path", str(model)]
    assert train.cli([*argv, "--output_dir", str(model)]) == 1
    assert capsys.readouterr().err.strip() == (
        f"train.py: error: --output_dir {model / 'config.json'}: is the input --model_name_or_path "
        f"{model / 'config.json'}; an output may not overwrite what the run reads (choose another path)"
    )
    evaluate = load_script(REPO / "examples" / "evaluate.py", "evaluate_output_check")
    with pytest.raises(UnsafeOutputError, match=r"--output_dir .*results.json: is the input --model_name_or_path "):
        evaluate.main([*argv, "--output_dir", str(model)])
    assert {path.name: path.read_text() for path in model.iterdir()} == before
    evaluate.check_result_outputs(evaluate.parse_args([*argv, "--output_dir", str(model / "eval")]))  # beside: fine


def test_calibrate_and_predict_never_write_over_their_camera_calibration(tmp_path):
    """``gazeflow calibrate --camera`` and an Aria calibration given to ``--intrinsics`` are inputs like the pinhole
    intrinsics file: no output may be one of them."""
    import argparse

    from transformers_gazeflow.commands.output_policies import check_calibration_output
    from transformers_gazeflow.commands.readout_arguments import FISHEYE_CALIBRATION, intrinsics

    camera = tmp_path / "camera.json"
    camera.write_text(json.dumps({"model": "FISHEYE624", "params": [0.0] * 15}))
    args = argparse.Namespace(
        video=str(tmp_path / "v.mp4"), gaze=str(tmp_path / "g.csv"), camera=str(camera), output=str(camera)
    )
    with pytest.raises(UnsafeOutputError, match=r"^--output .*camera.json: is the input --camera "):
        check_calibration_output(args, "org/hub-model")
    assert json.loads(camera.read_text())["model"] == "FISHEYE624"
    given = intrinsics(str(camera))
    assert given == {FISHEYE_CALIBRATION: str(camera)} and given.file == str(camera)
