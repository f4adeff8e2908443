"""GazeFlow against the contracts of a transformers model, as transformers' own common tests (``ModelTesterMixin``,
``ConfigTester``) state them, written for this model: the attention interface reaches every attention, per-layer
hidden states and attention weights come back, eager and SDPA agree, gradient checkpointing trains both ways, LoRA
adapters a checkpoint lacks start as no change, missing weights initialise like a fresh model, outputs do not depend
on batch neighbours, and the velocity step and the encoder export with ``torch.export``. Tiny seeded models."""

import copy
import json
import warnings

import pytest
import torch
from torch.export import Dim, export
from transformers import AttentionInterface, PreTrainedModel, VJEPA2Config
from transformers.models.vjepa2.modeling_vjepa2 import VJEPA2RopeAttention

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel, unit_to_model
from transformers_gazeflow.models.gazeflow.modeling_gazeflow_attention import GazeFlowAttention
from transformers_gazeflow.models.gazeflow.modeling_gazeflow_checks import check_training_targets

LAYERS = dict(num_hidden_layers=2, encoder_layers=2, spatial_layers=1)  # GazeFlowConfig.tiny()
HEADS, FRAMES, TOKENS, WIDTH, QUERIES = 4, 8, 4, 32, 2  # tiny: H, T, N (2 x 2 patches), d, M


def tiny(seed: int = 0, **overrides) -> GazeFlowModel:
    torch.manual_seed(seed)
    return GazeFlowModel(GazeFlowConfig.tiny(**overrides))


def randomize_lora(model: GazeFlowModel, seed: int = 1) -> None:
    """LoRA's B matrices start at zero; give them values so LoRA changes the output."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_" in name:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.2)


def clips(batch: int = 2, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    pixels = torch.randn(batch, FRAMES, 3, 32, 32, generator=generator)
    gaze = unit_to_model(torch.rand(batch, FRAMES, 2, generator=generator))
    return pixels, gaze


def loss_inputs(batch: int = 2, seed: int = 0, **kwargs) -> dict:
    pixels, gaze = clips(batch, seed)
    return dict(pixel_values_videos=pixels, gaze=gaze, generator=torch.Generator().manual_seed(7), **kwargs)


def gaze_state(batch: int, samples: int, seed: int = 3) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    sample = torch.randn(batch, samples, FRAMES, 2, generator=generator)
    flow_time = torch.rand(batch, samples, generator=generator)
    self_condition = torch.randn(batch, samples, FRAMES, 2, generator=generator).clamp(-1, 1)
    return sample, flow_time, self_condition


def attention_modules(model: GazeFlowModel) -> set[int]:
    return {id(m) for m in model.modules() if isinstance(m, (GazeFlowAttention, VJEPA2RopeAttention))}


# ---------------------------------------------------------------------------------------------------- interface
def test_the_attention_implementation_reaches_every_attention_of_the_model():
    """A kernel registered in transformers' AttentionInterface is what every attention runs (V-JEPA 2 encoder,
    spatial encoder, task bank, the velocity network's self / visual / task attention), with the same result."""
    called: set[int] = set()
    sdpa = AttentionInterface._global_mapping["sdpa"]

    def spy(module, *args, **kwargs):
        called.add(id(module))
        return sdpa(module, *args, **kwargs)

    AttentionInterface.register("gazeflow_contract_spy", spy)
    model = tiny().eval()
    reference = model(**loss_inputs()).loss
    model.set_attn_implementation("gazeflow_contract_spy")
    assert model.config.encoder_config._attn_implementation == "gazeflow_contract_spy"
    with torch.no_grad():
        spied = model(**loss_inputs()).loss
    assert called == attention_modules(model) and len(called) == 2 + 1 + 1 + 2 * 3
    assert torch.allclose(spied, reference, atol=1e-6)


def test_set_attn_implementation_and_from_pretrained_switch_the_nested_encoder(tmp_path, caplog):
    model = tiny()
    assert (model.config._attn_implementation, model.config.encoder_config._attn_implementation) == ("sdpa", "sdpa")
    assert model.video_encoder.config is model.config.encoder_config
    with caplog.at_level("WARNING"):
        model.set_attn_implementation("eager")
    assert "without finding the associated sub-model" not in caplog.text
    assert (model.config._attn_implementation, model.config.encoder_config._attn_implementation) == ("eager", "eager")
    tiny().save_pretrained(tmp_path)
    loaded = GazeFlowModel.from_pretrained(tmp_path, attn_implementation="eager")
    assert loaded.config.encoder_config._attn_implementation == "eager"
    config = GazeFlowConfig.tiny()
    config._attn_implementation = "eager"
    assert GazeFlowModel(config).video_encoder.config._attn_implementation == "eager"


def test_flex_attention_is_accepted_for_the_model_and_its_encoder():
    model = tiny()
    model.set_attn_implementation("flex_attention")
    assert (model.config._attn_implementation, model.config.encoder_config._attn_implementation) == (
        "flex_attention",
        "flex_attention",
    )
    assert (
        GazeFlowModel._from_config(
            GazeFlowConfig.tiny(), attn_implementation="flex_attention"
        ).video_encoder.config._attn_implementation
        == "flex_attention"
    )


@pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="flex attention compiles a kernel per shape (minutes on 2 CPU cores; torch 2.13's CPU "
    "kernel also crashes on score masks): run where a GPU is",
)
@pytest.mark.parametrize("overrides", [{}, dict(causal=True)], ids=["bidirectional", "causal"])
def test_flex_attention_matches_sdpa_on_a_gpu(overrides):
    sdpa = tiny(**overrides).eval().cuda()
    flex = copy.deepcopy(sdpa)
    flex.set_attn_implementation("flex_attention")
    inputs = {k: v.cuda() if torch.is_tensor(v) else v for k, v in loss_inputs(output_hidden_states=True).items()}
    with torch.no_grad():
        expected, actual = sdpa(**inputs), flex(**inputs)
    torch.testing.assert_close(actual.predicted_velocity, expected.predicted_velocity, atol=1e-4, rtol=1e-4)
    for got, want in zip(actual.hidden_states, expected.hidden_states, strict=True):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("overrides", [{}, dict(causal=True)], ids=["bidirectional", "causal"])
def test_eager_matches_sdpa_in_fp32(overrides):
    """Loss, prediction and every hidden state agree to transformers' fp32 tolerance (atol 1e-6, rtol 1e-4); the
    causal variant's masks read alike in both kernels."""
    sdpa = tiny(**overrides).eval()
    eager = copy.deepcopy(sdpa)
    eager.set_attn_implementation("eager")
    with torch.no_grad():
        expected = sdpa(**loss_inputs(output_hidden_states=True))
        actual = eager(**loss_inputs(output_hidden_states=True))
    for name in ("loss", "predicted_velocity"):
        torch.testing.assert_close(actual[name], expected[name], atol=1e-6, rtol=1e-4)
    for name in ("encoder_hidden_states", "spatial_hidden_states", "hidden_states"):
        for got, want in zip(actual[name], expected[name], strict=True):
            torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-4)


def test_eager_matches_sdpa_in_bf16():
    """bf16: encoder tokens and one velocity call agree to 2e-2 (transformers' CPU bf16 check uses 1e-2 on its
    outputs; here the bf16 rounding of the inputs, 2^-8 relative, goes through two stacked networks)."""
    sdpa = tiny(use_lora=False).eval().to(torch.bfloat16)
    eager = copy.deepcopy(sdpa)
    eager.set_attn_implementation("eager")
    pixels = clips(2)[0].to(torch.bfloat16)
    sample, flow_time, self_condition = (t.to(torch.bfloat16) for t in gaze_state(2, 3))
    with torch.no_grad():
        tokens = [model.encode_video(pixels) for model in (sdpa, eager)]
        velocities = [
            model.velocity(sample, flow_time, model.build_condition(tokens[0], FRAMES), self_condition)
            for model in (sdpa, eager)
        ]
    assert tokens[0].dtype == velocities[0].dtype == torch.bfloat16
    torch.testing.assert_close(tokens[1], tokens[0], atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(velocities[1], velocities[0], atol=2e-2, rtol=2e-2)
    assert not torch.equal(velocities[1], velocities[0])  # two kernels really ran


# ---------------------------------------------------------------------------------------------------- outputs
@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
def test_output_attentions_returns_every_layer_with_rows_that_sum_to_one(causal):
    model = tiny(causal=causal, attn_implementation="eager").eval()
    with torch.no_grad():
        out = model(**loss_inputs(output_attentions=True))
    groups = FRAMES if causal else FRAMES // 2
    windows = 2 * FRAMES if causal else 2  # B * T causal encoder windows (one per frame), else B clips
    encoder_tokens = TOKENS if causal else groups * TOKENS
    expected = {
        "encoder_attentions": (LAYERS["encoder_layers"], (windows, 2, encoder_tokens, encoder_tokens)),
        "spatial_attentions": (LAYERS["spatial_layers"], (2 * groups, HEADS, TOKENS, TOKENS)),
        "attentions": (LAYERS["num_hidden_layers"], (2, HEADS, FRAMES, FRAMES)),
        "visual_cross_attentions": (LAYERS["num_hidden_layers"], (2, HEADS, FRAMES, TOKENS)),
        "task_cross_attentions": (LAYERS["num_hidden_layers"], (2, HEADS, FRAMES, QUERIES + 1)),
    }
    for name, (count, shape) in expected.items():
        weights = out[name]
        assert len(weights) == count and all(w.shape == shape for w in weights), name
        for w in weights:
            torch.testing.assert_close(w.sum(-1), torch.ones(w.shape[:-1]), atol=1e-5, rtol=0)
    bank = out.task_bank_attentions
    assert bank.shape == ((2, HEADS, groups * QUERIES, groups) if causal else (2, HEADS, QUERIES, groups))
    torch.testing.assert_close(bank.sum(-1), torch.ones(bank.shape[:-1]), atol=1e-5, rtol=0)
    if causal:  # frame t reads frames <= t; bank row block g reads summaries <= g
        future = torch.ones(FRAMES, FRAMES, dtype=torch.bool).triu(1)
        assert all((w[..., future] == 0).all() and (w[..., ~future] > 0).all() for w in out.attentions)
        later = torch.arange(groups)[None, :] > torch.arange(groups).repeat_interleave(QUERIES)[:, None]
        assert (bank[..., later] == 0).all() and (bank[..., ~later] > 0).all()
    assert out.hidden_states is None and out.encoder_hidden_states is None


def test_kernels_without_weights_give_none_entries_and_say_so(caplog):
    import logging

    logging.Logger.warning_once.cache_clear()  # the warning is logged once per process: an earlier test may have
    model = tiny().eval()  # sdpa
    with torch.no_grad(), caplog.at_level("WARNING"):
        out = model(**loss_inputs(output_attentions=True))
    assert len(out.attentions) == LAYERS["num_hidden_layers"] and all(w is None for w in out.attentions)
    assert "attn_implementation='eager'" in caplog.text


def test_output_flags_also_come_from_the_config():
    config = GazeFlowConfig.tiny(attn_implementation="eager")
    config.output_attentions = True
    config.output_hidden_states = True
    torch.manual_seed(0)
    model = GazeFlowModel(config).eval()
    with torch.no_grad():
        out = model(**loss_inputs())
        plain = model(**loss_inputs(output_attentions=False, output_hidden_states=False))
    assert len(out.attentions) == 2 and len(out.hidden_states) == 3 and len(out.encoder_hidden_states) == 3
    assert plain.attentions is None and plain.hidden_states is None
    assert torch.equal(out.loss, plain.loss)
    # as transformers' tuple outputs: the hidden-state fields add exactly three entries (encoder, spatial, velocity)
    with torch.no_grad():
        attentions_only = model(**loss_inputs(output_hidden_states=False), return_dict=False)
    assert len(model(**loss_inputs(), return_dict=False)) == len(attentions_only) + 3


def test_hidden_states_are_the_states_the_model_computes():
    model = tiny().eval()
    pixels, gaze = clips(2)
    with torch.no_grad():
        out = model(**loss_inputs(output_hidden_states=True))
        encoded = model.video_encoder(pixels, output_hidden_states=True)
        condition, encoded_condition = model.encode_condition(
            encoded.last_hidden_state, FRAMES, output_hidden_states=True
        )
    assert len(out.encoder_hidden_states) == LAYERS["encoder_layers"] + 1
    assert len(out.spatial_hidden_states) == LAYERS["spatial_layers"] + 1
    assert len(out.hidden_states) == LAYERS["num_hidden_layers"] + 1
    assert all(h.shape == (2, 1, FRAMES, WIDTH) for h in out.hidden_states)
    network = model.velocity_network
    torch.testing.assert_close(
        network.output_head(network.output_norm(out.hidden_states[-1])).squeeze(1), out.predicted_velocity
    )
    encoder = model.video_encoder.vjepa2
    torch.testing.assert_close(encoder.layernorm(out.encoder_hidden_states[-1]), model.encode_video(pixels))
    torch.testing.assert_close(encoder.embeddings(pixels), out.encoder_hidden_states[0])
    spatial = model.condition_encoder.spatial_encoder
    torch.testing.assert_close(
        spatial.norm(out.spatial_hidden_states[-1]).view(condition.visual_tokens.shape), condition.visual_tokens
    )
    for got, want in zip(out.spatial_hidden_states, encoded_condition.spatial_hidden_states, strict=True):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("objective", ["flow_matching", "diffusion", "regression"])
def test_every_objective_returns_the_states_of_its_loss_call_not_of_the_self_conditioning_pass(objective):
    """The objectives pass the output flags to the network call whose prediction enters the loss: its last hidden
    state gives the predicted velocity, and asking for the states changes nothing of the loss."""
    model = tiny(objective=objective, self_conditioning_prob=1.0, attn_implementation="eager").train()
    out = model(**loss_inputs(output_attentions=True, output_hidden_states=True))
    plain = model(**loss_inputs())
    assert torch.equal(out.loss, plain.loss) and plain.hidden_states is None and plain.attentions is None
    assert len(out.hidden_states) == LAYERS["num_hidden_layers"] + 1
    assert len(out.attentions) == LAYERS["num_hidden_layers"] and out.attentions[0].shape == (2, HEADS, FRAMES, FRAMES)
    network = model.velocity_network
    with torch.no_grad():
        torch.testing.assert_close(
            network.output_head(network.output_norm(out.hidden_states[-1])).squeeze(1), out.predicted_velocity
        )


def test_hidden_states_and_attentions_keep_their_gradients():
    """transformers' test_retain_grad_hidden_states_attentions: the returned tensors are the ones the loss used."""
    model = tiny(attn_implementation="eager")
    out = model(**loss_inputs(output_attentions=True, output_hidden_states=True))
    for tensor in (out.hidden_states[0], out.attentions[0], out.encoder_hidden_states[1], out.spatial_attentions[0]):
        tensor.retain_grad()
    out.loss.backward()
    assert out.hidden_states[0].grad is not None and out.hidden_states[0].grad.abs().sum() > 0
    assert out.attentions[0].grad is not None and out.attentions[0].grad.abs().sum() > 0
    assert out.spatial_attentions[0].grad is not None
    assert out.encoder_hidden_states[1].grad is not None  # LoRA trains, so the encoder's layers are on the graph


def test_velocity_call_returns_each_layer_and_head_at_a_chosen_flow_time():
    """What the attention analyses read: every (layer, head) gaze self-attention [B*K, H, T, T] and per-frame
    visual cross-attention [B*K, H, T, N] of one velocity call, next to the same velocity as the plain call."""
    model = tiny(attn_implementation="eager").eval()
    with torch.no_grad():
        condition = model.build_condition(model.encode_video(clips(2)[0]), FRAMES)
        sample, _, self_condition = gaze_state(2, 3)
        plain = model.velocity(sample, 0.6, condition, self_condition)
        out = model.velocity(sample, 0.6, condition, self_condition, output_attentions=True, output_hidden_states=True)
    assert torch.equal(out.velocity, plain)
    assert [w.shape for w in out.attentions] == [(6, HEADS, FRAMES, FRAMES)] * 2
    assert [w.shape for w in out.visual_cross_attentions] == [(6, HEADS, FRAMES, TOKENS)] * 2
    assert [w.shape for w in out.task_cross_attentions] == [(6, HEADS, FRAMES, QUERIES + 1)] * 2
    assert [h.shape for h in out.hidden_states] == [(2, 3, FRAMES, WIDTH)] * 3
    # row t reads frame t's own tokens: changing tubelet 0's keys changes the weights of frames 0-1 only
    key, value = condition.visual_key_values[0]
    changed = copy.copy(condition)
    changed.visual_key_values = (
        (key.clone().index_fill_(1, torch.tensor([0]), 0.5), value),
        *condition.visual_key_values[1:],
    )
    with torch.no_grad():
        moved = model.velocity(sample, 0.6, changed, self_condition, output_attentions=True)
    difference = (moved.visual_cross_attentions[0] - out.visual_cross_attentions[0]).abs().amax(dim=(0, 1, 3))
    assert (difference[:2] > 1e-3).all() and (difference[2:] == 0).all()


# ---------------------------------------------------------------------------------------------------- training
def test_input_embeddings_are_the_patch_embedding_and_require_grads_reaches_them():
    model = tiny()
    patch = model.video_encoder.vjepa2.embeddings.patch_embeddings
    assert model.get_input_embeddings() is patch and model.video_encoder.get_input_embeddings() is patch
    seen = []
    first_layer = model.video_encoder.vjepa2.layer[0]
    first_layer.register_forward_pre_hook(lambda module, args: seen.append(args[0].requires_grad))
    model.train()
    model(**loss_inputs())
    model.enable_input_require_grads()
    model(**loss_inputs())
    model.disable_input_require_grads()
    model(**loss_inputs())
    assert seen == [False, True, False]  # the frozen patch embedding, then made to require grads, then not


def test_set_input_embeddings_replaces_the_patch_embedding_the_encoder_runs():
    """``get_input_embeddings`` / ``set_input_embeddings`` are a pair (ModelTesterMixin's get/set check, as vision
    models state it): a replacement is what the model returns and what the encoder calls."""
    model = tiny().eval()
    pixels = clips(1)[0]
    with torch.no_grad():
        before = model.encode_video(pixels)
    original = model.get_input_embeddings()
    replacement = copy.deepcopy(original)
    with torch.no_grad():
        replacement.proj.weight.mul_(2.0)
    model.set_input_embeddings(replacement)
    assert model.get_input_embeddings() is replacement and model.video_encoder.get_input_embeddings() is replacement
    assert model.get_output_embeddings() is None
    with torch.no_grad():
        assert not torch.allclose(model.encode_video(pixels), before)
        model.set_input_embeddings(original)
        torch.testing.assert_close(model.encode_video(pixels), before, atol=0, rtol=0)


def test_tuple_outputs_are_the_model_outputs_fields_in_order():
    """``return_dict=False`` gives exactly ``ModelOutput.to_tuple()`` (ModelTesterMixin's outputs equivalence)."""
    model = tiny(attn_implementation="eager").eval()
    with torch.no_grad():
        as_dict = model(**loss_inputs(output_attentions=True, output_hidden_states=True))
        as_tuple = model(**loss_inputs(output_attentions=True, output_hidden_states=True), return_dict=False)
    expected = as_dict.to_tuple()
    assert isinstance(as_tuple, tuple) and len(as_tuple) == len(expected)
    flat_tuple = torch.utils._pytree.tree_leaves(as_tuple)
    flat_expected = torch.utils._pytree.tree_leaves(expected)
    assert len(flat_tuple) == len(flat_expected) > 10
    for got, want in zip(flat_tuple, flat_expected):
        torch.testing.assert_close(got, want, atol=0, rtol=0)


@pytest.mark.parametrize("use_reentrant", [False, True], ids=["non-reentrant", "reentrant"])
@pytest.mark.parametrize("overrides", [{}, dict(causal=True)], ids=["bidirectional", "causal"])
def test_gradient_checkpointing_trains_exactly_like_the_plain_run(use_reentrant, overrides):
    """Loss and every gradient equal the plain run's, the LoRA adapters under the frozen encoder included."""
    model = tiny(**overrides)
    randomize_lora(model)
    model.train()

    def run() -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        model.zero_grad()
        torch.manual_seed(1)  # LoRA dropout draws from the global generator
        loss = model(**loss_inputs()).loss
        loss.backward()
        return loss.detach(), {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}

    loss, gradients = run()
    if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.2x; the older name still works
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": use_reentrant})
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": use_reentrant})
    assert any(m.gradient_checkpointing for m in model.velocity_network.blocks)
    assert all(layer.gradient_checkpointing for layer in model.video_encoder.vjepa2.layer)
    checkpointed_loss, checkpointed = run()
    lora = [name for name in gradients if "lora_" in name]
    assert len(lora) == 2 * 2 * 2 and all(gradients[name].abs().sum() > 0 for name in lora)
    assert torch.equal(checkpointed_loss, loss) and checkpointed.keys() == gradients.keys()
    for name, gradient in gradients.items():
        torch.testing.assert_close(checkpointed[name], gradient, atol=1e-6, rtol=1e-5, msg=name)


def test_a_lora_config_loads_a_checkpoint_without_lora_as_exactly_the_same_function(tmp_path):
    plain = tiny(use_lora=False).eval()
    plain.save_pretrained(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        adapted = GazeFlowModel.from_pretrained(tmp_path, use_lora=True).eval()
    lora_b = [p for name, p in adapted.named_parameters() if "lora_B" in name]
    lora_a = [p for name, p in adapted.named_parameters() if "lora_A" in name]
    assert len(lora_b) == 4 and all(torch.equal(p, torch.zeros_like(p)) for p in lora_b)
    assert all(p.abs().sum() > 0 for p in lora_a)  # A is peft's Kaiming-uniform draw, not zero
    config = copy.deepcopy(plain.config)
    config.use_lora = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        via_config, info = GazeFlowModel.from_pretrained(tmp_path, config=config, output_loading_info=True)
    assert via_config.config.use_lora and via_config.video_encoder.has_lora
    assert {name for name in info["missing_keys"]} == {
        name for name, _ in via_config.named_parameters() if "lora_" in name
    }
    pixels = clips(2)[0]
    with torch.no_grad():
        assert torch.equal(adapted.encode_video(pixels), plain.encode_video(pixels))
        assert torch.equal(via_config.eval().encode_video(pixels), plain.encode_video(pixels))
        assert torch.equal(adapted(**loss_inputs()).loss, plain(**loss_inputs()).loss)


@pytest.mark.parametrize("use_lora", [False, True], ids=["plain", "lora"])
def test_missing_weights_are_initialised_like_a_fresh_model(monkeypatch, use_lora):
    """transformers' test_can_init_all_missing_weights: with the init seeded per module, a model loaded from an
    empty state dict (every weight missing, so `_init_weights` makes all of them) equals a constructed one."""
    original = PreTrainedModel._initialize_weights

    def seeded(*args, **kwargs):
        torch.manual_seed(42)
        return original(*args, **kwargs)

    monkeypatch.setattr(PreTrainedModel, "_initialize_weights", seeded)
    config = GazeFlowConfig.tiny(use_lora=use_lora)
    constructed = GazeFlowModel(copy.deepcopy(config))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = GazeFlowModel.from_pretrained(None, config=copy.deepcopy(config), state_dict={})
    expected, actual = constructed.state_dict(), loaded.state_dict()
    assert sorted(actual) == sorted(expected)
    different = [name for name in expected if not torch.equal(actual[name], expected[name])]
    assert different == []
    gates = [p for name, p in loaded.named_parameters() if name.endswith("task_gate")]
    assert gates and all(torch.equal(g, torch.full_like(g, config.task_gate_init)) for g in gates)


def test_buffers_are_rebuilt_by_init_weights_after_the_meta_device():
    config = GazeFlowConfig.tiny()
    torch.manual_seed(0)
    reference = dict(GazeFlowModel(copy.deepcopy(config)).named_buffers())
    with torch.device("meta"):
        model = GazeFlowModel(copy.deepcopy(config))
    model.to_empty(device="cpu")
    model.init_weights()
    buffers = dict(model.named_buffers())
    assert sorted(buffers) == sorted(reference) and len(buffers) >= 2  # position encoding, RoPE frequencies
    assert all(torch.equal(buffers[name], reference[name]) for name in reference)
    with torch.no_grad():
        assert torch.isfinite(model(**loss_inputs()).loss)


# ---------------------------------------------------------------------------------------------------- save, batch
def test_save_and_load_keep_every_output(tmp_path):
    model = tiny(attn_implementation="eager").eval()
    randomize_lora(model)
    with torch.no_grad():
        before = model(**loss_inputs(output_attentions=True, output_hidden_states=True))
    model.save_pretrained(tmp_path)
    loaded = GazeFlowModel.from_pretrained(tmp_path, attn_implementation="eager").eval()
    with torch.no_grad():
        after = loaded(**loss_inputs(output_attentions=True, output_hidden_states=True))
    assert before.keys() == after.keys()
    for name in before:
        first, second = before[name], after[name]
        for got, want in zip(
            second if isinstance(second, tuple) else (second,),
            first if isinstance(first, tuple) else (first,),
            strict=True,
        ):
            assert torch.equal(got, want), name


@pytest.mark.parametrize("overrides", [{}, dict(causal=True)], ids=["bidirectional", "causal"])
def test_a_clips_encoding_condition_and_velocity_do_not_depend_on_its_batch_neighbours(overrides):
    model = tiny(attn_implementation="eager", **overrides).eval()
    pixels = clips(3)[0]
    sample, flow_time, self_condition = gaze_state(3, 2)
    flags = dict(output_attentions=True, output_hidden_states=True)
    with torch.no_grad():
        batched_tokens = model.encode_video(pixels, **flags)
        batched_condition = model.build_condition(batched_tokens.last_hidden_state, FRAMES)
        batched = model.velocity(sample, flow_time, batched_condition, self_condition, **flags)
        for row in range(3):
            one = slice(row, row + 1)
            tokens = model.encode_video(pixels[one], **flags)
            condition = model.build_condition(tokens.last_hidden_state, FRAMES)
            single = model.velocity(sample[one], flow_time[one], condition, self_condition[one], **flags)
            rows_of_windows = slice(row * FRAMES, (row + 1) * FRAMES) if overrides else one
            torch.testing.assert_close(
                tokens.last_hidden_state, batched_tokens.last_hidden_state[one], atol=1e-5, rtol=1e-5
            )
            for got, want in zip(tokens.attentions, batched_tokens.attentions, strict=True):
                torch.testing.assert_close(got, want[rows_of_windows], atol=1e-5, rtol=1e-5)
            for got, want in zip(
                torch.utils._pytree.tree_leaves(condition),
                torch.utils._pytree.tree_leaves(batched_condition),
                strict=True,
            ):
                torch.testing.assert_close(got, want[one], atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(single.velocity, batched.velocity[one], atol=1e-5, rtol=1e-5)
            for got, want in zip(single.attentions, batched.attentions, strict=True):  # rows b * K + k
                torch.testing.assert_close(got, want[2 * row : 2 * row + 2], atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------------------------------------------- export
@pytest.mark.slow  # three torch.export traces, about 40 s on 2 shared cores
def test_the_velocity_step_and_the_encoder_export_with_a_static_and_a_dynamic_batch():
    model = tiny(use_lora=False).eval()
    with torch.no_grad():
        condition = model.build_condition(model.encode_video(clips(2)[0]), FRAMES)
        condition_5 = model.build_condition(model.encode_video(clips(5, seed=1)[0]), FRAMES)
    network = model.velocity_network
    inputs, inputs_5 = (*gaze_state(2, 3), condition), (*gaze_state(5, 3, seed=4), condition_5)
    static = export(network, inputs).module()
    torch.testing.assert_close(static(*inputs), network(*inputs), atol=1e-6, rtol=1e-5)
    batch = Dim("batch", min=1, max=64)
    dynamic_shapes = ({0: batch}, {0: batch}, {0: batch}, condition.dynamic_shapes(batch))
    dynamic = export(network, inputs, dynamic_shapes=dynamic_shapes).module()
    for example in (inputs, inputs_5):
        torch.testing.assert_close(dynamic(*example), network(*example), atol=1e-6, rtol=1e-5)

    encoder = model.video_encoder
    pixels, pixels_3 = clips(2)[0], clips(3, seed=2)[0]
    torch.testing.assert_close(export(encoder, (pixels,)).module()(pixels), encoder(pixels), atol=1e-5, rtol=1e-5)
    exported = export(encoder, (pixels,), dynamic_shapes=({0: batch},)).module()
    for frames in (pixels, pixels_3):
        torch.testing.assert_close(exported(frames), encoder(frames), atol=1e-5, rtol=1e-5)


def test_training_target_checks_stay_out_of_the_traced_graph():
    class Targets(torch.nn.Module):
        def forward(self, gaze, valid_mask):
            return check_training_targets(gaze, valid_mask)[0]

    gaze = torch.tensor([[[0.5, -0.5], [float("nan"), 0.0]]])
    valid = torch.tensor([[True, False]])
    program = export(Targets(), (gaze, valid)).module()
    torch.testing.assert_close(program(gaze, valid), torch.tensor([[[0.5, -0.5], [0.0, 0.0]]]))
    with pytest.raises(ValueError, match=r"non-finite value at \(batch, frame\) \(0, 1\)"):
        Targets()(gaze, torch.tensor([[True, True]]))  # eagerly, the value checks still run


# ---------------------------------------------------------------------------------------------------- config
def test_config_round_trips_like_transformers_configs(tmp_path):
    """ConfigTester's checks that apply to a composite config."""
    inputs = dict(
        hidden_size=32,
        num_attention_heads=4,
        num_hidden_layers=3,
        num_task_queries=3,
        num_frames=8,
        window_stride=4,
        num_samples=5,
        solver="midpoint",
    )
    config = GazeFlowConfig(**inputs)
    assert all(hasattr(config, name) for name in ("hidden_size", "num_attention_heads", "num_hidden_layers"))
    as_json = json.loads(config.to_json_string())
    assert all(as_json[key] == value for key, value in inputs.items())
    config.to_json_file(tmp_path / "config.json")
    assert GazeFlowConfig.from_json_file(tmp_path / "config.json").to_dict() == config.to_dict()
    config.save_pretrained(tmp_path / "sub" / "folder")
    assert GazeFlowConfig.from_pretrained(tmp_path / "sub", subfolder="folder").to_dict() == config.to_dict()
    assert GazeFlowConfig.from_dict(config.to_dict()).to_dict() == config.to_dict()
    labelled = GazeFlowConfig(**inputs, num_labels=5)
    assert len(labelled.id2label) == len(labelled.label2id) == 5
    labelled.num_labels = 3
    assert len(labelled.id2label) == len(labelled.label2id) == 3
    common = GazeFlowConfig(**inputs, return_dict=False, output_hidden_states=True, tie_word_embeddings=False)
    assert (common.return_dict, common.output_hidden_states) == (False, True)
    assert isinstance(GazeFlowConfig().encoder_config, VJEPA2Config)
    reloaded = GazeFlowConfig.from_pretrained(tmp_path / "sub" / "folder", num_steps=7)
    assert reloaded.num_steps == 7 and reloaded.encoder_config.to_dict() == config.encoder_config.to_dict()


def test_the_streamer_never_reads_a_position_on_the_host_and_stays_inside_a_learned_table():
    """The causal streamer's positions are tensors on the device (the frame index, the ring slot, the learned
    table's row min(t, W - 1)); nothing reads their values on the host (on the ``meta`` device any such read
    raises), and a stream longer than the table keeps taking its last row."""
    from transformers_gazeflow import GazeFlowStreamer

    torch.manual_seed(0)
    model = GazeFlowModel(GazeFlowConfig.tiny(causal=True, position_encoding="learned")).eval().to("meta")
    streamer = GazeFlowStreamer(model, num_samples=2, num_steps=2)
    frames = model.config.num_frames + 3
    outputs = [streamer.push(frame) for frame in torch.randn(frames, 3, 32, 32, device="meta")]
    assert [o.trajectories.shape for o in outputs] == [(1, 2, 2)] * frames
