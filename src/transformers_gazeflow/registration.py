"""How ``import transformers_gazeflow`` registers GazeFlow with transformers without importing transformers.

``import transformers_gazeflow`` stays light (no torch, no transformers: the ``gazeflow`` command answers ``--help``
in well under a second), yet the registrations transformers documents for a custom model and pipeline must be in
place whenever transformers looks for them:

* ``AutoConfig.register("gazeflow", GazeFlowConfig)`` and ``AutoModel.register(GazeFlowConfig, GazeFlowModel)``, so
  that ``AutoConfig`` / ``AutoModel.from_pretrained(folder)`` load a GazeFlow folder;
* ``PIPELINE_REGISTRY.register_pipeline("egocentric-gaze", ...)``, so that ``pipeline("egocentric-gaze")`` builds a
  :class:`~transformers_gazeflow.pipelines.egocentric_gaze.GazeFlowPipeline`.

transformers reads these tables only from three of its own modules, ``transformers.models.auto.configuration_auto``,
``transformers.models.auto.modeling_auto`` and ``transformers.pipelines``, and a program reaches them only by
importing them (``from transformers import AutoModel, pipeline`` does, through transformers' lazy module). So
:func:`install` puts a finder first on ``sys.meta_path`` that wraps the loaders of transformers' and this package's
modules: once one of the three has been imported, its registrations are due, and they are made as soon as no import
of transformers or of this package is under way any more (:func:`_flush`), that is before the importing statement
returns to the user's code. A module imported before ``transformers_gazeflow`` is served at once. When everything
is registered the finder removes itself.

For the ``egocentric-gaze`` task only, the model is checked before transformers reads it: ``pipeline()`` reads a
model's config first, and the task's config read (``AutoConfig.from_pretrained(..., _from_pipeline=
"egocentric-gaze")``, :func:`_checking_config_loader`) raises
:class:`~transformers_gazeflow.hub.model_folders.ModelFolderError` for a folder that is not a usable GazeFlow model
(another or an unknown ``model_type``, no ``config.json``, a field of the wrong type, missing, truncated or unsafe
weights), where transformers would say ``Unrecognized model`` or fail on a missing file. This works whatever the
import order (``from transformers import pipeline`` before ``import transformers_gazeflow`` included). With no
``model=``, the bundled default loads without transformers' "No model was supplied" warning (a log filter for that
one message) and without its "Loading weights" bar (the task's auto class). Every other task and every other config
read go straight through.
"""

from __future__ import annotations

import functools
import importlib.abc
import logging
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

    from .models.gazeflow.configuration_gazeflow import GazeFlowConfig

    AutoConfig.register(GazeFlowConfig.model_type, GazeFlowConfig, exist_ok=True)


def register_model() -> None:
    """``AutoConfig`` and ``AutoModel.register(GazeFlowConfig, GazeFlowModel)``."""
    register_config()
    from transformers import AutoModel

    from .models.gazeflow.configuration_gazeflow import GazeFlowConfig
    from .models.gazeflow.modeling_gazeflow import GazeFlowModel

    AutoModel.register(GazeFlowConfig, GazeFlowModel, exist_ok=True)


def register_pipeline() -> None:
    """The ``egocentric-gaze`` task (default model: the bundled one), and the checks of its model (module doc)."""
    register_model()
    from transformers import AutoConfig
    from transformers.pipelines import PIPELINE_REGISTRY

    from .hub.model_folders import default_model_path
    from .pipelines.egocentric_gaze import GazeFlowPipeline

    PIPELINE_REGISTRY.register_pipeline(
        TASK,
        pipeline_class=GazeFlowPipeline,
        pt_model=_task_auto_model(),
        type="video",
        default={"model": (str(default_model_path()), None)},
    )
    if not getattr(AutoConfig.from_pretrained, "_gazeflow_checked", False):
        AutoConfig.from_pretrained = staticmethod(_checking_config_loader(AutoConfig.from_pretrained))
    notices = logging.getLogger(PIPELINES)
    if not any(isinstance(f, _DefaultModelNotice) for f in notices.filters):
        notices.addFilter(_DefaultModelNotice())


def _checking_config_loader(original: Callable[..., Any]) -> Callable[..., Any]:
    """``AutoConfig.from_pretrained`` that first checks the model of an ``egocentric-gaze`` pipeline.

    transformers' ``pipeline()`` reads the config of a model path first (``AutoConfig.from_pretrained(model,
    _from_pipeline=task)``), so this is where a folder that is not a usable GazeFlow model gets a
    :class:`~transformers_gazeflow.hub.model_folders.ModelFolderError` naming it
    (:func:`~transformers_gazeflow.hub.model_folders.check_pipeline_model`) instead of transformers' ``Unrecognized
    model`` or missing-file errors. Any other call goes straight through."""

    @functools.wraps(original)
    def from_pretrained(pretrained_model_name_or_path: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("_from_pipeline") == TASK and isinstance(pretrained_model_name_or_path, (str, os.PathLike)):
            from .hub.model_folders import check_pipeline_model

            check_pipeline_model(pretrained_model_name_or_path)
        return original(pretrained_model_name_or_path, *args, **kwargs)

    from_pretrained._gazeflow_checked = True  # type: ignore[attr-defined]
    return from_pretrained


class _DefaultModelNotice(logging.Filter):
    """Drops transformers' "No model was supplied, defaulted to ..." for the bundled default: it is offline, in the
    package, and the documented way to try the task."""

    def filter(self, record: logging.LogRecord) -> bool:
        from .hub.model_folders import default_model_path

        return not record.getMessage().startswith(f"No model was supplied, defaulted to {default_model_path()}")


_auto_model: type | None = None


def _task_auto_model() -> type:
    """``AutoModel`` for the task's model (what ``pipeline()`` loads it with), without transformers' "Loading
    weights" progress bar for the bundled default (a 2 MB model loads in a blink)."""
    global _auto_model
    if _auto_model is None:
        from transformers import AutoModel
        from transformers.utils import logging as hf_logging

        from .hub.model_folders import default_model_path

        class GazeFlowAutoModel(AutoModel):
            @classmethod
            def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
                if str(pretrained_model_name_or_path) != str(default_model_path()):
                    return super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
                bar_was_on = hf_logging.is_progress_bar_enabled()
                hf_logging.disable_progress_bar()
                try:
                    return super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
                finally:
                    if bar_was_on:
                        hf_logging.enable_progress_bar()

        _auto_model = GazeFlowAutoModel
    return _auto_model


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
                warnings.warn(
                    f"transformers_gazeflow could not register GazeFlow with {name}: {type(err).__name__}: {err}",
                    RuntimeWarning,
                    stacklevel=3,
                )
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
