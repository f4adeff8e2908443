"""The Python half of ``benchmarks/gpu_suite.sh``: wheels, environment, pre-flight, the predict throughput run and
the summary. Run by the script; each subcommand also runs alone (``python benchmarks/gpu_suite_tools.py --help``).

Subcommands:
  pip-commands [--stale-own]   the pip commands that download (here) and install (on the GPU) the wheels
  prepare-wheels               download/build them into .whl/ (needs PyPI; run on the development machine)
  check-wheel-list             every requirement of this package and its carried wheels is in the image or carried
  source-hash                  the hash of the sources that go into this package's wheel
  environment OUT --device D   OUT/environment.json: device line, versions, commit
  preflight OUT --device D     import every package, check versions against the carried wheels' requirements,
                               and on CUDA a bf16 matmul and flash attention
  prepare WORK [--tiny]        the predict and train steps' inputs (videos, a paper-geometry model, EGTEA clips)
  predict OUT --device D       gazeflow predict --no-overlay on generated videos (frames per second)
  missed-targets OUT           the benchmarks whose targets were missed (the profile step's input)
  summary OUT [OUT ...] -o F   summary.md from one or several suite output folders
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.metadata as metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


# ---------------------------------------------------------------------------------------------------- wheels
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


def git_commit() -> dict | None:
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
    record = {"source_hash": source_hash(), **(git_commit() or {})}
    SOURCE_RECORD.write_text(json.dumps(record, indent=1))
    sizes = {p.name: p.stat().st_size for p in WHEELS.rglob("*.whl")}
    for name, size in sorted(sizes.items()):
        print(f"{size / 2**20:8.2f} MiB  {name}")
    total = sum(sizes.values()) / 2**20
    print(f"{total:8.2f} MiB  in .whl/ (carry limit {CARRY_LIMIT_MIB} MiB with the working tree); {record}")
    return 0


# ---------------------------------------------------------------------------------------------------- environment
def version_of(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def environment(out_dir: Path, device: str) -> dict:
    import torch

    info: dict = {
        "device_type": device,
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "hostname": os.uname().nodename,
    }
    for name in ("transformers", "accelerate", "peft", "numpy", "datasets", "evaluate", "av", "safetensors", PACKAGE):
        info[name] = version_of(name)
    if device.startswith("cuda"):
        properties = torch.cuda.get_device_properties(0)
        info.update(
            device=torch.cuda.get_device_name(0),
            capability=".".join(map(str, torch.cuda.get_device_capability(0))),
            memory_gib=round(properties.total_memory / 2**30, 1),
            multiprocessors=properties.multi_processor_count,
        )
    else:
        info["device"] = "CPU"
    tree = source_hash()
    commit = git_commit()
    if commit is None and SOURCE_RECORD.exists():  # the device machine gets the tree without .git
        commit = json.loads(SOURCE_RECORD.read_text())
        commit["tree_matches_record"] = commit.get("source_hash") == tree
    info["source"] = {"tree_hash": tree, **(commit or {})}
    (out_dir / "environment.json").write_text(json.dumps(info, indent=1))
    print(json.dumps(info, indent=1))
    return info


def import_reference(module: str):
    """A module of the suite; pysaliency as the metric tests import it, through the shims of
    ``reference_libraries.py`` (no ``pkg_resources`` in setuptools >= 81, no ``np.trapz`` in numpy >= 2.4)."""
    if module != "pysaliency":
        return importlib.import_module(module)
    from reference_libraries import import_pysaliency  # beside this script

    return import_pysaliency()


def preflight(out_dir: Path, device: str) -> int:
    """Import everything the suite needs, check the installed versions against every carried wheel's and this
    package's requirements, and on CUDA run a bf16 matmul and flash attention once."""
    from packaging.requirements import Requirement

    report: dict = {"imports": {}, "requirements": [], "cuda": {}}
    modules = [
        "torch",
        "transformers",
        "accelerate",
        "peft",
        "safetensors",
        "numpy",
        "scipy",
        "datasets",
        "evaluate",
        "av",
        "pysaliency",
        "skvideo",
        "pytest",
        "transformers_gazeflow",
        "transformers_gazeflow.commands.cli",
    ]
    failed = False
    for module in modules:
        start = time.perf_counter()
        try:
            imported = import_reference(module)
            report["imports"][module] = {
                "ok": True,
                "version": getattr(imported, "__version__", None),
                "seconds": round(time.perf_counter() - start, 2),
                "file": getattr(imported, "__file__", None),
            }
        except Exception as err:  # noqa: BLE001 - every failure is reported, not raised
            failed = True
            report["imports"][module] = {"ok": False, "error": f"{type(err).__name__}: {err}"}
    report["gazeflow_command"] = shutil.which("gazeflow")
    for name in [PACKAGE] + [name for name, _, _ in wheel_list()]:
        requires = metadata.requires(name) if version_of(name) else None
        for line in requires or []:
            requirement = Requirement(line)
            if requirement.marker and not requirement.marker.evaluate({"extra": ""}):
                continue
            installed = version_of(requirement.name)
            if installed is None or (requirement.specifier and not requirement.specifier.contains(installed, True)):
                report["requirements"].append(f"{name} needs {requirement}, found {installed}")
    if device.startswith("cuda"):
        report["cuda"] = cuda_sanity()
        failed = failed or not report["cuda"].get("ok", False)
    (out_dir / "preflight.json").write_text(json.dumps(report, indent=1))
    for module, result in report["imports"].items():
        print(f"{'ok  ' if result['ok'] else 'FAIL'} import {module}: {result.get('version') or result.get('error')}")
    print(f"gazeflow command: {report['gazeflow_command']}")
    for problem in report["requirements"]:
        print(f"requirement not met: {problem}")
    if report["cuda"]:
        print(f"cuda: {report['cuda']}")
    return 1 if failed else 0


def cuda_sanity() -> dict:
    import torch
    import torch.nn.functional as F

    result: dict = {
        "cudnn": torch.backends.cudnn.version(),
        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
        "tf32_cudnn": torch.backends.cudnn.allow_tf32,
    }
    try:
        a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        for _ in range(3):
            a @ b
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(10):
            a @ b
        torch.cuda.synchronize()
        result["bf16_matmul_tflops"] = round(10 * 2 * 8192**3 / (time.perf_counter() - start) / 1e12, 1)
        from torch.nn.attention import SDPBackend, sdpa_kernel

        q = torch.randn(1, 16, 8192, 64, device="cuda", dtype=torch.bfloat16)
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            F.scaled_dot_product_attention(q, q, q)
        torch.cuda.synchronize()
        result["flash_attention"] = True
        result["ok"] = True
    except Exception as err:  # noqa: BLE001
        result.update(ok=False, error=f"{type(err).__name__}: {err}")
    return result


# ---------------------------------------------------------------------------------------------------- predict
def gazeflow_command() -> list[str]:
    script = shutil.which("gazeflow")
    return [script] if script else [sys.executable, "-m", "transformers_gazeflow.commands.cli"]


def make_model(folder: Path, preset: str) -> Path:
    import torch

    from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
    from transformers_gazeflow.data.processing import GazeFlowVideoProcessor

    torch.manual_seed(0)
    config = GazeFlowConfig.tiny() if preset == "tiny" else GazeFlowConfig(use_lora=False)
    GazeFlowModel(config).save_pretrained(folder)
    GazeFlowVideoProcessor(size=config.image_size).save_pretrained(folder)
    return folder


PREDICT_SIZES = {"tiny": [(64, 64), (160, 120)], "paper": [(256, 256), (640, 480)]}
"""The generated videos of the predict step (WIDTH, HEIGHT): the encoder's input size, and EGTEA Gaze+'s."""
PREDICT_MINUTES = {"tiny": 0.05, "paper": 0.5}


def video_name(size: tuple[int, int]) -> str:
    return f"video_{size[0]}x{size[1]}.mp4"


def write_generated_video(path: Path, size: tuple[int, int], minutes: float, fps: float = 24.0) -> dict:
    """A generated video (bench_pipeline's moving disc) of ``minutes`` at ``fps``; returns what it is."""
    sys.path.insert(0, str(HERE))
    from bench_pipeline import generated_frames

    from transformers_gazeflow.data.video import write_video

    frames = int(round(minutes * 60 * fps))
    start = time.perf_counter()
    write_video(path, generated_frames(frames, size[0], size[1], fps), fps=fps)
    return {
        "path": str(path),
        "description": f"{minutes:g} min {size[0]}x{size[1]} at {fps:g} fps, {frames} frames",
        "seconds_to_write": round(time.perf_counter() - start, 1),
    }


def prepare_train_clips(folder: Path, tiny: bool) -> dict:
    """The train step's EGTEA-layout clips (``bench_train.py --prepare-data``)."""
    sys.path.insert(0, str(HERE))
    import bench_train

    start = time.perf_counter()
    bench_train.main(["--prepare-data", str(folder), "--preset", "tiny" if tiny else "paper"])
    return {"path": str(folder), "seconds_to_write": round(time.perf_counter() - start, 1)}


def prepare(work: Path, tiny: bool) -> int:
    """The predict and train steps' inputs, made in parallel (the suite runs this in the background while the
    preflight and the tests run): the videos, the random paper-geometry model folder, the EGTEA-layout clips.
    ``work/prepared.json`` says what was made and how long it took."""
    from concurrent.futures import ProcessPoolExecutor

    preset = "tiny" if tiny else "paper"
    work.mkdir(parents=True, exist_ok=True)
    jobs = {
        video_name(size): (write_generated_video, work / video_name(size), size, PREDICT_MINUTES[preset])
        for size in PREDICT_SIZES[preset]
    }
    jobs["model"] = (make_model_timed, work / "model", preset)
    jobs["egtea"] = (prepare_train_clips, work / "egtea", tiny)
    status, made, start = 0, {}, time.perf_counter()
    with ProcessPoolExecutor(max_workers=len(jobs)) as pool:
        futures = {name: pool.submit(*job) for name, job in jobs.items()}
        for name, future in futures.items():
            try:
                made[name] = future.result()
                print(f"prepared {name}: {made[name]}", flush=True)
            except Exception as err:  # noqa: BLE001 - reported; the step that needs it says what is missing
                status = 1
                made[name] = {"error": f"{type(err).__name__}: {err}"}
                print(f"prepare {name} failed: {made[name]['error']}", flush=True)
    made["seconds"] = round(time.perf_counter() - start, 1)
    (work / "prepared.json").write_text(json.dumps(made, indent=1))
    return status


def make_model_timed(folder: Path, preset: str) -> dict:
    start = time.perf_counter()
    make_model(folder, preset)
    return {"path": str(folder), "seconds_to_write": round(time.perf_counter() - start, 1)}


def predict_runs(work: Path, tiny: bool) -> dict[str, tuple[Path | None, Path]]:
    """The predict step's runs: name -> (model folder or None for the bundled model, video)."""
    small, large = PREDICT_SIZES["tiny" if tiny else "paper"]
    if tiny:  # the same code as the three runs below, in two (CI runs this)
        return {
            "bundled": (None, work / video_name(small)),
            f"tiny random, {large[0]}x{large[1]}": (work / "model", work / video_name(large)),
        }
    model = "paper geometry, random weights"
    return {
        "bundled": (None, work / video_name(small)),
        model: (work / "model", work / video_name(small)),
        f"{model}, {large[0]}x{large[1]}": (work / "model", work / video_name(large)),
    }


def predict_throughput(out_dir: Path, device: str, tiny: bool, work: Path | None = None) -> int:
    """``gazeflow predict --no-overlay`` (the console script) on generated videos, K=30, S=5, frames per second:
    the bundled model and a random model of the paper's geometry (``--tiny``: the tiny test model) on a video of the
    encoder's input size, and the paper's geometry on a 640x480 video (EGTEA Gaze+'s size). ``work``: where
    ``prepare`` left its inputs (made here when missing)."""
    work = work or Path(tempfile.mkdtemp(prefix="gazeflow_predict_"))
    if not (work / "prepared.json").exists():
        prepare(work, tiny)
    made = json.loads((work / "prepared.json").read_text())
    figures: dict = {"benchmark": "predict", "prepared": made, "runs": {}}
    status = 0
    for index, (name, (model, video)) in enumerate(predict_runs(work, tiny).items()):
        output = work / f"out_{index}"
        command = gazeflow_command() + [
            "predict",
            str(video),
            "--no-overlay",
            "--device",
            device,
            "-k",
            "30",
            "-s",
            "5",
            "--quiet",
            "-o",
            str(output),
        ]
        command += ["--model", str(model)] if model else []
        print("$ " + " ".join(command), flush=True)
        start = time.perf_counter()
        result = subprocess.run(command, capture_output=True, text=True)
        wall = time.perf_counter() - start
        print(result.stdout + result.stderr[-3000:], flush=True)
        run = {
            "command": " ".join(command),
            "exit_code": result.returncode,
            "video": made.get(video.name, {}).get("description", video.name),
            "command_wall_s": round(wall, 1),
        }
        if result.returncode != 0:
            status = result.returncode
        else:
            summary = json.loads((output / "summary.json").read_text())
            timings = summary["timings"]
            run.update(
                frames=summary["frames"],
                device=summary["device"],
                load_s=timings["load_s"],
                predict_s=timings["predict_s"],
                ms_per_frame=timings["ms_per_frame"],
                frames_per_second=summary["frames"] / max(timings["predict_s"], 1e-9),
            )
        figures["runs"][name] = run
        shutil.rmtree(output, ignore_errors=True)
    (out_dir / "predict.json").write_text(json.dumps(figures, indent=1))
    return status


# ---------------------------------------------------------------------------------------------------- summary
def load(folder: Path, name: str) -> dict | None:
    path = folder / name
    return json.loads(path.read_text()) if path.exists() else None


def missed_targets(out_dir: Path) -> list[str]:
    """``inference`` when any target of an inference run was missed, ``streaming`` when the streamer's was."""
    missed = []
    for name in ("inference.json", "inference-compile.json"):
        figures = load(out_dir, name)
        if figures and not all(figures["targets_met"].values()) and "inference" not in missed:
            missed.append("inference")
    for name in STREAMING_FILES:
        figures = load(out_dir, name)
        if figures and not all(figures["targets_met"].values()) and "streaming" not in missed:
            missed.append("streaming")
    return missed


def test_counts(folder: Path, name: str) -> dict | None:
    import xml.etree.ElementTree as ElementTree

    path = folder / name
    if not path.exists():
        return None
    suites = ElementTree.parse(path).getroot()
    suite = suites if suites.tag == "testsuite" else suites.find("testsuite")
    counts = {key: int(suite.get(key, 0)) for key in ("tests", "failures", "errors", "skipped")}
    counts["failed"] = [
        case.get("classname", "") + "::" + case.get("name", "")
        for case in suite.iter("testcase")
        if case.find("failure") is not None or case.find("error") is not None
    ]
    counts["skip_reasons"] = [
        case.find("skipped").get("message", "") for case in suite.iter("testcase") if case.find("skipped") is not None
    ]
    return counts


def fmt(value, digits: int = 2) -> str:
    return "-" if value is None else (f"{value:.{digits}f}" if isinstance(value, float) else str(value))


def met(flag: bool | None) -> str:
    return "-" if flag is None else ("**met**" if flag else "**missed**")


def header_lines(folders: list[Path]) -> list[str]:
    """The device, commit and versions of the first folder with an environment.json."""
    environments = [e for e in (load(f, "environment.json") for f in folders) if e]
    lines = ["# GPU suite summary", ""]
    for env in environments[:1]:
        source = env.get("source", {})
        tree = (
            "the tree matches it"
            if source.get("tree_matches_record", True) and not source.get("dirty")
            else "the tree differs from it (uncommitted or later changes)"
        )
        hardware = (
            f" (capability {env['capability']}, {env['memory_gib']} GiB, {env['multiprocessors']} SMs)"
            if "capability" in env
            else ""
        )
        lines += [
            f"- device: `{env.get('device')}`{hardware}",
            f"- commit: `{source.get('commit', 'unknown')}`; {tree}; source hash {source.get('tree_hash', '?')[:12]}",
            f"- python {env['python']}, torch {env['torch']} (CUDA {env['cuda']}), transformers "
            f"{env['transformers']}, accelerate {env['accelerate']}, peft {env['peft']}, numpy {env['numpy']}",
        ]
    if any(e.get("device_type") == "cpu" for e in environments):
        lines.append("- **a dry run on the CPU**: the figures check that every step runs, not the targets")
    return lines


def read_tsv(path: Path) -> list[list[str]]:
    return [row.split("\t") for row in path.read_text().splitlines()] if path.exists() else []


def step_lines(folders: list[Path]) -> list[str]:
    """Each call's plan (estimate and limit per step) beside what ran: exit code (or timeout, or skipped) and
    seconds."""
    lines = [
        "",
        "## Steps",
        "",
        "| step | kind | estimate s | limit s | exit code | seconds | command |",
        "| --- | --- | ---: | ---: | --- | ---: | --- |",
    ]
    for folder in folders:
        plan = {row[0]: row[1:] for row in read_tsv(folder / "plan.tsv") if len(row) >= 4}
        budget = next((row[3] for row in plan.values() if len(row) > 3), None)
        total = 0.0
        for row in read_tsv(folder / "status.tsv"):
            step, code, seconds, command = (row + ["", "", "", ""])[:4]
            kind, estimate, limit = (plan.get(step, []) + ["-", "-", "-"])[:3]
            total += float(seconds or 0) if step != "prepare" else 0.0
            lines.append(f"| {step} | {kind} | {estimate} | {limit} | {code} | {seconds} | `{command}` |")
        if budget:
            lines += [
                "",
                f"Budget {budget} s (optional steps start only before it); the steps took {total:.0f} s "
                f"in all (prepare ran in the background).",
            ]
    return lines


def inference_target_rows(label: str, figures: dict) -> list[str]:
    at, targets, paper = figures["at"], figures["targets"], figures["paper"]
    peak = (figures["peak_memory_gb"] or {}).get("fast")
    rows = [
        (
            "encoder ms per clip",
            targets["encoder_ms"],
            figures["encoder_ms"]["fast"],
            paper["encoder_ms"],
            "encoder_ms",
        ),
        (
            f"sampler ms per clip (K={at['K']}, S={at['S']})",
            targets["sampler_ms"],
            at["sampler_ms"]["fast"],
            None,
            "sampler_ms",
        ),
        (
            f"end to end ms per frame (K={at['K']}, S={at['S']})",
            targets["ms_per_frame"],
            at["ms_per_frame"]["fast"],
            paper["ms_per_frame_k30_s5"],
            "ms_per_frame",
        ),
        ("peak memory GB, one clip", targets["peak_memory_gb"], peak, paper["peak_memory_gb"], "peak_memory_gb"),
    ]
    lines = []
    for name, target, ours, theirs, key in rows:
        ratio = None if ours is None or theirs is None else ours / theirs
        lines.append(
            f"| {name} | {label} | {fmt(target)} | {fmt(ours, 3)} | {fmt(theirs)} | {fmt(ratio, 4)} | "
            f"{met(figures['targets_met'][key])} |"
        )
    return lines


STREAMING_FILES = {"streaming.json": "paper geometry", "streaming-bundled.json": "bundled size"}


def streaming_target_row(label: str, streaming: dict) -> str:
    """One streamer run: its best mode's p99 against the target, with p50, p95, aten ops per frame and peak memory
    where the benchmark reports them."""
    total = streaming["ms_per_frame"].get("streamer, total")
    if not total:
        return f"| causal streamer, {label}: no mode ran | {streaming.get('dtype', '')} | | | | | |"
    mode = f"{streaming['primary_mode']}; " if streaming.get("primary_mode") else ""
    extra = [f"{mode}p50 {total['p50']:.2f}", f"p95 {total['p95']:.2f}"]
    if streaming.get("ops_per_frame") is not None:
        extra.append(f"{streaming['ops_per_frame']:,.0f} ops/frame")
    if streaming.get("peak_memory_gb") is not None:
        extra.append(f"peak {streaming['peak_memory_gb']:.2f} GB")
    return (
        f"| causal streamer p99 ms per frame, {label} (K={streaming['K']}, S={streaming['S']}; "
        f"{', '.join(extra)}) | {streaming['dtype']} | {streaming['target_p99_ms']} | {total['p99']:.2f} | - | - "
        f"| {met(streaming['targets_met']['p99_ms'])} |"
    )


def streaming_mode_lines(label: str, streaming: dict) -> list[str]:
    """bench_streaming.py's modes side by side (the previous streamer, the static step eager, captured, compiled)."""
    if not streaming.get("modes"):
        return []
    lines = [
        "",
        f"## Causal streamer by mode, {label} (K={streaming['K']}, S={streaming['S']}, {streaming['dtype']}; "
        f"best: {streaming.get('primary_mode')})",
        "",
        "| mode | p50 ms | p95 ms | p99 ms | setup s | aten ops / frame | CUDA kernels / frame | peak GB | "
        "max abs diff to eager |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for mode, row in streaming["modes"].items():
        if "error" in row:
            lines.append(f"| {mode} | failed: {row['error'][:200]} | | | | | | | |")
            continue
        ms, difference = row["ms_per_frame"], row.get("max_abs_difference_to_eager")
        difference = "-" if difference is None else f"{difference:.1e}"
        lines.append(
            f"| {mode} | {ms['p50']:.2f} | {ms['p95']:.2f} | {ms['p99']:.2f} | {row['setup_s']:.1f} | "
            f"{row['aten_ops_per_frame']:.0f} | {fmt(row.get('cuda_kernels_per_frame'), 0)} | "
            f"{fmt(row.get('peak_memory_gb'))} | {difference} |"
        )
    return lines


def target_lines(first) -> list[str]:
    lines = [
        "",
        "## Targets (one H100, bf16, K=30, S=5)",
        "",
        "| figure | path | target | ours | paper | ours / paper | |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for label, name in (("eager", "inference.json"), ("compiled", "inference-compile.json")):
        figures = first(name)
        if figures:
            lines += inference_target_rows(label, figures)
    for name, label in STREAMING_FILES.items():
        streaming = first(name)
        if streaming:
            lines.append(streaming_target_row(label, streaming))
    predict = first("predict.json") or {}
    for name, run in predict.get("runs", {}).items():
        if run.get("exit_code") == 0:
            video = run.get("video") or predict.get("video", "")
            lines.append(
                f"| gazeflow predict --no-overlay frames per second ({video}) | {name} | - | "
                f"{run['frames_per_second']:.1f} | 88 (Table method_time, K=30, S=5) | "
                f"{run['frames_per_second'] / 88:.2f} | |"
            )
        else:
            lines.append(
                f"| gazeflow predict --no-overlay ({run.get('video', '')}) | {name} | - | exit "
                f"{run.get('exit_code')} | | | |"
            )
    return lines


PIPELINE_TARGET_FPS = {
    ("bundled", "256x256"): 1000,
    ("bundled", "640x480"): 1000,
    ("paper", "256x256"): 400,
    ("paper", "640x480"): 300,
}
"""frames per second that gazeflow predict --no-overlay's path should reach on one H100 (model, video size)."""
PAPER_FPS = 88  # Table method_time: GazeFlow at K=30, S=5


def pipeline_lines(pipeline: dict | None) -> list[str]:
    """bench_pipeline.py --throughput: each model, size and path (serial, overlapped) side by side."""
    runs = ((pipeline or {}).get("throughput") or {}).get("runs")
    if not runs:
        return []
    figures = pipeline["throughput"]
    lines = [
        "",
        f"## Pipeline: gazeflow predict --no-overlay's path (bench_pipeline.py --throughput; "
        f"K={figures['K']}, S={figures['S']}, {figures['seconds']:g} s videos at 24 fps)",
        "",
        "| model | size | path | dtype | frames / s | target | / paper's 88 | ms / frame | stages s |",
        "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for run in runs:
        target = PIPELINE_TARGET_FPS.get((run["model"], run["size"]))
        stages = ", ".join(f"{name} {seconds:.2f}" for name, seconds in run.get("stages_s", {}).items())
        lines.append(
            f"| {run['model']} | {run['size']} | {run['path']} | {run['dtype']} | "
            f"{run['frames_per_second']:.0f} | {fmt(target)} | {run['frames_per_second'] / PAPER_FPS:.2f} | "
            f"{run['ms_per_frame']:.2f} | {stages} |"
        )
    return lines


def inference_table_lines(label: str, figures: dict) -> list[str]:
    """Table ks_grid and Table method_time of one inference run, and the fast path against the reference."""
    lines = []
    grid = figures.get("sampler_ms_grid") or {}
    if grid and figures.get("ks_grid_ratio_to_paper"):
        columns = list(grid[next(iter(grid))])
        lines += [
            "",
            f"## Table ks_grid, {label}: our end-to-end ms per 64-frame clip / the paper's",
            "",
            "| K \\ S | " + " | ".join(columns) + " |",
            "| --- |" + " ---: |" * len(columns),
        ]
        ratios = figures["ks_grid_ratio_to_paper"]
        for k, row in grid.items():
            cells = [
                f"{figures['encoder_ms']['fast'] + ms:.1f} ms ({ratios.get(k, {}).get(s, float('nan')):.4f})"
                for s, ms in row.items()
            ]
            lines.append(f"| {k} | " + " | ".join(cells) + " |")
    if figures.get("method_time_ours_ms_per_frame"):
        lines += [
            "",
            f"## Table method_time, {label} (ms per frame)",
            "",
            "| method | paper | ours | ours / paper |",
            "| --- | ---: | ---: | ---: |",
        ]
        for name, theirs in figures["paper"]["method_ms_per_frame"].items():
            ours = figures["method_time_ours_ms_per_frame"].get(name)
            ratio = None if ours is None else ours / theirs
            lines.append(f"| {name} | {theirs} | {fmt(ours, 3)} | {fmt(ratio, 4)} |")
    at = figures["at"]
    lines += [
        "",
        f"Fast vs reference ({label}, K={at['K']}, S={at['S']}): encoder "
        f"{figures['encoder_ms']['reference'] / figures['encoder_ms']['fast']:.1f}x, sampler "
        f"{at['sampler_ms']['reference'] / at['sampler_ms']['fast']:.1f}x, end to end "
        f"{at['ms_per_frame']['reference'] / at['ms_per_frame']['fast']:.1f}x; trajectories differ by "
        f"{at['max_abs_difference']:.1e}; GazeFlowModel.generate {figures['generate_ms_per_frame']:.3f} "
        f"ms per frame.",
    ]
    return lines


def train_lines(train: dict | None) -> list[str]:
    """bench_train.py's own report."""
    if not train or not train.get("report"):
        return []
    return [""] + train["report"].rstrip("\n").splitlines()


def tests_and_profile_lines(folders: list[Path]) -> list[str]:
    lines = []
    for folder in folders:
        counts = test_counts(folder, "tests.xml")
        if counts:
            lines += (
                [
                    "",
                    f"## tests/gpu: {counts['tests']} tests, {counts['failures'] + counts['errors']} failed, "
                    f"{counts['skipped']} skipped",
                ]
                + [f"- failed: `{name}`" for name in counts["failed"]]
                + [f"- skipped: {reason}" for reason in counts["skip_reasons"]]
            )
        full = test_counts(folder, "fulltests.xml")
        if full:
            lines += [
                "",
                f"## whole suite with CUDA visible: {full['tests']} tests, "
                f"{full['failures'] + full['errors']} failed, {full['skipped']} skipped",
            ]
    for folder in folders:
        for name in ("profile-inference.json", "profile-streaming.json"):
            figures = load(folder, name)
            if figures and figures.get("profile"):
                lines += [
                    "",
                    f"## Profile ({name[:-5]}): where the time goes",
                    "",
                    "| op | calls | device ms | CPU ms |",
                    "| --- | ---: | ---: | ---: |",
                ]
                lines += [
                    f"| `{row['name']}` | {row['calls']} | {fmt(row['device_ms'])} | {row['cpu_ms']:.2f} |"
                    for row in figures["profile"]
                ]
    return lines


def summary(folders: list[Path], output: Path) -> str:
    """One markdown page from the suite's output folders (one call of the device tool, or several merged)."""

    def first(name: str) -> dict | None:
        return next((figures for figures in (load(f, name) for f in folders) if figures), None)

    lines = header_lines(folders) + step_lines(folders) + target_lines(first)
    for name, label in STREAMING_FILES.items():
        lines += streaming_mode_lines(label, first(name) or {})
    lines += pipeline_lines(first("pipeline.json")) + train_lines(first("train.json"))
    for label, name in (("eager", "inference.json"), ("compiled", "inference-compile.json")):
        figures = first(name)
        if figures:
            lines += inference_table_lines(label, figures)
    lines += tests_and_profile_lines(folders)
    text = "\n".join(lines) + "\n"
    output.write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    pip = commands.add_parser("pip-commands")
    pip.add_argument("--stale-own", action="store_true", help="install this package from the tree, not its wheel")
    commands.add_parser("prepare-wheels")
    commands.add_parser("check-wheel-list")
    commands.add_parser("source-hash")
    for name in ("environment", "preflight", "predict", "prepare"):
        sub = commands.add_parser(name)
        sub.add_argument("out_dir", type=Path)
        sub.add_argument("--device", default="cuda")
        sub.add_argument("--tiny", action="store_true")
        sub.add_argument("--work", type=Path, default=None, help="(predict) where prepare left its inputs")
    commands.add_parser("missed-targets").add_argument("out_dir", type=Path)
    merge = commands.add_parser("summary")
    merge.add_argument("folders", type=Path, nargs="+")
    merge.add_argument("-o", "--output", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "pip-commands":
        for group, commands_ in pip_commands(args.stale_own).items():
            for command in commands_:
                print(f"{group}: " + " ".join(command))
        return 0
    if args.command == "prepare-wheels":
        return prepare_wheels()
    if args.command == "check-wheel-list":
        needed, problems = requirement_closure()
        print("the GPU image lacks: " + " ".join(sorted(needed)))
        for problem in problems:
            print(f"problem: {problem}")
        return 1 if problems else 0
    if args.command == "source-hash":
        print(source_hash())
        return 0
    if args.command == "environment":
        environment(args.out_dir, args.device)
        return 0
    if args.command == "preflight":
        return preflight(args.out_dir, args.device)
    if args.command == "predict":
        return predict_throughput(args.out_dir, args.device, args.tiny, args.work)
    if args.command == "prepare":
        return prepare(args.out_dir, args.tiny)
    if args.command == "missed-targets":
        print(" ".join(missed_targets(args.out_dir)))
        return 0
    summary(args.folders, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
