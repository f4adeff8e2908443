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
    python examples/dynamics_probe.py --objectives flow_matching --noise_correlation 0 0.9 --solvers euler heun \
        --time_grid_powers 1 2 --endpoint_times 0.8 0.96 --clip_frames 64 --num_steps 1 2 5 50

Figures (steps are ``|g_t - g_{t-1}|`` in unit coordinates, pooled over windows and samples):

* median and mean step as ratios to the true process's;
* the paper's JSD (base e, 100 linear bins over the union range, Appendix E.3), which a motionless trajectory can
  score well on (its steps all fall in the first bin, like most fixation steps);
* a log-bin JSD: 50 bins log-spaced from 1% of the true median step to the largest step, plus one bin below, so
  sub-pixel fixation steps and saccades weigh by how often they occur;
* W1, the Wasserstein-1 distance between the two step distributions, as a ratio to the true mean step (a motionless
  trajectory scores exactly 1).

Beyond the default sampler (Euler, S uniform steps, one window), each trained model can be read with more
samplers at no training cost (``--solvers``, ``--time_grid_powers``, ``--noise_scales``: the temperature tau of
x_0 = tau e), along one long Euler path at given flow times
(``--endpoint_times``: the network's one-shot endpoint estimate x1_hat = x_s + (1 - s) v there), and on whole clips
of ``--clip_frames`` frames through the coherent windows of ``generate()``. ``--noise_correlation`` trains and samples
with the AR(1) base noise over frames (``GazeFlowConfig.noise_correlation``); ``--eval_at_steps`` reads the model at
points of one run's training (a learning curve; the cosine schedule is the whole run's); ``--save_dir`` /
``--load_dir`` keep the trained models, so a sampler is read again without training.

Beside the methods it prints two references: a motionless trajectory, and an independent draw of the true process
(the floor: what a perfect model scores with this many samples). Every run reports its CPU and wall time.
"""

from __future__ import annotations

import argparse
import ast
import itertools
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from scipy.stats import wasserstein_distance
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from transformers import VJEPA2Config, get_cosine_with_min_lr_schedule_with_warmup

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
from transformers_gazeflow.analysis.capture import config_number
from transformers_gazeflow.data.synthetic_tasks import simulate_fixation_saccade
from transformers_gazeflow.metrics.dynamics import displacement_histograms, jensen_shannon
from transformers_gazeflow.models.gazeflow.configuration_gazeflow import FLOW_TIME_SAMPLINGS, SOLVERS
from transformers_gazeflow.models.gazeflow.generation_gazeflow import cached_velocity_fn, to_unit_predictions
from transformers_gazeflow.models.gazeflow.geometry import unit_to_model
from transformers_gazeflow.models.gazeflow.scheduling_gazeflow import (
    FlowMatchingScheduler,
    correlate_noise,
    draw_noise,
    estimate_endpoint,
)
from transformers_gazeflow.training.script_errors import run_script

OBJECTIVES = ("flow_matching", "regression", "diffusion")
LOG_BINS = 50
LOG_BIN_FLOOR = 0.01
"""The first log-spaced edge is this fraction of the true median step (smaller steps share one bin)."""
FPS = 24.0
TRAINING_FILE = "probe_training.json"
"""``--save_dir``: each run's [train steps, CPU s, wall s], beside its model."""


def add_reading_arguments(parser: argparse.ArgumentParser) -> None:
    """How each trained model is read (no training cost): solvers, time grids, temperatures, endpoints, clips."""
    parser.add_argument("--solvers", nargs="+", default=["euler"], choices=SOLVERS, help="ODE solvers to read with")
    parser.add_argument(
        "--time_grid_powers",
        type=float,
        nargs="+",
        default=[1.0],
        help="sampling time grids s_i = 1 - (1 - i / S)^p to read with (1: the paper's uniform grid)",
    )
    parser.add_argument(
        "--noise_scales",
        type=config_number("noise_scale"),
        nargs="+",
        default=[1.0],
        help="sampling temperatures tau (x_0 = tau e) to read with (1: the paper's x_0)",
    )
    parser.add_argument(
        "--endpoint_times",
        type=float,
        nargs="*",
        default=[],
        help="flow times s at which the endpoint estimate x1_hat = x_s + (1 - s) v is read along one Euler path "
        "of the largest --num_steps",
    )
    parser.add_argument(
        "--clip_frames",
        type=int,
        default=0,
        help="also sample whole clips of this many frames through generate()'s coherent windows (stride T / 2)",
    )
    parser.add_argument("--clip_count", type=int, default=16, help="clips sampled with --clip_frames")


def check_reading_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The checks of :func:`add_reading_arguments`' values (``--clip_frames`` against ``args.num_frames``)."""
    if args.clip_count < 1:
        parser.error(f"--clip_count must be >= 1, got {args.clip_count}")
    if any(not p >= 1.0 for p in args.time_grid_powers):
        parser.error(f"--time_grid_powers must all be >= 1, got {args.time_grid_powers}")
    if any(not 0.0 <= t < 1.0 for t in args.endpoint_times):
        parser.error(f"--endpoint_times must all be in [0, 1), got {args.endpoint_times}")
    if args.clip_frames and args.clip_frames <= args.num_frames:
        parser.error(f"--clip_frames must be 0 or more than --num_frames={args.num_frames}, got {args.clip_frames}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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
    parser.add_argument(
        "--noise_correlation",
        type=float,
        nargs="+",
        default=[0.0],
        help="lag-1 correlations rho of the AR(1) base noise over frames to compare (config.noise_correlation; "
        "0 is the paper's independent frames); each one is a separate flow-matching run",
    )
    add_reading_arguments(parser)
    parser.add_argument("--max_train_steps", type=int, default=4000)
    parser.add_argument(
        "--max_cpu_minutes",
        type=float,
        default=None,
        help="stop each run's training once it has used this much CPU time (all objectives and seeds get the same cap)",
    )
    parser.add_argument(
        "--eval_at_steps",
        type=int,
        nargs="*",
        default=[],
        help="also read each run's EMA model after this many training steps (a learning curve; the CPU time is "
        "reported beside)",
    )
    parser.add_argument("--save_dir", default=None, help="save each run's EMA model under this folder")
    parser.add_argument("--load_dir", default=None, help="read models saved by --save_dir instead of training")
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
    check_args(parser, args)
    return args


def check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
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
    if any(not 0.0 <= rho < 1.0 for rho in args.noise_correlation):
        parser.error(f"--noise_correlation must all be in [0, 1), got {args.noise_correlation}")
    check_reading_arguments(parser, args)
    if any(not 1 <= n < args.max_train_steps for n in args.eval_at_steps):
        parser.error(f"--eval_at_steps must all be in [1, --max_train_steps), got {args.eval_at_steps}")
    if args.save_dir and args.load_dir:
        parser.error("give at most one of --save_dir and --load_dir")
    try:
        args.overrides = parse_overrides(args.config_overrides)
        for variant in probe_variants(args):
            probe_config(variant, args.num_frames, args.overrides)
    except ValueError as err:
        parser.error(str(err))


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
@dataclass(frozen=True)
class Variant:
    """One training run's recipe: the objective, flow matching's time sampling and its base noise's correlation."""

    objective: str
    flow_time_sampling: str = "uniform"
    noise_correlation: float = 0.0

    @property
    def name(self) -> str:
        if self.objective != "flow_matching":
            return self.objective
        noise = f", rho {self.noise_correlation:g}" if self.noise_correlation else ""
        return f"{self.objective} ({self.flow_time_sampling} s{noise})"

    @property
    def folder(self) -> str:
        return f"{self.objective}-{self.flow_time_sampling}-rho{self.noise_correlation:g}"


def probe_variants(args: argparse.Namespace) -> list[Variant]:
    """Training runs: flow matching once per ``--flow_time_sampling`` x ``--noise_correlation``, the others once."""
    variants = []
    for objective in args.objectives:
        if objective != "flow_matching":
            variants.append(Variant(objective))
            continue
        variants += [Variant(objective, s, rho) for s in args.flow_time_sampling for rho in args.noise_correlation]
    return variants


def probe_config(variant: Variant, num_frames: int, overrides: dict) -> GazeFlowConfig:
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
        objective=variant.objective,
        num_samples=1 if variant.objective == "regression" else 8,
        flow_time_sampling=variant.flow_time_sampling,
        noise_correlation=variant.noise_correlation,
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
    objective: str  # the row name: the variant's name
    seed: int
    train_steps: int
    cpu_seconds: float
    wall_seconds: float
    figures: dict[tuple[str, int], dict[str, float]]  # (sampler, S) -> figures (regression: one entry, S = 1)


@dataclass
class Truth:
    """The true process's steps: within single windows and, with ``--clip_frames``, within whole clips."""

    window_steps: np.ndarray
    clip_steps: np.ndarray | None = None


@dataclass
class EmaTraining:
    """The probe's optimisation: AdamW on the trainable parameters, a cosine schedule to 1% of the rate after a
    linear warmup, gradient norms clipped at 1, and an exponential moving average of the weights (the model read)."""

    model: GazeFlowModel
    ema: AveragedModel
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler

    @classmethod
    def start(cls, model: GazeFlowModel, args: argparse.Namespace, warmup_steps: int, total_steps: int) -> EmaTraining:
        """From ``args.learning_rate``, ``args.weight_decay`` and ``args.ema_decay``."""
        ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(args.ema_decay))
        trainable = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(trainable, lr=args.learning_rate, weight_decay=args.weight_decay)
        min_lr = args.learning_rate * 0.01
        scheduler = get_cosine_with_min_lr_schedule_with_warmup(optimizer, warmup_steps, total_steps, min_lr=min_lr)
        return cls(model, ema, optimizer, scheduler)

    def step(self, loss: torch.Tensor) -> None:
        self.optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for p in self.model.parameters() if p.requires_grad], 1.0)
        self.optimizer.step()
        self.scheduler.step()
        self.ema.update_parameters(self.model)


def train_and_probe(args: argparse.Namespace, variant: Variant, seed: int, truth: Truth) -> list[RunResult]:
    """Train one run (or load it, ``--load_dir``) and read it: at the end, and at each of ``--eval_at_steps``."""
    torch.manual_seed(seed)
    config = probe_config(variant, args.num_frames, args.overrides)
    folder = f"{variant.folder}-seed{seed}"
    if args.load_dir:
        model = GazeFlowModel.from_pretrained(f"{args.load_dir}/{folder}").eval()
        steps, cpu_seconds, wall_seconds = json.loads(Path(args.load_dir, folder, TRAINING_FILE).read_text())
        return [RunResult(variant.name, seed, steps, cpu_seconds, wall_seconds, probe_model(args, model, seed, truth))]
    model = GazeFlowModel(config)
    warmup = min(args.num_warmup_steps, args.max_train_steps)
    training = EmaTraining.start(model, args, warmup, args.max_train_steps)
    rng = np.random.default_rng([seed, 7])
    tokens = constant_tokens(config, args.batch_size)
    cap = None if args.max_cpu_minutes is None else args.max_cpu_minutes * 60
    checkpoints = set(args.eval_at_steps)
    results, reading_cpu, steps_done = [], 0.0, 0
    cpu_start, wall_start = time.process_time(), time.time()
    model.train()
    for step in range(1, args.max_train_steps + 1):
        gaze = torch.from_numpy(
            unit_to_model(simulate_fixation_saccade(rng, args.batch_size, args.num_frames, FPS))
        ).float()
        loss = model(encoder_hidden_states=tokens, gaze=gaze).loss
        if not torch.isfinite(loss):
            raise RuntimeError(f"non-finite loss {loss.item()} at step {step} ({variant.name}, seed {seed})")
        training.step(loss)
        steps_done = step
        used = time.process_time() - cpu_start - reading_cpu
        if step in checkpoints:
            reading_start = time.process_time()
            figures = probe_model(args, training.ema.module.eval(), seed, truth)
            name = f"{variant.name} at step {step}"
            results.append(RunResult(name, seed, step, used, time.time() - wall_start, figures))
            reading_cpu += time.process_time() - reading_start
        if cap is not None and used >= cap:
            break
    cpu_seconds = time.process_time() - cpu_start - reading_cpu
    wall_seconds = time.time() - wall_start
    trained = training.ema.module.eval()
    if args.save_dir:
        trained.save_pretrained(f"{args.save_dir}/{folder}")
        Path(args.save_dir, folder, TRAINING_FILE).write_text(json.dumps([steps_done, cpu_seconds, wall_seconds]))
    figures = probe_model(args, trained, seed, truth)
    return results + [RunResult(variant.name, seed, steps_done, cpu_seconds, wall_seconds, figures)]


# ---------------------------------------------------------------------------------------------------- reading
def sampler_name(solver: str, power: float, noise_scale: float = 1.0) -> str:
    """A row's sampler suffix: empty for the paper's Euler on the uniform grid from x_0 = e."""
    parts = ([] if solver == "euler" else [solver]) + ([] if power == 1.0 else [f"grid p={power:g}"])
    return ", ".join(parts + ([] if noise_scale == 1.0 else [f"tau={noise_scale:g}"]))


def probe_model(
    args: argparse.Namespace, model: GazeFlowModel, seed: int, truth: Truth
) -> dict[tuple[str, int], dict[str, float]]:
    """Step figures of one trained model for every sampler asked for (see the module docstring)."""
    config = model.config
    if config.objective == "regression":
        out = model.generate(encoder_hidden_states=constant_tokens(config, args.eval_windows), num_samples=1)
        return {("", 1): step_figures(steps_of(out.trajectories.numpy().astype(np.float64)), truth.window_steps)}
    velocity = cached_velocity_fn(model, constant_tokens(config, args.eval_windows), config.num_frames)
    shape = (args.eval_windows, args.num_samples, config.num_frames, 2)
    figures = {}
    with torch.no_grad():
        for solver in args.solvers:
            for power, tau, num_steps in itertools.product(args.time_grid_powers, args.noise_scales, args.num_steps):
                noise = tau * window_noise(config, shape, seed)
                sampler = FlowMatchingScheduler(num_steps, solver, config.sigma_min, power)
                sampled = to_unit_predictions(sampler.sample(velocity, noise))[0]
                figures[(sampler_name(solver, power, tau), num_steps)] = step_figures(
                    steps_of(sampled.numpy().astype(np.float64)), truth.window_steps
                )
        figures.update(endpoint_figures(args, velocity, window_noise(config, shape, seed), truth))
        if args.clip_frames:
            figures.update(clip_figures(args, model, seed, truth))
    return figures


def window_noise(config: GazeFlowConfig, shape: tuple[int, ...], seed: int) -> torch.Tensor:
    """x_0 of one reading: the draw ``generate()`` makes with the reading's seed, under the model's prior."""
    white = draw_noise(shape, torch.Generator().manual_seed(10_000 + seed), torch.device("cpu"))
    return correlate_noise(white, config.noise_correlation)


def endpoint_figures(
    args: argparse.Namespace, velocity, noise: torch.Tensor, truth: Truth
) -> dict[tuple[str, int], dict[str, float]]:
    """Step figures of x1_hat = x_s + (1 - s) v at ``--endpoint_times`` along one Euler path of the largest S (what
    a sampler whose last step starts at s returns)."""
    if not args.endpoint_times:
        return {}
    num_steps = max(args.num_steps)
    grid = FlowMatchingScheduler(num_steps, "euler").timesteps()
    wanted = {min(range(num_steps), key=lambda i: abs(grid[i] - s)) for s in args.endpoint_times}
    figures, sample, self_condition = {}, noise, torch.zeros_like(noise)
    for i in range(num_steps):
        v = velocity(sample, grid[i], self_condition)
        self_condition = estimate_endpoint(sample, grid[i], v)
        if i in wanted:
            endpoint = to_unit_predictions(self_condition)[0].numpy().astype(np.float64)
            figures[(f"x1_hat at s={grid[i]:.2f}", num_steps)] = step_figures(steps_of(endpoint), truth.window_steps)
        sample = sample + (grid[i + 1] - grid[i]) * v
    return figures


def clip_figures(
    args: argparse.Namespace, model: GazeFlowModel, seed: int, truth: Truth
) -> dict[tuple[str, int], dict[str, float]]:
    """Step figures of whole clips of ``--clip_frames`` frames sampled by ``generate()`` (coherent windows, stride
    T / 2; Euler, uniform grid), every window reading the constant condition."""
    config = model.config
    model.encode_video = lambda frames: constant_tokens(config, frames.shape[0])  # the uninformative condition
    size = config.image_size
    frames = torch.zeros(args.clip_count, args.clip_frames, config.encoder_config.in_chans, size, size)
    figures = {}
    for num_steps in args.num_steps:
        out = model.generate(
            pixel_values_videos=frames,
            num_samples=args.num_samples,
            num_steps=num_steps,
            generator=torch.Generator().manual_seed(20_000 + seed),
        )
        steps = steps_of(out.trajectories.numpy().astype(np.float64))
        figures[(f"whole {args.clip_frames}-frame clips", num_steps)] = step_figures(steps, truth.clip_steps)
    del model.encode_video
    return figures


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
    by_key: dict[tuple[str, str, int], list[RunResult]] = {}
    for result in results:
        for sampler, num_steps in result.figures:
            by_key.setdefault((result.objective, sampler, num_steps), []).append(result)
    for (objective, sampler, num_steps), runs in by_key.items():
        lines.append(
            _row(
                objective + (f" [{sampler}]" if sampler else ""),
                str(num_steps) if objective != "regression" else "-",
                str(len(runs)),
                f"{np.mean([r.train_steps for r in runs]):.0f}",
                f"{np.mean([r.cpu_seconds for r in runs]):.0f}",
                [r.figures[(sampler, num_steps)] for r in runs],
            )
        )
    return "\n".join(lines)


def true_process(args: argparse.Namespace) -> tuple[Truth, dict[str, dict[str, float]]]:
    """The true steps (windows; whole clips with ``--clip_frames``) and the two reference rows."""
    true_steps = steps_of(
        simulate_fixation_saccade(np.random.default_rng(999), args.reference_windows, args.num_frames, FPS)
    )
    clip_steps = None
    if args.clip_frames:
        count = max(1, args.reference_windows * args.num_frames // args.clip_frames)
        clip_steps = steps_of(simulate_fixation_saccade(np.random.default_rng(997), count, args.clip_frames, FPS))
    independent = steps_of(
        simulate_fixation_saccade(
            np.random.default_rng(998), args.eval_windows * args.num_samples, args.num_frames, FPS
        )
    )
    references = {
        "true process (independent draw: the floor)": step_figures(independent, true_steps),
        "motionless": step_figures(np.zeros(true_steps.size), true_steps),
    }
    return Truth(true_steps, clip_steps), references


def progress_line(result: RunResult) -> str:
    """One run's figures on one line, as they arrive: each reading's median step ratio and log-bin JSD."""
    summary = ", ".join(
        f"S={s}{' ' + name if name else ''}: median x{f['median_ratio']:.2f}, log-JSD {f['jsd_log']:.3f}"
        for (name, s), f in result.figures.items()
    )
    return (
        f"{result.objective} seed {result.seed}: {result.train_steps} steps, {result.cpu_seconds:.0f} CPU s, "
        f"{result.wall_seconds:.0f} wall s; {summary}"
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    truth, references = true_process(args)
    print(
        f"true process: median step {np.median(truth.window_steps):.5f}, mean step {truth.window_steps.mean():.5f} "
        f"(unit coordinates), {args.num_frames}-frame windows at {FPS:g} fps",
        flush=True,
    )
    results = []
    for seed in args.seeds:
        for variant in probe_variants(args):
            for result in train_and_probe(args, variant, seed, truth):
                results.append(result)
                print(progress_line(result), flush=True)
    print()
    print(report(results, references))
    return 0


if __name__ == "__main__":
    run_script(main, "dynamics_probe.py", (ValueError, RuntimeError))
