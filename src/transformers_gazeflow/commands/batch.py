"""The bookkeeping of a ``gazeflow predict`` run over many videos, in plain Python (no torch, no numpy).

* **Inputs** (:func:`expand_videos`): video files, folders (their video files, sorted), glob patterns
  (``'clips/*.mp4'``, quoted so that the shell leaves them to us) and text files of paths (``.txt`` / ``.list``: one
  path per line, ``#`` comments, relative paths read from the list's folder); a file named twice is predicted once.
* **Output folders** (:func:`output_folders`): one per video under ``--output-dir``, named after the video's file
  name without extension made one plain file name (``data.output_safety.safe_name``: a stem ``..``, ``.`` or empty,
  or one with a separator, never leaves ``--output-dir``); when two videos share a name, or a name is one the batch
  itself uses (``index.csv``, ``.gazeflow_index``), each gets ``<name>-<8 hex digits of its path's hash>``.
  A lone video file given as the only input writes straight into ``--output-dir`` (no index).
* **Sharding** (:func:`shard_from_env`): under ``torchrun`` / ``accelerate launch`` (or ``gazeflow predict
  --num-processes N``, which starts its processes the same way) process ``RANK`` of ``WORLD_SIZE`` takes videos
  ``RANK, RANK + WORLD_SIZE, ...`` of the input order: a fixed partition, so no video is done twice.
* **The index** ``index.csv`` (:data:`INDEX_COLUMNS`): one row per video in input order, with its status: ``ok``,
  ``failed`` (the error in one line; the run goes on with the next video) or ``skipped`` (``--resume``: its folder
  already held a finished prediction, read back from its ``summary.json`` and checked by its schema,
  ``data.interface_files.prediction_summary``). Each process rewrites its own part
  (``.gazeflow_index/part-R-of-N.csv``) after every video; every process that finishes merges the parts that are
  complete, so the last one to finish writes the whole index (:func:`merge_index`).
"""

from __future__ import annotations

import csv
import glob
import hashlib
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ..data.atomic_files import atomic_write
from ..data.interface_files import InterfaceFileError, index_part_row, prediction_summary, read_json_object
from ..data.output_safety import safe_name

OVERLAY_NAME, CSV_NAME, SUMMARY_NAME = "overlay.mp4", "gaze.csv", "summary.json"
PARQUET_NAME = "gaze.parquet"
TABLE_NAMES = {"csv": CSV_NAME, "parquet": PARQUET_NAME}
"""The per-frame gaze table's file by ``--format`` (``outputs.writers``, ``outputs.gaze_parquet``)."""
INDEX_NAME = "index.csv"
INDEX_COLUMNS = ("video", "output_dir", "frames", "fps", "seconds", "status", "error")
"""``video``: the path as given (or found); ``output_dir``: its folder; ``frames``, ``fps``: of the processed range;
``seconds``: wall-clock seconds of its prediction (model loading excluded); ``status``: ok, failed or skipped;
``error``: why it failed."""
PARTS_DIR = ".gazeflow_index"
VIDEO_SUFFIXES = (".mp4", ".m4v", ".mov", ".avi", ".mkv", ".webm", ".mpg", ".mpeg", ".wmv", ".flv", ".ts", ".3gp")
LIST_SUFFIXES = (".txt", ".list", ".lst")


class InputError(ValueError):
    """A ``gazeflow`` input that cannot be used as given (the message names it and says what was expected)."""


def _is_glob(text: str) -> bool:
    return any(char in text for char in "*?[")


def expand_videos(inputs: list[str]) -> tuple[list[Path], bool]:
    """The videos named by ``inputs`` (files, folders, globs, lists of paths), in order, and whether the run is a
    batch (anything but one video file given alone). A missing path is kept: it fails when read (alone: before the
    model is loaded; in a batch: recorded as failed). Raises :class:`InputError` for an empty folder, a glob with
    no match or a list naming nothing."""
    videos: list[Path] = []
    batch = len(inputs) != 1
    for text in inputs:
        path = Path(text).expanduser()
        if path.is_dir():
            batch = True
            found = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in VIDEO_SUFFIXES)
            if not found:
                raise InputError(f"{text}: the folder holds no video files ({', '.join(VIDEO_SUFFIXES)})")
            videos.extend(found)
        elif path.is_file() and path.suffix.lower() in LIST_SUFFIXES:
            batch = True
            try:
                lines = path.read_text(encoding="utf-8").splitlines()
            except UnicodeDecodeError as err:
                raise InputError(f"{text}: a list of videos must be UTF-8 text, one path per line ({err})") from err
            listed = [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]
            if not listed:
                raise InputError(f"{text}: the list names no video (one path per line, # for comments)")
            videos.extend(
                Path(item).expanduser()
                if Path(item).expanduser().is_absolute()
                else path.parent / Path(item).expanduser()
                for item in listed
            )
        elif not path.exists() and _is_glob(text):
            batch = True
            found = sorted(Path(p) for p in glob.glob(os.path.expanduser(text), recursive=True) if Path(p).is_file())
            if not found:
                raise InputError(f"{text}: no file matches this pattern")
            videos.extend(found)
        else:
            videos.append(path)
    return _first_of_each(videos), batch


def _first_of_each(videos: list[Path]) -> list[Path]:
    """``videos`` with each file kept once, where it first appears: a video named twice (by a glob and a list, or
    as ``a.mp4`` and ``./a.mp4`` or through a link) is one video, predicted once into one folder."""
    seen: set[str] = set()
    unique = []
    for video in videos:
        key = os.path.realpath(video)
        if key not in seen:
            seen.add(key)
            unique.append(video)
    return unique


def output_folders(videos: list[Path], output_dir: Path) -> list[Path]:
    """One output folder per video: ``output_dir / <file name without extension>`` made one plain name
    (:func:`~transformers_gazeflow.data.output_safety.safe_name`), with the hash of the video's absolute path
    appended to names that several videos share or that the batch itself uses (the same on every process and every
    run)."""
    stems = [safe_name(video.stem or video.name) for video in videos]
    counts = Counter(stems)
    shared = {stem for stem in stems if counts[stem] > 1} | {INDEX_NAME, PARTS_DIR}
    folders = []
    for video, stem in zip(videos, stems):
        if stem in shared:
            digest = hashlib.sha1(str(Path(os.path.abspath(video))).encode("utf-8")).hexdigest()[:8]
            stem = f"{stem}-{digest}"
        folders.append(output_dir / stem)
    return folders


def check_output_dir(path: Path, argument: str = "--output-dir") -> None:
    """``path`` must be a folder or creatable as one (no file in the way, the first existing parent writable)."""
    if path.exists():
        if not path.is_dir():
            raise InputError(
                f"{argument} {path}: is an existing file, expected a folder (or a path that does not exist yet)"
            )
        if not os.access(path, os.W_OK | os.X_OK):
            raise InputError(f"{argument} {path}: the folder is not writable")
        return
    parent = path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise InputError(f"{argument} {path}: cannot create the folder, {parent} is a file")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"{argument} {path}: cannot create the folder, {parent} is not writable")


def make_output_dir(path: Path) -> list[Path]:
    """Create ``path`` (and missing parents) after :func:`check_output_dir`; return the folders created, deepest
    first, so that a failed run can remove what it made (:func:`remove_if_empty`)."""
    check_output_dir(path)
    created = []
    probe = path
    while not probe.exists():
        created.append(probe)
        probe = probe.parent
    path.mkdir(parents=True, exist_ok=True)
    return created


def remove_if_empty(folders: list[Path]) -> None:
    """Remove the given folders, deepest first, as long as they are empty."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return


def finished_summary(folder: Path, video: Path, table_name: str = CSV_NAME) -> dict | None:
    """The ``summary.json`` of a finished prediction of ``video`` in ``folder`` (checked by its schema) beside its
    gaze table ``table_name``, or None: a summary that is missing, of another video or not a prediction's, or a
    table that is missing, is not a finished prediction (the video is predicted again, and its folder's files are
    then replaced only if they are a prediction's)."""
    path = folder / SUMMARY_NAME
    if not path.is_file():
        return None
    try:
        summary = prediction_summary(read_json_object(path, "a prediction's summary.json"), str(path))
    except InterfaceFileError:
        return None
    if summary["video"] != str(video) or not (folder / table_name).is_file():
        return None
    return summary


@dataclass(frozen=True)
class Shard:
    """Process ``rank`` of ``world`` (from the launcher's ``RANK`` / ``WORLD_SIZE``; 0 of 1 alone)."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0

    def take(self, items: list) -> list:
        return items[self.rank :: self.world]


def shard_from_env(environ: dict[str, str] | None = None) -> Shard:
    """The shard of this process, read from ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK`` (torchrun, ``accelerate
    launch``, ``gazeflow predict --num-processes``)."""
    environ = os.environ if environ is None else environ
    try:
        world = int(environ.get("WORLD_SIZE", "1"))
        rank = int(environ.get("RANK", "0"))
        local_rank = int(environ.get("LOCAL_RANK", str(rank)))
    except ValueError as err:
        raise InputError(f"RANK / WORLD_SIZE / LOCAL_RANK must be integers ({err})") from err
    if world < 1 or not 0 <= rank < world:
        raise InputError(f"RANK {rank} is not within WORLD_SIZE {world}")
    return Shard(rank=rank, world=world, local_rank=local_rank)


def one_line(err: BaseException) -> str:
    """An error as one line without Python's and FFmpeg's noise: ``[Errno N]`` prefixes dropped, the path that
    PyAV repeats at the end (``...: '/path/x.mp4'``) dropped, whitespace collapsed."""
    import re

    text = " ".join(str(err).split()) or type(err).__name__
    text = re.sub(r"\[Errno -?\d+\]\s*", "", text)
    text = re.sub(
        r"(: [^:]*?): '([^']+)'$", lambda m: m.group(1) if m.group(2) in text[: m.start()] else m.group(0), text
    )
    return text


def _write_csv_atomic(path: Path, rows: list[dict], columns: tuple[str, ...]) -> None:
    """Write ``rows`` as a CSV file whole (:func:`atomic_write`: each process its own temporary, as parts may merge
    at once)."""

    def write_rows(temporary: Path) -> None:
        with temporary.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)

    atomic_write(path, write_rows)


class IndexPart:
    """This process's rows of the index, rewritten after every video (``order``: the video's place in the input)."""

    def __init__(self, output_dir: Path, shard: Shard) -> None:
        self.folder = output_dir / PARTS_DIR
        self.folder.mkdir(parents=True, exist_ok=True)
        self.path = self.folder / f"part-{shard.rank}-of-{shard.world}.csv"
        self.done_path = self.path.with_suffix(".done")
        self.done_path.unlink(missing_ok=True)
        self.output_dir, self.shard = output_dir, shard
        self.rows: list[dict] = []
        _write_csv_atomic(self.path, self.rows, ("order", *INDEX_COLUMNS))

    def add(self, order: int, row: dict) -> None:
        self.rows.append({"order": order, **row})
        _write_csv_atomic(self.path, self.rows, ("order", *INDEX_COLUMNS))

    def finish(self) -> Path | None:
        """Mark this part complete and merge the index if every part is; returns ``index.csv`` when written."""
        self.done_path.write_text("done\n", encoding="utf-8")
        return merge_index(self.output_dir, self.shard.world)


def merge_index(output_dir: Path, world: int) -> Path | None:
    """Write ``index.csv`` from the ``world`` parts when all are complete (else leave it); rows in input order."""
    folder = output_dir / PARTS_DIR
    rows = []
    for rank in range(world):
        part = folder / f"part-{rank}-of-{world}.csv"
        if not part.with_suffix(".done").is_file():
            return None
        with part.open(newline="", encoding="utf-8") as handle:
            rows.extend(index_part_row(row, str(part), line) for line, row in enumerate(csv.DictReader(handle), 2))
    rows.sort(key=lambda row: int(row["order"]))
    index = output_dir / INDEX_NAME
    _write_csv_atomic(index, rows, INDEX_COLUMNS)
    return index


def read_index(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


__all__ = [
    "INDEX_NAME",
    "INDEX_COLUMNS",
    "VIDEO_SUFFIXES",
    "LIST_SUFFIXES",
    "InputError",
    "expand_videos",
    "output_folders",
    "check_output_dir",
    "make_output_dir",
    "remove_if_empty",
    "finished_summary",
    "Shard",
    "shard_from_env",
    "IndexPart",
    "merge_index",
    "read_index",
    "one_line",
    "OVERLAY_NAME",
    "CSV_NAME",
    "PARQUET_NAME",
    "TABLE_NAMES",
    "SUMMARY_NAME",
]
