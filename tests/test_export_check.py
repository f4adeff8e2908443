"""``gazeflow export-streamer`` writes its folder whole, after its onnxruntime check: the check rejects a graph that
differs from torch (a tolerance too tight, perturbed weights) or that onnxruntime cannot load, and a rejected or
interrupted export leaves the folder as it was; planted links and files the export did not write are never
written through."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
from transformers_gazeflow.commands import cli
from transformers_gazeflow.commands.cli import main
from transformers_gazeflow.data.processing import GazeFlowVideoProcessor
from transformers_gazeflow.data.video import write_video
from transformers_gazeflow.generation import onnx_export
from transformers_gazeflow.generation.onnx_export import ExportCheckError, check_against_torch, state_names
from transformers_gazeflow.generation.streaming_step import GazeFlowStreamerStep
from transformers_gazeflow.models.gazeflow.generation_gazeflow import SamplingSettings

from .fuzz_sandbox import digest
from .pipeline_fixtures import random_video, single_torch_thread  # noqa: F401

onnx = pytest.importorskip("onnx", reason="the [onnx] extra: pip install -e '.[onnx]'")
pytest.importorskip("onnxruntime", reason="the [onnx] extra: pip install -e '.[onnx]'")

K, S = 2, 1


@pytest.fixture(scope="module")
def causal(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("causal")
    torch.manual_seed(0)
    GazeFlowModel(GazeFlowConfig.tiny(causal=True)).save_pretrained(folder)
    GazeFlowVideoProcessor(size=32).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def exported(tmp_path_factory, causal) -> tuple[Path, Path]:
    """An export written over a folder holding a link planted at step.onnx and a config.json the export did not
    write: refused without --overwrite (nothing touched), then written with it (the link replaced, not followed)."""
    root = tmp_path_factory.mktemp("export_root")
    (root / "victim.txt").write_text("precious\n")
    folder = root / "export"
    folder.mkdir()
    os.symlink(root / "victim.txt", folder / "step.onnx")
    (folder / "config.json").write_text('{"mine": true}\n')
    before = digest(root)
    argv = ["export-streamer", "-o", str(folder), "--model", str(causal), "-k", str(K), "-s", str(S)]
    assert main(argv) == 1 and digest(root) == before
    assert main([*argv, "--overwrite"]) == 0
    return root, folder


def test_an_export_over_planted_links_and_foreign_files_replaces_them_never_their_targets(exported):
    root, folder = exported
    assert (root / "victim.txt").read_text() == "precious\n"
    assert sorted(p.name for p in folder.iterdir()) == [
        "config.json",
        "preprocessor_config.json",
        "step.onnx",
        "streamer.json",
    ]
    assert not (folder / "step.onnx").is_symlink() and json.loads((folder / "config.json").read_text())["causal"]
    assert sorted(p.name for p in root.iterdir()) == ["export", "victim.txt"]  # no temporary folder left


def test_a_folder_holding_what_an_export_does_not_write_is_refused_even_with_overwrite(tmp_path, causal, capsys):
    (tmp_path / "notes.txt").write_text("mine\n")
    before = digest(tmp_path)
    assert main(["export-streamer", "-o", str(tmp_path), "--model", str(causal), "--overwrite"]) == 1
    assert "holds notes.txt, which an export does not write" in capsys.readouterr().err
    assert digest(tmp_path) == before
    assert main(["export-streamer", "-o", str(causal), "--model", str(causal), "--overwrite"]) == 1
    assert "the folder is replaced whole and would take the input --model" in capsys.readouterr().err


def step_and_names(causal: Path) -> tuple[GazeFlowStreamerStep, list[str]]:
    model = GazeFlowModel.from_pretrained(causal).eval()
    step = GazeFlowStreamerStep(model, SamplingSettings.resolve(model.config, num_samples=K, num_steps=S)).eval()
    return step, state_names(step.new_state(1))


def test_the_check_rejects_a_graph_that_differs_from_torch_or_that_onnxruntime_cannot_load(exported, causal, tmp_path):
    _, folder = exported
    step, names = step_and_names(causal)
    checked = check_against_torch(step, folder / "step.onnx", names, 4)
    assert checked["frames"] == 4 and checked["max_abs_difference"] <= onnx_export.CHECK_TOLERANCE
    with pytest.raises(ExportCheckError, match=r"differs from torch by .* over 4 frames \(more than 0\): not kept"):
        check_against_torch(step, folder / "step.onnx", names, 4, tolerance=0.0)
    graph = onnx.load(str(folder / "step.onnx"))
    for initializer in graph.graph.initializer:  # every weight scaled: another model
        values = onnx.numpy_helper.to_array(initializer)
        if values.dtype == np.float32 and values.size > 1:
            initializer.CopyFrom(onnx.numpy_helper.from_array(values * 1.5 + 0.1, initializer.name))
    onnx.save(graph, str(tmp_path / "perturbed.onnx"))
    with pytest.raises(ExportCheckError, match=r"differs from torch by .* \(more than 0.001\): not kept"):
        check_against_torch(step, tmp_path / "perturbed.onnx", names, 4)
    (tmp_path / "bytes.onnx").write_bytes(os.urandom(4096))
    with pytest.raises(ExportCheckError, match=r"cannot be run by onnxruntime \(.*\): not kept$"):
        check_against_torch(step, tmp_path / "bytes.onnx", names, 4)


def test_a_rejected_or_interrupted_export_leaves_the_earlier_export_as_it_was(exported, causal, monkeypatch, capsys):
    root, folder = exported
    before = digest(root)
    argv = ["export-streamer", "-o", str(folder), "--model", str(causal), "-k", "3", "-s", str(S)]
    real_check = onnx_export.check_against_torch

    def too_tight(step, path, names, frames, tolerance=None):  # torch and onnxruntime never agree to the bit
        return real_check(step, path, names, 2, tolerance=0.0)

    monkeypatch.setattr(onnx_export, "check_against_torch", too_tight)
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"gazeflow: error: --output-dir {folder}: the exported step differs from torch by ")
    assert err.endswith("not kept (the folder is left as it was)") and len(err.splitlines()) == 1
    assert digest(root) == before  # no new step.onnx beside the old streamer.json, no temporary folder
    monkeypatch.undo()

    def terminated(*args, **kwargs):  # SIGTERM while the graph is written into the temporary sibling
        raise cli.Terminated()

    monkeypatch.setattr(onnx_export, "export_graph", terminated)
    assert main(argv) == 143
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "gazeflow: terminated (SIGTERM): nothing of the export was kept; the output folder is as it was"
    )
    assert digest(root) == before


def test_stream_refuses_an_export_whose_files_lie_in_one_line(exported, tmp_path, capsys):
    """A step.onnx of random bytes, a streamer.json whose ``file`` leaves its folder or whose shapes are not the
    graph's: each one line naming the file (and the field), status 1, before a frame is read."""
    _, folder = exported
    clip = write_video(tmp_path / "clip.mp4", random_video(4, seed=2), fps=24.0)
    (tmp_path / "other").mkdir()
    shutil.copy(folder / "step.onnx", tmp_path / "other" / "step.onnx")

    def stream_with(name: str, change) -> str:
        copy = tmp_path / name
        shutil.copytree(folder, copy)
        change(copy)
        status = main(["stream", str(clip), "--backend", "onnxruntime", "--onnx", str(copy)])
        err = capsys.readouterr().err.strip().splitlines()
        assert status == 1 and len(err) == 1, err
        return err[0]

    def edit(*fields: str, value):
        def change(copy: Path) -> None:
            record = json.loads((copy / "streamer.json").read_text())
            for field in fields:
                target = record
                *path, last = field.split(".")
                for key in path:
                    target = target[int(key) if key.isdigit() else key]
                target[int(last) if last.isdigit() else last] = value
            (copy / "streamer.json").write_text(json.dumps(record))

        return change

    line = stream_with("bytes", lambda copy: (copy / "step.onnx").write_bytes(os.urandom(4096)))
    assert line.startswith(f"gazeflow: error: {tmp_path / 'bytes' / 'step.onnx'}: onnxruntime cannot load this graph")
    line = stream_with("escaped", edit("file", value="../other/step.onnx"))
    assert f"{tmp_path / 'escaped' / 'streamer.json'}: file: expected one file name inside" in line
    line = stream_with("absolute", edit("file", value=str(tmp_path / "other" / "step.onnx")))
    assert f"{tmp_path / 'absolute' / 'streamer.json'}: file: expected one file name inside" in line
    line = stream_with("shape", edit("inputs.2.shape", "outputs.2.shape", value=[1, 2, 3]))  # agree, but not the graph
    assert f"{tmp_path / 'shape' / 'streamer.json'}: inputs state." in line and ": expected the graph's [" in line
