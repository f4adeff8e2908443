"""How the example scripts end (``training.script_errors.run_script``): main's status, a user error as one line."""

import pytest

from transformers_gazeflow.training.script_errors import run_script


def ending(main, *args, capsys):
    with pytest.raises(SystemExit) as exited:
        run_script(main, "tool.py", *args)
    return exited.value.code, capsys.readouterr().err


def test_the_status_of_main_is_the_exit_status(capsys):
    assert ending(lambda: 0, capsys=capsys) == (0, "")
    assert ending(lambda: 3, capsys=capsys) == (3, "")


def test_a_user_error_is_its_first_line_and_status_1(capsys):
    def bad():
        raise ValueError("--data_dir /x: no such folder\nmore detail")

    assert ending(bad, capsys=capsys) == (1, "tool.py: error: --data_dir /x: no such folder\n")

    def missing():
        raise FileNotFoundError()

    assert ending(missing, capsys=capsys) == (1, "tool.py: error: FileNotFoundError\n")


def test_other_errors_keep_their_traceback_unless_named(capsys):
    def crash():
        raise RuntimeError("a bug")

    with pytest.raises(RuntimeError, match="a bug"):
        run_script(crash, "tool.py")
    assert ending(crash, (ValueError, RuntimeError), capsys=capsys) == (1, "tool.py: error: a bug\n")
