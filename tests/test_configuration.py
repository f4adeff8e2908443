import pytest
from transformers import AutoConfig, VJEPA2Config

from transformers_gazeflow import GazeFlowConfig


def test_defaults_are_the_papers():
    config = GazeFlowConfig()
    assert config.model_type == "gazeflow"
    expected = dict(
        hidden_size=256, num_hidden_layers=6, num_attention_heads=8, intermediate_size=1024, num_spatial_layers=2,
        num_task_queries=4, task_gate_init=-2.0, rope_theta=10000.0, num_frames=64, window_stride=32,
        sigma_min=1e-3, self_conditioning_prob=0.5, num_samples=30, num_steps=5, solver="euler",
        heatmap_sigma=25.0, use_lora=True, lora_r=16, lora_alpha=32, lora_dropout=0.05,
        lora_target_modules=["query", "value"], freeze_encoder=True, causal=False,
    )
    for name, value in expected.items():
        assert getattr(config, name) == value, name
    encoder = config.encoder_config
    assert isinstance(encoder, VJEPA2Config)
    assert (encoder.hidden_size, encoder.num_hidden_layers, encoder.patch_size, encoder.tubelet_size,
            encoder.crop_size) == (1024, 24, 16, 2, 256)
    assert config.tokens_per_frame == 256 and config.head_dim == 32 and config.image_size == 256


def test_round_trip_keeps_the_nested_encoder_config(tmp_path):
    config = GazeFlowConfig.tiny(num_task_queries=3, solver="heun", lora_target_modules=["query"])
    config.save_pretrained(tmp_path)
    loaded = AutoConfig.from_pretrained(tmp_path)
    assert isinstance(loaded, GazeFlowConfig)
    assert isinstance(loaded.encoder_config, VJEPA2Config)
    assert loaded.encoder_config.crop_size == 32 and loaded.encoder_config.hidden_size == 32
    assert (loaded.num_task_queries, loaded.solver, loaded.lora_target_modules) == (3, "heun", ["query"])
    assert loaded.to_diff_dict() == config.to_diff_dict()


@pytest.mark.parametrize(
    "overrides,field",
    [
        (dict(hidden_size=30, num_attention_heads=4), "hidden_size"),
        (dict(num_hidden_layers=0), "num_hidden_layers"),
        (dict(num_task_queries=-1), "num_task_queries"),
        (dict(window_stride=9), "window_stride"),
        (dict(num_frames=7), "num_frames"),
        (dict(sigma_min=0.0), "sigma_min"),
        (dict(self_conditioning_prob=1.5), "self_conditioning_prob"),
        (dict(solver="rk4"), "solver"),
        (dict(window_mode="average"), "window_mode"),
        (dict(num_samples=0), "num_samples"),
        (dict(num_steps=0), "num_steps"),
        (dict(heatmap_sigma=0.0), "heatmap_sigma"),
        (dict(lora_r=0), "lora_r"),
        (dict(lora_dropout=1.0), "lora_dropout"),
        (dict(lora_target_modules=[]), "lora_target_modules"),
        (dict(freeze_encoder="yes"), "freeze_encoder"),
        (dict(hidden_size=36, num_attention_heads=12), "num_attention_heads"),
    ],
)
def test_bad_values_name_the_field(overrides, field):
    with pytest.raises(ValueError, match=field):
        GazeFlowConfig.tiny(**overrides)


def test_encoder_config_accepts_a_dict_and_rejects_other_types():
    config = GazeFlowConfig(encoder_config={"model_type": "vjepa2", "hidden_size": 64, "num_attention_heads": 4})
    assert config.encoder_config.hidden_size == 64
    with pytest.raises(ValueError, match="encoder_config"):
        GazeFlowConfig(encoder_config=42)
