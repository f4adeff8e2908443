"""The bundled default model ships in the wheel and is what the pipeline and the command use with no model, offline.

So as not to depend on the bundled model's weights, this installs a tiny random model in its place in a copy of
the project, builds a wheel, installs it by unpacking, and runs `pipeline("egocentric-gaze")` and `gazeflow demo` with
no model in a fresh process with HF_HUB_OFFLINE=1.
"""

from __future__ import annotations

import json
import os
import textwrap
import zipfile

import torch

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
from transformers_gazeflow.hub.model_folders import bundle_default_model

from .conftest import build_wheel, run_python


def test_wheel_ships_the_default_model_and_the_command_uses_it_offline(tmp_path):
    torch.manual_seed(0)
    GazeFlowModel(GazeFlowConfig.tiny()).save_pretrained(tmp_path / "trained")
    GazeFlowModel(GazeFlowConfig.tiny(causal=True)).save_pretrained(tmp_path / "trained_causal")

    def bundle_the_tiny_model(project):
        for source, folder in (("trained", "default_model"), ("trained_causal", "default_model_causal")):
            bundle_default_model(
                tmp_path / source,
                training="A tiny random model standing in for the trained one.",
                description="Test stand-in.",
                limitations="Random weights.",
                destination=project / "src" / "transformers_gazeflow" / folder,
            )

    wheel = build_wheel(tmp_path, prepare=bundle_the_tiny_model)
    names = zipfile.ZipFile(wheel).namelist()
    for name in ("config.json", "model.safetensors", "preprocessor_config.json", "README.md"):
        assert f"transformers_gazeflow/default_model/{name}" in names
        assert f"transformers_gazeflow/default_model_causal/{name}" in names
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "gazeflow = transformers_gazeflow.commands.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()

    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)  # a pure-python wheel installs by unpacking
    demo_dir = tmp_path / "demo"
    script = textwrap.dedent(f"""
        import sys
        import numpy as np
        import transformers_gazeflow
        from transformers import pipeline
        assert transformers_gazeflow.__file__.startswith({str(site)!r}), transformers_gazeflow.__file__
        assert transformers_gazeflow.default_model_available()
        out = pipeline("egocentric-gaze")(np.zeros((5, 24, 32, 3), np.uint8), seed=0, fps=5)
        assert out.trajectories.shape == (4, 5, 2), out.trajectories.shape
        from transformers_gazeflow.commands.cli import main
        assert transformers_gazeflow.default_model_available(causal=True)
        sys.stdin = open({str(tmp_path / "frames.rgb")!r})  # gazeflow stream - with no --model: the causal one
        assert main(["stream", "-", "--raw", "32x24", "--summary", {str(tmp_path / "stream.json")!r}]) == 0
        sys.exit(main(["demo", "-o", {str(demo_dir)!r}, "--frames", "10", "-q", "--threads", "1"]))
    """)
    (tmp_path / "frames.rgb").write_bytes(bytes(3 * 24 * 32 * 3))
    env = dict(os.environ, PYTHONPATH=str(site), HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    run_python(script, env=env, cwd=tmp_path)
    stream = json.loads((tmp_path / "stream.json").read_text())
    assert stream["model"].startswith(str(site)) and "default_model_causal" in stream["model"]
    assert stream["frames"] == 3 and stream["stopped"] == "end"
    summary = json.loads((demo_dir / "summary.json").read_text())
    assert summary["model"].startswith(str(site)) and summary["frames"] == 10
    assert (demo_dir / "overlay.mp4").is_file() and (demo_dir / "gaze.csv").is_file()
