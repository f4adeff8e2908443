"""Checkpoints in-process, on a small model: exact save/load of the whole training state through safetensors, the
manifest catching every kind of damage (with the bad file named), the run lineage behind ``latest``, and no
pickle ever loaded. ``tests/test_fault_injection.py`` does the same through ``examples/train.py`` with real kills."""

import json
import logging
import os
import pickle
import random
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from transformers import get_cosine_with_min_lr_schedule_with_warmup

from transformers_gazeflow.training import checkpointing
from transformers_gazeflow.training.checkpointing import (
    INDEX,
    MANIFEST,
    begin_lineage,
    find_checkpoint,
    load_checkpoint,
    read_index,
    save_checkpoint,
    verify_checkpoint,
)
from transformers_gazeflow.training.state_io import (
    StateFileError,
    decode_tree,
    encode_tree,
    read_state_file,
    write_state_file,
)
from transformers_gazeflow.training.trainer_state import CheckpointError, TrainerState

LOGGER = checkpointing.logger.name


@pytest.fixture
def accelerator():
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    yield Accelerator(cpu=True)
    AcceleratorState._reset_state(reset_partial_state=True)


class Trainer:
    """A small model, AdamW, transformers' cosine schedule and an EMA, prepared by Accelerate like train.py's; each
    step draws from torch's, NumPy's and Python's generators, so a resume is exact only if all three are restored."""

    def __init__(self, accelerator, seed=0):
        torch.manual_seed(seed)
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 2))
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.999), weight_decay=1e-4)
        scheduler = get_cosine_with_min_lr_schedule_with_warmup(
            optimizer, num_warmup_steps=2, num_training_steps=20, min_lr=1e-4
        )
        self.accelerator = accelerator
        self.model, self.optimizer, self.scheduler = accelerator.prepare(model, optimizer, scheduler)
        self.ema = AveragedModel(accelerator.unwrap_model(self.model), multi_avg_fn=get_ema_multi_avg_fn(0.9))
        self.state = TrainerState()

    @property
    def objects(self):
        return dict(model=self.model, optimizer=self.optimizer, scheduler=self.scheduler, ema=self.ema)

    def step(self, count=1):
        for _ in range(count):
            x = torch.randn(16, 4) * (1 + np.random.rand()) + random.random()
            loss = (self.model(x) - x[:, :2].sin()).pow(2).mean()
            self.accelerator.backward(loss)
            self.optimizer.step()
            self.scheduler.step()
            self.optimizer.zero_grad()
            self.ema.update_parameters(self.accelerator.unwrap_model(self.model))
            self.state.completed_steps += 1
            self.state.step_in_epoch += 1

    def save(self, output_dir):
        return save_checkpoint(self.accelerator, output_dir, self.state, **self.objects)

    def weights(self):
        return {
            **{f"model.{k}": v.clone() for k, v in self.accelerator.unwrap_model(self.model).state_dict().items()},
            **{f"ema.{k}": v.clone() for k, v in self.ema.state_dict().items()},
        }


def assert_equal_weights(a, b):
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


@pytest.fixture
def run_dir(tmp_path, accelerator):
    """A run with checkpoints step_2, step_4, step_6 (the lineage) and the trainer that wrote them."""
    trainer = Trainer(accelerator)
    for _ in range(3):
        trainer.step(2)
        trainer.save(tmp_path / "run")
    return tmp_path / "run"


# ---------------------------------------------------------------------------------------------------- exactness
def test_a_resumed_state_continues_bit_for_bit(tmp_path, accelerator):
    trainer = Trainer(accelerator)
    trainer.step(3)
    folder = trainer.save(tmp_path)
    trainer.step(4)
    expected = trainer.weights()

    resumed = Trainer(accelerator, seed=1)  # other initial weights, other generator states
    torch.manual_seed(123), np.random.seed(5), random.seed(7)
    resumed.state = load_checkpoint(find_checkpoint(folder, tmp_path), accelerator, **resumed.objects)
    assert resumed.state.completed_steps == 3
    assert resumed.optimizer.param_groups[0]["betas"] == (0.9, 0.999)  # tuples come back as tuples
    resumed.step(4)
    assert_equal_weights(resumed.weights(), expected)
    assert resumed.scheduler.get_last_lr() == trainer.scheduler.get_last_lr()


def test_checkpoint_files_are_safetensors_and_json_only(run_dir):
    folder = run_dir / "step_6"
    names = sorted(p.name for p in folder.iterdir())
    assert names == [
        "ema.safetensors",
        "manifest.json",
        "model.safetensors",
        "optimizer.safetensors",
        "rng_state_0.safetensors",
        "scheduler.safetensors",
        "trainer_state.json",
    ]
    manifest = json.loads((folder / MANIFEST).read_text())
    assert sorted(manifest["files"]) == [n for n in names if n != MANIFEST]
    for name in names:
        if name.endswith(".safetensors"):
            load_file(folder / name)  # a safetensors file, not a pickle under another name
        else:
            json.loads((folder / name).read_text())
    assert not list(run_dir.glob(".tmp_*"))


def test_state_tree_round_trip_keeps_types_and_refuses_foreign_objects(tmp_path):
    tree = {
        "a": (1, 2.5, None, True),
        3: [torch.arange(4), np.arange(3, dtype=np.uint32)],
        "__x": float("inf"),
        "s": "text",
        "rng": random.getstate(),
    }
    tensors = {}
    decoded = decode_tree(json.loads(json.dumps(encode_tree(tree, tensors), allow_nan=False)), tensors)
    assert decoded["a"] == (1, 2.5, None, True) and decoded["__x"] == float("inf") and decoded["s"] == "text"
    assert torch.equal(decoded[3][0], torch.arange(4))
    assert decoded[3][1].dtype == np.uint32 and decoded[3][1].tolist() == [0, 1, 2]
    assert decoded["rng"] == random.getstate()
    with pytest.raises(TypeError, match="cannot store a function"):
        encode_tree({"f": lambda: 0}, {})
    write_state_file(tmp_path / "tree.safetensors", tree)
    assert read_state_file(tmp_path / "tree.safetensors")["a"] == (1, 2.5, None, True)
    save_file({"x": torch.zeros(2)}, str(tmp_path / "plain.safetensors"))
    with pytest.raises(StateFileError, match="plain.safetensors: not a training-state file"):
        read_state_file(tmp_path / "plain.safetensors")


class _Payload:
    """Unpickling this runs code: it creates ``path``."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (exec, (f"open({self.path!r}, 'w').write('pwned')",))


def test_a_pickle_in_place_of_a_state_file_is_refused_not_run(tmp_path):
    marker = tmp_path / "executed"
    (tmp_path / "optimizer.safetensors").write_bytes(pickle.dumps(_Payload(marker)))
    with pytest.raises(StateFileError, match="optimizer.safetensors: unreadable training state"):
        read_state_file(tmp_path / "optimizer.safetensors")
    assert not marker.exists()


def test_pickles_dropped_into_a_checkpoint_are_never_read(run_dir, accelerator, caplog):
    marker = run_dir / "executed"
    for name in ("custom_checkpoint_0.pkl", "random_states_0.pkl", "optimizer.bin"):
        (run_dir / "step_6" / name).write_bytes(pickle.dumps(_Payload(marker)))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        folder = find_checkpoint("latest", run_dir)
        load_checkpoint(folder, accelerator, **Trainer(accelerator).objects)
    assert folder.name == "step_6" and not marker.exists()
    assert "ignoring custom_checkpoint_0.pkl, optimizer.bin, random_states_0.pkl" in caplog.text


def test_an_accelerate_style_checkpoint_without_manifest_is_refused(tmp_path):
    marker = tmp_path / "executed"
    legacy = tmp_path / "step_2"
    legacy.mkdir()
    (legacy / "custom_checkpoint_0.pkl").write_bytes(pickle.dumps(_Payload(marker)))
    (legacy / "trainer_state.json").write_text(json.dumps({"completed_steps": 2}))
    with pytest.raises(CheckpointError, match=r"step_2: not a complete checkpoint \(no manifest.json"):
        find_checkpoint(legacy, tmp_path)
    with pytest.raises(CheckpointError, match="checkpoints.json is missing.*name one with --resume_from_checkpoint"):
        find_checkpoint("latest", tmp_path)
    assert not marker.exists()


# ---------------------------------------------------------------------------------------------------- damage
def _rewrite_manifest(folder: Path) -> None:
    """Make a tampered checkpoint self-consistent again (as a buggy writer would), so only deeper checks catch it."""
    checkpointing.write_manifest(folder, json.loads((folder / MANIFEST).read_text())["step"])


def _truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _garble(path):
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(64)
    path.write_bytes(bytes(data))


def _plausible_weights(path):  # same size, valid safetensors, other values: only a checksum tells
    tensors = load_file(path)
    save_file({key: value * 1.01 for key, value in tensors.items()}, str(path))


def _nan_weights(path):
    tensors = load_file(path)
    key = sorted(tensors)[0]
    tensors[key] = torch.full_like(tensors[key], float("nan"))
    save_file(tensors, str(path))
    _rewrite_manifest(path.parent)


def _bad_json(path):
    path.write_text('{"completed_steps": 6 "epoch": 0}')
    _rewrite_manifest(path.parent)


@pytest.mark.parametrize(
    "name,damage,message",
    [
        ("model.safetensors", _truncate, r"model.safetensors: \d+ bytes where manifest.json says \d+ \(truncated"),
        ("optimizer.safetensors", _garble, "optimizer.safetensors: sha256 differs from manifest.json"),
        ("model.safetensors", _plausible_weights, "model.safetensors: sha256 differs from manifest.json"),
        ("rng_state_0.safetensors", _truncate, r"rng_state_0.safetensors: \d+ bytes where manifest.json says"),
        ("ema.safetensors", _nan_weights, "ema.safetensors: tensor 'module.0.bias' holds NaN or inf"),
        ("trainer_state.json", _bad_json, r"trainer_state.json: invalid JSON \(Expecting ',' delimiter"),
        ("manifest.json", _truncate, r"manifest.json: invalid JSON"),
        ("scheduler.safetensors", Path.unlink, "scheduler.safetensors: missing"),
    ],
)
def test_damage_to_the_newest_checkpoint_falls_back_with_a_warning_naming_the_file(
    run_dir, caplog, name, damage, message
):
    damage(run_dir / "step_6" / name)
    with pytest.raises(CheckpointError, match=re.escape(f"{run_dir / 'step_6'}/") + message):
        verify_checkpoint(run_dir / "step_6")  # an explicit --resume_from_checkpoint names the file and stops
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert find_checkpoint("latest", run_dir) == run_dir / "step_4"
    warning = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warning) == 1 and "skipping" in warning[0] and "trying the previous checkpoint of this run" in warning[0]
    assert str(run_dir / "step_6" / name) in warning[0]


def test_when_every_checkpoint_is_damaged_latest_says_so(run_dir, caplog):
    for step in (2, 4, 6):
        _truncate(run_dir / f"step_{step}" / "model.safetensors")
    with (
        caplog.at_level(logging.WARNING, logger=LOGGER),
        pytest.raises(CheckpointError, match="none of the 3 checkpoint.s. of the current run .* verifies"),
    ):
        find_checkpoint("latest", run_dir)
    assert caplog.text.count("skipping") == 3


def test_a_trainer_state_of_the_wrong_shape_names_the_file_and_field(tmp_path):
    (tmp_path / "trainer_state.json").write_text(json.dumps({"completed_steps": "6"}))
    with pytest.raises(CheckpointError, match="trainer_state.json: completed_steps is '6', expected int"):
        TrainerState.load(tmp_path)
    (tmp_path / "trainer_state.json").write_text(json.dumps({"completed_steps": 6, "learning_rate": 1}))
    with pytest.raises(
        CheckpointError,
        match=r"trainer_state.json: not a trainer state \(unexpected "
        r"\['learning_rate'\]",
    ):
        TrainerState.load(tmp_path)
    (tmp_path / "trainer_state.json").write_text(json.dumps({"completed_steps": 6}))
    with pytest.raises(CheckpointError, match="trainer_state.json: epoch is missing"):
        TrainerState.load(tmp_path)
    (tmp_path / "trainer_state.json").write_text("[6]")
    with pytest.raises(CheckpointError, match=r"trainer_state.json: not a trainer state \(a JSON list"):
        TrainerState.load(tmp_path)


def test_non_finite_weights_are_never_saved(tmp_path, accelerator):
    trainer = Trainer(accelerator)
    trainer.step(2)
    with torch.no_grad():
        trainer.accelerator.unwrap_model(trainer.model)[2].weight[0, 0] = float("inf")
    with pytest.raises(CheckpointError, match=r"step_2: not written: the model's '2.weight' holds NaN or inf"):
        trainer.save(tmp_path)
    assert not (tmp_path / "step_2").exists()


def test_loading_into_another_model_names_the_file(run_dir, accelerator):
    other = Trainer(accelerator)
    other.ema = AveragedModel(torch.nn.Linear(4, 2))
    with pytest.raises(CheckpointError, match=r"step_6/ema.safetensors: does not match this AveragedModel"):
        load_checkpoint(run_dir / "step_6", accelerator, **other.objects)


def test_a_checkpoint_of_two_processes_is_not_resumed_by_one(run_dir, accelerator):
    state = json.loads((run_dir / "step_6" / "trainer_state.json").read_text())
    (run_dir / "step_6" / "trainer_state.json").write_text(json.dumps({**state, "num_processes": 2}))
    with pytest.raises(CheckpointError, match=r"step_6: written by 2 process\(es\), this run has 1: resume with 2"):
        load_checkpoint(run_dir / "step_6", accelerator, **Trainer(accelerator).objects)


# ---------------------------------------------------------------------------------------------------- lineage
def test_latest_follows_the_lineage_of_an_explicit_resume_not_the_highest_step(run_dir, accelerator, caplog):
    """Resume from step_2 of a run that reached step_6, save step_4 again, crash: ``latest`` is the
    new step_4, not the abandoned step_6."""
    assert [e["path"] for e in read_index(run_dir)] == ["step_2", "step_4", "step_6"]
    resumed = Trainer(accelerator)
    resumed.state = load_checkpoint(run_dir / "step_2", accelerator, **resumed.objects)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        begin_lineage(run_dir, run_dir / "step_2", accelerator)
    assert "step_4, step_6 not part of this run" in caplog.text
    assert [e["path"] for e in read_index(run_dir)] == ["step_2"]
    assert find_checkpoint("latest", run_dir) == run_dir / "step_2"
    resumed.optimizer.param_groups[0]["lr"] = 0.5  # this lineage differs from the abandoned one
    resumed.step(2)
    new_step_4 = resumed.save(run_dir)
    resumed.step(1)  # ... and the process dies at step 5
    assert (run_dir / "step_6").is_dir()
    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert find_checkpoint("latest", run_dir) == new_step_4
    assert "ignoring step_6 (not in" in caplog.text
    assert [e["path"] for e in read_index(run_dir)] == ["step_2", "step_4"]


def test_a_fresh_start_begins_an_empty_lineage(run_dir, accelerator):
    begin_lineage(run_dir, None, accelerator)
    assert read_index(run_dir) == []
    with pytest.raises(
        FileNotFoundError,
        match="the current run under --output_dir .* has no checkpoint yet; "
        "step_2, step_4, step_6 belong to an abandoned run",
    ):
        find_checkpoint("latest", run_dir)


def test_a_replaced_checkpoint_folder_is_not_taken_for_the_one_the_run_wrote(run_dir, caplog):
    shutil.rmtree(run_dir / "step_6")
    shutil.copytree(run_dir / "step_4", run_dir / "step_6")  # complete and valid, but not what this run wrote there
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert find_checkpoint("latest", run_dir) == run_dir / "step_4"
    assert "step_6/manifest.json: not the checkpoint this run wrote" in caplog.text


def test_resuming_from_another_output_dir_records_it_as_the_lineage_root(run_dir, tmp_path, accelerator):
    other = tmp_path / "other"
    other.mkdir()
    begin_lineage(other, run_dir / "step_4", accelerator)
    (entry,) = read_index(other)
    assert entry["step"] == 4 and entry["path"] == str(run_dir / "step_4")
    assert find_checkpoint("latest", other) == run_dir / "step_4"


def test_a_damaged_index_names_itself(run_dir):
    (run_dir / INDEX).write_text("{")
    with pytest.raises(CheckpointError, match=r"checkpoints.json: invalid JSON"):
        find_checkpoint("latest", run_dir)
    (run_dir / INDEX).write_text(json.dumps({"format": "gazeflow-checkpoint-index/1", "lineage": [{"step": "2"}]}))
    with pytest.raises(CheckpointError, match="checkpoints.json: not a gazeflow-checkpoint-index/1 checkpoint index"):
        find_checkpoint("latest", run_dir)


def test_an_interrupted_save_leaves_the_lineage_as_it_was(run_dir, accelerator, monkeypatch):
    trainer = Trainer(accelerator)
    trainer.state = load_checkpoint(run_dir / "step_6", accelerator, **trainer.objects)
    trainer.step(2)

    def crash(path, module):
        raise OSError("disk full")

    monkeypatch.setattr(checkpointing, "write_module_file", crash)
    with pytest.raises(OSError, match="disk full"):
        trainer.save(run_dir)
    assert (run_dir / ".tmp_step_8").is_dir() and not (run_dir / "step_8").exists()
    assert find_checkpoint("latest", run_dir) == run_dir / "step_6"
    monkeypatch.undo()
    assert trainer.save(run_dir) == run_dir / "step_8" and not (run_dir / ".tmp_step_8").exists()
    assert [e["step"] for e in read_index(run_dir)] == [2, 4, 6, 8]
    assert sorted(os.listdir(run_dir / "step_8")) == sorted(os.listdir(run_dir / "step_6"))
