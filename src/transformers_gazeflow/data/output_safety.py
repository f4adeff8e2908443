"""What a run may write, checked before anything is opened: nothing a user gave is ever harmed.

Every command and script that writes uses these rules (the commands' outputs, a wearer's calibration, the streamer
export, model folders):

* **An output is never an input** (:func:`check_outputs`): each output path is compared with every input and every
  other output of the run before anything is opened. Two paths name one file when their real paths are equal
  (symbolic links resolved, ``a/../b``, ``./b``) or when both exist and are one file (``os.path.samefile``: hard
  links, case-insensitive file systems). An output inside an input folder (the commands' model and export folders) is
  refused, and so is a folder replaced whole that holds an input (the example scripts name a model folder's files
  instead, :func:`files_of`: an evaluation may sit in its training run's folder, never on one of its files).
* **Names made from inputs stay in their folder** (:func:`safe_name`, :func:`confined`): a video's stem becomes one
  file name, never ``..``, ``.``, empty, absolute, with a path separator or a NUL.
* **Temporaries are new files** (:class:`StagedFiles`, over :func:`~transformers_gazeflow.data.atomic_files.
  create_temporary`): created exclusively beside their destination without following links, under an unpredictable
  name, and renamed into place; a link already at the destination is replaced, never written through.
* **A file the run did not write is not overwritten without ``--overwrite``** (:func:`refuse_foreign`): an existing
  output that the command does not recognise as its own (a symbolic link never is) is refused, naming it.
* **Folders are replaced whole** (:func:`replace_folder`): written into a temporary sibling, then swapped in (one
  ``renameat2(RENAME_EXCHANGE)`` on Linux; elsewhere two renames, the old folder put back if the second fails); an
  interruption leaves the old folder as it was, or nothing where there was none.

Every refusal is an :class:`UnsafeOutputError` (a ``ValueError``) whose message is one line naming the argument and
the path, as the ``gazeflow`` command prints its errors.
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import json
import os
import secrets
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from .atomic_files import create_temporary
from .interface_files import is_plain_name

NAME_BYTES = 200
"""The longest file name :func:`safe_name` makes (bytes of UTF-8; file systems allow 255): longer names are cut and
end with 8 hex digits of their hash, so two long names stay apart."""
STAGING_MARK = ".partial."
"""A folder being written by :func:`replace_folder` is ``<parent>/.<name>.partial.<random>``."""
_RENAME_EXCHANGE, _AT_FDCWD = 2, -100


class UnsafeOutputError(ValueError):
    """An output the run refuses to write (the message names the argument and the path, in one line)."""


Named = tuple[str, "str | os.PathLike"]
"""``(argument, path)``: where a path came from (``--csv``, ``VIDEO``, ``--model``) and the path."""


# ------------------------------------------------------------------------------------------- outputs and inputs
def _identity(path: str | os.PathLike) -> tuple[str, tuple[int, int] | None]:
    """The real path and, for an existing file, its (device, inode)."""
    try:
        status = os.stat(path)
        inode = (status.st_dev, status.st_ino)
    except (OSError, ValueError):
        inode = None
    return os.path.realpath(path), inode


def _inside(path: str, folder: str) -> bool:
    return path != folder and path.startswith(folder.rstrip(os.sep) + os.sep)


def check_outputs(outputs: Iterable[Named], inputs: Iterable[Named] = (), folders: Iterable[Named] = ()) -> None:
    """Refuse, before anything is opened, a run whose ``outputs`` (files it writes) or ``folders`` (folders it
    replaces whole) would overwrite what it reads or each other (see the module docstring). ``inputs`` may be files
    or folders; one that does not exist on disk (a Hub id, a camera URL) is passed over."""
    outputs, folders, inputs = list(outputs), list(folders), list(inputs)
    for argument, path in (*outputs, *folders):
        if "\x00" in str(path) or not str(path):
            raise UnsafeOutputError(f"{argument} {str(path)!r}: expected a path (not empty, no NUL character)")
    inputs = [(argument, path) for argument, path in inputs if "\x00" not in str(path)]
    read = [(argument, str(path), *_identity(path)) for argument, path in inputs if os.path.lexists(path)]
    by_real = {real: (argument, path) for argument, path, real, _ in read}
    by_inode = {inode: (argument, path) for argument, path, _, inode in read if inode is not None}
    input_folders = [(argument, path, real) for argument, path, real, _ in read if os.path.isdir(real)]
    written: dict[str, tuple[str, str]] = {}
    written_inodes: dict[tuple[int, int], tuple[str, str]] = {}
    for argument, path in outputs:
        real, inode = _identity(path)
        source = by_real.get(real) or (by_inode.get(inode) if inode is not None else None)
        if source is not None:
            raise UnsafeOutputError(
                f"{argument} {path}: is the input {source[0]} {source[1]}; an output may not overwrite what the run "
                "reads (choose another path)"
            )
        holder = next((folder for folder in input_folders if _inside(real, folder[2])), None)
        if holder is not None:
            raise UnsafeOutputError(
                f"{argument} {path}: lies inside the input folder {holder[0]} {holder[1]}; the run does not write "
                "into a folder it reads (choose another path)"
            )
        other = written.get(real) or (written_inodes.get(inode) if inode is not None else None)
        if other is not None:
            raise UnsafeOutputError(
                f"{argument} {path}: is also the output of {other[0]} {other[1]}; two outputs of one run cannot "
                "share a file"
            )
        written[real] = (argument, str(path))
        if inode is not None:
            written_inodes[inode] = (argument, str(path))
    for argument, folder in folders:
        real = os.path.realpath(folder)
        held = next(
            ((a, p) for a, p, r, _ in read if r == real or _inside(r, real) or _inside(real, r)),
            None,
        )
        if held is not None:
            raise UnsafeOutputError(
                f"{argument} {folder}: the folder is replaced whole and would take the input {held[0]} {held[1]} "
                "with it (choose a folder apart from the inputs)"
            )


def files_of(argument: str, path: str | os.PathLike | None) -> list[Named]:
    """The inputs a folder argument stands for where the run's outputs may sit in it, as ``(argument, file)``: the
    files directly in it (a model folder's ``config.json``, its weights, ...), so that an output may sit beside them
    but never be one of them (the example scripts: a training run's folder holds its evaluation, ``runs/x/eval``;
    the ``gazeflow`` commands pass their model and export folders whole, and write nothing inside them); a file:
    itself; None or nothing on disk (a Hub id): none."""
    if path is None or not os.path.lexists(path):
        return []
    if not os.path.isdir(path):
        return [(argument, path)]
    return [(argument, entry.path) for entry in os.scandir(path) if entry.is_file()]


# ------------------------------------------------------------------------------------------- names
def safe_name(text: str, fallback: str = "_") -> str:
    """``text`` as one file name that stays in its folder (``interface_files.is_plain_name``): path separators
    (``/``, ``\\``), NUL and other control characters become ``_``; a name of dots only (``.``, ``..``) has its dots
    turned into ``_``; an empty name is ``fallback``; a name longer than :data:`NAME_BYTES` bytes is cut and given 8
    hex digits of its hash. Names that need none of this are kept as they are."""
    name = "".join("_" if char in "/\\" or ord(char) < 32 or char == "\x7f" else char for char in text)
    if name and set(name) == {"."}:
        name = "_" * len(name)
    name = name or fallback
    encoded = name.encode("utf-8", "surrogatepass")
    if len(encoded) > NAME_BYTES:
        digest = hashlib.sha1(encoded).hexdigest()[:8]
        name = encoded[: NAME_BYTES - 9].decode("utf-8", "ignore") + "-" + digest
    return name


def confined(folder: str | os.PathLike, name: str, argument: str = "name") -> Path:
    """``folder / name`` where ``name`` must be one plain file name (``interface_files.is_plain_name``, the names
    :func:`safe_name` makes); anything that could leave the folder (``..``, an absolute path, a separator, a NUL) is
    an :class:`UnsafeOutputError`."""
    if not is_plain_name(name):
        raise UnsafeOutputError(
            f"{argument} {name!r}: expected one file name inside {folder} (no '/', '\\\\', NUL, '.' or '..')"
        )
    return Path(folder) / name


# ------------------------------------------------------------------------------------------- existing files
def refuse_foreign(
    argument: str,
    path: str | os.PathLike,
    written_by_us: Callable[[Path], bool],
    what: str,
    overwrite: bool = False,
) -> None:
    """Refuse to replace an existing ``path`` that ``written_by_us`` does not recognise as ``what`` wrote it (a
    symbolic link never is), unless ``overwrite``; a folder in the way is refused either way. Nothing at ``path``:
    nothing to refuse."""
    path = Path(path)
    if not os.path.lexists(path):
        return
    if path.is_dir() and not path.is_symlink():
        raise UnsafeOutputError(f"{argument} {path}: is a folder, expected a file")
    if overwrite:
        return
    if path.is_symlink():
        reason = "is a symbolic link"
    elif not path.is_file():
        reason = "is not a regular file"
    elif written_by_us(path):
        return
    else:
        reason = f"exists and was not written by {what}"
    raise UnsafeOutputError(f"{argument} {path}: {reason}; pass --overwrite to replace it, or choose another path")


def first_line(path: str | os.PathLike, limit: int = 1 << 16) -> str | None:
    """The first line of a text file (at most ``limit`` bytes read, UTF-8 with or without a byte-order mark; the
    line ending dropped), or None when it cannot be read as text."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(limit)
        return head.decode("utf-8-sig").splitlines()[0] if head else ""
    except (OSError, UnicodeDecodeError):
        return None


def json_object_in(path: str | os.PathLike, limit: int = 1 << 24) -> dict | None:
    """The JSON object a file holds (files over ``limit`` bytes, other JSON and other bytes: None)."""
    try:
        if os.path.getsize(path) > limit:
            return None
        with open(path, encoding="utf-8") as handle:
            record = json.load(handle)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


# ------------------------------------------------------------------------------------------- staged files
class StagedFiles:
    """Outputs written under temporaries and renamed into place when complete.

    ``stage(final)`` creates the temporary of ``final`` (exclusively, beside it, not through a link) and returns its
    path for the writer to open; ``publish(final)`` renames it onto ``final``; ``discard()`` removes every temporary
    not yet published (on an error or an interrupt).
    """

    def __init__(self) -> None:
        self.pending: dict[Path, Path] = {}

    def stage(self, final: str | os.PathLike) -> Path:
        final = Path(final)
        temporary, descriptor = create_temporary(final)
        os.close(descriptor)
        self.pending[final] = temporary
        return temporary

    def publish(self, final: str | os.PathLike) -> Path:
        final = Path(final)
        os.replace(self.pending.pop(final), final)
        return final

    def discard(self) -> None:
        for temporary in self.pending.values():
            temporary.unlink(missing_ok=True)
        self.pending.clear()


# ------------------------------------------------------------------------------------------- folders
def _exchange(first: str, second: str) -> bool:
    """Swap two paths in one step (Linux ``renameat2(RENAME_EXCHANGE)``); False where that is not available."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    status = renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE)
    if status == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):  # a file system or kernel without it
        return False
    raise OSError(code, f"cannot swap {second} for its new version: {os.strerror(code)}")


def _swap_by_two_renames(staging: str, destination: str) -> str:
    """``destination`` moved aside, ``staging`` renamed onto it; the old folder put back when the second rename
    fails. Returns where the old folder now is."""
    aside = f"{staging}.old"
    os.rename(destination, aside)
    try:
        os.rename(staging, destination)
    except BaseException:
        os.rename(aside, destination)
        raise
    return aside


def replace_folder(destination: str | os.PathLike, fill: Callable[[Path], object], exchange: bool = True) -> Path:
    """Write the folder ``destination`` whole: ``fill(staging)`` writes every file into a new temporary sibling, which
    then takes ``destination``'s place (see the module docstring); the old folder is then removed. A link at
    ``destination`` is followed (the folder it names is replaced). When ``fill`` raises, the temporary is removed and
    ``destination`` is left as it was. ``exchange=False``: the two-rename swap even where one step is possible."""
    destination = Path(os.path.realpath(destination))
    if destination.exists() and not destination.is_dir():
        raise UnsafeOutputError(f"{destination}: is an existing file, expected a folder")
    destination.parent.mkdir(parents=True, exist_ok=True)
    staging = destination.parent / f".{destination.name}{STAGING_MARK}{secrets.token_hex(4)}"
    staging.mkdir()
    old = None
    try:
        fill(staging)
        if not destination.exists():
            os.rename(staging, destination)
        elif exchange and _exchange(str(staging), str(destination)):
            old = str(staging)
        else:
            old = _swap_by_two_renames(str(staging), str(destination))
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return destination


def foreign_entries(folder: str | os.PathLike, names: Iterable[str]) -> list[str]:
    """The entries of ``folder`` that are not among ``names`` or are not plain files (links, folders), sorted."""
    names, folder = set(names), Path(folder)
    if not folder.is_dir():
        return []
    return sorted(
        entry.name for entry in folder.iterdir() if entry.name not in names or entry.is_symlink() or not entry.is_file()
    )


__all__ = [
    "UnsafeOutputError",
    "check_outputs",
    "files_of",
    "safe_name",
    "confined",
    "refuse_foreign",
    "first_line",
    "json_object_in",
    "StagedFiles",
    "replace_folder",
    "foreign_entries",
    "NAME_BYTES",
]
