"""examples/train.py ``--trial_starts N``: N starts share one encoder draw, the chosen one continues exactly.

The choice (lowest validation grounding loss) is scripted here through ``trial_score`` so that each branch runs: the
start of ``--seed`` chosen must give the plain run bit for bit; another start chosen must give what resuming its
checkpoint gives, with the plain run's encoder.
"""

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.script_loading import load_script
from transformers_gazeflow.training import loop, trial_starts
from transformers_gazeflow.training.trainer_state import TrainerState

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
    "2",
    "--dataloader_num_workers",
    "0",
    "--logging_steps",
    "1",
    "--no-use_lora",
    "--cache_features",
    "--horizontal_flip_probability",
    "0.5",
    "--max_train_steps",
    "8",
    "--config_overrides",
    "grounding_loss_weight=1.0",
]


@pytest.fixture(scope="module")
def train():
    return load_script(TRAIN, "gazeflow_train_trial_script")


@pytest.fixture
def quiet(train, tmp_path_factory, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path_factory.getbasetemp() / "hf_cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    bar = loop.tqdm
    monkeypatch.setattr(loop, "tqdm", lambda *args, **kwargs: bar(*args, **{**kwargs, "disable": True}))
    return tmp_path_factory.getbasetemp() / "trial_data"


def run(train, data_dir, out, *extra) -> dict[str, torch.Tensor]:
    assert train.main([str(a) for a in TINY + ["--data_dir", data_dir, "--output_dir", out, *extra]]) == 0
    return load_file(Path(out) / "model.safetensors")


def equal(a: dict, b: dict, prefix: str = "") -> bool:
    keys = [key for key in a if key.startswith(prefix)]
    return bool(keys) and all(torch.equal(a[key], b[key]) for key in keys)


def test_the_chosen_start_of_the_seed_is_the_plain_run_bit_for_bit(train, quiet, tmp_path, monkeypatch):
    plain = run(train, quiet, tmp_path / "plain")
    scored = []
    monkeypatch.setattr(trial_starts, "trial_score", lambda record: scored.append(record["seed"]) or record["seed"])
    monkeypatch.setattr(trial_starts, "left_plateau", lambda progress: False)  # every start on the plateau: both run
    trial = run(train, quiet, tmp_path / "trial", "--trial_starts", 2, "--trial_steps", 3)
    assert set(scored) == {0, 1}
    assert equal(plain, trial)  # start 0 paused at step 3, checkpointed, continued: the same run as never pausing

    state = TrainerState.load(tmp_path / "trial")
    assert state.seed == 0 and [r["seed"] for r in state.trial_starts] == [0, 1]
    assert all(r["step"] == 3 and r["validation_grounding_loss"] is not None for r in state.trial_starts)
    assert state.completed_steps == 8
    for record in state.trial_starts:  # the chosen start's checkpoint is kept (the lineage's root), the other removed
        assert Path(record["checkpoint"]).parent == tmp_path / "trial" / "trials" / f"seed_{record['seed']}"
    assert (tmp_path / "trial" / "trials" / "seed_0" / "step_3" / "manifest.json").is_file()
    assert not (tmp_path / "trial" / "trials" / "seed_1").exists()
    card = (tmp_path / "trial" / "README.md").read_text()
    assert "- trial starts: 2 starts sharing one encoder draw" in card and "continued: seed 0's" in card
    assert "--trial_starts 2" in card


def test_another_start_chosen_continues_from_its_checkpoint_with_the_one_encoder(train, quiet, tmp_path, monkeypatch):
    plain = run(train, quiet, tmp_path / "plain")
    monkeypatch.setattr(trial_starts, "trial_score", lambda record: -record["seed"])  # the last start wins
    monkeypatch.setattr(trial_starts, "left_plateau", lambda progress: False)
    trial = run(train, quiet, tmp_path / "trial", "--trial_starts", 3, "--trial_steps", 3)
    state = TrainerState.load(tmp_path / "trial")
    assert state.seed == 2 and [r["seed"] for r in state.trial_starts] == [0, 1, 2]
    assert equal(plain, trial, "video_encoder.")  # one encoder draw, the plain run's (and one feature cache)
    assert not equal(plain, trial, "velocity")  # the rest is start 2's own
    lineage = json.loads((tmp_path / "trial" / "checkpoints.json").read_text())["lineage"]
    chosen = tmp_path / "trial" / "trials" / "seed_2" / "step_3"
    assert [entry["path"] for entry in lineage] == [str(chosen)]

    # the chosen start's checkpoint resumed by hand (--seed 0: the seed comes from the checkpoint) gives the same
    resumed = run(train, quiet, tmp_path / "resumed", "--resume_from_checkpoint", chosen)
    assert equal(trial, resumed)
    assert TrainerState.load(tmp_path / "resumed").seed == 2
    # and so does 'latest' in the trial run's own folder (its lineage starts at the chosen start's checkpoint)
    again = run(train, quiet, tmp_path / "trial", "--trial_starts", 3, "--resume_from_checkpoint", "latest")
    assert equal(trial, again)
    for folder in ("resumed", "trial"):  # the starts' records come back with the chosen start's checkpoint
        assert TrainerState.load(tmp_path / folder).trial_starts == state.trial_starts
        assert "- trial starts: 3 starts sharing one encoder draw" in (tmp_path / folder / "README.md").read_text()


def test_a_start_that_left_the_plateau_is_continued_without_further_starts(train, quiet, tmp_path, monkeypatch):
    plain = run(train, quiet, tmp_path / "plain")
    seen = []
    monkeypatch.setattr(trial_starts, "left_plateau", lambda progress: seen.append(progress) or True)
    trial = run(train, quiet, tmp_path / "trial", "--trial_starts", 3, "--trial_steps", 3)
    assert equal(plain, trial)
    state = TrainerState.load(tmp_path / "trial")
    assert set(seen) == {state.trial_starts[0]["grounding_progress"]}  # start 0 left it: 1 and 2 never trained
    assert [r["seed"] for r in state.trial_starts] == [0] and state.completed_steps == 8
    assert sorted(path.name for path in (tmp_path / "trial" / "trials").iterdir()) == ["seed_0", "trial_starts.json"]
    card = (tmp_path / "trial" / "README.md").read_text()
    assert "- trial starts: one start: it had left the grounding plateau at step 3" in card
    assert "so no further start" in card


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--trial_starts", "0"], "--trial_starts must be >= 1, got 0"),
        (["--trial_steps", "0"], "--trial_steps must be >= 1, got 0"),
    ],
)
def test_bad_trial_arguments_name_themselves(train, capsys, extra, message):
    with pytest.raises(SystemExit) as exit_info:
        train.parse_args(["--dataset_name", "synthetic", "--output_dir", "out", *extra])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_latest_after_a_stop_during_the_trial_starts_says_to_rerun(train, tmp_path, capsys):
    (tmp_path / "run" / "trials" / "seed_0").mkdir(parents=True)  # what a run killed during its first start leaves
    code = train.cli(
        [
            str(a)
            for a in TINY
            + [
                "--data_dir",
                tmp_path / "data",
                "--output_dir",
                tmp_path / "run",
                "--trial_starts",
                2,
                "--resume_from_checkpoint",
                "latest",
            ]
        ]
    )
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("train.py: error: --resume_from_checkpoint latest: no checkpoint under")
    assert (
        "holds the trial starts of a run stopped before it continued one: rerun the command without "
        "--resume_from_checkpoint"
        in err
        and "Traceback" not in err
    )
