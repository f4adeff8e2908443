"""The memory a run's K / S / frame size / window choice needs, estimated before allocation
(generation/resource_bounds.py): the streamer's estimate against the bytes of the state it really allocates, the
solvers' network calls against the scheduler's, and one-line refusals with the figure and the override."""

from __future__ import annotations

import pytest
import torch

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
from transformers_gazeflow.generation.resource_bounds import (
    CALLS_PER_STEP,
    MAX_NUM_STEPS,
    ResourceBoundError,
    check_memory,
    check_num_steps,
    raw_frame_memory,
    streamer_memory,
    windowed_memory,
)
from transformers_gazeflow.generation.streaming_step import GazeFlowStreamerStep, scheduler_flow_times
from transformers_gazeflow.models.gazeflow.generation_gazeflow import SamplingSettings
from transformers_gazeflow.models.gazeflow.scheduling_gazeflow import scheduler_for


@pytest.mark.parametrize(
    ("overrides", "k", "s", "solver", "dtype"),
    [
        ({}, 4, 3, "euler", torch.float32),
        ({}, 3, 2, "heun", torch.float32),
        ({"num_temporal_layers": 1}, 5, 2, "midpoint", torch.float32),
        ({}, 2, 4, "euler", torch.bfloat16),
    ],
)
def test_the_streamer_estimate_is_the_state_it_allocates(overrides, k, s, solver, dtype):
    torch.manual_seed(0)
    model = GazeFlowModel(GazeFlowConfig.tiny(causal=True, **overrides)).eval()
    settings = SamplingSettings.resolve(model.config, num_samples=k, num_steps=s, solver=solver)
    state = GazeFlowStreamerStep(model, settings, dtype=dtype).new_state(1)
    estimate = streamer_memory(model.config, k, s, solver, dtype_bytes=torch.finfo(dtype).bits // 8)
    # all of it but the frame index (int64) and the written flags (one bool per context frame)
    assert estimate.total == state.nbytes() - 8 - model.config.num_frames


@pytest.mark.parametrize("solver", sorted(CALLS_PER_STEP))
def test_network_calls_per_step_are_the_schedulers(solver):
    config = GazeFlowConfig.tiny(causal=True)
    for steps in (1, 3, 7):
        assert len(scheduler_flow_times(scheduler_for(config, steps, solver))) == steps * CALLS_PER_STEP[solver]


def test_the_windowed_estimate_by_hand():
    config = GazeFlowConfig()  # W = 64, stride 32, d = 256, 256 x 256 frames
    estimate = windowed_memory(config, 30, frame_size=(640, 480))
    assert estimate.parts == {
        "the velocity network's K x W gaze tokens": 4 * 30 * 64 * 256 * 4,
        "a batch of windows' frames": 8 * 32 * 640 * 480 * 3,
        "a batch of windows' processed frames": 8 * 32 * 3 * 256 * 256 * 4,
    }


def test_runs_past_the_memory_they_may_use_are_refused_with_the_figure_and_the_override():
    config = GazeFlowConfig.tiny(causal=True)  # W = 8, d = 32, 2 blocks
    with pytest.raises(ResourceBoundError) as caught:
        check_memory(streamer_memory(config, 100_000_000, 3, "euler"), "-k 100000000", max_memory_gb=64)
    # rings: 3 calls x 2 blocks x K x 2 (keys, values) x 8 frames x 32 x 4 bytes = 1,228.8 GB
    assert str(caught.value) == (
        "-k 100000000: the stream needs at least 1,229 GB (the sampler's key/value rings: 1,229 GB), more than "
        "--max-memory-gb 64 (64 GB); choose smaller values, or raise --max-memory-gb if the memory is there"
    )
    check_memory(streamer_memory(config, 100_000_000, 3, "euler"), "-k 100000000", max_memory_gb=2000)
    with pytest.raises(ResourceBoundError, match=r"^--raw 99999999x99999999: the stream needs at least .* than this"):
        check_memory(raw_frame_memory(99_999_999, 99_999_999), "--raw 99999999x99999999")
    assert raw_frame_memory(640, 480).total == 640 * 480 * 3 * (3 + 8)
    check_memory(raw_frame_memory(640, 480), "--raw 640x480")
    for bad in (0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ResourceBoundError, match="--max-memory-gb .*: expected a positive number of gigabytes"):
            check_memory(raw_frame_memory(1, 1), "--raw 1x1", max_memory_gb=bad)


def test_the_ode_steps_are_bounded():
    check_num_steps(None)
    check_num_steps(MAX_NUM_STEPS)
    with pytest.raises(ResourceBoundError) as caught:
        check_num_steps(100_000_000, "-s")
    assert str(caught.value) == (
        f"-s 100000000: expected at most {MAX_NUM_STEPS} ODE steps (each frame or window loops S times over the "
        "network)"
    )
