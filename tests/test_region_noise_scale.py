"""A model's region factors hold at the tau they were fitted at: ``region_calibration.json`` says its
``noise_scale`` (checked by the file's schema; absent: 1), and the pipeline, ``gazeflow predict`` and ``gazeflow
stream`` warn when they sample at another."""

import io
import json
import shutil
import warnings
from contextlib import redirect_stderr, redirect_stdout

import pytest
import torch

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel, GazeFlowVideoProcessor
from transformers_gazeflow.commands.cli import main
from transformers_gazeflow.gaze.regions import RegionCalibration

from .pipeline_fixtures import single_torch_thread, synthetic_clip_mp4, tiny_model_dir  # noqa: F401

RECORD = {"format": "gazeflow-region-calibration", "version": 2, "exchangeable": "frames", "levels": [0.5, 0.9],
          "factors": [1.5, 2.5], "min_radius_px": 1.0}  # fmt: skip


def test_the_file_says_its_noise_scale_and_the_schema_checks_it():
    assert RegionCalibration.from_record(RECORD).noise_scale == 1.0  # written before tau existed: the paper's x_0
    assert RegionCalibration.from_record({**RECORD, "noise_scale": 0.8}).noise_scale == 0.8
    assert RegionCalibration.from_record({"scale": 1.2, "noise_scale": 0.7}).noise_scale == 0.7  # version 1 too
    for bad in (0, -0.5, "0.8", None, True):
        with pytest.raises(ValueError, match=r"^model folder/region_calibration.json: noise_scale"):
            RegionCalibration.from_record({**RECORD, "noise_scale": bad}, "model folder/region_calibration.json")
    calibration = RegionCalibration.from_record({**RECORD, "noise_scale": 0.8})
    assert calibration.sampler_mismatch(0.8) is None
    assert "fitted on samples drawn at noise_scale 0.8, these are drawn at 1:" in calibration.sampler_mismatch(1.0)
    assert calibration.to_record()["noise_scale"] == 0.8  # written back


def folder_fitted_at(source, destination, noise_scale):
    shutil.copytree(source, destination)
    (destination / "region_calibration.json").write_text(json.dumps({**RECORD, "noise_scale": noise_scale}))
    return destination


def mismatches(caught) -> list[str]:
    return [str(w.message) for w in caught if "region factors were fitted" in str(w.message)]


def test_the_pipeline_warns_when_it_samples_at_another_tau(tmp_path, synthetic_clip_mp4, tiny_model_dir):
    from transformers import pipeline

    import transformers_gazeflow  # noqa: F401  (registers the task)

    path, _ = synthetic_clip_mp4
    gaze = pipeline("egocentric-gaze", model=str(folder_fitted_at(tiny_model_dir, tmp_path / "model", 0.5)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gaze(str(path), num_samples=3, num_steps=1, return_uncertainty=True, noise_scale=0.5)
    assert mismatches(caught) == []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gaze(str(path), num_samples=3, num_steps=1, return_uncertainty=True)  # the config's tau, 1
    assert len(mismatches(caught)) == 1 and "drawn at noise_scale 0.5, these are drawn at 1" in mismatches(caught)[0]


def run_command(*argv):
    """The command's status-0 run; its warning lines about the region factors (one line each)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        status = main([str(a) for a in argv])
    assert status == 0, err.getvalue()
    lines = err.getvalue().splitlines()
    assert not any("Warning" in line or line.startswith("  ") for line in lines)  # no file:line or source echo
    return [line for line in lines if "region factors were fitted" in line]


def test_predict_warns_when_it_samples_at_another_tau(tmp_path, synthetic_clip_mp4, tiny_model_dir):
    path, _ = synthetic_clip_mp4
    folder = folder_fitted_at(tiny_model_dir, tmp_path / "model", 0.5)
    common = ["predict", path, "--model", folder, "-q", "--no-overlay", "--num-samples", "3", "--num-steps", "1"]
    assert run_command(*common, "-o", tmp_path / "same", "--noise-scale", "0.5") == []
    (line,) = run_command(*common, "-o", tmp_path / "other")
    assert line.startswith("gazeflow: warning: the model's region factors were fitted on samples drawn at noise_scale")


def test_stream_warns_when_it_samples_at_another_tau(tmp_path, synthetic_clip_mp4):
    path, _ = synthetic_clip_mp4
    source = tmp_path / "causal"
    torch.manual_seed(0)
    GazeFlowModel(GazeFlowConfig.tiny(causal=True)).save_pretrained(source)
    GazeFlowVideoProcessor(size=32).save_pretrained(source)
    folder = folder_fitted_at(source, tmp_path / "model", 0.5)
    assert run_command("stream", path, "--model", folder, "--noise-scale", "0.5") == []
    (line,) = run_command("stream", path, "--model", folder)
    assert line.startswith("gazeflow: warning: the model's region factors were fitted")
