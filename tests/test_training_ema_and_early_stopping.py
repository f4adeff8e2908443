"""The EMA of the weights and early stopping (``training.ema``, ``training.early_stopping``, the loop's use of both),
checked against values worked out by hand."""

import argparse
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from tests.script_loading import load_script
from transformers_gazeflow.training import loop
from transformers_gazeflow.training.early_stopping import early_stopping_min_steps, note_validation_loss, patience_spent
from transformers_gazeflow.training.ema import cpu_state_dict, exponential_moving_average
from transformers_gazeflow.training.trainer_state import TrainerState

TRAIN = Path(__file__).resolve().parents[1] / "examples" / "train.py"


def _set(linear: nn.Linear, weight: float, bias: float) -> None:
    with torch.no_grad():
        linear.weight.fill_(weight)
        linear.bias.fill_(bias)


def test_the_ema_copies_the_first_step_then_moves_by_one_minus_the_decay():
    model = nn.Linear(1, 1)
    _set(model, 0.5, 0.0)
    ema = exponential_moving_average(model, 0.9)
    # (weight, bias) after each step, and the average by hand: W_1 = w_1, W_t = 0.9 W_{t-1} + 0.1 w_t
    steps = [
        ((1.0, 2.0), (1.0, 2.0)),
        ((3.0, 2.0), (1.2, 2.0)),
        ((3.0, -8.0), (1.38, 1.0)),
        ((-1.0, 0.0), (1.142, 0.9)),
    ]
    for (weight, bias), (expected_weight, expected_bias) in steps:
        _set(model, weight, bias)
        ema.update_parameters(model)
        assert ema.module.weight.item() == pytest.approx(expected_weight, abs=1e-6)
        assert ema.module.bias.item() == pytest.approx(expected_bias, abs=1e-6)
    assert model.weight.item() == -1.0  # the average is a copy: the model keeps its own weights


def test_the_ema_decay_sets_the_weight_of_the_past():
    model = nn.Linear(1, 1)
    _set(model, 0.0, 0.0)
    ema = exponential_moving_average(model, 0.75)
    for weight in (4.0, 0.0, 2.0):
        _set(model, weight, 0.0)
        ema.update_parameters(model)
    assert ema.module.weight.item() == pytest.approx(2.75)  # 4, then 0.75 * 4 + 0.25 * 0 = 3, then 0.75 * 3 + 0.25 * 2


def test_the_ema_copies_buffers_instead_of_averaging_them():
    model = nn.BatchNorm1d(1)
    ema = exponential_moving_average(model, 0.9)
    for mean in (5.0, 7.0):
        model.running_mean.fill_(mean)
        ema.update_parameters(model)
    assert ema.module.running_mean.item() == 7.0


def test_the_snapshot_is_a_detached_cpu_copy():
    model = nn.Linear(2, 1)
    snapshot = cpu_state_dict(model)
    before = snapshot["weight"].clone()
    with torch.no_grad():
        model.weight.add_(1.0)
    assert torch.equal(snapshot["weight"], before) and snapshot["weight"].device.type == "cpu"
    assert not snapshot["weight"].requires_grad


def test_early_stopping_counts_epochs_since_the_best_and_a_tie_is_no_improvement():
    state = TrainerState()
    seen = []
    for step, loss in zip((10, 20, 30, 40, 50, 60), (0.5, 0.4, 0.4, 0.45, 0.3, 0.31)):
        state.completed_steps = step
        seen.append((note_validation_loss(state, loss), state.epochs_without_improvement, state.best_step))
    assert seen == [(True, 0, 10), (True, 0, 20), (False, 1, 20), (False, 2, 20), (True, 0, 50), (False, 1, 50)]
    assert state.best_validation_loss == 0.3
    assert not patience_spent(state, 2)
    note_validation_loss(state, 0.35)
    assert patience_spent(state, 2) and not patience_spent(state, 3)


def test_patience_is_not_spent_before_the_minimum_step():
    """The first epochs' validation losses do not end a run: 2 epochs without improvement at step 12 of 200 with
    20 warm-up steps leave patience 2 unspent until step max(20, 200 // 4) = 50."""
    assert early_stopping_min_steps(200, 20) == 50 and early_stopping_min_steps(200, 80) == 80
    assert early_stopping_min_steps(200, 20, requested=0) == 0
    state = TrainerState(completed_steps=12, epochs_without_improvement=2)
    assert not patience_spent(state, 2, min_steps=50) and patience_spent(state, 2, min_steps=12)
    state.completed_steps = 50
    assert patience_spent(state, 2, min_steps=50)


def test_a_state_whose_patience_is_spent_trains_no_further():
    """A run restored from a checkpoint written as early stopping hit (a chosen trial start that stopped early) is
    over: the loop returns at once, before it touches the data or the model."""
    setup = SimpleNamespace(
        args=argparse.Namespace(early_stopping_patience=2, num_warmup_steps=0, early_stopping_min_steps=None),
        max_train_steps=100,
    )
    run = SimpleNamespace(state=TrainerState(completed_steps=40, epochs_without_improvement=2))
    assert loop.train_epochs(setup, run, Path("unused")) is True
    assert run.state.completed_steps == 40


@pytest.mark.parametrize("min_steps, stopped_at", [(None, 24), (40, 40)])
def test_the_loop_stops_after_patience_epochs_without_improvement(tmp_path, monkeypatch, caplog, min_steps, stopped_at):
    """8 steps an epoch, validation losses scripted 0.5, 0.6, 0.7, 0.8, ...: with patience 2 the run stops after
    the third epoch (step 24; the default minimum is 48 // 4 = 12 steps) and keeps the first epoch's weights; with
    ``--early_stopping_min_steps 40`` it trains on to step 40 first."""
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf_cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    scripted = iter([0.5, 0.6, 0.7, 0.8, 0.9, 1.0])
    monkeypatch.setattr(loop, "validation_loss", lambda model, loader, accelerator, seed: (next(scripted), None))
    bar = loop.tqdm
    monkeypatch.setattr(loop, "tqdm", lambda *args, **kwargs: bar(*args, **{**kwargs, "disable": True}))
    train = load_script(TRAIN, "gazeflow_train_early_stopping")
    argv = ["--dataset_name", "synthetic", "--dataset_config", "tiny", "--config_preset", "tiny"]
    argv += ["--per_device_train_batch_size", "8", "--dataloader_num_workers", "0", "--no-use_lora"]
    argv += ["--num_train_epochs", "6", "--early_stopping_patience", "2"]
    argv += [] if min_steps is None else ["--early_stopping_min_steps", str(min_steps)]
    argv += ["--data_dir", str(tmp_path / "data"), "--output_dir", str(tmp_path / "run")]
    with caplog.at_level(logging.INFO, logger="train"):
        assert train.main(argv) == 0
    state = TrainerState.load(tmp_path / "run")
    assert [record["step"] for record in state.history] == list(range(8, stopped_at + 1, 8))
    assert state.completed_steps == stopped_at and state.best_step == 8
    assert state.epochs_without_improvement == stopped_at // 8 - 1
    expected = f"early stopping at step {stopped_at}: no validation improvement for {stopped_at // 8 - 1} epochs"
    assert any(message.startswith(expected) for message in caplog.messages), caplog.messages
