"""Mimetic initialisation of the spatial encoder's self-attention (``config.spatial_attention_init="mimetic"``, the
small-cpu recipe's): each head's W_q^T W_k is the rank-d_h factorisation of 0.7 Z + 0.7 I, so a token starts by
attending to tokens that look like it; the default ("normal") is untouched, a checkpoint's weights are never
re-drawn, and a bad value is a one-line error. Tiny seeded models."""

import math
from pathlib import Path

import pytest
import torch

from tests.script_loading import load_script
from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
from transformers_gazeflow.models.gazeflow.configuration_gazeflow import GazeFlowConfigError
from transformers_gazeflow.models.gazeflow.modeling_gazeflow_attention import GazeFlowAttention
from transformers_gazeflow.models.gazeflow.modeling_gazeflow_initialization import (
    MIMETIC_QUERY_KEY,
    init_mimetic_query_key,
)


def tiny(mode: str, seed: int = 0) -> GazeFlowModel:
    torch.manual_seed(seed)
    return GazeFlowModel(
        GazeFlowConfig.tiny(
            use_lora=False, hidden_size=32, num_attention_heads=2, num_spatial_layers=2, spatial_attention_init=mode
        )
    )


def head_products(attention: GazeFlowAttention) -> list[torch.Tensor]:
    """W_q^hT W_k^h ``[d, d]`` of every head h (the bilinear form of q . k before scaling)."""
    d_h = attention.head_dim
    return [
        (attention.q_proj.weight[h * d_h : (h + 1) * d_h].T @ attention.k_proj.weight[h * d_h : (h + 1) * d_h]).detach()
        for h in range(attention.num_heads)
    ]


def test_mimetic_heads_are_the_truncated_factorisation_of_alpha_z_plus_beta_i():
    """Drawn again from the same seed, each head's product equals the d_h-term SVD truncation of
    alpha Z + beta I: the factors reproduce the stated target exactly, not merely something similar."""
    config = GazeFlowConfig.tiny(use_lora=False, hidden_size=32, num_attention_heads=2)
    attention = GazeFlowAttention(config)
    torch.manual_seed(3)
    init_mimetic_query_key(attention)
    torch.manual_seed(3)
    alpha, beta = MIMETIC_QUERY_KEY
    width, d_h = 32, attention.head_dim
    for product in head_products(attention):
        target = alpha * torch.randn(width, width) / math.sqrt(width) + beta * torch.eye(width)
        left, singular, right_t = torch.linalg.svd(target)
        expected = left[:, :d_h] @ torch.diag(singular[:d_h]) @ right_t[:d_h]
        torch.testing.assert_close(product, expected, atol=1e-5, rtol=1e-4)
    assert torch.count_nonzero(attention.q_proj.bias) == 0 and torch.count_nonzero(attention.k_proj.bias) == 0


def test_the_recipe_setting_reaches_every_spatial_layer_and_only_them():
    normal, mimetic = tiny("normal"), tiny("mimetic")
    for layer in mimetic.condition_encoder.spatial_encoder.layers:
        for product in head_products(layer.attention):
            diagonal = product.diagonal().mean()
            off_diagonal = (product - torch.diag(product.diagonal())).abs().mean()
            assert diagonal > 0.2 and diagonal > 3 * off_diagonal  # identity-like: q . k ~ beta' x . x'
    for layer in normal.condition_encoder.spatial_encoder.layers:
        for product in head_products(layer.attention):
            assert product.diagonal().mean().abs() < 0.01  # truncated normal 0.02: q . k ~ 0
    block, mimetic_block = normal.velocity_network.blocks[0], mimetic.velocity_network.blocks[0]
    for product in head_products(mimetic_block.self_attention) + head_products(block.self_attention):
        assert product.diagonal().mean().abs() < 0.01  # the velocity network keeps the standard initialisation


def test_a_token_attends_to_its_look_alike_from_the_start():
    """Tokens of random features with one pair made equal: under mimetic initialisation the first of the pair puts
    far more weight on its twin than on any other token; under the normal one attention is near uniform."""
    torch.manual_seed(0)
    tokens = torch.randn(1, 16, 32)
    tokens[0, 9] = tokens[0, 2]
    for mode, check in (
        ("mimetic", lambda w: w[9] > 5 * w[[i for i in range(16) if i not in (2, 9)]].max()),
        ("normal", lambda w: (w - 1 / 16).abs().max() < 0.01),
    ):
        model = tiny(mode, seed=1)
        model.set_attn_implementation("eager")
        layer = model.condition_encoder.spatial_encoder.layers[0]
        _, weights = layer.attention.self_attention(layer.attention_norm(tokens), output_attentions=True)
        assert check(weights[0, :, 2].mean(0)), mode


def test_a_saved_mimetic_model_loads_its_own_weights(tmp_path):
    model = tiny("mimetic", seed=4)
    model.save_pretrained(tmp_path)
    torch.manual_seed(99)  # a different draw would show if loading re-initialised the layers
    loaded = GazeFlowModel.from_pretrained(tmp_path)
    assert loaded.config.spatial_attention_init == "mimetic"
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[name], tensor, atol=0, rtol=0, msg=name)


def test_train_py_builds_it_from_config_overrides_and_keeps_the_default_otherwise(tmp_path):
    """The small-cpu recipe's ``spatial_attention_init=mimetic`` reaches the model examples/train.py trains, and
    ``--config_overrides spatial_attention_init=normal`` takes it back; the paper's config keeps the standard
    initialisation."""
    train = load_script(Path(__file__).resolve().parents[1] / "examples" / "train.py", "gazeflow_train_mimetic")
    common = [
        "--recipe",
        "small-cpu",
        "--dataset_name",
        "synthetic",
        "--data_dir",
        str(tmp_path),
        "--output_dir",
        str(tmp_path / "out"),
    ]
    for extra, expected in (([], "mimetic"), (["--config_overrides", "spatial_attention_init=normal"], "normal")):
        torch.manual_seed(0)
        model = train.build_model(train.parse_args(common + extra))
        assert model.config.spatial_attention_init == expected
        diagonal = head_products(model.condition_encoder.spatial_encoder.layers[0].attention)[0].diagonal().mean()
        assert (diagonal > 0.2) if expected == "mimetic" else (diagonal.abs() < 0.01)
    assert GazeFlowConfig().spatial_attention_init == "normal"


def test_an_unknown_initialisation_is_a_one_line_error():
    with pytest.raises(GazeFlowConfigError, match="^GazeFlowConfig: `spatial_attention_init` must be one of") as error:
        GazeFlowConfig.tiny(spatial_attention_init="xavier")
    assert "\n" not in str(error.value)
