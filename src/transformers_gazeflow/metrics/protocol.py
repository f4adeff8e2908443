"""The evaluation protocol over a dataset and a stream of predictions (paper Section 4.1 and Appendix E.3;
docs/specs/evaluation.md, "Which frames", "Maps", "GLC's own pipeline").

:class:`GazeEvaluator` takes clips one at a time (``add``) or in batches (``add_batch``) and keeps only scalars:

* per clip, the first window (64 frames; longer inputs are cut to it); protocol frames at local indices
  ``linspace(0, 63, 8) = [0, 9, ..., 63]`` clamped to the clip's last frame (:func:`protocol_frame_indices`);
* the fixation filter: only protocol frames with gaze type fixation (unified code 1) enter the per-frame metrics;
* per frame: AUC-Judd, NSS, CC, KL, SIM, AAE, and precision/recall at every threshold; the maps are rendered for
  the kept frames of one clip at a time and dropped, so memory stays bounded by one clip;
* aggregation: per frame -> mean within clip -> mean across clips (``aggregation="clip"``, the paper) or the mean
  over all kept frames (``"frame"``, what GLC's test script reports); adaptive F1 averages P and R over all kept
  frames per threshold, takes F1 of those averages and chooses the best threshold once over the whole set;
* dynamics (trajectory predictions only): ADE and DTW over all valid frames of the window (mean over K and best of
  K, averaged over clips), displacement mean/median ratios to human, their histograms' JSD (the paper's linear bins
  and log bins) and the Wasserstein-1 distance of the step distributions, with the motionless and human-vs-human
  reference rows (``EvaluationResult.dynamics_references``; tables: ``metrics.tables``); and the sample set's
  proper scores over the same frames, the energy score and the per-coordinate CRPS, fair and plain
  (``metrics.sample_scores``: per clip over its valid frames, then the mean over clips).

``protocol="paper"`` (default) scores native-resolution maps (sigma 25 px); ``protocol="glc"`` reproduces GLC's own
pipeline (256 crop, 64x64 maps, OpenCV kernel, ``gt > 0.001``, GLC min-max, GLC's AUC variant and AAE on the map).
Per-frame scores are kept (scalars) for ``significance.paired_wilcoxon``. What it reads and returns (the protocol
frames, a clip's ground truth and prediction, the result) is ``metrics.protocol_records``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F

from ..data.gaze_types import FIXATION
from ..models.gazeflow.geometry import DEFAULT_HORIZONTAL_FOV_DEG, unit_to_pixels
from . import dynamics as dyn
from . import heatmaps as hm
from . import saliency as sal
from .protocol_records import (
    PROTOCOL_WINDOW,
    ClipGroundTruth,
    ClipPrediction,
    EvaluationResult,
    as_numpy,
    protocol_frame_indices,
)
from .sample_scores import SAMPLE_SCORE_KEYS, clip_sample_scores
from .scoring import NativeFrameScorer

FRAME_METRICS = ("auc", "nss", "cc", "kl", "sim", "aae")
"""Per-frame metrics aggregated frame -> clip -> set."""

_DTW_FLUSH_CLIPS = 32


class GazeEvaluator:
    """Accumulates the protocol over a stream of (ground truth, prediction) clips in bounded memory.

    Args:
        protocol: ``"paper"`` (native maps, sigma ``sigma_px``) or ``"glc"`` (GLC's own 64x64 pipeline).
        sigma_px: Gaussian sigma of predicted and ground-truth maps at native resolution (25 px, paper E.3).
        fov_deg: horizontal field of view of the AAE camera (60 degrees).
        camera: the AAE camera instead of that pinhole (a ``geometry`` camera, e.g. ``FisheyeCamera``: Project Aria's
            calibrated RGB camera, whose degrees away from the centre a pinhole gets wrong), at each clip's size. A
            clip that carries its own camera (``ClipGroundTruth.camera``: an example's ``camera_model`` and
            ``camera_params``) is measured through that one instead.
        thresholds: adaptive-F1 thresholds on the min-max normalised prediction (``linspace(0, 0.02, 11)``).
        aggregation: ``"clip"`` (frame -> clip -> set; the paper's default) or ``"frame"`` (mean over all kept
            frames; the ``"glc"`` protocol's default, as GLC's ``TestGazeMeter`` reports).
        dtype: floating type of the rendered native maps (float32 by default: about 1e-6 relative precision on
            the scores, half the memory traffic of float64).
        log_bin_floor_px: upper edge (native px) of the first bin of the log-bin step JSD
            (``dynamics.LOG_BIN_FLOOR_PX``, 0.1 px).
    """

    def __init__(
        self,
        protocol: Literal["paper", "glc"] = "paper",
        sigma_px: float = hm.DEFAULT_SIGMA_PX,
        fov_deg: float = DEFAULT_HORIZONTAL_FOV_DEG,
        thresholds=sal.GLC_THRESHOLDS,
        aggregation: Literal["clip", "frame"] | None = None,
        dtype: torch.dtype = torch.float32,
        log_bin_floor_px: float = dyn.LOG_BIN_FLOOR_PX,
        camera: Any = None,
    ) -> None:
        if protocol not in ("paper", "glc"):
            raise ValueError(f"protocol must be 'paper' or 'glc', got {protocol!r}")
        if aggregation is None:
            aggregation = "frame" if protocol == "glc" else "clip"
        if aggregation not in ("clip", "frame"):
            raise ValueError(f"aggregation must be 'clip' or 'frame', got {aggregation!r}")
        if sigma_px <= 0:
            raise ValueError(f"sigma_px must be positive, got {sigma_px}")
        th = np.asarray(thresholds, dtype=np.float64)
        if th.ndim != 1 or th.size < 1 or (np.diff(th) < 0).any():
            raise ValueError("thresholds must be a non-empty, non-decreasing 1D sequence")
        if not (np.isfinite(log_bin_floor_px) and log_bin_floor_px > 0):
            raise ValueError(f"log_bin_floor_px must be a positive number of pixels, got {log_bin_floor_px}")
        self.protocol = protocol
        self.log_bin_floor_px = float(log_bin_floor_px)
        self.sigma_px = float(sigma_px)
        self.fov_deg = float(fov_deg)
        self.camera = camera
        self.thresholds = th
        self.aggregation = aggregation
        self.dtype = dtype
        self._scorer = NativeFrameScorer(self.sigma_px, self.thresholds, self.fov_deg, camera)
        self.reset()

    def reset(self) -> None:
        """Forget everything added so far."""
        self._clip_ids: list[str] = []
        self._seen: set[str] = set()
        self._frame_clip: list[np.ndarray] = []
        self._frame_slot: list[np.ndarray] = []
        self._frame: dict[str, list[np.ndarray]] = {k: [] for k in (*FRAME_METRICS, "aae_sample_mean")}
        self._precision: list[np.ndarray] = []
        self._recall: list[np.ndarray] = []
        self._dyn_clip: list[int] = []
        self._dyn: dict[str, list[float]] = {k: [] for k in ("ade_mean", "ade_best", "dtw_mean", "dtw_best")}
        self._sample_scores: list[dict[str, float]] = []
        self._pending: list[tuple[int, np.ndarray, np.ndarray]] = []
        self._disp_pred: list[np.ndarray] = []
        self._disp_human: list[np.ndarray] = []
        self._has_sample_mean = True

    # ------------------------------------------------------------------------------------------------ adding

    def add_batch(self, ground_truths: Iterable[Any], predictions: Iterable[Any]) -> None:
        """Add clips pairwise; both sequences must have the same length."""
        gts = list(ground_truths)
        preds = list(predictions)
        if len(gts) != len(preds):
            raise ValueError(
                f"ground_truths and predictions must have the same length, got {len(gts)} and {len(preds)}"
            )
        for gt, pred in zip(gts, preds):
            self.add(gt, pred)

    def add(self, ground_truth: Any, prediction: Any) -> None:
        """Score one clip (its first window) and keep its scalars."""
        gt = ClipGroundTruth.from_any(ground_truth)
        where = f"prediction of clip {gt.clip_id!r}"
        pred = ClipPrediction.from_any(prediction, where)
        if gt.clip_id in self._seen:
            raise ValueError(f"clip {gt.clip_id!r} was added twice; each clip is scored once")
        t = gt.gaze.shape[0]
        traj = None
        if pred.trajectories is not None:
            traj = torch.as_tensor(as_numpy(pred.trajectories)).to(torch.float64)
            if traj.ndim == 2:
                traj = traj.unsqueeze(0)
            if traj.ndim != 3 or traj.shape[-1] != 2 or traj.shape[0] < 1:
                raise ValueError(f"{where}: trajectories must have shape [K, T, 2], got {tuple(traj.shape)}")
            traj = traj[:, :PROTOCOL_WINDOW]  # the window, as the ground truth
            if traj.shape[1] != t:
                raise ValueError(f"{where}: trajectories cover {traj.shape[1]} frames, the ground truth {t}")
            if not torch.isfinite(traj).all():
                raise ValueError(f"{where}: trajectories contain NaN or inf")
            if traj.min() < -0.5 or traj.max() > 1.5:
                raise ValueError(
                    f"{where}: trajectories must be unit coordinates of the native frame (about [0, 1]), "
                    f"got values in [{float(traj.min()):.4g}, {float(traj.max()):.4g}]"
                )

        slots = protocol_frame_indices(t)
        kept = np.nonzero(gt.gaze_type[slots] == FIXATION)[0]
        frames = slots[kept]
        clip_index = len(self._clip_ids)
        maps = self._prediction_maps(gt, pred, traj, frames, where) if kept.size else None
        # everything is checked: record the clip
        self._clip_ids.append(gt.clip_id)
        self._seen.add(gt.clip_id)
        if kept.size:
            self._score_frames(gt, maps, traj, frames, kept, clip_index)
        if traj is not None:
            self._add_dynamics(gt, traj, clip_index)

    def _prediction_maps(self, gt: ClipGroundTruth, pred: ClipPrediction, traj, frames: np.ndarray, where: str):
        """Predicted maps at ``frames``: native ``[F, H, W]`` (paper) or GLC-normalised ``[F, 64, 64]`` (glc)."""
        if pred.heatmaps is not None:
            maps = torch.as_tensor(as_numpy(pred.heatmaps))
            if not maps.is_floating_point():
                maps = maps.to(torch.float32)
            if maps.ndim == 2:
                maps = maps.unsqueeze(0).expand(len(frames), -1, -1)
            elif maps.ndim == 3:
                if pred.heatmap_frames is None:
                    maps = maps[:PROTOCOL_WINDOW]  # the window, as the ground truth
                    if maps.shape[0] != gt.gaze.shape[0]:
                        raise ValueError(
                            f"{where}: heatmaps cover {maps.shape[0]} frames, the ground truth "
                            f"{gt.gaze.shape[0]} (pass heatmap_frames for a subset)"
                        )
                    maps = maps[torch.as_tensor(frames)]
                else:
                    have = [int(f) for f in np.asarray(pred.heatmap_frames).reshape(-1)]
                    if len(have) != maps.shape[0]:
                        raise ValueError(f"{where}: heatmap_frames lists {len(have)} frames for {maps.shape[0]} maps")
                    missing = sorted(set(frames.tolist()) - set(have))
                    if missing:
                        raise ValueError(f"{where}: heatmaps lack protocol frame(s) {missing}")
                    maps = maps[torch.as_tensor([have.index(int(f)) for f in frames])]
            else:
                raise ValueError(f"{where}: heatmaps must have shape [F, h, w] or [h, w], got {tuple(maps.shape)}")
            if not torch.isfinite(maps).all():
                raise ValueError(f"{where}: heatmaps contain NaN or inf")
            if (maps < 0).any():
                raise ValueError(f"{where}: heatmaps must be non-negative")
            if self.protocol == "glc":
                if tuple(maps.shape[-2:]) == (gt.height, gt.width) and (gt.height, gt.width) != (64, 64):
                    # native maps: GLC's resize-crop, then GLC's scale (a distribution over the grid)
                    maps = hm.glc_distribution(hm.glc_native_to_grid(maps, gt.width, gt.height))
                if tuple(maps.shape[-2:]) != (hm.GLC_GRID, hm.GLC_GRID):
                    raise ValueError(
                        f"{where}: protocol='glc' needs 64x64 maps (or native {gt.width}x{gt.height} "
                        f"ones), got {tuple(maps.shape[-2:])}"
                    )
                return hm.glc_minmax(maps.to(torch.float32))  # 64x64 maps: GLC's softmax output, as they are
            maps = maps.to(self.dtype)
            if tuple(maps.shape[-2:]) != (gt.height, gt.width):
                maps = F.interpolate(
                    maps.unsqueeze(1), size=(gt.height, gt.width), mode="bilinear", align_corners=False
                ).squeeze(1)
            return maps.contiguous()
        pts = traj[:, torch.as_tensor(frames)]
        if self.protocol == "glc":
            short = min(gt.width, gt.height)
            crop_pts = hm.glc_crop_gaze(pts.numpy(), gt.width, gt.height, clip=False)
            crop_pts = np.clip(crop_pts, -0.5, 1.5)
            maps = hm.render_heatmaps(
                crop_pts,
                hm.GLC_GRID,
                hm.GLC_GRID,
                sigma=self.sigma_px * hm.GLC_GRID / short,
                dtype=torch.float32,
                keep_shape=True,
            )
            return hm.glc_minmax(hm.glc_distribution(maps))
        return hm.render_heatmaps(pts, gt.width, gt.height, sigma=self.sigma_px, dtype=self.dtype, keep_shape=True)

    def _score_frames(
        self, gt, maps: torch.Tensor, traj, frames: np.ndarray, kept: np.ndarray, clip_index: int
    ) -> None:
        gaze = gt.gaze[frames]
        if self.protocol == "glc":
            gaze_crop = hm.glc_crop_gaze(gaze, gt.width, gt.height)
            g_maps = hm.glc_gt_heatmaps(gaze_crop)
            binary = g_maps > hm.GLC_GT_THRESHOLD
            fix = torch.from_numpy(np.round(gaze_crop * (hm.GLC_GRID - 1)).astype(np.int64))  # GLC's AUC cell
            tp, predicted, positives = sal.precision_recall_counts(maps, binary, self.thresholds)  # maps: GLC min-max
            scores = {
                "auc": sal.glc_auc(maps, gaze_crop),
                "nss": sal.nss(maps, fix),
                "cc": sal.cc(maps, g_maps),
                "kl": sal.kl_div(maps, g_maps),
                "sim": sal.sim(maps, g_maps),
                "aae": sal.glc_aae(maps, gaze_crop),
            }
            scores["aae_sample_mean"] = torch.full_like(scores["aae"], float("nan"))
        else:
            camera = gt.camera if gt.camera is not None else self.camera
            out = self._scorer.score(maps, gaze, gt.width, gt.height, camera=camera)
            tp, predicted, positives = out["tp"], out["predicted"], out["positives"]
            scores = {k: out[k] for k in FRAME_METRICS}
            if traj is not None:
                gt_px = unit_to_pixels(torch.from_numpy(gaze), gt.width, gt.height)
                mean_px = unit_to_pixels(traj[:, torch.as_tensor(frames)].mean(0), gt.width, gt.height)
                scores["aae_sample_mean"] = sal.angular_error(mean_px, gt_px, gt.width, gt.height, self.fov_deg, camera)
            else:
                scores["aae_sample_mean"] = torch.full_like(scores["aae"], float("nan"))
        precision, recall = sal.precision_recall(tp, predicted, positives)
        for k, v in scores.items():
            self._frame[k].append(v.to(torch.float64).numpy())
        self._precision.append(precision.numpy())
        self._recall.append(recall.numpy())
        self._frame_clip.append(np.full(kept.size, clip_index, dtype=np.int64))
        self._frame_slot.append(kept.astype(np.int64))

    def _add_dynamics(self, gt: ClipGroundTruth, traj: torch.Tensor, clip_index: int) -> None:
        valid = gt.valid
        if not valid.any():
            return
        px = unit_to_pixels(traj.numpy(), gt.width, gt.height)  # [K, T, 2]
        human = unit_to_pixels(gt.gaze, gt.width, gt.height)  # [T, 2]
        ade = dyn.ade(px, human, valid)
        self._dyn_clip.append(clip_index)
        self._dyn["ade_mean"].append(float(ade.mean()))
        self._dyn["ade_best"].append(float(ade.min()))
        self._pending.append((clip_index, px[:, valid], human[valid]))
        self._sample_scores.append(clip_sample_scores(px, human, valid))
        if len(self._pending) >= _DTW_FLUSH_CLIPS:
            self._flush_dtw()
        sample_steps, recorded_steps = dyn.clip_steps(px, human, valid)
        self._disp_pred.append(sample_steps)
        self._disp_human.append(recorded_steps)

    def _flush_dtw(self) -> None:
        """DTW of the buffered clips in one vectorised call (valid frames compacted to the front, padded)."""
        if not self._pending:
            return
        n = max(p.shape[1] for _, p, _ in self._pending)
        k_total = sum(p.shape[0] for _, p, _ in self._pending)
        pred = np.zeros((k_total, n, 2))
        human = np.zeros((k_total, n, 2))
        lengths = np.empty(k_total, dtype=np.int64)
        row = 0
        spans = []
        for _, p, h in self._pending:
            k, m = p.shape[:2]
            pred[row : row + k, :m] = p
            human[row : row + k, :m] = h
            lengths[row : row + k] = m
            spans.append((row, row + k))
            row += k
        d = dyn.dtw_batched(pred, human, lengths)
        for a, b in spans:
            self._dyn["dtw_mean"].append(float(d[a:b].mean()))
            self._dyn["dtw_best"].append(float(d[a:b].min()))
        self._pending = []

    # ------------------------------------------------------------------------------------------------ results

    def compute(self) -> EvaluationResult:
        """Aggregate everything added so far (can be called again after more ``add``)."""
        if not self._clip_ids:
            raise ValueError("no clips were added: nothing to evaluate")
        self._flush_dtw()
        if not self._frame_clip:
            raise ValueError(
                f"none of the {len(self._clip_ids)} clips has a fixation on a protocol frame: the "
                f"per-frame metrics are undefined"
            )
        clip_of = np.concatenate(self._frame_clip)
        slot_of = np.concatenate(self._frame_slot)
        frame = {k: np.concatenate(v) for k, v in self._frame.items()}
        precision = np.concatenate(self._precision)  # [N, thresholds]
        recall = np.concatenate(self._recall)
        p_avg = precision.mean(0)
        r_avg = recall.mean(0)
        f1_curve = sal.f1_from_pr(p_avg, r_avg)
        best = int(np.argmax(f1_curve))
        frame["precision"] = precision[:, best]
        frame["recall"] = recall[:, best]
        frame["f1"] = sal.f1_from_pr(frame["precision"], frame["recall"])
        scored, clip_pos = np.unique(clip_of, return_inverse=True)
        counts = np.bincount(clip_pos).astype(np.float64)
        clip_scores = {k: np.bincount(clip_pos, weights=frame[k]) / counts for k in (*FRAME_METRICS, "aae_sample_mean")}
        metrics: dict[str, float] = {}
        for k in FRAME_METRICS:
            metrics[k] = float(clip_scores[k].mean() if self.aggregation == "clip" else frame[k].mean())
        if not np.isnan(frame["aae_sample_mean"]).any():
            k = "aae_sample_mean"
            metrics[k] = float(clip_scores[k].mean() if self.aggregation == "clip" else frame[k].mean())
        metrics.update(
            f1=float(f1_curve[best]),
            precision=float(p_avg[best]),
            recall=float(r_avg[best]),
            threshold=float(self.thresholds[best]),
        )
        metrics.update(
            num_clips=float(len(self._clip_ids)), num_clips_scored=float(scored.size), num_frames=float(clip_of.size)
        )
        references: dict[str, dict[str, float]] = {}
        if self._dyn_clip:
            for k, v in self._dyn.items():
                metrics[k] = float(np.mean(v))
            for k in SAMPLE_SCORE_KEYS:
                metrics[k] = float(np.mean([clip[k] for clip in self._sample_scores]))
            pred_disp = np.concatenate(self._disp_pred)
            human_disp = np.concatenate(self._disp_human)
            if pred_disp.size and human_disp.size:
                settings = {"floor_px": self.log_bin_floor_px}
                metrics.update(dyn.displacement_statistics(pred_disp, human_disp, **settings))
                references["motionless"] = dyn.motionless_reference(human_disp, **settings)
                if sum(d.size > 0 for d in self._disp_human) >= 2:
                    references["human_halves"] = dyn.human_halves_reference(self._disp_human, **settings)
        frame_keys = [(self._clip_ids[c], int(s)) for c, s in zip(clip_of, slot_of)]
        return EvaluationResult(
            metrics=metrics,
            frame_scores=frame,
            frame_keys=frame_keys,
            pr_curve={"thresholds": self.thresholds.copy(), "precision": p_avg, "recall": r_avg, "f1": f1_curve},
            clip_scores=clip_scores,
            clip_ids=[self._clip_ids[c] for c in scored],
            dynamics_references=references,
        )


def evaluate_predictions(ground_truths: Iterable[Any], predictions: Iterable[Any], **kwargs: Any) -> EvaluationResult:
    """Run :class:`GazeEvaluator` (``kwargs``) over two aligned streams (one prediction per ground-truth clip).

    Streams are consumed lazily, one clip at a time; a length mismatch raises.
    """
    ev = GazeEvaluator(**kwargs)
    sentinel = object()
    gts, preds = iter(ground_truths), iter(predictions)
    n = 0
    while True:
        gt, pred = next(gts, sentinel), next(preds, sentinel)
        if gt is sentinel and pred is sentinel:
            break
        if gt is sentinel or pred is sentinel:
            which = "predictions" if gt is sentinel else "ground_truths"
            raise ValueError(f"{which} has more items than the other stream (after {n} clips)")
        ev.add(gt, pred)
        n += 1
    return ev.compute()


def evaluate_frames(
    heatmaps: Iterable[Any],
    gaze: Iterable[Any],
    sigma_px: float = hm.DEFAULT_SIGMA_PX,
    fov_deg: float = DEFAULT_HORIZONTAL_FOV_DEG,
    thresholds=sal.GLC_THRESHOLDS,
    camera: Any = None,
) -> dict[str, float]:
    """Per-frame saliency metrics over a flat set of frames, each a fixation frame at its map's own resolution.

    The frame-level core of the protocol without clips (what the ``gaze_saliency`` evaluate module reports): the
    mean over frames of AUC-Judd, NSS, CC, KL, SIM and AAE, and adaptive F1 with P and R at the threshold chosen
    once over the set. ``heatmaps``: ``[H, W]`` non-negative maps; ``gaze``: one unit point (x, y) per map.
    """
    maps_list = [torch.as_tensor(np.asarray(as_numpy(m), dtype=np.float64)) for m in heatmaps]
    gaze_arr = np.asarray([np.asarray(as_numpy(g), dtype=np.float64) for g in gaze])
    if not maps_list:
        raise ValueError("heatmaps is empty: nothing to evaluate")
    if gaze_arr.shape != (len(maps_list), 2):
        raise ValueError(f"gaze must hold one (x, y) point per heatmap: {len(maps_list)} maps, gaze {gaze_arr.shape}")
    scorer = NativeFrameScorer(sigma_px, thresholds, fov_deg, camera)
    per: dict[str, list[float]] = {k: [] for k in FRAME_METRICS}
    precision, recall = [], []
    for i, (m, g) in enumerate(zip(maps_list, gaze_arr)):
        if m.ndim != 2 or m.shape[0] < 1 or m.shape[1] < 1:
            raise ValueError(f"heatmaps[{i}] must be a 2D map [H, W], got shape {tuple(m.shape)}")
        if not torch.isfinite(m).all() or (m < 0).any():
            raise ValueError(f"heatmaps[{i}] must be finite and non-negative")
        if not np.isfinite(g).all() or g.min() < 0 or g.max() > 1:
            raise ValueError(f"gaze[{i}] must be a unit point in [0, 1], got {g.tolist()}")
        out = scorer.score(m.unsqueeze(0), g[None], m.shape[1], m.shape[0])
        for k in FRAME_METRICS:
            per[k].append(float(out[k][0]))
        p, r = sal.precision_recall(out["tp"], out["predicted"], out["positives"])
        precision.append(p[0].numpy())
        recall.append(r[0].numpy())
    p_avg, r_avg = np.mean(precision, axis=0), np.mean(recall, axis=0)
    f1 = sal.f1_from_pr(p_avg, r_avg)
    best = int(np.argmax(f1))
    th = np.asarray(thresholds, dtype=np.float64)
    result = {k: float(np.mean(v)) for k, v in per.items()}
    result.update(
        f1=float(f1[best]),
        precision=float(p_avg[best]),
        recall=float(r_avg[best]),
        threshold=float(th[best]),
        num_frames=float(len(maps_list)),
    )
    return result


__all__ = [
    "FRAME_METRICS",
    "GazeEvaluator",
    "evaluate_predictions",
    "evaluate_frames",
]
