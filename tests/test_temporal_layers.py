"""``GazeFlowConfig.num_temporal_layers``: divided space-time attention (TimeSformer) before the spatial encoder's
layers. Each spatial position attends to the same position in the window's frame groups (the causal model: groups <=
its own); 0 (the default) leaves every model as it was. Tiny seeded models."""

import json

import pytest
import torch

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
from transformers_gazeflow.generation.streaming_step import GazeFlowStreamerStep
from transformers_gazeflow.models.gazeflow.configuration_gazeflow import GazeFlowConfigError
from transformers_gazeflow.models.gazeflow.generation_gazeflow import SamplingSettings
from transformers_gazeflow.models.gazeflow.modeling_gazeflow_encoder import GazeFlowTemporalEncoderLayer
from transformers_gazeflow.models.gazeflow.modeling_gazeflow_streaming import streaming_positions

from .test_mimetic_init import head_products

TOKENS, HEADS = 4, 4  # GazeFlowConfig.tiny: a 2 x 2 token grid, 4 heads of d = 32


def tiny_model(seed: int = 0, **overrides) -> GazeFlowModel:
    torch.manual_seed(seed)
    return GazeFlowModel(GazeFlowConfig.tiny(use_lora=False, **overrides)).eval()


def projected_tokens(batch: int = 2, groups: int = 4, seed: int = 0) -> torch.Tensor:
    """Stand-in W_proj outputs ``[B, G, N, d]``."""
    return torch.randn(batch, groups, TOKENS, 32, generator=torch.Generator().manual_seed(seed))


def visual_tokens(model: GazeFlowModel, tokens: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model.condition_encoder.spatial_encoder(tokens)


# ---------------------------------------------------------------------------------------------------- config
def test_default_is_zero_and_adds_no_weight():
    default, temporal = tiny_model(), tiny_model(num_temporal_layers=1)
    assert default.config.num_temporal_layers == 0
    assert len(default.condition_encoder.spatial_encoder.temporal_layers) == 0
    default_keys, temporal_keys = set(default.state_dict()), set(temporal.state_dict())
    assert not any("temporal" in key for key in default_keys)
    added = temporal_keys - default_keys
    assert (
        default_keys <= temporal_keys
        and added
        and all(key.startswith("condition_encoder.spatial_encoder.temporal_layers.0.") for key in added)
    )
    assert isinstance(temporal.condition_encoder.spatial_encoder.temporal_layers[0], GazeFlowTemporalEncoderLayer)


@pytest.mark.parametrize("value", [-1, "1", 1.0, None])
def test_a_bad_value_is_a_one_line_error_naming_the_field(value):
    with pytest.raises(GazeFlowConfigError, match=r"^GazeFlowConfig: `num_temporal_layers` must be an int >= 0") as err:
        GazeFlowConfig.tiny(num_temporal_layers=value)
    assert "\n" not in str(err.value)


def test_save_and_load_round_trip(tmp_path):
    model = tiny_model(num_temporal_layers=2, causal=True)
    model.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["num_temporal_layers"] == 2
    loaded = GazeFlowModel.from_pretrained(tmp_path).eval()
    assert loaded.config.num_temporal_layers == 2
    tokens = projected_tokens()
    assert torch.equal(visual_tokens(loaded, tokens), visual_tokens(model, tokens))
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, loaded.state_dict()[name]), name


# ---------------------------------------------------------------------------------------------------- mixing
def test_windowed_temporal_layer_mixes_frame_groups_both_ways():
    """Changing group 0 changes c_v of every other group and changing the last group changes group 0; without the
    layer, c_v of a group reads its own group only."""
    tokens = projected_tokens()
    changed_first, changed_last = tokens.clone(), tokens.clone()
    changed_first[:, 0] = projected_tokens(seed=1)[:, 0]
    changed_last[:, -1] = projected_tokens(seed=2)[:, -1]
    model = tiny_model(num_temporal_layers=1)
    base = visual_tokens(model, tokens)
    assert not torch.allclose(visual_tokens(model, changed_first)[:, 1:], base[:, 1:], atol=1e-4)
    assert not torch.allclose(visual_tokens(model, changed_last)[:, 0], base[:, 0], atol=1e-4)
    spatial_only = tiny_model()
    assert torch.equal(visual_tokens(spatial_only, changed_first)[:, 1:], visual_tokens(spatial_only, tokens)[:, 1:])


def test_causal_temporal_layer_never_reads_a_later_frame():
    """c_v of frame t is unchanged (bit for bit) when frames after t change, and does change with frame 0."""
    model = tiny_model(num_temporal_layers=2, causal=True)
    tokens = projected_tokens(groups=6)
    base = visual_tokens(model, tokens)
    for t in (0, 2, 4):
        changed = tokens.clone()
        changed[:, t + 1 :] = torch.randn(changed[:, t + 1 :].shape, generator=torch.Generator().manual_seed(t))
        got = visual_tokens(model, changed)
        assert torch.allclose(got[:, : t + 1], base[:, : t + 1], atol=1e-6), t
        assert not torch.allclose(got[:, t + 1 :], base[:, t + 1 :], atol=1e-4), t
    changed = tokens.clone()
    changed[:, 0] = projected_tokens(groups=6, seed=1)[:, 0]
    assert not torch.allclose(visual_tokens(model, changed)[:, 1:], base[:, 1:], atol=1e-4)


def test_causal_generate_at_t_is_unchanged_by_later_frames_through_the_encoder():
    model = tiny_model(num_temporal_layers=1, causal=True)
    pixels = torch.randn(2, 8, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    changed = pixels.clone()
    changed[:, 4:] = torch.randn(changed[:, 4:].shape, generator=torch.Generator().manual_seed(9))
    out, out_changed = (
        model.generate(pixel_values_videos=p, generator=torch.Generator().manual_seed(0)).trajectories
        for p in (pixels, changed)
    )
    assert torch.allclose(out[:, :, :4], out_changed[:, :, :4], atol=1e-6)
    assert not torch.allclose(out[:, :, 4:], out_changed[:, :, 4:], atol=1e-4)


def test_shared_group_tokens_equal_tokens_copied_per_frame():
    """A softmax over keys in which each group appears tubelet-times equals the one over the distinct groups."""
    model = tiny_model(num_temporal_layers=1)
    pixels = torch.randn(2, 8, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        tokens = model.encode_video(pixels)
        shared = model.build_condition(tokens, 8, share_group_tokens=True)
        per_frame = model.build_condition(tokens, 8, share_group_tokens=False)
        assert shared.visual_tokens.shape[1] == 4 and per_frame.visual_tokens.shape[1] == 8
        torch.testing.assert_close(
            per_frame.visual_tokens, shared.visual_tokens.repeat_interleave(2, dim=1), atol=1e-6, rtol=1e-5
        )
        sample = torch.randn(2, 3, 8, 2, generator=torch.Generator().manual_seed(2))
        velocities = [model.velocity(sample, 0.5, condition) for condition in (shared, per_frame)]
    torch.testing.assert_close(velocities[1], velocities[0], atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------------------------------------------- outputs
@pytest.mark.parametrize("causal", [False, True])
def test_attentions_and_hidden_states_list_the_temporal_layers(causal):
    model = tiny_model(num_temporal_layers=2, causal=causal)
    model.set_attn_implementation("eager")
    frames = 8
    groups = frames if causal else frames // 2
    pixels = torch.randn(2, frames, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    gaze = torch.rand(2, frames, 2, generator=torch.Generator().manual_seed(1)) * 2 - 1
    with torch.no_grad():
        out = model(pixel_values_videos=pixels, gaze=gaze, output_attentions=True, output_hidden_states=True)
    assert len(out.temporal_attentions) == 2 and len(out.spatial_attentions) == 1
    assert len(out.spatial_hidden_states) == 2 + 1 + 1
    for weights in out.temporal_attentions:
        assert weights.shape == (2 * TOKENS, HEADS, groups, groups)
        torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]))
        later = torch.ones(groups, groups, dtype=torch.bool).triu(1)
        assert torch.all(weights[..., later] == 0) == causal
    for hidden in out.spatial_hidden_states:
        assert hidden.shape == (2 * groups, TOKENS, 32)
    spatial = model.condition_encoder.spatial_encoder
    per_position = out.spatial_hidden_states[0].view(2, groups, TOKENS, 32).transpose(1, 2).reshape(-1, groups, 32)
    first, _ = spatial.temporal_layers[0](per_position, spatial.temporal_attention_mask(groups, pixels.device))
    torch.testing.assert_close(
        first.view(2, TOKENS, groups, 32).transpose(1, 2).reshape(-1, TOKENS, 32), out.spatial_hidden_states[1]
    )
    without = tiny_model(causal=causal)
    with torch.no_grad():
        plain = without(pixel_values_videos=pixels, gaze=gaze, output_attentions=True)
    assert plain.temporal_attentions is None


# ---------------------------------------------------------------------------------------------------- init
def test_mimetic_init_applies_to_the_temporal_layers():
    def diagonal(mode: str) -> float:
        model = tiny_model(num_temporal_layers=1, num_attention_heads=2, spatial_attention_init=mode)
        attention = model.condition_encoder.spatial_encoder.temporal_layers[0].attention
        assert torch.count_nonzero(attention.q_proj.bias) == 0
        return float(torch.stack([p.diagonal().mean() for p in head_products(attention)]).mean())

    assert diagonal("mimetic") > 0.2 > abs(diagonal("normal"))


# ---------------------------------------------------------------------------------------------------- streamer
def test_streamer_condition_past_the_window_equals_the_causal_encoder_on_the_last_w_frames():
    """Past W frames the temporal ring wraps: with one temporal layer frame t's c_v in the step equals the causal
    spatial encoder run on frames t - W + 1 .. t's tokens (its last group). (With more layers a deeper layer's ring
    holds keys of frames computed with their own W-frame context, as any key/value cache does: equal within W.)"""
    model = tiny_model(num_temporal_layers=1, causal=True, num_frames=4, window_stride=2)
    step = GazeFlowStreamerStep(model, SamplingSettings.resolve(model.config, num_samples=3, num_steps=2))
    state = step.new_state(2)
    assert [tuple(ring.key.shape) for ring in state.temporal] == [(2 * TOKENS, HEADS, 4, 8)]
    pixels = torch.randn(2, 11, 3, 32, 32, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        projected = model.condition_encoder.visual_projection(model.encode_video(pixels).view(2, 11, TOKENS, -1))
        for t in range(11):
            positions = streaming_positions(state.frame_index, state.written, step.dtype)
            got = step.encode_frame(pixels[:, t], state, positions).visual_tokens
            state.frame_index.add_(1)
            expected = visual_tokens(model, projected[:, max(0, t - 3) : t + 1])[:, -1]
            torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)


def test_bf16_step_keeps_bf16_temporal_rings():
    model = tiny_model(num_temporal_layers=1, causal=True)
    pixels = torch.randn(6, 2, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    noises = torch.randn(6, 2, 3, 1, 2, generator=torch.Generator().manual_seed(1))
    results = []
    for dtype in (torch.float32, torch.bfloat16):
        step = GazeFlowStreamerStep(
            model, SamplingSettings.resolve(model.config, num_samples=3, num_steps=2), dtype=dtype
        )
        state = step.new_state(2)
        assert state.temporal[0].key.dtype == dtype
        with torch.no_grad():
            results.append(torch.stack([step(frame, noise, state)[0] for frame, noise in zip(pixels, noises)]))
    assert all(p.dtype == torch.float32 for p in model.parameters())
    difference = (results[1] - results[0]).abs()
    assert difference.mean() < 2e-2 and difference.max() < 1e-1


def test_onnx_export_carries_the_temporal_rings(tmp_path):
    """The exported step takes and returns the temporal rings as state tensors, and onnxruntime gives the torch
    step's gaze past the window (the export's own check over 12 frames, W = 8)."""
    pytest.importorskip("onnxruntime", reason="the [onnx] extra: pip install -e '.[onnx]'")
    from transformers_gazeflow.data.processing import GazeFlowVideoProcessor
    from transformers_gazeflow.generation.onnx_export import export_streamer

    folder = tmp_path / "model"
    tiny_model(num_temporal_layers=1, causal=True).save_pretrained(folder)
    GazeFlowVideoProcessor(size=32).save_pretrained(folder)
    interface = export_streamer(str(folder), tmp_path / "exported", num_samples=3, num_steps=2, check_frames=12)
    inputs = {entry["name"]: entry["shape"] for entry in interface["inputs"]}
    outputs = {entry["name"] for entry in interface["outputs"]}
    assert inputs["state.temporal.0.key"] == inputs["state.temporal.0.value"] == [TOKENS, HEADS, 8, 8]
    assert {"next_state.temporal.0.key", "next_state.temporal.0.value"} <= outputs
    assert interface["checked"]["frames"] == 12 and interface["checked"]["max_abs_difference"] <= 1e-3
