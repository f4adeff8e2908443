"""examples/probe.py, attention_analysis.py and failure_analysis.py end to end on a tiny random model and the tiny
synthetic dataset (in process through ``main(argv)``; one subprocess run checks the one-line error), and the model
side they share (``analysis.capture``)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from tests.script_loading import load_script
from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
from transformers_gazeflow.analysis.attention import ROLES
from transformers_gazeflow.analysis.capture import (
    clip_attentions,
    clip_task_banks,
    load_analysis_model,
    load_first_windows,
)

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def script(name):
    return load_script(EXAMPLES / f"{name}.py", f"analysis_script_{name}")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """The tiny synthetic dataset (6 clips: 4 train, 1 validation, 1 test) and a datasets cache of its own."""
    root = tmp_path_factory.mktemp("analysis_data")
    return {"data_dir": root / "synthetic_tiny", "cache_dir": root / "hf_cache"}


def common(tiny_sigma5_model_dir, data, split_option="--split", split="train"):
    args = [
        "--model_name_or_path",
        str(tiny_sigma5_model_dir),
        "--dataset_name",
        "synthetic",
        "--data_dir",
        str(data["data_dir"]),
        "--dataset_config",
        "tiny",
        "--cache_dir",
        str(data["cache_dir"]),
    ]
    return args + ([split_option, split] if split_option else [])


def opened_png(path, min_size=(300, 200)):
    """The PNG opens, is at least ``min_size`` pixels and is not blank (many colours, not one flat fill)."""
    with Image.open(path) as image:
        assert image.format == "PNG"
        assert image.width >= min_size[0] and image.height >= min_size[1], image.size
        pixels = np.asarray(image.convert("RGB"))
    assert pixels.std() > 10
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 20
    return pixels


@pytest.fixture(scope="module")
def loaded(tiny_sigma5_model_dir, data):
    model, processor = load_analysis_model(str(tiny_sigma5_model_dir))
    examples = load_first_windows(
        "synthetic", str(data["data_dir"]), "train", "tiny", model.config.num_frames, cache_dir=str(data["cache_dir"])
    )
    return model, processor, examples


# ------------------------------------------------------------------------------------------------ analysis.capture
def test_task_banks_are_the_condition_encoders_and_do_not_depend_on_batching(loaded):
    model, processor, examples = loaded
    one = clip_task_banks(model, processor, examples, batch_size=1)
    together = clip_task_banks(model, processor, examples, batch_size=3)
    assert one.global_tokens.shape == (len(examples), model.config.hidden_size)
    assert one.query_tokens.shape == (len(examples), model.config.num_task_queries, model.config.hidden_size)
    assert np.allclose(one.global_tokens, together.global_tokens, atol=1e-5)
    assert np.allclose(one.query_tokens, together.query_tokens, atol=1e-5)
    assert one.labels["action"].tolist() == [e["action"] for e in examples]
    assert set(one.labels["verb"].tolist()) == {-1}  # synthetic clips have only an action label
    # the bank read straight off the condition encoder
    from transformers_gazeflow.data.collator import GazeFlowDataCollator

    batch = GazeFlowDataCollator(processor, num_frames=model.config.num_frames)([examples[0]])
    with torch.no_grad():
        _, encoded = model.encode_condition(model.encode_video(batch["pixel_values_videos"]), model.config.num_frames)
    assert np.allclose(one.global_tokens[0], encoded.task_tokens[0, 0].numpy(), atol=1e-6)
    assert np.allclose(one.query_tokens[0], encoded.task_tokens[0, 1:].numpy(), atol=1e-6)


def test_clip_attentions_shapes_rows_and_seeds(loaded):
    model, processor, examples = loaded
    config = model.config
    captured = clip_attentions(model, processor, examples[0], flow_time=0.5, num_samples=3, seed=1)
    window, layers, heads = config.num_frames, config.num_hidden_layers, config.num_attention_heads
    assert captured.self_attention.shape == (layers, 3, heads, window, window)
    assert captured.visual_cross_attention.shape == (layers, 3, heads, window, config.tokens_per_frame)
    assert np.allclose(captured.self_attention.sum(-1), 1.0, atol=1e-5)
    assert np.allclose(captured.visual_cross_attention.sum(-1), 1.0, atol=1e-5)
    again = clip_attentions(model, processor, examples[0], flow_time=0.5, num_samples=3, seed=1)
    assert np.array_equal(captured.self_attention, again.self_attention)
    other_time = clip_attentions(model, processor, examples[0], flow_time=0.9, num_samples=3, seed=1)
    assert not np.allclose(captured.self_attention, other_time.self_attention)
    with pytest.raises(ValueError, match=r"flow_time must be in \[0, 1\]"):
        clip_attentions(model, processor, examples[0], flow_time=1.5)


def test_clip_attentions_needs_the_eager_kernel(tiny_sigma5_model_dir, loaded):
    _, processor, examples = loaded
    model = GazeFlowModel.from_pretrained(tiny_sigma5_model_dir, attn_implementation="sdpa").eval()
    with pytest.raises(ValueError, match="attn_implementation='eager'"):
        clip_attentions(model, processor, examples[0])


def test_windows_longer_than_the_model_are_refused(loaded, data):
    model, processor, _ = loaded
    long = load_first_windows(
        "synthetic", str(data["data_dir"]), "train", "tiny", 32, max_clips=1, cache_dir=str(data["cache_dir"])
    )
    assert long[0]["num_frames"] > model.config.num_frames
    with pytest.raises(ValueError, match="more than the model's window of 8"):
        clip_task_banks(model, processor, long)


# ------------------------------------------------------------------------------------------------------ the scripts
def test_probe_script_writes_the_table_json_and_figure(tmp_path, tiny_sigma5_model_dir, data, capsys):
    probe = script("probe")
    # the tiny set has 1 validation and 1 test clip; probe on train, choose on validation, score on test
    assert probe.main(common(tiny_sigma5_model_dir, data, None) + ["--output_dir", str(tmp_path)]) == 0
    table = json.loads((tmp_path / "probe.json").read_text())
    action = table["heads"]["action"]
    assert table["heads"]["verb"] is None and table["heads"]["noun"] is None  # synthetic: action only
    assert action["clips"] == {"train": 4, "validation": 1, "test": 1}
    assert set(action["rows"]) == {"q", "p", "pq", "union", "encoder", "chance"}
    for row in action["rows"].values():
        assert row["top1"] in (0.0, 1.0)  # one test clip
        assert row["top5"] is None  # top-5 of 4 classes is not measurable
    assert action["rows"]["union"]["top1"] == max(action["rows"]["p"]["top1"], action["rows"]["q"]["top1"])
    markdown = (tmp_path / "probe.md").read_text()
    assert "| chance (most frequent train classes) |" in markdown and "| p ∪ q_1..M |" in markdown
    assert "Verb" not in markdown.split("\n\n")[1] and "no labels for noun, verb" in markdown
    assert "| control: the encoder's tokens, mean-pooled |" in markdown
    assert markdown.strip() in capsys.readouterr().out
    opened_png(tmp_path / "probe.png")


def test_probe_holds_out_validation_clips_from_train(tmp_path, tiny_sigma5_model_dir, data):
    probe = script("probe")
    assert (
        probe.main(
            common(tiny_sigma5_model_dir, data, "--validation_split", "none")
            + ["--validation_fraction", "0.25", "--output_dir", str(tmp_path)]
        )
        == 0
    )
    table = json.loads((tmp_path / "probe.json").read_text())
    assert table["heads"]["action"]["clips"] == {"train": 3, "validation": 1, "test": 1}
    assert (
        probe.main(
            common(tiny_sigma5_model_dir, data, "--validation_split", "none")
            + ["--no_encoder_control", "--output_dir", str(tmp_path / "plain")]
        )
        == 0
    )
    assert "encoder" not in json.loads((tmp_path / "plain" / "probe.json").read_text())["heads"]["action"]["rows"]


def test_encoder_control_is_the_pooled_encoder_tokens(loaded):
    from transformers_gazeflow.analysis.capture import clip_encoder_features
    from transformers_gazeflow.data.collator import GazeFlowDataCollator

    model, processor, examples = loaded
    control = clip_encoder_features(model, processor, examples, batch_size=3)
    assert control.num_queries == 0 and control.global_tokens.shape == (len(examples), 32)
    batch = GazeFlowDataCollator(processor, num_frames=model.config.num_frames)(examples[1:2])
    with torch.no_grad():
        tokens = model.encode_video(batch["pixel_values_videos"])
    assert np.allclose(control.global_tokens[1], tokens[0].mean(dim=0).numpy(), atol=1e-6)


def test_attention_analysis_writes_roles_attribution_and_figures(tmp_path, tiny_sigma5_model_dir, data):
    attention = script("attention_analysis")
    assert (
        attention.main(
            common(tiny_sigma5_model_dir, data)
            + ["--group_by", "action", "--num_samples", "2", "--output_dir", str(tmp_path)]
        )
        == 0
    )
    config = GazeFlowConfig.tiny()
    roles = json.loads((tmp_path / "roles.json").read_text())
    assert roles["num_clips"] == 4 and roles["grid"] == config.num_frames
    assert len(roles["heads"]) == config.num_hidden_layers * config.num_attention_heads
    assert sum(roles["counts"].values()) == len(roles["heads"]) and set(roles["counts"]) == set(ROLES)
    for head in roles["heads"]:
        assert head["past"] + head["current"] + head["future"] == pytest.approx(1.0, abs=1e-6)
    attribution = json.loads((tmp_path / "attribution.json").read_text())
    assert attribution["num_clips"] == 4
    for head in attribution["heads"]:
        total = head["hand_mean"] + head["object_mean"] + head["background_mean"]
        assert total == pytest.approx(1.0, abs=1e-6)
    assert sum(attribution["global_mean"].values()) == pytest.approx(1.0, abs=1e-5)
    assert sum(attribution["uniform_attention"].values()) == pytest.approx(1.0, abs=1e-5)
    assert 0 < attribution["uniform_attention"]["hand"] < 0.5 and 0 < attribution["uniform_attention"]["object"] < 0.5
    assert attribution["global_mean"]["hand"] > 0 and attribution["global_mean"]["object"] > 0
    assert (
        set(attribution["groups"]) <= {"take red disc", "cut green square", "stir blue triangle", "wash yellow diamond"}
        and attribution["groups"]
    )
    report = (tmp_path / "report.md").read_text()
    assert "### Gaze self-attention roles" in report and "### Visual cross-attention" in report
    for name in ("self_attn_grid", "self_attn_offset", "attribution_scatter", "attribution_by_group"):
        opened_png(tmp_path / f"{name}.png")


def test_attention_analysis_with_a_mask_folder(tmp_path, tiny_sigma5_model_dir, data, loaded):
    """Masks from a folder (any segmenter): the hand covers the top row of every frame, the object nothing; the
    folder's hand mass must then equal the mass on the top row of tokens computed by hand."""
    model, processor, examples = loaded
    masks = tmp_path / "masks"
    masks.mkdir()
    for example in examples:
        frames = int(example["window_start"]) + int(example["num_frames"])
        hand = np.zeros((frames, 48, 64), bool)
        hand[:, :24] = True  # the top half: token row 0 of the 2 x 2 grid
        np.savez(masks / f"{example['clip_id']}.npz", hand=hand, object=np.zeros_like(hand))
    attention = script("attention_analysis")
    out = tmp_path / "out"
    assert (
        attention.main(
            common(tiny_sigma5_model_dir, data)
            + ["--mask_dir", str(masks), "--num_samples", "2", "--seed", "3", "--output_dir", str(out)]
        )
        == 0
    )
    result = json.loads((out / "attribution.json").read_text())
    assert result["groups"] == {}  # no verb labels: no breakdown
    assert not (out / "attribution_by_group.png").exists()
    expected = []
    for index, example in enumerate(examples):
        captured = clip_attentions(model, processor, example, 0.5, 2, 3 + index)
        weights = captured.visual_cross_attention.mean(axis=1)[:, :, : captured.num_frames]
        expected.append(weights[..., :2].sum(axis=(-1, -2)) / weights.sum(axis=(-1, -2)))  # tokens 0, 1: top row
    expected = np.mean(expected, axis=0)
    got = np.array(
        [[h["hand_mean"] for h in result["heads"] if h["layer"] == layer] for layer in range(expected.shape[0])]
    )
    assert np.allclose(got, expected, atol=1e-6)
    assert all(h["object_mean"] == 0 for h in result["heads"])
    # the reference: uniform attention puts half its mass on the top half, the hand
    assert result["uniform_attention"] == {"hand": 0.5, "object": 0.0, "background": 0.5}


def test_failure_analysis_writes_errors_flags_and_the_worst_clips(tmp_path, tiny_sigma5_model_dir, data):
    failures = script("failure_analysis")
    assert (
        failures.main(
            common(tiny_sigma5_model_dir, data)
            + [
                "--num_samples",
                "2",
                "--num_steps",
                "2",
                "--worst",
                "2",
                "--window_frames",
                "32",
                "--output_dir",
                str(tmp_path),
            ]
        )
        == 0
    )
    result = json.loads((tmp_path / "failures.json").read_text())
    summary, clips = result["summary"], result["clips"]
    assert summary["clips"] == len(clips) == 4
    assert summary["valid_frames"] == sum(c["valid_frames"] for c in clips)
    means = [c["mean_error_px"] for c in clips]
    assert all(np.isfinite(means)) and min(means) > 0
    weighted = sum(c["mean_error_px"] * c["valid_frames"] for c in clips) / summary["valid_frames"]
    assert summary["mean_error_px"] == pytest.approx(weighted, rel=1e-6)
    for flag in summary["flags"].values():
        assert 0.0 <= flag["frame_share"] <= 1.0 and (
            flag["error_share"] != flag["error_share"] or 0.0 <= flag["error_share"] <= 1.0
        )
    markdown = (tmp_path / "failures.md").read_text()
    worst = sorted(clips, key=lambda c: -c["mean_error_px"])[:2]
    assert markdown.index(worst[0]["clip_id"]) < markdown.index(worst[1]["clip_id"])
    pixels = opened_png(tmp_path / "failure_cases.png")
    assert pixels.shape[0] > 200  # two rows of frames


# ----------------------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "name, extra, message",
    [
        ("probe", ["--max_clips", "0"], "--max_clips must be >= 1"),
        ("probe", ["--validation_fraction", "1.5"], "--validation_fraction must be in (0, 1)"),
        ("attention_analysis", ["--flow_time", "2"], "--flow_time must be in [0, 1]"),
        ("attention_analysis", ["--role_rule", "bogus=1"], "unknown role-rule settings ['bogus']"),
        ("attention_analysis", ["--role_rule", "local_share"], "expected key=value pairs"),
        ("attention_analysis", ["--grid", "1"], "--grid must be >= 2"),
        ("failure_analysis", ["--border", "0.7"], "border must be in [0, 0.5)"),
        ("failure_analysis", ["--worst", "0"], "--worst must be >= 1"),
    ],
)
def test_bad_options_are_usage_errors(name, extra, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        script(name).parse_args(["--dataset_name", "synthetic", "--output_dir", str(tmp_path), *extra])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    "name, extra, message",
    [
        ("probe", ["--test_split", "bogus"], "--test_split bogus of synthetic"),
        ("attention_analysis", ["--split", "bogus"], "--split bogus of synthetic"),
        ("failure_analysis", ["--split", "bogus"], "--split bogus of synthetic"),
        ("attention_analysis", ["--mask_dir", "/nonexistent/masks"], "--mask_dir /nonexistent/masks: mask folder"),
    ],
)
def test_bad_inputs_name_the_argument(name, extra, message, tmp_path, tiny_sigma5_model_dir, data):
    with pytest.raises(ValueError) as err:
        script(name).main(common(tiny_sigma5_model_dir, data, None) + [*extra, "--output_dir", str(tmp_path)])
    assert message in str(err.value)


def test_a_missing_mask_is_named(tmp_path, tiny_sigma5_model_dir, data):
    (tmp_path / "masks").mkdir()
    with pytest.raises(ValueError, match=r"--mask_dir .*masks: no masks of synth_0_\d+ in"):
        script("attention_analysis").main(
            common(tiny_sigma5_model_dir, data)
            + ["--mask_dir", str(tmp_path / "masks"), "--output_dir", str(tmp_path / "out")]
        )


def test_a_bad_model_folder_is_one_line(tmp_path, data):
    (tmp_path / "not_a_model").mkdir()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "HF_DATASETS_CACHE": str(data["cache_dir"])}
    result = subprocess.run(
        [
            sys.executable,
            str(EXAMPLES / "probe.py"),
            "--model_name_or_path",
            str(tmp_path / "not_a_model"),
            "--dataset_name",
            "synthetic",
            "--output_dir",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"probe.py: error: --model_name_or_path {tmp_path / 'not_a_model'}")
    assert "Traceback" not in result.stderr


def test_sample_motion_writes_one_row_per_step_count(tmp_path, tiny_sigma5_model_dir, data):
    motion = script("sample_motion")
    argv = common(tiny_sigma5_model_dir, data) + [
        "--num_samples",
        "3",
        "--num_steps",
        "1",
        "2",
        "--window_frames",
        "32",
    ]
    assert motion.main(argv + ["--output_dir", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "sample_motion.json").read_text())
    assert [row["num_steps"] for row in rows] == [1, 2] and all(row["num_samples"] == 3 for row in rows)
    for row in rows:
        assert row["sample_ratio"] == pytest.approx(row["sample_step_px"] / row["human_step_px"])
        assert -1.0 <= row["deviation_lag1"] <= 1.0 and row["deviation_px"] > 0
    assert rows[0]["human_step_px"] == rows[1]["human_step_px"]
    assert rows[0]["recorded_per_100_frames"] == rows[1]["recorded_per_100_frames"]  # the recording's, once
    assert all(row["samples_per_100_frames"] >= 0 and row["measured"] >= 0 for row in rows)
    table = (tmp_path / "sample_motion.md").read_text()
    assert f"| 2 | {rows[1]['noise_scale']:g} | {rows[1]['sample_ratio']:.2f}x |" in table


def test_sample_motion_samples_at_the_noise_scale_asked(tmp_path, tiny_sigma5_model_dir, data):
    # x_0 = tau e: from starts 1e-6 apart the deterministic ODE keeps the K samples together to well under a pixel
    motion = script("sample_motion")
    argv = common(tiny_sigma5_model_dir, data) + ["--num_samples", "3", "--num_steps", "2", "--window_frames", "32"]
    assert motion.main(argv + ["--noise_scale", "1e-6", "--output_dir", str(tmp_path / "cold")]) == 0
    assert motion.main(argv + ["--output_dir", str(tmp_path / "own")]) == 0
    (cold,) = json.loads((tmp_path / "cold" / "sample_motion.json").read_text())
    (own,) = json.loads((tmp_path / "own" / "sample_motion.json").read_text())
    assert cold["noise_scale"] == 1e-6 and own["noise_scale"] == 1.0
    assert cold["deviation_px"] < 1e-3 < own["deviation_px"]
    for bad in ("0", "-1", "inf"):
        with pytest.raises(SystemExit):
            motion.parse_args(argv + ["--noise_scale", bad, "--output_dir", str(tmp_path)])
