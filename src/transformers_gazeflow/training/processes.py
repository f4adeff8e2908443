"""Leaving a multi-process run: the last call of every process of ``examples/train.py`` and ``examples/evaluate.py``.

Why a helper: with the gloo backend (CPU runs under ``torchrun`` / ``accelerate launch``) a process could hang for
good at exit. Seen in CI (two-process ``train.py``, under load): the main thread, freeing the DDP wrapper's reducer
as ``main`` returned, ran the process group's destructor while holding the GIL; the destructor joins the group's
worker threads, and one of them was still destroying the last barrier's work object, which drops the previous
all-gather's tensors and needs the GIL to release their Python objects. Neither thread could go on (torch 2.13;
pytorch/pytorch#56297 describes the destructor's join). :func:`leave_process_group` makes the teardown start only
when no worker thread has work left: every process waits for the others (no process tears its group down while a
peer still works, pytorch/pytorch#75097), then sleeps briefly *without* the GIL so the worker threads finish
releasing their last work objects, then destroys the group (``Accelerator.end_training``).
"""

from __future__ import annotations

import time

WORKER_DRAIN_SECONDS = 0.5
"""How long a process sleeps (the GIL released) before it destroys its group: the worker threads' last clean-up
takes microseconds; the margin is for a loaded machine."""


def leave_process_group(accelerator, wait_for_everyone: bool = True) -> None:
    """End ``accelerator``'s run on this process: wait for the other processes (``wait_for_everyone``; pass False
    where a peer may legitimately still work for longer than the backend's collective timeout, e.g. the main process
    scoring an evaluation), let the backend's worker threads drain, then ``end_training`` (trackers finished, the
    process group destroyed). A single-process run only calls ``end_training``."""
    if accelerator.num_processes > 1:
        if wait_for_everyone:
            accelerator.wait_for_everyone()
        time.sleep(WORKER_DRAIN_SECONDS)  # releases the GIL: see the module docstring
    accelerator.end_training()


__all__ = ["WORKER_DRAIN_SECONDS", "leave_process_group"]
