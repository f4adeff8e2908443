"""Model folders: one writer (hub.save_model_folder), registration with transformers from a light package, and
loading that names the file when a folder is not a usable GazeFlow model."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import pipeline

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel, GazeFlowPipeline
from transformers_gazeflow.commands.cli import main
from transformers_gazeflow.data.processing import GazeFlowVideoProcessor
from transformers_gazeflow.data.video import write_video
from transformers_gazeflow.hub.model_folders import (
    ModelFolderError,
    check_model_folder,
    load_config,
    load_model,
    save_model_folder,
)
from transformers_gazeflow.hub.remote_code import REMOTE_CODE_FILES

from .conftest import run_python
from .pipeline_fixtures import random_video, single_torch_thread, tiny_model_dir  # noqa: F401  (fixtures)


class RunsCode:
    """A pickle that runs code when loaded without weights_only (it would create ``marker``)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


@pytest.fixture(scope="module")
def broken_folders(tmp_path_factory, tiny_model_dir) -> dict[str, tuple[Path, str]]:
    """Copies of a good folder, each broken one way: (folder, what the message must say)."""
    root = tmp_path_factory.mktemp("broken")

    def copy(name: str) -> Path:
        folder = root / name
        shutil.copytree(tiny_model_dir, folder)
        return folder

    weights = tiny_model_dir / "model.safetensors"
    cases = {}
    folder = copy("truncated")
    (folder / "model.safetensors").write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    cases["truncated"] = (folder, f"{folder / 'model.safetensors'}: not a complete safetensors file")
    folder = copy("empty_weights")
    (folder / "model.safetensors").write_bytes(b"")
    cases["empty_weights"] = (folder, f"{folder / 'model.safetensors'}: the file is empty (0 bytes)")
    folder = copy("string_field")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "hidden_size": "64"}))
    cases["string_field"] = (folder, f"{folder / 'config.json'}: hidden_size must be an int >= 1, got str '64'")
    folder = copy("nested_field")
    config["encoder_config"]["num_hidden_layers"] = 2.5
    (folder / "config.json").write_text(json.dumps(config))
    cases["nested_field"] = (folder, "config.json: encoder_config.num_hidden_layers must be int, got float 2.5")
    folder = copy("pickle")
    (folder / "model.safetensors").unlink()
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps(RunsCode(root / "code_ran")))
    cases["pickle"] = (folder, f"{folder / 'pytorch_model.bin'}: refused: this pickle holds more than plain weights")
    folder = copy("nan")
    model = GazeFlowModel.from_pretrained(tiny_model_dir)
    with torch.no_grad():
        next(model.parameters()).view(-1)[0] = float("inf")
    model.save_pretrained(folder)
    cases["nan"] = (folder, "1 weight tensor(s) hold NaN or inf values")
    folder = root / "bert"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 8}))
    cases["other_model_type"] = (folder, f"{folder} is not a GazeFlow model folder: config.json has model_type 'bert'")
    folder = root / "no_such_type"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "frobnicator"}))
    cases["unknown_model_type"] = (folder, "model_type 'frobnicator', expected 'gazeflow'")
    folder = root / "empty"
    folder.mkdir()
    cases["empty_folder"] = (folder, f"{folder} is not a GazeFlow model folder: it has no config.json")
    folder = root / "random_files"
    folder.mkdir()
    (folder / "notes.txt").write_text("hello")
    (folder / "weights.bin").write_bytes(os.urandom(256))
    cases["random_files"] = (folder, f"{folder} is not a GazeFlow model folder: it has no config.json")
    folder = copy("bad_json")
    (folder / "config.json").write_text('{"model_type": "gazeflow", ')
    cases["bad_json"] = (folder, f"{folder / 'config.json'}: not valid JSON")
    return cases


CASES = [
    "truncated",
    "empty_weights",
    "string_field",
    "nested_field",
    "pickle",
    "nan",
    "other_model_type",
    "unknown_model_type",
    "empty_folder",
    "random_files",
    "bad_json",
]


@pytest.mark.parametrize("case", CASES)
def test_load_model_and_the_pipeline_name_what_is_wrong(broken_folders, case):
    folder, message = broken_folders[case]
    with pytest.raises(ModelFolderError) as loading:
        load_model(folder)
    assert message in str(loading.value) and "\n" not in str(loading.value)
    with pytest.raises(ModelFolderError) as building:
        pipeline("egocentric-gaze", model=str(folder))
    assert message.split(": ", 1)[-1] in str(building.value)
    assert not (folder.parent / "code_ran").exists()  # the crafted pickle never ran


@pytest.mark.parametrize(
    "edit,message",
    [
        ({"sigma_min": 2.0}, "sigma_min must be a number in (0, 1), got 2.0"),
        ({"solver": "rk4"}, "solver must be one of ('euler', 'heun', 'midpoint'), got 'rk4'"),
        ({"use_lora": "yes"}, "use_lora must be a bool, got str 'yes'"),
        (
            {"lora_target_modules": "query"},
            "lora_target_modules must be a non-empty list of module names, got str 'query'",
        ),
        ({"window_stride": 64}, "window_stride must be <= num_frames=8 (windows must overlap or touch), got 64"),
        (
            {"encoder_config": {"model_type": "bert"}},
            "encoder_config.model_type must be 'vjepa2' (a V-JEPA 2 encoder), got 'bert'",
        ),
    ],
)
def test_a_bad_config_value_is_one_line_naming_the_file_and_the_field(tmp_path, edit, message):
    """The config checks its own fields (type, range, choices, and how they combine); loading a folder turns its
    error into one line that names config.json."""
    (tmp_path / "config.json").write_text(json.dumps({**GazeFlowConfig.tiny().to_dict(), **edit}))
    with pytest.raises(ModelFolderError) as error:
        load_config(str(tmp_path))
    assert str(error.value) == f"{tmp_path / 'config.json'}: {message}"


@pytest.mark.parametrize("case", ["truncated", "string_field", "pickle", "nan", "random_files"])
def test_the_command_prints_one_line_naming_the_file(broken_folders, case, tmp_path, capsys):
    folder, message = broken_folders[case]
    video = write_video(tmp_path / "clip.mp4", random_video(6), fps=10)
    assert main(["predict", str(video), "--model", str(folder), "-o", str(tmp_path / "out"), "-q"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("gazeflow: error: ") and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "out").exists()


def test_save_model_folder_writes_a_complete_folder(tmp_path):
    torch.manual_seed(0)
    model = GazeFlowModel(GazeFlowConfig.tiny())
    folder = save_model_folder(model, tmp_path / "model", title="Tiny", description="For a test.")
    assert {p.name for p in folder.iterdir()} == {
        "config.json",
        "model.safetensors",
        "preprocessor_config.json",
        "README.md",
    }
    assert GazeFlowVideoProcessor.from_pretrained(folder).size == model.config.image_size
    assert "# Tiny" in (folder / "README.md").read_text() and "For a test." in (folder / "README.md").read_text()
    check_model_folder(folder)
    video = random_video(9, seed=3)
    again = GazeFlowPipeline(model=load_model(folder))
    np.testing.assert_allclose(again(video).trajectories, GazeFlowPipeline(model=model)(video).trajectories, atol=1e-6)
    with_code = save_model_folder(model, tmp_path / "remote", remote_code=True, card=folder / "README.md")
    assert all((with_code / name).is_file() for name in REMOTE_CODE_FILES)
    assert (with_code / "README.md").read_text() == (folder / "README.md").read_text()
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(ModelFolderError, match="a_file: it is a file"):
        save_model_folder(model, tmp_path / "a_file")


PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"  # the project's ruff settings (line length)


def test_a_written_card_passes_the_format_check_ci_runs(tmp_path):
    """CI runs ``ruff format --check .``, which formats the python blocks of every README.md in the tree, the bundled
    models' cards included: a card as written (its usage block) must need no reformatting."""
    folder = save_model_folder(
        GazeFlowModel(GazeFlowConfig.tiny()),
        tmp_path / "model",
        title="Tiny",
        description="-",
        model_argument="str(transformers_gazeflow.default_model_path())",  # as bundle_default_model writes it
    )
    checked = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "format",
            "--check",
            "--no-cache",
            "--config",
            str(PYPROJECT),
            str(folder / "README.md"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize(
    "overrides, line",
    [
        ({}, "- Visual condition c_v: 1 spatial layer.\n"),
        (
            {"num_spatial_layers": 2, "num_temporal_layers": 1, "spatial_attention_init": "mimetic"},
            "- Visual condition c_v: 1 temporal layer (each position across the window's frame groups), then 2 spatial "
            "layers, mimetic query-key initialisation.\n",
        ),
        (
            {"num_temporal_layers": 2, "causal": True},
            "- Visual condition c_v: 2 temporal layers (each position across the window's frame groups, earlier ones "
            "only), then 1 spatial layer.\n",
        ),
    ],
)
def test_the_card_names_the_condition_encoders_layers(tmp_path, overrides, line):
    model = GazeFlowModel(GazeFlowConfig.tiny(**overrides))
    folder = save_model_folder(model, tmp_path / "model", title="Tiny", description="For a test.")
    assert line in (folder / "README.md").read_text()


@pytest.mark.parametrize(
    "sampler, line",
    [
        ({}, "- Sampling defaults: K=30 samples, S=5 euler steps. Evaluation maps"),
        (
            {"time_grid_power": 4.0},
            "- Sampling defaults: K=30 samples, S=5 euler steps on the flow-time grid s_i = 1 - (1 - i/S)^4 ",
        ),
        (
            {"noise_scale": 0.8},
            "- Sampling defaults: K=30 samples, S=5 euler steps, from x_0 = 0.8 e (`noise_scale`, the sampling ",
        ),
    ],
)
def test_the_card_names_the_flow_time_grid_and_the_temperature_unless_they_are_the_papers(tmp_path, sampler, line):
    model = GazeFlowModel(GazeFlowConfig.tiny(num_samples=30, num_steps=5, **sampler))
    folder = save_model_folder(model, tmp_path / "model", title="Tiny", description="For a test.")
    assert line in (folder / "README.md").read_text()


@pytest.mark.parametrize("causal", [False, True])
def test_a_bundled_models_card_names_the_temperature_its_config_samples_at(causal):
    """The cards are written by hand after a model's tau is chosen: each must state the tau of its own config.json."""
    import transformers_gazeflow

    folder = transformers_gazeflow.default_model_path(causal=causal)
    tau = json.loads((folder / "config.json").read_text())["noise_scale"]
    card = (folder / "README.md").read_text()
    sampling = next(line for line in card.splitlines() if line.startswith("- Sampling defaults:"))
    assert f"from x_0 = {tau:g} e (`noise_scale`" in sampling
    assert f"tau {tau:g}, chosen" in card


def test_the_pipeline_seed_defaults_to_0_and_none_draws_fresh_noise(tiny_model_dir):
    gaze = pipeline("egocentric-gaze", model=str(tiny_model_dir))
    video = random_video(7, seed=1)
    first, second = gaze(video), gaze(video)
    np.testing.assert_array_equal(first.trajectories, second.trajectories)
    np.testing.assert_array_equal(first.trajectories, gaze(video, seed=0).trajectories)
    assert first.seed == 0
    assert not np.allclose(gaze(video, seed=None).trajectories, gaze(video, seed=None).trajectories)


# ------------------------------------------------------------------------------------------- registration
def fresh(code: str, folder: Path) -> list[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    return (
        run_python(textwrap.dedent(code).replace("FOLDER", repr(str(folder))), cwd=folder.parent, env=env)
        .strip()
        .splitlines()
    )


def test_import_registers_with_transformers_on_first_use_in_a_fresh_interpreter(tiny_model_dir):
    """``import transformers_gazeflow`` is light; then the Auto classes and the task work, and the bundled default
    loads without transformers' "No model was supplied" warning or its "Loading weights" bar."""
    from transformers_gazeflow import default_model_available

    code = textwrap.dedent("""
        import sys, warnings
        warnings.simplefilter("error", RuntimeWarning)  # a failed registration warns
        import transformers_gazeflow
        print(sorted(m for m in ("torch", "transformers", "numpy") if m in sys.modules))
        from transformers import AutoConfig, AutoModel, pipeline
        print(type(AutoConfig.from_pretrained(FOLDER)).__name__, type(AutoModel.from_pretrained(FOLDER)).__name__)
        print(type(pipeline("egocentric-gaze", model=FOLDER)).__name__)
        if transformers_gazeflow.default_model_available():
            import numpy as np
            print("--- the bundled default ---", file=sys.stderr, flush=True)
            print("default", pipeline("egocentric-gaze")(np.zeros((3, 24, 32, 3), np.uint8), fps=5).num_frames)
    """).replace("FOLDER", repr(str(tiny_model_dir)))
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tiny_model_dir.parent,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.strip().splitlines()
    assert lines[:3] == ["[]", "GazeFlowConfig GazeFlowModel", "GazeFlowPipeline"]
    if default_model_available():
        assert lines[3] == "default 3"
        default_stderr = result.stderr.split("--- the bundled default ---")[-1]
        assert "No model was supplied" not in default_stderr and "Loading weights" not in default_stderr, default_stderr
        assert "Loading weights" in result.stderr  # transformers' bar is still there for other models


def test_registration_works_whatever_was_imported_first(tiny_model_dir):
    lines = fresh(
        """
        from transformers import pipeline, AutoModel          # transformers' modules first
        import transformers_gazeflow
        from transformers_gazeflow import GazeFlowConfig     # then a class of the package
        from transformers import pipeline as again
        print(type(AutoModel.from_pretrained(FOLDER)).__name__,
              type(pipeline("egocentric-gaze", model=FOLDER)).__name__, again is pipeline)
    """,
        tiny_model_dir,
    )
    assert lines[-1] == "GazeFlowModel GazeFlowPipeline True"
    lines = fresh(
        """
        from transformers_gazeflow.models.gazeflow.configuration_gazeflow import GazeFlowConfig  # a submodule first
        from transformers import AutoConfig
        print(type(AutoConfig.from_pretrained(FOLDER)).__name__)
    """,
        tiny_model_dir,
    )
    assert lines[-1] == "GazeFlowConfig"


def test_a_bundled_models_card_loads_it_by_the_package_not_by_a_path_of_the_machine_it_was_made_on():
    """The card's usage snippet names the package's folder as an expression that holds on any machine; a path
    written into it (the bundling machine's) would not."""
    import transformers_gazeflow

    card = (transformers_gazeflow.default_model_path() / "README.md").read_text()
    snippet = next(line for line in card.splitlines() if line.startswith('gaze = pipeline("egocentric-gaze"'))
    argument = snippet.split("model=", 1)[1].rsplit(")", 1)[0]
    assert eval(argument, {"transformers_gazeflow": transformers_gazeflow}) == str(  # noqa: S307 - our own card
        transformers_gazeflow.default_model_path()
    )
