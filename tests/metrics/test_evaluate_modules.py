"""The evaluate modules: loadable with evaluate.load(<dir>), thin wrappers over the package maths, shipped in the
wheel and found from an installed (non-editable) copy."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np
import pytest

from transformers_gazeflow.metrics import EVALUATE_MODULES, evaluate_module_path
from transformers_gazeflow.metrics import heatmaps as hm
from transformers_gazeflow.metrics.dynamics import trajectory_dynamics
from transformers_gazeflow.metrics.events import event_metrics, flatten_event_metrics
from transformers_gazeflow.metrics.protocol import evaluate_frames, evaluate_predictions
from transformers_gazeflow.metrics.sample_scores import sample_scores

from ..conftest import build_wheel, run_python

REPO = Path(__file__).resolve().parents[2]


def test_module_paths():
    for name in EVALUATE_MODULES:
        path = Path(evaluate_module_path(name))
        assert (path / f"{name}.py").is_file()
        lines = (path / f"{name}.py").read_text().splitlines()
        imports = [ln for ln in lines if ln.startswith(("import ", "from "))]
        assert imports and all("," not in ln for ln in imports)  # one import per line (evaluate's loader scans them)
    with pytest.raises(ValueError, match="name must be one of"):
        evaluate_module_path("accuracy")


def test_gaze_saliency_module_wraps_package_maths():
    import evaluate

    rng = np.random.default_rng(0)
    gaze = rng.random((3, 2))
    traj = np.clip(gaze[None] + rng.normal(0, 0.05, (4, 3, 2)), 0, 1)
    maps = hm.render_heatmaps(traj, 40, 30, sigma=3.0)
    metric = evaluate.load(evaluate_module_path("gaze_saliency"))
    got = metric.compute(predictions=[m.tolist() for m in maps], references=gaze.tolist(), sigma_px=3.0)
    want = evaluate_frames(list(maps), gaze.astype(np.float32), sigma_px=3.0)  # the module stores float32
    assert got.keys() == want.keys()
    for k in want:
        assert got[k] == pytest.approx(want[k], rel=1e-6, abs=1e-9), k


def test_gaze_dynamics_module_wraps_package_maths():
    import evaluate

    rng = np.random.default_rng(1)
    trajs = [rng.random((3, 6, 2)).astype(np.float32) for _ in range(2)]
    gaze = [rng.random((6, 2)).astype(np.float32) for _ in range(2)]
    valid = [[True] * 6, [True, False, True, True, True, True]]
    metric = evaluate.load(evaluate_module_path("gaze_dynamics"))
    got = metric.compute(
        predictions=[t.tolist() for t in trajs], references=[g.tolist() for g in gaze], valid=valid, width=64, height=48
    )
    want = trajectory_dynamics(trajs, gaze, valid, 64, 48)
    for k in want:
        assert got[k] == pytest.approx(want[k], rel=1e-9), k


def test_gaze_events_module_wraps_package_maths():
    import evaluate

    rng = np.random.default_rng(2)
    gaze = [np.clip(0.5 + np.cumsum(rng.normal(0, 0.03, (20, 2)), 0), 0, 1).astype(np.float32) for _ in range(2)]
    trajs = [np.clip(g[None] + rng.normal(0, 0.02, (3, 20, 2)), 0, 1).astype(np.float32) for g in gaze]
    codes = [np.where(rng.random(20) < 0.3, 2, 1).astype(np.int8) for _ in range(2)]
    codes[1][5] = 3
    metric = evaluate.load(evaluate_module_path("gaze_events"))
    got = metric.compute(
        predictions=[t.tolist() for t in trajs],
        references=[g.tolist() for g in gaze],
        gaze_types=[c.tolist() for c in codes],
        fps=24,
        width=64,
        height=48,
    )
    want = flatten_event_metrics(event_metrics(trajs, gaze, codes, 24, 64, 48))
    assert got.keys() == want.keys() and "human_fixations_per_clip" in got and "saccade_f1" in got
    for k in want:
        assert got[k] == pytest.approx(want[k], rel=1e-9, nan_ok=True), k


def test_gaze_energy_score_module_wraps_package_maths_and_the_evaluator_reports_the_same():
    import evaluate

    rng = np.random.default_rng(3)
    trajs = [rng.random((4, 6, 2)).astype(np.float32) for _ in range(2)]
    gaze = [rng.random((6, 2)).astype(np.float32) for _ in range(2)]
    valid = [[True] * 6, [True, False, True, True, True, True]]
    metric = evaluate.load(evaluate_module_path("gaze_energy_score"))
    got = metric.compute(
        predictions=[t.tolist() for t in trajs], references=[g.tolist() for g in gaze], valid=valid, width=64, height=48
    )
    want = sample_scores(trajs, gaze, valid, 64, 48)
    assert set(got) == {"energy_score_fair", "energy_score_plain", "crps_fair", "crps_plain"}
    for k in want:
        assert got[k] == pytest.approx(want[k], rel=1e-9), k
    truths = [
        {
            "clip_id": str(i),
            "gaze": g,
            "gaze_type": np.ones(6, np.int8),
            "valid": np.asarray(v),
            "width": 64,
            "height": 48,
        }
        for i, (g, v) in enumerate(zip(gaze, valid))
    ]
    result = evaluate_predictions(truths, trajs, sigma_px=3.0)
    for k in want:
        assert result.metrics[k] == pytest.approx(want[k], rel=1e-9), k


def test_evaluate_frames_rejects_bad_input():
    with pytest.raises(ValueError, match="heatmaps is empty"):
        evaluate_frames([], [])
    with pytest.raises(ValueError, match="one .x, y. point per heatmap"):
        evaluate_frames([np.ones((4, 4))], [[0.5, 0.5], [0.1, 0.1]])
    with pytest.raises(ValueError, match=r"heatmaps\[0\] must be finite"):
        evaluate_frames([np.full((4, 4), np.nan)], [[0.5, 0.5]])
    with pytest.raises(ValueError, match=r"gaze\[0\] must be a unit point"):
        evaluate_frames([np.ones((4, 4))], [[1.5, 0.5]])


def test_modules_ship_in_the_wheel_and_load_from_an_installed_copy(tmp_path):
    wheel = build_wheel(tmp_path, timeout=300)
    names = zipfile.ZipFile(wheel).namelist()
    for name in EVALUATE_MODULES:
        assert f"transformers_gazeflow/metrics/evaluate_modules/{name}/{name}.py" in names
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)  # a pure-python wheel installs by unpacking
    code = (
        "import evaluate, transformers_gazeflow.metrics as m, sys;"
        "p = m.evaluate_module_path('gaze_saliency');"
        "assert p.startswith(sys.argv[1]), p;"
        "r = evaluate.load(p).compute(predictions=[[[0.0, 1.0], [0.0, 0.0]]], references=[[0.75, 0.25]], sigma_px=1.0);"
        "print(r['aae'])"
    )
    env = dict(os.environ, PYTHONPATH=str(site))
    stdout = run_python(code, str(site), env=env, cwd=tmp_path, timeout=300)
    assert float(stdout.strip().splitlines()[-1]) == pytest.approx(0.0, abs=1e-9)
