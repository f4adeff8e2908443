"""What the ``gazeflow`` command's run is wrapped in (:func:`~.cli.main`): SIGTERM raised as :class:`Terminated` in
the main thread, so that partial outputs are cleaned up as on Ctrl-C, and the package's own warnings as one line."""

from __future__ import annotations

import signal
import sys
import warnings
from contextlib import contextmanager
from pathlib import Path


class Terminated(BaseException):
    """SIGTERM, raised in the main thread so that partial outputs are cleaned up like on Ctrl-C."""


@contextmanager
def one_line_warnings():
    """While the command runs, a warning raised by this package prints as ``gazeflow: warning: ...`` on stderr (no
    file, line or source echo); any other warning is shown as Python shows it."""
    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if "transformers_gazeflow" in Path(str(filename)).parts:
            print(f"gazeflow: warning: {message}", file=sys.stderr)
        else:
            shown(message, category, filename, lineno, file, line)

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield


@contextmanager
def signals_as_exceptions():
    """SIGTERM raises :class:`Terminated` in the main thread while the command runs (then the old handler is back)."""
    if sys.platform == "win32" or not _in_main_thread():
        yield
        return

    def terminate(signum, frame):
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _in_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


__all__ = ["Terminated", "one_line_warnings", "signals_as_exceptions"]
