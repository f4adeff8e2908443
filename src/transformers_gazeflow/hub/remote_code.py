"""Make a saved model folder loadable with ``trust_remote_code=True``, without installing this package.

Transformers' remote code reads ``auto_map`` (and ``custom_pipelines`` for a pipeline task) from ``config.json`` and
imports the named modules from the folder itself; a module's relative imports (``from .windows import ...``) are
copied along, but only from the same folder (no subpackages). :func:`add_remote_code` therefore copies, flat:

* the model folder ``models/gazeflow/``, as it is: the modules ``AutoConfig`` and ``AutoModel`` load (the
  configuration, the model and every module of the folder they import; not the streamer's step, which the model
  never imports). They import only each other (and torch, transformers, peft, numpy), as a transformers model
  folder does, so their text is copied unchanged;
* what the ``egocentric-gaze`` pipeline needs beyond the model: the pipeline, the windowed engine fed from raw
  frames, the inference fast path, video decoding, the processor, the heatmap renderer, the model-folder checks
  and the readouts (uncertainty, events, a wearer's correction, gaze-type codes, the atomic file write, the
  schemas of the calibration files), whose
  relative imports are rewritten to the flat names (``from ..data.video import`` -> ``from .video import``; nothing
  else changes).
  Every relative import of the copied files is checked to resolve inside the folder.

Write such a folder with ``transformers_gazeflow.save_model_folder(model, folder, remote_code=True)`` (the one
writer of model folders, :mod:`transformers_gazeflow.hub.model_folders`), then:

```python
from transformers import AutoModel, pipeline
model = AutoModel.from_pretrained("path/or/hub-id", trust_remote_code=True)
gaze = pipeline("egocentric-gaze", model="path/or/hub-id", trust_remote_code=True)
```

The loading environment needs what the code imports: torch, transformers, peft, numpy, av and pillow.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]
MODEL_FOLDER = "models/gazeflow"

_RELATIVE_IMPORT_LINE = re.compile(r"^(\s*from\s+)(\.+)([\w.]*)(\s+import\b)", flags=re.MULTILINE)
_RELATIVE_IMPORT = re.compile(r"^\s*from\s+\.(\S*)\s+import\b", flags=re.MULTILINE)

PIPELINE_FILES: dict[str, str] = {
    # name in the model folder: source file in the package
    "pipeline_gazeflow.py": "pipelines/egocentric_gaze.py",
    "windowed.py": "generation/windowed.py",
    "inference.py": "generation/inference.py",
    "model_folders.py": "hub/model_folders.py",
    "model_cards.py": "hub/model_cards.py",  # what the model folders' one writer writes as README.md
    "remote_code.py": "hub/remote_code.py",  # so that a pipeline loaded from the folder can save itself again
    "video.py": "data/video.py",
    "video_sources.py": "data/video_sources.py",
    "processing.py": "data/processing.py",
    "heatmaps.py": "metrics/heatmaps.py",
    "gaze_uncertainty.py": "gaze/uncertainty.py",  # the readouts the pipeline attaches when asked
    "gaze_regions.py": "gaze/regions.py",  # the calibrated region: its factors and region_calibration.json
    "gaze_events.py": "gaze/events.py",
    "gaze_wearer.py": "gaze/wearer.py",
    "gaze_types.py": "data/gaze_types.py",
    "atomic_files.py": "data/atomic_files.py",  # how the wearer's and the region calibration files are written
    "interface_files.py": "data/interface_files.py",  # and how they are checked when read
}


MODEL_ENTRY_POINTS = ("configuration_gazeflow.py", "modeling_gazeflow.py")
"""What ``auto_map`` names; the model folder's modules they import (directly or not) are copied with them."""


def model_folder_files() -> dict[str, str]:
    """The model folder's modules that ``AutoConfig`` and ``AutoModel`` load, each under its own name: the entry
    points and every module of the folder they import, found in their text as transformers' remote code finds them
    (the streamer's modules, which the model never imports, stay out: a folder re-saved from remote code, which
    holds only what was loaded, is then complete too)."""
    folder = PACKAGE_DIR / MODEL_FOLDER
    if not folder.is_dir():  # running from a flat remote-code folder itself: the files are beside this one
        return {}
    found, pending = set(), list(MODEL_ENTRY_POINTS)
    while pending:
        name = pending.pop()
        if name in found or not (folder / name).is_file():
            continue
        found.add(name)
        pending += [f"{module}.py" for module in _RELATIVE_IMPORT.findall((folder / name).read_text(encoding="utf-8"))]
    return {name: f"{MODEL_FOLDER}/{name}" for name in sorted(found)}


REMOTE_CODE_FILES: dict[str, str] = {**model_folder_files(), **PIPELINE_FILES}

AUTO_MAP = {"AutoConfig": "configuration_gazeflow.GazeFlowConfig", "AutoModel": "modeling_gazeflow.GazeFlowModel"}
CUSTOM_PIPELINES = {
    "egocentric-gaze": {"impl": "pipeline_gazeflow.GazeFlowPipeline", "pt": ["AutoModel"], "tf": [], "type": "video"},
}


def flatten_imports(source: str, source_file: str) -> str:
    """Rewrite the relative imports of the package module ``source_file`` (a path relative to the package) for the
    flat folder: each imported module becomes the flat file it is copied to (nothing else changes)."""
    flat_names = {source_path[:-3].replace("/", "."): name[:-3] for name, source_path in REMOTE_CODE_FILES.items()}
    package = source_file.rsplit("/", 1)[0].split("/") if "/" in source_file else []

    def flat(match: re.Match) -> str:
        dots, dotted = match.group(2), match.group(3)
        anchor = package[: len(package) - (len(dots) - 1)] if len(dots) > 1 else package
        target = ".".join(anchor + ([dotted] if dotted else []))
        return f"{match.group(1)}.{flat_names.get(target, dotted)}{match.group(4)}"

    return _RELATIVE_IMPORT_LINE.sub(flat, source)


def add_remote_code(folder: str | os.PathLike) -> list[Path]:
    """Copy the model's and the pipeline's code into a saved model folder and register it in ``config.json``.

    Returns the written code files. Raises ``FileNotFoundError`` when the folder has no ``config.json`` and
    ``RuntimeError`` if a copied file imports a module that is not in the folder.
    """
    folder = Path(folder)
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise FileNotFoundError(f"{folder} has no config.json: save the model with save_pretrained first")
    written = []
    for name, source in _sources().items():
        path = folder / name
        path.write_text(source, encoding="utf-8")
        written.append(path)
    for path in written:
        for module in _RELATIVE_IMPORT.findall(path.read_text(encoding="utf-8")):
            if not (folder / f"{module}.py").is_file():
                raise RuntimeError(
                    f"{path.name} imports .{module}, which is not part of the remote code; add it to PIPELINE_FILES"
                )
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["auto_map"] = dict(AUTO_MAP)
    config["custom_pipelines"] = json.loads(json.dumps(CUSTOM_PIPELINES))
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return written


def _sources() -> dict[str, str]:
    """Every remote-code file's text, by its name in the folder: from the package, or (when this module runs from a
    flat remote-code folder) from the files beside it, already flat."""
    here = Path(__file__).resolve().parent
    if not REMOTE_CODE_FILES.keys() - PIPELINE_FILES.keys():  # flat: copy the folder's own code files
        return {
            path.name: path.read_text(encoding="utf-8")
            for path in sorted(here.glob("*.py"))
            if path.name != "__init__.py"
        }
    return {
        name: flatten_imports((PACKAGE_DIR / source).read_text(encoding="utf-8"), source)
        for name, source in REMOTE_CODE_FILES.items()
    }


__all__ = ["REMOTE_CODE_FILES", "PIPELINE_FILES", "AUTO_MAP", "CUSTOM_PIPELINES", "flatten_imports", "add_remote_code"]
