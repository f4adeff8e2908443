"""EGTEA Gaze+ as windows of per-frame gaze, in GazeFlow's unified example schema.

A ``datasets.GeneratorBasedBuilder`` in the classic loading-script form. ``datasets`` 4+ refuses scripts in
``load_dataset``; use ``transformers_gazeflow.load_gaze_dataset("egtea", data_dir=..., split=...)`` or the builder
directly. The raw formats, the alignment and GLC's quirks (the parsing rules) live in
``transformers_gazeflow.data.egtea_format``. The dataset card (``README.md`` beside this file) lists the expected folder
layout.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import datasets

from transformers_gazeflow.data.egtea_format import (
    BEGAZE_FPS,
    EGTEA_GLC_DROPPED_TEST_CLIPS,
    egtea_gaze_rows,
    parse_begaze,
    parse_egtea_clip_name,
    read_egtea_index,
)
from transformers_gazeflow.data.gaze_common import PARITY_GLC, GazeTrack, ParseReport, read_text
from transformers_gazeflow.data.loading import (
    NO_LABEL,
    BuildLog,
    GazeBuilderOptions,
    clip_window_examples,
    gaze_example_features,
    split_clip_windows,
    validate_options,
)
from transformers_gazeflow.data.video import VideoDecodeError, probe_video

logger = logging.getLogger(__name__)

_DESCRIPTION = """EGTEA Gaze+ (Li, Liu and Rehg): 28 hours of egocentric cooking video with 30 Hz eye tracking
(SMI glasses), 10,321 trimmed action clips with 106 action classes. Each example is one window of at most 64
frames of one clip with its per-frame gaze point, gaze type and validity, and the clip's action/verb/noun."""

_CITATION = """@inproceedings{li2018eye,
  title={In the Eye of Beholder: Joint Learning of Gaze and Actions in First Person Video},
  author={Li, Yin and Liu, Miao and Rehg, James M.},
  booktitle={ECCV},
  year={2018}
}"""

_HOMEPAGE = "https://cbs.ic.gatech.edu/fpv/"
_LICENSE = "EGTEA Gaze+ terms of use (research only); obtain the data from the homepage."

LAYOUT = """<data_dir>/
  cropped_clips/<VIDEO>/<CLIP>.mp4      e.g. OP01-R01-PastaSalad/OP01-R01-PastaSalad-1002316-1004005-F024051-F024101.mp4
  gaze_data/<VIDEO>.txt                 (OP* sessions) or <VIDEO>-GazeData.txt (P* sessions): SMI BeGaze exports
  train_split{N}.txt, test_split{N}.txt lines "<CLIP> <action> <verb> <noun> [...]", ids 1-based, N in 1..3
  action_idx.txt                        optional, lines "<action name> <id>" (also verb_idx.txt, noun_idx.txt)
"""


@dataclasses.dataclass
class EgteaGazeConfig(datasets.BuilderConfig, GazeBuilderOptions):
    """EGTEA Gaze+ options: ``split_id`` (1-3, the configs ``split1``..``split3``), ``expected_fps`` (24: the frame
    axis of the gaze files; a clip at another rate is dropped, ``None`` skips the check) and the shared options
    (``parity``, ``window_frames``, ``window_stride``, ``windows``, ``strict``)."""

    split_id: int = 1
    expected_fps: float | None = float(BEGAZE_FPS)


def _layout_error(path: Path | str, what: str) -> FileNotFoundError:
    return FileNotFoundError(f"EGTEA Gaze+: {what} not found: {path}\nExpected layout:\n{LAYOUT}")


class EgteaGaze(datasets.GeneratorBasedBuilder):
    """EGTEA Gaze+ builder: ``train`` and ``test`` splits of the chosen official split (configs ``split1..3``)."""

    BUILDER_CONFIG_CLASS = EgteaGazeConfig
    BUILDER_CONFIGS = [
        EgteaGazeConfig(
            name=f"split{i}",
            split_id=i,
            version=datasets.Version("1.0.0"),
            description=f"EGTEA Gaze+ official split {i}",
        )
        for i in (1, 2, 3)
    ]
    DEFAULT_CONFIG_NAME = "split1"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.build_log = BuildLog()
        self.label_names: dict[str, list[str]] = {}
        self._tracks: dict[str, GazeTrack] = {}

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
        if config.split_id not in (1, 2, 3):
            raise ValueError(f"split_id must be 1, 2 or 3, got {config.split_id!r}")
        if config.expected_fps is not None and not config.expected_fps > 0:
            raise ValueError(f"expected_fps must be positive or None, got {config.expected_fps!r}")
        if config.name.startswith("split") and config.name != f"split{config.split_id}":
            raise ValueError(
                f"config {config.name!r} conflicts with split_id={config.split_id}; "
                f"pass config_name='split{config.split_id}'"
            )
        if config.data_dir is None:
            raise ValueError(f"EGTEA Gaze+ needs data_dir= (the raw download). Expected layout:\n{LAYOUT}")
        root = Path(config.data_dir).expanduser().resolve()
        for folder in (root, root / "cropped_clips", root / "gaze_data"):
            if not folder.is_dir():
                raise _layout_error(folder, "folder")
        split_files = {split: root / f"{split}_split{config.split_id}.txt" for split in ("train", "test")}
        for path in split_files.values():
            if not path.is_file():
                raise _layout_error(path, "split file")
        self.build_log = BuildLog()
        #: class names by id (0-based) from action_idx.txt, verb_idx.txt, noun_idx.txt where present
        self.label_names = {
            kind: read_egtea_index(root / f"{kind}_idx.txt")
            for kind in ("action", "verb", "noun")
            if (root / f"{kind}_idx.txt").is_file()
        }
        self._tracks: dict[str, GazeTrack] = {}  # gaze per session, parsed once for both splits
        # all reading and checking happens here, so that errors reach the caller unwrapped by `datasets`
        self._clips = {split: list(self._collect_clips(root, path, split)) for split, path in split_files.items()}
        self.build_log.log_summary(f"EGTEA Gaze+ {config.name}")
        empty = [split for split in split_files if not self._clips[split]]
        if empty:  # `datasets` cannot hold an empty split: say so, and build the others
            logger.warning(
                "no clip of the %s split(s) is left (see the dropped clips above); building the others", empty
            )
        return [
            datasets.SplitGenerator(name=getattr(datasets.Split, split.upper()), gen_kwargs={"split": split})
            for split in split_files
            if self._clips[split]
        ]

    def _read_split_file(self, path: Path) -> list[tuple[str, int, int, int]]:
        """``(clip, action, verb, noun)`` per line (0-based; -1 where absent); CRLF or LF; bad lines are counted."""
        report = ParseReport(str(path), "egtea split list")
        entries = []
        for line in read_text(path, "a split file").splitlines():
            tokens = line.split()
            if not tokens:
                continue
            report.rows_read += 1
            try:
                name = parse_egtea_clip_name(tokens[0]).name
                labels = [int(token) - 1 for token in tokens[1:4]]
            except ValueError:
                report.skip("not '<clip> <action> <verb> <noun>'", 1)
                continue
            if any(label < 0 for label in labels):
                report.skip("label id < 1 (ids are 1-based)", 1)
                continue
            if any(
                kind in self.label_names and label >= len(self.label_names[kind])
                for kind, label in zip(("action", "verb", "noun"), labels)
            ):
                report.skip("label id past the class-index file", 1)
                continue
            labels += [NO_LABEL] * (3 - len(labels))
            entries.append((name, *labels))
            report.rows_kept += 1
        self.build_log.add_report(report)
        return entries

    def _gaze_file(self, root: Path, video: str) -> Path:
        """``gaze_data/<VIDEO>.txt`` or ``gaze_data/<VIDEO>-GazeData.txt`` (both names are tried;
        docs/specs/data.md)."""
        names = [f"{video}.txt", f"{video}-GazeData.txt"]
        if not video.startswith("O"):  # GLC: OP* sessions use <VIDEO>.txt, P* sessions <VIDEO>-GazeData.txt
            names.reverse()
        for name in names:
            if (root / "gaze_data" / name).is_file():
                return root / "gaze_data" / name
        tried = f"{root / 'gaze_data' / names[0]} (nor {names[1]})"
        raise _layout_error(tried, f"gaze file of {video}")

    def _collect_clips(self, root: Path, split_file: Path, split: str):
        """The clips of a split that pass every check: ``(name, (action, verb, noun), info, gaze, gaze_type)``."""
        config = self.config
        tracks = self._tracks
        for name, action, verb, noun in self._read_split_file(Path(split_file)):
            clip = parse_egtea_clip_name(name)
            if config.parity == PARITY_GLC and split == "test" and name in EGTEA_GLC_DROPPED_TEST_CLIPS:
                self.build_log.drop(
                    split,
                    name,
                    "left out of GLC's test set (its gaze does not cover it)",
                    False,
                    kind="left out by parity='glc'",
                )
                continue
            video_path = root / "cropped_clips" / clip.video / f"{name}.mp4"
            if not video_path.is_file():
                self.build_log.drop(
                    split,
                    name,
                    f"its video {video_path} is missing",
                    config.strict,
                    kind="video missing",
                    error=_layout_error(video_path, f"video of {split} clip {name}"),
                )
                continue
            try:
                info = probe_video(video_path, check_end=True)
            except VideoDecodeError as err:  # empty, truncated or not a video: the message names the file
                self.build_log.drop(split, name, str(err), config.strict, kind="video unreadable", error=err)
                continue
            if config.expected_fps is not None and abs(info.fps - config.expected_fps) > 0.01 * config.expected_fps:
                self.build_log.drop(
                    split,
                    name,
                    f"{video_path} runs at {info.fps:g} fps, but the gaze frames are "
                    f"on a {config.expected_fps:g} fps axis",
                    config.strict,
                    kind="frame rate",
                )
                continue
            if clip.video not in tracks:
                tracks[clip.video] = parse_begaze(self._gaze_file(root, clip.video), config.parity)
                self.build_log.add_report(tracks[clip.video].report)
            track = tracks[clip.video]
            rows = egtea_gaze_rows(clip.start_frame, info.num_frames)
            if rows[0] < 0 or rows[-1] >= len(track):
                covered = f"rows 0..{len(track) - 1}" if len(track) else "no rows (no sample was kept)"
                self.build_log.drop(
                    split,
                    name,
                    f"its {info.num_frames} frames need gaze rows {rows[0]}..{rows[-1]} "
                    f"(F_start - 1 + k) but {track.report.path} covers {covered}",
                    config.strict,
                    kind="gaze does not cover it",
                )
                continue
            listed = clip.end_frame - clip.start_frame + 1
            if info.num_frames < listed:  # kept with the frames it has; local frame k still reads F_start - 1 + k
                self.build_log.shorten(
                    split,
                    name,
                    f"{video_path} has {info.num_frames} frames, fewer than the "
                    f"{listed} of its name's range F{clip.start_frame}..F{clip.end_frame}",
                    config.strict,
                    kind="video shorter than its name's frame range",
                )
            yield name, (action, verb, noun), info, track.gaze[rows], track.gaze_type[rows]

    def _generate_examples(self, split: str):
        config = self.config
        windows = split_clip_windows(config, split)
        for name, (action, verb, noun), info, gaze, gaze_type in self._clips[split]:
            yield from clip_window_examples(
                clip_id=name,
                video_path=info.path,
                clip_first_frame=0,
                fps=info.fps,
                width=info.width,
                height=info.height,
                gaze=gaze,
                gaze_type=gaze_type,
                windows=windows,
                window_frames=config.window_frames,
                window_stride=config.window_stride,
                action=action,
                verb=verb,
                noun=noun,
            )
