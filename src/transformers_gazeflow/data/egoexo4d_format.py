"""Ego-Exo4D's raw layout for gaze: takes, splits, and which video and gaze file of a take are read.

Facts from the Ego-Exo4D download tooling (``facebookresearch/Ego4d``: ``ego4d/internal/download/manifest_gen.py``,
``notebooks/egoexo/tutorials/gaze_tutorial.ipynb``) and docs:

* ``takes.json``: a list of takes, each with ``take_uid``, ``take_name``, ``root_dir`` (``takes/<take_name>``),
  ``frame_aligned_videos`` (``{cam_id: {stream: {"relative_path": ..., ...}}}``; the Aria RGB stream is
  ``aria<NN>`` / ``rgb``, ``frame_aligned_videos/aria<NN>_214-1.mp4``) and ``has_trimmed_eye_gaze``.
* ``annotations/splits.json``: ``take_uid_to_split`` (``train``, ``val``, ``test``; case varies); it lists every
  released take, so takes not downloaded are normal.
* a take's RGB video, upright 1408x1408 at 30 fps, and its copy at 448x448 (the ``downscaled_takes/448`` download
  part) under ``frame_aligned_videos/downscaled/448/`` with the same file name;
* the RGB camera's calibration: MPS's online calibration of the take, ``trajectory/online_calibration.jsonl`` (the
  ``take_trajectory`` download part; public code reading Ego-Exo4D takes opens it there); the take's VRS holds the
  factory one too, which only projectaria-tools reads (:func:`take_calibration_file` finds the first);
* eye gaze under ``eye_gaze/``: ``personalized_eye_gaze_2d.csv`` and ``general_eye_gaze_2d.csv`` (the 2D files
  :mod:`.aria_gaze` reads), their 3D twins without ``_2d``, and ``summary.json``. Personalized gaze (from the wearer's
  in-session calibration) is preferred where it exists, as EgoGazeLite and ARGaze do; some takes have only general gaze,
  some none. (:func:`take_gaze_files` lists them in that order; the builder reads the first usable one.)

Where a detail is not certain the readers accept the variants: split names in any case (``val`` or ``validation``),
a ``split_to_take_uids`` table instead of ``take_uid_to_split``, file names in any case, a missing or null
``relative_path`` or a video of another name (then the folder's one ``*_214-1.mp4`` file), a missing
``has_trimmed_eye_gaze``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .gaze_common import read_text

SPLIT_NAMES = {"train": "train", "val": "validation", "valid": "validation", "validation": "validation", "test": "test"}
"""``splits.json``'s split names (lower-cased) -> the dataset's split."""
GAZE_2D_FILES = {"personalized": "personalized_eye_gaze_2d.csv", "general": "general_eye_gaze_2d.csv"}
GAZE_3D_FILES = {"personalized": "personalized_eye_gaze.csv", "general": "general_eye_gaze.csv"}
ARIA_RGB_SUFFIX = "_214-1.mp4"
DOWNSCALED_FOLDER = ("frame_aligned_videos", "downscaled", "448")
CALIBRATION_FILE = ("trajectory", "online_calibration.jsonl")


@dataclass(frozen=True)
class Take:
    """One take of ``takes.json``: ``uid``, ``name``, ``root_dir`` (relative to the download), the Aria RGB video's
    path relative to it (None where takes.json names none) and ``has_eye_gaze`` (None where takes.json does not say)."""

    uid: str
    name: str
    root_dir: str
    rgb_video: str | None
    has_eye_gaze: bool | None


def _load_json(path: Path, what: str):
    try:
        return json.loads(read_text(path, what))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: {what} is not valid JSON ({err.msg} at line {err.lineno})") from None


def _aria_rgb_path(videos: object) -> str | None:
    """The relative path of the Aria RGB stream among a take's ``frame_aligned_videos``."""
    if not isinstance(videos, dict):
        return None
    for cam_id, streams in sorted(videos.items()):
        if not (isinstance(streams, dict) and str(cam_id).lower().startswith("aria")):
            continue
        for stream_name, stream in streams.items():
            path = stream.get("relative_path") if isinstance(stream, dict) else None
            if str(stream_name).lower() == "rgb" and path:
                return str(path)
    return None


def read_takes(path: str | Path) -> dict[str, Take]:
    """``takes.json`` -> takes by ``take_uid``. A take lacking ``take_uid`` or ``take_name`` is a one-line error."""
    path = Path(path)
    data = _load_json(path, "takes.json")
    if isinstance(data, dict):  # tolerate {"takes": [...]}
        data = data.get("takes", data)
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a list of takes (objects with take_uid, take_name)")
    takes: dict[str, Take] = {}
    for index, entry in enumerate(data):
        if not isinstance(entry, dict) or "take_uid" not in entry or "take_name" not in entry:
            raise ValueError(f"{path}: take {index} has no take_uid or take_name")
        name = str(entry["take_name"])
        gaze = entry.get("has_trimmed_eye_gaze")
        takes[str(entry["take_uid"])] = Take(
            uid=str(entry["take_uid"]),
            name=name,
            root_dir=str(entry.get("root_dir") or f"takes/{name}"),
            rgb_video=_aria_rgb_path(entry.get("frame_aligned_videos")),
            has_eye_gaze=None if gaze is None else bool(gaze),
        )
    return takes


def read_splits(path: str | Path) -> tuple[dict[str, str], dict[str, int]]:
    """``annotations/splits.json`` -> (take_uid -> ``"train"``/``"validation"``/``"test"``, counts of split names
    that are none of these, which are left out)."""
    path = Path(path)
    data = _load_json(path, "splits.json")
    table = data.get("take_uid_to_split") if isinstance(data, dict) else None
    if table is None and isinstance(data, dict) and isinstance(data.get("split_to_take_uids"), dict):
        table = {uid: split for split, uids in data["split_to_take_uids"].items() for uid in uids}
    if not isinstance(table, dict):
        raise ValueError(f"{path}: expected take_uid_to_split (an object take_uid -> train/val/test)")
    splits: dict[str, str] = {}
    unknown: dict[str, int] = {}
    for uid, split in table.items():
        name = SPLIT_NAMES.get(str(split).strip().lower())
        if name is None:
            unknown[str(split)] = unknown.get(str(split), 0) + 1
        else:
            splits[str(uid)] = name
    return splits, unknown


def _file_in(folder: Path, name: str) -> Path | None:
    """``folder/name``, matching the name in any case; None where there is none."""
    exact = folder / name
    if exact.is_file():
        return exact
    if not folder.is_dir():
        return None
    return next((p for p in sorted(folder.iterdir()) if p.name.lower() == name.lower() and p.is_file()), None)


def _aria_video_in(folder: Path, name: str | None) -> Path | None:
    """The Aria RGB video in ``folder``: ``name`` in any case, else the folder's one ``*_214-1.mp4`` file; None where
    there is no such single file."""
    found = _file_in(folder, name) if name else None
    if found is not None or not folder.is_dir():
        return found
    matches = [p for p in sorted(folder.iterdir()) if p.is_file() and p.name.lower().endswith(ARIA_RGB_SUFFIX)]
    return matches[0] if len(matches) == 1 else None


@dataclass(frozen=True)
class TakeVideo:
    """The video a take is read from: ``path`` and whether it is the 448 copy (``downscaled``)."""

    path: Path
    downscaled: bool


def take_video(take_dir: Path, take: Take, choice: str = "auto") -> TakeVideo | None:
    """The take's RGB video: ``"auto"``: the 448 copy where present, else the full video; ``"full"``: the full
    video only; ``"downscaled"``: the 448 copy only. None where the chosen file is missing. The file is the one
    takes.json names (in any case), else the folder's single ``*_214-1.mp4`` file."""
    name = Path(take.rgb_video).name if take.rgb_video else None
    full_folder = (take_dir / take.rgb_video).parent if take.rgb_video else take_dir / "frame_aligned_videos"
    full = _aria_video_in(full_folder, name)
    small = _aria_video_in(take_dir.joinpath(*DOWNSCALED_FOLDER), name or (full.name if full else None))
    if choice in ("auto", "downscaled") and small is not None:
        return TakeVideo(small, True)
    if choice in ("auto", "full") and full is not None:
        return TakeVideo(full, False)
    return None


def take_gaze_files(take_dir: Path, prefer: str = "personalized") -> tuple[list[tuple[Path, str]], Path | None]:
    """The take's 2D gaze files in the order they are tried, each with its kind (``"personalized"`` first where
    ``prefer`` is it, then ``"general"``), and, where there is no 2D file, a 3D one (for the drop reason)."""
    folder = take_dir / "eye_gaze"
    order = ("personalized", "general") if prefer == "personalized" else ("general",)
    found = [(path, kind) for kind in order if (path := _file_in(folder, GAZE_2D_FILES[kind])) is not None]
    if found:
        return found, None
    return [], next((f for f in (_file_in(folder, GAZE_3D_FILES[kind]) for kind in order) if f is not None), None)


def take_calibration_file(take_dir: Path) -> Path | None:
    """The take's RGB calibration, ``trajectory/online_calibration.jsonl`` (name in any case); None where missing."""
    return _file_in(take_dir / CALIBRATION_FILE[0], CALIBRATION_FILE[1])


__all__ = [
    "SPLIT_NAMES",
    "GAZE_2D_FILES",
    "GAZE_3D_FILES",
    "Take",
    "read_takes",
    "read_splits",
    "TakeVideo",
    "take_video",
    "take_gaze_files",
    "CALIBRATION_FILE",
    "take_calibration_file",
]
