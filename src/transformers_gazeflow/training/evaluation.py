"""Predicting a dataset split and scoring it under the protocol: what ``examples/evaluate.py`` runs.

* :func:`predict_clips` samples K trajectories for each clip's first window (the protocol window, 64 frames), each
  clip with its own seeded generator so results do not depend on batching or on how clips are split between
  processes; under Accelerate each process predicts its share and the results are gathered once. With ``online``
  a causal model predicts frame by frame instead (:func:`stream_clip`).
* :func:`baseline_predictions` gives the Center Bias and Random Walk priors for the same clips.
* :func:`score` feeds (ground truth, prediction) pairs to :class:`~transformers_gazeflow.metrics.GazeEvaluator`.
* :func:`report_markdown` prints the paper's two tables with :mod:`~transformers_gazeflow.metrics.tables` (the
  dynamics table with its motionless / human-halves reference rows, and the same rows in the paper's layout), the
  sample set's energy score and CRPS, and beside them, for trajectories (:func:`trajectories_of`: a model, a random
  walk, Center Bias's centre), the events table (:func:`event_report`) and, for K >= 2 samples, the reliability of
  the uncertainty regions (:func:`coverage_data`, ``gaze.uncertainty.fit_region_calibration``);
  :func:`grid_table_markdown` the K x S sweep, and :func:`results_record` is what ``results.json`` holds (the run,
  then ``EvaluationResult.to_dict()``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch

from ..data.collator import GazeFlowDataCollator
from ..data.processing import GazeFlowVideoProcessor
from ..metrics.protocol_records import PROTOCOL_WINDOW
from ..models.gazeflow.geometry import FisheyeCamera, PinholeCamera, camera_from_fields, camera_to_fields

BASELINES = ("random_walk", "random_walk_free")


def ground_truth(example: dict) -> dict:
    """The fields of a unified-schema example that the evaluator reads, as numpy arrays, and the camera the example
    carries (:func:`example_camera`; None: the evaluator's camera applies)."""
    return {
        "clip_id": example["clip_id"],
        "gaze": np.asarray(example["gaze"], np.float64),
        "gaze_type": np.asarray(example["gaze_type"], np.int64),
        "valid": np.asarray(example["valid"], bool),
        "width": int(example["width"]),
        "height": int(example["height"]),
        "camera": example_camera(example),
    }


def example_camera(example: dict) -> PinholeCamera | FisheyeCamera | None:
    """The camera of an example's frame: its ``camera_model`` and ``camera_params`` (``geometry.camera_from_fields``;
    ``"none"``, or an example without them: None)."""
    if example.get("camera_model") is None:
        return None
    try:
        return camera_from_fields(
            example["camera_model"], example.get("camera_params"), int(example["width"]), int(example["height"])
        )
    except ValueError as err:
        raise ValueError(f"example {example.get('clip_id')!r}: {err}") from None


def clip_generator(seed: int, clip_id: str, device: torch.device | str = "cpu") -> torch.Generator:
    """The noise generator of one clip: seeded by ``seed`` and the clip id, independent of order and batching.
    :func:`predict_clips` keeps it on the CPU whatever the model's device (the noise is drawn there and moved), so a
    seed gives the same samples on a GPU as on the CPU; a CUDA generator would draw other numbers."""
    from ..metrics.baselines import clip_seed

    return torch.Generator(device=device).manual_seed(clip_seed(seed, clip_id))


@torch.no_grad()
def predict_clips(
    model,
    examples: Sequence[dict],
    processor: GazeFlowVideoProcessor,
    num_samples: int,
    num_steps: int,
    solver: str,
    seed: int = 0,
    window: int = PROTOCOL_WINDOW,
    accelerator=None,
    progress: bool = False,
    online: bool = False,
) -> tuple[list[np.ndarray], float]:
    """K trajectories ``[K, n, 2]`` (unit coordinates) for each example's window, and the mean seconds per clip.

    ``online``: a causal model's frame-by-frame prediction (:func:`stream_clip`, what ``gazeflow stream`` does)
    instead of ``model.generate`` over the whole window. With an ``accelerator``, process r predicts examples r,
    r + P, ... and the predictions are gathered in the original order on every process.
    """
    rank = accelerator.process_index if accelerator is not None else 0
    world = accelerator.num_processes if accelerator is not None else 1
    device = next(model.parameters()).device
    collator = GazeFlowDataCollator(processor, num_frames=window)
    mine = list(range(rank, len(examples), world))
    iterator = mine
    if progress:
        from tqdm.auto import tqdm

        iterator = tqdm(mine, desc=f"predicting (K={num_samples}, S={num_steps})", disable=rank != 0)
    predictions: dict[int, np.ndarray] = {}
    seconds = 0.0
    for index in iterator:
        example = examples[index]
        batch = collator([example])
        frames = int(example["num_frames"])
        pixels = batch["pixel_values_videos"][:, :frames].to(device)
        _synchronize(device)
        start = time.perf_counter()
        # a fresh context per clip: accelerator.autocast() is a single-use generator context manager
        with accelerator.autocast() if accelerator is not None else contextlib.nullcontext():
            generator = clip_generator(seed, str(example["clip_id"]))
            if online:
                trajectories = stream_clip(model, pixels[0], num_samples, num_steps, solver, generator)
            else:
                trajectories = model.generate(
                    pixel_values_videos=pixels,
                    num_samples=num_samples,
                    num_steps=num_steps,
                    solver=solver,
                    generator=generator,
                ).trajectories[0]
        _synchronize(device)
        seconds += time.perf_counter() - start
        predictions[index] = trajectories.float().cpu().numpy()
    if accelerator is not None and world > 1:
        from accelerate.utils import gather_object

        gathered = gather_object([(predictions, seconds)])
        predictions, seconds = {}, 0.0
        for part, part_seconds in gathered:
            predictions.update(part)
            seconds += part_seconds
    ordered = [predictions[i] for i in range(len(examples))]
    return ordered, seconds / max(len(examples), 1)


def stream_clip(
    model, frames: torch.Tensor, num_samples: int, num_steps: int, solver: str, generator: torch.Generator
) -> torch.Tensor:
    """The causal model's online prediction of a clip, ``frames [T, 3, S, S]`` pushed one at a time through
    :class:`~transformers_gazeflow.generation.online.GazeFlowStreamer`: K trajectories ``[K, T, 2]``, frame t's
    samples made from frames <= t only."""
    from ..generation.online import GazeFlowStreamer

    streamer = GazeFlowStreamer(
        model, num_samples=num_samples, num_steps=num_steps, solver=solver, generator=generator, threads=None
    )  # the evaluation keeps the process's threads
    return torch.stack([streamer.push(frame).trajectories[0] for frame in frames], dim=1)


def baseline_predictions(
    name: str, train_examples: Iterable[dict], examples: Sequence[dict], num_samples: int = 50, seed: int = 0
) -> list[Any]:
    """Predictions of a prior fitted on ``train_examples`` (paper E.2): ``center_bias``, ``random_walk`` (each step
    drawn around the previous frame's ground truth, the paper's wording) or ``random_walk_free`` (a free-running
    walk from the clip centroid; see :class:`~transformers_gazeflow.metrics.RandomWalk`)."""
    from ..metrics import CenterBias, RandomWalk

    train = [ground_truth(example) for example in train_examples]
    if name == "center_bias":
        prior = CenterBias.fit(train)
        return [prior.predict(ground_truth(example)) for example in examples]
    if name in BASELINES:
        prior = RandomWalk.fit(train, anchor="free" if name == "random_walk_free" else "ground_truth")
        return [prior.predict(ground_truth(example), num_samples=num_samples, seed=seed) for example in examples]
    raise ValueError(f"--baseline must be one of {('center_bias',) + BASELINES}, got {name!r}")


def score(
    examples: Sequence[dict],
    predictions: Sequence[Any],
    protocol: str = "paper",
    sigma_px: float = 25.0,
    camera: Any = None,
):
    """Run the evaluator over every (example, prediction) pair; returns its ``EvaluationResult``. ``camera``: the
    AAE's camera (a ``geometry`` camera; None: the protocol's 60 degree pinhole)."""
    from ..metrics import GazeEvaluator

    if len(examples) != len(predictions):
        raise ValueError(f"{len(examples)} examples but {len(predictions)} predictions")
    evaluator = GazeEvaluator(protocol=protocol, sigma_px=sigma_px, camera=camera)
    for example, prediction in zip(examples, predictions):
        evaluator.add(ground_truth(example), prediction)
    return evaluator.compute()


def report_markdown(
    method: str, result, title: str | None = None, events: dict | None = None, reliability: dict | None = None
) -> str:
    """The paper's two tables for one evaluated method, formatted by :mod:`~transformers_gazeflow.metrics.tables`
    (the one home of the tables' columns): the main table, then the dynamics table with the evaluation's reference
    rows (a motionless trajectory, human against human) below the method and the method's row in the paper's layout,
    then the sample set's energy score and CRPS and (when given) the events table (``events``: :func:`event_report`)
    and the reliability table (``reliability``: :func:`reliability_report`). ``result`` is an ``EvaluationResult``;
    ``title``, when given, heads the report as a markdown ``##`` line."""
    from ..metrics.tables import (
        dynamics_table_markdown,
        events_table_markdown,
        main_table_markdown,
        paper_dynamics_table_markdown,
        reliability_table_markdown,
        sample_scores_table_markdown,
    )

    tables = (
        f"{main_table_markdown({method: result.metrics})}\n\n"
        f"{dynamics_table_markdown({method: result.metrics}, result.dynamics_references)}\n"
    )
    if "ade_mean" in result.metrics:
        tables += (
            f"\nIn the paper's layout (Table dynamics):\n\n{paper_dynamics_table_markdown({method: result.metrics})}\n"
        )
        tables += f"\nThe sample set's proper scores:\n\n{sample_scores_table_markdown({method: result.metrics})}\n"
    if events is not None:
        tables += f"\nFixations and saccades ({events['heading']}):\n\n"
        tables += f"{events_table_markdown(method, events['metrics'], events['labeller'])}\n"
    if reliability is not None:
        tables += f"\nUncertainty regions ({reliability['source']}):\n\n"
        tables += reliability_table_markdown(reliability["rows"], reliability["frames"], reliability.get("short"))
    return f"## {title}\n\n{tables}" if title else tables


def trajectories_of(predictions: Sequence[Any]) -> list[np.ndarray] | None:
    """The sampled trajectories ``[K, T, 2]`` of each prediction (an array, or a ``ClipPrediction`` with
    trajectories: a model, a random walk, Center Bias's centre), or None when some prediction has none."""
    from ..metrics.protocol_records import ClipPrediction

    found = []
    for prediction in predictions:
        trajectories = prediction.trajectories if isinstance(prediction, ClipPrediction) else prediction
        if not (isinstance(trajectories, np.ndarray) and trajectories.ndim == 3 and trajectories.shape[-1] == 2):
            return None
        found.append(trajectories)
    return found


def sampled(predictions: Sequence[Any]) -> bool:
    """Whether the predictions are sampled trajectories, at least two samples each (their spread is a region)."""
    found = trajectories_of(predictions)
    return found is not None and all(p.shape[0] >= 2 for p in found)


def coverage_data(examples: Sequence[dict], predictions: Sequence[np.ndarray]):
    """The uncertainty regions' held-out frames of a split (``gaze.uncertainty.CoverageData``, one clip per
    example): every frame whose true gaze is a position on the frame (valid, not off-frame)."""
    from ..data.gaze_types import OFF_FRAME, valid_mask
    from ..gaze.uncertainty import coverage_ratios, merge_coverage

    parts = []
    for example, samples in zip(examples, trajectories_of(predictions) or []):
        truth = ground_truth(example)
        n = min(samples.shape[1], len(truth["gaze_type"]))
        keep = np.flatnonzero(valid_mask(truth["gaze_type"][:n]) & (truth["gaze_type"][:n] != OFF_FRAME))
        if keep.size:
            parts.append(coverage_ratios(samples[:, keep], truth["gaze"][keep], truth["width"], truth["height"]))
    return merge_coverage(parts)


def reliability_report(data, calibration, source: str, short: str | None = None) -> dict:
    """The reliability table's record: nominal against observed coverage, raw and with ``calibration`` (a
    ``gaze.regions.RegionCalibration``, or None), and its factors; ``source`` says where it comes from, ``short``
    names it in the table's header."""
    from ..gaze.uncertainty import reliability_table

    record = {"rows": reliability_table(data, calibration), "frames": data.frames, "source": source}
    if calibration is not None:
        record.update(short=short, calibration=calibration.summary())
    return record


def event_report(
    examples: Sequence[dict], predictions: Sequence[np.ndarray], fov_deg: float, camera: Any = None
) -> dict:
    """Fixations and saccades of the predictions against the examples' gaze-type labels
    (:func:`~transformers_gazeflow.metrics.events.event_metrics`, I-VT at its default; each clip through the camera
    its example carries, else ``camera``, else the pinhole of ``fov_deg``)."""
    from ..metrics.events import event_metrics

    truths = [ground_truth(example) for example in examples]
    *clips, cameras = _event_inputs(examples, truths, predictions, camera)
    metrics = event_metrics(*clips, fov_deg=fov_deg, camera=cameras)
    defined = {
        row: {key: (None if value != value else value) for key, value in values.items()}
        for row, values in metrics.items()
    }  # NaN (no event of a kind) as None: valid JSON
    return {
        "labeller": "I-VT",
        "heading": "I-VT at 30 deg/s, " + _cameras_words([t["camera"] for t in truths], camera, fov_deg),
        "metrics": defined,
    }


def large_saccade_report(examples: Sequence[dict], predictions: Sequence[np.ndarray], fov_deg: float) -> dict:
    """Whether the predictions' samples make the recording's large saccades
    (:func:`~transformers_gazeflow.metrics.events.large_saccades`), over the frames :func:`event_report` scores and
    through the same cameras."""
    from ..metrics.events import large_saccades

    truths = [ground_truth(example) for example in examples]
    return large_saccades(*_event_inputs(examples, truths, predictions, None), fov_deg=fov_deg)


def _event_inputs(examples: Sequence[dict], truths: list[dict], predictions: Sequence[Any], camera: Any) -> tuple:
    """The per-clip arguments of the event metrics: the samples and the recording over the frames both have, their
    codes, frame rates, sizes, and each clip's camera (its own, else ``camera``; None: the metric's pinhole)."""
    predictions = trajectories_of(predictions)
    lengths = [min(p.shape[1], len(t["gaze_type"])) for p, t in zip(predictions, truths)]
    return (
        [p[:, :n] for p, n in zip(predictions, lengths)],
        [t["gaze"][:n] for t, n in zip(truths, lengths)],
        [t["gaze_type"][:n] for t, n in zip(truths, lengths)],
        [float(e["fps"]) for e in examples],
        [t["width"] for t in truths],
        [t["height"] for t in truths],
        [camera if t["camera"] is None else t["camera"] for t in truths],
    )


def _cameras_words(own: list, camera: Any, fov_deg: float) -> str:
    """How the events' heading names the cameras: the clips' own where they carry one, else ``camera``, else the
    pinhole of ``fov_deg``."""
    fallback = f"a {fov_deg:g} degree horizontal field of view" if camera is None else _camera_words(camera)
    carried = [c for c in own if c is not None]
    if not carried:
        return fallback
    models = ", ".join(sorted({camera_to_fields(c)[0] for c in carried}))
    words = f"each clip's own camera ({models}; {len(carried)} of {len(own)} clips)"
    return words if len(carried) == len(own) else f"{words}, the others {fallback}"


def _camera_words(camera: Any) -> str:
    """How the events' heading names a given camera (``geometry`` cameras describe themselves in ``to_dict``)."""
    described = camera.to_dict()
    if "params" in described:  # a FisheyeCamera: its model and focal length at its frame size
        return (
            f"the {described['model']} camera (f {described['params'][0]:.1f} px at "
            f"{described['width']}x{described['height']})"
        )
    return "the camera " + ", ".join(f"{key} {value}" for key, value in described.items())


def grid_table_markdown(grid: dict[str, dict[str, float]], ks: Sequence[int], steps: Sequence[int]) -> str:
    """The K x S sweep (paper Table ks_grid): F1 and seconds per clip for each ``grid["K=k,S=s"]``; a missing cell
    prints ``-``."""
    lines = ["| K \\ S | " + " | ".join(str(s) for s in steps) + " |", "|---|" + "---:|" * len(steps)]
    for k in ks:
        cells = []
        for s in steps:
            entry = grid.get(f"K={k},S={s}")
            cells.append("-" if entry is None else f"{entry['f1']:.3f} ({entry['seconds_per_clip']:.2f} s)")
        lines.append(f"| {k} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def results_record(run: dict[str, Any], result, seconds_per_clip: float | None = None) -> dict[str, Any]:
    """What ``results.json`` holds: the run's description (method, dataset, split, clips, protocol, sampler
    settings, sweep), then ``result.to_dict()`` (``metrics``, ``dynamics_references``, ``pr_curve``, ``clip_ids``;
    NaN written as ``null``) and the mean seconds per clip when the run was timed."""
    record = {**run, **result.to_dict()}
    if seconds_per_clip is not None:
        record["seconds_per_clip"] = float(seconds_per_clip)
    return record


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


__all__ = [
    "BASELINES",
    "predict_clips",
    "baseline_predictions",
    "score",
    "ground_truth",
    "clip_generator",
    "report_markdown",
    "grid_table_markdown",
    "results_record",
    "sampled",
    "trajectories_of",
    "coverage_data",
    "reliability_report",
    "event_report",
    "large_saccade_report",
]
