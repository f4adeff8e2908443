"""The Ego4D gaze subset as windows of per-frame gaze, in GazeFlow's unified example schema.

A ``datasets.GeneratorBasedBuilder`` in the classic loading-script form. ``datasets`` 4+ refuses scripts in
``load_dataset``; use ``transformers_gazeflow.load_gaze_dataset("ego4d", data_dir=..., split=...)`` or the builder
directly. The raw formats and GLC's quirks (the parsing rules) live in
``transformers_gazeflow.data.ego4d_format``. Clips are GLC's 5-second clips, read straight from the full videos by
frame range (no cutting step). The dataset card (``README.md`` beside this file) lists the expected folder layout.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import datasets
import numpy as np

from transformers_gazeflow.data.ego4d_format import (
    EGO4D_CLIP_SECONDS,
    EGO4D_GLC_SKIPPED_VIDEOS,
    EGO4D_NON_GAZE_FILES,
    ego4d_clip_starts,
    ego4d_label_rows,
    is_ego4d_gaze_csv,
    parse_ego4d_gaze,
    parse_glc_clip_path,
    read_untracked_intervals,
)
from transformers_gazeflow.data.gaze_common import PARITY_GLC, GazeTrack, ParseReport, read_text
from transformers_gazeflow.data.gaze_types import UNTRACKED
from transformers_gazeflow.data.loading import (
    BuildLog,
    GazeBuilderOptions,
    clip_window_examples,
    gaze_example_features,
    split_clip_windows,
    validate_options,
)
from transformers_gazeflow.data.video import VideoDecodeError, VideoInfo, probe_video

logger = logging.getLogger(__name__)

_DESCRIPTION = """The Ego4D eye-tracking subset (27 videos, about 31 hours, 30 fps) as used by GLC and CSTS: 5-second
clips of the full-scale videos with per-frame gaze derived from the 250 Hz gaze CSVs. Each example is one window
of at most 64 frames of one clip with its per-frame gaze point, gaze type and validity (no action labels)."""

_CITATION = """@inproceedings{grauman2022ego4d,
  title={Ego4D: Around the World in 3,000 Hours of Egocentric Video},
  author={Grauman, Kristen and others},
  booktitle={CVPR},
  year={2022}
}
@inproceedings{lai2022eye,
  title={In the Eye of Transformer: Global-Local Correlation for Egocentric Gaze Estimation},
  author={Lai, Bolin and Liu, Miao and Ryan, Fiona and Rehg, James M.},
  booktitle={BMVC},
  year={2022}
}"""

_HOMEPAGE = "https://ego4d-data.org/"
_LICENSE = "Ego4D license agreement (research only); obtain the data through the Ego4D CLI."

SPLIT_LISTS = {"train": "train_ego4d_gaze.csv", "test": "test_ego4d_gaze.csv"}
UNTRACKED_FILE = "ego4d_gaze_untracked.csv"
CLIP_SOURCES = ("lists", "derive")

LAYOUT = """<data_dir>/
  full_scale.gaze/<uid>.mp4     the full videos (ego4d --datasets full_scale --benchmarks gaze)
  gaze/<uid>.mp4 or <uid>.csv   the gaze CSVs (the download names them .mp4; found by their header), manifest.csv/.ver
  train_ego4d_gaze.csv          GLC's clip lists, lines <uid>/<uid>_t<start>_t<end>.mp4
  test_ego4d_gaze.csv
  ego4d_gaze_untracked.csv      GLC's untracked intervals (needed for clip_source="derive")
"""


@dataclasses.dataclass
class Ego4dGazeConfig(datasets.BuilderConfig, GazeBuilderOptions):
    """Ego4D options: ``clip_source`` (``"lists"``: the 5 s clips of GLC's lists; ``"derive"``: derive the clips of
    each listed video from its duration and ``ego4d_gaze_untracked.csv``, GLC's rule) and the shared options
    (``parity``, ``window_frames``, ``window_stride``, ``windows``, ``strict``)."""

    clip_source: str = "lists"


def _layout_error(path: Path, what: str) -> FileNotFoundError:
    return FileNotFoundError(f"Ego4D gaze: {what} not found: {path}\nExpected layout:\n{LAYOUT}")


@dataclasses.dataclass(frozen=True)
class _VideoProblem:
    """Why a full video cannot be used (its clips are dropped; ``error`` is raised instead under ``strict``)."""

    reason: str
    kind: str
    error: Exception


class Ego4dGaze(datasets.GeneratorBasedBuilder):
    """Ego4D gaze builder: ``train`` (20 videos) and ``test`` (7 videos) as GLC splits them."""

    BUILDER_CONFIG_CLASS = Ego4dGazeConfig
    BUILDER_CONFIGS = [
        Ego4dGazeConfig(
            name="glc",
            version=datasets.Version("1.0.0"),
            description="The Ego4D gaze subset with GLC's train/test split",
        )
    ]
    DEFAULT_CONFIG_NAME = "glc"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.build_log = BuildLog()

    def _info(self) -> datasets.DatasetInfo:
        return datasets.DatasetInfo(
            description=_DESCRIPTION,
            features=gaze_example_features(),
            homepage=_HOMEPAGE,
            license=_LICENSE,
            citation=_CITATION,
        )

    def _split_generators(self, dl_manager):
        config = self.config
        validate_options(config)
        if config.clip_source not in CLIP_SOURCES:
            raise ValueError(f"clip_source must be one of {CLIP_SOURCES}, got {config.clip_source!r}")
        if config.data_dir is None:
            raise ValueError(f"Ego4D gaze needs data_dir= (the raw download). Expected layout:\n{LAYOUT}")
        root = Path(config.data_dir).expanduser().resolve()
        for folder in (root, root / "full_scale.gaze", root / "gaze"):
            if not folder.is_dir():
                raise _layout_error(folder, "folder")
        lists = {split: root / name for split, name in SPLIT_LISTS.items()}
        for path in lists.values():
            if not path.is_file():
                raise _layout_error(path, "GLC clip list (see the dataset card for where to get it)")
        self.build_log = BuildLog()
        self._intervals = None
        if config.clip_source == "derive":
            if not (root / UNTRACKED_FILE).is_file():
                raise _layout_error(root / UNTRACKED_FILE, "untracked-interval file (needed by clip_source='derive')")
            self._intervals, report = read_untracked_intervals(root / UNTRACKED_FILE)
            self.build_log.add_report(report)
        self._gaze_files = self._index_gaze_files(root / "gaze")
        self._videos: dict[str, tuple[VideoInfo, GazeTrack] | _VideoProblem] = {}
        # all reading and checking happens here, so that errors reach the caller unwrapped by `datasets`
        self._clips = {split: list(self._collect_clips(root, path, split)) for split, path in lists.items()}
        self.build_log.log_summary("Ego4D gaze")
        empty = [split for split in lists if not self._clips[split]]
        if empty:  # `datasets` cannot hold an empty split: say so, and build the others
            logger.warning(
                "no clip of the %s split(s) is left (see the dropped clips above); building the others", empty
            )
        return [
            datasets.SplitGenerator(name=getattr(datasets.Split, split.upper()), gen_kwargs={"split": split})
            for split in lists
            if self._clips[split]
        ]

    def _index_gaze_files(self, folder: Path) -> dict[str, Path]:
        """uid -> gaze CSV under ``gaze/``, by content: the download names them ``<uid>.mp4`` (docs/specs/data.md)."""
        index: dict[str, Path] = {}
        for path in sorted(folder.iterdir()):
            if path.name in EGO4D_NON_GAZE_FILES or not path.is_file():
                continue
            if is_ego4d_gaze_csv(path):
                index.setdefault(path.name.split(".")[0], path)
            else:
                logger.info("skipping %s: not an Ego4D gaze CSV (header)", path)
        return index

    def _read_list(self, path: Path) -> list[tuple[str, int, int]]:
        report = ParseReport(str(path), "glc ego4d clip list")
        clips = []
        for line in read_text(path, "a GLC clip list").splitlines():
            if not line.strip():
                continue
            report.rows_read += 1
            try:
                clips.append(parse_glc_clip_path(line))
            except ValueError:
                report.skip("not <uid>/<uid>_t<start>_t<end>.mp4", 1)
                continue
            report.rows_kept += 1
        self.build_log.add_report(report)
        return clips

    def _video(self, root: Path, uid: str) -> tuple[VideoInfo, GazeTrack] | _VideoProblem:
        """The probed full video of ``uid`` and its per-frame gaze, or why its clips must be dropped (a missing, empty,
        truncated or undecodable video drops its clips, never the build). A missing gaze CSV is a layout error."""
        if uid not in self._videos:
            video_path = root / "full_scale.gaze" / f"{uid}.mp4"
            if uid not in self._gaze_files:
                raise _layout_error(
                    root / "gaze" / f"{uid}.mp4",
                    f"gaze CSV of {uid} (looked for a file named {uid}.* with the gaze CSV header)",
                )
            if not video_path.is_file():
                self._videos[uid] = _VideoProblem(
                    f"its full video {video_path} is missing",
                    "video missing",
                    _layout_error(video_path, f"full video of {uid}"),
                )
                return self._videos[uid]
            try:
                info = probe_video(video_path, check_end=True)
            except VideoDecodeError as err:  # empty, truncated or not a video: the message names the file
                self._videos[uid] = _VideoProblem(str(err), "video unreadable", err)
                return self._videos[uid]
            track = parse_ego4d_gaze(self._gaze_files[uid], info.num_frames, info.fps, self.config.parity)
            self.build_log.add_report(track.report)
            self._videos[uid] = (info, track)
        return self._videos[uid]

    def _drop_for_video(self, split: str, clip_id: str, problem: _VideoProblem) -> None:
        self.build_log.drop(split, clip_id, problem.reason, self.config.strict, kind=problem.kind, error=problem.error)

    def _clip_list(self, root: Path, split_list: Path, split: str) -> list[tuple[str, int, int]]:
        listed = self._read_list(split_list)
        if self.config.clip_source == "lists":
            return listed
        clips = []
        for uid in dict.fromkeys(uid for uid, _, _ in listed):  # the split's videos, in list order
            if uid in EGO4D_GLC_SKIPPED_VIDEOS:
                continue
            video = self._video(root, uid)
            if isinstance(video, _VideoProblem):  # no duration to derive its clips from: all of them are dropped
                self._drop_for_video(split, f"{uid} (every clip)", video)
                continue
            info, _ = video
            for start in ego4d_clip_starts(info.duration_s, self._intervals.get(uid, [])):
                clips.append((uid, start, start + EGO4D_CLIP_SECONDS))
        return clips

    def _collect_clips(self, root: Path, split_list: Path, split: str):
        """The clips of a split that pass every check: ``(clip_id, info, first_frame, gaze, gaze_type)``."""
        config = self.config
        for uid, t_start, t_end in self._clip_list(root, split_list, split):
            clip_id = f"{uid}_t{t_start}_t{t_end}"
            video = self._video(root, uid)
            if isinstance(video, _VideoProblem):
                self._drop_for_video(split, clip_id, video)
                continue
            info, track = video
            first, stop = int(round(t_start * info.fps)), int(round(t_end * info.fps))
            if stop > info.num_frames or stop <= first:
                self.build_log.drop(
                    split,
                    clip_id,
                    f"it needs frames {first}..{stop - 1} but {info.path} has {info.num_frames} frames",
                    config.strict,
                    kind="past the video's end",
                )
                continue
            rows = ego4d_label_rows(first, stop - first, info.num_frames, config.parity)
            gaze_type = track.gaze_type[rows]
            if config.parity != PARITY_GLC and np.all(gaze_type == UNTRACKED):
                self.build_log.drop(
                    split,
                    clip_id,
                    f"no gaze sample of {track.report.path} falls on its frames {first}..{stop - 1}",
                    config.strict,
                    kind="no gaze on its frames",
                )
                continue
            yield clip_id, info, first, track.gaze[rows], gaze_type

    def _generate_examples(self, split: str):
        config = self.config
        windows = split_clip_windows(config, split)
        for clip_id, info, first, gaze, gaze_type in self._clips[split]:
            yield from clip_window_examples(
                clip_id=clip_id,
                video_path=info.path,
                clip_first_frame=first,
                fps=info.fps,
                width=info.width,
                height=info.height,
                gaze=gaze,
                gaze_type=gaze_type,
                windows=windows,
                window_frames=config.window_frames,
                window_stride=config.window_stride,
            )
