"""The frozen-feature cache: encoder outputs computed once per window, stored as safetensors shards.

With a frozen encoder and no LoRA nothing before W_proj trains, so the encoder's tokens of each training window
are the same at every epoch. :class:`FeatureCache` computes them once (each process encodes its share of the
windows), stores them in safetensors shards keyed ``"<clip_id>@<window_start>"``, and
:class:`CachedFeatureCollator` serves them as ``encoder_hidden_states`` in place of decoded frames, so later epochs
train the velocity network without decoding video or running the encoder. For horizontal-flip augmentation
(:class:`~transformers_gazeflow.data.collator.GazeFlowDataCollator`'s ``horizontal_flip_probability``) the
training windows are also encoded mirrored, under ``"<clip_id>@<window_start>:hflip"``: the encoder's tokens of a
mirrored window are not the mirrored tokens, so the mirrored frames go through the encoder themselves.

The cache is tied to what produced it: a fingerprint of the encoder (its config and a hash of its weights), the
processor (its settings) and the window length. A cache made with anything else is detected and rebuilt, never
silently reused.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from ..data.atomic_files import atomic_write
from ..data.collator import GazeFlowDataCollator
from ..data.processing import GazeFlowVideoProcessor

logger = logging.getLogger(__name__)

MANIFEST = "manifest.json"
BUILDING = "building.json"  # a build under way or interrupted, with its fingerprint (resumed by the next build)
FORMAT_VERSION = 1
FLIPPED_SUFFIX = ":hflip"


def example_key(example: Mapping[str, Any], flipped: bool = False) -> str:
    """The cache key of one window: ``"<clip_id>@<window_start>"`` (the builders' example key), with
    ``":hflip"`` appended for its mirrored copy."""
    return f"{example['clip_id']}@{int(example['window_start'])}" + (FLIPPED_SUFFIX if flipped else "")


def cache_fingerprint(model, processor: GazeFlowVideoProcessor) -> str:
    """A hash of everything the cached tokens depend on: encoder config and weights, processor, window length, and
    for the causal variant its encoder window (its tokens are per frame, from causal windows)."""
    digest = hashlib.sha256()
    encoder_config = {
        k: v
        for k, v in model.config.encoder_config.to_dict().items()
        if not k.startswith("_") and k not in ("transformers_version", "architectures", "dtype")
    }
    digest.update(json.dumps(encoder_config, sort_keys=True, default=str).encode())
    digest.update(processor.fingerprint().encode())
    digest.update(str(model.config.num_frames).encode())
    if getattr(model.config, "causal", False):  # per-frame tokens from causal windows (modeling_gazeflow_causal)
        digest.update(f"causal:{model.config.causal_encoder_frames}".encode())
    for name, tensor in sorted(model.video_encoder.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().to("cpu", torch.float32).contiguous().numpy().tobytes())
    return f"v{FORMAT_VERSION}-{digest.hexdigest()}"


class FeatureCache:
    """Encoder tokens of every window of a dataset, in ``directory`` (a manifest and safetensors shards)."""

    def __init__(self, directory: str | os.PathLike, fingerprint: str):
        self.directory = Path(directory)
        self.fingerprint = fingerprint
        self._index: dict[str, str] = {}
        self._handles: dict[str, Any] = {}

    # ------------------------------------------------------------------ state on disk
    def _manifest(self) -> dict | None:
        path = self.directory / MANIFEST
        if not path.exists():
            return None
        try:
            return json.loads(path.read_text())
        except json.JSONDecodeError:
            return None

    def covers(self, keys: Sequence[str]) -> bool:
        """True when the cache on disk was made for this fingerprint and holds every key."""
        manifest = self._manifest()
        if manifest is None or manifest.get("fingerprint") != self.fingerprint:
            return False
        return all(key in manifest["entries"] for key in keys)

    def open(self) -> "FeatureCache":
        manifest = self._manifest()
        if manifest is None or manifest.get("fingerprint") != self.fingerprint:
            raise ValueError(f"feature cache {self.directory} was not built for this encoder/processor; build it first")
        self._index = manifest["entries"]
        return self

    # ------------------------------------------------------------------ building
    def _keep_only_own_windows(self) -> None:
        """Empty the folder unless it holds windows of this fingerprint: a complete cache that lacks some keys, or
        a build interrupted before its manifest (shards are written whole, each process's index after each shard),
        whose windows the next build keeps."""
        manifest = self._manifest()
        try:
            started = json.loads((self.directory / BUILDING).read_text())
        except (OSError, json.JSONDecodeError):
            started = None
        if manifest is not None and manifest.get("fingerprint") == self.fingerprint:
            return
        if manifest is None and isinstance(started, dict) and started.get("fingerprint") == self.fingerprint:
            return
        if manifest is not None:
            logger.warning(
                "feature cache %s was built for a different encoder or processor: rebuilding", self.directory
            )
        if self.directory.exists():
            shutil.rmtree(self.directory)

    @torch.no_grad()
    def build(
        self,
        model,
        datasets: Sequence[Sequence[Mapping[str, Any]]],
        collator: GazeFlowDataCollator,
        batch_size: int = 8,
        accelerator=None,
        flipped_datasets: Sequence[Sequence[Mapping[str, Any]]] = (),
    ) -> "FeatureCache":
        """Encode every window of ``datasets``, and the mirrored copy of every window of ``flipped_datasets``, not
        yet cached (all of them if the cache was made for anything else). With an ``accelerator``, each process
        encodes the windows of every ``num_processes``-th video. An interrupted build resumes where it stopped;
        a progress bar counts the windows and shows the cache's size on disk, estimated from the first shard."""
        rank = accelerator.process_index if accelerator is not None else 0
        world = accelerator.num_processes if accelerator is not None else 1
        requests = [(example, False) for dataset in datasets for example in dataset] + [
            (example, True) for dataset in flipped_datasets for example in dataset
        ]
        keys = [example_key(example, flipped) for example, flipped in requests]
        if self.covers(keys):
            logger.info("feature cache %s is up to date (%d windows)", self.directory, len(keys))
            return self.open()
        if rank == 0:
            self._keep_only_own_windows()
            self.directory.mkdir(parents=True, exist_ok=True)
            (self.directory / MANIFEST).unlink(missing_ok=True)
            atomic_write(self.directory / BUILDING, json.dumps({"fingerprint": self.fingerprint}))
        _barrier(accelerator)
        done = _read_indexes(self.directory)
        if done:
            logger.info(
                "feature cache %s: resuming, %d of %d windows already cached", self.directory, len(done), len(keys)
            )
        by_video: dict[str, list[tuple[Mapping[str, Any], bool]]] = {}
        for (example, flipped), key in zip(requests, keys):
            if key not in done:
                by_video.setdefault(str(example["video_path"]), []).append((example, flipped))
        videos = sorted(by_video)[rank::world]  # each process encodes the windows of its share of the videos
        writer = _ShardWriter(self.directory, rank, model, batch_size)
        todo = sum(len(by_video[video]) for video in videos)
        with _CacheProgress(todo, self.directory, len(keys), len(done), rank) as bar:
            for video in videos:
                for key, inputs in window_inputs(by_video[video], collator):
                    bar.advance(writer.add(key, inputs))
            bar.advance(writer.flush())
        _barrier(accelerator)
        if rank == 0:
            merged = _read_indexes(self.directory)
            manifest = {"fingerprint": self.fingerprint, "format_version": FORMAT_VERSION, "entries": merged}
            # the manifest appears only once every shard is written
            atomic_write(self.directory / MANIFEST, json.dumps(manifest))
            (self.directory / BUILDING).unlink(missing_ok=True)
        _barrier(accelerator)
        return self.open()

    # ------------------------------------------------------------------ reading
    def load(self, key: str) -> torch.Tensor:
        if key not in self._index:
            raise KeyError(f"window {key} is not in the feature cache {self.directory}")
        shard = self._index[key]
        if shard not in self._handles:
            from safetensors import safe_open

            self._handles[shard] = safe_open(str(self.directory / shard), framework="pt")
        return self._handles[shard].get_tensor(key)

    def __getstate__(self) -> dict:  # DataLoader workers reopen the shards themselves
        state = dict(self.__dict__)
        state["_handles"] = {}
        return state


def window_inputs(requests: Sequence[tuple[Mapping[str, Any], bool]], collator: GazeFlowDataCollator):
    """Yield ``(key, model input [W, 3, S, S])`` for ``(example, flipped)`` windows of one video, decoding the video
    once.

    The frames covering every window are decoded and processed once, then each window is cut out and finished
    (padded, and mirrored when ``flipped``) by :meth:`GazeFlowDataCollator.finish_window`, as
    :meth:`GazeFlowDataCollator.load_inputs` does (the processor works frame by frame, so processing the union and
    slicing equals processing each window).
    """
    from ..data.video import decode_frames

    examples = [example for example, _ in requests]
    first = min(int(example["window_start"]) for example in examples)
    last = max(int(example["window_start"]) + int(example["num_frames"]) for example in examples)
    frames = decode_frames(str(examples[0]["video_path"]), first, last - first)
    processed = collator.processor.preprocess(frames)
    for example, flipped in requests:
        start, count = int(example["window_start"]) - first, int(example["num_frames"])
        yield example_key(example, flipped), collator.finish_window(processed[start : start + count], flipped)


class CachedFeatureCollator(GazeFlowDataCollator):
    """:class:`GazeFlowDataCollator` with the encoder tokens from a :class:`FeatureCache` in place of frames:
    the batch has ``encoder_hidden_states`` ``[B, (W / tubelet) * N, D]`` and the same targets and metadata."""

    input_key = "encoder_hidden_states"

    def __init__(
        self,
        cache: FeatureCache,
        processor: GazeFlowVideoProcessor,
        num_frames: int = 64,
        horizontal_flip_probability: float = 0.0,
        flip_generator: torch.Generator | None = None,
    ):
        super().__init__(
            processor,
            num_frames,
            horizontal_flip_probability=horizontal_flip_probability,
            flip_generator=flip_generator,
        )
        self.cache = cache

    def load_inputs(
        self, example: Mapping[str, Any], name: str, clip: str, flipped: bool = False
    ) -> tuple[torch.Tensor, tuple[int, int]]:
        return self.cache.load(example_key(example, flipped)), (int(example["width"]), int(example["height"]))


class _ShardWriter:
    """One process's windows, encoded ``batch_size`` at a time into ``shard-r<rank>-<n>.safetensors``; after each
    shard, the process's index (``index-r<rank>.json``: key -> shard, the earlier builds' entries kept) is
    rewritten whole, so an interrupted build leaves every finished shard usable."""

    def __init__(self, directory: Path, rank: int, model, batch_size: int):
        self.directory, self.rank, self.model, self.batch_size = directory, rank, model, batch_size
        self.device = next(model.parameters()).device
        self.index_path = directory / f"index-r{rank:03d}.json"
        self.entries: dict[str, str] = json.loads(self.index_path.read_text()) if self.index_path.exists() else {}
        self.next_shard = len(list(directory.glob(f"shard-r{rank:03d}-*.safetensors")))
        self.keys: list[str] = []
        self.inputs: list[torch.Tensor] = []

    def add(self, key: str, inputs: torch.Tensor) -> int:
        """Queue one window; returns how many windows were written by the shard this completed (or 0)."""
        if key in self.keys or key in self.entries:
            return 0
        self.keys.append(key)
        self.inputs.append(inputs)
        return self.flush() if len(self.inputs) == self.batch_size else 0

    def flush(self) -> int:
        if not self.inputs:
            return 0
        # stored in fp32 whatever the autocast: CPU autocast returns bf16 tokens (CUDA's layer norm returns fp32),
        # and a bf16 cache would break a later run without autocast ("mat1 and mat2 must have the same dtype")
        tokens = self.model.encode_video(torch.stack(self.inputs).to(self.device)).to("cpu", torch.float32)
        shard = f"shard-r{self.rank:03d}-{self.next_shard:06d}.safetensors"
        self.next_shard += 1
        tensors = {key: tokens[i].clone() for i, key in enumerate(self.keys)}
        _save_safetensors(tensors, self.directory / shard)
        self.entries.update({key: shard for key in tensors})
        atomic_write(self.index_path, json.dumps(self.entries))
        self.keys, self.inputs = [], []
        return len(tensors)


class _CacheProgress:
    """A progress bar over the windows to encode (on the main process) whose postfix is the cache's estimated
    size on disk: the bytes written so far per window, times every window of the cache."""

    def __init__(self, todo: int, directory: Path, total_windows: int, already: int, rank: int):
        from tqdm.auto import tqdm

        self.directory, self.total_windows, self.written = directory, total_windows, already  # already: resumed
        self.bar = tqdm(total=todo, desc="caching encoder features", unit="window", disable=rank != 0 or todo == 0)
        self.estimated = False

    def advance(self, windows: int) -> None:
        if not windows:
            return
        self.written += windows
        self.bar.update(windows)
        if not self.estimated:
            self.estimated = True
            size = sum(path.stat().st_size for path in self.directory.glob("shard-*.safetensors"))
            estimate = size / self.written * self.total_windows if self.written else 0
            free = shutil.disk_usage(self.directory).free
            self.bar.set_postfix(disk=f"~{estimate / 1e9:.2f} GB")
            logger.info("feature cache %s: about %.2f GB on disk when complete", self.directory, estimate / 1e9)
            if estimate > free:
                logger.warning(
                    "feature cache %s needs about %.2f GB, only %.2f GB are free there (--feature_cache_dir moves it)",
                    self.directory,
                    estimate / 1e9,
                    free / 1e9,
                )

    def __enter__(self) -> "_CacheProgress":
        return self

    def __exit__(self, *exc) -> None:
        self.bar.close()


def _read_indexes(directory: Path) -> dict[str, str]:
    """Every process's index of the shards written so far (``index-r*.json``; one cut short is ignored)."""
    merged: dict[str, str] = {}
    for part in sorted(directory.glob("index-r*.json")) if directory.is_dir() else ():
        try:
            merged.update(json.loads(part.read_text()))
        except json.JSONDecodeError:
            continue
    return {key: shard for key, shard in merged.items() if (directory / shard).is_file()}


def _save_safetensors(tensors: dict[str, torch.Tensor], path: Path) -> None:
    from safetensors.torch import save_file

    atomic_write(path, lambda temporary: save_file(tensors, str(temporary)))


def _barrier(accelerator) -> None:
    if accelerator is not None:
        accelerator.wait_for_everyone()


__all__ = ["FeatureCache", "CachedFeatureCollator", "cache_fingerprint", "example_key", "window_inputs"]
