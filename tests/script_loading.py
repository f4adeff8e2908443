"""Load a script that is not part of a package (``examples/*.py``, ``benchmarks/*.py``, a dataset builder) as a
module, so a test can call its functions. Imports nothing but the standard library: ``tests/train_forkserver.py``
imports it in its server process as well."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_script(path: Path | str, module_name: str, *, register: bool = False) -> ModuleType:
    """Execute the file at ``path`` as a fresh module named ``module_name`` and return it.

    By default the module is not put in ``sys.modules`` (each call gives an independent module, and nothing is left
    behind). ``register=True`` puts it in ``sys.modules`` before it runs, under ``module_name``, for code that looks
    its own module up by name (dataclasses, pickling, ``datasets`` builders); the caller then removes it when done
    (``sys.modules.pop(module_name, None)``). A script that fails to run is never left registered. While it runs, the
    script's own folder is on ``sys.path`` (last, so that a script named like a package never shadows it), as when
    it is run as a script (the benchmarks import their shared ``results`` module so)."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: cannot be loaded as a Python module (expected a .py file)")
    module = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[module_name] = module
    folder = str(Path(path).resolve().parent)  # as `python SCRIPT` does, but last: it never shadows a package
    added = folder not in sys.path
    if added:
        sys.path.append(folder)
    try:
        spec.loader.exec_module(module)
    except BaseException:
        if register:
            sys.modules.pop(module_name, None)
        raise
    finally:
        if added and folder in sys.path:
            sys.path.remove(folder)
    return module
