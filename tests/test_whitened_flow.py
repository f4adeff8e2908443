"""Flow matching in the AR(1) prior's whitened frame coordinates (``config.whitened_flow``): the head's output w read
as the velocity v = L w over frames, the loss ||L^-1 (v - u)||^2, against recursions written out by hand; the causal
streamer and its ONNX export continue the recursion frame by frame as the windowed model runs it over a window."""

import math

import numpy as np
import pytest
import torch

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel, unit_to_model
from transformers_gazeflow.generation.online import GazeFlowStreamer
from transformers_gazeflow.models.gazeflow.modeling_gazeflow_objectives import flow_loss, frame_whitened_mse
from transformers_gazeflow.models.gazeflow.scheduling_gazeflow import correlate_noise, whiten_frames

RHO = 0.8


def synthesis(head: np.ndarray, rho: float) -> np.ndarray:
    """v[0] = w[0], v[t] = rho v[t - 1] + sqrt(1 - rho^2) w[t] over axis -2, frame by frame."""
    out = np.empty_like(head, dtype=np.float64)
    for t in range(head.shape[-2]):
        w = head[..., t, :].astype(np.float64)
        out[..., t, :] = w if t == 0 else rho * out[..., t - 1, :] + math.sqrt(1 - rho * rho) * w
    return out


def tiny_model(seed: int = 0, **overrides) -> GazeFlowModel:
    torch.manual_seed(seed)
    return GazeFlowModel(GazeFlowConfig.tiny(use_lora=False, **overrides)).eval()


def whitened_twin(model: GazeFlowModel) -> GazeFlowModel:
    """The same weights with ``whitened_flow`` on."""
    twin = GazeFlowModel(GazeFlowConfig.from_dict({**model.config.to_dict(), "whitened_flow": True})).eval()
    twin.load_state_dict(model.state_dict())
    return twin


# ---------------------------------------------------------------------------------------------------- coordinates
def test_whitening_inverts_the_recursion_by_hand():
    x = torch.tensor([[1.0], [2.0], [3.0]])  # one axis, three frames; rho 0.6: sqrt(1 - rho^2) = 0.8
    expected = [[1.0], [(2.0 - 0.6) / 0.8], [(3.0 - 0.6 * 2.0) / 0.8]]
    np.testing.assert_allclose(whiten_frames(x, 0.6, frame_dim=0).numpy(), expected, rtol=1e-6)
    white = torch.randn(4, 3, 10, 2, generator=torch.Generator().manual_seed(0))
    np.testing.assert_allclose(whiten_frames(correlate_noise(white, RHO), RHO).numpy(), white.numpy(), atol=1e-5)
    assert whiten_frames(white, 0.0) is white


def test_the_loss_is_measured_in_whitened_coordinates_by_hand():
    """rho 0.6: residuals r = (1, 2, 3) on x and 0 on y give innovations (1, 1.75, 2.25); with frame 1 invalid only
    frame 0's term is counted (frames 1 and 2 each have an invalid one of their pair), over 2 valid frames."""
    prediction = torch.tensor([[[1.0, 0.0], [2.0, 0.0], [3.0, 0.0]]])
    target = torch.zeros_like(prediction)
    every = torch.ones(1, 3, dtype=torch.bool)
    expected = (1.0 + 1.75**2 + 2.25**2) / (2 * 3)
    assert frame_whitened_mse(prediction, target, every, 0.6).item() == pytest.approx(expected, rel=1e-6)
    middle_missing = torch.tensor([[True, False, True]])
    assert frame_whitened_mse(prediction, target, middle_missing, 0.6).item() == pytest.approx(1.0 / 4, rel=1e-6)


@pytest.mark.parametrize("share", [0.0, 0.25, 1.0])
def test_the_loss_share_mixes_the_whitened_and_the_plain_residual_by_hand(share):
    """rho 0.6, residuals r = (1, 2, 3) on x, 0 on y: whitened (1 + 1.75^2 + 2.25^2) / 6, plain (1 + 4 + 9) / 6."""
    prediction = torch.tensor([[[1.0, 0.0], [2.0, 0.0], [3.0, 0.0]]])
    every = torch.ones(1, 3, dtype=torch.bool)
    config = GazeFlowConfig.tiny(noise_correlation=0.6, whitened_flow=True, whitened_loss_share=share)
    expected = share * (1.0 + 1.75**2 + 2.25**2) / 6 + (1 - share) * 14.0 / 6
    assert flow_loss(prediction, torch.zeros_like(prediction), every, config).item() == pytest.approx(expected)
    plain = GazeFlowConfig.tiny(noise_correlation=0.6)
    assert flow_loss(prediction, torch.zeros_like(prediction), every, plain).item() == pytest.approx(14.0 / 6)


@pytest.mark.parametrize("weight", [0.0, 0.5, 2.0])
def test_the_mean_term_adds_the_plain_residual_of_each_windows_mean_by_hand(weight):
    """rho 0.6, residuals r = (1, 2, 3) on x, 0 on y: whitened (1 + 1.75^2 + 2.25^2) / 6; the window's mean residual
    is 2, carried by 3 frames: 3 * 2^2 / 6. A second example with frame 2 invalid: residuals (4, 0) on y, mean 2 over
    2 frames: 2 * 2^2; whitened 16 + (0 - 0.6 * 4)^2 / 0.64 = 25; the denominators 2 * (3 + 2)."""
    prediction = torch.tensor([[[1.0, 0.0], [2.0, 0.0], [3.0, 0.0]], [[0.0, 4.0], [0.0, 0.0], [0.0, 9.0]]])
    valid = torch.tensor([[True, True, True], [True, True, False]])
    config = GazeFlowConfig.tiny(noise_correlation=0.6, whitened_flow=True, whitened_mean_loss_weight=weight)
    whitened = (1.0 + 1.75**2 + 2.25**2 + 16.0 + 2.4**2 / 0.64) / 10
    mean_term = (3 * 2.0**2 + 2 * 2.0**2) / 10
    loss = flow_loss(prediction, torch.zeros_like(prediction), valid, config).item()
    assert loss == pytest.approx(whitened + weight * mean_term, rel=1e-6)


def test_the_mean_term_needs_the_whitened_flow_and_a_weight_of_at_least_zero():
    with pytest.raises(ValueError, match=r"^GazeFlowConfig: `whitened_mean_loss_weight` must be 0 \(the default\)"):
        GazeFlowConfig.tiny(noise_correlation=RHO, whitened_mean_loss_weight=1.0)
    with pytest.raises(ValueError, match="whitened_mean_loss_weight"):
        GazeFlowConfig.tiny(noise_correlation=RHO, whitened_flow=True, whitened_mean_loss_weight=-0.5)
    assert GazeFlowConfig.tiny().whitened_mean_loss_weight == 0.0


def test_the_loss_share_needs_the_whitened_flow_and_a_share_in_the_unit_interval():
    with pytest.raises(ValueError, match=r"^GazeFlowConfig: `whitened_loss_share` must be 1 \(the default\)") as err:
        GazeFlowConfig.tiny(noise_correlation=RHO, whitened_loss_share=0.5)
    assert "\n" not in str(err.value)
    for share in (-0.1, 1.5):
        with pytest.raises(ValueError, match="whitened_loss_share"):
            GazeFlowConfig.tiny(noise_correlation=RHO, whitened_flow=True, whitened_loss_share=share)
    assert GazeFlowConfig.tiny().whitened_loss_share == 1.0


# ---------------------------------------------------------------------------------------------------- the network
def test_the_head_output_is_read_through_the_recursion():
    plain = tiny_model(noise_correlation=RHO)
    whitened = whitened_twin(plain)
    tokens = torch.randn(2, 16, 32, generator=torch.Generator().manual_seed(1))
    sample = torch.randn(2, 3, 8, 2, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        head = plain.velocity(sample, 0.3, plain.build_condition(tokens, 8)).numpy()
        velocity = whitened.velocity(sample, 0.3, whitened.build_condition(tokens, 8)).numpy()
    np.testing.assert_allclose(velocity, synthesis(head, RHO), atol=1e-5)


def test_the_training_loss_is_the_whitened_residual():
    model = whitened_twin(tiny_model(noise_correlation=RHO)).train()
    tokens = torch.randn(2, 16, 32, generator=torch.Generator().manual_seed(1))
    gaze = unit_to_model(torch.rand(2, 8, 2, generator=torch.Generator().manual_seed(2)))
    out = model(encoder_hidden_states=tokens, gaze=gaze, generator=[torch.Generator().manual_seed(i) for i in range(2)])
    residual = (out.predicted_velocity - out.target_velocity).detach().double().numpy()
    innovations = np.concatenate(
        [residual[:, :1], (residual[:, 1:] - RHO * residual[:, :-1]) / math.sqrt(1 - RHO * RHO)], axis=1
    )
    assert out.loss.item() == pytest.approx((innovations**2).sum() / (2 * 16), rel=1e-5)


def test_with_no_whitened_share_the_training_loss_is_the_plain_residual_of_v_read_through_the_recursion():
    plain = tiny_model(noise_correlation=RHO)
    twin = GazeFlowConfig.from_dict({**plain.config.to_dict(), "whitened_flow": True, "whitened_loss_share": 0.0})
    model = GazeFlowModel(twin).train()
    model.load_state_dict(plain.state_dict())
    tokens = torch.randn(2, 16, 32, generator=torch.Generator().manual_seed(1))
    gaze = unit_to_model(torch.rand(2, 8, 2, generator=torch.Generator().manual_seed(2)))
    out = model(encoder_hidden_states=tokens, gaze=gaze, generator=[torch.Generator().manual_seed(i) for i in range(2)])
    residual = (out.predicted_velocity - out.target_velocity).detach().double().numpy()
    assert out.loss.item() == pytest.approx((residual**2).sum() / (2 * 16), rel=1e-5)


def test_whitened_flow_needs_the_correlated_prior_and_flow_matching():
    with pytest.raises(ValueError, match=r"^GazeFlowConfig: `whitened_flow` must be False unless") as err:
        GazeFlowConfig.tiny(whitened_flow=True)
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="whitened_flow"):
        GazeFlowConfig.tiny(whitened_flow=True, noise_correlation=RHO, objective="diffusion")
    assert GazeFlowConfig.tiny().whitened_flow is False


# ---------------------------------------------------------------------------------------------------- streaming
def test_the_streamer_equals_the_causal_model_on_every_prefix():
    """The streamer continues each call's velocity from the last frame's; generate() on a prefix runs the recursion
    over the whole prefix: frame t agrees (and without the recursion it would not, from frame 1 on)."""
    model = whitened_twin(tiny_model(causal=True, noise_correlation=RHO))
    pixels = torch.randn(2, 8, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    white = torch.randn(2, 3, 8, 2, generator=torch.Generator().manual_seed(4))
    streamer = GazeFlowStreamer(model, num_samples=3, num_steps=2)
    plain = GazeFlowStreamer(tiny_model(causal=True, noise_correlation=RHO), num_samples=3, num_steps=2)
    for t in range(8):
        streamed = streamer.push(pixels[:, t], noise=white[:, :, t : t + 1])
        unwhitened = plain.push(pixels[:, t], noise=white[:, :, t : t + 1])
        prefix = model.generate(
            pixel_values_videos=pixels[:, : t + 1],
            num_samples=3,
            num_steps=2,
            generator=torch.Generator().manual_seed(4),
        )
        assert torch.allclose(streamed.trajectories, prefix.trajectories[:, :, t], atol=1e-5), t
        assert t == 0 or not torch.allclose(streamed.trajectories, unwhitened.trajectories, atol=1e-4), t


def test_the_onnx_stepper_continues_the_recursion_as_the_torch_streamer_does(tmp_path):
    pytest.importorskip("onnxruntime", reason="the [onnx] extra: pip install -e '.[onnx]'")
    from transformers_gazeflow.commands.cli import main
    from transformers_gazeflow.data.processing import GazeFlowVideoProcessor
    from transformers_gazeflow.generation.steppers import OnnxStepper

    model_dir, exported = tmp_path / "model", tmp_path / "exported"
    whitened_twin(tiny_model(causal=True, noise_correlation=RHO)).save_pretrained(model_dir)
    GazeFlowVideoProcessor(size=32).save_pretrained(model_dir)
    assert main(["export-streamer", "--format", "onnx", "--model", str(model_dir), "-o", str(exported), "-k", "3"]) == 0
    stepper = OnnxStepper(exported, seed=3)
    streamer = GazeFlowStreamer(
        GazeFlowModel.from_pretrained(model_dir).eval(),
        num_samples=3,
        generator=torch.Generator().manual_seed(3),
        processor=GazeFlowVideoProcessor.from_pretrained(model_dir),
    )
    frames = torch.randint(0, 256, (6, 40, 48, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    for frame in frames:
        samples, _ = stepper.step(frame.numpy())
        np.testing.assert_allclose(samples, streamer.push(frame).trajectories[0].numpy(), atol=1e-3)
