"""Every benchmark's figures as JSON, with where they came from: the commit (and whether the tree had uncommitted
changes), the machine (CPU or GPU, torch, threads), the date, the command, and the fingerprints of the models
measured. ``benchmarks/render_tables.py`` renders the tables of ``docs/benchmarks.md`` from these files, and
``tests/test_benchmark_results.py`` fails when a table is out of date with its file or its model is not the one
the package ships.

A benchmark writes with ``--results-dir DIR`` (default: the ``GAZEFLOW_BENCHMARK_RESULTS`` environment variable,
which ``benchmarks/gpu_suite.sh`` sets to ``OUT_DIR/results``; with neither, nothing is written) one file per
benchmark and machine, ``DIR/<benchmark>.<machine>.json`` (machine: ``cpu``, or the GPU's name as a slug), holding
one *section* per kind of run (``bench_pipeline.py --ops`` and ``--decode-ratio`` are two sections of one file);
a run replaces its own section and leaves the others.

Model fingerprints (:func:`folder_fingerprint`, :func:`config_fingerprint`):

* a model folder (the bundled ``default_model/`` and ``default_model_causal/``): the sha256 of the two lines
  ``sha256sum config.json model.safetensors`` prints, i.e. ``sha256sum config.json model.safetensors | sha256sum``
  in the folder;
* a model built from a configuration with random weights (the paper's geometry): the sha256 of the configuration's
  ``to_dict()`` as sorted, compact JSON without ``transformers_version``; the entry names the benchmark function
  that builds that configuration (``builder``), so that the configuration it builds today can be compared.

This module imports neither torch nor the package at import time.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import re
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS_DIR = REPO / "docs" / "benchmark_results"
"""Where the results behind ``docs/benchmarks.md``'s tables are committed."""
ENVIRONMENT_VARIABLE = "GAZEFLOW_BENCHMARK_RESULTS"
SOURCE_RECORD = REPO / ".whl" / "own" / "SOURCE.json"
"""The GPU suite's record of the commit its wheel was built from (the device machine gets the tree without .git)."""
SHIPPED_MODEL_FOLDERS = {
    "default_model": REPO / "src" / "transformers_gazeflow" / "default_model",
    "default_model_causal": REPO / "src" / "transformers_gazeflow" / "default_model_causal",
}
"""The bundled models, as the tree holds them (what a table's fingerprint is compared with)."""
FINGERPRINTED_FILES = ("config.json", "model.safetensors")


# ---------------------------------------------------------------------------------------------------- fingerprints
def folder_fingerprint(folder: str | os.PathLike) -> str:
    """``sha256sum config.json model.safetensors | sha256sum`` in ``folder``: the configuration and the weights."""
    from transformers_gazeflow.data.atomic_files import sha256_file

    folder = Path(folder)
    missing = [name for name in FINGERPRINTED_FILES if not (folder / name).is_file()]
    if missing:
        raise FileNotFoundError(f"{folder}: a model folder needs {' and '.join(missing)} to be fingerprinted")
    lines = "".join(f"{sha256_file(folder / name)}  {name}\n" for name in FINGERPRINTED_FILES)
    return hashlib.sha256(lines.encode()).hexdigest()


def _without_versions(value):
    if isinstance(value, dict):
        return {key: _without_versions(item) for key, item in value.items() if key != "transformers_version"}
    if isinstance(value, list):
        return [_without_versions(item) for item in value]
    return value


def config_fingerprint(config) -> str:
    """sha256 of a configuration's ``to_dict()`` (or a plain dict) as sorted, compact JSON, without the
    ``transformers_version`` fields (which say who wrote it, not what it builds)."""
    values = config if isinstance(config, dict) else config.to_dict()
    text = json.dumps(_without_versions(values), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def folder_model(name: str, folder: str | os.PathLike) -> dict:
    """A measured model loaded from a folder; ``shipped`` names the bundled folder it is, if it is one."""
    folder = Path(folder).resolve()
    shipped = next(
        (key for key in SHIPPED_MODEL_FOLDERS if folder.name == key and folder.parent.name == "transformers_gazeflow"),
        None,
    )  # the tree's folder, or the installed package's (the GPU suite installs a wheel)
    entry = {"name": name, "kind": "folder", "sha256": folder_fingerprint(folder)}
    if shipped:
        entry["shipped"] = shipped
    else:
        entry["path"] = str(folder)
    return entry


def config_model(name: str, config, builder: str, **arguments) -> dict:
    """A measured model built from ``config`` with random weights; ``builder`` is ``"module:function"`` of the
    benchmark that builds that configuration when called with ``arguments`` (for the staleness test)."""
    return {
        "name": name,
        "kind": "config",
        "sha256": config_fingerprint(config),
        "builder": builder,
        "arguments": arguments,
    }


def shipped_model(name: str = "bundled", causal: bool = False) -> dict:
    """The bundled windowed model (or with ``causal=True`` the bundled causal one) as the package loads it."""
    from transformers_gazeflow.hub.model_folders import default_model_path

    return folder_model(name, default_model_path(causal=causal))


# ---------------------------------------------------------------------------------------------------- provenance
def git_source() -> dict | None:
    """``{"commit", "dirty"}`` of the tree (dirty: tracked files differ from the commit), or None without git."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True)
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return {"commit": commit.stdout.strip(), "dirty": bool(status.stdout.strip())}


def source() -> dict:
    """The tree's commit (:func:`git_source`); on the device machine (no .git) the GPU suite's record of the commit
    its wheel was built from."""
    found = git_source()
    if found is not None:
        return found
    if SOURCE_RECORD.exists():
        record = json.loads(SOURCE_RECORD.read_text())
        return {"commit": record.get("commit"), "dirty": record.get("dirty"), "from": "the suite's wheel record"}
    return {"commit": None, "dirty": None}


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine(device: str = "cpu") -> dict:
    """The machine a run measured on: CPU (name, cores, load), GPU (name) when ``device`` is CUDA, torch and its
    threads, Python."""
    import torch

    info = {
        "device": "cpu",
        "cpu": cpu_name(),
        "cpu_cores": os.cpu_count(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
    }
    if hasattr(os, "getloadavg"):
        info["load_average"] = [round(value, 2) for value in os.getloadavg()]
    if str(device).startswith("cuda") and torch.cuda.is_available():
        info.update(device="cuda", gpu=torch.cuda.get_device_name(torch.device(device)), cuda=torch.version.cuda)
    return info


def machine_slug(info: dict) -> str:
    """``cpu``, or the GPU's name in lower case with dashes (``nvidia-h100-80gb-hbm3``)."""
    if info.get("device") != "cuda":
        return "cpu"
    return re.sub(r"[^a-z0-9]+", "-", info["gpu"].lower()).strip("-")


def command_line(argv: list[str] | None = None) -> str:
    """The command as run, the script's path relative to the repository."""
    argv = list(sys.argv if argv is None else argv)
    script = Path(argv[0]) if argv else Path("?")
    try:
        script = script.resolve().relative_to(REPO)
    except ValueError:
        pass
    return shlex.join(["python", str(script), *argv[1:]])


# ---------------------------------------------------------------------------------------------------- writing
_SOURCE_AT_START: dict | None = None
"""The tree's commit when the benchmark parsed its arguments (:func:`add_results_argument`): what ran, even when
the tree changes while it runs."""


def add_results_argument(parser: argparse.ArgumentParser) -> None:
    """``--results-dir``; also notes the tree's commit now, at the run's start."""
    global _SOURCE_AT_START
    _SOURCE_AT_START = source()
    parser.add_argument(
        "--results-dir",
        type=Path,
        default=os.environ.get(ENVIRONMENT_VARIABLE) or None,
        help="also write the figures with their commit, machine and model fingerprints to "
        "DIR/<benchmark>.<machine>.json (docs/benchmark_results for docs/benchmarks.md's tables; default: "
        f"${ENVIRONMENT_VARIABLE}, else nothing is written)",
    )


def _plain(value):
    """JSON for numpy scalars and arrays, tuples and paths in a benchmark's figures."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"a benchmark figure of type {type(value).__name__} cannot be written as JSON: {value!r}")


def write_section(
    results_dir: str | os.PathLike | None,
    benchmark: str,
    section: str,
    figures: dict,
    models: list[dict],
    device: str = "cpu",
    argv: list[str] | None = None,
) -> Path | None:
    """Write ``figures`` as ``section`` of ``results_dir/<benchmark>.<machine>.json`` with their provenance
    (nothing when ``results_dir`` is None). Returns the file written."""
    if results_dir is None:
        return None
    info = machine(device)
    entry = {
        "command": command_line(argv),
        **(_SOURCE_AT_START or source()),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": info,
        "models": models,
        "figures": figures,
    }
    folder = Path(results_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{benchmark}.{machine_slug(info)}.json"
    document = json.loads(path.read_text()) if path.exists() else {"benchmark": benchmark, "sections": {}}
    if document.get("benchmark") != benchmark:
        raise ValueError(f"{path}: holds results of {document.get('benchmark')!r}, not {benchmark!r}")
    document["sections"][section] = json.loads(json.dumps(entry, default=_plain))
    document["sections"] = dict(sorted(document["sections"].items()))
    from transformers_gazeflow.data.atomic_files import atomic_write

    atomic_write(path, json.dumps(document, indent=1) + "\n")
    print(f"results: section {section!r} of {path}")
    return path


def read_results(path: str | os.PathLike) -> dict:
    """A results file, checked for the fields the renderer needs."""
    path = Path(path)
    try:
        document = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: not a readable results file ({err})") from err
    for name, section in document.get("sections", {}).items():
        missing = [key for key in ("command", "commit", "date", "machine", "models", "figures") if key not in section]
        if missing:
            raise ValueError(f"{path}: section {name!r} lacks {', '.join(missing)}")
    return document


def merge(files: list[Path], into: Path = RESULTS_DIR) -> list[Path]:
    """Copy the sections of results files (a GPU suite's ``results/``) into ``into``'s files of the same name, each
    section replacing the one of its name and the others kept."""
    from transformers_gazeflow.data.atomic_files import atomic_write

    written = []
    for path in files:
        incoming = read_results(path)
        target = Path(into) / Path(path).name
        document = read_results(target) if target.exists() else {"benchmark": incoming["benchmark"], "sections": {}}
        if document["benchmark"] != incoming["benchmark"]:
            raise ValueError(f"{target}: holds {document['benchmark']!r}, {path} holds {incoming['benchmark']!r}")
        document["sections"] = dict(sorted({**document["sections"], **incoming["sections"]}.items()))
        atomic_write(target, json.dumps(document, indent=1) + "\n")
        written.append(target)
        print(f"{target}: sections {', '.join(incoming['sections'])} from {path}")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Merge results files (e.g. a GPU suite's OUT_DIR/results/*.json).")
    parser.add_argument("files", nargs="+", type=Path, help="results files to merge")
    parser.add_argument("--into", type=Path, default=RESULTS_DIR, help="default: docs/benchmark_results")
    args = parser.parse_args(argv)
    merge(args.files, args.into)
    return 0


if __name__ == "__main__":
    sys.exit(main())
