"""examples/dynamics_probe.py: the true process it is scored against, its figures, and a tiny end-to-end run."""

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.script_loading import load_script
from transformers_gazeflow.data.synthetic_tasks import saccade_frames, simulate_fixation_saccade

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "examples" / "dynamics_probe.py"
TINY = [
    "--max_train_steps",
    "3",
    "--num_warmup_steps",
    "1",
    "--eval_windows",
    "2",
    "--num_samples",
    "2",
    "--reference_windows",
    "30",
    "--num_steps",
    "1",
    "2",
    "--config_overrides",
    "hidden_size=32,num_hidden_layers=1,intermediate_size=64",
]


@pytest.fixture(scope="module")
def probe():
    module = load_script(SCRIPT, "dynamics_probe", register=True)  # its dataclasses look their module up by name
    yield module
    del sys.modules["dynamics_probe"]


def test_the_true_process_has_drifting_fixations_and_main_sequence_saccades():
    windows = simulate_fixation_saccade(np.random.default_rng(0), 400, 16)
    assert windows.shape == (400, 16, 2) and np.isfinite(windows).all()
    assert windows.min() > 0.0 and windows.max() < 1.0
    steps = np.linalg.norm(np.diff(windows, axis=1), axis=-1).ravel()
    assert 0.002 < np.median(steps) < 0.004  # fixation frames: drift + jitter
    assert 0.012 < steps.mean() < 0.03  # saccades make the mean several times the median
    assert (steps > 0.03).mean() > 0.05  # and there are saccade frames
    again = simulate_fixation_saccade(np.random.default_rng(0), 400, 16)
    np.testing.assert_array_equal(windows, again)
    # the main sequence: longer saccades last longer, a small one lasts one frame at 24 fps
    assert saccade_frames(0.05, 24.0) == 1
    assert saccade_frames(0.5, 24.0) > saccade_frames(0.1, 24.0)
    assert saccade_frames(0.5, 240.0) == math.floor((21 + 2.2 * 30) * 0.24 + 0.5)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(num_windows=-1, num_frames=16), "num_windows"),
        (dict(num_windows=2, num_frames=1), "num_frames"),
        (dict(num_windows=2.5, num_frames=16), "num_windows"),
    ],
)
def test_the_true_process_refuses_bad_sizes(kwargs, message):
    with pytest.raises(ValueError, match=message):
        simulate_fixation_saccade(np.random.default_rng(0), **kwargs)


def test_figures_of_the_references(probe):
    true_steps = np.abs(np.random.default_rng(1).lognormal(-6, 1.0, 5000))
    same = probe.step_figures(true_steps, true_steps)
    assert same["median_ratio"] == 1.0 and same["mean_ratio"] == 1.0
    assert same["jsd_linear"] == pytest.approx(0.0, abs=1e-12) and same["jsd_log"] == pytest.approx(0.0, abs=1e-12)
    assert same["w1_ratio"] == pytest.approx(0.0, abs=1e-12)
    still = probe.step_figures(np.zeros(1000), true_steps)
    assert still["median_ratio"] == 0.0 and still["w1_ratio"] == pytest.approx(1.0)
    # the linear bins put a motionless trajectory and most true steps in the same first bin; the log bins do not
    assert still["jsd_log"] > 0.6 > still["jsd_linear"]
    twice = probe.step_figures(2 * true_steps, true_steps)
    assert twice["median_ratio"] == pytest.approx(2.0) and twice["w1_ratio"] == pytest.approx(1.0)
    assert 0.02 < twice["jsd_log"] < still["jsd_log"]


def test_a_tiny_run_prints_every_row(probe, capsys):
    assert probe.main(TINY) == 0
    out = capsys.readouterr().out
    table = [line for line in out.splitlines() if line.startswith("| ")]
    rows = {line.split(" | ")[0][2:] + " S=" + line.split(" | ")[1]: line for line in table[1:]}
    assert set(rows) == {
        "true process (independent draw: the floor) S=-",
        "motionless S=-",
        "flow_matching (uniform s) S=1",
        "flow_matching (uniform s) S=2",
        "regression S=-",
    }
    for line in table[1:]:
        values = [float(cell.split(" ")[0]) for cell in line.strip("| ").split(" | ")[5:]]
        assert len(values) == 5 and all(np.isfinite(values)), line
    assert rows["motionless S=-"].split(" | ")[-1].strip(" |") == "1.000"  # W1 of standing still = the mean step
    assert "flow_matching (uniform s) seed 0: 3 steps" in out and "CPU s" in out


def test_each_time_sampling_is_its_own_flow_matching_run(probe, capsys):
    assert (
        probe.main(TINY + ["--objectives", "flow_matching", "--flow_time_sampling", "uniform", "late_quadratic"]) == 0
    )
    out = capsys.readouterr().out
    names = {line.split(" | ")[0][2:] for line in out.splitlines() if line.startswith("| ")}
    assert {"flow_matching (uniform s)", "flow_matching (late_quadratic s)"} <= names
    assert "regression" not in names
    args = probe.parse_args(TINY + ["--flow_time_sampling", "logit_normal"])
    variant = probe.Variant("flow_matching", "logit_normal")
    assert probe.probe_config(variant, 16, args.overrides).flow_time_sampling == "logit_normal"


def test_cpu_cap_stops_training_early(probe):
    args = probe.parse_args(
        TINY[:-2]
        + [
            "--max_train_steps",
            "1000",
            "--max_cpu_minutes",
            "0.0001",
            "--config_overrides",
            "hidden_size=32,num_hidden_layers=1",
        ]
    )
    true_steps = np.linspace(0.001, 0.05, 100)
    (result,) = probe.train_and_probe(args, probe.Variant("flow_matching"), 0, probe.Truth(true_steps))
    assert result.train_steps < 1000 and set(result.figures) == {("", 1), ("", 2)}


def test_samplers_endpoints_clips_and_a_learning_curve_are_rows(probe, capsys, tmp_path):
    """Each reading is its own row; the Euler S=2 output is the endpoint estimate x1_hat at s = 0.5 of the same
    path (an Euler step from s to 1 lands on x_s + (1 - s) v), and a saved run read again gives the same rows."""
    extra = ["--objectives", "flow_matching", "--noise_correlation", "0", "0.5", "--solvers", "euler", "heun"]
    extra += ["--time_grid_powers", "1", "2", "--endpoint_times", "0.5", "--clip_frames", "24", "--clip_count", "2"]
    extra += ["--eval_at_steps", "2", "--save_dir", str(tmp_path)]
    assert probe.main(TINY + extra) == 0
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    rows = {line.split(" | ")[0][2:] + " S=" + line.split(" | ")[1]: line.split(" | ")[5:] for line in table[1:]}
    for name in ("flow_matching (uniform s)", "flow_matching (uniform s, rho 0.5)"):
        for suffix in ("", " [heun]", " [grid p=2]", " [heun, grid p=2]", " [whole 24-frame clips]"):
            assert f"{name}{suffix} S=1" in rows and f"{name}{suffix} S=2" in rows, name + suffix
        assert rows[f"{name} [x1_hat at s=0.50] S=2"] == rows[f"{name} S=2"]
        assert f"{name} at step 2 S=2" in rows
    assert rows["flow_matching (uniform s) S=1"] != rows["flow_matching (uniform s, rho 0.5) S=1"]
    assert (tmp_path / "flow_matching-uniform-rho0.5-seed0" / "config.json").is_file()
    assert probe.main(TINY + extra[:5] + ["--load_dir", str(tmp_path)]) == 0
    again = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    again_rows = {line.split(" | ")[0][2:] + " S=" + line.split(" | ")[1]: line.split(" | ")[5:] for line in again[1:]}
    assert again_rows["flow_matching (uniform s, rho 0.5) S=2"] == rows["flow_matching (uniform s, rho 0.5) S=2"]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--config_overrides", "hidden_size=30"], "--config_overrides gives an invalid config"),
        (["--config_overrides", "hidden_size"], "expected key=value"),
        (["--num_frames", "3"], "--num_frames must be an even int"),
        (["--num_steps", "0"], "--num_steps must all be >= 1"),
        (["--max_cpu_minutes", "0"], "--max_cpu_minutes must be > 0"),
        (["--flow_time_sampling", "late"], "--flow_time_sampling: invalid choice"),
        (["--noise_correlation", "1"], "--noise_correlation must all be in [0, 1)"),
        (["--time_grid_powers", "0.5"], "--time_grid_powers must all be >= 1"),
        (["--endpoint_times", "1"], "--endpoint_times must all be in [0, 1)"),
        (["--clip_frames", "16"], "--clip_frames must be 0 or more than --num_frames=16"),
        (["--save_dir", "a", "--load_dir", "b"], "give at most one of --save_dir and --load_dir"),
        (["--eval_at_steps", "3"], "--eval_at_steps must all be in [1, --max_train_steps)"),
        (["--noise_scales", "1", "0"], "argument --noise_scales: must be a number > 0 (1: the paper's x_0), got 0.0"),
    ],
)
def test_bad_arguments_name_themselves(probe, capsys, extra, message):
    with pytest.raises(SystemExit) as exit_info:
        probe.parse_args(TINY + extra)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_the_command_line_reports_a_bad_config_in_one_line():
    result = subprocess.run(
        [sys.executable, str(SCRIPT), *TINY, "--config_overrides", "num_attention_heads=3"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert result.returncode == 2
    assert "--config_overrides gives an invalid config" in result.stderr and "Traceback" not in result.stderr


def test_a_temperature_is_a_row_of_its_own_and_tau_1_is_the_plain_reading(probe, capsys):
    extra = ["--objectives", "flow_matching", "--num_steps", "2"]
    assert probe.main(TINY + extra) == 0
    plain = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert probe.main(TINY + extra + ["--noise_scales", "1", "0.5"]) == 0
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    rows = {line.split(" | ")[0][2:]: line.split(" | ")[5:] for line in table[1:]}
    plain_rows = {line.split(" | ")[0][2:]: line.split(" | ")[5:] for line in plain[1:]}
    assert rows["flow_matching (uniform s)"] == plain_rows["flow_matching (uniform s)"]  # tau 1: x_0 = e, unchanged
    assert rows["flow_matching (uniform s) [tau=0.5]"] != rows["flow_matching (uniform s)"]
