"""The loss's randomness, independent of batching: per-example streams, eval-mode determinism, and the self-conditioning
coin as a per-example mask (no Python branch on a tensor)."""

import pytest
import torch

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel, unit_to_model
from transformers_gazeflow.models.gazeflow.modeling_gazeflow_objectives import flow_matching_objective, masked_mse
from transformers_gazeflow.models.gazeflow.scheduling_gazeflow import (
    TrainingNoise,
    draw_training_noise,
    example_generators,
)


def tiny_model(**overrides) -> GazeFlowModel:
    torch.manual_seed(0)
    return GazeFlowModel(GazeFlowConfig.tiny(use_lora=False, **overrides))


def clips(batch: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Encoder tokens [B, 16, 32] and gaze [B, 8, 2] of ``batch`` random clips."""
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randn(batch, 16, 32, generator=generator)
    gaze = unit_to_model(torch.rand(batch, 8, 2, generator=generator))
    return tokens, gaze


def per_example_loss(out, index: int) -> torch.Tensor:
    return masked_mse(
        out.predicted_velocity[index : index + 1],
        out.target_velocity[index : index + 1],
        torch.ones(1, 8, dtype=torch.bool),
    )


def seeded(*seeds: int) -> list[torch.Generator]:
    return [torch.Generator().manual_seed(seed) for seed in seeds]


@pytest.mark.parametrize("objective", ["flow_matching", "diffusion"])
def test_a_clips_loss_does_not_depend_on_its_batch_neighbours(objective):
    model = tiny_model(objective=objective).train()
    tokens, gaze = clips(3)
    with torch.no_grad():
        alone = model(encoder_hidden_states=tokens[:1], gaze=gaze[:1], generator=seeded(11))
        with_b = model(encoder_hidden_states=tokens[:2], gaze=gaze[:2], generator=seeded(11, 12))
        with_c = model(encoder_hidden_states=tokens[[0, 2]], gaze=gaze[[0, 2]], generator=seeded(11, 13))
    for out in (with_b, with_c):
        assert torch.allclose(out.flow_time[0], alone.flow_time[0])
        assert torch.allclose(out.target_velocity[0], alone.target_velocity[0])
        assert torch.allclose(out.predicted_velocity[0], alone.predicted_velocity[0], atol=1e-5)
        assert torch.allclose(per_example_loss(out, 0), per_example_loss(alone, 0), atol=1e-6)
    assert not torch.allclose(with_b.target_velocity[1], with_c.target_velocity[1])


def test_one_generator_spawns_streams_by_position_whatever_the_batch_size():
    model = tiny_model().train()
    tokens, gaze = clips(4)
    with torch.no_grad():
        small = model(encoder_hidden_states=tokens[:1], gaze=gaze[:1], generator=torch.Generator().manual_seed(5))
        large = model(encoder_hidden_states=tokens, gaze=gaze, generator=torch.Generator().manual_seed(5))
    assert torch.equal(small.flow_time[0], large.flow_time[0])
    assert torch.allclose(small.target_velocity[0], large.target_velocity[0])
    assert torch.allclose(small.predicted_velocity[0], large.predicted_velocity[0], atol=1e-5)
    # each example has its own time (not one for the batch)
    assert large.flow_time.unique().numel() == 4


def test_eval_forward_is_deterministic_and_leaves_the_global_rng_alone():
    model = tiny_model().eval()
    tokens, gaze = clips(2)
    state = torch.get_rng_state()
    with torch.no_grad():
        first = model(encoder_hidden_states=tokens, gaze=gaze).loss
        second = model(encoder_hidden_states=tokens, gaze=gaze).loss
    assert torch.equal(first, second)
    assert torch.equal(torch.get_rng_state(), state)
    with torch.no_grad():  # the documented draws: s = 0.5 for every clip, the same noise for every clip
        out = model(encoder_hidden_states=tokens, gaze=gaze)
    assert torch.equal(out.flow_time, torch.full((2,), 0.5))
    # the OT target is u = g - (1 - sigma_min) x_0: with the same x_0 for both clips, it differs by g_0 - g_1 only
    assert torch.allclose(out.target_velocity[0] - out.target_velocity[1], gaze[0] - gaze[1], atol=1e-6)
    model.train()  # training without a generator draws from the global RNG: every call differs
    with torch.no_grad():
        losses = {model(encoder_hidden_states=tokens, gaze=gaze).loss.item() for _ in range(3)}
    assert len(losses) == 3 and not torch.equal(torch.get_rng_state(), state)


def test_the_self_conditioning_coin_is_drawn_and_applied_per_example():
    model = tiny_model(self_conditioning_prob=0.5).train()
    batch = 8
    tokens, gaze = clips(batch, seed=1)
    generators = seeded(*range(100, 100 + batch))
    with torch.no_grad():
        out = model(encoder_hidden_states=tokens, gaze=gaze, generator=seeded(*range(100, 100 + batch)))
    coins = []
    for index, generator in enumerate(generators):  # hand-rolled: s, x_0, coin from the example's own stream
        s = torch.rand(1, generator=generator)
        x0 = torch.randn(8, 2, generator=generator)
        coin = torch.rand(1, generator=generator).item() < 0.5
        coins.append(coin)
        x_s = ((1 - (1 - 1e-3) * s) * x0 + s * gaze[index]).view(1, 1, 8, 2)
        with torch.no_grad():
            condition = model.build_condition(tokens[index : index + 1], 8)
            x1_hat = torch.zeros_like(x_s)
            if coin:
                x1_hat = x_s + (1 - s) * model.velocity(x_s, s.view(1, 1), condition, x1_hat)
            expected = model.velocity(x_s, s.view(1, 1), condition, x1_hat)[0, 0]
        assert torch.allclose(out.predicted_velocity[index], expected, atol=1e-5), index
        assert torch.allclose(out.target_velocity[index], gaze[index] - (1 - 1e-3) * x0, atol=1e-6)
    assert 0 < sum(coins) < batch, coins  # both branches are exercised


@pytest.mark.parametrize("probability,calls", [(0.0, 1), (1.0, 2), (0.5, 2)])
def test_the_first_pass_runs_for_the_whole_batch_whenever_self_conditioning_can_happen(probability, calls):
    model = tiny_model(self_conditioning_prob=probability).train()
    tokens, gaze = clips(2)
    seen = []
    original = model.velocity

    def counting(*args, **kwargs):
        seen.append(args[0].shape)
        return original(*args, **kwargs)

    model.velocity = counting
    with torch.no_grad():
        model(encoder_hidden_states=tokens, gaze=gaze, generator=torch.Generator().manual_seed(0))
    assert len(seen) == calls and all(shape == (2, 1, 8, 2) for shape in seen)


def test_the_objective_has_no_python_branch_on_tensor_values():
    """Given the draws, the flow-matching objective traces as one graph (``fullgraph=True`` fails on a graph break,
    which a ``bool(tensor)`` branch such as the old coin would cause)."""
    model = tiny_model(self_conditioning_prob=0.5).eval()
    tokens, gaze = clips(3)
    generators = seeded(1, 2, 3)
    draws = draw_training_noise((3, 8, 2), generators, 0.5, torch.device("cpu"), torch.float32)
    assert draws.self_condition.dtype == torch.bool and draws.time.shape == (3,)
    valid = torch.ones(3, 8, dtype=torch.bool)

    def loss(tokens, gaze, time, noise, coin):
        condition = model.build_condition(tokens, 8)
        return flow_matching_objective(model, condition, gaze, valid, TrainingNoise(time, noise, coin)).loss

    with torch.no_grad():
        eager = loss(tokens, gaze, draws.time, draws.noise, draws.self_condition)
        traced = torch.compile(loss, fullgraph=True, backend="eager")(
            tokens, gaze, draws.time, draws.noise, draws.self_condition
        )
    assert torch.allclose(eager, traced, atol=1e-6)


def test_the_loss_calls_hidden_states_trace_with_it():
    """The output flags reach the loss's network call as arguments (no state outside the call), so its hidden states
    come back from a traced objective too, equal to the eager ones."""
    model = tiny_model(self_conditioning_prob=0.5).eval()
    tokens, gaze = clips(3)
    draws = draw_training_noise((3, 8, 2), seeded(1, 2, 3), 0.5, torch.device("cpu"), torch.float32)
    valid = torch.ones(3, 8, dtype=torch.bool)

    def loss_and_states(tokens, gaze, time, noise, coin):
        condition = model.build_condition(tokens, 8)
        output = flow_matching_objective(
            model, condition, gaze, valid, TrainingNoise(time, noise, coin), output_hidden_states=True
        )
        return output.loss, output.network_outputs.hidden_states

    with torch.no_grad():
        eager = loss_and_states(tokens, gaze, draws.time, draws.noise, draws.self_condition)
        traced = torch.compile(loss_and_states, fullgraph=True, backend="eager")(
            tokens, gaze, draws.time, draws.noise, draws.self_condition
        )
    assert len(traced[1]) == len(eager[1]) == model.config.num_hidden_layers + 1
    assert torch.allclose(eager[0], traced[0], atol=1e-6)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(eager[1], traced[1]))


def test_bad_generator_arguments_are_named():
    model = tiny_model()
    tokens, gaze = clips(2)
    with pytest.raises(ValueError, match="one per example"):
        model(encoder_hidden_states=tokens, gaze=gaze, generator=seeded(1))
    with pytest.raises(ValueError, match="`generator` must be a torch.Generator"):
        model(encoder_hidden_states=tokens, gaze=gaze, generator=3)
    assert len(example_generators(None, 4, deterministic=True)) == 4


@pytest.mark.parametrize("objective", ["flow_matching", "diffusion"])
def test_in_eval_mode_a_clips_loss_depends_on_the_clip_alone(objective):
    """Without a generator, eval() gives each clip the same draws wherever it sits in whatever batch."""
    model = tiny_model(objective=objective).eval()
    tokens, gaze = clips(3, seed=4)
    with torch.no_grad():
        batched = model(encoder_hidden_states=tokens, gaze=gaze)
        for index in range(3):
            alone = model(encoder_hidden_states=tokens[index : index + 1], gaze=gaze[index : index + 1])
            assert torch.allclose(per_example_loss(batched, index), alone.loss, atol=1e-6)
        swapped = model(encoder_hidden_states=tokens.flip(0), gaze=gaze.flip(0))
    assert torch.allclose(per_example_loss(batched, 0), per_example_loss(swapped, 2), atol=1e-6)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic-batch"])
def test_the_eval_loss_exports_with_torch_export(dynamic):
    """transformers' export test exports the whole forward in eval mode (non-strict): no tensor value is read and
    the batch is not looped over, so a dynamic batch exports too, and the program gives the eager loss."""
    model = tiny_model(self_conditioning_prob=0.5).eval()
    tokens, gaze = clips(2, seed=2)

    class Loss(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, tokens, gaze):
            return self.model(encoder_hidden_states=tokens, gaze=gaze).loss

    wrapper = Loss(model)
    shapes = (
        {"tokens": {0: torch.export.Dim("batch", min=1, max=8)}, "gaze": {0: torch.export.Dim("batch", min=1, max=8)}}
        if dynamic
        else None
    )
    program = torch.export.export(wrapper, (tokens, gaze), dynamic_shapes=shapes, strict=False)
    with torch.no_grad():
        assert torch.allclose(program.module()(tokens, gaze), wrapper(tokens, gaze), atol=1e-6)
        if dynamic:
            more_tokens, more_gaze = clips(3, seed=5)
            assert torch.allclose(program.module()(more_tokens, more_gaze), wrapper(more_tokens, more_gaze), atol=1e-6)
