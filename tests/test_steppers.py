"""The stream's backends behind one registry (``generation.steppers.STEPPERS``): the command offers what the registry
holds and runs any entry through the ``Stepper`` protocol, and the benchmark times the same entries."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest

from transformers_gazeflow.commands.cli import build_parser, main
from transformers_gazeflow.generation.steppers import STEPPERS, StepperBackend, StepperOptions
from transformers_gazeflow.hub.model_folders import default_model_available, default_model_path
from transformers_gazeflow.models.gazeflow.generation_gazeflow import SamplingSettings

from .pipeline_fixtures import synthetic_clip_mp4  # noqa: F401
from .script_loading import load_script

REPO = Path(__file__).resolve().parents[1]


class FixedGaze:
    """A backend that needs no model: every frame's two samples sit a quarter of the width left and right of the
    frame's centre."""

    device = "cpu"
    opened: list[tuple[str, StepperOptions]] = []

    def __init__(self, settings: SamplingSettings) -> None:
        self.settings = settings

    @classmethod
    def open(cls, location: str, options: StepperOptions) -> FixedGaze:
        cls.opened.append((location, options))
        return cls(SamplingSettings(num_samples=2, num_steps=1, solver="euler"))

    def step(self, pixels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.array([[0.25, 0.5], [0.75, 0.5]]), np.array([0.5, 0.5])

    def warm_up(self, height: int, width: int) -> None:
        pass


def backend_choices() -> tuple[str, ...]:
    parser = build_parser()
    commands = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    return next(action.choices for action in commands.choices["stream"]._actions if action.dest == "backend")


def test_the_command_and_the_benchmark_offer_the_registry():
    assert tuple(STEPPERS) == ("torch", "onnxruntime") and [b.exported for b in STEPPERS.values()] == [False, True]
    assert tuple(backend_choices()) == tuple(STEPPERS)
    bench = load_script(REPO / "benchmarks" / "bench_stream_backends.py", "bench_stream_backends")
    assert bench.BACKENDS == ("torch", "torch-compiled", "onnxruntime")


@pytest.mark.skipif(not default_model_available(causal=True), reason="the bundled causal model has no weights")
def test_a_new_backend_is_one_registry_entry(capsys, monkeypatch, tmp_path, synthetic_clip_mp4):  # noqa: F811
    monkeypatch.setitem(STEPPERS, "fixed", StepperBackend("fixed", "a fixed gaze", FixedGaze.open))
    FixedGaze.opened.clear()
    path, clip = synthetic_clip_mp4
    summary = tmp_path / "summary.json"
    status = main(["stream", str(path), "--backend", "fixed", "-k", "2", "--seed", "7", "--summary", str(summary)])
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert status == 0 and len(records) == clip.num_frames
    assert {(r["x"], r["y"], r["x_px"], r["r50_px"], r["r90_px"]) for r in records} == {
        (0.5, 0.5, clip.width / 2, clip.width / 4, clip.width / 4)
    }
    [(location, options)] = FixedGaze.opened
    assert location == str(default_model_path(causal=True))  # a backend that runs the model opens the --model
    assert options.sampling == {"num_samples": 2, "num_steps": None, "solver": None, "noise_scale": None}
    assert options.seed == 7
    written = json.loads(summary.read_text())
    assert (written["backend"], written["num_samples"], written["num_steps"], written["device"]) == (
        "fixed",
        2,
        1,
        "cpu",
    )
