"""examples/evaluate.py on the tiny synthetic dataset: a model and both baselines, data parallel = one process."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel

REPO = Path(__file__).resolve().parents[1]
EVALUATE = REPO / "examples" / "evaluate.py"
MAIN_KEYS = ("auc", "f1", "precision", "recall", "aae", "nss", "cc", "kl", "sim")
DYNAMICS_KEYS = ("ade_mean", "ade_best", "dtw_mean", "dtw_best", "displacement_mean_ratio", "displacement_jsd")


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    return {
        **os.environ,
        "HF_DATASETS_CACHE": str(tmp_path_factory.mktemp("hf_cache")),
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
    }


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("synthetic_tiny")


def run(args, env, launcher=None, check=True, cwd=REPO):
    command = (launcher or [sys.executable]) + [str(EVALUATE)] + [str(a) for a in args]
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd, timeout=600)
    if check and result.returncode != 0:
        raise AssertionError(
            f"evaluate.py failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-4000:]}"
        )
    return result


def data_args(data_dir):
    return ["--dataset_name", "synthetic", "--data_dir", data_dir, "--dataset_config", "tiny", "--split", "train"]


def test_model_row_written_as_json_and_markdown(tmp_path, env, data_dir, tiny_sigma5_model_dir):
    result = run(
        [
            "--model_name_or_path",
            tiny_sigma5_model_dir,
            *data_args(data_dir),
            "--num_samples",
            3,
            "--num_steps",
            2,
            "--output_dir",
            tmp_path,
        ],
        env,
    )
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["clips"] >= 3 and results["num_samples"] == 3 and results["sigma_px"] == 5.0
    for key in MAIN_KEYS + DYNAMICS_KEYS:
        assert key in results["metrics"], key
    assert 0.0 <= results["metrics"]["auc"] <= 1.0
    markdown = (tmp_path / "results.md").read_text()
    assert "| AUC | F1 | P | R | AAE |" in markdown and "JSD" in markdown and markdown.strip() in result.stdout
    assert (tmp_path / "frame_scores.npz").exists()
    # the tables are metrics.tables' (log-bin JSD, W1) with the dynamics reference rows; the JSON is to_dict()'s
    assert "JSD (log bins)" in markdown and "W1 (px)" in markdown
    assert "| Motionless (never moves) |" in markdown and "| Human vs human (alternating clips) |" in markdown
    assert set(results["dynamics_references"]) == {"motionless", "human_halves"}
    assert "pr_curve" in results and len(results["clip_ids"]) == results["clips"]
    json.loads((tmp_path / "results.json").read_text(), parse_constant=lambda name: pytest.fail(f"{name} in JSON"))
    # beside the dynamics table: the events table and the reliability of the uncertainty regions
    assert "(each sample) |" in markdown and "(point estimate) |" in markdown
    assert "Fixations and saccades (I-VT" in markdown and "| Recording (dataset labels) |" in markdown
    assert "Uncertainty regions (the model has no region calibration)" in markdown and "| 0.95 |" in markdown
    # the paper's layout of the dynamics row, and the sample set's energy score and CRPS
    assert "In the paper's layout (Table dynamics)" in markdown and "| Disp Mean (H: " in markdown
    assert "| energy score (px, fair) | CRPS per coordinate (px, fair) |" in markdown
    assert all(results["metrics"][key] > 0 for key in ("energy_score_fair", "crps_fair"))
    assert {"samples", "point_estimate", "labeller_on_recording", "human"} == set(results["events"]["metrics"])
    assert [row["nominal"] for row in results["reliability"]["rows"]] == [0.5, 0.6, 0.7, 0.8, 0.9, 0.95]


def test_the_time_grid_power_reaches_the_sampler_and_a_bad_one_is_one_line(
    tmp_path, env, data_dir, tiny_sigma5_model_dir
):
    common = ["--model_name_or_path", tiny_sigma5_model_dir, *data_args(data_dir), "--num_samples", 3, "--num_steps", 2]
    metrics = {}
    for power in (1, 4):
        run([*common, "--max_clips", 2, "--time_grid_power", power, "--output_dir", tmp_path / str(power)], env)
        results = json.loads((tmp_path / str(power) / "results.json").read_text())
        assert results["time_grid_power"] == power
        metrics[power] = results["metrics"]
    assert metrics[1]["displacement_mean_px"] != metrics[4]["displacement_mean_px"]  # other grid, other samples
    bad = run([*common, "--time_grid_power", 0.5], env, check=False)
    assert (
        bad.returncode == 2
        and "argument --time_grid_power: must be a number >= 1 (1: the paper's uniform grid), got 0.5" in bad.stderr
    )
    assert "Traceback" not in bad.stderr


def test_the_noise_scale_reaches_the_sampler_and_the_region_factors_and_a_bad_one_is_one_line(
    tmp_path, env, data_dir, tiny_sigma5_model_dir
):
    model = shutil.copytree(tiny_sigma5_model_dir, tmp_path / "model")
    common = ["--model_name_or_path", model, *data_args(data_dir), "--num_samples", 3, "--num_steps", 2]
    run([*common, "--max_clips", 2, "--output_dir", tmp_path / "default"], env)
    default = json.loads((tmp_path / "default" / "results.json").read_text())
    fit = ["--region_split", "validation", "--save_region_calibration", "--noise_scale", 0.5]
    run([*common, "--max_clips", 2, *fit, "--output_dir", tmp_path / "half"], env)
    half = json.loads((tmp_path / "half" / "results.json").read_text())
    assert default["noise_scale"] == 1.0 and half["noise_scale"] == 0.5
    assert half["metrics"]["displacement_mean_px"] != default["metrics"]["displacement_mean_px"]
    assert json.loads((model / "region_calibration.json").read_text())["noise_scale"] == 0.5
    again = run([*common, "--max_clips", 2, "--output_dir", tmp_path / "again"], env)  # tau 1, factors of tau 0.5
    assert "evaluate.py: note: the model's region factors were fitted on samples drawn at noise_scale 0.5" in (
        again.stdout
    )
    bad = run([*common, "--noise_scale", 0], env, check=False)
    assert (
        bad.returncode == 2
        and "argument --noise_scale: must be a number > 0 (1: the paper's x_0), got 0.0" in bad.stderr
    )
    assert "Traceback" not in bad.stderr


def test_the_region_factors_are_fitted_saved_and_read_back(tmp_path, env, data_dir, tiny_sigma5_model_dir):
    import shutil

    model = shutil.copytree(tiny_sigma5_model_dir, tmp_path / "model")
    args = ["--model_name_or_path", model, *data_args(data_dir), "--num_samples", 4, "--num_steps", 2]
    fitted = run(args + ["--region_split", "validation", "--save_region_calibration"], env, cwd=tmp_path)
    saved = json.loads((model / "region_calibration.json").read_text())
    assert saved["version"] == 2 and saved["levels"] == [0.5, 0.6, 0.7, 0.8, 0.9, 0.95]
    assert len(saved["factors"]) == 6 and saved["exchangeable"] == "frames" and saved["min_radius_px"] == 1.0
    assert saved["split"] == "synthetic / validation" and saved["frames"] > 0
    # the coverage the factors reach on the fitting frames and on the evaluated split are in the file
    assert all(c >= q for c, q in zip(saved["coverage_calibrated"], saved["levels"]))
    assert saved["held_out"]["split"] == "synthetic / train" and len(saved["held_out"]["coverage_calibrated"]) == 6
    assert f"wrote the region factors (0.5: {saved['factors'][0]:.4f}," in fitted.stdout
    assert "fitted on synthetic / validation" in fitted.stdout
    again = run(args + ["--output_dir", tmp_path / "again"], env)
    assert "the model folder's region_calibration.json (synthetic / validation)" in again.stdout
    reliability = json.loads((tmp_path / "again" / "results.json").read_text())["reliability"]
    assert reliability["calibration"]["factors"] == saved["factors"]
    assert [row["factor"] for row in reliability["rows"]] == saved["factors"]
    assert [row["calibrated"] for row in reliability["rows"]] == saved["held_out"]["coverage_calibrated"]
    refused = run(args + ["--save_region_calibration"], env, check=False)
    assert refused.returncode == 2 and "--save_region_calibration needs --region_split" in refused.stderr


@pytest.mark.parametrize("baseline", ["center_bias", "random_walk", "random_walk_free"])
def test_baselines(tmp_path, env, data_dir, baseline):
    run(
        [
            "--baseline",
            baseline,
            *data_args(data_dir),
            "--train_split",
            "train",
            "--sigma_px",
            5,
            "--output_dir",
            tmp_path,
        ],
        env,
    )
    results = json.loads((tmp_path / "results.json").read_text())
    assert all(key in results["metrics"] for key in MAIN_KEYS)
    # every baseline has trajectories (Center Bias its centre): dynamics, proper scores and the events table
    assert all(key in results["metrics"] for key in ("ade_mean", "energy_score_fair", "crps_plain"))
    assert "(each sample) |" in (tmp_path / "results.md").read_text() and "events" in results
    if baseline == "center_bias":  # one point per frame: both estimates are its distance to the truth
        assert results["metrics"]["energy_score_fair"] == results["metrics"]["energy_score_plain"]
        assert "reliability" not in results


def test_results_are_written_by_default_and_the_command_says_where(tmp_path, env, data_dir):
    result = run(["--baseline", "center_bias", *data_args(data_dir), "--sigma_px", 5], env, cwd=tmp_path)
    folder = tmp_path / "runs" / "eval" / "center_bias-synthetic-tiny-train"
    assert json.loads((folder / "results.json").read_text())["method"] == "center_bias"
    assert (folder / "results.md").is_file() and (folder / "frame_scores.npz").is_file()
    assert f"wrote {Path('runs/eval/center_bias-synthetic-tiny-train/results.json')}" in result.stdout


def test_two_processes_give_the_one_process_result(tmp_path, env, data_dir, tiny_sigma5_model_dir):
    args = ["--model_name_or_path", tiny_sigma5_model_dir, *data_args(data_dir), "--num_samples", 3, "--num_steps", 2]
    run(args + ["--output_dir", tmp_path / "one"], env)
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29541"]
    run(args + ["--output_dir", tmp_path / "two"], {**env, "ACCELERATE_USE_CPU": "true"}, launcher=torchrun)
    one = json.loads((tmp_path / "one" / "results.json").read_text())["metrics"]
    two = json.loads((tmp_path / "two" / "results.json").read_text())["metrics"]
    assert one.keys() == two.keys()
    for key in one:
        assert one[key] == pytest.approx(two[key], rel=1e-6, abs=1e-9), key


def test_a_folder_that_is_not_a_gazeflow_model(tmp_path, env, data_dir):
    (tmp_path / "empty").mkdir()
    result = run(["--model_name_or_path", tmp_path / "empty", *data_args(data_dir)], env, check=False)
    assert result.returncode == 1 and "--model_name_or_path" in result.stderr and "not a GazeFlow" in result.stderr


def test_online_needs_a_causal_model_and_scores_it_frame_by_frame(tmp_path, env, data_dir, tiny_sigma5_model_dir):
    result = run(["--model_name_or_path", tiny_sigma5_model_dir, *data_args(data_dir), "--online"], env, check=False)
    assert result.returncode == 1 and "--online needs a causal model" in result.stderr
    causal = tmp_path / "causal"
    torch.manual_seed(0)
    GazeFlowModel(GazeFlowConfig.tiny(causal=True, heatmap_sigma=5.0)).save_pretrained(causal)
    run(
        [
            "--model_name_or_path",
            causal,
            *data_args(data_dir),
            "--num_samples",
            3,
            "--num_steps",
            2,
            "--max_clips",
            2,
            "--online",
            "--output_dir",
            tmp_path / "out",
        ],
        env,
    )
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["online"] is True and results["clips"] == 2 and 0.0 <= results["metrics"]["auc"] <= 1.0


def test_dataset_options_reach_the_builder_and_the_protocols_own_cannot_be_set(tmp_path, env, tiny_sigma5_model_dir):
    """--dataset_options num_clips=5,seed=11 on the tiny config (6 clips) renders another draw: 5 clips, split
    by the builder's fractions; the results and a region calibration fitted on it record the options. windows= is
    the protocol's and is refused."""
    data = tmp_path / "other_draw"
    options = ["--dataset_options", "num_clips=5,seed=11,validation_fraction=0.2,test_fraction=0.2"]
    run(["--baseline", "center_bias", *data_args(data), *options, "--output_dir", tmp_path / "out"], env)
    manifest = json.loads((data / "synthetic_gaze.json").read_text())
    assert manifest["settings"]["num_clips"] == 5 and manifest["settings"]["seed"] == 11
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["dataset_options"] == {"num_clips": 5, "seed": 11, "validation_fraction": 0.2, "test_fraction": 0.2}
    assert results["clips"] == 3  # the train split: 5 clips less one validation, one test
    model = shutil.copytree(tiny_sigma5_model_dir, tmp_path / "model")
    fit = ["--model_name_or_path", model, *data_args(data), *options, "--num_samples", 4, "--num_steps", 2]
    run(fit + ["--region_split", "validation", "--save_region_calibration", "--output_dir", tmp_path / "fit"], env)
    saved = json.loads((model / "region_calibration.json").read_text())
    draw = "(num_clips=5,seed=11,validation_fraction=0.2,test_fraction=0.2)"
    assert saved["split"] == f"synthetic / validation {draw}" and saved["clips"] == 1
    assert saved["held_out"]["split"] == f"synthetic / train {draw}" and saved["held_out"]["clips"] == 3
    refused = run(["--baseline", "center_bias", *data_args(data), "--dataset_options", "windows=all"], env, check=False)
    assert refused.returncode == 2 and "--dataset_options cannot set windows" in refused.stderr
    malformed = run(["--baseline", "center_bias", *data_args(data), "--dataset_options", "seed"], env, check=False)
    assert malformed.returncode == 2 and "--dataset_options: expected key=value, got 'seed'" in malformed.stderr
