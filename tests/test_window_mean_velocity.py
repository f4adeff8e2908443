"""The whitened flow with the window's mean velocity as an output of its own (``config.window_mean_velocity``):
v = c 1 + (I - P) L w and the loss ||P (v - u)||^2 + ||L^-1 (I - P) (v - u)||^2, against recursions and sums
written out by hand."""

import math

import numpy as np
import pytest
import torch

from tests.test_whitened_flow import synthesis
from transformers_gazeflow import GazeFlowConfig, GazeFlowModel, unit_to_model
from transformers_gazeflow.models.gazeflow.modeling_gazeflow_objectives import flow_loss

RHO = 0.8


def mean_head_model(seed: int = 0) -> GazeFlowModel:
    torch.manual_seed(seed)
    config = GazeFlowConfig.tiny(use_lora=False, noise_correlation=RHO, whitened_flow=True, window_mean_velocity=True)
    return GazeFlowModel(config).eval()


def condition_and_sample(model: GazeFlowModel):
    tokens = torch.randn(2, 16, 32, generator=torch.Generator().manual_seed(1))
    sample = torch.randn(2, 3, 8, 2, generator=torch.Generator().manual_seed(2))
    return model.build_condition(tokens, 8), sample


def test_the_velocity_is_the_mean_heads_output_plus_the_recursions_motion_around_its_own_mean():
    """From the last gaze tokens h: w = Linear(LayerNorm(h)) per frame, c = Linear_c(mean over frames of
    LayerNorm(h)); v = c + synthesis(w) - mean over frames of synthesis(w)."""
    model = mean_head_model()
    network = model.velocity_network
    condition, sample = condition_and_sample(model)
    with torch.no_grad():
        out = model.velocity(sample, 0.3, condition, output_hidden_states=True)
        normed = network.output_norm(out.hidden_states[-1])
        head = network.output_head(normed).double().numpy()
        window_mean = network.window_mean_head(normed.mean(dim=2)).double().numpy()
    motion = synthesis(head, RHO)
    expected = window_mean[:, :, None, :] + motion - motion.mean(axis=2, keepdims=True)
    np.testing.assert_allclose(out.velocity.numpy(), expected, atol=1e-5)
    np.testing.assert_allclose(out.velocity.numpy().mean(axis=2), window_mean, atol=1e-5)


def test_the_mean_heads_bias_moves_every_frame_by_the_same_amount():
    model = mean_head_model()
    condition, sample = condition_and_sample(model)
    with torch.no_grad():
        before = model.velocity(sample, 0.3, condition)
        model.velocity_network.window_mean_head.bias += torch.tensor([0.25, -0.5])
        after = model.velocity(sample, 0.3, condition)
    np.testing.assert_allclose((after - before).numpy(), np.broadcast_to([0.25, -0.5], before.shape), atol=1e-6)


def test_the_loss_charges_the_windows_mean_plainly_and_the_motion_around_it_whitened_by_hand():
    """rho 0.6 (sqrt(1 - rho^2) = 0.8). Example 1: residuals (1, 2, 3) on x, 0 on y: mean 2 over 3 frames, plain
    3 * 2^2; around it (-1, 0, 1), innovations -1, (0 + 0.6) / 0.8 = 0.75, 1 / 0.8 = 1.25. Example 2, frame 2
    invalid: residuals (4, 0) on y, mean 2 over 2 frames, plain 2 * 2^2; around it (2, -2), innovations 2 and
    (-2 - 1.2) / 0.8 = -4. Over 2 * (3 + 2) valid frames."""
    prediction = torch.tensor([[[1.0, 0.0], [2.0, 0.0], [3.0, 0.0]], [[0.0, 4.0], [0.0, 0.0], [0.0, 9.0]]])
    valid = torch.tensor([[True, True, True], [True, True, False]])
    config = GazeFlowConfig.tiny(noise_correlation=0.6, whitened_flow=True, window_mean_velocity=True)
    mean_term = 3 * 2.0**2 + 2 * 2.0**2
    motion_term = 1.0 + 0.75**2 + 1.25**2 + 2.0**2 + 4.0**2
    loss = flow_loss(prediction, torch.zeros_like(prediction), valid, config).item()
    assert loss == pytest.approx((mean_term + motion_term) / 10, rel=1e-6)


def test_a_constant_offset_costs_what_the_plain_loss_charges_and_no_more():
    """A residual of 1 on every frame is all mean: T / (2 T) = 0.5, as the plain loss; the whitened loss alone
    charges it (1 + (T - 1) (1 - rho) / (1 + rho)) / (2 T)."""
    prediction = torch.ones(1, 8, 2)
    every = torch.ones(1, 8, dtype=torch.bool)
    config = GazeFlowConfig.tiny(noise_correlation=RHO, whitened_flow=True, window_mean_velocity=True)
    assert flow_loss(prediction, torch.zeros_like(prediction), every, config).item() == pytest.approx(1.0)
    whitened = GazeFlowConfig.tiny(noise_correlation=RHO, whitened_flow=True)
    expected = 2 * (1 + 7 * (1 - RHO) / (1 + RHO)) / 16
    assert flow_loss(prediction, torch.zeros_like(prediction), every, whitened).item() == pytest.approx(expected)


def test_the_training_loss_reads_the_models_own_velocity():
    model = mean_head_model().train()
    tokens = torch.randn(2, 16, 32, generator=torch.Generator().manual_seed(1))
    gaze = unit_to_model(torch.rand(2, 8, 2, generator=torch.Generator().manual_seed(2)))
    out = model(encoder_hidden_states=tokens, gaze=gaze, generator=[torch.Generator().manual_seed(i) for i in range(2)])
    residual = (out.predicted_velocity - out.target_velocity).detach().double().numpy()
    mean = residual.mean(axis=1, keepdims=True)
    around = residual - mean
    innovations = np.concatenate(
        [around[:, :1], (around[:, 1:] - RHO * around[:, :-1]) / math.sqrt(1 - RHO * RHO)], axis=1
    )
    expected = (8 * (mean**2).sum() + (innovations**2).sum()) / (2 * 16)
    assert out.loss.item() == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize(
    "overrides",
    [
        {"noise_correlation": RHO},
        {"noise_correlation": RHO, "whitened_flow": True, "causal": True},
        {"noise_correlation": RHO, "whitened_flow": True, "whitened_loss_share": 0.5},
        {"noise_correlation": RHO, "whitened_flow": True, "whitened_mean_loss_weight": 1.0},
    ],
)
def test_the_mean_head_needs_the_whitened_flow_alone_on_a_windowed_model(overrides):
    with pytest.raises(ValueError, match=r"^GazeFlowConfig: `window_mean_velocity` must be False unless") as err:
        GazeFlowConfig.tiny(window_mean_velocity=True, **overrides)
    assert "\n" not in str(err.value)
    assert GazeFlowConfig.tiny().window_mean_velocity is False


def test_a_saved_mean_head_model_loads_with_its_mean_head(tmp_path):
    model = mean_head_model()
    model.save_pretrained(tmp_path)
    loaded = GazeFlowModel.from_pretrained(tmp_path).eval()
    condition, sample = condition_and_sample(model)
    with torch.no_grad():
        expected = model.velocity(sample, 0.7, condition)
        got = loaded.velocity(
            sample, 0.7, loaded.build_condition(torch.randn(2, 16, 32, generator=torch.Generator().manual_seed(1)), 8)
        )
    torch.testing.assert_close(got, expected)
