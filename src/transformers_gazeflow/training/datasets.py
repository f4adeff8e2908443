"""The training and validation splits of a gaze dataset, for ``examples/train.py``: its windows, and its clips as the
evaluation protocol reads them (the check after training)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

DATASET_NAMES = ("egtea", "ego4d", "egoexo4d", "synthetic")


def load_training_splits(
    dataset_name: str,
    data_dir: str | os.PathLike | None,
    dataset_config: str | None = None,
    validation_fraction: float = 0.05,
    /,
    **builder_options: Any,
):
    """``(train, validation)`` windows (all windows covering each clip) of a gaze dataset.

    The builder's own ``validation`` split is used where it has one (synthetic, Ego-Exo4D); otherwise (EGTEA Gaze+,
    Ego4D) ``validation_fraction`` of the training *clips* is held out, chosen by a hash of the clip id, so the
    windows of one clip never fall on both sides and the choice does not depend on order or seed. The first four
    are positional only: a builder option of the same name (the synthetic draw's ``validation_fraction``) goes in
    ``builder_options``.
    """
    return _train_and_validation(
        dataset_name, data_dir, dataset_config, validation_fraction, windows="all", **builder_options
    )


def load_protocol_clips(
    dataset_name: str,
    data_dir: str | os.PathLike | None,
    dataset_config: str | None = None,
    validation_fraction: float = 0.05,
    /,
    **builder_options: Any,
):
    """``(train, validation)`` clips as the evaluation protocol reads a split: one example per clip, its first
    ``PROTOCOL_WINDOW`` frames (``examples/evaluate.py``'s ``load_split``), held out as :func:`load_training_splits`
    holds them out (with the same ``builder_options``), so the validation clips are the training run's validation
    windows' clips."""
    from ..metrics.protocol_records import PROTOCOL_WINDOW

    return _train_and_validation(
        dataset_name,
        data_dir,
        dataset_config,
        validation_fraction,
        **builder_options,
        windows="first",
        window_frames=PROTOCOL_WINDOW,
    )


def _train_and_validation(
    dataset_name: str,
    data_dir: str | os.PathLike | None,
    dataset_config: str | None,
    validation_fraction: float,
    /,
    **builder_options: Any,
):
    """The training and validation splits of ``builder_options``' examples (see :func:`load_training_splits`)."""
    from ..data.loading import load_gaze_dataset

    if dataset_name not in DATASET_NAMES:
        raise ValueError(f"--dataset_name must be one of {DATASET_NAMES}, got {dataset_name!r}")
    if data_dir is None:
        raise ValueError(
            f"--data_dir is required: the folder of the raw {dataset_name} download (see its dataset "
            f"card under datasets_scripts/), or for 'synthetic' the folder to render the clips into"
        )
    if dataset_name != "synthetic" and not Path(data_dir).is_dir():
        raise FileNotFoundError(
            f"--data_dir {data_dir} does not exist (expected the raw {dataset_name} download; "
            f"see datasets_scripts/{dataset_name}_gaze/README.md for the layout)"
        )
    if not 0.0 <= validation_fraction < 1.0:
        raise ValueError(f"--validation_fraction must be in [0, 1), got {validation_fraction}")
    splits = load_gaze_dataset(dataset_name, data_dir=data_dir, config_name=dataset_config, **builder_options)
    if "validation" in splits:
        return splits["train"], splits["validation"]
    train = splits["train"]
    held_out = {clip for clip in set(train["clip_id"]) if _unit_hash(clip) < validation_fraction}
    validation = train.filter(lambda example: example["clip_id"] in held_out)
    train = train.filter(lambda example: example["clip_id"] not in held_out)
    return train, validation


def _unit_hash(text: str) -> float:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF


__all__ = ["load_training_splits", "load_protocol_clips", "DATASET_NAMES"]
