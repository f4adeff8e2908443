"""What the readouts of ``gazeflow predict`` cost next to the model: per-frame time of
:class:`~transformers_gazeflow.gaze.readout.GazeReadout` (spread radii, modes by mean-shift, degrees, I-VT or I-DT
labels, events) against the model's own streaming time on the same frames, measured side by side in one run.

The frames are a synthetic clip (``data.synthetic``, 128x96 at 24 fps) through the bundled model (or ``--model``);
the readouts then run on the model's own trajectories, chunk by chunk as the command feeds them, for each K asked
(the model predicts at each K too).

    python benchmarks/bench_readouts.py                       # K = 16 and 64, 240 frames, CPU
    python benchmarks/bench_readouts.py --num-samples 30 --frames 480 --events idt
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from results import add_results_argument, folder_model, shipped_model, write_section

from transformers_gazeflow.data.synthetic import SyntheticGazeSettings, generate_clip
from transformers_gazeflow.data.video_sources import open_video_source
from transformers_gazeflow.gaze.events import EventSettings
from transformers_gazeflow.gaze.readout import GazeReadout
from transformers_gazeflow.hub.model_folders import load_model, resolve_model
from transformers_gazeflow.models.gazeflow.generation_gazeflow import SamplingSettings
from transformers_gazeflow.models.gazeflow.geometry import FieldOfView
from transformers_gazeflow.pipelines.egocentric_gaze import GazeFlowPipeline


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None)
    parser.add_argument("--num-samples", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--frames", type=int, default=240)
    parser.add_argument("--events", choices=["ivt", "idt"], default="ivt")
    parser.add_argument("--threads", type=int, default=2)
    add_results_argument(parser)
    args = parser.parse_args()
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


if __name__ == "__main__":
    main()
