"""Batches of the unified example schema: decode each window, process it, pad it, convert gaze to model coords.

An example (the unified example schema, :func:`~transformers_gazeflow.data.loading.gaze_example_features`) is one
window of at most ``num_frames`` frames
of one clip, with its video as a path. The collator decodes exactly that window
(:func:`~transformers_gazeflow.data.video.decode_frames`), runs the :class:`GazeFlowVideoProcessor`, and pads
windows shorter than ``num_frames`` by repeating the last frame (and the last gaze point); padded frames are
never valid. Gaze goes from unit ``[0, 1]`` to model ``[-1, 1]`` coordinates here, through
:func:`~transformers_gazeflow.models.gazeflow.geometry.unit_to_model` (the one place the data layer converts).

Training augmentation (beyond the paper): with ``horizontal_flip_probability`` p > 0 each example is mirrored left
to right with probability p, frames and gaze together (``x -> 1 - x`` in unit coordinates; the processor resizes the
whole frame, so mirroring the processed frames equals mirroring the decoded ones). The draws come from
``flip_generator`` when one is given, else from torch's global generator (a DataLoader worker has its own seeded
stream). With a generator each batch carries its state after the batch's draws (``flip_generator_state``): the
training loop checkpoints the state of the last batch it consumed, so a resumed run draws the same flips as an
uninterrupted one although the loader collates a batch ahead (the global generator, which the loader's look-ahead
would advance before the checkpoint, is left to the model's noise).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from ..models.gazeflow.geometry import mirror_unit_horizontally, unit_to_model
from ..models.gazeflow.windows import pad_last_frame
from .gaze_types import FIXATION, GAZE_TYPE_CODES, UNTRACKED
from .processing import GazeFlowVideoProcessor
from .video import decode_frames

# gaze points of valid frames may sit this far outside [0, 1] (float round-off of the loaders' clamping)
_UNIT_TOLERANCE = 1e-4
_REQUIRED_KEYS = ("clip_id", "video_path", "window_start", "num_frames", "gaze", "valid")
FLIP_STATE_KEY = "flip_generator_state"
"""The batch key of ``flip_generator``'s state after the batch's draws (present when the collator has one)."""


class GazeFlowDataCollator:
    """Collate unified-schema examples into a model batch.

    Args:
        processor: the :class:`GazeFlowVideoProcessor` that resizes and normalises the frames.
        num_frames: window length ``W`` of the batch; shorter examples are padded up to it.
        decode_fn: ``(path, start, num_frames) -> uint8 [n, H, W, 3]``; defaults to PyAV decoding of that range.
        horizontal_flip_probability: the chance that an example is mirrored left to right (training augmentation;
            0, the default, never mirrors: keep it 0 for validation and evaluation).
        flip_generator: the ``torch.Generator`` of the mirroring draws (None: torch's global generator).

    Returns a dict with
        ``pixel_values_videos`` float32 ``[B, W, 3, S, S]``, ``gaze`` float32 ``[B, W, 2]`` in ``[-1, 1]``,
        ``valid_mask`` bool ``[B, W]`` (the example's ``valid`` on real frames, ``False`` on padding),
        ``gaze_type`` int64 ``[B, W]`` (unified codes; padding 0 = untracked), and the metadata for evaluation:
        ``clip_id`` (list of str), ``video_path`` (list of str), ``window_start``, ``num_frames``, ``width``,
        ``height``, ``action``, ``verb``, ``noun`` (int64 ``[B]``, ``-1`` where absent) and ``fps`` (float32 ``[B]``).
    """

    def __init__(
        self,
        processor: GazeFlowVideoProcessor,
        num_frames: int = 64,
        decode_fn: Callable[[str, int, int], np.ndarray] | None = None,
        horizontal_flip_probability: float = 0.0,
        flip_generator: torch.Generator | None = None,
    ) -> None:
        if not isinstance(processor, GazeFlowVideoProcessor):
            raise ValueError(f"processor must be a GazeFlowVideoProcessor, got {type(processor).__name__}")
        if isinstance(num_frames, bool) or not isinstance(num_frames, int) or num_frames < 1:
            raise ValueError(f"num_frames must be a positive int (the batch window length), got {num_frames!r}")
        if (
            isinstance(horizontal_flip_probability, bool)
            or not isinstance(horizontal_flip_probability, (int, float))
            or not 0.0 <= horizontal_flip_probability <= 1.0
        ):
            raise ValueError(
                f"horizontal_flip_probability must be a number in [0, 1], got {horizontal_flip_probability!r}"
            )
        if flip_generator is not None and not isinstance(flip_generator, torch.Generator):
            raise ValueError(f"flip_generator must be a torch.Generator or None, got {type(flip_generator).__name__}")
        self.processor = processor
        self.horizontal_flip_probability = float(horizontal_flip_probability)
        self.flip_generator = flip_generator
        self.num_frames = num_frames
        self.decode_fn = decode_fn if decode_fn is not None else _decode_window

    input_key = "pixel_values_videos"

    def load_inputs(
        self, example: Mapping[str, Any], name: str, clip: str, flipped: bool = False
    ) -> tuple[torch.Tensor, tuple[int, int]]:
        """The model input of one example, padded to ``num_frames``: its window decoded, processed, and padded by
        repeating the last frame; mirrored left to right when ``flipped``. Returns ``([W, 3, S, S], (width, height)
        of the decoded frames)``."""
        n, start = int(example["num_frames"]), int(example["window_start"])
        frames = np.asarray(self.decode_fn(str(example["video_path"]), start, n))
        if frames.ndim < 3 or frames.shape[0] != n:
            raise ValueError(
                f"{name} ({clip}): decoding {example['video_path']} gave "
                f"{frames.shape[0] if frames.ndim else 0} frames for a window of {n}"
            )
        _check_size(example, frames, name, clip)
        return self.finish_window(self.processor.preprocess(frames), flipped), (frames.shape[2], frames.shape[1])

    def finish_window(self, processed: torch.Tensor, flipped: bool = False) -> torch.Tensor:
        """A processed window ``[n, 3, S, S]`` as the model reads it: padded to ``num_frames`` by repeating its last
        frame, and mirrored left to right when ``flipped`` (the feature cache finishes its windows here too)."""
        window = pad_last_frame(processed, self.num_frames, axis=0)
        return window.flip(-1) if flipped else window

    def draw_flip(self) -> bool:
        """Whether the next example is mirrored: a draw of ``flip_generator`` (else torch's global generator) when
        the probability is strictly between 0 and 1 (none at 0 or 1, so an unaugmented run consumes no random
        numbers)."""
        p = self.horizontal_flip_probability
        if p <= 0.0 or p >= 1.0:
            return p >= 1.0
        return bool(torch.rand((), generator=self.flip_generator) < p)

    def __call__(self, examples: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        if isinstance(examples, Mapping) or not isinstance(examples, Sequence) or len(examples) == 0:
            raise ValueError(
                f"examples must be a non-empty list of unified-schema examples (dicts), got {type(examples).__name__}"
            )
        width = self.num_frames
        pixels, gazes, masks, types = [], [], [], []
        meta: dict[str, list] = {
            key: []
            for key in (
                "clip_id",
                "video_path",
                "window_start",
                "num_frames",
                "width",
                "height",
                "fps",
                "action",
                "verb",
                "noun",
            )
        }
        for index, example in enumerate(examples):
            name = f"examples[{index}]"
            if not isinstance(example, Mapping):
                raise ValueError(f"{name} must be a dict of the unified schema, got {type(example).__name__}")
            missing = [key for key in _REQUIRED_KEYS if key not in example]
            if missing:
                raise ValueError(f"{name} lacks the unified-schema fields {missing}")
            clip = str(example["clip_id"])
            n, start = int(example["num_frames"]), int(example["window_start"])
            if n < 1 or n > width:
                raise ValueError(
                    f"{name} ({clip}): num_frames must be in [1, {width}] (the collator's num_frames), got {n}"
                )
            if start < 0:
                raise ValueError(f"{name} ({clip}): window_start must be >= 0, got {start}")
            gaze, valid, gaze_type = _per_frame_fields(example, n, name, clip)
            flipped = self.draw_flip()
            inputs, frame_size = self.load_inputs(example, name, clip, flipped=flipped)
            if flipped:
                gaze = mirror_unit_horizontally(gaze)

            pad = width - n
            if pad:
                gaze = pad_last_frame(gaze, width, axis=0)
                valid = np.concatenate([valid, np.zeros(pad, bool)])
                gaze_type = np.concatenate([gaze_type, np.zeros(pad, np.int64)])
            pixels.append(inputs)
            gazes.append(torch.from_numpy(gaze))
            masks.append(torch.from_numpy(valid))
            types.append(torch.from_numpy(gaze_type))

            meta["clip_id"].append(clip)
            meta["video_path"].append(str(example["video_path"]))
            meta["window_start"].append(start)
            meta["num_frames"].append(n)
            meta["width"].append(int(example.get("width") or frame_size[0]))
            meta["height"].append(int(example.get("height") or frame_size[1]))
            meta["fps"].append(float(example["fps"]) if example.get("fps") is not None else float("nan"))
            for key in ("action", "verb", "noun"):
                value = example.get(key)
                meta[key].append(-1 if value is None else int(value))

        batch: dict[str, Any] = {
            self.input_key: torch.stack(pixels),
            "gaze": unit_to_model(torch.stack(gazes)),
            "valid_mask": torch.stack(masks),
            "gaze_type": torch.stack(types),
            "clip_id": meta["clip_id"],
            "video_path": meta["video_path"],
            "fps": torch.tensor(meta["fps"], dtype=torch.float32),
        }
        for key in ("window_start", "num_frames", "width", "height", "action", "verb", "noun"):
            batch[key] = torch.tensor(meta[key], dtype=torch.int64)
        if self.flip_generator is not None:
            batch[FLIP_STATE_KEY] = self.flip_generator.get_state()
        return batch


def _decode_window(path: str, start: int, num_frames: int) -> np.ndarray:
    return decode_frames(path, start, num_frames)


def _per_frame_fields(
    example: Mapping[str, Any], n: int, name: str, clip: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Check and convert gaze/valid/gaze_type of one example; untracked points become finite, never NaN."""
    gaze = np.asarray(example["gaze"], dtype=np.float32)
    if gaze.shape != (n, 2):
        raise ValueError(f"{name} ({clip}): gaze must have shape [num_frames, 2] = [{n}, 2], got {gaze.shape}")
    valid = np.asarray(example["valid"])
    if valid.shape != (n,):
        raise ValueError(f"{name} ({clip}): valid must have shape [num_frames] = [{n}], got {valid.shape}")
    valid = valid.astype(bool)
    if example.get("gaze_type") is not None:
        gaze_type = np.asarray(example["gaze_type"]).astype(np.int64)
        if gaze_type.shape != (n,):
            raise ValueError(f"{name} ({clip}): gaze_type must have shape [num_frames] = [{n}], got {gaze_type.shape}")
        if not np.isin(gaze_type, GAZE_TYPE_CODES).all():
            raise ValueError(
                f"{name} ({clip}): gaze_type codes must be in {GAZE_TYPE_CODES}, got {sorted(set(gaze_type.tolist()))}"
            )
    else:
        gaze_type = np.where(valid, FIXATION, UNTRACKED).astype(np.int64)
    finite = np.isfinite(gaze).all(axis=1)
    if (valid & ~finite).any():
        frames = np.flatnonzero(valid & ~finite)[:8].tolist()
        raise ValueError(f"{name} ({clip}): gaze is not finite on valid frames {frames}")
    outside = ((gaze < -_UNIT_TOLERANCE) | (gaze > 1 + _UNIT_TOLERANCE)).any(axis=1) & valid
    if outside.any():
        raise ValueError(
            f"{name} ({clip}): gaze must be unit coordinates in [0, 1] on valid frames; frames "
            f"{np.flatnonzero(outside)[:8].tolist()} are outside (is it in pixels or in [-1, 1]?)"
        )
    gaze = np.where(finite[:, None], np.clip(gaze, 0.0, 1.0), np.float32(0.5)).astype(np.float32)
    return gaze, valid, gaze_type


def _check_size(example: Mapping[str, Any], frames: np.ndarray, name: str, clip: str) -> None:
    """The decoded frames must have the size the example declares: gaze is relative to that frame."""
    if frames.ndim != 4:
        raise ValueError(f"{name} ({clip}): decoded frames must be [n, H, W, 3], got {frames.shape}")
    height, width = frames.shape[1:3]
    declared = (example.get("width"), example.get("height"))
    if declared[0] is not None and declared[1] is not None and (int(declared[0]), int(declared[1])) != (width, height):
        raise ValueError(
            f"{name} ({clip}): the example says {int(declared[0])}x{int(declared[1])} but "
            f"{example['video_path']} decodes to {width}x{height}"
        )


__all__ = ["GazeFlowDataCollator"]
