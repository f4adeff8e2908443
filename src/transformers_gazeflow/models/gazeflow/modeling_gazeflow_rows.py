"""The velocity network's tokens as rows of a matrix, and the two per-row layers it runs on them: Linear layers (one
``addmm`` for several Linears reading the same input, their weights prepared once for inference) and layer norms.

* :func:`linear_weights` - ``(W^T, b)`` of Linears side by side (optionally with a Linear's output pairs swapped,
  :class:`PairSwapped`, which RoPE reads), kept between calls without autograd while the source weights are
  unchanged;
* :func:`linear_rows` - those Linears on ``rows [R, in]``: one ``addmm``;
* :func:`layer_norm_rows` - a ``LayerNorm`` on rows;
* :class:`PreparedRowLayers` - the same two layers for modules that keep their weights as prepared buffers
  (``<name>_weight`` / ``<name>_bias``: the streamer's), with the same device-dependent bias.

Every output is the same computation as the modules' own forward (``F.linear`` on a 2-D input is this ``addmm``, and
on a 3-D or 4-D one it is the same ``addmm`` between views; ``F.layer_norm`` calls the same kernel), so outputs do
not change; Linears side by side in one ``addmm`` compute each output column as the same dot product, which a BLAS
may sum in another order (float rounding, about 1e-7 in float32). What changes is the count of ops dispatched per
call, which is what an eager step costs on the host: a Linear on a 3-D or 4-D input adds views around its matmul and
transposes its weight at every call.

**A device-dependent choice.** On a CPU, ``addmm`` broadcasts a 1-D bias to the rows with an ``expand`` at every
call; without autograd, :func:`linear_rows` keeps the bias broadcast to a call's row count with the prepared weights
(the same values, two ops fewer per Linear). On CUDA the 1-D bias is passed as it is: cuBLASLt adds a 1-D bias in
the matmul's epilogue (one kernel), which a broadcast 2-D bias would turn into a copy kernel and a matmul.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn


class PairSwapped(NamedTuple):
    """A Linear whose output channels are read with each interleaved pair swapped, ``(y_2j, y_2j+1) ->
    (y_2j+1, y_2j)`` (``modeling_gazeflow_embeddings.swap_pairs`` of its output, what RoPE reads): a permutation of
    its weight's rows and its bias, so the swapped outputs come from the same matmul as the plain ones, each the same
    dot product."""

    layer: nn.Linear


Part = nn.Linear | PairSwapped


def _swap_output_pairs(tensor: torch.Tensor) -> torch.Tensor:
    """A weight's rows ``[out, in]`` or a bias ``[out]`` with each interleaved pair of outputs swapped."""
    return tensor.unflatten(0, (-1, 2)).flip(1).flatten(0, 1)


def _layer(part: Part) -> nn.Linear:
    return part.layer if isinstance(part, PairSwapped) else part


class _PreparedLinear:
    """``(W^T, b)`` of some Linears side by side, the state of their parameters they were made from, and the bias
    broadcast to each row count a CPU call used."""

    def __init__(self, state: tuple, weight_t: torch.Tensor, bias: torch.Tensor | None, sources: list[torch.Tensor]):
        self.state, self.weight_t, self.bias = state, weight_t, bias
        self.sources = sources  # kept, so their storage cannot be reused by a later weight at the same address
        self.broadcast_biases: dict[int, torch.Tensor] = {}

    def bias_for(self, rows: int) -> torch.Tensor:
        """The bias expanded to ``[rows, out]`` (a view, kept per row count)."""
        bias = self.broadcast_biases.get(rows)
        if bias is None:
            if len(self.broadcast_biases) > 8:
                self.broadcast_biases.clear()
            bias = self.broadcast_biases[rows] = self.bias.expand(rows, -1)
        return bias


def _prepared(owner: nn.Module, parts: tuple[Part, ...]) -> _PreparedLinear | None:
    """The kept weights of ``parts`` on ``owner`` (made or remade when a source changed), or None with autograd or
    under ``torch.compile``, where they are made at every call."""
    params = [p for part in parts for p in (_layer(part).weight, _layer(part).bias) if p is not None]
    if torch.compiler.is_compiling() or (torch.is_grad_enabled() and any(p.requires_grad for p in params)):
        return None
    names = tuple((id(_layer(part)), isinstance(part, PairSwapped)) for part in parts)
    kept = owner.__dict__.setdefault("_stacked_weights", {})
    state = tuple((p.data_ptr(), p._version, p.dtype, p.device) for p in params)
    prepared = kept.get(names)
    if prepared is None or prepared.state != state:
        prepared = kept[names] = _PreparedLinear(state, *_join_weights(parts), [p.detach() for p in params])
    return prepared


def _join_weights(parts: tuple[Part, ...]) -> tuple[torch.Tensor, torch.Tensor | None]:
    if len(parts) == 1 and not isinstance(parts[0], PairSwapped):
        return parts[0].weight.t(), parts[0].bias
    layers = [_layer(part) for part in parts]
    weights = [layer.weight for layer in layers]
    biases = [layer.bias if layer.bias is not None else layer.weight.new_zeros(layer.out_features) for layer in layers]
    for index, part in enumerate(parts):
        if isinstance(part, PairSwapped):
            weights[index] = _swap_output_pairs(weights[index])
            biases[index] = _swap_output_pairs(biases[index])
    bias = None if all(layer.bias is None for layer in layers) else torch.cat(biases)
    return torch.cat(weights).t(), bias


def linear_weights(owner: nn.Module, parts: tuple[Part, ...]) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(W^T [in, out], b [out])`` of Linears reading the same input, side by side in the order of ``parts``, so
    that ``torch.addmm(b, x, W^T)`` gives all their outputs in one matmul (each output column the same dot product
    as in its own layer; ``W^T`` is a transposed view, as ``F.linear`` passes it).

    Without autograd they are kept on ``owner`` between calls while every source weight is unchanged (same storage,
    same version counter, which in-place updates such as an optimizer step bump); with autograd (training) or under
    ``torch.compile`` they are made on every call."""
    prepared = _prepared(owner, parts)
    return _join_weights(parts) if prepared is None else (prepared.weight_t, prepared.bias)


def linear_rows(owner: nn.Module, parts: tuple[Part, ...], rows: torch.Tensor) -> torch.Tensor:
    """The Linears ``parts`` (see :func:`linear_weights`) on ``rows [R, in]``: ``[R, sum of out]``, one matmul.

    A Linear that is not a plain ``nn.Linear`` (a peft adapter around one) is called as a module.

    Twin of ``nn.Linear``: change both; held equal by ``tests/test_twins.py::test_row_layers_equal_torch_layers``.
    """
    if any(type(_layer(part)) is not nn.Linear for part in parts):
        outputs = [
            _swap_output_pairs(part.layer(rows).t()).t() if isinstance(part, PairSwapped) else part(rows)
            for part in parts
        ]
        return torch.cat(outputs, dim=-1)
    prepared = _prepared(owner, parts)
    if prepared is None:
        weight_t, bias = _join_weights(parts)
    else:
        weight_t, bias = prepared.weight_t, prepared.bias
        if bias is not None and rows.device.type == "cpu":  # see the module docstring
            bias = prepared.bias_for(rows.shape[0])
    return torch.mm(rows, weight_t) if bias is None else torch.addmm(bias, rows, weight_t)


def layer_norm_rows(norm: nn.LayerNorm, rows: torch.Tensor) -> torch.Tensor:
    """``norm(rows)``: the layer norm's kernel called directly (``F.layer_norm`` dispatches to it through one more
    op). A norm that is not a plain ``nn.LayerNorm`` is called as a module.

    Twin of ``nn.LayerNorm``: change both; held equal by ``tests/test_twins.py::test_row_layers_equal_torch_layers``.
    """
    if type(norm) is not nn.LayerNorm:
        return norm(rows)
    return torch.native_layer_norm(rows, norm.normalized_shape, norm.weight, norm.bias, norm.eps)[0]


class PreparedRowLayers(nn.Module):
    """A module whose Linears and layer norms are prepared buffers: a Linear ``name`` as ``<name>_weight`` ``W^T
    [in, out]`` and ``<name>_bias`` ``[out]``, a layer norm ``name`` as ``<name>_weight`` / ``<name>_bias`` ``[d]``.

    :meth:`linear` is ``torch.addmm(b, rows, W^T)``, with the bias broadcast to the row count once and kept on a CPU
    outside ``torch.compile`` (the module docstring's device-dependent choice); :meth:`layer_norm` calls the layer
    norm's kernel directly. The same sums as ``F.linear`` / ``F.layer_norm`` (a BLAS may order the
    linear's sums differently for a contiguous ``W^T``)."""

    layer_norm_eps: float

    def register_prepared(self, tensors: dict[str, torch.Tensor], dtype: torch.dtype) -> None:
        """Register ``tensors`` as non-persistent buffers, detached, in ``dtype`` and contiguous (made once, when the
        module is built from a model's modules)."""
        for name, tensor in tensors.items():
            self.register_buffer(name, tensor.detach().to(dtype).contiguous(), persistent=False)

    def prepare_linear(self, name: str, linear: nn.Linear, dtype: torch.dtype) -> None:
        """Linear ``name`` from ``linear``: ``<name>_weight`` ``W^T [in, out]`` and ``<name>_bias``."""
        self.register_prepared({f"{name}_weight": linear.weight.t(), f"{name}_bias": linear.bias}, dtype)

    def prepare_layer_norm(self, name: str, norm: nn.LayerNorm, dtype: torch.dtype) -> None:
        """Layer norm ``name`` from ``norm``: ``<name>_weight`` and ``<name>_bias`` ``[d]``."""
        self.register_prepared({f"{name}_weight": norm.weight, f"{name}_bias": norm.bias}, dtype)

    def linear(self, name: str, rows: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        """Linear ``name`` on ``rows [R, in]`` (``bias`` in place of its own, e.g. one with more folded in: used as
        it is given).

        Twin of ``functional.linear``: change both; held equal by
        ``tests/test_twins.py::test_row_layers_equal_torch_layers``.
        """
        if bias is None:
            bias = getattr(self, f"{name}_bias")
            if rows.device.type == "cpu" and not torch.compiler.is_compiling():
                bias = self._broadcast_bias(name, bias, rows.shape[0])
        return torch.addmm(bias, rows, getattr(self, f"{name}_weight"))

    def _broadcast_bias(self, name: str, bias: torch.Tensor, rows: int) -> torch.Tensor:
        kept = self.__dict__.setdefault("_broadcast_biases", {})
        key = (name, rows, bias.data_ptr(), bias._version)
        broadcast = kept.get(key)
        if broadcast is None:
            if len(kept) > 64:
                kept.clear()
            broadcast = kept[key] = bias.expand(rows, -1)
        return broadcast

    def layer_norm(self, name: str, rows: torch.Tensor) -> torch.Tensor:
        """Layer norm ``name`` over the last dimension of ``rows``.

        Twin of ``functional.layer_norm``: change both; held equal by
        ``tests/test_twins.py::test_row_layers_equal_torch_layers``.
        """
        weight = getattr(self, f"{name}_weight")
        return torch.native_layer_norm(rows, weight.shape, weight, getattr(self, f"{name}_bias"), self.layer_norm_eps)[
            0
        ]


__all__ = ["PairSwapped", "linear_weights", "linear_rows", "layer_norm_rows", "PreparedRowLayers"]
