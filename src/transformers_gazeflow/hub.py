"""Model folders: the bundled default model, loading a GazeFlow folder with clear errors, and model cards.

A GazeFlow model folder (what ``save_pretrained`` writes, and what a Hub repository holds) contains
``config.json`` (``model_type: "gazeflow"``), ``model.safetensors`` and ``preprocessor_config.json`` (the
:class:`~transformers_gazeflow.data.processing.GazeFlowVideoProcessor`; when missing, the processor defaults to
``size=config.image_size``), plus a ``README.md`` model card. :mod:`transformers_gazeflow.remote_code` adds what
``trust_remote_code=True`` loading needs.

The package ships one such folder, ``default_model/``, used when no model is named (:func:`default_model_path`).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from .data.processing import PREPROCESSOR_CONFIG_NAME, GazeFlowVideoProcessor

if TYPE_CHECKING:
    from .configuration_gazeflow import GazeFlowConfig
    from .modeling_gazeflow import GazeFlowModel

WEIGHTS_NAMES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")


class ModelFolderError(ValueError):
    """A model location that is not a loadable GazeFlow model (missing, not GazeFlow, or without weights)."""


def default_model_path() -> Path:
    """The folder of the bundled default model (package data ``transformers_gazeflow/default_model/``)."""
    return Path(__file__).resolve().parent / "default_model"


def has_weights(folder: str | os.PathLike) -> bool:
    """True when ``folder`` holds model weights (safetensors, sharded safetensors or a torch ``.bin``)."""
    return any((Path(folder) / name).is_file() for name in WEIGHTS_NAMES)


def default_model_available() -> bool:
    """True when the bundled default model has its config and weights (the trained model is dropped in later)."""
    folder = default_model_path()
    return (folder / "config.json").is_file() and has_weights(folder)


def check_model_folder(folder: str | os.PathLike) -> Path:
    """Check that a local folder is a GazeFlow model folder; raise :class:`ModelFolderError` naming it if not."""
    path = Path(folder)
    if not path.exists():
        raise ModelFolderError(f"model folder not found: {path}")
    if not path.is_dir():
        raise ModelFolderError(f"expected a model folder (written by save_pretrained), got the file {path}")
    config_path = path / "config.json"
    if not config_path.is_file():
        raise ModelFolderError(f"{path} is not a GazeFlow model folder: it has no config.json")
    try:
        model_type = json.loads(config_path.read_text(encoding="utf-8")).get("model_type")
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError) as err:
        raise ModelFolderError(f"{path} is not a GazeFlow model folder: config.json is not valid JSON ({err})") from err
    if model_type != "gazeflow":
        raise ModelFolderError(f"{path} is not a GazeFlow model folder: config.json has model_type "
                               f"{model_type!r}, expected 'gazeflow'")
    if not has_weights(path):
        raise ModelFolderError(f"{path} has a GazeFlow config.json but no weights ({' or '.join(WEIGHTS_NAMES)})")
    return path


def resolve_model(model: str | os.PathLike | None) -> str:
    """The model location to load: ``None`` -> the bundled default; a local folder is checked
    (:func:`check_model_folder`); anything else is passed on as a Hub id."""
    if model is None:
        if not default_model_available():
            raise ModelFolderError(
                f"the bundled default model has no weights yet ({default_model_path()} holds no model.safetensors); "
                "pass a model folder or Hub id (e.g. --model path/to/model)"
            )
        return str(default_model_path())
    text = str(model)
    hub_id = not isinstance(model, Path) and re.fullmatch(r"[A-Za-z0-9_][\w.-]*(/[\w.-]+)?", text) is not None
    if Path(text).expanduser().exists() or not hub_id:
        return str(check_model_folder(Path(text).expanduser()))
    return text


def load_video_processor(name_or_path: str | os.PathLike | None, config: GazeFlowConfig) -> GazeFlowVideoProcessor:
    """The processor saved with a model (``preprocessor_config.json`` in its folder or Hub repository), or the
    default ``GazeFlowVideoProcessor(size=config.image_size)`` when there is none. Its size must match the encoder."""
    processor = None
    if name_or_path:
        path = Path(name_or_path)
        if path.is_dir():
            if (path / PREPROCESSOR_CONFIG_NAME).is_file():
                processor = GazeFlowVideoProcessor.from_pretrained(path)
        else:
            from transformers.utils import cached_file

            try:
                resolved = cached_file(str(name_or_path), PREPROCESSOR_CONFIG_NAME,
                                       _raise_exceptions_for_missing_entries=False,
                                       _raise_exceptions_for_connection_errors=False)
            except OSError:
                resolved = None
            if resolved:
                processor = GazeFlowVideoProcessor.from_pretrained(resolved)
    if processor is None:
        return GazeFlowVideoProcessor(size=config.image_size)
    if processor.size != config.image_size:
        raise ModelFolderError(f"{name_or_path}: {PREPROCESSOR_CONFIG_NAME} resizes frames to {processor.size} px but "
                               f"the encoder reads {config.image_size} px frames")
    return processor


def load_model(model: str | os.PathLike | None = None, device: str | None = None) -> GazeFlowModel:
    """Load a GazeFlow model (``None``: the bundled default) for inference, with errors that name the model."""
    from .modeling_gazeflow import GazeFlowModel

    location = resolve_model(model)
    try:
        loaded = GazeFlowModel.from_pretrained(location)
    except OSError as err:
        raise ModelFolderError(f"cannot load the GazeFlow model {location!r}: {err}") from err
    if device is not None:
        loaded = loaded.to(device)
    return loaded.eval()


# Hub metadata: no `pipeline_tag` (the Hub only accepts its own task names); the task is named in the tags
MODEL_CARD_TEMPLATE = """---
library_name: transformers
license: apache-2.0
tags:
- egocentric-gaze
- gazeflow
- egocentric
- gaze-prediction
- flow-matching
- video
---

# {title}

{description}

## What it is

A GazeFlow model (egocentric gaze prediction by conditional flow matching): from a head-mounted video it samples
K whole gaze trajectories, one (x, y) point per frame in [0, 1] image coordinates (origin top-left).

- Encoder: V-JEPA 2 ({encoder}), input {image_size}x{image_size}, windows of {num_frames} frames, stride {stride}.
- Velocity network: d={hidden_size}, {layers} DenoiserBlocks, {heads} heads; {params} parameters in all.
- Sampling defaults: K={num_samples} samples, S={num_steps} {solver} steps; heatmaps with sigma {sigma} px.

## Training

{training}

## Use

```python
import transformers_gazeflow  # registers the model and the "egocentric-gaze" pipeline
from transformers import pipeline

gaze = pipeline("egocentric-gaze", model="{repo}")
out = gaze("my_video.mp4", num_samples=30, num_steps=5, seed=0)
out["points_px"]     # [T, 2] per-frame point estimate (mean of the K samples), pixels
out["trajectories"]  # [K, T, 2] samples, [0, 1]
```

Offline: download the folder once (or copy it), then pass its local path as `model=` and set `HF_HUB_OFFLINE=1`.
Without installing `transformers-gazeflow`, the folder loads with `trust_remote_code=True` when it carries the
remote code (see the project README).

## Limitations

{limitations}
"""


def write_model_card(folder: str | os.PathLike, model: GazeFlowModel, title: str, description: str, training: str,
                     limitations: str, repo: str | None = None) -> Path:
    """Write ``README.md`` (a Hub model card with metadata) into a model folder; returns its path."""
    config = model.config
    encoder = config.encoder_config
    text = MODEL_CARD_TEMPLATE.format(
        title=title, description=description, training=training, limitations=limitations,
        encoder=f"hidden {encoder.hidden_size}, {encoder.num_hidden_layers} layers",
        image_size=config.image_size, num_frames=config.num_frames, stride=config.window_stride,
        hidden_size=config.hidden_size, layers=config.num_hidden_layers, heads=config.num_attention_heads,
        params=f"{sum(p.numel() for p in model.parameters()):,}", num_samples=config.num_samples,
        num_steps=config.num_steps, solver=config.solver, sigma=config.heatmap_sigma,
        repo=repo or str(folder),
    )
    path = Path(folder) / "README.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


MAX_DEFAULT_MODEL_MB = 20.0
"""Size limit of the bundled default model's ``model.safetensors`` (it ships inside the package)."""


def bundle_default_model(source: str | os.PathLike, training: str, description: str, limitations: str,
                         destination: str | os.PathLike | None = None) -> Path:
    """Install a trained model folder as the bundled default (``default_model/``, or ``destination``).

    Loads ``source`` (a folder written by ``examples/train.py`` / ``save_pretrained``), merges LoRA into the
    encoder, writes ``config.json`` + ``model.safetensors`` + ``preprocessor_config.json`` and a model card
    (``training``: exactly how it was trained; ``description``: what it is; ``limitations``), and checks the
    weights stay within :data:`MAX_DEFAULT_MODEL_MB`. Returns the destination folder.
    """
    from .modeling_gazeflow import GazeFlowModel

    source_path = check_model_folder(source)
    model = GazeFlowModel.from_pretrained(source_path)
    if model.video_encoder.has_lora:
        model.merge_lora()
    processor = load_video_processor(source_path, model.config)
    destination = Path(destination) if destination is not None else default_model_path()
    destination.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(destination, safe_serialization=True)
    weights = destination / "model.safetensors"
    size_mb = weights.stat().st_size / 2**20
    if size_mb > MAX_DEFAULT_MODEL_MB:
        weights.unlink()
        raise ModelFolderError(f"{source_path}: model.safetensors is {size_mb:.1f} MB, over the "
                               f"{MAX_DEFAULT_MODEL_MB:.0f} MB limit of the bundled model")
    processor.save_pretrained(destination)
    write_model_card(destination, model, title="GazeFlow default model (small, synthetic data)",
                     description=description, training=training, limitations=limitations)
    return destination


__all__ = [
    "MAX_DEFAULT_MODEL_MB",
    "bundle_default_model",
    "ModelFolderError",
    "default_model_path",
    "default_model_available",
    "has_weights",
    "check_model_folder",
    "resolve_model",
    "load_video_processor",
    "load_model",
    "write_model_card",
]
