"""The causal streamer's per-frame step as ONNX, for devices (what ``gazeflow export-streamer`` writes and the
``onnxruntime`` stepper of :mod:`.steppers` runs): :class:`ExportedStep`, :func:`export_streamer` and the folder's
``streamer.json`` (:func:`streamer_interface`, :func:`read_interface`).

The exported graph is :meth:`GazeFlowStreamerStep.functional <transformers_gazeflow.generation.streaming_step.
GazeFlowStreamerStep.functional>` (paper Appendix F.4's causal model, one frame): a pure function

    (frame, noise, state) -> (gaze_samples, gaze_point, next_state)

* ``frame`` ``[1, 3, S, S]`` float32: the frame resized to S x S and normalised (``preprocessor_config.json``:
  ``(pixel / 255 - mean) / std`` per RGB channel);
* ``noise`` ``[1, K, 1, 2]`` float32: this frame's x_0, K x 2 independent standard normal draws (model coordinates);
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
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.utils._pytree as pytree
from torch import nn

from ..models.gazeflow.choices import DEFAULT_OPSET
from ..models.gazeflow.generation_gazeflow import SamplingSettings
from .streaming_step import GazeFlowStreamerStep, StreamerState

EXPORT_FORMATS = ("onnx",)
STEP_FILE, INTERFACE_FILE = "step.onnx", "streamer.json"
INTERFACE_FORMAT = "gazeflow-streamer-step/1"
INPUTS, OUTPUTS = ("frame", "noise"), ("gaze_samples", "gaze_point")
CHECK_FRAMES, CHECK_TOLERANCE = 24, 1e-3
"""Frames the export runs through onnxruntime beside torch (past the W-frame context, so the rings wrap) and the
largest difference in unit coordinates it accepts."""


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
    return {
        "format": INTERFACE_FORMAT,
        "file": STEP_FILE,
        "opset": opset,
        "torch": torch.__version__,
        "model": model_name,
        "num_samples": settings.num_samples,
        "num_steps": settings.num_steps,
        "solver": settings.solver,
        "context_frames": config.num_frames,
        "encoder_frames": config.causal_encoder_frames,
        "inputs": [
            tensor_entry("frame", frame, meaning="the frame, RGB resized to S x S, (pixel / 255 - mean) / std"),
            tensor_entry(
                "noise",
                noise,
                meaning="x_0 of this frame: K x 2 independent standard normal draws "
                "(model coordinates); a new draw every frame",
            ),
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
    **sampling: Any,
) -> dict[str, Any]:
    """Export a causal model folder's per-frame step to ``output_dir`` as ONNX (see the module docstring), sampling
    with the config's defaults overridden by ``sampling`` (keywords named after the fields of
    :class:`~transformers_gazeflow.models.gazeflow.generation_gazeflow.SamplingSettings`: ``num_samples=K``, ...,
    fixed in the graph); run ``check_frames`` random frames through onnxruntime beside torch (when it is installed)
    and refuse the export when they differ by more than :data:`CHECK_TOLERANCE`. Returns the interface written to
    ``streamer.json``."""
    from transformers.utils import logging as hf_logging

    from ..hub.model_folders import load_model, load_video_processor

    hf_logging.disable_progress_bar()  # the command's one line is its output
    model = load_model(location)
    if not model.config.causal:
        raise ValueError(
            f'--model {location}: export-streamer needs a causal model (config.json "causal": true, '
            "paper Appendix F.4); this one is the windowed bidirectional model"
        )
    step = GazeFlowStreamerStep(model, SamplingSettings.resolve(model.config, **sampling)).eval()
    state = step.new_state(1)
    leaves, layout = pytree.tree_flatten(state)
    size = model.config.image_size
    example = (torch.zeros(1, 3, size, size), torch.zeros(1, step.settings.num_samples, 1, 2), *leaves)
    names = state_names(state)
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    with torch.no_grad(), quiet_exporter():
        torch.onnx.export(
            ExportedStep(step, layout).eval(),
            example,
            str(output_dir / STEP_FILE),
            input_names=[*INPUTS, *names],
            output_names=[*OUTPUTS, *("next_" + n for n in names)],
            opset_version=opset,
            dynamo=True,
            external_data=False,
            verbose=False,
        )
    processor = load_video_processor(location, model.config)
    processor.save_pretrained(output_dir)
    if Path(location).is_dir():
        shutil.copyfile(Path(location) / "config.json", output_dir / "config.json")
    else:
        model.config.to_json_file(output_dir / "config.json")
    interface = streamer_interface(step, state, processor, opset, str(location))
    interface["checked"] = check_against_torch(step, output_dir / STEP_FILE, names, check_frames)
    (output_dir / INTERFACE_FILE).write_text(json.dumps(interface, indent=2) + "\n", encoding="utf-8")
    return interface


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


def check_against_torch(step: GazeFlowStreamerStep, path: Path, names: list[str], frames: int) -> dict[str, Any]:
    """Random frames and noise through the torch step and the ONNX file in onnxruntime (CPU), each with its own
    state: the largest difference of their gaze samples. Raises when it passes :data:`CHECK_TOLERANCE`."""
    try:
        import onnxruntime
    except ImportError:
        return {"frames": 0, "note": 'onnxruntime is not installed: not checked (pip install -e ".[onnx]")'}
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    generator = torch.Generator().manual_seed(0)
    torch_state, onnx_state = step.new_state(1), [leaf.numpy() for leaf in step.new_state(1).tensors()]
    size, largest = step.config.image_size, 0.0
    for _ in range(frames):
        frame = torch.randn(1, 3, size, size, generator=generator)
        noise = torch.randn(1, step.settings.num_samples, 1, 2, generator=generator)
        with torch.no_grad():
            expected, _ = step(frame, noise, torch_state)
        outputs = session.run(None, {"frame": frame.numpy(), "noise": noise.numpy(), **dict(zip(names, onnx_state))})
        onnx_state = outputs[len(OUTPUTS) :]
        largest = max(largest, float(np.abs(outputs[0] - expected.numpy()).max()))
    if not largest <= CHECK_TOLERANCE:
        raise RuntimeError(
            f"the exported step differs from torch by {largest:.2e} in unit coordinates over {frames} "
            f"frames (more than {CHECK_TOLERANCE:g}): {path} is not usable"
        )
    return {
        "frames": frames,
        "max_abs_difference": largest,
        "tolerance": CHECK_TOLERANCE,
        "onnxruntime": onnxruntime.__version__,
        "provider": "CPUExecutionProvider",
    }


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
    """``streamer.json`` of an export folder, checked; one-line errors naming the folder or file."""
    path = folder / INTERFACE_FILE
    if not folder.is_dir():
        raise FileNotFoundError(f"--onnx {folder}: no such folder (write one with gazeflow export-streamer)")
    if not path.is_file():
        raise ValueError(f"--onnx {folder}: no {INTERFACE_FILE} (a folder written by gazeflow export-streamer)")
    try:
        interface = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON ({err})") from None
    if not isinstance(interface, dict) or interface.get("format") != INTERFACE_FORMAT:
        raise ValueError(f"{path}: not a {INTERFACE_FORMAT} interface (export again with this version)")
    if not (folder / interface["file"]).is_file():
        raise ValueError(f"--onnx {folder}: {interface['file']} is missing")
    return interface


__all__ = [
    "EXPORT_FORMATS",
    "ExportedStep",
    "export_streamer",
    "read_interface",
    "exported_settings",
    "sampling_mismatches",
    "state_names",
    "streamer_interface",
]
