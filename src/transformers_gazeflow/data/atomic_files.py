"""Files that are whole or absent: the one atomic write of the package, its fsyncs, and the sha256 of a file.

:func:`atomic_write` writes a file under a temporary name beside it and renames it into place (``os.replace``, atomic
on POSIX and Windows within one folder), so a reader, a crash or an interrupt sees either the previous file or the
complete new one, never a mix; the temporary is removed when the writing fails. Checkpoints, the feature cache, the
command's outputs, the web demo's clip, the synthetic data set, a wearer's calibration and a model folder's region
calibration all write through it.

The temporary is created exclusively (``O_CREAT | O_EXCL | O_NOFOLLOW``, :func:`create_exclusive`) under a name with a
random part: a file or a symbolic link already at that name (planted, or left by a crash) is never written through;
another name is drawn instead. The rename replaces a link at ``path`` itself, never the file it points to.

It is one of the conventions at the bottom of the package (it imports nothing of ours), so every layer that writes a
file (data, gaze, hub, outputs, recipes, commands) may import it; the model folder, which must stay self-contained,
writes through transformers' ``save_pretrained`` instead.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import threading
from collections.abc import Callable
from pathlib import Path

TEMPORARY_PREFIX = "partial."
"""The temporary of ``<folder>/<name>`` is ``<folder>/partial.<process>.<thread>.<random>.<name>``: one per process and
thread (parallel writers of one file never share it), unpredictable (nothing can be planted at it in advance), and
it keeps the name's suffix (writers that pick a format by the suffix, such as PyAV's, see the real one)."""

_HASH_CHUNK = 1 << 20
_EXCLUSIVE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
_ATTEMPTS = 100


def temporary_path(path: str | os.PathLike) -> Path:
    """A fresh name for the temporary of ``path`` (:data:`TEMPORARY_PREFIX`); :func:`create_temporary` creates it."""
    path = Path(path)
    token = secrets.token_hex(4)
    return path.with_name(f"{TEMPORARY_PREFIX}{os.getpid()}.{threading.get_ident()}.{token}.{path.name}")


def create_exclusive(path: str | os.PathLike) -> int:
    """Create ``path`` as a new empty file and return its descriptor open for writing: never an existing file, never
    through a symbolic link (``O_CREAT | O_EXCL | O_NOFOLLOW``; ``FileExistsError`` when anything is there)."""
    return os.open(path, _EXCLUSIVE, 0o666)


def create_temporary(path: str | os.PathLike) -> tuple[Path, int]:
    """The temporary of ``path``, created exclusively beside it (:func:`create_exclusive`), and its descriptor; a name
    already taken (planted or left behind) is passed over for a new one."""
    for _ in range(_ATTEMPTS):
        temporary = temporary_path(path)
        try:
            return temporary, create_exclusive(temporary)
        except FileExistsError:
            continue
    raise FileExistsError(f"{Path(path).parent}: no free temporary name for {Path(path).name} in {_ATTEMPTS} tries")


def atomic_write(
    path: str | os.PathLike,
    content: str | bytes | Callable[[Path], object],
    *,
    encoding: str = "utf-8",
    durable: bool = False,
) -> Path:
    """Write ``path`` whole or not at all: ``content`` (text in ``encoding``, bytes, or a function that writes the
    file at the path it is given) goes to a temporary file in the same folder, which is then renamed onto ``path``.
    When writing raises (or is interrupted), the temporary is removed and ``path`` is left as it was.

    ``durable``: fsync the file before the rename and the folder after it, so that a power cut cannot leave an empty
    file under the new name nor lose the rename (checkpoint records).
    """
    path = Path(path)
    if not isinstance(content, (str, bytes)) and not callable(content):
        raise TypeError(f"atomic_write: content must be text, bytes or a function, got {type(content).__name__}")
    temporary, descriptor = create_temporary(path)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            if not callable(content):
                handle.write(content.encode(encoding) if isinstance(content, str) else content)
        if callable(content):
            content(temporary)  # the function opens the (empty, new) file the temporary name holds
        if durable:
            fsync_file(temporary)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    if durable:
        fsync_directory(path.parent)
    return path


def fsync_file(path: str | os.PathLike) -> None:
    """Flush ``path``'s data to the disk, so that a power cut after a rename cannot leave it empty."""
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


def fsync_directory(folder: str | os.PathLike) -> None:
    """Flush a folder's entries (a rename into it) to the disk, where the platform can open a folder."""
    try:
        handle = os.open(folder, os.O_RDONLY)
    except OSError:  # some platforms cannot open a directory; the rename is then as durable as they allow
        return
    try:
        os.fsync(handle)
    except OSError:
        pass
    finally:
        os.close(handle)


def sha256_file(path: str | os.PathLike) -> str:
    """The hex sha256 of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(_HASH_CHUNK):
            digest.update(block)
    return digest.hexdigest()


__all__ = [
    "TEMPORARY_PREFIX",
    "temporary_path",
    "create_exclusive",
    "create_temporary",
    "atomic_write",
    "fsync_file",
    "fsync_directory",
    "sha256_file",
]
