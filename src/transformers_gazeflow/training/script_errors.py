"""How ``examples/*.py`` end: the exit status of their ``main()``, and a user error as one line.

Each script calls :func:`run_script` under ``if __name__ == "__main__":``. A bad input (by default a ``ValueError``
or ``FileNotFoundError``, which the scripts raise naming the argument or file) prints ``PROG: error: ...`` (its first
line) on stderr and exits with status 1; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import NoReturn

USER_ERRORS: tuple[type[Exception], ...] = (ValueError, FileNotFoundError)


def run_script(
    main: Callable[[], int | None], prog: str, errors: tuple[type[Exception], ...] = USER_ERRORS
) -> NoReturn:
    """Exit with ``main()``'s status; an exception of ``errors`` is one line ``PROG: error: ...`` and status 1."""
    try:
        status = main()
    except errors as err:
        text = str(err).splitlines()[0] if str(err).strip() else type(err).__name__
        print(f"{prog}: error: {text}", file=sys.stderr)
        sys.exit(1)
    sys.exit(status)


__all__ = ["USER_ERRORS", "run_script"]
