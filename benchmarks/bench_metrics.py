"""Benchmark: the full evaluation protocol on an EGTEA-sized synthetic set (docs/benchmarks.md, "Metrics protocol").

2,021 clips of 64 frames at 640x480, K=50 sampled trajectories per clip, every protocol frame a fixation (the
worst case: 2,021 x 8 scored frames), streamed clip by clip through ``GazeEvaluator`` (maps rendered, scored and
dropped), then the aggregation. Prints the wall time, the CPU time and the peak resident memory.

    python benchmarks/bench_metrics.py                 # the target: under 60 s and 2 GB on 2 cores
    python benchmarks/bench_metrics.py --clips 200     # a quick look
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np
import torch
from results import add_results_argument, write_section

from transformers_gazeflow.metrics import GazeEvaluator


def synthetic_clips(num_clips: int, num_samples: int, width: int, height: int, fixation_share: float, seed: int):
    """Yield (ground truth, K trajectories) per clip: human gaze as a clipped random walk, samples around it."""
    rng = np.random.default_rng(seed)
    for i in range(num_clips):
        gaze = np.clip(0.5 + np.cumsum(rng.normal(0, 0.01, size=(64, 2)), axis=0), 0.02, 0.98)
        gaze_type = np.where(rng.random(64) < fixation_share, 1, 2).astype(np.int8)
        gaze_type[np.linspace(0, 63, 8).astype(int)] = np.where(rng.random(8) < fixation_share, 1, 2)
        gt = {
            "clip_id": f"clip{i:05d}",
            "gaze": gaze,
            "gaze_type": gaze_type,
            "valid": np.ones(64, bool),
            "width": width,
            "height": height,
        }
        offset = rng.normal(0, 0.05, size=(num_samples, 1, 2))
        traj = np.clip(gaze[None] + offset + rng.normal(0, 0.01, size=(num_samples, 64, 2)), 0, 1)
        yield gt, traj


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clips", type=int, default=2021)
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--height", type=int, default=480)
    parser.add_argument("--fixation-share", type=float, default=1.0, help="share of fixation frames (1.0: all scored)")
    parser.add_argument("--protocol", choices=["paper", "glc"], default="paper")
    parser.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    parser.add_argument("--seed", type=int, default=0)
    add_results_argument(parser)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    ev = GazeEvaluator(protocol=args.protocol)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    for gt, traj in synthetic_clips(args.clips, args.samples, args.width, args.height, args.fixation_share, args.seed):
        ev.add(gt, traj)
    result = ev.compute()
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    m = result.metrics
    print(
        f"protocol={args.protocol} clips={args.clips} frames={int(m['num_frames'])} K={args.samples} "
        f"maps={args.width}x{args.height} threads={torch.get_num_threads()}"
    )
    print(f"time: {wall:.1f} s wall, {cpu:.1f} s CPU ({1000 * wall / args.clips:.1f} ms per clip)")
    print(
        f"peak memory (RSS): {peak_rss:.0f} MB ({peak_rss - base_rss:.0f} MB over the {base_rss:.0f} MB after imports)"
    )
    print("metrics: " + ", ".join(f"{k}={v:.4g}" for k, v in m.items()))
    figures = {
        "protocol": args.protocol,
        "clips": args.clips,
        "samples": args.samples,
        "size": f"{args.width}x{args.height}",
        "wall_s": wall,
        "cpu_s": cpu,
        "peak_rss_mb": peak_rss,
        "rss_after_imports_mb": base_rss,
        "metrics": {name: float(value) for name, value in m.items()},
    }
    write_section(args.results_dir, "bench_metrics", args.protocol, figures, [])


if __name__ == "__main__":
    main()
