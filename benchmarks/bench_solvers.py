"""Few-step sampling: Heun and midpoint at S in {1, 2, 3, 5} against Euler at the same number of network calls.

Two settings:

1. **A known ODE.** The data are N(mu, sigma^2 I) in 2D; the exact OT flow-matching velocity of this Gaussian path
   is known in closed form and the exact endpoint of x_0 is mu + sqrt(sigma_min^2 + sigma^2) x_0. Printed: the max
   endpoint error over 2000 noise draws.
2. **The model.** A GazeFlow velocity network (paper size by default: d=256, 6 blocks, W=64; random weights, or a
   trained checkpoint with ``--checkpoint``) on fixed encoder features; the reference is Euler at S=256. Printed: the
   mean endpoint distance to the reference in model coordinates ([-1, 1]; x 320 gives pixels of a 640 px frame) and
   the wall time per clip (K=30). With random weights the field is not a trained flow, so only the known ODE
   speaks to solver accuracy; with a checkpoint the model rows do.

Equal network calls: Euler S=2n vs Heun / midpoint S=n (two calls per step).

    python benchmarks/bench_solvers.py
    python benchmarks/bench_solvers.py --no-model --results-dir docs/benchmark_results   # the known ODE alone
    python benchmarks/bench_solvers.py --checkpoint path/to/gazeflow --preset paper
"""

from __future__ import annotations

import argparse
import math
import time

import torch
from results import add_results_argument, config_model, folder_model, write_section
from transformers import VJEPA2Config

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
from transformers_gazeflow.models.gazeflow.generation_gazeflow import SamplingSettings, sample_window
from transformers_gazeflow.models.gazeflow.scheduling_gazeflow import FlowMatchingScheduler, draw_noise

SIGMA_MIN, SIGMA = 1e-3, 0.4
MU = torch.tensor([0.3, -0.2], dtype=torch.float64)


def gaussian_velocity(x: torch.Tensor, s: float, _self_condition: torch.Tensor) -> torch.Tensor:
    """E[x_1 - (1 - sigma_min) x_0 | x_s] for x_1 ~ N(MU, SIGMA^2 I), x_0 ~ N(0, I) (the exact marginal field)."""
    a = 1 - (1 - SIGMA_MIN) * s
    return MU + (-(1 - SIGMA_MIN) * a + s * SIGMA**2) / (a * a + s * s * SIGMA**2) * (x - s * MU)


def known_ode_error(solver: str, num_steps: int) -> float:
    x0 = torch.randn(2000, 1, 1, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    exact = MU + math.sqrt(SIGMA_MIN**2 + SIGMA**2) * x0
    return (FlowMatchingScheduler(num_steps, solver).sample(gaussian_velocity, x0) - exact).abs().max().item()


def preset_config(preset: str) -> GazeFlowConfig:
    """The random-weight model of ``--preset``: the paper's velocity network (one encoder layer: the encoder does not
    run) or the tiny test model."""
    if preset == "tiny":
        return GazeFlowConfig.tiny(use_lora=False)
    return GazeFlowConfig(encoder_config=VJEPA2Config(num_hidden_layers=1), use_lora=False)


def build_model(args) -> GazeFlowModel:
    if args.checkpoint:
        return GazeFlowModel.from_pretrained(args.checkpoint).eval()
    torch.manual_seed(0)
    return GazeFlowModel(preset_config(args.preset)).eval()


def rows(max_steps: list[int]) -> list[tuple[str, int]]:
    out = []
    for steps in max_steps:
        out += [("euler", 2 * steps), ("heun", steps), ("midpoint", steps)]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, nargs="+", default=[1, 2, 3, 5], help="S of Heun / midpoint")
    parser.add_argument("--preset", choices=["paper", "tiny"], default="paper")
    parser.add_argument("--checkpoint", default=None, help="a trained GazeFlow folder (from_pretrained)")
    parser.add_argument("--num-samples", type=int, default=30, help="K for the model rows")
    parser.add_argument("--reference-steps", type=int, default=256)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--no-model", action="store_true", help="the known ODE only (no model rows)")
    add_results_argument(parser)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    print("## Known ODE (Gaussian data, exact OT velocity): max endpoint error")
    print("| network calls | Euler (S = calls) | Heun (S = calls / 2) | midpoint (S = calls / 2) |")
    print("| --- | --- | --- | --- |")
    known = []
    for steps in args.steps:
        errors = {
            "calls": 2 * steps,
            "euler": known_ode_error("euler", 2 * steps),
            "heun": known_ode_error("heun", steps),
            "midpoint": known_ode_error("midpoint", steps),
        }
        known.append(errors)
        print(f"| {2 * steps} | {errors['euler']:.2e} | {errors['heun']:.2e} | {errors['midpoint']:.2e} |")
    write_section(args.results_dir, "bench_solvers", "known-ode", {"known_ode": known}, [])
    if args.no_model:
        return
    model_rows = model_distances(args)
    write_section(args.results_dir, "bench_solvers", "model", {"model": model_rows}, [measured_model(args)])


def measured_model(args) -> dict:
    if args.checkpoint:
        return folder_model(args.checkpoint, args.checkpoint)
    name = f"{args.preset} size, random weights"
    return config_model(name, preset_config(args.preset), "bench_solvers:preset_config", preset=args.preset)


def model_distances(args) -> list[dict]:
    """Each solver's mean endpoint distance to Euler at ``--reference-steps`` on the model, and its ms per clip."""
    model = build_model(args)
    config = model.config
    frames = config.num_frames
    states = torch.randn(
        1,
        frames // config.tubelet_size * config.tokens_per_frame,
        config.encoder_config.hidden_size,
        generator=torch.Generator().manual_seed(0),
    )
    noise = draw_noise((1, args.num_samples, frames, 2), torch.Generator().manual_seed(1), torch.device("cpu"))
    found = []
    with torch.no_grad():
        euler = SamplingSettings.resolve(model.config, num_steps=args.reference_steps, solver="euler")
        reference = sample_window(model, states, frames, noise, euler)
        label = args.checkpoint or f"{args.preset} size, random weights"
        print(
            f"\n## Model ({label}; K={args.num_samples}, W={frames}): mean endpoint distance to Euler "
            f"S={args.reference_steps}, model coordinates"
        )
        print("| solver | S | network calls | distance | ms per clip |")
        print("| --- | --- | --- | --- | --- |")
        for solver, steps in rows(args.steps):
            settings = SamplingSettings.resolve(model.config, num_steps=steps, solver=solver)
            sample_window(model, states, frames, noise, settings)  # warm-up
            start = time.perf_counter()
            result = sample_window(model, states, frames, noise, settings)
            elapsed = 1000 * (time.perf_counter() - start)
            distance = (result - reference).norm(dim=-1).mean().item()
            calls = steps * FlowMatchingScheduler(steps, solver).calls_per_step
            print(f"| {solver} | {steps} | {calls} | {distance:.4f} | {elapsed:.0f} |")
            found.append({"solver": solver, "S": steps, "calls": calls, "distance": distance, "ms_per_clip": elapsed})
    return found


if __name__ == "__main__":
    main()
