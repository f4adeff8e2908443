"""The auxiliary grounding loss (``config.grounding_loss_weight``, beyond the paper): the token grid's geometry
matches the encoder's token order and the gaze's coordinates, the loss is the stated cross-entropy on valid frames
only, the head exists only when asked for, and training with it makes c_v point at the gaze. Tiny seeded models."""

import math

import pytest
import torch

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
from transformers_gazeflow.models.gazeflow.geometry import patch_centres
from transformers_gazeflow.models.gazeflow.modeling_gazeflow_objectives import grounding_loss


def tiny(seed: int = 0, **overrides) -> GazeFlowModel:
    torch.manual_seed(seed)
    return GazeFlowModel(GazeFlowConfig.tiny(use_lora=False, **overrides))


# ---------------------------------------------------------------------------------------------------- geometry
def test_patch_centres_are_row_major_model_coordinates():
    centres = patch_centres(2)
    assert torch.allclose(centres, torch.tensor([[-0.5, -0.5], [0.5, -0.5], [-0.5, 0.5], [0.5, 0.5]]))
    grid = patch_centres(4)
    assert grid.shape == (16, 2)
    assert torch.allclose(grid[4 * 2 + 3], torch.tensor([0.75, 0.25]))  # row 2, column 3: x right, y down
    with pytest.raises(ValueError, match="grid_size must be an int >= 1"):
        patch_centres(0)


def test_token_order_of_the_encoder_matches_patch_centres():
    """A frame that differs from a blank one in one patch only changes the encoder's patch embedding at the token
    whose centre ``patch_centres`` puts on that patch: the frame-to-token alignment the grounding target assumes."""
    model = tiny()
    size, patch = model.config.image_size, model.config.encoder_config.patch_size
    grid = size // patch
    frames = model.config.encoder_config.tubelet_size
    blank = torch.zeros(1, frames, 3, size, size)
    marked = blank.clone()
    row, col = grid - 1, 0  # bottom-left patch
    marked[..., row * patch : (row + 1) * patch, col * patch : (col + 1) * patch] = 1.0
    embed = model.get_input_embeddings()  # the tubelet x patch convolution, on [B, C, T, S, S]
    with torch.no_grad():
        changed = (embed(marked.transpose(1, 2)) - embed(blank.transpose(1, 2))).abs().sum(-1)[0]  # [N]
    assert changed.argmax().item() == row * grid + col
    assert torch.count_nonzero(changed).item() == 1
    assert torch.allclose(patch_centres(grid)[row * grid + col], torch.tensor([-0.5, 0.5]))


# ---------------------------------------------------------------------------------------------------- the loss
def test_grounding_loss_is_the_cross_entropy_to_a_gaussian_around_the_gaze():
    centres = patch_centres(2)
    gaze = torch.tensor([[[0.5, -0.5], [0.5, -0.5]]])  # both frames on token 1 (top right)
    valid = torch.ones(1, 2, dtype=torch.bool)
    sigma = 0.5
    logits = torch.tensor([[[0.0, 2.0, -1.0, 0.5]]])  # one group of two frames
    distance = ((centres - gaze[0, 0]) ** 2).sum(-1)
    target = torch.softmax(-distance / (2 * sigma**2), dim=-1)
    expected = -(target * torch.log_softmax(logits[0, 0], dim=-1)).sum()
    assert torch.allclose(grounding_loss(logits, gaze, valid, centres, sigma), expected)
    pointing = torch.tensor([[[0.0, 5.0, 0.0, 0.0]]])
    elsewhere = torch.tensor([[[0.0, 0.0, 5.0, 0.0]]])
    assert grounding_loss(pointing, gaze, valid, centres, sigma) < grounding_loss(
        elsewhere, gaze, valid, centres, sigma
    )


def test_grounding_loss_reads_valid_frames_only():
    centres = patch_centres(2)
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 2, 4, generator=generator)
    gaze = torch.rand(2, 4, 2, generator=generator) * 2 - 1
    valid = torch.tensor([[True, False, True, True], [False, False, True, False]])
    reference = grounding_loss(logits, gaze, valid, centres, 0.5)
    moved = gaze.clone()
    moved[~valid] = torch.tensor([0.9, 0.9])  # anything on invalid frames
    assert torch.allclose(grounding_loss(logits, moved, valid, centres, 0.5), reference)
    # clip 1's first group has no valid frame: it contributes nothing, its logits do not matter
    other = logits.clone()
    other[1, 0] = torch.tensor([9.0, -9.0, 3.0, 0.0])
    assert torch.allclose(grounding_loss(other, gaze, valid, centres, 0.5), reference)
    none_valid = torch.zeros_like(valid)
    assert grounding_loss(logits, gaze, none_valid, centres, 0.5).item() == 0.0
    with pytest.raises(ValueError, match="do not split into"):
        grounding_loss(logits, gaze[:, :3], valid[:, :3], centres, 0.5)


# ---------------------------------------------------------------------------------------------------- the model
def test_the_paper_model_has_no_grounding_head():
    model = tiny()
    assert model.condition_encoder.grounding_head is None
    assert not any("grounding" in key for key in model.state_dict())
    gaze = torch.rand(2, model.config.num_frames, 2) * 2 - 1
    tokens = torch.randn(2, 4 * model.config.tokens_per_frame, model.config.encoder_config.hidden_size)
    output = model.eval()(encoder_hidden_states=tokens, gaze=gaze)
    assert output.grounding_loss is None and output.grounding_logits is None and output.objective_loss is None


def test_loss_adds_the_weighted_grounding_loss_and_trains_the_condition_encoder():
    model = tiny(grounding_loss_weight=0.5, grounding_sigma=0.75)
    config = model.config
    gaze = torch.rand(2, config.num_frames, 2) * 2 - 1
    tokens = torch.randn(2, 4 * config.tokens_per_frame, config.encoder_config.hidden_size)
    output = model.eval()(encoder_hidden_states=tokens, gaze=gaze)
    groups = config.num_frames // config.frames_per_encoder_group
    assert output.grounding_logits.shape == (2, groups, config.tokens_per_frame)
    assert torch.allclose(output.loss, output.objective_loss + 0.5 * output.grounding_loss)
    grid = math.isqrt(config.tokens_per_frame)
    sigma = 0.75 * 2 / grid
    expected = grounding_loss(
        output.grounding_logits, gaze, torch.ones(2, config.num_frames, dtype=torch.bool), patch_centres(grid), sigma
    )
    assert torch.allclose(output.grounding_loss, expected)
    output.grounding_loss.backward()
    spatial = model.condition_encoder.spatial_encoder.layers[0].attention
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in spatial.parameters())
    assert model.velocity_network.output_head.weight.grad is None  # L_ground does not reach the velocity network


def test_grounding_head_round_trips_through_save_and_load(tmp_path):
    model = tiny(grounding_loss_weight=1.0)
    model.save_pretrained(tmp_path)
    loaded = GazeFlowModel.from_pretrained(tmp_path)
    assert loaded.config.grounding_loss_weight == 1.0
    assert torch.equal(
        loaded.condition_encoder.grounding_head.score.weight, model.condition_encoder.grounding_head.score.weight
    )


@pytest.mark.parametrize(
    "field, value, expected",
    [
        ("grounding_loss_weight", -1.0, ">= 0"),
        ("grounding_loss_weight", True, ">= 0"),
        ("grounding_sigma", 0.0, "> 0"),
    ],
)
def test_bad_grounding_settings_get_one_line_errors(field, value, expected):
    with pytest.raises(ValueError) as error:
        GazeFlowConfig.tiny(**{field: value})
    message = str(error.value)
    assert field in message and expected in message and "\n" not in message


def test_training_with_the_grounding_loss_points_c_v_at_the_gaze():
    """Tokens where one position carries a marker and the gaze sits on that position's centre: a few dozen steps
    of the summed loss teach the head (through c_v) to put most of its mass on the marked token, which it did not
    before training."""
    model = tiny(seed=1, grounding_loss_weight=1.0, grounding_sigma=0.3)
    config = model.config
    groups = config.num_frames // config.frames_per_encoder_group
    num_tokens, width = config.tokens_per_frame, config.encoder_config.hidden_size
    centres = patch_centres(math.isqrt(num_tokens))
    generator = torch.Generator().manual_seed(0)
    marker = torch.randn(width, generator=generator) * 3

    def batch(size: int):
        where = torch.randint(num_tokens, (size,), generator=generator)
        tokens = torch.randn(size, groups, num_tokens, width, generator=generator)
        tokens[torch.arange(size), :, where] += marker
        gaze = centres[where].view(size, 1, 2).expand(size, config.num_frames, 2)
        return tokens.view(size, groups * num_tokens, width), gaze, where

    test_tokens, test_gaze, test_where = batch(32)

    def accuracy() -> float:
        with torch.no_grad():
            logits = model.eval()(encoder_hidden_states=test_tokens, gaze=test_gaze).grounding_logits
        return (logits.argmax(-1) == test_where.view(-1, 1)).float().mean().item()

    before = accuracy()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for step in range(60):
        tokens, gaze, _ = batch(16)
        loss = model(encoder_hidden_states=tokens, gaze=gaze, generator=torch.Generator().manual_seed(step)).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    after = accuracy()
    assert before < 0.5
    assert after > 0.9
