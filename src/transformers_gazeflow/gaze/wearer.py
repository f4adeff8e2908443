"""A per-wearer correction of a model's gaze, fitted on a few seconds of the wearer's eye-tracker gaze.

A model's gaze and one wearer's tracker can disagree systematically (the tracker's own calibration, the wearer's
habits, the glasses sitting differently). The correction is low-dimensional, fitted on frames where both are known
(the model's point estimate ``p`` and the tracker's gaze ``g``, both in native pixels, about the frame centre ``c``):

* ``"offset"`` (2 numbers): ``p' = p + o``;
* ``"offset_scale"`` (4 numbers): ``p' = c + s * (p - c) + o``, a scale per axis.

Fitting is robust to blinks and outliers: frames the tracker marks untracked, blink/other or off-frame never enter,
and the rest are weighted by Huber's rule (iteratively reweighted least squares from the coordinate-wise median
offset): a frame whose residual ``|g - p'|`` exceeds ``k = 2.45 sigma`` (``sigma`` = the median residual over
``sqrt(2 ln 2)``, the scale of a 2-D Gaussian's; 95% of Gaussian residuals lie within ``k``) weighs ``k / |r|``.

``model="auto"`` (the default) chooses by held-out error: the frames are cut into 5 consecutive blocks, each
candidate is fitted on 4 and scored (median pixel error) on the fifth, and ``offset_scale`` is kept only when its
mean held-out error is at least 5% below the offset's (:data:`SCALE_MIN_GAIN`). A scale is only identifiable where
the gaze moved across the frame, so the offset is used outright with fewer than :data:`MIN_FRAMES_FOR_SCALE`
frames or when the predicted points span less than :data:`MIN_SPAN_FOR_SCALE` of the frame (between their 10th and
90th percentiles) on either axis: a few seconds on one object fix the offset, not a scale. The corrected gaze
is clamped to the frame like every prediction. A :class:`WearerCalibration` records the model it was fitted for
(its location and the fingerprint of its weights): applying it to another model's gaze is refused.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..data.atomic_files import atomic_write
from ..data.interface_files import CALIBRATION_FORMAT, CALIBRATION_VERSION, parse_json_object, wearer_calibration
from ..models.gazeflow.choices import CALIBRATION_MODELS
from ..models.gazeflow.geometry import clamp_unit, pixels_to_unit, unit_to_pixels

HUBER_K = 2.45
"""Huber threshold in units of the residuals' Gaussian scale (95% of 2-D Gaussian residuals lie within it)."""
HELD_OUT_BLOCKS = 5
MIN_FRAMES_FOR_SCALE = 20
MIN_SPAN_FOR_SCALE = 0.25
SCALE_MIN_GAIN = 0.05
IRLS_STEPS = 50


@dataclass(frozen=True)
class Correction:
    """A fitted correction in native pixels of a ``width x height`` frame (see the module docstring)."""

    model: str
    offset_px: tuple[float, float]
    scale: tuple[float, float] = (1.0, 1.0)

    def apply_px(self, points_px: np.ndarray, width: int, height: int) -> np.ndarray:
        centre = np.array([width / 2, height / 2])
        return (
            centre + np.asarray(self.scale) * (np.asarray(points_px, np.float64) - centre) + np.asarray(self.offset_px)
        )


def _huber_weights(residuals: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(residuals, axis=-1)
    sigma = max(float(np.median(norms)) / math.sqrt(2 * math.log(2)), 1e-9)
    threshold = HUBER_K * sigma
    return np.where(norms <= threshold, 1.0, threshold / np.maximum(norms, 1e-12))


def fit_correction(
    predicted_px: np.ndarray, tracker_px: np.ndarray, width: int, height: int, model: str = "offset"
) -> Correction:
    """The robust fit of one correction ``model`` to paired points ``[N, 2]`` (native pixels)."""
    if model not in CALIBRATION_MODELS:
        raise ValueError(f"calibration model must be one of {CALIBRATION_MODELS} or 'auto', got {model!r}")
    p, g = np.asarray(predicted_px, np.float64), np.asarray(tracker_px, np.float64)
    if p.shape != g.shape or p.ndim != 2 or p.shape[1] != 2 or p.shape[0] < 1:
        raise ValueError(f"need paired [N, 2] points with N >= 1, got {p.shape} and {g.shape}")
    centre = np.array([width / 2, height / 2])
    offset, scale = np.median(g - p, axis=0), np.ones(2)
    for _ in range(IRLS_STEPS):
        weights = _huber_weights(g - (centre + scale * (p - centre) + offset))
        previous = np.r_[offset, scale]
        if model == "offset":
            offset = (weights[:, None] * (g - p)).sum(0) / weights.sum()
        else:
            for axis in range(2):
                design = np.stack([p[:, axis] - centre[axis], np.ones(len(p))], axis=1)
                gram = design.T @ (weights[:, None] * design)
                if abs(np.linalg.det(gram)) < 1e-9 * max(1.0, float(np.trace(gram))) ** 2:
                    scale[axis], offset[axis] = 1.0, (weights * (g[:, axis] - p[:, axis])).sum() / weights.sum()
                    continue
                scale[axis], intercept = np.linalg.solve(gram, design.T @ (weights * (g[:, axis] - centre[axis])))
                offset[axis] = intercept
        if np.abs(np.r_[offset, scale] - previous).max() < 1e-7:
            break
    return Correction(model, (float(offset[0]), float(offset[1])), (float(scale[0]), float(scale[1])))


def held_out_error(
    predicted_px: np.ndarray, tracker_px: np.ndarray, width: int, height: int, model: str, blocks: int = HELD_OUT_BLOCKS
) -> float:
    """Mean over ``blocks`` consecutive blocks of the median pixel error on a block of ``model`` fitted on the
    others."""
    parts = np.array_split(np.arange(len(predicted_px)), blocks)
    errors = []
    for held in parts:
        train = np.setdiff1d(np.arange(len(predicted_px)), held)
        correction = fit_correction(predicted_px[train], tracker_px[train], width, height, model)
        corrected = correction.apply_px(predicted_px[held], width, height)
        errors.append(float(np.median(np.linalg.norm(corrected - tracker_px[held], axis=-1))))
    return float(np.mean(errors))


def choose_and_fit(
    predicted_px: np.ndarray, tracker_px: np.ndarray, width: int, height: int, model: str = "auto"
) -> tuple[Correction, dict[str, float]]:
    """Fit ``model`` (or choose one by held-out error: ``"auto"``, see the module docstring); returns the
    correction and the held-out errors (px) of the candidates compared (empty when none were)."""
    if model != "auto":
        return fit_correction(predicted_px, tracker_px, width, height, model), {}
    span = np.subtract(*np.percentile(np.asarray(predicted_px, np.float64), [90, 10], axis=0)) / [width, height]
    if len(predicted_px) < MIN_FRAMES_FOR_SCALE or (span < MIN_SPAN_FOR_SCALE).any():
        return fit_correction(predicted_px, tracker_px, width, height, "offset"), {}
    errors = {name: held_out_error(predicted_px, tracker_px, width, height, name) for name in CALIBRATION_MODELS}
    chosen = "offset_scale" if errors["offset_scale"] < (1 - SCALE_MIN_GAIN) * errors["offset"] else "offset"
    return fit_correction(predicted_px, tracker_px, width, height, chosen), errors


@dataclass(frozen=True)
class WearerCalibration:
    """A correction in unit coordinates (``offset`` in frame widths/heights, ``scale`` per axis about the centre)
    and the model it was fitted for (``model_name``, ``model_fingerprint``); ``fit`` says how it was fitted."""

    model: str
    offset: tuple[float, float]
    scale: tuple[float, float]
    model_name: str
    model_fingerprint: str
    fit: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_correction(
        cls,
        correction: Correction,
        width: int,
        height: int,
        model_name: str,
        model_fingerprint: str,
        fit: dict[str, Any] | None = None,
    ) -> WearerCalibration:
        offset = pixels_to_unit(np.asarray(correction.offset_px), width, height)
        return cls(
            correction.model,
            (float(offset[0]), float(offset[1])),
            correction.scale,
            model_name,
            model_fingerprint,
            dict(fit or {}),
        )

    def apply(self, points: np.ndarray) -> np.ndarray:
        """Correct unit-coordinate points ``[..., 2]`` (the K samples and hence their mean), clamped to the frame;
        float32 like the model's output."""
        points = np.asarray(points, np.float64)
        corrected = 0.5 + np.asarray(self.scale) * (points - 0.5) + np.asarray(self.offset)
        return clamp_unit(corrected).astype(np.float32)

    def check_model(self, fingerprint: str, model_name: str, where: str = "the calibration") -> None:
        """Refuse to correct the gaze of a model other than the one this was fitted for."""
        if fingerprint != self.model_fingerprint:
            raise ValueError(
                f"{where} was fitted for the model {self.model_name} (weights {self.model_fingerprint}), "
                f"not for {model_name} (weights {fingerprint}): run 'gazeflow calibrate' with this model"
            )

    def to_json(self) -> str:
        record = {
            "format": CALIBRATION_FORMAT,
            "version": CALIBRATION_VERSION,
            "correction": self.model,
            "offset": list(self.offset),
            "scale": list(self.scale),
            "model": {"name": self.model_name, "fingerprint": self.model_fingerprint},
            "fit": self.fit,
        }
        return json.dumps(record, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str, where: str = "calibration") -> WearerCalibration:
        """A calibration from its JSON, checked by the one schema of ``calib.json``
        (:func:`~transformers_gazeflow.data.interface_files.wearer_calibration`: one-line errors naming ``where`` and
        the field)."""
        fields = wearer_calibration(parse_json_object(text, where), where, CALIBRATION_MODELS)
        return cls(
            fields["correction"],
            fields["offset"],
            fields["scale"],
            fields["model_name"],
            fields["model_fingerprint"],
            fields["fit"],
        )

    @classmethod
    def read(cls, path: str | os.PathLike) -> WearerCalibration:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"calibration file not found: {path}")
        return cls.from_json(path.read_text(encoding="utf-8"), where=str(path))

    def write(self, path: str | os.PathLike) -> Path:
        """Write ``calib.json`` whole; a calibration the schema would refuse on reading is refused here, naming
        ``path``."""
        path = Path(path)
        text = self.to_json()
        wearer_calibration(parse_json_object(text, str(path)), str(path), CALIBRATION_MODELS)
        path.parent.mkdir(parents=True, exist_ok=True)
        return atomic_write(path, text)


def calibration_for_model(
    calibration: str | os.PathLike | WearerCalibration, fingerprint: str, model_name: str
) -> WearerCalibration:
    """A wearer calibration (a ``calib.json`` path or the object) checked to be the one fitted for the model whose
    weights have ``fingerprint`` (``model_name``: how the one-line error names that model; the error names the file,
    or "the calibration" for an object)."""
    where = "the calibration" if isinstance(calibration, WearerCalibration) else str(calibration)
    if not isinstance(calibration, WearerCalibration):
        calibration = WearerCalibration.read(calibration)
    calibration.check_model(fingerprint, model_name, where=where)
    return calibration


def pixel_errors(points: np.ndarray, truth: np.ndarray, width: int, height: int) -> np.ndarray:
    """Distances (native pixels) between unit-coordinate points and the truth ``[N, 2]``."""
    return np.linalg.norm(
        unit_to_pixels(np.asarray(points, np.float64), width, height)
        - unit_to_pixels(np.asarray(truth, np.float64), width, height),
        axis=-1,
    )


__all__ = [
    "Correction",
    "WearerCalibration",
    "calibration_for_model",
    "fit_correction",
    "held_out_error",
    "choose_and_fit",
    "pixel_errors",
]
