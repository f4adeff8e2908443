"""Latency per frame and ops per frame of the causal streamer (``GazeFlowStreamer``), each way it can run, side by
side in one run: the previous streamer (growing caches, before the static step), the static step eager, compiled
(torch.compile) and captured (CUDA graph), plus recomputing the causal model on the last W frames for every frame
(what online use costs without any cache).

The model is the causal variant (paper Appendix F.4) with random weights:

* ``--preset paper`` (default): the paper's velocity network (d=256, 6 blocks, 8 heads, M=4, W=64) and a V-JEPA 2
  encoder with ViT-L's token geometry (256 px, patch 16, tubelet 2, D=1024) and ``--encoder-layers`` of its 24
  layers (24 = the real ViT-L; fewer keeps a CPU run short);
* ``--preset bundled``: the size of the bundled model (``default_model/config.json``) with ``causal=True``;
* ``--preset tiny``: the tiny test configuration.

Modes (``--modes``, comma-separated; default ``reference,eager`` on a CPU and
``reference,eager,cuda-graph,reduce-overhead`` on CUDA):

* ``reference`` - the previous streamer (``benchmarks/streaming_reference.py``), under bf16 autocast with
  ``--dtype bf16``;
* ``eager`` - ``GazeFlowStreamer(compile=None, dtype=...)``, the static step op by op;
* ``default``, ``reduce-overhead`` - ``GazeFlowStreamer(compile=mode)``: torch.compile (on CUDA ``reduce-overhead``
  replays it as a CUDA graph);
* ``cuda-graph`` - ``GazeFlowStreamer(compile="cuda-graph")``: the eager step captured with ``torch.cuda.CUDAGraph``.

The modes stream the same frames and noise, interleaved frame by frame (frame t in every mode, then frame t + 1),
so that a load changing over the run weighs on all of them alike. Printed per mode: ms per frame (mean, p50, p95,
p99, max over the frames after ``--warmup``), the setup time (the first frame: compilation or capture included),
aten ops per frame (torch.profiler over ``--profile-frames`` more frames once the buffers are full: every aten op
the profiler records, nested ones included, as the first GPU measurement counted them; and the top-level ones),
CUDA kernels per frame and peak memory on CUDA (during those frames, with every mode's buffers resident), and the
largest difference of its trajectories from the eager mode's.

    python benchmarks/bench_streaming.py --preset bundled --threads 1 --modes reference,eager,default
    python benchmarks/bench_streaming.py --encoder-layers 24 --device cuda --frames 200 --json streaming.json
    python benchmarks/bench_streaming.py --preset tiny --frames 40

Target (one H100, bf16, K=30, S=5): p99 <= 5 ms per frame (XR rendering at 90 Hz leaves 11 ms per frame).
``--profile`` adds a torch.profiler table of a few eager frames.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time
from pathlib import Path

import torch
from engine_hooks import time_streamer_condition
from op_counts import count_aten_ops
from results import add_results_argument, config_model, write_section
from streaming_reference import ReferenceStreamer
from transformers import VJEPA2Config

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel, GazeFlowStreamer

TARGET_P99_MS = 5.0  # K=30, S=5, one H100, bf16
BUNDLED_CONFIG = Path(__file__).resolve().parents[1] / "src" / "transformers_gazeflow" / "default_model" / "config.json"
NEW_MODES = ("eager", "default", "reduce-overhead", "cuda-graph")


def preset_config(preset: str, encoder_layers: int = 2) -> GazeFlowConfig:
    """The causal configuration of ``--preset`` (random weights): ``tiny``, ``bundled`` (the bundled model's
    ``config.json`` with ``causal=True``) or ``paper`` (the paper's geometry with ``encoder_layers`` of ViT-L's
    24 layers)."""
    if preset == "tiny":
        return GazeFlowConfig.tiny(causal=True, use_lora=False)
    if preset == "bundled":
        values = json.loads(BUNDLED_CONFIG.read_text())
        values.update(causal=True, use_lora=False)
        return GazeFlowConfig.from_dict(values)
    return GazeFlowConfig(encoder_config=VJEPA2Config(num_hidden_layers=encoder_layers), causal=True, use_lora=False)


def build_model(preset: str, encoder_layers: int, device: str) -> GazeFlowModel:
    torch.manual_seed(0)
    return GazeFlowModel(preset_config(preset, encoder_layers)).to(device).eval()


def measured_model(args) -> dict:
    """The results' entry of the model streamed: its configuration's fingerprint (random weights)."""
    layers = args.encoder_layers if args.preset == "paper" else 2
    name = {"tiny": "tiny", "bundled": "the bundled model's configuration"}.get(
        args.preset, f"the paper's geometry, {layers}/24 encoder layers"
    )
    return config_model(
        f"{name}, causal, random weights",
        preset_config(args.preset, layers),
        "bench_streaming:preset_config",
        preset=args.preset,
        encoder_layers=layers,
    )


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def latency(ms: list[float]) -> dict:
    return {
        "mean": statistics.mean(ms),
        "p50": percentile(ms, 0.5),
        "p95": percentile(ms, 0.95),
        "p99": percentile(ms, 0.99),
        "max": max(ms),
    }


def make_streamer(mode: str, model: GazeFlowModel, args):
    """The streamer of ``mode`` and the context each push runs in (autocast for the reference in bf16)."""
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    if mode == "reference":
        streamer = ReferenceStreamer(model, args.num_samples, args.num_steps, args.solver)
        if args.dtype == "bf16":
            return streamer, lambda: torch.autocast(torch.device(args.device).type, dtype=torch.bfloat16)
        return streamer, contextlib.nullcontext
    streamer = GazeFlowStreamer(
        model,
        num_samples=args.num_samples,
        num_steps=args.num_steps,
        solver=args.solver,
        compile=None if mode == "eager" else mode,
        dtype=dtype,
        threads=None,  # the benchmark's own --threads setting
    )
    return streamer, contextlib.nullcontext


def count_ops(push, frames, noises, device: str) -> dict:
    """aten ops (all, and top-level) and CUDA kernels per frame over the given frames."""
    gpu = device.startswith("cuda")

    def stream():
        for frame, noise in zip(frames, noises):
            push(frame, noise)
        synchronize(device)

    counts, n = count_aten_ops(stream, cuda=gpu), len(frames)
    return {
        "aten_ops_per_frame": counts["all"] / n,
        "top_level_ops_per_frame": counts["top_level"] / n,
        "cuda_kernels_per_frame": counts["cuda_kernels"] / n if gpu else None,
    }


class ModeRun:
    """One mode's streamer and what its frames measured."""

    def __init__(self, mode: str, model: GazeFlowModel, args):
        self.mode, self.args = mode, args
        self.streamer, self.context = make_streamer(mode, model, args)
        self.condition_times = (
            time_streamer_condition(self.streamer, lambda: synchronize(args.device)) if mode == "eager" else None
        )
        self.times: list[float] = []
        self.outputs: list[torch.Tensor] = []
        self.error: str | None = None

    def push(self, frame: torch.Tensor, noise: torch.Tensor):
        with self.context():
            return self.streamer.push(frame, noise=noise)

    def timed_push(self, frame: torch.Tensor, noise: torch.Tensor) -> None:
        synchronize(self.args.device)
        start = time.perf_counter()
        output = self.push(frame, noise)
        synchronize(self.args.device)
        self.times.append(time.perf_counter() - start)
        self.outputs.append(output.trajectories.float().cpu())

    def figures(self, frames: torch.Tensor, noises: torch.Tensor) -> dict:
        """Latency over the timed frames, then ops (and peak memory on CUDA) over ``--profile-frames`` more."""
        args, warmup = self.args, self.args.warmup
        figures = {
            "setup_s": self.times[0],
            "ms_per_frame": latency([1000 * t for t in self.times[warmup:]]),
            "frames_timed": len(self.times) - warmup,
            "cached_frames": self.streamer.cached_frames,
        }
        if self.condition_times is not None:
            split = [1000 * c for c in self.condition_times[warmup : len(self.times)]]
            figures["encoder_condition_ms"] = latency(split)
            figures["sampler_ms"] = latency([1000 * t - c for t, c in zip(self.times[warmup:], split)])
        gpu = args.device.startswith("cuda")
        if gpu:
            torch.cuda.reset_peak_memory_stats()
        figures.update(count_ops(self.push, frames[: args.profile_frames], noises[: args.profile_frames], args.device))
        figures["peak_memory_gb"] = torch.cuda.max_memory_allocated() / 2**30 if gpu else None
        figures["outputs"] = torch.stack(self.outputs)
        if args.profile and self.mode == "eager":
            figures["profile"] = profile_frames(self.push, frames[:5], noises[:5], args.device)
        return figures


def run_modes(model: GazeFlowModel, frames: torch.Tensor, noises: torch.Tensor, args) -> dict:
    """Every mode streams the same frames, interleaved frame by frame (frame t in each mode, then frame t + 1), so
    that a load that changes over the run (a shared machine) weighs on every mode alike. A mode that fails (a
    compiler, a capture) is reported and dropped; the others go on."""
    runs = {mode: ModeRun(mode, model, args) for mode in args.modes}
    for index, (frame, noise) in enumerate(zip(frames, noises)):
        for run in runs.values():
            if run.error is not None or (run.mode == "reference" and index >= args.reference_frames):
                continue
            try:
                run.timed_push(frame, noise)
            except Exception as error:  # noqa: BLE001 - reported in the table, the other modes go on
                run.error = f"{type(error).__name__}: {error}"[:500]
                print(f"mode {run.mode} failed: {run.error}", flush=True)
            if index == 0 and run.error is None:
                print(f"mode {run.mode}: first frame (setup) {run.times[0]:.1f} s", flush=True)
    results = {}
    for mode, run in runs.items():
        results[mode] = {"error": run.error} if run.error else run.figures(frames, noises)
    return results


def recompute_baseline(model: GazeFlowModel, frames: torch.Tensor, args) -> dict:
    window, times = model.config.num_frames, []
    autocast = (
        torch.autocast(torch.device(args.device).type, dtype=torch.bfloat16)
        if args.dtype == "bf16"
        else contextlib.nullcontext()
    )
    with torch.no_grad(), autocast:
        for t in range(len(frames) - args.baseline_frames, len(frames)):
            prefix = frames[max(0, t - window + 1) : t + 1, 0].unsqueeze(0)
            synchronize(args.device)
            start = time.perf_counter()
            model.generate(
                pixel_values_videos=prefix,
                num_samples=args.num_samples,
                num_steps=args.num_steps,
                solver=args.solver,
                generator=torch.Generator(device=args.device).manual_seed(0),
            )
            synchronize(args.device)
            times.append(1000 * (time.perf_counter() - start))
    return latency(times)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=["paper", "bundled", "tiny"], default="paper")
    parser.add_argument("--encoder-layers", type=int, default=2, help="V-JEPA 2 layers of --preset paper (24 = ViT-L)")
    parser.add_argument("--frames", type=int, default=80, help="frames streamed per mode (the first --warmup untimed)")
    parser.add_argument("--warmup", type=int, default=4)
    parser.add_argument(
        "--modes",
        default=None,
        help="comma-separated: reference, eager, default, reduce-overhead, "
        "cuda-graph (default: reference,eager on a CPU; + cuda-graph,reduce-overhead on CUDA)",
    )
    parser.add_argument(
        "--reference-frames",
        type=int,
        default=None,
        help="frames streamed by the (slow) reference mode (default: --frames)",
    )
    parser.add_argument("--profile-frames", type=int, default=10, help="frames counted by torch.profiler per mode")
    parser.add_argument("--num-samples", type=int, default=30, help="K")
    parser.add_argument("--num-steps", type=int, default=5, help="S")
    parser.add_argument("--solver", default="euler")
    parser.add_argument("--baseline-frames", type=int, default=3, help="frames timed for the recompute baseline")
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--dtype",
        choices=["bf16", "fp32"],
        default=None,
        help="bf16: weights cast once (reference: autocast); default bf16 on GPU, fp32 on CPU",
    )
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--profile", action="store_true", help="print a torch.profiler table of 5 eager frames")
    parser.add_argument(
        "--profile-only",
        action="store_true",
        help="only the profile: --warmup eager frames untimed, then 5 frames profiled",
    )
    parser.add_argument("--json", default=None, help="write the figures to this JSON file")
    add_results_argument(parser)
    parser.add_argument(
        "--results-section",
        default=None,
        help="the section of the results file this run replaces (default: the preset; + '-profile' with "
        "--profile-only)",
    )
    args = parser.parse_args(argv)
    gpu = torch.device(args.device).type == "cuda"
    args.dtype = args.dtype or ("bf16" if gpu else "fp32")
    args.modes = (args.modes or ("reference,eager,cuda-graph,reduce-overhead" if gpu else "reference,eager")).split(",")
    unknown = [mode for mode in args.modes if mode not in ("reference",) + NEW_MODES]
    if unknown:
        parser.error(f"--modes: unknown {unknown}; choose from reference, {', '.join(NEW_MODES)}")
    args.reference_frames = args.reference_frames or args.frames
    if min(args.frames, args.reference_frames) <= args.warmup:
        parser.error("--frames and --reference-frames must exceed --warmup")
    return args


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    gpu = torch.device(args.device).type == "cuda"
    model = build_model(args.preset, args.encoder_layers, args.device)
    config = model.config
    size = config.image_size
    frames = torch.randn(args.frames, 1, 3, size, size, generator=torch.Generator().manual_seed(0)).to(args.device)
    noises = torch.randn(args.frames, 1, args.num_samples, 1, 2, generator=torch.Generator().manual_seed(1)).to(
        args.device
    )
    device_name = torch.cuda.get_device_name(args.device) if gpu else "CPU"
    if args.profile_only:
        streamer, _ = make_streamer("eager", model, args)
        for frame, noise in zip(frames[: args.warmup], noises):
            streamer.push(frame, noise=noise)
        figures = {
            "benchmark": "streaming",
            "K": args.num_samples,
            "S": args.num_steps,
            "dtype": args.dtype,
            "profile": profile_frames(
                lambda f, n: streamer.push(f, noise=n), frames[args.warmup :][:5], noises[:5], args.device
            ),
        }
        write_figures(args, figures)
        return figures

    results = run_modes(model, frames, noises, args)
    baseline = recompute_baseline(model, frames, args)
    return report(args, config, device_name, results, baseline)


def report(args, config, device_name: str, results: dict, baseline: dict) -> dict:
    """Print every mode side by side and the best mode against the target; return (and write) the figures."""
    encoder = {"tiny": "tiny", "bundled": "bundled model's"}.get(
        args.preset, f"ViT-L geometry, {args.encoder_layers}/24 layers"
    )
    print(
        f"causal GazeFlow ({args.preset}: d={config.hidden_size}, {config.num_hidden_layers} blocks, "
        f"W={config.num_frames}; encoder {encoder}, causal window {config.causal_encoder_frames} frames), "
        f"K={args.num_samples}, S={args.num_steps} {args.solver}, {device_name}, {args.dtype}, "
        f"{torch.get_num_threads()} threads, torch {torch.__version__}"
    )
    print_modes(results, baseline)
    ok = {mode: f for mode, f in results.items() if "error" not in f}
    print_comparisons(ok)
    candidates = [m for m in NEW_MODES if m in ok] or list(ok)
    primary = min(candidates, key=lambda m: ok[m]["ms_per_frame"]["p99"]) if candidates else None
    total = ok[primary]["ms_per_frame"] if primary else None
    p99 = total["p99"] if total else float("nan")
    print(
        f"best p99 per frame {p99:.2f} ms ({primary}) at K={args.num_samples}, S={args.num_steps}; "
        f"target {TARGET_P99_MS} ms"
    )
    rows = {"streamer, total": total, "recompute last W frames": baseline}
    if "eager" in ok and "encoder_condition_ms" in ok["eager"]:
        rows.update(
            {
                "encoder + condition": ok["eager"]["encoder_condition_ms"],
                "sampler (S x calls, newest frame)": ok["eager"]["sampler_ms"],
            }
        )
    figures = {
        "benchmark": "streaming",
        "device": device_name,
        "torch": torch.__version__,
        "dtype": args.dtype,
        "preset": args.preset,
        "encoder_layers": args.encoder_layers,
        "K": args.num_samples,
        "S": args.num_steps,
        "solver": args.solver,
        "primary_mode": primary,
        "modes": results,
        "ms_per_frame": rows,
        "target_p99_ms": TARGET_P99_MS,
        "speedup_over_recompute": baseline["mean"] / total["mean"] if total else None,
        "targets_met": {"p99_ms": args.num_samples == 30 and args.num_steps == 5 and p99 <= TARGET_P99_MS},
    }
    if "eager" in ok and "profile" in ok["eager"]:
        figures["profile"] = ok["eager"].pop("profile")
    write_figures(args, figures)
    return figures


def print_modes(results: dict, baseline: dict) -> None:
    """The modes' table (each mode's outputs replaced by its largest difference to eager's) and the baseline."""
    eager = results.get("eager", {}).get("outputs")
    print(
        "| mode | ms/frame mean | p50 | p95 | p99 | max | setup s | aten ops/frame (all / top-level) | "
        "CUDA kernels/frame | peak GB | max abs diff to eager |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for mode, figures in results.items():
        if "error" in figures:
            print(f"| {mode} | failed: {figures['error'][:120]} |")
            continue
        outputs = figures.pop("outputs")
        if eager is not None:
            n = min(len(outputs), len(eager))
            figures["max_abs_difference_to_eager"] = (outputs[:n] - eager[:n]).abs().max().item()
        ms, diff = figures["ms_per_frame"], figures.get("max_abs_difference_to_eager")
        ops = f"{figures['aten_ops_per_frame']:.0f} / {figures['top_level_ops_per_frame']:.0f}"
        print(
            f"| {mode} | {ms['mean']:.2f} | {ms['p50']:.2f} | {ms['p95']:.2f} | {ms['p99']:.2f} | {ms['max']:.2f} | "
            f"{figures['setup_s']:.2f} | {ops} | {fmt(figures['cuda_kernels_per_frame'], 0)} | "
            f"{fmt(figures['peak_memory_gb'], 2)} | {fmt(diff, 1, 'e')} |"
        )
    print(
        f"| recompute the last W frames | {baseline['mean']:.2f} | {baseline['p50']:.2f} | {baseline['p95']:.2f} | "
        f"{baseline['p99']:.2f} | {baseline['max']:.2f} | | | | | |"
    )


def print_comparisons(ok: dict) -> None:
    """The eager step's split (condition, sampler) and each new mode against the previous streamer."""
    if "eager" in ok and "encoder_condition_ms" in ok["eager"]:
        split = ok["eager"]
        print(
            f"eager split: encoder + condition p50 {split['encoder_condition_ms']['p50']:.2f} ms, sampler "
            f"(S x calls) p50 {split['sampler_ms']['p50']:.2f} ms"
        )
    if "reference" in ok:
        before = ok["reference"]
        for mode in (m for m in NEW_MODES if m in ok):
            after = ok[mode]
            print(
                f"{mode} vs reference: {before['ms_per_frame']['p50'] / after['ms_per_frame']['p50']:.1f}x faster "
                f"(p50), aten ops per frame {before['aten_ops_per_frame']:.0f} -> {after['aten_ops_per_frame']:.0f} "
                f"({before['aten_ops_per_frame'] / after['aten_ops_per_frame']:.1f}x)"
            )


def write_figures(args, figures: dict) -> None:
    """``--json`` (the figures alone) and ``--results-dir`` (with their provenance; by default one section per
    preset)."""
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))
    section = args.results_section or args.preset + ("-profile" if args.profile_only else "")
    write_section(args.results_dir, "bench_streaming", section, figures, [measured_model(args)], args.device)


def fmt(value, digits: int, style: str = "f") -> str:
    return "-" if value is None else f"{value:.{digits}{style}}"


def profile_frames(push, frames, noises, device: str, rows: int = 15) -> list[dict]:
    """Print and return where a few streamed frames spend their time (torch.profiler, device time first on CUDA)."""
    from torch.profiler import ProfilerActivity, profile

    gpu = torch.device(device).type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])
    with profile(activities=activities) as profiler:
        for frame, noise in zip(frames, noises):
            push(frame, noise)
        synchronize(device)
    averages = profiler.key_averages()
    sort_key = "cuda_time_total" if gpu else "cpu_time_total"
    print(f"\nprofile of {len(frames)} streamed frames, by {sort_key}:")
    print(averages.table(sort_by=sort_key, row_limit=rows))
    device_time = "device_time_total" if hasattr(averages[0], "device_time_total") else "cuda_time_total"
    ordered = sorted(averages, key=lambda e: getattr(e, device_time if gpu else "cpu_time_total"), reverse=True)
    return [
        {
            "name": e.key,
            "calls": e.count,
            "cpu_ms": e.cpu_time_total / 1e3,
            "device_ms": getattr(e, device_time, 0.0) / 1e3 if gpu else None,
        }
        for e in ordered[:rows]
    ]


if __name__ == "__main__":
    main()
