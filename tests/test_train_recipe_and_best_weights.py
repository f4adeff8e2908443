"""examples/train.py's named recipes (``--recipe``) and its best-validation EMA weights."""

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.script_loading import load_script
from transformers_gazeflow.training import loop
from transformers_gazeflow.training.recipes import RECIPES, SMALL_CPU
from transformers_gazeflow.training.trainer_state import TrainerState
from transformers_gazeflow.training.validation import validation_loss

REPO = Path(__file__).resolve().parents[1]
TRAIN = REPO / "examples" / "train.py"
TINY = [
    "--dataset_name",
    "synthetic",
    "--dataset_config",
    "tiny",
    "--config_preset",
    "tiny",
    "--per_device_train_batch_size",
    "4",
    "--dataloader_num_workers",
    "0",
    "--logging_steps",
    "1",
]


@pytest.fixture(scope="module")
def train():
    return load_script(TRAIN, "gazeflow_train_recipe_script")


def test_a_recipe_sets_every_knob_and_each_stays_overridable(train):
    args = train.parse_args(["--recipe", "small-cpu", "--dataset_name", "synthetic", "--output_dir", "out"])
    for name, value in SMALL_CPU.arguments.items():
        assert getattr(args, name) == value, name
    overrides = train.parse_config_overrides(args.config_overrides)
    assert overrides["hidden_size"] == 64 and overrides["encoder_config"]["crop_size"] == 64
    assert args.use_lora is False and args.cache_features is True and args.max_train_steps == 4000

    changed = train.parse_args(
        [
            "--recipe",
            "small-cpu",
            "--dataset_name",
            "synthetic",
            "--output_dir",
            "out",
            "--learning_rate",
            "3e-4",
            "--no-cache_features",
            "--max_train_steps",
            "10",
            "--config_overrides",
            "hidden_size=128,flow_time_sampling=late_quadratic",
        ]
    )
    assert changed.learning_rate == 3e-4 and changed.cache_features is False and changed.max_train_steps == 10
    assert changed.per_device_train_batch_size == SMALL_CPU.arguments["per_device_train_batch_size"]
    merged = train.parse_config_overrides(changed.config_overrides)
    assert merged["hidden_size"] == 128 and merged["flow_time_sampling"] == "late_quadratic"
    assert merged["num_hidden_layers"] == 3 and merged["encoder_config"]["patch_size"] == 8  # the rest kept
    assert merged["grounding_loss_weight"] == 1.0

    plain = train.parse_args(["--dataset_name", "synthetic", "--output_dir", "out"])
    assert plain.recipe is None and plain.learning_rate == 1e-4 and plain.config_overrides is None


def test_the_recipe_builds_the_documented_model(train):
    args = train.parse_args(["--recipe", "small-cpu", "--dataset_name", "synthetic", "--output_dir", "out"])
    config = train.build_model(args).config
    assert (config.hidden_size, config.num_hidden_layers, config.num_frames, config.window_stride) == (64, 3, 16, 8)
    assert config.encoder_config.crop_size == 64 and config.use_lora is False
    assert (config.encoder_config.patch_size, config.encoder_config.hidden_size) == (8, 128)
    assert (config.num_samples, config.num_steps, config.flow_time_sampling) == (16, 5, "uniform")
    assert (config.num_temporal_layers, config.num_spatial_layers, config.spatial_attention_init) == (1, 2, "mimetic")


def test_the_help_lists_the_recipes_and_a_bad_one_is_named(train, capsys):
    with pytest.raises(SystemExit):
        train.parse_args(["--help"])
    out = capsys.readouterr().out
    assert all(name in out for name in RECIPES) and "--recipe" in out
    with pytest.raises(SystemExit) as exit_info:
        train.parse_args(["--recipe", "huge-gpu", "--dataset_name", "synthetic", "--output_dir", "out"])
    assert exit_info.value.code == 2 and "--recipe: invalid choice: 'huge-gpu'" in capsys.readouterr().err


def script_validation_losses(monkeypatch, tmp_path, losses: list[float]) -> list[dict]:
    """Offline, quiet training whose validations return ``losses`` in turn; returns the list that each validation
    appends the weights it read to."""
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf_cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    scripted = iter(losses)
    snapshots = []

    def scripted_validation(model, dataloader, accelerator, seed):
        snapshots.append({k: v.detach().clone() for k, v in model.state_dict().items()})
        return next(scripted), None

    monkeypatch.setattr(loop, "validation_loss", scripted_validation)
    bar = loop.tqdm
    monkeypatch.setattr(loop, "tqdm", lambda *args, **kwargs: bar(*args, **{**kwargs, "disable": True}))
    return snapshots


def test_the_saved_weights_are_the_best_validation_epochs_ema(train, tmp_path, monkeypatch, caplog):
    """The validation loss falls to its best at the second epoch and rises after: the model folder must hold the EMA
    weights of the second epoch's end (not the last step's), and the card and trainer state must name that step."""
    snapshots = script_validation_losses(monkeypatch, tmp_path, [0.50, 0.30, 0.40, 0.45])
    out = tmp_path / "run"
    extra = ["--num_train_epochs", "4", "--learning_rate", "1e-2", "--ema_decay", "0.5"]
    with caplog.at_level("INFO"):
        assert train.main([str(a) for a in TINY + ["--data_dir", tmp_path / "data", "--output_dir", out]] + extra) == 0
    assert len(snapshots) == 4
    state = TrainerState.load(out)
    steps = [record["step"] for record in state.history]
    assert state.best_step == steps[1] and state.best_validation_loss == pytest.approx(0.30)
    assert f"saved the EMA model of step {steps[1]} to {out}" in caplog.text
    saved = load_file(out / "model.safetensors")
    best, last = snapshots[1], snapshots[3]
    differs = [key for key in saved if not torch.equal(best[key], last[key])]
    assert differs  # the test can tell the two apart: training moved the EMA weights after the best epoch
    for key in saved:
        assert torch.equal(saved[key], best[key].to(saved[key].dtype)), key
    card = (out / "README.md").read_text()
    assert f"the EMA weights at step {steps[1]} (epoch 1), the best validation loss: 0.30000" in card


def test_final_weights_last_saves_the_last_step_s_ema_and_says_so(train, tmp_path, monkeypatch, caplog):
    """The same scripted validation losses (best at the second epoch): with ``--final_weights last`` the folder holds
    the EMA weights the last validation read (the last step's), the card names the step and the best it passed
    over, and the trainer state still records the best step."""
    snapshots = script_validation_losses(monkeypatch, tmp_path, [0.50, 0.30, 0.40, 0.45])
    out = tmp_path / "run"
    extra = ["--num_train_epochs", "4", "--learning_rate", "1e-2", "--ema_decay", "0.5", "--final_weights", "last"]
    args = [str(a) for a in TINY + ["--data_dir", tmp_path / "data", "--output_dir", out]] + extra
    with caplog.at_level("INFO"):
        assert train.main(args) == 0
    state = TrainerState.load(out)
    steps = [record["step"] for record in state.history]
    assert state.best_step == steps[1] and state.completed_steps == steps[3]
    assert f"saved the EMA model of step {steps[3]} to {out}" in caplog.text
    saved = load_file(out / "model.safetensors")
    best, last = snapshots[1], snapshots[3]
    assert [key for key in saved if not torch.equal(best[key], last[key])]  # the two can be told apart
    for key in saved:
        assert torch.equal(saved[key], last[key].to(saved[key].dtype)), key
    card = (out / "README.md").read_text()
    assert f"the EMA weights of the last step ({steps[3]}; --final_weights last), not the EMA weights at step " in card
    assert f"weights (0.5) of the last step ({steps[3]})." in card


def test_an_unknown_final_weights_choice_is_named(train, capsys):
    with pytest.raises(SystemExit):
        train.parse_args(["--dataset_name", "synthetic", "--output_dir", "o", "--final_weights", "middle"])
    assert "argument --final_weights: invalid choice: 'middle'" in capsys.readouterr().err


def test_resume_keeps_the_best_weights_it_had(train, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf_cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    losses = {}

    def scripted_validation(model, dataloader, accelerator, seed):  # best at the first epoch, worse after
        losses.setdefault("calls", 0)
        losses["calls"] += 1
        return (0.2 if losses["calls"] == 1 else 0.9), None

    monkeypatch.setattr(loop, "validation_loss", scripted_validation)
    bar = loop.tqdm
    monkeypatch.setattr(loop, "tqdm", lambda *args, **kwargs: bar(*args, **{**kwargs, "disable": True}))
    full = tmp_path / "full"
    base = [
        str(a)
        for a in TINY
        + ["--data_dir", tmp_path / "data", "--num_train_epochs", 3, "--learning_rate", "1e-2", "--ema_decay", "0.5"]
    ]
    train.main(base + ["--output_dir", str(full), "--checkpointing_steps", "1"])
    state = TrainerState.load(full)
    last_step = state.completed_steps
    assert state.best_step is not None and state.best_step < last_step
    later = full / f"step_{last_step - 1}"
    assert (later / "best_ema.safetensors").exists()
    assert json.loads((later / "trainer_state.json").read_text())["best_step"] == state.best_step
    losses.clear()
    losses["calls"] = 1  # the resumed run's validations all score worse than the best it resumes with
    resumed = tmp_path / "resumed"
    train.main(base + ["--output_dir", str(resumed), "--resume_from_checkpoint", str(later)])
    a, b = load_file(full / "model.safetensors"), load_file(resumed / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[key], b[key]) for key in a)
    assert TrainerState.load(resumed).best_step == state.best_step


def test_an_old_trainer_state_without_best_step_still_loads(tmp_path):
    state = TrainerState(completed_steps=3, best_validation_loss=0.5)
    state.save(tmp_path)
    data = json.loads((tmp_path / "trainer_state.json").read_text())
    del data["best_step"]
    (tmp_path / "trainer_state.json").write_text(json.dumps(data))
    assert TrainerState.load(tmp_path).best_step is None
    data["best_step"] = -1
    (tmp_path / "trainer_state.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match="best_step is -1, expected >= 0"):
        TrainerState.load(tmp_path)


def test_validation_reads_the_flow_matching_loss_and_reports_grounding_beside_it(train):
    """With the grounding head, early stopping reads the flow-matching validation loss alone (the grounding
    cross-entropy, which overfits sooner on small data, is reported beside it); without it, the plain loss."""
    from accelerate import Accelerator

    from transformers_gazeflow import GazeFlowConfig, GazeFlowModel

    torch.manual_seed(0)
    accelerator = Accelerator(cpu=True)
    batches = []
    generator = torch.Generator().manual_seed(0)
    for size in (3, 2):
        config = GazeFlowConfig.tiny(use_lora=False)
        tokens = torch.randn(size, 4 * config.tokens_per_frame, config.encoder_config.hidden_size, generator=generator)
        gaze = torch.rand(size, config.num_frames, 2, generator=generator) * 2 - 1
        batches.append({"encoder_hidden_states": tokens, "gaze": gaze})
    grounded = GazeFlowModel(GazeFlowConfig.tiny(use_lora=False, grounding_loss_weight=2.0))
    objective, grounding = validation_loss(grounded, batches, accelerator, seed=0)
    expected_objective, expected_grounding = [], []
    generator = torch.Generator().manual_seed(0)
    for batch in batches:
        output = grounded(**batch, generator=generator)
        expected_objective.append(output.objective_loss.item() * batch["gaze"].shape[0])
        expected_grounding.append(output.grounding_loss.item() * batch["gaze"].shape[0])
    assert objective == pytest.approx(sum(expected_objective) / 5, rel=1e-5)
    assert grounding == pytest.approx(sum(expected_grounding) / 5, rel=1e-5)
    plain = GazeFlowModel(GazeFlowConfig.tiny(use_lora=False))
    loss, none = validation_loss(plain, batches, accelerator, seed=0)
    generator = torch.Generator().manual_seed(0)
    expected = sum(plain(**batch, generator=generator).loss.item() * batch["gaze"].shape[0] for batch in batches) / 5
    assert none is None and loss == pytest.approx(expected, rel=1e-5)
