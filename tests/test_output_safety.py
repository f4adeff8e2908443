"""What a run may write (data/output_safety.py): outputs that are inputs refused, names confined to their folder,
staged files created exclusively and renamed into place, files the run did not write refused, folders replaced
whole or left as they were."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from transformers_gazeflow.data import output_safety
from transformers_gazeflow.data.atomic_files import TEMPORARY_PREFIX
from transformers_gazeflow.data.interface_files import is_plain_name
from transformers_gazeflow.data.output_safety import (
    StagedFiles,
    UnsafeOutputError,
    check_outputs,
    confined,
    foreign_entries,
    refuse_foreign,
    replace_folder,
    safe_name,
)


def tree(root: Path) -> dict[str, str]:
    """Every entry under ``root``: a file's bytes, a link's target, a folder."""
    found = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        if path.is_symlink():
            found[key] = "-> " + os.readlink(path)
        elif path.is_file():
            found[key] = path.read_bytes().decode("latin-1")
        else:
            found[key] = "/"
    return found


@pytest.fixture
def inputs(tmp_path):
    (tmp_path / "clip.mp4").write_bytes(b"video")
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    return tmp_path


# ------------------------------------------------------------------------------------------- outputs and inputs
@pytest.mark.parametrize(
    "output",
    ["clip.mp4", "./clip.mp4", "sub/../clip.mp4", "link.mp4", "hard.json"],
    ids=["same", "dot", "dotdot", "symlink", "hardlink"],
)
def test_an_output_that_resolves_to_an_input_is_refused_naming_both(inputs, output, monkeypatch):
    monkeypatch.chdir(inputs)
    (inputs / "sub").mkdir()
    os.symlink("clip.mp4", "link.mp4")
    os.link("clip.mp4", "hard.json")
    with pytest.raises(UnsafeOutputError) as caught:
        check_outputs([("--csv", output)], [("VIDEO", "clip.mp4")])
    assert str(caught.value) == (
        f"--csv {output}: is the input VIDEO clip.mp4; an output may not overwrite what the run reads "
        "(choose another path)"
    )
    check_outputs([("--csv", "gaze.csv")], [("VIDEO", "clip.mp4")])  # another file: fine


def test_outputs_inside_an_input_folder_or_shared_by_two_outputs_are_refused(inputs, monkeypatch):
    monkeypatch.chdir(inputs)
    with pytest.raises(UnsafeOutputError, match=r"^--csv model/new.csv: lies inside the input folder --model model;"):
        check_outputs([("--csv", "model/new.csv")], [("--model", "model")])
    with pytest.raises(UnsafeOutputError, match=r"^--summary x.out: is also the output of --csv x.out;"):
        check_outputs([("--csv", "x.out"), ("--summary", "x.out")])
    with pytest.raises(UnsafeOutputError, match=r"^--summary ./x.out: is also the output of --csv x.out;"):
        check_outputs([("--csv", "x.out"), ("--summary", "./x.out")])
    check_outputs([("--csv", "x.out"), ("--summary", "y.out")], [("--model", "model"), ("SOURCE", "rtsp://cam/1")])


def test_a_folder_replaced_whole_may_not_hold_or_sit_in_an_input(inputs, monkeypatch):
    monkeypatch.chdir(inputs)
    for folder in (".", "model", "model/exports"):
        with pytest.raises(UnsafeOutputError, match=rf"^--output-dir {folder}: the folder is replaced whole"):
            check_outputs([], [("--model", "model")], folders=[("--output-dir", folder)])
    check_outputs([], [("--model", "model")], folders=[("--output-dir", "exports")])


# ------------------------------------------------------------------------------------------- names
@pytest.mark.parametrize(
    ("stem", "name"),
    [("..", "__"), (".", "_"), ("", "_"), ("a/b", "a_b"), ("/etc", "_etc"), ("x\x00y", "x_y"), ("a\\..", "a_..")],
)
def test_names_made_from_inputs_stay_in_their_folder(stem, name):
    assert safe_name(stem) == name
    assert is_plain_name(name) and confined("out", name) == Path("out") / name
    if stem != name:
        with pytest.raises(UnsafeOutputError, match="expected one file name inside out"):
            confined("out", stem, "streamer.json file")


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.text(max_size=300))
@example("..")
@example("." * 300)
@example("é" * 150)
def test_any_text_becomes_one_plain_name_and_plain_names_are_kept(text):
    name = safe_name(text)
    assert is_plain_name(name)
    folder = "/sandbox/out"
    assert os.path.dirname(os.path.normpath(os.path.join(folder, name))) == folder
    if is_plain_name(text) and len(text.encode("utf-8", "surrogatepass")) <= output_safety.NAME_BYTES:
        assert name == text


def test_long_names_are_cut_and_stay_apart():
    first, second = safe_name("a" * 300), safe_name("a" * 299 + "b")
    assert first != second and len(first.encode()) <= output_safety.NAME_BYTES


# ------------------------------------------------------------------------------------------- temporaries
def test_staged_files_are_new_files_renamed_into_place_and_discarded_on_failure(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    os.symlink(victim, tmp_path / "gaze.csv")  # a link at the destination: replaced, not written through
    staged = StagedFiles()
    temporary = staged.stage(tmp_path / "gaze.csv")
    assert temporary.parent == tmp_path and temporary.name.startswith(TEMPORARY_PREFIX)
    assert temporary.name.endswith(".gaze.csv") and temporary.stat().st_size == 0
    temporary.write_text("rows\n")
    other = staged.stage(tmp_path / "events.csv")
    staged.publish(tmp_path / "gaze.csv")
    staged.discard()
    assert not (tmp_path / "gaze.csv").is_symlink() and (tmp_path / "gaze.csv").read_text() == "rows\n"
    assert victim.read_text() == "precious" and not other.exists() and not (tmp_path / "events.csv").exists()


# ------------------------------------------------------------------------------------------- existing files
def test_a_file_the_run_did_not_write_is_refused_without_overwrite(tmp_path):
    mine, theirs = tmp_path / "mine.csv", tmp_path / "theirs.csv"
    mine.write_text("frame,x\n")
    theirs.write_text("precious\n")
    os.symlink(mine, tmp_path / "link.csv")
    ours = lambda path: output_safety.first_line(path) == "frame,x"  # noqa: E731
    refuse_foreign("--csv", tmp_path / "new.csv", ours, "gazeflow stream")
    refuse_foreign("--csv", mine, ours, "gazeflow stream")
    with pytest.raises(UnsafeOutputError, match=r"theirs.csv: exists and was not written by gazeflow stream; pass"):
        refuse_foreign("--csv", theirs, ours, "gazeflow stream")
    with pytest.raises(UnsafeOutputError, match=r"link.csv: is a symbolic link; pass --overwrite"):
        refuse_foreign("--csv", tmp_path / "link.csv", ours, "gazeflow stream")
    refuse_foreign("--csv", theirs, ours, "gazeflow stream", overwrite=True)
    with pytest.raises(UnsafeOutputError, match=r": is a folder, expected a file$"):
        refuse_foreign("--csv", tmp_path, ours, "gazeflow stream", overwrite=True)


def test_first_line_and_json_object_in_read_only_what_they_can(tmp_path):
    (tmp_path / "a.csv").write_bytes(b"\xef\xbb\xbfframe,x\r\n1,2\n")
    (tmp_path / "b.bin").write_bytes(b"\xff\xfe\x00")
    (tmp_path / "c.json").write_text('{"format": "x"}')
    (tmp_path / "d.json").write_text("[1]")
    assert output_safety.first_line(tmp_path / "a.csv") == "frame,x"
    assert output_safety.first_line(tmp_path / "b.bin") is None and output_safety.first_line(tmp_path) is None
    assert output_safety.json_object_in(tmp_path / "c.json") == {"format": "x"}
    assert output_safety.json_object_in(tmp_path / "d.json") is None
    assert output_safety.json_object_in(tmp_path / "missing.json") is None


# ------------------------------------------------------------------------------------------- folders
def fill_with(files: dict[str, str], fail_after: int | None = None):
    def fill(folder: Path) -> None:
        for count, (name, text) in enumerate(files.items()):
            if fail_after is not None and count == fail_after:
                raise KeyboardInterrupt
            (folder / name).write_text(text)

    return fill


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "two-renames"])
def test_a_folder_is_replaced_whole_or_left_as_it_was(tmp_path, exchange):
    target = tmp_path / "export"
    replace_folder(target, fill_with({"step.onnx": "old", "streamer.json": "old"}), exchange=exchange)
    assert tree(tmp_path) == {"export": "/", "export/step.onnx": "old", "export/streamer.json": "old"}
    with pytest.raises(KeyboardInterrupt):  # interrupted after the new step.onnx, before its streamer.json
        replace_folder(target, fill_with({"step.onnx": "new", "streamer.json": "new"}, fail_after=1), exchange)
    assert tree(tmp_path) == {"export": "/", "export/step.onnx": "old", "export/streamer.json": "old"}
    replace_folder(target, fill_with({"step.onnx": "new", "streamer.json": "new"}), exchange=exchange)
    assert tree(tmp_path) == {"export": "/", "export/step.onnx": "new", "export/streamer.json": "new"}
    with pytest.raises(KeyboardInterrupt):
        replace_folder(tmp_path / "fresh", fill_with({"a": "x"}, fail_after=0), exchange=exchange)
    assert "fresh" not in tree(tmp_path) and len(tree(tmp_path)) == 3  # nothing where there was nothing


def test_a_failed_second_rename_puts_the_old_folder_back(tmp_path, monkeypatch):
    target = tmp_path / "export"
    replace_folder(target, fill_with({"streamer.json": "old"}))
    real_rename, calls = os.rename, []

    def rename(source, destination):
        calls.append(destination)
        if len(calls) == 2:  # the new folder onto the old one's name
            raise KeyboardInterrupt
        real_rename(source, destination)

    monkeypatch.setattr(output_safety.os, "rename", rename)
    with pytest.raises(KeyboardInterrupt):
        replace_folder(target, fill_with({"streamer.json": "new"}), exchange=False)
    monkeypatch.undo()
    assert tree(tmp_path) == {"export": "/", "export/streamer.json": "old"}


def test_the_swap_is_one_step_where_the_kernel_has_it(tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    if not output_safety._exchange(str(tmp_path / "a"), str(tmp_path / "b")):
        pytest.skip("renameat2(RENAME_EXCHANGE) is not available here")
    target = tmp_path / "export"
    replace_folder(target, fill_with({"streamer.json": "old"}))
    monkeypatch.setattr(output_safety, "_swap_by_two_renames", lambda *a: pytest.fail("took the two renames"))
    replace_folder(target, fill_with({"streamer.json": "new"}))
    assert tree(target) == {"streamer.json": "new"} and len(list(tmp_path.iterdir())) == 3


def test_planted_links_in_a_replaced_folder_are_dropped_not_followed(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (tmp_path / "export").mkdir()
    os.symlink(victim, tmp_path / "export" / "step.onnx")
    (tmp_path / "export" / "notes.txt").write_text("mine")
    assert foreign_entries(tmp_path / "export", ["step.onnx", "streamer.json"]) == ["notes.txt", "step.onnx"]
    replace_folder(tmp_path / "export", fill_with({"step.onnx": "graph"}))
    assert victim.read_text() == "precious" and tree(tmp_path / "export") == {"step.onnx": "graph"}
    with pytest.raises(UnsafeOutputError, match="is an existing file, expected a folder"):
        replace_folder(victim, fill_with({}))
