"""Writing files that a crash cannot leave half-written, and fingerprints of files' contents.

Checkpoints and cache entries are read back by later runs, so a run killed while writing one must
leave either the previous file or the new one, never a torn mix: `atomic_write` writes a
temporary file in the same folder (same file system, so the rename is atomic), flushes it to disk
and renames it over the target. `json_safe` makes values writable as strict JSON.
`folder_lock` keeps two jobs out of one working folder.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import math
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dpdl.errors import ConfigError

__all__ = [
    "LOCK_NAME",
    "atomic_write",
    "file_sha256",
    "folder_lock",
    "json_safe",
    "require_folder",
]

#: The lock file a job holds in its working folder (:func:`folder_lock`).
LOCK_NAME = ".dpdl.lock"


def json_safe(value: Any) -> Any:
    """`value` with non-finite floats as the strings `"Infinity"` / `"NaN"` (valid JSON)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    return value


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` by `data` atomically: a temporary file beside it, `fsync`,
    `os.replace`, then `fsync` of the folder so that the rename itself survives a power cut."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}.", suffix=".partial"
    )
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of the file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def require_folder(folder: Path, what: str) -> None:
    """Raise [`ConfigError`][dpdl.errors.ConfigError] unless `folder` is a folder or can be made
    one: neither it nor a folder above it is a file. Checked before a command does any work, so
    that a run is not lost to an output folder it cannot write (`what`: the option or role that
    names the folder)."""
    folder = Path(folder)
    for place in (folder, *folder.parents):
        if place.exists():
            if not place.is_dir():
                where = "is" if place == folder else f"lies under {place}, which is"
                raise ConfigError(f"{what} {folder} {where} a file, not a folder")
            return


@contextlib.contextmanager
def folder_lock(folder: Path, what: str = "job") -> Iterator[None]:
    """Hold `folder`'s lock (an advisory `flock` on `folder/.dpdl.lock`, created with the folder)
    for the duration; a second holder is refused at once with a
    [`ConfigError`][dpdl.errors.ConfigError] naming the folder and the process that holds it. The
    operating system releases the lock when its holder exits, however it exits (a killed job
    leaves no stale lock)."""
    folder = Path(folder)
    require_folder(folder, f"the {what}'s folder")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_NAME
    handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(handle, 64, 0).decode(errors="replace").strip() or "unknown"
            raise ConfigError(
                f"{folder} is in use by another dpdl {what} (process {holder}); wait for it to "
                "finish or choose another folder"
            ) from None
        os.ftruncate(handle, 0)
        os.pwrite(handle, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(handle)  # releases the lock
