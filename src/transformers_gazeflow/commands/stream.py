"""``gazeflow stream SOURCE``: online gaze, frame by frame, from a file, a camera, a stream URL or raw RGB on stdin.

The causal GazeFlow (paper Appendix F.4, ``GazeFlowConfig(causal=True)``) predicts frame t's gaze from frames <= t,
so each frame's gaze is written as soon as the frame has been seen (:class:`~transformers_gazeflow.generation.online.
GazeFlowStreamer`). Per frame, one line of JSON on stdout (or a CSV row with ``--csv FILE``), the fields of
:data:`FIELDS`:

* ``frame``: the frame's index in the source (frames dropped by ``--realtime`` leave gaps); ``time_s``: its time in
  seconds (``data.stream_sources.SourceFrame``);
* ``x``, ``y``: the point estimate (mean of the K samples) in unit coordinates, [0, 1] from the top-left corner;
  ``x_px``, ``y_px``: the same in pixels of the source frame;
* ``r50_px``, ``r90_px``: the spread of the K samples, the radius around the point estimate holding 50% and 90% of
  them (pixels);
* ``region90_px``, only when the model folder (or the ``--onnx`` folder) holds a ``region_calibration.json``: the
  calibrated 90% region's radius, the same as ``gaze.csv``'s (``gaze.uncertainty.describe_uncertainty``, the one
  computation of spreads and regions);
* ``latency_ms``: milliseconds from the frame's arrival (decoded and handed over by the feed) to its line.

At the end, and on Ctrl-C / SIGTERM, a latency summary (p50 / p95 / p99, frames, drops, frames/s) goes to stderr
and, with ``--summary FILE``, to a JSON file. Backends (``--backend``): the registry
:data:`~transformers_gazeflow.generation.steppers.STEPPERS`, ``torch`` (the model itself) and ``onnxruntime`` (the
per-frame step exported by ``gazeflow export-streamer``).

This module imports nothing heavy at import time (the ``gazeflow`` command builds its parser from it).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..models.gazeflow.choices import DEFAULT_OPSET, DTYPES, MIN_OPSET, STREAM_CPU_THREADS
from .arguments import (
    SAMPLING_FLAGS,
    add_memory_argument,
    add_model_arguments,
    add_overwrite_argument,
    add_sampling_arguments,
    require_extra,
    sampling_request,
)

FIELDS = ("frame", "time_s", "x", "y", "x_px", "y_px", "r50_px", "r90_px", "latency_ms")
REGION_FIELDS = ("region90_px",)
"""The fields a line gains when the model has a region calibration."""
PERCENTILES = (50, 95, 99)
COMPILE_ON_CUDA, COMPILE_ELSEWHERE = "reduce-overhead", "default"
"""``--compile``'s ``GazeFlowStreamer(compile=...)`` mode: compiled and replayed as a CUDA graph on a GPU, compiled
elsewhere."""
STREAM_HELP = "online gaze, frame by frame, from a file, camera, URL or stdin (causal model)"
STREAM_DESCRIPTION = (
    "Predict gaze online with a causal GazeFlow: one JSON line per frame on stdout (frame, time_s, x/y in unit "
    "coordinates and pixels, the samples' spread r50_px/r90_px, latency_ms), or CSV with --csv; a latency summary on "
    "stderr at the end. SOURCE: a video file, a camera (/dev/video0), a stream URL, or - for raw RGB frames on stdin "
    "(--raw WIDTHxHEIGHT)."
)
EXPORT_HELP = "export the causal streamer's per-frame step for devices (ONNX)"
EXPORT_DESCRIPTION = (
    "Export the causal model's per-frame step (frame, noise, state) -> (gaze, next state) as ONNX, with "
    "streamer.json naming its inputs, outputs, shapes, dtypes and how to start the state; gazeflow stream --backend "
    "onnxruntime --onnx DIR runs it."
)
STOPPED_BY = {"KeyboardInterrupt": "SIGINT", "Terminated": "SIGTERM"}
"""How a stream that ends on an exception says it stopped (``cli.Terminated`` is SIGTERM); any other: "error"."""


def add_stream_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's arguments; ``cli`` checks them."""
    from ..generation.steppers import STEPPERS  # light: the registry imports nothing heavy

    parser.add_argument(
        "source",
        metavar="SOURCE",
        help="a video file, a camera (/dev/video0), a stream URL (rtsp://, http://, udp://, ...) or - "
        "for raw RGB frames on stdin (with --raw WIDTHxHEIGHT)",
    )
    _add_source_arguments(parser.add_argument_group("source"))
    output = parser.add_argument_group("output")
    output.add_argument(
        "--csv", default=None, metavar="FILE", help="write CSV rows to FILE instead of JSON lines on stdout"
    )
    output.add_argument("--summary", default=None, metavar="FILE", help="also write the latency summary as JSON")
    add_overwrite_argument(output, "--csv and --summary")
    add_model_arguments(parser, causal=True)
    runtime = parser.add_argument_group("runtime")
    runtime.add_argument(
        "--backend",
        choices=tuple(STEPPERS),
        default=next(iter(STEPPERS)),
        help="; ".join(f"{name}: {backend.help}" for name, backend in STEPPERS.items()),
    )
    exported = " or ".join(name for name, backend in STEPPERS.items() if backend.exported)
    runtime.add_argument(
        "--onnx",
        default=None,
        metavar="DIR",
        help=f"--backend {exported}: the folder written by gazeflow export-streamer",
    )
    runtime.add_argument("--device", default=None, help="cpu, cuda, cuda:N or mps (default: cpu)")
    runtime.add_argument(
        "--dtype",
        choices=DTYPES,
        default="float32",
        help="the step's weights and arithmetic in this precision (bfloat16 on a GPU; the ODE state stays float32)",
    )
    runtime.add_argument(
        "--compile",
        action="store_true",
        help="torch.compile the per-frame step (one graph; on CUDA replayed as a CUDA graph); the "
        "first frame pays the compilation",
    )
    runtime.add_argument(
        "--threads",
        type=int,
        default=None,
        help="CPU threads for torch or onnxruntime (default on the CPU: 1, since a frame's work is "
        "too small to share out and the decoding thread needs a core; on a GPU torch's choice)",
    )
    add_memory_argument(runtime)


def _add_source_arguments(source: argparse._ArgumentGroup) -> None:
    source.add_argument(
        "--raw",
        default=None,
        metavar="WIDTHxHEIGHT",
        help="SOURCE - only: stdin carries raw RGB24 frames of this size (W * H * 3 bytes each)",
    )
    source.add_argument(
        "--fps",
        type=float,
        default=None,
        help="SOURCE - only: the frame rate that gives time_s (default: each frame's arrival time)",
    )
    source.add_argument(
        "--realtime",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="play a file at its frame rate and drop frames while the model is behind (counted); "
        "default: on for cameras and URLs, off for files and stdin (every frame)",
    )
    source.add_argument(
        "--source-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an FFmpeg option for opening SOURCE, repeatable (video_size=640x480, framerate=30, rtsp_transport=tcp)",
    )


def check_stream_arguments(args: argparse.Namespace) -> None:
    """``gazeflow stream``'s own command-line checks (nothing opened, nothing heavy imported; a ValueError names
    the argument): sets ``args.raw_size`` and ``args.options``."""
    from ..data.stream_sources import parse_raw_size, source_kind

    stdin = source_kind(args.source) == "stdin"
    if args.raw is not None and not stdin:
        raise ValueError(f"--raw is for raw frames on stdin (SOURCE -), not for {args.source}")
    if args.raw is None and stdin:
        raise ValueError("SOURCE - reads raw RGB frames from stdin: give their size with --raw WIDTHxHEIGHT")
    try:
        args.raw_size = parse_raw_size(args.raw) if stdin else None
    except ValueError as err:
        raise ValueError(f"--raw {err}") from None
    if args.raw_size is not None:  # the frames' memory, before anything is read
        from ..generation.resource_bounds import check_memory, raw_frame_memory

        check_memory(raw_frame_memory(*args.raw_size), f"--raw {args.raw}", args.max_memory_gb)
    if args.fps is not None and not (stdin and args.fps > 0):
        raise ValueError(
            f"--fps {args.fps}: expected a positive frame rate, and only with SOURCE - (a file, camera "
            "or URL has its own)"
        )
    pairs = [option.partition("=") for option in args.source_option]
    bad = next((option for option, (key, sep, _) in zip(args.source_option, pairs) if not (key and sep)), None)
    if bad is not None:
        raise ValueError(f"--source-option {bad!r}: expected KEY=VALUE (e.g. video_size=640x480)")
    args.options = {key: value for key, _, value in pairs}
    _check_backend_arguments(args)
    for name, value in (("--csv", args.csv), ("--summary", args.summary)):
        if value is not None and (not value or Path(value).is_dir() or not Path(value).expanduser().parent.is_dir()):
            raise ValueError(f"{name} {value or repr(value)}: expected a file in an existing folder")


def _check_backend_arguments(args: argparse.Namespace) -> None:
    """An exported backend reads ``--onnx DIR`` and takes none of the flags of a backend that runs the model."""
    from ..generation.steppers import STEPPERS

    exported = STEPPERS[args.backend].exported
    if exported != (args.onnx is not None):
        names = " or ".join(name for name, backend in STEPPERS.items() if backend.exported)
        raise ValueError(
            f"--backend {args.backend} needs --onnx DIR (a folder written by gazeflow export-streamer)"
            if exported
            else f"--onnx DIR needs --backend {names}"
        )
    model_only = (
        ("--compile", args.compile),
        ("--dtype", args.dtype != "float32"),
        ("--model", args.model),
        ("--device", args.device not in (None, "cpu")),
    )
    runs_the_model = " or ".join(name for name, backend in STEPPERS.items() if not backend.exported)
    for name, given in model_only if exported else ():
        if given:
            raise ValueError(
                f"{name} is for --backend {runs_the_model} (the step exported in --onnx fixes the model and its "
                "precision)"
            )


def add_export_arguments(parser: argparse.ArgumentParser) -> None:
    """``gazeflow export-streamer``'s arguments (``generation.onnx_export`` does the work)."""
    parser.add_argument(
        "--format",
        choices=("onnx",),
        default="onnx",
        help="onnx: the per-frame step (frame, noise, state) -> (gaze, next state), opset >= 17",
    )
    parser.add_argument(
        "--output-dir",
        "-o",
        required=True,
        help="folder for step.onnx, streamer.json (inputs, outputs, shapes, dtypes, the state's "
        "start), preprocessor_config.json and config.json",
    )
    parser.add_argument(
        "--model", default=None, help="a causal model folder or Hub id (default: the bundled causal model, offline)"
    )
    add_sampling_arguments(parser, windowed=False, seed=False, fixed=True)
    parser.add_argument("--opset", type=int, default=DEFAULT_OPSET, help=f"ONNX opset (>= {MIN_OPSET})")
    add_overwrite_argument(parser, "the output folder (replaced whole)")
    add_memory_argument(parser)


def check_export_arguments(args: argparse.Namespace) -> None:
    """``gazeflow export-streamer``'s own command-line checks (a ValueError names the argument)."""
    if args.opset < MIN_OPSET:
        raise ValueError(
            f"--opset {args.opset}: expected an integer >= {MIN_OPSET} (the ONNX opset; the step needs "
            f"{MIN_OPSET} or later)"
        )
    output_dir = Path(args.output_dir).expanduser()
    if output_dir.exists() and not output_dir.is_dir():
        raise ValueError(f"--output-dir {output_dir}: is an existing file, expected a folder")


def run_export_streamer(args: argparse.Namespace) -> int:
    """Run ``gazeflow export-streamer`` on checked arguments: the export, then one line saying what was written and
    how closely onnxruntime followed torch."""
    require_extra("onnx", ("onnx", "onnxscript"), "gazeflow export-streamer")  # before any folder is made
    from ..data.output_safety import check_outputs
    from ..generation.onnx_export import ExportCheckError, export_streamer
    from .output_policies import check_export_folder

    output_dir = Path(args.output_dir).expanduser()
    location = causal_model_location(args.model)
    check_outputs([], [("--model", location)], folders=[("--output-dir", output_dir)])  # replaced whole
    check_export_folder(output_dir, args.overwrite)
    try:
        interface = export_streamer(
            location, output_dir, opset=args.opset, max_memory_gb=args.max_memory_gb, **sampling_request(args)
        )
    except ExportCheckError as err:
        raise ExportCheckError(f"--output-dir {output_dir}: {err} (the folder is left as it was)") from None
    checked = interface["checked"]
    check = (
        f"onnxruntime gives torch's gaze within {checked['max_abs_difference']:.1e} over {checked['frames']} frames"
        if checked["frames"]
        else checked["note"]
    )
    print(
        f"gazeflow: the streamer step (K={interface['num_samples']}, S={interface['num_steps']}) -> "
        f"{output_dir / interface['file']} and {output_dir / 'streamer.json'}; {check}"
    )
    return 0


# ------------------------------------------------------------------------------------------- records
def frame_record(
    frame, samples, mean, width: int, height: int, arrival: float, calibration: Any = None
) -> dict[str, Any]:
    """One output line: ``samples [K, 2]`` and ``mean [2]`` in unit coordinates, of a ``width x height`` frame;
    ``calibration``: the model's ``gaze.regions.RegionCalibration`` (None: no region field)."""
    import numpy as np

    from ..gaze.uncertainty import describe_uncertainty
    from ..models.gazeflow.geometry import unit_to_pixels

    mean = np.asarray(mean, dtype=np.float64)
    centre = unit_to_pixels(mean, width, height)
    samples = np.asarray(samples, dtype=np.float64)[:, None]
    uncertainty = describe_uncertainty(
        samples, width, height, calibration=calibration, with_modes=False, centre=mean[None]
    )
    record = {
        "frame": frame.index,
        "time_s": round(frame.time_s, 6),
        "x": float(mean[0]),
        "y": float(mean[1]),
        "x_px": round(float(centre[0]), 3),
        "y_px": round(float(centre[1]), 3),
        "r50_px": round(float(uncertainty.spread(0.5)[0]), 3),
        "r90_px": round(float(uncertainty.spread(0.9)[0]), 3),
        "latency_ms": round((time.perf_counter() - arrival) * 1e3, 3),
    }
    if calibration is not None:
        record["region90_px"] = round(float(uncertainty.region(0.9)[0]), 3)
    return record


class RecordWriter:
    """JSON lines on stdout, or CSV rows in a file (``--csv``); every record flushed at once."""

    def __init__(self, csv_path: str | None, fields: tuple[str, ...] = FIELDS):
        import csv

        self.handle = open(csv_path, "w", newline="", encoding="utf-8") if csv_path else sys.stdout
        self.csv = csv.DictWriter(self.handle, fieldnames=fields) if csv_path else None
        if self.csv is not None:
            self.csv.writeheader()

    def write(self, record: dict[str, Any]) -> None:
        if self.csv is not None:
            self.csv.writerow(record)
        else:
            self.handle.write(json.dumps(record) + "\n")
        self.handle.flush()

    def close(self) -> None:
        if self.handle is not sys.stdout:
            self.handle.close()


def latency_summary(latencies_ms: list[float], wall_s: float, decoded: int, dropped: int) -> dict[str, Any]:
    """Frames, drops, frames/s and the latency percentiles of a run."""
    import numpy as np

    values = np.asarray(latencies_ms, dtype=np.float64)
    latency = (
        (
            {f"p{p}": round(float(np.percentile(values, p)), 3) for p in PERCENTILES}
            | {"mean": round(float(values.mean()), 3), "max": round(float(values.max()), 3)}
        )
        if len(values)
        else {}
    )
    return {
        "frames": len(latencies_ms),
        "source_frames": decoded,
        "dropped": dropped,
        "wall_s": round(wall_s, 3),
        "frames_per_s": round(len(latencies_ms) / wall_s, 3) if wall_s > 0 else None,
        "latency_ms": latency,
    }


def summary_line(summary: dict[str, Any]) -> str:
    latency = summary["latency_ms"]
    timing = ", ".join(f"p{p} {latency[f'p{p}']:.1f} ms" for p in PERCENTILES) if latency else "no frame"
    rate = f"{summary['frames_per_s']:.1f} frames/s" if summary["frames_per_s"] else "-"
    return (
        f"gazeflow: stream: {summary['frames']} frames of {summary['source']} ({summary['dropped']} dropped) in "
        f"{summary['wall_s']:.2f} s, {rate}; latency {timing} ({summary['backend']}, {summary['device']})"
    )


# ------------------------------------------------------------------------------------------- the model
def causal_model_location(model: str | None) -> str:
    """``--model`` checked for the stream (a local folder must be causal); None: the bundled causal model."""
    from ..generation.steppers import not_causal_message
    from ..hub.model_folders import (
        ModelFolderError,
        default_model_available,
        default_model_path,
        read_config_json,
        resolve_model,
    )

    if model is None:
        if not default_model_available(causal=True):
            raise ModelFolderError(
                f"the bundled causal model has no weights ({default_model_path(causal=True)}); "
                "pass a causal model folder with --model"
            )
        model = str(default_model_path(causal=True))
    location = resolve_model(model)
    if Path(location).is_dir() and not read_config_json(location).get("causal", False):
        raise ModelFolderError(not_causal_message(location))
    return location


# ------------------------------------------------------------------------------------------- the command
def cpu_threads(requested: int | None) -> int:
    """``--threads`` on the CPU: the library streamer's default (``STREAM_CPU_THREADS``, one) unless asked (a frame's
    work is too small to share out, and the decoding thread needs a core)."""
    return STREAM_CPU_THREADS if requested is None else requested


def load_stepper(args: argparse.Namespace, resolve_device: Callable[[str | None], str], source):
    """The backend's stepper (:data:`~transformers_gazeflow.generation.steppers.STEPPERS`) and the location it
    opened; with ``--compile`` compiled before the first frame."""
    from ..generation.steppers import STEPPERS, StepperOptions

    backend = STEPPERS[args.backend]
    options = StepperOptions(
        sampling=sampling_request(args),
        seed=args.seed,
        threads=cpu_threads(args.threads),
        max_memory_gb=getattr(args, "max_memory_gb", None),
    )
    if backend.exported:  # K, S and the solver are fixed in the graph: the flags given must be the exported ones
        require_extra("onnx", ("onnxruntime",), f"gazeflow stream --backend {args.backend}")
        check_exported_sampling(args)
        return backend.open(args.onnx, options), args.onnx
    import torch
    from transformers.utils import logging as hf_logging

    device = resolve_device(args.device)
    if torch.device(device).type == "cpu":
        torch.set_num_threads(cpu_threads(args.threads))
    elif args.threads is not None:
        torch.set_num_threads(args.threads)
    hf_logging.disable_progress_bar()  # stderr carries only the summary (or one error line)
    location = causal_model_location(args.model)
    compile = (COMPILE_ON_CUDA if device.startswith("cuda") else COMPILE_ELSEWHERE) if args.compile else None
    stepper = backend.open(location, replace(options, device=device, dtype=args.dtype, compile=compile))
    if args.compile:
        stepper.warm_up(source.height, source.width)
    return stepper, location


def check_exported_sampling(args: argparse.Namespace) -> None:
    """The sampling flags given must be what the step in ``--onnx`` was exported with (one-line errors naming the
    flag)."""
    from ..generation.onnx_export import read_interface, sampling_mismatches

    for name, given, exported in sampling_mismatches(read_interface(Path(args.onnx)), sampling_request(args)):
        flag = SAMPLING_FLAGS[name].names[0]
        raise ValueError(
            f"{flag} {given}: the step in {args.onnx} was exported with {exported} (export again with {flag} {given})"
        )


def check_stream_outputs(args: argparse.Namespace) -> None:
    """``--csv`` and ``--summary`` are never an input (the source file, the model or export folder) nor each other,
    and a file there that an earlier stream did not write is replaced only with ``--overwrite``
    (``commands.output_policies``); checked before the source is opened."""
    from ..data.output_safety import check_outputs
    from ..data.stream_sources import source_kind
    from ..hub.model_folders import default_model_path
    from .output_policies import check_output_files

    outputs = [(flag, path) for flag, path in (("--csv", args.csv), ("--summary", args.summary)) if path is not None]
    inputs = [("SOURCE", args.source)] if source_kind(args.source) == "file" else []
    inputs.append(("--onnx", args.onnx) if args.onnx else ("--model", args.model or default_model_path(causal=True)))
    check_outputs(outputs, inputs)
    check_output_files([(flag, path, f"stream {flag}") for flag, path in outputs], args.overwrite)


class StreamRun:
    """One ``gazeflow stream`` run: what it has opened, what it measured and how it stopped, so that every exit path
    (the end, an error, SIGINT, SIGTERM while the model loads) closes the same way: the CSV renamed into place with
    the rows written (removed after an error: complete or absent), the summary written and printed, and
    ``args.stream_ending`` saying truthfully where it is, for the command's last line."""

    def __init__(self, args: argparse.Namespace):
        from ..data.output_safety import StagedFiles

        self.args, self.staged = args, StagedFiles()
        self.source = self.feed = self.stepper = self.writer = None
        self.model_name, self.realtime, self.stopped, self.error = None, None, "end", None
        self.latencies: list[float] = []
        self.started = time.perf_counter()

    def run(self, resolve_device: Callable[[str | None], str]) -> None:
        from ..data.stream_sources import FrameFeed, open_source
        from ..gaze.regions import warn_on_sampler_mismatch
        from ..hub.model_folders import load_region_calibration

        args = self.args
        csv_path = self.staged.stage(args.csv) if args.csv else None
        self.source = source = open_source(args.source, getattr(args, "raw_size", None), args.fps, args.options)
        self.stepper, self.model_name = load_stepper(args, resolve_device, source)
        calibration = load_region_calibration(self.model_name)
        warn_on_sampler_mismatch(calibration, self.stepper.settings.noise_scale)
        self.realtime = source.live if args.realtime is None else args.realtime
        self.feed = FrameFeed(source, realtime=self.realtime, pace=self.realtime and source.kind == "file")
        self.writer = RecordWriter(csv_path, FIELDS if calibration is None else FIELDS + REGION_FIELDS)
        self.started = time.perf_counter()
        self.feed.start()
        for frame in self.feed:
            samples, mean = self.stepper.step(frame.pixels)
            record = frame_record(frame, samples, mean, source.width, source.height, frame.arrival, calibration)
            self.latencies.append(record["latency_ms"])
            self.writer.write(record)

    def finish(self) -> None:
        from ..data.atomic_files import atomic_write

        args = self.args
        if self.feed is not None:
            self.feed.stop()
        elif self.source is not None:
            self.source.close()
        if self.writer is not None:
            self.writer.close()
        csv_kept = bool(args.csv) and self.writer is not None and self.stopped != "error"
        if csv_kept:
            self.staged.publish(args.csv)
        self.staged.discard()
        feed = self.feed
        summary = {
            "source": args.source,
            "backend": args.backend,
            "model": self.model_name,
            "device": getattr(self.stepper, "device", None),
            "num_samples": self.stepper.settings.num_samples if self.stepper else None,
            "num_steps": self.stepper.settings.num_steps if self.stepper else None,
            "realtime": self.realtime,
            "stopped": self.stopped,
            **({"error": self.error + (f" ({args.csv} not kept)" if args.csv else "")} if self.error else {}),
            **latency_summary(
                self.latencies,
                time.perf_counter() - self.started,
                feed.decoded if feed else 0,
                feed.dropped if feed else 0,
            ),
        }
        if args.summary:
            atomic_write(args.summary, json.dumps(summary, indent=2) + "\n")
        if self.stepper is None:  # stopped while opening: no summary line, the command's line says so
            where = f"; its summary is in {args.summary}" if args.summary else ""
            args.stream_ending = f"the stream stopped before its first frame{where}"
        elif self.stopped != "error":  # an error is one line of its own
            print(summary_line(summary), file=sys.stderr, flush=True)
            args.stream_ending = "the stream stopped (its summary is above)"


def run_stream(args: argparse.Namespace, resolve_device: Callable[[str | None], str]) -> int:
    """Run ``gazeflow stream`` on arguments that ``cli`` has checked (``args.raw_size``, ``args.options`` set);
    ``resolve_device`` turns ``--device`` into a torch device (after the source has opened). A source that ends
    short (a truncated file, an empty stdin) is an error, as ``gazeflow predict`` reports it."""
    from .batch import one_line

    check_stream_outputs(args)
    run = StreamRun(args)
    try:
        run.run(resolve_device)
    except BrokenPipeError:  # the reader went away (`gazeflow stream ... | head`): stop quietly
        run.stopped = "output closed"
        _silence_stdout()
    except BaseException as err:
        # by name: under `python -m ...commands.cli` the signal handler's Terminated is __main__'s class
        run.stopped = STOPPED_BY.get(type(err).__name__, "error")
        run.error = one_line(err) if run.stopped == "error" else None
        raise
    finally:
        run.finish()
    return 0


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush does not fail on the closed pipe again."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


__all__ = [
    "FIELDS",
    "REGION_FIELDS",
    "add_stream_arguments",
    "run_stream",
    "frame_record",
    "latency_summary",
    "causal_model_location",
]
