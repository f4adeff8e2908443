"""Training steps per second with and without the frozen-feature cache, measured side by side in one run.

Without the cache every step decodes its windows, processes the frames and runs the frozen encoder; with it the
step reads the encoder's tokens from safetensors shards and trains the velocity network only. The cache is built
once (its time is printed too). Data: the synthetic dataset (rendered into ``--data_dir`` if empty).

    python benchmarks/bench_feature_cache.py                                  # small CPU setting
    python benchmarks/bench_feature_cache.py --paper-encoder --device cuda    # V-JEPA 2 ViT-L, 64-frame windows
"""

from __future__ import annotations

import argparse
import itertools
import os
import tempfile
import time
from pathlib import Path

import torch
from results import add_results_argument, config_model, write_section
from torch.utils.data import DataLoader

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
from transformers_gazeflow.data.collator import GazeFlowDataCollator
from transformers_gazeflow.data.processing import GazeFlowVideoProcessor
from transformers_gazeflow.training.datasets import load_training_splits
from transformers_gazeflow.training.feature_cache import CachedFeatureCollator, FeatureCache, cache_fingerprint


def model_config(paper_encoder: bool = False, encoder_layers: int = 4) -> GazeFlowConfig:
    """The model trained: the paper's geometry (``--paper-encoder``), else a small V-JEPA-2-style encoder of
    ``encoder_layers`` layers (width 64, 64 px input) under a 4-block velocity network; random weights."""
    if paper_encoder:
        return GazeFlowConfig(use_lora=False)
    return GazeFlowConfig.tiny(
        encoder_config={
            "crop_size": 64,
            "patch_size": 8,
            "hidden_size": 64,
            "num_attention_heads": 4,
            "num_hidden_layers": encoder_layers,
            "frames_per_clip": 16,
        },
        hidden_size=128,
        num_attention_heads=4,
        intermediate_size=512,
        num_hidden_layers=4,
        num_frames=16,
        window_stride=8,
        use_lora=False,
    )


def build_model(args) -> GazeFlowModel:
    torch.manual_seed(0)
    return GazeFlowModel(model_config(args.paper_encoder, args.encoder_layers))


def train_step(model, batch, optimizer, device) -> None:
    inputs = {
        k: batch[k].to(device)
        for k in ("pixel_values_videos", "encoder_hidden_states", "gaze", "valid_mask")
        if k in batch
    }
    model(**inputs).loss.backward()
    optimizer.step()
    optimizer.zero_grad()


def steps_per_second(model, loader, optimizer, steps: int, device) -> float:
    """Training steps per second over ``steps`` steps (data loading included), after one warm-up step."""
    model.train()
    batches = itertools.cycle(loader)
    train_step(model, next(batches), optimizer, device)
    start = time.perf_counter()
    for _ in range(steps):
        train_step(model, next(batches), optimizer, device)
    return steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_dir", default=None, help="synthetic data folder (default: a temporary one)")
    parser.add_argument("--dataset_config", default="tiny")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--paper-encoder", action="store_true", help="V-JEPA 2 ViT-L and 64-frame windows")
    parser.add_argument("--encoder-layers", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--steps", type=int, default=20)
    add_results_argument(parser)
    args = parser.parse_args()
    device = torch.device(args.device)
    data_dir = args.data_dir or tempfile.mkdtemp(prefix="gazeflow_synthetic_")
    model = build_model(args).to(device)
    config = model.config
    processor = GazeFlowVideoProcessor(size=config.image_size)
    train, _ = load_training_splits(
        "synthetic", data_dir, args.dataset_config, window_frames=config.num_frames, window_stride=config.window_stride
    )
    print(
        f"device {device}; {len(train)} training windows of {config.num_frames} frames; encoder "
        f"{config.encoder_config.num_hidden_layers} layers, hidden {config.encoder_config.hidden_size}, "
        f"{config.image_size}px; batch {args.batch_size}; {args.steps} timed steps each"
    )
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=1e-4)

    plain = DataLoader(
        train,
        batch_size=args.batch_size,
        shuffle=True,
        collate_fn=GazeFlowDataCollator(processor, num_frames=config.num_frames),
    )
    with tempfile.TemporaryDirectory() as cache_dir:
        cache = FeatureCache(Path(cache_dir), cache_fingerprint(model, processor))
        start = time.perf_counter()
        model.eval()
        cache.build(
            model, [train], GazeFlowDataCollator(processor, num_frames=config.num_frames), batch_size=args.batch_size
        )
        build_seconds = time.perf_counter() - start
        cached = DataLoader(
            train,
            batch_size=args.batch_size,
            shuffle=True,
            collate_fn=CachedFeatureCollator(cache, processor, num_frames=config.num_frames),
        )
        rate_plain = steps_per_second(model, plain, optimizer, args.steps, device)
        rate_cached = steps_per_second(model, cached, optimizer, args.steps, device)
        size = sum(f.stat().st_size for f in Path(cache_dir).glob("*.safetensors")) / 2**20
    print(f"cache build (once): {build_seconds:.1f} s for {len(train)} windows, {size:.1f} MiB on disk")
    print(f"steps/s without cache {rate_plain:.2f}, with cache {rate_cached:.2f}: {rate_cached / rate_plain:.1f}x")
    figures = {
        "windows": len(train),
        "batch_size": args.batch_size,
        "steps": args.steps,
        "cache_build_s": build_seconds,
        "cache_mib": size,
        "steps_per_s": {"without_cache": rate_plain, "with_cache": rate_cached},
    }
    measured = config_model(
        "the trained model, random weights",
        config,
        "bench_feature_cache:model_config",
        paper_encoder=args.paper_encoder,
        encoder_layers=args.encoder_layers,
    )
    section = "paper-encoder" if args.paper_encoder else f"encoder-{args.encoder_layers}-layers"
    write_section(args.results_dir, "bench_feature_cache", section, figures, [measured], args.device)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
