"""The named choices of GazeFlow's options, each set in one place: plain tuples, and nothing imported.

The configuration checks its fields against them, the scheduler, the gaze readouts and the export check their
arguments against them, and the ``gazeflow`` command offers them as ``choices=`` without importing torch or
transformers (its ``--help`` and argument errors answer in well under a second). This module sits with the
conventions (``geometry``, ``windows``) in the model folder, which every layer may read and which is self-contained:
a remote-code folder copies it with the configuration that imports it.
"""

SOLVERS = ("euler", "heun", "midpoint")
"""ODE solvers of the flow's sampler (paper Algorithm 1, Appendix D): one, two and two network calls per step."""

WINDOW_MODES = ("coherent", "blend")
"""How overlapping windows are joined (``generation_gazeflow``): each window sampled given the overlap already
sampled, or the paper's linear blend of independent windows (Appendix D.3)."""

DTYPES = ("float32", "bfloat16", "float16")
"""The precisions inference runs the weights in (by name; ``"auto"`` picks one by device where it is offered)."""

EVENT_METHODS = ("ivt", "idt")
"""Fixation / saccade labellers (``gaze.events``): velocity threshold (I-VT) and dispersion threshold (I-DT)."""

CALIBRATION_MODELS = ("offset", "offset_scale")
"""A wearer's correction of the model's gaze (``gaze.wearer``): an offset, or an offset and a scale per axis."""

CORRECTIONS = ("auto", *CALIBRATION_MODELS)
"""What ``gazeflow calibrate --correction`` accepts: a correction, or ``auto`` (the one with the lower held-out
error)."""

DEFAULT_OPSET, MIN_OPSET = 18, 17
"""The ONNX opset the streamer's per-frame step is exported with by default, and the oldest it can be."""

STREAM_CPU_THREADS = 1
"""Torch's intra-op threads for streaming on the CPU unless told (``GazeFlowStreamer(threads=...)``, ``gazeflow stream
--threads``): a frame's work is too small to share out, and the decoding thread needs a core."""

__all__ = [
    "STREAM_CPU_THREADS",
    "SOLVERS",
    "WINDOW_MODES",
    "DTYPES",
    "EVENT_METHODS",
    "CALIBRATION_MODELS",
    "CORRECTIONS",
    "DEFAULT_OPSET",
    "MIN_OPSET",
]
