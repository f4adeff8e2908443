"""The causal streamer's per-frame step as ONNX, for devices (what ``gazeflow export-streamer`` writes and the
``onnxruntime`` stepper of :mod:`.steppers` runs): :class:`ExportedStep`, :func:`export_streamer` and the folder's
``streamer.json`` (:func:`streamer_interface`, :func:`read_interface`).

The exported graph is :meth:`GazeFlowStreamerStep.functional <transformers_gazeflow.generation.streaming_step.
GazeFlowStreamerStep.functional>` (paper Appendix F.4's causal model, one frame): a pure function

    (frame, noise, state) -> (gaze_samples, gaze_point, next_state)

* ``frame`` ``[1, 3, S, S]`` float32: the frame resized to S x S and normalised (``preprocessor_config.json``:
  ``(pixel / 255 - mean) / std`` per RGB channel);
* ``noise`` ``[1, K, 1, 2]`` float32: this frame's x_0, K x 2 independent standard normal draws (model coordinates);
  for a model with ``noise_correlation`` rho > 0 (``streamer.json`` then says so), x_0[t] = rho x_0[t - 1] +
  sqrt(1 - rho^2) e_t with e_t such draws and x_0[0] = e_0 (the model's AR(1) prior over frames);
* ``state.*``: the ring buffers (:class:`~transformers_gazeflow.generation.streaming_step.StreamerState`: the frame
  index, the encoder's frame window, the task bank's summaries and keys/values, every sampler call's and block's
  self-attention keys/values, and with ``num_temporal_layers`` the temporal layers' keys/values); all zeros for a
  new stream (``state.frame_index`` is int64 0);
* ``gaze_samples`` ``[1, K, 2]`` and ``gaze_point`` ``[1, 2]``: the K samples' gaze at the frame and their mean, in
  unit coordinates ([0, 1] from the top-left corner, clamped); ``next_state.*``: the state to feed back as
  ``state.*`` with the next frame.

Every shape is fixed (batch 1; K, S and the solver, the step's ``SamplingSettings``, chosen at export). The folder
holds ``step.onnx`` (weights inside), ``streamer.json`` (:func:`streamer_interface`: names, shapes, dtypes, the
state's start, the noise, the preprocessing, and what the export checked), ``preprocessor_config.json`` and the
model's ``config.json``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.utils._pytree as pytree
from torch import nn

from ..data.interface_files import STREAMER_FORMAT, STREAMER_INPUTS, STREAMER_OUTPUTS
from ..data.interface_files import read_json_object as _read_json_object
from ..data.interface_files import streamer_interface as _checked_interface
from ..data.output_safety import replace_folder
from ..models.gazeflow.choices import DEFAULT_OPSET
from ..models.gazeflow.generation_gazeflow import SamplingSettings
from .streaming_step import GazeFlowStreamerStep, StreamerState

EXPORT_FORMATS = ("onnx",)
STEP_FILE, INTERFACE_FILE = "step.onnx", "streamer.json"
INTERFACE_FORMAT = STREAMER_FORMAT
INPUTS, OUTPUTS = STREAMER_INPUTS, STREAMER_OUTPUTS
CHECK_FRAMES, CHECK_TOLERANCE = 24, 1e-3
"""Frames the export runs through onnxruntime beside torch (past the W-frame context, so the rings wrap) and the
largest difference in unit coordinates it accepts."""


class ExportCheckError(ValueError):
    """An exported step that onnxruntime cannot load, or whose gaze differs from torch's past the tolerance (one
    line naming the graph; nothing is kept)."""


class ExportedStep(nn.Module):
    """:meth:`GazeFlowStreamerStep.functional` with the state flattened into tensors (what ONNX takes)."""

    def __init__(self, step: GazeFlowStreamerStep, state_layout: pytree.TreeSpec):
        super().__init__()
        self.step, self.state_layout = step, state_layout

    def forward(self, frame: torch.Tensor, noise: torch.Tensor, *state: torch.Tensor) -> tuple[torch.Tensor, ...]:
        samples, point, next_state = self.step.functional(
            frame, noise, pytree.tree_unflatten(list(state), self.state_layout)
        )
        return (samples, point, *pytree.tree_leaves(next_state))


def state_names(state: StreamerState) -> list[str]:
    """``state.frame_index``, ``state.frames``, ..., ``state.self_attention.0.1.key``: one per state tensor, in the
    state's flattening order."""
    paths = [pytree.keystr(path) for path, _ in pytree.tree_flatten_with_path(state)[0]]
    return ["state" + path.replace("][", ".").replace("[", ".").replace("]", "") for path in paths]


def tensor_entry(name: str, tensor: torch.Tensor | np.ndarray, **extra: Any) -> dict[str, Any]:
    dtype = str(tensor.dtype).removeprefix("torch.")
    return {"name": name, "shape": list(tensor.shape), "dtype": dtype, **extra}


def streamer_interface(
    step: GazeFlowStreamerStep, state: StreamerState, processor, opset: int, model_name: str
) -> dict[str, Any]:
    """What ``streamer.json`` says: the inputs and outputs (names, shapes, dtypes, meaning), how the state starts,
    what the noise is and how frames are prepared."""
    names = state_names(state)
    leaves = state.tensors()
    config, settings = step.config, step.settings
    size = config.image_size
    frame, noise = torch.zeros(1, 3, size, size), torch.zeros(1, settings.num_samples, 1, 2)
    noise_meaning = (
        "x_0 of this frame: K x 2 independent standard normal draws (model coordinates); a new draw every frame"
    )
    correlated = {}
    if config.noise_correlation > 0:
        noise_meaning = (
            "x_0 of this frame (model coordinates): x_0[t] = rho x_0[t-1] + sqrt(1 - rho^2) e_t, x_0[0] = e_0, "
            "with rho = noise_correlation and e_t K x 2 independent standard normal draws, new every frame"
        )
        correlated = {"noise_correlation": config.noise_correlation}
    if settings.noise_scale != 1:
        noise_meaning += f"; the step starts from x_0 = noise_scale ({settings.noise_scale:g}) times this input"
    return {
        "format": INTERFACE_FORMAT,
        "file": STEP_FILE,
        "opset": opset,
        "torch": torch.__version__,
        "model": model_name,
        "num_samples": settings.num_samples,
        "num_steps": settings.num_steps,
        "solver": settings.solver,
        "noise_scale": settings.noise_scale,
        "context_frames": config.num_frames,
        "encoder_frames": config.causal_encoder_frames,
        **correlated,
        "inputs": [
            tensor_entry("frame", frame, meaning="the frame, RGB resized to S x S, (pixel / 255 - mean) / std"),
            tensor_entry("noise", noise, meaning=noise_meaning),
            *[tensor_entry(name, leaf, meaning="stream state; start: zeros") for name, leaf in zip(names, leaves)],
        ],
        "outputs": [
            tensor_entry(
                "gaze_samples",
                torch.zeros(1, settings.num_samples, 2),
                meaning="the K samples' gaze at this frame, unit coordinates [0, 1] from the top-left",
            ),
            tensor_entry("gaze_point", torch.zeros(1, 2), meaning="the mean of the K samples (the point estimate)"),
            *[tensor_entry("next_" + name, leaf, feeds=name) for name, leaf in zip(names, leaves)],
        ],
        "state": {
            "start": "every state.* input zero (state.frame_index: int64 0); feed each next_state.* output "
            "back as its state.* input with the next frame",
            "bytes": state.nbytes(),
        },
        "preprocessing": {
            "file": "preprocessor_config.json",
            "size": [size, size],
            "resample": processor.resample,
            "antialias": processor.antialias,
            "mean": list(processor.image_mean),
            "std": list(processor.image_std),
            "layout": "RGB, channels first, [1, 3, S, S] float32",
        },
    }


def export_streamer(
    location: str,
    output_dir: str | os.PathLike,
    *,
    opset: int = DEFAULT_OPSET,
    check_frames: int = CHECK_FRAMES,
    tolerance: float = CHECK_TOLERANCE,
    max_memory_gb: float | None = None,
    **sampling: Any,
) -> dict[str, Any]:
    """Export a causal model folder's per-frame step to ``output_dir`` as ONNX (see the module docstring), sampling
    with the config's defaults overridden by ``sampling`` (keywords named after the fields of
    :class:`~transformers_gazeflow.models.gazeflow.generation_gazeflow.SamplingSettings`: ``num_samples=K``, ...,
    fixed in the graph). The folder is written whole (``data.output_safety.replace_folder``): every file goes into a
    temporary sibling, where ``check_frames`` random frames run through onnxruntime beside torch (when it is
    installed); a graph onnxruntime cannot load or whose gaze differs by more than ``tolerance`` is refused
    (:class:`ExportCheckError`), and only a checked export takes ``output_dir``'s place (an earlier export there
    stays as it was otherwise). The state K and S make is estimated before anything is allocated and refused past
    ``max_memory_gb`` (:mod:`.resource_bounds`; None: the machine's memory). Returns the interface written to
    ``streamer.json``."""
    from transformers.utils import logging as hf_logging

    from ..hub.model_folders import load_config, load_model, load_video_processor
    from .resource_bounds import check_memory, streamer_memory

    hf_logging.disable_progress_bar()  # the command's one line is its output
    config = load_config(location)
    if config.causal:
        settings = SamplingSettings.resolve(config, **sampling)
        k, steps, solver = settings.num_samples, settings.num_steps, settings.solver
        check_memory(streamer_memory(config, k, steps, solver), f"K={k}, S={steps} ({solver})", max_memory_gb)
    model = load_model(location)
    if not model.config.causal:
        raise ValueError(
            f'--model {location}: export-streamer needs a causal model (config.json "causal": true, '
            "paper Appendix F.4); this one is the windowed bidirectional model"
        )
    step = GazeFlowStreamerStep(model, SamplingSettings.resolve(model.config, **sampling)).eval()
    state = step.new_state(1)
    processor = load_video_processor(location, model.config)
    interface = streamer_interface(step, state, processor, opset, str(location))

    def write(folder: Path) -> None:
        names = export_graph(step, state, folder / STEP_FILE, opset)
        interface["checked"] = check_against_torch(step, folder / STEP_FILE, names, check_frames, tolerance)
        processor.save_pretrained(folder)
        if Path(location).is_dir():
            shutil.copyfile(Path(location) / "config.json", folder / "config.json")
        else:
            model.config.to_json_file(folder / "config.json")
        (folder / INTERFACE_FILE).write_text(json.dumps(interface, indent=2) + "\n", encoding="utf-8")

    replace_folder(output_dir, write)
    return interface


def export_graph(step: GazeFlowStreamerStep, state: StreamerState, path: Path, opset: int) -> list[str]:
    """Write the step's graph to ``path`` (torch's dynamo exporter, weights inside); returns the state's input
    names."""
    leaves, layout = pytree.tree_flatten(state)
    size = step.config.image_size
    example = (torch.zeros(1, 3, size, size), torch.zeros(1, step.settings.num_samples, 1, 2), *leaves)
    names = state_names(state)
    with torch.no_grad(), quiet_exporter():
        torch.onnx.export(
            ExportedStep(step, layout).eval(),
            example,
            str(path),
            input_names=[*INPUTS, *names],
            output_names=[*OUTPUTS, *("next_" + n for n in names)],
            opset_version=opset,
            dynamo=True,
            external_data=False,
            verbose=False,
        )
    return names


@contextlib.contextmanager
def quiet_exporter() -> Iterator[None]:
    """The exporter's notes on operators it skips (torchvision's, absent here) and torch's own deprecation warnings
    are not the user's business: stderr keeps the command's one line."""
    logger = logging.getLogger("torch.onnx")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            yield
    finally:
        logger.setLevel(level)


def check_against_torch(
    step: GazeFlowStreamerStep, path: Path, names: list[str], frames: int, tolerance: float = CHECK_TOLERANCE
) -> dict[str, Any]:
    """Random frames and noise through the torch step and the ONNX file in onnxruntime (CPU), each with its own
    state: the largest difference of their gaze samples. A graph onnxruntime cannot load or run, or a difference past
    ``tolerance``, is an :class:`ExportCheckError`."""
    try:
        import onnxruntime
    except ImportError:
        return {"frames": 0, "note": 'onnxruntime is not installed: not checked (pip install -e ".[onnx]")'}
    generator = torch.Generator().manual_seed(0)
    torch_state, onnx_state = step.new_state(1), [leaf.numpy() for leaf in step.new_state(1).tensors()]
    size, largest = step.config.image_size, 0.0
    session = _onnxruntime_call(lambda: onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"]))
    for _ in range(frames):
        frame = torch.randn(1, 3, size, size, generator=generator)
        noise = torch.randn(1, step.settings.num_samples, 1, 2, generator=generator)
        with torch.no_grad():
            expected, _ = step(frame, noise, torch_state)
        feed = {"frame": frame.numpy(), "noise": noise.numpy(), **dict(zip(names, onnx_state))}
        outputs = _onnxruntime_call(lambda feed=feed: session.run(None, feed))
        onnx_state = outputs[len(OUTPUTS) :]
        largest = max(largest, float(np.abs(outputs[0] - expected.numpy()).max()))
    if not largest <= tolerance:
        raise ExportCheckError(
            f"the exported step differs from torch by {largest:.2e} in unit coordinates over {frames} frames (more "
            f"than {tolerance:g}): not kept"
        )
    return {
        "frames": frames,
        "max_abs_difference": largest,
        "tolerance": tolerance,
        "onnxruntime": onnxruntime.__version__,
        "provider": "CPUExecutionProvider",
    }


def _onnxruntime_call(call: Callable[[], Any]) -> Any:
    """``call()``, with onnxruntime's own errors (a graph it cannot load or run) as one :class:`ExportCheckError`."""
    try:
        return call()
    except Exception as err:  # onnxruntime raises its own classes (InvalidProtobuf, Fail, InvalidArgument, ...)
        first = (str(err).strip().splitlines() or [type(err).__name__])[0][:300]
        raise ExportCheckError(f"the exported step cannot be run by onnxruntime ({first}): not kept") from None


def exported_settings(interface: dict[str, Any]) -> SamplingSettings:
    """The sampling settings an exported step was made with (fixed in its graph), from its ``streamer.json``."""
    return SamplingSettings(**{name: interface[name] for name in SamplingSettings.field_names() if name in interface})


def sampling_mismatches(interface: dict[str, Any], sampling: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """``(field, given, exported)`` for each sampling setting given (not None) that the exported step was made
    with otherwise: what a step with K, S and the solver fixed in its graph cannot honour."""
    return [
        (name, given, interface[name])
        for name, given in sampling.items()
        if given is not None and name in interface and given != interface[name]
    ]


def read_interface(folder: Path) -> dict[str, Any]:
    """``streamer.json`` of an export folder, checked by its one schema (``data.interface_files.
    streamer_interface``: the graph's file confined to the folder, every field typed); one-line errors naming the
    folder or the file and the field."""
    folder = Path(folder)
    path = folder / INTERFACE_FILE
    if not folder.is_dir():
        raise FileNotFoundError(f"--onnx {folder}: no such folder (write one with gazeflow export-streamer)")
    if not path.is_file():
        raise ValueError(f"--onnx {folder}: no {INTERFACE_FILE} (a folder written by gazeflow export-streamer)")
    return _checked_interface(_read_json_object(path, "a streamer.json"), folder, str(path))


__all__ = [
    "EXPORT_FORMATS",
    "ExportCheckError",
    "ExportedStep",
    "export_graph",
    "export_streamer",
    "read_interface",
    "exported_settings",
    "sampling_mismatches",
    "state_names",
    "streamer_interface",
]
