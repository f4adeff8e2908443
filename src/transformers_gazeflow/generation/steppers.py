"""Frame in, gaze out: the backends of the causal stream behind one protocol (:class:`Stepper`) and one registry by
name (:data:`STEPPERS`), which ``gazeflow stream --backend`` and ``benchmarks/bench_stream_backends.py`` both read.

* ``torch`` (:class:`TorchStepper`): the causal model itself through :class:`~.online.GazeFlowStreamer` (paper
  Appendix F.4), eager or compiled, in the precision asked for;
* ``onnxruntime`` (:class:`OnnxStepper`): the per-frame step exported by ``gazeflow export-streamer``
  (:mod:`.onnx_export`) in onnxruntime's CPU provider; onnxruntime is the optional ``[onnx]`` extra, imported when a
  stepper is opened.

A backend opens a location with :class:`StepperOptions`: a causal model folder or Hub id, or for an *exported*
backend the folder an export wrote (its K, S and solver are fixed in the graph). Either way ``step(pixels)`` takes a
raw RGB frame ``[H, W, 3]`` uint8 and returns the K samples' gaze ``[K, 2]`` and their mean ``[2]`` in unit
coordinates; ``settings`` are the :class:`~transformers_gazeflow.models.gazeflow.generation_gazeflow.SamplingSettings`
it samples with, and the noise of a frame is drawn as ``GazeFlowStreamer`` draws it, so a seed gives the same
samples on every backend (to float rounding).

Adding a backend: a class with the :class:`Stepper` methods and an ``open(location, options)`` classmethod, and one
:class:`StepperBackend` entry in :data:`STEPPERS`; the command and the benchmark then offer it.

This module imports nothing heavy when it is imported (the command builds ``--backend``'s choices from it); torch,
numpy and onnxruntime are imported by the steppers themselves.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np

    from ..models.gazeflow.generation_gazeflow import SamplingSettings


class Stepper(Protocol):
    """What a backend of the stream does: one raw frame in, its gaze out, the stream's state kept inside."""

    settings: SamplingSettings
    device: str

    def step(self, pixels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Frame t (RGB ``[H, W, 3]`` uint8) -> the K samples' gaze ``[K, 2]`` and their mean ``[2]``, unit
        coordinates."""
        ...

    def warm_up(self, height: int, width: int) -> None:
        """Do before the stream what the first frame would otherwise pay for (compilation), then start afresh."""
        ...


@dataclass(frozen=True)
class StepperOptions:
    """How to open a stepper.

    Attributes:
        sampling: keyword overrides of the model's sampling defaults, named after the fields of ``SamplingSettings``
            (``num_samples``, ``num_steps``, ``solver``; None or absent: the model's default); an exported step's
            are fixed in its graph and must agree with them.
        seed: the seed of the per-frame noise.
        device: the torch device the model runs on (an exported step runs on the CPU).
        dtype: the precision of the model's step (``models.gazeflow.choices.DTYPES``; the ODE state stays float32).
        compile: a ``GazeFlowStreamer(compile=...)`` mode, or None for eager.
        threads: onnxruntime's intra-op threads (torch's are the process's own, set by the caller).
        max_memory_gb: the memory the stream's state may take (None: the machine's), checked before it is
            allocated (:mod:`.resource_bounds`).
    """

    sampling: Mapping[str, Any] = field(default_factory=dict)
    seed: int = 0
    device: str = "cpu"
    dtype: str = "float32"
    compile: str | None = None
    threads: int | None = None
    max_memory_gb: float | None = None


class TorchStepper:
    """Frame in, gaze out, through :class:`~.online.GazeFlowStreamer` (the model itself). ``settings``: K, S and the
    solver (None: the model's defaults); ``compile``: a ``GazeFlowStreamer(compile=...)`` mode; ``dtype``: the dtype
    its step computes in (weights cast once; the ODE state stays float32)."""

    def __init__(
        self,
        model,
        processor,
        settings: SamplingSettings | None,
        seed: int,
        dtype: str = "float32",
        compile: str | None = None,
    ):
        import torch

        from .online import GazeFlowStreamer

        self.streamer = GazeFlowStreamer(
            model,
            settings,
            generator=torch.Generator().manual_seed(seed),
            processor=processor,
            compile=compile,
            dtype=getattr(torch, dtype),
            threads=None,  # the caller sets the process's threads (gazeflow stream --threads)
        )
        self.settings, self.seed = self.streamer.settings, seed
        self.device = str(next(model.parameters()).device)

    @classmethod
    def open(cls, location: str, options: StepperOptions) -> TorchStepper:
        """Load a causal model folder (or Hub id) on ``options.device``, on the inference fast path (eval, SDPA,
        LoRA merged), with its processor; the sampling settings are resolved once here."""
        from ..hub.model_folders import load_config, load_model, load_video_processor
        from ..models.gazeflow.generation_gazeflow import SamplingSettings
        from .inference import prepare_for_inference
        from .resource_bounds import DTYPE_BYTES, check_memory, streamer_memory

        config = load_config(location)
        settings = SamplingSettings.resolve(config, **options.sampling)
        if config.causal:  # its state, before the weights load: -k / -s past the memory are refused in one line
            k, steps, solver = settings.num_samples, settings.num_steps, settings.solver
            need = streamer_memory(config, k, steps, solver, dtype_bytes=DTYPE_BYTES[options.dtype])
            check_memory(need, f"K={k}, S={steps} ({solver})", options.max_memory_gb)
        model = load_model(location, device=options.device)
        if not model.config.causal:  # a Hub id, read only now
            raise ValueError(not_causal_message(location))
        prepare_for_inference(model)
        processor = load_video_processor(location, model.config)
        stepper = cls(model, processor, settings, options.seed, options.dtype, options.compile)
        stepper.device = options.device
        return stepper

    def warm_up(self, height: int, width: int) -> None:
        """Compile (or capture) the step on a blank frame before the stream starts, so that the first real frame's
        latency is not the compilation's; the stream then starts afresh (state zeroed in place, noise reseeded)."""
        import numpy as np

        self.step(np.zeros((height, width, 3), np.uint8))
        self.streamer.reset()
        self.streamer.generator.manual_seed(self.seed)

    def step(self, pixels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        import torch

        output = self.streamer.push(torch.from_numpy(pixels))
        return output.trajectories[0].float().cpu().numpy(), output.mean[0].float().cpu().numpy()


def not_causal_message(location: str) -> str:
    """Why a bidirectional model cannot stream, naming the model."""
    return (
        f'--model {location}: gazeflow stream needs a causal model (config.json "causal": true, paper '
        "Appendix F.4; train one with examples/train.py --config_overrides causal=True), this one is the "
        "windowed bidirectional model: use gazeflow predict for it"
    )


class OnnxStepper:
    """Frames through a per-frame step exported by ``gazeflow export-streamer``, in onnxruntime (CPU). The noise is
    drawn as :class:`~.online.GazeFlowStreamer` draws it (``torch.Generator`` seeded with ``seed``, ``[1, K, 1, 2]``
    per frame), so a seed gives the torch backend's samples (to float rounding)."""

    device = "cpu"

    def __init__(
        self, folder: str | os.PathLike, seed: int = 0, threads: int | None = None, max_memory_gb: float | None = None
    ):
        import numpy as np
        import onnxruntime
        import torch

        from ..data.interface_files import check_streamer_graph
        from ..data.processing import GazeFlowVideoProcessor
        from .onnx_export import INPUTS, INTERFACE_FILE, exported_settings, read_interface
        from .resource_bounds import MemoryEstimate, check_memory

        folder = Path(folder)
        self.interface = read_interface(folder)  # streamer.json checked by its one schema
        state_bytes = {"the exported step's state": self.interface["state_bytes"]}
        check_memory(MemoryEstimate("the stream", state_bytes), f"--onnx {folder}", max_memory_gb)
        options = onnxruntime.SessionOptions()
        if threads is not None:
            options.intra_op_num_threads = threads
        path = self.interface["path"]
        try:
            self.session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        except Exception as err:  # onnxruntime's own classes: not an ONNX graph it can load
            first = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
            raise ValueError(f"{path}: onnxruntime cannot load this graph ({first})") from None
        graph = [
            [(i.name, i.shape, i.type) for i in io] for io in (self.session.get_inputs(), self.session.get_outputs())
        ]
        check_streamer_graph(self.interface, *graph, where=str(folder / INTERFACE_FILE))
        self.processor = GazeFlowVideoProcessor.from_pretrained(folder)
        self.settings = exported_settings(self.interface)
        self.generator = torch.Generator().manual_seed(seed)
        self.noise_correlation = self.interface.get("noise_correlation", 0.0)  # checked in [0, 1) by its schema
        self.previous_noise: torch.Tensor | None = None  # x_0 of the last frame (the AR(1) prior continues from it)
        state = self.interface["inputs"][len(INPUTS) :]
        self.state_names = [name for name, _, _ in state]
        self.state = {name: np.zeros(shape, dtype) for name, shape, dtype in state}

    @classmethod
    def open(cls, location: str, options: StepperOptions) -> OnnxStepper:
        """Open an export folder; ``options.sampling`` must agree with what the step was exported with."""
        try:
            import onnxruntime  # noqa: F401
        except ImportError:
            raise ValueError('--backend onnxruntime needs onnxruntime: pip install -e ".[onnx]"') from None
        from .onnx_export import read_interface, sampling_mismatches

        for name, given, exported in sampling_mismatches(read_interface(Path(location)), options.sampling):
            raise ValueError(f"{name}={given!r}: the step in {location} was exported with {name}={exported!r}")
        return cls(location, options.seed, options.threads, options.max_memory_gb)

    def warm_up(self, height: int, width: int) -> None:
        """Nothing to compile: onnxruntime prepared the graph when the session opened."""

    def step(self, pixels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        import numpy as np
        import torch

        from ..models.gazeflow.scheduling_gazeflow import correlate_noise, draw_noise
        from .onnx_export import OUTPUTS

        frame = self.processor.preprocess(np.ascontiguousarray(pixels)[None]).numpy()
        noise = draw_noise((1, self.settings.num_samples, 1, 2), self.generator, torch.device("cpu"))
        noise = self.previous_noise = correlate_noise(noise, self.noise_correlation, self.previous_noise, frame_dim=2)
        noise = noise.numpy()
        outputs = self.session.run(None, {"frame": frame, "noise": noise, **self.state})
        self.state = dict(zip(self.state_names, outputs[len(OUTPUTS) :]))
        return outputs[0][0], outputs[1][0]


@dataclass(frozen=True)
class StepperBackend:
    """One backend of the registry: its name (``--backend NAME``), what it runs, how it opens a location, and
    whether that location is an export folder (``gazeflow export-streamer``) rather than a model."""

    name: str
    help: str
    open: Callable[[str, StepperOptions], Stepper]
    exported: bool = False


STEPPERS: dict[str, StepperBackend] = {
    backend.name: backend
    for backend in (
        StepperBackend("torch", "the model", TorchStepper.open),
        StepperBackend("onnxruntime", "the step exported by gazeflow export-streamer", OnnxStepper.open, exported=True),
    )
}
"""The stream's backends by name (the first is the default)."""


__all__ = [
    "Stepper",
    "StepperOptions",
    "StepperBackend",
    "STEPPERS",
    "TorchStepper",
    "OnnxStepper",
    "not_causal_message",
]
