"""The gazeflow command as a user meets it, run as a real command in a subprocess: a fast start, one-line errors
for every bad argument and input, GAZEFLOW_DEBUG, --version, and SIGINT/SIGTERM leaving nothing half-written."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from transformers_gazeflow import __version__
from transformers_gazeflow.data.video import iter_frames, write_video

from .conftest import run_python
from .pipeline_fixtures import (  # noqa: F401  (fixtures)
    random_video,
    single_torch_thread,
    synthetic_clip_mp4,
    tiny_model_dir,
)

HEAVY = ("torch", "transformers", "numpy")


def gazeflow(*args: str, env: dict | None = None, cwd: Path | None = None, timeout: float = 600):
    """Run ``python -m transformers_gazeflow.commands.cli *args`` (the ``gazeflow`` console script's code)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "transformers_gazeflow.commands.cli", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
    )


def one_error_line(result, status: int) -> str:
    assert result.returncode == status, (result.returncode, result.stderr[-2000:])
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gazeflow: error: "), result.stderr[-2000:]
    return lines[0]


def test_help_version_and_argument_errors_import_neither_torch_nor_transformers(tmp_path):
    """What makes them fast (bench_startup.py measures it): nothing heavy is imported, and nothing is written."""
    out = tmp_path / "out"
    cases = {
        "help": ["--help"],
        "predict_help": ["predict", "--help"],
        "version": ["--version"],
        "samples": ["predict", "v.mp4", "-o", out, "--num-samples", "0"],
        "steps": ["predict", "v.mp4", "-o", out, "-s", "-1"],
        "threads": ["predict", "v.mp4", "-o", out, "--threads", "0"],
        "device": ["predict", "v.mp4", "-o", out, "--device", "gpu"],
        "sigma": ["predict", "v.mp4", "-o", out, "--heatmap-sigma", "-3"],
        "range": ["predict", "v.mp4", "-o", out, "--start-frame", "9", "--end-frame", "4"],
        "frames": ["demo", "-o", out, "--frames", "0"],
        "unknown": ["predict", "v.mp4", "-o", out, "--num-sample", "3"],
        "command": ["frobnicate"],
    }
    code = (
        "import io, json, sys, contextlib\nfrom transformers_gazeflow.commands.cli import main\nresults = {}\n"
        f"for name, argv in {json.dumps({k: [str(a) for a in v] for k, v in cases.items()})}.items():\n"
        "    err, out = io.StringIO(), io.StringIO()\n"
        "    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):\n"
        "        status = main(argv)\n"
        "    results[name] = [status, out.getvalue(), err.getvalue()]\n"
        f"results['imported'] = sorted(m for m in {HEAVY!r} if m in sys.modules)\n"
        "print(json.dumps(results))\n"
    )
    results = json.loads(run_python(code, cwd=tmp_path, timeout=300).strip().splitlines()[-1])
    assert results.pop("imported") == []
    for name in ("help", "predict_help", "version"):
        assert results[name][0] == 0 and not results[name][2], name
    assert "--heatmap-sigma" in results["predict_help"][1] and "(default: 8)" in results["predict_help"][1]
    assert results["version"][1].startswith(f"gazeflow {__version__}")
    expected = {
        "samples": "--num-samples 0: expected an integer >= 1",
        "steps": "--num-steps -1",
        "threads": "--threads 0: expected an integer >= 1",
        "device": "--device 'gpu': unknown device",
        "sigma": "argument --heatmap-sigma: '-3'",
        "range": "--end-frame 4 must be greater than --start-frame 9",
        "frames": "--frames 0",
        "unknown": "unrecognized arguments: --num-sample",
        "command": "argument COMMAND: invalid choice: 'frobnicate'",
    }
    for name, text in expected.items():
        status, stdout, stderr = results[name]
        assert status == 2 and not stdout, (name, status, stdout)
        assert stderr.startswith(f"gazeflow: error: {text}") and stderr.count("\n") == 1, (name, stderr)
    assert not out.exists()


def test_the_real_command_answers_help_and_a_bad_argument(tmp_path):
    result = gazeflow("predict", "v.mp4", "-o", tmp_path / "o", "-k", "0")
    assert "--num-samples 0" in one_error_line(result, 2)
    result = gazeflow("--version")
    assert result.returncode == 0 and result.stdout.startswith(f"gazeflow {__version__} (")
    assert "torch" in result.stdout and "transformers" in result.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_devices_this_machine_does_not_have(tmp_path, synthetic_clip_mp4, tiny_model_dir):
    path, _ = synthetic_clip_mp4
    line = one_error_line(
        gazeflow("predict", path, "--model", tiny_model_dir, "-o", tmp_path / "o", "--device", "cuda"), 1
    )
    assert "--device cuda:" in line and ("without CUDA" in line or "no CUDA GPU" in line) and "--device cpu" in line
    if not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        line = one_error_line(
            gazeflow("predict", path, "--model", tiny_model_dir, "-o", tmp_path / "o", "--device", "mps"), 1
        )
        assert "--device mps: MPS is not available" in line
    assert not (tmp_path / "o").exists()


def test_bad_inputs_are_one_line_naming_them(tmp_path, synthetic_clip_mp4, tiny_model_dir):
    path, _ = synthetic_clip_mp4
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a folder")
    line = one_error_line(gazeflow("predict", path, "--model", tiny_model_dir, "-o", a_file), 1)
    assert (
        line == f"gazeflow: error: --output-dir {a_file}: is an existing file, expected a folder (or a path that "
        "does not exist yet)"
    )
    line = one_error_line(gazeflow("predict", path, "--model", tiny_model_dir, "-o", a_file / "sub"), 1)
    assert f"{a_file} is a file" in line
    fake = tmp_path / "fake.mp4"
    fake.write_bytes(os.urandom(4096))
    line = one_error_line(gazeflow("predict", fake, "--model", tiny_model_dir, "-o", tmp_path / "f"), 1)
    assert str(fake) in line and "Errno" not in line and "cannot decode video" in line
    assert not (tmp_path / "f").exists()
    debug = gazeflow("predict", fake, "--model", tiny_model_dir, "-o", tmp_path / "f", env={"GAZEFLOW_DEBUG": "1"})
    assert debug.returncode != 0 and "Traceback" in debug.stderr and "VideoDecodeError" in debug.stderr


def _long_video(folder: Path, frames: int = 1500) -> Path:
    return write_video(folder / "long.mp4", random_video(frames, 24, 32, seed=4), fps=25)


def _sizes(paths) -> list[int]:
    """The sizes of ``paths`` that still exist (a temporary may be renamed between the listing and the look)."""
    sizes = []
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            sizes.append(path.stat().st_size)
    return sizes


def _interrupt(tmp_path: Path, model: Path, signum: int, overlay: bool, out: Path) -> subprocess.CompletedProcess:
    args = [
        sys.executable,
        "-m",
        "transformers_gazeflow.commands.cli",
        "predict",
        str(_long_video(tmp_path)),
        "--model",
        str(model),
        "-o",
        str(out),
        "-q",
        *([] if overlay else ["--no-overlay"]),
    ]
    # a shell's background job (CI scripts run with `cmd &`) starts with SIGINT ignored, and Python then installs no
    # KeyboardInterrupt handler: give the command the disposition of a terminal's foreground job
    process = subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        if any(size > 2000 for size in _sizes(out.glob("partial.*gaze.csv"))):  # the CSV's temporary is filling
            break
        time.sleep(0.05)
    assert process.poll() is None, f"the run ended before it could be interrupted: {process.stderr.read()[-2000:]}"
    process.send_signal(signum)
    stdout, stderr = process.communicate(timeout=120)
    return subprocess.CompletedProcess(args, process.returncode, stdout, stderr)


@pytest.mark.parametrize(
    "signum, status, word",
    [(signal.SIGINT, 130, "interrupted (SIGINT)"), (signal.SIGTERM, 143, "terminated (SIGTERM)")],
)
def test_a_signal_ends_the_run_in_one_line_and_removes_the_partial_outputs(
    tmp_path, tiny_model_dir, signum, status, word
):
    out = tmp_path / "out"
    result = _interrupt(tmp_path, tiny_model_dir, signum, overlay=True, out=out)
    assert result.returncode == status, result.stderr[-2000:]
    lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
    assert lines == [f"gazeflow: {word}: partial outputs of the video under way were removed"]
    assert not out.exists()  # the run made the folder; nothing half-written (nor the empty folder) is left


def test_an_interrupted_run_keeps_earlier_complete_outputs(tmp_path, tiny_model_dir):
    """SIGTERM during a second run into the same folder: the first run's files stay whole and decodable."""
    out = tmp_path / "out"
    video = write_video(tmp_path / "short.mp4", random_video(40, 24, 32, seed=5), fps=25)
    assert gazeflow("predict", video, "--model", tiny_model_dir, "-o", out, "-q").returncode == 0
    before = {path.name: path.read_bytes() for path in out.iterdir()}  # overlay, gaze.csv, events, summary
    assert {"gaze.csv", "overlay.mp4", "summary.json", "fixations.csv", "saccades.csv"} <= set(before)
    result = _interrupt(tmp_path, tiny_model_dir, signal.SIGTERM, overlay=False, out=out)
    assert result.returncode == 143
    assert {path.name for path in out.iterdir()} == set(before)  # no partial.* left
    assert {name: (out / name).read_bytes() for name in before} == before
    assert sum(1 for _ in iter_frames(out / "overlay.mp4")) == 40


def test_nan_weights_are_refused_and_nothing_is_written(tmp_path, synthetic_clip_mp4, tiny_model_dir):
    from transformers_gazeflow import GazeFlowModel

    model = GazeFlowModel.from_pretrained(tiny_model_dir)
    with torch.no_grad():
        next(model.parameters()).fill_(float("nan"))
    model.save_pretrained(tmp_path / "nan_model")
    path, _ = synthetic_clip_mp4
    line = one_error_line(gazeflow("predict", path, "--model", tmp_path / "nan_model", "-o", tmp_path / "o"), 1)
    assert f"{tmp_path / 'nan_model' / 'model.safetensors'}: 1 weight tensor(s) hold NaN or inf" in line
    assert not (tmp_path / "o").exists()


def test_the_packages_warnings_are_one_line_and_other_libraries_keep_their_form(capsys, monkeypatch):
    import warnings

    from transformers_gazeflow.commands import run_context

    passed_on = []
    monkeypatch.setattr(warnings, "showwarning", lambda message, category, *rest: passed_on.append((message, category)))
    with run_context.one_line_warnings():
        warnings.simplefilter("always")
        warnings.warn_explicit("regions fitted elsewhere", UserWarning, "/x/transformers_gazeflow/gaze/regions.py", 5)
        warnings.warn_explicit("an old argument", FutureWarning, "/x/site-packages/torch/nn/module.py", 7)
    assert capsys.readouterr().err == "gazeflow: warning: regions fitted elsewhere\n"
    assert [(str(message), category) for message, category in passed_on] == [("an old argument", FutureWarning)]
