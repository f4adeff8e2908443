"""The model card (``README.md``) written next to a trained model: what it is, how it was trained, how it scored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..configuration_gazeflow import GazeFlowConfig


def write_model_card(output_dir: str | Path, config: GazeFlowConfig, training: dict[str, Any],
                     metrics: dict[str, Any], title: str = "GazeFlow") -> Path:
    """Write a Hub-ready ``README.md`` (YAML front matter + sections) describing ``config``, the ``training`` run
    (command, data, steps, hyper-parameters) and the validation ``metrics``."""
    encoder = config.encoder_config
    trainable_note = "LoRA adapters, W_proj and the velocity network" if config.use_lora else (
        "W_proj and the velocity network (encoder frozen)" if config.freeze_encoder else "everything")
    lines = [
        "---",
        "library_name: transformers",
        "pipeline_tag: egocentric-gaze",
        "tags: [gaze-prediction, egocentric, flow-matching, transformers-gazeflow]",
        "license: apache-2.0",
        "---",
        "",
        f"# {title}",
        "",
        "A GazeFlow model (egocentric gaze trajectories by conditional flow matching), trained with "
        "`examples/train.py` of transformers-gazeflow. Load it with "
        "`import transformers_gazeflow; AutoModel.from_pretrained(<this folder>)`, or "
        "`pipeline(\"egocentric-gaze\", model=<this folder>)`.",
        "",
        "## Model",
        "",
        f"- Encoder: V-JEPA 2 style, hidden {encoder.hidden_size}, {encoder.num_hidden_layers} layers, "
        f"{encoder.num_attention_heads} heads, {encoder.crop_size}x{encoder.crop_size} input, patch {encoder.patch_size}, "
        f"tubelet {encoder.tubelet_size}.",
        f"- Velocity network: d={config.hidden_size}, {config.num_hidden_layers} DenoiserBlocks, "
        f"{config.num_attention_heads} heads, FFN {config.intermediate_size}, spatial encoder "
        f"{config.num_spatial_layers} layers, {config.num_task_queries} task queries.",
        f"- Windows of {config.num_frames} frames (stride {config.window_stride}); sampling defaults K="
        f"{config.num_samples}, S={config.num_steps}, solver {config.solver}.",
        f"- Trained: {trainable_note}. LoRA: {config.use_lora} (r={config.lora_r}, alpha={config.lora_alpha}).",
        "",
        "## Training",
        "",
    ]
    lines += [f"- {key}: {value}" for key, value in training.items()]
    lines += ["", "## Validation", ""]
    lines += [f"- {key}: {value}" for key, value in metrics.items()] or ["- (none)"]
    lines += ["", "## Full configuration", "", "```json", json.dumps(config.to_diff_dict(), indent=2, default=str),
              "```", ""]
    path = Path(output_dir) / "README.md"
    path.write_text("\n".join(lines))
    return path


__all__ = ["write_model_card"]
