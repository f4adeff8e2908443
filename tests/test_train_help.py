"""examples/train.py --help shows a help text and the default of every option."""

import re
from pathlib import Path

import pytest

from tests.script_loading import load_script

TRAIN = Path(__file__).resolve().parents[1] / "examples" / "train.py"


def test_every_option_has_help_and_its_default(capsys):
    train = load_script(TRAIN, "gazeflow_train_help")
    with pytest.raises(SystemExit) as done:
        train.parse_args(["--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    options = re.split(r"\n  (?=--)", text.split("options:", 1)[1])[1:]  # one block per option, after -h/--help
    assert len(options) >= 30
    for block in options:
        signature, _, help_text = block.partition("  ")
        assert help_text.strip(), f"{signature.strip()} has no help text"
        assert "(default:" in " ".join(block.split()), f"{signature.strip()} shows no default"


def test_a_preset_and_overrides_build_the_model_they_name():
    """``--config_preset tiny`` carries every field of the tiny config over (the preset's sizes, not the paper's),
    and ``--config_overrides`` wins over it."""
    from transformers_gazeflow import GazeFlowConfig

    train = load_script(TRAIN, "gazeflow_train_build")
    args = train.parse_args(
        [
            "--dataset_name",
            "synthetic",
            "--output_dir",
            "unused",
            "--config_preset",
            "tiny",
            "--config_overrides",
            "num_hidden_layers=3",
        ]
    )
    config = train.build_model(args).config
    tiny = GazeFlowConfig.tiny()
    assert config.hidden_size == tiny.hidden_size and config.num_frames == tiny.num_frames
    assert config.encoder_config.hidden_size == tiny.encoder_config.hidden_size
    assert config.num_hidden_layers == 3
