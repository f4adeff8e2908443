"""The gazeflow command: outputs on a real mp4 and a synthetic clip, the demo, bad input, the console script."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from transformers_gazeflow.commands.cli import main
from transformers_gazeflow.data.video import iter_frames, probe_video
from transformers_gazeflow.outputs.overlay import READABLE_SHORT_SIDE, readable_scale
from transformers_gazeflow.outputs.writers import (
    CSV_COLUMNS,
    FIXATION_COLUMNS,
    READOUT_COLUMNS,
    SACCADE_COLUMNS,
    TRUTH_COLUMNS,
)

from .pipeline_fixtures import (  # noqa: F401  (fixtures)
    NUM_SAMPLES,
    faststart_truncated_mp4,
    not_a_gazeflow_folder,
    single_torch_thread,
    synthetic_clip_mp4,
    tiny_model_dir,
)


def read_csv(path: Path, truth: bool = False) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        assert tuple(reader.fieldnames) == CSV_COLUMNS + READOUT_COLUMNS + (TRUTH_COLUMNS if truth else ())
        return list(reader)


def check_outputs(
    out_dir: Path, video: Path, num_samples: int = NUM_SAMPLES, overlay: bool = True, truth: bool = False
) -> dict:
    info = probe_video(video)
    rows = read_csv(out_dir / "gaze.csv", truth=truth)
    assert len(rows) == info.num_frames * (num_samples + 1)  # one row per frame and sample, plus the point estimate
    frames = np.array([int(r["frame_idx"]) for r in rows])
    samples = np.array([int(r["sample_id"]) for r in rows])
    np.testing.assert_array_equal(frames, np.repeat(np.arange(info.num_frames), num_samples + 1))
    np.testing.assert_array_equal(samples, np.tile(np.arange(-1, num_samples), info.num_frames))
    xy = np.array([[float(r["x_norm"]), float(r["y_norm"])] for r in rows])
    px = np.array([[float(r["x_px"]), float(r["y_px"])] for r in rows])
    assert np.all((xy >= 0) & (xy <= 1))
    assert np.all((px >= 0) & (px <= [info.width, info.height]))
    np.testing.assert_allclose(px, xy * [info.width, info.height], atol=0.01)
    t_ms = np.array([float(r["t_ms"]) for r in rows])
    np.testing.assert_allclose(t_ms, frames * 1000.0 / info.fps, atol=1e-3)
    assert {r["video_id"] for r in rows} == {video.stem}
    per_frame = xy.reshape(info.num_frames, num_samples + 1, 2)
    np.testing.assert_allclose(per_frame[:, 0], per_frame[:, 1:].mean(axis=1), atol=2e-6)  # point = mean of samples
    summary = json.loads((out_dir / "summary.json").read_text())
    assert summary["frames"] == info.num_frames and summary["num_samples"] == num_samples
    assert summary["fps"] == info.fps and (summary["width"], summary["height"]) == (info.width, info.height)
    assert {"load_s", "predict_s", "ms_per_frame"} <= set(summary["timings"])
    if overlay:
        overlay_info = probe_video(out_dir / "overlay.mp4")
        assert overlay_info.num_frames == info.num_frames
        assert overlay_info.fps == pytest.approx(info.fps)
        scale = readable_scale(info.height, info.width, READABLE_SHORT_SIDE)  # small videos drawn larger; the CSV
        assert min(overlay_info.width, overlay_info.height) >= min(READABLE_SHORT_SIDE, info.width, info.height)
        assert (overlay_info.width, overlay_info.height) == (info.width * scale, info.height * scale)
        assert sum(1 for _ in iter_frames(out_dir / "overlay.mp4")) == info.num_frames  # it decodes
    else:
        assert not (out_dir / "overlay.mp4").exists()
    assert not list(out_dir.glob("partial.*"))
    return summary


def test_predict_on_a_real_mp4_no_one_here_made(tmp_path, bikes_mp4, tiny_model_dir, capsys):
    out_dir = tmp_path / "bikes"
    status = main(["predict", str(bikes_mp4), "--model", str(tiny_model_dir), "--output-dir", str(out_dir), "-q"])
    assert status == 0
    summary = check_outputs(out_dir, bikes_mp4)
    assert summary["model"] == str(tiny_model_dir) and summary["seed"] == 0
    assert summary["heatmap_sigma_px"] == 25.0  # 3.9% of the 640 px width: the paper's 25 px at 640 px
    assert "250 frames" in capsys.readouterr().out


def test_predict_on_a_synthetic_clip_and_options(tmp_path, synthetic_clip_mp4, tiny_model_dir):
    path, _ = synthetic_clip_mp4
    out_dir = tmp_path / "synthetic"
    status = main(
        [
            "predict",
            str(path),
            "--model",
            str(tiny_model_dir),
            "-o",
            str(out_dir),
            "-k",
            "3",
            "-s",
            "2",
            "--solver",
            "midpoint",
            "--seed",
            "5",
            "--trail",
            "3",
            "-q",
        ]
    )
    assert status == 0
    summary = check_outputs(out_dir, path, num_samples=3)
    assert (summary["num_steps"], summary["solver"], summary["seed"]) == (2, "midpoint", 5)
    no_overlay = tmp_path / "no_overlay"
    assert (
        main(
            [
                "predict",
                str(path),
                "--model",
                str(tiny_model_dir),
                "-o",
                str(no_overlay),
                "--no-overlay",
                "-k",
                "3",
                "-s",
                "2",
                "--solver",
                "midpoint",
                "--seed",
                "5",
                "-q",
            ]
        )
        == 0
    )
    check_outputs(no_overlay, path, num_samples=3, overlay=False)
    assert (no_overlay / "gaze.csv").read_text() == (out_dir / "gaze.csv").read_text()  # same seed, same rows


def test_frame_range(tmp_path, synthetic_clip_mp4, tiny_model_dir):
    path, _ = synthetic_clip_mp4
    out_dir = tmp_path / "range"
    assert (
        main(
            [
                "predict",
                str(path),
                "--model",
                str(tiny_model_dir),
                "-o",
                str(out_dir),
                "--start-frame",
                "10",
                "--end-frame",
                "17",
                "-q",
            ]
        )
        == 0
    )
    rows = read_csv(out_dir / "gaze.csv")
    assert sorted({int(r["frame_idx"]) for r in rows}) == list(range(10, 17))
    assert probe_video(out_dir / "overlay.mp4").num_frames == 7


def test_heatmap_sigma_scales_with_the_frame_or_is_given(tmp_path, synthetic_clip_mp4, tiny_model_dir):
    path, _ = synthetic_clip_mp4  # 64 x 48
    expected = {
        (): 64 * 25 / 640,
        ("--heatmap-sigma", "4"): 4.0,
        ("--heatmap-sigma", "6px"): 6.0,
        ("--heatmap-sigma", "10%"): 6.4,
    }
    for extra, sigma in expected.items():
        out_dir = tmp_path / f"sigma{len(extra)}{extra[-1] if extra else ''}".replace("%", "pct")
        assert (
            main(
                [
                    "predict",
                    str(path),
                    "--model",
                    str(tiny_model_dir),
                    "-o",
                    str(out_dir),
                    "--end-frame",
                    "4",
                    "-q",
                    *extra,
                ]
            )
            == 0
        )
        summary = json.loads((out_dir / "summary.json").read_text())
        assert summary["heatmap_sigma_px"] == pytest.approx(sigma), extra
        assert ("3.9% of the frame width" in summary["heatmap_sigma"]) == (not extra)


def test_demo_writes_the_truth_beside_the_prediction_and_scores_valid_frames(tmp_path, tiny_model_dir, capsys):
    from transformers_gazeflow.data.gaze_types import OFF_FRAME, valid_mask
    from transformers_gazeflow.data.synthetic import SyntheticGazeSettings, generate_clip

    out_dir = tmp_path / "demo"
    assert main(["demo", "--model", str(tiny_model_dir), "-o", str(out_dir), "-q"]) == 0  # 96 frames
    summary = check_outputs(out_dir, out_dir / "demo_input.mp4", truth=True)
    clip = generate_clip(
        SyntheticGazeSettings(num_clips=1, min_frames=96, max_frames=96, width=256, height=192, fps=24.0, seed=7), 0
    )  # the demo's clip
    codes = np.asarray(clip.gaze.gaze_type)
    rows = read_csv(out_dir / "gaze.csv", truth=True)
    for row in rows[:: NUM_SAMPLES + 1]:  # every frame's point-estimate row carries the truth of its frame
        frame = int(row["frame_idx"])
        assert int(row["true_code"]) == codes[frame]
        np.testing.assert_allclose(
            [float(row["true_x_norm"]), float(row["true_y_norm"])], clip.gaze.gaze[frame], atol=1e-6
        )
    scored = valid_mask(codes) & (codes != OFF_FRAME)
    assert (codes == OFF_FRAME).any() and (~valid_mask(codes)).any()  # the clip has frames the score must leave out
    demo = summary["demo"]
    assert demo["frames_scored"] == int(scored.sum())
    left_out_codes = ((0, "untracked"), (3, "blink/other"), (4, "off-frame"))
    assert demo["frames_left_out"] == {
        name: int((codes == code).sum()) for code, name in left_out_codes if (codes == code).any()
    }
    points = np.array([[float(r["x_norm"]), float(r["y_norm"])] for r in rows[:: NUM_SAMPLES + 1]])
    expected = np.linalg.norm(points[scored] - clip.gaze.gaze[scored], axis=1).mean()
    assert demo["point_estimate_error"] == pytest.approx(expected, abs=1e-4)
    assert "frame centre" in capsys.readouterr().out


def test_demo_without_a_bundled_model_says_so(tmp_path, capsys, monkeypatch):
    import transformers_gazeflow.hub.model_folders as hub

    (tmp_path / "no_weights").mkdir()
    monkeypatch.setattr(hub, "default_model_path", lambda causal=False: tmp_path / "no_weights")  # as if no weights
    assert main(["demo", "-o", str(tmp_path / "d")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("gazeflow: error: the bundled default model has no weights yet") and "--model" in err
    assert not (tmp_path / "d").exists()


# ---------------------------------------------------------------------------------------------- bad input
def run_bad(args: list[str], capsys) -> str:
    assert main(args) == 1
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    assert captured.err.startswith("gazeflow: error: ")
    return captured.err


def test_bad_videos_exit_1_with_a_message_naming_them(tmp_path, bikes_mp4, tiny_model_dir, capsys):
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    text = tmp_path / "notes.mp4"
    text.write_text("not a video\n" * 10)
    truncated = tmp_path / "cut.mp4"
    truncated.write_bytes(bikes_mp4.read_bytes()[:100_000])
    for bad in (tmp_path / "missing.mp4", empty, text, truncated, faststart_truncated_mp4(tmp_path)):
        out_dir = tmp_path / f"out_{bad.stem}"
        err = run_bad(["predict", str(bad), "--model", str(tiny_model_dir), "-o", str(out_dir), "-q"], capsys)
        assert bad.name in err and "Errno" not in err
        assert not out_dir.exists()  # nothing half-written is left behind, not even an empty folder


def test_unknown_model_folder_exits_1_naming_it(tmp_path, synthetic_clip_mp4, not_a_gazeflow_folder, capsys):
    path, _ = synthetic_clip_mp4
    err = run_bad(["predict", str(path), "--model", str(not_a_gazeflow_folder), "-o", str(tmp_path / "o")], capsys)
    assert str(not_a_gazeflow_folder) in err and "not a GazeFlow model folder" in err
    err = run_bad(["predict", str(path), "--model", str(tmp_path / "no_such_model"), "-o", str(tmp_path / "o")], capsys)
    assert "no_such_model" in err


def test_bad_frame_range_exits_1(tmp_path, synthetic_clip_mp4, tiny_model_dir, capsys):
    path, clip = synthetic_clip_mp4
    err = run_bad(
        [
            "predict",
            str(path),
            "--model",
            str(tiny_model_dir),
            "-o",
            str(tmp_path / "o"),
            "--start-frame",
            str(clip.num_frames),
        ],
        capsys,
    )
    assert "past the end" in err and path.name in err


def test_console_script_is_installed():
    script = shutil.which("gazeflow", path=os.path.dirname(sys.executable)) or shutil.which("gazeflow")
    if script is None:
        pytest.skip("the gazeflow console script is not on PATH (pip install -e . installs it)")
    result = subprocess.run([script, "predict", "--help"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and "--output-dir" in result.stdout


def test_the_readme_documents_every_option_and_gaze_csv_column():
    from transformers_gazeflow.commands.batch import INDEX_COLUMNS
    from transformers_gazeflow.commands.cli import COMMANDS, build_parser

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    for name in COMMANDS:
        for action in commands[name]._actions:
            for option in action.option_strings:
                if option.startswith("--") and option != "--help":
                    assert f"`{option}" in readme or f"{option}`" in readme or f"/{option}`" in readme, option
    for column in CSV_COLUMNS + READOUT_COLUMNS + TRUTH_COLUMNS + INDEX_COLUMNS + FIXATION_COLUMNS + SACCADE_COLUMNS:
        assert f"`{column}`" in readme, column


@pytest.mark.parametrize("module", ["transformers_gazeflow", "transformers_gazeflow.cli"])
def test_the_command_runs_as_a_module_the_way_launchers_start_it(module):
    """``python -m transformers_gazeflow.cli`` (the README's ``accelerate launch -m`` form, kept from the flat layout)
    and ``python -m transformers_gazeflow`` run the ``gazeflow`` command."""
    done = subprocess.run([sys.executable, "-m", module, "--version"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("gazeflow ")


def test_the_example_command_in_the_cli_docstring_imports_and_calls_what_exists():
    """commands/cli.py's docstring shows how to add a command: every module, name and keyword it uses exists."""
    import ast
    import importlib
    import inspect
    import textwrap

    from transformers_gazeflow.commands import cli

    example = ast.parse(textwrap.dedent(cli.__doc__.split("::", 1)[1]))
    imported = {}
    for node in ast.walk(example):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 1, ast.unparse(node)
            module = importlib.import_module(f"transformers_gazeflow.commands.{node.module}")
            for alias in node.names:
                assert hasattr(module, alias.name), (
                    f"{ast.unparse(node)}: transformers_gazeflow.commands.{node.module} has no {alias.name}"
                )
                imported[alias.asname or alias.name] = getattr(module, alias.name)
    assert imported
    for node in ast.walk(example):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            function = imported.get(node.func.id) or getattr(cli, node.func.id, None)
            if function is not None:
                inspect.signature(function).bind(*[None] * len(node.args), **{k.arg: None for k in node.keywords})
