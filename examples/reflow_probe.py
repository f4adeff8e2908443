#!/usr/bin/env python
"""One round of reflow or grid distillation on the pure-dynamics probe: do few-step samples keep a converged flow's
step distribution?

Reflow (Liu, Gong and Liu, "Flow Straight and Fast", ICLR 2023): a trained flow, the teacher, carries each base draw
x_0 to an endpoint x_1 along its ODE (here Euler at ``--teacher_steps`` on the grid s_i = 1 - (1 - i/S)^p); the
student, started from the teacher's weights, is trained by the same flow-matching loss (Eq. cfm_loss) on these
coupled pairs instead of independent (x_0, g). Paths between coupled pairs cross less, so fewer Euler steps follow
them. The teachers are the probe's saved models (``examples/dynamics_probe.py --save_dir``); each is read before
and after with the probe's own readings and figures, against the same true process:

    python examples/dynamics_probe.py --objectives flow_matching --batch_size 64 --max_train_steps 12000 \\
        --noise_correlation 0.97 --config_overrides whitened_flow=True --flow_time_sampling late_quadratic \\
        --seeds 0 --save_dir runs/probe4x
    python examples/reflow_probe.py --load_dir runs/probe4x --noise_correlation 0.97 \\
        --flow_time_sampling late_quadratic --seeds 0 --num_steps 2 3 5 --time_grid_powers 1 2 3

The student's training times follow the teacher's ``flow_time_sampling``, its base draws the teacher's prior (the
AR(1) correlation in its config) and its self-conditioning coin the teacher's probability.

``--student_objective grid`` distils the teacher's path onto the student's own few-step grid instead (progressive
and sequential distillation: Salimans and Ho, ICLR 2022; Yan et al., "PeRFlow", 2024): the student's grid
s_k = 1 - (1 - k/S')^p is a subset of the teacher's (S' divides S, the same p), and the student's Euler step from
the teacher's state x_{s_k} is trained to land on the teacher's x_{s_{k+1}}: its velocity target is
(x_{s_{k+1}} - x_{s_k}) / (s_{k+1} - s_k), with the self-conditioning input it would read when sampling (x1_hat of
the step before, had that step hit its target; zeros at k = 0). Each target is a function of the input, so the loss
has no irreducible part, where reflow's straight paths still cross. CPU s in the student rows is the whole round:
drawing the teacher's paths and training.

``--on_policy_rounds R`` adds the student's own states to the grid examples R times during the round (DAgger: Ross,
Gordon and Bagnell, AISTATS 2011), against exposure bias: a student taught only on the teacher's states meets its
own, slightly different ones when it samples. At each round the current (EMA) student samples fresh x_0 draws on
its grid; at each of its states x'_{s_k}, with the self-conditioning input it read there, the teacher's path over
the segment [s_k, s_{k+1}] (its own Euler steps, started from x'_{s_k}) gives the target
(x_teacher(s_{k+1}) - x'_{s_k}) / (s_{k+1} - s_k). The examples so far are kept beside the new ones.
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from dynamics_probe import (
    TRAINING_FILE,
    EmaTraining,
    RunResult,
    Truth,
    Variant,
    add_reading_arguments,
    check_reading_arguments,
    constant_tokens,
    probe_model,
    progress_line,
    report,
    true_process,
)

from transformers_gazeflow import GazeFlowModel
from transformers_gazeflow.models.gazeflow.configuration_gazeflow import FLOW_TIME_SAMPLINGS
from transformers_gazeflow.models.gazeflow.generation_gazeflow import cached_velocity_fn
from transformers_gazeflow.models.gazeflow.modeling_gazeflow_encoder import GazeFlowCondition
from transformers_gazeflow.models.gazeflow.modeling_gazeflow_objectives import flow_loss, flow_matching_objective
from transformers_gazeflow.models.gazeflow.scheduling_gazeflow import (
    FlowMatchingScheduler,
    TrainingNoise,
    correlate_noise,
    draw_noise,
    flow_time_from_uniform,
)
from transformers_gazeflow.training.script_errors import run_script

REFLOW_SUFFIX = " after one reflow round"
STUDENT_OBJECTIVES = ("reflow", "grid")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load_dir", required=True, help="the folder of examples/dynamics_probe.py --save_dir")
    parser.add_argument("--flow_time_sampling", default="uniform", choices=FLOW_TIME_SAMPLINGS)
    parser.add_argument("--noise_correlation", type=float, default=0.0, help="the teachers' rho (names the folder)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="the teachers' training seeds")
    parser.add_argument("--num_steps", type=int, nargs="+", default=[2, 5], help="S values to read with")
    add_reading_arguments(parser)
    parser.add_argument("--teacher_steps", type=int, default=50, help="Euler steps of the teacher's path to x_1")
    parser.add_argument("--teacher_grid_power", type=float, default=3.0, help="p of the teacher's time grid")
    parser.add_argument("--pairs", type=int, default=16384, help="teacher paths (x_0 to x_1) drawn once")
    parser.add_argument("--student_objective", default="reflow", choices=STUDENT_OBJECTIVES)
    parser.add_argument("--student_grid_steps", type=int, default=5, help="S' of the grid the student is distilled to")
    parser.add_argument(
        "--on_policy_rounds", type=int, default=0, help="grid: times the student's own states join the examples"
    )
    parser.add_argument("--reflow_steps", type=int, default=3000, help="the student's training steps")
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--learning_rate", type=float, default=2e-4)
    parser.add_argument("--weight_decay", type=float, default=1e-4)
    parser.add_argument("--ema_decay", type=float, default=0.995)
    parser.add_argument("--num_frames", type=int, default=16, help="the teachers' window length T")
    parser.add_argument("--eval_windows", type=int, default=64, help="windows sampled per evaluation")
    parser.add_argument("--num_samples", type=int, default=8, help="K trajectories per window")
    parser.add_argument("--reference_windows", type=int, default=2000, help="windows of the true process")
    args = parser.parse_args(argv)
    for name in ("teacher_steps", "pairs", "student_grid_steps", "reflow_steps", "batch_size", "eval_windows"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    if min(args.num_samples, args.reference_windows, *args.num_steps) < 1:
        parser.error("--num_samples, --reference_windows and every --num_steps must be >= 1")
    if args.student_objective == "grid":
        check_student_grid(parser, args)
    if args.on_policy_rounds < 0:
        parser.error(f"--on_policy_rounds must be >= 0, got {args.on_policy_rounds}")
    if args.on_policy_rounds and (args.student_objective != "grid" or args.on_policy_rounds >= args.reflow_steps):
        parser.error(
            f"--on_policy_rounds={args.on_policy_rounds} needs --student_objective grid and fewer rounds than "
            f"--reflow_steps={args.reflow_steps}"
        )
    if not args.teacher_grid_power >= 1:
        parser.error(f"--teacher_grid_power must be >= 1, got {args.teacher_grid_power}")
    check_reading_arguments(parser, args)
    return args


def check_student_grid(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The student's grid is a subset of the teacher's, and the student is read on it."""
    if args.teacher_steps % args.student_grid_steps:
        parser.error(
            f"--student_grid_steps={args.student_grid_steps} must divide --teacher_steps={args.teacher_steps} "
            "(the student's grid is a subset of the teacher's)"
        )
    if args.student_grid_steps not in args.num_steps or args.teacher_grid_power not in args.time_grid_powers:
        parser.error(
            f"--num_steps must include --student_grid_steps={args.student_grid_steps} and --time_grid_powers "
            f"--teacher_grid_power={args.teacher_grid_power:g}: the student is read on the grid it was distilled to"
        )


def teacher_folder(load_dir: str, variant: Variant, seed: int) -> Path:
    """The saved teacher of ``seed``, named as ``dynamics_probe.py --save_dir`` names it."""
    folder = Path(load_dir) / f"{variant.folder}-seed{seed}"
    if not (folder / TRAINING_FILE).is_file():
        raise FileNotFoundError(f"{folder}: no probe model there (expected one saved by dynamics_probe.py)")
    return folder


def teacher_segment(
    velocity_fn, sample: torch.Tensor, self_condition: torch.Tensor, times: list[float]
) -> tuple[torch.Tensor, torch.Tensor]:
    """The teacher's Euler steps over ``times`` (one segment of its grid) from ``sample``, its self-conditioning
    started from ``self_condition``: the state at ``times[-1]`` and the self-conditioning input after it."""
    scheduler = FlowMatchingScheduler(len(times) - 1, "euler")
    for flow_time, next_time in zip(times[:-1], times[1:]):
        sample, self_condition = scheduler.step(velocity_fn, sample, self_condition, flow_time, next_time)
    return sample, self_condition


@torch.no_grad()
def teacher_path(velocity_fn, noise: torch.Tensor, num_steps: int, grid_power: float, stride: int) -> torch.Tensor:
    """The teacher's Euler path from each x_0 ``noise`` ``[N, K, T, 2]`` on the grid s_i = 1 - (1 - i/S)^p (with
    self-conditioning, as it samples), at every ``stride``-th point of the grid (``stride`` divides S):
    ``[S / stride + 1, N, K, T, 2]``."""
    times = FlowMatchingScheduler(num_steps, time_grid_power=grid_power).timesteps()
    sample, self_condition, states = noise, torch.zeros_like(noise), [noise]
    for start in range(0, num_steps, stride):
        segment = times[start : start + stride + 1]
        sample, self_condition = teacher_segment(velocity_fn, sample, self_condition, segment)
        states.append(sample)
    return torch.stack(states)


@dataclass(frozen=True)
class GridTargets:
    """The student's training examples on its grid s_k (``grid`` ``[S' + 1]``), for each segment k and path n:
    its input x_{s_k} and self-conditioning input, and its velocity target, each ``[S', N, T, 2]``."""

    grid: torch.Tensor
    inputs: torch.Tensor
    self_conditions: torch.Tensor
    targets: torch.Tensor


def grid_targets(states: torch.Tensor, grid: torch.Tensor) -> GridTargets:
    """From the teacher's states at the student's grid ``[S' + 1, N, T, 2]``: targets (x_{k+1} - x_k) / (s_{k+1} - s_k)
    and self-conditioning inputs x1_hat_k = x_{k-1} + (1 - s_{k-1}) target_{k-1} (Appendix D.2; zeros at k = 0)."""
    widths = (grid[1:] - grid[:-1]).view(-1, 1, 1, 1)
    targets = (states[1:] - states[:-1]) / widths
    estimates = states[:-2] + (1 - grid[:-2]).view(-1, 1, 1, 1) * targets[:-1]
    self_conditions = torch.cat([torch.zeros_like(states[:1]), estimates])
    return GridTargets(grid, states[:-1], self_conditions, targets)


def prior_draws(config, count: int, generator: torch.Generator) -> torch.Tensor:
    """``count`` draws x_0 ``[count, 1, T, 2]`` of the teacher's prior (the AR(1) process at its noise_correlation)."""
    white = draw_noise((count, 1, config.num_frames, 2), generator, torch.device("cpu"))
    return correlate_noise(white, config.noise_correlation)


def joined(first: GridTargets, second: GridTargets) -> GridTargets:
    """Both sets of examples on one grid, paths side by side."""
    return GridTargets(
        first.grid,
        torch.cat([first.inputs, second.inputs], dim=1),
        torch.cat([first.self_conditions, second.self_conditions], dim=1),
        torch.cat([first.targets, second.targets], dim=1),
    )


@torch.no_grad()
def on_policy_targets(
    args: argparse.Namespace, teacher: GazeFlowModel, student: GazeFlowModel, generator: torch.Generator
) -> GridTargets:
    """The student's own states on its grid, from ``args.pairs`` fresh x_0 draws, each with the teacher's step over
    its segment from there as the target, and the self-conditioning input the student read there."""
    config, frames = teacher.config, teacher.config.num_frames
    sample = prior_draws(config, args.pairs, generator)
    tokens = constant_tokens(config, args.pairs)
    teacher_velocity = cached_velocity_fn(teacher, tokens, frames)
    student_velocity = cached_velocity_fn(student, tokens, frames)
    teacher_times = FlowMatchingScheduler(args.teacher_steps, time_grid_power=args.teacher_grid_power).timesteps()
    stride = args.teacher_steps // args.student_grid_steps
    grid, student_step = teacher_times[::stride], FlowMatchingScheduler(args.student_grid_steps, "euler").step
    self_condition, inputs, self_conditions, targets = torch.zeros_like(sample), [], [], []
    for k in range(args.student_grid_steps):
        segment = teacher_times[k * stride : (k + 1) * stride + 1]
        landing, _ = teacher_segment(teacher_velocity, sample, self_condition, segment)
        inputs.append(sample)
        self_conditions.append(self_condition)
        targets.append((landing - sample) / (grid[k + 1] - grid[k]))
        sample, self_condition = student_step(student_velocity, sample, self_condition, grid[k], grid[k + 1])
    kept = [torch.stack(values)[:, :, 0] for values in (inputs, self_conditions, targets)]
    return GridTargets(torch.tensor(grid), *kept)


def grid_loss(
    student: GazeFlowModel,
    condition: GazeFlowCondition,
    examples: GridTargets,
    index: torch.Tensor,
    segment: torch.Tensor,
    valid: torch.Tensor,
) -> torch.Tensor:
    """The flow loss (Eq. cfm_loss's metric) of the student's velocity at (x_{s_k}, s_k) against the teacher's step,
    for each example's path ``index`` ``[B]`` and grid segment ``segment`` ``[B]`` (``valid`` ``[B, T]``)."""
    flow_time = examples.grid[segment].unsqueeze(1)
    sample = examples.inputs[segment, index].unsqueeze(1)
    self_condition = examples.self_conditions[segment, index].unsqueeze(1)
    predicted = student.velocity(sample, flow_time, condition, self_condition).squeeze(1)
    return flow_loss(predicted, examples.targets[segment, index], valid, student.config)


def teacher_states(
    args: argparse.Namespace, teacher: GazeFlowModel, noise: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The teacher's paths from x_0 ``noise`` ``[N, 1, T, 2]`` at the student's grid ``[S' + 1]`` (S' = 1, the
    endpoints, for reflow): ``[S' + 1, N, T, 2]`` and the grid's times."""
    velocity = cached_velocity_fn(teacher, constant_tokens(teacher.config, len(noise)), teacher.config.num_frames)
    grid_steps = args.student_grid_steps if args.student_objective == "grid" else 1
    stride = args.teacher_steps // grid_steps
    states = teacher_path(velocity, noise, args.teacher_steps, args.teacher_grid_power, stride)[:, :, 0]
    teacher_times = FlowMatchingScheduler(args.teacher_steps, time_grid_power=args.teacher_grid_power).timesteps()
    return states, torch.tensor(teacher_times[::stride])


def reflow(args: argparse.Namespace, teacher: GazeFlowModel, seed: int) -> GazeFlowModel:
    """The student after one round: the teacher's weights trained on its own paths (EMA weights), by the
    flow-matching loss on coupled (x_0, x_1) (reflow) or on the teacher's steps over the student's grid (grid)."""
    config, frames = teacher.config, teacher.config.num_frames
    generator = torch.Generator().manual_seed(50_000 + seed)
    noise = prior_draws(config, args.pairs, generator)
    states, grid = teacher_states(args, teacher, noise)
    examples, grid_steps = grid_targets(states, grid), len(grid) - 1
    noise, ends = states[0], states[-1]

    student = copy.deepcopy(teacher).train()
    training = EmaTraining.start(student, args, 0, args.reflow_steps)
    tokens, valid = constant_tokens(config, args.batch_size), torch.ones(args.batch_size, frames, dtype=torch.bool)
    rounds = args.on_policy_rounds
    round_starts = {round(r * args.reflow_steps / (rounds + 1)) for r in range(1, rounds + 1)}
    for step in range(args.reflow_steps):
        if step in round_starts:
            examples = joined(examples, on_policy_targets(args, teacher, training.ema.module.eval(), generator))
        index = torch.randint(0, examples.inputs.shape[1], (args.batch_size,), generator=generator)
        condition = student.build_condition(tokens, frames)
        if args.student_objective == "grid":
            segment = torch.randint(0, grid_steps, (args.batch_size,), generator=generator)
            loss = grid_loss(student, condition, examples, index, segment, valid)
        else:
            times = flow_time_from_uniform(torch.rand(args.batch_size, generator=generator), config.flow_time_sampling)
            coin = torch.rand(args.batch_size, generator=generator) < config.self_conditioning_prob
            draws = TrainingNoise(times, noise[index], coin)
            loss = flow_matching_objective(student, condition, ends[index], valid, draws).loss
        training.step(loss)
    return training.ema.module.eval()


def reflow_and_probe(args: argparse.Namespace, seed: int, truth: Truth) -> list[RunResult]:
    """The teacher's rows and its student's, read with the same samplers and the same reading seed."""
    variant = Variant("flow_matching", args.flow_time_sampling, args.noise_correlation)
    folder = teacher_folder(args.load_dir, variant, seed)
    teacher = GazeFlowModel.from_pretrained(folder).eval()
    if teacher.config.num_frames != args.num_frames:
        raise ValueError(f"{folder}: its windows have {teacher.config.num_frames} frames; pass --num_frames to match")
    steps, cpu_seconds, wall_seconds = json.loads((folder / TRAINING_FILE).read_text())
    name = variant.name
    rows = [RunResult(name, seed, steps, cpu_seconds, wall_seconds, probe_model(args, teacher, seed, truth))]
    torch.manual_seed(seed)
    cpu_start, wall_start = time.process_time(), time.time()
    student = reflow(args, teacher, seed)
    cpu, wall = time.process_time() - cpu_start, time.time() - wall_start
    figures = probe_model(args, student, seed, truth)
    return rows + [RunResult(name + student_suffix(args), seed, args.reflow_steps, cpu, wall, figures)]


def student_suffix(args: argparse.Namespace) -> str:
    """How the student's rows are named after the teacher's."""
    if args.student_objective == "grid":
        rounds = f", {args.on_policy_rounds} on-policy rounds" if args.on_policy_rounds else ""
        return f" distilled to its S={args.student_grid_steps} grid{rounds}"
    return REFLOW_SUFFIX


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    truth, references = true_process(args)
    results = []
    for seed in args.seeds:
        for result in reflow_and_probe(args, seed, truth):
            results.append(result)
            print(progress_line(result), flush=True)
    print()
    print(report(results, references))
    return 0


if __name__ == "__main__":
    run_script(main, "reflow_probe.py", (ValueError, RuntimeError, FileNotFoundError))
