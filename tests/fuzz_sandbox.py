"""A sandbox folder for driving the ``gazeflow`` commands with hostile inputs, and what every run must leave true.

:class:`Sandbox` copies the inputs (models, a clip, a tracker CSV, a calibration, an export) into a fresh folder
with a ``victim.txt`` beside the working folder, runs ``main(argv)`` in-process from the working folder (stdin given
as bytes), and checks the run (:meth:`Sandbox.check`):

* no traceback: ``main`` returns a status and nothing escapes it;
* a bad input ends non-zero, with one line ``gazeflow: error: ...`` last on stderr;
* nothing outside the outputs the run was asked to write changed (a digest of the sandbox tree, links and folders
  included, before and after), and no temporary (``partial.*``, ``.*.partial.*``) is left;
* outputs complete or absent: a successful run wrote every output it was asked for.

The hypothesis settings (:data:`FUZZ`) are bounded and derandomised for CI; ``GAZEFLOW_FUZZ_EXAMPLES`` and
``GAZEFLOW_FUZZ_SEED`` make the long profile (``benchmarks/fuzz_commands.py``).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, settings

from transformers_gazeflow.commands.cli import main

EXAMPLES = int(os.environ.get("GAZEFLOW_FUZZ_EXAMPLES", "0"))
SEED = os.environ.get("GAZEFLOW_FUZZ_SEED")


def fuzz_settings(ci_examples: int) -> settings:
    """``ci_examples`` derandomised examples in CI; the long profile's count (and a random seed) when it is set."""
    return settings(
        max_examples=EXAMPLES or ci_examples,
        derandomize=SEED is None,
        database=None,
        deadline=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
    )


def digest(root: Path) -> dict[str, str]:
    """Every entry under ``root`` (links not followed): a file's sha256, a link's target, a folder."""
    found = {}
    for folder, folders, files in os.walk(root):
        for name in folders + files:
            path = Path(folder) / name
            key = str(path.relative_to(root))
            if path.is_symlink():
                found[key] = "link -> " + os.readlink(path)
            elif path.is_dir():
                found[key] = "folder"
            else:
                found[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def temporaries(root: Path) -> list[str]:
    return sorted(
        str(path.relative_to(root))
        for path in root.rglob("*")
        if path.name.startswith("partial.") or ".partial." in path.name
    )


@dataclass
class Run:
    status: int
    out: str
    err: str
    error: BaseException | None = None

    @property
    def last_line(self) -> str:
        lines = self.err.strip().splitlines()
        return lines[-1] if lines else ""


@dataclass
class Sandbox:
    """A fresh folder: ``root/victim.txt`` and ``root/work/`` holding the inputs named in :data:`INPUTS`."""

    root: Path
    work: Path = field(init=False)

    def __post_init__(self) -> None:
        self.work = self.root / "work"

    @classmethod
    @contextlib.contextmanager
    def made(cls, inputs: dict[str, Path]):
        root = Path(tempfile.mkdtemp(prefix="gazeflow-fuzz-"))
        try:
            box = cls(root)
            box.work.mkdir()
            (root / "victim.txt").write_text("precious\n")
            for name, source in inputs.items():
                if source.is_dir():
                    shutil.copytree(source, box.work / name)
                else:
                    shutil.copy(source, box.work / name)
            yield box
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def run(self, argv: list[str], stdin: bytes | None = None) -> Run:
        out, err = io.StringIO(), io.StringIO()
        saved_stdin, saved_cwd = sys.stdin, os.getcwd()
        if stdin is not None:
            sys.stdin = io.TextIOWrapper(io.BytesIO(stdin))
        os.chdir(self.work)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    status = main([str(arg) for arg in argv])
                except BaseException as escaped:  # noqa: BLE001 - what a user would see as a traceback
                    return Run(-1, out.getvalue(), err.getvalue(), escaped)
        finally:
            os.chdir(saved_cwd)
            sys.stdin = saved_stdin
        return Run(status, out.getvalue(), err.getvalue())

    def check(
        self,
        argv: list[str],
        expect_ok: bool | None,
        outputs: tuple[str, ...] = (),
        stdin: bytes | None = None,
        may_change: tuple[str, ...] = (),
        keep: tuple[str, ...] = (),
    ) -> Run:
        """Run ``argv`` and assert what every run must leave true (see the module docstring); ``outputs``: paths
        relative to the sandbox root the run writes when it succeeds (a folder: everything under it), which must then
        exist; ``may_change``: further paths the run may change, failing or not (a batch's index, written when one
        of its videos fails); ``keep``: paths a refused run must not change even inside those. ``expect_ok`` None:
        a correct result or a refusal, whichever the run gives, each checked as such."""
        before = digest(self.root)
        run = self.run(argv, stdin)
        assert run.error is None, f"{argv}: escaped {type(run.error).__name__}: {run.error}"
        assert "Traceback" not in run.err, f"{argv}: traceback on stderr:\n{run.err[-3000:]}"
        if expect_ok is None:  # either a correct result or a refusal, each checked as such
            expect_ok = run.status == 0
        if expect_ok:
            assert run.status == 0, f"{argv}: expected success, got {run.status}: {run.last_line}"
            for output in outputs:
                assert (self.root / output).exists(), f"{argv}: succeeded without writing {output}"
        else:
            assert run.status in (1, 2), f"{argv}: expected a refusal (1 or 2), got {run.status}: {run.err[-500:]}"
            assert run.last_line.startswith("gazeflow: error: "), f"{argv}: last line {run.last_line!r}"
            assert len(run.err.strip().splitlines()) == 1, f"{argv}: more than one line:\n{run.err}"
        after = digest(self.root)
        allowed = (*outputs, *may_change) if run.status == 0 else may_change
        kept = keep if run.status != 0 else ()
        changed = sorted(
            key
            for key in set(before) | set(after)
            if before.get(key) != after.get(key)
            and (key in kept or not any(key == path or key.startswith(path.rstrip("/") + "/") for path in allowed))
        )
        assert not changed, f"{argv} (status {run.status}) changed {changed[:8]}"
        assert not temporaries(self.root), f"{argv}: left {temporaries(self.root)}"
        return run


__all__ = ["Sandbox", "Run", "digest", "fuzz_settings", "temporaries"]
