"""The ``gazeflow`` commands driven with generated hostile inputs in a sandbox folder (hypothesis): outputs aimed at
inputs, at files elsewhere, through links and hard links; video names that would leave the output folder; bad
fields in every interface file; sizes past the machine. Every run: no traceback, a refusal in one line with a
non-zero status, nothing outside the asked-for outputs changed (a digest of the sandbox tree), outputs complete or
absent (:class:`tests.fuzz_sandbox.Sandbox`).

CI runs a bounded, derandomised number of examples per property (about a minute in all on two cores);
``python benchmarks/fuzz_commands.py`` runs the long profile."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
from transformers_gazeflow.commands.output_policies import PREDICTION_FILES
from transformers_gazeflow.data.processing import GazeFlowVideoProcessor
from transformers_gazeflow.data.video import write_video
from transformers_gazeflow.gaze.wearer import WearerCalibration
from transformers_gazeflow.generation.resource_bounds import MAX_NUM_STEPS
from transformers_gazeflow.hub.model_folders import load_model, model_fingerprint

from .fuzz_sandbox import Sandbox, fuzz_settings
from .pipeline_fixtures import random_video, save_tiny_model, single_torch_thread  # noqa: F401

FRAMES, WIDTH, HEIGHT = 10, 64, 48


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    """What a sandbox holds: the two tiny models, a clip, a wearer's tracker CSV and calibration, an export, and an
    earlier prediction (for --resume)."""
    from transformers_gazeflow.commands.cli import main

    folder = tmp_path_factory.mktemp("fuzz_inputs")
    save_tiny_model(folder / "model")
    torch.manual_seed(0)
    GazeFlowModel(GazeFlowConfig.tiny(causal=True)).save_pretrained(folder / "causal")
    GazeFlowVideoProcessor(size=32).save_pretrained(folder / "causal")
    write_video(folder / "clip.mp4", random_video(FRAMES, HEIGHT, WIDTH, seed=1), fps=24.0)
    rows = [f"{i},{0.3 + 0.02 * i:.3f},{0.6 - 0.01 * i:.3f}" for i in range(FRAMES)]
    (folder / "tracker.csv").write_text("frame_idx,x_norm,y_norm\n" + "\n".join(rows) + "\n")
    fingerprint = model_fingerprint(load_model(folder / "model"))
    WearerCalibration("offset", (0.01, -0.02), (1.0, 1.0), str(folder / "model"), fingerprint).write(
        folder / "calib.json"
    )
    (folder / "cam.json").write_text(json.dumps({"fx": 50, "fy": 50, "cx": 32, "cy": 24, "width": 64, "height": 48}))
    assert main(["export-streamer", "-o", str(folder / "export"), "--model", str(folder / "causal"), "-k", "2"]) == 0
    assert main(["predict", str(folder / "clip.mp4"), "-o", str(folder / "done"), "--model", str(folder / "model"),
                 "--no-overlay", "--quiet"]) == 0  # fmt: skip
    return {
        name: folder / name
        for name in ("model", "causal", "clip.mp4", "tracker.csv", "calib.json", "cam.json", "export", "done")
    }


MODEL, CAUSAL = ["--model", "model"], ["--model", "causal"]
QUIET = ["--quiet"]


# ------------------------------------------------------------------------------------------- outputs vs inputs
def plant(box: Sandbox, target: str, input_folder: str) -> tuple[str, bool]:
    """Make the hostile ``target`` in the sandbox (``input_folder``: the model or export folder the run reads); return
    the path to pass and whether writing there is fine."""
    work = box.work
    if target == "hardlink-to-clip":
        os.link(work / "clip.mp4", work / "alias.out")
        return "alias.out", False
    if target == "link-to-victim":
        os.symlink(box.root / "victim.txt", work / "link.out")
        return "link.out", False
    if target == "folder":
        (work / "folder.out").mkdir()
        return "folder.out", False
    return {
        "clip": ("clip.mp4", False),
        "clip-by-another-path": ("./sub/../clip.mp4", False),
        "tracker": ("tracker.csv", False),
        "model-config": ("model/config.json", False),
        "causal-config": ("causal/config.json", False),
        "in-input-folder": (f"{input_folder}/new.out", False),
        "victim": ("../victim.txt", False),
        "fresh": ("out/new.out", True),
        "fresh-by-dots": ("sub/../fresh.out", True),
    }[target]


TARGETS = (
    "clip",
    "clip-by-another-path",
    "hardlink-to-clip",
    "tracker",
    "model-config",
    "causal-config",
    "in-input-folder",
    "victim",
    "link-to-victim",
    "folder",
    "fresh",
    "fresh-by-dots",
)


@fuzz_settings(14)
@given(
    command=st.sampled_from(["calibrate", "stream --csv", "stream --summary", "stream-onnx --csv"]),
    target=st.sampled_from(TARGETS),
)
def test_an_output_file_never_overwrites_an_input_or_a_file_it_did_not_write(inputs, command, target):
    with Sandbox.made(inputs) as box:
        (box.work / "sub").mkdir()
        (box.work / "out").mkdir()
        input_folder = {"calibrate": "model", "stream-onnx --csv": "export"}.get(command, "causal")
        path, fine = plant(box, target, input_folder)
        if command == "calibrate":
            argv = ["calibrate", "clip.mp4", "--gaze", "tracker.csv", "-o", path, *MODEL]
        elif command == "stream-onnx --csv":
            argv = ["stream", "clip.mp4", "--backend", "onnxruntime", "--onnx", "export", "--csv", path]
        else:
            argv = ["stream", "clip.mp4", *CAUSAL, command.split()[1], path]
        written = str(Path("work", os.path.normpath(path)))
        box.check(argv, expect_ok=fine, outputs=(written,) if fine else ())


@fuzz_settings(8)
@given(target=st.sampled_from(["clip-folder", "model", "causal", "foreign-gaze-csv", "link-gaze-csv", "file", "fresh"]))
def test_an_output_folder_never_takes_an_input_or_a_file_it_did_not_write(inputs, target):
    with Sandbox.made(inputs) as box:
        if target == "clip-folder":  # the video is named like an output: overlay.mp4 in the output folder
            os.rename(box.work / "clip.mp4", box.work / "overlay.mp4")
            box.check(["predict", "overlay.mp4", "-o", ".", *MODEL, *QUIET], expect_ok=False)
            return
        (box.work / "out").mkdir()
        output = {"model": "model", "causal": "causal", "file": "../victim.txt"}.get(target, "out")
        if target == "foreign-gaze-csv":
            (box.work / "out" / "gaze.csv").write_text("the wearer's own gaze.csv\n")
        if target == "link-gaze-csv":
            os.symlink(box.root / "victim.txt", box.work / "out" / "gaze.csv")
        # a folder the run does not read may take the outputs (beside the files there, never over them)
        fine = target in ("fresh", "causal")
        written = tuple(f"work/{output}/{name}" for name in PREDICTION_FILES if name != "overlay.mp4")
        box.check(["predict", "clip.mp4", "-o", output, *MODEL, *QUIET, "--no-overlay"], fine, written if fine else ())
        if target in ("foreign-gaze-csv", "link-gaze-csv"):  # asked for: replaced (a link: the link, not the victim)
            box.check(["predict", "clip.mp4", "-o", "out", *MODEL, *QUIET, "--no-overlay", "--overwrite"], True,
                      ("work/out",))  # fmt: skip
        if target == "causal":  # the export replaces its folder whole: never one holding what it does not write
            box.check(["export-streamer", "-o", "causal", *CAUSAL], expect_ok=False)


def test_two_outputs_of_one_run_never_share_a_file(inputs):
    with Sandbox.made(inputs) as box:
        box.check(["stream", "clip.mp4", *CAUSAL, "--csv", "x.out", "--summary", "./x.out"], expect_ok=False)


# ------------------------------------------------------------------------------------------- names from inputs
HOSTILE_STEMS = ("..", ".", "...", "", "index.csv", ".gazeflow_index", "a" * 240, " ", "-o", "partial.gaze")
stems = st.lists(
    st.sampled_from(HOSTILE_STEMS) | st.text(st.characters(exclude_characters="/\x00"), max_size=12),
    min_size=2,
    max_size=3,
    unique=True,
)


@fuzz_settings(4)
@given(names=stems)
def test_video_names_never_lead_a_batch_out_of_its_output_folder(inputs, names):
    with Sandbox.made(inputs) as box:
        (box.work / "vids").mkdir()
        (box.work / "out").mkdir()
        videos = []
        for name in names:
            video = box.work / "vids" / (name + ".mp4")
            if len(video.name.encode("utf-8", "surrogatepass")) > 255 or video.exists():
                continue
            try:
                video.write_bytes((box.work / "clip.mp4").read_bytes())
            except (OSError, UnicodeEncodeError):  # a name this file system refuses
                continue
            videos.append(f"vids/{video.name}")
        if len(videos) < 2:
            return
        box.check(["predict", *videos, "-o", "out/batch", *MODEL, *QUIET, "--no-overlay"], True, ("work/out/batch",))
        index = (box.work / "out" / "batch" / "index.csv").read_text().splitlines()
        assert len(index) == 1 + len(videos) and all(line.split(",")[-2] == "ok" for line in index[1:]), index
        folders = {line.split(",")[1] for line in index[1:]}
        assert len(folders) == len(videos)
        for folder in folders:
            assert Path(folder).parent == Path("out/batch") and (box.work / folder / "summary.json").is_file()


# ------------------------------------------------------------------------------------------- interface files
json_values = st.one_of(
    st.none(),
    st.booleans(),
    st.text(max_size=8),
    st.sampled_from(["12", "0.5", "NaN", "1e400", "-Infinity", "[1, 2]", "{}"]),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    st.lists(st.integers(-5, 5), max_size=3),
)
RAW_TOKENS = ("NaN", "Infinity", "-Infinity", "1e400", "9" * 5000)


def mutate(record: dict, keys: list[str], value, raw: str | None) -> str:
    """``record`` as JSON text with ``record[key...]`` replaced by ``value`` (or the raw JSON token ``raw``), or
    deleted when ``value`` is ``...``."""
    target = record
    for key in keys[:-1]:
        target = target[key]
    if value is ...:
        del target[keys[-1]]
    else:
        target[keys[-1]] = "@@RAW@@" if raw is not None else value
    text = json.dumps(record)
    return text.replace('"@@RAW@@"', raw) if raw is not None else text


FIELDS = {
    "calib.json": (["offset"], ["scale"], ["offset", 0], ["scale", 1], ["correction"], ["version"], ["model"]),
    "cam.json": (["fx"], ["fy"], ["cx"], ["width"], ["height"]),
    "export/streamer.json": (["file"], ["num_samples"], ["inputs"], ["outputs"], ["inputs", 2], ["format"]),
    "model/region_calibration.json": (["scale"],),
    "done/summary.json": (["frames"], ["fps"], ["video"], ["timings"]),
}


def command_reading(name: str) -> tuple[list[str], tuple[str, ...]]:
    predict, out = ["predict", "clip.mp4", "-o", "out", *MODEL, *QUIET, "--no-overlay"], ("work/out",)
    return {
        "calib.json": (predict + ["--calibration", "calib.json"], out),
        "cam.json": (predict + ["--intrinsics", "cam.json"], out),
        "export/streamer.json": (["stream", "clip.mp4", "--backend", "onnxruntime", "--onnx", "export"], ()),
        "model/region_calibration.json": (predict, out),
        "done/summary.json": (
            ["predict", "clip.mp4", "-o", "done", *MODEL, *QUIET, "--no-overlay", "--resume"],
            ("work/done",),
        ),
    }[name]


@fuzz_settings(20)
@given(
    name=st.sampled_from(sorted(FIELDS)),
    choice=st.data(),
    value=json_values | st.just(...),
    raw=st.none() | st.sampled_from(RAW_TOKENS),
)
def test_a_bad_field_in_an_interface_file_is_one_line_and_changes_nothing(inputs, name, choice, value, raw):
    keys = choice.draw(st.sampled_from(FIELDS[name]))
    with Sandbox.made(inputs) as box:
        path = box.work / name
        record = json.loads(path.read_text()) if path.exists() else {"scale": 1.0}
        text = mutate(record, keys, value, raw if value is not ... else None)
        path.write_text(text)
        argv, outputs = command_reading(name)
        # a token JSON has no float for is always refused; another value may be one the schema accepts (a number in
        # its range): then a correct result
        expect = False if (raw is not None and value is not ...) else None
        box.check(argv, expect_ok=expect, outputs=outputs, keep=(f"work/{name}",))


def test_a_tracker_csv_with_a_code_outside_the_schema_is_one_line(inputs):
    with Sandbox.made(inputs) as box:
        rows = (box.work / "tracker.csv").read_text().splitlines()
        rows[0] += ",gaze_type"
        rows[1:] = [row + (",300" if i == 3 else ",1") for i, row in enumerate(rows[1:])]
        (box.work / "tracker.csv").write_text("\n".join(rows) + "\n")
        run = box.check(["calibrate", "clip.mp4", "--gaze", "tracker.csv", "-o", "c.json", *MODEL], False)
        assert "tracker.csv: line 5: gaze_type: expected a gaze-type code" in run.last_line
        (box.work / "bom.csv").write_bytes(b"\xef\xbb\xbf" + (inputs["tracker.csv"]).read_bytes())
        box.check(["calibrate", "clip.mp4", "--gaze", "bom.csv", "-o", "c.json", *MODEL], True, ("work/c.json",))


# ------------------------------------------------------------------------------------------- sizes
@fuzz_settings(12)
@given(
    command=st.sampled_from(["stream", "stream-raw", "predict", "calibrate"]),
    k=st.none() | st.integers(10**7, 10**12),
    s=st.none() | st.integers(MAX_NUM_STEPS + 1, 10**9),
    raw=st.tuples(st.integers(10**5, 10**8), st.integers(10**5, 10**8)),
)
def test_sizes_past_the_machine_are_refused_before_anything_is_allocated(inputs, command, k, s, raw):
    sizes = [*(["-k", k] if k else []), *(["-s", s] if s else []), "--max-memory-gb", 8]
    if command == "stream-raw":
        argv, stdin = ["stream", "-", "--raw", f"{raw[0]}x{raw[1]}", *CAUSAL, *sizes], b""
    elif k is None and s is None:
        return
    else:
        argv, stdin = (
            {
                "stream": ["stream", "clip.mp4", *CAUSAL, *sizes],
                "predict": ["predict", "clip.mp4", "-o", "out", *MODEL, *QUIET, "--no-overlay", *sizes],
                "calibrate": ["calibrate", "clip.mp4", "--gaze", "tracker.csv", "-o", "c.json", *MODEL, *sizes],
            }[command],
            None,
        )
    with Sandbox.made(inputs) as box:
        started = time.perf_counter()
        run = box.check(argv, expect_ok=False, stdin=stdin)
        assert time.perf_counter() - started < 30, argv
        assert "--max-memory-gb" in run.last_line or "at most" in run.last_line, run.last_line
