"""Writers of small raw-format fixtures, as the real downloads lay them out.

Nothing here is a real dataset: tests generate BeGaze exports (formats 1 and 2), EGTEA folders with tiny mp4 clips,
Ego4D gaze CSVs (named ``<uid>.mp4`` like the download), GLC's lists and untracked-interval files.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from transformers_gazeflow.data.egtea_format import begaze_lines, format_egtea_clip_name
from transformers_gazeflow.data.video import write_video

EGO4D_HEADER = (
    "component_idx,component_timestamp_s,canonical_timestamp_s,world_index,confidence,"
    "norm_pos_x,norm_pos_y,gaze_point_3d_x,gaze_point_3d_y"
)


def tiny_frames(num_frames: int, height: int = 24, width: int = 32) -> np.ndarray:
    frames = np.zeros((num_frames, height, width, 3), np.uint8)
    frames[..., 0] = (np.arange(num_frames) * 5 % 256)[:, None, None]
    return frames


def write_clip(path: Path, num_frames: int, fps: float = 24, height: int = 24, width: int = 32) -> Path:
    return write_video(path, tiny_frames(num_frames, height, width), fps=fps)


def write_cut_clip(
    path: Path,
    num_frames: int,
    keep: float = 0.5,
    index_first: bool = True,
    fps: float = 24,
    height: int = 24,
    width: int = 32,
) -> Path:
    """A clip cut short (an interrupted copy or download): the first ``keep`` of its bytes. ``index_first``: the mp4
    index (``moov``) is written before the frames, as ``-movflags faststart`` does, so the cut file still opens and
    lists all its frames; otherwise the index comes last and is lost with the cut."""
    import av

    path.parent.mkdir(parents=True, exist_ok=True)
    full = path.with_name(path.name + ".full.mp4")
    container = av.open(str(full), "w", options={"movflags": "faststart"} if index_first else {})
    stream = container.add_stream("libx264", rate=int(fps))
    stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
    for frame in tiny_frames(num_frames, height, width):
        container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
    container.mux(stream.encode())
    container.close()
    data = full.read_bytes()
    full.unlink()
    path.write_bytes(data[: int(len(data) * keep)])
    return path


def _write_lines(path: Path, lines: list[str], crlf: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    newline = "\r\n" if crlf else "\n"
    with open(path, "w", encoding="utf-8", newline="") as handle:
        handle.write(newline.join(lines) + newline)
    return path


def begaze_row(fmt: int, px: float, py: float, frame: int, event: str, time: int = 0) -> str:
    """One data row of BeGaze format ``fmt`` (the package's writer, :func:`egtea_format.begaze_lines`)."""
    return begaze_lines([(time, px, py, frame, event)], fmt=fmt)[-1]


def write_begaze(
    path: Path,
    samples: list[tuple[float, float, int, str]],
    fmt: int = 1,
    extra_lines: list[str] = (),
    crlf: bool = False,
    claimed_samples: int | None = None,
) -> Path:
    """A BeGaze export of ``(px, py, frame, event)`` samples; ``extra_lines`` are appended verbatim."""
    rows = [(i * 1000, px, py, frame, event) for i, (px, py, frame, event) in enumerate(samples)]
    lines = begaze_lines(
        rows, fmt=fmt, header=[f"## Header line {i}" for i in range(2, 34)], num_samples=claimed_samples
    )
    assert len(lines) == 34 + len(rows) and lines[9 if fmt == 1 else 10].startswith("## Number of Samples:")
    return _write_lines(path, lines + list(extra_lines), crlf)


@dataclass
class EgteaFixtureClip:
    name: str  # <VIDEO>-<a>-<b>-F<start>-F<end>
    num_frames: int
    action: int = 1  # 1-based, as in the split files
    verb: int = 1
    noun: int = 1

    @property
    def video(self) -> str:
        return "-".join(self.name.split("-")[:3])


def egtea_clip_name(video: str, start: int, end: int) -> str:
    return format_egtea_clip_name(video, 1000, 2000, start, end)


def make_egtea_root(
    root: Path,
    train: list[EgteaFixtureClip],
    test: list[EgteaFixtureClip],
    gaze: dict[str, tuple[list, int, str]],
    split_id: int = 1,
    crlf: bool = True,
    fps: float = 24,
) -> Path:
    """An EGTEA Gaze+ folder: ``cropped_clips/<VIDEO>/<CLIP>.mp4``, ``gaze_data/<name>``, split and index files.

    ``gaze`` maps a video to ``(samples, fmt, file_name)`` so both gaze file names can be exercised.
    """
    for clip in train + test:
        write_clip(root / "cropped_clips" / clip.video / f"{clip.name}.mp4", clip.num_frames, fps=fps)
    (root / "gaze_data").mkdir(parents=True, exist_ok=True)
    for samples, fmt, file_name in gaze.values():
        write_begaze(root / "gaze_data" / file_name, samples, fmt=fmt)
    for split, clips in (("train", train), ("test", test)):
        lines = [f"{c.name} {c.action} {c.verb} {c.noun}" for c in clips]
        _write_lines(root / f"{split}_split{split_id}.txt", lines, crlf=crlf)
    _write_lines(root / "action_idx.txt", [f"Action number {i} {i}" for i in range(1, 107)], crlf=crlf)
    return root


def write_ego4d_gaze_csv(
    path: Path, t: np.ndarray, x: np.ndarray, y_bottom_up: np.ndarray, extra_lines: list[str] = ()
) -> Path:
    """An Ego4D gaze CSV (pass ``y`` with the file's bottom-left origin)."""
    rows = [
        f"{i},{ti:.6f},{ti + 100:.6f},{1000 + i // 8},0.9,{xi:.6f},{yi:.6f},0,0"
        for i, (ti, xi, yi) in enumerate(zip(t, x, y_bottom_up))
    ]
    return _write_lines(path, [EGO4D_HEADER] + rows + list(extra_lines))


def make_ego4d_root(
    root: Path,
    videos: dict[str, float],
    gaze: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]],
    train: list[str] = (),
    test: list[str] = (),
    untracked: list[str] = (),
    fps: float = 30,
    size: tuple[int, int] = (32, 34),
) -> Path:
    """An Ego4D gaze folder: ``full_scale.gaze/<uid>.mp4``, ``gaze/<uid>.mp4`` (CSV content), manifests, GLC lists.

    ``videos`` maps a uid to its duration in seconds; ``gaze`` to ``(t, x, y)`` with y bottom-up.
    """
    width, height = size
    for uid, duration in videos.items():
        write_clip(
            root / "full_scale.gaze" / f"{uid}.mp4", int(round(duration * fps)), fps=fps, height=height, width=width
        )
    for uid, (t, x, y) in gaze.items():
        write_ego4d_gaze_csv(root / "gaze" / f"{uid}.mp4", t, x, y)
    _write_lines(root / "gaze" / "manifest.csv", ["uid,filename"] + [f"{u},{u}.mp4" for u in gaze])
    _write_lines(root / "gaze" / "manifest.ver", ["uid,version,filename"] + [f"{u},1,{u}.mp4" for u in gaze])
    if train:
        _write_lines(root / "train_ego4d_gaze.csv", list(train), crlf=True)
    if test:
        _write_lines(root / "test_ego4d_gaze.csv", list(test), crlf=True)
    if untracked:
        _write_lines(root / "ego4d_gaze_untracked.csv", list(untracked), crlf=True)
    return root


def glc_clip(uid: str, start: int, end: int | None = None) -> str:
    end = start + 5 if end is None else end
    return f"{uid}/{uid}_t{start}_t{end}.mp4"
