"""End-to-end inference cost: encoder, sampler grid, ms per frame and peak memory, fast path vs reference path.

The fast path (``transformers_gazeflow.inference``): SDPA in the encoder and the velocity network, LoRA merged,
the per-clip condition cache shared across K, K x windows batched, autocast (bf16 on GPU), optionally
``torch.compile`` (``--compile``; on CUDA with ``mode="reduce-overhead"``, i.e. CUDA graphs). The reference path:
eager encoder attention, LoRA unmerged, the condition recomputed at every network call for K repeated features,
fp32. A default V-JEPA 2 ViT-L config with random weights stands in for the checkpoint (same cost).

    python benchmarks/bench_inference.py                       # GPU: the paper's settings (64 frames, ViT-L)
    python benchmarks/bench_inference.py --device cpu          # CPU: a reduced setting (see --frames etc.)

Paper figures (one H100, bf16, 64-frame clip): encoder ~450 ms per clip; K=30, S=5: 0.73 s per clip = 11.4 ms per
frame; peak memory 9.2 GB; time grid in Table ks_grid. Targets: <= 0.5 ms per frame, encoder <= 40 ms, <= 3 GB.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch
from transformers import VJEPA2Config

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
from transformers_gazeflow.inference import autocast_context, prepare_for_inference, set_encoder_attention
from transformers_gazeflow.windowed_engine import sample_window
from transformers_gazeflow.scheduling_gazeflow import draw_noise

PAPER_KS_GRID_SECONDS = {  # Table ks_grid, time per 64-frame clip on one H100 (encoder included)
    (1, 1): 0.49, (1, 2): 0.49, (1, 5): 0.51, (1, 10): 0.54, (1, 50): 0.77,
    (10, 1): 0.52, (10, 2): 0.53, (10, 5): 0.57, (10, 10): 0.63, (10, 50): 1.14,
    (30, 1): 0.58, (30, 2): 0.62, (30, 5): 0.73, (30, 10): 0.91, (30, 50): 2.35,
    (50, 1): 0.65, (50, 2): 0.71, (50, 5): 0.89, (50, 10): 1.21, (50, 50): 3.37,
}
PAPER_ENCODER_MS = 450.0
PAPER_MS_PER_FRAME = 11.4
PAPER_PEAK_GB = 9.2


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device: torch.device, repeats: int, warmup: int = 1) -> float:
    """Median wall time of ``fn`` in seconds."""
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


def build_models(args, device: torch.device) -> tuple[GazeFlowModel, GazeFlowModel]:
    encoder = VJEPA2Config(num_hidden_layers=args.encoder_layers, frames_per_clip=args.frames)
    config = GazeFlowConfig(encoder_config=encoder, num_frames=args.frames, window_stride=args.frames // 2,
                            use_lora=True)
    torch.manual_seed(0)
    reference = GazeFlowModel(config).to(device).eval()
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():  # LoRA B starts at zero: give the adapters weight so merging is real work
        for name, parameter in reference.named_parameters():
            if "lora_B" in name:
                parameter.copy_(torch.randn(parameter.shape, generator=generator).to(device) * 0.01)
    set_encoder_attention(reference, "eager")
    fast = prepare_for_inference(copy.deepcopy(reference), merge_lora=True, compile=args.compile,
                                 compile_mode="reduce-overhead" if (args.compile and device.type == "cuda") else None)
    return fast, reference


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=["bf16", "fp32"], default=None,
                        help="fast-path autocast dtype (default: bf16 on GPU, fp32 on CPU)")
    parser.add_argument("--frames", type=int, default=None, help="frames per clip (default: 64 GPU, 16 CPU)")
    parser.add_argument("--encoder-layers", type=int, default=None, help="default: 24 GPU (ViT-L), 4 CPU")
    parser.add_argument("--grid-k", type=int, nargs="+", default=None, help="K values (GPU: 1 10 30 50)")
    parser.add_argument("--grid-s", type=int, nargs="+", default=None, help="S values (GPU: 1 2 5 10 50)")
    parser.add_argument("--reference-k", type=int, default=None, help="K of the reference comparison (GPU 30, CPU 2)")
    parser.add_argument("--reference-s", type=int, default=None, help="S of the reference comparison (GPU 5, CPU 2)")
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats (GPU 5, CPU 1); median reported")
    parser.add_argument("--compile", action="store_true", help="torch.compile the velocity network")
    parser.add_argument("--profile", action="store_true",
                        help="print where the time goes in one end-to-end fast-path clip (torch.profiler)")
    args = parser.parse_args()
    device = torch.device(args.device)
    gpu = device.type == "cuda"
    args.frames = args.frames or (64 if gpu else 16)
    args.encoder_layers = args.encoder_layers or (24 if gpu else 4)
    args.grid_k = args.grid_k or ([1, 10, 30, 50] if gpu else [1, 10])
    args.grid_s = args.grid_s or ([1, 2, 5, 10, 50] if gpu else [1, 5])
    args.reference_k = args.reference_k or (30 if gpu else 2)
    args.reference_s = args.reference_s or (5 if gpu else 2)
    args.repeats = args.repeats or (5 if gpu else 1)
    dtype = {"bf16": torch.bfloat16, "fp32": None}[args.dtype or ("bf16" if gpu else "fp32")]
    device_name = torch.cuda.get_device_name(device) if gpu else "CPU"
    print(f"device {device_name}; torch {torch.__version__}; threads {torch.get_num_threads()}; fast-path dtype "
          f"{dtype or torch.float32}; {args.frames} frames of 256x256; encoder layers {args.encoder_layers}; "
          f"compile {args.compile}")

    fast, reference = build_models(args, device)
    frames = args.frames
    pixels = torch.randn(1, frames, 3, 256, 256, generator=torch.Generator().manual_seed(0)).to(device)

    # ---------------------------------------------------------------- encoder
    def encode_fast():
        with torch.no_grad(), autocast_context(fast, dtype):
            return fast.encode_video(pixels)

    def encode_reference():
        with torch.no_grad():
            return reference.encode_video(pixels)

    encoder_fast = timed(encode_fast, device, args.repeats)
    encoder_reference = timed(encode_reference, device, args.repeats)
    print(f"\nencoder ms / clip: fast {encoder_fast * 1e3:.1f}, reference {encoder_reference * 1e3:.1f}, "
          f"ratio {encoder_reference / encoder_fast:.2f}x; paper {PAPER_ENCODER_MS:.0f} ms "
          f"(fast / paper = {encoder_fast * 1e3 / PAPER_ENCODER_MS:.3f})")

    tokens_fast = encode_fast()
    tokens_reference = encode_reference()

    def sample_fast(samples: int, steps: int):
        noise = draw_noise((1, samples, frames, 2), torch.Generator().manual_seed(0), device)
        with torch.no_grad(), autocast_context(fast, dtype):
            return sample_window(fast, tokens_fast, frames, noise, steps, "euler", use_condition_cache=True)

    def sample_reference(samples: int, steps: int):
        noise = draw_noise((1, samples, frames, 2), torch.Generator().manual_seed(0), device)
        with torch.no_grad():
            return sample_window(reference, tokens_reference, frames, noise, steps, "euler",
                                 use_condition_cache=False)

    # ---------------------------------------------------------------- sampler grid (fast path)
    print(f"\nsampler ms / clip, fast path (condition build included; {frames} frames)")
    print("   K \\ S " + "".join(f"{s:>10}" for s in args.grid_s))
    grid = {}
    for samples in args.grid_k:
        row = []
        for steps in args.grid_s:
            grid[samples, steps] = timed(lambda: sample_fast(samples, steps), device, args.repeats)
            row.append(f"{grid[samples, steps] * 1e3:>10.1f}")
        print(f"{samples:>8} " + "".join(row))
    if frames == 64:
        print("end-to-end (encoder + sampler) / paper's per-clip time, Table ks_grid:")
        print("   K \\ S " + "".join(f"{s:>10}" for s in args.grid_s))
        for samples in args.grid_k:
            cells = []
            for steps in args.grid_s:
                paper = PAPER_KS_GRID_SECONDS.get((samples, steps))
                value = (encoder_fast + grid[samples, steps]) / paper if paper else float("nan")
                cells.append(f"{value:>10.4f}")
            print(f"{samples:>8} " + "".join(cells))

    # ---------------------------------------------------------------- fast vs reference, end to end
    k, s = args.reference_k, args.reference_s
    sampler_fast = timed(lambda: sample_fast(k, s), device, args.repeats)
    sampler_reference = timed(lambda: sample_reference(k, s), device, args.repeats)
    clip_fast = encoder_fast + sampler_fast
    clip_reference = encoder_reference + sampler_reference
    print(f"\nK={k}, S={s}: sampler ms / clip fast {sampler_fast * 1e3:.1f}, reference {sampler_reference * 1e3:.1f} "
          f"({sampler_reference / sampler_fast:.1f}x)")
    print(f"end-to-end ms / frame: fast {clip_fast * 1e3 / frames:.3f}, reference {clip_reference * 1e3 / frames:.3f} "
          f"({clip_reference / clip_fast:.1f}x); paper {PAPER_MS_PER_FRAME} ms (fast / paper = "
          f"{clip_fast * 1e3 / frames / PAPER_MS_PER_FRAME:.4f}); target 0.5 ms")
    with torch.no_grad():
        fast_out = sample_fast(k, s).float()
        reference_out = sample_reference(k, s).float()
    print(f"fast vs reference trajectories (model coordinates): max |diff| "
          f"{(fast_out - reference_out).abs().max().item():.2e}")

    peak_fast = peak_memory_gb(lambda: (encode_fast(), sample_fast(k, s)), device)
    peak_reference = peak_memory_gb(lambda: (encode_reference(), sample_reference(k, s)), device)
    if peak_fast is not None:
        print(f"peak GPU memory GB (weights included): fast {peak_fast:.2f}, reference {peak_reference:.2f}; "
              f"paper {PAPER_PEAK_GB}; target 3")
    else:
        print("peak GPU memory: n/a on CPU")

    if args.profile:
        from torch.profiler import ProfilerActivity, profile, record_function

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])
        with profile(activities=activities) as profiler:
            with record_function("encoder"):
                encode_fast()
            with record_function("sampler"):
                sample_fast(k, s)
            synchronize(device)
        sort_key = "cuda_time_total" if gpu else "cpu_time_total"
        print(f"\nprofile of one fast-path clip (K={k}, S={s}), by {sort_key}:")
        print(profiler.key_averages().table(sort_by=sort_key, row_limit=15))


if __name__ == "__main__":
    main()
