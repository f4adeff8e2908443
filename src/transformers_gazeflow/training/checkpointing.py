"""Checkpoints that a resume can trust: complete or absent, checksummed, never executed, of the current run.

A checkpoint ``step_<N>/`` holds the whole training state as safetensors files (:mod:`.state_io`; no pickle):

| file | what |
| --- | --- |
| ``model.safetensors`` | the trained model's parameters and buffers |
| ``ema.safetensors`` | the EMA model (``AveragedModel``: ``module.*`` and ``n_averaged``) |
| ``best_ema.safetensors`` | the EMA weights of the best validation loss so far (when there is one; ``best_step``) |
| ``optimizer.safetensors``, ``scheduler.safetensors`` | their ``state_dict()`` (``scaler.safetensors`` under fp16) |
| ``rng_state_<rank>.safetensors`` | each process's Python, NumPy, torch CPU and device generators, and the flip |
| | augmentation's generator as of the last batch the loop consumed (``flip_generator``, when the run has one) |
| ``trainer_state.json`` | where the loop stands (:class:`~.trainer_state.TrainerState`) |
| ``manifest.json`` | size and sha256 of every other file, written last |

It is written in ``.tmp_step_<N>/`` and renamed into place when the manifest is on disk, so a crash leaves either
no ``step_<N>`` or a complete one. Resume verifies the manifest (every file present, same size, same sha256),
the JSON, and that no weight is NaN or inf.

The *run lineage*: ``<output_dir>/checkpoints.json`` lists, oldest first, the checkpoints the current run
descends from and has written (rewritten atomically after each save, and when a run starts or resumes).
``--resume_from_checkpoint latest`` takes the newest entry that verifies, warning for each newer one that does
not (naming the bad file); ``step_<N>`` folders left by an abandoned run (a restart from scratch, or an explicit
resume from an older checkpoint) are not in the list and are never taken. They are overwritten when the current
run reaches their step.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from pathlib import Path
from typing import Any

from ..data.atomic_files import atomic_write, fsync_directory, fsync_file, sha256_file
from .faults import fault_point
from .state_io import (
    StateFileError,
    capture_rng_state,
    first_non_finite_parameter,
    first_non_finite_tensor,
    read_module_file,
    read_rng_file,
    read_state_file,
    restore_tuples,
    write_module_file,
    write_state_file,
)
from .trainer_state import TRAINER_STATE, CheckpointError, TrainerState, read_json

logger = logging.getLogger(__name__)

CHECKPOINT_FORMAT = "gazeflow-checkpoint/1"
INDEX_FORMAT = "gazeflow-checkpoint-index/1"
MANIFEST = "manifest.json"
INDEX = "checkpoints.json"
MODEL_FILE, EMA_FILE, BEST_EMA_FILE = "model.safetensors", "ema.safetensors", "best_ema.safetensors"
OPTIMIZER_FILE, SCHEDULER_FILE, SCALER_FILE = "optimizer.safetensors", "scheduler.safetensors", "scaler.safetensors"
_WEIGHT_FILES = (MODEL_FILE, EMA_FILE, OPTIMIZER_FILE)  # checked for NaN/inf on resume
_STEP_DIR = re.compile(r"^step_(\d+)$")
FLIP_GENERATOR_KEY = "flip_generator"  # in rng_state_<rank>.safetensors, beside capture_rng_state()'s generators


def _check_supported(accelerator) -> None:
    kind = getattr(getattr(accelerator, "distributed_type", None), "value", "")
    if kind in ("FSDP", "DEEPSPEED", "MEGATRON_LM"):
        raise CheckpointError(
            f"checkpoints: {kind} shards the model and optimizer state, which this checkpoint format "
            f"does not handle; train on one device or with data parallel (DDP)"
        )


def rng_file(process_index: int) -> str:
    return f"rng_state_{process_index}.safetensors"


# ---------------------------------------------------------------------------------------------------- manifest
def write_manifest(folder: Path, step: int) -> None:
    """``manifest.json``: size and sha256 of every file of the checkpoint, written last."""
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.name != MANIFEST)
    manifest = {
        "format": CHECKPOINT_FORMAT,
        "step": step,
        "files": {p.name: {"bytes": p.stat().st_size, "sha256": sha256_file(p)} for p in files},
    }
    path = folder / MANIFEST
    path.write_text(json.dumps(manifest, indent=2))
    fsync_file(path)


def verify_checkpoint(folder: str | os.PathLike) -> str:
    """Check a checkpoint before anything of it is loaded; returns the manifest's sha256 (its identity).

    Every file the manifest lists must exist with its size and sha256 (truncation, a garbled file, or weights
    overwritten in place with plausible values all show), the required files must be listed, ``trainer_state.json``
    must be a trainer state, and no weight may be NaN or inf. ``CheckpointError`` names the first bad file.
    Files the manifest does not list (say a ``*.pkl`` dropped in) are never read; a warning names them.
    """
    folder = Path(folder)
    try:
        return _verify(folder)
    except OSError as err:  # a permission, a vanished file, an I/O error: a checkpoint that cannot be trusted
        raise CheckpointError(f"{err.filename or folder}: unreadable ({err.strerror or err})") from err


def _verify(folder: Path) -> str:
    manifest_path = folder / MANIFEST
    if not manifest_path.is_file():
        raise CheckpointError(
            f"{folder}: not a complete checkpoint (no {MANIFEST}: an interrupted save, or a "
            f"checkpoint of an older examples/train.py, which is never trusted)"
        )
    manifest = read_json(manifest_path)
    listed = manifest.get("files") if isinstance(manifest, dict) else None
    if (
        not isinstance(manifest, dict)
        or manifest.get("format") != CHECKPOINT_FORMAT
        or not isinstance(listed, dict)
        or not all(
            isinstance(v, dict) and isinstance(v.get("bytes"), int) and isinstance(v.get("sha256"), str)
            for v in listed.values()
        )
    ):
        raise CheckpointError(f"{manifest_path}: not a {CHECKPOINT_FORMAT} manifest")
    required = {MODEL_FILE, EMA_FILE, OPTIMIZER_FILE, SCHEDULER_FILE, TRAINER_STATE, rng_file(0)}
    if required - set(listed):
        raise CheckpointError(f"{manifest_path}: does not list {sorted(required - set(listed))}")
    for name, expected in listed.items():
        path = folder / name
        if "/" in name or "\\" in name or name.startswith("."):
            raise CheckpointError(f"{manifest_path}: lists {name!r}, not a file of the checkpoint folder")
        if not path.is_file():
            raise CheckpointError(f"{path}: missing (listed in {MANIFEST})")
        size = path.stat().st_size
        if size != expected["bytes"]:
            raise CheckpointError(
                f"{path}: {size} bytes where {MANIFEST} says {expected['bytes']} (truncated or overwritten)"
            )
        if sha256_file(path) != expected["sha256"]:
            raise CheckpointError(
                f"{path}: sha256 differs from {MANIFEST} (the file changed after the checkpoint was written)"
            )
    unlisted = sorted(p.name for p in folder.iterdir() if p.name != MANIFEST and p.name not in listed)
    if unlisted:
        logger.warning(
            "%s: ignoring %s, not part of the checkpoint (not in %s; never read)", folder, ", ".join(unlisted), MANIFEST
        )
    TrainerState.load(folder)
    for name in _WEIGHT_FILES:
        try:
            bad = first_non_finite_tensor(folder / name)
        except Exception as err:  # noqa: BLE001  (safetensors' own error type varies across versions)
            raise CheckpointError(f"{folder / name}: unreadable safetensors ({type(err).__name__}: {err})") from err
        if bad is not None:
            raise CheckpointError(
                f"{folder / name}: tensor {bad!r} holds NaN or inf (the run had diverged before "
                f"this checkpoint was written)"
            )
    return sha256_file(manifest_path)


# ---------------------------------------------------------------------------------------------------- lineage
def _entry_path(entry: dict, output_dir: Path) -> Path:
    path = Path(entry["path"])
    return path if path.is_absolute() else output_dir / path


def read_index(output_dir: Path) -> list[dict] | None:
    """The current run's checkpoints, oldest first (``None`` when ``checkpoints.json`` does not exist)."""
    path = output_dir / INDEX
    if not path.exists():
        return None
    data = read_json(path)
    entries = data.get("lineage") if isinstance(data, dict) else None
    if (
        not isinstance(data, dict)
        or data.get("format") != INDEX_FORMAT
        or not isinstance(entries, list)
        or not all(
            isinstance(e, dict)
            and isinstance(e.get("step"), int)
            and isinstance(e.get("path"), str)
            and isinstance(e.get("manifest_sha256"), str)
            for e in entries
        )
    ):
        raise CheckpointError(
            f"{path}: not a {INDEX_FORMAT} checkpoint index (expected {{'format', 'lineage': "
            f"[{{'step', 'path', 'manifest_sha256'}}, ...]}})"
        )
    return entries


def write_index(output_dir: Path, entries: list[dict]) -> None:
    """Rewrite ``checkpoints.json`` atomically and durably: a crash leaves the old record or the new one."""
    index = {
        "format": INDEX_FORMAT,
        "note": "the checkpoints of the current run, oldest first; --resume_from_checkpoint latest takes the newest "
        "one that verifies. step_<N> folders not listed belong to an abandoned run.",
        "lineage": entries,
    }
    atomic_write(output_dir / INDEX, json.dumps(index, indent=2, allow_nan=False), durable=True)


def _index_entry(folder: Path, output_dir: Path, manifest_sha256: str) -> dict:
    folder = Path(os.path.abspath(folder))
    inside = folder.parent == Path(os.path.abspath(output_dir))
    step = TrainerState.load(folder).completed_steps
    return {"step": step, "path": folder.name if inside else str(folder), "manifest_sha256": manifest_sha256}


def _step_folders(output_dir: Path) -> list[Path]:
    folders = [p for p in output_dir.glob("step_*") if _STEP_DIR.match(p.name) and p.is_dir()]
    return sorted(folders, key=lambda p: int(_STEP_DIR.match(p.name).group(1)))


def find_checkpoint(argument: str | os.PathLike, output_dir: str | os.PathLike) -> Path:
    """Resolve ``--resume_from_checkpoint`` to a verified checkpoint folder.

    A folder must verify (:func:`verify_checkpoint`), else ``CheckpointError`` naming the bad file. ``latest``
    takes the newest checkpoint of the current run lineage (``checkpoints.json``) that verifies; each newer one that
    does not is skipped with a warning naming its bad file. ``FileNotFoundError``/``CheckpointError`` naming the
    argument when there is none.
    """
    output_dir = Path(output_dir)
    if str(argument) != "latest":
        folder = Path(argument)
        if not folder.is_dir():
            raise FileNotFoundError(
                f"--resume_from_checkpoint: {folder} does not exist (expected a step_<N> folder "
                f"written by examples/train.py, or 'latest')"
            )
        verify_checkpoint(folder)
        return folder
    entries = read_index(output_dir)
    leftovers = [p.name for p in _step_folders(output_dir)]
    if entries is None:
        if leftovers:
            raise CheckpointError(
                f"--resume_from_checkpoint latest: {output_dir / INDEX} is missing, so which of "
                f"{', '.join(leftovers)} belong to the current run is unknown (written by an older "
                f"examples/train.py?); name one with --resume_from_checkpoint <folder>"
            )
        raise FileNotFoundError(f"--resume_from_checkpoint latest: no checkpoint under --output_dir {output_dir}")
    listed = {Path(os.path.abspath(_entry_path(e, output_dir))) for e in entries}
    abandoned = [name for name in leftovers if Path(os.path.abspath(output_dir / name)) not in listed]
    if abandoned:
        logger.info(
            "--resume_from_checkpoint latest: ignoring %s (not in %s: left by an abandoned run, or saved "
            "by one that died before recording it)",
            ", ".join(abandoned),
            output_dir / INDEX,
        )
    hint = f"; {', '.join(abandoned)} belong to an abandoned run and can be named explicitly" if abandoned else ""
    if not entries:
        raise FileNotFoundError(
            f"--resume_from_checkpoint latest: the current run under --output_dir {output_dir} "
            f"has no checkpoint yet{hint}"
        )
    for position, entry in enumerate(reversed(entries)):
        folder = _entry_path(entry, output_dir)
        try:
            if verify_checkpoint(folder) != entry["manifest_sha256"]:
                raise CheckpointError(
                    f"{folder / MANIFEST}: not the checkpoint this run wrote ({INDEX} recorded "
                    f"another manifest; the folder was replaced)"
                )
        except CheckpointError as err:
            older = len(entries) - position - 1
            logger.warning(
                "--resume_from_checkpoint latest: skipping %s: %s; %s",
                folder,
                err,
                "trying the previous checkpoint of this run" if older else "no older one in this run",
            )
            continue
        return folder
    raise CheckpointError(
        f"--resume_from_checkpoint latest: none of the {len(entries)} checkpoint(s) of the current "
        f"run under {output_dir} verifies (see the warnings above){hint}"
    )


def select_checkpoint(argument: str, output_dir: str | os.PathLike, accelerator) -> Path:
    """:func:`find_checkpoint` on the main process (one verification, one set of warnings), the answer (or the
    error) shared with every process."""
    outcome: list[Any] = [None]
    if accelerator.is_main_process:
        try:
            outcome = [("ok", str(find_checkpoint(argument, output_dir)))]
        except FileNotFoundError as err:
            outcome = [("missing", str(err))]
        except CheckpointError as err:
            outcome = [("bad", str(err))]
        except OSError as err:  # not left unanswered: the other processes wait for this one
            outcome = [("bad", f"--resume_from_checkpoint {argument}: {err}")]
    if accelerator.num_processes > 1:
        from accelerate.utils import broadcast_object_list

        broadcast_object_list(outcome)
    kind, text = outcome[0]
    if kind == "missing":
        raise FileNotFoundError(text)
    if kind == "bad":
        raise CheckpointError(text)
    return Path(text)


def begin_lineage(output_dir: str | os.PathLike, resumed_from: Path | None, accelerator) -> None:
    """Record the lineage the run starting now continues: the resumed checkpoint and those it descends from in
    ``checkpoints.json`` (or nothing for a fresh start). Later entries, and ``step_<N>`` folders of other runs, are
    dropped from it with a log line. Called once training is about to start, so a run that fails while setting up
    leaves the previous record alone."""
    if accelerator.is_main_process:
        output_dir = Path(output_dir)
        try:
            previous = read_index(output_dir) or []
        except CheckpointError as err:
            logger.warning("%s; starting a new one", err)
            previous = []
        lineage: list[dict] = []
        if resumed_from is not None:
            resumed = Path(os.path.abspath(resumed_from))
            position = next(
                (i for i, e in enumerate(previous) if Path(os.path.abspath(_entry_path(e, output_dir))) == resumed),
                None,
            )
            if position is not None:
                lineage = previous[: position + 1]
            else:
                manifest_sha256 = sha256_file(resumed / MANIFEST)
                lineage = [_index_entry(resumed, output_dir, manifest_sha256)]
        kept = {Path(os.path.abspath(_entry_path(e, output_dir))) for e in lineage}
        dropped = [p.name for p in _step_folders(output_dir) if Path(os.path.abspath(p)) not in kept]
        if dropped:
            logger.info(
                "%s %s: %s not part of this run (overwritten when it reaches their step)",
                "resuming from" if resumed_from else "starting a new run in",
                resumed_from or output_dir,
                ", ".join(dropped),
            )
        write_index(output_dir, lineage)
    accelerator.wait_for_everyone()


# ---------------------------------------------------------------------------------------------------- save / load
def save_checkpoint(
    accelerator,
    output_dir: str | os.PathLike,
    state: TrainerState,
    *,
    model,
    optimizer,
    scheduler,
    ema,
    best_ema_state: dict | None = None,
    flip_generator_state=None,
) -> Path:
    """Write ``output_dir/step_<N>`` (N = ``state.completed_steps``) atomically and append it to the lineage.
    ``best_ema_state``: the best-validation EMA weights (a ``state_dict``), written as ``best_ema.safetensors``.
    ``flip_generator_state``: this process's flip-augmentation generator state after the last batch the loop
    consumed (the collator's ``flip_generator_state``), kept with the process's random state.

    Every process calls it. Refuses (``CheckpointError``) to write weights holding NaN or inf: a checkpoint is
    only ever a good one.
    """
    _check_supported(accelerator)
    output_dir = Path(output_dir)
    name = f"step_{state.completed_steps}"
    final, partial = output_dir / name, output_dir / f".tmp_{name}"
    unwrapped = accelerator.unwrap_model(model)
    bad = first_non_finite_parameter(unwrapped)
    if bad is not None:
        raise CheckpointError(
            f"{final}: not written: the model's {bad!r} holds NaN or inf after step {state.completed_steps}"
        )
    state.accelerator_step, state.num_processes = accelerator.step, accelerator.num_processes
    if accelerator.is_main_process:
        if partial.exists():
            shutil.rmtree(partial)
        partial.mkdir(parents=True)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        pieces = [
            (MODEL_FILE, lambda path: write_module_file(path, unwrapped)),
            (EMA_FILE, lambda path: write_module_file(path, ema)),
            (OPTIMIZER_FILE, lambda path: write_state_file(path, optimizer.state_dict())),
            (SCHEDULER_FILE, lambda path: write_state_file(path, scheduler.state_dict())),
        ]
        if best_ema_state is not None:
            pieces.append((BEST_EMA_FILE, lambda path: write_state_file(path, best_ema_state)))
        if getattr(accelerator, "scaler", None) is not None:
            pieces.append((SCALER_FILE, lambda path: write_state_file(path, accelerator.scaler.state_dict())))
        for filename, write in pieces:
            write(partial / filename)
            fault_point(f"{name}/{filename}")
    random_state = capture_rng_state()
    if flip_generator_state is not None:
        random_state[FLIP_GENERATOR_KEY] = flip_generator_state.detach().to("cpu")
    write_state_file(partial / rng_file(accelerator.process_index), random_state)
    fault_point(f"{name}/{rng_file(accelerator.process_index)}")
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        state.save(partial)
        fault_point(f"{name}/{TRAINER_STATE}")
        write_manifest(partial, state.completed_steps)
        fault_point(f"{name}/{MANIFEST}")
        fsync_directory(partial)
        if final.exists():
            shutil.rmtree(final)
        os.replace(partial, final)
        fsync_directory(output_dir)
        fault_point(f"{name} renamed")
        manifest_sha256 = sha256_file(final / MANIFEST)
        lineage = [e for e in (read_index(output_dir) or []) if e["step"] < state.completed_steps]
        write_index(output_dir, lineage + [_index_entry(final, output_dir, manifest_sha256)])
    accelerator.wait_for_everyone()
    return final


def load_checkpoint(
    folder: str | os.PathLike, accelerator, *, model, optimizer, scheduler, ema, flip_generator=None
) -> TrainerState:
    """Restore a checkpoint verified by :func:`find_checkpoint` into the prepared objects, on every process:
    weights, EMA, optimizer, scheduler, gradient scaler, this process's random generators (and ``flip_generator``,
    the collator's, when given and the checkpoint holds its state), Accelerate's step.
    ``CheckpointError`` naming the file when something does not fit (another model config, another number of
    processes)."""
    _check_supported(accelerator)
    folder = Path(folder)
    state = TrainerState.load(folder)
    if state.num_processes != accelerator.num_processes:
        raise CheckpointError(
            f"{folder}: written by {state.num_processes} process(es), this run has "
            f"{accelerator.num_processes}: resume with {state.num_processes} (each process's "
            f"random state and data shard are part of an exact resume)"
        )
    try:
        read_module_file(folder / MODEL_FILE, accelerator.unwrap_model(model))
        read_module_file(folder / EMA_FILE, ema)
        for filename, target in ((OPTIMIZER_FILE, optimizer), (SCHEDULER_FILE, scheduler)):
            _load_state_dict(folder / filename, target)
        scaler = getattr(accelerator, "scaler", None)
        if scaler is not None:
            if not (folder / SCALER_FILE).is_file():
                raise CheckpointError(
                    f"{folder / SCALER_FILE}: missing (this run uses fp16 loss scaling, the checkpoint's run did not)"
                )
            _load_state_dict(folder / SCALER_FILE, scaler)
        random_state = read_rng_file(folder / rng_file(accelerator.process_index))
        if flip_generator is not None:
            if FLIP_GENERATOR_KEY in random_state:
                try:
                    flip_generator.set_state(random_state[FLIP_GENERATOR_KEY])
                except (TypeError, RuntimeError) as err:
                    raise CheckpointError(
                        f"{folder / rng_file(accelerator.process_index)}: not a usable "
                        f"{FLIP_GENERATOR_KEY} state ({err})"
                    ) from err
            else:
                logger.warning(
                    "%s: holds no flip-augmentation generator state (written without one): the flips "
                    "from here on differ from the interrupted run's",
                    folder,
                )
    except StateFileError as err:
        raise CheckpointError(str(err)) from err
    accelerator.step = state.accelerator_step
    return state


def load_best_ema_state(folder: str | os.PathLike, state: TrainerState) -> dict | None:
    """The best-validation EMA ``state_dict`` a checkpoint holds (None when ``state.best_step`` is None);
    ``CheckpointError`` naming the file when the state says there is one and it is missing or unreadable."""
    if state.best_step is None:
        return None
    path = Path(folder) / BEST_EMA_FILE
    if not path.is_file():
        raise CheckpointError(f"{path}: missing (trainer_state.json names best_step {state.best_step})")
    try:
        return read_state_file(path)
    except StateFileError as err:
        raise CheckpointError(str(err)) from err


def publish_folder(staging: Path, destination: Path, last: str = TRAINER_STATE) -> None:
    """Move every file of ``staging`` into ``destination`` by atomic renames, ``last`` last, then remove
    ``staging``: each file of ``destination`` is complete (old or new) at every moment, and ``last`` marks the end.
    For the final model, which shares ``--output_dir`` with the checkpoints and cannot be renamed as one folder."""
    names = sorted(p.name for p in staging.iterdir() if p.is_file())
    for name in sorted(names, key=lambda n: n == last):
        fsync_file(staging / name)
        os.replace(staging / name, destination / name)
        fault_point(f"final/{name}")
    fsync_directory(destination)
    shutil.rmtree(staging)


def _load_state_dict(path: Path, target) -> None:
    reference = target.state_dict()
    loaded = read_state_file(path)
    try:
        target.load_state_dict(restore_tuples(loaded, reference))
    except (KeyError, ValueError, TypeError, RuntimeError, IndexError) as err:
        raise CheckpointError(
            f"{path}: does not fit this run's {type(target).__name__} ({type(err).__name__}: "
            f"{err}): was it written with other training arguments?"
        ) from err


__all__ = [
    "save_checkpoint",
    "load_checkpoint",
    "load_best_ema_state",
    "find_checkpoint",
    "select_checkpoint",
    "begin_lineage",
    "verify_checkpoint",
    "read_index",
    "write_manifest",
    "publish_folder",
    "MANIFEST",
    "INDEX",
]
