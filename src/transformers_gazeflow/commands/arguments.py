"""The ``gazeflow`` subcommands' arguments, each declared once, and the checks that need nothing but the command line.

The sampling flags are :data:`SAMPLING_FLAGS`, one entry per field of
:class:`~transformers_gazeflow.models.gazeflow.generation_gazeflow.SamplingSettings` a flag sets (``-k``, ``-s``,
``--solver``, ``--noise-scale``, ``--window-mode``): :func:`add_sampling_arguments` gives them to every subcommand that
samples (with ``--seed``), :func:`check_arguments` checks their bounds, and :func:`sampling_request` hands what was
given to ``SamplingSettings.resolve`` by field name once the model's config is known. A new sampling option is one entry
here.

Plain Python like the parser (``argparse``; the choices from ``models.gazeflow.choices``): nothing heavy is imported,
so ``gazeflow --help`` and argument errors answer in well under a second.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from typing import Any

from ..generation.resource_bounds import MAX_NUM_STEPS
from ..models.gazeflow.choices import DTYPES, SOLVERS, WINDOW_MODES
from .readout_arguments import add_calibrate_arguments, add_readout_arguments

DEVICE_PATTERN = re.compile(r"cpu|cuda(:\d+)?|mps")


class UsageError(ValueError):
    """A bad command line: the message names the argument and what was expected (exit status 2)."""


class MissingExtraError(ValueError):
    """An optional dependency a command needs is not installed: the message names the extra's install command."""


def require_extra(extra: str, modules: tuple[str, ...], needed_by: str) -> None:
    """Refuse, before anything is created, a command whose optional ``extra`` is not installed (``modules`` are
    looked up without importing them)."""
    from importlib.util import find_spec

    missing = [name for name in modules if find_spec(name) is None]
    if missing:
        raise MissingExtraError(
            f"{needed_by} needs {', '.join(missing)} (the [{extra}] extra): "
            f'pip install "transformers-gazeflow[{extra}]"'
        )


INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)")


def did_you_mean(parser: argparse.ArgumentParser, message: str) -> str:
    """``"; did you mean X?"`` for argparse's ``message`` when it names an unknown option of ``parser`` or an invalid
    choice close to a known one (difflib's ratio >= 0.6), else ``""``."""
    from difflib import get_close_matches

    guesses: list[str] = []
    if message.startswith("unrecognized arguments:"):
        options = [name for name in parser._option_string_actions if name.startswith("--")]
        for word in message.split(":", 1)[1].split():
            if word.startswith("-"):
                guesses += get_close_matches(word.split("=", 1)[0], options, n=1, cutoff=0.6)
    choice = INVALID_CHOICE.search(message)
    if choice:
        choices = re.findall(r"'([^']*)'", choice.group(2))
        guesses += get_close_matches(choice.group(1), choices, n=1, cutoff=0.6)
    return f"; did you mean {' or '.join(dict.fromkeys(guesses))}?" if guesses else ""


@dataclass(frozen=True)
class SamplingFlag:
    """A command-line flag setting one field of ``SamplingSettings`` (default None: the model config's value).

    ``minimum``, ``maximum`` and ``meaning``: the values :func:`check_arguments` accepts and what the number counts;
    ``windowed``: only for the windowed engine (``predict``, ``demo``, ``calibrate``), not the causal stream."""

    names: tuple[str, ...]
    help: str
    type: type | None = None
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] | None = None
    meaning: str = ""
    windowed: bool = False


SAMPLING_FLAGS: dict[str, SamplingFlag] = {
    "num_samples": SamplingFlag(
        ("--num-samples", "-k"), "K sampled trajectories", int, 1, meaning="the number K of sampled trajectories"
    ),
    "num_steps": SamplingFlag(
        ("--num-steps", "-s"), "S ODE steps", int, 1, MAX_NUM_STEPS, meaning="the number S of ODE steps"
    ),
    "solver": SamplingFlag(("--solver",), "ODE solver", choices=SOLVERS),
    "noise_scale": SamplingFlag(
        ("--noise-scale",),
        "tau, the standard deviation of x_0: 1 is the paper's sampler, below 1 a sampling temperature (steadier "
        "samples, a narrower spread)",
        float,
    ),
    "window_mode": SamplingFlag(
        ("--window-mode",),
        "joining overlapping windows: coherent (each sample one continuous trajectory) or blend (the paper's linear "
        "blend of independent windows)",
        choices=WINDOW_MODES,
        windowed=True,
    ),
}
"""The sampling flags by the ``SamplingSettings`` field each sets."""


def add_sampling_arguments(
    group: argparse._ActionsContainer, *, windowed: bool = True, seed: bool = True, fixed: bool = False
) -> None:
    """The sampling flags of :data:`SAMPLING_FLAGS` (without the windowed engine's when not ``windowed``), and
    ``--seed``; ``fixed``: the values are fixed in an exported graph."""
    default = "fixed in the graph; default: the model config's" if fixed else "default: the model config's"
    for dest, flag in SAMPLING_FLAGS.items():
        if windowed or not flag.windowed:
            help = f"{flag.help} ({default})"
            group.add_argument(*flag.names, dest=dest, type=flag.type, choices=flag.choices, default=None, help=help)
    if seed:
        group.add_argument("--seed", type=int, default=0, help="noise seed: the same seed gives the same samples")


def sampling_request(args: argparse.Namespace) -> dict[str, Any]:
    """The sampling flags of a parsed command line by ``SamplingSettings`` field (None: not given, the model's
    default), for ``SamplingSettings.resolve(config, **request)``."""
    return {dest: getattr(args, dest) for dest in SAMPLING_FLAGS if hasattr(args, dest)}


def add_model_arguments(parser: argparse.ArgumentParser, causal: bool = False) -> argparse._ArgumentGroup:
    """``--model`` and the sampling flags (a causal model streams frame by frame: no windows to join)."""
    group = parser.add_argument_group("model and sampling")
    group.add_argument(
        "--model",
        default=None,
        help="a causal model folder or Hub id (default: the bundled causal model, offline)"
        if causal
        else "model folder or Hub id (default: the bundled model, offline)",
    )
    add_sampling_arguments(group, windowed=not causal)
    return group


def heatmap_sigma(text: str) -> tuple[str, float]:
    """``--heatmap-sigma``: pixels (``25``, ``25px``) or a percentage of the frame width (``3.9%``)."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[-+]?\d+)?)\s*(px|%)?\s*", text, flags=re.IGNORECASE)
    value = float(match.group(1)) if match else 0.0
    if not match or not value > 0:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected a positive size in pixels (25, 25px) or a percentage of the frame width (3.9%)"
        )
    return ("fraction", value / 100.0) if match.group(2) == "%" else ("px", value)


def add_overwrite_argument(group: argparse._ActionsContainer, what: str) -> None:
    """``--overwrite``: replace ``what`` even where a file there was not written by the command (see
    ``commands.output_policies``)."""
    group.add_argument(
        "--overwrite",
        action="store_true",
        help=f"replace {what} even where a file there was not written by this command (a link is replaced, never "
        "followed; an output is never one of the inputs)",
    )


def add_memory_argument(group: argparse._ActionsContainer) -> None:
    """``--max-memory-gb``: the memory a run's sizes may need, estimated before anything is allocated."""
    group.add_argument(
        "--max-memory-gb",
        type=float,
        default=None,
        metavar="GB",
        help="refuse sizes (-k, -s, frame size) whose estimated memory passes this (default: this machine's memory)",
    )


def add_overlay_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("overlay video")
    group.add_argument("--no-overlay", action="store_true", help="write only gaze.csv and summary.json")
    group.add_argument("--no-heatmap", action="store_true", help="do not draw the heatmap on the overlay")
    group.add_argument(
        "--heatmap-sigma",
        type=heatmap_sigma,
        default=None,
        metavar="SIGMA",
        help="heatmap Gaussian sigma, in pixels (25) or %% of the frame width (3.9%%) "
        "(default: 3.9%% of the width, the paper's 25 px at 640 px)",
    )
    group.add_argument("--trail", type=int, default=8, help="frames in the point-estimate trail")


def add_runtime_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("runtime")
    group.add_argument(
        "--device",
        default=None,
        help="cpu, cuda, cuda:N or mps (default: cpu; under a launcher, cuda means cuda:LOCAL_RANK)",
    )
    group.add_argument("--threads", type=int, default=None, help="CPU threads for torch (default: torch's choice)")
    group.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    add_memory_argument(group)


def add_predict_arguments(parser: argparse.ArgumentParser) -> None:
    """``gazeflow predict``'s arguments."""
    parser.add_argument(
        "video",
        nargs="+",
        help="video files, folders of videos, quoted glob patterns ('clips/*.mp4') or text files "
        "listing one video path per line (.txt)",
    )
    parser.add_argument(
        "--output-dir",
        "-o",
        required=True,
        help="output folder (several videos: one subfolder per video and index.csv)",
    )
    parser.add_argument("--start-frame", type=int, default=None, help="first frame to process (default 0)")
    parser.add_argument("--end-frame", type=int, default=None, help="stop before this frame (default: the end)")
    parser.add_argument(
        "--resume", action="store_true", help="skip videos whose output folder already holds a finished prediction"
    )
    add_overwrite_argument(parser, "overlay.mp4, gaze.csv, ... in the output folders")
    parser.add_argument(
        "--format",
        choices=("csv", "parquet"),
        default="csv",
        help="the per-frame gaze table: csv writes gaze.csv (one row per frame and sample); parquet writes "
        "gaze.parquet (needs pyarrow), one row per frame with the K samples as list columns, the same numbers at "
        "full precision",
    )
    parser.add_argument(
        "--num-processes",
        type=int,
        default=1,
        help="share the videos among N processes (on CPU or one GPU each with --device cuda)",
    )
    add_model_arguments(parser)
    add_overlay_arguments(parser)
    add_readout_arguments(parser)
    add_runtime_arguments(parser)
    group = parser.add_argument_group("speed")
    group.add_argument(
        "--dtype",
        choices=("auto", *DTYPES),
        default="auto",
        help="dtype of the weights (default auto: bfloat16 on CUDA, float32 on CPU)",
    )
    group.add_argument(
        "--compile",
        action="store_true",
        help="torch.compile the velocity network (on CUDA each window's sampling steps are replayed "
        "as a CUDA graph either way, where that is faster)",
    )
    group.add_argument(
        "--resize-dtype",
        choices=("float32", "uint8"),
        default=None,
        help="resize frames as float32 (exact: the models' definition) or as uint8 (several times faster on a CPU, "
        "within one grey level; changes the trajectories slightly); default: the model's processor's (float32)",
    )


def speed_options(args: argparse.Namespace) -> dict[str, Any]:
    """``gazeflow predict``'s speed group as ``GazePredictor``'s keyword arguments."""
    return {"dtype": args.dtype, "compile": args.compile, "resize_dtype": args.resize_dtype}


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    """``gazeflow demo``'s arguments."""
    parser.add_argument("--output-dir", "-o", default="gazeflow_demo", help="output folder")
    add_overwrite_argument(parser, "demo_input.mp4, overlay.mp4, gaze.csv, ... in the output folder")
    parser.add_argument("--frames", type=int, default=96, help="frames of the generated clip")
    add_model_arguments(parser)
    add_overlay_arguments(parser)
    add_runtime_arguments(parser)


def add_calibration_command_arguments(parser: argparse.ArgumentParser) -> None:
    """``gazeflow calibrate``'s arguments: its own, then the model's and the runtime's."""
    add_calibrate_arguments(parser)
    add_overwrite_argument(parser, "--output")
    add_model_arguments(parser)
    add_runtime_arguments(parser)


def add_app_arguments(parser: argparse.ArgumentParser) -> None:
    """``gazeflow app``'s arguments."""
    parser.add_argument("--model", default=None, help="model the page starts with (default: the bundled model)")
    parser.add_argument("--host", default="127.0.0.1", help="address to serve on")
    parser.add_argument("--port", type=int, default=None, help="port (default: Gradio's, 7860)")
    parser.add_argument("--share", action="store_true", help="also make a public gradio.live link (off by default)")


# ------------------------------------------------------------------------------------------- checks
def _at_least(args: argparse.Namespace, name: str, minimum: int, meaning: str) -> None:
    value = getattr(args, name, None)
    if value is not None and value < minimum:
        raise UsageError(f"--{name.replace('_', '-')} {value}: expected an integer >= {minimum} ({meaning})")


def _at_most(args: argparse.Namespace, name: str, maximum: int, meaning: str) -> None:
    value = getattr(args, name, None)
    if value is not None and value > maximum:
        raise UsageError(
            f"--{name.replace('_', '-')} {value}: expected at most {maximum} ({meaning}: a bound on a loop)"
        )


def check_arguments(args: argparse.Namespace) -> None:
    """Every check that needs nothing but the command line (no file read, nothing imported)."""
    for dest, flag in SAMPLING_FLAGS.items():
        if flag.minimum is not None:
            _at_least(args, dest, flag.minimum, flag.meaning)
        if flag.maximum is not None:
            _at_most(args, dest, flag.maximum, flag.meaning)
    scale = getattr(args, "noise_scale", None)
    if scale is not None and not 0 < scale < float("inf"):
        raise UsageError(f"--noise-scale {scale}: expected a number > 0 (the standard deviation of x_0)")
    memory = getattr(args, "max_memory_gb", None)
    if memory is not None and not (memory > 0 and memory != float("inf")):
        raise UsageError(f"--max-memory-gb {memory}: expected a positive number of gigabytes")
    _at_least(args, "threads", 1, "CPU threads")
    _at_least(args, "trail", 0, "frames in the trail")
    _at_least(args, "frames", 1, "frames of the demo clip")
    _at_least(args, "num_processes", 1, "processes")
    _at_least(args, "start_frame", 0, "the first frame, counted from 0")
    _at_least(args, "end_frame", 1, "the frame to stop before")
    start, end = getattr(args, "start_frame", None), getattr(args, "end_frame", None)
    if start is not None and end is not None and end <= start:
        raise UsageError(f"--end-frame {end} must be greater than --start-frame {start}")
    device = getattr(args, "device", None)
    if device is not None and not DEVICE_PATTERN.fullmatch(device):
        raise UsageError(f"--device {device!r}: unknown device, expected cpu, cuda, cuda:N or mps")
    if getattr(args, "format", None) == "parquet":
        from importlib.util import find_spec

        if find_spec("pyarrow") is None:
            raise MissingExtraError("--format parquet needs pyarrow, which is not installed: pip install pyarrow")


__all__ = [
    "UsageError",
    "MissingExtraError",
    "require_extra",
    "did_you_mean",
    "SamplingFlag",
    "SAMPLING_FLAGS",
    "add_sampling_arguments",
    "sampling_request",
    "add_model_arguments",
    "add_overwrite_argument",
    "add_memory_argument",
    "add_overlay_arguments",
    "add_runtime_arguments",
    "add_predict_arguments",
    "add_demo_arguments",
    "add_calibration_command_arguments",
    "add_app_arguments",
    "heatmap_sigma",
    "check_arguments",
]
