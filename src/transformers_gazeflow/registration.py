"""How ``import transformers_gazeflow`` registers GazeFlow with transformers without importing transformers.

``import transformers_gazeflow`` stays light (no torch, no transformers: the ``gazeflow`` command answers ``--help``
in well under a second), yet the registrations of ``../shared/specs/conventions.md`` must be in place whenever
transformers looks for them:

* ``AutoConfig.register("gazeflow", GazeFlowConfig)`` and ``AutoModel.register(GazeFlowConfig, GazeFlowModel)``, so
  that ``AutoConfig`` / ``AutoModel.from_pretrained(folder)`` load a GazeFlow folder;
* ``PIPELINE_REGISTRY.register_pipeline("egocentric-gaze", ...)``, so that ``pipeline("egocentric-gaze")`` builds a
  :class:`~transformers_gazeflow.pipeline_gazeflow.GazeFlowPipeline`.

transformers reads these tables only from three of its own modules, ``transformers.models.auto.configuration_auto``,
``transformers.models.auto.modeling_auto`` and ``transformers.pipelines``, and a program reaches them only by
importing them (``from transformers import AutoModel, pipeline`` does, through transformers' lazy module). So
:func:`install` puts a finder first on ``sys.meta_path`` that wraps the loaders of transformers' and this package's
modules: once one of the three has been imported, its registrations are due, and they are made as soon as no import
of transformers or of this package is under way any more (:func:`_flush`), that is before the importing statement
returns to the user's code. A module imported before ``transformers_gazeflow`` is served at once. When everything
is registered the finder removes itself.

For the ``egocentric-gaze`` task only, ``transformers.pipeline`` is wrapped (:func:`_gazeflow_pipeline`) to check
the model before transformers does: a local folder that is not a GazeFlow model raises
:class:`~transformers_gazeflow.hub.ModelFolderError` (transformers would say ``Unrecognized model`` or fail on a
missing file), and with no ``model=`` the bundled default is passed explicitly and loaded without transformers' "No
model was supplied" warning or its "Loading weights" progress bar. Every other task goes straight through.
"""

from __future__ import annotations

import functools
import importlib.abc
import os
import sys
import threading
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any

TASK = "egocentric-gaze"

CONFIGURATION_AUTO = "transformers.models.auto.configuration_auto"
MODELING_AUTO = "transformers.models.auto.modeling_auto"
PIPELINES = "transformers.pipelines"


def register_config() -> None:
    """``AutoConfig.register("gazeflow", GazeFlowConfig)``."""
    from transformers import AutoConfig

    from .configuration_gazeflow import GazeFlowConfig

    AutoConfig.register(GazeFlowConfig.model_type, GazeFlowConfig, exist_ok=True)


def register_model() -> None:
    """``AutoConfig`` and ``AutoModel.register(GazeFlowConfig, GazeFlowModel)``."""
    register_config()
    from transformers import AutoModel

    from .configuration_gazeflow import GazeFlowConfig
    from .modeling_gazeflow import GazeFlowModel

    AutoModel.register(GazeFlowConfig, GazeFlowModel, exist_ok=True)


def register_pipeline() -> None:
    """The ``egocentric-gaze`` task (default model: the bundled one) and the checking wrapper of ``pipeline``."""
    register_model()
    from transformers import AutoModel
    from transformers.pipelines import PIPELINE_REGISTRY

    from .hub import default_model_path
    from .pipeline_gazeflow import GazeFlowPipeline

    PIPELINE_REGISTRY.register_pipeline(TASK, pipeline_class=GazeFlowPipeline, pt_model=AutoModel, type="video",
                                        default={"model": (str(default_model_path()), None)})
    pipelines = sys.modules[PIPELINES]
    original = pipelines.pipeline
    if getattr(original, "_gazeflow_checked", False):
        return
    wrapped = _gazeflow_pipeline(original)
    pipelines.pipeline = wrapped
    transformers = sys.modules.get("transformers")
    if transformers is not None and vars(transformers).get("pipeline") is original:
        transformers.pipeline = wrapped  # transformers' lazy module caches what it handed out


def _gazeflow_pipeline(original: Callable[..., Any]) -> Callable[..., Any]:
    """``transformers.pipeline`` with the model of an ``egocentric-gaze`` task checked first (see the module doc)."""

    @functools.wraps(original)
    def pipeline(task: str | None = None, model: Any = None, *args: Any, **kwargs: Any) -> Any:
        if task != TASK or not (model is None or isinstance(model, (str, os.PathLike))):
            return original(task, model, *args, **kwargs)
        from transformers.utils import logging as hf_logging

        from .hub import load_config, resolve_model, weights_errors

        location = resolve_model(model)  # ModelFolderError for a folder that is not a GazeFlow model
        if os.path.isdir(location):
            load_config(location)  # a config field of the wrong type, named
        bar_was_on = hf_logging.is_progress_bar_enabled()
        if model is None:
            hf_logging.disable_progress_bar()  # the bundled model is tiny: no "Loading weights" bar
        try:
            with weights_errors(location):
                return original(task, location, *args, **kwargs)
        finally:
            if bar_was_on:
                hf_logging.enable_progress_bar()

    pipeline._gazeflow_checked = True  # type: ignore[attr-defined]
    return pipeline


HOOKS: dict[str, Callable[[], None]] = {
    CONFIGURATION_AUTO: register_config,
    MODELING_AUTO: register_model,
    PIPELINES: register_pipeline,
}
"""What to register once each of transformers' modules has been imported."""

WATCHED_PREFIXES = ("transformers", "transformers_gazeflow")
"""Imports under these names are tracked until every registration is made (see :func:`_flush`)."""

_lock = threading.RLock()
_pending: dict[str, Callable[[], None]] = {}  # trigger module not imported yet
_due: dict[str, Callable[[], None]] = {}  # trigger imported; runs when no watched import is under way
_executing: list[str] = []  # watched modules whose code is running now (nested imports)
_flushing = False


def _watched(name: str) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in WATCHED_PREFIXES)


def _flush() -> None:
    """Run the due registrations, unless an import of transformers or of this package is still under way.

    A registration imports our configuration, model and pipeline modules and transformers' base classes; run in the
    middle of an import it could meet one of them half-initialised (``from transformers_gazeflow import
    GazeFlowConfig`` imports transformers, which imports ``configuration_auto``, while ``configuration_gazeflow``
    is still running). So it waits until the outermost watched import has finished.
    """
    global _flushing
    with _lock:
        if _flushing or _executing:
            return
        _flushing = True
    try:
        while True:
            with _lock:
                if not _due:
                    break
                name, hook = next(iter(_due.items()))
                del _due[name]
            try:
                hook()
            except Exception as err:  # never break the user's import of transformers; say what is missing instead
                warnings.warn(f"transformers_gazeflow could not register GazeFlow with {name}: "
                              f"{type(err).__name__}: {err}", RuntimeWarning, stacklevel=3)
    finally:
        with _lock:
            _flushing = False
            if not _pending and not _due and _finder in sys.meta_path:
                sys.meta_path.remove(_finder)


class _TrackingLoader(importlib.abc.Loader):
    """Runs the wrapped loader, puts it back on the module, and marks the module's registration due."""

    def __init__(self, loader: importlib.abc.Loader, name: str) -> None:
        self._loader, self._name = loader, name

    def create_module(self, spec):  # noqa: D102
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:  # noqa: D102
        with _lock:
            _executing.append(self._name)
        try:
            self._loader.exec_module(module)
        finally:
            module.__loader__ = self._loader
            if module.__spec__ is not None:
                module.__spec__.loader = self._loader
            with _lock:
                _executing.remove(self._name)
                hook = _pending.pop(self._name, None)
                if hook is not None and self._name in sys.modules:
                    _due[self._name] = hook
                elif hook is not None:  # its import failed: try again on the next import
                    _pending[self._name] = hook
        _flush()

    def __getattr__(self, attribute: str) -> Any:  # get_source, get_filename, is_package, ... of the real loader
        return getattr(self._loader, attribute)


class _TrackingFinder(importlib.abc.MetaPathFinder):
    """Finds transformers' and this package's modules with the other finders and wraps their loaders."""

    def find_spec(self, fullname: str, path, target=None):  # noqa: D102
        if not _watched(fullname):
            return None
        for finder in list(sys.meta_path):
            if isinstance(finder, _TrackingFinder) or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _TrackingLoader(spec.loader, fullname)
        return spec


_finder = _TrackingFinder()


def install() -> None:
    """Register at once for transformers' modules already imported, and for the others once they are (idempotent)."""
    with _lock:
        for name, hook in HOOKS.items():
            if name in sys.modules:
                _due.setdefault(name, hook)
            elif name not in _due:
                _pending.setdefault(name, hook)
        if _pending and _finder not in sys.meta_path:
            sys.meta_path.insert(0, _finder)
    _flush()


__all__ = ["TASK", "HOOKS", "install", "register_config", "register_model", "register_pipeline"]
