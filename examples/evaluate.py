#!/usr/bin/env python
"""Evaluate a GazeFlow checkpoint (or a baseline) on a dataset split under the paper's protocol.

    python examples/evaluate.py --model_name_or_path runs/synthetic --dataset_name synthetic \
        --data_dir data/synthetic --dataset_config small --output_dir runs/synthetic/eval
    python examples/evaluate.py --baseline center_bias --dataset_name egtea --data_dir /data/egtea ...
    accelerate launch --config_file examples/accelerate_multi_gpu.yaml examples/evaluate.py ...   # data parallel
    python examples/evaluate.py ... --grid                                   # the K x S sweep (Table ks_grid)
    python examples/evaluate.py ... --online               # a causal model frame by frame, as gazeflow stream runs

Prints and writes (``results.md``) the paper's two tables (``metrics.tables``): the main-table row (AUC, F1, P, R, AAE,
NSS, CC, KL, SIM) and the dynamics row (ADE and DTW mean/best, step ratios to human, JSD on linear and log bins,
Wasserstein-1) with the reference rows a method is read against (a motionless trajectory, human against human), the
same row in the paper's layout, and the sample set's energy score and CRPS (``metrics.sample_scores``). For
trajectories (a model, a random walk, Center Bias's centre) it also prints the events table (fixations and saccades
by I-VT against the split's own gaze-type labels, ``metrics.events``) and, for K >= 2 samples, the
reliability table of the uncertainty regions (nominal coverage q against the share of frames whose true gaze the
q-region holds, ``gaze.uncertainty``) with the raw spread and with the calibrated factors: the model folder's
``region_calibration.json``, or factors fitted on ``--region_split`` (e.g. ``validation``; split conformal,
``--region_exchangeable``) and, with ``--save_region_calibration``, written there with the coverage they reach on
both splits.
``results.json`` holds the run's settings and ``EvaluationResult.to_dict()`` (metrics, dynamics references, PR curve,
clip ids; undefined values as ``null``). Each clip's first 64-frame window is
scored at frames [0, 9, ..., 63] with the fixation filter (the protocol of ``docs/metrics.md``).

Degrees (the AAE, the events' velocities and amplitudes): each clip through the camera its example carries
(``camera_model``/``camera_params``: Ego-Exo4D's takes carry their Aria fisheye at the served frame size), else
``--camera`` (a Project Aria calibration's fisheye), else a pinhole (the AAE: the protocol's 60 degrees; the events:
``--fov_deg``, 60 by default), as for EGTEA Gaze+ and Ego4D, which ship no intrinsics. ``--ignore_example_cameras``
measures every clip that way (the pinhole convention peers report Ego-Exo4D's AAE in).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from accelerate import Accelerator

from transformers_gazeflow import GazeFlowModel
from transformers_gazeflow.analysis.capture import config_number
from transformers_gazeflow.data.aria_calibration import read_video_camera
from transformers_gazeflow.data.atomic_files import atomic_write
from transformers_gazeflow.data.loading import load_gaze_dataset
from transformers_gazeflow.data.output_safety import check_outputs, files_of
from transformers_gazeflow.data.processing import GazeFlowVideoProcessor
from transformers_gazeflow.gaze.regions import EXCHANGEABLE_UNITS, RegionCalibration
from transformers_gazeflow.gaze.uncertainty import fit_region_calibration
from transformers_gazeflow.hub.model_folders import (
    ModelFolderError,
    load_model,
    load_region_calibration,
    load_video_processor,
    save_region_calibration,
)
from transformers_gazeflow.metrics.protocol_records import PROTOCOL_WINDOW
from transformers_gazeflow.models.gazeflow.generation_gazeflow import SamplingSettings
from transformers_gazeflow.models.gazeflow.geometry import DEFAULT_HORIZONTAL_FOV_DEG, NO_CAMERA
from transformers_gazeflow.training.arguments import parse_dataset_options
from transformers_gazeflow.training.datasets import DATASET_NAMES
from transformers_gazeflow.training.evaluation import (
    baseline_predictions,
    coverage_data,
    event_report,
    example_camera,
    grid_table_markdown,
    predict_clips,
    reliability_report,
    report_markdown,
    results_record,
    sampled,
    score,
    trajectories_of,
)
from transformers_gazeflow.training.processes import leave_process_group
from transformers_gazeflow.training.script_errors import run_script

GRID_K = (1, 10, 30, 50)
GRID_S = (1, 2, 5, 10, 50)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Evaluate GazeFlow or a baseline under the GLC-format protocol.")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model_name_or_path", help="a GazeFlow model folder (e.g. a train.py --output_dir) or hub id")
    source.add_argument(
        "--baseline",
        choices=["center_bias", "random_walk", "random_walk_free"],
        help="random_walk: each step around the previous frame's ground truth (the paper's wording); "
        "random_walk_free: a free-running walk from the clip centroid",
    )
    parser.add_argument("--dataset_name", required=True, choices=DATASET_NAMES)
    parser.add_argument("--data_dir", required=True)
    parser.add_argument("--dataset_config", default=None)
    parser.add_argument(
        "--dataset_options",
        default=None,
        metavar="KEY=VALUE,...",
        help="builder options over --dataset_config's (load_gaze_dataset's config), e.g. split_id=2 (EGTEA Gaze+) "
        "or seed=7,num_clips=400 (synthetic: clips of another draw)",
    )
    parser.add_argument("--split", default="test")
    parser.add_argument("--train_split", default="train", help="where the baselines are fitted")
    add_sampler_arguments(parser)
    parser.add_argument("--protocol", default="paper", choices=["paper", "glc"])
    parser.add_argument(
        "--sigma_px",
        type=float,
        default=None,
        help="Gaussian sigma of the maps in native px (default: the model's heatmap_sigma, 25 for "
        "baselines; the paper's 25 px is for 640x480 frames)",
    )
    parser.add_argument("--max_clips", type=int, default=None, help="evaluate only the first N clips (quick checks)")
    parser.add_argument("--grid", action="store_true", help="the K x S sweep of Table ks_grid (F1 and time per clip)")
    parser.add_argument(
        "--online",
        action="store_true",
        help="a causal model (causal=True) predicting online, frame by frame (GazeFlowStreamer, as "
        "gazeflow stream does), instead of generate() over the whole window",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--method_name", default=None, help="the row's name in the tables")
    parser.add_argument(
        "--output_dir",
        default=None,
        help="where results.json, results.md and frame_scores.npz go (default: "
        "runs/eval/<method>-<dataset>[-<config>]-<split>, named when written)",
    )
    add_camera_arguments(parser)
    add_region_arguments(parser)
    args = parser.parse_args(argv)
    args.dataset_options = dataset_options(parser, args.dataset_options)
    if args.save_region_calibration and args.region_split is None:
        parser.error("--save_region_calibration needs --region_split (the split the factors are fitted on)")
    return args


def dataset_options(parser: argparse.ArgumentParser, text: str | None) -> dict:
    """``--dataset_options`` as builder keyword arguments; the protocol's own (``windows``, ``window_frames``)
    cannot be changed."""
    try:
        return parse_dataset_options(
            text, ("windows", "window_frames"), f"the protocol's first {PROTOCOL_WINDOW} frames"
        )
    except ValueError as error:
        parser.error(str(error))


def add_sampler_arguments(parser: argparse.ArgumentParser) -> None:
    """K, S, the solver, the flow-time grid and tau; each defaults to the model config's."""
    parser.add_argument(
        "--num_samples", type=int, default=None, help="K (default: the model config's; 50 for baselines)"
    )
    parser.add_argument("--num_steps", type=int, default=None, help="S (default: the model config's)")
    parser.add_argument("--solver", default=None, choices=["euler", "heun", "midpoint"])
    parser.add_argument(
        "--time_grid_power",
        type=config_number("time_grid_power"),
        default=None,
        help="p of the sampler's flow-time grid s_i = 1 - (1 - i/S)^p (default: the model config's; 1: uniform)",
    )
    parser.add_argument(
        "--noise_scale",
        type=config_number("noise_scale"),
        default=None,
        help="tau, the sampling temperature x_0 = tau e (default: the model config's; 1: the paper's N(0, I))",
    )


def add_region_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the uncertainty regions' factors come from, and whether they are saved into the model folder."""
    parser.add_argument(
        "--region_split",
        default=None,
        help="fit the uncertainty regions' factors on this split (e.g. validation; default: the model "
        "folder's region_calibration.json, if any)",
    )
    parser.add_argument(
        "--region_exchangeable",
        choices=EXCHANGEABLE_UNITS,
        default="frames",
        help="the conformal fit's exchangeable unit: frames (the ceil((N + 1) q)-th smallest score; near q on new "
        "clips) or clips (each clip weighs one; coverage >= q on a new clip, about q / clips above it)",
    )
    parser.add_argument(
        "--save_region_calibration",
        action="store_true",
        help="write the factors fitted on --region_split into the model folder",
    )


def add_camera_arguments(parser: argparse.ArgumentParser) -> None:
    """The options that choose the cameras degrees go through (see the module docstring, "Degrees")."""
    parser.add_argument(
        "--fov_deg",
        type=float,
        default=60.0,
        help="horizontal field of view of the pinhole camera the events' degrees use (the angular error's)",
    )
    parser.add_argument(
        "--camera",
        default=None,
        metavar="CALIB.json",
        help="a Project Aria camera calibration (device calibration .json/.jsonl, e.g. a take's "
        "trajectory/online_calibration.jsonl, or the minimal FISHEYE624 form): the AAE and the events' degrees "
        "through that fisheye camera instead of the --fov_deg pinhole, for the clips that carry no camera of their own",
    )
    parser.add_argument(
        "--ignore_example_cameras",
        action="store_true",
        help="measure every clip's degrees through --camera / the --fov_deg pinhole, not the camera its example "
        "carries (Ego-Exo4D's takes carry their Aria fisheye; peers report its AAE through the 60 degree pinhole)",
    )


def load_model_and_processor(path: str) -> tuple[GazeFlowModel, GazeFlowVideoProcessor]:
    """The model (``hub.load_model``, whose errors name the folder) and the processor saved with it."""
    try:
        model = load_model(path)
    except ModelFolderError as err:
        raise ValueError(f"--model_name_or_path {path}: {err}") from err
    return model, load_video_processor(path, model.config)


def region_calibration(
    args: argparse.Namespace, model, processor, num_samples: int, num_steps: int, solver: str, accelerator: Accelerator
) -> tuple[RegionCalibration | None, str]:
    """The uncertainty regions' calibration and where it comes from: fitted on ``--region_split``, else the model
    folder's ``region_calibration.json``, else none."""
    if args.region_split is None:
        saved = load_region_calibration(args.model_name_or_path)
        if saved is None:
            return None, "the model has no region calibration"
        mismatch = saved.sampler_mismatch(model.config.noise_scale)
        if mismatch is not None:  # the reliability table then shows what the mismatch does
            print(f"evaluate.py: note: {mismatch}")
        return saved, f"the model folder's region_calibration.json ({saved.provenance.get('split', '?')})"
    held_out = load_split(args, args.region_split)
    clips = [held_out[i] for i in range(len(held_out))]
    if not clips:
        raise ValueError(f"--region_split {args.region_split} of {args.dataset_name} has no clips")
    predictions, _ = predict_clips(
        model, clips, processor, num_samples, num_steps, solver, args.seed, accelerator=accelerator, online=args.online
    )
    data = coverage_data(clips, predictions)
    where = split_label(args, args.region_split)
    provenance = {"split": where, "clips": len(clips), "frames": data.frames, "num_samples": num_samples}
    provenance.update(num_steps=num_steps, solver=solver, seed=args.seed, online=args.online)
    provenance.update(time_grid_power=model.config.time_grid_power, noise_scale=model.config.noise_scale)
    calibration = fit_region_calibration(data, exchangeable=args.region_exchangeable, provenance=provenance)
    calibration.provenance.update(
        coverage_raw=data.coverage(None).tolist(), coverage_calibrated=data.coverage(calibration).tolist()
    )
    return calibration, f"fitted on {where}, {data.frames} frames, {args.region_exchangeable} exchangeable"


def split_label(args: argparse.Namespace, split: str) -> str:
    """``dataset / split`` and, where given, the ``--dataset_options`` that chose the clips."""
    options = ",".join(f"{key}={value}" for key, value in args.dataset_options.items())
    return f"{args.dataset_name} / {split}" + (f" ({options})" if options else "")


def save_calibration(args: argparse.Namespace, calibration: RegionCalibration, data, clips: int) -> None:
    """``--save_region_calibration``: the factors into the model folder, with the coverage they reach on the
    evaluated split when it is another than the one they were fitted on."""
    if args.split != args.region_split:
        calibration.provenance["held_out"] = {
            "split": split_label(args, args.split),
            "clips": clips,
            "frames": data.frames,
            "coverage_raw": data.coverage(None).tolist(),
            "coverage_calibrated": data.coverage(calibration).tolist(),
        }
    path = save_region_calibration(args.model_name_or_path, calibration)
    factors = ", ".join(f"{q:g}: {f:.4f}" for q, f in zip(calibration.levels, calibration.factors))
    print(f"wrote the region factors ({factors}) to {path}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    check_result_outputs(args)
    accelerator = Accelerator()
    try:
        return run_evaluation(args, accelerator)
    finally:
        # every process leaves its process group before the interpreter exits: a process that finishes early
        # (the non-main ones return as soon as the predictions are gathered) and exits with the group still
        # open can abort in the communication backend's teardown ("terminate called without an active exception");
        # no wait for the others: the main process may score for longer than a collective's timeout
        leave_process_group(accelerator, wait_for_everyone=False)


def load_split(args: argparse.Namespace, split: str):
    """``split`` of ``--dataset_name``, one example per clip: its first protocol window (64 frames)."""
    return load_gaze_dataset(
        args.dataset_name,
        data_dir=args.data_dir,
        split=split,
        config_name=args.dataset_config,
        windows="first",
        window_frames=PROTOCOL_WINDOW,
        **args.dataset_options,
    )


def evaluation_camera(args: argparse.Namespace, examples: list[dict]):
    """The camera of the AAE and the events' degrees for the clips that carry none of their own: ``--camera``'s
    fisheye (the upright Aria video's), else None (the ``--fov_deg`` pinhole). Says which clips carry their own, and
    on Ego-Exo4D when clips are measured through the pinhole convention rather than Aria's fisheye."""
    carried = [example for example in examples if example_camera(example) is not None]
    if carried:
        models = sorted({example["camera_model"] for example in carried})
        print(
            f"evaluate.py: degrees of {len(carried)} of {len(examples)} clips through the camera each carries "
            f"({', '.join(models)}, at its served frame size); the others through "
            + ("--camera" if args.camera is not None else "the pinhole (see the next lines)")
        )
    if args.camera is not None:
        return read_video_camera(args.camera)
    if args.dataset_name == "egoexo4d" and len(carried) < len(examples):
        print(
            f"evaluate.py: note: AAE through a {DEFAULT_HORIZONTAL_FOV_DEG:g} degree pinhole (the protocol's "
            f"convention; the events' degrees through --fov_deg {args.fov_deg:g}); "
            "the takes' own cameras (without --ignore_example_cameras) or --camera CALIB.json give the angles of "
            "Aria's fisheye camera"
        )
    return None


def without_cameras(examples: list[dict]) -> list[dict]:
    """``--ignore_example_cameras``: the examples with ``camera_model`` ``"none"``, so the caller's camera applies."""
    return [{**example, "camera_model": NO_CAMERA, "camera_params": []} for example in examples]


def run_evaluation(args: argparse.Namespace, accelerator: Accelerator) -> int:
    """Predict (sharded over the processes) and, on the main process, score and write the results."""
    evaluated = load_split(args, args.split)
    examples = [
        evaluated[i] for i in range(len(evaluated) if args.max_clips is None else min(args.max_clips, len(evaluated)))
    ]
    if not examples:
        raise ValueError(f"--split {args.split} of {args.dataset_name} has no clips")
    method = args.method_name or (args.baseline or Path(args.model_name_or_path).name)
    results: dict = {
        "method": method,
        "dataset": args.dataset_name,
        "split": args.split,
        "clips": len(examples),
        "protocol": args.protocol,
    }
    if args.dataset_options:
        results["dataset_options"] = args.dataset_options
    if args.baseline:
        train = load_split(args, args.train_split)
        predictions = baseline_predictions(args.baseline, train, examples, args.num_samples or 50, args.seed)
        seconds, region, sigma = None, (None, "no region calibration"), args.sigma_px or 25.0
    else:
        predictions, seconds, region, sigma = predict_with_model(args, accelerator, examples, results)
    if not accelerator.is_main_process:
        return 0

    results["sigma_px"] = sigma
    if args.ignore_example_cameras:
        examples = without_cameras(examples)
    camera = evaluation_camera(args, examples)
    results["camera"] = camera.to_dict() if camera is not None else {"horizontal_fov_deg": args.fov_deg}
    own = [example_camera(example) for example in examples]
    if any(c is not None for c in own):
        results["example_cameras"] = {
            example["clip_id"]: c.to_dict() for example, c in zip(examples, own) if c is not None
        }
    result = score(examples, predictions, args.protocol, sigma, camera)
    events = reliability = None
    if trajectories_of(predictions) is not None:
        events = event_report(examples, predictions, args.fov_deg, camera)
        results.update(events=events)
    if sampled(predictions) or (trajectories_of(predictions) is not None and region[0] is not None):
        data = coverage_data(examples, predictions)
        reliability = reliability_report(data, *region, short="f_q per level" if region[0] is not None else None)
        results.update(reliability=reliability)
        if args.save_region_calibration:
            save_calibration(args, region[0], data, len(examples))
    report = report_markdown(
        method,
        result,
        title=f"{method} on {args.dataset_name} / {args.split} ({len(examples)} clips, protocol {args.protocol})",
        events=events,
        reliability=reliability,
    )
    if "grid" in results:
        report += "\n" + grid_table_markdown(results["grid"], GRID_K, GRID_S)
    print(report)
    write_results(default_output_dir(args, method), results_record(results, result, seconds), report, result)
    return 0


def default_output_dir(args: argparse.Namespace, method: str) -> Path:
    """``--output_dir``, or ``runs/eval/<method>-<dataset>[-<config>]-<split>`` (the results are always written)."""
    if args.output_dir:
        return Path(args.output_dir)
    parts = [method, args.dataset_name, args.dataset_config, args.split]
    return Path("runs") / "eval" / "-".join(str(part) for part in parts if part)


def predict_with_model(
    args: argparse.Namespace, accelerator: Accelerator, examples: list[dict], results: dict
) -> tuple[list, float, tuple[RegionCalibration | None, str], float]:
    """The model's predictions of ``examples`` (and with ``--grid`` the K x S sweep first), its seconds per clip,
    the uncertainty regions' calibration and where it comes from, and the maps' sigma; the sampling settings go into
    ``results``."""
    model, processor = load_model_and_processor(args.model_name_or_path)
    model = model.to(accelerator.device)
    if args.online and not model.config.causal:
        raise ValueError(
            f"--online needs a causal model (config causal=true); {args.model_name_or_path} is the "
            "windowed bidirectional model"
        )
    if args.time_grid_power is not None:  # checked >= 1 by parse_args
        model.config.time_grid_power = args.time_grid_power
    if args.noise_scale is not None:  # checked by parse_args (config_number)
        model.config.noise_scale = args.noise_scale
    settings = SamplingSettings.resolve(
        model.config, num_samples=args.num_samples, num_steps=args.num_steps, solver=args.solver
    )
    num_samples, num_steps, solver = settings.num_samples, settings.num_steps, settings.solver
    results.update(num_samples=num_samples, num_steps=num_steps, solver=solver)
    results["time_grid_power"] = model.config.time_grid_power
    results["noise_scale"] = model.config.noise_scale
    if args.grid:
        results["grid"] = sweep_grid(args, accelerator, model, processor, examples, solver)
    results["online"] = args.online
    predictions, seconds = predict_clips(
        model,
        examples,
        processor,
        num_samples,
        num_steps,
        solver,
        args.seed,
        accelerator=accelerator,
        progress=True,
        online=args.online,
    )
    region = region_calibration(args, model, processor, num_samples, num_steps, solver, accelerator)
    return predictions, seconds, region, args.sigma_px or model.config.heatmap_sigma


def sweep_grid(args: argparse.Namespace, accelerator: Accelerator, model, processor, examples: list[dict], solver: str):
    """``--grid``: F1 and seconds per clip for each K in ``GRID_K`` and S in ``GRID_S`` (Table ks_grid)."""
    grid = {}
    for k in GRID_K:
        for s in GRID_S:
            predictions, seconds = predict_clips(
                model, examples, processor, k, s, solver, args.seed, accelerator=accelerator
            )
            if accelerator.is_main_process:
                sigma = args.sigma_px or model.config.heatmap_sigma
                f1 = score(examples, predictions, args.protocol, sigma)["f1"]
                grid[f"K={k},S={s}"] = {"f1": f1, "seconds_per_clip": seconds}
                print(f"K={k:>2} S={s:>2}: F1 {f1:.4f}, {seconds:.3f} s per clip", flush=True)
    return grid


RESULT_FILES = ("results.json", "results.md", "frame_scores.npz")


def check_result_outputs(args: argparse.Namespace) -> None:
    """The result files never overwrite a file of the model folder the run reads: checked before it starts."""
    if args.output_dir:
        outputs = [("--output_dir", Path(args.output_dir) / name) for name in RESULT_FILES]
        check_outputs(outputs, files_of("--model_name_or_path", args.model_name_or_path))


def write_results(out: Path, results: dict, report: str, result) -> None:
    """``results.json`` (the run and the scores), ``results.md`` (the tables) and ``frame_scores.npz`` (each scored
    frame's metrics, keyed ``<clip>#<frame>``) in ``out``, each written whole (``atomic_write``)."""
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "results.json", json.dumps(results, indent=2, default=float))
    atomic_write(out / "results.md", report)
    frame_scores = {"keys": np.asarray([f"{c}#{s}" for c, s in result.frame_keys]), **result.frame_scores}
    atomic_write(out / "frame_scores.npz", lambda temporary: np.savez_compressed(temporary, **frame_scores))
    print(f"wrote {out / 'results.json'}, {out / 'results.md'} and per-frame scores {out / 'frame_scores.npz'}")


if __name__ == "__main__":
    run_script(main, "evaluate.py")
