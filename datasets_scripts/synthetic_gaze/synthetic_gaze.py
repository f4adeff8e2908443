"""synthetic_gaze: a procedural, seeded egocentric gaze dataset, in GazeFlow's unified example schema.

A ``datasets.GeneratorBasedBuilder`` in the classic loading-script form. ``datasets`` 4+ refuses scripts in
``load_dataset``; use the builder directly (or ``transformers_gazeflow``'s dataset loader)::

    builder = SyntheticGaze(data_dir="synthetic_gaze_tiny", config_name="tiny")
    builder.download_and_prepare()
    train = builder.as_dataset(split="train")

When ``data_dir`` holds no generated clips yet, the builder renders them there first (seeded, so the same config
always gives the same clips); without ``data_dir`` it renders them under the ``datasets`` cache. The generator
lives in ``transformers_gazeflow.data.synthetic``; the dataset card (``README.md`` beside this file) describes it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from pathlib import Path

import datasets
import numpy as np

from transformers_gazeflow.data.synthetic import (
    SyntheticGazeSettings,
    generate_dataset,
    load_dataset_records,
)
from transformers_gazeflow.windows import window_starts

logger = logging.getLogger(__name__)

_DESCRIPTION = """Procedural egocentric-like clips (a textured work surface seen by a panning, shaking head camera,
moving objects, hands reaching for them) rendered to mp4, with human-like gaze: fixations with drift, 2-4 frame
saccades, blinks and untracked frames (invalid), off-frame samples (clamped). Each clip's task (its `action`,
0-based) decides which object the gaze mostly serves; that object's colour and shape identify the task."""
_CITATION = ""
_HOMEPAGE = "https://github.com/transformers-gazeflow/transformers-gazeflow"
_LICENSE = "Apache-2.0 (generated data)"
NO_LABEL = -1
WINDOW_MODES = ("all", "first")
_SETTING_NAMES = tuple(field.name for field in dataclasses.fields(SyntheticGazeSettings))


@dataclasses.dataclass
class SyntheticGazeConfig(datasets.BuilderConfig):
    """Generation settings (see ``SyntheticGazeSettings``) plus the example windows.

    ``window_frames`` (64) / ``window_stride`` (32): the windows; ``windows``: ``"all"`` (windows covering the whole
    clip, by ``window_starts``), ``"first"`` (the first window only) or ``None`` (``"all"`` for train, ``"first"``
    for validation and test). ``num_workers``: processes rendering the clips (does not change the data).
    """

    num_clips: int = 8
    min_frames: int = 16
    max_frames: int = 80
    width: int = 128
    height: int = 96
    fps: float = 24.0
    num_tasks: int = 4
    seed: int = 0
    min_distractors: int = 2
    max_distractors: int = 4
    validation_fraction: float = 0.1
    test_fraction: float = 0.1
    window_frames: int = 64
    window_stride: int = 32
    windows: str | None = None
    num_workers: int = 1

    def settings(self) -> SyntheticGazeSettings:
        return SyntheticGazeSettings(**{name: getattr(self, name) for name in _SETTING_NAMES})


def features() -> datasets.Features:
    """The unified example schema (``../shared/specs/data.md``, "Unified example schema")."""
    return datasets.Features({
        "clip_id": datasets.Value("string"),
        "video_path": datasets.Value("string"),
        "window_start": datasets.Value("int32"),
        "num_frames": datasets.Value("int32"),
        "fps": datasets.Value("float32"),
        "width": datasets.Value("int32"),
        "height": datasets.Value("int32"),
        "gaze": datasets.Array2D(shape=(None, 2), dtype="float32"),
        "gaze_type": datasets.Sequence(datasets.Value("int8")),
        "valid": datasets.Sequence(datasets.Value("bool")),
        "action": datasets.Value("int32"),
        "verb": datasets.Value("int32"),
        "noun": datasets.Value("int32"),
    })


class SyntheticGaze(datasets.GeneratorBasedBuilder):
    """Synthetic egocentric gaze: ``train``, ``validation`` and ``test`` splits; configs from ``tiny`` (tests)
    to ``large`` (training runs). Any setting can be overridden, e.g. ``SyntheticGaze(config_name="small",
    num_clips=50, seed=3)``."""

    BUILDER_CONFIG_CLASS = SyntheticGazeConfig
    VERSION = datasets.Version("1.0.0")
    BUILDER_CONFIGS = [
        SyntheticGazeConfig(name="tiny", version=VERSION, num_clips=6, min_frames=16, max_frames=80, width=64,
                            height=48, description="6 clips of 16-80 frames at 64x48, for tests"),
        SyntheticGazeConfig(name="small", version=VERSION, num_clips=400, min_frames=32, max_frames=160,
                            description="400 clips of 32-160 frames at 128x96 (quick experiments)"),
        SyntheticGazeConfig(name="default", version=VERSION, num_clips=2000, min_frames=32, max_frames=192,
                            description="2,000 clips of 32-192 frames at 128x96 (CPU training runs)"),
        SyntheticGazeConfig(name="large", version=VERSION, num_clips=8000, min_frames=48, max_frames=256,
                            width=160, height=120, description="8,000 clips of 48-256 frames at 160x120"),
    ]
    DEFAULT_CONFIG_NAME = "default"

    def _info(self) -> datasets.DatasetInfo:
        return datasets.DatasetInfo(description=_DESCRIPTION, features=features(), homepage=_HOMEPAGE,
                                    license=_LICENSE, citation=_CITATION)

    def _clip_dir(self, settings: SyntheticGazeSettings) -> Path:
        """``data_dir`` if given, else a folder under the ``datasets`` cache named by the settings."""
        if self.config.data_dir is not None:
            return Path(self.config.data_dir).expanduser().resolve()
        digest = hashlib.sha256(json.dumps(settings.to_dict(), sort_keys=True).encode()).hexdigest()[:12]
        return Path(self._cache_dir_root) / "synthetic_gaze_clips" / f"{self.config.name}-{digest}"

    def _split_generators(self, dl_manager):
        config = self.config
        if not isinstance(config.window_frames, int) or config.window_frames < 1:
            raise ValueError(f"window_frames must be a positive int, got {config.window_frames!r}")
        if not isinstance(config.window_stride, int) or not 1 <= config.window_stride <= config.window_frames:
            raise ValueError(f"window_stride must be an int in [1, window_frames={config.window_frames}], "
                             f"got {config.window_stride!r}")
        if config.windows is not None and config.windows not in WINDOW_MODES:
            raise ValueError(f"windows must be one of {WINDOW_MODES} or None, got {config.windows!r}")
        settings = config.settings()  # validates the generation settings
        clip_dir = self._clip_dir(settings)
        if not (clip_dir / "synthetic_gaze.json").is_file():
            generate_dataset(clip_dir, settings, num_workers=max(1, int(config.num_workers or 1)))
        stored, records = load_dataset_records(clip_dir)
        if stored != settings:
            raise ValueError(f"{clip_dir} holds a synthetic_gaze dataset with other settings ({stored}) than the "
                             f"config asks for ({settings}); use another data_dir")
        by_split = {split: [r for r in records if r["split"] == split] for split in ("train", "validation", "test")}
        empty = [split for split, clips in by_split.items() if not clips]
        if empty:  # only with fewer than 3 clips (or a zero fraction): datasets cannot hold an empty split
            logger.warning("synthetic_gaze: no clip falls in %s with %d clips; those splits are left out",
                           empty, settings.num_clips)
        return [datasets.SplitGenerator(name=split, gen_kwargs={"records": clips, "split": split})
                for split, clips in by_split.items() if clips]

    def _generate_examples(self, records: list[dict], split: str):
        config = self.config
        mode = config.windows if config.windows is not None else ("all" if split == "train" else "first")
        for record in records:
            total = int(record["num_frames"])
            gaze = np.asarray(record["gaze"], np.float32).reshape(total, 2)
            gaze_type = np.asarray(record["gaze_type"], np.int8)
            valid = np.asarray(record["valid"], bool)
            starts = window_starts(total, config.window_frames, config.window_stride) if mode == "all" else [0]
            length = min(config.window_frames, total)
            for start in starts:
                window = slice(start, start + length)
                yield f"{record['clip_id']}@{start}", {
                    "clip_id": record["clip_id"],
                    "video_path": str(Path(record["video_path"]).absolute()),
                    "window_start": start,
                    "num_frames": length,
                    "fps": float(record["fps"]),
                    "width": int(record["width"]),
                    "height": int(record["height"]),
                    "gaze": gaze[window],
                    "gaze_type": gaze_type[window],
                    "valid": valid[window],
                    "action": int(record["task"]),
                    "verb": NO_LABEL,
                    "noun": NO_LABEL,
                }


__all__ = ["SyntheticGaze", "SyntheticGazeConfig", "features"]
