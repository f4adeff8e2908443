"""Where the ``evaluate`` modules live (docs/specs/conventions.md, "Evaluate"):
``evaluate.load(evaluate_module_path(name))``.

The module folders ship as package data under ``metrics/evaluate_modules/<name>/<name>.py`` and are found through
``importlib.resources``, so this works from an installed wheel as well as from a checkout.
"""

from __future__ import annotations

from importlib import resources

EVALUATE_MODULES = ("gaze_saliency", "gaze_dynamics", "gaze_events", "gaze_energy_score")
"""The evaluate modules this package ships."""


def evaluate_module_path(name: str) -> str:
    """Local path of the evaluate module ``name`` (a folder holding ``<name>.py``), for ``evaluate.load(path)``."""
    if name not in EVALUATE_MODULES:
        raise ValueError(f"name must be one of {EVALUATE_MODULES}, got {name!r}")
    folder = resources.files("transformers_gazeflow.metrics").joinpath("evaluate_modules", name)
    script = folder.joinpath(f"{name}.py")
    if not script.is_file():
        raise FileNotFoundError(f"evaluate module {name!r} is missing from the installed package (looked for {script})")
    return str(folder)


__all__ = ["EVALUATE_MODULES", "evaluate_module_path"]
