"""``synthetic_gaze``: a procedural, seeded, egocentric-like gaze dataset rendered to real mp4 files.

Each clip shows a textured work surface through a panning, shaking head camera, several moving objects and two
hands reaching for them (:mod:`.scene`). Each clip has a *task*: the task decides which object the gaze
mostly serves (its colour and shape identify the task, distractors are neutral) and where that object tends to
be; the gaze has human-like dynamics (:mod:`.gaze`). Everything is fully determined by
``(seed, clip index)``.

On disk (what :func:`generate_dataset` writes and the ``synthetic_gaze`` builder reads)::

    <data_dir>/synthetic_gaze.json   settings + format version (written last: its presence means complete)
    <data_dir>/annotations.jsonl     one line per clip: clip_id, video, split, task, per-frame gaze/type/valid
    <data_dir>/videos/<clip_id>.mp4  the rendered clips (H.264)

While it renders, each finished clip's annotation line also sits beside its video (``videos/<clip_id>.json``, written
after the video): a rendering interrupted before the manifest resumes from them and renders only the clips without
one; they are removed once the manifest is written.

:func:`~.egtea_layout.write_egtea_layout` writes the same kind of clips in the raw
EGTEA Gaze+ layout instead.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..atomic_files import TEMPORARY_PREFIX, atomic_write
from ..gaze_common import fill_untracked
from ..gaze_types import UNTRACKED
from ..masks import RegionMasks
from ..video import write_video
from .gaze import SimulatedGaze
from .scenarios import get_scenario
from .scene import TASK_COLOR_NAMES, TASK_SHAPES, Scene, render_frame, render_frames, render_masks
from .settings import SyntheticGazeSettings

FORMAT_VERSION = 1
# bump whenever a change to the scene or gaze simulation changes the clips: stored datasets then refuse to load
GENERATOR_VERSION = 2  # 2: untracked frames follow gaze_common.fill_untracked (leading ones too)
#: Generator versions whose folders still load: version 1 made the same videos, types and valid frames and differs
#: only in the coordinates of untracked frames before a clip's first valid frame, which :func:`load_dataset_records`
#: re-derives with ``fill_untracked`` (so folders generated before need no re-rendering).
READABLE_GENERATOR_VERSIONS = (1, 2)
MANIFEST_NAME = "synthetic_gaze.json"
ANNOTATIONS_NAME = "annotations.jsonl"
VIDEO_DIR = "videos"
SPLITS = ("train", "validation", "test")
TASK_VERBS: tuple[str, ...] = ("take", "cut", "stir", "wash", "open", "pour", "put", "mix")
#: the keys of an annotation line (:func:`clip_record`) that reading a dataset needs
RECORD_KEYS = ("clip_id", "video", "split", "task", "num_frames", "width", "height", "fps", "gaze", "gaze_type")
LAYOUT_HELP = (
    f"expected a folder written by generate_dataset: {MANIFEST_NAME}, {ANNOTATIONS_NAME} and {VIDEO_DIR}/<clip_id>.mp4"
)


@dataclass(frozen=True)
class SyntheticClip:
    """One simulated clip: its identity, task, split, scene (frames are drawn on demand) and gaze."""

    index: int
    clip_id: str
    task: int
    split: str
    fps: float
    scene: Scene
    gaze: SimulatedGaze

    @property
    def num_frames(self) -> int:
        return self.scene.num_frames

    @property
    def width(self) -> int:
        return self.scene.width

    @property
    def height(self) -> int:
        return self.scene.height

    def frames(self) -> Iterator[np.ndarray]:
        """The clip's RGB uint8 frames ``[H, W, 3]``, drawn one at a time."""
        return render_frames(self.scene)

    def frame(self, t: int) -> np.ndarray:
        return render_frame(self.scene, t)

    def render(self) -> np.ndarray:
        """All frames at once, ``[T, H, W, 3]`` uint8 (for tests and short clips)."""
        return np.stack(list(self.frames()))

    def masks(self, token_grid: tuple[int, int] | None = None) -> RegionMasks:
        """Exact per-frame masks of the hands (with forearms) and the visible target object, bool ``[T, H, W]``
        (:func:`~.scene.render_masks`: the frames' own geometry); with ``token_grid=(rows, cols)`` also each
        region's covered fraction of every grid cell, float32 ``[T, rows, cols]``."""
        frames = [render_masks(self.scene, t) for t in range(self.num_frames)]
        masks = RegionMasks({name: np.stack([frame[name] for frame in frames]) for name in frames[0]})
        return masks if token_grid is None else masks.on_grid(token_grid)


def task_names(num_tasks: int) -> list[str]:
    """Human-readable task names, e.g. ``"take red disc"``: verb + the target's colour and shape."""
    return [f"{TASK_VERBS[t]} {TASK_COLOR_NAMES[t]} {TASK_SHAPES[t % len(TASK_SHAPES)]}" for t in range(num_tasks)]


def clip_task(settings: SyntheticGazeSettings, index: int) -> int:
    """Tasks are dealt round-robin over clip indices, so every task has the same number of clips (within one)."""
    return index % settings.num_tasks


def split_assignment(settings: SyntheticGazeSettings) -> list[str]:
    """The split of every clip: a seeded permutation cut by the fractions (val/test get >= 1 clip from 3 clips)."""
    n = settings.num_clips
    order = np.random.default_rng([settings.seed, 1 << 20]).permutation(n)
    num_val = int(round(settings.validation_fraction * n))
    num_test = int(round(settings.test_fraction * n))
    if n >= 3:
        num_val = max(num_val, 1 if settings.validation_fraction > 0 else 0)
        num_test = max(num_test, 1 if settings.test_fraction > 0 else 0)
    num_val, num_test = min(num_val, max(n - 1, 0)), min(num_test, max(n - 1 - num_val, 0))
    splits = ["train"] * n
    for position, index in enumerate(order):
        if position < num_val:
            splits[index] = "validation"
        elif position < num_val + num_test:
            splits[index] = "test"
    return splits


def generate_clip(settings: SyntheticGazeSettings, index: int, split: str | None = None) -> SyntheticClip:
    """Simulate clip ``index`` with the settings' scenario (:mod:`.scenarios`; no pixels are drawn until its frames
    are asked for)."""
    if not 0 <= index < settings.num_clips:
        raise ValueError(f"index must be in [0, {settings.num_clips}), got {index}")
    generate = get_scenario(settings.scenario).generate
    rng = np.random.default_rng([settings.seed, index])
    task = clip_task(settings, index)
    num_frames = int(rng.integers(settings.min_frames, settings.max_frames + 1))
    scene, gaze = generate(rng, settings, task, num_frames)
    return SyntheticClip(
        index=index,
        clip_id=f"synth_{settings.seed}_{index:05d}",
        task=task,
        split=split if split is not None else split_assignment(settings)[index],
        fps=float(settings.fps),
        scene=scene,
        gaze=gaze,
    )


def clip_record(clip: SyntheticClip, video: str, names: list[str]) -> dict[str, Any]:
    """The annotation line of one clip (gaze rounded to 1e-6 of the frame)."""
    return {
        "clip_id": clip.clip_id,
        "video": video,
        "split": clip.split,
        "task": clip.task,
        "task_name": names[clip.task],
        "num_frames": clip.num_frames,
        "width": clip.width,
        "height": clip.height,
        "fps": clip.fps,
        "gaze": np.round(clip.gaze.gaze.astype(np.float64), 6).tolist(),
        "gaze_type": clip.gaze.gaze_type.astype(int).tolist(),
        "valid": clip.gaze.valid.astype(bool).tolist(),
    }


def _write_one(job: tuple[SyntheticGazeSettings, int, str, str]) -> dict[str, Any]:
    """Render one clip (or read back its record, left by an interrupted rendering); returns its annotation line."""
    settings, index, split, out_dir = job
    clip_id = f"synth_{settings.seed}_{index:05d}"
    video = f"{VIDEO_DIR}/{clip_id}.mp4"
    done = Path(out_dir) / VIDEO_DIR / f"{clip_id}.json"
    if done.is_file() and (Path(out_dir) / video).is_file():
        try:
            return json.loads(done.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            pass
    clip = generate_clip(settings, index, split)
    write_video(Path(out_dir) / video, clip.frames(), fps=clip.fps)
    record = clip_record(clip, video, task_names(settings.num_tasks))
    atomic_write(done, json.dumps(record, separators=(",", ":")))
    return record


def _read_manifest(path: Path) -> SyntheticGazeSettings:
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        if manifest.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"format_version {manifest.get('format_version')!r}, this code reads {FORMAT_VERSION}")
        if manifest.get("generator_version") not in READABLE_GENERATOR_VERSIONS:
            raise ValueError(
                f"generated by generator_version {manifest.get('generator_version')!r}, this code reads "
                f"{READABLE_GENERATOR_VERSIONS}: regenerate into a new folder"
            )
        return SyntheticGazeSettings.from_dict(manifest["settings"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{path} is not a synthetic_gaze manifest: {err}") from err


def generate_dataset(out_dir: str | os.PathLike, settings: SyntheticGazeSettings, num_workers: int = 1) -> Path:
    """Render every clip of ``settings`` into ``out_dir`` (layout in the module docstring); returns ``out_dir``.

    A folder that already holds a complete dataset of the same settings is left as it is; one with other settings
    raises ``ValueError``, and a non-empty folder without a manifest raises ``FileNotFoundError`` (nothing is
    overwritten or mixed).
    """
    get_scenario(settings.scenario)  # an unknown scenario fails before anything is written
    out_dir = Path(out_dir)
    manifest_path = out_dir / MANIFEST_NAME
    if manifest_path.exists():
        existing = _read_manifest(manifest_path)
        if existing != settings:
            raise ValueError(
                f"{out_dir} already holds a synthetic_gaze dataset with other settings "
                f"({existing}); asked for {settings}. Use another data_dir."
            )
        return out_dir
    if out_dir.exists():
        foreign = sorted(p.name for p in out_dir.iterdir() if p.name != VIDEO_DIR and not _is_own_temporary(p.name))
        if foreign:
            raise FileNotFoundError(
                f"{manifest_path} not found, and {out_dir} is not empty ({foreign[:5]}), so "
                f"no synthetic clips are generated into it: {LAYOUT_HELP}; or give an empty "
                "or new folder to generate into"
            )
    (out_dir / VIDEO_DIR).mkdir(parents=True, exist_ok=True)
    splits = split_assignment(settings)
    jobs = [(settings, index, splits[index], str(out_dir)) for index in range(settings.num_clips)]
    records = _render_with_progress(jobs, out_dir, num_workers)
    atomic_write(
        out_dir / ANNOTATIONS_NAME, "".join(json.dumps(record, separators=(",", ":")) + "\n" for record in records)
    )
    manifest = {
        "format_version": FORMAT_VERSION,
        "generator_version": GENERATOR_VERSION,
        "settings": settings.to_dict(),
        "task_names": task_names(settings.num_tasks),
        "num_clips": len(records),
    }
    atomic_write(manifest_path, json.dumps(manifest, indent=2) + "\n")
    for record in records:
        (out_dir / VIDEO_DIR / f"{record['clip_id']}.json").unlink(missing_ok=True)
    return out_dir


def _render_with_progress(jobs: list, out_dir: Path, num_workers: int) -> list[dict[str, Any]]:
    """Every job's record, rendered over ``num_workers`` processes, with a progress bar over the clips whose postfix
    is the dataset's estimated size on disk (the videos written so far per clip, times the clips)."""
    from tqdm.auto import tqdm

    bar = tqdm(total=len(jobs), desc=f"rendering synthetic clips into {out_dir}", unit="clip")
    records = []
    try:
        if num_workers > 1:
            with ProcessPoolExecutor(max_workers=num_workers) as pool:
                for record in pool.map(_write_one, jobs, chunksize=4):
                    records.append(record)
                    _advance(bar, out_dir, len(records), len(jobs))
        else:
            for job in jobs:
                records.append(_write_one(job))
                _advance(bar, out_dir, len(records), len(jobs))
    finally:
        bar.close()
    return records


def _advance(bar, out_dir: Path, done: int, total: int) -> None:
    bar.update(1)
    if done in (1, 10, 100) or done % 500 == 0:
        size = sum(path.stat().st_size for path in (out_dir / VIDEO_DIR).glob("*.mp4"))
        estimate = size / done * total / 1e6
        bar.set_postfix(disk=f"~{estimate:.1f} MB" if estimate < 10 else f"~{estimate:.0f} MB")


def _is_own_temporary(name: str) -> bool:
    """Whether ``name`` is the temporary of this layout's annotations or manifest, left by an interrupted run."""
    return name.startswith(TEMPORARY_PREFIX) and name.endswith((ANNOTATIONS_NAME, MANIFEST_NAME))


def _untracked_filled(gaze: list, gaze_type: list) -> list:
    """A record's gaze with its untracked frames by :func:`~transformers_gazeflow.data.gaze_common.fill_untracked`
    (a no-op on folders of the current generator; brings generator-1 folders to the builders' rule), other frames
    untouched."""
    types = np.asarray(gaze_type)
    untracked = types == UNTRACKED
    if not untracked.any():
        return gaze
    points = np.asarray(gaze, np.float64).reshape(len(types), 2)
    points[untracked] = fill_untracked(points, types)[untracked]
    return points.tolist()


def load_dataset_records(data_dir: str | os.PathLike) -> tuple[SyntheticGazeSettings, list[dict[str, Any]]]:
    """Read a generated dataset: its settings and the clip records, with ``video_path`` made absolute (and the gaze of
    untracked frames by the builders' rule, ``gaze_common.fill_untracked``).

    Raises ``FileNotFoundError`` naming the missing path and the expected layout.
    """
    data_dir = Path(data_dir).resolve()
    manifest_path = data_dir / MANIFEST_NAME
    if not manifest_path.is_file():
        raise FileNotFoundError(f"{manifest_path} not found: {LAYOUT_HELP}")
    settings = _read_manifest(manifest_path)
    annotations = data_dir / ANNOTATIONS_NAME
    if not annotations.is_file():
        raise FileNotFoundError(f"{annotations} not found: {LAYOUT_HELP}")
    records = []
    with open(annotations, encoding="utf-8", errors="replace") as handle:  # a bad byte fails its line's JSON
        for line_number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{annotations}, line {line_number}: not JSON ({err})") from err
            missing = [key for key in RECORD_KEYS if not isinstance(record, dict) or key not in record]
            if missing:
                raise ValueError(
                    f"{annotations}, line {line_number}: expected a clip record with the keys "
                    f"{list(RECORD_KEYS)}, but it lacks {missing}"
                )
            video = data_dir / record["video"]
            if not video.is_file():
                raise FileNotFoundError(
                    f"{video} not found (listed in {annotations}, line {line_number}): {LAYOUT_HELP}"
                )
            record["video_path"] = str(video)
            record["gaze"] = _untracked_filled(record["gaze"], record["gaze_type"])
            records.append(record)
    if len(records) != settings.num_clips:
        raise ValueError(f"{annotations} lists {len(records)} clips, the manifest says {settings.num_clips}")
    return settings, records


__all__ = [
    "SyntheticClip",
    "generate_clip",
    "generate_dataset",
    "load_dataset_records",
    "split_assignment",
    "task_names",
    "clip_task",
    "clip_record",
    "SPLITS",
    "MANIFEST_NAME",
    "ANNOTATIONS_NAME",
    "VIDEO_DIR",
]
