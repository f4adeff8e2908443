"""Files that are whole or absent: the one atomic write of the package, its fsyncs, and the sha256 of a file.

:func:`atomic_write` writes a file under a temporary name beside it and renames it into place (``os.replace``, atomic
on POSIX and Windows within one folder), so a reader, a crash or an interrupt sees either the previous file or the
complete new one, never a mix; the temporary is removed when the writing fails. Checkpoints, the feature cache, the
command's outputs, the web demo's clip, the synthetic data set, a wearer's calibration and a model folder's region
calibration all write through it.

It is one of the conventions at the bottom of the package (it imports nothing of ours), so every layer that writes a
file (data, gaze, hub, outputs, recipes, commands) may import it; the model folder, which must stay self-contained,
writes through transformers' ``save_pretrained`` instead.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable
from pathlib import Path

TEMPORARY_PREFIX = "partial."
"""The temporary of ``<folder>/<name>`` is ``<folder>/partial.<process>.<thread>.<name>``: one per process and thread
(parallel writers of one file never share it), and it keeps the name's suffix (writers that pick a format by the
suffix, such as PyAV's, see the real one)."""

_HASH_CHUNK = 1 << 20


def temporary_path(path: str | os.PathLike) -> Path:
    """Where :func:`atomic_write` writes ``path`` before renaming it (:data:`TEMPORARY_PREFIX`)."""
    path = Path(path)
    return path.with_name(f"{TEMPORARY_PREFIX}{os.getpid()}.{threading.get_ident()}.{path.name}")


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
    temporary = temporary_path(path)
    try:
        if isinstance(content, str):
            temporary.write_text(content, encoding=encoding)
        elif isinstance(content, bytes):
            temporary.write_bytes(content)
        else:
            content(temporary)
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


__all__ = ["TEMPORARY_PREFIX", "temporary_path", "atomic_write", "fsync_file", "fsync_directory", "sha256_file"]
