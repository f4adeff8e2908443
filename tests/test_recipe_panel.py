"""The recipe panel: its families (data/synthetic_tasks_panel.py), what counts as success, and the runner
(examples/recipe_panel.py): the exact commands, resuming, the table, and one smoke run end to end."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.script_loading import load_script
from transformers_gazeflow.data.synthetic_tasks import LADDER, TASK_NAMES, clip_split
from transformers_gazeflow.data.synthetic_tasks_kept_aside import KEPT_ASIDE_TASKS
from transformers_gazeflow.data.synthetic_tasks_panel import PANEL, PANEL_NAMES, panel_family, write_panel_family
from transformers_gazeflow.metrics.baselines import beats_both_priors, beats_center_bias

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "examples" / "recipe_panel.py"


@pytest.fixture(scope="module")
def panel_script():
    yield load_script(SCRIPT, "recipe_panel_under_test", register=True)  # registered: it defines dataclasses
    sys.modules.pop("recipe_panel_under_test", None)


def test_the_panel_holds_eight_families_four_kept_aside_none_of_the_ladder():
    assert len(PANEL) == 8 and len(set(PANEL_NAMES)) == 8
    kept = [family.name for family in PANEL if family.kept_aside]
    assert sorted(kept) == sorted(KEPT_ASIDE_TASKS) and len(kept) >= 4
    held_out = [family.name for family in PANEL if not family.kept_aside]
    assert all(name in TASK_NAMES and name not in LADDER for name in held_out)
    for family in PANEL:
        size = (192, 80) if family.name == "wide_occluded_shape_cue" else (128, 96)
        assert (family.settings.width, family.settings.height) == size and family.settings.task == family.name
        assert family.settings.num_clips == 300
        assert sum(clip_split(family.settings, i) == "test" for i in range(300)) == 60  # a fifth of 300


def test_success_is_a_clear_margin_under_center_bias():
    assert beats_center_bias(12.0, 15.0) and not beats_center_bias(12.1, 15.0)  # at most 0.8 x 15 = 12
    # the kept family of the first measurement: the model (12.69 deg) does not clear Center Bias (15.37) by a fifth
    assert not beats_center_bias(12.69, 15.37) and beats_center_bias(6.75, 15.37)
    model = {"auc": 0.93, "f1": 0.25, "aae": 6.0}
    center, walk = {"auc": 0.86, "f1": 0.07, "aae": 15.4}, {"auc": 0.925, "f1": 0.223, "aae": 6.75}
    assert beats_both_priors(model, center, walk)
    assert not beats_both_priors({**model, "f1": 0.2}, center, walk)  # F1 under the walk's
    assert not beats_both_priors({**model, "aae": 7.0}, center, walk)
    assert not beats_both_priors({**model, "auc": 0.92}, center, walk)


def test_panel_family_names_the_panel_and_smoke_data_is_small(tmp_path):
    with pytest.raises(ValueError, match="unknown panel family 'colour_cue'"):
        panel_family("colour_cue")
    clips = write_panel_family(tmp_path / "wide", panel_family("wide_occluded_shape_cue"), smoke=True)
    assert len(clips) == 8 and all(24 <= clip.num_frames <= 32 for clip in clips)
    assert clips[0].frame(0).shape == (80, 192, 3)
    assert len((tmp_path / "wide" / "test_split1.txt").read_text().split()) == 2 * 4  # 2 test clips, 4 fields each


def test_dry_run_prints_the_documented_commands_and_writes_nothing(tmp_path, panel_script, capsys):
    out = tmp_path / "panel"
    assert panel_script.main(["--output_dir", str(out), "--families", "ring_cue", "--seeds", "3", "--dry_run"]) == 0
    printed = capsys.readouterr().out.splitlines()
    data = out / "data" / "ring_cue"
    evaluate = [sys.executable, str(REPO / "examples" / "evaluate.py")]
    on_test = f"--dataset_name egtea --data_dir {data} --dataset_config split1 --split test --sigma_px 5"
    expected = [
        f"write ring_cue's EGTEA layout to {data}",
        " ".join(evaluate) + f" --baseline center_bias {on_test} --output_dir "
        f"{out / 'eval' / 'ring_cue' / 'center_bias'}",
        " ".join(evaluate) + f" --baseline random_walk_free --num_samples 16 {on_test} --output_dir "
        f"{out / 'eval' / 'ring_cue' / 'random_walk_free'}",
        f"{sys.executable} {REPO / 'examples' / 'train.py'} --recipe small-cpu --dataset_name egtea --data_dir {data} "
        f"--seed 3 --output_dir {out / 'runs' / 'ring_cue' / 'seed3'}",
        " ".join(evaluate) + f" --model_name_or_path {out / 'runs' / 'ring_cue' / 'seed3'} --num_samples 16 "
        f"--num_steps 5 {on_test} --output_dir {out / 'eval' / 'ring_cue' / 'seed3'}",
    ]
    assert printed == expected
    assert not out.exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--families", "colour_cue"], "--families: unknown panel family 'colour_cue'"),
        (["--seeds", "-1"], "--seeds must be integers >= 0"),
    ],
)
def test_bad_arguments_name_themselves(tmp_path, panel_script, capsys, argv, message):
    with pytest.raises(SystemExit):
        panel_script.parse_args(["--output_dir", str(tmp_path), *argv])
    assert message in capsys.readouterr().err


def test_a_failed_step_is_recorded_and_a_done_one_skipped(tmp_path, panel_script):
    panel = panel_script.PanelRun(tmp_path, "small-cpu")
    failing = panel_script.Step("fails", [sys.executable, "-c", "raise SystemExit(3)"], tmp_path / "x", tmp_path / "l")
    panel_script.run_step(panel, failing, dry_run=False)
    assert panel.failures == [f"fails failed (exit status 3); see {tmp_path / 'l'}"]
    done = tmp_path / "done.json"
    done.write_text("{}")
    panel_script.run_step(panel, panel_script.Step("never", ["false-command-never-run"], done, tmp_path / "l2"), False)
    assert len(panel.failures) == 1 and not (tmp_path / "l2").exists()
    needy = panel_script.Step(
        "needs", ["false-command-never-run"], tmp_path / "y", tmp_path / "l3", needs=tmp_path / "m"
    )
    panel_script.run_step(panel, needy, dry_run=False)
    assert panel.failures[1] == f"needs not run: {tmp_path / 'm'} is missing (its training failed?)"
    assert not (tmp_path / "l3").exists()


def test_an_unfinished_run_resumes_from_its_checkpoint_index_and_one_without_starts_again(tmp_path, panel_script):
    panel = panel_script.PanelRun(tmp_path, "small-cpu")
    record = "import sys, json, pathlib; pathlib.Path(sys.argv[1]).write_text(json.dumps(sys.argv[2:]))"
    for name, has_index in (("checkpointed", True), ("early", False)):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "step_1000").mkdir()
        if has_index:
            (folder / "checkpoints.json").write_text("{}")
        done = tmp_path / f"{name}.json"
        step = panel_script.Step(
            name, [sys.executable, "-c", record, str(done), "--seed", "0"], done, tmp_path / f"{name}.log",
            fresh_folder=folder, resume_index=folder / "checkpoints.json",
        )  # fmt: skip
        panel_script.run_step(panel, step, dry_run=False)
        resumed = json.loads(done.read_text())
        assert resumed == (["--seed", "0", "--resume_from_checkpoint", "latest"] if has_index else ["--seed", "0"])
        assert (folder / "step_1000").exists() == has_index  # kept to resume from, or removed to start again
    assert panel.failures == []
    train = panel_script.train_step(panel, "ring_cue", 1)
    index = panel.run_dir("ring_cue", 1) / "checkpoints.json"
    assert train.resume_index == index and train.fresh_folder == index.parent


def test_data_written_with_other_settings_is_refused_not_overwritten(tmp_path, panel_script):
    panel = panel_script.PanelRun(tmp_path, "small-cpu", smoke=True)
    marker = panel.data_dir("ring_cue") / panel_script.DATA_MARKER
    marker.parent.mkdir(parents=True)
    marker.write_text(json.dumps({"settings": {"task": "ring_cue"}, "smoke": False}))
    assert not panel_script.write_data(panel, "ring_cue", dry_run=False)
    assert "holds data written with other settings" in panel.failures[0]
    assert sorted(p.name for p in marker.parent.iterdir()) == [panel_script.DATA_MARKER]


def _results(folder: Path, auc: float, f1: float, aae: float) -> None:
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps({"metrics": {"auc": auc, "f1": f1, "aae": aae, "nss": 1.0}}))


def test_the_table_sets_the_verdict_beside_success(tmp_path, panel_script):
    panel = panel_script.PanelRun(tmp_path, "small-cpu")
    for family in ("flash_target", "ring_cue"):
        _results(panel.eval_dir(family, "center_bias"), 0.86, 0.07, 15.0)
        _results(panel.eval_dir(family, "random_walk_free"), 0.92, 0.22, 7.0)
    _results(panel.eval_dir("flash_target", "seed0"), 0.88, 0.15, 14.0)  # under CB but not by a fifth: no success
    _results(panel.eval_dir("ring_cue", "seed0"), 0.95, 0.30, 6.0)  # success, and beats both priors
    validation = {  # the validation check: flash_target not learned (grounding weak), ring_cue learned
        "flash_target": {"learned": False, "aae_ratio": 0.9577},
        "ring_cue": {"learned": True, "aae_ratio": 0.41},
        "stripe_cue": {"learned": None, "skipped": "switched off (--no-validation_success_check)"},
    }
    for family, left, progress in (("flash_target", True, 0.5), ("ring_cue", True, 0.5), ("stripe_cue", False, None)):
        run = panel.run_dir(family, 0)
        run.mkdir(parents=True)
        verdict = {"left_plateau": left, "progress": progress, "threshold": 0.3}
        state = {"grounding_plateau": verdict, "validation_success": validation[family]}
        (run / "trainer_state.json").write_text(json.dumps(state))
    _results(panel.eval_dir("stripe_cue", "center_bias"), 0.86, 0.07, 15.0)
    _results(panel.eval_dir("stripe_cue", "random_walk_free"), 0.92, 0.22, 7.0)
    _results(panel.eval_dir("stripe_cue", "seed0"), 0.95, 0.30, 6.0)
    rows = panel_script.write_table(panel, ["flash_target", "ring_cue", "stripe_cue", "blinking_cue"], [0])
    flash, ring, stripe, blinking = rows
    assert (flash["success"], flash["beats_both_priors"], flash["verdict_agrees"]) == (False, False, False)
    assert flash["validation_check"] == validation["flash_target"] and flash["validation_check_agrees"] is True
    assert (ring["success"], ring["beats_both_priors"], ring["verdict_agrees"]) == (True, True, True)
    assert ring["validation_check_agrees"] is True
    assert (stripe["success"], stripe["verdict_agrees"], stripe["validation_check_agrees"]) == (True, False, None)
    assert blinking["model"] is None and blinking["success"] is None and blinking["verdict_agrees"] is None
    assert blinking["validation_check"] is None and blinking["validation_check_agrees"] is None  # no run at all
    assert flash["kept_aside"] and not ring["kept_aside"]
    table = (tmp_path / "panel.md").read_text().splitlines()
    assert (
        "| flash_target * | 0 | 0.880 | 0.150 | 14.000 | 0.860 | 0.070 | 15.000 | 0.920 | 0.220 | 7.000 | no | no "
        "| yes (0.50) | no | no (0.96) | yes |" in table
    )
    assert (
        "| stripe_cue | 0 | 0.950 | 0.300 | 6.000 | 0.860 | 0.070 | 15.000 | 0.920 | 0.220 | 7.000 | yes | yes "
        "| no (-) | no | not made | - |" in table
    )
    assert "| blinking_cue | 0 | - | - | - | - | - | - | - | - | - | - | - | - | - | - | - |" in table
    saved = json.loads((tmp_path / "panel.json").read_text())
    assert saved["success_aae_ratio"] == 0.8 and saved["rows"] == json.loads(json.dumps(rows))


@pytest.mark.slow
def test_a_smoke_panel_runs_end_to_end_and_resumes(tmp_path, panel_script, monkeypatch, capsys):
    """The runner's only training: one family, one seed, tiny data and two steps (about a minute of CPU)."""
    for name, value in (("HF_DATASETS_CACHE", tmp_path / "hf"), ("HF_HUB_OFFLINE", "1"), ("OMP_NUM_THREADS", "1")):
        monkeypatch.setenv(name, str(value))
    out = tmp_path / "panel"
    unfinished = out / "runs" / "near_shade_cue" / "seed0"
    unfinished.mkdir(parents=True)
    (unfinished / "left_by_a_killed_run").write_text("")
    argv = ["--output_dir", str(out), "--families", "near_shade_cue", "--seeds", "0", "--smoke"]
    assert panel_script.main(argv) == 0, capsys.readouterr()
    assert not (unfinished / "left_by_a_killed_run").exists()  # trained again from scratch
    first = json.loads((out / "panel.json").read_text())
    (row,) = first["rows"]
    assert first["smoke"] and row["family"] == "near_shade_cue" and row["kept_aside"]
    for source in ("model", "center_bias", "random_walk_free"):
        assert all(np.isfinite(row[source][name]) for name in ("auc", "f1", "aae"))
    assert isinstance(row["verdict"]["left_plateau"], bool)
    assert row["validation_check"]["clips"] >= 1 and isinstance(row["validation_check"]["learned"], bool)
    assert row["validation_check_agrees"] == (row["validation_check"]["learned"] == row["success"])
    assert row["success"] == (row["model"]["aae"] <= 0.8 * row["center_bias"]["aae"])
    assert "not a measurement" in (out / "panel.md").read_text()
    capsys.readouterr()

    def no_subprocess(*args, **kwargs):
        raise AssertionError(f"a finished step ran again: {args}")

    monkeypatch.setattr(subprocess, "run", no_subprocess)
    assert panel_script.main(argv) == 0
    assert capsys.readouterr().out.count("skip ") == 4  # two priors, the training, the model's evaluation
    assert json.loads((out / "panel.json").read_text()) == first


def _writes(done: Path, content: dict) -> list[str]:
    """A command that writes ``content`` to ``done`` (a stand-in for a step's script)."""
    code = "import sys, pathlib; p = pathlib.Path(sys.argv[1]); p.parent.mkdir(parents=True, exist_ok=True)"
    return [sys.executable, "-c", code + "; p.write_text(sys.argv[2])", str(done), json.dumps(content)]


def test_records_keep_what_the_table_needs_and_a_panel_goes_on_from_them_alone(tmp_path, panel_script, monkeypatch):
    first = panel_script.PanelRun(tmp_path / "machine1", "small-cpu", records_dir=tmp_path / "records")
    metrics = {"ring_cue": (0.95, 0.30, 6.0), "center_bias": (0.86, 0.07, 15.0), "random_walk_free": (0.92, 0.2, 7.0)}
    state = {
        "grounding_plateau": {"left_plateau": False, "progress": 0.2},
        "validation_success": {"learned": True, "aae_ratio": 0.4},
    }
    steps = {}
    for method, source in (
        ("center_bias", "center_bias"),
        ("random_walk_free", "random_walk_free"),
        ("seed0", "ring_cue"),
    ):
        step = panel_script.evaluate_step(first, "ring_cue", method, [])
        auc, f1, aae = metrics[source]
        step.command = _writes(step.done_file, {"metrics": {"auc": auc, "f1": f1, "aae": aae}, "per_clip": [1, 2]})
        steps[method] = step
    train = panel_script.train_step(first, "ring_cue", 0)
    train.command = _writes(train.done_file, {**state, "log_history": [{"loss": 1.0}] * 3})
    for step in (steps["center_bias"], steps["random_walk_free"], train, steps["seed0"]):
        panel_script.run_step(first, step, dry_run=False)
    assert first.failures == []
    kept = json.loads((tmp_path / "records" / "ring_cue" / "seed0-training.json").read_text())
    assert kept["grounding_plateau"] == state["grounding_plateau"] and "log_history" not in kept
    assert kept["panel"] == {"recipe": "small-cpu", "smoke": False} and len(kept["source"]["commit"]) == 40
    evaluation = json.loads((tmp_path / "records" / "ring_cue" / "seed0.json").read_text())
    assert evaluation["metrics"] == {"auc": 0.95, "f1": 0.30, "aae": 6.0} and "per_clip" not in evaluation

    # another machine: the same records, no output folder; nothing runs and the table is the first one's
    second = panel_script.PanelRun(tmp_path / "machine2", "small-cpu", records_dir=tmp_path / "records")
    ran = []

    def recorded_run(command, **kwargs):
        ran.append(command)
        return subprocess.CompletedProcess(command, 1)

    monkeypatch.setattr(panel_script.subprocess, "run", recorded_run)
    monkeypatch.setattr(panel_script, "runner_source", lambda: None)
    for step in panel_script.family_steps(second, "ring_cue", [0]):
        panel_script.run_step(second, step, dry_run=False)
    assert ran == [] and second.failures == []
    (row,) = panel_script.write_table(second, ["ring_cue"], [0])
    argv = ["--output_dir", str(tmp_path / "table"), "--records_dir", str(tmp_path / "records"), "--table_only"]
    assert panel_script.main([*argv, "--families", "ring_cue", "blinking_cue", "--seeds", "0"]) == 0
    assert ran == [] and not (tmp_path / "table" / "data").exists()  # nothing written or run but the table
    assert "| ring_cue | 0 | 0.950 | 0.300 | 6.000 |" in (tmp_path / "table" / "panel.md").read_text()
    assert row["model"] == {"auc": 0.95, "f1": 0.30, "aae": 6.0} and row["center_bias"]["aae"] == 15.0
    assert row["success"] is True and row["verdict_agrees"] is False and row["validation_check_agrees"] is True

    # a training record without its evaluation's: the model is gone, so the training runs again
    (tmp_path / "records" / "ring_cue" / "seed0.json").unlink()
    train_again = panel_script.train_step(second, "ring_cue", 0)
    panel_script.run_step(second, train_again, dry_run=False)
    assert ran == [train_again.command] and second.failures[0].startswith("train ring_cue seed 0 failed")


def test_a_record_of_another_panel_is_refused_not_used(tmp_path, panel_script):
    smoke = panel_script.PanelRun(tmp_path / "out", "small-cpu", smoke=True, records_dir=tmp_path / "records")
    step = panel_script.evaluate_step(smoke, "ring_cue", "center_bias", [])
    step.records[0].parent.mkdir(parents=True)
    step.records[0].write_text(json.dumps({"metrics": {}, "panel": {"recipe": "small-cpu", "smoke": False}}))
    step.command = ["false-command-never-run"]
    panel_script.run_step(smoke, step, dry_run=False)
    assert smoke.failures == [
        f"{step.records[0]}: a record of another panel (not {{'recipe': 'small-cpu', 'smoke': True}}); "
        "use another folder"
    ]
    assert not step.log.exists()
