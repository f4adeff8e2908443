"""gazeflow predict over many videos: inputs (paths, folders, globs, lists), one folder per video, index.csv,
--resume, a broken video recorded as failed, and two processes sharing the videos with none done twice."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from transformers_gazeflow.commands.batch import (
    INDEX_COLUMNS,
    IndexPart,
    InputError,
    Shard,
    expand_videos,
    merge_index,
    one_line,
    output_folders,
    shard_from_env,
)
from transformers_gazeflow.data.video import write_video

from .pipeline_fixtures import random_video, single_torch_thread, tiny_model_dir  # noqa: F401  (fixtures)


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        assert tuple(reader.fieldnames) == INDEX_COLUMNS
        return list(reader)


@pytest.fixture(scope="module")
def six_videos(tmp_path_factory) -> Path:
    """Six small videos in one folder, the fourth (in name order) a text file named .mp4."""
    folder = tmp_path_factory.mktemp("videos")
    for i, frames in enumerate((9, 12, 7, 0, 10, 8)):
        path = folder / f"clip{i}.mp4"
        if frames:
            write_video(path, random_video(frames, 24, 32, seed=i), fps=12)
        else:
            path.write_text("this is not a video\n" * 20)
    return folder


# ------------------------------------------------------------------------------------------- inputs and names
def test_inputs_expand_from_files_folders_globs_and_lists(tmp_path, six_videos):
    everything = sorted(six_videos.glob("*.mp4"))
    assert expand_videos([str(everything[0])]) == ([everything[0]], False)  # one file alone: not a batch
    assert expand_videos([str(six_videos)]) == (everything, True)
    assert expand_videos([str(six_videos / "clip[0-2].mp4")]) == (everything[:3], True)
    listing = tmp_path / "videos.txt"
    listing.write_text(f"# my clips\n{everything[1]}\n\n{os.path.relpath(everything[2], tmp_path)}\n")
    assert expand_videos([str(listing), str(everything[0])]) == (
        [everything[1], tmp_path / os.path.relpath(everything[2], tmp_path), everything[0]],
        True,
    )
    (tmp_path / "empty").mkdir()
    for bad, message in (
        (str(tmp_path / "empty"), "holds no video files"),
        (str(tmp_path / "*.avi"), "no file matches"),
        (str(tmp_path / "blank.txt"), "names no video"),
    ):
        if bad.endswith(".txt"):
            Path(bad).write_text("# nothing\n")
        with pytest.raises(InputError, match=message):
            expand_videos([bad])


def test_a_video_named_twice_is_done_once(tmp_path, six_videos):
    everything = sorted(six_videos.glob("*.mp4"))
    first = everything[0]
    listing = tmp_path / "list.txt"
    listing.write_text(f"{first}\n")
    link = tmp_path / "link.mp4"
    link.symlink_to(first)
    inputs = [str(first), str(six_videos / "." / first.name), str(listing), str(link), str(six_videos / "*.mp4")]
    videos, batch = expand_videos(inputs)
    assert batch and videos == everything  # each once, where it first appears: one folder each, no hash suffix
    assert output_folders(videos, tmp_path / "out") == [tmp_path / "out" / video.stem for video in everything]


def test_output_folders_are_named_after_the_videos_and_never_collide(tmp_path):
    videos = [tmp_path / "a" / "walk.mp4", tmp_path / "b" / "walk.mp4", tmp_path / "cook.mov"]
    folders = output_folders(videos, tmp_path / "out")
    assert folders[2] == tmp_path / "out" / "cook"
    assert len(set(folders)) == 3 and all(f.name.startswith("walk-") and len(f.name) == 13 for f in folders[:2])
    assert output_folders(videos, tmp_path / "out") == folders  # the same names in every process and every run


def test_shards_partition_the_videos(tmp_path):
    items = list(range(11))
    shards = [shard_from_env({"RANK": str(r), "WORLD_SIZE": "3"}) for r in range(3)]
    taken = [shard.take(items) for shard in shards]
    assert sorted(sum(taken, [])) == items and all(set(a).isdisjoint(b) for a in taken for b in taken if a is not b)
    assert shard_from_env({}) == Shard(0, 1, 0)
    with pytest.raises(InputError, match="RANK 3 is not within WORLD_SIZE 3"):
        shard_from_env({"RANK": "3", "WORLD_SIZE": "3"})


def test_the_index_is_merged_only_when_every_part_is_complete(tmp_path):
    first, second = IndexPart(tmp_path, Shard(0, 2)), IndexPart(tmp_path, Shard(1, 2))
    second.add(1, {"video": "b.mp4", "status": "failed", "error": "broken"})
    first.add(0, {"video": "a.mp4", "status": "ok", "frames": 5})
    assert first.finish() is None and not (tmp_path / "index.csv").exists()  # the other part is still running
    index = second.finish()
    assert [row["video"] for row in read_rows(index)] == ["a.mp4", "b.mp4"]  # input order
    assert merge_index(tmp_path, 2) == index


def test_errors_read_as_one_line():
    err = OSError(1094995529, "Invalid data found when processing input", "/x/fake.mp4")
    assert (
        one_line(ValueError(f"cannot decode video /x/fake.mp4: {err}"))
        == "cannot decode video /x/fake.mp4: Invalid data found when processing input"
    )
    assert one_line(ValueError("two\n  lines")) == "two lines"


# ------------------------------------------------------------------------------------------- the command
def gazeflow(*args, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "transformers_gazeflow.commands.cli", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )


def test_two_processes_share_six_videos_one_broken_and_resume_skips_the_done(tmp_path, six_videos, tiny_model_dir):
    out = tmp_path / "out"
    result = gazeflow(
        "predict", six_videos, "--model", tiny_model_dir, "-o", out, "--num-processes", "2", "-k", "2", "-s", "1"
    )
    assert result.returncode == 1, result.stderr[-3000:]  # one video failed
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"gazeflow: error: 1 of 6 videos failed (their errors are in {out / 'index.csv'})"
    )
    rows = read_rows(out / "index.csv")
    videos = sorted(six_videos.glob("*.mp4"))
    assert [row["video"] for row in rows] == [str(v) for v in videos]
    assert [row["status"] for row in rows] == ["ok", "ok", "ok", "failed", "ok", "ok"]
    assert "clip3.mp4" in rows[3]["error"] and "Errno" not in rows[3]["error"]
    assert [row["frames"] for row in rows] == ["9", "12", "7", "", "10", "8"]
    for row in rows:
        folder = Path(row["output_dir"])
        assert folder == out / Path(row["video"]).stem
        if row["status"] == "ok":
            assert {p.name for p in folder.iterdir()} == {
                "gaze.csv",
                "overlay.mp4",
                "summary.json",
                "fixations.csv",
                "saccades.csv",
                "scanpaths.json",
            }
            assert json.loads((folder / "summary.json").read_text())["video"] == row["video"]
            assert float(row["fps"]) == 12.0 and float(row["seconds"]) > 0
        else:
            assert not folder.exists()  # nothing half-written for the broken one
    # no video done twice: each process's part holds a disjoint share
    parts = [read_part(out / ".gazeflow_index" / f"part-{rank}-of-2.csv") for rank in range(2)]
    assert sorted(parts[0] + parts[1]) == list(range(6)) and not set(parts[0]) & set(parts[1])
    assert parts == [[0, 2, 4], [1, 3, 5]]

    stamps = {
        row["video"]: (Path(row["output_dir"]) / "summary.json").stat().st_mtime_ns
        for row in rows
        if row["status"] == "ok"
    }
    again = gazeflow("predict", six_videos, "--model", tiny_model_dir, "-o", out, "--resume", "-k", "2", "-s", "1")
    assert again.returncode == 1
    rows = read_rows(out / "index.csv")
    assert [row["status"] for row in rows] == ["skipped", "skipped", "skipped", "failed", "skipped", "skipped"]
    assert [row["frames"] for row in rows] == ["9", "12", "7", "", "10", "8"]
    assert {
        row["video"]: (Path(row["output_dir"]) / "summary.json").stat().st_mtime_ns
        for row in rows
        if row["status"] == "skipped"
    } == stamps  # not redone
    assert "6 videos: 0 ok, 5 skipped, 1 failed" in again.stdout


def read_part(path: Path) -> list[int]:
    with path.open(newline="", encoding="utf-8") as handle:
        return [int(row["order"]) for row in csv.DictReader(handle)]


def test_a_launcher_shards_by_rank_like_accelerate_launch(tmp_path, six_videos, tiny_model_dir):
    """What ``accelerate launch -m transformers_gazeflow.commands.cli predict ...`` does: every process gets RANK and
    WORLD_SIZE; each predicts its share and the last one to finish writes the index."""
    out = tmp_path / "out"
    videos = [str(v) for v in sorted(six_videos.glob("*.mp4")) if v.name != "clip3.mp4"]
    args = [
        sys.executable,
        "-m",
        "transformers_gazeflow.commands.cli",
        "predict",
        *videos,
        "--model",
        str(tiny_model_dir),
        "-o",
        str(out),
        "--no-overlay",
        "-k",
        "2",
        "-s",
        "1",
    ]
    processes = [
        subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "OMP_NUM_THREADS": "1", "RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank)},
        )
        for rank in range(2)
    ]
    results = [process.communicate(timeout=900) for process in processes]
    assert [process.returncode for process in processes] == [0, 0], [err[-2000:] for _, err in results]
    rows = read_rows(out / "index.csv")
    assert [row["video"] for row in rows] == videos and {row["status"] for row in rows} == {"ok"}
    assert all((Path(row["output_dir"]) / "gaze.csv").is_file() for row in rows)
    assert "[rank 0]" in results[0][0] and "[rank 1]" in results[1][0]


def test_one_video_under_a_launcher_is_done_once(tmp_path, six_videos, tiny_model_dir, monkeypatch, capsys):
    """Under torchrun / accelerate launch even a single video goes through the batch path: rank 0 takes it, rank 1
    has nothing to do, and the index is complete when both are done."""
    from transformers_gazeflow.commands.cli import main

    video, out = six_videos / "clip0.mp4", tmp_path / "out"
    for rank in (1, 0):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "2")
        assert main(["predict", str(video), "--model", str(tiny_model_dir), "-o", str(out), "--no-overlay", "-q"]) == 0
        if rank == 1:
            assert {p.name for p in out.iterdir()} == {".gazeflow_index"}  # nothing predicted by rank 1
    rows = read_rows(out / "index.csv")
    assert [(row["video"], row["status"]) for row in rows] == [(str(video), "ok")]
    assert (out / "clip0" / "gaze.csv").is_file() and not (out / "gaze.csv").exists()
