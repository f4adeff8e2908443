"""Named training recipes: every knob of a documented ``examples/train.py`` run under one name (``--recipe``).

A recipe is a set of defaults for ``examples/train.py``'s arguments: the command line still overrides each of them,
and ``--config_overrides`` on the command line is merged over the recipe's (the command line's keys win), so
``--recipe small-cpu --config_overrides hidden_size=128`` changes the width and keeps the rest of the recipe.

| recipe | for |
| --- | --- |
| ``small-cpu`` | learning a dataset's rule with no pretrained encoder at hand, on 2 CPU cores in <= 25 minutes |
| ``first-run`` | a first run: ``small-cpu`` cut to 800 steps, one start, no flips; about 9 min on one idle core |
| ``paper-1gpu`` | the paper's model and optimisation on one GPU (H100 or H200), with the fastest settings measured |
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Recipe:
    """``arguments``: ``examples/train.py`` argument names (argparse dests) and their values; ``config_overrides``:
    ``key=value`` pairs over ``arguments["config_preset"]``'s config (nested keys with dots)."""

    name: str
    summary: str
    arguments: dict[str, Any] = field(default_factory=dict)
    config_overrides: dict[str, Any] = field(default_factory=dict)

    def config_overrides_text(self) -> str:
        """The overrides as ``--config_overrides`` text (``a=1,b=2``)."""
        return ",".join(
            f"{key}={value!r}" if isinstance(value, str) else f"{key}={value}"
            for key, value in self.config_overrides.items()
        )


SMALL_CPU = Recipe(
    name="small-cpu",
    summary="tiny random frozen encoder (64x64 input, patch 8, 2 layers of width 128) with its outputs cached once, "
    "velocity network d=64 / 3 blocks / 4 heads on 16-frame windows (stride 8), c_v from 1 temporal layer "
    "(each position across the window's frame groups) and 2 spatial layers with mimetic query-key "
    "initialisation, the grounding loss on c_v (weight 1, sigma 1 patch), horizontal-flip augmentation "
    "(p 0.5, the mirrored windows cached too), batch 16, lr 1e-3 cosine (100 warm-up steps), EMA "
    "0.995, at most 4,000 steps, early stopping after 5 epochs without a better validation loss, the "
    "best-validation EMA weights saved; a second start (seed --seed + 1, the same encoder draw) only when "
    "the first ends its 1,000 trial steps on the grounding plateau, the one with the lower validation "
    "grounding loss continued; the saved model samples K=16, S=5 on the flow-time grid s_i = 1 - (1 - i/S)^4; "
    "<= 25 minutes on 2 CPU cores",
    arguments=dict(
        config_preset="tiny",
        use_lora=False,
        cache_features=True,
        per_device_train_batch_size=16,
        learning_rate=1e-3,
        min_learning_rate=1e-6,
        num_warmup_steps=100,
        weight_decay=1e-4,
        max_grad_norm=1.0,
        ema_decay=0.995,
        max_train_steps=4000,
        early_stopping_patience=5,
        validation_fraction=0.1,
        horizontal_flip_probability=0.5,
        dataloader_num_workers=0,
        mixed_precision="no",
        seed=0,
        trial_starts=2,
        trial_steps=1000,
    ),
    config_overrides={
        "encoder_config.crop_size": 64,
        "encoder_config.patch_size": 8,
        "encoder_config.hidden_size": 128,
        "encoder_config.num_attention_heads": 4,
        "encoder_config.num_hidden_layers": 2,
        "encoder_config.frames_per_clip": 16,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "intermediate_size": 256,
        "num_hidden_layers": 3,
        "num_spatial_layers": 2,
        "num_temporal_layers": 1,
        "spatial_attention_init": "mimetic",
        "num_task_queries": 4,
        "grounding_loss_weight": 1.0,
        "grounding_sigma": 1.0,
        "num_frames": 16,
        "window_stride": 8,
        "heatmap_sigma": 5.0,
        "num_samples": 16,
        "num_steps": 5,
        "time_grid_power": 4.0,
    },
)

FIRST_RUN = Recipe(
    name="first-run",
    summary="the small-cpu recipe cut to a first try: at most 800 steps (100 warm-up), one start (no trial "
    "starts), no horizontal flips (half the feature cache to compute and store), the same model and "
    "optimisation; about 9 minutes on one idle CPU core with the data rendered by the run itself, less on two "
    "with torch's two threads (CPU seconds measured with one thread, README)",
    arguments={**SMALL_CPU.arguments, "max_train_steps": 800, "trial_starts": 1, "horizontal_flip_probability": 0.0},
    config_overrides=dict(SMALL_CPU.config_overrides),
)

PAPER_ONE_GPU = Recipe(
    name="paper-1gpu",
    summary="the paper's model and optimisation (V-JEPA 2 ViT-L encoder with LoRA r16 on query/value, 64-frame "
    "windows, AdamW lr 1e-4 cosine to 1e-6, weight decay 1e-4, clipping 1.0, EMA 0.995, 80 epochs, early "
    "stopping after 15, effective batch 16) on one GPU: 8 clips per step and 2 accumulation steps, bf16, each "
    "encoder layer compiled (measured on an H200 at 4 clips per step: 10.7 clips/s against 8.0 eager), "
    "DataLoader workers one per free core, no gradient checkpointing (about 50 GB of GPU memory at 8 clips)",
    arguments=dict(
        config_preset="paper",
        use_lora=True,
        encoder_name_or_path="facebook/vjepa2-vitl-fpc64-256",
        per_device_train_batch_size=8,
        gradient_accumulation_steps=2,
        num_train_epochs=80,
        learning_rate=1e-4,
        min_learning_rate=1e-6,
        weight_decay=1e-4,
        max_grad_norm=1.0,
        ema_decay=0.995,
        early_stopping_patience=15,
        mixed_precision="bf16",
        torch_compile=True,
        gradient_checkpointing=False,
    ),
)

RECIPES: dict[str, Recipe] = {recipe.name: recipe for recipe in (SMALL_CPU, FIRST_RUN, PAPER_ONE_GPU)}


def recipe_help() -> str:
    """One line per recipe, for ``--help``."""
    return "; ".join(f"{recipe.name}: {recipe.summary}" for recipe in RECIPES.values())


__all__ = ["Recipe", "RECIPES", "SMALL_CPU", "FIRST_RUN", "PAPER_ONE_GPU", "recipe_help"]
