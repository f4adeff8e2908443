"""The one place where benchmarks reach past the public API into the engine's internals.

``bench_inference.py`` times the encoder and the sampler of one window apart, and ``bench_streaming.py`` times a
streamer frame's condition apart from its sampling: both need pieces the public API (``GazeFlowModel.generate``,
``prepare_for_inference``, ``GazeFlowStreamer``) does not expose. They import them from here, so that when the engine
moves them only this file changes.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from transformers_gazeflow.generation.inference import autocast_context, set_encoder_attention
from transformers_gazeflow.models.gazeflow.generation_gazeflow import sample_window
from transformers_gazeflow.models.gazeflow.scheduling_gazeflow import draw_noise


def time_streamer_condition(streamer, synchronize: Callable[[], None]) -> list[float]:
    """Wrap the streamer's per-frame condition (encoder on the frame's causal window, c_v, c_task, keys/values) so
    that each call's wall time (seconds, device synchronised) is appended to the returned list: the eager static
    step's ``encode_frame`` (``GazeFlowStreamer``), or the previous streamer's ``_frame_condition``."""
    condition_times: list[float] = []
    owner, name = (streamer.step, "encode_frame") if hasattr(streamer, "step") else (streamer, "_frame_condition")
    frame_condition = getattr(owner, name)

    def timed_condition(*args):
        synchronize()
        start = time.perf_counter()
        result = frame_condition(*args)
        synchronize()
        condition_times.append(time.perf_counter() - start)
        return result

    setattr(owner, name, timed_condition)
    return condition_times


__all__ = ["autocast_context", "set_encoder_attention", "draw_noise", "sample_window", "time_streamer_condition"]
