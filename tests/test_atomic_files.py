"""The package's one atomic write and one file hash (data/atomic_files.py): whole or absent, temporaries cleaned up."""

import hashlib
import os
import threading

import pytest

from transformers_gazeflow.data import atomic_files
from transformers_gazeflow.data.atomic_files import TEMPORARY_PREFIX, atomic_write, sha256_file, temporary_path


def leftovers(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(TEMPORARY_PREFIX))


def test_text_bytes_and_a_writing_function_each_land_whole(tmp_path):
    assert atomic_write(tmp_path / "a.json", '{"é": 1}\n') == tmp_path / "a.json"
    assert (tmp_path / "a.json").read_bytes() == '{"é": 1}\n'.encode("utf-8")
    atomic_write(tmp_path / "b.bin", b"\x00\x01")
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01"
    seen = []

    def write(temporary):
        seen.append(temporary)
        temporary.write_bytes(b"csv")

    atomic_write(tmp_path / "c.csv", write)
    assert (tmp_path / "c.csv").read_bytes() == b"csv"
    # the writer is given a temporary beside the file, with the file's suffix (PyAV picks the container by it)
    assert seen[0].parent == tmp_path and seen[0].name.startswith(TEMPORARY_PREFIX) and seen[0].suffix == ".csv"
    assert leftovers(tmp_path) == []


def test_a_failing_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "summary.json"
    path.write_text("old")

    def fail_half_way(temporary):
        temporary.write_text("new, half writ")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(path, fail_half_way)
    assert path.read_text() == "old" and leftovers(tmp_path) == []
    with pytest.raises(TypeError):
        atomic_write(path, 3)  # neither text, bytes nor a function
    assert path.read_text() == "old" and leftovers(tmp_path) == []


def test_durable_writes_fsync_the_file_and_the_folder(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(atomic_files.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    atomic_write(tmp_path / "plain.json", "{}")
    assert synced == []
    atomic_write(tmp_path / "index.json", "{}", durable=True)
    assert len(synced) == 2  # the temporary before the rename, the folder after it


def test_each_thread_writes_its_own_temporary(tmp_path):
    names, both_alive = {}, threading.Barrier(2)

    def name_in_thread(key):
        names[key] = temporary_path(tmp_path / "index.csv")
        both_alive.wait(timeout=10)  # a finished thread's id may be reused

    threads = [threading.Thread(target=name_in_thread, args=(key,)) for key in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert names[0] != names[1] and all(str(os.getpid()) in path.name for path in names.values())


def test_a_link_planted_at_the_temporary_name_is_never_written_through(tmp_path, monkeypatch):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    planted = tmp_path / "out" / "partial.gaze.csv"
    planted.parent.mkdir()
    os.symlink(victim, planted)
    names = iter([planted, tmp_path / "out" / "partial.fresh.gaze.csv"])
    monkeypatch.setattr(atomic_files, "temporary_path", lambda path: next(names))
    atomic_write(tmp_path / "out" / "gaze.csv", "rows\n")
    assert victim.read_text() == "precious" and (tmp_path / "out" / "gaze.csv").read_text() == "rows\n"
    assert os.readlink(planted) == str(victim)  # left as it was: not ours to remove


def test_sha256_file_over_several_blocks(tmp_path):
    data = os.urandom((1 << 20) * 2 + 17)
    (tmp_path / "weights").write_bytes(data)
    assert sha256_file(tmp_path / "weights") == hashlib.sha256(data).hexdigest()
    (tmp_path / "empty").write_bytes(b"")
    assert sha256_file(tmp_path / "empty") == hashlib.sha256(b"").hexdigest()
