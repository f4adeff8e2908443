"""Choosing the sampling temperature tau on a validation split (``training.noise_scale_choice`` and
``examples/choose_noise_scale.py``).

The rule is checked on hand-made figures. The measurement is checked on a known process: with the velocity
network's output head at zero every sample is its x_0 = tau e (no step moves it), so while no sample reaches the
frame's edge the samples' steps are exactly proportional to tau, and halving tau halves the median step ratio."""

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.script_loading import load_script
from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
from transformers_gazeflow.training.noise_scale_choice import DynamicsCheck, choose_noise_scale

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
RECORDED = 0.136  # a recording's saccade share


def check(tau: float, step_ratio: float, share: float) -> DynamicsCheck:
    return DynamicsCheck(tau, step_ratio, 0.05, share, RECORDED)


def test_the_largest_tau_that_meets_both_bounds_is_chosen():
    checks = [
        check(1.0, 1.62, 0.227),  # steps too large and too many saccades (1.67x)
        check(0.85, 1.31, 0.132),  # steps too large
        check(0.8, 1.24, 0.108),  # passes: share 0.79x
        check(0.7, 1.12, 0.072),  # passes: too few saccades (0.53x), reported but no bound of the rule
        check(0.6, 1.00, 0.110),  # passes too, but smaller than 0.8
    ]
    assert [c.passes() for c in checks] == [False, False, True, True, True]
    assert [c.too_few_saccades for c in checks] == [False, False, False, True, False]
    assert choose_noise_scale(checks) == 0.8
    assert choose_noise_scale(list(reversed(checks))) == 0.8  # the largest, not the first listed
    assert choose_noise_scale(checks[:2]) is None
    # many saccades at a small step: the share bound alone decides
    assert choose_noise_scale([check(0.9, 1.1, 0.2), check(0.8, 1.0, 0.17)]) == 0.8


def test_the_rule_bounds_are_inclusive_and_a_nan_figure_fails():
    assert check(0.9, 1.25, 1.33 * RECORDED).passes()  # both at their bound
    assert not check(0.9, 1.2501, RECORDED).passes()
    assert not check(0.9, 1.0, 1.34 * RECORDED).passes()
    assert not check(0.9, math.nan, RECORDED).passes()
    assert not DynamicsCheck(0.9, 1.0, 0.0, 0.1, 0.0).passes()  # no recorded saccade: the ratio is undefined
    assert check(0.9, 1.4, RECORDED).passes(max_step_ratio=1.5)
    assert not check(0.9, 1.0, RECORDED).passes(max_share_ratio=0.9)
    assert check(0.8, 1.24, 0.108).to_dict()["share_ratio"] == pytest.approx(0.108 / RECORDED)
    assert check(0.8, 1.0, 0.75 * RECORDED).too_few_saccades is False


@pytest.fixture(scope="module")
def still_model_dir(tmp_path_factory):
    """A tiny model whose velocity is zero everywhere (its samples are their x_0), saved as a model folder."""
    folder = tmp_path_factory.mktemp("still_model")
    torch.manual_seed(0)
    model = GazeFlowModel(GazeFlowConfig.tiny(use_lora=False, num_samples=4, num_steps=2))
    with torch.no_grad():
        model.velocity_network.output_head.weight.zero_()
        model.velocity_network.output_head.bias.zero_()
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("noise_scale_data")
    return ["--dataset_name", "synthetic", "--data_dir", str(root / "synthetic_tiny"), "--dataset_config", "tiny",
            "--cache_dir", str(root / "hf_cache"), "--split", "train", "--max_clips", "2"]  # fmt: skip


def choose(argv):
    return load_script(EXAMPLES / "choose_noise_scale.py", "choose_noise_scale_script").main(argv)


def test_the_steps_scale_with_tau_and_the_search_stops_at_the_first_pass(tmp_path, still_model_dir, data):
    model = ["--model_name_or_path", str(still_model_dir)]
    never = ["--max_step_ratio", "1e-9"]  # no candidate passes: every one is measured
    assert choose(model + data + never + ["--noise_scales", "0.1", "0.2", "--output_dir", str(tmp_path / "a")]) == 0
    record = json.loads((tmp_path / "a" / "noise_scale.json").read_text())
    assert [row["noise_scale"] for row in record["rows"]] == [0.2, 0.1] and record["chosen"] is None
    large, small = record["rows"]
    assert small["median_step_ratio"] == pytest.approx(0.5 * large["median_step_ratio"], rel=1e-4)
    assert large["recorded_saccade_share"] == small["recorded_saccade_share"] > 0
    always = ["--max_share_ratio", "1000", "--max_step_ratio", "1000"]
    assert choose(model + data + always + ["--noise_scales", "0.1", "0.2", "--output_dir", str(tmp_path / "b")]) == 0
    record = json.loads((tmp_path / "b" / "noise_scale.json").read_text())
    assert [row["noise_scale"] for row in record["rows"]] == [0.2] and record["chosen"] == 0.2
    assert json.loads((still_model_dir / "config.json").read_text()).get("noise_scale", 1.0) == 1.0  # no --write


def test_window_frames_is_how_many_frames_of_each_clip_are_sampled(tmp_path, still_model_dir, data, monkeypatch):
    from transformers_gazeflow.training import noise_scale_choice

    seen = []
    real = noise_scale_choice.predict_clips

    def recording(model, examples, *args, **kwargs):
        seen.append((kwargs["window"], [int(example["num_frames"]) for example in examples]))
        return real(model, examples, *args, **kwargs)

    monkeypatch.setattr(noise_scale_choice, "predict_clips", recording)
    argv = ["--model_name_or_path", str(still_model_dir)] + data + ["--noise_scales", "0.5"]
    assert choose(argv + ["--window_frames", "8", "--output_dir", str(tmp_path / "short")]) == 0
    assert choose(argv + ["--output_dir", str(tmp_path / "protocol")]) == 0
    (short, short_frames), (protocol, protocol_frames) = seen
    assert short == 8 and short_frames == [8, 8] and protocol == 64 and max(protocol_frames) > 8
    record = json.loads((tmp_path / "short" / "noise_scale.json").read_text())
    assert record["window_frames"] == 8


def test_write_sets_noise_scale_and_nothing_else(tmp_path, still_model_dir, data):
    folder = tmp_path / "model"
    folder.mkdir()
    for path in still_model_dir.iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    before = {path.name: path.read_bytes() for path in folder.iterdir()}
    always = ["--max_share_ratio", "1000", "--max_step_ratio", "1000", "--noise_scales", "0.3"]
    argv = ["--model_name_or_path", str(folder)] + data + always + ["--output_dir", str(tmp_path / "out"), "--write"]
    assert choose(argv) == 0
    config = json.loads((folder / "config.json").read_text())
    old = json.loads(before["config.json"])
    assert config == {**old, "noise_scale": 0.3}
    assert all((folder / name).read_bytes() == content for name, content in before.items() if name != "config.json")
    assert GazeFlowModel.from_pretrained(folder).config.noise_scale == 0.3


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--noise_scales", "0.8", "0"], "argument --noise_scales: must be a number > 0 (1: the paper's x_0), got 0.0"),
        (["--max_share_ratio", "0"], "--max_share_ratio must be a number > 0, got 0.0"),
        (["--window_frames", "0"], "--window_frames must be >= 1, got 0"),
        (["--write"], "--write needs --model_name_or_path to be a local model folder"),
    ],
)
def test_bad_options_are_usage_errors(tmp_path, capsys, extra, message):
    with pytest.raises(SystemExit) as exited:
        choose(["--dataset_name", "synthetic", "--output_dir", str(tmp_path)] + extra)
    assert exited.value.code == 2 and message in capsys.readouterr().err


def test_a_bad_option_is_one_line_from_the_command(tmp_path):
    argv = ["--dataset_name", "synthetic", "--output_dir", str(tmp_path), "--noise_scales", "-1"]
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "choose_noise_scale.py"), *argv], capture_output=True, text=True
    )
    assert result.returncode == 2 and "argument --noise_scales: must be a number > 0" in result.stderr
    assert "Traceback" not in result.stderr


def _walk_clip(index: int, frames: int) -> dict:
    """A recorded gaze walk of ``frames`` frames (fixation-labelled, tracked but for two frames) at 128x96."""
    rng = np.random.default_rng(index)
    gaze = np.clip(0.5 + np.cumsum(rng.normal(0, 0.01, (frames, 2)), axis=0), 0.05, 0.95)
    valid = np.ones(frames, bool)
    valid[[5, 40]] = False
    return {"clip_id": f"walk{index}", "gaze": gaze, "gaze_type": np.ones(frames, np.int64), "valid": valid,
            "width": 128, "height": 96, "fps": 24.0}  # fmt: skip


def test_the_step_figures_are_the_evaluators_within_the_protocol_window():
    from transformers_gazeflow.training.evaluation import score
    from transformers_gazeflow.training.noise_scale_choice import step_statistics

    examples = [_walk_clip(index, 64) for index in range(3)]
    rng = np.random.default_rng(9)
    samples = [np.clip(e["gaze"] + rng.normal(0, 0.02, (4, 64, 2)), 0, 1) for e in examples]
    evaluated = score(examples, samples).metrics
    measured = step_statistics(examples, samples)
    for key in ("displacement_median_ratio", "displacement_mean_ratio", "displacement_log_jsd"):
        assert measured[key] == evaluated[key]


def test_the_step_figures_count_every_frame_sampled_not_only_the_first_64():
    from transformers_gazeflow.training.evaluation import score
    from transformers_gazeflow.training.noise_scale_choice import step_statistics

    examples = [_walk_clip(index, 128) for index in range(2)]
    # samples that follow the recorded gaze for 64 frames, then stand still: over the protocol window they step
    # exactly as the recording does; over the whole clip half of their steps are 0, so their median step is less
    samples = [np.repeat(e["gaze"][None], 3, axis=0) for e in examples]
    for sample in samples:
        sample[:, 64:] = sample[:, 63:64]
    assert score(examples, samples).metrics["displacement_median_ratio"] == 1.0
    assert step_statistics(examples, samples)["displacement_median_ratio"] < 0.1


def test_the_measurement_leaves_the_model_config_as_it_was(still_model_dir, data, monkeypatch):
    from transformers_gazeflow.analysis.capture import load_analysis_model, load_first_windows
    from transformers_gazeflow.training import noise_scale_choice

    model, processor = load_analysis_model(str(still_model_dir), None)
    model.config.noise_scale = 0.9
    examples = load_first_windows("synthetic", data[3], "train", "tiny", 64, 1, data[7])
    noise_scale_choice.measure_dynamics(model, examples, processor, 0.4, 2, 1, "euler")
    assert model.config.noise_scale == 0.9

    def failing(*args, **kwargs):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(noise_scale_choice, "predict_clips", failing)
    with pytest.raises(RuntimeError):
        noise_scale_choice.measure_dynamics(model, examples, processor, 0.4, 2, 1, "euler")
    assert model.config.noise_scale == 0.9


def test_dataset_options_reach_the_builder_and_bad_ones_name_the_option(tmp_path, still_model_dir, data):
    from transformers_gazeflow.analysis.capture import dataset_options_of

    assert dataset_options_of(argparse.Namespace(dataset_options="seed=7,num_clips=400")) == {
        "seed": 7,
        "num_clips": 400,
    }
    assert dataset_options_of(argparse.Namespace(dataset_options=None)) == {}
    with pytest.raises(ValueError, match=r"^--dataset_options: expected key=value, got 'seed'$"):
        dataset_options_of(argparse.Namespace(dataset_options="seed"))
    with pytest.raises(ValueError, match=r"^--dataset_options cannot set window_frames, windows:"):
        dataset_options_of(argparse.Namespace(dataset_options="windows=all,window_frames=8"))
    model = ["--model_name_or_path", str(still_model_dir), "--max_step_ratio", "1e-9", "--noise_scales", "0.2"]
    runs = {}
    other = [*data[:3], str(tmp_path / "seed3_draw"), *data[4:], "--dataset_options", "seed=3"]  # a draw of its own
    for name, dataset in (("default", data), ("other_draw", other)):
        assert choose(model + dataset + ["--output_dir", str(tmp_path / name)]) == 0
        runs[name] = json.loads((tmp_path / name / "noise_scale.json").read_text())
    assert (
        runs["other_draw"]["split"] == "synthetic / train (seed=3)" and runs["default"]["split"] == "synthetic / train"
    )
    assert runs["other_draw"]["rows"][0]["median_step_ratio"] != runs["default"]["rows"][0]["median_step_ratio"]
