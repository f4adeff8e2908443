"""Benchmark of how fast the ``gazeflow`` command answers: ``--help``, ``--version``, an argument error, and the
import of the package, each in a fresh process, measured side by side in one run (median and best of ``--repeats``).

    python benchmarks/bench_startup.py                # 5 repeats
    python benchmarks/bench_startup.py --repeats 10 --with-train-help

Targets: ``gazeflow --help`` and argument errors under 1.5 s on the 2-core development machine. For
scale, the run also times ``import torch`` and ``import transformers_gazeflow`` followed by
``from transformers import pipeline`` (what a real prediction pays before it starts), which the command now pays only
after every argument has been checked.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from results import add_results_argument, write_section

REPO = Path(__file__).resolve().parents[1]


def command() -> list[str]:
    """The installed console script next to this Python, else the module."""
    script = shutil.which("gazeflow", path=os.path.dirname(sys.executable))
    return [script] if script else [sys.executable, "-m", "transformers_gazeflow.commands.cli"]


def timed(argv: list[str], cwd: str, expect: int) -> float:
    started = time.perf_counter()
    result = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if result.returncode != expect:
        raise SystemExit(f"{' '.join(argv)} exited with {result.returncode}, expected {expect}:\n{result.stderr}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--with-train-help", action="store_true", help="also time examples/train.py --help")
    add_results_argument(parser)
    args = parser.parse_args()
    gazeflow = command()
    python = [sys.executable, "-c"]
    cases = [
        ("gazeflow --help", gazeflow + ["--help"], 0),
        ("gazeflow predict --help", gazeflow + ["predict", "--help"], 0),
        ("gazeflow --version", gazeflow + ["--version"], 0),
        (
            "gazeflow predict v.mp4 -o out --num-samples 0 (argument error)",
            gazeflow + ["predict", "v.mp4", "-o", "out", "--num-samples", "0"],
            2,
        ),
        (
            "gazeflow predict v.mp4 -o out --device gpu (argument error)",
            gazeflow + ["predict", "v.mp4", "-o", "out", "--device", "gpu"],
            2,
        ),
        ("gazeflow predict missing.mp4 -o out (input error)", gazeflow + ["predict", "missing.mp4", "-o", "out"], 1),
        ("python -c 'import transformers_gazeflow'", python + ["import transformers_gazeflow"], 0),
        ("python -c 'import torch' (for scale)", python + ["import torch"], 0),
        (
            "python -c 'import transformers_gazeflow; from transformers import pipeline' (what a run pays)",
            python + ["import transformers_gazeflow; from transformers import pipeline"],
            0,
        ),
    ]
    if args.with_train_help:
        cases.append(
            ("python examples/train.py --help", [sys.executable, str(REPO / "examples" / "train.py"), "--help"], 0)
        )
    times: dict[str, list[float]] = {name: [] for name, _, _ in cases}
    with tempfile.TemporaryDirectory() as cwd:
        for _ in range(args.repeats):  # interleaved, so that the machine's load affects every case alike
            for name, argv, expect in cases:
                times[name].append(timed(argv, cwd, expect))
    print(
        f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.1f}, {args.repeats} repeats, command: {' '.join(gazeflow)}"
    )
    print("| what | median s | best s |")
    print("| --- | ---: | ---: |")
    for name, values in times.items():
        print(f"| {name} | {statistics.median(values):.2f} | {min(values):.2f} |")
    figures = {"repeats": args.repeats, "command": " ".join(gazeflow), "seconds": times}
    write_section(args.results_dir, "bench_startup", "default", figures, [])


if __name__ == "__main__":
    main()
