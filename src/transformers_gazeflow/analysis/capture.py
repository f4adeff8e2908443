"""What the analyses read off a frozen GazeFlow, one example (a window of one clip) at a time.

* :func:`clip_task_banks`: the task-token bank c_task = [p; q_1..q_M] (paper Eq. task_bank) of each example, as a
  :class:`~transformers_gazeflow.analysis.probing.TaskBankSet` for the probe (Section 4.3).
* :func:`clip_attentions`: every velocity-network block's gaze self-attention ``[L, K, H, W, W]`` and per-frame
  visual cross-attention ``[L, K, H, W, N]`` at one flow time s (Section 4.6, Appendix A). The network is called
  at x_s = (1 - (1 - sigma_min) s) x_0 + s g, the OT interpolant of training (Appendix E.4, the scheduler's
  ``add_noise``) between K seeded noise draws x_0 and the recorded gaze g (invalid frames at the centre, as the
  loss does), without self-conditioning. Weights need ``attn_implementation="eager"``
  (:func:`use_eager_attention`).

Examples are unified-schema dicts (``data/loading.py``); each is padded to the model's window ``W =
config.num_frames`` by the collator (its ``num_frames`` real frames first).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..data.collator import GazeFlowDataCollator
from ..data.processing import GazeFlowVideoProcessor
from ..models.gazeflow.configuration_gazeflow import GazeFlowConfig
from ..models.gazeflow.scheduling_gazeflow import FlowMatchingScheduler
from .probing import LABEL_HEADS, TaskBankSet


def load_analysis_model(model_name_or_path: str | None, device: str | None = None):
    """``(model, processor)`` for the analyses: ``hub.load_model`` (``None``: the bundled default; its errors name
    the folder), eval mode, eager attention, and the processor saved with it."""
    from ..hub.model_folders import default_model_path, load_model, load_video_processor

    model = load_model(model_name_or_path, device=device)
    use_eager_attention(model)
    processor = load_video_processor(model_name_or_path or str(default_model_path()), model.config)
    return model, processor


def load_first_windows(
    dataset_name: str,
    data_dir: str | None,
    split: str,
    config_name: str | None,
    window_frames: int,
    max_clips: int | None = None,
    cache_dir: str | None = None,
    options: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Each clip's first window of at most ``window_frames`` frames (the evaluation protocol's windows) of one split
    of a gaze dataset (``data.loading.load_gaze_dataset``, built under ``cache_dir``: default the datasets cache, with
    the builder ``options`` over the config's), the first ``max_clips`` clips when given."""
    from ..data.loading import load_gaze_dataset

    dataset = load_gaze_dataset(
        dataset_name,
        data_dir=data_dir,
        split=split,
        config_name=config_name,
        cache_dir=cache_dir,
        windows="first",
        window_frames=window_frames,
        window_stride=min(32, window_frames),
        **(options or {}),
    )
    count = len(dataset) if max_clips is None else min(max_clips, len(dataset))
    return [dataset[i] for i in range(count)]


def use_eager_attention(model) -> None:
    """Switch every attention of ``model`` to the eager kernel, the one that forms attention weights."""
    model.set_attn_implementation("eager")


def _device(model) -> torch.device:
    return next(model.parameters()).device


def _check_window(model, examples: Sequence[dict[str, Any]]) -> int:
    window = int(model.config.num_frames)
    for example in examples:
        if int(example["num_frames"]) > window:
            raise ValueError(
                f"example {example['clip_id']} has {example['num_frames']} frames, more than the model's "
                f"window of {window}: load the dataset with window_frames={window}"
            )
    return window


def _labels(examples: Sequence[dict[str, Any]]) -> dict[str, np.ndarray]:
    return {
        head: np.asarray([-1 if e.get(head) is None else int(e[head]) for e in examples], np.int64)
        for head in LABEL_HEADS
    }


@torch.no_grad()
def clip_task_banks(
    model, processor: GazeFlowVideoProcessor, examples: Sequence[dict[str, Any]], batch_size: int = 8
) -> TaskBankSet:
    """The bank of each example (its window's frames through the frozen encoder and the condition encoder):
    ``global_tokens`` p ``[C, d]``, ``query_tokens`` q ``[C, M, d]`` and the examples' labels."""
    if not examples:
        raise ValueError("clip_task_banks needs at least one example")
    if model.config.causal:
        raise ValueError("the task-bank probe reads one bank per clip; the causal variant has one per frame group")
    window = _check_window(model, examples)
    collator = GazeFlowDataCollator(processor, num_frames=window)
    device = _device(model)
    pooled, queries = [], []
    for first in range(0, len(examples), batch_size):
        batch = collator(list(examples[first : first + batch_size]))
        tokens = model.encode_video(batch["pixel_values_videos"].to(device))
        _, encoded = model.encode_condition(tokens, window)
        if encoded.task_tokens is None:
            raise ValueError("the model has no task-token bank (use_task_cross_attention=False): nothing to probe")
        bank = encoded.task_tokens.float().cpu().numpy()
        pooled.append(bank[:, 0])
        queries.append(bank[:, 1:])
    labels = _labels(examples)
    return TaskBankSet([str(e["clip_id"]) for e in examples], np.concatenate(pooled), np.concatenate(queries), labels)


@torch.no_grad()
def clip_encoder_features(
    model, processor: GazeFlowVideoProcessor, examples: Sequence[dict[str, Any]], batch_size: int = 8
) -> TaskBankSet:
    """The probe's control: each example's video-encoder tokens ``[G * N, D]`` mean-pooled to ``[D]`` (before W_proj
    and the task bank), as a :class:`TaskBankSet` with these as ``global_tokens`` and no queries (M = 0)."""
    if not examples:
        raise ValueError("clip_encoder_features needs at least one example")
    window = _check_window(model, examples)
    collator = GazeFlowDataCollator(processor, num_frames=window)
    device = _device(model)
    pooled = []
    for first in range(0, len(examples), batch_size):
        batch = collator(list(examples[first : first + batch_size]))
        pooled.append(model.encode_video(batch["pixel_values_videos"].to(device)).float().mean(dim=1).cpu().numpy())
    features = np.concatenate(pooled)
    labels = _labels(examples)
    return TaskBankSet(
        [str(e["clip_id"]) for e in examples],
        features,
        np.zeros((len(features), 0, features.shape[1]), np.float32),
        labels,
    )


@dataclass
class ClipAttentions:
    """One example's weights at flow time s: ``self_attention [L, K, H, W, W]`` and ``visual_cross_attention
    [L, K, H, W, N]`` (None for a model without that sub-layer), of which the first ``num_frames`` frames are
    real."""

    clip_id: str
    num_frames: int
    self_attention: np.ndarray
    visual_cross_attention: np.ndarray | None


@torch.no_grad()
def clip_attentions(
    model,
    processor: GazeFlowVideoProcessor,
    example: dict[str, Any],
    flow_time: float = 0.5,
    num_samples: int = 4,
    seed: int = 0,
) -> ClipAttentions:
    """Every block's attention weights for one example at flow time ``flow_time`` (module docstring)."""
    if model.config.objective != "flow_matching":
        raise ValueError(
            f"attention at a flow time needs a flow-matching model, this one has objective {model.config.objective!r}"
        )
    if not 0.0 <= flow_time <= 1.0:
        raise ValueError(f"flow_time must be in [0, 1], got {flow_time}")
    if num_samples < 1:
        raise ValueError(f"num_samples must be >= 1, got {num_samples}")
    window = _check_window(model, [example])
    batch = GazeFlowDataCollator(processor, num_frames=window)([example])
    device = _device(model)
    tokens = model.encode_video(batch["pixel_values_videos"].to(device))
    condition = model.build_condition(tokens, window)
    gaze = torch.where(batch["valid_mask"][..., None], batch["gaze"], torch.zeros_like(batch["gaze"])).to(device)
    gaze = gaze[:, None].expand(1, num_samples, window, 2)
    generator = torch.Generator().manual_seed(seed)
    noise = torch.randn((1, num_samples, window, 2), generator=generator).to(device)
    sample = FlowMatchingScheduler(sigma_min=model.config.sigma_min).add_noise(gaze, noise, flow_time)
    output = model.velocity(sample, flow_time, condition, output_attentions=True)
    if any(w is None for w in output.attentions):
        raise ValueError("the model returned no attention weights: load it with attn_implementation='eager'")
    self_attention = np.stack([w.float().cpu().numpy() for w in output.attentions])
    visual = [w for w in output.visual_cross_attentions if w is not None]
    visual_attention = np.stack([w.float().cpu().numpy() for w in visual]) if visual else None
    return ClipAttentions(str(example["clip_id"]), int(example["num_frames"]), self_attention, visual_attention)


def config_number(field: str):
    """An argparse ``type`` for a number the :class:`GazeFlowConfig` field ``field`` accepts: the field's own check
    and message (``argument --noise_scale: must be a number > 0 (1: the paper's x_0), got 0.0``), before any config
    is loaded."""
    checks = GazeFlowConfig.__dataclass_fields__[field].metadata.get("validator", ())

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        for check in checks:
            try:
                check(value)
            except ValueError as err:
                raise argparse.ArgumentTypeError(str(err)) from None
        return value

    parse.__name__ = field
    return parse


def add_model_and_dataset_arguments(parser: argparse.ArgumentParser) -> None:
    """The analysis commands' common options: the model (``--model_name_or_path``) and the dataset it is run on
    (``--dataset_name``, ``--data_dir``, ``--dataset_config``, ``--dataset_options``, ``--cache_dir``), as
    :func:`load_first_windows` reads them."""
    parser.add_argument(
        "--model_name_or_path", default=None, help="a GazeFlow model folder or hub id (default: the bundled model)"
    )
    parser.add_argument("--dataset_name", required=True, help="synthetic, egtea, ego4d or a builder folder")
    parser.add_argument(
        "--data_dir", default=None, help="the dataset's raw folder (synthetic: rendered here if absent)"
    )
    parser.add_argument("--dataset_config", default=None, help="the builder config (synthetic: tiny/small/default)")
    parser.add_argument(
        "--dataset_options",
        default=None,
        metavar="KEY=VALUE,...",
        help="builder options over --dataset_config's, as examples/evaluate.py takes them, e.g. split_id=2 (EGTEA "
        "Gaze+) or seed=7,num_clips=400 (synthetic: clips of another draw)",
    )
    parser.add_argument("--cache_dir", default=None, help="the datasets cache (default: HF_DATASETS_CACHE)")


def dataset_options_of(args: argparse.Namespace) -> dict[str, Any]:
    """``--dataset_options`` as builder keyword arguments; a malformed one, or one that sets the windows, is a
    ``ValueError`` naming the option."""
    from ..training.arguments import WINDOW_OPTIONS, parse_dataset_options

    return parse_dataset_options(
        getattr(args, "dataset_options", None), WINDOW_OPTIONS, "each clip's first window is the analysis'"
    )


def model_from_arguments(args: argparse.Namespace):
    """:func:`load_analysis_model` of ``--model_name_or_path`` on ``--device``; its errors as one ``ValueError``
    naming the option."""
    from ..hub.model_folders import ModelFolderError

    try:
        return load_analysis_model(args.model_name_or_path, args.device)
    except (ModelFolderError, OSError, ValueError) as err:
        raise ValueError(f"--model_name_or_path {args.model_name_or_path or '(bundled)'}: {err}") from err


def windows_from_arguments(
    args: argparse.Namespace, option: str, split: str, window_frames: int, max_clips: int | None
) -> list[dict[str, Any]]:
    """:func:`load_first_windows` of one split named by ``option`` (e.g. ``--split``) with the dataset options of
    :func:`add_model_and_dataset_arguments`; a split that fails to load or has no clips is one ``ValueError``
    naming the option."""
    options = dataset_options_of(args)
    try:
        examples = load_first_windows(
            args.dataset_name,
            args.data_dir,
            split,
            args.dataset_config,
            window_frames,
            max_clips,
            args.cache_dir,
            options,
        )
    except (ValueError, KeyError, FileNotFoundError) as err:
        raise ValueError(
            f"{option} {split} of {args.dataset_name} (--data_dir {args.data_dir}): "
            f"{str(err).splitlines()[0] if str(err) else type(err).__name__}"
        ) from err
    if not examples:
        raise ValueError(f"{option} {split} of {args.dataset_name} has no clips")
    return examples


__all__ = [
    "model_from_arguments",
    "windows_from_arguments",
    "add_model_and_dataset_arguments",
    "config_number",
    "load_analysis_model",
    "load_first_windows",
    "dataset_options_of",
    "use_eager_attention",
    "clip_task_banks",
    "clip_encoder_features",
    "ClipAttentions",
    "clip_attentions",
]
