"""Model folders: the one writer (:func:`save_model_folder`), loading with clear errors, the bundled default.

A GazeFlow model folder (what :func:`save_model_folder` writes, and what a Hub repository holds) contains
``config.json`` (``model_type: "gazeflow"``), ``model.safetensors``, ``preprocessor_config.json`` (the
:class:`~transformers_gazeflow.data.processing.GazeFlowVideoProcessor`; when missing, the processor defaults to
``size=config.image_size``) and a ``README.md`` model card (:mod:`transformers_gazeflow.hub.model_cards`); with
``remote_code=True`` also the code that ``trust_remote_code=True`` loading needs
(:mod:`transformers_gazeflow.hub.remote_code`). ``model.save_pretrained(dir)`` alone writes only the config and the
weights (the model knows nothing of the data processor or of cards: the model layer never imports the data layer), so
every writer of model folders in the project (the pipeline's ``save_pretrained``, ``examples/train.py``,
:func:`bundle_default_model`) calls :func:`save_model_folder`.

Loading (:func:`load_model`) checks a folder before transformers reads it and names the file that is wrong: no
``config.json`` or another ``model_type``, a config field of the wrong type, missing, empty or truncated weights, a
pickle that is not plain weights (refused: loading it could run code), NaN or inf weights
(:class:`ModelFolderError`, a ``ValueError``).

The package ships two folders: ``default_model/``, used when no model is named (:func:`default_model_path`), and
``default_model_causal/``, the causal model that online prediction uses (``default_model_path(causal=True)``).

A folder may also hold ``region_calibration.json`` (:data:`REGION_CALIBRATION_NAME`): the factors that calibrate
the model's uncertainty regions, one per level (``gaze.regions.RegionCalibration``, fitted by
``gaze.uncertainty.fit_region_calibration``; a version-1 file's single scale still reads), written by
:func:`save_region_calibration` and read back, when present, by :func:`load_region_calibration`.
:func:`model_fingerprint` names a model's weights (what a wearer calibration records).

This module imports neither torch nor transformers at import time (the ``gazeflow`` command checks a ``--model``
folder before it loads them).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ..data.atomic_files import atomic_write
from ..data.interface_files import read_json_object
from .model_cards import write_model_card

if TYPE_CHECKING:
    from ..data.processing import GazeFlowVideoProcessor
    from ..gaze.regions import RegionCalibration
    from ..models.gazeflow.configuration_gazeflow import GazeFlowConfig
    from ..models.gazeflow.modeling_gazeflow import GazeFlowModel

WEIGHTS_NAMES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")


class ModelFolderError(ValueError):
    """A model location that is not a loadable GazeFlow model; the message names the folder or file and what is
    wrong (missing, not GazeFlow, a bad config field, missing/truncated/unsafe/non-finite weights)."""


DEFAULT_MODEL_FOLDERS = {False: "default_model", True: "default_model_causal"}
"""The bundled models' package-data folders: the windowed (bidirectional) model and the causal one (paper Appendix
F.4) that ``gazeflow stream`` and ``GazeFlowStreamer`` run online."""


def default_model_path(causal: bool = False) -> Path:
    """The folder of the bundled default model (package data ``transformers_gazeflow/default_model/``), or with
    ``causal=True`` of the bundled causal model (``default_model_causal/``)."""
    return Path(__file__).resolve().parents[1] / DEFAULT_MODEL_FOLDERS[bool(causal)]


def has_weights(folder: str | os.PathLike) -> bool:
    """True when ``folder`` holds model weights (safetensors, sharded safetensors or a torch ``.bin``)."""
    return weights_file(folder) is not None


def weights_file(folder: str | os.PathLike) -> Path | None:
    """The weights file of a model folder (the first of :data:`WEIGHTS_NAMES` present), or None."""
    for name in WEIGHTS_NAMES:
        if (Path(folder) / name).is_file():
            return Path(folder) / name
    return None


def default_model_available(causal: bool = False) -> bool:
    """True when the bundled default model (``causal=True``: the causal one) has its config and weights."""
    folder = default_model_path(causal)
    return (folder / "config.json").is_file() and has_weights(folder)


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__


def read_config_json(folder: str | os.PathLike) -> dict:
    """``config.json`` of a folder as a dict; :class:`ModelFolderError` naming it if it is missing or not JSON."""
    config_path = Path(folder) / "config.json"
    if not config_path.is_file():
        raise ModelFolderError(f"{folder} is not a GazeFlow model folder: it has no config.json")
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ModelFolderError(f"{config_path}: not valid JSON ({err})") from err
    if not isinstance(config, dict):
        raise ModelFolderError(f"{config_path}: expected a JSON object, got {type(config).__name__}")
    return config


def check_model_folder(folder: str | os.PathLike) -> Path:
    """Check that a local folder is a GazeFlow model folder (config.json with ``model_type: "gazeflow"`` and a
    complete weights file, :func:`check_weights_file`), without importing torch or transformers; raise
    :class:`ModelFolderError` naming the folder or the file if not."""
    path = Path(folder)
    if not path.exists():
        raise ModelFolderError(f"model folder not found: {path}")
    if not path.is_dir():
        raise ModelFolderError(f"expected a model folder (written by save_model_folder), got the file {path}")
    model_type = read_config_json(path).get("model_type")
    if model_type != "gazeflow":
        raise ModelFolderError(
            f"{path} is not a GazeFlow model folder: config.json has model_type {model_type!r}, expected 'gazeflow'"
        )
    weights = weights_file(path)
    if weights is None:
        raise ModelFolderError(f"{path} has a GazeFlow config.json but no weights ({' or '.join(WEIGHTS_NAMES)})")
    check_weights_file(weights)
    return path


def resolve_model(model: str | os.PathLike | None) -> str:
    """The model location to load: ``None`` -> the bundled default; a local folder is checked
    (:func:`check_model_folder`); anything else is passed on as a Hub id."""
    if model is None:
        if not default_model_available():
            raise ModelFolderError(
                f"the bundled default model has no weights yet ({default_model_path()} holds no model.safetensors); "
                "pass a model folder or Hub id (e.g. --model path/to/model)"
            )
        return str(default_model_path())
    text = str(model)
    hub_id = not isinstance(model, Path) and re.fullmatch(r"[A-Za-z0-9_][\w.-]*(/[\w.-]+)?", text) is not None
    if Path(text).expanduser().exists() or not hub_id:
        return str(check_model_folder(Path(text).expanduser()))
    check_hub_id_reachable(text)
    return text


HUB_PROBE_TIMEOUT_S = 3.0
"""How long a Hub id's first look-up waits for the Hub's host to answer before the id is refused."""


def check_hub_id_reachable(repo_id: str) -> None:
    """A name that is no folder here is a Hub id only if it can be looked up: in the Hugging Face cache, or on the
    Hub, whose host must accept a connection within :data:`HUB_PROBE_TIMEOUT_S` (offline, transformers would retry
    the download for half a minute before failing). ``ModelFolderError`` otherwise, at once, naming both readings."""
    import socket
    from urllib.parse import urlparse

    from huggingface_hub import constants, try_to_load_from_cache

    if isinstance(try_to_load_from_cache(repo_id, "config.json"), str):
        return
    folder = f"{repo_id!r} is no folder here (from {Path.cwd()})"
    if constants.HF_HUB_OFFLINE:
        raise ModelFolderError(
            f"{folder}, and as a Hub id it is not in the Hugging Face cache (HF_HUB_OFFLINE is set); give a model "
            "folder, or download the Hub model once online"
        )
    endpoint = urlparse(constants.ENDPOINT)
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        socket.create_connection((endpoint.hostname, port), timeout=HUB_PROBE_TIMEOUT_S).close()
    except OSError as err:
        raise ModelFolderError(
            f"{folder}, and as a Hub id it cannot be looked up: {endpoint.hostname} is not reachable ({err}); give a "
            "model folder, or check the network"
        ) from None


def load_config(location: str) -> GazeFlowConfig:
    """The :class:`GazeFlowConfig` of a model location, with errors that name ``config.json`` and the field (the
    config checks its own fields' types and values: ``hidden_size: "64"`` is refused)."""
    from huggingface_hub.errors import StrictDataclassError

    from ..models.gazeflow.configuration_gazeflow import GazeFlowConfig, GazeFlowConfigError

    path = Path(location)
    where = str(path / "config.json") if path.is_dir() else f"{location} (config.json)"
    try:
        return GazeFlowConfig.from_pretrained(location)
    except GazeFlowConfigError as err:
        raise ModelFolderError(f"{where}: {err.field} {err.problem}") from err
    except OSError as err:
        raise ModelFolderError(f"cannot load the GazeFlow model {location!r}: {_first_line(err)}") from err
    except Exception as err:  # transformers' own checks (a strict check's first line names it, its cause says why)
        reason = err.__cause__ if isinstance(err, StrictDataclassError) and err.__cause__ else err
        raise ModelFolderError(f"{where}: {_first_line(reason)}") from err


def check_weights_file(weights: str | os.PathLike) -> Path:
    """A weights file must not be empty, and a ``.safetensors`` file must hold what its header announces (an 8-byte
    header length, a JSON header, then the tensor data up to the largest offset): truncated or damaged files are
    refused here, naming the file, without reading the tensors (nor importing torch)."""
    weights = Path(weights)
    size = weights.stat().st_size
    if size == 0:
        raise ModelFolderError(f"{weights}: the file is empty (0 bytes)")
    if weights.suffix != ".safetensors":
        return weights
    with weights.open("rb") as handle:
        prefix = handle.read(8)
        header_length = int.from_bytes(prefix, "little") if len(prefix) == 8 else -1
        if header_length < 2 or 8 + header_length > size:
            raise ModelFolderError(
                f"{weights}: not a complete safetensors file (truncated or damaged: its header "
                f"does not fit in the file's {size:,} bytes)"
            )
        try:
            header = json.loads(handle.read(header_length))
            end = max(
                (int(entry["data_offsets"][1]) for key, entry in header.items() if key != "__metadata__"), default=0
            )
        except (ValueError, TypeError, KeyError, IndexError, AttributeError) as err:
            raise ModelFolderError(f"{weights}: not a safetensors file (its header is not valid: {err})") from err
    if 8 + header_length + end != size:
        raise ModelFolderError(
            f"{weights}: not a complete safetensors file (truncated or damaged: its header "
            f"announces {8 + header_length + end:,} bytes, the file has {size:,})"
        )
    return weights


def check_finite_weights(model: GazeFlowModel, where: str) -> None:
    """Refuse a model whose parameters or buffers hold NaN or inf (it would write NaN gaze)."""
    import torch

    bad = [
        name
        for name, tensor in [*model.named_parameters(), *model.named_buffers()]
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all())
    ]
    if bad:
        listed = ", ".join(bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")
        raise ModelFolderError(
            f"{where}: {len(bad)} weight tensor(s) hold NaN or inf values ({listed}); "
            "the model cannot predict with them"
        )


def weights_location(location: str) -> str:
    """The weights file of a local model folder, or the location itself (a Hub id): what error messages name."""
    weights = weights_file(location) if Path(location).is_dir() else None
    return str(weights) if weights is not None else location


@contextlib.contextmanager
def weights_errors(location: str) -> Iterator[None]:
    """Turn the errors of reading a model's weights (transformers, safetensors, torch.load) into a one-line
    :class:`ModelFolderError` naming the file; a pickle that is more than plain weights is refused."""
    where = weights_location(location)
    try:
        yield
    except ModelFolderError:
        raise
    except OSError as err:
        raise ModelFolderError(f"cannot load the GazeFlow model {location!r}: {_first_line(err)}") from err
    except Exception as err:
        if type(err).__name__ == "UnpicklingError":
            raise ModelFolderError(
                f"{where}: refused: this pickle holds more than plain weights and loading it "
                "could run code (save the model as model.safetensors)"
            ) from err
        raise ModelFolderError(f"{where}: cannot load the weights ({type(err).__name__}: {_first_line(err)})") from err


def check_pickle_weights(location: str) -> None:
    """A ``pytorch_model.bin`` must hold plain tensors: load it as torch does with ``weights_only=True`` (the unsafe
    pickle is refused, naming the file, and never runs)."""
    weights = weights_file(location) if Path(location).is_dir() else None
    if weights is None or weights.suffix != ".bin":
        return
    import zipfile

    import torch

    with weights_errors(location):
        torch.load(str(weights), map_location="cpu", weights_only=True, mmap=zipfile.is_zipfile(weights))


def check_pipeline_model(model: str | os.PathLike) -> str:
    """Everything :func:`load_model` checks before reading the weights, for a model that transformers will load
    (``pipeline("egocentric-gaze", model=...)``): the folder, its config's fields, its weights file. Returns the
    location."""
    location = resolve_model(model)
    if Path(location).is_dir():
        load_config(location)
        check_pickle_weights(location)
    return location


def load_model(model: str | os.PathLike | None = None, device: str | None = None) -> GazeFlowModel:
    """Load a GazeFlow model (``None``: the bundled default) for inference, with errors that name the model folder
    or the file that is wrong (:class:`ModelFolderError`)."""
    from ..models.gazeflow.modeling_gazeflow import GazeFlowModel

    location = resolve_model(model)  # checks a local folder and its weights file
    config = load_config(location)
    with weights_errors(location):
        loaded = GazeFlowModel.from_pretrained(location, config=config)
    check_finite_weights(loaded, weights_location(location))
    if device is not None:
        loaded = loaded.to(device)
    return loaded.eval()


def load_video_processor(name_or_path: str | os.PathLike | None, config: GazeFlowConfig) -> GazeFlowVideoProcessor:
    """The processor saved with a model (``preprocessor_config.json`` in its folder or Hub repository), or the
    default ``GazeFlowVideoProcessor(size=config.image_size)`` when there is none. Its size must match the encoder."""
    from ..data.processing import PREPROCESSOR_CONFIG_NAME, GazeFlowVideoProcessor

    processor = None
    if name_or_path:
        path = Path(name_or_path)
        if path.is_dir():
            if (path / PREPROCESSOR_CONFIG_NAME).is_file():
                processor = GazeFlowVideoProcessor.from_pretrained(path)
        else:
            from transformers.utils import cached_file

            try:
                resolved = cached_file(
                    str(name_or_path),
                    PREPROCESSOR_CONFIG_NAME,
                    _raise_exceptions_for_missing_entries=False,
                    _raise_exceptions_for_connection_errors=False,
                )
            except OSError:
                resolved = None
            if resolved:
                processor = GazeFlowVideoProcessor.from_pretrained(resolved)
    if processor is None:
        return GazeFlowVideoProcessor(size=config.image_size)
    if processor.size != config.image_size:
        raise ModelFolderError(
            f"{name_or_path}: {PREPROCESSOR_CONFIG_NAME} resizes frames to {processor.size} px but "
            f"the encoder reads {config.image_size} px frames"
        )
    return processor


def save_model_folder(
    model: GazeFlowModel,
    folder: str | os.PathLike,
    processor: GazeFlowVideoProcessor | None = None,
    title: str = "GazeFlow",
    description: str = "A GazeFlow model.",
    training: str = "Not documented.",
    limitations: str = "Not documented.",
    repo: str | None = None,
    card: str | os.PathLike | None = None,
    remote_code: bool = False,
    region_calibration: RegionCalibration | None = None,
    model_argument: str | None = None,
) -> Path:
    """Write a complete GazeFlow model folder; the one writer of model folders in the project.

    ``config.json`` and ``model.safetensors`` (``model.save_pretrained``), ``preprocessor_config.json`` (``processor``,
    default ``GazeFlowVideoProcessor(size=config.image_size)``) and a ``README.md`` model card with Hub metadata
    (``card``: an existing card to copy, e.g. the one of the folder the model was loaded from; otherwise one written
    from ``title``, ``description``, ``training`` and ``limitations``). ``remote_code=True`` adds the model's and the
    pipeline's code for ``trust_remote_code=True`` loading
    (:func:`transformers_gazeflow.hub.remote_code.add_remote_code`). ``region_calibration`` (e.g. the
    source folder's, :func:`load_region_calibration`) is written as ``region_calibration.json``.
    ``repo`` / ``model_argument``: what the card's usage snippet loads (:func:`~.model_cards.write_model_card`). The
    folder is ready for ``huggingface_hub.upload_folder(repo_id=..., folder_path=folder)``. Returns it.
    """
    import shutil

    from ..data.processing import GazeFlowVideoProcessor

    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ModelFolderError(f"cannot write a model folder at {folder}: it is a file")
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    processor = processor if processor is not None else GazeFlowVideoProcessor(size=model.config.image_size)
    processor.save_pretrained(folder)
    destination = folder / "README.md"
    if card is not None and Path(card).is_file():
        if Path(card).resolve() != destination.resolve():
            shutil.copyfile(card, destination)
    else:
        write_model_card(
            folder,
            model,
            title=title,
            description=description,
            training=training,
            limitations=limitations,
            repo=repo,
            model_argument=model_argument,
        )
    if remote_code:
        from .remote_code import add_remote_code

        add_remote_code(folder)
    if region_calibration is not None:
        save_region_calibration(folder, region_calibration)
    return folder


REGION_CALIBRATION_NAME = "region_calibration.json"
"""The model folder's file holding the factors of its calibrated uncertainty regions."""


def save_region_calibration(folder: str | os.PathLike, calibration: RegionCalibration) -> Path:
    """Write ``region_calibration.json`` into a model folder: ``calibration.to_record()`` (the factors with their
    levels, then how they were fitted), checked by the file's one schema before it is written. Returns its path."""
    from ..gaze.regions import RegionCalibration

    folder = Path(folder)
    record = calibration.to_record()
    try:  # what the readers would refuse is never written
        RegionCalibration.from_record(record, f"{folder / REGION_CALIBRATION_NAME} (not written)")
    except ValueError as err:
        raise ModelFolderError(str(err)) from None
    if not folder.is_dir():
        raise ModelFolderError(f"cannot write {REGION_CALIBRATION_NAME}: {folder} is not a model folder")
    text = json.dumps(record, indent=2) + "\n"
    return atomic_write(folder / REGION_CALIBRATION_NAME, text)


def load_region_calibration(location: str | os.PathLike | None) -> RegionCalibration | None:
    """The ``region_calibration.json`` of a model location (a folder, or a Hub id from its cache/download) as a
    ``gaze.regions.RegionCalibration``, or None when it has none; a file that is there but wrong is a
    :class:`ModelFolderError` naming it and the field."""
    from ..gaze.regions import RegionCalibration

    if location is None:
        return None
    path = Path(location) / REGION_CALIBRATION_NAME
    if not Path(location).is_dir():
        from transformers.utils import cached_file

        try:
            found = cached_file(
                str(location),
                REGION_CALIBRATION_NAME,
                _raise_exceptions_for_missing_entries=False,
                _raise_exceptions_for_connection_errors=False,
            )
        except OSError:
            found = None
        if not found:
            return None
        path = Path(found)
    elif not path.is_file():
        return None
    try:  # the one schema of region_calibration.json (gaze.regions.RegionCalibration.from_record checks it)
        return RegionCalibration.from_record(read_json_object(path, "a region calibration"), str(path))
    except ValueError as err:  # an InterfaceFileError is one
        raise ModelFolderError(str(err)) from None


def model_fingerprint(model: GazeFlowModel) -> str:
    """A short fingerprint of a model's weights as loaded: sha256 over every parameter and buffer's name, shape,
    dtype and 64 of its values spread evenly over it (float32), first 16 hex digits. Two trainings of one
    architecture differ in it; the same weights loaded twice agree. Cheap at any model size."""
    import hashlib

    import torch

    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        flat = tensor.detach().reshape(-1)
        picks = torch.linspace(0, max(flat.numel() - 1, 0), min(64, flat.numel())).long().to(flat.device)
        digest.update(f"{name}:{tuple(tensor.shape)}:{tensor.dtype}".encode())
        digest.update(flat[picks].to("cpu", torch.float32).numpy().tobytes())
    return digest.hexdigest()[:16]


MAX_DEFAULT_MODEL_MB = 20.0
"""Size limit of the bundled default model's ``model.safetensors`` (it ships inside the package)."""


def bundle_default_model(
    source: str | os.PathLike,
    training: str,
    description: str,
    limitations: str,
    destination: str | os.PathLike | None = None,
) -> Path:
    """Install a trained model folder as a bundled model: ``default_model/``, or for a causal model
    (``config.causal``) ``default_model_causal/``, or ``destination``.

    Loads ``source`` (a folder written by ``examples/train.py`` / :func:`save_model_folder`), merges LoRA into the
    encoder, writes the folder with :func:`save_model_folder` (a card with ``training``: exactly how it was trained;
    ``description``: what it is; ``limitations``), and checks the weights stay within :data:`MAX_DEFAULT_MODEL_MB`.
    Returns the destination folder.
    """
    from ..models.gazeflow.modeling_gazeflow import GazeFlowModel

    source_path = check_model_folder(source)
    model = GazeFlowModel.from_pretrained(source_path)
    if model.video_encoder.has_lora:
        model.merge_lora()
    processor = load_video_processor(source_path, model.config)
    causal = bool(model.config.causal)
    destination = Path(destination) if destination is not None else default_model_path(causal)
    title = f"GazeFlow {'causal ' if causal else ''}default model (small, synthetic data)"
    save_model_folder(
        model,
        destination,
        processor=processor,
        title=title,
        description=description,
        training=training,
        limitations=limitations,
        region_calibration=load_region_calibration(source_path),
        model_argument=f"str(transformers_gazeflow.default_model_path({'causal=True' if causal else ''}))",
    )
    weights = destination / "model.safetensors"
    size_mb = weights.stat().st_size / 2**20
    if size_mb > MAX_DEFAULT_MODEL_MB:
        weights.unlink()
        raise ModelFolderError(
            f"{source_path}: model.safetensors is {size_mb:.1f} MB, over the "
            f"{MAX_DEFAULT_MODEL_MB:.0f} MB limit of the bundled model"
        )
    return destination


__all__ = [
    "MAX_DEFAULT_MODEL_MB",
    "REGION_CALIBRATION_NAME",
    "save_region_calibration",
    "load_region_calibration",
    "model_fingerprint",
    "WEIGHTS_NAMES",
    "bundle_default_model",
    "ModelFolderError",
    "default_model_path",
    "default_model_available",
    "has_weights",
    "weights_file",
    "check_model_folder",
    "check_finite_weights",
    "check_weights_file",
    "check_pickle_weights",
    "check_pipeline_model",
    "weights_errors",
    "weights_location",
    "resolve_model",
    "check_hub_id_reachable",
    "load_config",
    "load_video_processor",
    "load_model",
    "save_model_folder",
]
