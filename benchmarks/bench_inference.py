"""End-to-end inference cost: encoder, sampler grid, ms per frame and peak memory, fast path vs reference path.

The fast path (``transformers_gazeflow.generation.inference``): SDPA in the encoder and the velocity network, LoRA
merged, the per-clip condition cache shared across K, K x windows batched, autocast (bf16 on GPU), optionally
``torch.compile`` (``--compile``; on CUDA with ``mode="reduce-overhead"``, i.e. CUDA graphs). The reference path:
eager encoder attention, LoRA unmerged, the condition recomputed at every network call for K repeated features,
fp32. A default V-JEPA 2 ViT-L config with random weights stands in for the checkpoint (same cost).

    python benchmarks/bench_inference.py                       # GPU: the paper's settings (64 frames, ViT-L)
    python benchmarks/bench_inference.py --device cpu          # CPU: a reduced setting (see --frames etc.)
    python benchmarks/bench_inference.py --preset tiny         # the tiny test model (a smoke run, any device)
    python benchmarks/bench_inference.py --json out.json       # also write every figure as JSON

Printed side by side with the paper (one H100, bf16, 64-frame clip; the paper's Appendix "Efficiency"): encoder ~450 ms
per clip; K=50, S=50: 3.37 s per clip of which Euler sampling 2.92 s; K=30, S=5: 0.73 s per clip = 11.4 ms per frame
(Table ks_grid gives the whole K x S grid, Table method_time the ms per frame of every method); peak memory 9.2 GB.
Targets (one H100, bf16): encoder <= 30 ms per clip, sampler < 5 ms per clip and end to end <= 0.5 ms per frame at K=30,
S=5, peak memory <= 3 GB.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time
from pathlib import Path

import torch
from engine_hooks import autocast_context, draw_noise, sample_window, set_encoder_attention
from results import add_results_argument, config_model, write_section
from transformers import VJEPA2Config

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
from transformers_gazeflow.generation.inference import prepare_for_inference
from transformers_gazeflow.models.gazeflow.generation_gazeflow import SamplingSettings

PAPER_KS_GRID_SECONDS = {  # Table ks_grid, time per 64-frame clip on one H100 (encoder included)
    (1, 1): 0.49,
    (1, 2): 0.49,
    (1, 5): 0.51,
    (1, 10): 0.54,
    (1, 50): 0.77,
    (10, 1): 0.52,
    (10, 2): 0.53,
    (10, 5): 0.57,
    (10, 10): 0.63,
    (10, 50): 1.14,
    (30, 1): 0.58,
    (30, 2): 0.62,
    (30, 5): 0.73,
    (30, 10): 0.91,
    (30, 50): 2.35,
    (50, 1): 0.65,
    (50, 2): 0.71,
    (50, 5): 0.89,
    (50, 10): 1.21,
    (50, 50): 3.37,
}
PAPER_METHOD_MS_PER_FRAME = {  # Table method_time, ms per frame on one H100
    "GLC": 12.5,
    "AT": 219.0,
    "EgoM2P": 506.0,
    "GazeFlow (K=50, S=50)": 53.0,
    "GazeFlow (K=30, S=5)": 11.4,
}
PAPER_ENCODER_MS = 450.0  # "the encoder with LoRA takes ~450 ms"
PAPER_SAMPLER_MS_K50_S50 = 2920.0  # "Euler sampling takes ~2.92 s" (K=50, S=50)
PAPER_MS_PER_FRAME = 11.4  # K=30, S=5
PAPER_PEAK_GB = 9.2
PAPER_FRAMES = 64
TARGETS = {"encoder_ms": 30.0, "sampler_ms": 5.0, "ms_per_frame": 0.5, "peak_memory_gb": 3.0}  # at K=30, S=5


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device: torch.device, repeats: int, warmup: int = 1) -> float:
    """Median wall time of ``fn`` in seconds, after ``warmup`` untimed calls (CUDA graphs need 2: a warm-up run and
    the recording; compilation happens in the first)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        fn()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def peak_memory_gb(fn, device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    fn()
    synchronize(device)
    return torch.cuda.max_memory_allocated(device) / 2**30


def preset_config(preset: str, frames: int, encoder_layers: int) -> GazeFlowConfig:
    """``tiny`` (the test model), else the paper's geometry: V-JEPA 2 ViT-L at 256 px with ``encoder_layers`` of its
    24 layers, ``frames`` per clip; LoRA on (random weights)."""
    if preset == "tiny":
        return GazeFlowConfig.tiny(use_lora=True)
    encoder = VJEPA2Config(num_hidden_layers=encoder_layers, frames_per_clip=frames)
    return GazeFlowConfig(encoder_config=encoder, num_frames=frames, window_stride=frames // 2, use_lora=True)


def build_models(args, device: torch.device) -> tuple[GazeFlowModel, GazeFlowModel]:
    torch.manual_seed(0)
    reference = GazeFlowModel(preset_config(args.preset, args.frames, args.encoder_layers)).to(device).eval()
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():  # LoRA B starts at zero: give the adapters weight so merging is real work
        for name, parameter in reference.named_parameters():
            if "lora_B" in name:
                parameter.copy_(torch.randn(parameter.shape, generator=generator).to(device) * 0.01)
    set_encoder_attention(reference, "eager")
    weights = torch.bfloat16 if args.dtype == "bf16" and args.weights == "cast" else None
    fast = prepare_for_inference(
        copy.deepcopy(reference),
        merge_lora=True,
        compile=args.compile,
        compile_mode="reduce-overhead" if (args.compile and device.type == "cuda") else None,
        dtype=weights,
    )
    return fast, reference


def encoder_variants(args, reference: GazeFlowModel, pixels: torch.Tensor, device: torch.device) -> dict:
    """The encoder of one clip, ms, each way it can run: bf16 by autocast (the fast path before) or with the weights
    cast once, transformers' V-JEPA 2 attention or the fused one (one matmul for q, k, v; RoPE tables once), each
    SDPA backend, and with ``--compile`` ``torch.compile`` of the fused encoder."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    gpu = device.type == "cuda"
    low = torch.bfloat16 if gpu else torch.float32
    plain = prepare_for_inference(copy.deepcopy(reference), fuse_attention=False)  # LoRA merged, fp32 weights
    timings = {}

    def encode(model, autocast=None):
        def run():
            with torch.no_grad(), autocast_context(model, autocast):
                return model.encode_video(pixels)

        return run

    if gpu:
        timings["autocast bf16, transformers' attention (the fast path before)"] = 1e3 * timed(
            encode(plain, torch.bfloat16), device, args.repeats
        )
    unfused = copy.deepcopy(plain).to(low)
    timings[f"{low} weights, transformers' attention"] = 1e3 * timed(encode(unfused), device, args.repeats)
    fused = unfused
    fused.video_encoder.fuse_attention()
    timings[f"{low} weights, fused attention"] = 1e3 * timed(encode(fused), device, args.repeats)
    if gpu:
        for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION):
            try:
                with sdpa_kernel(backend):
                    timings[f"{low} weights, fused attention, SDPA {backend.name}"] = 1e3 * timed(
                        encode(fused), device, args.repeats
                    )
            except RuntimeError as err:
                print(f"  SDPA {backend.name}: not available ({str(err).splitlines()[0][:100]})")
    if args.compile:
        fused.video_encoder.forward = torch.compile(fused.video_encoder.forward, dynamic=False)
        timings[f"{low} weights, fused attention, torch.compile"] = 1e3 * timed(
            encode(fused), device, args.repeats, warmup=2
        )
    print("\nencoder ms / clip, each way it can run:")
    for name, ms in timings.items():
        print(f"  {name}: {ms:.1f}")
    del plain, fused
    return timings


def sampler_cuda_graph_ms(
    args, fast: GazeFlowModel, tokens: torch.Tensor, frames: int, device: torch.device, samples: int, steps: int
) -> dict:
    """One window's sampler (condition built beforehand), ms: eager against its CUDA graph replay
    (``CUDAGraphWindowSampler``), and the largest difference between the two."""
    from transformers_gazeflow.generation.inference import CUDAGraphWindowSampler
    from transformers_gazeflow.models.gazeflow.generation_gazeflow import WindowSampler

    settings = SamplingSettings.resolve(fast.config, num_samples=samples, num_steps=steps, solver="euler")
    eager = WindowSampler(fast, settings)
    graphed = CUDAGraphWindowSampler(WindowSampler(fast, settings))
    noise = draw_noise((1, samples, frames, 2), torch.Generator().manual_seed(0), device)
    with torch.no_grad():
        condition = fast.build_condition(tokens, frames)
        eager_ms = 1e3 * timed(lambda: eager(condition, noise), device, args.repeats, warmup=2)
        graph_ms = 1e3 * timed(lambda: graphed(condition, noise), device, args.repeats, warmup=3)
        difference = (graphed(condition, noise).float() - eager(condition, noise).float()).abs().max().item()
    captured = any(entry is not False for entry in graphed.graphs.values())
    print(
        f"sampler ms / window (condition built once, K={samples}, S={steps}): eager {eager_ms:.2f}, CUDA graph "
        f"{graph_ms:.2f} (captured: {captured}; max |diff| {difference:.1e}); target {TARGETS['sampler_ms']:.0f}"
    )
    return {"eager": eager_ms, "cuda_graph": graph_ms, "captured": captured, "max_abs_difference": difference}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--preset",
        choices=["paper", "tiny"],
        default="paper",
        help="paper: V-JEPA 2 ViT-L geometry at 256 px (default); tiny: the 32 px test model",
    )
    parser.add_argument(
        "--dtype", choices=["bf16", "fp32"], default=None, help="fast-path dtype (default: bf16 on GPU, fp32 on CPU)"
    )
    parser.add_argument(
        "--weights",
        choices=["cast", "autocast"],
        default="cast",
        help="bf16 by casting the weights once (default, what the pipeline does) or by autocast",
    )
    parser.add_argument(
        "--no-encoder-variants",
        action="store_true",
        help="skip the encoder's variants (autocast/cast, fused attention, SDPA backends)",
    )
    parser.add_argument("--frames", type=int, default=None, help="frames per clip (default: 64 GPU, 16 CPU)")
    parser.add_argument("--encoder-layers", type=int, default=None, help="default: 24 GPU (ViT-L), 4 CPU")
    parser.add_argument("--grid-k", type=int, nargs="+", default=None, help="K values (GPU: 1 10 30 50)")
    parser.add_argument("--grid-s", type=int, nargs="+", default=None, help="S values (GPU: 1 2 5 10 50)")
    parser.add_argument("--reference-k", type=int, default=None, help="K of the reference comparison (GPU 30, CPU 2)")
    parser.add_argument("--reference-s", type=int, default=None, help="S of the reference comparison (GPU 5, CPU 2)")
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats (GPU 5, CPU 1); median reported")
    parser.add_argument("--compile", action="store_true", help="torch.compile the velocity network")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="print where the time goes in one end-to-end fast-path clip (torch.profiler)",
    )
    parser.add_argument(
        "--profile-only",
        action="store_true",
        help="only the profile of one clip at --reference-k/-s (after one warm-up), no timings",
    )
    parser.add_argument("--json", default=None, help="write every figure to this JSON file")
    add_results_argument(parser)
    args = parser.parse_args(argv)
    gpu = torch.device(args.device).type == "cuda"
    if args.preset == "tiny":
        args.frames, args.encoder_layers = 8, 2
    args.frames = args.frames or (64 if gpu else 16)
    args.encoder_layers = args.encoder_layers or (24 if gpu else 4)
    args.grid_k = args.grid_k or ([1, 10, 30, 50] if gpu else [1, 10])
    args.grid_s = args.grid_s or ([1, 2, 5, 10, 50] if gpu else [1, 5])
    args.reference_k = args.reference_k or (30 if gpu else 2)
    args.reference_s = args.reference_s or (5 if gpu else 2)
    args.repeats = args.repeats or (5 if gpu else 1)
    args.dtype = args.dtype or ("bf16" if gpu else "fp32")
    return args


def paper_clip_ms(samples: int, steps: int) -> float | None:
    seconds = PAPER_KS_GRID_SECONDS.get((samples, steps))
    return None if seconds is None else 1e3 * seconds


class ClipPaths:
    """One random clip through the fast path and the reference path: the encoder of each, and the sampler of each
    on its own encoder's tokens (tokens made once, on first use)."""

    def __init__(self, args, device: torch.device):
        self.args, self.device, self.frames = args, device, args.frames
        self.dtype = {"bf16": torch.bfloat16, "fp32": None}[args.dtype] if args.weights == "autocast" else None
        self.warmup = 3 if args.compile else 1
        self.fast, self.reference = build_models(args, device)
        size = self.fast.config.image_size
        self.pixels = torch.randn(1, args.frames, 3, size, size, generator=torch.Generator().manual_seed(0)).to(device)
        self._tokens: dict[str, torch.Tensor] = {}

    def encode_fast(self):
        with torch.no_grad(), autocast_context(self.fast, self.dtype):
            return self.fast.encode_video(self.pixels)

    def encode_reference(self):
        with torch.no_grad():
            return self.reference.encode_video(self.pixels)

    def tokens(self, path: str) -> torch.Tensor:
        if path not in self._tokens:
            self._tokens[path] = self.encode_fast() if path == "fast" else self.encode_reference()
        return self._tokens[path]

    def sample_fast(self, samples: int, steps: int):
        noise = draw_noise((1, samples, self.frames, 2), torch.Generator().manual_seed(0), self.device)
        with torch.no_grad(), autocast_context(self.fast, self.dtype):
            settings = SamplingSettings.resolve(self.fast.config, num_samples=samples, num_steps=steps, solver="euler")
            return sample_window(self.fast, self.tokens("fast"), self.frames, noise, settings, use_condition_cache=True)

    def sample_reference(self, samples: int, steps: int):
        noise = draw_noise((1, samples, self.frames, 2), torch.Generator().manual_seed(0), self.device)
        with torch.no_grad():
            settings = SamplingSettings.resolve(
                self.reference.config, num_samples=samples, num_steps=steps, solver="euler"
            )
            return sample_window(
                self.reference, self.tokens("reference"), self.frames, noise, settings, use_condition_cache=False
            )

    def generate_fast(self, samples: int, steps: int):
        with torch.no_grad(), autocast_context(self.fast, self.dtype):
            return self.fast.generate(
                pixel_values_videos=self.pixels,
                num_samples=samples,
                num_steps=steps,
                generator=torch.Generator().manual_seed(0),
            )


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    device = torch.device(args.device)
    gpu = device.type == "cuda"
    device_name = torch.cuda.get_device_name(device) if gpu else "CPU"
    print(
        f"device {device_name}; torch {torch.__version__}; threads {torch.get_num_threads()}; fast-path dtype "
        f"{args.dtype} ({args.weights}); preset {args.preset}; {args.frames} frames; encoder layers "
        f"{args.encoder_layers}; compile {args.compile}",
        flush=True,
    )
    figures: dict = {
        "benchmark": "inference",
        "device": device_name,
        "torch": torch.__version__,
        "dtype": args.dtype,
        "preset": args.preset,
        "frames": args.frames,
        "encoder_layers": args.encoder_layers,
        "compile": args.compile,
        "repeats": args.repeats,
        "targets": TARGETS,
        "paper": {
            "encoder_ms": PAPER_ENCODER_MS,
            "ms_per_frame_k30_s5": PAPER_MS_PER_FRAME,
            "sampler_ms_k50_s50": PAPER_SAMPLER_MS_K50_S50,
            "peak_memory_gb": PAPER_PEAK_GB,
            "method_ms_per_frame": PAPER_METHOD_MS_PER_FRAME,
        },
    }
    clip = ClipPaths(args, device)
    if args.profile_only:
        k, s = args.reference_k, args.reference_s
        for _ in range(clip.warmup):
            clip.sample_fast(k, s)
        figures["profile"] = profile_clip(clip.encode_fast, lambda: clip.sample_fast(k, s), device, k, s)
    else:
        measure(args, clip, figures)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))
    section = "profile" if args.profile_only else ("compiled" if args.compile else "eager")
    name = "tiny" if args.preset == "tiny" else f"the paper's geometry with {args.encoder_layers} of ViT-L's 24 layers"
    measured = config_model(
        f"{name}, {args.frames} frames, random weights",
        clip.fast.config,
        "bench_inference:preset_config",
        preset=args.preset,
        frames=args.frames,
        encoder_layers=args.encoder_layers,
    )
    write_section(args.results_dir, "bench_inference", section, figures, [measured], args.device)
    return figures


def measure(args, clip: ClipPaths, figures: dict) -> None:
    """Every figure of a run into ``figures``: encoder, its variants, the sampler grid, generate(), fast against
    reference at --reference-k/-s, the sampler's CUDA graph, peak memory, Table method_time, the targets."""
    device, frames = clip.device, clip.frames
    encoder_fast = timed(clip.encode_fast, device, args.repeats)
    encoder_reference = timed(clip.encode_reference, device, args.repeats)
    figures["encoder_ms"] = {"fast": 1e3 * encoder_fast, "reference": 1e3 * encoder_reference}
    print(
        f"\nencoder ms / clip: fast {encoder_fast * 1e3:.1f}, reference {encoder_reference * 1e3:.1f}, "
        f"ratio {encoder_reference / encoder_fast:.2f}x; paper {PAPER_ENCODER_MS:.0f} ms "
        f"(fast / paper = {encoder_fast * 1e3 / PAPER_ENCODER_MS:.3f}); target {TARGETS['encoder_ms']:.0f} ms",
        flush=True,
    )
    if not args.no_encoder_variants:
        figures["encoder_variants_ms"] = encoder_variants(args, clip.reference, clip.pixels, device)
    grid = sampler_grid(args, clip, encoder_fast, figures)
    k, s = args.reference_k, args.reference_s
    generate_seconds = timed(lambda: clip.generate_fast(k, s), device, args.repeats, clip.warmup)
    figures["generate_ms_per_frame"] = 1e3 * generate_seconds / frames
    print(
        f"\nGazeFlowModel.generate on the fast path, K={k}, S={s}: {generate_seconds * 1e3:.1f} ms / clip, "
        f"{generate_seconds * 1e3 / frames:.3f} ms / frame",
        flush=True,
    )
    figures["at"] = fast_against_reference(args, clip, encoder_fast, encoder_reference)
    if device.type == "cuda" and not args.compile:
        figures["sampler_cuda_graph_ms"] = sampler_cuda_graph_ms(
            args, clip.fast, clip.tokens("fast"), frames, device, k, s
        )
    peak_fast = peak_memory_gb(lambda: (clip.encode_fast(), clip.sample_fast(k, s)), device)
    peak_reference = peak_memory_gb(lambda: (clip.encode_reference(), clip.sample_reference(k, s)), device)
    figures["peak_memory_gb"] = None if peak_fast is None else {"fast": peak_fast, "reference": peak_reference}
    if peak_fast is not None:
        print(
            f"peak GPU memory GB (weights included): fast {peak_fast:.2f}, reference {peak_reference:.2f}; "
            f"paper {PAPER_PEAK_GB}; target {TARGETS['peak_memory_gb']:.0f}"
        )
    else:
        print("peak GPU memory: n/a on CPU")
    if frames == PAPER_FRAMES:
        figures["method_time_ours_ms_per_frame"] = method_time(grid, encoder_fast, frames)
    at = figures["at"]
    figures["targets_met"] = {
        "encoder_ms": figures["encoder_ms"]["fast"] <= TARGETS["encoder_ms"],
        "sampler_ms": (k, s) == (30, 5) and at["sampler_ms"]["fast"] < TARGETS["sampler_ms"],
        "ms_per_frame": (k, s) == (30, 5) and at["ms_per_frame"]["fast"] <= TARGETS["ms_per_frame"],
        "peak_memory_gb": peak_fast is not None and peak_fast <= TARGETS["peak_memory_gb"],
    }
    if args.profile:
        figures["profile"] = profile_clip(clip.encode_fast, lambda: clip.sample_fast(k, s), device, k, s)


def sampler_grid(args, clip: ClipPaths, encoder_fast: float, figures: dict) -> dict[tuple[int, int], float]:
    """The fast path's sampler seconds per clip (condition build included) at every K of --grid-k and S of
    --grid-s; at the paper's 64 frames also each end-to-end clip against Table ks_grid."""
    print(f"\nsampler ms / clip, fast path (condition build included; {clip.frames} frames)")
    print("   K \\ S " + "".join(f"{s:>10}" for s in args.grid_s))
    grid: dict[tuple[int, int], float] = {}
    for samples in args.grid_k:
        row = []
        for steps in args.grid_s:
            grid[samples, steps] = timed(
                lambda k=samples, s=steps: clip.sample_fast(k, s), clip.device, args.repeats, clip.warmup
            )
            row.append(f"{grid[samples, steps] * 1e3:>10.2f}")
        print(f"{samples:>8} " + "".join(row), flush=True)
    figures["sampler_ms_grid"] = {str(k): {str(s): 1e3 * grid[k, s] for s in args.grid_s} for k in args.grid_k}
    if clip.frames != PAPER_FRAMES:
        return grid
    print(
        "end-to-end (encoder + sampler) ms per clip / the paper's per-clip time, Table ks_grid "
        "(ours ms | paper ms | ratio):"
    )
    ratios = {}
    for samples in args.grid_k:
        cells = []
        for steps in args.grid_s:
            ours, paper = 1e3 * (encoder_fast + grid[samples, steps]), paper_clip_ms(samples, steps)
            if paper is None:
                cells.append(f"{ours:9.1f} |       - |     -")
                continue
            ratios.setdefault(str(samples), {})[str(steps)] = ours / paper
            cells.append(f"{ours:9.1f} | {paper:7.0f} | {ours / paper:.4f}")
        print(f"  K={samples:<3} " + "   ".join(cells))
    figures["ks_grid_ratio_to_paper"] = ratios
    return grid


def fast_against_reference(args, clip: ClipPaths, encoder_fast: float, encoder_reference: float) -> dict:
    """The sampler and the whole clip at --reference-k/-s on both paths, and their trajectories' difference."""
    k, s, frames = args.reference_k, args.reference_s, clip.frames
    sampler_fast = timed(lambda: clip.sample_fast(k, s), clip.device, args.repeats, clip.warmup)
    sampler_reference = timed(lambda: clip.sample_reference(k, s), clip.device, args.repeats)
    clip_fast = encoder_fast + sampler_fast
    clip_reference = encoder_reference + sampler_reference
    print(
        f"K={k}, S={s}: sampler ms / clip fast {sampler_fast * 1e3:.2f}, reference {sampler_reference * 1e3:.1f} "
        f"({sampler_reference / sampler_fast:.1f}x); target {TARGETS['sampler_ms']:.0f} ms"
    )
    print(
        f"end-to-end ms / frame: fast {clip_fast * 1e3 / frames:.3f}, reference {clip_reference * 1e3 / frames:.3f} "
        f"({clip_reference / clip_fast:.1f}x); paper {PAPER_MS_PER_FRAME} ms (fast / paper = "
        f"{clip_fast * 1e3 / frames / PAPER_MS_PER_FRAME:.4f}); target {TARGETS['ms_per_frame']} ms"
    )
    with torch.no_grad():
        difference = (clip.sample_fast(k, s).float() - clip.sample_reference(k, s).float()).abs().max().item()
    print(f"fast vs reference trajectories (model coordinates): max |diff| {difference:.2e}")
    return {
        "K": k,
        "S": s,
        "sampler_ms": {"fast": 1e3 * sampler_fast, "reference": 1e3 * sampler_reference},
        "ms_per_frame": {"fast": 1e3 * clip_fast / frames, "reference": 1e3 * clip_reference / frames},
        "max_abs_difference": difference,
    }


def method_time(grid: dict, encoder_fast: float, frames: int) -> dict:
    """Table method_time side by side: our ms per frame (encoder + the grid's sampler) at the paper's rows."""
    ours = {}
    for name, (samples, steps) in {"GazeFlow (K=50, S=50)": (50, 50), "GazeFlow (K=30, S=5)": (30, 5)}.items():
        if (samples, steps) in grid:
            ours[name] = 1e3 * (encoder_fast + grid[samples, steps]) / frames
    print("\nTable method_time (ms / frame, one H100 in the paper): method | paper | ours | ours / paper")
    for name, paper in PAPER_METHOD_MS_PER_FRAME.items():
        mine = ours.get(name)
        print(f"  {name:<22} | {paper:7.1f} | " + (f"{mine:8.3f} | {mine / paper:.4f}" if mine else "       - |"))
    return ours


def profile_clip(encode, sample, device: torch.device, samples: int, steps: int, rows: int = 15) -> list[dict]:
    """Print and return where one fast-path clip spends its time (torch.profiler, device time first on CUDA)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    gpu = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])
    with profile(activities=activities) as profiler:
        with record_function("encoder"):
            encode()
        with record_function("sampler"):
            sample()
        synchronize(device)
    sort_key = "cuda_time_total" if gpu else "cpu_time_total"
    print(f"\nprofile of one fast-path clip (K={samples}, S={steps}), by {sort_key}:")
    averages = profiler.key_averages()
    print(averages.table(sort_by=sort_key, row_limit=rows))
    device_time = "device_time_total" if hasattr(averages[0], "device_time_total") else "cuda_time_total"
    ordered = sorted(averages, key=lambda e: getattr(e, device_time if gpu else "cpu_time_total"), reverse=True)
    return [
        {
            "name": e.key,
            "calls": e.count,
            "cpu_ms": e.cpu_time_total / 1e3,
            "device_ms": getattr(e, device_time, 0.0) / 1e3 if gpu else None,
        }
        for e in ordered[:rows]
    ]


if __name__ == "__main__":
    main()
