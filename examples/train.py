#!/usr/bin/env python
"""Train GazeFlow on EGTEA Gaze+, Ego4D or the synthetic dataset with Accelerate.

One GPU, several GPUs or CPU, the same script (paper Appendix E.4 defaults):

    python examples/train.py --dataset_name synthetic --data_dir data/synthetic --dataset_config small \
        --output_dir runs/synthetic
    accelerate launch --config_file examples/accelerate_multi_gpu.yaml examples/train.py \
        --dataset_name egtea --data_dir /data/egtea --dataset_config split1 --per_device_train_batch_size 4 \
        --encoder_name_or_path facebook/vjepa2-vitl-fpc64-256 --output_dir runs/egtea

AdamW (0.9, 0.999), weight decay 1e-4, lr 1e-4 cosine to 1e-6, effective batch 16, EMA 0.995 (validation and the
saved model use the EMA weights), gradient clipping 1.0, bf16 on GPU, early stopping with patience 15 on the
validation loss. The model comes from ``--model_name_or_path`` (with the processor saved beside it) or from
``GazeFlowConfig()`` (the paper's) with ``--config_overrides``.

``--recipe NAME`` sets every knob of a documented recipe (``transformers_gazeflow.training.recipes``), each still
overridable on the command line; the small-scale recipe, on 2 CPU cores in <= 25 minutes:

    python examples/train.py --recipe small-cpu --dataset_name synthetic --data_dir data/synthetic_small \
        --dataset_config small --output_dir runs/small_cpu

The saved model holds the EMA weights of the epoch with the best validation loss (not the last step's); its card
says which step that was and what it scored.

This script reads top to bottom (arguments, accelerator, model, data, the run, the loop, the checks, save); the
machinery is in ``transformers_gazeflow.training``: the command line's groups (``arguments``), one run's loaders,
optimizer, schedule and EMA (``run``, ``ema``), the loop with validation and early stopping (``loop``,
``validation``, ``early_stopping``), resuming and the trial starts (``resume``, ``trial_starts``), the checks after
training (``final_checks``, ``grounding_plateau``, ``validation_success``) and the card's training section (``card``).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import logging
import math
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from accelerate.utils import DataLoaderConfiguration, ProjectConfiguration, set_seed
from transformers import AutoConfig

import transformers_gazeflow  # noqa: F401  (registers GazeFlow with the Auto classes)
from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
from transformers_gazeflow.data.collator import GazeFlowDataCollator
from transformers_gazeflow.data.output_safety import check_outputs, files_of
from transformers_gazeflow.data.processing import GazeFlowVideoProcessor
from transformers_gazeflow.hub.model_folders import load_video_processor, save_model_folder
from transformers_gazeflow.training.arguments import (
    add_data_arguments,
    add_device_speed_arguments,
    add_model_arguments,
    add_training_arguments,
    check_arguments,
    parse_config_overrides,
    parse_with_recipe,
)
from transformers_gazeflow.training.card import model_card_sections
from transformers_gazeflow.training.checkpointing import publish_folder
from transformers_gazeflow.training.datasets import load_training_splits
from transformers_gazeflow.training.feature_cache import CachedFeatureCollator, FeatureCache, cache_fingerprint
from transformers_gazeflow.training.final_checks import (
    check_grounding_plateau,
    check_replicas_agree,
    check_step_cap,
    check_validation_success,
)
from transformers_gazeflow.training.grounding_plateau import reference_levels
from transformers_gazeflow.training.loop import train_epochs
from transformers_gazeflow.training.processes import leave_process_group
from transformers_gazeflow.training.recipes import RECIPES, recipe_help
from transformers_gazeflow.training.resume import checkpoint_to_resume, start_run
from transformers_gazeflow.training.run import RUN_LOGGER, TrainingError, TrainingRun, TrainingSetup, effective_batch
from transformers_gazeflow.training.trainer_state import TRAINER_STATE

logger = logging.getLogger(RUN_LOGGER)
CONFIG_FIELDS = frozenset(field.name for field in dataclasses.fields(GazeFlowConfig))
"""The names GazeFlowConfig takes: a preset's values are carried over by name."""


# ---------------------------------------------------------------------------------------------------- arguments
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line: ``--recipe`` and the data, model, training and speed groups (``training.arguments``),
    parsed with the recipe's values as defaults and checked for range."""
    parser = argparse.ArgumentParser(
        description="Train GazeFlow (conditional flow matching for egocentric gaze).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--recipe",
        choices=sorted(RECIPES),
        default=None,
        help="a named recipe that sets the defaults of every argument below (each still overridable; "
        "--config_overrides is merged over the recipe's): " + recipe_help(),
    )
    add_data_arguments(parser.add_argument_group("data"))
    add_model_arguments(parser.add_argument_group("model"))
    add_training_arguments(parser.add_argument_group("training"))
    add_device_speed_arguments(parser)
    args = parse_with_recipe(parser, argv)
    check_arguments(parser, args)
    return args


# ---------------------------------------------------------------------------------------------------- accelerator
def start_accelerator(args: argparse.Namespace, output_dir: Path, mixed_precision: str) -> Accelerator:
    """The Accelerator (seedable sampler, trackers unless ``--report_to none``), logging (warnings only on the other
    processes) and the output folder."""
    accelerator = Accelerator(
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        mixed_precision=mixed_precision,
        log_with=None if args.report_to == "none" else args.report_to,
        project_config=ProjectConfiguration(project_dir=str(output_dir)),
        dataloader_config=DataLoaderConfiguration(use_seedable_sampler=True, non_blocking=torch.cuda.is_available()),
    )
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    if not accelerator.is_main_process:
        logging.getLogger().setLevel(logging.WARNING)
    if accelerator.is_main_process:
        output_dir.mkdir(parents=True, exist_ok=True)
    return accelerator


# ---------------------------------------------------------------------------------------------------- model
def build_model(args: argparse.Namespace) -> GazeFlowModel:
    """``--model_name_or_path``'s model (LoRA added or merged as ``--use_lora`` says), else a new one of
    ``--config_preset``'s config with ``--config_overrides`` (the encoder of ``--encoder_name_or_path`` when given)."""
    if args.model_name_or_path is not None:
        try:
            config = AutoConfig.from_pretrained(args.model_name_or_path)
        except (OSError, ValueError) as err:
            raise ValueError(
                f"--model_name_or_path {args.model_name_or_path} is not a GazeFlow model folder or hub id ({err})"
            ) from err
        if not isinstance(config, GazeFlowConfig):
            raise ValueError(
                f"--model_name_or_path {args.model_name_or_path} holds a {config.model_type!r} model, "
                f"not a GazeFlow ('gazeflow') model"
            )
        model = GazeFlowModel.from_pretrained(args.model_name_or_path)
        if args.use_lora is not None and args.use_lora != model.config.use_lora:
            if args.use_lora:
                model.add_lora()
            else:
                model.merge_lora()
        return model
    overrides = parse_config_overrides(args.config_overrides)
    encoder_overrides = overrides.pop("encoder_config", {})
    base = GazeFlowConfig.tiny() if args.config_preset == "tiny" else GazeFlowConfig()
    encoder = base.encoder_config.to_dict()
    encoder.update(encoder_overrides)
    use_lora = args.use_lora if args.use_lora is not None else overrides.pop("use_lora", base.use_lora)
    settings = {
        key: value for key, value in base.to_diff_dict().items() if key in CONFIG_FIELDS and key != "encoder_config"
    }
    config = GazeFlowConfig(encoder_config=encoder, **{**settings, **overrides, "use_lora": False})
    model = GazeFlowModel(config)
    if args.encoder_name_or_path is not None:
        model.load_encoder_weights(args.encoder_name_or_path)
    if use_lora:
        model.add_lora()
    return model


# ---------------------------------------------------------------------------------------------------- data
def build_setup(
    args: argparse.Namespace,
    accelerator: Accelerator,
    model: GazeFlowModel,
    processor: GazeFlowVideoProcessor,
    output_dir: Path,
    mixed_precision: str,
) -> TrainingSetup:
    """The data splits, the collators (and the feature cache) and the length of the schedule."""
    config = model.config
    with accelerator.main_process_first():  # the first process builds the dataset cache, the others reuse it
        train_set, validation_set = load_training_splits(
            args.dataset_name,
            args.data_dir,
            args.dataset_config,
            args.validation_fraction,
            window_frames=config.num_frames,
            window_stride=config.window_stride,
            **args.dataset_options,
        )
    if len(train_set) == 0:
        raise ValueError(f"--dataset_name {args.dataset_name} with --data_dir {args.data_dir} gave no training window")
    logger.info("windows: %d train, %d validation", len(train_set), len(validation_set))
    collator, train_collator = build_collators(
        args, accelerator, model, processor, train_set, validation_set, output_dir
    )
    batches_per_epoch = math.ceil(len(train_set) / (args.per_device_train_batch_size * accelerator.num_processes))
    steps_per_epoch = math.ceil(batches_per_epoch / args.gradient_accumulation_steps)
    max_train_steps = args.max_train_steps or args.num_train_epochs * steps_per_epoch
    reference = (
        reference_levels(train_set, validation_set, config)
        if model.condition_encoder.grounding_head is not None
        else None
    )
    if reference is not None:
        logger.info(
            "grounding loss reference levels (validation): centre bias %.4f, floor %.4f",
            reference.centre_bias,
            reference.floor,
        )
    return TrainingSetup(
        args=args,
        accelerator=accelerator,
        train_set=train_set,
        validation_set=validation_set,
        collator=collator,
        train_collator=train_collator,
        steps_per_epoch=steps_per_epoch,
        max_train_steps=max_train_steps,
        num_epochs=math.ceil(max_train_steps / steps_per_epoch),
        mixed_precision=mixed_precision,
        grounding_reference=reference,
    )


def build_collators(
    args: argparse.Namespace,
    accelerator: Accelerator,
    model: GazeFlowModel,
    processor: GazeFlowVideoProcessor,
    train_set: Any,
    validation_set: Any,
    output_dir: Path,
) -> tuple[GazeFlowDataCollator, GazeFlowDataCollator]:
    """The validation and the training collator (which mirrors at ``--horizontal_flip_probability``): decoding
    frames, or with ``--cache_features`` serving the frozen encoder's tokens from the feature cache, built here."""
    config, flip_probability = model.config, args.horizontal_flip_probability
    collator = GazeFlowDataCollator(processor, num_frames=config.num_frames)
    train_collator = GazeFlowDataCollator(
        processor, num_frames=config.num_frames, horizontal_flip_probability=flip_probability
    )
    if not args.cache_features:
        return collator, train_collator
    if config.use_lora or not config.freeze_encoder:
        raise ValueError(
            "--cache_features needs a frozen encoder without LoRA (add --no-use_lora): the encoder's "
            "outputs must not change during training"
        )
    cache_dir = Path(args.feature_cache_dir or output_dir / "feature_cache")
    encoder_model = model.to(accelerator.device).eval()
    cache = FeatureCache(cache_dir, cache_fingerprint(encoder_model, processor))
    with accelerator.autocast():
        cache.build(
            encoder_model,
            [train_set, validation_set],
            collator,
            batch_size=args.per_device_eval_batch_size or args.per_device_train_batch_size,
            accelerator=accelerator,
            flipped_datasets=[train_set] if flip_probability > 0 else [],
        )
    return (
        CachedFeatureCollator(cache, processor, num_frames=config.num_frames),
        CachedFeatureCollator(
            cache, processor, num_frames=config.num_frames, horizontal_flip_probability=flip_probability
        ),
    )


# ---------------------------------------------------------------------------------------------------- save
def save_final_model(run: TrainingRun, processor: GazeFlowVideoProcessor, output_dir: Path, card: dict) -> None:
    """The model folder in ``output_dir``: the best validation loss's EMA weights (the last step's without a
    validation split or with ``--final_weights last``), the processor, the card (``card``: its sections,
    ``training.card``) and the trainer state, written whole and then moved in file by file (``publish_folder``,
    ``trainer_state.json`` last)."""
    state = run.state
    final = run.final_model()
    staging = output_dir / ".tmp_final"
    if staging.exists():
        shutil.rmtree(staging)
    save_model_folder(final, staging, processor=processor, **card, repo=str(output_dir))
    state.save(staging)
    publish_folder(staging, output_dir, last=TRAINER_STATE)
    logger.info("saved the EMA model of step %s to %s", run.final_step, output_dir)


# ---------------------------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    """Train as ``argv`` (or ``sys.argv``) says: the model folder goes to ``--output_dir``; returns the exit status."""
    args = parse_args(argv)
    output_dir = Path(args.output_dir)
    # the final model's files never overwrite what the run reads (its start model, its data): before anything starts
    final_files = [("--output_dir", output_dir / name) for name in ("config.json", "model.safetensors", TRAINER_STATE)]
    check_outputs(final_files, files_of("--model_name_or_path", args.model_name_or_path))
    mixed_precision = args.mixed_precision or ("bf16" if torch.cuda.is_available() else "no")
    accelerator = start_accelerator(args, output_dir, mixed_precision)
    resume_from = checkpoint_to_resume(args, output_dir, accelerator)
    set_seed(args.seed)  # the same initial weights on every process
    model = build_model(args)
    # the processor saved with --model_name_or_path's model (its preprocessor_config.json), else the default
    processor = load_video_processor(args.model_name_or_path, model.config)
    setup = build_setup(args, accelerator, model, processor, output_dir, mixed_precision)
    started = time.time()
    run, chosen_trial = start_run(setup, model, functools.partial(build_model, args), resume_from, output_dir)
    if accelerator.is_main_process and args.report_to != "none":
        accelerator.init_trackers(
            "gazeflow", config={k: v for k, v in vars(args).items() if isinstance(v, (int, float, str, bool))}
        )
    logger.info(
        "training %d steps (%d epochs of %d steps), effective batch %d, mixed precision %s, %d process(es) on %s, "
        "%.2fM trainable parameters",
        setup.max_train_steps,
        setup.num_epochs,
        setup.steps_per_epoch,
        effective_batch(setup),
        mixed_precision,
        accelerator.num_processes,
        accelerator.device.type,
        sum(p.numel() for p in run.trainable) / 1e6,
    )
    if chosen_trial is None or not chosen_trial["finished"]:
        train_epochs(setup, run, output_dir)
    check_replicas_agree(accelerator, run)
    check_step_cap(setup, run)
    check_grounding_plateau(setup, run)
    check_validation_success(setup, run, processor)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        command = "python examples/train.py " + " ".join(sys.argv[1:] if argv is None else argv)
        card = model_card_sections(setup, run, command, wall_seconds=time.time() - started)
        save_final_model(run, processor, output_dir, card)
    leave_process_group(accelerator)  # after the main process has saved: every process tears down together
    return 0


def cli(argv: list[str] | None = None) -> int:
    """``main`` with its errors as ``train.py: error: <what>`` and exit status 1 instead of a traceback."""
    try:
        return main(argv)
    except (ValueError, FileNotFoundError, TrainingError) as err:
        print(f"train.py: error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(cli())
