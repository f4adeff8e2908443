"""The ablation switches (``GazeFlowConfig``'s variants): each is saved in the config, validated, and changes the
computation as the paper's ablation says (Sections 4.4-4.5). Tiny seeded models; every assertion compares real
computations."""

import dataclasses

import pytest
import torch
from transformers import AutoConfig

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel, unit_to_model

SWITCHES = dict(
    objective="flow_matching",
    use_visual_cross_attention=True,
    use_task_cross_attention=True,
    position_encoding="rope",
    task_guidance="cross_attention",
    num_task_queries=4,
    causal=False,
)


def tiny_model(seed: int = 0, **overrides) -> GazeFlowModel:
    torch.manual_seed(seed)
    return GazeFlowModel(GazeFlowConfig.tiny(use_lora=False, **overrides)).eval()


def tokens(model, seed: int, batch: int = 2, frames: int = 8) -> torch.Tensor:
    """Random encoder tokens of a window (4 tubelets x 4 tokens x D=32 for the tiny bidirectional model)."""
    groups = frames // model.config.frames_per_encoder_group
    return torch.randn(batch, groups * model.config.tokens_per_frame, 32, generator=torch.Generator().manual_seed(seed))


def gaze_inputs(batch: int = 2, samples: int = 3, frames: int = 8, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    sample = torch.randn(batch, samples, frames, 2, generator=generator)
    self_condition = torch.randn(batch, samples, frames, 2, generator=generator).clamp(-1, 1)
    return sample, self_condition


def count(module) -> int:
    return sum(p.numel() for p in module.parameters())


# ---------------------------------------------------------------------------------------------------- config
def test_default_config_keeps_the_paper_model():
    config = GazeFlowConfig()
    for name, value in SWITCHES.items():
        assert getattr(config, name) == value, name
    assert config.num_samples == 30 and config.causal_encoder_frames == 2 and config.diffusion_timesteps == 1000


def test_every_switch_is_saved_and_reloaded(tmp_path):
    switches = dict(
        objective="diffusion",
        use_visual_cross_attention=False,
        use_task_cross_attention=True,
        position_encoding="learned",
        task_guidance="concat",
        num_task_queries=0,
        causal=True,
        causal_encoder_frames=4,
        diffusion_timesteps=500,
    )
    GazeFlowConfig.tiny(**switches).save_pretrained(tmp_path)
    loaded = AutoConfig.from_pretrained(tmp_path)
    for name, value in switches.items():
        assert getattr(loaded, name) == value, name
    assert GazeFlowConfig.tiny(objective="regression").num_samples == 1
    assert GazeFlowConfig(objective="regression").num_samples == 1


@pytest.mark.parametrize(
    "overrides,field",
    [
        (dict(objective="score_matching"), "objective"),
        (dict(position_encoding="alibi"), "position_encoding"),
        (dict(task_guidance="film"), "task_guidance"),
        (dict(use_task_cross_attention=False, task_guidance="concat"), "task_guidance"),
        (dict(use_visual_cross_attention=1), "use_visual_cross_attention"),
        (dict(use_task_cross_attention="no"), "use_task_cross_attention"),
        (dict(objective="diffusion", solver="heun"), "solver"),
        (dict(objective="regression", num_samples=4), "num_samples"),
        (dict(causal=True, causal_encoder_frames=3), "causal_encoder_frames"),
        (dict(causal="yes"), "causal"),
        (dict(diffusion_timesteps=0), "diffusion_timesteps"),
    ],
)
def test_bad_switch_values_name_the_field(overrides, field):
    with pytest.raises(ValueError, match=field):
        GazeFlowConfig.tiny(**overrides)


# ---------------------------------------------------------------------------------------------------- dual path
def test_without_visual_cross_attention_the_video_enters_only_through_the_task_bank():
    model = tiny_model(use_visual_cross_attention=False)
    assert all(block.visual_attention is None for block in model.velocity_network.blocks)
    assert all(kv is None for kv in model.build_condition(tokens(model, 0), 8).visual_key_values)
    cond_a, cond_b = model.build_condition(tokens(model, 0), 8), model.build_condition(tokens(model, 1), 8)
    sample, self_condition = gaze_inputs()
    out_a = model.velocity(sample, 0.3, cond_a, self_condition)
    out_b = model.velocity(sample, 0.3, cond_b, self_condition)
    assert not torch.allclose(out_a, out_b, atol=1e-4)  # the video still matters ... through the bank
    # freeze the task-bank path at video A's: video B's visual tokens then change nothing
    hybrid = dataclasses.replace(cond_b, task_tokens=cond_a.task_tokens, task_key_values=cond_a.task_key_values)
    assert torch.allclose(model.velocity(sample, 0.3, hybrid, self_condition), out_a, atol=1e-6)
    # the same swap in the full model does change the output (its visual cross-attention reads V_t)
    full = tiny_model()
    cond_a, cond_b = full.build_condition(tokens(full, 0), 8), full.build_condition(tokens(full, 1), 8)
    hybrid = dataclasses.replace(cond_b, task_tokens=cond_a.task_tokens, task_key_values=cond_a.task_key_values)
    assert not torch.allclose(
        full.velocity(sample, 0.3, hybrid, self_condition),
        full.velocity(sample, 0.3, cond_a, self_condition),
        atol=1e-4,
    )


def test_without_task_cross_attention_the_bank_is_gone_and_only_visual_tokens_matter():
    model = tiny_model(use_task_cross_attention=False)
    assert model.condition_encoder.task_bank is None
    assert all(
        block.task_attention is None and not hasattr(block, "task_gate") for block in model.velocity_network.blocks
    )
    full = tiny_model()
    per_block = 4 * (32 * 32 + 32) + 2 * 32 + 32  # task attention + its LayerNorm + the gate
    bank = count(full.condition_encoder.task_bank)
    assert count(full) - count(model) == 2 * per_block + bank
    sample, self_condition = gaze_inputs()
    for variant, changes in ((model, False), (full, True)):
        cond_a, cond_b = variant.build_condition(tokens(variant, 0), 8), variant.build_condition(tokens(variant, 1), 8)
        # keep video A's per-frame visual keys/values, take everything else from video B
        hybrid = dataclasses.replace(cond_b, visual_key_values=cond_a.visual_key_values)
        same = torch.allclose(
            variant.velocity(sample, 0.3, hybrid, self_condition),
            variant.velocity(sample, 0.3, cond_a, self_condition),
            atol=1e-6,
        )
        assert same != changes


# ---------------------------------------------------------------------------------------------------- position
def permuted_inputs(model, permutation):
    """Permute the tubelets of the encoder tokens and, consistently, the frames (pairs) of the gaze inputs."""
    states = tokens(model, 0).view(2, 4, 4, 32)[:, permutation].reshape(2, 16, 32)
    frames = torch.stack([2 * permutation, 2 * permutation + 1], dim=1).flatten()
    return states, frames


@pytest.mark.parametrize("position_encoding,equivariant", [("none", True), ("rope", False), ("learned", False)])
def test_without_position_encoding_the_network_is_permutation_equivariant_over_frames(position_encoding, equivariant):
    model = tiny_model(position_encoding=position_encoding)
    permutation = torch.tensor([2, 0, 3, 1])
    permuted_states, frames = permuted_inputs(model, permutation)
    sample, self_condition = gaze_inputs()
    out = model.velocity(sample, 0.4, model.build_condition(tokens(model, 0), 8), self_condition)
    out_permuted = model.velocity(
        sample[:, :, frames], 0.4, model.build_condition(permuted_states, 8), self_condition[:, :, frames]
    )
    assert torch.allclose(out_permuted, out[:, :, frames], atol=1e-5) == equivariant


def test_learned_position_table_is_a_parameter_that_is_used_and_saved(tmp_path):
    model = tiny_model(position_encoding="learned")
    table = model.velocity_network.frame_position.embedding
    assert table.shape == (8, 32) and table.requires_grad and table.abs().sum() > 0
    assert model.velocity_network.rotary_embedding is None  # the table replaces RoPE
    assert count(model) - count(tiny_model()) == 8 * 32
    pixels = torch.randn(1, 8, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    first = model.generate(pixel_values_videos=pixels, generator=torch.Generator().manual_seed(0)).trajectories
    model.save_pretrained(tmp_path)
    loaded = GazeFlowModel.from_pretrained(tmp_path).eval()
    assert torch.equal(loaded.velocity_network.frame_position.embedding, table)
    again = loaded.generate(pixel_values_videos=pixels, generator=torch.Generator().manual_seed(0)).trajectories
    assert torch.equal(first, again)
    with torch.no_grad():
        table.zero_()
    changed = model.generate(pixel_values_videos=pixels, generator=torch.Generator().manual_seed(0)).trajectories
    assert not torch.allclose(changed, first, atol=1e-4)


# ---------------------------------------------------------------------------------------------------- task path
def test_concat_guidance_feeds_the_bank_into_the_gaze_token_input():
    model = tiny_model(task_guidance="concat")
    blocks = model.velocity_network.blocks
    assert all(block.task_attention is None for block in blocks) and model.condition_encoder.task_bank is not None
    concat = model.velocity_network.task_concat.projection
    assert concat.in_features == 32 + 3 * 32 and concat.out_features == 32  # [h ; vec(c_task)], M + 1 = 3 tokens
    cond_a, cond_b = model.build_condition(tokens(model, 0), 8), model.build_condition(tokens(model, 1), 8)
    sample, self_condition = gaze_inputs()
    hybrid = dataclasses.replace(cond_a, task_tokens=cond_b.task_tokens)  # only c_task differs
    out_a = model.velocity(sample, 0.3, cond_a, self_condition)
    assert not torch.allclose(model.velocity(sample, 0.3, hybrid, self_condition), out_a, atol=1e-5)
    with torch.no_grad():  # cut the bank's columns of the input projection: c_task then enters nowhere
        concat.weight[:, 32:] = 0
    assert torch.allclose(
        model.velocity(sample, 0.3, hybrid, self_condition),
        model.velocity(sample, 0.3, cond_a, self_condition),
        atol=1e-6,
    )


def test_zero_task_queries_keep_only_the_pooled_token():
    model = tiny_model(num_task_queries=0)
    bank = model.condition_encoder.task_bank
    assert count(bank) == 0 and not hasattr(bank, "queries")
    condition = model.build_condition(tokens(model, 0), 8)
    assert condition.task_tokens.shape == (2, 1, 32)
    assert torch.allclose(condition.task_tokens[:, 0], condition.visual_tokens.mean(dim=(1, 2)), atol=1e-6)
    with_queries = tiny_model(num_task_queries=2).build_condition(tokens(model, 0), 8)
    assert with_queries.task_tokens.shape == (2, 3, 32)


# ---------------------------------------------------------------------------------------------------- objectives
def test_regression_head_predicts_one_trajectory_directly_with_a_masked_mse():
    model = tiny_model(objective="regression")
    pixels = torch.randn(2, 8, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    gaze = unit_to_model(torch.rand(2, 8, 2, generator=torch.Generator().manual_seed(1)))
    mask = torch.ones(2, 8, dtype=torch.bool)
    mask[1, 5:] = False
    out = model(pixel_values_videos=pixels, gaze=gaze, valid_mask=mask)
    assert torch.equal(out.target_velocity, gaze) and out.flow_time is None
    expected = ((out.predicted_velocity - gaze) ** 2 * mask[..., None]).sum() / (2 * mask.sum())
    assert torch.allclose(out.loss, expected, atol=1e-6)
    first = model.generate(pixel_values_videos=pixels, generator=torch.Generator().manual_seed(0))
    second = model.generate(pixel_values_videos=pixels, generator=torch.Generator().manual_seed(5))
    assert first.trajectories.shape == (2, 1, 8, 2) and torch.equal(first.trajectories, second.trajectories)
    predicted_unit = ((out.predicted_velocity + 1) / 2).clamp(0, 1)
    assert torch.allclose(first.trajectories[:, 0], predicted_unit, atol=1e-5)
    with pytest.raises(ValueError, match="num_samples"):
        model.generate(pixel_values_videos=pixels, num_samples=3)
    with pytest.raises(ValueError, match="solver"):
        model.generate(pixel_values_videos=pixels, solver="heun")


def test_regression_training_reduces_its_loss():
    model = tiny_model(objective="regression")
    model.train()
    features = model.encode_video(torch.randn(2, 8, 3, 32, 32, generator=torch.Generator().manual_seed(0)))
    gaze = unit_to_model(torch.rand(2, 8, 2, generator=torch.Generator().manual_seed(0)))
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-3)
    before = model(encoder_hidden_states=features, gaze=gaze).loss.item()
    for _ in range(60):
        loss = model(encoder_hidden_states=features, gaze=gaze).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.3 * before


@pytest.mark.parametrize(
    "overrides",
    [
        dict(),
        dict(use_visual_cross_attention=False),
        dict(task_guidance="concat"),
        dict(position_encoding="none"),
        dict(num_task_queries=0),
    ],
)
def test_every_variant_trains_end_to_end(overrides):
    model = tiny_model(**overrides)
    model.train()
    pixels = torch.randn(2, 8, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    gaze = unit_to_model(torch.rand(2, 8, 2, generator=torch.Generator().manual_seed(0)))
    loss = model(pixel_values_videos=pixels, gaze=gaze, generator=torch.Generator().manual_seed(0)).loss
    loss.backward()
    trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    unused = [n for n, p in trainable if p.grad is None]
    assert not unused, unused  # no parameter is built that the variant does not use
