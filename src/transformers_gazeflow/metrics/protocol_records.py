"""What the evaluation protocol reads and returns (paper Section 4.1 and Appendix E.3; docs/specs/evaluation.md,
"Which frames"): the frames of a clip it scores (the first :data:`PROTOCOL_WINDOW` frames, :data:`PROTOCOL_NUM_FRAMES`
protocol frames among them: :func:`protocol_frame_indices`), a clip's ground truth and a prediction for it as it takes
them (:class:`ClipGroundTruth`, :class:`ClipPrediction`: built from mappings, dataclasses or arrays and checked, each
error naming the clip and the field), and what it returns (:class:`EvaluationResult`). The evaluator itself is
``metrics.protocol.GazeEvaluator``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from ..data.gaze_types import GAZE_TYPE_CODES
from ..models.gazeflow.geometry import FisheyeCamera, PinholeCamera, camera_from_fields

PROTOCOL_WINDOW = 64
"""Frames of the evaluated window (the model's T; paper Section 4.1)."""

PROTOCOL_NUM_FRAMES = 8
"""Protocol frames per clip: ``linspace(0, 63, 8)``."""


def protocol_frame_indices(
    num_frames: int, window: int = PROTOCOL_WINDOW, count: int = PROTOCOL_NUM_FRAMES
) -> np.ndarray:
    """Local protocol frames ``linspace(0, window - 1, count)`` (``[0, 9, ..., 63]``), clamped to ``num_frames - 1``."""
    if num_frames < 1:
        raise ValueError(f"num_frames must be >= 1, got {num_frames}")
    idx = np.round(np.linspace(0, window - 1, count)).astype(np.int64)
    return np.minimum(idx, num_frames - 1)


@dataclasses.dataclass
class ClipGroundTruth:
    """Ground truth of a clip's first window, in the unified schema (docs/specs/data.md).

    ``gaze [T, 2]`` unit coordinates of the native frame, ``gaze_type [T]`` unified codes, ``valid [T]`` bool,
    ``width``/``height`` native pixels, ``camera`` the camera of that frame where the example carries one (its
    ``camera_model``/``camera_params``, or a ``geometry`` camera as ``camera``; it then gives the clip's degrees), else
    None (the evaluator's camera applies).
    """

    clip_id: str
    gaze: np.ndarray
    gaze_type: np.ndarray
    valid: np.ndarray
    width: int
    height: int
    camera: PinholeCamera | FisheyeCamera | None = None

    @classmethod
    def from_any(
        cls, item: Any, where: str = "ground truth", window: int | None = PROTOCOL_WINDOW
    ) -> "ClipGroundTruth":
        """Build and check from a ``ClipGroundTruth``, a dataclass or a mapping with the schema's fields.

        Inputs longer than ``window`` (the protocol window, 64 frames) are cut to it; ``None`` keeps every frame.
        """
        if dataclasses.is_dataclass(item) and not isinstance(item, type):
            fields = {field.name: getattr(item, field.name) for field in dataclasses.fields(item)}
        elif isinstance(item, Mapping):
            fields = dict(item)
        else:
            raise ValueError(
                f"{where}: expected a mapping or dataclass with gaze, gaze_type, valid, width, height, "
                f"clip_id; got {type(item).__name__}"
            )
        missing = [k for k in ("gaze", "gaze_type", "valid", "width", "height") if k not in fields]
        if missing:
            raise ValueError(f"{where}: missing field(s) {missing}")
        clip_id = str(fields.get("clip_id", ""))
        where = f"{where} of clip {clip_id!r}" if clip_id else where
        gaze = np.asarray(as_numpy(fields["gaze"]), dtype=np.float64)
        if gaze.ndim != 2 or gaze.shape[1] != 2 or gaze.shape[0] < 1:
            raise ValueError(f"{where}: gaze must have shape [T, 2] with T >= 1, got {gaze.shape}")
        t = gaze.shape[0]
        gaze_type = np.asarray(as_numpy(fields["gaze_type"]))
        valid = np.asarray(as_numpy(fields["valid"]))
        if gaze_type.shape != (t,):
            raise ValueError(f"{where}: gaze_type must have shape [T] = [{t}] like gaze, got {gaze_type.shape}")
        if valid.shape != (t,):
            raise ValueError(f"{where}: valid must have shape [T] = [{t}] like gaze, got {valid.shape}")
        if not np.isin(gaze_type, GAZE_TYPE_CODES).all():
            raise ValueError(
                f"{where}: gaze_type must hold unified codes {GAZE_TYPE_CODES}, got {np.unique(gaze_type)}"
            )
        if not np.isfinite(gaze).all():
            raise ValueError(f"{where}: gaze contains NaN or inf")
        if gaze.min() < 0 or gaze.max() > 1:
            raise ValueError(
                f"{where}: gaze must be unit coordinates in [0, 1], got values in [{gaze.min():.4g}, {gaze.max():.4g}]"
            )
        width, height = fields["width"], fields["height"]
        if int(width) != width or int(height) != height or width < 1 or height < 1:
            raise ValueError(f"{where}: width and height must be positive integers, got {width}x{height}")
        if width * height < 2:
            raise ValueError(f"{where}: a {width}x{height} frame has one pixel; the map metrics need at least 2")
        w = t if window is None else min(t, window)
        camera = _camera_of(fields, int(width), int(height), where)
        return cls(
            clip_id, gaze[:w], gaze_type[:w].astype(np.int64), valid[:w].astype(bool), int(width), int(height), camera
        )


def _camera_of(fields: dict, width: int, height: int, where: str) -> PinholeCamera | FisheyeCamera | None:
    """The clip's own camera: ``camera`` (a ``geometry`` camera, or None), else the schema's ``camera_model`` and
    ``camera_params`` (``"none"``: None); at the clip's ``width x height`` (a camera of another size of the same view
    is rescaled by its ``for_frame``)."""
    camera = fields.get("camera")
    try:
        if camera is None and fields.get("camera_model") is not None:
            camera = camera_from_fields(fields["camera_model"], as_numpy(fields.get("camera_params")), width, height)
        if camera is not None and not isinstance(camera, (PinholeCamera, FisheyeCamera)):
            raise ValueError(f"camera must be a PinholeCamera or a FisheyeCamera, got {type(camera).__name__}")
        return None if camera is None else camera.for_frame(width, height)
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None


@dataclasses.dataclass
class ClipPrediction:
    """A prediction for one clip's window: ``trajectories [K, T, 2]`` unit coordinates (K samples), and/or
    ``heatmaps``: ``[F, h, w]`` maps of frames ``heatmap_frames`` (default: frames ``0..F-1``), or one static
    ``[h, w]`` map for every frame. For ``protocol="paper"`` maps of another size are resized (bilinear) to the
    native frame; for ``protocol="glc"`` they are 64x64 (GLC's softmax output, see ``glc_frame_softmax``) or native
    (brought into GLC's crop grid by ``glc_native_to_grid``).
    When both are given, the heatmaps are scored and the trajectories only feed the dynamics.
    """

    trajectories: np.ndarray | torch.Tensor | None = None
    heatmaps: np.ndarray | torch.Tensor | None = None
    heatmap_frames: np.ndarray | list[int] | None = None

    @classmethod
    def from_any(cls, item: Any, where: str = "prediction") -> "ClipPrediction":
        """From a ``ClipPrediction``, a mapping with those keys, or a bare ``[K, T, 2]`` trajectory array."""
        if isinstance(item, ClipPrediction):
            pred = item
        elif isinstance(item, Mapping):
            unknown = set(item) - {"trajectories", "heatmaps", "heatmap_frames"}
            if unknown:
                raise ValueError(
                    f"{where}: unknown key(s) {sorted(unknown)}; expected trajectories, heatmaps, heatmap_frames"
                )
            pred = cls(item.get("trajectories"), item.get("heatmaps"), item.get("heatmap_frames"))
        elif isinstance(item, (np.ndarray, torch.Tensor)) and item.ndim == 3 and item.shape[-1] == 2:
            pred = cls(trajectories=item)
        else:
            raise ValueError(
                f"{where}: expected a ClipPrediction, a mapping or trajectories [K, T, 2], got {type(item).__name__}"
            )
        if pred.trajectories is None and pred.heatmaps is None:
            raise ValueError(f"{where}: needs trajectories or heatmaps")
        return pred


@dataclasses.dataclass
class EvaluationResult:
    """What :meth:`GazeEvaluator.compute` returns.

    ``metrics``: the headline numbers. ``frame_scores``: per kept frame, each per-frame metric and ``f1``,
    ``precision``, ``recall`` at the chosen threshold, aligned with ``frame_keys`` ``(clip_id, slot)`` (slot = index
    among the 8 protocol frames). ``pr_curve``: thresholds and the averaged P, R and F1 at each. ``clip_scores``:
    per scored clip, the clip means.

    Dynamics (trajectory predictions only): ``ade_*``, ``dtw_*`` and the step statistics of
    :func:`~transformers_gazeflow.metrics.dynamics.displacement_statistics` (``displacement_jsd``,
    ``displacement_log_jsd``, ``displacement_w1_px``, ``displacement_w1_relative``, ratios and px values); the step
    statistics are absent when no clip has two consecutive valid frames. ``dynamics_references``: the same step
    statistics for the rows every dynamics table prints beside the methods, ``"motionless"`` (a trajectory that never
    moves) and ``"human_halves"`` (human steps of alternating clips against each other; needs two clips with steps).
    """

    metrics: dict[str, float]
    frame_scores: dict[str, np.ndarray]
    frame_keys: list[tuple[str, int]]
    pr_curve: dict[str, np.ndarray]
    clip_scores: dict[str, np.ndarray]
    clip_ids: list[str]
    dynamics_references: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)

    def __getitem__(self, key: str) -> float:
        return self.metrics[key]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary: ``metrics``, ``dynamics_references``, the ``pr_curve`` and the scored ``clip_ids``
        (per-frame scores are left out: they are arrays). Undefined values (NaN) become ``None``, so that
        ``json.dumps`` writes valid JSON."""

        def clean(value: Any) -> Any:
            if isinstance(value, Mapping):
                return {str(k): clean(v) for k, v in value.items()}
            if isinstance(value, (list, tuple, np.ndarray)):
                return [clean(v) for v in np.asarray(value).tolist()]
            value = float(value)
            return value if np.isfinite(value) else None

        return {
            "metrics": clean(self.metrics),
            "dynamics_references": clean(self.dynamics_references),
            "pr_curve": clean(self.pr_curve),
            "clip_ids": list(self.clip_ids),
        }


def as_numpy(x: Any) -> Any:
    """A tensor as a numpy array (on the host), anything else as it is."""
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else x


__all__ = [
    "PROTOCOL_WINDOW",
    "PROTOCOL_NUM_FRAMES",
    "protocol_frame_indices",
    "ClipGroundTruth",
    "ClipPrediction",
    "EvaluationResult",
    "as_numpy",
]
