"""The frozen-feature cache: cached tokens equal the encoder's tokens of the collated window; keyed, reusable."""

import pytest
import torch

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
from transformers_gazeflow.data.collator import GazeFlowDataCollator
from transformers_gazeflow.data.processing import GazeFlowVideoProcessor
from transformers_gazeflow.training.datasets import load_training_splits
from transformers_gazeflow.training.feature_cache import (
    CachedFeatureCollator,
    FeatureCache,
    cache_fingerprint,
    example_key,
)


@pytest.fixture(scope="module")
def setting(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("HF_DATASETS_CACHE", str(tmp_path_factory.mktemp("hf_cache")))
    torch.manual_seed(0)
    model = GazeFlowModel(GazeFlowConfig.tiny(use_lora=False)).eval()
    processor = GazeFlowVideoProcessor(size=model.config.image_size)
    train, validation = load_training_splits(
        "synthetic", tmp_path_factory.mktemp("synthetic"), "tiny", window_frames=8, window_stride=4
    )
    yield model, processor, train, validation
    mp.undo()


def test_cached_tokens_equal_the_encoder_on_collated_windows(tmp_path, setting):
    model, processor, train, validation = setting
    collator = GazeFlowDataCollator(processor, num_frames=8)
    cache = FeatureCache(tmp_path, cache_fingerprint(model, processor)).build(
        model, [train, validation], collator, batch_size=5
    )
    examples = [train[i] for i in range(len(train))] + [validation[i] for i in range(len(validation))]
    short = [e for e in examples if e["num_frames"] < 8]
    for chunk in (examples[:6], examples[-3:], short[:2]):
        if not chunk:
            continue
        with torch.no_grad():
            expected = model.encode_video(collator(chunk)["pixel_values_videos"])
        for i, example in enumerate(chunk):
            assert torch.allclose(cache.load(example_key(example)), expected[i], atol=1e-5), example_key(example)
    batch = CachedFeatureCollator(cache, processor, num_frames=8)(examples[:4])
    plain = collator(examples[:4])
    assert batch["encoder_hidden_states"].shape == (4, 4 * 4, 32)
    assert torch.equal(batch["gaze"], plain["gaze"]) and torch.equal(batch["valid_mask"], plain["valid_mask"])
    assert "pixel_values_videos" not in batch


def test_the_fingerprint_follows_encoder_weights_processor_and_window(setting):
    model, processor, _, _ = setting
    base = cache_fingerprint(model, processor)
    assert cache_fingerprint(model, processor) == base
    assert cache_fingerprint(model, GazeFlowVideoProcessor(size=model.config.image_size, image_mean=[0.5] * 3)) != base
    other = GazeFlowModel(GazeFlowConfig.tiny(use_lora=False))  # other random weights
    assert cache_fingerprint(other, processor) != base


def test_a_cache_for_another_fingerprint_is_rebuilt_and_missing_keys_are_named(tmp_path, setting):
    model, processor, train, _ = setting
    collator = GazeFlowDataCollator(processor, num_frames=8)
    FeatureCache(tmp_path, "another-encoder").build(model, [train], collator)
    assert not FeatureCache(tmp_path, cache_fingerprint(model, processor)).covers([example_key(train[0])])
    with pytest.raises(ValueError, match="not built for this encoder"):
        FeatureCache(tmp_path, cache_fingerprint(model, processor)).open()
    cache = FeatureCache(tmp_path, cache_fingerprint(model, processor)).build(model, [train], collator)
    assert cache.covers([example_key(train[0])])
    with pytest.raises(KeyError, match="not in the feature cache"):
        cache.load("no-such-clip@0")


def test_mirrored_windows_are_encoded_mirrored_and_served_with_mirrored_gaze(tmp_path, setting):
    model, processor, train, validation = setting
    collator = GazeFlowDataCollator(processor, num_frames=8)
    cache = FeatureCache(tmp_path, cache_fingerprint(model, processor)).build(
        model, [train, validation], collator, batch_size=5, flipped_datasets=[train]
    )
    examples = [train[i] for i in range(min(len(train), 5))]
    assert cache.covers([example_key(e, flipped=True) for e in examples])
    assert not cache.covers([example_key(validation[0], flipped=True)])  # validation is never mirrored
    with torch.no_grad():
        expected = model.encode_video(
            GazeFlowDataCollator(processor, num_frames=8, horizontal_flip_probability=1.0)(examples)[
                "pixel_values_videos"
            ]
        )
    for i, example in enumerate(examples):
        tokens = cache.load(example_key(example, flipped=True))
        assert torch.allclose(tokens, expected[i], atol=1e-5)
        # the encoder's tokens of a mirrored window are not the tokens of the window, mirrored or not
        assert not torch.allclose(tokens, cache.load(example_key(example)), atol=1e-3)
    batch = CachedFeatureCollator(cache, processor, num_frames=8, horizontal_flip_probability=1.0)(examples)
    plain = collator(examples)
    assert torch.allclose(batch["encoder_hidden_states"], expected, atol=1e-5)
    assert torch.allclose(batch["gaze"][..., 0], -plain["gaze"][..., 0], atol=1e-6)
    assert torch.equal(batch["gaze"][..., 1], plain["gaze"][..., 1])
    # a cache without the mirrored copies says which window is missing
    unflipped = FeatureCache(tmp_path / "plain", cache_fingerprint(model, processor)).build(model, [train], collator)
    with pytest.raises(KeyError, match=r":hflip is not in the feature cache"):
        CachedFeatureCollator(unflipped, processor, num_frames=8, horizontal_flip_probability=1.0)(examples[:1])


def test_a_causal_model_caches_its_per_frame_tokens_plain_and_mirrored(tmp_path, setting):
    """``causal=True``: the cache holds the per-frame tokens of causal encoder windows ([T * N, D], what the causal
    model reads), the mirrored windows' own tokens, and training on the cache gives the loss of training on frames."""
    _, processor, train, validation = setting
    torch.manual_seed(0)
    model = GazeFlowModel(GazeFlowConfig.tiny(use_lora=False, causal=True)).eval()
    collator = GazeFlowDataCollator(processor, num_frames=8)
    flipping = GazeFlowDataCollator(processor, num_frames=8, horizontal_flip_probability=1.0)
    assert cache_fingerprint(model, processor) != cache_fingerprint(
        GazeFlowModel(GazeFlowConfig.tiny(use_lora=False, causal=False)), processor
    )
    cache = FeatureCache(tmp_path, cache_fingerprint(model, processor)).build(
        model, [train, validation], collator, batch_size=5, flipped_datasets=[train]
    )
    examples = [train[i] for i in range(min(len(train), 6))]
    with torch.no_grad():
        plain = model.encode_video(collator(examples)["pixel_values_videos"])
        mirrored = model.encode_video(flipping(examples)["pixel_values_videos"])
    assert plain.shape == (len(examples), 8 * model.config.tokens_per_frame, 32)  # one token group per frame
    for i, example in enumerate(examples):
        assert torch.equal(cache.load(example_key(example)), plain[i])
        assert torch.equal(cache.load(example_key(example, flipped=True)), mirrored[i])
    for frames_collator, cached_collator in (
        (collator, CachedFeatureCollator(cache, processor, num_frames=8)),
        (flipping, CachedFeatureCollator(cache, processor, num_frames=8, horizontal_flip_probability=1.0)),
    ):
        cached, decoded = cached_collator(examples), frames_collator(examples)
        assert torch.equal(cached["gaze"], decoded["gaze"])
        losses = [
            model(
                gaze=batch["gaze"],
                valid_mask=batch["valid_mask"],
                generator=torch.Generator().manual_seed(1),
                **{key: batch[key] for key in ("pixel_values_videos", "encoder_hidden_states") if key in batch},
            ).loss
            for batch in (cached, decoded)
        ]
        assert torch.allclose(losses[0], losses[1], atol=1e-6)


def test_an_interrupted_build_resumes_with_the_windows_it_had_written(tmp_path, setting):
    """A build stopped after its second shard (Ctrl-C inside the encoder) keeps those two shards: the next build
    encodes only the windows they lack, and every window's tokens equal those of an uninterrupted build."""
    model, processor, train, validation = setting
    collator = GazeFlowDataCollator(processor, num_frames=8)
    fingerprint = cache_fingerprint(model, processor)
    examples = [train[i] for i in range(len(train))] + [validation[i] for i in range(len(validation))]
    assert len(examples) > 6
    encoded = []
    encode = model.encode_video

    def counting(inputs):
        if len(encoded) == 2 and stop_after_two:
            raise KeyboardInterrupt
        encoded.append(inputs.shape[0])
        return encode(inputs)

    stop_after_two = True
    model.encode_video = counting
    try:
        with pytest.raises(KeyboardInterrupt):
            FeatureCache(tmp_path / "cut", fingerprint).build(model, [train, validation], collator, batch_size=3)
        assert encoded == [3, 3] and not (tmp_path / "cut" / "manifest.json").exists()
        stop_after_two, encoded[:] = False, []
        resumed = FeatureCache(tmp_path / "cut", fingerprint).build(model, [train, validation], collator, batch_size=3)
        assert sum(encoded) == len(examples) - 6
    finally:
        del model.encode_video
    whole = FeatureCache(tmp_path / "whole", fingerprint).build(model, [train, validation], collator, batch_size=3)
    for example in examples:
        assert torch.equal(resumed.load(example_key(example)), whole.load(example_key(example)))
    assert not (tmp_path / "cut" / "building.json").exists()


def test_a_build_shows_its_progress_and_the_size_on_disk(tmp_path, setting, caplog):
    model, processor, train, _ = setting
    collator = GazeFlowDataCollator(processor, num_frames=8)
    with caplog.at_level("INFO", logger="transformers_gazeflow.training.feature_cache"):
        cache = FeatureCache(tmp_path, cache_fingerprint(model, processor)).build(model, [train], collator)
    on_disk = sum(path.stat().st_size for path in tmp_path.glob("shard-*.safetensors"))
    message = next(m for m in caplog.messages if "on disk when complete" in m)
    estimate_gb = float(message.split("about ")[1].split(" GB")[0])
    per_window = on_disk / len(train)  # every window holds the same number of tokens
    assert abs(estimate_gb - per_window * len(train) / 1e9) <= 0.01 + 0.25 * on_disk / 1e9
    assert cache.covers([example_key(train[i]) for i in range(len(train))])
