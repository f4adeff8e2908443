"""GazeFlowConfig: the paper's defaults, typed fields checked on construction and on assignment (one-line errors
naming the field), the encoder sub-config, round trips, old config files, and the checks of transformers'
``ConfigTester`` (tests/test_configuration_common.py in the transformers repository)."""

import copy
import json
import tarfile
from pathlib import Path

import pytest
from huggingface_hub.errors import StrictDataclassError
from transformers import AutoConfig, PreTrainedConfig, VJEPA2Config

from transformers_gazeflow import GazeFlowConfig
from transformers_gazeflow.hub.model_folders import default_model_path
from transformers_gazeflow.models.gazeflow.configuration_gazeflow import GazeFlowConfigError

FIXTURES = Path(__file__).parent / "fixtures"


def test_defaults_are_the_papers():
    config = GazeFlowConfig()
    assert config.model_type == "gazeflow"
    expected = dict(
        hidden_size=256,
        num_hidden_layers=6,
        num_attention_heads=8,
        intermediate_size=1024,
        num_spatial_layers=2,
        num_task_queries=4,
        task_gate_init=-2.0,
        rope_theta=10000.0,
        num_frames=64,
        window_stride=32,
        sigma_min=1e-3,
        self_conditioning_prob=0.5,
        num_samples=30,
        num_steps=5,
        solver="euler",
        heatmap_sigma=25.0,
        use_lora=True,
        lora_r=16,
        lora_alpha=32,
        lora_dropout=0.05,
        lora_target_modules=["query", "value"],
        freeze_encoder=True,
        causal=False,
    )
    for name, value in expected.items():
        assert getattr(config, name) == value, name
    encoder = config.encoder_config
    assert isinstance(encoder, VJEPA2Config)
    assert (
        encoder.hidden_size,
        encoder.num_hidden_layers,
        encoder.patch_size,
        encoder.tubelet_size,
        encoder.crop_size,
    ) == (1024, 24, 16, 2, 256)
    assert config.tokens_per_frame == 256 and config.head_dim == 32 and config.image_size == 256
    assert (config.token_grid_size, config.tubelet_size, config.frames_per_encoder_group) == (16, 2, 2)
    assert GazeFlowConfig(causal=True).frames_per_encoder_group == 1


def test_round_trip_keeps_the_nested_encoder_config(tmp_path):
    config = GazeFlowConfig.tiny(num_task_queries=3, solver="heun", lora_target_modules=["query"])
    config.save_pretrained(tmp_path)
    loaded = AutoConfig.from_pretrained(tmp_path)
    assert isinstance(loaded, GazeFlowConfig)
    assert isinstance(loaded.encoder_config, VJEPA2Config)
    assert loaded.encoder_config.crop_size == 32 and loaded.encoder_config.hidden_size == 32
    assert (loaded.num_task_queries, loaded.solver, loaded.lora_target_modules) == (3, "heun", ["query"])
    assert loaded.to_diff_dict() == config.to_diff_dict()


# ------------------------------------------------------------------------------------------------- bad values
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
        (dict(lora_target_modules=["query", 3]), "lora_target_modules"),
        (dict(freeze_encoder="yes"), "freeze_encoder"),
        (dict(hidden_size=36, num_attention_heads=12), "num_attention_heads"),
        (dict(hidden_size=18, num_attention_heads=1), "hidden_size"),
        (dict(rope_theta=-1.0), "rope_theta"),
        (dict(lora_alpha=0), "lora_alpha"),
        (dict(initializer_range=0.0), "initializer_range"),
        (dict(diffusion_timesteps=0), "diffusion_timesteps"),
        (dict(causal_encoder_frames=3), "causal_encoder_frames"),
        (dict(objective="regression", num_samples=4), "num_samples"),
        (dict(hidden_size=True), "hidden_size"),
        (dict(task_gate_init="-2"), "task_gate_init"),
    ],
)
def test_bad_values_name_the_field_in_one_line(overrides, field):
    with pytest.raises(GazeFlowConfigError) as error:
        GazeFlowConfig.tiny(**overrides)
    message = str(error.value)
    assert message.startswith(f"GazeFlowConfig: `{field}") and "must be" in message and "\n" not in message, message
    assert isinstance(error.value, ValueError) and isinstance(error.value, StrictDataclassError)


def test_the_message_says_what_was_expected_and_what_came():
    cases = {
        "hidden_size": ("64", "GazeFlowConfig: `hidden_size` must be an int >= 1, got str '64'"),
        "solver": ("rk4", "GazeFlowConfig: `solver` must be one of ('euler', 'heun', 'midpoint'), got 'rk4'"),
        "sigma_min": (2, "GazeFlowConfig: `sigma_min` must be a number in (0, 1), got 2"),
        "use_lora": (1, "GazeFlowConfig: `use_lora` must be a bool, got int 1"),
    }
    for field, (value, message) in cases.items():
        with pytest.raises(GazeFlowConfigError, match=None) as error:
            GazeFlowConfig.tiny(**{field: value})
        assert str(error.value) == message
        assert (error.value.field, error.value.problem) == (field, message.split(f"`{field}` ", 1)[1])


def test_numbers_accept_ints_as_json_writes_them():
    config = GazeFlowConfig.tiny(rope_theta=10000, sigma_min=1e-3, heatmap_sigma=25, lora_alpha=8, lora_dropout=0)
    assert (config.rope_theta, config.heatmap_sigma, config.lora_dropout) == (10000, 25, 0)


def test_assignment_is_checked_and_a_refused_value_is_not_kept():
    config = GazeFlowConfig.tiny()
    for field, value in [
        ("hidden_size", "64"),
        ("hidden_size", 0),
        ("solver", "rk4"),
        ("causal", "yes"),
        ("lora_dropout", 1.0),
        ("encoder_config", 42),
        ("lora_target_modules", []),
    ]:
        before = getattr(config, field)
        with pytest.raises(GazeFlowConfigError, match=f"^GazeFlowConfig: `{field}` must be "):
            setattr(config, field, value)
        assert getattr(config, field) == before
    config.num_steps = 7
    config.solver = "midpoint"
    assert (config.num_steps, config.solver) == (7, "midpoint")


def test_checks_across_fields_run_again_before_saving(tmp_path):
    """transformers checks each field on assignment and the ``validate_*`` checks at construction and in
    ``save_pretrained``: a config made inconsistent by assignments is refused before it is written."""
    config = GazeFlowConfig.tiny()
    config.window_stride = 20  # an int >= 1: accepted on assignment; > num_frames=8 is caught on save
    with pytest.raises(GazeFlowConfigError, match=r"^GazeFlowConfig: `window_stride` must be <= num_frames=8"):
        config.save_pretrained(tmp_path)
    assert not (tmp_path / "config.json").exists()
    with pytest.raises(GazeFlowConfigError, match="window_stride"):
        config.validate()
    config.window_stride = 8
    config.validate()


# --------------------------------------------------------------------------------------------- the encoder
def test_encoder_config_accepts_a_dict_and_rejects_other_types():
    config = GazeFlowConfig(encoder_config={"model_type": "vjepa2", "hidden_size": 64, "num_attention_heads": 4})
    assert isinstance(config.encoder_config, VJEPA2Config)
    assert (config.encoder_config.hidden_size, config.encoder_config.num_attention_heads) == (64, 4)
    assert config.encoder_config.crop_size == VJEPA2Config().crop_size  # the rest: V-JEPA 2's defaults
    assert GazeFlowConfig(encoder_config=None).encoder_config.to_dict() == VJEPA2Config().to_dict()
    with pytest.raises(ValueError, match="encoder_config"):
        GazeFlowConfig(encoder_config=42)


@pytest.mark.parametrize(
    "encoder,message",
    [
        ({"num_hidden_layers": 2.5}, "GazeFlowConfig: `encoder_config.num_hidden_layers` must be int, got float 2.5"),
        ({"model_type": "bert"}, "GazeFlowConfig: `encoder_config.model_type` must be 'vjepa2'"),
        (
            {"crop_size": 40, "patch_size": 16},
            "GazeFlowConfig: `encoder_config.crop_size` must be a multiple of patch_size=16, got 40",
        ),
        ({"tubelet_size": 3}, "GazeFlowConfig: `num_frames` must be a multiple of the encoder's tubelet_size=3"),
    ],
)
def test_bad_encoder_values_name_the_nested_field(encoder, message):
    with pytest.raises(GazeFlowConfigError) as error:
        GazeFlowConfig(encoder_config=encoder)
    assert str(error.value).startswith(message) and "\n" not in str(error.value), str(error.value)


def test_sub_configs_and_attention_implementation_reach_the_encoder():
    assert GazeFlowConfig.sub_configs == {"encoder_config": VJEPA2Config}
    config = GazeFlowConfig.tiny()
    config._attn_implementation = "eager"
    assert config.encoder_config._attn_implementation == "eager"


def test_num_samples_none_is_the_papers_k_or_one_for_regression():
    assert GazeFlowConfig(num_samples=None).num_samples == 30
    assert GazeFlowConfig(objective="regression").num_samples == 1
    assert GazeFlowConfig.tiny(objective="regression").num_samples == 1


# ------------------------------------------------------------------------------------------------ round trips
def test_round_trips_keep_every_value(tmp_path):
    config = GazeFlowConfig.tiny(num_task_queries=3, solver="heun", causal=True, grounding_loss_weight=0.5)
    config.save_pretrained(tmp_path / "first")
    loaded = GazeFlowConfig.from_pretrained(tmp_path / "first")
    assert loaded.to_dict() == config.to_dict() and loaded.to_diff_dict() == config.to_diff_dict()
    loaded.save_pretrained(tmp_path / "second")  # a fixed point: the second trip changes nothing
    assert GazeFlowConfig.from_pretrained(tmp_path / "second") == loaded
    assert (tmp_path / "second" / "config.json").read_text() == (tmp_path / "first" / "config.json").read_text()

    assert copy.deepcopy(config) == config and copy.deepcopy(config).encoder_config is not config.encoder_config
    again = GazeFlowConfig(**config.to_dict())
    assert again.to_dict() == config.to_dict() and isinstance(again.encoder_config, VJEPA2Config)
    assert GazeFlowConfig.from_dict(config.to_dict()).to_dict() == config.to_dict()
    assert GazeFlowConfig.from_json_file(tmp_path / "first" / "config.json").to_dict() == config.to_dict()
    assert json.loads(config.to_json_string(use_diff=False)) == json.loads(json.dumps(config.to_dict()))


def _config_json_from_the_60e8cbe_folder() -> dict:
    with tarfile.open(FIXTURES / "remote_code_folder_60e8cbe.tar.gz") as archive:
        return json.load(archive.extractfile("remote_code_folder_60e8cbe/config.json"))


def test_config_files_written_by_earlier_versions_load(tmp_path):
    bundled = GazeFlowConfig.from_pretrained(default_model_path())
    assert (bundled.hidden_size, bundled.num_frames, bundled.image_size, bundled.grounding_loss_weight) == (
        64,
        16,
        64,
        1.0,
    )
    old = _config_json_from_the_60e8cbe_folder()  # saved by the hand-written config (full encoder dict, auto_map)
    config = GazeFlowConfig(**old)
    assert (config.hidden_size, config.num_frames, config.encoder_config.crop_size) == (32, 8, 32)
    assert config.auto_map["AutoConfig"] == "configuration_gazeflow.GazeFlowConfig"  # an extra key, kept
    (tmp_path / "config.json").write_text(json.dumps({**old, "num_samples": None, "a_future_setting": [1, 2]}))
    loaded = AutoConfig.from_pretrained(tmp_path)
    assert isinstance(loaded, GazeFlowConfig) and loaded.num_samples == 30 and loaded.a_future_setting == [1, 2]
    for name in ("hidden_size", "num_hidden_layers", "lora_target_modules", "window_stride"):
        assert getattr(loaded, name) == old[name], name


# ----------------------------------------------------------------- the checks of transformers' ConfigTester
CONFIG_TESTER_INPUTS = dict(
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    num_frames=8,
    window_stride=4,
    num_samples=4,
)


def test_config_tester_common_properties():
    """``create_and_test_config_common_properties``: the common sizes read, set and pass at init."""
    config = GazeFlowConfig(**CONFIG_TESTER_INPUTS)
    for index, name in enumerate(("hidden_size", "num_attention_heads", "num_hidden_layers"), start=2):
        assert hasattr(config, name)
        setattr(config, name, index)
        assert getattr(config, name) == index
    assert GazeFlowConfig(num_hidden_layers=3).num_hidden_layers == 3


def test_config_tester_json_string_file_and_save_pretrained(tmp_path):
    """``create_and_test_config_to_json_string`` / ``_to_json_file`` / ``_from_and_save_pretrained`` /
    ``_from_and_save_pretrained_subfolder``."""
    config = GazeFlowConfig(**CONFIG_TESTER_INPUTS)
    written = json.loads(config.to_json_string())
    assert all(written[key] == value for key, value in CONFIG_TESTER_INPUTS.items())
    config.to_json_file(tmp_path / "config.json")
    assert GazeFlowConfig.from_json_file(tmp_path / "config.json").to_dict() == config.to_dict()
    config.save_pretrained(tmp_path / "saved")
    assert GazeFlowConfig.from_pretrained(tmp_path / "saved").to_dict() == config.to_dict()
    with pytest.raises(OSError):
        GazeFlowConfig.from_pretrained(tmp_path / "not_there")
    config.save_pretrained(tmp_path / "repo" / "sub")
    assert GazeFlowConfig.from_pretrained(tmp_path / "repo", subfolder="sub").to_dict() == config.to_dict()


def test_config_tester_composite_sub_config(tmp_path):
    """``create_and_test_config_from_and_save_pretrained_composite``: the sub-config from the saved file is the
    encoder's config, and it saves and loads by itself. (ConfigTester reads it with ``VJEPA2Config.from_pretrained``
    on the composite folder, which needs a ``base_config_key`` that VJEPA2Config, a stand-alone model's config, does
    not declare; the dict under ``encoder_config`` is read here instead.)"""
    config = GazeFlowConfig.tiny()
    config.save_pretrained(tmp_path)
    loaded = GazeFlowConfig.from_pretrained(tmp_path)
    for key, sub_class in loaded.sub_configs.items():
        saved = json.loads((tmp_path / "config.json").read_text())[key]
        sub_config = sub_class(**{k: v for k, v in saved.items() if k != "model_type"})
        as_loaded, expected = sub_config.to_dict(), config.to_dict()[key]
        as_loaded.pop("transformers_version")  # never part of a sub-config's dict
        assert as_loaded == expected
        assert isinstance(sub_config, type(getattr(loaded, key)))
        sub_config.save_pretrained(tmp_path / key)
        assert sub_class.from_pretrained(tmp_path / key).to_dict() == sub_config.to_dict()


def test_config_tester_num_labels_init_without_params_and_common_kwargs():
    """``create_and_test_config_with_num_labels``, ``check_config_can_be_init_without_params`` and
    ``check_config_arguments_init`` (the latter skips composite configs in transformers; the fields every
    PreTrainedConfig has are checked here)."""
    config = GazeFlowConfig(**CONFIG_TESTER_INPUTS, num_labels=5)
    assert len(config.id2label) == 5 and len(config.label2id) == 5
    config.num_labels = 3
    assert len(config.id2label) == 3 and len(config.label2id) == 3
    assert isinstance(GazeFlowConfig(), PreTrainedConfig)
    common = dict(
        return_dict=False,
        output_hidden_states=True,
        chunk_size_feed_forward=5,
        architectures=["GazeFlowModel"],
        problem_type="regression",
        id2label={0: "label"},
        label2id={"label": 0},
    )
    config = GazeFlowConfig(**common, dtype="float16")
    assert all(getattr(config, key) == value for key, value in common.items())
    assert str(config.dtype) == "torch.float16"
