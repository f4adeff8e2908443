"""Make a saved model folder loadable with ``trust_remote_code=True``, without installing this package.

Transformers' remote code reads ``auto_map`` (and ``custom_pipelines`` for a pipeline task) from ``config.json`` and
imports the named modules from the folder itself; a module's relative imports (``from .windows import ...``) are
copied along, but only from the same folder (no subpackages). :func:`add_remote_code` therefore copies the source
files the model and the ``egocentric-gaze`` pipeline need into the folder, flat: ``data/video.py``,
``data/processing.py`` and ``metrics/heatmaps.py`` become ``video.py``, ``processing.py`` and ``heatmaps.py``, and
only their relative import lines are rewritten to match (``from .data.video import`` -> ``from .video import``,
``from ..geometry import`` -> ``from .geometry import``). The code is otherwise byte for byte the package's, and
every relative import of the copied files is checked to resolve inside the folder.

Write such a folder with ``transformers_gazeflow.save_model_folder(model, folder, remote_code=True)`` (the one
writer of model folders, :mod:`transformers_gazeflow.hub`), then:

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

PACKAGE_DIR = Path(__file__).resolve().parent

REMOTE_CODE_FILES: dict[str, str] = {
    # name in the model folder: source file in the package
    "configuration_gazeflow.py": "configuration_gazeflow.py",
    "modeling_gazeflow.py": "modeling_gazeflow.py",
    "modeling_gazeflow_layers.py": "modeling_gazeflow_layers.py",
    "modeling_gazeflow_encoder.py": "modeling_gazeflow_encoder.py",
    "modeling_gazeflow_outputs.py": "modeling_gazeflow_outputs.py",
    "modeling_gazeflow_causal.py": "modeling_gazeflow_causal.py",
    "modeling_gazeflow_objectives.py": "modeling_gazeflow_objectives.py",
    "modeling_gazeflow_variants.py": "modeling_gazeflow_variants.py",
    "validation.py": "validation.py",
    "scheduling_gazeflow.py": "scheduling_gazeflow.py",
    "windows.py": "windows.py",
    "geometry.py": "geometry.py",
    "inference.py": "inference.py",
    "windowed_engine.py": "windowed_engine.py",
    "schema.py": "schema.py",
    "hub.py": "hub.py",
    "pipeline_gazeflow.py": "pipeline_gazeflow.py",
    "visualization.py": "visualization.py",  # the pipeline's default heatmap sigma
    "video.py": "data/video.py",
    "processing.py": "data/processing.py",
    "heatmaps.py": "metrics/heatmaps.py",
    "remote_code.py": "remote_code.py",  # so that a pipeline loaded from the folder can save itself again
}

AUTO_MAP = {"AutoConfig": "configuration_gazeflow.GazeFlowConfig", "AutoModel": "modeling_gazeflow.GazeFlowModel"}
CUSTOM_PIPELINES = {
    "egocentric-gaze": {"impl": "pipeline_gazeflow.GazeFlowPipeline", "pt": ["AutoModel"], "tf": [], "type": "video"},
}

_SUBPACKAGE_IMPORT = re.compile(r"^(\s*from\s+)\.(?:data|metrics)\.(\w+)(\s+import\b)", flags=re.MULTILINE)
_PARENT_IMPORT = re.compile(r"^(\s*from\s+)\.\.(\w+)(\s+import\b)", flags=re.MULTILINE)
_RELATIVE_IMPORT = re.compile(r"^\s*from\s+\.(\S*)\s+import\b", flags=re.MULTILINE)


def flatten_imports(source: str) -> str:
    """Rewrite the relative imports of a package module for a flat folder (nothing else changes)."""
    source = _SUBPACKAGE_IMPORT.sub(r"\1.\2\3", source)
    return _PARENT_IMPORT.sub(r"\1.\2\3", source)


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
    for name, source in REMOTE_CODE_FILES.items():
        source_path = PACKAGE_DIR / source
        if not source_path.is_file():  # running from a flat remote-code folder itself
            source_path = PACKAGE_DIR / name
        text = flatten_imports(source_path.read_text(encoding="utf-8"))
        path = folder / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    for path in written:
        for module in _RELATIVE_IMPORT.findall(path.read_text(encoding="utf-8")):
            if not (folder / f"{module}.py").is_file():
                raise RuntimeError(f"{path.name} imports .{module}, which is not part of the remote code; add it to "
                                   f"REMOTE_CODE_FILES")
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["auto_map"] = dict(AUTO_MAP)
    config["custom_pipelines"] = json.loads(json.dumps(CUSTOM_PIPELINES))
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return written


__all__ = ["REMOTE_CODE_FILES", "AUTO_MAP", "CUSTOM_PIPELINES", "flatten_imports", "add_remote_code"]
