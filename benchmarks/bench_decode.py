"""Decoding and the CPU resize, side by side: what FFmpeg's threads, torchcodec, decoding videos side by side and the
processor's two resize precisions cost, and what the fast resize changes.

**Decoding** (the default): generated videos (``pipeline_paths.generated_frames``, written with
``data.video.write_video``: H.264, yuv420p) at each of ``--sizes`` decoded to RGB uint8 ``[H, W, 3]`` arrays by every
variant, alternating, ``--repeats`` times; prints the median ms per frame, wall and CPU (all threads): PyAV with
FFmpeg's threads off (one thread), slice threads, frame threads and both (``thread_type`` ``SLICE`` / ``FRAME`` /
``AUTO``, ``thread_count`` 0: FFmpeg's choice, one per core; swscale's RGB conversion on its default threads, one
per core, and on one thread), decoding alone without the RGB conversion, the command's ``iter_frames``, and
torchcodec's ``VideoDecoder`` on the CPU (and with ``--device cuda`` on NVDEC) where torchcodec is installed (else
the table says why not).

    python benchmarks/bench_decode.py                                   # 256x256, 640x480, 1920x1080
    python benchmarks/bench_decode.py --sizes 640x480 --frames 240 --repeats 5

**Side by side** (``--batch``): ``--videos`` videos of ``--batch-size`` decoded one after another (each with
FFmpeg's threads) against two and four at a time in threads (what a batch run could do beside the model).

**Resize** (``--resize``): the processor's resize of each size's frames to ``--resize-to`` on one torch thread, ms
per frame: ``resize_dtype="float32"`` (the default: uint8 -> float32, antialiased bilinear), ``"uint8"`` (torch's
uint8 kernel), and swscale in the decoder (``VideoFrame.reformat(S, S, "rgb24", interpolation=...)`` straight from
the decoded yuv420p frame, its RGB conversion included, against the float32 path's RGB conversion plus resize; and
the one copy between PyAV's RGB array and the processor's tensor, the stack of a batch's frames, alone);
with the largest and mean difference of each processed frame from the float32 path's, in grey levels (0..255).
``--trajectories``: also ``gazeflow predict --no-overlay``'s trajectories with the bundled model on the 640x480
video, both resize precisions (the model's default K and S): the largest and mean difference of the samples, in
pixels of the frame.

    python benchmarks/bench_decode.py --resize --trajectories --sizes 640x480 --threads 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from pipeline_paths import generated_video, trajectory_difference
from results import add_results_argument, write_section

THREAD_SETTINGS = {
    "PyAV, FFmpeg threads off": ("SLICE", 1),
    "PyAV, slice threads": ("SLICE", 0),
    "PyAV, frame threads": ("FRAME", 0),
    "PyAV, frame+slice threads (AUTO)": ("AUTO", 0),
}
"""PyAV's ``thread_type`` and ``thread_count`` (0: FFmpeg's choice) of each decoding variant."""
SWSCALE_FILTERS = ("BILINEAR", "AREA")


def pyav_decode(path: Path, thread_type: str, thread_count: int, rgb: bool = True, rgb_threads: int = 0) -> int:
    """Decode every frame (to an RGB array unless ``rgb`` is False, converted by swscale on ``rgb_threads`` threads,
    0: PyAV's default, one per core); the number of frames."""
    import av

    count = 0
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stream.thread_type, stream.thread_count = thread_type, thread_count
        for frame in container.decode(stream):
            if rgb:
                frame.to_ndarray(format="rgb24", threads=rgb_threads)
            count += 1
    return count


def torchcodec_decoder(device: str) -> tuple[Callable[[Path], int] | None, str]:
    """A decode function of torchcodec on ``device`` (``"cpu"`` or ``"cuda"``: NVDEC), or None and why not."""
    try:
        from torchcodec.decoders import VideoDecoder
    except Exception as err:  # not installed, or its libraries (FFmpeg, CUDA) do not load here
        return None, f"torchcodec unavailable: {' '.join(str(err).split())[:160]}"

    def decode(path: Path) -> int:
        decoder = VideoDecoder(str(path), device=device, dimension_order="NHWC", num_ffmpeg_threads=0)
        count, total = 0, len(decoder)
        for start in range(0, total, 32):
            count += decoder.get_frames_in_range(start, min(total, start + 32)).data.shape[0]
        return count

    return decode, ""


def side_by_side(variants: dict[str, Callable[[], int]], repeats: int) -> tuple[dict[str, float], dict[str, float]]:
    """Median ms per frame of each variant (its function returns the frames it did), alternating the order: wall
    time, and CPU time (all the process's threads: FFmpeg's included; on a shared machine the CPU time is the
    steadier figure, the wall time what a reader waits)."""
    wall: dict[str, list[float]] = {name: [] for name in variants}
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    for run in variants.values():  # a warm-up: libraries loaded, files in the page cache
        run()
    for repeat in range(repeats):
        for name in list(variants) if repeat % 2 == 0 else list(reversed(variants)):
            started, cpu_started = time.perf_counter(), time.process_time()
            count = variants[name]()
            wall[name].append(1000 * (time.perf_counter() - started) / count)
            cpu[name].append(1000 * (time.process_time() - cpu_started) / count)
    return (
        {name: statistics.median(values) for name, values in wall.items()},
        {name: statistics.median(values) for name, values in cpu.items()},
    )


def decoding_variants(video: Path, codecs: dict) -> dict[str, Callable[[], int]]:
    """The decoders measured on ``video``: PyAV's thread settings, decoding alone, ``iter_frames``, torchcodec."""
    from transformers_gazeflow.data.video import iter_frames

    variants: dict[str, Callable[[], int]] = {
        name: (lambda t=t, c=c: pyav_decode(video, t, c)) for name, (t, c) in THREAD_SETTINGS.items()
    }
    variants["PyAV AUTO, RGB conversion on one thread"] = lambda: pyav_decode(video, "AUTO", 0, rgb_threads=1)
    variants["PyAV AUTO, decoding alone (no RGB conversion)"] = lambda: pyav_decode(video, "AUTO", 0, rgb=False)
    variants["iter_frames (the command's)"] = lambda: sum(1 for _ in iter_frames(video))
    for device, (decode, _) in codecs.items():
        if decode is not None:
            variants[f"torchcodec ({device})"] = lambda d=decode: d(video)
    return variants


def decoding(args, videos: dict[str, Path]) -> dict:
    """ms per frame of every decoding variant at each size."""
    codecs = {"cpu": torchcodec_decoder("cpu")}
    if args.device.startswith("cuda"):
        codecs["cuda"] = torchcodec_decoder("cuda")
    unavailable = sorted({why for _, why in codecs.values() if why})
    rows, cpu_rows = {}, {}
    for size, video in videos.items():
        rows[size], cpu_rows[size] = side_by_side(decoding_variants(video, codecs), args.repeats)
        print(f"  {size}: " + ", ".join(f"{k} {v:.2f}" for k, v in rows[size].items()), flush=True)
    names = list(dict.fromkeys(name for row in rows.values() for name in row))
    print(f"\nms per frame (median of {args.repeats}), {os.cpu_count()} CPU cores, load {os.getloadavg()[0]:.1f}")
    print("| decoder | " + " | ".join(f"{size} wall | {size} CPU" for size in rows) + " |")
    print("| --- |" + " ---: | ---: |" * len(rows))
    for name in names:
        cells = [f"{rows[s][name]:.2f} | {cpu_rows[s][name]:.2f}" if name in rows[s] else "- | -" for s in rows]
        print(f"| {name} | " + " | ".join(cells) + " |")
    for why in unavailable:
        print(f"\n{why}")
    return {
        "frames": args.frames,
        "cores": os.cpu_count(),
        "ms_per_frame": rows,
        "cpu_ms_per_frame": cpu_rows,
        "unavailable": unavailable,
    }


def decode_in_threads(paths: list[Path], workers: int) -> int:
    """Decode ``paths`` with ``workers`` threads, each taking the next video (FFmpeg's threads on in each)."""
    pending, counts, lock = list(paths), [], threading.Lock()

    def work() -> None:
        while True:
            with lock:
                if not pending:
                    return
                path = pending.pop()
            counts.append(pyav_decode(path, "AUTO", 0))

    threads = [threading.Thread(target=work) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts)


def batch_decoding(args, work: Path) -> dict:
    """``--batch``: several videos one after another against two and four at a time (one file decoded ``--videos``
    times: from the page cache, as different files of one size would be)."""
    width, height = (int(v) for v in args.batch_size.lower().split("x"))
    paths = [generated_video(work, args.frames, width, height, args.fps)] * args.videos
    variants = {f"{n} at a time": (lambda n=n: decode_in_threads(paths, n)) for n in (1, 2, 4)}
    medians, cpu = side_by_side(variants, args.repeats)
    print(f"\n{args.videos} videos of {args.batch_size}, {args.frames} frames each, {os.cpu_count()} CPU cores")
    print("| videos decoded | wall ms per frame | against one at a time | CPU ms per frame |")
    print("| --- | ---: | ---: | ---: |")
    for name, value in medians.items():
        print(f"| {name} | {value:.2f} | {value / medians['1 at a time']:.2f}x | {cpu[name]:.2f} |")
    return {
        "size": args.batch_size,
        "videos": args.videos,
        "frames": args.frames,
        "ms_per_frame": medians,
        "cpu_ms_per_frame": cpu,
    }


def grey_levels(processed: torch.Tensor, processor) -> np.ndarray:
    """Processed frames ``[n, 3, S, S]`` back on the 0..255 scale, ``[n, S, S, 3]`` float64 (no rounding)."""
    mean = torch.tensor(processor.image_mean, dtype=torch.float64).view(3, 1, 1)
    std = torch.tensor(processor.image_std, dtype=torch.float64).view(3, 1, 1)
    return ((processed.double() * std + mean) * 255).permute(0, 2, 3, 1).numpy()


def swscale(decoded: list, side: int, interpolation: str) -> list[np.ndarray]:
    """Decoded frames resized to ``side x side`` RGB by swscale (``VideoFrame.reformat``), from their own format."""
    return [frame.reformat(side, side, "rgb24", interpolation=interpolation).to_ndarray() for frame in decoded]


def resize_variants(decoded: list, rgb: list[np.ndarray], exact, fast) -> dict[str, Callable[[], int]]:
    """The resize paths measured on the same frames (the pipeline's own ``process_frames`` for the processor's)."""
    from transformers_gazeflow.generation.windowed import process_frames

    cpu, side = torch.device("cpu"), exact.size
    step = fast.host_chunk_frames(rgb[0].shape)  # the uint8 path's stacks, as process_frames makes them
    starts = range(0, len(rgb), step)
    return {
        "RGB conversion alone (to_ndarray)": lambda: len([f.to_ndarray(format="rgb24") for f in decoded]),
        "the batch's one copy alone (np.stack)": lambda: sum(len(np.stack(rgb[i : i + step])) for i in starts),
        "float32 resize (the default)": lambda: len(process_frames(exact, rgb, cpu)),
        "uint8 resize": lambda: len(process_frames(fast, rgb, cpu)),
        **{f"swscale {n}, from yuv420p": (lambda n=n: len(swscale(decoded, side, n))) for n in SWSCALE_FILTERS},
    }


def resize_paths(args, videos: dict[str, Path]) -> dict:
    """``--resize``: ms per frame of each resize path, and its difference from the float32 path's frames."""
    import av

    from transformers_gazeflow.data.processing import GazeFlowVideoProcessor
    from transformers_gazeflow.generation.windowed import process_frames

    side = args.resize_to
    exact, fast = GazeFlowVideoProcessor(size=side), GazeFlowVideoProcessor(size=side, resize_dtype="uint8")
    cpu = torch.device("cpu")
    rows = {}
    for size, video in videos.items():
        with av.open(str(video)) as container:
            decoded = [frame for _, frame in zip(range(args.resize_frames), container.decode(video=0))]
        rgb = [frame.to_ndarray(format="rgb24") for frame in decoded]
        variants = resize_variants(decoded, rgb, exact, fast)
        medians, cpu_ms = side_by_side(variants, args.repeats)
        reference = grey_levels(process_frames(exact, rgb, cpu), exact)
        outputs = {"uint8 resize": grey_levels(process_frames(fast, rgb, cpu), fast)}
        outputs.update(
            {
                f"swscale {n}, from yuv420p": np.stack(swscale(decoded, side, n)).astype(np.float64)
                for n in SWSCALE_FILTERS
            }
        )
        differences = {
            name: {"max": float(np.abs(out - reference).max()), "mean": float(np.abs(out - reference).mean())}
            for name, out in outputs.items()
        }
        rows[size] = {"ms_per_frame": medians, "cpu_ms_per_frame": cpu_ms, "grey_level_difference": differences}
        print(f"  {size}: " + ", ".join(f"{k} {v:.3f}" for k, v in medians.items()), flush=True)
    print(f"\nresize to {side}x{side}, {args.resize_frames} frames, torch threads {torch.get_num_threads()}")
    print("| size | path | wall ms per frame | CPU ms per frame | largest difference (grey levels) | mean difference |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for size, row in rows.items():
        for name, value in row["ms_per_frame"].items():
            diff = row["grey_level_difference"].get(name)
            cells = f"{diff['max']:.2f} | {diff['mean']:.3f}" if diff else "- | -"
            print(f"| {size} | {name} | {value:.3f} | {row['cpu_ms_per_frame'][name]:.3f} | {cells} |")
    return {"resize_to": side, "frames": args.resize_frames, "sizes": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=["256x256", "640x480", "1920x1080"], help="WIDTHxHEIGHT")
    parser.add_argument("--frames", type=int, default=120, help="frames per generated video")
    parser.add_argument("--fps", type=float, default=24.0)
    parser.add_argument("--repeats", type=int, default=3, help="runs of each variant (the median is printed)")
    parser.add_argument("--device", default="cpu", help="cuda: also torchcodec on NVDEC")
    parser.add_argument("--batch", action="store_true", help="also: videos decoded one after another or side by side")
    parser.add_argument("--batch-size", default="256x256", help="WIDTHxHEIGHT of the --batch videos")
    parser.add_argument("--videos", type=int, default=4, help="videos of the --batch run")
    parser.add_argument("--resize", action="store_true", help="the resize paths instead of the decoders")
    parser.add_argument("--resize-to", type=int, default=64, help="side of the --resize output (the bundled model's)")
    parser.add_argument("--resize-frames", type=int, default=32, help="frames of each --resize measurement")
    parser.add_argument("--trajectories", action="store_true", help="with --resize: the bundled model's trajectories")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (FFmpeg's are its own)")
    parser.add_argument("--workdir", default=None, help="where the videos go (default: a temp folder)")
    parser.add_argument("--json", default=None, help="write the figures here too")
    add_results_argument(parser)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    figures: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.workdir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        sizes = {size: [int(v) for v in size.lower().split("x")] for size in args.sizes}
        videos = {size: generated_video(work, args.frames, w, h, args.fps) for size, (w, h) in sizes.items()}
        if args.resize:
            figures["resize"] = resize_paths(args, videos)
            if args.trajectories:
                video = generated_video(work, args.frames, 640, 480, args.fps)
                figures["resize-trajectories"] = trajectory_difference(work, video)
        else:
            figures["decode"] = decoding(args, videos)
            if args.batch:
                figures["decode-batch"] = batch_decoding(args, work)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))
    from pipeline_paths import measured_model

    for section, section_figures in figures.items():
        models = [measured_model("bundled")] if section == "resize-trajectories" else []
        write_section(args.results_dir, "bench_decode", section, section_figures, models, args.device)


if __name__ == "__main__":
    main()
