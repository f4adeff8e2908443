"""Data-layer throughput in one run: gaze parsing (BeGaze, Ego4D CSV) and window vs full-video decoding.

    python benchmarks/bench_data.py                      # 100k-row files, a generated 640x480 video
    python benchmarks/bench_data.py --video clip.mp4     # decode rates on your own video

Prints the BeGaze parse rate (rows/s on a 100k-row file; target: under 1 s), the Ego4D CSV parse rate, and the
window decode rate (64 frames from the middle of the video, frames/s) next to the full-video decode rate.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from results import add_results_argument, write_section

from transformers_gazeflow.data.ego4d_format import parse_ego4d_gaze
from transformers_gazeflow.data.egtea_format import begaze_lines, parse_begaze
from transformers_gazeflow.data.video import decode_frames, iter_frames, probe_video, write_video

EGO4D_HEADER = "component_idx,component_timestamp_s,canonical_timestamp_s,world_index,confidence,norm_pos_x,norm_pos_y"


def write_begaze_file(path: Path, rows: int, fmt: int, seed: int = 0) -> Path:
    """A synthetic BeGaze export of ``rows`` samples (30 Hz samples on the 24 fps frame axis)."""
    rng = np.random.default_rng(seed)
    px, py = rng.uniform(-20, 1300, rows), rng.uniform(-20, 980, rows)
    frames = np.arange(rows) * 24 // 30
    events = rng.choice(["Fixation", "Saccade", "Blink"], rows, p=[0.8, 0.15, 0.05])
    samples = ((i * 33, x, y, int(f), e) for i, (x, y, f, e) in enumerate(zip(px, py, frames, events)))
    path.write_text("\n".join(begaze_lines(samples, fmt=fmt)) + "\n")
    return path


def write_ego4d_file(path: Path, rows: int, seed: int = 0) -> Path:
    """A synthetic Ego4D gaze CSV at 250 Hz."""
    rng = np.random.default_rng(seed)
    t = np.arange(rows) / 250
    x, y = rng.uniform(0, 1, rows), rng.uniform(0, 1, rows)
    body = [f"{i},{ti:.6f},{ti:.6f},{i // 8},0.9,{xi:.6f},{yi:.6f}" for i, (ti, xi, yi) in enumerate(zip(t, x, y))]
    path.write_text("\n".join([EGO4D_HEADER] + body) + "\n")
    return path


def best_of(repeats: int, fn) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def generated_video(path: Path, frames: int, width: int, height: int, fps: int = 24) -> Path:
    rng = np.random.default_rng(0)
    base = rng.integers(0, 255, (height, width, 3), dtype=np.uint8)
    return write_video(path, (np.roll(base, 4 * i, axis=1) for i in range(frames)), fps=fps)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000, help="rows of each gaze file (default 100k)")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats; the best is reported")
    parser.add_argument("--video", type=Path, default=None, help="video for the decode rates (default: generated)")
    parser.add_argument("--video-frames", type=int, default=480, help="frames of the generated video")
    parser.add_argument("--window", type=int, default=64, help="frames in the decoded window")
    add_results_argument(parser)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        figures = {"rows": args.rows, "repeats": args.repeats, "parsing": gaze_parsing(args, tmp)}
        figures["decoding"] = video_decoding(args, tmp)
    write_section(args.results_dir, "bench_data", "default", figures, [])


def gaze_parsing(args, tmp: Path) -> list[dict]:
    """Seconds (best of ``--repeats``) to parse generated BeGaze files (formats 1 and 2) and an Ego4D gaze CSV."""
    print(f"== gaze parsing ({args.rows:,} rows, best of {args.repeats}) ==")
    found = []
    for fmt in (1, 2):
        path = write_begaze_file(tmp / f"begaze{fmt}.txt", args.rows, fmt)
        seconds = best_of(args.repeats, lambda path=path: parse_begaze(path))
        track = parse_begaze(path)
        verdict = "OK" if seconds < 1.0 else "SLOWER than the 1 s target"
        print(
            f"BeGaze format {fmt}: {seconds:.3f} s, {args.rows / seconds:,.0f} rows/s "
            f"({len(track):,} frames; target < 1 s: {verdict})"
        )
        found.append({"file": f"BeGaze format {fmt}", "seconds": seconds, "frames": len(track)})
    path = write_ego4d_file(tmp / "ego4d.csv", args.rows)
    frames = int(args.rows / 250 * 30)
    seconds = best_of(args.repeats, lambda: parse_ego4d_gaze(path, frames, 30.0))
    print(f"Ego4D gaze CSV: {seconds:.3f} s, {args.rows / seconds:,.0f} rows/s (labels {frames:,} frames at 30 fps)")
    found.append({"file": "Ego4D gaze CSV", "seconds": seconds, "frames": frames})
    return found


def video_decoding(args, tmp: Path) -> dict:
    """A window of ``--window`` frames from the middle of the video against decoding the whole video."""
    video = args.video or generated_video(tmp / "video.mp4", args.video_frames, 640, 480)
    info = probe_video(video)
    print(
        f"\n== video decoding ({video.name if args.video else 'generated'}: {info.width}x{info.height}, "
        f"{info.num_frames} frames at {info.fps:g} fps) =="
    )
    window = min(args.window, info.num_frames)
    start = max(0, (info.num_frames - window) // 2)
    window_s = [best_of(1, lambda: decode_frames(video, start, window)) for _ in range(args.repeats)]
    full_s = best_of(args.repeats, lambda: sum(1 for _ in iter_frames(video)))
    print(
        f"window of {window} frames from frame {start}: {min(window_s) * 1000:.1f} ms, "
        f"{window / min(window_s):,.0f} frames/s (median {window / statistics.median(window_s):,.0f})"
    )
    print(f"full video, {info.num_frames} frames: {full_s:.3f} s, {info.num_frames / full_s:,.0f} frames/s")
    print(f"window decode costs {min(window_s) / full_s:.1%} of decoding the whole video")
    return {
        "video": str(args.video) if args.video else f"generated {info.width}x{info.height}",
        "frames": info.num_frames,
        "window": window,
        "window_start": start,
        "window_seconds": min(window_s),
        "full_seconds": full_s,
    }


if __name__ == "__main__":
    main()
