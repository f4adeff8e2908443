"""FLOPs and CPU time of one sampling step: the per-clip condition cache against the paper's recompute-per-call.

At the paper's size (velocity network d=256, 6 blocks, 8 heads, spatial encoder of 2 layers, M=4; a 64-frame
window of 16x16 tokens of width 1024), with the V-JEPA 2 encoder replaced by random features of the shape it
emits for 64 frames (32 tubelets x 256 tokens x 1024). FLOPs are counted by ``torch.utils.flop_counter`` with the
math SDPA backend, so attention matmuls are counted too; wall time uses the default SDPA kernels.

    python benchmarks/bench_sampler.py            # K in {1, 30} FLOPs; wall time at K = 1 and 4
    python benchmarks/bench_sampler.py --results-dir docs/benchmark_results   # + the figures for docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import time

import torch
from results import add_results_argument, config_model, write_section
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode
from transformers import VJEPA2Config

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
from transformers_gazeflow.models.gazeflow.generation_gazeflow import cached_velocity_fn, recompute_velocity_fn


def paper_size_config() -> GazeFlowConfig:
    """The paper's velocity network and condition encoder; the encoder keeps V-JEPA 2 ViT-L's token geometry
    (256 px, patch 16, tubelet 2, D = 1024) but one layer, since it is never run here."""
    return GazeFlowConfig(encoder_config=VJEPA2Config(num_hidden_layers=1), use_lora=False)


def paper_size_model() -> GazeFlowModel:
    return GazeFlowModel(paper_size_config()).eval()


def count_flops(fn) -> int:
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def wall_time(fn, repeats: int) -> float:
    fn()  # warm-up
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--flop-samples", type=int, nargs="+", default=[1, 30], help="K values for FLOP counts")
    parser.add_argument("--time-samples", type=int, nargs="+", default=[1, 4], help="K values for CPU wall time")
    parser.add_argument("--num-steps", type=int, default=5, help="S, for the per-clip totals")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None)
    add_results_argument(parser)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = paper_size_model()
    config = model.config
    frames = config.num_frames
    tokens = torch.randn(1, frames // config.tubelet_size * config.tokens_per_frame, config.encoder_config.hidden_size)
    print(
        f"paper-size velocity network: {sum(p.numel() for p in model.velocity_network.parameters()) / 1e6:.2f}M "
        f"+ condition encoder {sum(p.numel() for p in model.condition_encoder.parameters()) / 1e6:.2f}M params; "
        f"features {tuple(tokens.shape)} for a {frames}-frame window; torch threads {torch.get_num_threads()}"
    )
    with torch.no_grad():
        figures = {"num_steps": args.num_steps, "repeats": args.repeats, **flop_counts(args, model, tokens, frames)}
        figures["wall_time"] = wall_times(args, model, tokens, frames)
    measured = config_model(
        "the paper-size velocity network, random weights", config, "bench_sampler:paper_size_config"
    )
    write_section(args.results_dir, "bench_sampler", "default", figures, [measured])


def flop_counts(args, model: GazeFlowModel, tokens: torch.Tensor, frames: int) -> dict:
    """GFLOP of the condition build and of one step cached against recomputed, per K of ``--flop-samples``."""
    build_flops = count_flops(lambda: model.build_condition(tokens, frames))
    print(f"condition build (once per clip, shared by all K and S): {build_flops / 1e9:.2f} GFLOP")
    print(
        f"{'K':>4} {'cached GFLOP/step':>18} {'recompute GFLOP/step':>21} {'ratio/step':>11} "
        f"{'cached GFLOP/clip':>18} {'recompute GFLOP/clip':>21} {'ratio/clip':>11}   (S={args.num_steps})"
    )
    rows = []
    for samples in args.flop_samples:
        x = torch.randn(1, samples, frames, 2)
        cached = cached_velocity_fn(model, tokens, frames)
        reference = recompute_velocity_fn(model, tokens, frames, samples)
        step_cached = count_flops(lambda fn=cached, x=x: fn(x, 0.5, x))
        step_reference = count_flops(lambda fn=reference, x=x: fn(x, 0.5, x))
        clip_cached = build_flops + args.num_steps * step_cached
        clip_reference = args.num_steps * step_reference
        print(
            f"{samples:>4} {step_cached / 1e9:>18.3f} {step_reference / 1e9:>21.2f} "
            f"{step_reference / step_cached:>10.1f}x {clip_cached / 1e9:>18.2f} {clip_reference / 1e9:>21.1f} "
            f"{clip_reference / clip_cached:>10.1f}x"
        )
        rows.append(
            {
                "K": samples,
                "cached_gflop_per_step": step_cached / 1e9,
                "recompute_gflop_per_step": step_reference / 1e9,
                "cached_gflop_per_clip": clip_cached / 1e9,
                "recompute_gflop_per_clip": clip_reference / 1e9,
            }
        )
    return {"condition_build_gflop": build_flops / 1e9, "flops": rows}


def wall_times(args, model: GazeFlowModel, tokens: torch.Tensor, frames: int) -> list[dict]:
    """CPU ms of one step cached against recomputed, per K of ``--time-samples``, side by side."""
    print(
        f"{'K':>4} {'cached ms/step':>15} {'recompute ms/step':>18} {'ratio':>8}   (CPU wall time, "
        f"mean of {args.repeats})"
    )
    rows = []
    for samples in args.time_samples:
        x = torch.randn(1, samples, frames, 2)
        cached = cached_velocity_fn(model, tokens, frames)
        reference = recompute_velocity_fn(model, tokens, frames, samples)
        t_cached = wall_time(lambda fn=cached, x=x: fn(x, 0.5, x), args.repeats)
        t_reference = wall_time(lambda fn=reference, x=x: fn(x, 0.5, x), args.repeats)
        print(f"{samples:>4} {t_cached * 1e3:>15.1f} {t_reference * 1e3:>18.1f} {t_reference / t_cached:>7.1f}x")
        rows.append({"K": samples, "cached_ms_per_step": 1e3 * t_cached, "recompute_ms_per_step": 1e3 * t_reference})
    return rows


if __name__ == "__main__":
    main()
