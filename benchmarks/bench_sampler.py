"""FLOPs and CPU time of one sampling step: the per-clip condition cache against the paper's recompute-per-call.

At the paper's size (velocity network d=256, 6 blocks, 8 heads, spatial encoder of 2 layers, M=4; a 64-frame
window of 16x16 tokens of width 1024), with the V-JEPA 2 encoder replaced by random features of the shape it
emits for 64 frames (32 tubelets x 256 tokens x 1024). FLOPs are counted by ``torch.utils.flop_counter`` with the
math SDPA backend, so attention matmuls are counted too; wall time uses the default SDPA kernels.

    python benchmarks/bench_sampler.py            # K in {1, 30} FLOPs; wall time at K = 1 and 4
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode
from transformers import VJEPA2Config

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
from transformers_gazeflow.models.gazeflow.generation_gazeflow import cached_velocity_fn, recompute_velocity_fn


def paper_size_model() -> GazeFlowModel:
    """The paper's velocity network and condition encoder; the encoder keeps V-JEPA 2 ViT-L's token geometry
    (256 px, patch 16, tubelet 2, D = 1024) but one layer, since it is never run here."""
    encoder = VJEPA2Config(num_hidden_layers=1)
    return GazeFlowModel(GazeFlowConfig(encoder_config=encoder, use_lora=False)).eval()


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
        build_flops = count_flops(lambda: model.build_condition(tokens, frames))
        print(f"condition build (once per clip, shared by all K and S): {build_flops / 1e9:.2f} GFLOP")
        print(
            f"{'K':>4} {'cached GFLOP/step':>18} {'recompute GFLOP/step':>21} {'ratio/step':>11} "
            f"{'cached GFLOP/clip':>18} {'recompute GFLOP/clip':>21} {'ratio/clip':>11}   (S={args.num_steps})"
        )
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

        print(
            f"{'K':>4} {'cached ms/step':>15} {'recompute ms/step':>18} {'ratio':>8}   (CPU wall time, "
            f"mean of {args.repeats})"
        )
        for samples in args.time_samples:
            x = torch.randn(1, samples, frames, 2)
            cached = cached_velocity_fn(model, tokens, frames)
            reference = recompute_velocity_fn(model, tokens, frames, samples)
            t_cached = wall_time(lambda fn=cached, x=x: fn(x, 0.5, x), args.repeats)
            t_reference = wall_time(lambda fn=reference, x=x: fn(x, 0.5, x), args.repeats)
            print(f"{samples:>4} {t_cached * 1e3:>15.1f} {t_reference * 1e3:>18.1f} {t_reference / t_cached:>7.1f}x")


if __name__ == "__main__":
    main()
