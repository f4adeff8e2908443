"""Errors a new user meets in the first hour say what to do, in one line: a guess for a mistyped option or command
with the subcommand's own help, the install command of a missing extra (nothing created before), a model name that
is neither a folder nor reachable refused at once, pixels in a tracker CSV's unit columns named as such, and a file
that is no video refused before torch is imported."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from transformers_gazeflow.commands.cli import main
from transformers_gazeflow.data.tracker_gaze import read_tracker_gaze
from transformers_gazeflow.data.video import write_video

from .conftest import gradient_frames, run_python


def gazeflow(*args, env: dict | None = None, cwd=None):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "transformers_gazeflow.commands.cli", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=600,
    )


def error_line(capsys, argv, status) -> str:
    assert main([str(a) for a in argv]) == status
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gazeflow: error: "), lines
    return lines[0]


@pytest.fixture
def video(tmp_path):
    path = tmp_path / "clip.mp4"
    write_video(path, gradient_frames(6, 48, 64), fps=24)
    return path


@pytest.mark.parametrize(
    "argv, guess, help_of",
    [
        (["predict", "v.mp4", "-o", "out", "--num-sample", "3"], "did you mean --num-samples?", "gazeflow predict"),
        (["predict", "v.mp4", "-o", "out", "--threds=2"], "did you mean --threads?", "gazeflow predict"),
        (["stream", "v.mp4", "--sumary", "s.json"], "did you mean --summary?", "gazeflow stream"),
        (["predcit", "v.mp4"], "did you mean predict?", "gazeflow"),
    ],
)
def test_a_mistyped_option_or_command_gets_a_guess_and_the_subcommand_help(tmp_path, capsys, argv, guess, help_of):
    line = error_line(capsys, argv, 2)
    assert line.endswith(f"; {guess} (see '{help_of} --help')"), line
    assert not (tmp_path / "out").exists()


def test_an_option_far_from_every_known_one_gets_no_guess(capsys):
    line = error_line(capsys, ["predict", "v.mp4", "-o", "out", "--zzzz"], 2)
    assert "did you mean" not in line and line.endswith("(see 'gazeflow predict --help')")


def test_export_streamer_without_the_onnx_extra_names_the_install_and_creates_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxscript", None)  # find_spec answers None: as if not installed
    line = error_line(capsys, ["export-streamer", "-o", tmp_path / "onnx_step"], 1)
    install = 'pip install "transformers-gazeflow[onnx]"'
    assert line == f"gazeflow: error: gazeflow export-streamer needs onnxscript (the [onnx] extra): {install}"
    assert not (tmp_path / "onnx_step").exists()


def test_the_onnxruntime_backend_without_the_onnx_extra_names_the_install(tmp_path, capsys, monkeypatch, video):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    (tmp_path / "onnx_step").mkdir()
    line = error_line(capsys, ["stream", video, "--backend", "onnxruntime", "--onnx", tmp_path / "onnx_step"], 1)
    assert 'needs onnxruntime (the [onnx] extra): pip install "transformers-gazeflow[onnx]"' in line


@pytest.mark.parametrize(
    "env, reason",
    [
        ({"HF_HUB_OFFLINE": "1"}, "not in the Hugging Face cache (HF_HUB_OFFLINE is set)"),
        ({"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": "http://127.0.0.1:9"}, "127.0.0.1 is not reachable"),
    ],
)
def test_a_model_name_that_is_no_folder_and_not_reachable_fails_at_once(tmp_path, video, env, reason):
    (tmp_path / "runs").mkdir()
    result = gazeflow(
        "predict",
        video,
        "--model",
        "runs/doesnotexist",
        "-o",
        tmp_path / "out",
        cwd=tmp_path,
        env={**env, "HF_HUB_CACHE": str(tmp_path / "hub_cache")},
    )
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1, result.stderr[-2000:]
    assert "'runs/doesnotexist' is no folder here" in result.stderr and reason in result.stderr, result.stderr
    assert not (tmp_path / "out").exists()  # and no retry warnings: the one line above (the Hub's retries took 38 s)


def test_pixels_in_a_tracker_csv_are_named(tmp_path):
    path = tmp_path / "tracker.csv"
    path.write_text("frame_idx,x_norm,y_norm\n0,320.5,240\n1,331,250.25\n2,0.5,0.5\n")
    gaze = read_tracker_gaze(path, num_frames=3, fps=30)
    assert "2 rows have x_norm/y_norm up to (331, 250.25), which look like pixels" in gaze.hint
    assert gaze.gaze_type.tolist()[2] != gaze.gaze_type.tolist()[0]  # the one unit row is kept
    path.write_text("frame_idx,x_norm,y_norm\n0,1.2,0.5\n1,0.5,0.5\n2,0.5,0.5\n")
    assert read_tracker_gaze(path, num_frames=3, fps=30).hint == ""  # one row just off the frame: no guess


def test_calibrate_says_a_tracker_csv_looks_like_pixels(tmp_path, video):
    tracker = tmp_path / "tracker.csv"
    tracker.write_text("frame_idx,x_norm,y_norm\n" + "".join(f"{i},{30 + i},{20 + i}\n" for i in range(6)))
    result = gazeflow("calibrate", video, "--gaze", tracker, "-o", tmp_path / "calib.json")
    assert result.returncode == 1, result.stderr[-2000:]
    assert "no usable gaze rows" in result.stderr and "which look like pixels" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "calib.json").exists()


def test_a_file_that_is_no_video_is_refused_before_torch_is_imported(tmp_path):
    fake = tmp_path / "notes.mp4"
    fake.write_text("a text file renamed .mp4\n" * 500)
    code = (
        "import sys\nfrom transformers_gazeflow.commands.cli import main\n"
        f"status = main(['predict', {str(fake)!r}, '-o', {str(tmp_path / 'out')!r}])\n"
        "print(status, 'torch' in sys.modules)\n"
    )
    out = run_python(code, env={**os.environ, "HF_HUB_OFFLINE": "1"}).strip().splitlines()[-1]
    assert out == "1 False", out
    assert not (tmp_path / "out").exists()


def test_gazeflow_app_tells_a_command_line_user_about_share_the_command_lines_way(tmp_path):
    """gradio's own hint ("set `share=True` in `launch()`") speaks to Python callers; the command says --share."""
    pytest.importorskip("gradio", reason="the web demo needs gradio: pip install -e '.[app]'")
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False"}
    env.update(XDG_CACHE_HOME=str(tmp_path / "cache"), TMPDIR=str(tmp_path))
    process = subprocess.Popen(
        [sys.executable, "-m", "transformers_gazeflow.commands.cli", "app", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    import threading

    watchdog = threading.Timer(600, process.kill)  # a server that never says where it is fails the test, not CI
    watchdog.start()
    try:
        lines = []
        for line in process.stdout:
            lines.append(line)
            if line.startswith("gazeflow app: "):
                break
    finally:
        watchdog.cancel()
        process.terminate()
        rest, _ = process.communicate(timeout=60)
    said = "".join(lines)
    assert f"gazeflow app: the web demo is at http://127.0.0.1:{port}" in said, said + rest
    assert "(add --share for a public gradio.live link); Ctrl-C stops it" in said
    assert "share=True" not in said + rest
