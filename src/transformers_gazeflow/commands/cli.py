"""The ``gazeflow`` command: ``gazeflow predict``, ``gazeflow demo``, ``gazeflow app`` (the web demo) and whatever
else registers itself in :data:`COMMANDS`.

``gazeflow predict VIDEO... --output-dir DIR`` streams videos through the model and writes, per video, ``overlay.mp4``,
``gaze.csv`` (or ``gaze.parquet``) and ``summary.json`` (:mod:`transformers_gazeflow.commands.predict`); several videos,
a folder, a glob or a text file of paths give one folder per video and ``index.csv``
(:mod:`transformers_gazeflow.commands.batch`), optionally over several processes (``--num-processes N``, or ``torchrun``
/ ``accelerate launch -m transformers_gazeflow.commands.cli predict ...``). ``gazeflow demo`` runs a generated clip with
known gaze (:mod:`transformers_gazeflow.commands.demo`). ``gazeflow stream SOURCE`` predicts online with a causal model,
one JSON line per frame (:mod:`transformers_gazeflow.commands.stream`).

Fast start: this module imports neither torch, transformers nor numpy. Every argument is checked first (in well
under a second), then the inputs (files, the model folder, the device), and only then is the model loaded.

Errors: every user error prints one line ``gazeflow: error: ...`` naming the argument or file and what was expected,
and exits with status 2 for a bad command line and 1 for a bad input (video, model folder, device, output folder);
``GAZEFLOW_DEBUG=1`` shows the traceback instead. A warning of the package's own (e.g. regions fitted at another
sampling temperature) is one line too, ``gazeflow: warning: ...``; other libraries' keep their form. Ctrl-C (SIGINT)
exits with 130 and SIGTERM with 143, after removing the partial outputs of the video under way (finished videos are
kept; ``--resume`` continues).

Adding a command (``gazeflow app`` below is one, shortened; the arguments of every subcommand are declared in
:mod:`.arguments`, the sampling flags once for all of them)::

    def add_app_arguments(parser):                 # in arguments.py; reuse add_model_arguments(parser), ...
        parser.add_argument("--port", type=int, default=None)

    def run_app(args) -> int:                      # import heavy things here, not at the top of the module
        from .web_demo import serve
        return serve(port=args.port)

    register_command(Command("app", "serve the web demo", add_app_arguments, run_app))
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import __version__
from .arguments import (  # light: nothing heavy is imported before the model loads
    UsageError,
    add_app_arguments,
    add_calibration_command_arguments,
    add_demo_arguments,
    add_predict_arguments,
    check_arguments,
    did_you_mean,
    sampling_request,
    speed_options,
)
from .readout_arguments import readout_options
from .run_context import Terminated, one_line_warnings, signals_as_exceptions
from .stream import (
    EXPORT_DESCRIPTION,
    EXPORT_HELP,
    STREAM_DESCRIPTION,
    STREAM_HELP,
    add_export_arguments,
    add_stream_arguments,
)

EXIT_USAGE, EXIT_INPUT, EXIT_SIGINT, EXIT_SIGTERM = 2, 1, 130, 143
WORKER_ENV = "GAZEFLOW_WORKER"
"""Set in the processes that ``--num-processes`` starts (they read their shard from RANK / WORLD_SIZE)."""


@dataclass(frozen=True)
class Command:
    """A ``gazeflow`` subcommand: its arguments and what it runs (returns the exit status)."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    description: str | None = None


COMMANDS: dict[str, Command] = {}


def register_command(command: Command) -> Command:
    """Add a subcommand to ``gazeflow`` (see the module docstring)."""
    COMMANDS[command.name] = command
    return command


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``gazeflow: error: ...``) raised as :class:`UsageError` instead of exiting,
    with a guess for a mistyped option or command and the help of the subcommand where the error is."""

    def error(self, message: str):  # noqa: D102
        raise UsageError(f"{message}{did_you_mean(self, message)} (see '{self.prog} --help')")


class _SubcommandParser(_Parser):
    """A subcommand's parser refuses the arguments it does not know itself (argparse would leave them to the top
    parser, whose error knows neither the subcommand's options nor its help)."""

    def parse_known_args(self, args=None, namespace=None):  # noqa: D102
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Shows ``(default: X)`` after an option's help unless the help already says it or there is nothing to show."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or not action.option_strings or action.default in (None, False, argparse.SUPPRESS):
            return text
        return f"{text} (default: %(default)s)"


def _versions() -> str:
    from importlib import metadata

    found = []
    for package in ("torch", "transformers"):
        try:
            found.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            found.append(f"{package} not installed")
    return f"gazeflow {__version__} (transformers-gazeflow; {', '.join(found)}; Python {sys.version.split()[0]})"


class _VersionAction(argparse.Action):
    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(_versions())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="gazeflow",
        description="Egocentric gaze prediction with GazeFlow.",
        allow_abbrev=False,
        epilog="Errors: one line 'gazeflow: error: ...', exit status 2 (command line) or 1 (input); "
        "GAZEFLOW_DEBUG=1 shows the traceback.",
    )
    parser.add_argument("--version", action=_VersionAction, help="print the versions and exit")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_SubcommandParser)
    for command in COMMANDS.values():
        sub = commands.add_parser(
            command.name,
            help=command.help,
            description=command.description or command.help,
            formatter_class=_Formatter,
            allow_abbrev=False,
        )
        command.add_arguments(sub)
    return parser


# ------------------------------------------------------------------------------------------- runtime
def resolve_device(name: str | None, local_rank: int = 0) -> str:
    """The torch device for ``--device`` (imports torch): ``cuda`` under a launcher is ``cuda:LOCAL_RANK``; a device
    this machine does not have is a one-line error."""
    if name is None or name == "cpu":
        return "cpu"
    import torch

    kind, _, index = name.partition(":")
    if kind == "cuda":
        if not torch.cuda.is_available():
            reason = (
                f"this torch ({torch.__version__}) was built without CUDA"
                if torch.version.cuda is None
                else "no CUDA GPU is visible (driver, CUDA_VISIBLE_DEVICES)"
            )
            raise ValueError(f"--device {name}: {reason}; use --device cpu")
        count = torch.cuda.device_count()
        number = int(index) if index else local_rank % count
        if number >= count:
            raise ValueError(f"--device {name}: this machine has {count} CUDA device(s), cuda:0 to cuda:{count - 1}")
        return f"cuda:{number}"
    mps = getattr(torch.backends, "mps", None)
    if mps is None or not mps.is_available():
        raise ValueError(
            f"--device {name}: MPS is not available here (it needs Apple silicon and a macOS build of "
            "torch); use --device cpu"
        )
    return "mps"


def _prepare_runtime(args: argparse.Namespace, local_rank: int = 0) -> str:
    """Import torch, set the threads and check the device (after the light checks, before the model loads)."""
    import torch

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device, local_rank)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # our own bar is over frames; no "Loading weights" bar
    return device


def _predict_options(args: argparse.Namespace, quiet: bool | None = None):
    from .predict import PredictOptions

    kind, value = args.heatmap_sigma or (None, None)
    return PredictOptions(
        sampling=sampling_request(args),
        seed=args.seed,
        start_frame=getattr(args, "start_frame", None),
        end_frame=getattr(args, "end_frame", None),
        trail=args.trail,
        heatmap=not args.no_heatmap,
        heatmap_sigma_px=value if kind == "px" else None,
        heatmap_sigma_fraction=value if kind == "fraction" else None,
        overlay=not args.no_overlay,
        quiet=args.quiet if quiet is None else quiet,
        **{"overwrite": args.overwrite, "table_format": getattr(args, "format", "csv")},
        max_memory_gb=args.max_memory_gb,
        **readout_options(args),
    )


def _report(summary: dict[str, Any]) -> None:
    timings = summary["timings"]
    print(
        f"gazeflow: {summary['frames']} frames of {summary['video']} in {timings['predict_s']:.1f} s "
        f"({timings['ms_per_frame']:.1f} ms/frame) -> {Path(summary['outputs']['summary']).parent}"
    )


# ------------------------------------------------------------------------------------------- predict
def run_predict(args: argparse.Namespace) -> int:
    from ..hub.model_folders import resolve_model
    from .batch import check_output_dir, expand_videos, output_folders, shard_from_env
    from .output_policies import check_prediction_outputs

    check_arguments(args)
    output_dir = Path(args.output_dir).expanduser()
    check_output_dir(output_dir)
    worker = bool(os.environ.get(WORKER_ENV))
    shard = shard_from_env()
    if args.num_processes > 1 and not worker:
        if shard.world > 1:
            raise UsageError(
                f"--num-processes {args.num_processes}: this process is already one of "
                f"{shard.world} (RANK/WORLD_SIZE are set by a launcher); use one or the other"
            )
        expand_videos(args.video)  # bad inputs and a bad model folder fail once, here, not in every process
        resolve_model(args.model)
        return _spawn_workers(args, output_dir)
    videos, batch = expand_videos(args.video)
    batch = batch or shard.world > 1  # several processes share even one video's list: it is done once, by rank 0
    if not batch and not videos[0].exists():
        raise FileNotFoundError(f"video file not found: {videos[0]}")
    location = resolve_model(args.model)
    if not batch:  # a file that is no video is refused before torch is imported
        from ..data.video_sources import open_video_source

        open_video_source(videos[0], start_frame=args.start_frame, end_frame=args.end_frame)
    folders = output_folders(videos, output_dir) if batch else [output_dir]
    check_prediction_outputs(videos, folders, output_dir, location, _predict_options(args), batch)
    device = _prepare_runtime(args, shard.local_rank)
    if not batch:
        from .predict import GazePredictor

        predictor = GazePredictor(args.model, device=device, **speed_options(args))
        summary = predictor.predict(videos[0], output_dir, _predict_options(args))
        _report(summary)
        return 0
    from .predict import run_batch

    jobs = shard.take([(order, video, folder) for order, (video, folder) in enumerate(zip(videos, folders))])
    rows, index = run_batch(
        jobs,
        output_dir,
        _predict_options(args, quiet=args.quiet or shard.world > 1),
        model=args.model,
        device=device,
        shard=shard,
        resume=args.resume,
        **speed_options(args),
    )
    if worker:  # the process that started this one reports
        return EXIT_INPUT if any(row["status"] == "failed" for row in rows) else 0
    return _batch_status(rows, index, output_dir, shard.world)


def _batch_status(rows: list[dict], index: Path | None, output_dir: Path, world: int) -> int:
    from .batch import INDEX_NAME, read_index

    rows = read_index(index) if index is not None else rows
    counts = {status: sum(row["status"] == status for row in rows) for status in ("ok", "skipped", "failed")}
    where = index if index is not None else output_dir / INDEX_NAME
    videos = f"{len(rows)} video{'' if len(rows) == 1 else 's'}"
    if index is not None or world == 1:
        print(
            f"gazeflow: {videos}: {counts['ok']} ok, {counts['skipped']} skipped, {counts['failed']} failed -> {where}"
        )
    else:
        print(
            f"gazeflow: {videos} in this process: {counts['ok']} ok, {counts['skipped']} skipped, "
            f"{counts['failed']} failed ({where} is written by the last process to finish)"
        )
    if counts["failed"]:
        print(
            f"gazeflow: error: {counts['failed']} of {len(rows)} videos failed (their errors are in {where})",
            file=sys.stderr,
        )
        return EXIT_INPUT
    return 0


def _spawn_workers(args: argparse.Namespace, output_dir: Path) -> int:
    """``--num-processes N``: run N copies of this command, process i with RANK=i of WORLD_SIZE=N (as torchrun
    would), wait for them, and report the merged index. SIGINT/SIGTERM are passed on to them."""
    import subprocess

    from .batch import INDEX_NAME, read_index

    count = args.num_processes
    argv = list(args.argv)
    if args.threads is None:
        argv += ["--threads", str(max(1, (os.cpu_count() or 1) // count))]
    processes = []
    for rank in range(count):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(count), LOCAL_RANK=str(rank), **{WORKER_ENV: "1"})
        processes.append(subprocess.Popen([sys.executable, "-m", "transformers_gazeflow.commands.cli", *argv], env=env))
    try:
        codes = [process.wait() for process in processes]
    except BaseException:
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in processes:
            process.wait()
        raise
    index = output_dir / INDEX_NAME
    if all(code in (0, EXIT_INPUT) for code in codes) and index.is_file():
        rows = read_index(index)
        return _batch_status(rows, index, output_dir, 1)
    failed = [f"process {rank} exited with {code}" for rank, code in enumerate(codes) if code != 0]
    raise OSError(f"{'; '.join(failed)} (see their messages above)")


# ------------------------------------------------------------------------------------------- demo
def run_demo_command(args: argparse.Namespace) -> int:
    from ..hub.model_folders import resolve_model
    from .batch import check_output_dir

    check_arguments(args)
    output_dir = Path(args.output_dir).expanduser()
    check_output_dir(output_dir)
    resolve_model(args.model)  # fails before rendering when there is no model
    device = _prepare_runtime(args)
    from .demo import run_demo

    summary = run_demo(
        output_dir, num_frames=args.frames, model=args.model, device=device, options=_predict_options(args)
    )
    _report(summary)
    demo = summary["demo"]
    if demo["frames_scored"]:
        print(
            f"gazeflow: demo: point estimate {demo['point_estimate_error']:.3f} from the true gaze on average, "
            f"frame centre {demo['frame_centre_error']:.3f} (unit coordinates, {demo['frames_scored']} frames with "
            "a valid on-frame true gaze)"
        )
    return 0


register_command(
    Command(
        "predict",
        "predict gaze on videos",
        add_predict_arguments,
        run_predict,
        description="Predict gaze on one or many videos: overlay.mp4, gaze.csv and summary.json per video (and "
        "index.csv for several).",
    )
)
register_command(
    Command(
        "demo",
        "run the bundled model on a generated clip with known gaze",
        add_demo_arguments,
        run_demo_command,
        description="Render a synthetic egocentric clip with known gaze, predict on it, draw the true gaze beside the "
        "prediction and score the point estimate against it.",
    )
)


# ------------------------------------------------------------------------------------------- stream
def _checked(args: argparse.Namespace, check: Callable[[argparse.Namespace], None]) -> None:
    """The common checks, then a command's own (a ValueError there: the command line alone is wrong, exit 2)."""
    check_arguments(args)
    try:
        check(args)
    except ValueError as err:
        raise UsageError(str(err)) from None


def _run_stream(args: argparse.Namespace) -> int:
    from .stream import check_stream_arguments, run_stream

    _checked(args, check_stream_arguments)
    return run_stream(args, resolve_device)


def _run_export_streamer(args: argparse.Namespace) -> int:
    from .stream import check_export_arguments, run_export_streamer

    _checked(args, check_export_arguments)
    return run_export_streamer(args)


register_command(
    Command(
        "stream",
        STREAM_HELP,
        add_stream_arguments,
        _run_stream,
        description=STREAM_DESCRIPTION,
    )
)
register_command(
    Command(
        "export-streamer",
        EXPORT_HELP,
        add_export_arguments,
        _run_export_streamer,
        description=EXPORT_DESCRIPTION,
    )
)


# ------------------------------------------------------------------------------------------- calibrate
def run_calibrate(args: argparse.Namespace) -> int:
    from ..data.video_sources import open_video_source
    from ..hub.model_folders import resolve_model
    from .output_policies import check_calibration_output

    check_arguments(args)
    if not Path(args.video).is_file():
        raise FileNotFoundError(f"video file not found: {args.video}")
    if not Path(args.gaze).is_file():
        raise FileNotFoundError(f"tracker gaze file not found: {args.gaze}")
    location = resolve_model(args.model)
    open_video_source(args.video)  # a file that is no video is refused before torch is imported
    check_calibration_output(args, location)
    device = _prepare_runtime(args)
    from .calibrate import calibrate_wearer
    from .predict import PredictOptions

    options = PredictOptions(sampling=sampling_request(args), seed=args.seed, max_memory_gb=args.max_memory_gb)
    done = calibrate_wearer(
        args.video,
        args.gaze,
        args.output,
        model=args.model,
        device=device,
        seconds=args.seconds,
        start_frame=args.start_frame,
        correction=args.correction,
        options=options,
        camera_calibration=args.camera,
    )
    fit = done["calibration"]
    scale = "" if fit.model == "offset" else f", scale ({fit.scale[0]:.3f}, {fit.scale[1]:.3f})"
    print(
        f"gazeflow: {fit.model} from {done['frames']} frames ({done['seconds']:.1f} s) of {args.gaze}: offset "
        f"({fit.offset[0]:+.4f}, {fit.offset[1]:+.4f}) of the frame{scale}; median error on them "
        f"{done['error_before_px']:.1f} px -> {done['error_after_px']:.1f} px -> {args.output}"
    )
    return 0


register_command(
    Command(
        "calibrate",
        "fit a wearer's correction from a few seconds of eye-tracker gaze",
        add_calibration_command_arguments,
        run_calibrate,
        description="Fit a per-wearer correction (offset, or offset and scale) of the model's gaze from "
        "the wearer's eye-tracker gaze on a video; apply it with 'gazeflow predict "
        "--calibration'.",
    )
)


# ------------------------------------------------------------------------------------------- app
def run_app(args: argparse.Namespace) -> int:
    if args.port is not None and not 0 < args.port < 65536:
        raise UsageError(f"--port {args.port}: expected a port number from 1 to 65535")
    from .web_demo import serve  # the web demo (transformers_gazeflow.commands.web_demo); gradio is imported there only

    return serve(model=args.model, host=args.host, port=args.port, share=args.share)


register_command(
    Command(
        "app",
        "serve the web demo (needs the [app] extra: gradio)",
        add_app_arguments,
        run_app,
        description="Serve the GazeFlow web demo (a Gradio page over the egocentric-gaze pipeline).",
    )
)


# ------------------------------------------------------------------------------------------- main
def _is_user_error(err: BaseException) -> bool:
    """Whether ``err`` is the user's to fix (one line) rather than a bug (a traceback)."""
    from ..hub.model_folders import ModelFolderError

    if isinstance(err, (UsageError, ModelFolderError, OSError, ValueError)):
        return True
    video = sys.modules.get("transformers_gazeflow.data.video")
    return video is not None and isinstance(err, video.VideoDecodeError)


def _stopped(argv: list[str], args: argparse.Namespace | None) -> str:
    """What a signal ended, for its one line (a stream says where its summary is: ``args.stream_ending``)."""
    if argv[:1] == ["app"]:
        return "the web demo stopped"
    if argv[:1] == ["stream"]:
        return getattr(args, "stream_ending", "the stream stopped before it opened its source")
    if argv[:1] == ["export-streamer"]:  # the export is swapped in whole, after its check
        return "nothing of the export was kept; the output folder is as it was"
    if argv[:1] == ["calibrate"]:  # calib.json is written whole, last
        return "no calibration was written"
    return "partial outputs of the video under way were removed"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gazeflow`` console script; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = bool(os.environ.get("GAZEFLOW_DEBUG"))
    from .batch import one_line

    args = None
    with signals_as_exceptions(), one_line_warnings():
        try:
            args = build_parser().parse_args(argv)
            args.argv = argv  # what --num-processes passes on to its processes
            return COMMANDS[args.command].run(args)
        except SystemExit as done:  # --help, --version
            return done.code if isinstance(done.code, int) else 0
        except KeyboardInterrupt:
            if debug:
                raise
            print(f"\ngazeflow: interrupted (SIGINT): {_stopped(argv, args)}", file=sys.stderr)
            return EXIT_SIGINT
        except Terminated:
            if debug:
                raise
            print(f"gazeflow: terminated (SIGTERM): {_stopped(argv, args)}", file=sys.stderr)
            return EXIT_SIGTERM
        except Exception as err:
            if debug or not _is_user_error(err):
                raise
            print(f"gazeflow: error: {one_line(err)}", file=sys.stderr)
            return EXIT_USAGE if isinstance(err, UsageError) else EXIT_INPUT


if __name__ == "__main__":  # pragma: no cover  (python -m transformers_gazeflow.commands.cli, accelerate launch -m ...)
    sys.exit(main())
