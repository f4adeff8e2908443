"""Model cards: the ``README.md`` with Hub metadata that every model folder carries (:func:`write_model_card`, called
by ``hub.model_folders.save_model_folder``, the one writer of model folders): what the model is, how it was trained,
how to use it and its limitations, from the model's config and the writer's words.

This module imports neither torch nor transformers at import time.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..models.gazeflow.configuration_gazeflow import GazeFlowConfig
    from ..models.gazeflow.modeling_gazeflow import GazeFlowModel

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
- Visual condition c_v: {condition}.
- Sampling defaults: K={num_samples} samples, S={num_steps} {solver} steps{grid}{temperature}. Evaluation maps: \
Gaussians of
  sigma {sigma} px at the data's native size (`heatmap_sigma`); overlays and pipeline heatmaps use 3.9% of the
  frame width unless given `heatmap_sigma` (the paper's 25 px at 640 px).

## Training

{training}

## Use

```python
import transformers_gazeflow  # registers the model and the "egocentric-gaze" pipeline
from transformers import pipeline

gaze = pipeline("egocentric-gaze", model={model_argument})
out = gaze("my_video.mp4", num_samples=30, num_steps=5)  # seed=0 unless given
out["points_px"]  # [T, 2] per-frame point estimate (mean of the K samples), pixels
out["trajectories"]  # [K, T, 2] samples, [0, 1]
```

Offline: download the folder once (or copy it), then pass its local path as `model=` and set `HF_HUB_OFFLINE=1`.
Without installing `transformers-gazeflow`, the folder loads with `trust_remote_code=True` when it carries the
remote code (see the project README).

## Limitations

{limitations}
"""


def describe_condition(config: GazeFlowConfig) -> str:
    """The card's line on the spatial encoder that builds c_v: its layers and how their attention starts."""
    temporal = config.num_temporal_layers
    text = f"{config.num_spatial_layers} spatial layer{'s' if config.num_spatial_layers != 1 else ''}"
    if temporal:
        text = (
            f"{temporal} temporal layer{'s' if temporal != 1 else ''} (each position across the window's frame "
            f"groups{', earlier ones only' if config.causal else ''}), then {text}"
        )
    if config.spatial_attention_init == "mimetic":
        text += ", mimetic query-key initialisation"
    return text


def describe_time_grid(power: float) -> str:
    """The sampler's flow-time grid as the card's sampling line names it: nothing for the paper's uniform grid."""
    if power == 1:
        return ""
    return f" on the flow-time grid s_i = 1 - (1 - i/S)^{power:g} (`time_grid_power`)"


def describe_noise_scale(noise_scale: float) -> str:
    """The sampling temperature tau as the card's sampling line names it: nothing for the paper's x_0 = e."""
    if noise_scale == 1:
        return ""
    return f", from x_0 = {noise_scale:g} e (`noise_scale`, the sampling temperature tau; 1 is the paper's x_0)"


def write_model_card(
    folder: str | os.PathLike,
    model: GazeFlowModel,
    title: str,
    description: str,
    training: str,
    limitations: str,
    repo: str | None = None,
    model_argument: str | None = None,
) -> Path:
    """Write ``README.md`` (a Hub model card with metadata) into a model folder; returns its path. Its usage snippet
    loads ``repo`` (default: the folder's path), or the Python expression ``model_argument`` where a name written
    into the card would not hold on the reader's machine (a bundled model's package folder)."""
    from ..models.gazeflow.generation_gazeflow import SamplingSettings

    config = model.config
    encoder = config.encoder_config
    defaults = SamplingSettings.resolve(config)
    text = MODEL_CARD_TEMPLATE.format(
        title=title,
        description=description,
        training=training,
        limitations=limitations,
        encoder=f"hidden {encoder.hidden_size}, {encoder.num_hidden_layers} layers",
        image_size=config.image_size,
        num_frames=config.num_frames,
        stride=config.window_stride,
        hidden_size=config.hidden_size,
        layers=config.num_hidden_layers,
        heads=config.num_attention_heads,
        params=f"{sum(p.numel() for p in model.parameters()):,}",
        num_samples=defaults.num_samples,
        num_steps=defaults.num_steps,
        solver=defaults.solver,
        grid=describe_time_grid(config.time_grid_power),
        temperature=describe_noise_scale(defaults.noise_scale),
        sigma=config.heatmap_sigma,
        condition=describe_condition(config),
        model_argument=model_argument or repr(repo or str(folder)),
    )
    path = Path(folder) / "README.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


__all__ = ["MODEL_CARD_TEMPLATE", "describe_condition", "write_model_card"]
