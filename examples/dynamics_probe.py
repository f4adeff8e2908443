#!/usr/bin/env python
"""The pure-dynamics probe: can GazeFlow learn how gaze moves when the video says nothing?

A known fixation/saccade process (``transformers_gazeflow.data.synthetic_tasks.simulate_fixation_saccade``:
drifting fixations, main-sequence saccades, unit coordinates at 24 fps) is the whole dataset, and the condition is
uninformative (the same constant encoder tokens for every window), so the best model reproduces the process's
step-size distribution. The script trains each objective for a set budget, samples K trajectories per window at
each S, and prints the step-distribution figures against the true process:

    python examples/dynamics_probe.py                                   # flow matching and regression, S = 5, 50
    python examples/dynamics_probe.py --max_cpu_minutes 15 --seeds 0 1 2
    python examples/dynamics_probe.py --config_overrides "hidden_size=128,num_hidden_layers=4"
    python examples/dynamics_probe.py --flow_time_sampling uniform late_quadratic --batch_size 64 --seeds 0 1 2

Figures (steps are ``|g_t - g_{t-1}|`` in unit coordinates, pooled over windows and samples):

* median and mean step as ratios to the true process's;
* the paper's JSD (base e, 100 linear bins over the union range, Appendix E.3), which a motionless trajectory can
  score well on (its steps all fall in the first bin, like most fixation steps);
* a log-bin JSD: 50 bins log-spaced from 1% of the true median step to the largest step, plus one bin below, so
  sub-pixel fixation steps and saccades weigh by how often they occur;
* W1, the Wasserstein-1 distance between the two step distributions, as a ratio to the true mean step (a motionless
  trajectory scores exactly 1).

Beside the methods it prints two references: a motionless trajectory, and an independent draw of the true process
(the floor: what a perfect model scores with this many samples). Every run reports its CPU and wall time.
"""

from __future__ import annotations

import argparse
import ast
import sys
import time
from dataclasses import dataclass

import numpy as np
import torch
from scipy.stats import wasserstein_distance
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from transformers import VJEPA2Config, get_cosine_with_min_lr_schedule_with_warmup

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
from transformers_gazeflow.data.synthetic_tasks import simulate_fixation_saccade
from transformers_gazeflow.metrics.dynamics import displacement_histograms, jensen_shannon
from transformers_gazeflow.models.gazeflow.configuration_gazeflow import FLOW_TIME_SAMPLINGS
from transformers_gazeflow.models.gazeflow.geometry import unit_to_model

OBJECTIVES = ("flow_matching", "regression", "diffusion")
LOG_BINS = 50
LOG_BIN_FLOOR = 0.01
"""The first log-spaced edge is this fraction of the true median step (smaller steps share one bin)."""
FPS = 24.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Train GazeFlow on a known fixation/saccade process with an "
        "uninformative condition and compare its step distribution."
    )
    parser.add_argument("--objectives", nargs="+", default=["flow_matching", "regression"], choices=OBJECTIVES)
    parser.add_argument("--num_steps", type=int, nargs="+", default=[5, 50], help="S values to sample with")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument(
        "--flow_time_sampling",
        nargs="+",
        default=["uniform"],
        choices=FLOW_TIME_SAMPLINGS,
        help="flow matching's training-time distributions to compare (config.flow_time_sampling; "
        "'uniform' is the paper's); each one is a separate flow-matching run",
    )
    parser.add_argument("--max_train_steps", type=int, default=4000)
    parser.add_argument(
        "--max_cpu_minutes",
        type=float,
        default=None,
        help="stop each run's training once it has used this much CPU time (all objectives and seeds get the same cap)",
    )
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    parser.add_argument("--num_warmup_steps", type=int, default=100)
    parser.add_argument("--weight_decay", type=float, default=1e-4)
    parser.add_argument("--ema_decay", type=float, default=0.995)
    parser.add_argument("--num_frames", type=int, default=16, help="window length T (frames)")
    parser.add_argument(
        "--config_overrides",
        default="",
        help="comma-separated key=value over the probe's velocity network, e.g. 'hidden_size=128'",
    )
    parser.add_argument("--eval_windows", type=int, default=64, help="windows sampled per evaluation")
    parser.add_argument("--num_samples", type=int, default=8, help="K trajectories per window (flow matching)")
    parser.add_argument("--reference_windows", type=int, default=2000, help="windows of the true process")
    args = parser.parse_args(argv)
    for name in ("max_train_steps", "batch_size", "eval_windows", "num_samples", "reference_windows"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    if any(s < 1 for s in args.num_steps):
        parser.error(f"--num_steps must all be >= 1, got {args.num_steps}")
    if args.num_frames < 2 or args.num_frames % 2:
        parser.error(
            f"--num_frames must be an even int >= 2 (the encoder's tubelet is 2 frames), got {args.num_frames}"
        )
    if args.max_cpu_minutes is not None and args.max_cpu_minutes <= 0:
        parser.error(f"--max_cpu_minutes must be > 0, got {args.max_cpu_minutes}")
    try:
        args.overrides = parse_overrides(args.config_overrides)
        for objective, sampling in probe_variants(args):
            probe_config(objective, args.num_frames, args.overrides, sampling)
    except ValueError as err:
        parser.error(str(err))
    return args


def parse_overrides(text: str) -> dict:
    """``'a=1,b=x'`` -> ``{'a': 1, 'b': 'x'}`` (Python literals where they parse)."""
    overrides = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        if "=" not in item:
            raise ValueError(f"--config_overrides: expected key=value, got {item!r}")
        key, raw = (s.strip() for s in item.split("=", 1))
        try:
            overrides[key] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            overrides[key] = raw
    return overrides


# ---------------------------------------------------------------------------------------------------- figures
def steps_of(trajectories: np.ndarray) -> np.ndarray:
    """Per-step displacements ``|g_t - g_{t-1}|`` of ``[..., T, 2]`` trajectories, flattened."""
    return np.linalg.norm(np.diff(trajectories, axis=-2), axis=-1).reshape(-1)


def log_bin_jensen_shannon(steps: np.ndarray, true_steps: np.ndarray, bins: int = LOG_BINS) -> float:
    """JSD (base e) of two step distributions over ``bins`` log-spaced bins from ``LOG_BIN_FLOOR`` x the true median
    step to the largest step, plus one bin ``[0, first edge)``."""
    floor = LOG_BIN_FLOOR * float(np.median(true_steps))
    top = max(float(steps.max()), float(true_steps.max()), floor * 10)
    edges = np.concatenate([[0.0], np.geomspace(floor, top * (1 + 1e-9), bins)])
    return jensen_shannon(
        np.histogram(steps, edges)[0].astype(float) + 0.0, np.histogram(true_steps, edges)[0].astype(float)
    )


def step_figures(steps: np.ndarray, true_steps: np.ndarray) -> dict[str, float]:
    """Median/mean step ratios, the paper's linear-bin JSD, the log-bin JSD and W1 / true mean step."""
    linear_hist, true_hist, _ = displacement_histograms(steps, true_steps)
    true_mean = float(true_steps.mean())
    return {
        "median_ratio": float(np.median(steps) / np.median(true_steps)),
        "mean_ratio": float(steps.mean() / true_mean),
        "jsd_linear": jensen_shannon(linear_hist, true_hist),
        "jsd_log": log_bin_jensen_shannon(steps, true_steps),
        "w1_ratio": float(wasserstein_distance(steps, true_steps) / true_mean),
    }


# ---------------------------------------------------------------------------------------------------- model
def probe_variants(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(objective, flow_time_sampling) runs: flow matching once per ``--flow_time_sampling``, the others once."""
    return [
        (objective, sampling)
        for objective in args.objectives
        for sampling in (args.flow_time_sampling if objective == "flow_matching" else ["uniform"])
    ]


def variant_name(objective: str, sampling: str) -> str:
    return f"{objective} ({sampling} s)" if objective == "flow_matching" else objective


def probe_config(
    objective: str, num_frames: int, overrides: dict, flow_time_sampling: str = "uniform"
) -> GazeFlowConfig:
    """The probe's model: a one-token-per-frame encoder (its tokens are replaced by constants) and the small
    recipe's velocity network (d=64, 3 DenoiserBlocks, 4 heads), with ``overrides`` on top."""
    encoder = VJEPA2Config(
        crop_size=16,
        patch_size=16,
        tubelet_size=2,
        frames_per_clip=num_frames,
        hidden_size=8,
        num_hidden_layers=1,
        num_attention_heads=2,
        mlp_ratio=2.0,
        pred_hidden_size=8,
        pred_num_hidden_layers=1,
        pred_num_attention_heads=2,
    )
    settings = dict(
        hidden_size=64,
        num_hidden_layers=3,
        num_attention_heads=4,
        intermediate_size=256,
        num_spatial_layers=1,
        num_task_queries=4,
        num_frames=num_frames,
        window_stride=num_frames // 2,
        use_lora=False,
        objective=objective,
        num_samples=1 if objective == "regression" else 8,
        flow_time_sampling=flow_time_sampling,
    )
    settings.update(overrides)
    try:
        return GazeFlowConfig(encoder_config=encoder, **settings)
    except (TypeError, ValueError) as err:
        raise ValueError(f"--config_overrides gives an invalid config: {err}") from err


def constant_tokens(config: GazeFlowConfig, batch: int) -> torch.Tensor:
    """The uninformative condition: one fixed random token, the same for every frame, window and step."""
    groups = config.num_frames // config.encoder_config.tubelet_size
    vector = torch.randn(1, 1, config.encoder_config.hidden_size, generator=torch.Generator().manual_seed(1234))
    return vector.expand(batch, groups * config.tokens_per_frame, -1).contiguous()


@dataclass
class RunResult:
    objective: str  # the row name: the objective, with flow matching's time sampling
    seed: int
    train_steps: int
    cpu_seconds: float
    wall_seconds: float
    figures: dict[int, dict[str, float]]  # S -> figures (regression: one entry under S = 1)


def train_and_probe(
    args: argparse.Namespace, objective: str, seed: int, true_steps: np.ndarray, flow_time_sampling: str = "uniform"
) -> RunResult:
    torch.manual_seed(seed)
    config = probe_config(objective, args.num_frames, args.overrides, flow_time_sampling)
    model = GazeFlowModel(config)
    ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(args.ema_decay))
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=args.learning_rate, weight_decay=args.weight_decay)
    scheduler = get_cosine_with_min_lr_schedule_with_warmup(
        optimizer,
        min(args.num_warmup_steps, args.max_train_steps),
        args.max_train_steps,
        min_lr=args.learning_rate * 0.01,
    )
    rng = np.random.default_rng([seed, 7])
    tokens = constant_tokens(config, args.batch_size)
    cpu_start, wall_start = time.process_time(), time.time()
    cap = None if args.max_cpu_minutes is None else args.max_cpu_minutes * 60
    steps_done = 0
    model.train()
    for step in range(1, args.max_train_steps + 1):
        gaze = torch.from_numpy(
            unit_to_model(simulate_fixation_saccade(rng, args.batch_size, args.num_frames, FPS))
        ).float()
        loss = model(encoder_hidden_states=tokens, gaze=gaze).loss
        if not torch.isfinite(loss):
            raise RuntimeError(f"non-finite loss {loss.item()} at step {step} ({objective}, seed {seed})")
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        optimizer.step()
        scheduler.step()
        ema.update_parameters(model)
        steps_done = step
        if cap is not None and time.process_time() - cpu_start >= cap:
            break
    cpu_seconds, wall_seconds = time.process_time() - cpu_start, time.time() - wall_start
    trained = ema.module.eval()
    figures = {}
    eval_tokens = constant_tokens(config, args.eval_windows)
    for num_steps in [1] if objective == "regression" else args.num_steps:
        samples = 1 if objective == "regression" else args.num_samples
        out = trained.generate(
            encoder_hidden_states=eval_tokens,
            num_samples=samples,
            num_steps=num_steps,
            generator=torch.Generator().manual_seed(10_000 + seed),
        )
        figures[num_steps] = step_figures(steps_of(out.trajectories.numpy().astype(np.float64)), true_steps)
    return RunResult(variant_name(objective, flow_time_sampling), seed, steps_done, cpu_seconds, wall_seconds, figures)


# ---------------------------------------------------------------------------------------------------- report
COLUMNS = ("median_ratio", "mean_ratio", "jsd_linear", "jsd_log", "w1_ratio")
HEADER = (
    "| Method | S | seeds | train steps | CPU s | median step / true | mean step / true | JSD (linear bins) | "
    "JSD (log bins) | W1 / true mean |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
)


def _row(name: str, num_steps: str, seeds: str, train_steps: str, cpu: str, values: list[dict[str, float]]) -> str:
    cells = []
    for key in COLUMNS:
        column = np.array([v[key] for v in values])
        cells.append(f"{column.mean():.3f}" + (f" ± {column.std(ddof=1):.3f}" if len(column) > 1 else ""))
    return f"| {name} | {num_steps} | {seeds} | {train_steps} | {cpu} | " + " | ".join(cells) + " |"


def report(results: list[RunResult], references: dict[str, dict[str, float]]) -> str:
    lines = [HEADER]
    for name, figures in references.items():
        lines.append(_row(name, "-", "-", "-", "-", [figures]))
    by_key: dict[tuple[str, int], list[RunResult]] = {}
    for result in results:
        for num_steps in result.figures:
            by_key.setdefault((result.objective, num_steps), []).append(result)
    for (objective, num_steps), runs in by_key.items():
        lines.append(
            _row(
                objective,
                str(num_steps) if objective != "regression" else "-",
                str(len(runs)),
                f"{np.mean([r.train_steps for r in runs]):.0f}",
                f"{np.mean([r.cpu_seconds for r in runs]):.0f}",
                [r.figures[num_steps] for r in runs],
            )
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    true_steps = steps_of(
        simulate_fixation_saccade(np.random.default_rng(999), args.reference_windows, args.num_frames, FPS)
    )
    independent = steps_of(
        simulate_fixation_saccade(
            np.random.default_rng(998), args.eval_windows * args.num_samples, args.num_frames, FPS
        )
    )
    references = {
        "true process (independent draw: the floor)": step_figures(independent, true_steps),
        "motionless": step_figures(np.zeros(true_steps.size), true_steps),
    }
    print(
        f"true process: median step {np.median(true_steps):.5f}, mean step {true_steps.mean():.5f} (unit "
        f"coordinates), {args.num_frames}-frame windows at {FPS:g} fps",
        flush=True,
    )
    results = []
    for seed in args.seeds:
        for objective, sampling in probe_variants(args):
            result = train_and_probe(args, objective, seed, true_steps, sampling)
            results.append(result)
            summary = ", ".join(
                f"S={s}: median x{f['median_ratio']:.2f}, log-JSD {f['jsd_log']:.3f}, W1 x{f['w1_ratio']:.2f}"
                for s, f in result.figures.items()
            )
            print(
                f"{result.objective} seed {seed}: {result.train_steps} steps, {result.cpu_seconds:.0f} CPU s, "
                f"{result.wall_seconds:.0f} wall s; {summary}",
                flush=True,
            )
    print()
    print(report(results, references))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (ValueError, RuntimeError) as err:
        print(f"dynamics_probe.py: error: {err}", file=sys.stderr)
        sys.exit(1)
