"""The training state as safetensors files: nothing a checkpoint holds is ever unpickled.

Accelerate's ``save_state`` pickles the optimizer, the scheduler, the random states and every registered object,
and ``load_state`` unpickles them (registered objects with ``weights_only=False``): a crafted checkpoint could run
code on resume. Here every piece of state is one safetensors file. Module weights are written by safetensors
itself; any other state (an optimizer's or scheduler's ``state_dict()``, the random generators) is a *tree* of
dicts, lists, tuples, numbers, strings and tensors, stored as its tensors plus a JSON description of the structure
in the file's metadata. :func:`read_state_file` rebuilds only those types, so reading a checkpoint can at worst
fail, never execute anything. Every error names the file.
"""

from __future__ import annotations

import json
import math
import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_model, save_file, save_model

from ..data.atomic_files import fsync_file

STATE_FORMAT = "gazeflow-state/1"
_RNG_DEVICE_MODULES = ("cuda", "xpu")  # device generators captured when the backend is available


class StateFileError(ValueError):
    """A state file that cannot be read back; the message starts with the file's path."""


# ---------------------------------------------------------------------------------------------------- tree codec
def encode_tree(node: Any, tensors: dict[str, torch.Tensor]) -> Any:
    """``node`` as JSON-ready data; its tensors (and NumPy arrays) go to ``tensors`` under numbered keys."""
    if isinstance(node, torch.Tensor):
        key = str(len(tensors))
        tensors[key] = node.detach().to("cpu").contiguous()
        return {"__tensor__": key}
    if isinstance(node, np.ndarray):
        key = str(len(tensors))
        # safetensors has no unsigned 32-bit type in every version: widen, and record the dtype to narrow back
        widened = node.astype(np.int64) if node.dtype == np.uint32 else np.ascontiguousarray(node)
        tensors[key] = torch.from_numpy(widened)
        return {"__ndarray__": key, "dtype": str(node.dtype)}
    if node is None or isinstance(node, (bool, str)):
        return node
    if isinstance(node, (int, np.integer)):
        return int(node)
    if isinstance(node, (float, np.floating)):
        return float(node) if math.isfinite(node) else {"__float__": repr(float(node))}
    if isinstance(node, tuple):
        return {"__tuple__": [encode_tree(item, tensors) for item in node]}
    if isinstance(node, list):
        return [encode_tree(item, tensors) for item in node]
    if isinstance(node, dict):
        if all(isinstance(key, str) and not key.startswith("__") for key in node):
            return {key: encode_tree(value, tensors) for key, value in node.items()}
        return {"__items__": [[encode_tree(key, tensors), encode_tree(value, tensors)] for key, value in node.items()]}
    raise TypeError(
        f"cannot store a {type(node).__name__} in a checkpoint (only tensors, arrays, numbers, strings, "
        f"None, lists, tuples and dicts)"
    )


def decode_tree(node: Any, tensors: dict[str, torch.Tensor]) -> Any:
    """Inverse of :func:`encode_tree`; raises ``ValueError`` on anything it did not write."""
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    if isinstance(node, list):
        return [decode_tree(item, tensors) for item in node]
    if not isinstance(node, dict):
        raise ValueError(f"unexpected {type(node).__name__} in the state tree")
    if "__tensor__" in node:
        return tensors[node["__tensor__"]]
    if "__ndarray__" in node:
        return tensors[node["__ndarray__"]].numpy().astype(np.dtype(node["dtype"]))
    if "__float__" in node:
        if node["__float__"] not in ("nan", "inf", "-inf"):
            raise ValueError(f"unexpected float {node['__float__']!r} in the state tree")
        return float(node["__float__"])
    if "__tuple__" in node:
        return tuple(decode_tree(item, tensors) for item in node["__tuple__"])
    if "__items__" in node:
        return {decode_tree(key, tensors): decode_tree(value, tensors) for key, value in node["__items__"]}
    return {key: decode_tree(value, tensors) for key, value in node.items()}


# ---------------------------------------------------------------------------------------------------- files
def write_state_file(path: str | os.PathLike, tree: Any) -> None:
    """Write a state tree (e.g. ``optimizer.state_dict()``) to ``path`` as safetensors + JSON metadata."""
    tensors: dict[str, torch.Tensor] = {}
    encoded = encode_tree(tree, tensors)
    save_file(tensors, str(path), metadata={"format": STATE_FORMAT, "tree": json.dumps(encoded, allow_nan=False)})
    fsync_file(path)


def read_state_file(path: str | os.PathLike) -> Any:
    """Read a tree written by :func:`write_state_file`. ``StateFileError`` naming the file when it is unreadable."""
    try:
        with safe_open(str(path), framework="pt") as handle:
            metadata = handle.metadata() or {}
            if metadata.get("format") != STATE_FORMAT or "tree" not in metadata:
                raise StateFileError(f"{path}: not a training-state file (no {STATE_FORMAT!r} metadata)")
            tensors = {key: handle.get_tensor(key) for key in handle.keys()}
        return decode_tree(json.loads(metadata["tree"]), tensors)
    except StateFileError:
        raise
    except (SafetensorError, OSError, ValueError, KeyError, TypeError) as err:
        raise StateFileError(f"{path}: unreadable training state ({type(err).__name__}: {err})") from err


def write_module_file(path: str | os.PathLike, module: torch.nn.Module) -> None:
    """A module's ``state_dict()`` (parameters and buffers) as safetensors (shared tensors written once)."""
    save_model(module, str(path))
    fsync_file(path)


def read_module_file(path: str | os.PathLike, module: torch.nn.Module) -> None:
    """Load a :func:`write_module_file` file into ``module``; every key must match (``StateFileError`` otherwise)."""
    try:
        missing, unexpected = load_model(module, str(path), strict=False)
    except (SafetensorError, OSError, RuntimeError, ValueError) as err:
        raise StateFileError(
            f"{path}: cannot load it into the {type(module).__name__} ({type(err).__name__}: {str(err)[:500]})"
        ) from err
    if missing or unexpected:
        raise StateFileError(
            f"{path}: does not match this {type(module).__name__} (missing {sorted(missing)[:5]}, "
            f"unexpected {sorted(unexpected)[:5]}): was it written for another model config?"
        )


def first_non_finite_tensor(path: str | os.PathLike) -> str | None:
    """The name of the first floating-point tensor of a safetensors file holding NaN or inf, or ``None``."""
    with safe_open(str(path), framework="pt") as handle:
        for key in handle.keys():
            tensor = handle.get_tensor(key)
            if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
                return key
    return None


def first_non_finite_parameter(module: torch.nn.Module) -> str | None:
    """The name of the first parameter or floating buffer of ``module`` holding NaN or inf, or ``None``."""
    for name, tensor in list(module.named_parameters()) + list(module.named_buffers()):
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor.detach()).all()):
            return name
    return None


# ---------------------------------------------------------------------------------------------------- structured state
def restore_tuples(loaded: Any, reference: Any) -> Any:
    """``loaded`` with lists turned back into tuples wherever ``reference`` (the live object's state) has a tuple
    (an optimizer's ``betas``), so a resumed run holds exactly the objects an uninterrupted one does."""
    if isinstance(reference, tuple) and isinstance(loaded, (list, tuple)):
        return tuple(loaded)
    if isinstance(reference, dict) and isinstance(loaded, dict):
        return {key: restore_tuples(value, reference.get(key)) for key, value in loaded.items()}
    if isinstance(reference, list) and isinstance(loaded, list) and len(reference) == len(loaded):
        return [restore_tuples(value, ref) for value, ref in zip(loaded, reference)]
    return loaded


def capture_rng_state() -> dict:
    """This process's random generators: Python's, NumPy's global one, torch's CPU one and each device's."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    for name in _RNG_DEVICE_MODULES:
        backend = getattr(torch, name, None)
        if backend is not None and backend.is_available():
            state[name] = backend.get_rng_state_all()
    return state


def restore_rng_state(state: dict) -> None:
    """Set every generator captured by :func:`capture_rng_state` (``ValueError`` when a state does not fit)."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    for name in _RNG_DEVICE_MODULES:
        if name in state:
            backend = getattr(torch, name, None)
            if backend is None or not backend.is_available() or backend.device_count() < len(state[name]):
                raise ValueError(
                    f"it holds the random state of {len(state[name])} {name} device(s), which this "
                    f"process does not have"
                )
            backend.set_rng_state_all(state[name])


def read_rng_file(path: Path) -> dict:
    """Restore this process's generators from ``path`` (``StateFileError`` naming it when it does not fit); returns
    the file's whole state (with any entry beside :func:`capture_rng_state`'s, for the caller)."""
    state = read_state_file(path)
    try:
        restore_rng_state(state)
    except (KeyError, TypeError, ValueError, RuntimeError) as err:
        raise StateFileError(f"{path}: not a usable random state ({type(err).__name__}: {err})") from err
    return state


__all__ = [
    "StateFileError",
    "encode_tree",
    "decode_tree",
    "write_state_file",
    "read_state_file",
    "write_module_file",
    "read_module_file",
    "first_non_finite_tensor",
    "first_non_finite_parameter",
    "restore_tuples",
    "capture_rng_state",
    "restore_rng_state",
    "read_rng_file",
]
