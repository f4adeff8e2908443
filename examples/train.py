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
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import enum
import json
import logging
import math
import shutil
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
from accelerate import Accelerator
from accelerate.utils import DataLoaderConfiguration, ProjectConfiguration, set_seed
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from torch.utils.data import DataLoader
from tqdm.auto import tqdm
from transformers import AutoConfig, get_cosine_with_min_lr_schedule_with_warmup

import transformers_gazeflow  # noqa: F401  (registers GazeFlow with the Auto classes)
from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
from transformers_gazeflow.data.collator import FLIP_STATE_KEY, GazeFlowDataCollator
from transformers_gazeflow.data.processing import GazeFlowVideoProcessor
from transformers_gazeflow.hub.model_folders import load_video_processor, save_model_folder
from transformers_gazeflow.training.checkpointing import (
    begin_lineage,
    load_best_ema_state,
    load_checkpoint,
    publish_folder,
    save_checkpoint,
    select_checkpoint,
)
from transformers_gazeflow.training.datasets import DATASET_NAMES, load_training_splits
from transformers_gazeflow.training.device_speed import (
    FrozenWeightCast,
    adamw,
    compile_encoder_layers,
    enable_gradient_checkpointing,
    loader_options,
)
from transformers_gazeflow.training.faults import fault_point
from transformers_gazeflow.training.feature_cache import CachedFeatureCollator, FeatureCache, cache_fingerprint
from transformers_gazeflow.training.grounding_plateau import (
    PLATEAU_PROGRESS,
    GroundingReference,
    describe_verdict,
    plateau_verdict,
    reference_levels,
)
from transformers_gazeflow.training.processes import leave_process_group
from transformers_gazeflow.training.recipes import RECIPES, recipe_help
from transformers_gazeflow.training.trainer_state import TRAINER_STATE, CheckpointError, TrainerState

logger = logging.getLogger("train")
MODEL_INPUTS = ("pixel_values_videos", "encoder_hidden_states", "gaze", "valid_mask")
CONFIG_FIELDS = frozenset(field.name for field in dataclasses.fields(GazeFlowConfig))
"""The names GazeFlowConfig takes: a preset's values are carried over by name."""


class TrainingError(RuntimeError):
    """A condition that stops training with a message (non-finite loss, bad arguments found late)."""


def recipe_name(argv: list[str] | None) -> str | None:
    """The ``--recipe`` of ``argv`` (or ``sys.argv``), before the full parse; None when absent or unknown (the full
    parse then names the bad choice)."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--recipe", default=None)
    known, _ = pre.parse_known_args(argv)
    return known.recipe if known.recipe in RECIPES else None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
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


def add_data_arguments(data: argparse._ArgumentGroup) -> None:
    data.add_argument("--dataset_name", required=True, choices=DATASET_NAMES, help="the dataset to train on")
    data.add_argument("--data_dir", default=None, help="raw download (egtea/ego4d) or where synthetic clips go")
    data.add_argument(
        "--dataset_config",
        default=None,
        help="builder config: split1..3 (egtea), glc (ego4d), tiny/small/default/large (synthetic)",
    )
    data.add_argument(
        "--validation_fraction",
        type=float,
        default=0.05,
        help="clips held out for validation where the dataset has no validation split",
    )
    data.add_argument(
        "--dataloader_num_workers",
        type=int,
        default=None,
        help="data loading worker processes (None: 2 on the CPU; on a GPU one per free core, at most "
        "12, so that decoding keeps up with the steps)",
    )
    data.add_argument(
        "--horizontal_flip_probability",
        type=float,
        default=0.0,
        help="chance that a training window is mirrored left to right, frames and gaze together "
        "(augmentation; validation never is); with --cache_features the training windows are "
        "also encoded mirrored",
    )


def add_model_arguments(model: argparse._ArgumentGroup) -> None:
    model.add_argument(
        "--model_name_or_path",
        default=None,
        help="a GazeFlow model folder or hub id to start from (its weights and processor)",
    )
    model.add_argument(
        "--config_preset",
        choices=["paper", "tiny"],
        default="paper",
        help="base config without --model_name_or_path: the paper's (ViT-L) or a tiny one for smoke runs",
    )
    model.add_argument(
        "--config_overrides",
        default=None,
        help="comma-separated key=value over the preset config, e.g. "
        "'hidden_size=128,encoder_config.num_hidden_layers=4' (ignored with --model_name_or_path)",
    )
    model.add_argument(
        "--encoder_name_or_path",
        default=None,
        help="pretrained V-JEPA 2 checkpoint for the encoder (e.g. facebook/vjepa2-vitl-fpc64-256)",
    )
    model.add_argument(
        "--use_lora",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="LoRA on the encoder (None: the config's, True for the paper's model)",
    )
    model.add_argument(
        "--cache_features",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="cache the frozen encoder's outputs once (needs a frozen encoder without LoRA)",
    )
    model.add_argument(
        "--feature_cache_dir",
        default=None,
        help="where --cache_features keeps the cache (None: <output_dir>/feature_cache)",
    )


def add_training_arguments(train: argparse._ArgumentGroup) -> None:
    train.add_argument("--output_dir", required=True, help="checkpoints and the final model folder")
    train.add_argument("--num_train_epochs", type=int, default=80, help="epochs (the paper's 80)")
    train.add_argument("--max_train_steps", type=int, default=None, help="overrides --num_train_epochs")
    train.add_argument("--per_device_train_batch_size", type=int, default=16, help="clips per process and step")
    train.add_argument(
        "--per_device_eval_batch_size",
        type=int,
        default=None,
        help="clips per process in validation (None: the training batch size)",
    )
    train.add_argument(
        "--gradient_accumulation_steps",
        type=int,
        default=1,
        help="steps whose gradients are summed before an optimizer step",
    )
    train.add_argument("--learning_rate", type=float, default=1e-4, help="peak AdamW learning rate")
    train.add_argument("--min_learning_rate", type=float, default=1e-6, help="learning rate at the end of the cosine")
    train.add_argument("--num_warmup_steps", type=int, default=0, help="linear warm-up steps")
    train.add_argument("--weight_decay", type=float, default=1e-4, help="AdamW weight decay")
    train.add_argument("--max_grad_norm", type=float, default=1.0, help="gradient clipping norm")
    train.add_argument(
        "--ema_decay", type=float, default=0.995, help="EMA decay (validation and the saved model use the EMA weights)"
    )
    train.add_argument(
        "--mixed_precision", choices=["no", "bf16", "fp16"], default=None, help="None: bf16 on GPU, no on CPU"
    )
    train.add_argument("--seed", type=int, default=0, help="seed of data order, initialisation and noise")
    train.add_argument(
        "--trial_starts",
        type=int,
        default=1,
        help=f"at most this many starts (seeds --seed, --seed + 1, ...: initialisation outside the "
        "encoder, data order, flips, noise; one encoder draw and feature cache) of --trial_steps "
        "steps each; a further start only while every start so far ended on the grounding "
        f"plateau (its validation grounding loss under {100 * PLATEAU_PROGRESS:.0f}%% of the way "
        "from the centre-bias level to the floor; every start where that cannot be told), then "
        "continue the one with the lowest validation grounding loss (EMA; the validation loss "
        "without the grounding head) from its checkpoint; a start that stalls costs --trial_steps "
        "steps instead of the run",
    )
    train.add_argument(
        "--trial_steps",
        type=int,
        default=1000,
        help="optimizer steps of each trial start (on the full run's learning-rate schedule)",
    )
    train.add_argument("--checkpointing_steps", type=int, default=None, help="save a checkpoint every N steps")
    train.add_argument("--resume_from_checkpoint", default=None, help="a step_<N> folder, or 'latest'")
    train.add_argument("--early_stopping_patience", type=int, default=15, help="epochs without improvement")
    train.add_argument("--logging_steps", type=int, default=10, help="log the training loss every N steps")
    train.add_argument("--report_to", default="none", help="tensorboard, wandb, ... or 'none'")


def parse_with_recipe(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parse ``argv`` with ``--recipe``'s arguments as the defaults; the command line's ``--config_overrides`` go
    over the recipe's."""
    recipe = RECIPES.get(recipe_name(argv))
    if recipe is not None:
        unknown = sorted(set(recipe.arguments) - {action.dest for action in parser._actions})
        if unknown:
            raise AssertionError(f"recipe {recipe.name} sets unknown arguments {unknown}")
        parser.set_defaults(**recipe.arguments, config_overrides=recipe.config_overrides_text())
    args = parser.parse_args(argv)
    if recipe is not None and args.config_overrides != recipe.config_overrides_text():
        # the command line's overrides go over the recipe's (parse_config_overrides: later keys win)
        args.config_overrides = recipe.config_overrides_text() + "," + (args.config_overrides or "")
    return args


def check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse values out of range with argparse's one-line usage error naming the argument."""
    for name in ("per_device_train_batch_size", "gradient_accumulation_steps", "num_train_epochs"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    if args.max_train_steps is not None and args.max_train_steps < 1:
        parser.error(f"--max_train_steps must be >= 1, got {args.max_train_steps}")
    if args.checkpointing_steps is not None and args.checkpointing_steps < 1:
        parser.error(f"--checkpointing_steps must be >= 1, got {args.checkpointing_steps}")
    for name in ("trial_starts", "trial_steps"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    if args.early_stopping_patience < 1:
        parser.error(f"--early_stopping_patience must be >= 1, got {args.early_stopping_patience}")
    if not 0.0 <= args.horizontal_flip_probability <= 1.0:
        parser.error(f"--horizontal_flip_probability must be in [0, 1], got {args.horizontal_flip_probability}")
    if not args.learning_rate > 0:  # the cosine schedule divides by it (min_learning_rate / learning_rate)
        parser.error(f"--learning_rate must be > 0, got {args.learning_rate}")
    if not 0 <= args.min_learning_rate <= args.learning_rate:
        parser.error(f"--min_learning_rate must be in [0, --learning_rate], got {args.min_learning_rate}")


def add_device_speed_arguments(parser: argparse.ArgumentParser) -> None:
    """The GPU speed settings (``transformers_gazeflow.training.device_speed``); none changes a CPU run unless
    asked for."""
    speed = parser.add_argument_group("speed")
    speed.add_argument(
        "--gradient_checkpointing",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="recompute each layer's activations in the backward pass (less memory, a slower step)",
    )
    speed.add_argument(
        "--torch_compile",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="torch.compile each encoder layer (regional compilation; the first steps compile)",
    )
    speed.add_argument(
        "--torch_compile_backend",
        default="inductor",
        help="the torch.compile backend of --torch_compile (e.g. aot_eager: traced, not code-generated)",
    )
    speed.add_argument(
        "--frozen_weights_in_bf16",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="cast the frozen encoder's matrix weights to bf16 once (the products are the same under "
        "bf16 autocast; the saved model keeps float32). None: on with bf16 on a GPU",
    )


# ---------------------------------------------------------------------------------------------------- model
def parse_config_overrides(text: str | None) -> dict:
    """``'a=1,b=x,encoder_config.c=2'`` -> nested dict of Python literals (strings where not a literal)."""
    overrides: dict = {}
    for item in filter(None, (part.strip() for part in (text or "").split(","))):
        if "=" not in item:
            raise ValueError(f"--config_overrides: expected key=value, got {item!r}")
        key, raw = (s.strip() for s in item.split("=", 1))
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            value = raw
        target = overrides
        *parents, leaf = key.split(".")
        for parent in parents:
            target = target.setdefault(parent, {})
        target[leaf] = value
    return overrides


def build_model(args: argparse.Namespace) -> GazeFlowModel:
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


# ---------------------------------------------------------------------------------------------------- loop pieces
def model_inputs(batch: dict) -> dict:
    return {key: batch[key] for key in MODEL_INPUTS if key in batch}


@torch.no_grad()
def validation_loss(model, dataloader, accelerator: Accelerator, seed: int) -> tuple[float, float | None]:
    """Mean loss of ``config.objective`` (flow matching: Eq. cfm_loss) over the validation windows, with fixed s,
    x_0 and coin draws (comparable across epochs, and drawing nothing from the training random state); and, for a
    model with the grounding head, the mean grounding loss beside it (else None).

    Early stopping and the best-weights choice read the first number only: the grounding loss is a training aid,
    and on small datasets it starts to overfit epochs before the flow-matching loss stops improving."""
    model.eval()
    generator = torch.Generator(device=accelerator.device).manual_seed(seed)
    zero = lambda: torch.zeros((), device=accelerator.device)  # noqa: E731
    objective_total, grounding_total, count = zero(), zero(), zero()
    has_grounding = False
    for batch in dataloader:
        with accelerator.autocast():
            output = model(**model_inputs(batch), generator=generator)
        size = torch.tensor(float(batch["gaze"].shape[0]), device=accelerator.device)
        objective = output.objective_loss if output.objective_loss is not None else output.loss
        objective_total += accelerator.reduce(objective.detach().float() * size, "sum")
        if output.grounding_loss is not None:
            has_grounding = True
            grounding_total += accelerator.reduce(output.grounding_loss.detach().float() * size, "sum")
        count += accelerator.reduce(size, "sum")
    count = count.clamp_min(1)
    return (objective_total / count).item(), ((grounding_total / count).item() if has_grounding else None)


def cpu_state_dict(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A detached CPU copy of ``module``'s weights (the best-validation EMA snapshot)."""
    return {key: value.detach().to("cpu", copy=True) for key, value in module.state_dict().items()}


def parameter_checksum(model) -> float:
    return float(sum(p.detach().double().sum().item() for p in model.parameters()))


class TrainingSetup(NamedTuple):
    """What every run of one ``train.py`` invocation shares: the arguments, the Accelerator, the data and collators
    (with the feature cache, built once), the length of the schedule, the mixed precision and the reference levels
    of the grounding loss that tell whether a run left its plateau (None for a model without the grounding head or
    without validation windows; ``training.grounding_plateau``)."""

    args: argparse.Namespace
    accelerator: Accelerator
    train_set: Any
    validation_set: Any
    collator: Any
    train_collator: Any
    steps_per_epoch: int
    max_train_steps: int
    num_epochs: int
    mixed_precision: str
    grounding_reference: GroundingReference | None = None


class TrainingRun:
    """One initialisation's training objects and where its loop stands. A plain run has one; ``--trial_starts N``
    builds one per trial start, then one for the chosen start's continuation (restored from its checkpoint).
    ``seed`` (kept in ``state.seed``): of the data order, the initialisation outside the encoder, the flips and the
    noise."""

    def __init__(
        self,
        seed: int,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        scheduler: Any,
        ema: AveragedModel,
        train_loader: DataLoader,
        validation_loader: DataLoader,
        trainable: list,
        flip_generator: torch.Generator | None = None,
        frozen_cast: FrozenWeightCast | None = None,
    ) -> None:
        self.model, self.optimizer, self.scheduler, self.ema = model, optimizer, scheduler, ema
        self.train_loader, self.validation_loader, self.trainable = train_loader, validation_loader, trainable
        self.state = TrainerState(seed=seed)
        self.best_ema_state: dict | None = None  # the EMA weights of the best validation loss so far (best_step)
        self.last_checkpoint: Path | None = None
        self.flip_generator = flip_generator  # the training collator's (flip augmentation in this process)
        self.flip_state: torch.Tensor | None = None  # flip_generator's state after the last batch consumed
        self.frozen_cast = frozen_cast  # the frozen weights cast to bf16 (their float32 originals, for saving)

    @property
    def checkpointed(self) -> dict:
        """What a checkpoint holds besides the trainer state."""
        return dict(model=self.model, optimizer=self.optimizer, scheduler=self.scheduler, ema=self.ema)

    def save(self, accelerator: Accelerator, folder: Path) -> Path:
        """A checkpoint of where the run stands, in ``folder/step_<N>``."""
        self.last_checkpoint = save_checkpoint(
            accelerator,
            folder,
            self.state,
            **self.checkpointed,
            best_ema_state=self.best_ema_state,
            flip_generator_state=self.flip_state,
        )
        return self.last_checkpoint

    def restore(self, accelerator: Accelerator, checkpoint: Path) -> None:
        """Continue from ``checkpoint``: weights, optimizer, schedule, EMA, random state, trainer state."""
        self.state = load_checkpoint(checkpoint, accelerator, **self.checkpointed, flip_generator=self.flip_generator)
        self.best_ema_state = load_best_ema_state(checkpoint, self.state)
        self.last_checkpoint = checkpoint


def prepare_run(setup: TrainingSetup, model: torch.nn.Module, seed: int) -> TrainingRun:
    """Loaders, AdamW, the cosine schedule and the EMA around ``model``, prepared by Accelerate. The caller has
    seeded the global generators (``set_seed``) before building ``model``: the data order follows the seed they
    were last set with (Accelerate's seedable sampler), the rest follows their state now."""
    args, accelerator = setup.args, setup.accelerator
    loader_kwargs = loader_options(args.dataloader_num_workers, accelerator.device, accelerator.num_processes)
    flip_generator = None
    if 0.0 < args.horizontal_flip_probability < 1.0 and loader_kwargs["num_workers"] == 0:
        # the run's own flip stream, one per process (workers keep torch's per-worker global streams)
        flip_generator = torch.Generator().manual_seed(
            int(np.random.SeedSequence([seed, accelerator.process_index]).generate_state(1)[0])
        )
    setup.train_collator.flip_generator = flip_generator
    train_loader = DataLoader(
        setup.train_set,
        shuffle=True,
        batch_size=args.per_device_train_batch_size,
        generator=torch.Generator().manual_seed(seed),
        collate_fn=setup.train_collator,
        **loader_kwargs,
    )
    validation_loader = DataLoader(
        setup.validation_set,
        batch_size=args.per_device_eval_batch_size or args.per_device_train_batch_size,
        collate_fn=setup.collator,
        **loader_kwargs,
    )
    frozen_cast = apply_speed_settings(model, args, accelerator)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = adamw(
        trainable, accelerator.device, lr=args.learning_rate, betas=(0.9, 0.999), weight_decay=args.weight_decay
    )
    scheduler = get_cosine_with_min_lr_schedule_with_warmup(
        optimizer,
        num_warmup_steps=args.num_warmup_steps * accelerator.num_processes,
        num_training_steps=setup.max_train_steps * accelerator.num_processes,
        min_lr=args.min_learning_rate,
    )
    model, optimizer, train_loader, validation_loader, scheduler = accelerator.prepare(
        model, optimizer, train_loader, validation_loader, scheduler
    )
    ema = AveragedModel(accelerator.unwrap_model(model), multi_avg_fn=get_ema_multi_avg_fn(args.ema_decay))
    if args.torch_compile:  # after the EMA's copy: the EMA (validation, the saved model) stays eager
        compile_encoder_layers(accelerator.unwrap_model(model), backend=args.torch_compile_backend)
    return TrainingRun(
        seed=seed,
        model=model,
        optimizer=optimizer,
        scheduler=scheduler,
        ema=ema,
        train_loader=train_loader,
        validation_loader=validation_loader,
        trainable=trainable,
        flip_generator=flip_generator,
        frozen_cast=frozen_cast,
    )


def apply_speed_settings(
    model: torch.nn.Module, args: argparse.Namespace, accelerator: Accelerator
) -> FrozenWeightCast | None:
    """``--gradient_checkpointing`` and ``--frozen_weights_in_bf16`` on ``model``, before its optimizer and EMA are
    built; returns the cast (None when the weights keep float32)."""
    if args.gradient_checkpointing:
        enable_gradient_checkpointing(model)
    bf16 = accelerator.mixed_precision == "bf16"
    if args.frozen_weights_in_bf16 and not bf16:
        raise ValueError(
            f"--frozen_weights_in_bf16 needs bf16 autocast (--mixed_precision bf16), got "
            f"--mixed_precision {accelerator.mixed_precision}"
        )
    cast = (
        args.frozen_weights_in_bf16
        if args.frozen_weights_in_bf16 is not None
        else (bf16 and accelerator.device.type == "cuda")
    )
    return FrozenWeightCast(model, torch.bfloat16) if cast else None


class EpochEnd(enum.Enum):
    """How :func:`train_one_epoch` ended."""

    ALL_BATCHES = "all batches"  # the epoch's batches are done
    LAST_STEP = "last step"  # the run's last optimizer step is done (or was, in the checkpoint resumed from)
    PAUSED = "paused"  # a trial start's last step is done


def train_epochs(
    setup: TrainingSetup,
    run: TrainingRun,
    checkpoint_dir: Path,
    pause_at_step: int | None = None,
    description: str = "training",
) -> bool:
    """The training loop from where ``run.state`` stands: steps, the EMA, checkpoints every
    ``--checkpointing_steps`` into ``checkpoint_dir``, validation of the EMA weights at each epoch's end, the
    best-validation EMA snapshot, early stopping. Returns True when training is over (the last step, or early
    stopping); False when it paused after step ``pause_at_step`` (a trial start's end), before any end-of-epoch
    work, so that continuing from a checkpoint written now gives the same run as never pausing."""
    args, state = setup.args, run.state
    if state.epochs_without_improvement >= args.early_stopping_patience:  # a checkpoint written as early stopping hit
        return True
    progress = tqdm(
        total=setup.max_train_steps,
        initial=state.completed_steps,
        disable=not setup.accelerator.is_local_main_process,
        desc=description,
    )
    try:
        for epoch in range(state.epoch, setup.num_epochs):
            end = train_one_epoch(setup, run, epoch, progress, checkpoint_dir, pause_at_step)
            if end is EpochEnd.PAUSED:
                return False
            finish_epoch(setup, run, epoch, last_step=end is EpochEnd.LAST_STEP)
            if end is EpochEnd.LAST_STEP:
                break
            if state.epochs_without_improvement >= args.early_stopping_patience:
                logger.info("early stopping: no validation improvement for %d epochs", state.epochs_without_improvement)
                break
    finally:
        progress.close()
    return True


def train_one_epoch(
    setup: TrainingSetup, run: TrainingRun, epoch: int, progress: tqdm, checkpoint_dir: Path, pause_at_step: int | None
) -> EpochEnd:
    """The optimizer steps of ``epoch`` from where ``run.state`` stands (a resumed epoch skips the batches it has
    already consumed)."""
    args, accelerator, state = setup.args, setup.accelerator, run.state
    run.model.train()
    run.train_loader.set_epoch(epoch)
    if state.completed_steps >= setup.max_train_steps:  # resumed from the last step's checkpoint: no step more
        return EpochEnd.LAST_STEP
    batches = run.train_loader
    if epoch == state.epoch and state.step_in_epoch > 0:
        batches = accelerator.skip_first_batches(
            run.train_loader, state.step_in_epoch * args.gradient_accumulation_steps
        )
    running_loss = 0.0
    for batch in batches:
        running_loss += accumulate_gradients(setup, run, batch, epoch)
        if not accelerator.sync_gradients:
            continue
        finish_optimizer_step(setup, run, epoch, running_loss, progress, checkpoint_dir)
        running_loss = 0.0
        if state.completed_steps >= setup.max_train_steps:
            return EpochEnd.LAST_STEP
        if pause_at_step is not None and state.completed_steps >= pause_at_step:
            return EpochEnd.PAUSED
    return EpochEnd.ALL_BATCHES


def accumulate_gradients(setup: TrainingSetup, run: TrainingRun, batch: dict, epoch: int) -> float:
    """Forward and backward of one batch under gradient accumulation (the optimizer steps when Accelerate syncs the
    gradients); returns the batch's share of the step's loss. ``TrainingError`` before the update when the loss is
    not finite on any process."""
    args, accelerator, state = setup.args, setup.accelerator, run.state
    with accelerator.accumulate(run.model):
        with accelerator.autocast():
            loss = run.model(**model_inputs(batch)).loss
        finite = accelerator.reduce(torch.isfinite(loss.detach()).float(), "min")
        if finite.item() < 1:
            raise TrainingError(
                f"non-finite training loss ({loss.item()}) at step {state.completed_steps + 1} (epoch "
                f"{epoch}); stopped before the update. Last good checkpoint: "
                f"{run.last_checkpoint or 'none saved yet'}"
            )
        accelerator.backward(loss)
        if FLIP_STATE_KEY in batch:
            run.flip_state = batch[FLIP_STATE_KEY]
        if accelerator.sync_gradients:
            accelerator.clip_grad_norm_(run.trainable, args.max_grad_norm)
        run.optimizer.step()
        run.scheduler.step()
        run.optimizer.zero_grad()
    return loss.detach().float().item() / args.gradient_accumulation_steps


def finish_optimizer_step(
    setup: TrainingSetup, run: TrainingRun, epoch: int, step_loss: float, progress: tqdm, checkpoint_dir: Path
) -> None:
    """After an optimizer step: the EMA, the step counters, the log line every ``--logging_steps``, a checkpoint
    every ``--checkpointing_steps`` (``TrainingError`` when the weights went NaN/inf)."""
    args, accelerator, state = setup.args, setup.accelerator, run.state
    run.ema.update_parameters(accelerator.unwrap_model(run.model))
    state.completed_steps += 1
    state.step_in_epoch += 1
    fault_point(f"step {state.completed_steps}")
    progress.update(1)
    if state.completed_steps % args.logging_steps == 0 or state.completed_steps == 1:
        lr = run.scheduler.get_last_lr()[0]
        progress.set_postfix(loss=f"{step_loss:.4f}", lr=f"{lr:.2e}")
        logger.info("step %d epoch %d loss %.5f lr %.3e", state.completed_steps, epoch, step_loss, lr)
        accelerator.log({"train/loss": step_loss, "train/lr": lr}, step=state.completed_steps)
    if args.checkpointing_steps and state.completed_steps % args.checkpointing_steps == 0:
        try:
            run.save(accelerator, checkpoint_dir)
        except CheckpointError as err:  # the weights went NaN/inf: that checkpoint would not be good
            raise TrainingError(f"{err}. Last good checkpoint: {run.last_checkpoint or 'none saved yet'}") from err


def finish_epoch(setup: TrainingSetup, run: TrainingRun, epoch: int, last_step: bool) -> None:
    """End of an epoch (or of training): validation with the EMA weights, the history, the best-validation EMA
    snapshot and the early-stopping count; the epoch counts as done unless training ended inside it."""
    args, accelerator, state = setup.args, setup.accelerator, run.state
    epoch_finished = not last_step or state.step_in_epoch >= setup.steps_per_epoch
    val_loss, val_grounding = (
        validation_loss(run.ema.module, run.validation_loader, accelerator, args.seed)
        if len(setup.validation_set)
        else (None, None)
    )
    record = {"epoch": epoch, "step": state.completed_steps, "validation_loss": val_loss}
    if val_grounding is not None:
        record["validation_grounding_loss"] = val_grounding
        logger.info("epoch %d validation grounding loss (EMA) %.5f", epoch, val_grounding)
    state.history.append(record)
    logger.info("epoch %d step %d validation loss (EMA) %s", epoch, state.completed_steps, val_loss)
    if val_loss is not None:
        accelerator.log({"validation/loss": val_loss}, step=state.completed_steps)
        if state.best_validation_loss is None or val_loss < state.best_validation_loss:
            state.best_validation_loss, state.epochs_without_improvement = val_loss, 0
            state.best_step, run.best_ema_state = state.completed_steps, cpu_state_dict(run.ema.module)
        else:
            state.epochs_without_improvement += 1
    if epoch_finished:
        state.epoch, state.step_in_epoch = epoch + 1, 0


def build_start_model(args: argparse.Namespace, seed: int, encoder_state: dict) -> GazeFlowModel:
    """The model of trial start ``seed``: initialised under ``seed``, with the run's one encoder draw."""
    set_seed(seed)
    model = build_model(args)
    model.video_encoder.load_state_dict(encoder_state)
    return model


def trial_score_name(record: dict) -> str:
    """Which loss :func:`trial_score` reads for ``record``."""
    return "validation grounding loss" if record.get("validation_grounding_loss") is not None else "validation loss"


def trial_score(record: dict) -> float:
    """What chooses among trial starts (lower is better): the validation grounding loss (EMA) where the model has the
    grounding head (whether c_v has found the target; a run that stalls shows there first, docs/results.md), else the
    validation loss of ``config.objective``."""
    grounding = record.get("validation_grounding_loss")
    return grounding if grounding is not None else record["validation_loss"]


def run_trial_starts(
    setup: TrainingSetup, first_model: torch.nn.Module, encoder_state: dict, output_dir: Path
) -> tuple[dict, list[dict]]:
    """``--trial_starts N``: train up to N starts for ``--trial_steps`` steps each on the run's full schedule, the
    start ``t`` seeded with ``--seed`` + t (initialisation outside the encoder, data order, flips, noise) and sharing
    the encoder (``encoder_state``, the draw of ``--seed``, so one feature cache serves all). A further start is
    trained only while every start so far ended on the grounding plateau (:func:`left_plateau`): a start that has
    left it is continued at once, so a run that does not stall costs no more steps than a plain run. Each start
    ends with a checkpoint in ``<output_dir>/trials/seed_<seed>/`` and its validation losses (EMA); the folders of
    the starts not chosen are removed (a checkpoint of the paper's model is gigabytes). Start 0 is the plain run of
    ``--seed`` (``first_model`` as built for it). Returns the chosen start's record (lowest :func:`trial_score`)
    and every start's."""
    args, accelerator = setup.args, setup.accelerator
    if not len(setup.validation_set):
        raise ValueError(
            f"--trial_starts {args.trial_starts}: no validation windows to choose a start by (set "
            f"--validation_fraction above 0, or use --trial_starts 1)"
        )
    pause_at = min(args.trial_steps, setup.max_train_steps)
    records: list[dict] = []
    for index in range(args.trial_starts):
        seed = args.seed + index
        model = first_model if index == 0 else build_start_model(args, seed, encoder_state)
        trial_dir = output_dir / "trials" / f"seed_{seed}"
        if accelerator.is_main_process and trial_dir.exists():
            shutil.rmtree(trial_dir)  # a previous invocation's start: never mixed into this one's
        if accelerator.is_main_process:
            trial_dir.mkdir(parents=True)
        begin_lineage(trial_dir, None, accelerator)
        run = prepare_run(setup, model, seed)
        logger.info("trial start %d of %d (seed %d): %d steps", index + 1, args.trial_starts, seed, pause_at)
        finished = train_epochs(
            setup, run, trial_dir, pause_at_step=pause_at, description=f"trial start {index + 1}/{args.trial_starts}"
        )
        checkpoint = run.save(accelerator, trial_dir)  # before the validation below: a loader's start draws a seed
        val_loss, val_grounding = validation_loss(run.ema.module, run.validation_loader, accelerator, args.seed)
        record = {
            "seed": seed,
            "step": run.state.completed_steps,
            "validation_loss": val_loss,
            "validation_grounding_loss": val_grounding,
            "finished": finished,
            "checkpoint": str(checkpoint),
        }
        if setup.grounding_reference is not None and val_grounding is not None:
            record["grounding_progress"] = setup.grounding_reference.progress(val_grounding)
        records.append(record)
        logger.info(
            "trial start %d (seed %d) at step %d: validation loss (EMA) %.5f%s",
            index + 1,
            seed,
            record["step"],
            val_loss,
            f", grounding {val_grounding:.5f}" if val_grounding is not None else "",
        )
        del run, model
        accelerator.free_memory()
        if left_plateau(record):
            if index + 1 < args.trial_starts:
                logger.info(
                    "trial start %d has left the grounding plateau (%.0f%% of the way): continuing it, no "
                    "further start",
                    index + 1,
                    100 * record["grounding_progress"],
                )
            break
    chosen = min(records, key=trial_score)
    logger.info(
        "trial starts: continuing seed %d's (the lowest %s, %.5f)",
        chosen["seed"],
        trial_score_name(chosen),
        trial_score(chosen),
    )
    note_trial_starts_on_plateau(records)
    if accelerator.is_main_process:  # the starts not continued: their losses stay in the log, card and state
        for record in records:
            if record is not chosen:
                shutil.rmtree(Path(record["checkpoint"]).parent, ignore_errors=True)
    accelerator.wait_for_everyone()
    return chosen, records


def left_plateau(record: dict) -> bool:
    """Whether a trial start ended past the grounding plateau: its validation grounding loss at least
    ``PLATEAU_PROGRESS`` of the way from the centre-bias level to the floor (False where that cannot be told)."""
    progress = record.get("grounding_progress")
    return progress is not None and progress >= PLATEAU_PROGRESS


def note_trial_starts_on_plateau(records: list[dict]) -> None:
    """A warning when no trial start's validation grounding loss has left its plateau yet (``grounding_progress``
    below ``PLATEAU_PROGRESS``): the continued run may stall; the check at the end of training says whether it did
    (a start on the plateau at its end still leaves it later in some runs)."""
    progress = [record.get("grounding_progress") for record in records]
    if not progress or any(value is None or value >= PLATEAU_PROGRESS for value in progress):
        return
    logger.warning(
        "no trial start's grounding has left its plateau yet (progress %s of the way from the centre-bias "
        "level to the floor, against %.0f%% for a run that left it): the continued run may stall; the "
        "check at the end of training will say",
        ", ".join(f"{100 * value:.0f}%" for value in progress),
        100 * PLATEAU_PROGRESS,
    )


def check_grounding_plateau(setup: TrainingSetup, run: TrainingRun) -> None:
    """After training: whether the run's grounding left its plateau (``training.grounding_plateau``), kept in the
    trainer state (and so the model card) and logged, as a WARNING naming what to do when it did not."""
    verdict = plateau_verdict(run.state.history, setup.grounding_reference)
    run.state.grounding_plateau = verdict
    if verdict is not None and not verdict["left_plateau"]:
        logger.warning(describe_verdict(verdict))
    else:
        logger.info("grounding plateau check: %s", describe_verdict(verdict))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    output_dir = Path(args.output_dir)
    mixed_precision = args.mixed_precision or ("bf16" if torch.cuda.is_available() else "no")
    accelerator = start_accelerator(args, output_dir, mixed_precision)
    resume_from = checkpoint_to_resume(args, output_dir, accelerator)
    set_seed(args.seed)  # the same initial weights on every process
    model = build_model(args)
    # the processor saved with --model_name_or_path's model (its preprocessor_config.json), else the default
    processor = load_video_processor(args.model_name_or_path, model.config)
    setup = build_setup(args, accelerator, model, processor, output_dir, mixed_precision)
    started = time.time()
    run, chosen_trial = start_run(setup, model, resume_from, output_dir)
    if accelerator.is_main_process and args.report_to != "none":
        accelerator.init_trackers(
            "gazeflow", config={k: v for k, v in vars(args).items() if isinstance(v, (int, float, str, bool))}
        )
    logger.info(
        "training %d steps (%d epochs of %d steps), effective batch %d, %s, %d processes on %s, %.2fM trainable",
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
    check_grounding_plateau(setup, run)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        save_final_model(setup, run, processor, output_dir, training_record(setup, run, argv, started))
    leave_process_group(accelerator)  # after the main process has saved: every process tears down together
    return 0


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


def checkpoint_to_resume(args: argparse.Namespace, output_dir: Path, accelerator: Accelerator) -> Path | None:
    """The verified checkpoint of ``--resume_from_checkpoint`` (None without it)."""
    try:
        return (
            select_checkpoint(args.resume_from_checkpoint, output_dir, accelerator)
            if args.resume_from_checkpoint
            else None
        )
    except FileNotFoundError as err:
        if args.resume_from_checkpoint == "latest" and (output_dir / "trials").is_dir():
            raise FileNotFoundError(
                f"{err}; {output_dir / 'trials'} holds the trial starts of a run stopped before "
                f"it continued one: rerun the command without --resume_from_checkpoint (the trial "
                f"starts begin again)"
            ) from err
        raise


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


def start_run(
    setup: TrainingSetup, model: GazeFlowModel, resume_from: Path | None, output_dir: Path
) -> tuple[TrainingRun, dict | None]:
    """The run to train: after ``--trial_starts`` the chosen start's continuation (and its record), else the run of
    ``--seed`` or of the checkpoint resumed from; its lineage begun."""
    args, accelerator = setup.args, setup.accelerator
    trials: list[dict] = []
    chosen_trial: dict | None = None
    if args.trial_starts > 1 and resume_from is None:
        encoder_state = cpu_state_dict(model.video_encoder)
        chosen_trial, trials = run_trial_starts(setup, model, encoder_state, output_dir)
        resume_from, run_seed = Path(chosen_trial["checkpoint"]), chosen_trial["seed"]
        # its weights, optimizer and random state come from the chosen start's checkpoint
        model = build_start_model(args, run_seed, encoder_state)
    else:
        if args.trial_starts > 1:
            logger.info("--trial_starts %d: resuming, so no new trial starts", args.trial_starts)
        resumed_state = TrainerState.load(resume_from) if resume_from is not None else None
        run_seed = resumed_state.seed if resumed_state is not None and resumed_state.seed is not None else args.seed
        if resume_from is not None:
            if run_seed != args.seed:
                logger.info("resuming the run of seed %d (its checkpoint's data order and random state)", run_seed)
            set_seed(run_seed)  # the data order of the checkpoint's run; its random state is restored below
    run = prepare_run(setup, model, run_seed)
    if resume_from is not None:
        run.restore(accelerator, resume_from)
        logger.info("resumed from %s at step %d (epoch %d)", resume_from, run.state.completed_steps, run.state.epoch)
    if trials:
        run.state.trial_starts = trials
    begin_lineage(output_dir, resume_from, accelerator)
    return run, chosen_trial


def effective_batch(setup: TrainingSetup) -> int:
    """Clips per optimizer step over every process."""
    args = setup.args
    return args.per_device_train_batch_size * setup.accelerator.num_processes * args.gradient_accumulation_steps


def check_replicas_agree(accelerator: Accelerator, run: TrainingRun) -> None:
    """``TrainingError`` when the processes' weights differ (a data-parallel run whose replicas diverged)."""
    checksum = parameter_checksum(accelerator.unwrap_model(run.model))
    checksums = accelerator.gather(torch.tensor([checksum], device=accelerator.device, dtype=torch.float64))
    print(f"[rank {accelerator.process_index}] parameter checksum {checksum:.10e}", flush=True)
    if not torch.allclose(checksums, checksums[0].expand_as(checksums), rtol=0, atol=1e-9):
        raise TrainingError(f"replicas diverged: parameter checksums {checksums.tolist()}")


def training_record(setup: TrainingSetup, run: TrainingRun, argv: list[str] | None, started: float) -> dict:
    """The model card's training section, line by line: command, data, schedule, optimizer, the trial starts and
    which weights were saved."""
    args, accelerator, state = setup.args, setup.accelerator, run.state
    training = {
        "command": "python examples/train.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "dataset": f"{args.dataset_name} ({args.dataset_config or 'default config'}), data_dir {args.data_dir}",
        "windows": f"{len(setup.train_set)} train / {len(setup.validation_set)} validation",
        "steps": f"{state.completed_steps} optimizer steps, {state.epoch} epochs",
        "optimizer": f"AdamW (0.9, 0.999), lr {args.learning_rate} cosine to {args.min_learning_rate}, "
        f"weight decay {args.weight_decay}, grad clip {args.max_grad_norm}",
        "batch": f"effective {effective_batch(setup)} ({args.per_device_train_batch_size} x "
        f"{accelerator.num_processes} processes x {args.gradient_accumulation_steps} accumulation)",
        "precision": setup.mixed_precision,
        "recipe": args.recipe or "none (every argument as given)",
        "EMA": f"{args.ema_decay} (this model holds the EMA weights)",
        "feature cache": bool(args.cache_features),
        "wall time": f"{time.time() - started:.0f} s",
    }
    if state.trial_starts:
        training["trial starts"] = describe_trial_starts(state.trial_starts, state.seed)
    training["best validation loss (EMA)"] = state.best_validation_loss
    best_record = next((r for r in state.history if r["step"] == state.best_step), None)
    training["saved weights"] = (
        f"the EMA weights at step {state.best_step} (epoch {best_record['epoch'] if best_record else '?'}), the "
        f"best validation loss: {state.best_validation_loss:.5f}"
        if state.best_step is not None
        else f"the EMA weights of the last step ({state.completed_steps}; no validation split to choose by)"
    )
    training["validation loss per epoch (EMA)"] = json.dumps([r["validation_loss"] for r in state.history])
    if setup.grounding_reference is not None:
        training["grounding plateau check"] = describe_verdict(state.grounding_plateau)
    return training


def save_final_model(
    setup: TrainingSetup, run: TrainingRun, processor: GazeFlowVideoProcessor, output_dir: Path, training: dict
) -> None:
    """The model folder in ``output_dir``: the best validation loss's EMA weights (the last step's without a
    validation split), the processor, the card and the trainer state, written whole and then moved in file by
    file (``publish_folder``, ``trainer_state.json`` last)."""
    args, state = setup.args, run.state
    final = run.ema.module
    if run.best_ema_state is not None:  # the saved model is the best validation loss's EMA, not the last step's
        final.load_state_dict(run.best_ema_state)
    if run.frozen_cast is not None:  # the frozen weights as loaded, in float32
        run.frozen_cast.restore(final)
    staging = output_dir / ".tmp_final"
    if staging.exists():
        shutil.rmtree(staging)
    save_model_folder(
        final,
        staging,
        processor=processor,
        title=f"GazeFlow trained on {args.dataset_name}",
        description=f"A GazeFlow model trained by `examples/train.py` on {args.dataset_name}; it holds the EMA "
        f"weights ({args.ema_decay}) "
        + (
            f"of step {state.best_step}, the best validation loss ({state.best_validation_loss:.5f})."
            if state.best_step is not None
            else "of the last step."
        ),
        training="\n".join(f"- {key}: {value}" for key, value in training.items()),
        limitations=(
            "**Warning: " + describe_verdict(state.grounding_plateau) + ".** "
            if state.grounding_plateau is not None and not state.grounding_plateau["left_plateau"]
            else ""
        )
        + "Evaluate it with `examples/evaluate.py` on the split you care about before relying on it.",
        repo=str(output_dir),
    )
    state.save(staging)
    publish_folder(staging, output_dir, last=TRAINER_STATE)
    logger.info("saved the EMA model of step %s to %s", state.best_step or state.completed_steps, output_dir)


def describe_trial_starts(records: list[dict], continued_seed: int | None) -> str:
    """The model card's line on the trial starts: each start's seed and score, and which one was continued."""
    starts = ", ".join(f"seed {r['seed']} {trial_score(r):.5f} (step {r['step']})" for r in records)
    if len(records) == 1:
        first, progress = records[0], records[0].get("grounding_progress")
        share = f" ({100 * progress:.0f}% of the way)" if progress is not None else ""
        return (
            f"one start: it had left the grounding plateau at step {first['step']}{share}, so no further start; "
            f"{trial_score_name(first)} (EMA) {trial_score(first):.5f}; continued: seed {continued_seed}'s"
        )
    return (
        f"{len(records)} starts sharing one encoder draw; {trial_score_name(records[0])} (EMA) at their end: "
        f"{starts}; continued: seed {continued_seed}'s"
    )


def cli(argv: list[str] | None = None) -> int:
    """``main`` with its errors as ``train.py: error: <what>`` and exit status 1 instead of a traceback."""
    try:
        return main(argv)
    except (ValueError, FileNotFoundError, TrainingError) as err:
        print(f"train.py: error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(cli())
