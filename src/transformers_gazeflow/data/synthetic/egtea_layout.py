"""Synthetic clips written in the raw EGTEA Gaze+ layout, so the EGTEA builder can be tested end to end on files
made from scratch (the layout of the EGTEA Gaze+ download, as :mod:`~transformers_gazeflow.data.egtea_format`
reads it)::

    <out_dir>/cropped_clips/<VIDEO>/<CLIP>.mp4        24 fps clips
    <out_dir>/gaze_data/<VIDEO>.txt                   SMI BeGaze export, format 1, pixels of a 1280x960 space
                                                      (<VIDEO>-GazeData.txt for P* sessions)
    <out_dir>/train_split1.txt, test_split1.txt       CRLF lines "<clip> <action> <verb> <noun>", 1-based ids
    <out_dir>/action_idx.txt, verb_idx.txt, noun_idx.txt   "<name with spaces> <id>"

``<VIDEO>`` is ``OPxx-Ryy-Synthetic`` or ``Pxx-Ryy-Synthetic`` (three ``-``-separated tokens); a clip is named
``<VIDEO>-<a>-<b>-F<start:06d>-F<end:06d>`` with ``a``/``b`` its start/end in milliseconds and ``F`` numbers on
the session's 24 fps axis; the clip has ``end - start + 1`` frames and its local frame ``k`` is the session gaze
row of frame ``start - 1 + k`` (the reference's alignment). Clips of one session are laid out one after another
with short gaps in which the gaze keeps being recorded.

Gaze files are written by :func:`~.egtea_format.begaze_lines` (format 1: rows ``Time Type Trial X Y Frame Event``
after 34 ``##`` header lines, line 10 ``## Number of Samples: N``). The tracker's 30 Hz against the video's 24 fps
gives two samples on one frame in four (their mean is the frame's point); blinks are ``Blink`` rows, untracked frames
have no row at all, and off-frame samples keep their raw, out-of-range pixels.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...models.gazeflow.geometry import unit_to_pixels
from ..egtea_format import (
    BEGAZE_EVENTS,
    BEGAZE_FPS,
    BEGAZE_HEIGHT,
    BEGAZE_WIDTH,
    begaze_lines,
    begaze_time_us,
    egtea_clip_name_at,
)
from ..gaze_types import BLINK_OR_OTHER, FIXATION, OFF_FRAME, UNTRACKED
from ..video import write_video
from .dataset import SyntheticClip, generate_clip, split_assignment, task_names
from .scene import TASK_COLOR_NAMES, TASK_SHAPES
from .settings import SyntheticGazeSettings

TRACKER_HZ = 30.0
LAYOUT_SPLITS = ("train", "test")
"""The layout's split files, ``<split>_split1.txt``."""


@dataclass(frozen=True)
class WrittenEgteaClip:
    """One written clip, with what a correct EGTEA parser must read back for it.

    ``expected_gaze``/``expected_type`` follow the spec's default parser: mean of a frame's samples, pixels clamped
    to ``[0, 1279] x [0, 959]`` then divided by 1280/960, out-of-range samples coded 4, no sample -> 0. They differ
    from the synthetic truth ``clip.gaze`` only by that clamp (< 1/1280 of the frame) and by the codes. An untracked
    frame has no sample in the file: its ``expected_gaze`` is the clip's own point, while a builder gives it
    ``gaze_common.fill_untracked`` over the whole session (the same point, except before the clip's first valid
    frame, where the session's earlier samples count) or GLC's centre under ``parity="glc"``.
    ``expected_type_glc`` is what ``parity="glc"`` reads: the reference overwrites code 4 with the sample's event.
    """

    name: str
    session: str
    split: str  # "train" or "test"
    f_start: int
    f_end: int
    video_path: Path
    action: int  # 1-based, as in the split files
    verb: int
    noun: int
    clip: SyntheticClip
    expected_gaze: np.ndarray  # float32 [n, 2]
    expected_type: np.ndarray  # int8 [n]
    expected_type_glc: np.ndarray  # int8 [n]


def _samples_on_frame(frame: int) -> int:
    """How many 30 Hz tracker samples fall on 24 fps video frame ``frame`` (1 or 2)."""
    ratio = TRACKER_HZ / BEGAZE_FPS
    return int(math.floor((frame + 1) * ratio) - math.floor(frame * ratio))


def _header(session: str) -> list[str]:
    """The session's own header lines (``begaze_lines`` adds ``## [BeGaze]``, the sample count and the padding)."""
    return [
        f"## Converted from:\tsynthetic/{session}.idf",
        "## Date:\t01.01.2026 00:00:00",
        "## Version:\tBeGaze 3.x (transformers-gazeflow synthetic)",
        "## IDF Version:\t9",
        f"## Sample Rate:\t{int(TRACKER_HZ)}",
        "## Separator Type:\tMsg",
        "## Trial Count:\t1",
        "## Uses Plane File:\tFalse",
        f"## Calibration Area:\t{BEGAZE_WIDTH}\t{BEGAZE_HEIGHT}",
        "## Format:\tTime Type Trial X Y Frame Event",
    ]


def _gaze_rows(
    rng: np.random.Generator, frames: np.ndarray, raw: np.ndarray, codes: np.ndarray, motion: np.ndarray
) -> list[tuple[int, float, float, int, str]]:
    """Sample rows ``(time_us, px, py, frame, event)`` for session frames with their raw unit points and codes."""
    rows = []
    pixels = unit_to_pixels(raw.astype(np.float64), BEGAZE_WIDTH, BEGAZE_HEIGHT)
    for frame, (px, py), code, move in zip(frames.tolist(), pixels.tolist(), codes.tolist(), motion.tolist()):
        if code == UNTRACKED:
            continue
        time_us = begaze_time_us(frame)
        event = BEGAZE_EVENTS[BLINK_OR_OTHER if code == BLINK_OR_OTHER else move]
        if code == BLINK_OR_OTHER:  # a blink reports the held point, always inside the calibration area
            rows.append(
                (time_us, min(max(px, 0.0), BEGAZE_WIDTH - 1.0), min(max(py, 0.0), BEGAZE_HEIGHT - 1.0), frame, event)
            )
            continue
        inside = 1.0 <= px <= BEGAZE_WIDTH - 2 and 1.0 <= py <= BEGAZE_HEIGHT - 2
        if inside and _samples_on_frame(frame) == 2:  # two samples whose mean is the frame's point
            dx, dy = rng.uniform(-0.5, 0.5, 2).tolist()
            rows.append((time_us, px + dx, py + dy, frame, event))
            rows.append((time_us + int(1e6 / TRACKER_HZ) // 2, px - dx, py - dy, frame, event))
        else:  # off-frame samples stay single: clamp-then-mean and mean-then-clamp then agree
            rows.append((time_us, px, py, frame, event))
    return rows


def _expected(raw: np.ndarray, codes: np.ndarray, motion: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What the default EGTEA parser reads back from rows written from ``raw``/``codes`` (:class:`WrittenEgteaClip`)."""
    pixels = np.round(unit_to_pixels(raw.astype(np.float64), BEGAZE_WIDTH, BEGAZE_HEIGHT), 3)  # what the text holds
    limit = np.array([BEGAZE_WIDTH - 1, BEGAZE_HEIGHT - 1])
    off = ((pixels < 0) | (pixels > limit)).any(axis=1)
    gaze = np.clip(pixels, 0, limit) / np.array([BEGAZE_WIDTH, BEGAZE_HEIGHT])
    tracked = (codes != UNTRACKED) & (codes != BLINK_OR_OTHER)
    expected_type = np.where(tracked, np.where(off, OFF_FRAME, motion), codes)
    expected_type_glc = np.where(tracked, motion, codes)
    return gaze.astype(np.float32), expected_type.astype(np.int8), expected_type_glc.astype(np.int8)


def write_egtea_layout(
    out_dir: str | os.PathLike,
    settings: SyntheticGazeSettings | None = None,
    clips_per_session: int = 3,
    gap_frames: tuple[int, int] = (6, 20),
    session_kinds: tuple[str, ...] = ("OP",),
    write_masks: bool = False,
) -> list[WrittenEgteaClip]:
    """Render ``settings.num_clips`` synthetic clips into the raw EGTEA Gaze+ layout under ``out_dir``.

    Clips whose synthetic split is ``validation`` or ``test`` go to ``test_split1.txt``, the others to
    ``train_split1.txt``. Returns one :class:`WrittenEgteaClip` per clip, in clip-index order, with the values a parser
    must read back. ``settings.fps`` must be 24 (EGTEA's axis). ``session_kinds`` are cycled over the sessions:
    ``"OP"`` sessions (``OPxx-Ryy-Synthetic``) store their gaze as ``gaze_data/<VIDEO>.txt``, ``"P"`` sessions
    (``Pxx-Ryy-Synthetic``) as ``gaze_data/<VIDEO>-GazeData.txt`` (the two namings of the real download).
    ``write_masks=True`` also writes each clip's exact hand and target masks (:meth:`~.dataset.SyntheticClip.masks`)
    as ``masks/<VIDEO>/<CLIP>.npz`` (not part of the EGTEA layout;
    :meth:`~transformers_gazeflow.data.masks.RegionMasks.load` reads them back).
    """
    settings = settings if settings is not None else SyntheticGazeSettings(num_clips=6, width=128, height=96)
    _check_layout_options(settings, clips_per_session, gap_frames, session_kinds)
    out_dir = Path(out_dir)
    for name in ("cropped_clips", "gaze_data"):
        (out_dir / name).mkdir(parents=True, exist_ok=True)
    splits = split_assignment(settings)
    rng = np.random.default_rng([settings.seed, 1 << 21])
    clips: list[WrittenEgteaClip] = []
    for session_index in range(math.ceil(settings.num_clips / clips_per_session)):
        kind = session_kinds[session_index % len(session_kinds)]
        session = f"{kind}{session_index + 1:02d}-R{session_index % 7 + 1:02d}-Synthetic"
        first = session_index * clips_per_session
        rows: list[tuple[int, float, float, int, str]] = []
        cursor = 1  # next free 1-based F number
        for index in range(first, min(first + clips_per_session, settings.num_clips)):
            clip = generate_clip(settings, index, "train" if splits[index] == "train" else "test")
            gap = int(rng.integers(gap_frames[0], gap_frames[1] + 1))
            rows += _gap_rows(rng, cursor - 1, gap)
            f_start = cursor + gap
            clips.append(_write_clip(out_dir, session, clip, f_start, write_masks))
            rows += _gaze_rows(rng, np.arange(clip.num_frames) + f_start - 1, *_tracker_view(clip))
            cursor = clips[-1].f_end + 1
        rows += _gap_rows(rng, cursor - 1, int(rng.integers(gap_frames[0], gap_frames[1] + 1)))
        rows.sort(key=lambda row: row[0])
        assert max(row[3] for row in rows) < 2 * len(rows), "the reference parser sizes its array from the sample count"
        gaze_name = f"{session}.txt" if kind == "OP" else f"{session}-GazeData.txt"
        lines = begaze_lines(rows, fmt=1, header=_header(session))
        (out_dir / "gaze_data" / gaze_name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    names = task_names(settings.num_tasks)
    write_split_and_index_files(
        out_dir,
        {
            split: [f"{c.name} {c.action} {c.verb} {c.noun}" for c in clips if c.split == split]
            for split in LAYOUT_SPLITS
        },
        {
            "action": names,
            "verb": [n.split(" ", 1)[0] for n in names],
            "noun": [f"{TASK_COLOR_NAMES[t]} {TASK_SHAPES[t % len(TASK_SHAPES)]}" for t in range(settings.num_tasks)],
        },
    )
    return clips


def _check_layout_options(
    settings: SyntheticGazeSettings, clips_per_session: int, gap_frames: tuple[int, int], session_kinds: tuple[str, ...]
) -> None:
    """:func:`write_egtea_layout`'s options, each refused with a one-line error naming it."""
    if settings.fps != BEGAZE_FPS:
        raise ValueError(
            f"settings.fps must be {BEGAZE_FPS} for the EGTEA layout (its F numbers are 24 fps frames), "
            f"got {settings.fps}"
        )
    if isinstance(clips_per_session, bool) or not isinstance(clips_per_session, int) or clips_per_session < 1:
        raise ValueError(f"clips_per_session must be a positive int, got {clips_per_session!r}")
    if not 1 <= gap_frames[0] <= gap_frames[1]:
        raise ValueError(f"gap_frames must be (low, high) with 1 <= low <= high, got {gap_frames!r}")
    if not session_kinds or any(kind not in ("OP", "P") for kind in session_kinds):
        raise ValueError(f"session_kinds must be a non-empty tuple of 'OP' and 'P', got {session_kinds!r}")


def _tracker_view(clip: SyntheticClip) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What the eye tracker records of a clip: its raw points, gaze-type codes and eye movement."""
    return clip.gaze.gaze_raw, clip.gaze.gaze_type, clip.gaze.motion


def _write_clip(out_dir: Path, session: str, clip: SyntheticClip, f_start: int, write_masks: bool) -> WrittenEgteaClip:
    """Write one clip's video (and masks) starting at session F number ``f_start``; what a parser must read back."""
    f_end = f_start + clip.num_frames - 1
    name = egtea_clip_name_at(session, f_start, f_end)
    video_path = out_dir / "cropped_clips" / session / f"{name}.mp4"
    write_video(video_path, clip.frames(), fps=BEGAZE_FPS)
    if write_masks:
        clip.masks().save(out_dir / "masks" / session / f"{name}.npz")
    expected_gaze, expected_type, expected_type_glc = _expected(*_tracker_view(clip))
    return WrittenEgteaClip(
        name=name,
        session=session,
        split=clip.split,
        f_start=f_start,
        f_end=f_end,
        video_path=video_path,
        action=clip.task + 1,
        verb=clip.task + 1,
        noun=clip.task + 1,
        clip=clip,
        expected_gaze=expected_gaze,
        expected_type=expected_type,
        expected_type_glc=expected_type_glc,
    )


def write_split_and_index_files(
    out_dir: Path, split_lines: dict[str, list[str]], index_names: dict[str, list[str]]
) -> None:
    """The layout's split files (``<split>_split1.txt``: the lines as given, CRLF) and index files
    (``<kind>_idx.txt``: ``"<name> <1-based id>"`` per name, LF)."""
    for split, lines in split_lines.items():
        with open(out_dir / f"{split}_split1.txt", "w", encoding="utf-8", newline="") as handle:
            handle.write("".join(line + "\r\n" for line in lines))
    for kind, names in index_names.items():
        (out_dir / f"{kind}_idx.txt").write_text(
            "".join(f"{n} {i + 1}\n" for i, n in enumerate(names)), encoding="utf-8"
        )


def _gap_rows(rng: np.random.Generator, first_frame: int, length: int) -> list[tuple[int, float, float, int, str]]:
    """Gaze recorded between clips: one drifting fixation (the tracker runs for the whole session)."""
    if length <= 0:
        return []
    frames = np.arange(first_frame, first_frame + length)
    points = rng.uniform(0.2, 0.8, 2) + np.cumsum(rng.normal(0, 0.002, (length, 2)), axis=0)
    codes = np.full(length, FIXATION, np.int8)
    return _gaze_rows(rng, frames, points, codes, codes)


__all__ = [
    "WrittenEgteaClip",
    "write_egtea_layout",
    "write_split_and_index_files",
]
