"""Training throughput at the paper's geometry, model alone and through the real data path, side by side.

The model: ViT-L (24 layers) on 64 frames of 256x256 with LoRA r16 on query/value (the paper's, random weights:
same cost as the checkpoint), bf16 autocast. One step is ``examples/train.py``'s: forward, backward, gradient
clipping, AdamW, the EMA update; ``probe`` variants drop the clipping and the EMA to reproduce the first H100 probe
(AdamW fused, nothing else). A variant is a ``+``-joined list of tokens:

    B<n>      clips per step                     ckpt     gradient checkpointing
    fast      the GPU settings of train.py (transformers_gazeflow.training.device_speed): frozen matrix weights
              cast to bf16 once, fused AdamW
    compile   torch.compile of each encoder layer (regional; train.py --torch_compile)
    graphs    with compile: the compiled layers as CUDA graphs (torch.compile's reduce-overhead mode)
    adamw=    PyTorch's AdamW implementation: fused (one kernel per group), foreach (multi-tensor), loop
    sdpa=     the attention kernel tried first in the whole step: flash, cudnn, efficient, math (the report says
              which of them can run the encoder's attention on this device)
    nodrop    LoRA without dropout (another recipe, not the paper's 0.05: what the adapters' dropout costs)
    probe     the probe's loop (no clipping, no EMA)

The variants are measured side by side in one run, the first the baseline ("x first"); on the CPU each also gets
the aten ops one step dispatches (all, and the compute ones: a stable proxy for what a GPU launches; ``--count-ops
yes`` counts them and the CUDA kernels on a GPU too). ``--preset paper16`` is the paper's model on 16x16 frames:
its step op for op at a CPU's cost.

Then the data path: EGTEA Gaze+ layout clips at 640x480 and 24 fps generated on the fly
(``data.synthetic.egtea_layout``), read by the EGTEA builder (``data.loading``) and the collator
(``data.collator``: decode the 64-frame window, resize to 256x256, normalise) with N DataLoader workers and the
loader settings train.py uses on the device (pinned memory, persistent workers); the loader alone (the clips/s it
can feed) beside the step that consumes it. Last, the GPU-hours of 80 epochs of EGTEA Gaze+ (8,299 training clips
of split 1) and Ego4D (15,310 training clips: GLC's train_ego4d_gaze.csv, as the data spec gives it) at each rate,
and the paper's (about 3 and 5 days on 4 H100s); ``--train-clips NAME=N`` adds a dataset whose count depends on the
download (Ego-Exo4D: the training windows of your build).

    python benchmarks/bench_train.py                                  # GPU: the paper's geometry
    python benchmarks/bench_train.py --variants B4+fast B8+fast+ckpt --workers 8 14 --json train.json
    python benchmarks/bench_train.py --device cpu --preset tiny       # the smoke run (CI)
    python benchmarks/bench_train.py --device cpu --preset paper16 --skip-data --no-flops --steps 1   # CPU candidates
    python benchmarks/bench_train.py --prepare-data DIR               # write the clips only (then --data-dir DIR)
    python benchmarks/bench_train.py --train-clips Ego-Exo4D=N        # and the GPU-hours of N Ego-Exo4D windows

``--time-limit S`` stops starting new measurements once S seconds have passed (the GPU suite's budget), and says
what it skipped.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from results import add_results_argument, config_model, write_section
from torch.utils.data import DataLoader, RandomSampler
from train_step import PRESETS, TrainStep, make_config, random_batch, step_ops, step_profile, synchronize
from train_sweep import (
    CPU_CANDIDATES,
    GPU_VARIANTS,
    TINY_VARIANTS,
    Variant,
    fastest,
    format_ops,
    format_row,
    gpu_hours,
    parse_train_clips,
    report,
)

from transformers_gazeflow import GazeFlowConfig
from transformers_gazeflow.training.device_speed import attention_kernel_support, loader_options


# ---------------------------------------------------------------------------------------------------- the model step
def free_memory(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def timed_steps(step: TrainStep, batches, steps: int, warmup: int) -> list[float]:
    """Wall seconds of ``steps`` steps after ``warmup`` untimed ones; ``batches()`` gives each step's batch."""
    for _ in range(warmup):
        step(batches())
    synchronize(step.device)
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step(batches())
        synchronize(step.device)
        times.append(time.perf_counter() - start)
    return times


def count_flops_per_clip(config: GazeFlowConfig, device: torch.device) -> float | None:
    """FLOPs of one training step on one clip (matrix products and attention, forward and backward), counted by
    ``torch.utils.flop_counter``."""
    from torch.utils.flop_counter import FlopCounterMode

    step = TrainStep(config, Variant.parse("B1+probe"), device)
    batch = random_batch(config, 1, device)
    try:
        step(batch)  # the lazy parts (optimizer state) outside the count
        with FlopCounterMode(display=False) as counter:
            step(batch)
        flops = counter.get_total_flops()
    except Exception as err:  # noqa: BLE001 - a figure beside the others; the run goes on without it
        print(f"FLOP count failed ({type(err).__name__}: {err}); the table goes without TFLOP/s", flush=True)
        flops = 0
    finally:
        step = batch = None  # noqa: F841
        free_memory(device)
    return float(flops) or None


def model_only(
    config: GazeFlowConfig,
    variant: Variant,
    device: torch.device,
    steps: int,
    warmup: int,
    count_ops: bool = False,
    profile: bool = False,
) -> dict:
    """The step on random inputs (no data loading): seconds per step, clips/s, peak GB, with ``count_ops`` the ops
    of one more step (``train_step.step_ops``) and with ``profile`` where they go (``train_step.step_profile``). A
    variant that fails is reported with its error, and the run goes on."""
    free_memory(device)
    try:
        started = time.perf_counter()
        step = TrainStep(config, variant, device)
        batch = random_batch(config, variant.batch, device)
        times = timed_steps(step, lambda: batch, steps, warmup + (1 if variant.compile else 0))
        seconds = statistics.median(times)
        result = {
            "s_per_step": seconds,
            "clips_per_s": variant.batch / seconds,
            "peak_gb": torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None,
            "frozen_weights_cast": len(step.cast) if step.cast is not None else 0,
            "ops": step_ops(step, batch) if count_ops else None,
            "profile": step_profile(step, batch) if profile else None,
            "wall_s": time.perf_counter() - started,
        }
    except torch.OutOfMemoryError:
        result = {"error": "out of memory"}
    except Exception as err:  # noqa: BLE001 - one candidate's failure (a kernel, a compile mode) is its row's figure
        result = {"error": f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}"}
    finally:
        step = batch = None  # noqa: F841 (release the model before the next variant)
        free_memory(device)
    return result


def encoder_attention_support(config: GazeFlowConfig, batch: int, device: torch.device) -> dict[str, bool]:
    """Which fused attention kernels can run the encoder's attention (``batch`` clips, bf16 on a GPU) on ``device``:
    whether an ``sdpa=`` variant runs the kernel it names there (empty off CUDA)."""
    encoder = config.encoder_config
    heads = encoder.num_attention_heads
    tokens = (config.num_frames // encoder.tubelet_size) * (config.image_size // encoder.patch_size) ** 2
    shape = (batch, heads, tokens, encoder.hidden_size // heads)
    return attention_kernel_support(shape, torch.bfloat16, device)


# ---------------------------------------------------------------------------------------------------- the data path
def prepare_data(folder: Path, clips: int, frames: int, size: tuple[int, int]) -> Path:
    """``clips`` EGTEA Gaze+ layout clips of ``frames`` frames at ``size`` (24 fps), all in the training split."""
    from transformers_gazeflow.data.synthetic.egtea_layout import write_egtea_layout
    from transformers_gazeflow.data.synthetic.settings import SyntheticGazeSettings

    marker = folder / "bench_train_data.json"
    wanted = {"clips": clips, "frames": frames, "size": list(size)}
    if marker.exists() and json.loads(marker.read_text()) == wanted:
        return folder
    settings = SyntheticGazeSettings(
        num_clips=clips,
        min_frames=frames,
        max_frames=frames,
        width=size[0],
        height=size[1],
        validation_fraction=0.0,
        test_fraction=0.0,
    )
    write_egtea_layout(folder, settings, clips_per_session=clips)
    marker.write_text(json.dumps(wanted))
    return folder


def load_windows(folder: Path, config: GazeFlowConfig):
    """The training windows of the EGTEA builder over ``folder`` (the builder and its cache as train.py reads
    them)."""
    from transformers_gazeflow.training.datasets import load_training_splits

    train, _ = load_training_splits(
        "egtea", str(folder), "split1", 0.0, window_frames=config.num_frames, window_stride=config.window_stride
    )
    return train


def make_loader(windows, collator, batch: int, workers: int, device: torch.device, batches: int) -> DataLoader:
    """The training DataLoader as train.py builds it on ``device`` (``device_speed.loader_options``), drawing
    ``batches`` batches with replacement from the few generated windows."""
    sampler = RandomSampler(
        windows, replacement=True, num_samples=batch * batches, generator=torch.Generator().manual_seed(0)
    )
    return DataLoader(
        windows,
        sampler=sampler,
        batch_size=batch,
        collate_fn=collator,
        drop_last=True,
        **loader_options(workers, device),
    )


def to_device(batch: dict, device: torch.device) -> dict:
    return {
        key: value.to(device, non_blocking=True)
        for key, value in batch.items()
        if key in ("pixel_values_videos", "gaze", "valid_mask")
    }


def collator_cost(windows, collator, repeats: int = 2) -> dict:
    """CPU seconds of one window in the collator, split into decoding and processing (main process, one thread)."""
    example = windows[0]
    decode, process = [], []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in a DataLoader worker
    try:
        for _ in range(repeats):
            start = time.process_time()
            frames = collator.decode_fn(example["video_path"], int(example["window_start"]), int(example["num_frames"]))
            middle = time.process_time()
            collator.processor.preprocess(frames)
            decode.append(middle - start)
            process.append(time.process_time() - middle)
    finally:
        torch.set_num_threads(threads)
    return {
        "decode_cpu_s": min(decode),
        "process_cpu_s": min(process),
        "clips_per_s_per_worker": 1.0 / (min(decode) + min(process)),
    }


def loader_alone(windows, collator, batch: int, workers: int, device: torch.device) -> dict:
    """Clips/s the loader delivers into (pinned) host memory in its steady state: three rounds of one batch per
    worker, the first round (worker start-up, the queues filling) untimed."""
    rounds, first_round = 3, max(1, workers)
    started = time.perf_counter()
    loader = make_loader(windows, collator, batch, workers, device, max(4, rounds * first_round))
    iterator = iter(loader)
    for _ in range(first_round):
        next(iterator)
    first = time.perf_counter() - started
    start = time.perf_counter()
    count = sum(1 for _ in iterator)
    seconds = time.perf_counter() - start
    del iterator, loader
    return {
        "workers": workers,
        "clips_per_s": count * batch / seconds,
        "first_round_s": first,
        "timed_clips": count * batch,
    }


def through_data(
    config: GazeFlowConfig,
    variant: Variant,
    windows,
    collator,
    workers: int,
    device: torch.device,
    steps: int,
    warmup: int,
) -> dict:
    """The step fed by the loader (host-to-device copy included): clips/s over ``steps`` steps after ``warmup``."""
    free_memory(device)
    step = loader = iterator = None
    try:
        step = TrainStep(config, variant, device)
        loader = make_loader(windows, collator, variant.batch, workers, device, steps + warmup + 1)
        iterator = iter(loader)
        times = timed_steps(
            step, lambda: to_device(next(iterator), device), steps, warmup + (1 if variant.compile else 0)
        )
        total = sum(times)
        return {
            "variant": variant.name,
            "workers": workers,
            "clips_per_s": variant.batch * steps / total,
            "s_per_step": total / steps,
            "slowest_step_s": max(times),
        }
    except torch.OutOfMemoryError:
        return {"variant": variant.name, "workers": workers, "error": "out of memory"}
    finally:
        step = loader = iterator = None  # noqa: F841
        free_memory(device)


# ---------------------------------------------------------------------------------------------------- the run
class Budget:
    """``--time-limit``: whether another measurement may start, and what was skipped for time."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds, self.started, self.skipped = seconds, time.perf_counter(), []

    def allows(self, what: str) -> bool:
        if self.seconds is None or time.perf_counter() - self.started < self.seconds:
            return True
        self.skipped.append(what)
        print(f"skipped (time limit {self.seconds:g} s): {what}", flush=True)
        return False


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--preset",
        choices=PRESETS,
        default="paper",
        help="the paper's geometry (ViT-L, 64 frames of 256x256, LoRA r16), the same model on 16x16 frames (paper16: "
        "the paper's step op for op at a CPU's cost) or the tiny test model",
    )
    parser.add_argument(
        "--variants",
        nargs="+",
        default=None,
        help=f"model-only variants (default GPU: {' '.join(GPU_VARIANTS)}; tiny: {' '.join(TINY_VARIANTS)})",
    )
    parser.add_argument(
        "--data-variants",
        nargs="+",
        default=None,
        help="variants fed by the data path (default: the fastest non-probe model-only variant)",
    )
    parser.add_argument("--steps", type=int, default=3, help="timed steps of each model-only variant (median)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps first (compiled variants: one more)")
    parser.add_argument("--data-steps", type=int, default=8, help="timed steps fed by the loader")
    parser.add_argument(
        "--workers",
        type=int,
        nargs="+",
        default=None,
        help="DataLoader workers of the loader-alone runs (default GPU: 4 8 and the automatic "
        "count; CPU: 0 2); the data-fed steps use the last",
    )
    parser.add_argument("--data-clips", type=int, default=None, help="clips generated (default 8; tiny 2)")
    parser.add_argument("--data-size", default=None, help="WIDTHxHEIGHT of the clips (default 640x480; tiny 160x120)")
    parser.add_argument("--data-dir", type=Path, default=None, help="reuse (or write) the clips here")
    parser.add_argument(
        "--prepare-data",
        type=Path,
        default=None,
        metavar="DIR",
        help="only write the clips into DIR (the GPU suite does this while other steps run)",
    )
    parser.add_argument("--skip-data", action="store_true", help="model-only variants alone")
    parser.add_argument("--no-flops", action="store_true", help="skip counting the FLOPs of a step")
    parser.add_argument(
        "--count-ops",
        choices=["yes", "no"],
        default=None,
        help="count the aten ops (and CUDA kernels) of one more step of each model-only variant (default: yes on the "
        "CPU, no on a GPU)",
    )
    parser.add_argument(
        "--profile-ops",
        action="store_true",
        help="and for the first variant, where one step's ops go: by phase, by part of the model, by autograd node, "
        "and the ops that read a value back to the host",
    )
    parser.add_argument("--time-limit", type=float, default=None, help="start no measurement after this many s")
    parser.add_argument("--json", type=Path, default=None, help="write every figure to this JSON file")
    parser.add_argument(
        "--train-clips",
        action="append",
        default=[],
        metavar="NAME=N",
        help="also give the GPU-hours of N training clips of dataset NAME (repeatable), e.g. Ego-Exo4D=N with N the "
        "training windows of your build, whose takes depend on what was downloaded",
    )
    add_results_argument(parser)
    return check_args(parser, parser.parse_args(argv))


def check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.Namespace:
    """The arguments' own checks (a one-line ``parser.error`` each); ``args.size`` from ``--data-size``."""
    for name in ("steps", "data_steps"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.warmup < 0:
        parser.error(f"--warmup must be >= 0, got {args.warmup}")
    try:
        for text in (args.variants or []) + (args.data_variants or []):
            Variant.parse(text)
        args.size = tuple(
            int(v) for v in (args.data_size or ("160x120" if args.preset == "tiny" else "640x480")).lower().split("x")
        )
    except ValueError as err:
        parser.error(
            str(err) if "--variants" in str(err) else f"--data-size must be WIDTHxHEIGHT, got {args.data_size!r}"
        )
    if len(args.size) != 2 or min(args.size) < 16:
        parser.error(f"--data-size must be WIDTHxHEIGHT of at least 16x16, got {args.data_size!r}")
    if args.workers is not None and min(args.workers) < 0:
        parser.error(f"--workers must be >= 0, got {args.workers}")
    return args


def default_workers(device: torch.device) -> list[int]:
    from transformers_gazeflow.training.device_speed import auto_workers

    return sorted({4, 8, auto_workers()}) if device.type == "cuda" else [0, 2]


def run_model_only(args, config, device, budget: Budget, figures: dict, compiled: bool) -> dict:
    """The model-only variants, eager ones or compiled ones (``compiled``), into ``figures["model_only"]`` (saved
    after each), side by side: the first variant is the baseline the others are read against."""
    names = args.variants or {"tiny": TINY_VARIANTS, "paper16": CPU_CANDIDATES}.get(args.preset, GPU_VARIANTS)
    results = figures.setdefault("model_only", {})
    count_ops = args.count_ops == "yes" if args.count_ops is not None else device.type == "cpu"
    for index, variant in enumerate(Variant.parse(name) for name in names):
        if variant.compile != compiled or not budget.allows(f"model only {variant.name}"):
            continue
        profile = args.profile_ops and index == 0
        results[variant.name] = model_only(config, variant, device, args.steps, args.warmup, count_ops, profile)
        ops = results[variant.name].get("ops")
        print(
            f"model only {variant.name}: {format_row(results[variant.name])}"
            + (f", {format_ops(ops)} ops / step" if ops else ""),
            flush=True,
        )
        save(figures, args.json, budget)
    return results


def run_data_path(args, config, device, model_results: dict, budget: Budget) -> dict:
    from transformers_gazeflow.data.collator import GazeFlowDataCollator
    from transformers_gazeflow.data.processing import GazeFlowVideoProcessor

    clips = args.data_clips or (2 if args.preset == "tiny" else 8)
    frames = max(config.num_frames, 16)
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        folder = args.data_dir or Path(stack.enter_context(_temporary_folder()))
        prepare_data(folder, clips, frames, args.size)
        windows = load_windows(folder, config)
        figures: dict = {
            "clips": clips,
            "frames": frames,
            "size": f"{args.size[0]}x{args.size[1]}",
            "windows": len(windows),
            "seconds_to_prepare": time.perf_counter() - started,
        }
        collator = GazeFlowDataCollator(GazeFlowVideoProcessor(size=config.image_size), num_frames=config.num_frames)
        figures["collator"] = collator_cost(windows, collator)
        batch = max((Variant.parse(v).batch for v in args.data_variants or [fastest(model_results) or "B4"]))
        workers = args.workers if args.workers is not None else default_workers(device)
        figures["loader_alone"] = []
        for count in workers:
            if budget.allows(f"loader alone, {count} workers"):
                figures["loader_alone"].append(loader_alone(windows, collator, batch, count, device))
                print(
                    f"loader alone, {count} workers: {figures['loader_alone'][-1]['clips_per_s']:.2f} clips/s",
                    flush=True,
                )
        figures["fed"] = []
        for name in args.data_variants or ([fastest(model_results)] if fastest(model_results) else []):
            if budget.allows(f"data-fed {name}"):
                figures["fed"].append(
                    through_data(
                        config,
                        Variant.parse(name),
                        windows,
                        collator,
                        workers[-1],
                        device,
                        args.data_steps,
                        args.warmup,
                    )
                )
                print(f"data-fed {name}, {workers[-1]} workers: {format_row(figures['fed'][-1])}", flush=True)
    return figures


@contextlib.contextmanager
def _temporary_folder():
    import tempfile

    with tempfile.TemporaryDirectory(prefix="bench_train_") as folder:
        yield folder


def save(figures: dict, path: Path | None, budget: Budget) -> str:
    """The report of what is measured so far, into ``figures["report"]`` and ``path`` (after every measurement, so
    that a run stopped by a time limit keeps what it measured)."""
    figures["skipped"] = budget.skipped
    best = fastest(figures.get("model_only", {}))
    rate = figures["model_only"][best]["clips_per_s"] if best else None
    figures["gpu_hours"] = {"model_only": gpu_hours(rate, figures.get("train_clips")) if rate else None}
    figures["report"] = report(figures)
    if path is not None:
        path.write_text(json.dumps(figures, indent=1))
    return figures["report"]


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    if args.prepare_data is not None:
        config = make_config(args.preset)
        prepare_data(
            args.prepare_data,
            args.data_clips or (2 if args.preset == "tiny" else 8),
            max(config.num_frames, 16),
            args.size,
        )
        print(f"clips written to {args.prepare_data}")
        return {}
    try:
        train_clips = dict(parse_train_clips(text) for text in args.train_clips)
    except ValueError as err:
        raise SystemExit(f"bench_train.py: {err}") from None
    device = torch.device(args.device)
    budget = Budget(args.time_limit)
    config = make_config(args.preset)
    encoder = config.encoder_config
    figures: dict = {
        "benchmark": "train",
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU",
        "preset": args.preset,
        "geometry": f"{encoder.num_hidden_layers} encoder layers, {config.num_frames} frames of "
        f"{config.image_size}x{config.image_size}, LoRA r{config.lora_r} on "
        f"{'/'.join(config.lora_target_modules)}, "
        f"{'bf16 autocast' if device.type == 'cuda' else 'fp32'}",
        "train_clips": train_clips,
        "torch": torch.__version__,
        "cudnn": torch.backends.cudnn.version() if device.type == "cuda" else None,
        "encoder_attention_kernels": encoder_attention_support(config, 8, device),
    }
    if not args.no_flops and budget.allows("FLOP count"):
        figures["flops_per_clip"] = count_flops_per_clip(config, device)
    run_model_only(args, config, device, budget, figures, compiled=False)
    if not args.skip_data:  # before the compiled variants: their compilation may use up a time limit
        figures["data"] = run_data_path(args, config, device, figures["model_only"], budget)
        save(figures, args.json, budget)
    run_model_only(args, config, device, budget, figures, compiled=True)
    print("\n" + save(figures, args.json, budget))
    measured = config_model(
        f"{args.preset} geometry, random weights", config, "bench_train:make_config", preset=args.preset
    )
    write_section(args.results_dir, "bench_train", args.preset, figures, [measured], args.device)
    return figures


if __name__ == "__main__":
    main()
    sys.exit(0)
