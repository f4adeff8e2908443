"""Deterministic fault injection for the crash tests: ``GAZEFLOW_KILL_AT`` names points where training kills itself.

``GAZEFLOW_KILL_AT="step_4/optimizer.safetensors"`` makes the process send itself ``SIGKILL`` (what ``kill -9``, the
OOM killer or a lost node does: no cleanup, no ``finally``, no flush of open files) the moment it reaches that
point, so a test can land a crash *between two files of a checkpoint* every time instead of by timing. Several
points may be given, comma-separated; the first one reached kills. Unset (the default), :func:`fault_point` costs one
dictionary lookup. The points (see ``docs/reliability.md``):

- ``step <N>``: optimizer step N done (EMA updated), before its checkpoint, if any, is written;
- ``step_<N>/<file>``: ``<file>`` of checkpoint ``step_<N>`` written in its temporary folder ``.tmp_step_<N>``;
- ``step_<N> renamed``: the checkpoint folder is in place, the run's checkpoint index does not list it yet;
- ``final/<file>``: ``<file>`` of the final model moved into ``--output_dir`` (others not yet).
"""

from __future__ import annotations

import os
import signal
import sys

KILL_AT_ENV = "GAZEFLOW_KILL_AT"


def fault_point(label: str) -> None:
    """SIGKILL this process if ``label`` is one of the points in ``$GAZEFLOW_KILL_AT``; otherwise do nothing."""
    points = os.environ.get(KILL_AT_ENV)
    if not points or label not in {point.strip() for point in points.split(",")}:
        return
    print(f"[fault injection] {KILL_AT_ENV}: SIGKILL at {label!r}", file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


__all__ = ["fault_point", "KILL_AT_ENV"]
