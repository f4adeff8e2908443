"""Sampling the diffusion ablation (paper Section 4.4 "Flow Matching vs. Diffusion", Appendix F.4): DDIM.

The diffusion variant trains the same network to predict the noise eps of x_t = sqrt(alpha_bar_t) g +
sqrt(1 - alpha_bar_t) eps under the cosine schedule (``modeling_gazeflow_objectives.cosine_alphas_cumprod``).
:class:`DDIMSampler` is deterministic DDIM (Song et al. 2021, eta = 0) over S of the N training timesteps with the
"trailing" spacing t_i = round(N - i N / S) - 1 (so S = 1 starts from pure noise at t = N - 1 and every S ends at
alpha_bar = 1). One network call per step, as the flow-matching Euler sampler: the same S costs the same time.

Each step, from x_t with the network's eps_hat:

    x0_hat = clip((x_t - sqrt(1 - alpha_bar_t) eps_hat) / sqrt(alpha_bar_t), -1, 1)
    x_prev = sqrt(alpha_bar_prev) x0_hat + sqrt(1 - alpha_bar_prev) eps_hat   (alpha_bar_prev = 1 after the last)

and x0_hat is fed back as the self-conditioning input of the next call (zeros at the first), as in training.
Kept apart from the network: the sampler only sees ``eps_fn(x_t, tau, x0_hat)`` with tau = t / N.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from .modeling_gazeflow_objectives import cosine_alphas_cumprod

NoiseFn = Callable[[torch.Tensor, float, torch.Tensor], torch.Tensor]
"""``eps_fn(x_t, tau, x0_hat) -> eps_hat``: tensors ``[B, K, T, 2]`` in model coordinates, ``tau = t / N``."""


def ddim_timesteps(num_steps: int, num_timesteps: int) -> list[int]:
    """The S timesteps visited, from noisiest to cleanest (trailing spacing)."""
    if not 1 <= num_steps <= num_timesteps:
        raise ValueError(f"`num_steps` (S) must be in [1, diffusion_timesteps={num_timesteps}], got {num_steps}")
    return [round(num_timesteps - i * num_timesteps / num_steps) - 1 for i in range(num_steps)]


@dataclass(frozen=True)
class DDIMSampler:
    """Deterministic DDIM over ``num_steps`` of ``num_timesteps`` cosine-schedule timesteps; :meth:`step` is pure."""

    num_steps: int
    num_timesteps: int = 1000
    alphas_cumprod: torch.Tensor = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        ddim_timesteps(self.num_steps, self.num_timesteps)
        object.__setattr__(self, "alphas_cumprod", cosine_alphas_cumprod(self.num_timesteps))

    calls_per_step = 1

    def timesteps(self) -> list[int]:
        return ddim_timesteps(self.num_steps, self.num_timesteps)

    def alpha_bar(self, timestep: int) -> float:
        """alpha_bar_t, with alpha_bar_{-1} = 1 (the clean end)."""
        return 1.0 if timestep < 0 else float(self.alphas_cumprod[timestep])

    def step(self, eps_fn: NoiseFn, sample: torch.Tensor, self_condition: torch.Tensor, timestep: int,
             previous_timestep: int) -> tuple[torch.Tensor, torch.Tensor]:
        """One DDIM step from ``timestep`` to ``previous_timestep`` (-1: the end); returns (x_prev, x0_hat)."""
        alpha_bar, alpha_bar_prev = self.alpha_bar(timestep), self.alpha_bar(previous_timestep)
        eps = eps_fn(sample, timestep / self.num_timesteps, self_condition)
        clean = ((sample - (1 - alpha_bar) ** 0.5 * eps) / alpha_bar ** 0.5).clamp(-1.0, 1.0)
        return alpha_bar_prev ** 0.5 * clean + (1 - alpha_bar_prev) ** 0.5 * eps, clean

    def sample(self, eps_fn: NoiseFn, noise: torch.Tensor) -> torch.Tensor:
        """From x_{N-1} = ``noise`` to x_0; self-conditioning starts from zeros."""
        sample, self_condition = noise, torch.zeros_like(noise)
        times = self.timesteps()
        for timestep, previous in zip(times, times[1:] + [-1]):
            sample, self_condition = self.step(eps_fn, sample, self_condition, timestep, previous)
        return sample


__all__ = ["NoiseFn", "ddim_timesteps", "DDIMSampler"]
