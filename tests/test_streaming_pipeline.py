"""The stream at the kernels' speed: decoding in a thread, windows encoded in batches, preprocessing on the model's
device, fewer kernels per network call, the weights' dtype and the stage times. Each change keeps the results:
the batched, threaded stream gives the serial one's trajectories; the fused encoder attention, the stacked
projections and the reused time embeddings give the plain computation's outputs bit for bit (CPU, fp32)."""

from __future__ import annotations

import copy
import json
import threading

import numpy as np
import pytest
import torch
from transformers import VJEPA2Config

import transformers_gazeflow  # noqa: F401  (registers the task)
from transformers_gazeflow import GazeFlowConfig, GazeFlowModel, GazeFlowPipeline, load_model
from transformers_gazeflow.data.video import BackgroundFrames, write_video
from transformers_gazeflow.generation.inference import prepare_for_inference, resolve_inference_dtype
from transformers_gazeflow.models.gazeflow.generation_gazeflow import (
    SamplingSettings,
    TimeEmbeddings,
    WindowSampler,
    sample_window,
)
from transformers_gazeflow.models.gazeflow.scheduling_gazeflow import draw_noise

from .pipeline_fixtures import random_video, single_torch_thread, tiny_model_dir  # noqa: F401  (fixtures)


def bundled_pipeline(**options) -> GazeFlowPipeline:
    return GazeFlowPipeline(model=load_model(transformers_gazeflow.default_model_path()), device="cpu", **options)


# ---------------------------------------------------------------------------------------------------- the stream
@pytest.mark.parametrize("mode", ["coherent", "blend"])
def test_the_batched_threaded_stream_gives_the_serial_streams_trajectories(tmp_path, mode):
    """Eight windows per encoder call, frames read in a thread and processed a batch at a time, against one window
    at a time with frames read and processed one by one in the loop (what the stream did before), on an mp4."""
    video = write_video(tmp_path / "clip.mp4", random_video(90, height=72, width=96, seed=4), fps=24)
    serial = bundled_pipeline(window_batch_size=1, decode_in_thread=False)
    overlapped = bundled_pipeline()
    assert overlapped.window_batch_size == 8 and overlapped.decode_in_thread
    for kwargs in ({}, {"start_frame": 21, "end_frame": 67}):
        expected = serial(str(video), num_samples=6, num_steps=3, seed=2, window_mode=mode, **kwargs).trajectories
        got = overlapped(str(video), num_samples=6, num_steps=3, seed=2, window_mode=mode, **kwargs).trajectories
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)


def test_a_window_batch_of_three_on_a_tiny_model_equals_one_at_a_time(tiny_model_dir):  # noqa: F811
    video = random_video(47, seed=8)
    one = GazeFlowPipeline(model=load_model(tiny_model_dir), device="cpu", window_batch_size=1)(video, fps=24, seed=5)
    three = GazeFlowPipeline(model=load_model(tiny_model_dir), device="cpu", window_batch_size=3)(video, fps=24, seed=5)
    np.testing.assert_allclose(three.trajectories, one.trajectories, rtol=0, atol=1e-6)


def test_bad_window_batch_size_and_dtype_are_one_line_errors(tiny_model_dir):  # noqa: F811
    model = load_model(tiny_model_dir)
    with pytest.raises(ValueError, match="`window_batch_size` must be an int >= 1, got 0"):
        GazeFlowPipeline(model=model, device="cpu", window_batch_size=0)
    with pytest.raises(ValueError, match="`dtype` must be 'auto' or one of"):
        GazeFlowPipeline(model=model, device="cpu", dtype="half")
    with pytest.raises(ValueError, match="cuda_graphs=True needs a CUDA device"):
        GazeFlowPipeline(model=model, device="cpu", cuda_graphs=True)


def test_inference_dtype_is_float32_on_the_cpu_and_bfloat16_on_cuda_by_default():
    assert resolve_inference_dtype("auto", "cpu") == torch.float32
    assert resolve_inference_dtype(None, "cpu") == torch.float32
    assert resolve_inference_dtype("bfloat16", "cpu") == torch.bfloat16
    assert resolve_inference_dtype(torch.float16, "cpu") == torch.float16
    if torch.cuda.is_available() and torch.cuda.is_bf16_supported():
        assert resolve_inference_dtype("auto", "cuda") == torch.bfloat16
    with pytest.raises(ValueError, match="`dtype` must be one of"):
        resolve_inference_dtype(torch.int8, "cpu")


def test_bfloat16_weights_on_the_cpu_stay_close_to_float32(tiny_model_dir):  # noqa: F811
    """The weights cast once (no autocast): x_s stays float32, the network runs in bf16 (the documented bf16
    tolerance of tests/gpu: mean < 2e-2, max < 1e-1 in unit coordinates)."""
    video = random_video(20, seed=2)
    full = GazeFlowPipeline(model=load_model(tiny_model_dir), device="cpu")(video, fps=24, seed=1)
    half = GazeFlowPipeline(model=load_model(tiny_model_dir), device="cpu", dtype="bfloat16")
    assert next(half.model.parameters()).dtype == torch.bfloat16
    out = half(video, fps=24, seed=1)
    assert out.trajectories.dtype == np.float32
    difference = np.abs(out.trajectories - full.trajectories)
    assert difference.mean() < 2e-2 and difference.max() < 1e-1


def test_the_command_writes_its_dtype_and_stage_times(tiny_model_dir, tmp_path):  # noqa: F811
    from transformers_gazeflow.commands.cli import main

    video = write_video(tmp_path / "clip.mp4", random_video(30, seed=1), fps=12)
    assert (
        main(
            [
                "predict",
                str(video),
                "--model",
                str(tiny_model_dir),
                "-o",
                str(tmp_path / "out"),
                "--no-overlay",
                "-q",
                "--dtype",
                "float32",
            ]
        )
        == 0
    )
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["dtype"] == "float32"
    stages = summary["timings"]["stages_s"]
    assert {"decode", "preprocess", "encode", "sample", "write", "wait_for_frames", "stream"} <= set(stages)
    assert all(seconds >= 0 for seconds in stages.values()) and stages["encode"] > 0 and stages["sample"] > 0
    assert "CUDA events" in summary["timings"]["stages_measured"]


def test_the_command_refuses_an_unknown_dtype(tmp_path, capsys):
    from transformers_gazeflow.commands.cli import main

    assert main(["predict", str(tmp_path / "v.mp4"), "-o", str(tmp_path / "out"), "--dtype", "int8"]) == 2
    assert "--dtype: invalid choice: 'int8'" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------- reading frames
def test_background_frames_come_in_order_and_stop_with_the_consumer():
    closed = threading.Event()

    def frames():
        try:
            yield from range(1000)
        finally:
            closed.set()

    reader = BackgroundFrames(frames(), capacity=8, chunk=3)
    taken = []
    for value in reader:
        taken.append(value)
        if len(taken) == 10:
            break
    reader.close()
    assert taken == list(range(10))
    assert closed.wait(5) and not reader._thread.is_alive()  # the thread closed the source and ended
    assert list(BackgroundFrames(range(7), chunk=2)) == list(range(7))


def test_background_frames_raise_the_sources_error_in_the_consumer():
    def frames():
        yield from range(5)
        raise ValueError("frame 5 is damaged")

    taken = []
    with pytest.raises(ValueError, match="frame 5 is damaged"):
        for value in BackgroundFrames(frames(), chunk=2):
            taken.append(value)
    assert taken == list(range(5))


# ---------------------------------------------------------------------------------------------------- kernels
def paper_shaped_encoder_config(**overrides) -> GazeFlowConfig:
    """V-JEPA 2's head geometry (head_dim 64: three RoPE sections of 20 channels and 4 unrotated) at a tiny size."""
    encoder = VJEPA2Config(
        hidden_size=128,
        num_attention_heads=2,
        num_hidden_layers=2,
        mlp_ratio=2.0,
        patch_size=8,
        crop_size=32,
        frames_per_clip=8,
        tubelet_size=2,
    )
    return GazeFlowConfig.tiny(encoder_config=encoder, **overrides)


@pytest.mark.parametrize("use_lora", [False, True])
def test_the_fused_encoder_attention_equals_transformers_bit_for_bit(use_lora):
    torch.manual_seed(0)
    model = GazeFlowModel(paper_shaped_encoder_config(use_lora=use_lora)).eval()
    with torch.no_grad():  # give the adapters weight so that merging them is real work
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0, 0.05)
    pixels = torch.randn(2, 8, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    plain = prepare_for_inference(copy.deepcopy(model), fuse_attention=False)
    fused = prepare_for_inference(copy.deepcopy(model))
    kinds = {type(m).__name__ for m in fused.video_encoder.modules()}
    assert "GazeFlowFusedRopeAttention" in kinds and "VJEPA2RopeAttention" not in kinds
    with torch.no_grad():
        expected = plain.encode_video(pixels)
        assert torch.equal(fused.encode_video(pixels), expected)
        assert torch.equal(fused.encode_video(pixels), expected)  # the cached tables and stacked weights
    assert fused.state_dict().keys() == plain.state_dict().keys()


def test_stacked_projections_follow_weights_changed_in_place():
    """The stacked q/k/v weights are kept between calls without autograd: a weight changed in place (an optimizer
    step, load_state_dict) must be seen at the next call."""
    torch.manual_seed(0)
    model = GazeFlowModel(GazeFlowConfig.tiny()).eval()
    tokens = torch.randn(1, 4 * model.config.tokens_per_frame, model.config.encoder_config.hidden_size)
    sample = torch.randn(1, 3, 8, 2)
    with torch.no_grad():
        condition = model.build_condition(tokens, 8)
        before = model.velocity(sample, 0.3, condition, sample)
        for block in model.velocity_network.blocks:
            block.self_attention.k_proj.weight.mul_(1.5)
        after = model.velocity(sample, 0.3, condition, sample)
        fresh = copy.deepcopy(model)
        fresh.velocity_network.blocks.apply(lambda m: m.__dict__.pop("_stacked_weights", None))
        assert not torch.equal(after, before)
        assert torch.equal(after, fresh.velocity(sample, 0.3, condition, sample))


@pytest.mark.parametrize("solver", ["euler", "heun"])
def test_time_embeddings_are_computed_once_per_flow_time_and_change_nothing(solver):
    torch.manual_seed(0)
    model = GazeFlowModel(GazeFlowConfig.tiny()).eval()
    tokens = torch.randn(1, 4 * model.config.tokens_per_frame, model.config.encoder_config.hidden_size)
    noise = draw_noise((1, 3, 8, 2), torch.Generator().manual_seed(0), torch.device("cpu"))
    settings = SamplingSettings.resolve(model.config, num_samples=3, num_steps=4, solver=solver)
    with torch.no_grad():
        calls = []
        hook = model.velocity_network.time_embedding.register_forward_hook(lambda *_: calls.append(1))
        sampler = WindowSampler(model, settings)
        condition = model.build_condition(tokens, 8)
        first = sampler(condition, noise)
        second = sampler(condition, noise)
        hook.remove()
        expected = sample_window(model, tokens, 8, noise, settings, use_condition_cache=False)
    assert isinstance(sampler.time_embeddings, TimeEmbeddings)
    assert len(calls) == (4 if solver == "euler" else 5)  # the distinct flow times (Heun: s_0..s_4), once per run
    assert torch.equal(first, second)
    torch.testing.assert_close(first, expected, rtol=0, atol=1e-5)  # the plain reference path


def test_frames_checked_and_processed_in_the_reading_thread_feed_the_stream_unchanged(tiny_model_dir):  # noqa: F811
    """On the CPU the reading thread also checks and processes the frames (FramePreparer): the stream gives what it
    gives from raw frames, and a bad frame is still a one-line error naming it."""
    from transformers_gazeflow.generation.windowed import FramePreparer, stream_gaze

    gaze = GazeFlowPipeline(model=load_model(tiny_model_dir), device="cpu")
    video = random_video(29, seed=6)
    settings = SamplingSettings.resolve(gaze.model.config, num_samples=2, num_steps=2)

    def run(frames):
        chunks = stream_gaze(
            gaze.model,
            gaze.video_processor,
            frames,
            settings,
            generator=torch.Generator().manual_seed(0),
            window_batch_size=2,
        )
        return np.concatenate([chunk.trajectories for chunk in chunks], axis=1)

    prepared = BackgroundFrames(iter(video), chunk=5, transform=FramePreparer(gaze.video_processor))
    # (chunks of 5 frames can make a batch of 3 windows ready at once: equal up to float rounding)
    np.testing.assert_allclose(run(prepared), run(iter(video)), rtol=0, atol=1e-6)
    bad = [*video[:7], video[7, :10], *video[8:]]
    with pytest.raises(ValueError, match="frame 7 is 64x10 but the video.s frames are 64x48"):
        run(BackgroundFrames(iter(bad), chunk=3, transform=FramePreparer(gaze.video_processor)))
