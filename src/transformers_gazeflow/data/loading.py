"""The dataset loader: find, import and run a gaze dataset builder, and the contract every builder shares.

``datasets`` 4 and later refuse loading scripts in ``load_dataset``, so each folder under ``datasets_scripts/`` holds a
``GeneratorBasedBuilder`` in the classic loading-script form, and :func:`load_gaze_dataset` imports it from its file and
runs it directly::

    builder = EgteaGaze(data_dir=..., config_name="split1")
    builder.download_and_prepare()
    builder.as_dataset(split="train")

The builders ship inside the wheel as ``transformers_gazeflow/_builders/<name>/`` (see ``setup.py``); in a source
checkout they are read from ``datasets_scripts/<name>/``. So this works from an installed wheel, from any cwd.

Shared by all builders (and only here): the unified example schema (:func:`gaze_example_features`), the builder
options (:class:`GazeBuilderConfig`), the windowing of a clip into examples (:func:`clip_window_examples`, after
:func:`~transformers_gazeflow.models.gazeflow.windows.window_starts`) and the record of what a build skipped or
dropped (:class:`BuildLog`).
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import importlib.util
import inspect
import logging
import os
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..models.gazeflow.geometry import FisheyeCamera, PinholeCamera, camera_to_fields
from ..models.gazeflow.windows import window_starts
from .gaze_common import PARITY_FIXED, ParseReport, check_parity
from .gaze_types import valid_mask

logger = logging.getLogger(__name__)

#: Short names of the builders (docs/specs/data.md): ``egtea`` -> ``egtea_gaze`` and so on; full folder names work too.
BUILDER_ALIASES = {
    "egtea": "egtea_gaze",
    "ego4d": "ego4d_gaze",
    "egoexo4d": "egoexo4d_gaze",
    "synthetic": "synthetic_gaze",
}
CLIP_WINDOWS = ("all", "first")
"""Which windows of a clip a gaze dataset yields as examples (the builders' ``windows`` option): ``"all"`` windows
covering the clip or the ``"first"`` only. Not the sampler's ``window_mode`` (how a prediction joins its windows)."""
NO_LABEL = -1  # action/verb/noun where a dataset has none (docs/specs/data.md, "Unified example schema")


def _import_datasets():
    """``datasets``, imported only where it is needed: ``import transformers_gazeflow`` works without it (the GPU
    image has no ``datasets``); building a gaze dataset then says what to install."""
    try:
        import datasets
        import datasets.exceptions  # noqa: F401  (load_gaze_dataset unwraps its errors)
    except ImportError as err:
        raise ImportError(
            "building or loading a gaze dataset needs the `datasets` package: `pip install datasets`"
        ) from err
    return datasets


# ----------------------------------------------------------------------------------------------------------------
# The unified example schema and the shared builder options
# ----------------------------------------------------------------------------------------------------------------


def gaze_example_features():
    """The ``datasets.Features`` of one example: one window of at most ``window_frames`` frames of one clip.

    Exactly docs/specs/data.md's table: ``clip_id``, ``video_path`` (absolute), ``window_start`` (0-based frame of the
    video file), ``num_frames``, ``fps``, ``width``, ``height``, ``gaze`` float32 [n, 2] unit coordinates (top-left
    origin), ``gaze_type`` int8 [n] (0 untracked, 1 fixation, 2 saccade, 3 blink/other, 4 off-frame), ``valid``
    bool [n], ``action``/``verb``/``noun`` int32 (0-based, -1 where absent), ``camera_model`` string and
    ``camera_params`` float64 [m]: the camera of the example's ``width x height`` frame (``"none"`` and no numbers where
    the dataset ships none: the caller's camera applies; ``geometry.camera_from_fields`` reads them).
    """
    datasets = _import_datasets()

    return datasets.Features(
        {
            "clip_id": datasets.Value("string"),
            "video_path": datasets.Value("string"),
            "window_start": datasets.Value("int32"),
            "num_frames": datasets.Value("int32"),
            "fps": datasets.Value("float32"),
            "width": datasets.Value("int32"),
            "height": datasets.Value("int32"),
            "gaze": datasets.Array2D(shape=(None, 2), dtype="float32"),
            "gaze_type": datasets.Sequence(datasets.Value("int8")),
            "valid": datasets.Sequence(datasets.Value("bool")),
            "action": datasets.Value("int32"),
            "verb": datasets.Value("int32"),
            "noun": datasets.Value("int32"),
            "camera_model": datasets.Value("string"),
            "camera_params": datasets.Sequence(datasets.Value("float64")),
        }
    )


@dataclasses.dataclass
class GazeBuilderOptions:
    """The options every gaze builder takes; mixed into each ``BuilderConfig``.

    * ``parity``: ``"fixed"`` (default: the spec's fixes) or ``"glc"`` (the reference loaders' quirks exactly).
    * ``window_frames`` (64) and ``window_stride`` (32): the example windows.
    * ``windows``: ``"all"`` (windows covering the whole clip, by ``window_starts``), ``"first"`` (the evaluation
      protocol's first window only) or ``None`` (``"all"`` for train, ``"first"`` for test).
    * ``strict``: raise instead of dropping a clip with a logged reason.
    """

    parity: str = PARITY_FIXED
    window_frames: int = 64
    window_stride: int = 32
    windows: str | None = None
    strict: bool = False


def validate_options(config: Any) -> None:
    """Check a builder config's shared options; errors name the option and what was expected."""
    check_parity(config.parity)
    if not isinstance(config.window_frames, int) or config.window_frames < 1:
        raise ValueError(f"window_frames must be a positive int, got {config.window_frames!r}")
    if not isinstance(config.window_stride, int) or not 1 <= config.window_stride <= config.window_frames:
        raise ValueError(
            f"window_stride must be an int in [1, window_frames={config.window_frames}], got {config.window_stride!r}"
        )
    if config.windows is not None and config.windows not in CLIP_WINDOWS:
        raise ValueError(f"windows must be one of {CLIP_WINDOWS} or None, got {config.windows!r}")


def split_clip_windows(config: Any, split: str) -> str:
    """``windows`` for a split: the config's value, else ``"all"`` for train and ``"first"`` for other splits."""
    if config.windows is not None:
        return config.windows
    return "all" if split == "train" else "first"


def clip_window_examples(
    *,
    clip_id: str,
    video_path: str | os.PathLike,
    clip_first_frame: int,
    fps: float,
    width: int,
    height: int,
    gaze: np.ndarray,
    gaze_type: np.ndarray,
    windows: str,
    window_frames: int,
    window_stride: int,
    action: int = NO_LABEL,
    verb: int = NO_LABEL,
    noun: int = NO_LABEL,
    camera: PinholeCamera | FisheyeCamera | None = None,
) -> Iterator[tuple[str, dict]]:
    """The examples of one clip whose per-frame gaze is ``gaze`` [T, 2] / ``gaze_type`` [T].

    ``windows="all"``: windows at :func:`~transformers_gazeflow.models.gazeflow.windows.window_starts`
    ``(T, window_frames, window_stride)``, covering the whole clip; ``windows="first"``: the first window only
    (:data:`CLIP_WINDOWS`). A clip shorter than a window is one example of ``T`` frames (not padded here).
    ``window_start`` counts frames of the video file, so a clip that starts at frame ``clip_first_frame`` of a longer
    video yields ``clip_first_frame + local start``. ``camera``: the camera of the ``width x height`` frame read
    (``camera_model``/``camera_params``, :func:`~transformers_gazeflow.models.gazeflow.geometry.camera_to_fields`);
    None: the dataset ships none.
    """
    total = int(gaze_type.shape[0])
    if gaze.shape != (total, 2):
        raise ValueError(f"{clip_id}: gaze has shape {gaze.shape}, expected ({total}, 2)")
    if windows not in CLIP_WINDOWS:
        raise ValueError(f"windows must be one of {CLIP_WINDOWS}, got {windows!r}")
    starts = window_starts(total, window_frames, window_stride) if windows == "all" else [0]
    length = min(window_frames, total)
    video_path = str(Path(video_path).absolute())
    if camera is not None and camera.width is not None and (camera.width, camera.height) != (int(width), int(height)):
        size = f"{camera.width}x{camera.height}"
        raise ValueError(f"{clip_id}: the camera is of a {size} frame, the video {width}x{height}")
    camera_model, camera_params = camera_to_fields(camera)
    for local in starts:
        window = slice(local, local + length)
        types = np.asarray(gaze_type[window], np.int8)
        start = int(clip_first_frame + local)
        yield (
            f"{clip_id}@{start}",
            {
                "clip_id": clip_id,
                "video_path": video_path,
                "window_start": start,
                "num_frames": length,
                "fps": float(fps),
                "width": int(width),
                "height": int(height),
                "gaze": np.asarray(gaze[window], np.float32),
                "gaze_type": types,
                "valid": valid_mask(types),
                "action": int(action),
                "verb": int(verb),
                "noun": int(noun),
                "camera_model": camera_model,
                "camera_params": np.asarray(camera_params, np.float64),
            },
        )


class ClipDroppedError(ValueError):
    """Raised in ``strict`` mode where a clip would otherwise be dropped (or shortened) with a logged reason."""


@dataclasses.dataclass
class BuildLog:
    """What a builder's last build read and left out: parse reports per raw file, dropped clips with reasons, clips
    kept with fewer frames than their name lists, and counts of both by kind.

    Builders keep one as ``builder.build_log`` (filled while examples are generated; empty when the dataset came
    from the cache). ``strict=True`` turns every drop and every shortening into an error naming the file.
    """

    reports: dict[str, ParseReport] = dataclasses.field(default_factory=dict)
    dropped: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)  # (split, clip_id, reason)
    shortened: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)  # (split, clip_id, reason)
    #: clips dropped per kind of problem (e.g. ``"video missing"``, ``"video unreadable"``), like a parse report's
    #: skipped rows per reason
    drop_counts: Counter = dataclasses.field(default_factory=Counter)
    shorten_counts: Counter = dataclasses.field(default_factory=Counter)

    def add_report(self, report: ParseReport) -> ParseReport:
        self.reports[report.path] = report
        report.log()
        return report

    def drop(
        self, split: str, clip_id: str, reason: str, strict: bool, kind: str = "other", error: Exception | None = None
    ) -> None:
        """Leave clip ``clip_id`` out with a logged ``reason``, counted under ``kind``. With ``strict``, raise
        ``error`` (an error naming the file, e.g. the decoder's) or else a :class:`ClipDroppedError`."""
        if strict:
            if error is not None:
                raise error
            raise ClipDroppedError(f"{split} clip {clip_id}: {reason} (strict=True; pass strict=False to drop it)")
        logger.warning("dropping %s clip %s: %s", split, clip_id, reason)
        self.dropped.append((split, clip_id, reason))
        self.drop_counts[kind] += 1

    def shorten(self, split: str, clip_id: str, reason: str, strict: bool, kind: str) -> None:
        """Keep clip ``clip_id`` with fewer frames than it should have, with a logged ``reason``, counted under
        ``kind``; with ``strict``, raise a :class:`ClipDroppedError` instead."""
        if strict:
            raise ClipDroppedError(
                f"{split} clip {clip_id}: {reason} (strict=True; pass strict=False to keep the frames it has)"
            )
        logger.warning("keeping %s clip %s shortened: %s", split, clip_id, reason)
        self.shortened.append((split, clip_id, reason))
        self.shorten_counts[kind] += 1

    def dropped_in(self, split: str) -> dict[str, str]:
        return {clip: reason for s, clip, reason in self.dropped if s == split}

    def shortened_in(self, split: str) -> dict[str, str]:
        return {clip: reason for s, clip, reason in self.shortened if s == split}

    def summary(self) -> str:
        """One line: clips dropped and shortened, by kind, and malformed rows skipped over all parse reports."""

        def by_kind(counts: Counter) -> str:
            return ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))

        rows = sum(report.rows_skipped for report in self.reports.values())
        text = f"{len(self.dropped)} clips dropped"
        text += f" ({by_kind(self.drop_counts)})" if self.dropped else ""
        text += f", {len(self.shortened)} clips shortened"
        text += f" ({by_kind(self.shorten_counts)})" if self.shortened else ""
        return text + f", {rows} malformed rows skipped in {len(self.reports)} raw files"

    def log_summary(self, dataset: str) -> None:
        (logger.warning if self.dropped or self.shortened else logger.info)("%s: %s", dataset, self.summary())


# ----------------------------------------------------------------------------------------------------------------
# Finding and running builders
# ----------------------------------------------------------------------------------------------------------------


def builder_search_paths() -> list[Path]:
    """Where builder folders are looked for: the wheel's ``transformers_gazeflow/_builders``, then a source
    checkout's ``datasets_scripts`` (this file is ``src/transformers_gazeflow/data/loading.py`` there)."""
    package = Path(__file__).resolve().parents[1]
    paths = [package / "_builders", package.parents[1] / "datasets_scripts"]
    return [path for path in paths if path.is_dir()]


def available_builders() -> list[str]:
    """Names of the builder folders that can be loaded (each holds ``<name>/<name>.py``)."""
    names = set()
    for root in builder_search_paths():
        names.update(p.name for p in root.iterdir() if (p / f"{p.name}.py").is_file())
    return sorted(names)


def builder_file(name: str | os.PathLike) -> Path:
    """The builder module of a name (``egtea``, ``egtea_gaze``, ...), a builder folder, or a builder ``.py`` file."""
    path = Path(name)
    if path.suffix == ".py" and path.is_file():
        return path.resolve()
    if path.is_dir() and (path / f"{path.name}.py").is_file():
        return (path / f"{path.name}.py").resolve()
    folder = BUILDER_ALIASES.get(str(name), str(name))
    for root in builder_search_paths():
        candidate = root / folder / f"{folder}.py"
        if candidate.is_file():
            return candidate.resolve()
    searched = ", ".join(str(p) for p in builder_search_paths()) or "no builder folder found"
    raise ValueError(
        f"unknown gaze dataset {str(name)!r}: expected one of {sorted(BUILDER_ALIASES)} or "
        f"{available_builders()}, or a builder folder/.py path (searched: {searched})"
    )


def load_builder_class(name: str | os.PathLike):
    """Import a builder module from its file and return its ``datasets.GeneratorBasedBuilder`` subclass."""
    datasets = _import_datasets()

    path = builder_file(name)
    module_name = f"transformers_gazeflow._builders.{path.parent.name}.{path.stem}"
    module = sys.modules.get(module_name)
    if module is None or Path(getattr(module, "__file__", "")).resolve() != path:
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[module_name]
            raise
    classes = [
        obj
        for _, obj in inspect.getmembers(module, inspect.isclass)
        if issubclass(obj, datasets.GeneratorBasedBuilder) and obj.__module__ == module.__name__
    ]
    if len(classes) != 1:
        raise ValueError(
            f"{path} must define exactly one datasets.GeneratorBasedBuilder subclass, found "
            f"{[c.__name__ for c in classes]}"
        )
    return classes[0]


PACKAGE_NAME = "transformers_gazeflow"
_PACKAGE_DIR = Path(__file__).resolve().parents[1]


def _imported_modules(path: Path, package_dir: Path) -> set[Path]:
    """Files of this package that ``path`` imports (absolute ``transformers_gazeflow.x`` or relative imports,
    anywhere in the file, also inside functions). Package ``__init__.py`` files only re-export
    (docs/specs/architecture.md, "Rules of the house"): the top package's is never returned (it imports the whole
    model); a subpackage's (e.g. ``data/synthetic/__init__.py``) is returned so that :func:`builder_code_files` follows
    its re-exports to the modules that define them."""
    tree = ast.parse(path.read_bytes(), filename=str(path))
    inside = path.resolve().is_relative_to(package_dir.resolve())
    here = path.resolve().parent.relative_to(package_dir.resolve()).parts if inside else ()
    names: list[tuple[str, ...]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [tuple(alias.name.split(".")) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: only meaningful inside the package
                if not inside or node.level - 1 > len(here):
                    continue
                base = (PACKAGE_NAME, *here[: len(here) - (node.level - 1)])
            else:
                base = ()
            module = base + tuple((node.module or "").split(".")) if node.module else base
            names.append(module)
            names += [module + (alias.name,) for alias in node.names]  # `from . import module`
    files = set()
    for name in names:
        if not name or name[0] != PACKAGE_NAME or len(name) < 2:
            continue
        candidate = package_dir.joinpath(*name[1:]).with_suffix(".py")
        if candidate.is_file():
            files.add(candidate.resolve())
        elif (package_dir.joinpath(*name[1:]) / "__init__.py").is_file():
            files.add((package_dir.joinpath(*name[1:]) / "__init__.py").resolve())
    return files


def builder_code_files(builder_path: str | os.PathLike, package_dir: str | os.PathLike | None = None) -> list[Path]:
    """The code a builder's output depends on: its own file and every module of this package it imports, directly
    or through other package modules (e.g. ``data/loading.py``, ``data/egtea_format.py``, ``geometry.py``, and for
    ``synthetic_gaze`` the modules of the ``data/synthetic`` generator). A subpackage ``__init__.py`` only
    re-exports: its imports are followed, the file itself is left out. Sorted, for a stable hash."""
    package_dir = Path(package_dir).resolve() if package_dir is not None else _PACKAGE_DIR
    builder_path = Path(builder_path).resolve()
    seen: set[Path] = set()
    todo = [builder_path]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        todo += sorted(_imported_modules(path, package_dir) - seen)
    code = {path for path in seen if path == builder_path or path.name != "__init__.py"}
    return sorted(code, key=lambda p: (p != builder_path, str(p)))


def _code_hash(builder_path: Path, package_dir: str | os.PathLike | None = None) -> str:
    """A hash of the builder's code and of every package module it depends on (:func:`builder_code_files`), so a
    code change never reuses a stale Arrow cache (``datasets`` keys its cache folder ``name/config/version/hash``).
    Files are hashed by their path relative to the package and their bytes, so the hash is the same in a checkout
    and in an installed wheel holding the same code."""
    package_dir = Path(package_dir).resolve() if package_dir is not None else _PACKAGE_DIR
    digest = hashlib.sha256()
    files = builder_code_files(builder_path, package_dir)
    for path in files:  # the builder first, named by its file name (it lies outside the package in a checkout)
        name = path.name if path == files[0] else path.relative_to(package_dir).as_posix()
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def gaze_builder(
    name: str | os.PathLike,
    data_dir: str | os.PathLike | None = None,
    *,
    cache_dir: str | os.PathLike | None = None,
    config_name: str | None = None,
    **config: Any,
):
    """Instantiate a gaze builder (not yet prepared). ``config`` overrides the builder config's options.

    ``split_id=N`` selects the builder config ``splitN`` where the builder has one (EGTEA Gaze+).
    """
    cls = load_builder_class(name)
    if config_name is None and "split_id" in config and f"split{config['split_id']}" in cls.builder_configs:
        config_name = f"split{config['split_id']}"
    kwargs: dict[str, Any] = {"config_name": config_name, "hash": _code_hash(builder_file(name)), **config}
    if data_dir is not None:
        kwargs["data_dir"] = str(Path(data_dir).expanduser().resolve())
    if cache_dir is not None:
        kwargs["cache_dir"] = str(cache_dir)
    return cls(**kwargs)


def _prepare(builder: Any, download_mode: str | None, generation_error: type[Exception]) -> None:
    """``builder.download_and_prepare``, surfacing the builder's own error (missing file, bad video, strict drop)."""
    try:
        builder.download_and_prepare(download_mode=download_mode)
    except generation_error as err:
        if isinstance(err.__cause__, (OSError, ValueError, RuntimeError)):
            raise err.__cause__ from err
        raise


def _videos_gone(builder: Any) -> list[str]:
    """The ``video_path`` values of the prepared dataset (every split) whose files no longer exist: a cache built
    before its raw folder was deleted or moved names videos that are not there."""
    paths: set[str] = set()
    for dataset in builder.as_dataset().values():
        paths.update(dataset.unique("video_path"))
    return sorted(path for path in paths if not os.path.exists(path))


def load_gaze_dataset(
    name: str | os.PathLike,
    data_dir: str | os.PathLike | None = None,
    split: str | None = None,
    *,
    cache_dir: str | os.PathLike | None = None,
    download_mode: str | None = None,
    config_name: str | None = None,
    **config: Any,
):
    """Build (or reuse from the cache) a gaze dataset and return it in the unified example schema.

    ``name``: ``"egtea"``/``"egtea_gaze"``, ``"ego4d"``/``"ego4d_gaze"``, ``"egoexo4d"``/``"egoexo4d_gaze"``,
    ``"synthetic"``/``"synthetic_gaze"``, or a builder folder/file. ``data_dir``: the raw download (see each builder's
    dataset card). ``split``: ``"train"``, ``"test"`` or (where the builder has it, e.g. Ego-Exo4D) ``"validation"`` (a
    ``datasets.Dataset``), or ``None`` for a ``datasets.DatasetDict`` of all splits.
    ``config``: builder options, e.g. ``split_id=2``, ``parity="glc"``, ``window_frames=64``, ``window_stride=32``,
    ``windows="all"``, ``strict=True``. ``download_mode="force_redownload"`` rebuilds after the raw files changed; a
    cached dataset whose videos are gone (its raw folder deleted or moved since) is rebuilt from ``data_dir`` (the
    synthetic builder renders it again), and videos still missing after that are a FileNotFoundError naming one.
    """
    DatasetGenerationError = _import_datasets().exceptions.DatasetGenerationError

    builder = gaze_builder(name, data_dir, cache_dir=cache_dir, config_name=config_name, **config)
    _prepare(builder, download_mode, DatasetGenerationError)
    gone = _videos_gone(builder)
    if gone and download_mode != "force_redownload":
        logger.warning(
            "%s: the cached dataset names %d video file(s) that are gone (e.g. %s): rebuilding it from %s",
            name,
            len(gone),
            gone[0],
            data_dir,
        )
        _prepare(builder, "force_redownload", DatasetGenerationError)
        gone = _videos_gone(builder)
    if gone:
        raise FileNotFoundError(f"{name}: {len(gone)} video file(s) of {data_dir} are missing, e.g. {gone[0]}")
    try:
        return builder.as_dataset(split=split)
    except ValueError as err:  # a split left without any clip is not built (the builder logged why)
        if "Unknown split" not in str(err):
            raise
        built = sorted(builder.info.splits or ())
        raise ValueError(
            f"{name}: no split {split!r} was built from {data_dir} (built: {built}); a split none of whose clips "
            "was kept is left out, and the log names the takes and clips dropped"
        ) from None


__all__ = [
    "BUILDER_ALIASES",
    "CLIP_WINDOWS",
    "NO_LABEL",
    "gaze_example_features",
    "GazeBuilderOptions",
    "validate_options",
    "split_clip_windows",
    "clip_window_examples",
    "ClipDroppedError",
    "BuildLog",
    "builder_search_paths",
    "available_builders",
    "builder_file",
    "load_builder_class",
    "builder_code_files",
    "gaze_builder",
    "load_gaze_dataset",
]
