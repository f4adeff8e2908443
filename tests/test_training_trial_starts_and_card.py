"""The trial starts' choice and models (``training.trial_starts``), the model card's training section
(``training.card``) and the checks after training (``training.final_checks``), on hand-written records."""

import argparse
import logging
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from transformers_gazeflow.training.card import describe_trial_starts, model_card_sections
from transformers_gazeflow.training.early_stopping import describe_step_cap, step_cap_verdict
from transformers_gazeflow.training.final_checks import check_replicas_agree, check_step_cap, parameter_checksum
from transformers_gazeflow.training.grounding_plateau import GroundingReference
from transformers_gazeflow.training.run import RUN_LOGGER, TrainingError, TrainingSetup
from transformers_gazeflow.training.trainer_state import TrainerState
from transformers_gazeflow.training.trial_starts import build_start_model, trial_score, trial_score_name

GROUNDED = {"seed": 0, "step": 3, "validation_loss": 1.0, "validation_grounding_loss": 1.25}
PLAIN = {"seed": 1, "step": 3, "validation_loss": 0.75, "validation_grounding_loss": None}


def test_a_start_is_scored_by_its_grounding_loss_where_it_has_one():
    assert trial_score(GROUNDED) == 1.25 and trial_score_name(GROUNDED) == "validation grounding loss"
    assert trial_score(PLAIN) == 0.75 and trial_score_name(PLAIN) == "validation loss"


class TwoParts(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.video_encoder = nn.Linear(3, 3)
        self.head = nn.Linear(3, 2)


def test_a_start_model_is_initialised_under_its_seed_with_the_one_encoder():
    encoder_state = {"weight": torch.full((3, 3), 0.5), "bias": torch.zeros(3)}
    first, again, other = (build_start_model(TwoParts, seed, encoder_state) for seed in (5, 5, 6))
    torch.manual_seed(5)
    reference = TwoParts()  # what seed 5 initialises, built by hand
    assert torch.equal(first.head.weight, reference.head.weight) and torch.equal(first.head.weight, again.head.weight)
    assert not torch.equal(first.head.weight, other.head.weight)
    for model in (first, other):
        assert torch.equal(model.video_encoder.weight, encoder_state["weight"])


def test_the_card_line_on_the_trial_starts():
    assert describe_trial_starts([GROUNDED, {**GROUNDED, "seed": 1, "validation_grounding_loss": 1.5}], 0) == (
        "2 starts sharing one encoder draw; validation grounding loss (EMA) at their end: seed 0 1.25000 (step 3), "
        "seed 1 1.50000 (step 3); continued: seed 0's"
    )
    assert describe_trial_starts([{**GROUNDED, "grounding_progress": 0.4}], 0) == (
        "one start: it had left the grounding plateau at step 3 (40% of the way), so no further start; "
        "validation grounding loss (EMA) 1.25000; continued: seed 0's"
    )


def _setup() -> TrainingSetup:
    args = argparse.Namespace(
        dataset_name="synthetic",
        dataset_config="tiny",
        dataset_options={},
        data_dir="data",
        learning_rate=1e-4,
        min_learning_rate=1e-6,
        weight_decay=1e-4,
        max_grad_norm=1.0,
        per_device_train_batch_size=4,
        gradient_accumulation_steps=2,
        recipe=None,
        ema_decay=0.995,
        cache_features=True,
    )
    return TrainingSetup(
        args=args,
        accelerator=SimpleNamespace(num_processes=2),
        train_set=[None] * 10,
        validation_set=[None] * 2,
        collator=None,
        train_collator=None,
        steps_per_epoch=5,
        max_train_steps=10,
        num_epochs=2,
        mixed_precision="no",
        grounding_reference=GroundingReference(centre_bias=1.4, floor=1.0),
    )


def test_the_card_names_the_saved_weights_and_warns_about_a_stall():
    history = [{"epoch": 0, "step": 5, "validation_loss": 0.5}, {"epoch": 1, "step": 10, "validation_loss": 0.25}]
    stalled = {
        "left_plateau": False,
        "progress": 0.05,
        "threshold": 0.3,
        "best_validation_grounding_loss": 1.38,
        "best_step": 10,
        "centre_bias": 1.4,
        "floor": 1.0,
    }
    state = TrainerState(
        completed_steps=10, epoch=2, best_validation_loss=0.25, best_step=10, history=history, grounding_plateau=stalled
    )
    card = model_card_sections(
        _setup(), SimpleNamespace(state=state, keeps_best_weights=True), "python examples/train.py --x", 12.4
    )
    lines = card["training"].splitlines()
    assert lines[0] == "- command: python examples/train.py --x"
    assert "- batch: effective 16 (4 x 2 processes x 2 accumulation)" in lines
    assert "- wall time: 12 s" in lines and "- windows: 10 train / 2 validation" in lines
    assert "- saved weights: the EMA weights at step 10 (epoch 1), the best validation loss: 0.25000" in lines
    assert "- validation loss per epoch (EMA): [0.5, 0.25]" in lines
    assert any(line.startswith("- grounding plateau check: grounding did not leave its plateau") for line in lines)
    assert card["description"].endswith("(0.995) of step 10, the best validation loss (0.25000).")
    assert card["limitations"].startswith("**Warning: grounding did not leave its plateau")
    assert card["title"] == "GazeFlow trained on synthetic"

    state.grounding_plateau = {**stalled, "left_plateau": True, "progress": 0.5}
    state.best_step = state.best_validation_loss = None
    card = model_card_sections(
        _setup(), SimpleNamespace(state=state, keeps_best_weights=False), "python examples/train.py", 1.0
    )
    assert card["limitations"].startswith("Evaluate it with `examples/evaluate.py`")
    assert card["description"].endswith("of the last step (10).")
    assert (
        "- saved weights: the EMA weights of the last step (10; no validation split to choose by)"
        in card["training"].splitlines()
    )


def test_the_parameter_checksum_sums_every_weight():
    model = nn.Linear(2, 1)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[1.5, -2.0]]))
        model.bias.fill_(4.25)
    assert parameter_checksum(model) == 3.75


def _accelerator(other_replica_offset: float) -> SimpleNamespace:
    """One process's view of a two-process run: gather returns its checksum and the other replica's."""
    return SimpleNamespace(
        unwrap_model=lambda model: model,
        gather=lambda tensor: torch.cat([tensor, tensor + other_replica_offset]),
        device=torch.device("cpu"),
        process_index=0,
    )


def test_replicas_that_diverged_stop_the_run(capsys):
    run = SimpleNamespace(model=nn.Linear(2, 1))
    check_replicas_agree(_accelerator(0.0), run)
    assert "[rank 0] parameter checksum" in capsys.readouterr().out
    with pytest.raises(TrainingError, match="replicas diverged: parameter checksums"):
        check_replicas_agree(_accelerator(1e-6), run)


# ------------------------------------------------------------------------------------------------- the step cap
def _ended(completed_steps: int, best_step: int | None, since_best: int) -> TrainerState:
    return TrainerState(completed_steps=completed_steps, best_step=best_step, epochs_without_improvement=since_best)


def test_a_run_at_its_cap_with_its_best_at_one_of_the_last_two_validations_is_still_improving():
    # 4,000 steps of 4,000: best at the last validation (0 since), at the one before (1 since), two before (2 since)
    assert step_cap_verdict(_ended(4000, 4000, 0), 4000)["still_improving"] is True
    assert step_cap_verdict(_ended(4000, 3598, 1), 4000)["still_improving"] is True
    assert step_cap_verdict(_ended(4000, 3084, 2), 4000)["still_improving"] is False


def test_an_early_stopped_run_did_not_reach_its_cap_and_a_run_without_validation_is_not_judged():
    stopped = step_cap_verdict(_ended(2193, 1548, 5), 4000)
    assert stopped["reached_cap"] is False and stopped["still_improving"] is False
    assert describe_step_cap(stopped) == (
        "not reached: early stopping ended the run at step 2193 (best validation loss at step 1548)"
    )
    # --early_stopping_patience 1 stops one validation after the best: early stopping, not the cap, ended it
    assert step_cap_verdict(_ended(2000, 1800, 1), 4000)["still_improving"] is False
    assert step_cap_verdict(_ended(4000, None, 0), 4000) is None
    assert describe_step_cap(None) == "not judged (no validation split)"


def test_the_step_cap_lines_say_what_to_try_only_when_the_run_was_still_improving():
    assert describe_step_cap(step_cap_verdict(_ended(8000, 7710, 1), 8000)) == (
        "reached (8000 steps) while the validation loss was still improving (best validation loss at step 7710, at "
        "the validation before the last): more steps (--max_train_steps) or more data may help"
    )
    assert describe_step_cap(step_cap_verdict(_ended(10, 10, 0), 10)).endswith(
        "(best validation loss at step 10, at the last validation): more steps (--max_train_steps) or more data "
        "may help"
    )
    assert describe_step_cap(step_cap_verdict(_ended(4000, 2056, 3), 4000)) == (
        "reached (4000 steps); the validation loss had stopped improving (best validation loss at step 2056, 3 "
        "validations before the end)"
    )


def test_the_card_and_the_log_carry_the_step_cap_verdict(caplog):
    history = [{"epoch": 0, "step": 5, "validation_loss": 0.5}, {"epoch": 1, "step": 10, "validation_loss": 0.25}]
    state = TrainerState(completed_steps=10, epoch=2, best_validation_loss=0.25, best_step=10, history=history)
    run = SimpleNamespace(state=state, keeps_best_weights=True)
    card = model_card_sections(_setup(), run, "python examples/train.py", 1.0)
    assert "- step cap: reached (10 steps) while the validation loss was still improving" in card["training"]
    with caplog.at_level(logging.INFO, logger=RUN_LOGGER):
        check_step_cap(_setup(), run)
        state.epochs_without_improvement = 2
        check_step_cap(_setup(), run)
    assert [record.levelname for record in caplog.records] == ["WARNING", "INFO"]
    assert caplog.records[0].getMessage().startswith("step cap check: reached (10 steps) while the validation loss")
    assert caplog.records[1].getMessage().startswith("step cap check: reached (10 steps); the validation loss had")
