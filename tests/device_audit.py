"""Find CUDA pitfalls without a GPU: every host <-> device transfer a piece of code makes, recorded on any device.

Run the code on the ``meta`` device (a stand-in accelerator: shapes and dtypes, no data) under
:class:`HostDeviceAudit`. Three kinds of CUDA bug show up there:

* a tensor made on the CPU inside the code and then combined with the device's tensors raises, as on CUDA
  ("Expected all tensors to be on the same device");
* a host -> device copy (``torch.tensor(x, device=...)``, ``cpu_tensor.to(device)``) is recorded with the line
  that made it: on CUDA each one from pageable memory is a ``cudaMemcpy`` that waits for the whole stream, so one
  inside a sampler's loop stalls the GPU at every step;
* a device -> host read (``.item()``, ``.cpu()``, ``.tolist()``, ``bool(tensor)``, ...) is recorded too (on CUDA
  a synchronisation; on ``meta`` it raises, since there is no data).
"""

from __future__ import annotations

import contextlib
import traceback
from dataclasses import dataclass

import torch
from torch.overrides import TorchFunctionMode

_FACTORIES_FROM_HOST_DATA = {"tensor", "as_tensor", "asarray"}
_MOVES = {"to", "cuda", "copy_"}
_READS = {"item", "cpu", "tolist", "numpy", "__bool__", "__int__", "__float__", "__index__"}


@dataclass(frozen=True)
class Transfer:
    kind: str  # "host->device" or "device->host"
    call: str  # the torch function, e.g. "tensor" or "Tensor.to"
    where: str  # "file.py:line in function" of the caller in this project
    shape: tuple[int, ...] | None = None

    def __str__(self) -> str:
        shape = f" {self.shape}" if self.shape is not None else ""
        return f"{self.kind} {self.call}{shape} at {self.where}"


def _caller() -> str:
    """The innermost calling frame outside torch and this module: the line of our code that made the transfer."""
    skipped = (torch.__file__.rsplit("/", 1)[0], contextlib.__file__.rsplit("/", 1)[0] + "/contextlib.py", __file__)
    for frame in reversed(traceback.extract_stack()):
        if not frame.filename.startswith(skipped):
            return f"{frame.filename.rsplit('/', 1)[-1]}:{frame.lineno} in {frame.name}"
    return "?"


def _device_type(value) -> str | None:
    if value is None:
        return None
    return torch.device(value).type if isinstance(value, (str, torch.device, int)) else None


class HostDeviceAudit(TorchFunctionMode):
    """Record host <-> device transfers (see the module docstring); ``transfers`` lists them in order."""

    def __init__(self) -> None:
        super().__init__()
        self.transfers: list[Transfer] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", str(func))
        if name in _FACTORIES_FROM_HOST_DATA and _device_type(kwargs.get("device")) not in (None, "cpu"):
            self.transfers.append(Transfer("host->device", name, _caller()))
        source = args[0] if args and isinstance(args[0], torch.Tensor) else None
        if source is not None and name in _READS and source.device.type != "cpu":  # recorded first: meta raises
            self.transfers.append(Transfer("device->host", f"Tensor.{name}", _caller(), tuple(source.shape)))
        result = func(*args, **kwargs)
        if source is not None and name in _MOVES:
            moved_from = args[1] if name == "copy_" else source
            moved_to = source if name == "copy_" else result
            if (
                isinstance(moved_from, torch.Tensor)
                and isinstance(moved_to, torch.Tensor)
                and moved_from.device.type == "cpu"
                and moved_to.device.type != "cpu"
            ):
                self.transfers.append(Transfer("host->device", f"Tensor.{name}", _caller(), tuple(moved_from.shape)))
        return result

    def host_to_device(self) -> list[Transfer]:
        return [t for t in self.transfers if t.kind == "host->device"]

    def device_to_host(self) -> list[Transfer]:
        return [t for t in self.transfers if t.kind == "device->host"]


__all__ = ["HostDeviceAudit", "Transfer"]
