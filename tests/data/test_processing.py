import json

import numpy as np
import pytest
import torch

from transformers_gazeflow.data.processing import IMAGENET_MEAN, IMAGENET_STD, GazeFlowVideoProcessor


def _marker_video(height: int, width: int, unit_xy: tuple[float, float], num_frames: int = 2) -> np.ndarray:
    """Black frames with a white square of 4x4 px centred on the continuous pixel point ``unit * (W, H)``."""
    video = np.zeros((num_frames, height, width, 3), np.uint8)
    cx, cy = unit_xy[0] * width, unit_xy[1] * height  # pixel i covers [i, i + 1)
    x0, y0 = int(round(cx - 2)), int(round(cy - 2))
    video[:, y0 : y0 + 4, x0 : x0 + 4] = 255
    return video


def _bright_centroid_unit(frame: torch.Tensor, size: int) -> tuple[float, float]:
    """Brightness centroid of a processed frame [3, S, S], in unit coordinates (pixel centres at (i + 0.5) / S)."""
    weight = (frame[0] - frame[0].min()).double()
    centres = (torch.arange(size, dtype=torch.float64) + 0.5) / size
    total = weight.sum()
    return float((weight.sum(0) * centres).sum() / total), float((weight.sum(1) * centres).sum() / total)


@pytest.mark.parametrize("height,width", [(48, 64), (96, 64), (33, 71)])
def test_whole_frame_is_resized_and_a_marker_keeps_its_unit_position(height, width):
    unit = (0.3, 0.7)
    video = _marker_video(height, width, unit)
    # the marker's own centroid in the source frame, in unit coordinates
    source = torch.from_numpy(video[0]).permute(2, 0, 1).float()
    src_u = _bright_centroid_unit_rect(source, height, width)
    out = GazeFlowVideoProcessor(size=32)(video)["pixel_values_videos"]
    assert out.shape == (1, 2, 3, 32, 32) and out.dtype == torch.float32
    u, v = _bright_centroid_unit(out[0, 0], 32)
    assert u == pytest.approx(src_u[0], abs=0.01) and v == pytest.approx(src_u[1], abs=0.01)
    assert u == pytest.approx(unit[0], abs=0.03) and v == pytest.approx(unit[1], abs=0.03)


def _bright_centroid_unit_rect(frame: torch.Tensor, height: int, width: int) -> tuple[float, float]:
    weight = frame[0].double()
    cx = (torch.arange(width, dtype=torch.float64) + 0.5) / width
    cy = (torch.arange(height, dtype=torch.float64) + 0.5) / height
    return float((weight.sum(0) * cx).sum() / weight.sum()), float((weight.sum(1) * cy).sum() / weight.sum())


def test_no_crop_corner_markers_survive():
    """A centre crop (what VJEPA2VideoProcessor does) would drop the left/right edges of a wide frame."""
    video = np.zeros((1, 48, 128, 3), np.uint8)
    video[:, :, :6] = 255  # left edge column band
    video[:, :, -6:] = 255  # right edge band
    out = GazeFlowVideoProcessor(size=32).preprocess(video)
    white = (1.0 - IMAGENET_MEAN[0]) / IMAGENET_STD[0]
    assert out[0, 0, :, 0].min() > white - 0.05 and out[0, 0, :, -1].min() > white - 0.05
    assert out[0, 0, :, 16].max() < 0.0  # the middle stays dark


def test_normalisation_values():
    video = np.zeros((3, 20, 30, 3), np.uint8)
    video[0] = 0
    video[1] = 255
    video[2] = (10, 128, 200)
    out = GazeFlowVideoProcessor(size=8).preprocess(video)
    mean, std = torch.tensor(IMAGENET_MEAN), torch.tensor(IMAGENET_STD)
    expected = [
        (torch.zeros(3) - mean) / std,
        (torch.ones(3) - mean) / std,
        (torch.tensor([10, 128, 200]) / 255.0 - mean) / std,
    ]
    for i in range(3):
        assert torch.allclose(out[i].mean(dim=(1, 2)), expected[i], atol=1e-5)
        assert torch.allclose(out[i].std(dim=(1, 2)), torch.zeros(3), atol=1e-5)
    assert out.shape == (3, 3, 8, 8)


def test_same_size_input_is_only_normalised_and_torch_input_matches_numpy():
    rng = np.random.default_rng(0)
    video = rng.integers(0, 256, (2, 16, 16, 3), dtype=np.uint8)
    proc = GazeFlowVideoProcessor(size=16)
    out = proc.preprocess(video)
    assert torch.equal(proc.unnormalize(out), torch.from_numpy(video))
    assert torch.equal(out, proc.preprocess(torch.from_numpy(video)))


@pytest.mark.parametrize("shape", [(2, 17, 23), (2, 17, 23, 1)])
def test_grayscale_and_odd_sizes(shape):
    gray = np.full(shape, 77, np.uint8)
    out = GazeFlowVideoProcessor(size=9).preprocess(gray)
    assert out.shape == (2, 3, 9, 9)
    rgb = GazeFlowVideoProcessor(size=9).preprocess(np.full((2, 17, 23, 3), 77, np.uint8))
    assert torch.allclose(out, rgb)


def test_chunking_does_not_change_the_result():
    rng = np.random.default_rng(1)
    video = rng.integers(0, 256, (7, 24, 40, 3), dtype=np.uint8)
    a = GazeFlowVideoProcessor(size=12, chunk_frames=2).preprocess(video)
    b = GazeFlowVideoProcessor(size=12, chunk_frames=16).preprocess(video)
    assert torch.allclose(a, b, atol=1e-6)


def test_batch_call_forms():
    proc = GazeFlowVideoProcessor(size=8)
    a = np.zeros((4, 10, 12, 3), np.uint8)
    b = np.full((4, 30, 20, 3), 200, np.uint8)
    assert proc([a, b])["pixel_values_videos"].shape == (2, 4, 3, 8, 8)
    assert proc(np.stack([a, a]))["pixel_values_videos"].shape == (2, 4, 3, 8, 8)
    with pytest.raises(ValueError, match="same number of frames"):
        proc([a, b[:3]])


@pytest.mark.parametrize(
    "bad,match",
    [
        (np.zeros((2, 8, 8, 3), np.float32), "video must hold uint8"),
        (torch.zeros((2, 8, 8, 3), dtype=torch.int64), "video must hold uint8"),
        (np.zeros((2, 3, 8, 8), np.uint8), r"video must have shape \[T, H, W, 3\]"),
        (np.zeros((8, 8), np.uint8), r"video must have shape"),
        (np.zeros((0, 8, 8, 3), np.uint8), "at least one frame"),
        ([[1, 2, 3]], "numpy array or torch tensor"),
    ],
)
def test_bad_inputs_raise_value_error_naming_the_argument(bad, match):
    with pytest.raises(ValueError, match=match):
        GazeFlowVideoProcessor(size=8).preprocess(bad)


def test_bad_batch_element_is_named():
    with pytest.raises(ValueError, match=r"videos\[1\] must hold uint8"):
        GazeFlowVideoProcessor(size=8)([np.zeros((1, 4, 4, 3), np.uint8), np.zeros((1, 4, 4, 3), np.float64)])


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"size": 0}, "size"),
        ({"size": 2.5}, "size"),
        ({"image_mean": (0.5, 0.5)}, "image_mean"),
        ({"image_std": (0.2, 0.0, 0.2)}, "image_std"),
        ({"resample": "nearest-exact"}, "resample"),
    ],
)
def test_bad_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        GazeFlowVideoProcessor(**kwargs)


def test_save_and_load_round_trip_and_fingerprint(tmp_path):
    proc = GazeFlowVideoProcessor(size=64, resample="bicubic")
    path = proc.save_pretrained(tmp_path / "proc")
    assert path.name == "preprocessor_config.json"
    saved = json.loads(path.read_text())
    assert saved["size"] == 64 and saved["do_center_crop"] is False
    loaded = GazeFlowVideoProcessor.from_pretrained(tmp_path / "proc")
    assert loaded == proc and loaded.fingerprint() == proc.fingerprint()
    assert GazeFlowVideoProcessor.from_dict(proc.to_dict()) == proc
    # the fingerprint is stable across processes (a pinned value) and sees every output-changing setting
    assert GazeFlowVideoProcessor().fingerprint() == "fa8aebc050dbea2d"
    assert GazeFlowVideoProcessor(chunk_frames=3).fingerprint() == GazeFlowVideoProcessor().fingerprint()
    others = {
        GazeFlowVideoProcessor(size=128).fingerprint(),
        GazeFlowVideoProcessor(antialias=False).fingerprint(),
        GazeFlowVideoProcessor(image_mean=(0.5, 0.5, 0.5)).fingerprint(),
        GazeFlowVideoProcessor(resample="bicubic").fingerprint(),
        GazeFlowVideoProcessor().fingerprint(),
    }
    assert len(others) == 5


def test_from_pretrained_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="preprocessor_config.json"):
        GazeFlowVideoProcessor.from_pretrained(tmp_path)
    (tmp_path / "preprocessor_config.json").write_text(json.dumps({"size": 32, "crop_size": 16}))
    with pytest.raises(ValueError, match="crop_size"):
        GazeFlowVideoProcessor.from_pretrained(tmp_path)
    (tmp_path / "preprocessor_config.json").write_text(json.dumps({"size": 32, "do_center_crop": True}))
    with pytest.raises(ValueError, match="do_center_crop"):
        GazeFlowVideoProcessor.from_pretrained(tmp_path)


def test_a_config_that_is_not_json_is_named(tmp_path):
    """Every bad input gets one line naming the file and what was expected."""
    (tmp_path / "preprocessor_config.json").write_text('{"size": 32,')
    with pytest.raises(
        ValueError,
        match=r"preprocessor_config.json: expected a JSON object of processor settings, "
        r"but it is not valid JSON",
    ):
        GazeFlowVideoProcessor.from_pretrained(tmp_path)
    (tmp_path / "preprocessor_config.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="preprocessor_config.json: expected a JSON object .* got a list"):
        GazeFlowVideoProcessor.from_pretrained(tmp_path)


def test_large_frames_are_processed_in_chunks_that_do_not_change_the_output():
    """On the CPU, 640x480 frames are converted and resized a few at a time (under HOST_CHUNK_BYTES of floats):
    each frame's output is the one it gets alone."""
    from transformers_gazeflow.data.processing import HOST_CHUNK_BYTES

    frames = np.random.default_rng(3).integers(0, 256, (5, 480, 640, 3), dtype=np.uint8)
    processor = GazeFlowVideoProcessor(size=32, chunk_frames=16)
    assert HOST_CHUNK_BYTES // (4 * 480 * 640 * 3) < 5  # the five frames really are split
    together = processor.preprocess(frames)
    alone = torch.cat([processor.preprocess(frames[i : i + 1]) for i in range(5)])
    assert torch.equal(together, alone)


def _grey_levels(processed: torch.Tensor) -> np.ndarray:
    """Processed frames ``[..., 3, S, S]`` back on the 0..255 scale (no rounding)."""
    mean = torch.tensor(IMAGENET_MEAN, dtype=torch.float64).view(3, 1, 1)
    std = torch.tensor(IMAGENET_STD, dtype=torch.float64).view(3, 1, 1)
    return ((processed.double() * std + mean) * 255).numpy()


def test_uint8_resize_rounds_the_antialiased_bilinear_weights_to_whole_grey_levels():
    """A 4x4 frame whose rows are 0, 100, 200, 255 halved to 2x2. The antialiased bilinear filter of a 2x reduction
    is a triangle of half-width 2 input pixels: output pixel 0 (centred at 1.0) weighs the input centres 0.5, 1.5
    and 2.5 by 0.75, 0.75, 0.25 (renormalised by 1.75, the tap at -0.5 being outside): 125 / 1.75 = 71.43; output
    pixel 1 (centred at 3.0): (100 * 0.25 + 200 * 0.75 + 255 * 0.75) / 1.75 = 209.29. float32 keeps the fractions,
    uint8 rounds them."""
    row = np.array([0, 100, 200, 255], np.uint8)
    video = np.broadcast_to(row[None, None, :, None], (1, 4, 4, 3)).copy()
    exact = _grey_levels(GazeFlowVideoProcessor(size=2).preprocess(video))
    fast = _grey_levels(GazeFlowVideoProcessor(size=2, resize_dtype="uint8").preprocess(video))
    np.testing.assert_allclose(exact[0, :, 0], [[125 / 1.75, 366.25 / 1.75]] * 3, atol=1e-3)
    np.testing.assert_allclose(fast[0, :, 0], [[71, 209]] * 3, atol=1e-3)


@pytest.mark.parametrize("height,width,size", [(480, 640, 64), (33, 71, 32)])
def test_uint8_resize_is_pils_bilinear_resize_within_one_grey_level(height, width, size):
    """PIL's bilinear ``Image.resize`` (antialiased, on uint8) is the reference of torch's uint8 kernel."""
    from PIL import Image

    video = np.random.default_rng(0).integers(0, 256, (2, height, width, 3), dtype=np.uint8)
    fast = _grey_levels(GazeFlowVideoProcessor(size=size, resize_dtype="uint8").preprocess(video))
    pil = np.stack([np.asarray(Image.fromarray(f).resize((size, size), Image.BILINEAR)) for f in video])
    np.testing.assert_allclose(fast, pil.transpose(0, 3, 1, 2), atol=1 + 1e-3)
    np.testing.assert_allclose(fast, np.round(fast), atol=1e-3)  # whole grey levels
    exact = _grey_levels(GazeFlowVideoProcessor(size=size).preprocess(video))
    assert np.abs(exact - np.round(exact)).max() > 0.4  # the default keeps the fractions
    assert 0 < np.abs(fast - exact).max() <= 1.0


def test_resize_dtype_is_saved_only_when_it_is_not_the_default(tmp_path):
    """Processors without the setting keep their files and fingerprints; uint8 is saved, loaded and fingerprinted."""
    default = GazeFlowVideoProcessor(size=64)
    assert "resize_dtype" not in default.to_dict() and default.resize_dtype == "float32"
    assert GazeFlowVideoProcessor(resize_dtype="float32").fingerprint() == "fa8aebc050dbea2d"
    fast = GazeFlowVideoProcessor(size=64, resize_dtype="uint8")
    loaded = GazeFlowVideoProcessor.from_pretrained(fast.save_pretrained(tmp_path / "fast").parent)
    assert loaded.resize_dtype == "uint8" and loaded == fast
    assert fast.fingerprint() != default.fingerprint()
    with pytest.raises(ValueError, match="resize_dtype must be one of"):
        GazeFlowVideoProcessor(resize_dtype="float16")
