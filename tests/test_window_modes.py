"""Joining sliding windows: coherent windows (the default; each window conditioned on the frames it shares with the
ones before) and the paper's blend, through generate, streaming and the command line."""

import json
from functools import partial

import numpy as np
import pytest
import torch

import transformers_gazeflow
from transformers_gazeflow import GazeFlowConfig, GazeFlowModel, GazeFlowVideoProcessor, load_model, model_to_unit
from transformers_gazeflow.generation.windowed import stream_gaze
from transformers_gazeflow.models.gazeflow.generation_gazeflow import SamplingSettings
from transformers_gazeflow.models.gazeflow.scheduling_gazeflow import draw_noise

from .pipeline_fixtures import random_video, single_torch_thread, tiny_model_dir  # noqa: F401  (fixtures)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return GazeFlowModel(GazeFlowConfig.tiny(use_lora=False)).eval()


def pixels(frames: int, seed: int = 0, batch: int = 1) -> torch.Tensor:
    return torch.randn(batch, frames, 3, 32, 32, generator=torch.Generator().manual_seed(seed))


def generate(model, video, mode, seed=0, **kwargs):
    kwargs = {"num_samples": 3, "num_steps": 3, **kwargs}
    return model.generate(
        pixel_values_videos=video, generator=torch.Generator().manual_seed(seed), window_mode=mode, **kwargs
    ).trajectories


def test_coherent_is_the_default_and_differs_from_blend_only_where_windows_meet(model):
    assert GazeFlowConfig.tiny().window_mode == "coherent"
    video = pixels(20)
    default = model.generate(
        pixel_values_videos=video, num_samples=3, num_steps=3, generator=torch.Generator().manual_seed(0)
    ).trajectories
    coherent, blend = generate(model, video, "coherent"), generate(model, video, "blend")
    assert torch.equal(default, coherent)
    # frames 0-3: the first window alone, the same noise (sampled alone vs batched with window 1: float rounding)
    assert torch.allclose(coherent[:, :, :4], blend[:, :, :4], atol=1e-6)
    assert not torch.allclose(coherent[:, :, 4:], blend[:, :, 4:], atol=1e-3)
    one_window = pixels(8)  # nothing to join: both modes are the same single window
    assert torch.allclose(generate(model, one_window, "coherent"), generate(model, one_window, "blend"), atol=1e-6)
    with pytest.raises(ValueError, match="window_mode"):
        generate(model, video, "average")


@pytest.mark.parametrize("solver", ["euler", "heun"])
def test_coherent_windows_are_the_replacement_method_by_hand(model, solver):
    """Window 1 (frames 4-11) is sampled with its overlap (frames 4-7) held at the interpolant of window 0's samples
    under window 0's noise (released from s = 0.9: Heun's last evaluation at s = 1), reading window 0's samples as
    its self-conditioning input; the overlap is then ramped."""
    video, steps, sigma_min = pixels(12, seed=1), 3, model.config.sigma_min
    out = generate(model, video, "coherent", seed=5, num_steps=steps, solver=solver)
    generator = torch.Generator().manual_seed(5)
    noise0, noise1 = (draw_noise((1, 3, 8, 2), generator, torch.device("cpu")) for _ in range(2))
    with torch.no_grad():
        condition0 = model.build_condition(model.encode_video(video[:, :8]), 8)
        condition1 = model.build_condition(model.encode_video(video[:, 4:]), 8)
        first = sample(model, condition0, noise0, steps, solver, None, None)
        noise = torch.cat([noise0[:, :, 4:], noise1[:, :, 4:]], dim=2)
        second = sample(model, condition1, noise, steps, solver, first[:, :, 4:], sigma_min)
    ramp = torch.arange(4.0).view(1, 1, 4, 1) / 4
    expected = torch.cat([first[:, :, :4], (1 - ramp) * first[:, :, 4:] + ramp * second[:, :, :4], second[:, :, 4:]], 2)
    assert torch.allclose(out, model_to_unit(expected).clamp(0, 1), atol=1e-5)


def sample(model, condition, noise, steps, solver, known, sigma_min):
    """Euler or Heun with self-conditioning, holding the first frames at the known trajectory's interpolant."""

    def held(x, s):
        if known is None or s >= 0.9:  # released for the last tenth of the flow
            return x
        x = x.clone()
        x[:, :, : known.shape[2]] = (1 - (1 - sigma_min) * s) * noise[:, :, : known.shape[2]] + s * known
        return x

    def velocity(x, s, x1_hat):
        if known is not None:
            x1_hat = x1_hat.clone()
            x1_hat[:, :, : known.shape[2]] = known
        return model.velocity(x, s, condition, x1_hat)

    x, x1_hat = noise, torch.zeros_like(noise)
    for i in range(steps):
        s, dt = i / steps, 1 / steps
        x = held(x, s)
        v = velocity(x, s, x1_hat)
        if solver == "euler":
            x1_hat, x = x + (1 - s) * v, x + dt * v
        else:
            predicted = held(x + dt * v, s + dt)
            v2 = velocity(predicted, s + dt, x + (1 - s) * v)
            x1_hat, x = predicted + (1 - s - dt) * v2, x + dt * 0.5 * (v + v2)
    return x


@pytest.mark.parametrize(
    "overrides",
    [dict(objective="diffusion"), dict(solver="midpoint"), dict(causal=True), dict(position_encoding="learned")],
)
def test_coherent_windows_run_for_every_variant(overrides):
    torch.manual_seed(0)
    variant = GazeFlowModel(GazeFlowConfig.tiny(use_lora=False, **overrides)).eval()
    video = pixels(14, seed=2)
    out = generate(variant, video, "coherent", num_steps=2)
    assert out.shape == (1, 3, 14, 2) and torch.isfinite(out).all()
    assert not torch.allclose(out, generate(variant, video, "blend", num_steps=2), atol=1e-4)


def test_the_regression_head_has_nothing_to_condition():
    torch.manual_seed(0)
    regression = GazeFlowModel(GazeFlowConfig.tiny(use_lora=False, objective="regression")).eval()
    video = pixels(14, seed=3)
    assert torch.allclose(
        generate(regression, video, "coherent", num_samples=1),
        generate(regression, video, "blend", num_samples=1),
        atol=1e-6,
    )


@pytest.mark.parametrize("mode", ["coherent", "blend"])
@pytest.mark.parametrize("num_frames", [5, 13, 30])
def test_streaming_equals_generate(model, mode, num_frames):
    processor = GazeFlowVideoProcessor(size=32)
    video = random_video(num_frames, seed=num_frames)
    settings = SamplingSettings.resolve(model.config, num_samples=3, num_steps=2, window_mode=mode)
    chunks = list(stream_gaze(model, processor, iter(video), settings, generator=torch.Generator().manual_seed(7)))
    assert [c.start for c in chunks] == list(np.cumsum([0] + [c.num_frames for c in chunks[:-1]]))
    streamed = np.concatenate([c.trajectories for c in chunks], axis=1)
    expected = model.generate(
        pixel_values_videos=processor.preprocess(video)[None],
        num_samples=3,
        num_steps=2,
        generator=torch.Generator().manual_seed(7),
        window_mode=mode,
        window_batch_size=3,
    )
    np.testing.assert_allclose(streamed, expected.trajectories[0].numpy(), atol=1e-5, rtol=0)
    np.testing.assert_allclose(np.concatenate([c.points for c in chunks]), expected.mean[0].numpy(), atol=1e-5)


def test_batching_windows_and_clips_does_not_change_coherent_samples(model):
    video = pixels(23, seed=4, batch=2)
    together = generate(model, video, "coherent", window_batch_size=8)
    assert torch.allclose(together, generate(model, video, "coherent", window_batch_size=1), atol=1e-5)


def boundary_and_inside_steps(trajectories: np.ndarray, num_frames: int, window: int, stride: int):
    """Per-sample steps (px-free, unit coordinates) entering each window's new frames, and all the others."""
    steps = np.linalg.norm(np.diff(trajectories, axis=1), axis=-1)  # [K, T - 1]
    boundary = np.arange(window, num_frames, stride) - 1  # the step into frame s + W of the window at s
    inside = np.setdiff1d(np.arange(num_frames - 1), boundary)
    return steps[:, boundary].reshape(-1), steps[:, inside].reshape(-1)


def test_coherent_samples_are_continuous_through_window_boundaries():
    """With the bundled model on synthetic clips: a coherent sample's step into a window's new frames is of the size
    of its steps inside windows, far from the jump between two unrelated samples that independent windows would
    make, and coherent samples move less than blended ones.

    The step into the new frames is 1.2-1.4x the median step inside windows for the bundled models measured (it is
    the first frame the window samples freely); a jump (sample k's last shared frame to another sample's next
    frame) is 4-6x."""
    from transformers_gazeflow.data.synthetic import SyntheticGazeSettings, generate_clip

    bundled = load_model(transformers_gazeflow.default_model_path())
    processor = GazeFlowVideoProcessor.from_pretrained(transformers_gazeflow.default_model_path())
    window, stride = bundled.config.num_frames, bundled.config.window_stride
    frames = window + 6 * stride  # 7 windows
    settings = SyntheticGazeSettings(num_clips=6, min_frames=frames, max_frames=frames, seed=11)
    steps = {"coherent": ([], []), "blend": ([], [])}
    jumps = []
    new_frames = np.arange(window, frames, stride)  # the first new frame of each window after the first
    for index in range(settings.num_clips):
        video = processor.preprocess(generate_clip(settings, index).render())[None]
        for mode, (boundary, inside) in steps.items():
            out = (
                bundled.generate(
                    video, num_samples=16, generator=torch.Generator().manual_seed(index), window_mode=mode
                )
                .trajectories[0]
                .numpy()
            )
            b, i = boundary_and_inside_steps(out, frames, window, stride)
            boundary.append(b)
            inside.append(i)
            if mode == "coherent":  # what a cut between unrelated draws would step: sample k -> sample k + 1
                jumps.append(
                    np.linalg.norm(np.roll(out, 1, axis=0)[:, new_frames] - out[:, new_frames - 1], axis=-1).reshape(-1)
                )
    median = {mode: (np.median(np.concatenate(b)), np.median(np.concatenate(i))) for mode, (b, i) in steps.items()}
    boundary, inside = median["coherent"]
    jump = np.median(np.concatenate(jumps))
    assert boundary < 1.5 * inside and boundary < 0.35 * jump, (median, jump)
    all_steps = {mode: np.median(np.concatenate(b + i)) for mode, (b, i) in steps.items()}
    assert all_steps["coherent"] < all_steps["blend"], all_steps


def test_the_command_line_takes_the_window_mode(tiny_model_dir, tmp_path, capsys):  # noqa: F811
    from transformers_gazeflow.commands.cli import main
    from transformers_gazeflow.data.video import write_video

    video = write_video(tmp_path / "clip.mp4", random_video(12, seed=1), fps=12)
    out = tmp_path / "out"
    assert (
        main(
            [
                "predict",
                str(video),
                "--model",
                str(tiny_model_dir),
                "-o",
                str(out),
                "--window-mode",
                "blend",
                "--no-overlay",
                "-q",
            ]
        )
        == 0
    )
    assert json.loads((out / "summary.json").read_text())["window_mode"] == "blend"
    assert main(["predict", str(video), "-o", str(tmp_path / "bad"), "--window-mode", "average"]) == 2  # usage error
    assert "--window-mode: invalid choice: 'average'" in capsys.readouterr().err


@pytest.mark.parametrize("mode", ["coherent", "blend"])
def test_a_frames_prediction_does_not_depend_on_the_requested_range(tiny_model_dir, mode):  # noqa: F811
    """Windows come from the whole video's grid, whatever frames are asked for. (Windows are encoded in batches
    whose make-up depends on the range: equal up to float rounding, 1e-6.)"""
    from transformers import pipeline

    gaze = pipeline("egocentric-gaze", model=str(tiny_model_dir))
    video = random_video(100, seed=3)
    run = lambda **kwargs: gaze(video, seed=1, fps=25, window_mode=mode, **kwargs).trajectories  # noqa: E731
    whole = run()
    to_64, to_96 = run(end_frame=64), run(end_frame=96)
    assert to_64.shape[1] == 64 and to_96.shape[1] == 96
    same = partial(np.testing.assert_allclose, rtol=0, atol=1e-6)
    same(to_64[:, 32:64], to_96[:, 32:64])
    same(to_96, whole[:, :96])
    from_5 = run(start_frame=5)
    same(from_5, whole[:, 5:])
    later = run(start_frame=40, end_frame=70)
    if mode == "blend":  # a frame depends only on the windows covering it
        same(later, whole[:, 40:70])
    else:  # coherent windows also depend on the windows before them: the chain starts at the first one run
        assert later.shape == (4, 30, 2) and not np.allclose(later, whole[:, 40:70])
