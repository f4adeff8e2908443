"""Ego-Exo4D's egocentric (Project Aria) eye gaze as windows of per-frame gaze, in GazeFlow's unified example schema.

A ``datasets.GeneratorBasedBuilder`` in the classic loading-script form. ``datasets`` 4+ refuses scripts in
``load_dataset``; use ``transformers_gazeflow.load_gaze_dataset("egoexo4d", data_dir=..., split=...)`` or the builder
directly. The raw layout lives in ``transformers_gazeflow.data.egoexo4d_format``, the gaze files and the rule that puts
10 Hz gaze on 30 fps frames in ``transformers_gazeflow.data.aria_gaze``. Each example carries its take's RGB camera
(FISHEYE624) at the size of the video served: the take's ``trajectory/online_calibration.jsonl`` where the download has
it, else the nominal Aria RGB calibration (``aria_calibration.NOMINAL_RGB_PARAMS``), counted in the log. Each take is
cut into clips of
``clip_seconds`` (5 s, the clip length of the Ego4D gaze benchmark), each clip into windows. The dataset card
(``README.md`` beside this file) lists the download parts and the folder layout.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter
from pathlib import Path

import datasets
import numpy as np

from transformers_gazeflow.data.aria_calibration import nominal_calibration, read_video_camera
from transformers_gazeflow.data.aria_gaze import AriaGazeSamples, frame_gaze, read_gaze_2d_csv
from transformers_gazeflow.data.egoexo4d_format import (
    Take,
    read_splits,
    read_takes,
    take_calibration_file,
    take_gaze_files,
    take_video,
)
from transformers_gazeflow.data.gaze_common import GazeTrack
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
from transformers_gazeflow.models.gazeflow.geometry import FisheyeCamera

logger = logging.getLogger(__name__)

_DESCRIPTION = """Ego-Exo4D's egocentric video (Project Aria RGB camera, 30 fps) with the wearer's eye gaze (Aria MPS,
10 Hz, personalized where the take has it, else general), matched to the video's frames by time. Each example is one
window of at most 64 frames of one clip of a take, with per-frame gaze point, gaze type and validity."""

_CITATION = """@inproceedings{grauman2024egoexo4d,
  title={Ego-Exo4D: Understanding Skilled Human Activity from First- and Third-Person Perspectives},
  author={Grauman, Kristen and others},
  booktitle={CVPR},
  year={2024}
}"""

_HOMEPAGE = "https://ego-exo4d-data.org/"
_LICENSE = "Ego-Exo4D license agreement (research only); obtain the data with the egoexo download CLI."

SPLITS = ("train", "validation", "test")
GAZE_CHOICES = ("personalized", "general")
VIDEO_CHOICES = ("auto", "full", "downscaled")

LAYOUT = """<data_dir>/
  takes.json                                            (download part: metadata)
  annotations/splits.json                               (part: annotations)
  takes/<take_name>/frame_aligned_videos/aria<NN>_214-1.mp4          (part: takes, --views ego)
  takes/<take_name>/frame_aligned_videos/downscaled/448/aria<NN>_214-1.mp4   (part: downscaled_takes/448)
  takes/<take_name>/eye_gaze/personalized_eye_gaze_2d.csv, general_eye_gaze_2d.csv   (part: take_eye_gaze)
  takes/<take_name>/trajectory/online_calibration.jsonl   (part: take_trajectory; optional: the take's camera)
"""


@dataclasses.dataclass
class EgoExo4dGazeConfig(datasets.BuilderConfig, GazeBuilderOptions):
    """Ego-Exo4D options: ``gaze`` (``"personalized"``: a take's personalized gaze where it has it, else its
    general gaze; ``"general"``: general gaze only), ``video`` (``"auto"``: the 448 copy where present, else the full
    video; ``"full"``; ``"downscaled"``), ``clip_seconds`` (clip length; None: a take is one clip) and the shared
    options (``window_frames``, ``window_stride``, ``windows``, ``strict``; ``parity`` has no GLC reference here)."""

    gaze: str = "personalized"
    video: str = "auto"
    clip_seconds: float | None = 5.0


def _layout_error(path: Path, what: str) -> FileNotFoundError:
    return FileNotFoundError(f"Ego-Exo4D gaze: {what} not found: {path}\nExpected layout:\n{LAYOUT}")


def take_folder(root: Path, take: Take) -> Path | None:
    """The take's folder: ``root_dir`` of takes.json under the download, else ``takes/<take_name>``; None where
    neither is there (the take was not downloaded)."""
    for folder in (root / take.root_dir, root / "takes" / take.name):
        if folder.is_dir():
            return folder
    return None


def read_take_gaze(gaze_files: list[tuple[Path, str]]) -> tuple[AriaGazeSamples, str] | ValueError:
    """The first of a take's 2D gaze files (in preference order) that reads and has a row with gaze, and its kind;
    where none has, the first that reads (its clips are then dropped for want of gaze), else the first file's error.
    A file passed over is named in the notes of the one read."""
    passed_over: list[str] = []
    readable: tuple[AriaGazeSamples, str] | None = None
    first_error: ValueError | None = None
    for path, kind in gaze_files:
        try:
            samples = read_gaze_2d_csv(path)
        except ValueError as err:
            first_error = first_error or err
            passed_over.append(f"{path.name} unreadable ({err})")
            continue
        if np.isfinite(samples.points).all(-1).any():
            samples.report.notes += [f"passed over {text}" for text in passed_over]
            return samples, kind
        readable = readable or (samples, kind)
        passed_over.append(f"{path.name} (no row has gaze)")
    return readable if readable is not None else first_error


def clip_ranges(num_frames: int, fps: float, clip_seconds: float | None) -> list[tuple[int, int]]:
    """``[first, stop)`` frame ranges of a take's clips: consecutive clips of ``round(clip_seconds * fps)`` frames
    while a whole clip fits; a take shorter than one clip is one clip of all its frames; None: the whole take."""
    if num_frames <= 0:
        return []
    length = num_frames if clip_seconds is None else max(1, int(round(clip_seconds * fps)))
    ranges = [(start, start + length) for start in range(0, num_frames - length + 1, length)]
    return ranges or [(0, num_frames)]


class EgoExo4dGaze(datasets.GeneratorBasedBuilder):
    """Ego-Exo4D gaze builder: ``train``, ``validation`` and ``test`` as ``annotations/splits.json`` assigns takes."""

    BUILDER_CONFIG_CLASS = EgoExo4dGazeConfig
    BUILDER_CONFIGS = [
        EgoExo4dGazeConfig(
            name="aria",
            version=datasets.Version("1.0.0"),
            description="Ego-Exo4D's Aria RGB video with the wearer's eye gaze, Ego-Exo4D's own splits",
        )
    ]
    DEFAULT_CONFIG_NAME = "aria"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.build_log = BuildLog()
        self.skipped_takes: Counter = Counter()
        self.camera_sources: Counter = Counter()

    def _info(self) -> datasets.DatasetInfo:
        return datasets.DatasetInfo(
            description=_DESCRIPTION,
            features=gaze_example_features(),
            homepage=_HOMEPAGE,
            license=_LICENSE,
            citation=_CITATION,
        )

    def _check_config(self) -> Path:
        config = self.config
        validate_options(config)
        for name, value, choices in (("gaze", config.gaze, GAZE_CHOICES), ("video", config.video, VIDEO_CHOICES)):
            if value not in choices:
                raise ValueError(f"{name} must be one of {choices}, got {value!r}")
        if config.clip_seconds is not None and not (config.clip_seconds > 0):
            raise ValueError(f"clip_seconds must be a positive number of seconds or None, got {config.clip_seconds!r}")
        if config.data_dir is None:
            raise ValueError(f"Ego-Exo4D gaze needs data_dir= (the raw download). Expected layout:\n{LAYOUT}")
        root = Path(config.data_dir).expanduser().resolve()
        for path, what in ((root / "takes.json", "takes.json"), (root / "annotations" / "splits.json", "splits.json")):
            if not path.is_file():
                raise _layout_error(path, what)
        if not (root / "takes").is_dir():
            raise _layout_error(root / "takes", "the takes folder")
        return root

    def _split_generators(self, dl_manager):
        root = self._check_config()
        self.build_log, self.skipped_takes, self.camera_sources = BuildLog(), Counter(), Counter()
        takes = read_takes(root / "takes.json")
        splits, unknown = read_splits(root / "annotations" / "splits.json")
        if unknown:
            logger.warning("splits.json: split names left out (not train/val/test): %s", unknown)
        # all reading and checking happens here, so that errors reach the caller unwrapped by `datasets`
        self._clips = {split: [] for split in SPLITS}
        for uid, split in splits.items():
            take = takes.get(uid)
            take_dir = take_folder(root, take) if take is not None else None
            if take is None:
                self.skipped_takes["not in takes.json"] += 1
            elif take_dir is None:
                self.skipped_takes["not downloaded"] += 1
            else:
                self._clips[split] += self._take_clips(take_dir, take, split)
        if self.skipped_takes:
            logger.info("Ego-Exo4D gaze: takes of splits.json not read: %s", dict(self.skipped_takes))
        self._log_camera_sources()
        self.build_log.log_summary("Ego-Exo4D gaze")
        empty = [split for split in SPLITS if not self._clips[split]]
        if len(empty) == len(SPLITS):
            read = dict(self.skipped_takes) or "none"
            raise FileNotFoundError(
                f"Ego-Exo4D gaze: no take of {root / 'annotations' / 'splits.json'} gave a clip under {root / 'takes'} "
                f"(takes not read: {read}; {self.build_log.summary()})"
            )
        if empty:  # `datasets` cannot hold an empty split: say so, and build the others
            logger.warning("no clip of the %s split(s) is left (see the log above); building the others", empty)
        return [
            datasets.SplitGenerator(name=getattr(datasets.Split, split.upper()), gen_kwargs={"split": split})
            for split in SPLITS
            if self._clips[split]
        ]

    def _log_camera_sources(self) -> None:
        """One line: how many takes' cameras came from their own calibration, how many are the nominal one."""
        if not self.camera_sources:
            return
        nominal = sum(n for source, n in self.camera_sources.items() if source.startswith("nominal"))
        (logger.warning if nominal else logger.info)(
            "Ego-Exo4D gaze: each take's camera (FISHEYE624 at the size served): %s%s",
            dict(self.camera_sources),
            "; a nominal camera is the Aria RGB calibration of projectaria_tools' MPS sample, scaled to the video "
            "(download part take_trajectory for each take's own)"
            if nominal
            else "",
        )

    def _take_camera(self, take_dir: Path, take: Take, info: VideoInfo) -> FisheyeCamera:
        """The take's RGB camera at the served video's size: from ``trajectory/online_calibration.jsonl`` where the
        take has a readable one (``strict``: an unreadable one raises), else the nominal Aria RGB calibration."""
        path = take_calibration_file(take_dir)
        calibration, source = None, "nominal (no trajectory/online_calibration.jsonl)"
        if path is not None:
            try:
                calibration, source = read_video_camera(path), "the take's online_calibration.jsonl"
            except ValueError as err:
                if self.config.strict:
                    raise
                logger.warning("take %s: %s; its camera is the nominal Aria RGB calibration", take.name, err)
                source = "nominal (online_calibration.jsonl unreadable)"
        camera = (calibration or nominal_calibration().video_camera()).for_frame(info.width, info.height)
        self.camera_sources[source] += 1
        return camera

    def _drop_take(self, split: str, take: Take, reason: str, kind: str, error: Exception | None = None) -> None:
        """Drop every clip of a take (one logged entry, counted under ``kind``); ``strict`` raises instead."""
        self.build_log.drop(split, f"{take.name} (every clip)", reason, self.config.strict, kind=kind, error=error)

    def _take_track(self, take_dir: Path, take: Take, split: str) -> tuple[VideoInfo, GazeTrack] | None:
        """The take's probed video and per-frame gaze, or None after dropping it with its reason (a take with only
        3D eye gaze among them: see the dataset card)."""
        gaze_files, three_d = take_gaze_files(take_dir, self.config.gaze)
        if not gaze_files:
            if three_d is not None:
                reason = (
                    f"it has only 3D eye gaze ({three_d.name}); projecting it needs the central pupil frame's pose "
                    "T_Device_CPF (in no file of the download but the take's VRS) and each video frame's device time "
                    "(captures/<capture>/timesync.csv), which the builder does not read"
                )
                return self._drop_take(split, take, reason, "3D eye gaze only")
            said = " (takes.json: has_trimmed_eye_gaze false)" if take.has_eye_gaze is False else ""
            return self._drop_take(split, take, f"no eye-gaze file in {take_dir / 'eye_gaze'}{said}", "no eye gaze")
        video = take_video(take_dir, take, self.config.video)
        if video is None:
            where = take_dir / (take.rgb_video or "frame_aligned_videos/<aria>_214-1.mp4")
            error = _layout_error(where, f"the {self.config.video} RGB video of take {take.name}")
            return self._drop_take(split, take, f"its RGB video is missing ({where})", "video missing", error)
        try:
            info = probe_video(video.path, check_end=True)
        except VideoDecodeError as err:
            full = take_video(take_dir, take, "full") if video.downscaled and self.config.video == "auto" else None
            if full is None:
                return self._drop_take(split, take, str(err), "video unreadable", err)
            try:  # a damaged 448 copy (e.g. an interrupted download part): the full video instead
                info, video = probe_video(full.path, check_end=True), full
            except VideoDecodeError as full_err:
                return self._drop_take(split, take, f"{err}; {full_err}", "video unreadable", err)
            logger.warning("take %s: the 448 copy is unreadable (%s); reading the full video", take.name, err)
        found = read_take_gaze(gaze_files)
        if isinstance(found, ValueError):
            return self._drop_take(split, take, str(found), "gaze unreadable", found)
        samples, kind = found
        track = frame_gaze(samples, info.num_frames, info.fps)
        track.report.notes.append(f"{kind} gaze on {'the 448 copy' if video.downscaled else 'the full video'}")
        self.build_log.add_report(track.report)
        return info, track

    def _take_clips(self, take_dir: Path, take: Take, split: str) -> list:
        """The clips of a take that pass every check: ``(clip_id, info, first_frame, gaze, gaze_type, camera)``."""
        found = self._take_track(take_dir, take, split)
        if found is None:
            return []
        info, track = found
        try:
            camera = self._take_camera(take_dir, take, info)
        except ValueError as err:  # a fisheye keeps one focal length: a copy resized unevenly cannot be described
            self._drop_take(split, take, str(err), "camera does not fit the video", err)
            return []
        clips = []
        for first, stop in clip_ranges(info.num_frames, info.fps, self.config.clip_seconds):
            clip_id = f"{take.name}_t{first / info.fps:g}_t{stop / info.fps:g}"
            gaze_type = track.gaze_type[first:stop]
            if np.all(gaze_type == UNTRACKED):
                reason = f"no gaze sample of {track.report.path} falls on its frames {first}..{stop - 1}"
                self.build_log.drop(split, clip_id, reason, self.config.strict, kind="no gaze on its frames")
                continue
            clips.append((clip_id, info, first, track.gaze[first:stop], gaze_type, camera))
        return clips

    def _generate_examples(self, split: str):
        config = self.config
        windows = split_clip_windows(config, split)
        for clip_id, info, first, gaze, gaze_type, camera in self._clips[split]:
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
                camera=camera,
            )
