"""``gazeflow stream``: one line per frame equal to GazeFlowStreamer run directly, every source kind, --realtime
drops, the latency summary (also on SIGTERM), and one-line errors."""

from __future__ import annotations

import contextlib
import functools
import http.server
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
from transformers_gazeflow.commands.cli import main
from transformers_gazeflow.commands.stream import FIELDS, frame_record
from transformers_gazeflow.data.processing import GazeFlowVideoProcessor
from transformers_gazeflow.data.stream_sources import FrameFeed
from transformers_gazeflow.data.video import iter_frames, write_video
from transformers_gazeflow.gaze.uncertainty import spread_radii
from transformers_gazeflow.generation.online import GazeFlowStreamer

from .conftest import run_python
from .pipeline_fixtures import (  # noqa: F401  (fixtures)
    random_video,
    single_torch_thread,
    synthetic_clip_mp4,
    tiny_model_dir,
)


@pytest.fixture(scope="session")
def causal_model_dir(tmp_path_factory) -> Path:
    """A tiny random causal GazeFlow folder (32x32 frames, K=4, S=3)."""
    folder = tmp_path_factory.mktemp("tiny_causal")
    torch.manual_seed(0)
    GazeFlowModel(GazeFlowConfig.tiny(causal=True)).save_pretrained(folder)
    GazeFlowVideoProcessor(size=32).save_pretrained(folder)
    return folder


def stream_in_process(capsys, *args) -> tuple[int, list[dict], str]:
    status = main(["stream", *map(str, args)])
    captured = capsys.readouterr()
    return status, [json.loads(line) for line in captured.out.splitlines()], captured.err


def streamer_on(model_dir: Path, frames, seed: int = 0, **kwargs):
    """The points GazeFlowStreamer gives on ``frames`` (raw uint8 [H, W, 3]) with the command's seed."""
    model = GazeFlowModel.from_pretrained(model_dir).eval()
    streamer = GazeFlowStreamer(
        model,
        generator=torch.Generator().manual_seed(seed),
        processor=GazeFlowVideoProcessor.from_pretrained(model_dir),
        **kwargs,
    )
    return [streamer.push(torch.from_numpy(np.ascontiguousarray(frame))) for frame in frames]


def test_a_lines_spread_is_gaze_csvs_rule_the_ceil_q_k_th_smallest_distance():
    """K = 10 samples at 1..10 px to the right of the point estimate (a 100 x 100 frame): r50 is the 5th smallest
    distance and r90 the 9th (numpy's ``inverted_cdf``, as gaze.csv's spread50/spread90), not a linear quantile's
    5.5 and 9.1."""
    mean = np.array([0.5, 0.5])
    samples = np.stack([0.5 + np.arange(1, 11) / 100.0, np.full(10, 0.5)], axis=-1)
    frame = type("Frame", (), {"index": 7, "time_s": 0.25})()
    record = frame_record(frame, samples, mean, 100, 100, time.perf_counter())
    assert (record["r50_px"], record["r90_px"]) == (5.0, 9.0)
    np.testing.assert_allclose(spread_radii(samples * 100, mean * 100), [5.0, 9.0], rtol=0, atol=1e-12)


def test_one_line_per_frame_equal_to_the_streamer_run_directly(capsys, tmp_path, synthetic_clip_mp4, causal_model_dir):
    path, clip = synthetic_clip_mp4
    status, records, err = stream_in_process(
        capsys, path, "--model", causal_model_dir, "--seed", 3, "-k", 6, "--summary", tmp_path / "summary.json"
    )
    assert status == 0
    frames = list(iter_frames(path))
    assert [r["frame"] for r in records] == list(range(len(frames))) and set(records[0]) == set(FIELDS)
    expected = streamer_on(causal_model_dir, frames, seed=3, num_samples=6)
    height, width = frames[0].shape[:2]
    for record, output in zip(records, expected):
        assert (record["x"], record["y"]) == tuple(output.mean[0].tolist())  # the same floats, bit for bit
        assert record["x_px"] == pytest.approx(record["x"] * width, abs=1e-3)
        assert record["y_px"] == pytest.approx(record["y"] * height, abs=1e-3)
        r50, r90 = spread_radii(
            output.trajectories[0].numpy() * [width, height], output.mean[0].numpy() * [width, height]
        ).tolist()
        assert (record["r50_px"], record["r90_px"]) == (pytest.approx(r50, abs=1e-3), pytest.approx(r90, abs=1e-3))
        assert 0 < record["r50_px"] <= record["r90_px"] and record["latency_ms"] > 0
        assert record["time_s"] == pytest.approx(record["frame"] / clip.fps, abs=1e-6)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["frames"] == summary["source_frames"] == len(frames) and summary["dropped"] == 0
    assert summary["stopped"] == "end" and summary["num_samples"] == 6 and summary["num_steps"] == 3
    latencies = sorted(r["latency_ms"] for r in records)
    assert latencies[0] <= summary["latency_ms"]["p50"] <= summary["latency_ms"]["p95"] <= latencies[-1]
    (line,) = err.strip().splitlines()
    assert line.startswith(f"gazeflow: stream: {len(frames)} frames of {path} (0 dropped)") and "p99" in line


def test_csv_rows_hold_the_same_points(capsys, tmp_path, synthetic_clip_mp4, causal_model_dir):
    import csv

    path, _ = synthetic_clip_mp4
    _, records, _ = stream_in_process(capsys, path, "--model", causal_model_dir)
    status, printed, _ = stream_in_process(capsys, path, "--model", causal_model_dir, "--csv", tmp_path / "gaze.csv")
    with open(tmp_path / "gaze.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert status == 0 and printed == [] and tuple(rows[0]) == FIELDS
    assert [(float(r["x"]), float(r["y"])) for r in rows] == [(r["x"], r["y"]) for r in records]


def test_a_model_folders_region_calibration_reaches_the_lines(capsys, tmp_path, synthetic_clip_mp4, causal_model_dir):
    """With a region_calibration.json in the causal model's folder each line (and CSV row) gains region90_px,
    f_90 * max(r90_px, rho) (the calibration's floor rho in pixels), and nothing else changes; without one there is
    no region field."""
    import csv
    import shutil

    path, _ = synthetic_clip_mp4
    folder = tmp_path / "model"
    shutil.copytree(causal_model_dir, folder)
    record = {"format": "gazeflow-region-calibration", "version": 2, "exchangeable": "frames"}
    record.update(levels=[0.5, 0.9], factors=[1.5, 2.5], min_radius_px=40.0)  # a floor above some r90s
    (folder / "region_calibration.json").write_text(json.dumps(record))
    _, plain, _ = stream_in_process(capsys, path, "--model", causal_model_dir)
    status, calibrated, _ = stream_in_process(capsys, path, "--model", folder, "--csv", tmp_path / "rows.csv")
    assert status == 0 and calibrated == [] and "region90_px" not in plain[0]
    _, calibrated, _ = stream_in_process(capsys, path, "--model", folder)
    with open(tmp_path / "rows.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert tuple(rows[0]) == FIELDS + ("region90_px",)
    floored = 0
    for before, line, row in zip(plain, calibrated, rows):
        assert {k: v for k, v in line.items() if k not in ("latency_ms", "region90_px")} == {
            k: v for k, v in before.items() if k != "latency_ms"
        }
        assert line["region90_px"] == pytest.approx(2.5 * max(line["r90_px"], 40.0), abs=3e-3)
        assert float(row["region90_px"]) == line["region90_px"]
        floored += line["r90_px"] < 40.0
    assert 0 < floored < len(plain)  # both sides of the floor were exercised


def with_stdin(monkeypatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


def test_raw_rgb_frames_on_stdin(capsys, monkeypatch, causal_model_dir):
    frames = random_video(7, height=20, width=30, seed=4)
    with_stdin(monkeypatch, frames.tobytes())
    status, records, err = stream_in_process(capsys, "-", "--raw", "30x20", "--fps", 10, "--model", causal_model_dir)
    assert status == 0, err
    expected = streamer_on(causal_model_dir, frames)
    assert [(r["x"], r["y"]) for r in records] == [tuple(o.mean[0].tolist()) for o in expected]
    assert [r["time_s"] for r in records] == [pytest.approx(i / 10) for i in range(7)]
    assert "7 frames of - (0 dropped)" in err


def test_a_stream_url(capsys, tmp_path, synthetic_clip_mp4, causal_model_dir):
    """An http:// URL (served here) gives the file's points, frame by frame (--no-realtime: no frame dropped)."""
    path, _ = synthetic_clip_mp4
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(Path(path).parent))
    handler.log_message = lambda *args: None
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.server_address[1]}/{Path(path).name}"
        status, from_url, _ = stream_in_process(capsys, url, "--model", causal_model_dir, "--no-realtime")
        server.shutdown()
    _, from_file, _ = stream_in_process(capsys, path, "--model", causal_model_dir)
    assert status == 0 and [(r["x"], r["y"]) for r in from_url] == [(r["x"], r["y"]) for r in from_file]


class ListSource:
    kind, live, name, width, height = "file", False, "list", 4, 4

    def __init__(self, count: int, fps: float):
        self.count, self.fps = count, fps

    def frames(self):
        for index in range(self.count):
            yield index, index / self.fps, np.full((4, 4, 3), index, np.uint8)

    def close(self):
        pass


def test_the_realtime_feed_drops_what_a_slow_model_cannot_take_and_counts_it():
    feed = FrameFeed(ListSource(40, fps=200.0), realtime=True, pace=True).start()
    taken = []
    for frame in feed:
        taken.append(frame.index)
        time.sleep(0.02)  # a model 4x slower than the source
    feed.stop()
    assert feed.decoded == 40 and len(taken) + feed.dropped == 40
    assert 0 < len(taken) < 20 and taken == sorted(taken) and taken[0] == 0 and taken[-1] == 39
    every = FrameFeed(ListSource(40, fps=200.0), realtime=False).start()
    assert [frame.index for frame in every] == list(range(40)) and every.dropped == 0


def test_realtime_on_a_fast_file_drops_frames_and_says_how_many(capsys, tmp_path, causal_model_dir, monkeypatch):
    video = write_video(tmp_path / "fast.mp4", random_video(60, 24, 32, seed=2), fps=1000)
    # each frame's model step takes at least 20 ms (the file plays a frame per ms), whatever the machine's load: the
    # sleep also hands the decoding thread the interpreter, so frames pile up behind the model and must be dropped
    from transformers_gazeflow.generation.online import GazeFlowStreamer

    push = GazeFlowStreamer.push

    def slow_push(self, *args, **kwargs):
        time.sleep(0.02)
        return push(self, *args, **kwargs)

    monkeypatch.setattr(GazeFlowStreamer, "push", slow_push)
    status, records, err = stream_in_process(
        capsys, video, "--model", causal_model_dir, "--realtime", "--summary", tmp_path / "s.json"
    )
    assert status == 0, err
    indices = [record["frame"] for record in records]
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["dropped"] > 0 and summary["frames"] == len(indices) and summary["realtime"]
    assert summary["frames"] + summary["dropped"] == summary["source_frames"] == 60
    assert indices == sorted(indices) and len(set(indices)) == len(indices) and indices[-1] == 59
    assert f"({summary['dropped']} dropped)" in err


def test_sigterm_stops_the_stream_with_its_summary(tmp_path, causal_model_dir):
    args = [
        sys.executable,
        "-m",
        "transformers_gazeflow.commands.cli",
        "stream",
        "-",
        "--raw",
        "16x16",
        "--model",
        str(causal_model_dir),
        "--summary",
        str(tmp_path / "s.json"),
    ]
    process = subprocess.Popen(
        args,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    process.stdin.write(random_video(5, 16, 16).tobytes())  # five frames, and the pipe stays open
    process.stdin.flush()
    lines = [process.stdout.readline() for _ in range(5)]
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 143 and all(json.loads(line)["frame"] == i for i, line in enumerate(lines))
    summary_line, last = stderr.decode().strip().splitlines()
    assert summary_line.startswith("gazeflow: stream: 5 frames of - (0 dropped)")
    assert last == "gazeflow: terminated (SIGTERM): the stream stopped (its summary is above)"
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["stopped"] == "SIGTERM" and summary["frames"] == 5


def one_error_line(status: int, err: str, expected_status: int = 1) -> str:
    assert status == expected_status, (status, err[-2000:])
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gazeflow: error: "), err[-2000:]
    return lines[0]


def test_bad_sources_and_models_are_one_line(
    capsys, monkeypatch, tmp_path, synthetic_clip_mp4, causal_model_dir, tiny_model_dir
):
    path, _ = synthetic_clip_mp4

    def error_of(*args) -> tuple[str, list[dict]]:
        status, records, err = stream_in_process(capsys, *args)
        return one_error_line(status, err), records

    line, _ = error_of(path, "--model", tiny_model_dir)
    assert f"--model {tiny_model_dir}: gazeflow stream needs a causal model" in line
    line, _ = error_of("/dev/video97", "--model", causal_model_dir)
    assert line == (
        "gazeflow: error: camera not found: /dev/video97 (no such device; `v4l2-ctl --list-devices` lists them)"
    )
    line, _ = error_of(tmp_path / "missing.mp4", "--model", causal_model_dir)
    assert "video file not found" in line and "missing.mp4" in line
    (tmp_path / "notes.mp4").write_text("not a video\n")
    line, _ = error_of(tmp_path / "notes.mp4", "--model", causal_model_dir)
    assert line.startswith(f"gazeflow: error: cannot decode video {tmp_path / 'notes.mp4'}: ")
    line, _ = error_of(tmp_path, "--model", causal_model_dir)
    assert line == f"gazeflow: error: expected a video file, got a directory: {tmp_path}"
    line, _ = error_of(path, "--model", tmp_path)
    assert line == f"gazeflow: error: {tmp_path} is not a GazeFlow model folder: it has no config.json"
    line, _ = error_of("rtsp://127.0.0.1:9/none", "--model", causal_model_dir)
    assert line.startswith("gazeflow: error: cannot open url rtsp://127.0.0.1:9/none")
    with_stdin(monkeypatch, random_video(3, 8, 8).tobytes()[:-10])
    line, records = error_of("-", "--raw", "8x8", "--model", causal_model_dir)
    assert line == (
        "gazeflow: error: stdin: frame 2 is truncated: 182 of 192 bytes (8x8 RGB; is --raw 8x8 the frames' size?)"
    )
    assert [record["frame"] for record in records] == [0, 1]  # the whole frames before it were answered


def test_bad_arguments_are_one_line_and_import_nothing_heavy(tmp_path):
    cases = {
        "help": ["stream", "--help"],
        "raw": ["stream", "-", "--raw", "640by480"],
        "raw_zero": ["stream", "-", "--raw", "0x480"],
        "no_raw": ["stream", "-"],
        "raw_file": ["stream", "v.mp4", "--raw", "64x48"],
        "fps": ["stream", "v.mp4", "--fps", "30"],
        "samples": ["stream", "v.mp4", "-k", "0"],
        "option": ["stream", "v.mp4", "--source-option", "video_size"],
        "onnx": ["stream", "v.mp4", "--backend", "onnxruntime"],
        "onnx_dir": ["stream", "v.mp4", "--onnx", "exported"],
        "compile": ["stream", "v.mp4", "--backend", "onnxruntime", "--onnx", "exported", "--compile"],
        "summary": ["stream", "v.mp4", "--summary", str(tmp_path / "no" / "s.json")],
    }
    code = (
        "import io, json, sys, contextlib\nfrom transformers_gazeflow.commands.cli import main\nresults = {}\n"
        f"for name, argv in {json.dumps(cases)}.items():\n"
        "    err, out = io.StringIO(), io.StringIO()\n"
        "    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):\n"
        "        status = main(argv)\n"
        "    results[name] = [status, out.getvalue(), err.getvalue()]\n"
        "results['imported'] = sorted(m for m in ('torch', 'transformers', 'numpy') if m in sys.modules)\n"
        "print(json.dumps(results))\n"
    )
    results = json.loads(run_python(code, cwd=tmp_path, timeout=300).strip().splitlines()[-1])
    assert results.pop("imported") == []
    status, stdout, stderr = results.pop("help")
    assert status == 0 and "--raw WIDTHxHEIGHT" in stdout and "--realtime" in stdout and not stderr, (status, stderr)
    expected = {
        "raw": "--raw '640by480': expected WIDTHxHEIGHT",
        "raw_zero": "--raw '0x480': expected WIDTHxHEIGHT",
        "no_raw": "SOURCE - reads raw RGB frames from stdin: give their size with --raw WIDTHxHEIGHT",
        "raw_file": "--raw is for raw frames on stdin (SOURCE -), not for v.mp4",
        "fps": "--fps 30.0: expected a positive frame rate, and only with SOURCE -",
        "samples": "--num-samples 0: expected an integer >= 1",
        "option": "--source-option 'video_size': expected KEY=VALUE",
        "onnx": "--backend onnxruntime needs --onnx DIR",
        "onnx_dir": "--onnx DIR needs --backend onnxruntime",
        "compile": "--compile is for --backend torch",
        "summary": f"--summary {tmp_path / 'no' / 's.json'}: expected a file in an existing folder",
    }
    for name, text in expected.items():
        status, stdout, stderr = results[name]
        assert status == 2 and not stdout, (name, status, stdout, stderr)
        assert stderr.startswith(f"gazeflow: error: {text}") and stderr.count("\n") == 1, (name, stderr)


def test_the_stream_stops_quietly_when_its_reader_goes_away(tmp_path, causal_model_dir):
    video = write_video(tmp_path / "clip.mp4", random_video(40, 24, 32, seed=1), fps=25)
    with contextlib.ExitStack() as stack:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "transformers_gazeflow.commands.cli",
                "stream",
                str(video),
                "--model",
                str(causal_model_dir),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
        stack.callback(process.kill)
        process.stdout.readline()
        process.stdout.close()  # `gazeflow stream ... | head -1`
        stderr = process.stderr.read().decode()
        assert process.wait(timeout=120) == 0, stderr
    (line,) = stderr.strip().splitlines()
    assert line.startswith("gazeflow: stream: ") and "Traceback" not in stderr


def test_the_warm_up_before_a_compiled_stream_leaves_its_samples_as_they_were(causal_model_dir):
    """``--compile`` compiles on a blank frame first; the stream then starts afresh (same state, same noise)."""
    from transformers_gazeflow.generation.steppers import TorchStepper

    model = GazeFlowModel.from_pretrained(causal_model_dir).eval()
    processor = GazeFlowVideoProcessor.from_pretrained(causal_model_dir)
    frames = random_video(10, 24, 32, seed=6)
    plain, warmed = (TorchStepper(model, processor, None, seed=4) for _ in range(2))
    warmed.warm_up(24, 32)
    for frame in frames:
        (samples, mean), (warm_samples, warm_mean) = plain.step(frame), warmed.step(frame)
        np.testing.assert_array_equal(samples, warm_samples)
        np.testing.assert_array_equal(mean, warm_mean)
