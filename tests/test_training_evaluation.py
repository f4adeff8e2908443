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
        examples.append(
            {
                "clip_id": f"clip{index}",
                "video_path": str(path),
                "window_start": 0,
                "num_frames": frames,
                "gaze": np.full((frames, 2), 0.5, np.float32),
                "valid": np.ones(frames, bool),
                "gaze_type": np.ones(frames, np.int64),
                "width": 64,
                "height": 48,
                "fps": 10.0,
            }
        )
    return examples


def test_predict_clips_without_an_accelerator(clips):
    torch.manual_seed(0)
    model = GazeFlowModel(GazeFlowConfig.tiny()).eval()
    processor = GazeFlowVideoProcessor(size=32)
    predictions, seconds = predict_clips(
        model, clips, processor, num_samples=3, num_steps=2, solver="euler", seed=5, window=12
    )
    assert [p.shape for p in predictions] == [(3, 12, 2), (3, 8, 2)]
    assert seconds > 0 and all(np.isfinite(p).all() and (p >= 0).all() and (p <= 1).all() for p in predictions)
    # each clip: model.generate on its processed frames with its own generator, whatever else is predicted
    from transformers_gazeflow.data.collator import GazeFlowDataCollator

    batch = GazeFlowDataCollator(processor, num_frames=12)([clips[1]])
    expected = (
        model.generate(
            pixel_values_videos=batch["pixel_values_videos"][:, :8],
            num_samples=3,
            num_steps=2,
            generator=clip_generator(5, "clip1"),
        )
        .trajectories[0]
        .numpy()
    )
    np.testing.assert_allclose(predictions[1], expected, atol=1e-6)
    alone, _ = predict_clips(model, clips[1:], processor, num_samples=3, num_steps=2, solver="euler", seed=5, window=12)
    np.testing.assert_array_equal(alone[0], predictions[1])


def test_online_predictions_are_the_streamer_frame_by_frame(clips):
    """``online=True``: a causal model's clip pushed frame by frame through GazeFlowStreamer with the clip's own
    generator (not generate() over the window, which draws its noise per window)."""
    from transformers_gazeflow.data.collator import GazeFlowDataCollator
    from transformers_gazeflow.generation.online import GazeFlowStreamer

    torch.manual_seed(0)
    model = GazeFlowModel(GazeFlowConfig.tiny(causal=True)).eval()
    processor = GazeFlowVideoProcessor(size=32)
    predictions, _ = predict_clips(
        model, clips, processor, num_samples=3, num_steps=2, solver="euler", seed=5, window=12, online=True
    )
    assert [p.shape for p in predictions] == [(3, 12, 2), (3, 8, 2)]
    frames = GazeFlowDataCollator(processor, num_frames=12)([clips[0]])["pixel_values_videos"][0]
    streamer = GazeFlowStreamer(model, num_samples=3, num_steps=2, generator=clip_generator(5, "clip0"))
    expected = torch.stack([streamer.push(frame).trajectories[0] for frame in frames], dim=1).numpy()
    np.testing.assert_array_equal(predictions[0], expected)
    windowed, _ = predict_clips(model, clips, processor, num_samples=3, num_steps=2, solver="euler", seed=5, window=12)
    assert not np.allclose(windowed[0], predictions[0], atol=1e-3)  # generate() draws its noise per window


def scored_result(num_clips: int = 3, frames: int = 64, seed: int = 0):
    """A real ``EvaluationResult``: the protocol over random-walk ground truth and K noisy trajectories."""
    from transformers_gazeflow.training.evaluation import score

    rng = np.random.default_rng(seed)
    examples, predictions = [], []
    for index in range(num_clips):
        gaze = np.clip(0.5 + np.cumsum(rng.normal(0, 0.01, (frames, 2)), axis=0), 0.05, 0.95)
        examples.append(
            {
                "clip_id": f"c{index}",
                "gaze": gaze,
                "gaze_type": np.ones(frames, np.int64),
                "valid": np.ones(frames, bool),
                "width": 64,
                "height": 48,
            }
        )
        predictions.append(np.clip(gaze[None] + rng.normal(0, 0.05, (4, frames, 2)), 0, 1))
    return score(examples, predictions, sigma_px=5.0)


def test_the_report_prints_both_tables_with_the_dynamics_reference_rows():
    from transformers_gazeflow.metrics.tables import REFERENCE_ROWS, dynamics_table_markdown, main_table_markdown
    from transformers_gazeflow.training.evaluation import report_markdown

    result = scored_result()
    assert set(result.dynamics_references) == {"motionless", "human_halves"}
    report = report_markdown("GazeFlow", result, title="GazeFlow on synthetic")
    assert report.startswith("## GazeFlow on synthetic\n\n")
    assert main_table_markdown({"GazeFlow": result.metrics}) in report
    dynamics = dynamics_table_markdown({"GazeFlow": result.metrics}, result.dynamics_references)
    assert dynamics in report
    lines = dynamics.splitlines()
    for _, name in REFERENCE_ROWS:  # the reference rows sit below the method's row, with real numbers
        row = next(line for line in lines if line.startswith(f"| {name} |"))
        assert lines.index(row) > max(i for i, line in enumerate(lines) if line.startswith("| GazeFlow |"))
        assert any(cell.strip() not in ("-", "") for cell in row.split("|")[2:])
    # then the same row in the paper's layout and the sample set's proper scores
    assert report.index(dynamics) < report.index("In the paper's layout") < report.index("proper scores")
    assert "JSD (log bins)" in report and "W1 (px)" in report
    assert report_markdown("GazeFlow", result) == report.split("\n\n", 1)[1]


def test_results_record_is_the_run_then_the_results_dict_as_valid_json():
    import json

    from transformers_gazeflow.training.evaluation import results_record

    result = scored_result()
    result.metrics["ade_mean"] = float("nan")  # an undefined metric must not write invalid JSON
    record = results_record({"method": "GazeFlow", "clips": 3}, result, seconds_per_clip=0.25)
    assert record["method"] == "GazeFlow" and record["clips"] == 3 and record["seconds_per_clip"] == 0.25
    assert record["metrics"]["ade_mean"] is None and record["metrics"]["f1"] == pytest.approx(result.metrics["f1"])
    assert record["dynamics_references"] == result.to_dict()["dynamics_references"]
    assert record["clip_ids"] == ["c0", "c1", "c2"] and "pr_curve" in record
    assert json.loads(json.dumps(record, allow_nan=False)) == record
    assert "seconds_per_clip" not in results_record({}, result)


def test_the_grid_table_has_one_row_per_k_and_dashes_for_missing_cells():
    from transformers_gazeflow.training.evaluation import grid_table_markdown

    grid = {"K=1,S=2": {"f1": 0.5, "seconds_per_clip": 0.125}, "K=3,S=2": {"f1": 0.25, "seconds_per_clip": 1.5}}
    table = grid_table_markdown(grid, ks=(1, 3), steps=(2, 5)).splitlines()
    assert table[0] == "| K \\ S | 2 | 5 |"
    assert table[2] == "| 1 | 0.500 (0.12 s) | - |" and table[3] == "| 3 | 0.250 (1.50 s) | - |"
