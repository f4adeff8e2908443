"""``gazeflow stream`` says what happened on every exit path: a truncated file and an empty stdin are errors (one
line, status 1, as ``gazeflow predict`` reports them), the CSV is kept whole or not at all, the summary is written
on every path (SIGTERM while the model loads included) and the last line says truthfully where it is; ``--csv`` and
``--summary`` never overwrite an input, each other, or a file no stream wrote."""

from __future__ import annotations

import csv
import io
import json
import os
import sys

from transformers_gazeflow.commands import cli, stream
from transformers_gazeflow.commands.cli import main
from transformers_gazeflow.commands.stream import FIELDS

from .fuzz_sandbox import digest, temporaries
from .pipeline_fixtures import (  # noqa: F401
    faststart_truncated_mp4,
    single_torch_thread,
    synthetic_clip_mp4,  # noqa: F401
)
from .test_cli_stream import causal_model_dir  # noqa: F401


def run(capsys, *argv) -> tuple[int, str, list[str]]:
    status = main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err.strip().splitlines()


def test_a_truncated_file_is_an_error_and_its_csv_is_not_kept(capsys, tmp_path, causal_model_dir):
    video = faststart_truncated_mp4(tmp_path, num_frames=48)
    status, _, err = run(
        capsys, "stream", video, "--model", causal_model_dir, "--csv", tmp_path / "g.csv", "--summary", tmp_path / "s"
    )
    assert status == 1 and len(err) == 1
    assert err[0].startswith(f"gazeflow: error: cannot decode video {video}: its container announces 48 frames")
    assert err[0].endswith("(truncated or damaged file)")
    summary = json.loads((tmp_path / "s").read_text())
    assert summary["stopped"] == "error" and summary["error"].endswith(f"({tmp_path / 'g.csv'} not kept)")
    assert 0 < summary["frames"] < 48 and not (tmp_path / "g.csv").exists() and not temporaries(tmp_path)


def test_an_empty_stdin_is_an_error(capsys, monkeypatch, causal_model_dir):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
    status, out, err = run(capsys, "stream", "-", "--raw", "30x20", "--model", causal_model_dir)
    assert (status, out) == (1, "")
    assert err == ["gazeflow: error: stdin: no frame: the input ended before its first 30x20 RGB frame (1800 bytes)"]


def test_raw_frames_from_a_file_are_checked_against_its_length_before_anything_loads(
    capsys, monkeypatch, tmp_path, causal_model_dir
):
    def never(*args, **kwargs):
        raise AssertionError("the model was loaded for a stdin whose length is not whole frames")

    monkeypatch.setattr(stream, "load_stepper", never)
    for size, message in (
        (0, "stdin: no frame: the input is empty (expected 30x20 RGB frames)"),
        (2700, "stdin: 2700 bytes are not a whole number of 30x20 RGB frames (1800 bytes each: 1 whole and 900 "
         "bytes over): is --raw 30x20 the frames' size?"),
    ):  # fmt: skip
        (tmp_path / "frames.rgb").write_bytes(bytes(size))
        with open(tmp_path / "frames.rgb") as handle:  # `gazeflow stream - --raw 30x20 < frames.rgb`
            monkeypatch.setattr(sys, "stdin", handle)
            status, out, err = run(capsys, "stream", "-", "--raw", "30x20", "--model", causal_model_dir)
        assert (status, out, err) == (1, "", [f"gazeflow: error: {message}"])


def test_raw_frames_on_a_pipe_that_end_mid_frame_or_empty_are_one_line_errors(capsys, monkeypatch, causal_model_dir):
    """A pipe's length is not known up front (`ffmpeg ... | gazeflow stream - --raw 30x20`): the frames are answered
    as they come, and an input that ends mid-frame, or before its first frame, is an error naming the sizes."""
    for data, message in (
        (bytes(1800 * 2 + 700), "stdin: frame 2 is truncated: 700 of 1800 bytes (30x20 RGB; is --raw 30x20 the "
         "frames' size?)"),
        (b"", "stdin: no frame: the input ended before its first 30x20 RGB frame (1800 bytes)"),
    ):  # fmt: skip
        read_end, write_end = os.pipe()
        os.write(write_end, data)  # below the pipe's buffer: written whole before anything reads
        os.close(write_end)
        with open(read_end, "rb", buffering=0) as raw, io.TextIOWrapper(io.BufferedReader(raw)) as handle:
            monkeypatch.setattr(sys, "stdin", handle)
            status, out, err = run(capsys, "stream", "-", "--raw", "30x20", "--model", causal_model_dir)
        assert (status, err) == (1, [f"gazeflow: error: {message}"])
        assert [json.loads(line)["frame"] for line in out.splitlines()] == list(range(len(data) // 1800))


def test_the_memory_cap_is_the_streams_own_before_the_model_loads(capsys, synthetic_clip_mp4, causal_model_dir):
    path, _ = synthetic_clip_mp4
    status, out, err = run(capsys, "stream", path, "--model", causal_model_dir, "-k", 4, "--max-memory-gb", 1e-6)
    assert (status, out, len(err)) == (1, "", 1), err
    assert err[0].startswith("gazeflow: error: K=4, S=") and "more than --max-memory-gb 1e-06" in err[0], err


def test_sigterm_while_the_model_loads_writes_the_summary_and_says_where(
    capsys, tmp_path, monkeypatch, synthetic_clip_mp4, causal_model_dir
):
    path, _ = synthetic_clip_mp4

    def terminated(*args, **kwargs):
        raise cli.Terminated()

    monkeypatch.setattr(stream, "load_stepper", terminated)
    summary = tmp_path / "summary.json"
    status, _, err = run(
        capsys, "stream", path, "--model", causal_model_dir, "--summary", summary, "--csv", tmp_path / "g"
    )
    assert status == 143
    assert err == [
        f"gazeflow: terminated (SIGTERM): the stream stopped before its first frame; its summary is in {summary}"
    ]
    record = json.loads(summary.read_text())
    assert (record["stopped"], record["frames"], record["model"]) == ("SIGTERM", 0, None)
    assert not (tmp_path / "g").exists() and not temporaries(tmp_path)
    status, _, err = run(capsys, "stream", path, "--model", causal_model_dir)
    assert err == ["gazeflow: terminated (SIGTERM): the stream stopped before its first frame"]


def test_sigterm_mid_stream_keeps_the_rows_written_and_the_summary_says_so(
    capsys, tmp_path, monkeypatch, synthetic_clip_mp4, causal_model_dir
):
    path, _ = synthetic_clip_mp4
    real_write, written = stream.RecordWriter.write, []

    def write_then_stop(self, record):
        real_write(self, record)
        written.append(record)
        if len(written) == 5:
            raise cli.Terminated()

    monkeypatch.setattr(stream.RecordWriter, "write", write_then_stop)
    status, _, err = run(
        capsys, "stream", path, "--model", causal_model_dir, "--csv", tmp_path / "g.csv", "--summary", tmp_path / "s"
    )
    assert status == 143 and err[-1] == "gazeflow: terminated (SIGTERM): the stream stopped (its summary is above)"
    assert err[0].startswith(f"gazeflow: stream: 5 frames of {path}")
    with open(tmp_path / "g.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert tuple(rows[0]) == FIELDS and [int(row["frame"]) for row in rows] == list(range(5))
    assert json.loads((tmp_path / "s").read_text())["stopped"] == "SIGTERM"


def test_csv_and_summary_never_overwrite_an_input_each_other_or_a_file_no_stream_wrote(
    capsys, tmp_path, synthetic_clip_mp4, causal_model_dir
):
    path, _ = synthetic_clip_mp4
    (tmp_path / "victim.txt").write_text("precious\n")
    os.symlink(tmp_path / "victim.txt", tmp_path / "link.csv")
    before = digest(tmp_path)
    refusals = {
        ("--csv", path): f"--csv {path}: is the input SOURCE {path}",
        ("--summary", causal_model_dir / "config.json"): "lies inside the input folder --model",
        ("--csv", causal_model_dir / "new.csv"): "lies inside the input folder --model",
        ("--csv", tmp_path / "victim.txt"): "exists and was not written by gazeflow stream; pass --overwrite",
        ("--csv", tmp_path / "link.csv"): "is a symbolic link; pass --overwrite",
    }
    for (flag, target), message in refusals.items():
        status, out, err = run(capsys, "stream", path, "--model", causal_model_dir, flag, target)
        assert status == 1 and out == "" and len(err) == 1 and message in err[0], err
    x, same = tmp_path / "x", f"{tmp_path}/./x"
    status, _, err = run(capsys, "stream", path, "--model", causal_model_dir, "--csv", x, "--summary", same)
    assert status == 1 and f"--summary {same}: is also the output of --csv {x}" in err[0]
    assert digest(tmp_path) == before
    for _ in range(2):  # a stream's own CSV is replaced as before
        status, _, _ = run(capsys, "stream", path, "--model", causal_model_dir, "--csv", tmp_path / "g.csv")
        assert status == 0 and (tmp_path / "g.csv").read_text().startswith(",".join(FIELDS))
    status, _, _ = run(
        capsys, "stream", path, "--model", causal_model_dir, "--csv", tmp_path / "link.csv", "--overwrite"
    )
    assert status == 0 and not (tmp_path / "link.csv").is_symlink()
    assert (tmp_path / "victim.txt").read_text() == "precious\n"
