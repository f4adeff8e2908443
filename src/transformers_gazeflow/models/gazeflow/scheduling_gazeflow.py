"""GazeFlow's noise process and its inverse, in one place (a "scheduler" in the diffusers sense).

Training noises a clean trajectory g with noise x_0 at a drawn time; sampling integrates from noise back to a
trajectory. Both halves of each objective live here, so the interpolant the loss trains on and the one the sampler
inverts cannot drift apart. The network is not here: a scheduler only sees ``model_fn(x, time, x1_hat)``, the
network's output at a state (:data:`ModelFn`). This module imports nothing of the package but the config's
constants.

| piece | paper | here |
| --- | --- | --- |
| OT interpolant x_s = (1 - (1 - sigma_min) s) x_0 + s g | Appendix E.4 | :meth:`FlowMatchingScheduler.add_noise` |
| velocity target u = g - (1 - sigma_min) x_0 | Eq. cfm_loss | :meth:`FlowMatchingScheduler.velocity_target` |
| self-conditioning endpoint x1_hat = x_s + (1 - s) v | Appendix D.2 | :func:`estimate_endpoint` |
| Euler (Algorithm 1), Heun, midpoint; S uniform steps | Algorithm 1, Appendix D | :meth:`FlowMatchingScheduler.step` |
| cosine schedule alpha_bar (Nichol & Dhariwal 2021) | Appendix F.4 | :func:`cosine_alphas_cumprod` |
| DDIM (Song et al. 2021, eta = 0) and its x_t, clean estimate | Appendix F.4 | :class:`DDIMScheduler` |
| the regression head's constant inputs | Section 4.4 | :data:`REGRESSION_INPUT_TIME`, :class:`RegressionScheduler` |
| x_0 ~ N(0, I) at inference | Algorithm 1 | :func:`draw_noise` |
| x_0 ~ N(0, Sigma), AR(1) over frames (functional flow matching) | Eq. bg:cfm | :func:`correlate_noise` |
| training draws: s (or t), x_0, the self-conditioning coin | Algorithm 1, Appendix D.2 | :func:`draw_training_noise` |
| s from a uniform draw: uniform (paper), late_quadratic, logit_normal | Algorithm 1 | :func:`flow_time_from_uniform` |

Every ``step`` is pure: it maps (x, x1_hat, time, next time) to the next (x, x1_hat) and holds no state. A step can
take a ``project(x, time)`` callback, applied to every state the network is evaluated at: the windowed engine
uses it to hold frames that a previous window already sampled at their noised value (coherent windows, the
replacement method); ``project=None`` is the plain ODE.

**Training randomness** (:func:`example_generators`, :func:`draw_training_noise`): every example draws its time,
its noise and its self-conditioning coin from its own random stream, in that order, so a clip's loss never depends
on what it is batched with. The streams come from a list of generators (one per example), or are spawned from one
generator (example i's stream is seeded by the i-th of B seeds drawn from it one by one), or, with no generator,
from the global RNG in training. In eval mode with no generator the draws are fixed numbers, the same for every
example (:func:`draw_eval_noise`: s from u = 0.5, the noise from an evenly spread sequence, no generator), so an
``eval()`` forward gives a clip the same loss on every call, whatever its batch and its position in it, leaves the
global RNG untouched, and exports with ``torch.export`` (a generator in the graph would advance on every call). For
a validation loss that averages over flow times, pass a generator (``examples/train.py`` does).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from .choices import SOLVERS
from .configuration_gazeflow import FLOW_TIME_SAMPLINGS

ModelFn = Callable[[torch.Tensor, float, torch.Tensor], torch.Tensor]
"""``model_fn(x, time, x1_hat) -> output``: tensors ``[B, K, T, 2]`` in model coordinates; ``time`` is the float the
network reads (s for flow matching, tau = t / N for diffusion)."""

Projection = Callable[[torch.Tensor, "float | int"], torch.Tensor]
"""``project(x, time) -> x``: a constraint applied to each state before the network reads it (``time`` in the
scheduler's own units: s for flow matching, the integer timestep t for DDIM)."""

COSINE_SCHEDULE_OFFSET = 0.008
"""s of the cosine schedule alpha_bar(tau) = f(tau) / f(0), f(tau) = cos^2(((tau + s) / (1 + s)) pi / 2)."""

MAX_BETA = 0.999
"""Per-step betas are clipped at 0.999 (Nichol & Dhariwal), so alpha_bar stays > 0 at the last step."""

REGRESSION_INPUT_TIME = 0.0
"""The constant flow time the regression head is called with (its x and x1_hat inputs are zeros)."""

EVAL_NOISE_SEED = 0
"""Seed of the parent stream that :func:`example_generators` spawns from with ``deterministic=True``."""
EVAL_WEYL_STEP = (math.sqrt(5.0) - 1.0) / 2.0
EVAL_WEYL_OFFSET = 0.5
"""The eval-mode noise without a generator (:func:`draw_eval_noise`): the sequence frac(offset + k * step), k = 1, 2,
..., step = 1 / phi (the golden ratio), mapped to N(0, 1) quantiles."""

_SEED_BOUND = 2**62


def _check_steps(num_steps: int, solver: str = "euler") -> None:
    if not isinstance(num_steps, int) or isinstance(num_steps, bool) or num_steps < 1:
        raise ValueError(f"`num_steps` (S) must be an int >= 1, got {num_steps!r}")
    if solver not in SOLVERS:
        raise ValueError(f"`solver` must be one of {SOLVERS}, got {solver!r}")


def _project(project: Projection | None, sample: torch.Tensor, time: float | int) -> torch.Tensor:
    return sample if project is None else project(sample, time)


# ---------------------------------------------------------------------------------------------------- flow matching
_SCALARS: dict[tuple[float, torch.dtype], torch.Tensor] = {}


def scaled(factor: float | torch.Tensor, tensor: torch.Tensor) -> torch.Tensor:
    """``factor * tensor``, with a Python float ``factor`` kept as a 0-dim CPU tensor of ``tensor``'s dtype (float32
    or float64; the same product bit for bit): a Python float is wrapped into a tensor and converted at every call,
    four more ops on the host each time, in every step of every window. Under ``torch.compile`` the float itself."""
    if (
        not isinstance(factor, float)
        or tensor.dtype not in (torch.float32, torch.float64)
        or torch.compiler.is_compiling()
    ):
        return factor * tensor
    key = (factor, tensor.dtype)
    scalar = _SCALARS.get(key)
    if scalar is None:
        if len(_SCALARS) > 256:
            _SCALARS.clear()
        scalar = _SCALARS[key] = torch.tensor(factor, dtype=tensor.dtype)
    return scalar * tensor


def estimate_endpoint(sample: torch.Tensor, flow_time: float | torch.Tensor, velocity: torch.Tensor) -> torch.Tensor:
    """x1_hat = x_s + (1 - s) v, the clean-trajectory estimate fed back by self-conditioning (Appendix D.2)."""
    return sample + scaled(1.0 - flow_time, velocity)


@dataclass(frozen=True)
class FlowMatchingScheduler:
    """The OT probability path of Appendix E.4 and its ODE, integrated over S uniform steps s_i = i / S.

    Noising: x_s = (1 - (1 - sigma_min) s) x_0 + s g (:meth:`add_noise`), target u = g - (1 - sigma_min) x_0
    (:meth:`velocity_target`). Sampling: dx/ds = v_theta(x_s, s, c) from x_0 ~ N(0, I) at s = 0 to s = 1, with the
    solver ``euler`` (one network call per step, the paper's Algorithm 1), ``heun`` (explicit trapezoid, two calls)
    or ``midpoint`` (two calls); self-conditioning feeds each call the previous call's x1_hat, zeros at first.
    """

    num_steps: int = 1
    solver: str = "euler"
    sigma_min: float = 1e-3
    time_grid_power: float = 1.0

    def __post_init__(self) -> None:
        _check_steps(self.num_steps, self.solver)
        if not self.time_grid_power >= 1.0:
            raise ValueError(f"`time_grid_power` must be a number >= 1, got {self.time_grid_power!r}")

    @property
    def calls_per_step(self) -> int:
        return 1 if self.solver == "euler" else 2

    def timesteps(self) -> list[float]:
        """s_0 = 0, s_1 = 1 / S, ..., s_S = 1; with ``time_grid_power`` p > 1, s_i = 1 - (1 - i / S)^p (steps
        shrink toward the data end s = 1)."""
        if self.time_grid_power == 1.0:
            return [i / self.num_steps for i in range(self.num_steps + 1)]
        return [1.0 - (1.0 - i / self.num_steps) ** self.time_grid_power for i in range(self.num_steps + 1)]

    def progress(self, flow_time: float) -> float:
        """How far a time is along the path from noise (0) to data (1): s itself."""
        return float(flow_time)

    def add_noise(self, clean: torch.Tensor, noise: torch.Tensor, flow_time: float | torch.Tensor) -> torch.Tensor:
        """The OT interpolant x_s = (1 - (1 - sigma_min) s) x_0 + s g (``flow_time`` a float or broadcastable)."""
        return (1 - (1 - self.sigma_min) * flow_time) * noise + flow_time * clean

    def velocity_target(self, clean: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """The conditional velocity u = d x_s / ds = g - (1 - sigma_min) x_0 (Eq. cfm_loss)."""
        return clean - (1 - self.sigma_min) * noise

    def step(
        self,
        model_fn: ModelFn,
        sample: torch.Tensor,
        self_condition: torch.Tensor,
        flow_time: float,
        next_time: float,
        project: Projection | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One step from s = ``flow_time`` to ``next_time``; returns the new sample and self-conditioning input."""
        dt = next_time - flow_time
        sample = _project(project, sample, flow_time)
        velocity = model_fn(sample, flow_time, self_condition)
        endpoint = estimate_endpoint(sample, flow_time, velocity)
        if self.solver == "euler":
            return sample + scaled(dt, velocity), endpoint
        if self.solver == "heun":
            predicted = _project(project, sample + dt * velocity, next_time)
            corrected_velocity = model_fn(predicted, next_time, endpoint)
            return (
                sample + dt * 0.5 * (velocity + corrected_velocity),
                estimate_endpoint(predicted, next_time, corrected_velocity),
            )
        middle_time = flow_time + 0.5 * dt
        middle = _project(project, sample + 0.5 * dt * velocity, middle_time)
        middle_velocity = model_fn(middle, middle_time, endpoint)
        return sample + dt * middle_velocity, estimate_endpoint(middle, middle_time, middle_velocity)

    def sample(self, model_fn: ModelFn, noise: torch.Tensor, project: Projection | None = None) -> torch.Tensor:
        """Integrate from x_0 = ``noise`` to x_1; self-conditioning starts from zeros (Appendix D.2)."""
        sample, self_condition = noise, torch.zeros_like(noise)
        times = self.timesteps()
        for flow_time, next_time in zip(times[:-1], times[1:]):
            sample, self_condition = self.step(model_fn, sample, self_condition, flow_time, next_time, project)
        return sample


# ---------------------------------------------------------------------------------------------------- diffusion
def cosine_alphas_cumprod(num_timesteps: int) -> torch.Tensor:
    """alpha_bar_t for t = 0 .. num_timesteps - 1 of the cosine schedule (float64): betas
    ``1 - alpha_bar(tau_{t+1}) / alpha_bar(tau_t)`` with tau_t = t / num_timesteps, clipped at :data:`MAX_BETA`."""
    steps = torch.arange(num_timesteps + 1, dtype=torch.float64) / num_timesteps
    f = torch.cos((steps + COSINE_SCHEDULE_OFFSET) / (1 + COSINE_SCHEDULE_OFFSET) * math.pi / 2) ** 2
    betas = (1 - f[1:] / f[:-1]).clamp(max=MAX_BETA)
    return torch.cumprod(1 - betas, dim=0)


def ddim_timesteps(num_steps: int, num_timesteps: int) -> list[int]:
    """The S timesteps DDIM visits, from noisiest to cleanest, with the "trailing" spacing
    t_i = round(N - i N / S) - 1 (so S = 1 starts from pure noise at t = N - 1)."""
    if not 1 <= num_steps <= num_timesteps:
        raise ValueError(f"`num_steps` (S) must be in [1, diffusion_timesteps={num_timesteps}], got {num_steps}")
    return [round(num_timesteps - i * num_timesteps / num_steps) - 1 for i in range(num_steps)]


@dataclass(frozen=True)
class DDIMScheduler:
    """The diffusion ablation (paper Section 4.4, Appendix F.4): epsilon prediction on the cosine schedule over
    ``num_timesteps`` discrete steps, sampled by deterministic DDIM over ``num_steps`` of them.

    Noising: x_t = sqrt(alpha_bar_t) g + sqrt(1 - alpha_bar_t) eps (:meth:`add_noise`); the network reads
    (x_t, tau = t / N) and predicts eps. Each DDIM step, from x_t with the network's eps_hat::

        x0_hat = clip((x_t - sqrt(1 - alpha_bar_t) eps_hat) / sqrt(alpha_bar_t), -1, 1)
        x_prev = sqrt(alpha_bar_prev) x0_hat + sqrt(1 - alpha_bar_prev) eps_hat   (alpha_bar_prev = 1 after the last)

    and x0_hat is fed back as the next call's self-conditioning input (zeros at first), as in training. One network
    call per step, as the Euler sampler: the same S costs the same time.
    """

    num_steps: int = 1
    num_timesteps: int = 1000
    alphas_cumprod: torch.Tensor = field(init=False, repr=False, compare=False)
    alpha_bars: tuple[float, ...] = field(init=False, repr=False, compare=False)

    calls_per_step = 1

    def __post_init__(self) -> None:
        ddim_timesteps(self.num_steps, self.num_timesteps)
        object.__setattr__(self, "alphas_cumprod", cosine_alphas_cumprod(self.num_timesteps))
        # the same values as Python floats: a step reads them without reading a tensor (none under torch.compile)
        object.__setattr__(self, "alpha_bars", tuple(self.alphas_cumprod.tolist()))

    def timesteps(self) -> list[int]:
        return ddim_timesteps(self.num_steps, self.num_timesteps)

    def model_time(self, timestep: int | torch.Tensor) -> float | torch.Tensor:
        """tau = t / N, the time the network reads."""
        return timestep / self.num_timesteps

    def progress(self, timestep: int) -> float:
        """How far a timestep is from noise (0, t = N - 1) to data (1, t = -1): 1 - (t + 1) / N."""
        return 1.0 - (timestep + 1) / self.num_timesteps

    def alpha_bar(self, timestep: int) -> float:
        """alpha_bar_t, with alpha_bar_{-1} = 1 (the clean end)."""
        return 1.0 if timestep < 0 else self.alpha_bars[timestep]

    def alpha_bar_of(self, timesteps: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        """alpha_bar at integer ``timesteps [B]``, ``[B, 1, 1]`` in ``like``'s device and dtype."""
        alphas = self.alphas_cumprod.to(timesteps.device)[timesteps]
        return alphas.to(device=like.device, dtype=like.dtype).view(-1, *([1] * (like.dim() - 1)))

    @staticmethod
    def noised(clean: torch.Tensor, noise: torch.Tensor, alpha_bar: float | torch.Tensor) -> torch.Tensor:
        """x_t = sqrt(alpha_bar) g + sqrt(1 - alpha_bar) eps."""
        if torch.is_tensor(alpha_bar):
            return alpha_bar.sqrt() * clean + (1 - alpha_bar).sqrt() * noise
        return alpha_bar**0.5 * clean + (1 - alpha_bar) ** 0.5 * noise

    def add_noise(self, clean: torch.Tensor, noise: torch.Tensor, timestep: int) -> torch.Tensor:
        """x_t at the integer ``timestep`` (t = -1: the clean trajectory)."""
        return self.noised(clean, noise, self.alpha_bar(timestep))

    @staticmethod
    def clean_estimate(
        sample: torch.Tensor, noise_estimate: torch.Tensor, alpha_bar: float | torch.Tensor
    ) -> torch.Tensor:
        """x0_hat = clip((x_t - sqrt(1 - alpha_bar) eps_hat) / sqrt(alpha_bar), -1, 1)."""
        if torch.is_tensor(alpha_bar):
            return ((sample - (1 - alpha_bar).sqrt() * noise_estimate) / alpha_bar.sqrt()).clamp(-1, 1)
        return ((sample - (1 - alpha_bar) ** 0.5 * noise_estimate) / alpha_bar**0.5).clamp(-1.0, 1.0)

    def step(
        self,
        model_fn: ModelFn,
        sample: torch.Tensor,
        self_condition: torch.Tensor,
        timestep: int,
        previous_timestep: int,
        project: Projection | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One DDIM step from ``timestep`` to ``previous_timestep`` (-1: the end); returns (x_prev, x0_hat)."""
        alpha_bar, alpha_bar_prev = self.alpha_bar(timestep), self.alpha_bar(previous_timestep)
        sample = _project(project, sample, timestep)
        eps = model_fn(sample, self.model_time(timestep), self_condition)
        clean = self.clean_estimate(sample, eps, alpha_bar)
        return alpha_bar_prev**0.5 * clean + (1 - alpha_bar_prev) ** 0.5 * eps, clean

    def sample(self, model_fn: ModelFn, noise: torch.Tensor, project: Projection | None = None) -> torch.Tensor:
        """From x_{N-1} = ``noise`` to x_0; self-conditioning starts from zeros."""
        sample, self_condition = noise, torch.zeros_like(noise)
        times = self.timesteps()
        for timestep, previous in zip(times, times[1:] + [-1]):
            sample, self_condition = self.step(model_fn, sample, self_condition, timestep, previous, project)
        return sample


# ---------------------------------------------------------------------------------------------------- regression
@dataclass(frozen=True)
class RegressionScheduler:
    """The regression head's "sampler" (the "- Joint Distribution Modeling" row): one network call at x = 0,
    s = :data:`REGRESSION_INPUT_TIME`, x1_hat = 0. There is no noise process: the noise only gives the shape (K = 1)
    and ``project`` does not apply (the head never reads a state)."""

    num_steps: int = 1
    calls_per_step = 1

    def sample(self, model_fn: ModelFn, noise: torch.Tensor, project: Projection | None = None) -> torch.Tensor:
        zeros = torch.zeros_like(noise)
        return model_fn(zeros, REGRESSION_INPUT_TIME, zeros)


Scheduler = FlowMatchingScheduler | DDIMScheduler | RegressionScheduler


def scheduler_for(config, num_steps: int, solver: str = "euler") -> Scheduler:
    """The scheduler of ``config.objective`` with S = ``num_steps`` (and for flow matching the ODE ``solver`` on the
    config's flow-time grid, ``config.time_grid_power``)."""
    if config.objective == "diffusion":
        return DDIMScheduler(num_steps, config.diffusion_timesteps)
    if config.objective == "regression":
        return RegressionScheduler()
    return FlowMatchingScheduler(num_steps, solver, config.sigma_min, config.time_grid_power)


# ---------------------------------------------------------------------------------------------------- noise draws
def correlate_noise(
    white: torch.Tensor, correlation: float, previous: torch.Tensor | None = None, frame_dim: int = -2
) -> torch.Tensor:
    """x_0 of the AR(1) prior over frames from white innovations: x_0[t] = rho x_0[t - 1] + sqrt(1 - rho^2) e[t].

    The paper's x_0 ~ N(0, I) (Eq. bg:cfm) is independent across frames; with ``correlation`` rho > 0 it is a
    stationary Gaussian process over the T frames of a window instead, N(0, Sigma) with Sigma_tu = rho^|t - u| (a
    sampled Ornstein-Uhlenbeck process, unit variance per frame and axis): the temporally correlated base noise of
    functional flow matching (Kerrigan, Migliorini & Smyth, "Functional Flow Matching", AISTATS 2024) and of flow
    matching with Gaussian-process priors for time series (Kollovieh et al., ICLR 2025). ``white`` ``[..., T, ...]``
    holds N(0, 1) innovations e along ``frame_dim``. Without ``previous`` the first frame is x_0[0] = e[0]; with
    ``previous`` (x_0 of the frame just before, broadcastable to one frame of ``white``) the process continues from
    it, so a window's frames after a known overlap, or a stream's next frame, follow the same prior (AR(1) is
    Markov: the last frame is all the past it needs). ``correlation`` 0 returns ``white`` itself (the paper's prior,
    bit for bit)."""
    if not 0.0 <= correlation < 1.0:
        raise ValueError(f"`noise_correlation` must be a number in [0, 1), got {correlation!r}")
    if correlation == 0.0:
        return white
    frames = white.shape[frame_dim]
    innovation = math.sqrt(1.0 - correlation * correlation)
    index = torch.arange(frames, dtype=torch.float64)
    lag = index.view(-1, 1) - index.view(1, -1)
    # x = L e with L_tu = rho^(t - u) c_u for u <= t, c_u = sqrt(1 - rho^2) except c_0 = 1 without `previous`
    weights = torch.where(lag >= 0, correlation ** lag.clamp(min=0), torch.zeros((), dtype=torch.float64))
    weights = weights * innovation
    if previous is None:
        weights[:, 0] = weights[:, 0] / innovation
    moved = white.movedim(frame_dim, -1)
    correlated = (moved @ weights.T.to(device=white.device, dtype=white.dtype)).movedim(-1, frame_dim)
    if previous is not None:
        decay = (correlation ** (index + 1)).to(device=white.device, dtype=white.dtype)
        shape = [1] * white.dim()
        shape[frame_dim] = frames
        correlated = correlated + decay.view(shape) * previous
    return correlated


def whiten_frames(correlated: torch.Tensor, correlation: float, frame_dim: int = -2) -> torch.Tensor:
    """The inverse of :func:`correlate_noise` without ``previous``: the innovations e = L^-1 x of a trajectory-shaped
    ``correlated`` ``[..., T, ...]``, e[0] = x[0] and e[t] = (x[t] - rho x[t - 1]) / sqrt(1 - rho^2) along
    ``frame_dim``. Under the AR(1) prior N(0, Sigma), ||L^-1 r||^2 = r^T Sigma^-1 r is the prior's own metric: a
    frame-to-frame jitter costs 1 / (1 - rho^2) times what a slow drift of the same size does. ``correlation`` 0
    returns ``correlated`` itself."""
    if not 0.0 <= correlation < 1.0:
        raise ValueError(f"`noise_correlation` must be a number in [0, 1), got {correlation!r}")
    if correlation == 0.0:
        return correlated
    moved = correlated.movedim(frame_dim, 0)
    innovation = math.sqrt(1.0 - correlation * correlation)
    later = (moved[1:] - correlation * moved[:-1]) / innovation
    return torch.cat([moved[:1], later]).movedim(0, frame_dim)


def continue_correlated(
    white: torch.Tensor, correlation: float, previous: torch.Tensor, first: torch.Tensor
) -> torch.Tensor:
    """One frame of the AR(1) recursion of :func:`correlate_noise`, as a stream takes it: rho ``previous`` +
    sqrt(1 - rho^2) ``white``, or ``white`` itself where ``first`` (a bool tensor broadcastable to ``white``: the
    stream's first frame) holds. No Python branch on tensor values, so it exports."""
    innovation = math.sqrt(1.0 - correlation * correlation)
    return torch.where(first, white, correlation * previous + innovation * white)


def draw_noise(shape: tuple[int, ...], generator: torch.Generator | None, device: torch.device) -> torch.Tensor:
    """x_0 ~ N(0, I), drawn on the generator's device (so a seed means the same noise anywhere), then moved."""
    draw_device = generator.device if generator is not None else device
    return torch.randn(shape, generator=generator, device=draw_device, dtype=torch.float32).to(device)


GeneratorArgument = torch.Generator | Sequence[torch.Generator] | None
"""What ``forward(generator=...)`` takes: one generator, one per example, or None."""


def example_generators(generator: GeneratorArgument, batch_size: int, deterministic: bool) -> list[torch.Generator]:
    """One random stream per example (see the module docstring).

    ``generator``: a list of ``batch_size`` generators (used as given), one generator (B child streams are spawned
    from it: child i is seeded by its i-th draw), or None: the global RNG spawns them, or, with ``deterministic``
    (eval mode), a generator seeded with :data:`EVAL_NOISE_SEED` does.
    """
    if isinstance(generator, (list, tuple)):
        if len(generator) != batch_size or not all(isinstance(g, torch.Generator) for g in generator):
            raise ValueError(
                f"`generator` must be a torch.Generator or a list of one per example ({batch_size}), got "
                f"a list of {len(generator)}"
            )
        return list(generator)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise ValueError(f"`generator` must be a torch.Generator, a list of them or None, got {type(generator)}")
    parent = generator
    if parent is None and deterministic:
        parent = torch.Generator().manual_seed(EVAL_NOISE_SEED)
    device = parent.device if parent is not None else torch.device("cpu")
    seeds = [int(torch.randint(_SEED_BOUND, (1,), generator=parent, device=device)) for _ in range(batch_size)]
    return [torch.Generator(device=device).manual_seed(seed) for seed in seeds]


def flow_time_from_uniform(uniform: torch.Tensor, sampling: str = "uniform") -> torch.Tensor:
    """The training time s of flow matching from a draw u ~ U(0, 1), by ``config.flow_time_sampling``:

    * ``"uniform"``: s = u, the paper's s ~ U(0, 1) (Algorithm 1);
    * ``"late_quadratic"``: s = 1 - (1 - u)^2, density 1 / (2 sqrt(1 - s)): more draws near the data end s = 1
      (P(s > 0.96) = 0.2 against 0.04), where the network learns the sub-pixel, frame-to-frame precision;
    * ``"logit_normal"``: s = sigmoid(Phi^-1(u)), the logit-normal(0, 1) of Esser et al. 2024 (mass in the middle).

    Each maps the same single draw, so every example's random stream (time, noise, coin) is consumed identically
    whatever the choice; ``"uniform"`` returns ``uniform`` itself (bit-identical to the paper's draws).
    """
    if sampling == "uniform":
        return uniform
    if sampling == "late_quadratic":
        return 1.0 - (1.0 - uniform) ** 2
    if sampling == "logit_normal":
        # u in [0, 1): clamp away from 0 so erfinv stays finite; sigmoid(Phi^-1(u)), Phi^-1(u) = sqrt(2) erfinv(2u - 1)
        centred = (2.0 * uniform.double() - 1.0).clamp(-1.0 + 1e-12, 1.0 - 1e-12)
        return torch.sigmoid(math.sqrt(2.0) * torch.erfinv(centred)).to(uniform.dtype)
    raise ValueError(f"`flow_time_sampling` must be one of {FLOW_TIME_SAMPLINGS}, got {sampling!r}")


@dataclass
class TrainingNoise:
    """One batch's training draws, each example's from its own stream.

    Attributes:
        time: ``[B]`` float32: s ~ U(0, 1) for flow matching; the integer timestep t ~ U{0 .. N - 1} for diffusion.
        noise: ``[B, T, 2]``, x_0 (flow matching) or eps (diffusion) ~ N(0, I).
        self_condition: ``[B]`` bool, the coin: this example's second pass reads the first pass's estimate.
    """

    time: torch.Tensor
    noise: torch.Tensor
    self_condition: torch.Tensor


def draw_training_noise(
    shape: tuple[int, int, int],
    generators: list[torch.Generator],
    self_conditioning_prob: float,
    device: torch.device,
    dtype: torch.dtype,
    num_timesteps: int | None = None,
    flow_time_sampling: str = "uniform",
    noise_correlation: float = 0.0,
) -> TrainingNoise:
    """Each example draws, from its own generator and in this order: its time (s from one u ~ U(0, 1) mapped by
    :func:`flow_time_from_uniform` with ``flow_time_sampling``, or with ``num_timesteps`` an integer
    t ~ U{0 .. N - 1}), its noise ``[T, 2]`` and its coin u ~ U(0, 1) (self-conditioning when
    u < ``self_conditioning_prob``). The noise is N(0, I), or with ``noise_correlation`` rho > 0 the AR(1) prior of
    :func:`correlate_noise` made from those same draws (the sampler's x_0 prior, so training and sampling match)."""
    if num_timesteps is None and flow_time_sampling not in FLOW_TIME_SAMPLINGS:
        raise ValueError(f"`flow_time_sampling` must be one of {FLOW_TIME_SAMPLINGS}, got {flow_time_sampling!r}")
    batch, frames, width = shape
    times, noises, coins = [], [], []
    for g in generators:
        if num_timesteps is None:
            times.append(torch.rand(1, generator=g, device=g.device))
        else:
            times.append(torch.randint(0, num_timesteps, (1,), generator=g, device=g.device))
        noises.append(torch.randn(frames, width, generator=g, device=g.device))
        coins.append(torch.rand(1, generator=g, device=g.device))
    time = torch.cat(times).to(device)
    if num_timesteps is None:
        time = flow_time_from_uniform(time.float(), flow_time_sampling)
    return TrainingNoise(
        time=time,
        noise=correlate_noise(torch.stack(noises), noise_correlation).to(device=device, dtype=dtype),
        self_condition=torch.cat(coins).to(device) < self_conditioning_prob,
    )


def _weyl_uniform(count: int, offset: float, device: torch.device) -> torch.Tensor:
    """``count`` fixed, evenly spread values in (0, 1): the additive (Weyl) sequence frac(offset + k / phi), computed
    from ``arange`` in float64 (no generator, no state: the same numbers in eager mode and in an exported graph)."""
    index = torch.arange(1, count + 1, dtype=torch.float64, device=device)
    return torch.frac(offset + index * EVAL_WEYL_STEP).clamp(1e-6, 1 - 1e-6)


def draw_eval_noise(
    shape: tuple[int, int, int],
    self_conditioning_prob: float,
    device: torch.device,
    dtype: torch.dtype,
    num_timesteps: int | None = None,
    flow_time_sampling: str = "uniform",
    noise_correlation: float = 0.0,
) -> TrainingNoise:
    """The eval-mode draws without a generator: fixed numbers, the same for every example (so a clip's eval loss
    depends on the clip alone) and computed without a generator or a read of a tensor value (``torch.export`` gives
    the eager loss, with a dynamic batch too). The time is the uniform u = 0.5 mapped like a training draw (s = 0.5
    for the paper's uniform sampling; t = N / 2 for diffusion), the noise ``[T, 2]`` is N(0, I) quantiles of an evenly
    spread sequence, and the self-conditioning coin is u = 0.5 (the second pass runs when ``self_conditioning_prob`` >
    0.5). With ``noise_correlation`` rho > 0 the noise is :func:`correlate_noise` of those quantiles."""
    batch, frames, width = shape
    half = torch.full((1,), 0.5, device=device)
    if num_timesteps is None:
        time = flow_time_from_uniform(half, flow_time_sampling)
    else:
        time = torch.full((1,), num_timesteps // 2, dtype=torch.int64, device=device)
    uniform = _weyl_uniform(frames * width, EVAL_WEYL_OFFSET, device)
    white = (math.sqrt(2.0) * torch.erfinv(2.0 * uniform - 1.0)).reshape(frames, width)
    noise = correlate_noise(white, noise_correlation).to(dtype)
    return TrainingNoise(
        time=time.expand(batch),
        noise=noise.unsqueeze(0).expand(batch, frames, width),
        self_condition=(half < self_conditioning_prob).expand(batch),
    )


__all__ = [
    "ModelFn",
    "Projection",
    "COSINE_SCHEDULE_OFFSET",
    "MAX_BETA",
    "REGRESSION_INPUT_TIME",
    "EVAL_NOISE_SEED",
    "EVAL_WEYL_STEP",
    "EVAL_WEYL_OFFSET",
    "estimate_endpoint",
    "scaled",
    "FlowMatchingScheduler",
    "cosine_alphas_cumprod",
    "ddim_timesteps",
    "DDIMScheduler",
    "RegressionScheduler",
    "Scheduler",
    "scheduler_for",
    "correlate_noise",
    "whiten_frames",
    "continue_correlated",
    "draw_noise",
    "GeneratorArgument",
    "example_generators",
    "flow_time_from_uniform",
    "TrainingNoise",
    "draw_training_noise",
    "draw_eval_noise",
]
