"""examples/train.py --help shows a help text and the default of every option."""

import importlib.util
import re
from pathlib import Path

import pytest

TRAIN = Path(__file__).resolve().parents[1] / "examples" / "train.py"


def test_every_option_has_help_and_its_default(capsys):
    spec = importlib.util.spec_from_file_location("gazeflow_train_help", TRAIN)
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
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
