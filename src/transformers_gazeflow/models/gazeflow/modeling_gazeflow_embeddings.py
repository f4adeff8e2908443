"""The embeddings of GazeFlow's velocity network and condition encoder (paper Section 3.2, Appendix C.1-C.2):

* :func:`sinusoidal_embedding` - the sinusoidal features under the timestep, coordinate and self-conditioning
  embeddings (our reading of what Section 3.2 leaves open), and :class:`GazeFlowSinusoidalMLP` on top of them;
  :func:`embed_gaze` - E_coord(x_s) + E_self(x1_hat), the features of both from one pass;
* :func:`sincos_2d_position_encoding` - the 2D sinusoidal spatial position encoding (Appendix C.1);
* :class:`GazeFlowRotaryEmbedding` and :func:`apply_rotary` - 1D RoPE over the frame index, base theta (Appendix
  C.2); :func:`apply_signed_rotary` is the same rotation from a signed sine table, as the attention applies it.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .modeling_gazeflow_rows import linear_rows

TIME_EMBEDDING_SCALE = 1000.0
"""The flow time s in [0, 1] is embedded as DiT embeds its timestep t = 1000 s."""

COORDINATE_EMBEDDING_SCALE = 100.0
"""Coordinates in [-1, 1] (x_s and x1_hat) get frequencies up to 100 rad per unit: fine enough for a pixel of a
640 px frame after the MLP, while keeping the embedding smooth (its Lipschitz constant bounds how much a small
change of x_s, e.g. an ODE solver's error, can change v_theta)."""


def sinusoidal_frequencies(
    dim: int, max_period: float = 10000.0, device: torch.device | str | None = None
) -> torch.Tensor:
    """The ``dim / 2`` frequencies ``w_j = max_period^(-j / (dim / 2))`` of :func:`sinusoidal_embedding`, float32,
    computed on ``device`` (default the CPU)."""
    half = dim // 2
    exponent = torch.arange(half, dtype=torch.float32, device=device) / half
    return torch.exp(-math.log(max_period) * exponent)


def sinusoidal_features(values: torch.Tensor, frequencies: torch.Tensor, scale: float | torch.Tensor) -> torch.Tensor:
    """``[cos(scale v w_j), sin(scale v w_j)]`` for ``values [...]`` and ``frequencies [dim / 2]``: ``[..., dim]``.
    ``scale`` may be a float32 scalar tensor (the same product, without converting a Python float at each call)."""
    values = values if values.dtype == torch.float32 else values.float()
    angles = values.unsqueeze(-1) * scale * frequencies
    return torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1)


def sinusoidal_embedding(values: torch.Tensor, dim: int, scale: float, max_period: float = 10000.0) -> torch.Tensor:
    """Sinusoidal features ``[cos(scale v w_j), sin(scale v w_j)]``, ``w_j = max_period^(-j / (dim / 2))``.

    ``values`` of shape ``[...]`` give features ``[..., dim]``.
    """
    return sinusoidal_features(values, sinusoidal_frequencies(dim, max_period).to(values.device), scale)


def sincos_2d_position_encoding(grid_size: int, dim: int) -> torch.Tensor:
    """2D sin-cos position encoding of a ``grid_size x grid_size`` token grid, ``[grid_size**2, dim]`` (App. C.1).

    Half of the channels encode the row, half the column, each with sin and cos at ``dim / 4`` frequencies
    ``10000^(-i / (dim / 4))`` (the MAE / ViT convention). Tokens are in row-major order, as V-JEPA 2 emits them.
    """
    quarter = dim // 4
    omega = 1.0 / 10000 ** (torch.arange(quarter, dtype=torch.float64) / quarter)
    rows, cols = torch.meshgrid(
        torch.arange(grid_size, dtype=torch.float64), torch.arange(grid_size, dtype=torch.float64), indexing="ij"
    )
    row_angles = rows.reshape(-1, 1) * omega
    col_angles = cols.reshape(-1, 1) * omega
    encoding = torch.cat([row_angles.sin(), row_angles.cos(), col_angles.sin(), col_angles.cos()], dim=1)
    return encoding.float()


class GazeFlowSinusoidalMLP(nn.Module):
    """Sinusoidal features followed by a 2-layer MLP (Linear -> SiLU -> Linear) to width d.

    Used for the flow time s (per trajectory), the gaze coordinates x_s and the self-conditioning input x1_hat
    (per frame, each of the two coordinates getting d/2 features). The frequencies are a buffer computed once
    (:func:`sinusoidal_frequencies`; recomputed by ``_init_weights`` after loading).
    """

    def __init__(self, num_inputs: int, hidden_size: int, scale: float):
        super().__init__()
        self.num_inputs = num_inputs
        self.scale = scale
        self.feature_size = hidden_size
        self.linear_in = nn.Linear(hidden_size, hidden_size)
        self.act = nn.SiLU()
        self.linear_out = nn.Linear(hidden_size, hidden_size)
        self.register_buffer("frequencies", self.compute_frequencies(), persistent=False)
        self.register_buffer("scale_tensor", torch.tensor(float(scale)), persistent=False)  # float32, as the features

    def compute_frequencies(self) -> torch.Tensor:
        """The frequencies of each input's ``feature_size / num_inputs`` features."""
        return sinusoidal_frequencies(self.feature_size // self.num_inputs)

    def features(self, values: torch.Tensor) -> torch.Tensor:
        """Sinusoidal features ``[..., d]`` of ``values`` (``[...]`` for one input, ``[..., num_inputs]`` for more):
        each input's ``[cos, sin]`` block in turn."""
        if self.num_inputs == 1:
            return sinusoidal_features(values, self.frequencies, self.scale_tensor)
        return sinusoidal_features(values, self.frequencies, self.scale_tensor).flatten(-2)

    def project(self, features: torch.Tensor) -> torch.Tensor:
        """The MLP on sinusoidal features ``[..., d]`` (each Linear one matmul on the rows)."""
        rows = features.reshape(-1, features.shape[-1])
        if rows.dtype != self.linear_in.weight.dtype:
            rows = rows.to(self.linear_in.weight.dtype)
        hidden = self.act(linear_rows(self, (self.linear_in,), rows))
        return linear_rows(self, (self.linear_out,), hidden).view(*features.shape[:-1], -1)

    def forward(self, values: torch.Tensor) -> torch.Tensor:
        return self.project(self.features(values))


def embed_gaze(
    coordinate: GazeFlowSinusoidalMLP,
    self_conditioning: GazeFlowSinusoidalMLP,
    sample: torch.Tensor,
    self_condition: torch.Tensor,
) -> torch.Tensor:
    """E_coord(x_s) + E_self(x1_hat) ``[..., T, d]``: when the two embeddings share their scale and frequencies, the
    sinusoidal features of both come from one pass over the four coordinates, each then through its own MLP."""
    if coordinate.scale != self_conditioning.scale or coordinate.feature_size != self_conditioning.feature_size:
        return coordinate(sample) + self_conditioning(self_condition)
    features = coordinate.features(torch.cat([sample, self_condition], dim=-1))
    width = coordinate.feature_size
    return coordinate.project(features[..., :width]) + self_conditioning.project(features[..., width:])


def flow_time_tensor(flow_time: torch.Tensor | float, batch: int, samples: int, device: torch.device) -> torch.Tensor:
    """The flow time s as the network reads it: ``[B, K]`` float32 on ``device``."""
    if not torch.is_tensor(flow_time):  # filled on the device: torch.tensor(s, device=...) would be a blocking copy
        flow_time = torch.full((), float(flow_time), device=device)
    return flow_time.to(device=device, dtype=torch.float32).expand(batch, samples)


class GazeFlowRotaryEmbedding(nn.Module):
    """1D rotary position embedding over the frame index p (paper Appendix C.2), the default frame position.

    Each query/key pair ``(q_2j, q_2j+1)`` is rotated by ``phi_{p,j} = p * theta^(-2j / d_h)``; values are not
    rotated, so the attention logit depends only on the frame offset ``p - p'``.
    """

    def __init__(self, head_dim: int, theta: float):
        super().__init__()
        self.head_dim, self.theta = head_dim, theta
        self.register_buffer("inv_freq", self.compute_inv_freq(), persistent=False)
        self._tables: dict = {}

    def compute_inv_freq(self) -> torch.Tensor:
        """theta^(-2j / d_h) for j = 0 .. d_h / 2 - 1 (recomputed by ``_init_weights`` after loading)."""
        return self.theta ** (-torch.arange(0, self.head_dim, 2, dtype=torch.float32) / self.head_dim)

    def forward(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Cosines and sines ``[len(positions), d_h]`` at the frame indices ``positions``, each angle repeated for
        the two channels of a pair."""
        angles = positions.float()[:, None] * self.inv_freq.to(positions.device)[None, :]
        angles = angles.repeat_interleave(2, dim=-1)
        return angles.cos(), angles.sin()

    def signed(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`forward` with the sine negated on each pair's first channel, what :func:`apply_signed_rotary`
        reads."""
        cos, sin = self(positions)
        sign = torch.ones(self.head_dim, device=positions.device)
        sign[0::2] = -1.0
        return cos, sin * sign

    def table(
        self, num_frames: int, device: torch.device, heads: int = 1, dtype: torch.dtype = torch.float32
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`signed` at the positions ``0 .. num_frames - 1``, repeated for ``heads`` heads side by side
        (``[num_frames, heads * d_h]``: the attention rotates its query and key heads in one product) in ``dtype``,
        computed once per length, width, dtype and device (the frequencies are a constant of the config: the table
        only changes with them)."""
        if torch.compiler.is_compiling():
            return self.tiled(self.signed(torch.arange(num_frames, device=device)), heads, dtype)
        key = (num_frames, str(device), heads, dtype, self.inv_freq.data_ptr(), self.inv_freq._version)
        if key not in self._tables:
            if len(self._tables) > 8:
                self._tables.clear()
            self._tables[key] = self.tiled(self.signed(torch.arange(num_frames, device=device)), heads, dtype)
        return self._tables[key]

    @staticmethod
    def tiled(
        tables: tuple[torch.Tensor, torch.Tensor], heads: int, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Cosines and signed sines ``[L, d_h]`` repeated for ``heads`` heads, ``[L, heads * d_h]``, in ``dtype``."""
        return tuple(table.repeat(1, heads).to(dtype) for table in tables)


def swap_pairs(states: torch.Tensor) -> torch.Tensor:
    """``(x_2j, x_2j+1) -> (x_2j+1, x_2j)`` over the last dimension of ``states [..., d_h]``."""
    return states.unflatten(-1, (-1, 2)).flip(-1).flatten(-2)


def rotate_pairs(states: torch.Tensor) -> torch.Tensor:
    """``(x_2j, x_2j+1) -> (-x_2j+1, x_2j)`` over the last dimension of ``states [..., d]``: each interleaved channel
    pair turned a quarter turn, the factor RoPE multiplies by the sine (V-JEPA 2's and GazeFlow's convention). On
    a weight's columns it is a signed permutation, so ``x @ rotate_pairs(W)`` is exactly ``rotate_pairs(x @ W)``."""
    pairs = states.unflatten(-1, (-1, 2))
    return torch.stack((-pairs[..., 1], pairs[..., 0]), dim=-1).flatten(-2)


def apply_rotary(states: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate the interleaved channel pairs of ``states [..., T, d_h]`` by the RoPE angles (Appendix C.2):
    ``(x_2j, x_2j+1) -> (x_2j cos - x_2j+1 sin, x_2j+1 cos + x_2j sin)`` (``cos``, ``sin`` of
    :meth:`GazeFlowRotaryEmbedding.forward`).

    Twin of ``modeling_gazeflow_embeddings.apply_signed_rotary``: change both; held equal by
    ``tests/test_twins.py::test_rope_forms_equal_apply_rotary``.
    Twin of ``modeling_gazeflow_attention.GazeFlowAttention.self_attention_rows``: change both; held equal by
    ``tests/test_twins.py::test_rope_forms_equal_apply_rotary``.
    """
    return states * cos.to(states.dtype) + rotate_pairs(states) * sin.to(states.dtype)


def apply_signed_rotary(states: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """:func:`apply_rotary` with the sine's sign folded in (:meth:`GazeFlowRotaryEmbedding.signed`): the same values
    (``-x_2j+1 sin`` is ``x_2j+1 (-sin)`` exactly) from a swap of the pairs instead of a stack of negated halves.

    Twin of ``modeling_gazeflow_embeddings.apply_rotary``: change both; held equal by
    ``tests/test_twins.py::test_rope_forms_equal_apply_rotary``.
    """
    return states * cos.to(states.dtype) + swap_pairs(states) * signed_sin.to(states.dtype)


__all__ = [
    "TIME_EMBEDDING_SCALE",
    "COORDINATE_EMBEDDING_SCALE",
    "sinusoidal_frequencies",
    "sinusoidal_features",
    "sinusoidal_embedding",
    "sincos_2d_position_encoding",
    "GazeFlowSinusoidalMLP",
    "embed_gaze",
    "flow_time_tensor",
    "GazeFlowRotaryEmbedding",
    "swap_pairs",
    "rotate_pairs",
    "apply_rotary",
    "apply_signed_rotary",
]
