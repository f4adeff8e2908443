"""Benchmarks of the ``gazeflow predict`` command: what the overlay costs per frame, and memory on long videos.

**Overlay cost** (the default, ``--sizes``): for each frame size, a generated video (a moving bright target over a
drifting gradient, numpy only, written with ``data.video.write_video``) goes through the command's code path
(``runner.GazePredictor.predict``: decode -> processor -> encoder -> sampler -> blend -> CSV, plus the overlay:
heatmap + samples + trail drawn, H.264 in a background thread) with the overlay and with ``--no-overlay``,
alternating, ``--repeats`` times; it prints the median wall-clock and CPU ms per frame of each (CPU: all the process's
threads, so it does not depend on whether a free core ran the overlay thread), side by side, and the overlay's share.
It also times the overlay's two parts alone on the same frames (drawing one frame; encoding one frame).

    python benchmarks/bench_pipeline.py                                  # 256x192, 640x360, 1280x720; bundled model
    python benchmarks/bench_pipeline.py --sizes 1280x720 --frames 96 --repeats 5 --threads 1
    python benchmarks/bench_pipeline.py --model tiny                     # a tiny random GazeFlow instead

**Memory** (``--minutes``): the same code path on long videos while a thread samples the process's resident memory
(RSS, from ``/proc/self/statm``) every 0.1 s. Memory is flat when the 10-minute video peaks where the short one does
and RSS does not climb between the first and the last quarter of the run.

    python benchmarks/bench_pipeline.py --minutes 1 10 --size 128x96 --model tiny

The model is the bundled default (what ``gazeflow predict`` uses without ``--model``), a folder, or ``tiny``
(``GazeFlowConfig.tiny()``, 32x32 frames, 8-frame windows: then the figures measure the pipeline's own costs).

Three more runs compare the command's path as it runs now ("overlapped": frames decoded in a background thread,
eight windows encoded per call, preprocessing a batch at a time on the model's device, on CUDA the weights in
bf16 and each window's sampling steps replayed as a CUDA graph) with the serial path it replaced ("serial": one
window at a time, frames read in the model's loop, fp32, eager sampling), side by side in one run:

**Ops per output frame** (``--ops``, CPU): aten ops dispatched per output frame of ``gazeflow predict
--no-overlay`` with the bundled model at K=30, S=5 on a generated 256x256 video (``torch.profiler`` over
``--ops-frames`` frames): all aten ops (views and allocations included), and those that are not views or
allocations (an upper bound on a GPU's kernel launches); then per stage: the encoder per window (transformers' V-JEPA 2
attention against the fused one), the condition per window, one velocity-network call, preprocessing per frame.

    python benchmarks/bench_pipeline.py --ops --threads 2 --json ops.json

**Against decoding alone** (``--decode-ratio``): ms per frame of the command's path at 640x480 with K=1, S=1 (the
model's cost near zero) against decoding the same video alone (``iter_frames``), alternating, median of
``--repeats``.

    python benchmarks/bench_pipeline.py --decode-ratio --threads 2 --repeats 3 --json ratio.json

**Frames per second** (``--throughput``, for a GPU): ``gazeflow predict --no-overlay``'s path
(``GazePredictor.predict``) on generated videos of ``--seconds`` seconds at each of ``--throughput-sizes``, with
the bundled model and a random model of the paper's geometry (ViT-L, 64-frame windows, 256 px), K=30, S=5, serial
and overlapped; each predictor first runs a short warm-up video (CUDA graph capture, cuDNN's autotuning). Prints
frames per second and the stage times of ``summary.json``.

    python benchmarks/bench_pipeline.py --throughput --device cuda --json throughput.json
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import torch

PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_mb() -> float:
    """Resident memory of this process in MiB (Linux ``/proc/self/statm``)."""
    with open("/proc/self/statm", encoding="ascii") as handle:
        return int(handle.read().split()[1]) * PAGE / 2**20


class MemorySampler(threading.Thread):
    """Samples RSS every ``interval`` seconds until stopped."""

    def __init__(self, interval: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.interval, self.samples = interval, []
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.samples.append(rss_mb())
            self._stop_event.wait(self.interval)

    def stop(self) -> list[float]:
        self._stop_event.set()
        self.join()
        return self.samples


def generated_frames(num_frames: int, width: int, height: int, fps: float):
    """A bright disc moving on a Lissajous path over a slowly drifting colour gradient."""
    ys, xs = np.mgrid[0:height, 0:width].astype(np.float32)
    for t in range(num_frames):
        seconds = t / fps
        base = (xs / width * 120 + ys / height * 60 + 40 * np.sin(0.2 * seconds)).astype(np.float32)
        cx = width * (0.5 + 0.35 * np.sin(0.7 * seconds))
        cy = height * (0.5 + 0.3 * np.sin(1.1 * seconds + 0.5))
        disc = ((xs - cx) ** 2 + (ys - cy) ** 2 < (0.06 * min(width, height)) ** 2) * 255.0
        frame = np.clip(np.stack([base + disc, base * 0.8 + disc, 200 - base * 0.5 + disc * 0.2], -1), 0, 255)
        yield frame.astype(np.uint8)


def tiny_model(folder: Path) -> Path:
    from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
    from transformers_gazeflow.data.processing import GazeFlowVideoProcessor

    torch.manual_seed(0)
    GazeFlowModel(GazeFlowConfig.tiny()).save_pretrained(folder)
    GazeFlowVideoProcessor(size=32).save_pretrained(folder)
    return folder


def run(video: Path, model: str, out_dir: Path, overlay: bool, num_samples: int | None, num_steps: int | None) -> dict:
    from transformers_gazeflow.commands.predict import predict_video

    sampler = MemorySampler()
    before = rss_mb()
    sampler.start()
    started = time.perf_counter()
    summary = predict_video(
        video, out_dir, model=model, overlay=overlay, num_samples=num_samples, num_steps=num_steps, quiet=True
    )
    wall = time.perf_counter() - started
    samples = np.array(sampler.stop())
    quarter = max(1, len(samples) // 4)
    return {
        "frames": summary["frames"],
        "wall_s": wall,
        "ms_per_frame": 1000 * wall / summary["frames"],
        "predict_ms_per_frame": summary["timings"]["ms_per_frame"],
        "rss_before_mb": before,
        "rss_peak_mb": float(samples.max()),
        "rss_first_quarter_mb": float(samples[:quarter].max()),
        "rss_last_quarter_mb": float(samples[-quarter:].max()),
    }


def overlay_costs(args, work: Path, model: str | None) -> None:
    import statistics

    from transformers_gazeflow.commands.predict import GazePredictor, PredictOptions, render_overlay_frame
    from transformers_gazeflow.data.video import iter_frames, write_video
    from transformers_gazeflow.metrics.heatmaps import heatmap_sigma_px
    from transformers_gazeflow.outputs.overlay import OverlayRenderer, OverlayVideoWriter

    predictor = GazePredictor(model)
    options = dict(sampling=dict(num_samples=args.num_samples, num_steps=args.num_steps), quiet=True)
    rows = []
    for size in args.sizes:
        width, height = (int(v) for v in size.lower().split("x"))
        video = work / f"generated_{width}x{height}.mp4"
        write_video(video, generated_frames(args.frames, width, height, args.fps), fps=args.fps)
        times: dict[bool, list[float]] = {True: [], False: []}
        cpu: dict[bool, list[float]] = {True: [], False: []}
        for repeat in range(args.repeats):
            for overlay in (True, False) if repeat % 2 == 0 else (False, True):  # alternate the order
                started, cpu_started = time.perf_counter(), time.process_time()
                summary = predictor.predict(
                    video, work / f"out_{size}_{overlay}", PredictOptions(overlay=overlay, **options)
                )
                times[overlay].append(1000 * (time.perf_counter() - started) / summary["frames"])
                cpu[overlay].append(1000 * (time.process_time() - cpu_started) / summary["frames"])
        # the overlay's parts alone, on the same frames and predictions
        frames = list(iter_frames(video))
        samples = summary_samples(work / f"out_{size}_True" / "gaze.csv", len(frames))
        renderer = OverlayRenderer()
        sigma = heatmap_sigma_px(width)
        started = time.perf_counter()
        drawn = [
            render_overlay_frame(renderer, frame, samples[i], samples[i].mean(axis=0), sigma)
            for i, frame in enumerate(frames)
        ]
        draw_ms = 1000 * (time.perf_counter() - started) / len(frames)
        started = time.perf_counter()
        writer = OverlayVideoWriter(work / "encode_only.mp4", fps=args.fps)
        for frame in drawn:
            writer.write(frame)
        writer.close()
        encode_ms = 1000 * (time.perf_counter() - started) / len(frames)
        none, with_overlay = statistics.median(times[False]), statistics.median(times[True])
        rows.append(
            (size, none, with_overlay, statistics.median(cpu[False]), statistics.median(cpu[True]), draw_ms, encode_ms)
        )
        print(
            f"  {size}: wall ms/frame: no overlay {[round(t, 1) for t in times[False]]}, overlay "
            f"{[round(t, 1) for t in times[True]]}",
            flush=True,
        )
    print(
        f"\ntorch {torch.__version__}, {torch.get_num_threads()} thread(s), "
        f"model: {args.model or 'bundled default'}, {args.frames} frames at {args.fps:g} fps, "
        f"median of {args.repeats}, load average {os.getloadavg()[0]:.1f}"
    )
    print(
        "| frame size | --no-overlay ms/frame | overlay ms/frame | overlay adds (wall) | --no-overlay CPU ms/frame | "
        "overlay CPU ms/frame | overlay adds (CPU) | drawing alone ms/frame | encoding alone ms/frame |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for size, none, with_overlay, cpu_none, cpu_overlay, draw_ms, encode_ms in rows:
        print(
            f"| {size} | {none:.1f} | {with_overlay:.1f} | {100 * (with_overlay / none - 1):+.0f}% | "
            f"{cpu_none:.1f} | {cpu_overlay:.1f} | {100 * (cpu_overlay / cpu_none - 1):+.0f}% | {draw_ms:.1f} | "
            f"{encode_ms:.1f} |"
        )


def summary_samples(csv_path: Path, num_frames: int) -> np.ndarray:
    """The K samples per frame from a gaze.csv, ``[T, K, 2]``."""
    import csv

    with csv_path.open(encoding="utf-8") as handle:
        rows = [row for row in csv.DictReader(handle) if int(row["sample_id"]) >= 0]
    xy = np.array([[float(r["x_norm"]), float(r["y_norm"])] for r in rows])
    return xy.reshape(num_frames, -1, 2)


def memory(args, work: Path, model: str | None) -> None:
    from transformers_gazeflow.data.video import write_video

    width, height = (int(v) for v in args.size.lower().split("x"))
    rows = []
    for minutes in args.minutes:
        frames = int(round(minutes * 60 * args.fps))
        video = work / f"generated_{minutes:g}min.mp4"
        started = time.perf_counter()
        write_video(video, generated_frames(frames, width, height, args.fps), fps=args.fps)
        print(
            f"generated {video.name}: {frames} frames {width}x{height} in {time.perf_counter() - started:.1f} s",
            flush=True,
        )
        result = run(video, model, work / f"out_{minutes:g}min", not args.no_overlay, args.num_samples, args.num_steps)
        rows.append((minutes, result))
        print(f"  {result}", flush=True)
    print(
        f"\ntorch {torch.__version__}, {args.threads} thread(s), model: {args.model or 'bundled default'}, "
        f"overlay: {not args.no_overlay}, load average {os.getloadavg()[0]:.1f}"
    )
    print(
        "| video | frames | ms/frame (whole command) | ms/frame (predict) | RSS first quarter | RSS last quarter "
        "| peak RSS |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for minutes, r in rows:
        print(
            f"| {minutes:g} min {width}x{height} @ {args.fps:g} fps | {r['frames']} | {r['ms_per_frame']:.2f} | "
            f"{r['predict_ms_per_frame']:.2f} | {r['rss_first_quarter_mb']:.0f} MiB | "
            f"{r['rss_last_quarter_mb']:.0f} MiB | {r['rss_peak_mb']:.0f} MiB |"
        )


# ------------------------------------------------------------------------------------------ serial vs overlapped
SERIAL = dict(window_batch_size=1, decode_in_thread=False, cuda_graphs=False, dtype="float32")
"""The serial path: one window at a time, frames read in the model's loop, fp32, eager sampling."""
PATHS = {"serial": SERIAL, "overlapped": {}}
"""The command's path as it runs now (the defaults) and the serial path it replaced."""

VIEW_AND_ALLOCATION_OPS = {
    "aten::as_strided",
    "aten::view",
    "aten::transpose",
    "aten::t",
    "aten::expand",
    "aten::unsqueeze",
    "aten::squeeze",
    "aten::slice",
    "aten::select",
    "aten::permute",
    "aten::reshape",
    "aten::_reshape_alias",
    "aten::flatten",
    "aten::unflatten",
    "aten::narrow",
    "aten::resolve_conj",
    "aten::resolve_neg",
    "aten::empty",
    "aten::empty_strided",
    "aten::empty_like",
    "aten::detach",
    "aten::alias",
    "aten::split",
    "aten::unbind",
    "aten::chunk",
    "aten::_unsafe_view",
    "aten::contiguous",
    "aten::to",
    "aten::lift_fresh",
    "aten::result_type",
    "aten::view_as",
    "aten::expand_as",
    "aten::movedim",
    "aten::split_with_sizes",
    "aten::unsafe_split",
}
"""Aten ops that launch no kernel on a GPU (views, metadata, allocations, conversions to the same dtype)."""


def count_ops(fn) -> dict:
    """Run ``fn`` under ``torch.profiler`` (CPU) and count its aten ops: all of them (nested ones included), and
    those that are not views, allocations or no-op conversions (nested ones included: an upper bound on the kernels
    a GPU would launch)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        fn()
    events = [e for e in profiler.events() if e.name.startswith("aten::")]
    return {"all": len(events), "compute": sum(e.name not in VIEW_AND_ALLOCATION_OPS for e in events)}


def build_predictor(name: str, device: str, options: dict, work: Path):
    """``bundled`` (the default model), ``paper`` (a random model of the paper's geometry, built on the device) or
    ``tiny``, with the pipeline ``options`` of a path."""
    from transformers_gazeflow.commands.predict import GazePredictor

    if name == "bundled":
        return GazePredictor(None, device=device, **options)
    if name == "tiny":
        return GazePredictor(str(tiny_model(work / "tiny_model")), device=device, **options)
    from transformers_gazeflow import GazeFlowConfig, GazeFlowModel, GazeFlowPipeline
    from transformers_gazeflow.data.processing import GazeFlowVideoProcessor

    torch.manual_seed(0)
    with torch.device(device):  # initialised where it runs: a ViT-L's init on a CPU takes long
        model = GazeFlowModel(GazeFlowConfig(use_lora=False)).eval()
    pipe = GazeFlowPipeline(model=model, device=device, video_processor=GazeFlowVideoProcessor(size=256), **options)
    del model
    return GazePredictor.from_pipeline(pipe, "paper geometry, random weights")


def generated_video(work: Path, frames: int, width: int, height: int, fps: float) -> Path:
    from transformers_gazeflow.data.video import write_video

    video = work / f"generated_{width}x{height}_{frames}.mp4"
    if not video.exists():
        write_video(video, generated_frames(frames, width, height, fps), fps=fps)
    return video


def ops_per_frame(args, work: Path) -> dict:
    """``--ops``: aten ops per output frame of the command's path, serial and overlapped, and per stage."""
    from transformers_gazeflow.commands.predict import PredictOptions

    video = generated_video(work, args.ops_frames, 256, 256, args.fps)
    options = PredictOptions(
        overlay=False, sampling=dict(num_samples=args.num_samples or 30, num_steps=args.num_steps or 5)
    )
    figures: dict = {
        "benchmark": "pipeline-ops",
        "frames": args.ops_frames,
        "K": options.sampling["num_samples"],
        "S": options.sampling["num_steps"],
        "paths": {},
    }
    for path, pipeline_options in PATHS.items():
        predictor = build_predictor("bundled", "cpu", pipeline_options, work)
        predictor.predict(video, work / f"warm_{path}", options)
        counts = count_ops(lambda p=predictor: p.predict(video, work / "ops", options))
        figures["paths"][path] = {kind: count / args.ops_frames for kind, count in counts.items()}
    figures["stages"] = stage_ops()
    print(
        f"\naten ops per output frame, bundled model, K={figures['K']}, S={figures['S']}, "
        f"{args.ops_frames} frames of 256x256 (torch {torch.__version__}, {torch.get_num_threads()} threads)"
    )
    print("| path | all aten ops / frame | without views and allocations / frame |")
    print("| --- | ---: | ---: |")
    for path, counts in figures["paths"].items():
        print(f"| {path} | {counts['all']:.0f} | {counts['compute']:.0f} |")
    print("\n| stage | all aten ops | without views and allocations |")
    print("| --- | ---: | ---: |")
    for stage, counts in figures["stages"].items():
        print(f"| {stage} | {counts['all']} | {counts['compute']} |")
    return figures


def stage_ops() -> dict:
    """Aten ops of each stage of one window of the bundled model (K=30)."""
    import copy

    import transformers_gazeflow
    from transformers_gazeflow.generation.inference import prepare_for_inference
    from transformers_gazeflow.hub.model_folders import load_model, load_video_processor

    model = load_model(transformers_gazeflow.default_model_path())
    processor = load_video_processor(transformers_gazeflow.default_model_path(), model.config)
    plain = prepare_for_inference(copy.deepcopy(model), fuse_attention=False)
    fast = prepare_for_inference(model)
    window, size = model.config.num_frames, model.config.image_size
    clip = torch.randn(1, window, 3, size, size)
    frames = np.random.default_rng(0).integers(0, 256, (64, 256, 256, 3), dtype=np.uint8)
    stages = {}
    with torch.no_grad():
        for name, fn in (
            ("encoder, transformers' V-JEPA 2 attention (per window)", lambda: plain.encode_video(clip)),
            ("encoder, fused attention (per window)", lambda: fast.encode_video(clip)),
        ):
            fn()
            stages[name] = count_ops(fn)
        tokens = fast.encode_video(clip)
        stages["condition (per window)"] = count_ops(lambda: fast.build_condition(tokens, window))
        condition = fast.build_condition(tokens, window)
        sample = torch.randn(1, 30, window, 2)
        embedding = fast.embed_flow_time(0.2, 1, 30, sample.device)
        fast.velocity(sample, 0.2, condition, sample, time_embedding=embedding)
        stages["velocity network, one call (K=30)"] = count_ops(
            lambda: fast.velocity(sample, 0.2, condition, sample, time_embedding=embedding)
        )
        stages["preprocess, one frame at a time (per frame)"] = count_ops(lambda: processor.preprocess(frames[:1]))
        batch = count_ops(lambda: processor.preprocess(frames))
        stages["preprocess, 64 frames at once (per frame)"] = {k: round(v / 64, 1) for k, v in batch.items()}
    return stages


def decode_ratio(args, work: Path) -> dict:
    """``--decode-ratio``: the command's ms/frame at K=1, S=1 against decoding the video alone."""
    import statistics

    from transformers_gazeflow.commands.predict import PredictOptions
    from transformers_gazeflow.data.video import iter_frames

    width, height = (int(v) for v in args.ratio_size.lower().split("x"))
    video = generated_video(work, args.ratio_frames, width, height, args.fps)
    options = PredictOptions(overlay=False, sampling=dict(num_samples=1, num_steps=1))
    predictors = {path: build_predictor(args.model or "bundled", "cpu", opts, work) for path, opts in PATHS.items()}
    times: dict[str, list[float]] = {"decode alone": [], **{path: [] for path in PATHS}}
    for repeat in range(args.repeats):
        order = list(times) if repeat % 2 == 0 else list(reversed(times))
        for name in order:
            started = time.perf_counter()
            if name == "decode alone":
                count = sum(1 for _ in iter_frames(video))
            else:
                count = predictors[name].predict(video, work / f"ratio_{name}", options)["frames"]
            times[name].append(1000 * (time.perf_counter() - started) / count)
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(
        f"\n{width}x{height}, {args.ratio_frames} frames, K=1, S=1, model {args.model or 'bundled'}, torch threads "
        f"{torch.get_num_threads()}, median of {args.repeats} (load average {os.getloadavg()[0]:.1f})"
    )
    print("| path | ms / frame | / decoding alone |")
    print("| --- | ---: | ---: |")
    for name, value in medians.items():
        print(f"| {name} | {value:.2f} | {value / medians['decode alone']:.2f}x |")
    return {
        "benchmark": "pipeline-decode-ratio",
        "model": args.model or "bundled",
        "size": args.ratio_size,
        "frames": args.ratio_frames,
        "threads": torch.get_num_threads(),
        "ms_per_frame": medians,
        "runs_ms_per_frame": times,
        "ratio_to_decode": {name: medians[name] / medians["decode alone"] for name in PATHS},
    }


def throughput(args, work: Path) -> dict:
    """``--throughput``: frames per second of the command's path, serial and overlapped, per model and size."""
    from transformers_gazeflow.commands.predict import PredictOptions

    options = PredictOptions(
        overlay=False, sampling=dict(num_samples=args.num_samples or 30, num_steps=args.num_steps or 5)
    )
    frames = int(round(args.seconds * args.fps))
    figures: dict = {
        "benchmark": "pipeline-throughput",
        "device": args.device,
        "K": options.sampling["num_samples"],
        "S": options.sampling["num_steps"],
        "seconds": args.seconds,
        "runs": [],
    }
    if args.device.startswith("cuda"):
        figures["device_name"] = torch.cuda.get_device_name(torch.device(args.device))
    print(
        f"\ngazeflow predict --no-overlay's path, K={figures['K']}, S={figures['S']}, {frames} frames "
        f"at {args.fps:g} fps, device {figures.get('device_name', args.device)}",
        flush=True,
    )
    print("| model | size | path | frames / s | ms / frame | stages (s) |", flush=True)
    print("| --- | --- | --- | ---: | ---: | --- |", flush=True)
    for model in args.throughput_models:
        for path in args.paths:
            predictor = build_predictor(model, args.device, PATHS[path], work)
            for size in args.throughput_sizes:
                width, height = (int(v) for v in size.lower().split("x"))
                warm = generated_video(work, int(4 * args.fps), width, height, args.fps)
                predictor.predict(warm, work / "warm", options)  # graph capture, cuDNN autotuning, allocations
                video = generated_video(work, frames, width, height, args.fps)
                summary = predictor.predict(video, work / "out", options)
                timings = summary["timings"]
                row = {
                    "model": model,
                    "size": size,
                    "path": path,
                    "frames": summary["frames"],
                    "dtype": summary["dtype"],
                    "frames_per_second": summary["frames"] / timings["predict_s"],
                    "ms_per_frame": timings["ms_per_frame"],
                    "stages_s": timings["stages_s"],
                }
                figures["runs"].append(row)
                stages = ", ".join(f"{k} {v:.2f}" for k, v in timings["stages_s"].items())
                print(
                    f"| {model} | {size} | {path} ({summary['dtype']}) | {row['frames_per_second']:.0f} | "
                    f"{row['ms_per_frame']:.2f} | {stages} |",
                    flush=True,
                )
            del predictor
            if args.device.startswith("cuda"):
                torch.cuda.empty_cache()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--sizes",
        nargs="+",
        default=["256x192", "640x360", "1280x720"],
        help="frame sizes of the overlay-cost run (WIDTHxHEIGHT)",
    )
    parser.add_argument("--frames", type=int, default=96, help="frames per video of the overlay-cost run")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each setting (the median is printed)")
    parser.add_argument(
        "--minutes",
        type=float,
        nargs="+",
        default=None,
        help="memory run instead: lengths of the generated videos in minutes (e.g. 1 10)",
    )
    parser.add_argument("--size", default="128x96", help="WIDTHxHEIGHT of the memory run's videos")
    parser.add_argument("--fps", type=float, default=24.0)
    parser.add_argument("--model", default=None, help="model folder, or 'tiny' (default: the bundled model)")
    parser.add_argument("--num-samples", type=int, default=None)
    parser.add_argument("--num-steps", type=int, default=None)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    parser.add_argument("--no-overlay", action="store_true", help="memory run without the overlay")
    parser.add_argument("--workdir", default=None, help="where videos and outputs go (default: a temp folder)")
    parser.add_argument("--ops", action="store_true", help="aten ops per output frame, serial and overlapped (CPU)")
    parser.add_argument("--ops-frames", type=int, default=192, help="frames of the --ops video")
    parser.add_argument(
        "--decode-ratio",
        action="store_true",
        help="ms/frame at K=1, S=1 against decoding alone, serial and overlapped (CPU)",
    )
    parser.add_argument("--ratio-size", default="640x480", help="WIDTHxHEIGHT of the --decode-ratio video")
    parser.add_argument("--ratio-frames", type=int, default=480, help="frames of the --decode-ratio video")
    parser.add_argument("--throughput", action="store_true", help="frames per second, serial and overlapped")
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the --throughput videos")
    parser.add_argument("--throughput-sizes", nargs="+", default=["256x256", "640x480"])
    parser.add_argument(
        "--throughput-models", nargs="+", default=["bundled", "paper"], choices=["bundled", "paper", "tiny"]
    )
    parser.add_argument("--paths", nargs="+", default=list(PATHS), choices=list(PATHS))
    parser.add_argument(
        "--device", default="cuda" if torch.cuda.is_available() else "cpu", help="device of the --throughput run"
    )
    parser.add_argument("--json", default=None, help="write the figures of --ops/--decode-ratio/--throughput here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.workdir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        if args.ops or args.decode_ratio or args.throughput:
            figures = {}
            for flag, run_mode in (("ops", ops_per_frame), ("decode_ratio", decode_ratio), ("throughput", throughput)):
                if getattr(args, flag):
                    figures[flag] = run_mode(args, work)
            if args.json:
                Path(args.json).write_text(json.dumps(figures, indent=1))
            return
        model = str(tiny_model(work / "tiny_model")) if args.model == "tiny" else args.model
        if args.minutes:
            memory(args, work, model)
        else:
            overlay_costs(args, work, model)


if __name__ == "__main__":
    main()
