"""The steppers of ``gazeflow stream``: frame in, gaze out (moved here from ``commands.stream`` and
``commands.stream_export``)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from ..models.gazeflow.scheduling_gazeflow import draw_noise
from .onnx_export import OUTPUTS, read_interface


class TorchStepper:
    """Frame in, gaze out, through :class:`GazeFlowStreamer` (the model itself): ``step(pixels [H, W, 3] uint8)``
    -> ``(samples [K, 2], mean [2])`` in unit coordinates. ``compile``: a ``GazeFlowStreamer(compile=...)`` mode;
    ``dtype``: the dtype its step computes in (weights cast once; the ODE state stays float32)."""

    def __init__(
        self,
        model,
        processor,
        num_samples: int | None,
        num_steps: int | None,
        solver: str | None,
        seed: int,
        dtype: str = "float32",
        compile: str | None = None,
    ):
        import torch

        from .online import GazeFlowStreamer

        self.streamer = GazeFlowStreamer(
            model,
            num_samples=num_samples,
            num_steps=num_steps,
            solver=solver,
            generator=torch.Generator().manual_seed(seed),
            processor=processor,
            compile=compile,
            dtype=getattr(torch, dtype),
        )
        settings = self.streamer.settings
        self.num_samples, self.num_steps, self.seed = settings.num_samples, settings.num_steps, seed

    def warm_up(self, height: int, width: int) -> None:
        """Compile (or capture) the step on a blank frame before the stream starts, so that the first real frame's
        latency is not the compilation's; the stream then starts afresh (state zeroed in place, noise reseeded)."""
        import numpy as np

        self.step(np.zeros((height, width, 3), np.uint8))
        self.streamer.reset()
        self.streamer.generator.manual_seed(self.seed)

    def step(self, pixels):
        import torch

        output = self.streamer.push(torch.from_numpy(pixels))
        return output.trajectories[0].float().cpu().numpy(), output.mean[0].float().cpu().numpy()


class OnnxStepper:
    """``gazeflow stream --backend onnxruntime``: frames through an exported step in onnxruntime (CPU). The noise is
    drawn as :class:`GazeFlowStreamer` draws it (``torch.Generator`` seeded with ``seed``, ``[1, K, 1, 2]`` per frame),
    so a seed gives the torch backend's samples (to float rounding)."""

    def __init__(self, folder: str | os.PathLike, seed: int = 0, threads: int | None = None):
        import onnxruntime

        from ..data.processing import GazeFlowVideoProcessor

        folder = Path(folder)
        self.interface = read_interface(folder)
        options = onnxruntime.SessionOptions()
        if threads is not None:
            options.intra_op_num_threads = threads
        self.session = onnxruntime.InferenceSession(
            str(folder / self.interface["file"]), options, providers=["CPUExecutionProvider"]
        )
        self.processor = GazeFlowVideoProcessor.from_pretrained(folder)
        self.num_samples, self.num_steps = self.interface["num_samples"], self.interface["num_steps"]
        self.generator = torch.Generator().manual_seed(seed)
        self.state_inputs = [entry for entry in self.interface["inputs"] if entry["name"].startswith("state.")]
        self.state = {entry["name"]: np.zeros(entry["shape"], dtype=entry["dtype"]) for entry in self.state_inputs}

    def step(self, pixels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        frame = self.processor.preprocess(np.ascontiguousarray(pixels)[None]).numpy()
        noise = draw_noise((1, self.num_samples, 1, 2), self.generator, torch.device("cpu")).numpy()
        outputs = self.session.run(None, {"frame": frame, "noise": noise, **self.state})
        self.state = {entry["name"]: value for entry, value in zip(self.state_inputs, outputs[len(OUTPUTS) :])}
        return outputs[0][0], outputs[1][0]


def load_onnx_stepper(
    folder: str, num_samples: int | None, num_steps: int | None, seed: int, threads: int | None = None
) -> OnnxStepper:
    """The onnxruntime backend; ``-k`` / ``-s`` must be the exported K and S (they are fixed in the graph)."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        raise ValueError('--backend onnxruntime needs onnxruntime: pip install -e ".[onnx]"') from None
    interface = read_interface(Path(folder))
    for flag, given, key in (("--num-samples", num_samples, "num_samples"), ("--num-steps", num_steps, "num_steps")):
        if given is not None and given != interface[key]:
            raise ValueError(
                f"{flag} {given}: the step in {folder} was exported with {interface[key]} (export again "
                f"with {flag} {given})"
            )
    return OnnxStepper(folder, seed, threads)
