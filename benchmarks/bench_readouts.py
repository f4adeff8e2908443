"""What the readouts of ``gazeflow predict`` cost next to the model: per-frame time of
:class:`~transformers_gazeflow.gaze.readout.GazeReadout` (spread radii, modes by mean-shift, degrees, I-VT or I-DT
labels, events) against the model's own streaming time on the same frames, measured side by side in one run.

The frames are a synthetic clip (``data.synthetic``, 128x96 at 24 fps) through the bundled model (or ``--model``);
the readouts then run on the model's own trajectories, chunk by chunk as the command feeds them, for each K asked
(the model predicts at each K too).

``--write-stage`` times ``gazeflow predict``'s write stage without a model, on one thread: the K samples are the
synthetic gaze walk (fixations and saccades, 640x480 at 30 fps) plus Gaussian scatter, fed in chunks of 32 frames.
It prints, in ms per frame, the readouts (:class:`GazeReadout`) and, of them, the uncertainty alone (spreads,
regions and the mean-shift's modes: ``describe_uncertainty``) and, of that, the modes alone (``count_modes``),
``gaze.csv``'s rows written one by one with the csv module as before (:func:`per_row_csv`) beside the same rows
formatted a column at a time (``GazeCsvWriter``, and whether the two files are the same bytes), ``gaze.parquet``
(``GazeParquetWriter``), the events' files (``write_events``: ``fixations.csv`` and ``saccades.csv``), and the
whole stage of each format (:class:`ReadoutFiles`: readouts, table, events' CSVs and scanpaths, as ``gazeflow
predict`` writes them). ``--repeats N`` times every part N times and prints the fastest of each (on a machine shared
with other jobs, the least disturbed).

    python benchmarks/bench_readouts.py                       # K = 16 and 64, 240 frames, CPU
    python benchmarks/bench_readouts.py --num-samples 30 --frames 480 --events idt
    OMP_NUM_THREADS=1 python benchmarks/bench_readouts.py --write-stage --num-samples 30 --frames 3000
    OMP_NUM_THREADS=1 python benchmarks/bench_readouts.py --write-stage --num-samples 30 --frames 1920 --repeats 5
"""

from __future__ import annotations

import argparse
import csv
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from results import add_results_argument, folder_model, shipped_model, write_section

from transformers_gazeflow.data.synthetic import SyntheticGazeSettings, generate_clip
from transformers_gazeflow.data.video_sources import open_video_source
from transformers_gazeflow.gaze.events import EventSettings
from transformers_gazeflow.gaze.readout import GazeReadout
from transformers_gazeflow.gaze.uncertainty import count_modes, describe_uncertainty
from transformers_gazeflow.hub.model_folders import load_model, resolve_model
from transformers_gazeflow.models.gazeflow.generation_gazeflow import SamplingSettings
from transformers_gazeflow.models.gazeflow.geometry import FieldOfView, unit_to_pixels
from transformers_gazeflow.outputs.gaze_parquet import GazeParquetWriter, import_pyarrow
from transformers_gazeflow.outputs.readouts import ReadoutFiles
from transformers_gazeflow.outputs.writers import (
    CSV_COLUMNS,
    EVENT_NAMES,
    READOUT_COLUMNS,
    GazeCsvWriter,
    write_events,
)
from transformers_gazeflow.pipelines.egocentric_gaze import GazeFlowPipeline


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None)
    parser.add_argument("--num-samples", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--frames", type=int, default=240)
    parser.add_argument("--events", choices=["ivt", "idt"], default="ivt")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--write-stage", action="store_true", help="time the write stage on one thread, no model")
    parser.add_argument(
        "--repeats", type=int, default=1, help="--write-stage: time each part this many times and print the fastest"
    )
    add_results_argument(parser)
    args = parser.parse_args()
    if args.write_stage:
        return write_stage(args)
    torch.set_num_threads(args.threads)
    settings = SyntheticGazeSettings(
        num_clips=1, min_frames=args.frames, max_frames=args.frames, width=128, height=96, fps=24.0, seed=5
    )
    clip = generate_clip(settings, 0)
    frames = np.stack(list(clip.frames()))
    pipe = GazeFlowPipeline(model=load_model(resolve_model(args.model)))  # what gazeflow predict runs
    print("| K | model ms / frame | readouts ms / frame | readouts / model |\n| ---: | ---: | ---: | ---: |")
    rows = []
    for k in args.num_samples:
        source = open_video_source(frames, fps=clip.fps)
        started = time.perf_counter()
        chunks = list(pipe.stream_chunks(source, SamplingSettings.resolve(pipe.model.config, num_samples=k)))
        model_ms = 1000 * (time.perf_counter() - started) / len(frames)
        readout = GazeReadout(clip.width, clip.height, clip.fps, FieldOfView(), k, EventSettings(args.events))
        started = time.perf_counter()
        for chunk in chunks:
            readout.feed(chunk.start, chunk.trajectories)
        readout.finish()
        readout_ms = 1000 * (time.perf_counter() - started) / len(frames)
        print(f"| {k} | {model_ms:.2f} | {readout_ms:.2f} | {readout_ms / model_ms:.3f} |", flush=True)
        rows.append({"K": k, "model_ms_per_frame": model_ms, "readouts_ms_per_frame": readout_ms})
    figures = {"frames": len(frames), "events": args.events, "rows": rows}
    model = folder_model(args.model, args.model) if args.model else shipped_model()
    write_section(args.results_dir, "bench_readouts", "default", figures, [model])


def per_row_csv(path: Path, parts: list, width: int, height: int, fps: float) -> None:
    """``gaze.csv`` with readouts as it was written before its cells were formatted a column at a time: one
    ``csv.writer.writerow`` and one ``f"{value:.6f}"`` per cell (the reference of the byte comparison)."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS + READOUT_COLUMNS)
        for part in parts:
            samples = part.trajectories.astype(np.float64)
            everything = np.concatenate([samples.mean(axis=0)[None], samples])
            pixels = unit_to_pixels(everything, width, height)
            u = part.uncertainty
            for offset in range(part.num_frames):
                frame = part.first + offset
                t_ms = f"{frame * 1000.0 / fps:.3f}"
                for row in range(everything.shape[0]):
                    (x, y), (px, py) = everything[row, offset], pixels[row, offset]
                    x_deg, y_deg = part.degrees[row, offset]
                    cells = [f"{x_deg:.3f}", f"{y_deg:.3f}", EVENT_NAMES.get(int(part.labels[row, offset]), "")]
                    if row == 0:
                        cells += [f"{part.p_saccade[offset]:.3f}"]
                        cells += [f"{u.spread(q)[offset]:.2f}" for q in (0.5, 0.9)]
                        cells += [f"{u.spread(q, 'deg')[offset]:.3f}" for q in (0.5, 0.9)]
                        cells += [f"{u.region(0.9)[offset]:.2f}", f"{u.region(0.9, 'deg')[offset]:.3f}"]
                        cells += [str(int(u.modes[offset]))]
                    else:
                        cells += [""] * 8
                    row_cells = ["video", frame, t_ms, f"{x:.6f}", f"{y:.6f}", f"{px:.2f}", f"{py:.2f}", row - 1]
                    writer.writerow(row_cells + cells)


def walk_samples(frames: int, k: int, seed: int = 5) -> np.ndarray:
    """``[K, T, 2]`` float32: the synthetic gaze walk (fixations and saccades), each sample at its own offset from it
    (sd 2% of the frame) drifting slowly (sd 0.1% a frame), as a model's samples are smooth trajectories."""
    settings = SyntheticGazeSettings(num_clips=1, min_frames=frames, max_frames=frames, fps=30.0, seed=seed)
    gaze = generate_clip(settings, 0).gaze.gaze.astype(np.float64)
    rng = np.random.default_rng(seed)
    offsets = rng.normal(0, 0.02, (k, 1, 2)) + np.cumsum(rng.normal(0, 0.001, (k, frames, 2)), axis=1)
    return np.clip(gaze[None] + offsets, 0, 1).astype(np.float32)


def time_write_stage(samples: np.ndarray, folder: Path, events: EventSettings, chunk: int = 32) -> dict:
    """Seconds of each part of the write stage on ``samples`` ``[K, T, 2]`` (640x480 at 30 fps), and whether the
    per-row and the column-wise ``gaze.csv`` are the same bytes."""
    width, height, fps, (k, frames) = 640, 480, 30.0, samples.shape[:2]
    camera, starts = FieldOfView().for_frame(width, height), range(0, frames, chunk)
    started = time.perf_counter()
    readout = GazeReadout(width, height, fps, camera, k, events)
    parts = [part for s in starts for part in readout.feed(s, samples[:, s : s + chunk])[1]] + readout.finish()
    seconds = {"readouts": time.perf_counter() - started}
    started = time.perf_counter()
    for s in starts:  # the readouts' share for spreads, regions and modes
        describe_uncertainty(samples[:, s : s + chunk], width, height, camera)
    seconds["uncertainty"] = time.perf_counter() - started
    pixels = unit_to_pixels(samples.astype(np.float64), width, height)
    started = time.perf_counter()
    for s in starts:  # the uncertainty's share for the mean-shift's modes
        count_modes(pixels[:, s : s + chunk])
    seconds["modes"] = time.perf_counter() - started
    started = time.perf_counter()
    write_events(folder, readout.events, "video", width, height, fps)
    seconds["events_csvs"] = time.perf_counter() - started
    started = time.perf_counter()
    per_row_csv(folder / "per_row.csv", parts, width, height, fps)
    seconds["csv_per_row"] = time.perf_counter() - started
    for name, writer in (("csv", GazeCsvWriter), ("parquet", GazeParquetWriter)):
        started = time.perf_counter()
        with writer(folder / f"gaze.{name}", "video", width, height, fps, readouts=True) as table:
            for part in parts:
                table.write(part.first, part.trajectories, part)
        seconds[name] = time.perf_counter() - started
        files = {key: folder / f"{name}.{key}" for key in ("fixations", "saccades", "scanpaths")}
        started = time.perf_counter()
        stage = ReadoutFiles(folder / f"stage.{name}", files, "video", width, height, fps, k, camera, events, None,
                             table_format=name)  # fmt: skip
        for s in starts:
            stage.write(s, samples[:, s : s + chunk])
        stage.close()
        seconds[f"stage_{name}"] = time.perf_counter() - started
    return {**seconds, "same_bytes": (folder / "per_row.csv").read_bytes() == (folder / "gaze.csv").read_bytes()}


def write_stage(args: argparse.Namespace) -> None:
    """``--write-stage``: the write stage's parts in ms per frame, the old per-row CSV beside the new one."""
    import_pyarrow()
    print(
        "| K | readouts | of which uncertainty | of which modes | gaze.csv per row (before) | gaze.csv by column "
        "| same bytes | gaze.parquet | fixations.csv + saccades.csv | write stage, csv | write stage, parquet |\n"
        "| ---: | ---: | ---: | ---: | ---: | ---: | :---: | ---: | ---: | ---: | ---: |"
    )
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_readouts_") as folder:
        time_write_stage(walk_samples(64, 2), Path(folder), EventSettings(args.events))  # imports done (pyarrow's)
        for k in args.num_samples:
            samples, runs = walk_samples(args.frames, k), []
            for _ in range(args.repeats):
                runs.append(time_write_stage(samples, Path(folder), EventSettings(args.events)))
            same = all(run.pop("same_bytes") for run in runs)
            seconds = {key: min(run[key] for run in runs) for key in runs[0]}  # the fastest of the repeats
            ms = {key: 1000 * value / args.frames for key, value in seconds.items()}
            print(
                f"| {k} | {ms['readouts']:.3f} | {ms['uncertainty']:.3f} | {ms['modes']:.3f} | {ms['csv_per_row']:.3f} "
                f"| {ms['csv']:.3f} "
                f"| {'yes' if same else 'NO'} | {ms['parquet']:.3f} | {ms['events_csvs']:.3f} | {ms['stage_csv']:.3f} "
                f"| {ms['stage_parquet']:.3f} |",
                flush=True,
            )
            rows.append({"K": k, **{f"{key}_ms_per_frame": value for key, value in ms.items()}, "same_bytes": same})
    figures = {"frames": args.frames, "events": args.events, "threads": torch.get_num_threads(), "rows": rows}
    figures["repeats"] = args.repeats
    write_section(args.results_dir, "bench_readouts", "write_stage", figures, [])


if __name__ == "__main__":
    main()
