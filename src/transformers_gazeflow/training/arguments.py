"""The command line of ``examples/train.py``: its argument groups (every flag with its default and help text), the
``--recipe`` defaults (:mod:`.recipes`) under the command line's values, the range checks, and the
``--config_overrides`` parser. README and docs name these flags; ``train.py --help`` prints them.

The script builds its parser from these pieces (``parse_args``); the training modules read the resulting
``argparse.Namespace`` (``TrainingSetup.args``).
"""

from __future__ import annotations

import argparse
import ast
from collections.abc import Sequence

from ..metrics.baselines import SUCCESS_AAE_RATIO
from .datasets import DATASET_NAMES
from .grounding_plateau import PLATEAU_PROGRESS
from .recipes import RECIPES
from .validation_success import CHECK_SAMPLES, CHECK_STEPS


def recipe_name(argv: list[str] | None) -> str | None:
    """The ``--recipe`` of ``argv`` (or ``sys.argv``), before the full parse; None when absent or unknown (the full
    parse then names the bad choice)."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--recipe", default=None)
    known, _ = pre.parse_known_args(argv)
    return known.recipe if known.recipe in RECIPES else None


def add_data_arguments(data: argparse._ArgumentGroup) -> None:
    data.add_argument("--dataset_name", required=True, choices=DATASET_NAMES, help="the dataset to train on")
    data.add_argument("--data_dir", default=None, help="raw download (egtea/ego4d) or where synthetic clips go")
    data.add_argument(
        "--dataset_config",
        default=None,
        help="builder config: split1..3 (egtea), glc (ego4d), tiny/small/default/large (synthetic)",
    )
    data.add_argument(
        "--dataset_options",
        default=None,
        metavar="KEY=VALUE,...",
        help="builder options over --dataset_config's, as examples/evaluate.py takes them, e.g. split_id=2 "
        "(EGTEA Gaze+) or seed=11,num_clips=1600 (synthetic: clips of another draw); the windows are the "
        "model's (num_frames, window_stride)",
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
    train.add_argument(
        "--final_weights",
        choices=("best", "last"),
        default="best",
        help="the model folder's weights: the EMA of the best validation loss (best) or of the last step (last; the "
        "validation loss scores each frame's velocity, not how the samples move from frame to frame)",
    )
    train.add_argument(
        "--early_stopping_min_steps",
        type=int,
        default=None,
        help="no early stopping before this step (default: the end of the warm-up or a quarter of the run's steps, "
        "whichever is later), so that a run cannot end before it has learned",
    )
    train.add_argument(
        "--validation_success_check",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="after training, predict the validation clips with the saved weights (the evaluation protocol's first "
        f"window of each clip, K={CHECK_SAMPLES}, S={CHECK_STEPS}) and say whether their mean angular error is "
        f"clearly under Center Bias's (at most {SUCCESS_AAE_RATIO:g} of it): kept in trainer_state.json and the "
        "model card beside the grounding plateau check",
    )
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
    if args.early_stopping_min_steps is not None and args.early_stopping_min_steps < 0:
        parser.error(f"--early_stopping_min_steps must be >= 0, got {args.early_stopping_min_steps}")
    if not 0.0 <= args.horizontal_flip_probability <= 1.0:
        parser.error(f"--horizontal_flip_probability must be in [0, 1], got {args.horizontal_flip_probability}")
    if not args.learning_rate > 0:  # the cosine schedule divides by it (min_learning_rate / learning_rate)
        parser.error(f"--learning_rate must be > 0, got {args.learning_rate}")
    if not 0 <= args.min_learning_rate <= args.learning_rate:
        parser.error(f"--min_learning_rate must be in [0, --learning_rate], got {args.min_learning_rate}")
    try:
        args.dataset_options = parse_dataset_options(
            args.dataset_options, WINDOW_OPTIONS, "training reads every window of the model's length"
        )
    except ValueError as error:
        parser.error(str(error))


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


WINDOW_OPTIONS = ("windows", "window_frames", "window_stride")
"""The builder options that choose the windows: a script that sets them itself refuses them in ``--dataset_options``."""


def parse_dataset_options(text: str | None, fixed: Sequence[str] = (), reason: str = "") -> dict:
    """``--dataset_options`` (``'seed=7,num_clips=400'``) as builder keyword arguments; a malformed item, or one of
    the options in ``fixed`` (which the calling script sets itself, for ``reason``), is a ``ValueError`` naming the
    option."""
    try:
        options = parse_config_overrides(text)
    except ValueError as error:
        raise ValueError(str(error).replace("--config_overrides", "--dataset_options")) from None
    refused = sorted(set(options) & set(fixed))
    if refused:
        raise ValueError(f"--dataset_options cannot set {', '.join(refused)}: {reason}")
    return options


__all__ = [
    "WINDOW_OPTIONS",
    "add_data_arguments",
    "add_device_speed_arguments",
    "add_model_arguments",
    "add_training_arguments",
    "check_arguments",
    "parse_config_overrides",
    "parse_dataset_options",
    "parse_with_recipe",
    "recipe_name",
]
