"""The README's "Gaze online" Python example runs as written on the bundled causal model, and gives what
``gazeflow stream`` gives on the same video with the same seed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from transformers_gazeflow.data.video import write_video
from transformers_gazeflow.hub.model_folders import default_model_available

from .conftest import REPO, gradient_frames, run_python

MARKER = "In Python, the same streamer frame by frame"

pytestmark = pytest.mark.skipif(
    not default_model_available(causal=True),
    reason="default_model_causal/ has no weights yet (the small-cpu recipe with causal=True trains them)",
)


def readme_streaming_example() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    after = text[text.index(MARKER) :]
    return re.search(r"```python\n(.*?)```", after, flags=re.DOTALL).group(1)


def test_the_readme_streaming_example_runs_on_the_bundled_causal_model(tmp_path):
    code = readme_streaming_example()
    assert 'iter_frames("my_video.mp4")' in code and "default_model_path(causal=True)" in code
    write_video(tmp_path / "my_video.mp4", gradient_frames(12, 96, 128), fps=24)
    points = "\nimport json\nprint(json.dumps(out.mean[0].tolist()), out.frame_index, tuple(out.trajectories.shape))\n"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    last_line = run_python(code + points, cwd=tmp_path, env=env).strip().splitlines()[-1]
    example_point = json.loads(last_line[: last_line.index("]") + 1])
    assert last_line.endswith("11 (1, 16, 2)"), last_line
    result = subprocess.run(
        [sys.executable, "-m", "transformers_gazeflow.commands.cli", "stream", "my_video.mp4"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    last = json.loads(result.stdout.strip().splitlines()[-1])
    assert last["frame"] == 11 and [last["x"], last["y"]] == example_point
