"""Latency per frame of the causal streamer (``GazeFlowStreamer``) against recomputing the causal model on the
last W frames for every new frame (what online use costs without the streamer's caches).

The model is the causal variant (paper Appendix F.4) with random weights: the paper's velocity network (d=256,
6 blocks, 8 heads, M=4, W=64) and a V-JEPA 2 encoder with ViT-L's token geometry (256 px, patch 16, tubelet 2,
D=1024) and ``--encoder-layers`` of its 24 layers (24 = the real ViT-L; fewer keeps a CPU run short; the encoder
cost is linear in the layer count). ``--preset tiny`` uses the tiny test configuration instead.

Per frame the streamer runs the encoder on one causal window (``causal_encoder_frames`` frames), the condition
encoder on one frame, and S x calls network passes on the newest frame's K tokens, attending to at most W cached
frames; the recompute baseline encodes W causal windows and samples all W frames. Printed: per-frame latency
(mean / p50 / p95 / max over the frames after warm-up), its split into encoder+condition and sampler, and the
baseline's per-frame latency.

    python benchmarks/bench_streaming.py                         # paper-size network, 2 encoder layers, CPU
    python benchmarks/bench_streaming.py --encoder-layers 24 --device cuda
    python benchmarks/bench_streaming.py --preset tiny --frames 40
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from transformers import VJEPA2Config

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
from transformers_gazeflow.online_streaming import GazeFlowStreamer


def build_model(preset: str, encoder_layers: int, device: str) -> GazeFlowModel:
    torch.manual_seed(0)
    if preset == "tiny":
        config = GazeFlowConfig.tiny(causal=True, use_lora=False)
    else:
        config = GazeFlowConfig(encoder_config=VJEPA2Config(num_hidden_layers=encoder_layers), causal=True,
                                use_lora=False)
    return GazeFlowModel(config).to(device).eval()


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=["paper", "tiny"], default="paper")
    parser.add_argument("--encoder-layers", type=int, default=2, help="V-JEPA 2 layers (24 = ViT-L)")
    parser.add_argument("--frames", type=int, default=80, help="frames streamed (the first --warmup not timed)")
    parser.add_argument("--warmup", type=int, default=4)
    parser.add_argument("--num-samples", type=int, default=30, help="K")
    parser.add_argument("--num-steps", type=int, default=5, help="S")
    parser.add_argument("--solver", default="euler")
    parser.add_argument("--baseline-frames", type=int, default=3, help="frames timed for the recompute baseline")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    model = build_model(args.preset, args.encoder_layers, args.device)
    config = model.config
    size = config.image_size
    frames = torch.randn(args.frames, 1, 3, size, size, generator=torch.Generator().manual_seed(0)).to(args.device)
    streamer = GazeFlowStreamer(model, num_samples=args.num_samples, num_steps=args.num_steps, solver=args.solver,
                                generator=torch.Generator(device=args.device).manual_seed(0))

    condition_times: list[float] = []
    frame_condition = streamer._frame_condition

    def timed_condition(frame):
        synchronize(args.device)
        start = time.perf_counter()
        result = frame_condition(frame)
        synchronize(args.device)
        condition_times.append(time.perf_counter() - start)
        return result

    streamer._frame_condition = timed_condition
    totals: list[float] = []
    for frame in frames:
        synchronize(args.device)
        start = time.perf_counter()
        streamer.push(frame)
        synchronize(args.device)
        totals.append(time.perf_counter() - start)
    totals, condition_times = totals[args.warmup:], condition_times[args.warmup:]
    sampler_times = [t - c for t, c in zip(totals, condition_times)]

    window = config.num_frames
    baseline: list[float] = []
    with torch.no_grad():
        for t in range(args.frames - args.baseline_frames, args.frames):
            prefix = frames[max(0, t - window + 1):t + 1, 0].unsqueeze(0)
            synchronize(args.device)
            start = time.perf_counter()
            model.generate(pixel_values_videos=prefix, num_samples=args.num_samples, num_steps=args.num_steps,
                           solver=args.solver, generator=torch.Generator(device=args.device).manual_seed(0))
            synchronize(args.device)
            baseline.append(time.perf_counter() - start)

    encoder = "tiny" if args.preset == "tiny" else f"ViT-L geometry, {args.encoder_layers}/24 layers"
    print(f"causal GazeFlow ({args.preset}: d={config.hidden_size}, {config.num_hidden_layers} blocks, W={window}; "
          f"encoder {encoder}, causal window {config.causal_encoder_frames} frames), K={args.num_samples}, "
          f"S={args.num_steps} {args.solver}, device {args.device}, {torch.get_num_threads()} threads")
    print(f"streamed {args.frames} frames ({len(totals)} timed); cached frames at the end: {streamer.cached_frames}")
    print("| per frame (ms) | mean | p50 | p95 | max |")
    print("| --- | --- | --- | --- | --- |")
    for name, values in (("streamer, total", totals), ("  encoder + condition", condition_times),
                         ("  sampler (S x calls, newest frame)", sampler_times), ("recompute last W frames", baseline)):
        ms = [1000 * v for v in values]
        print(f"| {name} | {statistics.mean(ms):.1f} | {percentile(ms, 0.5):.1f} | {percentile(ms, 0.95):.1f} | "
              f"{max(ms):.1f} |")
    # frames before W attend to a growing cache; from frame W on the cache is full (W frames) and stays so
    timed_index = range(args.warmup, args.frames)
    filling = [t for i, t in zip(timed_index, totals) if i < window]
    full = [t for i, t in zip(timed_index, totals) if i >= window]
    for name, values in (("cache filling (t < W)", filling), ("cache full (t >= W)", full)):
        if values:
            print(f"{name}: {len(values)} frames, mean {1000 * statistics.mean(values):.1f} ms")
    print(f"speed-up over recomputing the last W frames: {statistics.mean(baseline) / statistics.mean(totals):.1f}x")


if __name__ == "__main__":
    main()
