"""The causal variant (paper Appendix F.4) and the streamer: the output at frame t never depends on a later frame,
through the encoder included, and frame-by-frame streaming equals the causal model run on the same prefix."""

from pathlib import Path

import numpy as np
import pytest
import torch

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel, unit_to_model
from transformers_gazeflow.data.processing import GazeFlowVideoProcessor
from transformers_gazeflow.generation.online import GazeFlowStreamer
from transformers_gazeflow.models.gazeflow.modeling_gazeflow_causal import causal_encoder_windows, causal_task_tokens

from .script_loading import load_script

REPO = Path(__file__).resolve().parents[1]
ReferenceStreamer = load_script(REPO / "benchmarks" / "streaming_reference.py", "streaming_reference").ReferenceStreamer
"""The causal streamer as it was before the static step (``benchmarks/streaming_reference.py``)."""


def tiny_model(seed: int = 0, **overrides) -> GazeFlowModel:
    torch.manual_seed(seed)
    return GazeFlowModel(GazeFlowConfig.tiny(use_lora=False, **overrides)).eval()


def video(batch=2, frames=8, seed=0):
    return torch.randn(batch, frames, 3, 32, 32, generator=torch.Generator().manual_seed(seed))


def with_changed_future(pixels: torch.Tensor, last_kept: int, seed: int = 9) -> torch.Tensor:
    changed = pixels.clone()
    changed[:, last_kept + 1 :] = torch.randn(
        changed[:, last_kept + 1 :].shape, generator=torch.Generator().manual_seed(seed)
    )
    return changed


def test_causal_windows_never_reach_past_the_frame():
    frames = torch.arange(5.0).view(1, 5, 1, 1, 1).expand(1, 5, 3, 2, 2)
    windows = causal_encoder_windows(frames, 4)[:, :, 0, 0, 0]  # [T, window] frame indices
    assert windows.tolist() == [[0, 0, 0, 0], [0, 0, 0, 1], [0, 0, 1, 2], [0, 1, 2, 3], [1, 2, 3, 4]]


@pytest.mark.parametrize(
    "overrides",
    [
        dict(),
        dict(causal_encoder_frames=4),
        dict(solver="heun"),
        dict(objective="diffusion"),
        dict(task_guidance="concat"),
        dict(num_temporal_layers=1),
    ],
)
def test_causal_output_at_t_is_unchanged_by_later_frames_through_the_encoder(overrides):
    model = tiny_model(causal=True, **overrides)
    pixels = video()
    for t in (0, 3, 6):
        changed = with_changed_future(pixels, t)
        tokens, changed_tokens = model.encode_video(pixels), model.encode_video(changed)
        n = model.config.tokens_per_frame
        assert torch.equal(tokens[:, : (t + 1) * n], changed_tokens[:, : (t + 1) * n])
        assert not torch.allclose(tokens[:, (t + 1) * n :], changed_tokens[:, (t + 1) * n :])
        out = model.generate(pixel_values_videos=pixels, generator=torch.Generator().manual_seed(0)).trajectories
        out_changed = model.generate(
            pixel_values_videos=changed, generator=torch.Generator().manual_seed(0)
        ).trajectories
        assert torch.allclose(out[:, :, : t + 1], out_changed[:, :, : t + 1], atol=1e-6), t
        assert not torch.allclose(out[:, :, t + 1 :], out_changed[:, :, t + 1 :], atol=1e-4), t


def test_bidirectional_model_does_look_ahead():
    """The same check fails for the default model: its frame t reads later frames."""
    model = tiny_model()
    pixels = video()
    changed = with_changed_future(pixels, 3)
    out = model.generate(pixel_values_videos=pixels, generator=torch.Generator().manual_seed(0)).trajectories
    out_changed = model.generate(pixel_values_videos=changed, generator=torch.Generator().manual_seed(0)).trajectories
    assert not torch.allclose(out[:, :, :4], out_changed[:, :, :4], atol=1e-4)


def test_causal_output_is_unchanged_by_later_frames_across_sliding_windows():
    model = tiny_model(causal=True)
    pixels = video(1, frames=14)
    changed = with_changed_future(pixels, 9)
    out = model.generate(pixel_values_videos=pixels, generator=torch.Generator().manual_seed(0)).trajectories
    out_changed = model.generate(pixel_values_videos=changed, generator=torch.Generator().manual_seed(0)).trajectories
    assert torch.allclose(out[:, :, :10], out_changed[:, :, :10], atol=1e-6)


def test_causal_training_loss_at_early_frames_ignores_later_frames():
    model = tiny_model(causal=True, self_conditioning_prob=0.0)
    pixels = video()
    gaze = unit_to_model(torch.rand(2, 8, 2, generator=torch.Generator().manual_seed(0)))
    mask = torch.zeros(2, 8, dtype=torch.bool)
    mask[:, :4] = True
    losses = [
        model(pixel_values_videos=p, gaze=gaze, valid_mask=mask, generator=torch.Generator().manual_seed(1)).loss
        for p in (pixels, with_changed_future(pixels, 3))
    ]
    assert torch.allclose(losses[0], losses[1], atol=1e-6)


def test_causal_task_bank_row_t_uses_frames_up_to_t_only():
    model = tiny_model(causal=True)
    bank = model.condition_encoder.task_bank
    summaries = torch.randn(2, 6, 32, generator=torch.Generator().manual_seed(0))
    full = causal_task_tokens(bank, summaries)
    assert full.shape == (2, 6, 3, 32)
    for t in range(6):
        assert torch.allclose(
            full[:, t], causal_task_tokens(bank, summaries[:, : t + 1], last_only=True)[:, 0], atol=1e-6
        )
    assert torch.allclose(full[:, :, 0], summaries.cumsum(1) / torch.arange(1, 7).view(1, 6, 1), atol=1e-6)
    # the bidirectional bank at the last frame is the causal bank's last row
    bidirectional = tiny_model()
    bidirectional.condition_encoder.task_bank.load_state_dict(bank.state_dict())
    bidirectional.condition_encoder.task_bank.causal = False
    visual = summaries.unsqueeze(2)  # one token per frame: its mean is the summary
    assert torch.allclose(bidirectional.condition_encoder.task_bank(visual), full[:, -1], atol=1e-6)


# ---------------------------------------------------------------------------------------------------- streamer
@pytest.mark.parametrize(
    "overrides",
    [
        dict(),
        dict(solver="midpoint"),
        dict(objective="diffusion"),
        dict(position_encoding="learned", num_task_queries=0),
        dict(causal_encoder_frames=4, task_guidance="concat"),
        dict(num_temporal_layers=1),
        dict(num_temporal_layers=2, solver="heun"),
    ],
)
def test_streamer_equals_the_causal_model_on_every_prefix(overrides):
    model = tiny_model(causal=True, **overrides)
    pixels = video()
    streamer = GazeFlowStreamer(model, num_samples=3, num_steps=2)
    # generate() on a prefix of <= W frames draws one window of noise [B, K, W, 2]: feed the streamer its slices
    noise = torch.randn(2, 3, 8, 2, generator=torch.Generator().manual_seed(4))
    for t in range(8):
        streamed = streamer.push(pixels[:, t], noise=noise[:, :, t : t + 1])
        prefix = model.generate(
            pixel_values_videos=pixels[:, : t + 1],
            num_samples=3,
            num_steps=2,
            generator=torch.Generator().manual_seed(4),
        )
        assert streamed.frame_index == t
        assert torch.allclose(streamed.trajectories, prefix.trajectories[:, :, t], atol=1e-5), t
        assert torch.allclose(streamed.mean, prefix.mean[:, t], atol=1e-5)


@pytest.mark.parametrize(
    "overrides",
    [
        dict(),
        dict(solver="heun"),
        dict(objective="diffusion"),
        dict(position_encoding="learned"),
        dict(position_encoding="none"),
        dict(causal_encoder_frames=4, task_guidance="concat"),
        dict(num_task_queries=0, use_visual_cross_attention=False),
    ],
)
def test_streamer_equals_the_previous_streamer_past_the_window(overrides):
    """Past W frames the context slides (no prefix of generate() applies): the static step (ring buffers, slot mask,
    prepared weights) against the previous streamer (growing caches, the model's own network), 3 W frames, fp32."""
    model = tiny_model(causal=True, num_frames=4, window_stride=2, **overrides)
    frames = video(2, frames=14, seed=3)
    noise = torch.randn(14, 2, 3, 1, 2, generator=torch.Generator().manual_seed(5))
    streamer, reference = GazeFlowStreamer(model, num_samples=3, num_steps=2), ReferenceStreamer(model, 3, 2)
    for t in range(14):
        got, expected = streamer.push(frames[:, t], noise=noise[t]), reference.push(frames[:, t], noise=noise[t])
        assert torch.allclose(got.trajectories, expected.trajectories, atol=1e-5), t
        assert torch.allclose(got.mean, expected.mean, atol=1e-5), t


def test_streamer_work_is_bounded_by_the_window():
    model = tiny_model(causal=True)
    streamer = GazeFlowStreamer(
        model, num_samples=2, num_steps=2, solver="heun", generator=torch.Generator().manual_seed(0)
    )
    frames = video(1, frames=19)[0]
    first = streamer.push(frames[0])
    state = streamer.state
    shapes, storage, nbytes = (
        [t.shape for t in state.tensors()],
        [t.data_ptr() for t in state.tensors()],
        state.nbytes(),
    )
    outputs = [first] + list(streamer.stream(frames[1:]))  # frames [3, S, S] one at a time
    assert [o.frame_index for o in outputs] == list(range(19))
    assert streamer.state is state and state.nbytes() == nbytes  # memory does not grow with the stream
    assert [t.shape for t in state.tensors()] == shapes and [t.data_ptr() for t in state.tensors()] == storage
    assert len(state.self_attention) == 2 * 2  # S steps x 2 network calls (Heun), one ring per call and block
    assert all(len(rings) == model.config.num_hidden_layers for rings in state.self_attention)
    assert state.self_attention[0][0].key.shape == (2, 4, 8, 8)  # [B K, H, W, d_h]: W = 8 slots
    assert state.summaries.shape == (1, 8, 32) and state.frames.shape[1] == model.config.causal_encoder_frames
    assert streamer.cached_frames == 8 and bool(state.written.all()) and int(state.frame_index) == 19
    assert all(torch.isfinite(o.trajectories).all() and o.trajectories.shape == (1, 2, 2) for o in outputs)
    streamer.reset()
    assert streamer.frame_index == 0 and streamer.cached_frames == 0
    assert all(not t.any() for t in state.tensors())  # zeroed in place: a captured graph keeps its buffers
    again = streamer.push(frames[0], noise=torch.zeros(1, 2, 1, 2))
    fresh = GazeFlowStreamer(model, num_samples=2, num_steps=2, solver="heun").push(
        frames[0], noise=torch.zeros(1, 2, 1, 2)
    )
    assert torch.equal(again.trajectories, fresh.trajectories)


def test_streamer_seeded_runs_repeat_and_take_raw_frames_with_a_processor():
    model = tiny_model(causal=True)
    processor = GazeFlowVideoProcessor(size=32)
    raw = np.random.default_rng(0).integers(0, 256, (5, 48, 64, 3), dtype=np.uint8)
    runs = []
    for _ in range(2):
        streamer = GazeFlowStreamer(model, generator=torch.Generator().manual_seed(0), processor=processor)
        runs.append(torch.stack([o.trajectories for o in streamer.stream(raw)]))
    assert torch.equal(runs[0], runs[1])
    processed = processor.preprocess(raw)
    streamer = GazeFlowStreamer(model, generator=torch.Generator().manual_seed(0))
    assert torch.allclose(torch.stack([o.trajectories for o in streamer.stream(processed)]), runs[0])


def test_streamer_refuses_bad_inputs():
    with pytest.raises(ValueError, match="causal"):
        GazeFlowStreamer(tiny_model())
    model = tiny_model(causal=True)
    with pytest.raises(ValueError, match="num_samples"):
        GazeFlowStreamer(tiny_model(causal=True, objective="regression"), num_samples=2)
    streamer = GazeFlowStreamer(model)
    with pytest.raises(ValueError, match="frame"):
        streamer.push(torch.randn(3, 16, 16))
    with pytest.raises(ValueError, match="noise"):
        streamer.push(torch.randn(3, 32, 32), noise=torch.randn(1, 4, 2, 2))
    streamer.push(torch.randn(2, 3, 32, 32))
    with pytest.raises(ValueError, match="batch size"):
        streamer.push(torch.randn(1, 3, 32, 32))


def test_feature_cache_fingerprint_tells_causal_tokens_apart():
    from transformers_gazeflow.data.processing import GazeFlowVideoProcessor
    from transformers_gazeflow.training.feature_cache import cache_fingerprint

    processor = GazeFlowVideoProcessor(size=32)
    bidirectional, causal = tiny_model(), tiny_model(causal=True)
    assert torch.equal(
        bidirectional.video_encoder.vjepa2.embeddings.patch_embeddings.proj.weight,
        causal.video_encoder.vjepa2.embeddings.patch_embeddings.proj.weight,
    )  # same encoder weights
    # ... but different tokens: a group per tubelet vs a group per frame from its causal window
    assert bidirectional.encode_video(video()).shape == (2, 4 * 4, 32)
    assert causal.encode_video(video()).shape == (2, 8 * 4, 32)
    fingerprints = {
        cache_fingerprint(m, processor)
        for m in (bidirectional, causal, tiny_model(causal=True, causal_encoder_frames=4))
    }
    assert len(fingerprints) == 3
    assert cache_fingerprint(tiny_model(), processor) == cache_fingerprint(bidirectional, processor)
