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

from transformers_gazeflow.data.gaze_common import PARITY_FIXED
from transformers_gazeflow.data.loading import (
    NO_LABEL,
    BuildLog,
    GazeBuilderOptions,
    clip_window_examples,
    gaze_example_features,
    split_clip_windows,
    validate_options,
)
from transformers_gazeflow.data.synthetic.dataset import generate_dataset, load_dataset_records
from transformers_gazeflow.data.synthetic.settings import SyntheticGazeSettings

logger = logging.getLogger(__name__)

_DESCRIPTION = """Procedural egocentric-like clips (a textured work surface seen by a panning, shaking head camera,
moving objects, hands reaching for them) rendered to mp4, with human-like gaze: fixations with drift, 2-4 frame
saccades, blinks and untracked frames (invalid), off-frame samples (clamped). Each clip's task (its `action`,
0-based) decides which object the gaze mostly serves; that object's colour and shape identify the task."""
_CITATION = ""
_HOMEPAGE = "https://github.com/transformers-gazeflow/transformers-gazeflow"
_LICENSE = "Apache-2.0 (generated data)"
_SETTINGS_FIELDS = dataclasses.fields(SyntheticGazeSettings)


def _settings(self) -> SyntheticGazeSettings:
    """The generation settings of this config (validated by ``SyntheticGazeSettings``)."""
    return SyntheticGazeSettings(**{field.name: getattr(self, field.name) for field in _SETTINGS_FIELDS})


#: Every field of ``SyntheticGazeSettings`` (same names and defaults, defined there only), the shared builder options
#: (``GazeBuilderOptions``: ``window_frames``, ``window_stride``, ``windows``, ``parity``, ``strict``) and
#: ``num_workers`` (processes rendering the clips; does not change the data).
SyntheticGazeConfig = dataclasses.make_dataclass(
    "SyntheticGazeConfig",
    [(field.name, field.type, dataclasses.field(default=field.default)) for field in _SETTINGS_FIELDS]
    + [("num_workers", "int", dataclasses.field(default=1))],
    bases=(datasets.BuilderConfig, GazeBuilderOptions),
    namespace={
        "settings": _settings,
        "__module__": __name__,
        "__doc__": (
            "Generation settings (the fields of ``SyntheticGazeSettings``), the shared builder options of "
            "``GazeBuilderOptions`` and ``num_workers`` (processes rendering the clips; does not change the data)."
        ),
    },
)


class SyntheticGaze(datasets.GeneratorBasedBuilder):
    """Synthetic egocentric gaze: ``train``, ``validation`` and ``test`` splits; configs from ``tiny`` (tests)
    to ``large`` (training runs). Any setting can be overridden, e.g. ``SyntheticGaze(config_name="small",
    num_clips=50, seed=3)``."""

    BUILDER_CONFIG_CLASS = SyntheticGazeConfig
    VERSION = datasets.Version("1.0.0")
    BUILDER_CONFIGS = [
        SyntheticGazeConfig(
            name="tiny",
            version=VERSION,
            num_clips=6,
            min_frames=16,
            max_frames=80,
            width=64,
            height=48,
            description="6 clips of 16-80 frames at 64x48, for tests",
        ),
        SyntheticGazeConfig(
            name="small",
            version=VERSION,
            num_clips=400,
            min_frames=32,
            max_frames=160,
            description="400 clips of 32-160 frames at 128x96 (quick experiments)",
        ),
        SyntheticGazeConfig(
            name="default",
            version=VERSION,
            num_clips=2000,
            min_frames=32,
            max_frames=192,
            description="2,000 clips of 32-192 frames at 128x96 (CPU training runs)",
        ),
        SyntheticGazeConfig(
            name="large",
            version=VERSION,
            num_clips=8000,
            min_frames=48,
            max_frames=256,
            width=160,
            height=120,
            description="8,000 clips of 48-256 frames at 160x120",
        ),
    ]
    DEFAULT_CONFIG_NAME = "default"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.build_log = BuildLog()  # the builders' shared record; generated clips are never dropped

    def _info(self) -> datasets.DatasetInfo:
        return datasets.DatasetInfo(
            description=_DESCRIPTION,
            features=gaze_example_features(),
            homepage=_HOMEPAGE,
            license=_LICENSE,
            citation=_CITATION,
        )

    def _clip_dir(self, settings: SyntheticGazeSettings) -> Path:
        """``data_dir`` if given, else a folder under the ``datasets`` cache named by the settings."""
        if self.config.data_dir is not None:
            return Path(self.config.data_dir).expanduser().resolve()
        digest = hashlib.sha256(json.dumps(settings.to_dict(), sort_keys=True).encode()).hexdigest()[:12]
        return Path(self._cache_dir_root) / "synthetic_gaze_clips" / f"{self.config.name}-{digest}"

    def _split_generators(self, dl_manager):
        config = self.config
        validate_options(config)
        if config.parity != PARITY_FIXED:
            raise ValueError(
                f"synthetic_gaze has no reference loader to reproduce: parity must be "
                f"{PARITY_FIXED!r}, got {config.parity!r}. To read synthetic clips the way GLC does, "
                "write them with write_egtea_layout and load them with "
                "load_gaze_dataset('egtea', data_dir=..., parity='glc')."
            )
        settings = config.settings()  # validates the generation settings
        clip_dir = self._clip_dir(settings)
        if not (clip_dir / "synthetic_gaze.json").is_file():
            generate_dataset(clip_dir, settings, num_workers=max(1, int(config.num_workers or 1)))
        stored, records = load_dataset_records(clip_dir)
        if stored != settings:
            raise ValueError(
                f"{clip_dir} holds a synthetic_gaze dataset with other settings ({stored}) than the "
                f"config asks for ({settings}); use another data_dir"
            )
        by_split = {split: [r for r in records if r["split"] == split] for split in ("train", "validation", "test")}
        empty = [split for split, clips in by_split.items() if not clips]
        if empty:  # only with fewer than 3 clips (or a zero fraction): datasets cannot hold an empty split
            logger.warning(
                "synthetic_gaze: no clip falls in %s with %d clips; those splits are left out",
                empty,
                settings.num_clips,
            )
        return [
            datasets.SplitGenerator(name=split, gen_kwargs={"records": clips, "split": split})
            for split, clips in by_split.items()
            if clips
        ]

    def _generate_examples(self, records: list[dict], split: str):
        config = self.config
        windows = split_clip_windows(config, split)
        for record in records:
            total = int(record["num_frames"])
            yield from clip_window_examples(
                clip_id=record["clip_id"],
                video_path=record["video_path"],
                clip_first_frame=0,
                fps=record["fps"],
                width=record["width"],
                height=record["height"],
                gaze=np.asarray(record["gaze"], np.float32).reshape(total, 2),
                gaze_type=np.asarray(record["gaze_type"], np.int8),
                windows=windows,
                window_frames=config.window_frames,
                window_stride=config.window_stride,
                action=record["task"],
                verb=NO_LABEL,
                noun=NO_LABEL,
            )


__all__ = ["SyntheticGaze", "SyntheticGazeConfig"]
