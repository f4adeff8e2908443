"""Run ``examples/train.py`` many times cheaply: a server imports it once, then forks one child process per run.

Importing torch, transformers, peft and accelerate takes most of a tiny training run's time (10-30 s on the
shared test machine); a forked child starts with them imported and trains the tiny synthetic model in a few
seconds. Each child is a real process running ``train.cli(argv)`` with its own environment (e.g.
``GAZEFLOW_KILL_AT``), stdout and stderr going to a log file, so ``SIGKILL`` ends it exactly as ``kill -9`` ends a
``python examples/train.py`` (the server reports the signal as a negative return code, like ``subprocess``).

The parent imports only: nothing runs torch before the fork (``OMP_NUM_THREADS=1``), so no thread pool or
distributed state is inherited. Use :class:`TrainServer` from a test; ``python tests/train_forkserver.py`` is the
server side (one JSON request per stdin line, one JSON reply per stdout line).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

if __package__:  # imported by a test as ``tests.train_forkserver``
    from .script_loading import load_script
else:  # run as ``python tests/train_forkserver.py`` (the server): its folder, tests/, is sys.path[0]
    from script_loading import load_script

REPO = Path(__file__).resolve().parents[1]
TRAIN = REPO / "examples" / "train.py"


@dataclass
class TrainRun:
    returncode: int  # negative: killed by that signal
    output: str  # stdout and stderr, interleaved
    cpu_s: float  # CPU seconds the run used (user + system): its cost, whatever the machine's load


class TrainServer:
    """Client side: ``server.run(args)`` trains in a fresh forked process and returns its :class:`TrainRun`."""

    def __init__(self, env: dict, logs: Path, timeout: float = 600):
        self.logs, self.timeout, self.count = Path(logs), timeout, 0
        self.logs.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [sys.executable, __file__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=REPO,
        )

    def run(self, args: list, env: dict[str, str] | None = None) -> TrainRun:
        self.count += 1
        log = self.logs / f"run_{self.count}.log"
        request = {"argv": [str(a) for a in args], "env": env or {}, "log": str(log)}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        ready, _, _ = select.select([self.process.stdout], [], [], self.timeout)
        line = self.process.stdout.readline() if ready else ""
        if not line:
            self.close()
            raise AssertionError(
                f"the training fork server did not answer (timeout {self.timeout} s or exit); "
                f"its stderr:\n{self.process.stderr.read()[-3000:]}"
            )
        reply = json.loads(line)
        return TrainRun(reply["returncode"], log.read_text(errors="replace") if log.exists() else "", reply["cpu_s"])

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _serve() -> None:
    train = load_script(TRAIN, "gazeflow_train_script")
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: one training run, then exit without running the parent's cleanup
            code = 2
            try:
                os.environ.update(request["env"])
                log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(log, 1)
                os.dup2(log, 2)
                os.close(log)
                code = train.cli(request["argv"])
            except BaseException:  # noqa: BLE001  (reported in the log, the test sees the return code)
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        _, status, usage = os.wait4(pid, 0)
        print(
            json.dumps({"returncode": os.waitstatus_to_exitcode(status), "cpu_s": usage.ru_utime + usage.ru_stime}),
            flush=True,
        )


if __name__ == "__main__":
    _serve()
