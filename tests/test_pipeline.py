"""The egocentric-gaze pipeline: registration, equality with model.generate, inputs, outputs, streaming, bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from transformers import pipeline
from transformers.pipelines import PIPELINE_REGISTRY

import transformers_gazeflow  # noqa: F401  (registers the task)
from transformers_gazeflow import (
    GazeFlowConfig,
    GazeFlowModel,
    GazeFlowPipeline,
    GazePrediction,
    default_model_available,
    default_model_path,
)
from transformers_gazeflow.data.video import VideoDecodeError, write_video
from transformers_gazeflow.generation.windowed import stream_gaze
from transformers_gazeflow.hub.model_folders import ModelFolderError, load_model
from transformers_gazeflow.metrics.heatmaps import render_heatmaps
from transformers_gazeflow.models.gazeflow.generation_gazeflow import SamplingSettings

from .pipeline_fixtures import (  # noqa: F401  (fixtures)
    NUM_SAMPLES,
    faststart_truncated_mp4,
    not_a_gazeflow_folder,
    random_video,
    single_torch_thread,
    synthetic_clip_mp4,
    tiny_model_dir,
)


@pytest.fixture(scope="module")
def gaze(tiny_model_dir):
    return pipeline("egocentric-gaze", model=str(tiny_model_dir))


def check_prediction(out: GazePrediction, num_frames: int, width: int, height: int, num_samples: int = NUM_SAMPLES):
    assert isinstance(out, GazePrediction)
    assert out.trajectories.shape == (num_samples, num_frames, 2)
    assert out.trajectories_px.shape == (num_samples, num_frames, 2)
    assert out.points.shape == out.points_px.shape == (num_frames, 2)
    assert out.frame_indices.shape == out.times_ms.shape == (num_frames,)
    assert (out.width, out.height) == (width, height)
    assert np.all((out.trajectories >= 0) & (out.trajectories <= 1))
    assert np.all(out.points_px[:, 0] <= width) and np.all(out.points_px[:, 1] <= height)
    assert np.all(out.points_px >= 0)
    np.testing.assert_allclose(out.points, out.trajectories.mean(axis=0), atol=1e-6)  # the point estimate
    np.testing.assert_allclose(out.trajectories_px, out.trajectories * [width, height], rtol=1e-6)
    np.testing.assert_allclose(out.times_ms, out.frame_indices * 1000.0 / out.fps)


def test_task_is_registered_and_builds_the_gazeflow_pipeline(gaze):
    assert "egocentric-gaze" in PIPELINE_REGISTRY.get_supported_tasks()
    assert isinstance(gaze, GazeFlowPipeline)
    assert gaze.video_processor.size == 32  # read from preprocessor_config.json


@pytest.mark.parametrize("num_frames", [1, 8, 13, 30])
def test_pipeline_on_an_array_equals_model_generate(gaze, num_frames):
    video = random_video(num_frames, seed=num_frames)
    out = gaze(video, seed=7, fps=24)
    processed = gaze.video_processor.preprocess(video)[None]
    expected = gaze.model.generate(pixel_values_videos=processed, generator=torch.Generator().manual_seed(7))
    np.testing.assert_allclose(out.trajectories, expected.trajectories[0].numpy(), atol=1e-5, rtol=0)
    np.testing.assert_allclose(out.points, expected.mean[0].numpy(), atol=1e-5, rtol=0)
    check_prediction(out, num_frames, 64, 48)
    assert out.fps == 24 and out.heatmaps is None


def test_sampling_parameters_and_seed(gaze):
    video = random_video(10)
    a = gaze(video, seed=1, num_samples=3, num_steps=2, solver="heun")
    b = gaze(video, seed=1, num_samples=3, num_steps=2, solver="heun")
    c = gaze(video, seed=2, num_samples=3, num_steps=2, solver="heun")
    assert a.trajectories.shape == (3, 10, 2) and (a.num_samples, a.num_steps, a.solver) == (3, 2, "heun")
    np.testing.assert_array_equal(a.trajectories, b.trajectories)
    assert not np.allclose(a.trajectories, c.trajectories)
    with pytest.raises(ValueError, match="solver"):
        gaze(video, solver="rk4")
    with pytest.raises(TypeError, match="unknown parameter"):
        gaze(video, num_sample=3)


def test_tensor_and_pil_inputs_equal_the_array(gaze):
    video = random_video(9, seed=4)
    expected = gaze(video, seed=0, fps=10).trajectories
    np.testing.assert_array_equal(gaze(torch.from_numpy(video), seed=0, fps=10).trajectories, expected)
    pil = [Image.fromarray(frame) for frame in video]
    out = gaze(pil, seed=0, fps=10)
    np.testing.assert_array_equal(out.trajectories, expected)
    assert out.fps == 10


def test_a_list_of_videos_gives_one_output_each(gaze):
    outs = gaze([random_video(5), random_video(12)], seed=0, fps=12)
    assert [o.num_frames for o in outs] == [5, 12]


def test_frame_range(gaze, tmp_path):
    video = random_video(20, seed=9)
    path = write_video(tmp_path / "clip.mp4", video, fps=20)
    out = gaze(str(path), seed=3, start_frame=5, end_frame=14)
    check_prediction(out, 9, 64, 48)
    np.testing.assert_array_equal(out.frame_indices, np.arange(5, 14))
    np.testing.assert_allclose(out.times_ms[0], 250.0)
    assert out.video_id == "clip" and out.fps == 20
    tail = gaze(str(path), seed=3, start_frame=15)
    assert tail.num_frames == 5
    with pytest.raises(ValueError, match="past the end"):
        gaze(str(path), start_frame=20)
    with pytest.raises(ValueError, match="bad frame range"):
        gaze(str(path), start_frame=4, end_frame=4)


def test_heatmaps_only_when_asked_and_rendered_on_demand(gaze):
    video = random_video(11, seed=2)
    out = gaze(video, seed=0, return_heatmaps=True, heatmap_sigma=6.0)
    maps = out.heatmaps
    assert len(maps) == 11 and maps.sigma == 6.0
    expected = render_heatmaps(out.trajectories[:, 3:6], 64, 48, sigma=6.0).numpy()
    np.testing.assert_allclose(maps[3:6], expected)
    np.testing.assert_allclose(maps[4], expected[1])
    np.testing.assert_allclose(maps[-1], render_heatmaps(out.trajectories[:, -1:], 64, 48, sigma=6.0)[0].numpy())
    chunks = list(maps.iter_chunks(4))
    assert [start for start, _ in chunks] == [0, 4, 8] and sum(m.shape[0] for _, m in chunks) == 11
    # by default sigma scales with the frame: 3.9% of the width (the paper's 25 px at 640 px), not config.heatmap_sigma
    # (the evaluation's sigma in native px of the dataset)
    assert gaze.model.config.heatmap_sigma == 25.0 and gaze(video, return_heatmaps=True).heatmaps.sigma == 64 * 25 / 640


def test_real_mp4_no_one_here_made(gaze, bikes_mp4):
    out = gaze(str(bikes_mp4), seed=0, end_frame=60)
    check_prediction(out, 60, 640, 272)
    assert out.fps == 25.0 and out.video_id == "bikes"
    assert out["points_px"] is out.points_px  # dict-style access


def test_synthetic_clip_with_known_gaze(gaze, synthetic_clip_mp4):
    path, clip = synthetic_clip_mp4
    out = gaze(str(path), seed=0)
    check_prediction(out, clip.num_frames, clip.width, clip.height)
    assert out.fps == clip.fps


@pytest.mark.parametrize("window_batch_size", [1, 3])
def test_stream_is_lazy_and_holds_about_one_batch_of_windows(gaze, window_batch_size):
    """Chunks come out while frames are still being read: the stream never holds more than a batch of windows."""
    window, stride = gaze.model.config.num_frames, gaze.model.config.window_stride
    pulled = 0

    def frames():
        nonlocal pulled
        for frame in random_video(200, seed=1):
            pulled += 1
            yield frame

    handed_out = 0
    settings = SamplingSettings.resolve(gaze.model.config, num_samples=2, num_steps=1)
    for chunk in stream_gaze(
        gaze.model, gaze.video_processor, frames(), settings, keep_frames=True, window_batch_size=window_batch_size
    ):
        assert len(chunk.frames) == chunk.num_frames and chunk.start == handed_out
        handed_out += chunk.num_frames
        if pulled < 200:
            # frames held: from the chunk's start to the last one read (a window, a stride per window of the batch
            # and one frame of look-ahead)
            assert pulled - chunk.start <= window + window_batch_size * stride + 1
    assert handed_out == 200


def test_one_frame_grayscale_and_odd_sizes(gaze, tmp_path):
    one = write_video(tmp_path / "one.mp4", random_video(1, seed=1), fps=30)
    check_prediction(gaze(str(one), seed=0), 1, 64, 48)
    gray = random_video(6, 33, 47, seed=2)[..., 0]
    gray_path = write_video(tmp_path / "gray.mp4", list(gray), fps=15)
    check_prediction(gaze(str(gray_path), seed=0), 6, 47, 33)
    out = gaze(gray, seed=0)  # grayscale array [T, H, W]
    check_prediction(out, 6, 47, 33)
    np.testing.assert_array_equal(out.trajectories, gaze(np.repeat(gray[..., None], 3, axis=3), seed=0).trajectories)
    check_prediction(gaze(random_video(5, 31, 17, seed=3), seed=0), 5, 17, 31)


# ---------------------------------------------------------------------------------------------- bad input
def test_missing_file_names_it(gaze, tmp_path):
    missing = tmp_path / "nowhere.mp4"
    with pytest.raises(FileNotFoundError, match="nowhere.mp4"):
        gaze(str(missing))


def test_zero_byte_text_and_truncated_mp4_name_the_file(gaze, tmp_path, bikes_mp4):
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    text = tmp_path / "notes.mp4"
    text.write_text("this is not a video\n" * 20)
    truncated = tmp_path / "truncated.mp4"
    truncated.write_bytes(bikes_mp4.read_bytes()[: len(bikes_mp4.read_bytes()) // 2])
    for bad in (empty, text, truncated, faststart_truncated_mp4(tmp_path)):
        with pytest.raises(VideoDecodeError, match=bad.name):
            gaze(str(bad))


def test_unknown_model_folder_names_it(not_a_gazeflow_folder, tmp_path):
    with pytest.raises(ModelFolderError, match=f"{not_a_gazeflow_folder}.*model_type 'bert'"):
        load_model(not_a_gazeflow_folder)
    empty = tmp_path / "empty_model"
    empty.mkdir()
    with pytest.raises(ModelFolderError, match="empty_model.*no config.json"):
        load_model(empty)
    with pytest.raises(ModelFolderError, match="model folder not found: .*gone"):
        load_model(tmp_path / "gone")
    with pytest.raises(ModelFolderError, match=f"{not_a_gazeflow_folder}.*model_type 'bert'"):
        pipeline("egocentric-gaze", model=str(not_a_gazeflow_folder))


def test_bad_in_memory_input(gaze):
    with pytest.raises(ValueError, match="uint8"):
        gaze(np.zeros((4, 8, 8, 3), np.float32))
    with pytest.raises(ValueError, match="expected a video file path"):
        gaze(42)


def test_the_pipeline_refuses_other_models():
    from transformers import BertConfig, BertModel

    with pytest.raises(ModelFolderError, match="needs a GazeFlow model"):
        GazeFlowPipeline(
            model=BertModel(BertConfig(hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8))
        )


# ---------------------------------------------------------------------------------------------- the bundled model
needs_default = pytest.mark.skipif(
    not default_model_available(),
    reason=f"the bundled default model has no weights yet ({default_model_path()}): it is trained by "
    "examples/train.py on the synthetic dataset and dropped in there",
)


@needs_default
def test_bundled_model_beats_the_frame_centre_on_a_synthetic_clip(tmp_path):
    from transformers_gazeflow.data.synthetic import SyntheticGazeSettings, generate_clip

    gaze = pipeline("egocentric-gaze")  # no model: the bundled default, offline
    errors_model, errors_centre = [], []
    settings = SyntheticGazeSettings(num_clips=3, min_frames=64, max_frames=64, seed=12345)
    for index in range(settings.num_clips):
        clip = generate_clip(settings, index)
        path = write_video(tmp_path / f"clip{index}.mp4", clip.frames(), fps=clip.fps)
        out = gaze(str(path), seed=0)
        valid = clip.gaze.valid
        truth = clip.gaze.gaze[valid]
        errors_model.append(np.linalg.norm(out.points[valid] - truth, axis=1))
        errors_centre.append(np.linalg.norm(truth - 0.5, axis=1))
    assert np.concatenate(errors_model).mean() < np.concatenate(errors_centre).mean()


def test_default_model_folder_is_package_data():
    folder = default_model_path()
    assert folder.parent == Path(transformers_gazeflow.__file__).resolve().parent and folder.name == "default_model"
    assert (folder / "README.md").is_file()  # the model card (or, until the weights land, what is missing)
    setup = (Path(__file__).resolve().parents[1] / "setup.py").read_text()
    assert '"default_model/*"' in setup and "gazeflow = transformers_gazeflow.commands.cli:main" in setup


def test_a_pipeline_does_not_change_the_model_it_was_given():
    """Building a pipeline puts *its own copy* on the fast path (LoRA merged, eval mode): the caller's model keeps its
    LoRA adapters, ``config.use_lora``, training mode and weights, and gives the pipeline's samples itself."""
    torch.manual_seed(0)
    model = GazeFlowModel(GazeFlowConfig.tiny(use_lora=True)).train()
    weights = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    gaze = GazeFlowPipeline(model=model)
    video = random_video(9, seed=4)
    out = gaze(video, seed=5, fps=10)
    assert model.training and model.config.use_lora and model.video_encoder.has_lora
    assert gaze.model is not model and not gaze.model.training and not gaze.model.video_encoder.has_lora
    assert model.state_dict().keys() == weights.keys()
    assert all(torch.equal(model.state_dict()[name], tensor) for name, tensor in weights.items())
    model.eval()
    expected = model.generate(
        pixel_values_videos=gaze.video_processor.preprocess(video)[None], generator=torch.Generator().manual_seed(5)
    )
    np.testing.assert_allclose(out.trajectories, expected.trajectories[0].numpy(), atol=1e-5, rtol=0)


@pytest.mark.parametrize("mode", ["coherent", "blend"])
def test_the_output_says_how_windows_were_joined(gaze, mode):
    out = gaze(random_video(20, seed=1), window_mode=mode, num_samples=2, num_steps=1)
    assert out.window_mode == out["window_mode"] == mode
    assert gaze(random_video(5, seed=1)).window_mode == gaze.model.config.window_mode
