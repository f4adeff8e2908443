"""The README's "Set up and run the tests" commands are the ones ``.ci/run`` runs, in the same order."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def readme_test_commands() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = text.split("Set up and run the tests", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    commands = []
    for command in (part.strip() for line in block.splitlines() for part in line.split(" && ")):
        # the README calls `pip ...` and `python -m ...`; CI calls `$PY -m pip ...` and `$PY -m ...`
        if command.startswith("python "):
            command = command[len("python ") :]
        elif command.startswith("pip "):
            command = "-m " + command
        if command:
            commands.append(command)
    return commands


def ci_test_commands() -> list[str]:
    text = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    section = text.split('# --- README: "Set up and run the tests"', 1)[1].split("\n# ---", 1)[0]
    commands = []
    for line in section.splitlines()[1:]:
        line = line.split("  #", 1)[0].strip()
        if not line or line.startswith(("#", "[", "SUDO=")):
            continue
        line = re.sub(r"^([A-Z_]+=\S* )+", "", line)  # environment assignments (DEBIAN_FRONTEND=..., GAZEFLOW_...=1)
        commands.append(re.sub(r"^(\$SUDO |\$PY )", "", line))
    return commands


def test_readme_and_ci_run_the_same_test_commands():
    readme, ci = readme_test_commands(), ci_test_commands()
    assert readme == ci, f"README: {readme}\n.ci/run: {ci}"
    assert "-m ruff check ." in ci and ci.index("-m ruff check .") < ci.index("-m pytest -q -n 2 tests")


def test_ci_checks_the_format_before_the_tests():
    ci = ci_test_commands()
    format_check = "-m ruff format --check ."
    assert format_check in ci and ci.index(format_check) < ci.index("-m pytest -q -n 2 tests")
