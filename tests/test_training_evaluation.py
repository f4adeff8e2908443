"""training/evaluation.py: predicting clips without Accelerate (the default, which once raised NameError), and the
predictions coming from the windowed engine with each clip's own seed."""

import numpy as np
import pytest
import torch

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel, GazeFlowVideoProcessor
from transformers_gazeflow.data.video import write_video
from transformers_gazeflow.training.evaluation import clip_generator, predict_clips


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    folder = tmp_path_factory.mktemp("clips")
    rng = np.random.default_rng(0)
    examples = []
    for index, frames in enumerate((12, 8)):
        video = rng.integers(0, 256, (frames, 48, 64, 3), dtype=np.uint8)
        path = write_video(folder / f"clip{index}.mp4", video, fps=10)
        examples.append({"clip_id": f"clip{index}", "video_path": str(path), "window_start": 0, "num_frames": frames,
                         "gaze": np.full((frames, 2), 0.5, np.float32), "valid": np.ones(frames, bool),
                         "gaze_type": np.ones(frames, np.int64), "width": 64, "height": 48, "fps": 10.0})
    return examples


def test_predict_clips_without_an_accelerator(clips):
    torch.manual_seed(0)
    model = GazeFlowModel(GazeFlowConfig.tiny()).eval()
    processor = GazeFlowVideoProcessor(size=32)
    predictions, seconds = predict_clips(model, clips, processor, num_samples=3, num_steps=2, solver="euler", seed=5,
                                         window=12)
    assert [p.shape for p in predictions] == [(3, 12, 2), (3, 8, 2)]
    assert seconds > 0 and all(np.isfinite(p).all() and (p >= 0).all() and (p <= 1).all() for p in predictions)
    # each clip: model.generate on its processed frames with its own generator, whatever else is predicted
    from transformers_gazeflow.data.collator import GazeFlowDataCollator

    batch = GazeFlowDataCollator(processor, num_frames=12)([clips[1]])
    expected = model.generate(pixel_values_videos=batch["pixel_values_videos"][:, :8], num_samples=3, num_steps=2,
                              generator=clip_generator(5, "clip1")).trajectories[0].numpy()
    np.testing.assert_allclose(predictions[1], expected, atol=1e-6)
    alone, _ = predict_clips(model, clips[1:], processor, num_samples=3, num_steps=2, solver="euler", seed=5, window=12)
    np.testing.assert_array_equal(alone[0], predictions[1])
