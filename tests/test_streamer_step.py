"""The streamer's static step (``GazeFlowStreamerStep``): one graph under torch.compile (no graph break, no recompile,
equal to eager), long streams (RoPE positions at t = 10^7), the functional form, the run dtype, the static V-JEPA 2
encoder, the capture modes' argument checks."""

import copy

import pytest
import torch
import torch._dynamo
from torch._dynamo.utils import counters

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
from transformers_gazeflow.generation.online import GazeFlowStreamer
from transformers_gazeflow.generation.streaming_runners import COMPILE_MODES, check_compile_mode
from transformers_gazeflow.generation.streaming_step import GazeFlowStreamerStep, scheduler_flow_times
from transformers_gazeflow.models.gazeflow.generation_gazeflow import SamplingSettings
from transformers_gazeflow.models.gazeflow.modeling_gazeflow_causal import causal_encoder_windows
from transformers_gazeflow.models.gazeflow.modeling_gazeflow_embeddings import GazeFlowRotaryEmbedding, apply_rotary
from transformers_gazeflow.models.gazeflow.modeling_gazeflow_streaming import rotary_phases
from transformers_gazeflow.models.gazeflow.modeling_gazeflow_streaming_encoder import GazeFlowStreamingVideoEncoder
from transformers_gazeflow.models.gazeflow.scheduling_gazeflow import scheduler_for


def tiny_model(seed: int = 0, **overrides) -> GazeFlowModel:
    torch.manual_seed(seed)
    return GazeFlowModel(GazeFlowConfig.tiny(**{"use_lora": False, "causal": True, **overrides})).eval()


def inputs(frames: int, batch: int = 2, samples: int = 3, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return (
        torch.randn(frames, batch, 3, 32, 32, generator=generator),
        torch.randn(frames, batch, samples, 1, 2, generator=generator),
    )


def run(step, state, frames, noises) -> torch.Tensor:
    with torch.no_grad():
        return torch.stack([step(frame, noise, state)[0] for frame, noise in zip(frames, noises)])


@pytest.mark.parametrize("overrides", [dict(), dict(num_temporal_layers=1)])
def test_compiled_step_is_one_graph_over_300_frames_and_equals_eager(overrides):
    """fullgraph=True raises on a graph break; error_on_recompile on a recompile (the ring wraps 75 times: W = 4).
    The aot_eager backend traces and functionalizes exactly what inductor would compile, in seconds."""
    model = tiny_model(num_frames=4, window_stride=2, **overrides)
    step = GazeFlowStreamerStep(model, SamplingSettings.resolve(model.config, num_samples=3, num_steps=2))
    frames, noises = inputs(300)
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(step, fullgraph=True, dynamic=False, backend="aot_eager")
    with torch._dynamo.config.patch(error_on_recompile=True):
        got = run(compiled, step.new_state(2), frames, noises)
    assert counters["stats"]["unique_graphs"] == 1 and not counters["graph_break"]
    expected = run(step, step.new_state(2), frames, noises)
    assert torch.allclose(got, expected, atol=1e-6)


@pytest.mark.slow  # inductor compiles C++ for the CPU: minutes on 2 shared cores
def test_streamer_compiled_by_inductor_equals_eager():
    model = tiny_model(num_frames=4, window_stride=2)
    frames, noises = inputs(12)
    torch._dynamo.reset()
    compiled = GazeFlowStreamer(model, num_samples=3, num_steps=2, compile="default")
    eager = GazeFlowStreamer(model, num_samples=3, num_steps=2)
    for frame, noise in zip(frames, noises):
        got, expected = compiled.push(frame, noise=noise), eager.push(frame, noise=noise)
        assert torch.allclose(got.trajectories, expected.trajectories, atol=1e-5)


def test_rope_angles_stay_precise_over_a_long_stream():
    """The logit of a query at frame t and a key at frame t' depends on t - t' only; at t = 10^7 float32 angles
    (t * theta^(-2j / d_h)) are off by radians, the float64 angles reduced mod 2 pi are not."""
    rope = GazeFlowRotaryEmbedding(head_dim=16, theta=10000.0)
    query, key = torch.randn(2, 16, generator=torch.Generator().manual_seed(0))
    start = 10**7

    def logit(t_query: int, t_key: int, precise: bool) -> torch.Tensor:
        rotated = []
        for state, t in ((query, t_query), (key, t_key)):
            if precise:
                phases = rotary_phases(torch.tensor(t), rope.inv_freq.repeat_interleave(2))
                cos, sin = phases.cos().float(), phases.sin().float()
            else:
                cos, sin = (x[0] for x in rope(torch.tensor([t])))
            rotated.append(apply_rotary(state, cos, sin))
        return rotated[0] @ rotated[1]

    for offset in (0, 3, 63):
        near = logit(offset, 0, precise=True)
        assert abs(logit(start + offset, start, precise=True) - near) < 1e-4
        assert abs(logit(offset, 0, precise=False) - near) < 1e-4
    worst = max(abs(logit(start + offset, start, precise=False) - logit(offset, 0, True)) for offset in range(64))
    assert worst > 1e-2  # what the float32 angles would have done


def test_a_stream_at_frame_ten_million_equals_the_same_stream_at_frame_zero():
    model = tiny_model(num_frames=4, window_stride=2)
    step = GazeFlowStreamerStep(model, SamplingSettings.resolve(model.config, num_samples=3, num_steps=2))
    frames, noises = inputs(13)
    late = step.new_state(2)
    late.frame_index.fill_(10**7 + 1)  # not a multiple of W: the rings start mid-way
    expected = run(step, step.new_state(2), frames, noises)
    got = run(step, late, frames, noises)
    assert torch.allclose(got, expected, atol=1e-5)
    assert int(late.frame_index) == 10**7 + 14


class FunctionalStep(torch.nn.Module):
    def __init__(self, step: GazeFlowStreamerStep):
        super().__init__()
        self.step = step

    def forward(self, frame, noise, state):
        return self.step.functional(frame, noise, state)


@pytest.mark.slow  # one torch.export trace: 15 to 30 s on 2 shared cores
def test_functional_step_exports_and_the_exported_stream_equals_eager():
    """torch.export of (frame, noise, state) -> (trajectories, mean, next state): the graph the ONNX export and a
    runtime without mutable inputs take; run past W frames (the rings wrap) it equals the eager step."""
    model = tiny_model(num_frames=4, window_stride=2)
    step = GazeFlowStreamerStep(model, SamplingSettings.resolve(model.config, num_samples=3, num_steps=2))
    frames, noises = inputs(7)
    with torch.no_grad():
        exported = torch.export.export(FunctionalStep(step), (frames[0], noises[0], step.new_state(2)), strict=False)
        state, expected = step.new_state(2), run(step, step.new_state(2), frames, noises)
        for t, (frame, noise) in enumerate(zip(frames, noises)):
            trajectories, _, state = exported.module()(frame, noise, state)
            assert torch.equal(trajectories, expected[t]), t
    assert int(state.frame_index) == 7


def test_functional_step_leaves_its_state_and_returns_the_next():
    model = tiny_model()
    step = GazeFlowStreamerStep(model, SamplingSettings.resolve(model.config, num_samples=3, num_steps=2))
    frames, noises = inputs(3)
    state = step.new_state(2)
    run(step, state, frames[:2], noises[:2])
    before = state.clone()
    with torch.no_grad():
        trajectories, mean, following = step.functional(frames[2], noises[2], state)
        in_place = step(frames[2], noises[2], before.clone())
    assert all(torch.equal(a, b) for a, b in zip(state.tensors(), before.tensors()))
    assert torch.equal(trajectories, in_place[0]) and torch.equal(mean, in_place[1])
    assert int(following.frame_index) == 3 and int(state.frame_index) == 2


def test_bf16_step_casts_its_weights_once_and_leaves_the_model():
    model = tiny_model()
    frames, noises = inputs(10)
    fp32 = GazeFlowStreamerStep(model, SamplingSettings.resolve(model.config, num_samples=3, num_steps=2))
    bf16 = GazeFlowStreamerStep(
        model, SamplingSettings.resolve(model.config, num_samples=3, num_steps=2), dtype=torch.bfloat16
    )
    kept = {
        "velocity_network.frequencies": torch.float32,  # sinusoidal features of float32 coordinates
        "velocity_network.coordinate_scale": torch.float32,  # their scale, as the Python float it replaces
        "velocity_network.rotary_frequencies": torch.float64,
    }  # RoPE angles (long streams)
    assert {
        name: b.dtype for name, b in bf16.named_buffers() if b.is_floating_point() and b.dtype != torch.bfloat16
    } == kept
    assert all(p.dtype == torch.float32 for p in model.parameters())
    state = bf16.new_state(2)
    assert state.self_attention[0][0].key.dtype == torch.bfloat16
    difference = (run(bf16, state, frames, noises) - run(fp32, fp32.new_state(2), frames, noises)).abs()
    assert difference.mean() < 2e-2 and difference.max() < 1e-1


@pytest.mark.parametrize("window", [2, 4])
def test_static_encoder_equals_the_video_encoder_on_the_window(window):
    model = tiny_model(seed=1, use_lora=True, causal_encoder_frames=window)
    with torch.no_grad():
        for name, parameter in model.named_parameters():  # adapters that do something (B != 0)
            if "lora_B" in name:
                parameter.copy_(torch.randn(parameter.shape) * 0.2)
    clip = torch.randn(1, 5, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    windows = causal_encoder_windows(clip, window)
    encoder = GazeFlowStreamingVideoEncoder(model.video_encoder, window, model.config.tokens_per_frame, torch.float32)
    with torch.no_grad():
        expected = model.video_encoder(windows)[:, -model.config.tokens_per_frame :]
        got = encoder(windows)
    assert got.shape == expected.shape and torch.allclose(got, expected, atol=1e-5)
    assert model.video_encoder.has_lora  # merged into the encoder's copy only


def test_scheduler_flow_times_are_the_calls_the_network_sees():
    config = GazeFlowConfig.tiny(causal=True)
    assert scheduler_flow_times(scheduler_for(config, 2, "heun")) == [0.0, 0.5, 0.5, 1.0]
    assert scheduler_flow_times(scheduler_for(config, 3)) == pytest.approx([0.0, 1 / 3, 2 / 3])


def test_step_and_capture_modes_refuse_bad_arguments():
    model = tiny_model()
    with pytest.raises(ValueError, match="dtype"):
        GazeFlowStreamerStep(model, dtype=torch.int64)
    with pytest.raises(ValueError, match="batch_size"):
        GazeFlowStreamerStep(model).new_state(0)
    with pytest.raises(ValueError, match="causal"):
        GazeFlowStreamerStep(GazeFlowModel(GazeFlowConfig.tiny()))
    with pytest.raises(ValueError, match="compile"):
        GazeFlowStreamer(model, compile="fast")
    with pytest.raises(ValueError, match="CUDA"):
        GazeFlowStreamer(model, compile="cuda-graph")
    assert COMPILE_MODES[0] is None
    check_compile_mode("reduce-overhead", torch.device("cpu"))  # torch.compile runs on the CPU too (no cudagraphs)


def test_streamer_on_a_bf16_model_keeps_the_model_as_it_is():
    model = copy.deepcopy(tiny_model()).to(torch.bfloat16)
    streamer = GazeFlowStreamer(model, num_samples=2, num_steps=2, generator=torch.Generator().manual_seed(0))
    out = streamer.push(torch.randn(3, 32, 32))
    assert out.trajectories.dtype == torch.float32 and streamer.step.dtype == torch.bfloat16
    assert all(buffer.dtype == torch.bfloat16 for buffer in streamer.step.velocity_network.blocks[0].buffers())


def test_single_query_attention_equals_eager_and_is_registered():
    """The streamer's CPU kernel for the newest frame's query: registered in transformers' attention interface, equal
    to the eager matmul-softmax (masked slots, scaling, strided queries, bf16), other query lengths through eager."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    from transformers_gazeflow.models.gazeflow.modeling_gazeflow_attention import (
        SINGLE_QUERY_ATTENTION,
        eager_attention_forward,
        single_query_attention_forward,
    )

    assert ALL_ATTENTION_FUNCTIONS.get_interface(SINGLE_QUERY_ATTENTION, None) is single_query_attention_forward
    module = torch.nn.Module().eval()
    generator = torch.Generator().manual_seed(0)
    projected = torch.randn(6, 5 * 32, generator=generator)
    query = projected[:, :32].view(6, 4, 1, 8)  # strided, as a slice of a fused projection
    key, value = torch.randn(2, 6, 4, 10, 8, generator=generator).unbind(0)
    mask = torch.zeros(1, 1, 1, 10)
    mask[..., 7:] = torch.finfo(torch.float32).min  # slots not written yet
    for scaling in (1.0, 8**-0.5):
        got, weights = single_query_attention_forward(module, query, key, value, mask, scaling)
        expected, _ = eager_attention_forward(module, query, key, value, mask, scaling)
        assert weights is None and got.shape == expected.shape == (6, 1, 4, 8)
        assert torch.allclose(got, expected, atol=1e-6)
    masked_value = value.clone()
    masked_value[:, :, 7:] = 1e3  # masked slots do not reach the output
    assert torch.allclose(
        single_query_attention_forward(module, query, key, masked_value, mask, 1.0)[0],
        single_query_attention_forward(module, query, key, value, mask, 1.0)[0],
        atol=1e-6,
    )
    bf16 = [t.bfloat16() for t in (query, key, value, mask)]
    assert torch.allclose(
        single_query_attention_forward(module, *bf16, 1.0)[0].float(),
        eager_attention_forward(module, *bf16, 1.0)[0].float(),
        atol=2e-2,
    )
    longer = torch.randn(6, 4, 3, 8, generator=generator)
    assert torch.equal(
        single_query_attention_forward(module, longer, key, value, mask, 1.0)[0],
        eager_attention_forward(module, longer, key, value, mask, 1.0)[0],
    )


def test_streamer_self_attention_runs_the_configured_kernel_unless_it_is_a_math_kernel_on_a_cpu():
    """On a CPU the sdpa/eager configs run the single-query kernel for the ring; any other registered kernel (a user's
    choice, e.g. flex attention) is what the streamer's self-attention runs, with the same result."""
    from transformers import AttentionInterface

    from transformers_gazeflow.models.gazeflow.modeling_gazeflow_streaming import GazeFlowStreamingBlock

    called: list[str] = []
    sdpa = AttentionInterface._global_mapping["sdpa"]

    def spy(module, query, *args, **kwargs):
        if isinstance(module, GazeFlowStreamingBlock) and query.shape[-2] == 1 and kwargs["scaling"] == 1.0:
            called.append("self")
        return sdpa(module, query, *args, **kwargs)

    AttentionInterface.register("gazeflow_streamer_spy", spy)
    frames, noises = inputs(6)
    model = tiny_model()
    default = GazeFlowStreamerStep(
        model, SamplingSettings.resolve(model.config, num_samples=3, num_steps=2)
    )  # sdpa: the single-query kernel on a CPU
    expected = run(default, default.new_state(2), frames, noises)
    model.set_attn_implementation("gazeflow_streamer_spy")
    step = GazeFlowStreamerStep(model, SamplingSettings.resolve(model.config, num_samples=3, num_steps=2))
    got = run(step, step.new_state(2), frames, noises)
    assert len(called) == 6 * 2 * len(step.velocity_network.blocks)  # frames x calls x blocks
    assert torch.allclose(got, expected, atol=1e-5)
