"""The AR(1) base noise over frames (``config.noise_correlation``, the x_0 prior of Eq. bg:cfm made a stationary
Gaussian process over a window's frames, as in functional flow matching): its covariance against the formula
Sigma_tu = rho^|t - u|, the same prior in training, in one window, across coherent windows and frame by frame in the
causal streamer; rho = 0 is the paper's independent noise, bit for bit."""

import math

import numpy as np
import pytest
import torch

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel, unit_to_model
from transformers_gazeflow.generation.online import GazeFlowStreamer
from transformers_gazeflow.models.gazeflow.generation_gazeflow import (
    SamplingSettings,
    iter_window_predictions,
)
from transformers_gazeflow.models.gazeflow.scheduling_gazeflow import (
    correlate_noise,
    draw_eval_noise,
    draw_training_noise,
)

RHO = 0.8


def recursion(white: np.ndarray, rho: float, previous: np.ndarray | None = None) -> np.ndarray:
    """x[t] = rho x[t - 1] + sqrt(1 - rho^2) e[t] over axis -2, written out frame by frame (x[0] = e[0] without a
    previous frame)."""
    out = np.empty_like(white, dtype=np.float64)
    last = previous
    for t in range(white.shape[-2]):
        e = white[..., t, :].astype(np.float64)
        last = e if last is None else rho * last + math.sqrt(1 - rho * rho) * e
        out[..., t, :] = last
    return out


def tiny_model(seed: int = 0, **overrides) -> GazeFlowModel:
    torch.manual_seed(seed)
    return GazeFlowModel(GazeFlowConfig.tiny(use_lora=False, **overrides)).eval()


# ---------------------------------------------------------------------------------------------------- the prior
def test_the_prior_has_unit_variance_and_geometric_correlation():
    white = torch.randn(40_000, 12, 2, generator=torch.Generator().manual_seed(0))
    noise = correlate_noise(white, RHO).double()
    variance = noise.var(dim=(0, 2))
    assert torch.all((variance - 1).abs() < 0.04), variance  # every frame's marginal variance is 1
    for lag in (1, 2, 5):
        correlation = (noise[:, lag:] * noise[:, :-lag]).mean().item()
        assert correlation == pytest.approx(RHO**lag, abs=0.02), lag  # rho^lag, the stationary AR(1)
    np.testing.assert_allclose(noise.numpy(), recursion(white.numpy(), RHO), atol=1e-5)


def test_the_prior_continues_from_a_previous_frame():
    white = torch.randn(40_000, 6, 2, generator=torch.Generator().manual_seed(1))
    previous = torch.randn(40_000, 1, 2, generator=torch.Generator().manual_seed(2))
    noise = correlate_noise(white, RHO, previous).double()
    np.testing.assert_allclose(noise.numpy(), recursion(white.numpy(), RHO, previous[:, 0].numpy()), atol=1e-5)
    for lag in (1, 3):  # the previous frame is frame -1 of the same process
        correlation = (noise[:, lag - 1] * previous[:, 0].double()).mean().item()
        assert correlation == pytest.approx(RHO**lag, abs=0.02)
    assert torch.all((noise.var(dim=(0, 2)) - 1).abs() < 0.04)


def test_zero_correlation_is_the_papers_noise_bit_for_bit():
    white = torch.randn(3, 8, 2, generator=torch.Generator().manual_seed(3))
    assert correlate_noise(white, 0.0) is white
    assert correlate_noise(white, 0.0, previous=torch.ones(3, 1, 2)) is white

    def training(**extra):
        return draw_training_noise(
            (4, 8, 2), [torch.Generator().manual_seed(i) for i in range(4)], 0.5, "cpu", torch.float32, **extra
        )

    paper = torch.stack(
        [
            (torch.rand(1, generator=g), torch.randn(8, 2, generator=g))[1]
            for g in [torch.Generator().manual_seed(i) for i in range(4)]
        ]
    )
    assert torch.equal(training().noise, paper)
    assert torch.equal(training(noise_correlation=0.0).noise, paper)
    np.testing.assert_allclose(training(noise_correlation=RHO).noise.numpy(), recursion(paper.numpy(), RHO), atol=1e-5)
    eval_white = draw_eval_noise((2, 8, 2), 0.5, "cpu", torch.float32).noise
    eval_ar = draw_eval_noise((2, 8, 2), 0.5, "cpu", torch.float32, noise_correlation=RHO).noise
    np.testing.assert_allclose(eval_ar.numpy(), recursion(eval_white.numpy(), RHO), atol=1e-5)


@pytest.mark.parametrize("value", [1.0, -0.1, 1.5])
def test_a_bad_correlation_is_named_in_one_line(value):
    with pytest.raises(ValueError, match=r"^GazeFlowConfig: `noise_correlation` must be a number in \[0, 1\)") as err:
        GazeFlowConfig.tiny(noise_correlation=value)
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="noise_correlation"):
        correlate_noise(torch.zeros(1, 2, 2), value)


def test_the_correlation_is_saved_and_loaded(tmp_path):
    model = tiny_model(noise_correlation=0.9)
    model.save_pretrained(tmp_path)
    assert '"noise_correlation": 0.9' in (tmp_path / "config.json").read_text()
    assert GazeFlowModel.from_pretrained(tmp_path).config.noise_correlation == 0.9
    assert GazeFlowConfig.tiny().noise_correlation == 0.0


# ---------------------------------------------------------------------------------------------------- training
def test_training_regresses_on_the_correlated_noise():
    """x_0 recovered from the loss's target u = g - (1 - sigma_min) x_0 is the AR(1) recursion of the white draws
    each example's stream makes after its time."""
    model = tiny_model(noise_correlation=RHO).train()
    tokens = torch.randn(3, 16, 32, generator=torch.Generator().manual_seed(1))
    gaze = unit_to_model(torch.rand(3, 8, 2, generator=torch.Generator().manual_seed(2)))
    out = model(encoder_hidden_states=tokens, gaze=gaze, generator=[torch.Generator().manual_seed(i) for i in range(3)])
    noise = (gaze - out.target_velocity) / (1 - model.config.sigma_min)
    white = []
    for i in range(3):
        g = torch.Generator().manual_seed(i)
        torch.rand(1, generator=g)
        white.append(torch.randn(8, 2, generator=g))
    np.testing.assert_allclose(noise.detach().numpy(), recursion(torch.stack(white).numpy(), RHO), atol=1e-4)


# ---------------------------------------------------------------------------------------------------- sampling
def test_one_window_is_sampled_from_the_correlated_prior():
    """A one-step Euler sample is x_1 = x_0 + v(x_0, 0): with a network whose velocity is zero, the output is x_0."""
    model = tiny_model(noise_correlation=RHO)
    torch.nn.init.zeros_(model.velocity_network.output_head.weight)
    torch.nn.init.zeros_(model.velocity_network.output_head.bias)
    tokens = torch.randn(2, 16, 32, generator=torch.Generator().manual_seed(1))
    out = model.generate(
        encoder_hidden_states=tokens, num_samples=3, num_steps=1, generator=torch.Generator().manual_seed(5)
    )
    white = torch.randn(2, 3, 8, 2, generator=torch.Generator().manual_seed(5))
    expected = np.clip((recursion(white.numpy(), RHO) + 1) / 2, 0, 1)
    np.testing.assert_allclose(out.trajectories.numpy(), expected, atol=1e-5)


def test_coherent_windows_continue_one_process_over_the_clip():
    """The x_0 each window is sampled from: the overlap is the previous window's x_0, and the new frames continue
    the AR(1) recursion from its last frame with the window's own draws (so the clip's x_0 is one process)."""
    model = tiny_model(noise_correlation=RHO)  # W = 8, stride 4
    seen = []

    def sampler(condition, noise, known=None):
        seen.append(noise.clone())
        return noise

    frames = torch.zeros(1, 16, 3, 32, 32)
    windows = [[(start, frames[:, start : start + 8])] for start in (0, 4, 8)]
    settings = SamplingSettings.resolve(model.config, num_samples=2, num_steps=1, window_mode="coherent")
    list(iter_window_predictions(model, windows, settings, torch.Generator().manual_seed(6), sampler=sampler))
    generator = torch.Generator().manual_seed(6)
    white = [torch.randn(1, 2, 8, 2, generator=generator) for _ in range(3)]
    clip = recursion(white[0].numpy(), RHO)
    for index in (1, 2):
        fresh = recursion(white[index][:, :, 4:].numpy(), RHO, previous=clip[:, :, -1])
        clip = np.concatenate([clip, fresh], axis=2)
    np.testing.assert_allclose(torch.cat([seen[0], seen[1][:, :, 4:], seen[2][:, :, 4:]], 2).numpy(), clip, atol=1e-5)
    assert torch.equal(seen[1][:, :, :4], seen[0][:, :, 4:]) and torch.equal(seen[2][:, :, :4], seen[1][:, :, 4:])


def test_blended_windows_each_draw_the_correlated_prior():
    model = tiny_model(noise_correlation=RHO)
    seen = []

    def sampler(condition, noise, known=None):
        seen.append(noise.clone())
        return noise

    frames = torch.zeros(1, 12, 3, 32, 32)
    settings = SamplingSettings.resolve(model.config, num_samples=2, num_steps=1, window_mode="blend")
    batch = [[(0, frames[:, :8]), (4, frames[:, 4:12])]]
    list(iter_window_predictions(model, batch, settings, torch.Generator().manual_seed(8), sampler=sampler))
    generator = torch.Generator().manual_seed(8)
    white = torch.cat([torch.randn(1, 2, 8, 2, generator=generator) for _ in range(2)])
    np.testing.assert_allclose(seen[0].numpy(), recursion(white.numpy(), RHO), atol=1e-5)


def test_the_streamer_equals_the_causal_model_on_every_prefix_with_correlated_noise():
    """The streamer builds x_0 frame by frame from each frame's draw; generate() on a prefix builds it for the
    whole (padded) window from the same draws: the recursion is causal, so frame t's x_0 agrees."""
    model = tiny_model(causal=True, noise_correlation=RHO)
    pixels = torch.randn(2, 8, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    streamer = GazeFlowStreamer(model, num_samples=3, num_steps=2)
    white = torch.randn(2, 3, 8, 2, generator=torch.Generator().manual_seed(4))
    for t in range(8):
        streamed = streamer.push(pixels[:, t], noise=white[:, :, t : t + 1])
        prefix = model.generate(
            pixel_values_videos=pixels[:, : t + 1],
            num_samples=3,
            num_steps=2,
            generator=torch.Generator().manual_seed(4),
        )
        assert torch.allclose(streamed.trajectories, prefix.trajectories[:, :, t], atol=1e-5), t
    # and the correlation matters: without it, the same draws give other samples from frame 1 on
    independent = GazeFlowStreamer(tiny_model(causal=True), num_samples=3, num_steps=2)
    first = [independent.push(pixels[:, t], noise=white[:, :, t : t + 1]).trajectories for t in range(2)]
    streamer.reset()
    again = [streamer.push(pixels[:, t], noise=white[:, :, t : t + 1]).trajectories for t in range(2)]
    assert torch.allclose(first[0], again[0], atol=1e-6) and not torch.allclose(first[1], again[1], atol=1e-3)


def test_the_onnx_stepper_continues_the_prior_as_the_torch_streamer_does(tmp_path):
    """An exported step says the model's correlation in streamer.json, and ``gazeflow stream --backend onnxruntime``
    builds each frame's x_0 from its draws as the torch streamer does (the same seed, the same gaze)."""
    pytest.importorskip("onnxruntime", reason="the [onnx] extra: pip install -e '.[onnx]'")
    from transformers_gazeflow.commands.cli import main
    from transformers_gazeflow.data.processing import GazeFlowVideoProcessor
    from transformers_gazeflow.generation.steppers import OnnxStepper

    model_dir, exported = tmp_path / "model", tmp_path / "exported"
    tiny_model(causal=True, noise_correlation=RHO).save_pretrained(model_dir)
    GazeFlowVideoProcessor(size=32).save_pretrained(model_dir)
    assert main(["export-streamer", "--format", "onnx", "--model", str(model_dir), "-o", str(exported), "-k", "3"]) == 0
    interface = (exported / "streamer.json").read_text()
    assert '"noise_correlation": 0.8' in interface and "rho x_0[t-1]" in interface
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
