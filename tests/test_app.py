"""The web demo without a browser: the job (outputs, bad uploads, limits, the demo clip's true gaze, the figure), the
page's handler (messages, temporary folders), the `gazeflow app` command, the package without Gradio, the Space
folder. The page in a real browser: tests/test_app_browser.py."""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from transformers_gazeflow.commands.cli import build_parser
from transformers_gazeflow.commands.demo import score_points
from transformers_gazeflow.commands.web_demo_jobs import (
    DemoInputError,
    DemoLimits,
    JobSettings,
    JobStopped,
    PipelineCache,
    check_upload,
    prepare_demo_clip,
    run_job,
    trajectory_figure,
)
from transformers_gazeflow.data.video import iter_frames, probe_video, write_video
from transformers_gazeflow.outputs.overlay import TRUTH_COLOUR, draw_gaze
from transformers_gazeflow.outputs.writers import CSV_COLUMNS, READOUT_COLUMNS, TRUTH_COLUMNS

from .conftest import REPO, run_python
from .pipeline_fixtures import (  # noqa: F401  (fixtures)
    NUM_SAMPLES,
    faststart_truncated_mp4,
    not_a_gazeflow_folder,
    random_video,
    single_torch_thread,
    tiny_model_dir,
)


def read_rows(path: Path, truth: bool = False) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        assert tuple(reader.fieldnames) == CSV_COLUMNS + READOUT_COLUMNS + (TRUTH_COLUMNS if truth else ())
        return list(reader)


@pytest.fixture(scope="module")
def pipelines() -> PipelineCache:
    return PipelineCache()


@pytest.fixture(scope="module")
def bad_videos(tmp_path_factory) -> dict[str, Path]:
    """Uploads the demo must refuse: each a real file of the kind a user might send."""
    import av

    folder = tmp_path_factory.mktemp("bad_uploads")
    files = {
        "empty": folder / "empty.mp4",
        "text": folder / "notes.mp4",
        "one_frame": folder / "one_frame.mp4",
        "codec": folder / "strange_codec.mp4",
        "audio_only": folder / "speech.m4a",
    }
    files["empty"].write_bytes(b"")
    files["text"].write_text("meeting notes, not a video\n" * 20)
    write_video(files["one_frame"], random_video(1), fps=24)
    good = write_video(folder / "good.mp4", random_video(12), fps=24)
    # the sample-description fourcc replaced: FFmpeg opens the container but knows no codec for the stream
    files["codec"].write_bytes(good.read_bytes().replace(b"avc1", b"zzzz"))
    container = av.open(str(files["audio_only"]), mode="w", format="mp4")
    stream = container.add_stream("aac", rate=16000)
    samples = np.zeros((1, 1024), np.float32)
    for i in range(8):
        frame = av.AudioFrame.from_ndarray(samples, format="fltp", layout="mono")
        frame.sample_rate, frame.pts = 16000, i * 1024
        for packet in stream.encode(frame):
            container.mux(packet)
    for packet in stream.encode():
        container.mux(packet)
    container.close()
    return files


# ---------------------------------------------------------------------------------------------------- the job
def test_job_on_a_real_mp4_is_the_pipeline_and_writes_playable_outputs(tmp_path, bikes_mp4, tiny_model_dir, pipelines):
    from transformers import pipeline

    progress: list[tuple[int, int]] = []
    settings = JobSettings(model=str(tiny_model_dir), seed=3, start_frame=10, end_frame=34, heatmap=True)
    result = run_job(bikes_mp4, settings, tmp_path / "job", pipelines, on_progress=lambda d, t: progress.append((d, t)))

    # the same samples as the pipeline on the same frames and seed
    expected = pipeline("egocentric-gaze", model=str(tiny_model_dir))(
        str(bikes_mp4), seed=3, start_frame=10, end_frame=34
    )
    np.testing.assert_allclose(result.trajectories, expected.trajectories, atol=1e-6)
    np.testing.assert_allclose(result.times_s, expected.times_ms / 1000.0)

    rows = read_rows(result.csv)
    assert len(rows) == 24 * (NUM_SAMPLES + 1)
    frames = np.array([int(r["frame_idx"]) for r in rows]).reshape(24, NUM_SAMPLES + 1)
    np.testing.assert_array_equal(frames[:, 0], np.arange(10, 34))
    xy = np.array([[float(r["x_norm"]), float(r["y_norm"])] for r in rows]).reshape(24, NUM_SAMPLES + 1, 2)
    np.testing.assert_allclose(xy[:, 1:].transpose(1, 0, 2), result.trajectories, atol=1e-6)
    assert {r["video_id"] for r in rows} == {"bikes"}

    summary = json.loads(result.summary_path.read_text())
    assert summary == json.loads(json.dumps(result.summary))
    assert (summary["frames"], summary["start_frame"], summary["seed"]) == (24, 10, 3)
    assert (summary["num_samples"], summary["num_steps"], summary["solver"]) == (NUM_SAMPLES, 3, "euler")
    assert summary["video"] == "bikes.mp4" and "demo" not in summary
    assert str(tmp_path) not in result.summary_path.read_text()  # no server paths in what users download

    assert progress[-1] == (24, 24) and all(b[0] > a[0] for a, b in zip(progress, progress[1:]))
    overlay = probe_video(result.overlay)
    assert (overlay.num_frames, overlay.width, overlay.height) == (24, 1280, 544)  # 2x: 272 -> 544 >= 480 px
    assert overlay.fps == pytest.approx(25.0)
    import av

    with av.open(str(result.overlay)) as container:  # what Chromium plays: H.264 in 4:2:0
        stream = container.streams.video[0]
        assert (stream.codec_context.name, stream.codec_context.pix_fmt) == ("h264", "yuv420p")
    assert "24 frames of bikes.mp4" in result.message
    fixations, saccades = result.summary["point_estimate_fixations"], result.summary["point_estimate_saccades"]
    assert f"makes {fixations} fixations and {saccades} saccades" in result.message  # the events, minimally
    assert f"within {result.summary['mean_spread90_px']:.1f} px" in result.message  # and the spread


def test_a_small_odd_sized_video_gives_the_commands_readable_legended_overlay_even_for_4_2_0(
    tmp_path, tiny_model_dir, pipelines
):
    from PIL import Image

    yy, xx = np.mgrid[0:47, 0:63]
    smooth = np.stack([xx * 4, yy * 5, 255 - xx * 2], axis=-1).astype(np.uint8)  # survives H.264 twice
    video = write_video(tmp_path / "odd.mp4", [smooth] * 10, fps=10)
    result = run_job(video, JobSettings(model=str(tiny_model_dir), heatmap=False, trail=0), tmp_path / "job", pipelines)
    overlay = probe_video(result.overlay)
    # gazeflow predict's size: 11 x 63x47 (the smallest whole multiple with a short side >= 480 px), padded to even
    assert (overlay.width, overlay.height) == (694, 518)
    first = next(iter_frames(result.overlay)).astype(int)
    source = next(iter_frames(video))
    enlarged = np.asarray(Image.fromarray(source).resize((693, 517), Image.Resampling.BILINEAR)).astype(int)
    # the padding repeats the last row/column; the picture itself is the source's, enlarged (up to H.264 and marks)
    np.testing.assert_allclose(first[:517, 692], first[:517, 693], atol=24)
    assert np.median(np.abs(first[:517, :693] - enlarged)) < 6
    # the legend burned into the top-left corner: the picture darkened behind it, white text and the samples' swatch
    corner = first[:40, :150]
    assert np.median(corner) < np.median(enlarged[:40, :150]) / 2
    assert (corner >= 200).all(axis=-1).sum() > 50
    assert (np.abs(corner - np.array([0, 230, 255])).max(axis=-1) < 60).any()
    assert json.loads(result.summary_path.read_text())["width"] == 63  # coordinates stay the video's


def test_demo_clip_is_rendered_once_recognised_by_content_and_scored_against_its_true_gaze(tmp_path, pipelines):
    clip = prepare_demo_clip(tmp_path / "cache")
    assert clip.path.is_file() and clip.path.parent.name.startswith("demo_clip_v")
    mtime = clip.path.stat().st_mtime_ns
    again = prepare_demo_clip(tmp_path / "cache")
    assert again.path.stat().st_mtime_ns == mtime and again.sha256 == clip.sha256  # not rendered twice
    assert not list(clip.path.parent.glob("partial.*"))
    info = probe_video(clip.path)
    assert (info.num_frames, info.width, info.height, info.fps) == (96, 256, 192, 24.0)

    upload = tmp_path / "upload" / "whatever_name.mp4"  # Gradio's copy of the example, under any name
    upload.parent.mkdir()
    shutil.copyfile(clip.path, upload)
    assert clip.matches(upload)
    result = run_job(upload, JobSettings(start_frame=8, end_frame=40), tmp_path / "job", pipelines, demo_clip=clip)
    assert result.truth is not None and result.truth.shape == (32, 2)
    valid = clip.scored[8:40]  # valid and on the frame: off-frame frames (code 4) are not scored, as in gazeflow demo
    assert valid.sum() > 16 and not (clip.truth.codes[8:40][valid] == 4).any()
    np.testing.assert_allclose(result.truth[valid], clip.gaze[8:40][valid])
    assert np.isnan(result.truth[~valid]).all()
    demo = result.summary["demo"]
    expected = score_points(np.arange(8, 40), result.trajectories.mean(axis=0), clip.truth)  # gazeflow demo's score
    assert demo == expected and demo["frames_scored"] == int(valid.sum())
    assert "true gaze" in result.message
    # the CSV carries the true gaze beside the prediction, as gazeflow demo's does
    rows = read_rows(result.csv, truth=True)
    points = [r for r in rows if r["sample_id"] == "-1"]
    assert [int(r["true_code"]) for r in points] == clip.truth.codes[8:40].tolist()
    np.testing.assert_allclose([float(r["true_x_norm"]) for r in points], clip.gaze[8:40, 0], atol=1e-6)
    # the true gaze is drawn on the overlay with the command's marker where the clip's gaze is on the frame
    overlay = next(iter_frames(result.overlay, 0, 1))
    assert clip.scored[8]
    x, y = (clip.gaze[8] * [256 * 3, 192 * 3]).astype(int)  # the overlay is drawn 3x (192 -> 576 >= 480 px)
    patch = overlay[max(y - 3, 0) : y + 4, max(x - 3, 0) : x + 4].astype(int)
    assert (np.abs(patch - TRUTH_COLOUR).max(axis=-1) < 70).any()

    other = tmp_path / "other.mp4"  # one changed byte is another video: no true gaze
    data = bytearray(clip.path.read_bytes())
    data[-1] ^= 1
    other.write_bytes(bytes(data))
    assert not clip.matches(other)


def test_the_demo_draws_the_true_gaze_with_the_commands_marker_and_skips_unknown_gaze():
    frame = np.zeros((100, 120, 3), np.uint8)
    drawn = draw_gaze(frame, np.zeros((0, 2)), truth_px=np.array([60.0, 50.0]))
    assert tuple(drawn[50, 60]) == TRUTH_COLOUR and tuple(drawn[52, 62]) == TRUTH_COLOUR
    assert tuple(drawn[10, 10]) == (0, 0, 0) and frame.sum() == 0  # the input is not changed
    np.testing.assert_array_equal(draw_gaze(frame, np.zeros((0, 2)), truth_px=np.array([np.nan, np.nan])), frame)


@pytest.mark.parametrize(
    "kind, pattern",
    [
        ("empty", r"^empty\.mp4 is empty \(0 bytes\): expected a video file$"),
        ("text", r"^notes\.mp4 is not a video file \(FFmpeg: Invalid data"),
        ("one_frame", r"^one_frame\.mp4 has only 1 frame; gaze prediction needs a video of at least 2 frames$"),
        ("codec", r"^strange_codec\.mp4 uses a video codec FFmpeg cannot decode here; re-encode it as H\.264"),
        ("audio_only", r"^speech\.m4a has no video stream"),
    ],
)
def test_bad_uploads_get_one_line_messages_naming_the_file_not_the_server_path(
    kind, pattern, bad_videos, tmp_path, tiny_model_dir, pipelines
):
    path = bad_videos[kind]
    with pytest.raises(DemoInputError) as caught:
        run_job(path, JobSettings(model=str(tiny_model_dir)), tmp_path / "job", pipelines)
    message = str(caught.value)
    assert re.search(pattern, message), message
    assert "\n" not in message and str(path.parent) not in message
    assert not (tmp_path / "job").exists()  # refused before any work


def test_no_upload_and_limits(tmp_path, bikes_mp4, tiny_model_dir, pipelines):
    def refused(video, limits=None, **settings) -> str:
        limits = limits or DemoLimits()
        with pytest.raises(DemoInputError) as caught:
            run_job(video, JobSettings(model=str(tiny_model_dir), **settings), tmp_path / "job", pipelines, limits)
        assert "\n" not in str(caught.value)
        return str(caught.value)

    assert refused(None) == "no video: upload a video file (or click the demo clip) first"
    assert refused(tmp_path / "gone.mp4").startswith("gone.mp4: the uploaded file is no longer on the server")
    assert refused(bikes_mp4, DemoLimits(max_upload_mb=0.25)) == (
        "bikes.mp4 is 0.5 MB; this demo takes videos up to 0.25 MB"
    )
    # 250 frames at 25 fps = 10 s; the limit is on the frames processed, so a frame range gets under it
    assert refused(bikes_mp4, DemoLimits(max_duration_s=4)) == (
        "bikes.mp4: the 250 frames to process last 10.0 s; this demo processes at most 4 s per run: set a frame "
        "range of at most 100 frames (25 fps)"
    )
    result = run_job(
        bikes_mp4,
        JobSettings(model=str(tiny_model_dir), start_frame=150, end_frame=250),
        tmp_path / "ok",
        pipelines,
        DemoLimits(max_duration_s=4),
    )
    assert result.summary["frames"] == 100
    assert refused(bikes_mp4, start_frame=250) == "start frame 250 is past the end of bikes.mp4 (250 frames, 0..249)"
    assert refused(bikes_mp4, start_frame=20, end_frame=20) == (
        "end frame 20 must be after start frame 20 (the end frame is not included)"
    )
    assert refused(bikes_mp4, start_frame=-1) == "start frame must be >= 0, got -1"
    assert refused(bikes_mp4, start_frame=2.5) == "start frame must be a whole number, got 2.5"
    assert refused(bikes_mp4, start_frame=10, end_frame=11) == (
        "frames [10, 11) of bikes.mp4 are fewer than the 2 gaze prediction needs"
    )
    assert (
        refused(bikes_mp4, end_frame=8, sampling=dict(num_samples=0)) == "K (samples) must be between 1 and 64, got 0"
    )
    assert (
        refused(bikes_mp4, end_frame=8, sampling=dict(num_steps=101)) == "S (steps) must be between 1 and 100, got 101"
    )
    assert (
        refused(bikes_mp4, end_frame=8, sampling=dict(solver="rk4"))
        == "solver must be one of euler, heun, midpoint, got 'rk4'"
    )
    assert refused(bikes_mp4, end_frame=8, seed=-3) == "seed must be >= 0, got -3"


def test_bad_models_are_named(tmp_path, bikes_mp4, not_a_gazeflow_folder, pipelines):
    assert str(DemoInputError("cannot load 'x':\n  We couldn't connect.\nCheck it.")) == (
        "cannot load 'x': We couldn't connect. Check it."
    )  # wrapped messages (the Hub's) become one line
    with pytest.raises(DemoInputError, match=r"is not a GazeFlow model folder: config.json has model_type 'bert'"):
        run_job(bikes_mp4, JobSettings(model=str(not_a_gazeflow_folder), end_frame=8), tmp_path / "job", pipelines)
    with pytest.raises(DemoInputError, match=r"model folder not found"):
        run_job(
            bikes_mp4, JobSettings(model=str(tmp_path / "missing" / "model"), end_frame=8), tmp_path / "job", pipelines
        )


def test_truncated_video_is_a_message_not_a_traceback(tmp_path, tiny_model_dir, pipelines):
    video = faststart_truncated_mp4(tmp_path)
    with pytest.raises(DemoInputError, match=r"^truncated_faststart\.mp4 cannot be decoded to the end: .*truncated"):
        run_job(video, JobSettings(model=str(tiny_model_dir)), tmp_path / "job", pipelines)


def test_pipeline_cache_loads_each_model_once_and_keeps_the_last_two(tmp_path, tiny_model_dir):
    from .pipeline_fixtures import save_tiny_model

    cache = PipelineCache(capacity=2)
    first = cache.get(str(tiny_model_dir))[1]
    assert cache.get(f"  {tiny_model_dir}  ")[1] is first
    other = save_tiny_model(tmp_path / "other", seed=1)
    third = save_tiny_model(tmp_path / "third", seed=2)
    cache.get(str(other))
    cache.get(str(third))
    assert cache.get(str(tiny_model_dir))[1] is not first  # evicted, loaded again
    location, default = cache.get("")
    assert Path(location).name == "default_model" and default.model.config.model_type == "gazeflow"


def test_trajectory_figure_draws_the_point_estimate_the_samples_and_the_truth():
    pytest.importorskip("matplotlib", reason="the web demo's figure needs matplotlib: pip install -e '.[app]'")
    rng = np.random.default_rng(0)
    trajectories = rng.uniform(0.2, 0.8, (5, 30, 2))
    times = np.arange(30) / 25.0
    truth = rng.uniform(0, 1, (30, 2))
    truth[3] = np.nan
    figure = trajectory_figure(times, trajectories, truth)
    top, bottom = figure.axes
    for axis, ax in enumerate((top, bottom)):
        lines = ax.get_lines()
        assert len(lines) == 5 + 2  # the K samples, the point estimate, the truth
        np.testing.assert_allclose(lines[5].get_ydata(), trajectories[..., axis].mean(axis=0))
        np.testing.assert_allclose(lines[6].get_ydata(), truth[:, axis])
        band = ax.collections[0].get_paths()[0].vertices[:, 1]
        assert band.min() == pytest.approx(trajectories[..., axis].min())
        assert band.max() == pytest.approx(trajectories[..., axis].max())
    assert bottom.get_ylim() == (1.0, 0.0) and top.get_ylim() == (0.0, 1.0)  # y down, as in the frame
    assert [t.get_text() for t in top.get_legend().get_texts()] == [
        "K=5 samples",
        "point estimate (mean of K)",
        "true gaze",
    ]
    assert len(trajectory_figure(times, trajectories).axes[0].get_lines()) == 6  # no truth line without truth


def test_job_offers_the_window_modes_of_the_pipeline(tmp_path, bikes_mp4, tiny_model_dir, pipelines):
    from transformers import pipeline

    pipe = pipeline("egocentric-gaze", model=str(tiny_model_dir))
    results = {}
    for mode in ("coherent", "blend"):
        result = run_job(
            bikes_mp4,
            JobSettings(model=str(tiny_model_dir), sampling=dict(window_mode=mode), end_frame=40),
            tmp_path / mode,
            pipelines,
        )
        expected = pipe(str(bikes_mp4), seed=0, end_frame=40, window_mode=mode)
        np.testing.assert_allclose(result.trajectories, expected.trajectories, atol=1e-6)
        assert result.summary["window_mode"] == mode and f"{mode} windows" in result.message
        results[mode] = result.trajectories
    assert (
        run_job(
            bikes_mp4, JobSettings(model=str(tiny_model_dir), end_frame=8), tmp_path / "default", pipelines
        ).summary["window_mode"]
        == "coherent"
    )  # the default, as the pipeline's
    with pytest.raises(DemoInputError, match=r"^window mode must be one of coherent, blend, got 'smooth'$"):
        run_job(
            bikes_mp4,
            JobSettings(model=str(tiny_model_dir), sampling=dict(window_mode="smooth"), end_frame=8),
            tmp_path / "bad",
            pipelines,
        )


def test_a_stopped_job_ends_at_the_next_chunk_and_keeps_nothing(tmp_path, bikes_mp4, tiny_model_dir, pipelines):
    import threading

    cancel = threading.Event()
    progress: list[int] = []

    def report(done: int, total: int) -> None:
        progress.append(done)
        cancel.set()  # the Stop button, pressed while the first chunk is reported

    job = tmp_path / "job"
    job.mkdir()
    with pytest.raises(JobStopped, match=r"^bikes\.mp4: stopped after \d+ of 100 frames; nothing was kept$"):
        run_job(
            bikes_mp4,
            JobSettings(model=str(tiny_model_dir), end_frame=100),
            job,
            pipelines,
            on_progress=report,
            cancel=cancel,
        )
    assert len(progress) == 1 and progress[0] < 100
    assert list(job.iterdir()) == []  # no overlay, CSV or summary, partial or final


def test_job_samples_at_the_pages_tau_or_the_models_own(tmp_path, bikes_mp4, tiny_model_dir, pipelines):
    from transformers import pipeline

    pipe = pipeline("egocentric-gaze", model=str(tiny_model_dir))
    for tau, label in ((0.5, "half"), (0, "own"), (None, "none"), ("", "empty")):
        result = run_job(
            bikes_mp4,
            JobSettings(model=str(tiny_model_dir), sampling=dict(noise_scale=tau), end_frame=16),
            tmp_path / label,
            pipelines,
        )
        expected = pipe(str(bikes_mp4), seed=0, end_frame=16, noise_scale=0.5 if tau == 0.5 else 1.0)
        np.testing.assert_allclose(result.trajectories, expected.trajectories, atol=1e-6)
        want = 0.5 if tau == 0.5 else 1.0  # the tiny model's own tau is the paper's
        assert result.summary["noise_scale"] == want and f"tau {want:g}," in result.message
    for bad, message in (
        (-0.5, r"^tau \(noise scale\) must be a number in \(0, 2\] \(0: the model's own\), got -0.5$"),
        (2.5, r"^tau \(noise scale\) must be a number in \(0, 2\] \(0: the model's own\), got 2.5$"),
        ("warm", r"^tau \(noise scale\) must be a number, got 'warm'$"),
    ):
        with pytest.raises(DemoInputError, match=message):
            run_job(
                bikes_mp4,
                JobSettings(model=str(tiny_model_dir), sampling=dict(noise_scale=bad), end_frame=8),
                tmp_path / "bad",
                pipelines,
            )


def test_limits_are_checked():
    with pytest.raises(ValueError, match="limits must be positive"):
        DemoLimits(max_upload_mb=0)
    with pytest.raises(ValueError, match="min_frames must be >= 1"):
        DemoLimits(min_frames=0)
    assert DemoLimits(max_upload_mb=2).max_upload_bytes == 2 * 2**20


def test_check_upload_returns_the_video_info(bikes_mp4):
    info = check_upload(bikes_mp4, DemoLimits())
    assert (info.num_frames, info.width, info.height) == (250, 640, 272)


# -------------------------------------------------------------------------------------------- the page's handler
@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    pytest.importorskip("gradio", reason="the web demo needs gradio: pip install -e '.[app]'")
    from transformers_gazeflow.commands.web_demo import GazeFlowDemo

    root = tmp_path_factory.mktemp("web_demo")
    return GazeFlowDemo(
        limits=DemoLimits(max_duration_s=5), max_concurrent_jobs=3, cache_dir=root / "cache", work_dir=root / "work"
    )


def test_handler_yields_the_outputs_then_removes_its_temporary_folder(demo, bikes_mp4, tiny_model_dir):
    events = []
    run = demo.predict(
        str(bikes_mp4),
        str(tiny_model_dir),
        dict(num_samples=4, num_steps=3, solver="heun"),
        1,
        0,
        12,
        True,
        progress=lambda *args, **kwargs: events.append((args, kwargs)),
    )
    status, overlay, figure, files = next(run)
    assert status.startswith("**Done.** 12 frames of bikes.mp4")
    job_dir = Path(overlay).parent
    assert job_dir.parent == demo.work_dir and job_dir.name.startswith("gazeflow-job-")
    assert [Path(f).name for f in files] == ["gaze.csv", "summary.json"] and Path(files[0]).parent == job_dir
    assert len(read_rows(Path(files[0]))) == 12 * 5
    assert json.loads(Path(files[1]).read_text())["solver"] == "heun"
    assert len(figure.axes) == 2
    assert events[0][1]["desc"].startswith("checking") and events[-1][0] == ((12, 12),)
    assert all(kwargs.get("unit") == "frames" for _, kwargs in events[1:])
    with pytest.raises(StopIteration):  # Gradio resumes the generator once it has copied the files
        next(run)
    assert not job_dir.exists() and list(demo.work_dir.iterdir()) == []


def test_handler_shows_bad_input_as_a_status_line_and_keeps_no_files(demo, bad_videos, bikes_mp4, tmp_path):
    for video, expected in [
        (bad_videos["text"], "notes.mp4 is not a video file"),
        (bikes_mp4, "bikes.mp4: the 250 frames to process last 10.0 s"),
        (faststart_truncated_mp4(tmp_path), "cannot be decoded to the end"),
    ]:
        run = demo.predict(str(video), "", dict(num_samples=4, num_steps=3, solver="euler"), 0, 0, 0, False)
        with pytest.warns(UserWarning):  # gr.Warning outside a running page is a Python warning
            status, overlay, figure, files = next(run)
        assert list(demo.work_dir.iterdir()) == []  # gone when the page shows the status, not when Gradio resumes
        assert status.startswith("**Could not run:** ") and expected in status, status
        assert (overlay, figure, files) == (None, None, None)
        assert "Traceback" not in status and "\n" not in status
        with pytest.raises(StopIteration):  # one status only
            next(run)


def test_stop_ends_the_sessions_running_job_only(demo, bikes_mp4, tiny_model_dir):
    assert demo.stop("nobody") is False and demo.stop(None) is False
    stopped: list[bool] = []

    def progress(*args, **kwargs) -> None:
        if kwargs.get("unit") == "frames":  # a chunk is done: press Stop for another session, then for this one
            stopped.append(demo.stop("another session"))
            stopped.append(demo.stop("session-1"))

    run = demo.predict(
        str(bikes_mp4),
        str(tiny_model_dir),
        dict(num_samples=4, num_steps=3, solver="euler", window_mode="blend"),
        0,
        0,
        100,
        True,
        progress=progress,
        session="session-1",
    )
    status, overlay, figure, files = next(run)
    assert list(demo.work_dir.iterdir()) == []  # "nothing was kept" is true when the page shows it
    assert stopped[:2] == [False, True]
    assert status.startswith("**Stopped.** bikes.mp4: stopped after ") and (overlay, figure, files) == (None,) * 3
    with pytest.raises(StopIteration):
        next(run)
    assert demo._running == {}


def test_page_has_the_inputs_and_a_bounded_queue(demo):
    config = demo.blocks.get_config_file()
    ids = {c["props"].get("elem_id") for c in config["components"]}
    assert {
        "gazeflow-video",
        "gazeflow-run",
        "gazeflow-overlay",
        "gazeflow-plot",
        "gazeflow-downloads",
        "gazeflow-status",
        "gazeflow-examples",
        "gazeflow-start",
        "gazeflow-end",
        "gazeflow-k",
        "gazeflow-window-mode",
        "gazeflow-noise-scale",
        "gazeflow-stop",
    } <= ids
    (tau,) = [c["props"] for c in config["components"] if c["props"].get("elem_id") == "gazeflow-noise-scale"]
    assert tau["value"] == 0 and "0: the model's own" in tau["label"]  # another model keeps its own tau
    (mode,) = [c["props"] for c in config["components"] if c["props"].get("elem_id") == "gazeflow-window-mode"]
    assert mode["value"] == "coherent" and [choice[0] for choice in mode["choices"]] == ["coherent", "blend"]
    (predict,) = [fn for fn in demo.blocks.fns.values() if fn.api_name == "predict"]
    assert predict.concurrency_limit == 3 and demo.blocks._queue.max_size == 16
    order = [getattr(block, "elem_id", None) for block in predict.inputs]  # the callback's parameters, in order
    assert order[:3] == ["gazeflow-video", "gazeflow-model", "gazeflow-k"]
    assert order[5:8] == ["gazeflow-window-mode", "gazeflow-noise-scale", None]  # then the seed
    assert demo.demo_clip.path.is_file()


def test_limits_from_the_environment(monkeypatch):
    pytest.importorskip("gradio", reason="the web demo needs gradio: pip install -e '.[app]'")
    from transformers_gazeflow.commands.web_demo import limits_from_env

    monkeypatch.setenv("GAZEFLOW_APP_MAX_UPLOAD_MB", "12.5")
    monkeypatch.setenv("GAZEFLOW_APP_MAX_DURATION_S", "30")
    assert limits_from_env() == DemoLimits(max_upload_mb=12.5, max_duration_s=30)
    monkeypatch.setenv("GAZEFLOW_APP_MAX_DURATION_S", "half a minute")
    with pytest.raises(ValueError, match="GAZEFLOW_APP_MAX_DURATION_S must be a number, got 'half a minute'"):
        limits_from_env()


# ---------------------------------------------------------------------------------------------------- command, package
def test_gazeflow_app_options():
    args = build_parser().parse_args(["app"])
    assert (args.model, args.host, args.port, args.share) == (None, "127.0.0.1", None, False)
    args = build_parser().parse_args(["app", "--model", "m", "--host", "0.0.0.0", "--port", "8000", "--share"])
    assert (args.model, args.host, args.port, args.share) == ("m", "0.0.0.0", 8000, True)


def test_ctrl_c_stops_gazeflow_app_in_one_line_about_the_app(monkeypatch, capsys):
    import transformers_gazeflow.commands.web_demo as web_demo
    from transformers_gazeflow.commands.cli import main

    def serve(**kwargs):
        raise KeyboardInterrupt  # Ctrl-C while the page is served

    monkeypatch.setattr(web_demo, "serve", serve)
    assert main(["app", "--port", "7997"]) == 130
    err = capsys.readouterr().err.strip()
    assert err == "gazeflow: interrupted (SIGINT): the web demo stopped"


BLOCK_GRADIO = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "gradio":
            raise ImportError("No module named 'gradio' (blocked by the test)")
sys.meta_path.insert(0, Block())
"""


def test_package_and_command_work_without_gradio_and_app_says_how_to_install_it(tmp_path):
    code = (
        BLOCK_GRADIO
        + """
import transformers_gazeflow, transformers_gazeflow.commands.web_demo_jobs
from transformers_gazeflow.commands.cli import main
assert "gradio" not in sys.modules
status = main(["app", "--port", "7999"])
print("status", status)
"""
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "status 1" in result.stdout
    assert result.stderr.strip().splitlines()[-1] == (
        'gazeflow: error: the web demo needs gradio and matplotlib: pip install "transformers-gazeflow[app]"'
    )


# ---------------------------------------------------------------------------------------------------- the Space folder
def test_space_folder_runs_the_root_app_with_the_app_extra():
    import yaml

    text = (REPO / "spaces" / "README.md").read_text(encoding="utf-8")
    assert text.startswith("---\n")
    header = yaml.safe_load(text.split("---\n")[1])
    assert header["sdk"] == "gradio" and header["app_file"] == "app.py" and (REPO / header["app_file"]).is_file()
    assert isinstance(header["models"], list) and re.fullmatch(r"\d+\.\d+\.\d+", header["sdk_version"])
    requirements = [
        line.split("#")[0].strip() for line in (REPO / "spaces" / "requirements.txt").read_text().splitlines()
    ]
    requirements = [line for line in requirements if line]
    assert ".[app]" in requirements  # the package itself, from the Space's copy of the repository, with gradio


@pytest.mark.slow
def test_root_app_builds_the_demo_from_the_environment_and_a_bad_model_stops_gazeflow_app(
    tmp_path, tiny_model_dir, not_a_gazeflow_folder
):
    pytest.importorskip("gradio", reason="the web demo needs gradio: pip install -e '.[app]'")
    out = run_python(
        f"""
import os, runpy
from transformers_gazeflow.commands.cli import main
print("status", main(["app", "--model", {str(not_a_gazeflow_folder)!r}, "--port", "7998"]))
os.environ.update(GAZEFLOW_MODEL={str(tiny_model_dir)!r}, GAZEFLOW_APP_MAX_JOBS="4", XDG_CACHE_HOME={str(tmp_path)!r})
space = runpy.run_path({str(REPO / "app.py")!r}, run_name="space")  # not __main__: builds, does not serve
demo, app = space["demo"], space["gazeflow_demo"]
print(type(demo).__name__, app.model == {str(tiny_model_dir)!r}, app.max_concurrent_jobs)
""",
        cwd=tmp_path,
    )
    assert out.split() == ["status", "1", "Blocks", "True", "4"]
