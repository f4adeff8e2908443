"""One training run of ``examples/train.py``: what every run of an invocation shares (:class:`TrainingSetup`), one
initialisation's prepared objects and where its loop stands (:class:`TrainingRun`, with its checkpoint save and
restore), and how they are built (:func:`prepare_run`: loaders, AdamW, the cosine schedule, the EMA, the speed
settings, all prepared by Accelerate).

A plain run has one :class:`TrainingRun`; ``--trial_starts N`` builds one per trial start, then one for the chosen
start's continuation (:mod:`.trial_starts`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
from accelerate import Accelerator
from torch.optim.swa_utils import AveragedModel
from torch.utils.data import DataLoader
from transformers import get_cosine_with_min_lr_schedule_with_warmup

from .checkpointing import load_best_ema_state, load_checkpoint, save_checkpoint
from .device_speed import FrozenWeightCast, adamw, compile_encoder_layers, enable_gradient_checkpointing, loader_options
from .ema import exponential_moving_average
from .grounding_plateau import GroundingReference
from .trainer_state import TrainerState

RUN_LOGGER = "train"
"""The logger of a training run's log (what ``examples/train.py`` prints): one name whichever module writes the
line, so that the log reads, and filters, as one stream."""


class TrainingError(RuntimeError):
    """A condition that stops training with a message (non-finite loss, bad arguments found late)."""


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
        keep_last_weights: bool = False,
    ) -> None:
        self.model, self.optimizer, self.scheduler, self.ema = model, optimizer, scheduler, ema
        self.train_loader, self.validation_loader, self.trainable = train_loader, validation_loader, trainable
        self.state = TrainerState(seed=seed)
        self.best_ema_state: dict | None = None  # the EMA weights of the best validation loss so far (best_step)
        self.last_checkpoint: Path | None = None
        self.flip_generator = flip_generator  # the training collator's (flip augmentation in this process)
        self.flip_state: torch.Tensor | None = None  # flip_generator's state after the last batch consumed
        self.frozen_cast = frozen_cast  # the frozen weights cast to bf16 (their float32 originals, for saving)
        self.keep_last_weights = keep_last_weights  # --final_weights last: the last step's EMA, not the best's

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

    @property
    def keeps_best_weights(self) -> bool:
        """Whether :meth:`final_model` holds the best validation loss's EMA weights (there is a best, and no
        ``--final_weights last``) rather than the last step's."""
        return self.best_ema_state is not None and not self.keep_last_weights

    @property
    def final_step(self) -> int:
        """The step whose EMA weights :meth:`final_model` holds."""
        return self.state.best_step if self.keeps_best_weights else self.state.completed_steps

    def final_model(self) -> torch.nn.Module:
        """The weights the model folder gets: the EMA weights of the best validation loss (the last step's without a
        validation split, or with ``--final_weights last``), the frozen weights as loaded, in float32; loaded into
        the EMA's model and returned."""
        final = self.ema.module
        if self.keeps_best_weights:
            final.load_state_dict(self.best_ema_state)
        if self.frozen_cast is not None:
            self.frozen_cast.restore(final)
        return final

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
    ema = exponential_moving_average(accelerator.unwrap_model(model), args.ema_decay)
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
        keep_last_weights=args.final_weights == "last",
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


def effective_batch(setup: TrainingSetup) -> int:
    """Clips per optimizer step over every process."""
    args = setup.args
    return args.per_device_train_batch_size * setup.accelerator.num_processes * args.gradient_accumulation_steps


__all__ = [
    "RUN_LOGGER",
    "TrainingError",
    "TrainingRun",
    "TrainingSetup",
    "apply_speed_settings",
    "effective_batch",
    "prepare_run",
]
