"""Fixations as scanpaths another tool reads: pysaliency's ``FixationTrains``.

``scanpaths.json`` (:func:`scanpath_record`) holds, under ``"fixation_trains"``, exactly the arguments of
``pysaliency.FixationTrains.from_fixation_trains``: one train per series that has fixations (the point estimate,
then each sample), ``xs``/``ys`` the fixation centroids in native pixels of the video frame (the stimulus), ``ts``
their onsets in seconds from the video's start, ``ns`` the stimulus index (0: the one video), ``subjects`` the
train's index, the per-fixation durations (seconds) as the ``durations`` scanpath-fixation attribute (pysaliency
names it ``duration`` on its fixations) and each train's ``sample_id`` (-1 the point estimate, ``k`` sample ``k``)
as a scanpath attribute. So reading them back is one line::

    import json, pysaliency
    record = json.load(open("scanpaths.json"))
    trains = pysaliency.FixationTrains.from_fixation_trains(**record["fixation_trains"])

(:func:`load_fixation_trains` does this).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .events import GazeEvents

SCANPATH_FORMAT = "gazeflow-scanpaths"


def scanpath_record(
    events: GazeEvents,
    fps: float,
    width: int,
    height: int,
    video_id: str = "video",
    first_series_is_point_estimate: bool = True,
) -> dict[str, Any]:
    """The ``scanpaths.json`` record of ``events`` (their fixations, by series) of a ``width x height`` video."""
    trains: dict[str, list] = {"xs": [], "ys": [], "ts": [], "ns": [], "subjects": []}
    durations, sample_ids = [], []
    for series in sorted({fixation.series for fixation in events.fixations}):
        fixations = [f for f in events.fixations if f.series == series]
        trains["xs"].append([f.centroid_px[0] for f in fixations])
        trains["ys"].append([f.centroid_px[1] for f in fixations])
        trains["ts"].append([f.start_frame / fps for f in fixations])
        trains["ns"].append(0)
        trains["subjects"].append(len(trains["subjects"]))
        durations.append([f.frames / fps for f in fixations])
        sample_ids.append(series - 1 if first_series_is_point_estimate else series)
    trains["scanpath_fixation_attributes"] = {"durations": durations}
    trains["scanpath_attributes"] = {"sample_id": sample_ids}
    trains["scanpath_attribute_mapping"] = {"durations": "duration"}
    return {
        "format": SCANPATH_FORMAT,
        "version": 1,
        "video_id": video_id,
        "width": int(width),
        "height": int(height),
        "fps": float(fps),
        "units": {"xs": "px", "ys": "px", "ts": "s", "durations": "s"},
        "fixation_trains": trains,
    }


def write_scanpaths(path: str | os.PathLike, record: dict[str, Any]) -> Path:
    """Write a :func:`scanpath_record` as JSON."""
    path = Path(path)
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    return path


def load_fixation_trains(path: str | os.PathLike):
    """``scanpaths.json`` as a ``pysaliency.FixationTrains`` (needs pysaliency; one-line errors otherwise)."""
    path = Path(path)
    record = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(record, dict) or record.get("format") != SCANPATH_FORMAT:
        raise ValueError(f"{path}: not a gazeflow scanpaths.json")
    if not record["fixation_trains"]["xs"]:
        raise ValueError(f"{path}: holds no fixation (pysaliency needs at least one)")
    try:
        import pysaliency
    except ImportError as err:
        raise ImportError(f"reading {path} into pysaliency needs pysaliency (pip install pysaliency): {err}") from None
    return pysaliency.FixationTrains.from_fixation_trains(**record["fixation_trains"])


__all__ = ["SCANPATH_FORMAT", "scanpath_record", "write_scanpaths", "load_fixation_trains"]
