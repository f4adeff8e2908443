"""Every ```python block of README.md runs as written after the README's demo command, in a fresh interpreter, or
its first line says what it needs that a new user lacks (``# needs: ...``)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO

NEEDS = "# needs: "
DEMO_COMMAND = "gazeflow demo --output-dir demo_out"


def readme_python_blocks() -> list[tuple[str, str]]:
    """``(heading, code)`` of every ```python block, the heading the nearest one above it."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = []
    for match in re.finditer(r"^```python\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE):
        headings = re.findall(r"^#+ (.+)$", text[: match.start()], flags=re.MULTILINE)
        blocks.append((headings[-1] if headings else "top", match.group(1)))
    return blocks


BLOCKS = readme_python_blocks()
RUNNABLE = [(heading, code) for heading, code in BLOCKS if not code.startswith(NEEDS)]


def test_every_block_runs_or_says_what_it_needs():
    """The marker is the first line, and says something; blocks that run are most of them."""
    for heading, code in BLOCKS:
        lines = code.splitlines()
        marked = [i for i, line in enumerate(lines) if line.startswith("# needs")]
        assert marked in ([], [0]), (heading, marked)  # only as the first line, where a reader looks
        if marked:
            assert lines[0].startswith(NEEDS) and len(lines[0]) > len(NEEDS) + 5, (heading, lines[0])
    assert len(RUNNABLE) >= 6 and len(RUNNABLE) > len(BLOCKS) - len(RUNNABLE), [h for h, _ in BLOCKS]


def test_the_readme_names_the_demo_command_the_blocks_run_after():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert DEMO_COMMAND in text and "cp demo_out/demo_input.mp4 my_video.mp4" in text


@pytest.fixture(scope="module")
def after_the_demo(tmp_path_factory):
    """A folder where a new user stands after the README's demo command, with ``my_video.mp4`` copied from the
    demo's clip as the Quick start says."""
    folder = tmp_path_factory.mktemp("new_user")
    env = environment(folder)
    result = subprocess.run(
        [sys.executable, "-m", "transformers_gazeflow.commands.cli", *DEMO_COMMAND.split()[1:]],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    shutil.copy(folder / "demo_out" / "demo_input.mp4", folder / "my_video.mp4")
    return folder


def environment(folder: Path) -> dict:
    return {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "HF_DATASETS_CACHE": str(folder / "hf_datasets"),
    }


@pytest.mark.parametrize("heading, code", RUNNABLE, ids=[f"{i}-{h[:40]}" for i, (h, _) in enumerate(RUNNABLE)])
def test_the_block_runs_as_written(after_the_demo, heading, code):
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=after_the_demo,
        env=environment(after_the_demo),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, f"README block under {heading!r} failed:\n{result.stderr[-3000:]}"


def test_the_streamer_runs_on_one_cpu_thread_unless_told():
    """The library's default is the command's (``gazeflow stream --threads``: 1 on the CPU)."""
    code = (
        "import torch\ntorch.set_num_threads(2)\n"
        "from transformers_gazeflow import GazeFlowConfig, GazeFlowModel, GazeFlowStreamer\n"
        "model = GazeFlowModel(GazeFlowConfig.tiny(causal=True)).eval()\n"
        "GazeFlowStreamer(model, threads=None)\nleft = torch.get_num_threads()\n"
        "GazeFlowStreamer(model)\nprint(left, torch.get_num_threads())\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "OMP_NUM_THREADS"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["2", "1"]


def test_events_name_their_sample_as_the_csvs_do():
    """A prediction's events are series 0 (the point estimate) and k + 1 (sample k); ``sample_id`` is the CSVs'."""
    from transformers_gazeflow.gaze.events import Fixation, GazeEvents, Saccade

    point = Fixation(0, 0, 4, (1.0, 2.0), (0.1, 0.2), 0.5, 0.05)
    sample = Saccade(3, 5, 6, (1.0, 2.0), (9.0, 9.0), 10.6, 1.0, 40.0)
    assert (point.sample_id, sample.sample_id) == (-1, 2)
    events = GazeEvents([point], [sample])
    assert events.of_sample(-1).fixations == [point] and events.of_sample(2).saccades == [sample]
    assert events.of_sample(0).fixations == [] and events.of_sample(0).saccades == []
