"""The long profile of the commands' fuzz suite (``tests/test_fuzz_commands.py``): the same properties as CI, with
many more examples and a random seed (printed, so that a failure can be replayed).

    python benchmarks/fuzz_commands.py                  # 200 examples per property, a random seed
    python benchmarks/fuzz_commands.py --examples 1000 --seed 12345

CI runs a bounded, derandomised number of examples per property; this script is for a machine that can spend an
hour. A failure prints the hypothesis example (and its reproduction blob) like any pytest failure.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=200, help="hypothesis examples per property")
    parser.add_argument("--seed", type=int, default=None, help="the hypothesis seed (default: a random one)")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (e.g. -k interface)")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    print(f"fuzz_commands: {args.examples} examples per property, seed {seed}", flush=True)
    env = dict(os.environ, GAZEFLOW_FUZZ_EXAMPLES=str(args.examples), GAZEFLOW_FUZZ_SEED=str(seed))
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_fuzz_commands.py"]
    return subprocess.call([*command, f"--hypothesis-seed={seed}", *args.pytest_args], cwd=REPO, env=env)


if __name__ == "__main__":
    sys.exit(main())
