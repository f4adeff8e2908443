"""CUDA pitfalls found without a GPU, each pinned by a test that runs on the CPU.

The model runs on the ``meta`` device under :class:`tests.device_audit.HostDeviceAudit`: a tensor made on the CPU
and combined with the device's raises there as it would on CUDA, and every host -> device copy is recorded with
the line that made it. On CUDA such a copy from pageable memory waits for the whole stream: inside the sampler's
loop it would stall the GPU at every network call.
"""

import pytest
import torch

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel

from .device_audit import HostDeviceAudit


def meta_model(**overrides) -> GazeFlowModel:
    torch.manual_seed(0)
    return GazeFlowModel(GazeFlowConfig.tiny(**overrides)).eval().to("meta")


@pytest.mark.parametrize("solver", ["euler", "heun"])
def test_generate_on_a_device_copies_nothing_from_the_host_but_the_noise(solver):
    model = meta_model(use_lora=True)
    pixels = torch.randn(1, 12, 3, 32, 32, device="meta")  # two windows of 8 frames (stride 4)
    with HostDeviceAudit() as audit:
        out = model.generate(pixel_values_videos=pixels, num_samples=4, num_steps=3, solver=solver)
    assert out.trajectories.device.type == "meta" and out.trajectories.shape == (1, 4, 12, 2)
    assert audit.transfers == [], [str(t) for t in audit.transfers]

    with HostDeviceAudit() as audit:  # a CPU generator: the noise is drawn on the CPU (the same seed anywhere)
        model.generate(
            pixel_values_videos=pixels,
            num_samples=4,
            num_steps=3,
            solver=solver,
            generator=torch.Generator().manual_seed(0),
        )
    copies = audit.host_to_device()
    # one copy per batch of windows: the two windows' noise, drawn one window after the other, moved together
    assert [t.shape for t in copies] == [(2, 4, 8, 2)], [str(t) for t in audit.transfers]
    assert audit.device_to_host() == []


def test_streamer_push_copies_nothing_from_the_host():
    from transformers_gazeflow import GazeFlowStreamer

    streamer = GazeFlowStreamer(meta_model(causal=True), num_samples=4, num_steps=2)
    frames = torch.randn(3, 3, 32, 32, device="meta")  # frames already on the device, as a camera loop would push
    with HostDeviceAudit() as audit:
        outputs = [streamer.push(frame) for frame in frames]
    assert [o.trajectories.shape for o in outputs] == [(1, 4, 2)] * 3 and outputs[-1].mean.device.type == "meta"
    assert audit.transfers == [], [str(t) for t in audit.transfers]


def static_output_compile(calls: list):
    """A stand-in for ``torch.compile(mode="reduce-overhead")`` on CUDA: the compiled function returns its output in
    one static buffer that the next call overwrites, as a CUDA graph replay does."""

    def compile(function, mode=None, dynamic=None, **kwargs):
        calls.append(mode)
        static: dict = {}

        def replay(*args, **kw):
            out = function(*args, **kw)
            buffer = static.setdefault(tuple(out.shape), torch.empty_like(out))
            return buffer.copy_(out)

        return replay

    return compile


@pytest.mark.parametrize(
    "solver,objective",
    [("heun", "flow_matching"), ("euler", "regression"), ("midpoint", "flow_matching"), ("euler", "flow_matching")],
)
def test_cuda_graph_outputs_are_copied_out_before_the_next_replay(monkeypatch, solver, objective):
    """Heun keeps the first velocity of a step across the second network call, and the regression head's windows
    are the network's outputs, kept across later windows: with CUDA graphs (``compile_mode="reduce-overhead"``) the
    next replay would overwrite them (torch raises "accessing tensor output of CUDAGraphs that has been
    overwritten"). Midpoint and Euler read each output before the next call (checked too)."""
    from transformers_gazeflow.generation.inference import prepare_for_inference

    torch.manual_seed(0)
    eager = GazeFlowModel(GazeFlowConfig.tiny(objective=objective)).eval()
    compiled = GazeFlowModel(GazeFlowConfig.tiny(objective=objective)).eval()
    compiled.load_state_dict(eager.state_dict())
    calls: list = []
    monkeypatch.setattr(torch, "compile", static_output_compile(calls))
    prepare_for_inference(compiled, compile=True, compile_mode="reduce-overhead")
    assert calls == ["reduce-overhead"]
    pixels = torch.randn(1, 12, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    samples = 1 if objective == "regression" else 4
    kwargs = dict(num_samples=samples, num_steps=3, solver=solver, window_batch_size=1)
    expected = eager.generate(pixel_values_videos=pixels, generator=torch.Generator().manual_seed(0), **kwargs)
    got = compiled.generate(pixel_values_videos=pixels, generator=torch.Generator().manual_seed(0), **kwargs)
    assert torch.allclose(got.trajectories, expected.trajectories, atol=1e-6), (
        (got.trajectories - expected.trajectories).abs().max()
    )


def test_learned_positions_are_checked_without_reading_the_device():
    model = meta_model(position_encoding="learned")
    tokens = torch.randn(1, 4 * model.config.tokens_per_frame, 32, device="meta")  # 4 tubelets = 8 frames
    with HostDeviceAudit() as audit:
        model.generate(encoder_hidden_states=tokens, num_samples=2, num_steps=2)
    assert audit.transfers == [], [str(t) for t in audit.transfers]
    too_long = torch.randn(1, 8 * model.config.tokens_per_frame, 32, device="meta")  # 16 frames > the table's 8
    with pytest.raises(ValueError, match="table of num_frames=8 rows; frame index 15 is out of range"):
        model.generate(encoder_hidden_states=too_long, num_samples=2, num_steps=2)


def test_feature_cache_stores_fp32_tokens_under_autocast(tmp_path, monkeypatch):
    """train.py builds the cache under ``accelerator.autocast()``: on the CPU the encoder then returns bf16 tokens
    (on CUDA its last layer norm returns fp32), so a cache built with ``--mixed_precision bf16`` on one device
    would feed bf16 tokens to a later fp32 run of the same cache, which fails in W_proj."""
    from transformers_gazeflow.data.collator import GazeFlowDataCollator
    from transformers_gazeflow.data.processing import GazeFlowVideoProcessor
    from transformers_gazeflow.training.datasets import load_training_splits
    from transformers_gazeflow.training.feature_cache import CachedFeatureCollator, FeatureCache, cache_fingerprint

    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf_cache"))
    train, _ = load_training_splits("synthetic", tmp_path / "synthetic", "tiny", window_frames=8, window_stride=4)
    torch.manual_seed(0)
    model = GazeFlowModel(GazeFlowConfig.tiny(use_lora=False)).eval()
    processor = GazeFlowVideoProcessor(size=model.config.image_size)
    examples = [train[i] for i in range(4)]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert (
            model.encode_video(GazeFlowDataCollator(processor, 8)(examples)["pixel_values_videos"]).dtype
            == torch.bfloat16
        )  # what the cache receives
        cache = FeatureCache(tmp_path / "cache", cache_fingerprint(model, processor)).build(
            model, [examples], GazeFlowDataCollator(processor, 8), batch_size=4
        )
    batch = CachedFeatureCollator(cache, processor, num_frames=8)(examples)
    assert batch["encoder_hidden_states"].dtype == torch.float32
    loss = model(
        encoder_hidden_states=batch["encoder_hidden_states"], gaze=batch["gaze"], valid_mask=batch["valid_mask"]
    ).loss  # an fp32 run of the same cache
    assert torch.isfinite(loss)
