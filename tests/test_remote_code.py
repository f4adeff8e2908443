"""A saved folder with the remote code loads with trust_remote_code=True in a fresh process without this package."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

import transformers_gazeflow
from transformers_gazeflow import GazeFlowConfig, GazeFlowModel, GazeFlowPipeline
from transformers_gazeflow.hub.model_folders import check_model_folder, save_model_folder
from transformers_gazeflow.hub.remote_code import REMOTE_CODE_FILES, add_remote_code, flatten_imports

from .conftest import run_python
from .pipeline_fixtures import random_video, single_torch_thread  # noqa: F401  (fixture)


def test_flatten_imports_only_touches_relative_import_lines():
    source = (
        "from ..models.gazeflow.geometry import unit_to_pixels\nfrom ..data.video import iter_frames\n"
        "    from ..metrics.heatmaps import render_heatmaps\nfrom .windowed import x\n"
        "# from ..data.video import\nfrom transformers import Pipeline\n"
    )
    assert flatten_imports(source, "generation/windowed.py") == (
        "from .geometry import unit_to_pixels\nfrom .video import iter_frames\n"
        "    from .heatmaps import render_heatmaps\nfrom .windowed import x\n# from ..data.video import\n"
        "from transformers import Pipeline\n"
    )


def test_the_model_folder_is_copied_as_it_is():
    package = Path(transformers_gazeflow.__file__).parent
    for name, source in REMOTE_CODE_FILES.items():
        if source.startswith("models/gazeflow/"):
            text = (package / source).read_text(encoding="utf-8")
            assert flatten_imports(text, source) == text, name


def test_add_remote_code_needs_a_saved_model(tmp_path):
    with pytest.raises(FileNotFoundError, match="no config.json"):
        add_remote_code(tmp_path)


def test_saved_folder_loads_with_remote_code_in_a_fresh_process_without_the_package(tmp_path):
    torch.manual_seed(0)
    model = GazeFlowModel(GazeFlowConfig.tiny())
    folder = save_model_folder(
        model,
        tmp_path / "gazeflow_remote",
        title="Tiny GazeFlow",
        remote_code=True,
        description="Random weights, for tests.",
        training="None.",
        limitations="Random.",
    )
    check_model_folder(folder)
    config = json.loads((folder / "config.json").read_text())
    assert config["auto_map"]["AutoModel"] == "modeling_gazeflow.GazeFlowModel"
    assert config["custom_pipelines"]["egocentric-gaze"]["impl"] == "pipeline_gazeflow.GazeFlowPipeline"
    assert all((folder / name).is_file() for name in REMOTE_CODE_FILES)
    card = (folder / "README.md").read_text()
    assert card.startswith("---\n") and "- egocentric-gaze" in card and "library_name: transformers" in card
    assert "# Tiny GazeFlow" in card and "Random weights, for tests." in card

    video = random_video(13, seed=2)
    np.save(tmp_path / "video.npy", video)
    expected = GazeFlowPipeline(model=GazeFlowModel.from_pretrained(folder))(video, seed=4, fps=10).trajectories

    script = textwrap.dedent(f"""
        import sys
        sys.modules["transformers_gazeflow"] = None  # importing the package would fail: only the folder's code runs
        import numpy as np
        from transformers import AutoConfig, AutoModel, pipeline
        folder = {str(folder)!r}
        model = AutoModel.from_pretrained(folder, trust_remote_code=True)
        assert type(model).__module__.startswith("transformers_modules."), type(model).__module__
        gaze = pipeline("egocentric-gaze", model=folder, trust_remote_code=True)
        out = gaze(np.load({str(tmp_path / "video.npy")!r}), seed=4, fps=10)
        np.save({str(tmp_path / "remote.npy")!r}, out.trajectories)
        gaze.save_pretrained({str(tmp_path / "resaved")!r})  # the remote-code pipeline saves a complete folder again
        loaded = [name for name, module in sys.modules.items() if name.startswith("transformers_gazeflow") and module]
        assert not loaded, loaded
        print("remote-code-ok", type(gaze).__name__)
    """)
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_MODULES_CACHE": str(tmp_path / "modules"),
        "PYTHONPATH": "",
        "OMP_NUM_THREADS": "1",
    }
    assert "remote-code-ok GazeFlowPipeline" in run_python(script, cwd=tmp_path, env=env)
    np.testing.assert_allclose(np.load(tmp_path / "remote.npy"), expected, atol=1e-6)
    resaved = tmp_path / "resaved"
    assert all((resaved / name).is_file() for name in REMOTE_CODE_FILES)
    assert (resaved / "heatmaps.py").read_text() == (folder / "heatmaps.py").read_text()
    assert (resaved / "README.md").read_text() == card  # the loaded folder's card travels along


def test_pipeline_save_pretrained_writes_a_complete_folder(tmp_path):
    torch.manual_seed(0)
    model = GazeFlowModel(GazeFlowConfig.tiny())
    gaze = GazeFlowPipeline(model=model)
    gaze.save_pretrained(tmp_path / "saved")
    folder = check_model_folder(tmp_path / "saved")
    assert all((folder / name).is_file() for name in REMOTE_CODE_FILES)
    assert (folder / "preprocessor_config.json").is_file() and (folder / "README.md").is_file()
    assert "auto_map" in json.loads((folder / "config.json").read_text())
    video = random_video(9, seed=3)
    again = GazeFlowPipeline(model=GazeFlowModel.from_pretrained(folder))
    np.testing.assert_allclose(again(video, seed=1).trajectories, gaze(video, seed=1).trajectories, atol=1e-6)
    with pytest.raises(ValueError, match="push_to_hub"):
        gaze.save_pretrained(tmp_path / "x", push_to_hub=True)


def test_bundle_default_model_writes_a_complete_small_folder(tmp_path):
    from transformers_gazeflow.hub.model_folders import bundle_default_model, load_model

    torch.manual_seed(0)
    trained = tmp_path / "trained"
    model = GazeFlowModel(GazeFlowConfig.tiny())
    with torch.no_grad():  # a LoRA update that is not zero, so that merging changes the weights
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0, 0.1)
    model.save_pretrained(trained)
    destination = bundle_default_model(
        trained,
        training="Trained by examples/train.py for 0 steps.",
        description="A test.",
        limitations="None.",
        destination=tmp_path / "bundled",
    )
    assert {p.name for p in destination.iterdir()} == {
        "config.json",
        "model.safetensors",
        "preprocessor_config.json",
        "README.md",
    }
    assert "Trained by examples/train.py for 0 steps." in (destination / "README.md").read_text()
    bundled = load_model(destination)
    assert not bundled.config.use_lora  # LoRA merged: a plain model
    video = torch.from_numpy(random_video(9, seed=1))
    expected = GazeFlowPipeline(model=GazeFlowModel.from_pretrained(trained))(video, seed=0).trajectories
    np.testing.assert_allclose(GazeFlowPipeline(model=bundled)(video, seed=0).trajectories, expected, atol=1e-5)


def test_a_remote_code_folder_saved_before_the_package_moved_into_folders_still_loads(tmp_path):
    """A folder written by commit 60e8cbe (flat package layout) loads both ways and agrees with today's package."""
    import tarfile

    with tarfile.open(Path(__file__).parent / "fixtures" / "remote_code_folder_60e8cbe.tar.gz") as archive:
        archive.extractall(tmp_path, filter="data")
    folder = tmp_path / "remote_code_folder_60e8cbe"
    video = random_video(11, seed=5)
    np.save(tmp_path / "video.npy", video)
    expected = GazeFlowPipeline(model=GazeFlowModel.from_pretrained(folder))(video, seed=3, fps=10).trajectories

    script = textwrap.dedent(f"""
        import sys
        sys.modules["transformers_gazeflow"] = None  # the folder's own (old) code runs
        import numpy as np
        from transformers import pipeline
        gaze = pipeline("egocentric-gaze", model={str(folder)!r}, trust_remote_code=True)
        result = gaze(np.load({str(tmp_path / "video.npy")!r}), seed=3, fps=10)
        np.save({str(tmp_path / "old_code.npy")!r}, result.trajectories)
        print("old-remote-code-ok")
    """)
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_MODULES_CACHE": str(tmp_path / "modules"),
        "PYTHONPATH": "",
        "OMP_NUM_THREADS": "1",
    }
    assert "old-remote-code-ok" in run_python(script, cwd=tmp_path, env=env)
    np.testing.assert_allclose(np.load(tmp_path / "old_code.npy"), expected, atol=1e-6)
