"""The GPU suite's record of where it ran (``environment``: device, versions, commit) and its pre-flight (every
import, the installed versions against the carried wheels' requirements, a bf16 matmul and flash attention on CUDA).
Run through ``gpu_suite_tools.py``."""

from __future__ import annotations

import importlib
import importlib.metadata as metadata
import importlib.util
import json
import os
import shutil
import sys
import time
from pathlib import Path

from gpu_wheels import PACKAGE, SOURCE_RECORD, source_hash, wheel_list
from results import git_source


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
    commit = git_source()
    if commit is None and SOURCE_RECORD.exists():  # the device machine gets the tree without .git
        commit = json.loads(SOURCE_RECORD.read_text())
        commit["tree_matches_record"] = commit.get("source_hash") == tree
    info["source"] = {"tree_hash": tree, **(commit or {})}
    (out_dir / "environment.json").write_text(json.dumps(info, indent=1))
    print(json.dumps(info, indent=1))
    return info


def import_module(name: str):
    """Import ``name``; pysaliency only located and its version read: the metric tests import it through their own
    shims (``tests/conftest.py``: no ``pkg_resources`` in setuptools >= 81, no ``np.trapz`` in numpy >= 2.4), and
    the benchmarks do not import the tests."""
    if name != "pysaliency":
        return importlib.import_module(name)
    spec = importlib.util.find_spec(name)
    if spec is None:
        raise ImportError(f"{name} is not installed")
    return type("Located", (), {"__version__": metadata.version(name), "__file__": spec.origin})


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
            imported = import_module(module)
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
