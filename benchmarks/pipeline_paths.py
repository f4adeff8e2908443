"""The pipeline benchmarks' inputs (generated videos, the random models), and the command's path as it runs now
("overlapped") against the serial path it replaced, side by side: aten ops per output frame (``--ops``), the
command against decoding alone (``--decode-ratio``) and frames per second (``--throughput``). Run by
``bench_pipeline.py``, whose docstring says what each run measures; and the trajectories of the command with either
resize precision, for ``bench_decode.py --trajectories``."""

from __future__ import annotations

import csv
import os
import time
from pathlib import Path

import numpy as np
import torch
from op_counts import count_aten_ops
from results import config_model, shipped_model


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


def tiny_config():
    """The ``tiny`` model's configuration (32x32 frames, 8-frame windows; random weights)."""
    from transformers_gazeflow import GazeFlowConfig

    return GazeFlowConfig.tiny()


def paper_config():
    """The ``paper`` model's configuration: the paper's geometry (ViT-L, 64-frame windows, 256 px; random weights)."""
    from transformers_gazeflow import GazeFlowConfig

    return GazeFlowConfig(use_lora=False)


def tiny_model(folder: Path) -> Path:
    from transformers_gazeflow import GazeFlowModel
    from transformers_gazeflow.data.processing import GazeFlowVideoProcessor

    torch.manual_seed(0)
    GazeFlowModel(tiny_config()).save_pretrained(folder)
    GazeFlowVideoProcessor(size=32).save_pretrained(folder)
    return folder


def measured_model(name: str | None) -> dict:
    """The results' entry of a model: ``bundled`` (or None), ``tiny``, ``paper``, or a model folder."""
    from results import folder_model

    if name in (None, "bundled"):
        return shipped_model()
    if name == "tiny":
        return config_model("tiny, random weights", tiny_config(), "pipeline_paths:tiny_config")
    if name == "paper":
        return config_model("paper geometry, random weights", paper_config(), "pipeline_paths:paper_config")
    return folder_model(name, name)


# ------------------------------------------------------------------------------------------ serial vs overlapped
SERIAL = dict(window_batch_size=1, decode_in_thread=False, cuda_graphs=False, dtype="float32")
"""The serial path: one window at a time, frames read in the model's loop, fp32, eager sampling."""
PATHS = {"serial": SERIAL, "overlapped": {}}
"""The command's path as it runs now (the defaults) and the serial path it replaced."""


def count_ops(fn) -> dict:
    """Aten ops of ``fn`` on the CPU: all of them and those that are not views, allocations or no-op conversions
    (``op_counts.count_aten_ops``)."""
    counts = count_aten_ops(fn)
    return {"all": counts["all"], "compute": counts["compute"]}


def build_predictor(name: str, device: str, options: dict, work: Path):
    """``bundled`` (the default model), ``paper`` (a random model of the paper's geometry, built on the device) or
    ``tiny``, with the pipeline ``options`` of a path."""
    from transformers_gazeflow.commands.predict import GazePredictor

    if name == "bundled":
        return GazePredictor(None, device=device, **options)
    if name == "tiny":
        return GazePredictor(str(tiny_model(work / "tiny_model")), device=device, **options)
    from transformers_gazeflow import GazeFlowModel, GazeFlowPipeline
    from transformers_gazeflow.data.processing import GazeFlowVideoProcessor

    torch.manual_seed(0)
    with torch.device(device):  # initialised where it runs: a ViT-L's init on a CPU takes long
        model = GazeFlowModel(paper_config()).eval()
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


RATIO_PATHS = {**PATHS, "overlapped, uint8 resize": {"resize_dtype": "uint8"}}
"""``--decode-ratio``'s paths: the two of :data:`PATHS`, and the overlapped one with the processor's uint8 resize."""
STAGES = ("decode", "preprocess", "encode", "sample", "write", "wait_for_frames")
"""``summary.json``'s stage times printed per frame (``commands.predict.STAGES_MEASURED`` says how each is taken)."""


def decode_ratio(args, work: Path) -> dict:
    """``--decode-ratio``: the command's ms/frame at K=1, S=1 against decoding the video alone, with each path's
    stage times per frame (on the serial path every stage runs in the one loop, in series)."""
    import statistics

    from transformers_gazeflow.commands.predict import PredictOptions
    from transformers_gazeflow.data.video import iter_frames

    width, height = (int(v) for v in args.ratio_size.lower().split("x"))
    video = generated_video(work, args.ratio_frames, width, height, args.fps)
    options = PredictOptions(overlay=False, sampling=dict(num_samples=1, num_steps=1))
    paths = {path: build_predictor(args.model or "bundled", "cpu", o, work) for path, o in RATIO_PATHS.items()}
    times: dict[str, list[float]] = {"decode alone": [], **{path: [] for path in paths}}
    cpu_times: dict[str, list[float]] = {name: [] for name in times}  # all threads: on a shared machine, steadier
    stages: dict[str, dict[str, list[float]]] = {path: {stage: [] for stage in STAGES} for path in paths}
    for repeat in range(args.repeats):
        for name in list(times) if repeat % 2 == 0 else list(reversed(times)):
            started, cpu_started = time.perf_counter(), time.process_time()
            if name == "decode alone":
                count = sum(1 for _ in iter_frames(video))
            else:
                summary = paths[name].predict(video, work / f"ratio_{name}", options)
                count = summary["frames"]
                for stage in STAGES:
                    stages[name][stage].append(1000 * summary["timings"]["stages_s"].get(stage, 0.0) / count)
            times[name].append(1000 * (time.perf_counter() - started) / count)
            cpu_times[name].append(1000 * (time.process_time() - cpu_started) / count)
    medians = {name: statistics.median(values) for name, values in times.items()}
    cpu = {name: statistics.median(values) for name, values in cpu_times.items()}
    stage_ms = {path: {k: statistics.median(v) for k, v in by_stage.items()} for path, by_stage in stages.items()}
    print_decode_ratio(args, width, height, medians, cpu, stage_ms)
    return {
        "benchmark": "pipeline-decode-ratio",
        "model": args.model or "bundled",
        "size": args.ratio_size,
        "frames": args.ratio_frames,
        "threads": torch.get_num_threads(),
        "ms_per_frame": medians,
        "runs_ms_per_frame": times,
        "ratio_to_decode": {name: medians[name] / medians["decode alone"] for name in paths},
        "cpu_ms_per_frame": cpu,
        "cpu_ratio_to_decode": {name: cpu[name] / cpu["decode alone"] for name in paths},
        "stage_ms_per_frame": stage_ms,
    }


def print_decode_ratio(args, width: int, height: int, medians: dict, cpu: dict, stage_ms: dict) -> None:
    print(
        f"\n{width}x{height}, {args.ratio_frames} frames, K=1, S=1, model {args.model or 'bundled'}, torch threads "
        f"{torch.get_num_threads()}, median of {args.repeats} (load average {os.getloadavg()[0]:.1f})"
    )
    stage_columns = " | ".join(f"{stage} ms / frame" for stage in STAGES)
    print(f"| path | ms / frame | / decoding alone | CPU ms / frame | CPU / decoding's | {stage_columns} |")
    print("| --- |" + " ---: |" * (4 + len(STAGES)))
    for name, value in medians.items():
        cells = " | ".join(f"{stage_ms[name][stage]:.2f}" if name in stage_ms else "-" for stage in STAGES)
        print(
            f"| {name} | {value:.2f} | {value / medians['decode alone']:.2f}x | {cpu[name]:.2f} | "
            f"{cpu[name] / cpu['decode alone']:.2f}x | {cells} |"
        )


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


def csv_samples(path: Path) -> np.ndarray:
    """Every row's ``(x_px, y_px)`` of a gaze.csv."""
    with path.open(encoding="utf-8") as handle:
        return np.array([[float(row["x_px"]), float(row["y_px"])] for row in csv.DictReader(handle)])


def trajectory_difference(work: Path, video: Path) -> dict:
    """``bench_decode.py --trajectories``: gazeflow predict --no-overlay's samples with the bundled model (its default
    K and S), the processor's float32 resize against its uint8 one."""
    from transformers_gazeflow.commands.predict import GazePredictor, PredictOptions

    samples, timings = {}, {}
    for resize_dtype in ("float32", "uint8"):
        predictor = GazePredictor(None, resize_dtype=resize_dtype)
        summary = predictor.predict(video, work / f"trajectories_{resize_dtype}", PredictOptions(overlay=False))
        samples[resize_dtype] = csv_samples(work / f"trajectories_{resize_dtype}" / "gaze.csv")
        timings[resize_dtype] = summary["timings"]["ms_per_frame"]
        settings = (summary["num_samples"], summary["num_steps"])
    difference = np.abs(samples["uint8"] - samples["float32"])
    figures = {
        "video": video.name,
        "K": settings[0],
        "S": settings[1],
        "max_px": float(difference.max()),
        "mean_px": float(difference.mean()),
        "ms_per_frame": timings,
    }
    print(
        f"\ngazeflow predict --no-overlay, bundled model, K={settings[0]}, S={settings[1]}, {video.name}: uint8 resize "
        f"against float32, samples differ by at most {figures['max_px']:.3f} px (mean {figures['mean_px']:.4f} px)"
    )
    return figures
