"""The reference libraries the tests check the metrics against, imported the one way that works on today's
setuptools and numpy: used by the test suite (``tests/conftest.py``) and by the GPU suite's preflight
(``gpu_suite_tools.py``), which checks that the image can run those tests."""

from __future__ import annotations

import sys
import types

import numpy as np


def import_pysaliency():
    """pysaliency 0.2.22 imports ``pkg_resources`` (gone from setuptools >= 81) in modules the metrics never use,
    and calls ``np.trapz`` (removed in numpy 2.4) inside its ROC code. Shim both (for the tests and the preflight
    only; the package never imports pysaliency)."""
    if not hasattr(np, "trapz"):
        np.trapz = np.trapezoid
    try:
        import pkg_resources  # noqa: F401
    except ImportError:
        shim = types.ModuleType("pkg_resources")

        def _unavailable(*args, **kwargs):
            raise RuntimeError("pkg_resources shim (reference_libraries.py): resource access is not available")

        shim.resource_string = _unavailable
        shim.resource_listdir = _unavailable
        sys.modules["pkg_resources"] = shim
    import pysaliency

    return pysaliency


__all__ = ["import_pysaliency"]
