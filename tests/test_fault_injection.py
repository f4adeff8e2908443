"""Kill -9 training at chosen points (``GAZEFLOW_KILL_AT``), damage its checkpoints, resume with ``latest``: the
result is the uninterrupted run's, bit for bit, and every bad file is named.

Runs ``examples/train.py`` on the tiny synthetic dataset, 9 steps of batch 8 (8 steps per epoch, so a resume
crosses an epoch end), a checkpoint every 3 steps. Each run is a forked process (``train_forkserver.py``): a few
seconds each instead of the imports' 10-30."""

import json
import pickle
import re
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from transformers_gazeflow.training.checkpointing import read_index, write_manifest

from .train_forkserver import TrainServer

ARGS = [
    "--dataset_name",
    "synthetic",
    "--dataset_config",
    "tiny",
    "--config_preset",
    "tiny",
    "--per_device_train_batch_size",
    "8",
    "--dataloader_num_workers",
    "0",
    "--logging_steps",
    "1",
    "--max_train_steps",
    "9",
    "--checkpointing_steps",
    "3",
]
KILLED = -9  # the return code of a process ended by SIGKILL


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    import os

    env = {
        **os.environ,
        "HF_DATASETS_CACHE": str(tmp_path_factory.mktemp("hf_datasets_cache")),
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "OMP_NUM_THREADS": "1",
    }
    env.pop("GAZEFLOW_KILL_AT", None)
    server = TrainServer(env, tmp_path_factory.mktemp("train_logs"))
    yield server
    server.close()


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("synthetic_tiny")


def train(server, data_dir, output_dir, *extra, kill_at=None, expect=0):
    run = server.run(
        ARGS + ["--data_dir", data_dir, "--output_dir", output_dir, *extra],
        env={"GAZEFLOW_KILL_AT": kill_at} if kill_at else None,
    )
    assert run.returncode == expect, f"return code {run.returncode}, expected {expect}:\n{run.output[-4000:]}"
    if kill_at:
        assert f"SIGKILL at {kill_at!r}" in run.output
    return run.output


@pytest.fixture(scope="module")
def reference(server, data_dir, tmp_path_factory):
    """The uninterrupted run: step_3, step_6, step_9 and the final (EMA) model."""
    output_dir = tmp_path_factory.mktemp("reference")
    output = train(server, data_dir, output_dir)
    assert "[rank 0] parameter checksum" in output and re.search(r"step 9 epoch 1 loss", output)
    assert [e["path"] for e in read_index(output_dir)] == ["step_3", "step_6", "step_9"]
    return output_dir


@pytest.fixture
def copy_of_reference(reference, tmp_path):
    """A finished run to damage; its lineage (``checkpoints.json``) holds relative paths, so the copy is a run."""
    shutil.copytree(reference, tmp_path / "run")
    return tmp_path / "run"


def assert_same_model(folder, reference_folder):
    a, b = load_file(Path(folder) / "model.safetensors"), load_file(Path(reference_folder) / "model.safetensors")
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), f"{folder}: {key} differs from the uninterrupted run"


def assert_finished_like(output_dir, reference, output):
    """Final EMA model and the last checkpoint equal to the uninterrupted run's, no step beyond max_train_steps."""
    assert_same_model(output_dir, reference)
    assert_same_model(output_dir / "step_9", reference / "step_9")
    state = json.loads((output_dir / "trainer_state.json").read_text())
    assert state["completed_steps"] == 9, state
    assert state == json.loads((reference / "trainer_state.json").read_text())
    assert not re.search(r"INFO train: step 1\d ", output), "trained beyond --max_train_steps 9"


def resumed_from(output):
    match = re.search(r"resumed from (\S+) at step (\d+)", output)
    return (Path(match.group(1)).name, int(match.group(2))) if match else None


def test_kill_9_anywhere_then_latest_ends_bit_for_bit_like_an_uninterrupted_run(server, data_dir, reference, tmp_path):
    run = tmp_path / "run"
    # 1. between two checkpoints
    train(server, data_dir, run, kill_at="step 5", expect=KILLED)
    assert [e["step"] for e in read_index(run)] == [3]
    # 2. inside a checkpoint write, between two of its files
    output = train(
        server,
        data_dir,
        run,
        "--resume_from_checkpoint",
        "latest",
        kill_at="step_6/optimizer.safetensors",
        expect=KILLED,
    )
    assert resumed_from(output) == ("step_3", 3)
    assert (run / ".tmp_step_6" / "model.safetensors").exists() and not (run / "step_6").exists()
    # 3. a checkpoint complete and in place, the process killed before it recorded it in checkpoints.json
    output = train(server, data_dir, run, "--resume_from_checkpoint", "latest", kill_at="step_9 renamed", expect=KILLED)
    assert resumed_from(output) == ("step_3", 3) and "epoch 0 step 8 validation loss" in output
    assert [e["step"] for e in read_index(run)] == [3, 6] and (run / "step_9").is_dir()
    # 4. during the final save, the model moved into place but not the rest
    output = train(
        server, data_dir, run, "--resume_from_checkpoint", "latest", kill_at="final/model.safetensors", expect=KILLED
    )
    assert resumed_from(output) == ("step_6", 6) and "ignoring step_9" in output
    assert (run / "model.safetensors").exists() and not (run / "trainer_state.json").exists()
    # 5. resumed from the last step's checkpoint: no step more, the same model
    output = train(server, data_dir, run, "--resume_from_checkpoint", "latest")
    assert resumed_from(output) == ("step_9", 9)
    assert_finished_like(run, reference, output)
    for name in sorted(p.name for p in (reference / "step_9").iterdir()):  # the whole state, byte for byte
        assert (run / "step_9" / name).read_bytes() == (reference / "step_9" / name).read_bytes(), name
    assert not list(run.glob(".tmp_*"))


def test_a_crash_during_the_final_save_trains_no_extra_step(server, data_dir, reference, copy_of_reference):
    """The run died after its step_9 checkpoint, while writing the model; relaunched, it used to
    train a 10th step."""
    for name in ("model.safetensors", "trainer_state.json", "README.md"):
        (copy_of_reference / name).unlink()
    output = train(server, data_dir, copy_of_reference, "--resume_from_checkpoint", "latest")
    assert resumed_from(output) == ("step_9", 9)
    assert_finished_like(copy_of_reference, reference, output)


def test_latest_after_an_explicit_resume_and_a_crash_takes_the_new_lineage(
    server, data_dir, reference, copy_of_reference
):
    """Resume from step_3 of a finished run, crash at step 8 (the new step_6 written): ``latest``
    is the new step_6, not the old run's step_9 -- here made to differ, as an older run with other settings would."""
    run = copy_of_reference
    old = load_file(run / "step_9" / "model.safetensors")
    save_file({key: value * 1.01 for key, value in old.items()}, str(run / "step_9" / "model.safetensors"))
    write_manifest(run / "step_9", 9)  # a complete, valid checkpoint: only the lineage tells it apart
    output = train(server, data_dir, run, "--resume_from_checkpoint", run / "step_3", kill_at="step 8", expect=KILLED)
    assert resumed_from(output) == ("step_3", 3) and "step_6, step_9 not part of this run" in output
    output = train(server, data_dir, run, "--resume_from_checkpoint", "latest")
    assert resumed_from(output) == ("step_6", 6) and "ignoring step_9" in output
    assert_finished_like(run, reference, output)


def test_a_truncated_random_state_falls_back_to_the_previous_checkpoint_and_stays_exact(
    server, data_dir, reference, copy_of_reference
):
    """A damaged newest checkpoint (here its random state, which Accelerate skipped with an INFO
    line) is named in a warning, and the run resumes from the newest good one, still exact."""
    rng = copy_of_reference / "step_9" / "rng_state_0.safetensors"
    rng.write_bytes(rng.read_bytes()[:100])
    output = train(server, data_dir, copy_of_reference, "--resume_from_checkpoint", "latest")
    assert re.search(rf"WARNING .*skipping .*step_9: {re.escape(str(rng))}: 100 bytes where manifest.json says", output)
    assert resumed_from(output) == ("step_6", 6)
    assert_finished_like(copy_of_reference, reference, output)


def test_nan_weights_in_the_newest_checkpoint_are_named_and_never_called_good(
    server, data_dir, reference, copy_of_reference
):
    """NaN weights (with a consistent manifest) in step_9: ``latest`` names the file and resumes
    step_6; an explicit resume stops with the file's name. No message calls step_9 good."""
    model_file = copy_of_reference / "step_9" / "model.safetensors"
    weights = load_file(model_file)
    weights = {key: value * float("nan") if value.is_floating_point() else value for key, value in weights.items()}
    save_file(weights, str(model_file))
    write_manifest(model_file.parent, 9)
    output = train(server, data_dir, copy_of_reference, "--resume_from_checkpoint", model_file.parent, expect=1)
    assert re.search(rf"train.py: error: {re.escape(str(model_file))}: tensor '.+' holds NaN or inf", output)
    assert "Traceback" not in output
    output = train(server, data_dir, copy_of_reference, "--resume_from_checkpoint", "latest")
    assert re.search(rf"WARNING .*{re.escape(str(model_file))}: tensor '.+' holds NaN or inf", output)
    assert resumed_from(output) == ("step_6", 6) and "good checkpoint" not in output
    assert_finished_like(copy_of_reference, reference, output)


class _Payload:
    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (exec, (f"open({self.path!r}, 'w').write('pwned')",))


def test_crafted_pickles_in_a_checkpoint_never_run(server, data_dir, reference, copy_of_reference):
    """Accelerate's load_state unpickled ``custom_checkpoint_0.pkl`` (the EMA) with
    ``weights_only=False``; a payload there ran on resume. Checkpoints now hold no pickle, and files the manifest
    does not list are never read."""
    marker = copy_of_reference / "payload_ran"
    for name in ("custom_checkpoint_0.pkl", "random_states_0.pkl"):
        (copy_of_reference / "step_9" / name).write_bytes(pickle.dumps(_Payload(marker)))
    output = train(server, data_dir, copy_of_reference, "--resume_from_checkpoint", "latest")
    assert resumed_from(output) == ("step_9", 9)
    assert "ignoring custom_checkpoint_0.pkl, random_states_0.pkl, not part of the checkpoint" in output
    assert not marker.exists()
    assert_finished_like(copy_of_reference, reference, output)


def test_bad_json_in_trainer_state_names_the_file(server, data_dir, copy_of_reference):
    """A trainer state that is not JSON is named (``train.py: error: Expecting ',' delimiter`` used to name no file)."""
    state_file = copy_of_reference / "step_9" / "trainer_state.json"
    state_file.write_text(state_file.read_text().replace(",", "", 1))
    write_manifest(state_file.parent, 9)  # consistent checksums: the JSON itself is what is wrong
    output = train(server, data_dir, copy_of_reference, "--resume_from_checkpoint", state_file.parent, expect=1)
    assert f"train.py: error: {state_file}: invalid JSON (Expecting ',' delimiter" in output
    assert "Traceback" not in output
