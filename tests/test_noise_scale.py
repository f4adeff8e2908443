"""The sampler's noise scale tau (``noise_scale``): x_0 = tau e, from the config's default or a call's argument, in the
windowed engine, ``generate()``, the causal streamer's step, its ``streamer.json``, the pipeline and the command.

With the velocity network's output head at zero the ODE does not move (v = 0), so every sample is its x_0: the
expectations below are tau times the draw, by hand."""

import json
import math

import pytest
import torch

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel, GazeFlowVideoProcessor, model_to_unit
from transformers_gazeflow.generation import onnx_export
from transformers_gazeflow.generation.streaming_step import GazeFlowStreamerStep
from transformers_gazeflow.models.gazeflow.generation_gazeflow import SamplingSettings, sample_with

from .pipeline_fixtures import random_video, tiny_model_dir  # noqa: F401


def still_model(**overrides) -> GazeFlowModel:
    """A tiny model whose velocity is zero everywhere: its samples are their x_0."""
    torch.manual_seed(0)
    model = GazeFlowModel(GazeFlowConfig.tiny(use_lora=False, **overrides)).eval()
    with torch.no_grad():
        model.velocity_network.output_head.weight.zero_()
        model.velocity_network.output_head.bias.zero_()
    return model


def test_the_settings_take_the_config_default_and_a_call_overrides_it():
    config = GazeFlowConfig.tiny(use_lora=False, noise_scale=0.6)
    assert SamplingSettings.resolve(GazeFlowConfig.tiny(use_lora=False)).noise_scale == 1.0  # the paper's x_0
    assert SamplingSettings.resolve(config).noise_scale == 0.6
    assert SamplingSettings.resolve(config, noise_scale=0.25).to_dict()["noise_scale"] == 0.25
    for bad in (0, -0.5, math.nan, math.inf, True, "0.5"):
        with pytest.raises(ValueError, match=r"^`noise_scale` \(tau\) must be a number > 0, got"):
            SamplingSettings.resolve(config, noise_scale=bad)
    for bad in (0, -1.0, math.inf):
        with pytest.raises(ValueError, match="noise_scale"):
            GazeFlowConfig.tiny(use_lora=False, noise_scale=bad)


@pytest.mark.parametrize("known_frames", [0, 2])
def test_the_windowed_engine_starts_from_tau_times_the_draw(known_frames):
    model = still_model()
    noise = torch.randn(2, 3, 8, 2, generator=torch.Generator().manual_seed(1))
    known = 0.3 * torch.randn(2, 3, known_frames, 2) if known_frames else None

    def still(sample, flow_time, self_condition):
        return torch.zeros_like(sample)

    for tau in (1.0, 0.5):
        settings = SamplingSettings.resolve(model.config, num_samples=3, num_steps=4, noise_scale=tau)
        sampled = sample_with(model, still, noise, settings, known)
        # known frames are held at their noised value until the release and then move no more (v = 0); the others
        # are their x_0 = tau e throughout
        assert torch.allclose(sampled[:, :, known_frames:], tau * noise[:, :, known_frames:], atol=1e-6, rtol=0)


def test_generate_scales_x0_in_every_window():
    """Whole clips of two windows (coherent and blend): with v = 0 every output is linear in tau, so the samples'
    offsets from the frame centre at tau = 0.2 are twice those at tau = 0.1 (no clamping at these sizes)."""
    model = still_model()
    frames = torch.randn(1, model.config.num_frames + 4, 3, model.config.image_size, model.config.image_size)
    for mode in ("coherent", "blend"):
        outputs = {
            tau: model.generate(
                frames, num_samples=4, generator=torch.Generator().manual_seed(3), window_mode=mode, noise_scale=tau
            ).trajectories
            for tau in (0.1, 0.2)
        }
        assert outputs[0.1].sub(0.5).abs().max() < 0.49  # inside the frame: no clamp
        torch.testing.assert_close(outputs[0.2] - 0.5, 2 * (outputs[0.1] - 0.5), atol=1e-6, rtol=0)
        assert not torch.allclose(outputs[0.2], outputs[0.1])


def test_the_streamer_step_starts_from_tau_times_its_noise_input():
    model = still_model(causal=True)
    size = model.config.image_size
    noise = 0.4 * torch.randn(1, 3, 1, 2, generator=torch.Generator().manual_seed(2))
    for tau in (1.0, 0.5):
        settings = SamplingSettings.resolve(model.config, num_samples=3, num_steps=2, noise_scale=tau)
        step = GazeFlowStreamerStep(model, settings).eval()
        state = step.new_state(1)
        for _ in range(3):
            trajectories, _ = step(torch.randn(1, 3, size, size), noise, state)
        torch.testing.assert_close(trajectories, model_to_unit(tau * noise[:, :, 0]), atol=1e-6, rtol=0)
        record = onnx_export.streamer_interface(step, state, GazeFlowVideoProcessor(), 17, "still")
        assert record["noise_scale"] == tau  # streamer.json says what the graph fixed
        noise_meaning = next(entry["meaning"] for entry in record["inputs"] if entry["name"] == "noise")
        assert ("x_0 = noise_scale (0.5) times this input" in noise_meaning) == (tau != 1)


def test_an_exported_step_says_its_tau_and_refuses_another():
    config = GazeFlowConfig.tiny(use_lora=False, causal=True)
    settings = SamplingSettings.resolve(config, num_samples=2, num_steps=2, noise_scale=0.5)
    interface = {"num_samples": 2, "num_steps": 2, "solver": "euler", "noise_scale": 0.5}
    assert onnx_export.exported_settings(interface) == settings
    assert onnx_export.sampling_mismatches(interface, {"noise_scale": 0.7}) == [("noise_scale", 0.7, 0.5)]
    assert onnx_export.sampling_mismatches(interface, {"noise_scale": None, "num_samples": 2}) == []
    # an export made before the option (no key) sampled from tau = 1, and reads back so
    assert onnx_export.exported_settings({"num_samples": 2, "num_steps": 2, "solver": "euler"}).noise_scale == 1.0


def test_the_command_takes_the_noise_scale(tiny_model_dir, tmp_path, capsys):  # noqa: F811
    from transformers_gazeflow.commands.cli import main
    from transformers_gazeflow.data.video import write_video

    video = write_video(tmp_path / "clip.mp4", random_video(12, seed=1), fps=12)
    out = tmp_path / "out"
    assert main(["predict", str(video), "--model", str(tiny_model_dir), "-o", str(out), "--noise-scale", "0.5",
                 "--no-overlay", "-q"]) == 0  # fmt: skip
    assert json.loads((out / "summary.json").read_text())["noise_scale"] == 0.5
    for bad in ("0", "-1", "inf"):
        assert main(["predict", str(video), "-o", str(tmp_path / "bad"), "--noise-scale", bad]) == 2  # usage error
        error = capsys.readouterr().err
        assert f"--noise-scale {float(bad)}: expected a number > 0" in error and len(error.strip().splitlines()) == 1
    assert not (tmp_path / "bad").exists()


def test_the_pipeline_takes_and_records_the_noise_scale(tiny_model_dir, tmp_path):  # noqa: F811
    from transformers import pipeline

    from transformers_gazeflow.data.video import write_video

    video = str(write_video(tmp_path / "clip.mp4", random_video(10, seed=2), fps=10))
    gaze = pipeline("egocentric-gaze", model=str(tiny_model_dir))
    default, tempered = gaze(video, num_samples=4), gaze(video, num_samples=4, noise_scale=0.5)
    assert (default.noise_scale, tempered.noise_scale, tempered["noise_scale"]) == (1.0, 0.5, 0.5)
    # the same seed's draws at half the scale: the samples gather closer around their mean
    spread = {out.noise_scale: (out.trajectories - out.points).std() for out in (default, tempered)}
    assert spread[0.5] < spread[1.0]


@pytest.mark.parametrize(
    "field, text, accepted",
    [
        ("noise_scale", "0.85", True),
        ("noise_scale", "1e-6", True),
        ("noise_scale", "0", False),
        ("noise_scale", "-1", False),
        ("noise_scale", "inf", False),
        ("noise_scale", "nan", False),
        ("time_grid_power", "1", True),
        ("time_grid_power", "0.5", False),
    ],
)
def test_a_script_flag_for_a_config_number_accepts_what_the_config_accepts(field, text, accepted):
    import argparse

    from transformers_gazeflow.analysis.capture import config_number

    try:
        GazeFlowConfig.tiny(**{field: float(text)})
        config_accepts = True
    except ValueError:
        config_accepts = False
    assert config_accepts == accepted  # the expectation, by hand; the flag must agree with both
    parser = argparse.ArgumentParser(prog="script.py")
    parser.add_argument(f"--{field}", type=config_number(field))
    if accepted:
        assert getattr(parser.parse_args([f"--{field}", text]), field) == float(text)
    else:
        with pytest.raises(argparse.ArgumentTypeError, match=f"^must be a number .*got {float(text)}$"):
            config_number(field)(text)
    with pytest.raises(argparse.ArgumentTypeError, match="expected a number, got 'x'"):
        config_number(field)("x")
