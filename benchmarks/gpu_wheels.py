"""The GPU suite's wheels: which packages the GPU image lacks (``gpu_wheels.txt``, ``gpu_image_packages.txt``), the
pip commands that download them here and install them there, this package's own wheel and the hash of its sources.
Run through ``gpu_suite_tools.py`` (``pip-commands``, ``prepare-wheels``, ``check-wheel-list``, ``source-hash``)."""

from __future__ import annotations

import hashlib
import importlib.metadata as metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from results import git_source

REPO = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
WHEELS = REPO / ".whl"
OWN_WHEELS = WHEELS / "own"
SOURCE_RECORD = OWN_WHEELS / "SOURCE.json"
PACKAGE = "transformers-gazeflow"
NOT_CARRIED = {"playwright": "drives Chromium in the web demo's browser tests, which the GPU suite does not run"}
"""Requirements of the ``test`` extra that the GPU suite leaves out on purpose (name -> why)."""
PLATFORMS = [
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
]
TARGET_PYTHON = ("3", "12")
CARRY_LIMIT_MIB = 64  # the device tool's limit on what travels: the working tree plus the carried paths


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_list() -> list[tuple[str, str, bool]]:
    """``(name, version, built_from_sdist)`` of every line of ``gpu_wheels.txt``."""
    entries = []
    for line in (HERE / "gpu_wheels.txt").read_text().splitlines():
        fields = line.split("#", 1)[0].split()
        if fields:
            name, version = fields[0].split("==")
            entries.append((name, version, "sdist" in fields[1:]))
    return entries


def image_packages() -> set[str]:
    lines = (HERE / "gpu_image_packages.txt").read_text().splitlines()
    return {normalize(line.strip()) for line in lines if line.strip() and not line.startswith("#")}


def requirement_closure() -> tuple[set[str], list[str]]:
    """Names this package needs on the GPU (install_requires, the ``test`` extra, and their requirements, for
    CPython 3.12 on Linux) that the image lacks, and the problems found (a need neither in the image nor carried)."""
    from packaging.markers import default_environment
    from packaging.requirements import Requirement

    environment = {
        **default_environment(),
        "python_version": ".".join(TARGET_PYTHON),
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": "x86_64",
    }
    image, carried = image_packages(), {normalize(name) for name, _, _ in wheel_list()}
    needed, problems, queue = set(), [], [(normalize(PACKAGE), "test")]
    while queue:
        name, extra = queue.pop()
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            problems.append(f"{name}: not installed here, so its requirements cannot be read")
            continue
        for line in requires:
            requirement = Requirement(line)
            if requirement.marker and not requirement.marker.evaluate({**environment, "extra": extra}):
                continue
            child = normalize(requirement.name)
            if child in image or child in needed or child in NOT_CARRIED:
                continue
            needed.add(child)
            if child not in carried:
                problems.append(f"{child} (needed by {name}) is neither in the GPU image nor in gpu_wheels.txt")
            queue.append((child, ""))
    return needed, problems


def find_target_python() -> str:
    """A CPython 3.12 here, to build the sdist-only wheels for the GPU image's Python: ``$PYTHON312``, else
    ``python3.12`` on the PATH, else a pyenv install; ``python3.12`` (for the printed commands) when none runs."""
    import glob

    candidates = [
        os.environ.get("PYTHON312"),
        shutil.which("python3.12"),
        *sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3.12"))),
    ]
    for candidate in filter(None, candidates):
        try:
            version = subprocess.run(
                [candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                capture_output=True,
                text=True,
                timeout=60,
            )
        except OSError:
            continue
        if version.returncode == 0 and version.stdout.strip() == ".".join(TARGET_PYTHON):
            return candidate
    return f"python{'.'.join(TARGET_PYTHON)}"


def pip_commands(
    stale_own: bool = False, site: str = "/tmp/site", target_python: str | None = None
) -> dict[str, list[list[str]]]:
    """``download``: the commands run here (``--prepare-wheels``); ``install``: the ones run on the GPU machine."""
    download = []
    for name, version, from_sdist in wheel_list():
        if from_sdist:
            download.append(
                [
                    target_python or f"python{'.'.join(TARGET_PYTHON)}",
                    "-m",
                    "pip",
                    "wheel",
                    "--no-deps",
                    "--no-binary",
                    name,
                    "-w",
                    ".whl",
                    f"{name}=={version}",
                ]
            )
        else:
            platforms = [arg for platform in PLATFORMS for arg in ("--platform", platform)]
            download.append(
                [
                    "python3",
                    "-m",
                    "pip",
                    "download",
                    "--no-deps",
                    "--only-binary=:all:",
                    "--python-version",
                    ".".join(TARGET_PYTHON),
                    "--implementation",
                    "cp",
                    *platforms,
                    "-d",
                    ".whl",
                    f"{name}=={version}",
                ]
            )
    download.append(
        [
            "python3",
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            ".whl/own",
            "<a copy of src/, datasets_scripts/, setup.py, README.md>",
        ]
    )
    install_base = [
        "python3",
        "-m",
        "pip",
        "install",
        "-q",
        "--no-index",
        "--no-deps",
        "--no-compile",
        "--no-cache-dir",
        "--upgrade",
        "--target",
        site,
    ]
    own = ["--no-build-isolation", "."] if stale_own else [".whl/own/transformers_gazeflow-*.whl"]
    return {"download": download, "install": [install_base + [".whl/*.whl"], install_base + own]}


def source_hash(root: Path = REPO) -> str:
    """sha256 of every file that goes into this package's wheel (src/, datasets_scripts/, setup.py, README.md)."""
    digest = hashlib.sha256()
    files = [root / "setup.py", root / "README.md"]
    for folder in ("src", "datasets_scripts"):
        files += [
            p
            for p in sorted((root / folder).rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts and ".egg-info" not in str(p) and p.suffix != ".pyc"
        ]
    for path in files:
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def prepare_wheels() -> int:
    """Download and build every carried wheel into .whl/ and record the sources of this package's wheel."""
    needed, problems = requirement_closure()
    for problem in problems:
        print(f"gpu_wheels.txt: {problem}", file=sys.stderr)
    if problems:
        return 1
    if WHEELS.exists():
        shutil.rmtree(WHEELS)
    OWN_WHEELS.mkdir(parents=True)
    for command in pip_commands(target_python=find_target_python())["download"][:-1]:
        print("$ " + " ".join(command), flush=True)
        if subprocess.run(command, cwd=REPO).returncode != 0:
            print(
                f"prepare-wheels: this command failed: {' '.join(command)} (sdist builds need a CPython "
                f"{'.'.join(TARGET_PYTHON)}: set PYTHON312)",
                file=sys.stderr,
            )
            return 1
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        for name in ("src", "datasets_scripts"):
            shutil.copytree(REPO / name, project / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        for name in ("setup.py", "README.md"):
            shutil.copy(REPO / name, project / name)
        command = [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(OWN_WHEELS),
            str(project),
        ]
        print("$ " + " ".join(command), flush=True)
        if subprocess.run(command).returncode != 0:
            print(f"prepare-wheels: building this package's wheel failed: {' '.join(command)}", file=sys.stderr)
            return 1
    record = {"source_hash": source_hash(), **(git_source() or {})}
    SOURCE_RECORD.write_text(json.dumps(record, indent=1))
    sizes = {p.name: p.stat().st_size for p in WHEELS.rglob("*.whl")}
    for name, size in sorted(sizes.items()):
        print(f"{size / 2**20:8.2f} MiB  {name}")
    total = sum(sizes.values()) / 2**20
    print(f"{total:8.2f} MiB  in .whl/ (carry limit {CARRY_LIMIT_MIB} MiB with the working tree); {record}")
    return 0
