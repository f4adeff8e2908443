import textwrap

import pytest
import torch
from transformers import AutoModel

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel, unit_to_model

from .conftest import run_python


def tiny_model(seed: int = 0, **overrides) -> GazeFlowModel:
    torch.manual_seed(seed)
    return GazeFlowModel(GazeFlowConfig.tiny(**overrides))


def randomize_lora(model: GazeFlowModel, seed: int = 1) -> None:
    """LoRA's B matrices start at zero; give them values so LoRA changes the output."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_" in name:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.2)


def video(batch=2, frames=8, seed=0):
    return torch.randn(batch, frames, 3, 32, 32, generator=torch.Generator().manual_seed(seed))


def test_forward_returns_a_finite_loss_and_shapes():
    model = tiny_model()
    gaze = unit_to_model(torch.rand(2, 8, 2, generator=torch.Generator().manual_seed(0)))
    out = model(pixel_values_videos=video(), gaze=gaze, generator=torch.Generator().manual_seed(0))
    assert out.loss.ndim == 0 and torch.isfinite(out.loss)
    assert out.predicted_velocity.shape == (2, 8, 2) and out.target_velocity.shape == (2, 8, 2)
    assert out.flow_time.shape == (2,) and ((out.flow_time >= 0) & (out.flow_time <= 1)).all()


def test_target_is_the_ot_velocity():
    model = tiny_model(sigma_min=0.1)
    gaze = torch.full((1, 8, 2), 0.5)
    out = model(pixel_values_videos=video(1), gaze=gaze, generator=torch.Generator().manual_seed(3))
    # the example's own stream is spawned from the generator (scheduling_gazeflow.example_generators): time, then noise
    seed = int(torch.randint(2**62, (1,), generator=torch.Generator().manual_seed(3)))
    noise_generator = torch.Generator().manual_seed(seed)
    torch.rand(1, generator=noise_generator)
    noise = torch.randn(1, 8, 2, generator=noise_generator)
    assert torch.allclose(out.target_velocity, gaze - 0.9 * noise)


def test_loss_ignores_invalid_frames():
    model = tiny_model(self_conditioning_prob=0.0)
    gaze = unit_to_model(torch.rand(1, 8, 2, generator=torch.Generator().manual_seed(0)))
    mask = torch.tensor([[True] * 4 + [False] * 4])
    kwargs = dict(pixel_values_videos=video(1), valid_mask=mask)
    ref = model(gaze=gaze, generator=torch.Generator().manual_seed(5), **kwargs)
    corrupted = gaze.clone()
    corrupted[0, 4:] = float("nan")
    out = model(gaze=corrupted, generator=torch.Generator().manual_seed(5), **kwargs)
    expected = ((ref.predicted_velocity - ref.target_velocity)[0, :4] ** 2).mean() / 1.0
    assert torch.allclose(ref.loss, expected, atol=1e-6)
    assert torch.isfinite(out.loss)


def test_loss_decreases_when_overfitting_one_batch():
    model = tiny_model(use_lora=False)
    model.train()
    with torch.no_grad():
        features = model.encode_video(video(2))  # frozen encoder: train from its features, as the cache does
    gaze = unit_to_model(torch.rand(2, 8, 2, generator=torch.Generator().manual_seed(0)))
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-3)

    def evaluation_loss():
        with torch.no_grad():
            losses = [
                model(encoder_hidden_states=features, gaze=gaze, generator=torch.Generator().manual_seed(100 + i)).loss
                for i in range(8)
            ]
        return torch.stack(losses).mean().item()

    before = evaluation_loss()
    generator = torch.Generator().manual_seed(0)
    for _ in range(300):
        loss = model(encoder_hidden_states=features, gaze=gaze, generator=generator).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    after = evaluation_loss()
    # the flow-matching loss keeps a floor from its random (x_0, s) pairs, so one batch cannot be fitted to zero:
    # 300 steps take it to ~0.65x (torch 2.13 on CPU: 1.388 -> 0.904), an untrained model stays at ~1.0x
    assert after < 0.7 * before, (before, after)


def test_precomputed_encoder_states_give_the_same_loss():
    model = tiny_model()
    pixels = video(2)
    gaze = unit_to_model(torch.rand(2, 8, 2, generator=torch.Generator().manual_seed(0)))
    direct = model(pixel_values_videos=pixels, gaze=gaze, generator=torch.Generator().manual_seed(7)).loss
    with torch.no_grad():
        features = model.encode_video(pixels)
    assert features.shape == (2, 4 * 4, 32)  # 4 tubelets x (2 x 2) tokens, D = 32
    cached = model(encoder_hidden_states=features, gaze=gaze, generator=torch.Generator().manual_seed(7)).loss
    assert torch.allclose(direct, cached, atol=1e-6)


def test_frozen_encoder_trains_only_lora_and_the_velocity_network():
    model = tiny_model()
    trainable = {name for name, p in model.named_parameters() if p.requires_grad}
    encoder = {name for name in trainable if name.startswith("video_encoder.")}
    assert encoder and all("lora_" in name for name in encoder)
    assert any(name.startswith("velocity_network.") for name in trainable)
    assert any(name.startswith("condition_encoder.") for name in trainable)
    no_lora = tiny_model(use_lora=False)
    assert not any(p.requires_grad for p in no_lora.video_encoder.parameters())
    unfrozen = tiny_model(use_lora=False, freeze_encoder=False)
    assert all(p.requires_grad for p in unfrozen.video_encoder.parameters())


def test_lora_targets_only_encoder_query_and_value():
    model = tiny_model()
    lora_modules = {name.rsplit(".lora_", 1)[0] for name, _ in model.named_parameters() if "lora_" in name}
    assert len(lora_modules) == 2 * 2  # 2 encoder layers x (query, value)
    assert all(name.startswith("video_encoder.") and name.endswith(("query", "value")) for name in lora_modules)


def test_merge_lora_keeps_outputs_and_exports_a_plain_model(tmp_path):
    model = tiny_model().eval()
    randomize_lora(model)
    pixels = video(1)
    before = model.encode_video(pixels)
    model.merge_lora()
    assert not model.config.use_lora and not any("lora_" in n for n, _ in model.named_parameters())
    assert torch.allclose(model.encode_video(pixels), before, atol=1e-5)
    model.save_pretrained(tmp_path)
    reloaded = GazeFlowModel.from_pretrained(tmp_path).eval()
    assert torch.allclose(reloaded.encode_video(pixels), before, atol=1e-5)
    with pytest.raises(ValueError, match="no LoRA"):
        reloaded.merge_lora()


def test_save_load_is_bit_identical_with_lora(tmp_path):
    model = tiny_model().eval()
    randomize_lora(model)
    pixels = video(1, frames=12)
    # blend: windows batched; coherent windows run one at a time, at batch shapes whose CPU BLAS kernels round
    # differently (~3e-8) for the loaded weights, which stay views into the safetensors file at unaligned offsets
    first = model.generate(pixel_values_videos=pixels, generator=torch.Generator().manual_seed(0), window_mode="blend")
    coherent = model.generate(pixel_values_videos=pixels, generator=torch.Generator().manual_seed(0))
    model.save_pretrained(tmp_path)
    loaded = AutoModel.from_pretrained(tmp_path).eval()
    assert isinstance(loaded, GazeFlowModel)
    second = loaded.generate(
        pixel_values_videos=pixels, generator=torch.Generator().manual_seed(0), window_mode="blend"
    )
    assert torch.equal(first.trajectories, second.trajectories)
    again = loaded.generate(pixel_values_videos=pixels, generator=torch.Generator().manual_seed(0))
    assert torch.allclose(coherent.trajectories, again.trajectories, atol=1e-6, rtol=0)


def test_automodel_works_in_a_fresh_process_after_the_import(tmp_path):
    tiny_model().save_pretrained(tmp_path)
    script = textwrap.dedent(f"""
        import transformers_gazeflow
        from transformers import AutoConfig, AutoModel
        model = AutoModel.from_pretrained({str(tmp_path)!r})
        assert type(model).__name__ == "GazeFlowModel", type(model)
        assert AutoConfig.from_pretrained({str(tmp_path)!r}).model_type == "gazeflow"
        print("ok")
    """)
    stdout = run_python(script, env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    assert stdout.strip().endswith("ok"), stdout


def test_load_encoder_weights_from_a_vjepa2_checkpoint(tmp_path):
    from transformers import VJEPA2Model

    config = GazeFlowConfig.tiny(use_lora=False)
    torch.manual_seed(42)
    vjepa2 = VJEPA2Model(config.encoder_config)
    vjepa2.save_pretrained(tmp_path)
    model = tiny_model(use_lora=False)
    model.load_encoder_weights(str(tmp_path))
    for key, value in vjepa2.encoder.state_dict().items():
        assert torch.equal(model.video_encoder.vjepa2.state_dict()[key], value), key
    pixels = video(1)
    with torch.no_grad():
        expected = vjepa2(pixel_values_videos=pixels, skip_predictor=True).last_hidden_state
    assert torch.allclose(model.encode_video(pixels), expected, atol=1e-5)
    model.add_lora()
    assert model.config.use_lora and model.video_encoder.has_lora
    with pytest.raises(ValueError, match="before adding LoRA"):
        model.load_encoder_weights(str(tmp_path))


def test_parameter_counts_match_the_paper_budget(capsys):
    """Paper Appendix F.2 / docs/specs/model.md: blocks 7.9M, spatial encoder 1.6M, W_proj + task bank ~0.5M,
    velocity network ~10.4M, LoRA on the encoder's 24 layers 1.57M. Built on the meta device (nothing downloaded)."""
    with torch.device("meta"):
        model = GazeFlowModel(GazeFlowConfig())

    def count(module):
        return sum(p.numel() for p in module.parameters())

    blocks = count(model.velocity_network.blocks)
    spatial = count(model.condition_encoder.spatial_encoder)
    projection_and_bank = count(model.condition_encoder.visual_projection) + count(model.condition_encoder.task_bank)
    velocity_network = count(model.velocity_network) + count(model.condition_encoder)
    lora = sum(p.numel() for name, p in model.named_parameters() if "lora_" in name)
    with capsys.disabled():
        print(
            f"\n[parameter counts] blocks {blocks / 1e6:.3f}M, spatial encoder {spatial / 1e6:.3f}M, "
            f"W_proj + task bank {projection_and_bank / 1e6:.3f}M, velocity network {velocity_network / 1e6:.3f}M, "
            f"LoRA {lora / 1e6:.3f}M"
        )
    assert abs(blocks - 7.90e6) <= 0.03 * 7.90e6
    assert abs(spatial - 1.58e6) <= 0.03 * 1.58e6
    assert abs(projection_and_bank - 0.53e6) <= 0.03 * 0.53e6
    assert abs(velocity_network - 10.4e6) <= 0.05 * 10.4e6
    assert lora == 1_572_864


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(pixel_values_videos=torch.randn(8, 3, 32, 32)), "5 dimensions"),
        (dict(pixel_values_videos=torch.randn(1, 8, 3, 24, 32)), "3 x 32 x 32"),
        (dict(pixel_values_videos=torch.zeros(1, 8, 3, 32, 32, dtype=torch.uint8)), "float"),
    ],
)
def test_bad_pixel_values_are_named(kwargs, message):
    model = tiny_model()
    with pytest.raises(ValueError, match=message):
        model(gaze=torch.zeros(1, 8, 2), **kwargs)


def test_bad_training_targets_are_named():
    model = tiny_model()
    pixels = video(1)
    with pytest.raises(ValueError, match=r"`gaze` must be a tensor \[batch, frames, 2\]"):
        model(pixel_values_videos=pixels, gaze=torch.zeros(1, 8, 3))
    with pytest.raises(ValueError, match=r"model coordinates \[-1, 1\]"):
        model(pixel_values_videos=pixels, gaze=torch.full((1, 8, 2), 1.5))
    nan_gaze = torch.zeros(1, 8, 2)
    nan_gaze[0, 3, 1] = float("nan")
    with pytest.raises(ValueError, match=r"non-finite value at \(batch, frame\) \(0, 3\)"):
        model(pixel_values_videos=pixels, gaze=nan_gaze)
    with pytest.raises(ValueError, match="valid_mask"):
        model(pixel_values_videos=pixels, gaze=torch.zeros(1, 8, 2), valid_mask=torch.ones(1, 7, dtype=torch.bool))
    with pytest.raises(ValueError, match="gaze"):
        model(pixel_values_videos=pixels)
    with pytest.raises(ValueError, match="encoder_hidden_states"):
        model(encoder_hidden_states=torch.randn(1, 15, 32), gaze=torch.zeros(1, 8, 2))
    with pytest.raises(ValueError, match="tubelet_size"):
        model(encoder_hidden_states=torch.randn(1, 16, 32), gaze=torch.zeros(1, 7, 2))


def test_gradient_checkpointing_gives_the_same_gradients():
    model = tiny_model(use_lora=False, freeze_encoder=False)
    model.train()
    pixels = video(2)
    gaze = unit_to_model(torch.rand(2, 8, 2, generator=torch.Generator().manual_seed(0)))

    def gradients():
        model.zero_grad()
        model(pixel_values_videos=pixels, gaze=gaze, generator=torch.Generator().manual_seed(0)).loss.backward()
        return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}

    plain = gradients()
    enable = getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable
    enable()
    checkpointed = gradients()
    assert plain.keys() == checkpointed.keys() and len(plain) > 100
    for name in plain:
        assert torch.allclose(plain[name], checkpointed[name], atol=1e-6), name
