"""The video processor: whole frames resized to the encoder's size and normalised, in torch, without torchvision.

Why not transformers' own: ``VJEPA2VideoProcessor`` needs torchvision and centre-crops
(shortest edge 292, crop 256), which would cut gaze targets off the frame. GazeFlow instead resizes the *whole*
frame to ``size x size`` (bilinear, antialiased, ``align_corners=False``) and normalises with the ImageNet mean/std.
Because the whole frame is kept, a point at unit coordinates ``(u, v)`` of the native frame is at the same unit
coordinates of the processed frame (``geometry``'s continuous pixel convention), whatever the aspect ratio: gaze
needs no conversion through the processor.

Two resize precisions (``resize_dtype``): ``"float32"`` (the default, the definition every bundled model was trained
and tested with) converts the frame to float and resizes that; ``"uint8"`` resizes the uint8 frame with torch's
vectorised uint8 kernel and converts the small result, several times faster on a CPU, its pixels rounded to whole
grey levels (within one grey level of the float32 resize).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

IMAGENET_MEAN: tuple[float, float, float] = (0.485, 0.456, 0.406)
IMAGENET_STD: tuple[float, float, float] = (0.229, 0.224, 0.225)
PREPROCESSOR_CONFIG_NAME = "preprocessor_config.json"
_RESAMPLE_MODES = ("bilinear", "bicubic")
RESIZE_DTYPES = ("float32", "uint8")
"""``resize_dtype``: resize the frame after converting it to float32 (exact), or resize the uint8 frame (fast)."""
HOST_CHUNK_BYTES = 8 * 2**20
"""On the CPU, frames are converted to float and resized at most this many bytes of floats (with ``resize_dtype=
"uint8"``: of uint8 frames) at a time (fewer than
``chunk_frames`` frames when they are large): a block this size is reused from the heap, where a larger one is
mapped fresh, page by page, for every chunk (which cost more than the resize itself at 640x480). Each frame is
processed on its own either way: the output does not depend on the chunking."""


class GazeFlowVideoProcessor:
    """Resize whole RGB frames to ``size x size`` and normalise them.

    Args:
        size: side of the square output frames (the encoder's input size, 256 for V-JEPA 2).
        image_mean, image_std: per-channel normalisation applied to pixels rescaled to ``[0, 1]``.
        resample: ``"bilinear"`` (default) or ``"bicubic"``, as in ``torch.nn.functional.interpolate``.
        antialias: low-pass filter when downscaling (``interpolate(..., antialias=True)``).
        chunk_frames: frames resized at once; bounds the float working memory of long videos.
        resize_dtype: ``"float32"`` (default: convert to float, then resize) or ``"uint8"`` (resize the uint8 frame,
            then convert: rounded to whole grey levels; on a device without torch's uint8 resize kernel, the float32
            resize rounded to whole grey levels).

    Input: one video ``[T, H, W, 3]`` (or grayscale ``[T, H, W]`` / ``[T, H, W, 1]``) of ``uint8``, as a numpy
    array or a torch tensor. Output of :meth:`preprocess`: ``float32`` ``[T, 3, size, size]``, on the input
    tensor's device (CPU for numpy input).
    """

    model_input_names = ["pixel_values_videos"]

    def __init__(
        self,
        size: int = 256,
        image_mean: tuple[float, ...] | list[float] = IMAGENET_MEAN,
        image_std: tuple[float, ...] | list[float] = IMAGENET_STD,
        resample: str = "bilinear",
        antialias: bool = True,
        chunk_frames: int = 16,
        resize_dtype: str = "float32",
    ) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"size must be a positive int (the square output side), got {size!r}")
        mean, std = [float(m) for m in image_mean], [float(s) for s in image_std]
        if len(mean) != 3:
            raise ValueError(f"image_mean must have 3 values (R, G, B), got {image_mean!r}")
        if len(std) != 3 or any(not s > 0 for s in std):
            raise ValueError(f"image_std must have 3 positive values (R, G, B), got {image_std!r}")
        if resample not in _RESAMPLE_MODES:
            raise ValueError(f"resample must be one of {_RESAMPLE_MODES}, got {resample!r}")
        if resize_dtype not in RESIZE_DTYPES:
            raise ValueError(f"resize_dtype must be one of {RESIZE_DTYPES}, got {resize_dtype!r}")
        if isinstance(chunk_frames, bool) or not isinstance(chunk_frames, int) or chunk_frames < 1:
            raise ValueError(f"chunk_frames must be a positive int, got {chunk_frames!r}")
        self.size = size
        self.image_mean = mean
        self.image_std = std
        self.resample = resample
        self.antialias = bool(antialias)
        self.chunk_frames = chunk_frames
        self.resize_dtype = resize_dtype

    # ------------------------------------------------------------------ processing
    def _as_video_tensor(self, video: Any, name: str) -> torch.Tensor:
        """Check and convert one video to a uint8 tensor ``[T, H, W, 3]``; errors name the argument."""
        if isinstance(video, np.ndarray):
            if video.dtype != np.uint8:
                raise ValueError(f"{name} must hold uint8 pixels (0..255), got numpy dtype {video.dtype}")
            tensor = torch.from_numpy(np.ascontiguousarray(video))
        elif isinstance(video, torch.Tensor):
            if video.dtype != torch.uint8:
                raise ValueError(f"{name} must hold uint8 pixels (0..255), got torch dtype {video.dtype}")
            tensor = video
        else:
            raise ValueError(
                f"{name} must be a numpy array or torch tensor [T, H, W, 3] of uint8, got {type(video).__name__}"
            )
        if tensor.ndim == 3:  # grayscale [T, H, W]
            tensor = tensor.unsqueeze(-1)
        if tensor.ndim != 4 or tensor.shape[-1] not in (1, 3):
            raise ValueError(
                f"{name} must have shape [T, H, W, 3] (channels last; grayscale [T, H, W] or "
                f"[T, H, W, 1] also accepted), got {tuple(tensor.shape)}"
            )
        if min(tensor.shape[:3]) < 1:
            raise ValueError(f"{name} must have at least one frame of at least 1x1 pixel, got {tuple(tensor.shape)}")
        if tensor.shape[-1] == 1:
            tensor = tensor.expand(*tensor.shape[:3], 3)
        return tensor

    def preprocess(self, video: Any) -> torch.Tensor:
        """Resize and normalise one video: uint8 ``[T, H, W, 3]`` -> float32 ``[T, 3, size, size]``."""
        frames = self._as_video_tensor(video, "video")
        device = frames.device  # a tensor on an accelerator is processed there
        mean, std = self._normalisation(device)
        out = torch.empty((frames.shape[0], 3, self.size, self.size), dtype=torch.float32, device=device)
        step = self.host_chunk_frames(frames.shape[1:]) if device.type == "cpu" else self.chunk_frames
        for start in range(0, frames.shape[0], step):
            chunk = frames[start : start + step].permute(0, 3, 1, 2)
            if self.resize_dtype == "uint8":
                chunk = self._resize_uint8(chunk).to(torch.float32).div_(255.0)
            else:
                chunk = self._resize(chunk.to(torch.float32).div_(255.0))
            out[start : start + chunk.shape[0]] = (chunk - mean) / std
        return out

    def _resize(self, chunk: torch.Tensor) -> torch.Tensor:
        """``[n, 3, H, W]`` -> ``[n, 3, size, size]``, of the same dtype (unchanged when already that size)."""
        if chunk.shape[-2:] == (self.size, self.size):
            return chunk
        return F.interpolate(
            chunk, size=(self.size, self.size), mode=self.resample, align_corners=False, antialias=self.antialias
        )

    def _resize_uint8(self, chunk: torch.Tensor) -> torch.Tensor:
        """The uint8 resize: torch's uint8 kernel on the CPU (on the channels-last view of the frames, as they are
        stored: no copy); elsewhere the float32 resize of the frames on the 0..255 scale rounded to whole grey
        levels (and clamped, as bicubic overshoots)."""
        if chunk.device.type == "cpu":
            return self._resize(chunk)
        return self._resize(chunk.to(torch.float32)).round_().clamp_(0, 255)

    def _normalisation(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """The mean and std ``[1, 3, 1, 1]`` on ``device``, made once per device: ``torch.tensor(..., device=cuda)``
        is a copy from the host that waits for the device, which a stream processing frames on every batch must
        not do."""
        key = (str(device), tuple(self.image_mean), tuple(self.image_std))
        cached = self.__dict__.setdefault("_normalisation_cache", {})
        if key not in cached:
            cached[key] = tuple(
                torch.tensor(values, dtype=torch.float32).view(1, 3, 1, 1).to(device)
                for values in (self.image_mean, self.image_std)
            )
        return cached[key]

    def host_chunk_frames(self, frame_shape: tuple[int, ...]) -> int:
        """Frames of ``frame_shape`` (``[H, W, 3]``) converted and resized at once on the CPU: ``chunk_frames``, fewer
        when their floats would pass :data:`HOST_CHUNK_BYTES`."""
        values = int(np.prod(frame_shape[:2])) * 3
        value_bytes = 4 if self.resize_dtype == "float32" else 1  # the uint8 resize converts its small output only
        return max(1, min(self.chunk_frames, HOST_CHUNK_BYTES // (value_bytes * values)))

    def __call__(self, videos: Any) -> dict[str, torch.Tensor]:
        """Process a batch of videos into ``{"pixel_values_videos": [B, T, 3, size, size]}``.

        ``videos`` is one video ``[T, H, W, 3]`` (batch of one), a batch array ``[B, T, H, W, 3]``, or a list of
        videos with the same number of frames (their sizes may differ: each is resized as a whole).
        """
        if isinstance(videos, (list, tuple)):
            if not videos:
                raise ValueError("videos must hold at least one video, got an empty list")
            items = [self._as_video_tensor(v, f"videos[{i}]") for i, v in enumerate(videos)]
            lengths = {item.shape[0] for item in items}
            if len(lengths) != 1:
                raise ValueError(f"videos must all have the same number of frames to be batched, got {sorted(lengths)}")
        elif isinstance(videos, (np.ndarray, torch.Tensor)) and videos.ndim == 5:
            items = [self._as_video_tensor(videos[i], f"videos[{i}]") for i in range(videos.shape[0])]
        else:
            items = [self._as_video_tensor(videos, "videos")]
        return {"pixel_values_videos": torch.stack([self.preprocess(item) for item in items])}

    def unnormalize(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """Invert the normalisation: ``[..., 3, S, S]`` -> uint8 ``[..., S, S, 3]`` (for overlays and checks)."""
        if not isinstance(pixel_values, torch.Tensor) or pixel_values.ndim < 3 or pixel_values.shape[-3] != 3:
            raise ValueError(
                "pixel_values must be a tensor [..., 3, S, S], got "
                f"{getattr(pixel_values, 'shape', type(pixel_values).__name__)}"
            )
        mean = torch.tensor(self.image_mean, dtype=pixel_values.dtype, device=pixel_values.device).view(3, 1, 1)
        std = torch.tensor(self.image_std, dtype=pixel_values.dtype, device=pixel_values.device).view(3, 1, 1)
        pixels = (pixel_values * std + mean).clamp(0, 1).mul(255).round().to(torch.uint8)
        return pixels.movedim(-3, -1)

    # ------------------------------------------------------------------ serialisation
    def to_dict(self) -> dict[str, Any]:
        """The settings as a JSON-ready dict (what ``preprocessor_config.json`` holds; ``resize_dtype`` only when it is
        not the default ``"float32"``, so that the files and fingerprints of processors without it stay as they
        were)."""
        return {
            "video_processor_type": type(self).__name__,
            "size": self.size,
            "image_mean": list(self.image_mean),
            "image_std": list(self.image_std),
            "resample": self.resample,
            "antialias": self.antialias,
            "do_resize": True,
            "do_center_crop": False,
            "do_normalize": True,
            "rescale_factor": 1.0 / 255.0,
            "chunk_frames": self.chunk_frames,
            **({"resize_dtype": self.resize_dtype} if self.resize_dtype != "float32" else {}),
        }

    @classmethod
    def from_dict(cls, config: dict[str, Any]) -> GazeFlowVideoProcessor:
        """Build a processor from :meth:`to_dict`'s output; unknown keys raise (they would be silently ignored)."""
        config = dict(config)
        kind = config.pop("video_processor_type", cls.__name__)
        if kind != cls.__name__:
            raise ValueError(f"config describes a {kind}, not a {cls.__name__}")
        fixed = {"do_resize": True, "do_center_crop": False, "do_normalize": True, "rescale_factor": 1.0 / 255.0}
        for key, expected in fixed.items():
            if key in config and config.pop(key) != expected:
                raise ValueError(f"{cls.__name__} only supports {key}={expected!r}")
        known = {"size", "image_mean", "image_std", "resample", "antialias", "chunk_frames", "resize_dtype"}
        unknown = set(config) - known
        if unknown:
            raise ValueError(f"unknown {cls.__name__} settings: {sorted(unknown)} (known: {sorted(known)})")
        if isinstance(config.get("size"), dict):  # transformers-style {"height": S, "width": S}
            size = config["size"]
            if size.get("height") != size.get("width"):
                raise ValueError(f"size must be square, got {size}")
            config["size"] = size["height"]
        return cls(**config)

    def to_json_string(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def save_pretrained(self, save_directory: str | os.PathLike) -> Path:
        """Write ``preprocessor_config.json`` into ``save_directory`` (created if needed); returns its path."""
        directory = Path(save_directory)
        if directory.exists() and not directory.is_dir():
            raise ValueError(f"save_directory must be a directory, got the file {directory}")
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / PREPROCESSOR_CONFIG_NAME
        path.write_text(self.to_json_string(), encoding="utf-8")
        return path

    @classmethod
    def from_pretrained(cls, pretrained_path: str | os.PathLike, **overrides: Any) -> GazeFlowVideoProcessor:
        """Load from a directory holding ``preprocessor_config.json`` (or that file itself); ``overrides`` win."""
        path = Path(pretrained_path)
        if path.is_dir():
            path = path / PREPROCESSOR_CONFIG_NAME
        if not path.is_file():
            raise FileNotFoundError(
                f"no {PREPROCESSOR_CONFIG_NAME} at {path} (expected a directory written by "
                f"{cls.__name__}.save_pretrained)"
            )
        try:
            config = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ValueError(
                f"{path}: expected a JSON object of processor settings, but it is not valid JSON ({err})"
            ) from None
        if not isinstance(config, dict):
            raise ValueError(f"{path}: expected a JSON object of processor settings, got a {type(config).__name__}")
        config.update(overrides)
        return cls.from_dict(config)

    def fingerprint(self) -> str:
        """A stable hash of every setting that changes the output pixels (a feature cache keys on it).

        ``chunk_frames`` only bounds memory and is left out.
        """
        settings = self.to_dict()
        settings.pop("chunk_frames")
        settings["image_mean"] = [round(v, 8) for v in settings["image_mean"]]
        settings["image_std"] = [round(v, 8) for v in settings["image_std"]]
        settings["rescale_factor"] = round(settings["rescale_factor"], 10)
        blob = json.dumps(settings, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GazeFlowVideoProcessor) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(json.dumps(self.to_dict(), sort_keys=True))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({json.dumps(self.to_dict(), sort_keys=True)})"


__all__ = ["GazeFlowVideoProcessor", "IMAGENET_MEAN", "IMAGENET_STD", "PREPROCESSOR_CONFIG_NAME"]
