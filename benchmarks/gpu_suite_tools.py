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
import sys
from pathlib import Path

from gpu_predict import predict_throughput, prepare
from gpu_preflight import environment, preflight
from gpu_summary import missed_targets, summary
from gpu_wheels import pip_commands, prepare_wheels, requirement_closure, source_hash


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
