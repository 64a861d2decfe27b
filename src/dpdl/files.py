"""Writing files that a crash cannot leave half-written, and fingerprints of files' contents.

Checkpoints and cache entries are read back by later runs, so a run killed while writing one must
leave either the previous file or the new one, never a torn mix: `atomic_write` writes a
temporary file in the same folder (same file system, so the rename is atomic), flushes it to disk
and renames it over the target. `json_safe` makes values writable as strict JSON.
`folder_lock` keeps two jobs out of one working folder.

Every file dpdl reads by name goes through `require_regular` or `read_regular` first: a FIFO, a
device (`/dev/null`, `/dev/zero`), a socket or a folder given where a file is expected is refused
by name, never opened (a FIFO would block the reader forever, `/dev/zero` never ends).
`parse_json` turns JSON nested too deep for Python's parser into the same one clear error as any
other malformed file.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import math
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dpdl.errors import ConfigError, DpdlError

__all__ = [
    "LOCK_NAME",
    "atomic_write",
    "file_sha256",
    "folder_lock",
    "json_safe",
    "parse_json",
    "read_regular",
    "require_folder",
    "require_regular",
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


#: What a file that is not regular is, by the test of its mode (`stat`).
_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _not_regular(path: Path, mode: int, what: str, error: type[DpdlError]) -> DpdlError:
    kind = next((name for test, name in _KINDS if test(mode)), "not a plain file")
    return error(f"{what} {path} is not a regular file: it is {kind}; give a file")


def require_regular(path: Path, what: str, error: type[DpdlError] = ConfigError) -> Path:
    """`path`, when it names a regular file (a link to one is followed); else an `error` (a
    [`DpdlError`][dpdl.errors.DpdlError] subclass) naming it as `what`: not found, a folder, a
    FIFO, a device or a socket. Checked before a reader opens the file, so that a FIFO cannot
    block it."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise error(f"{what} not found: {path}") from None
    except OSError as problem:  # a loop of links, a name too long, a path through a file
        raise error(f"{what} {path} cannot be read ({problem.strerror or problem})") from None
    if not stat.S_ISREG(mode):
        raise _not_regular(path, mode, what, error)
    return path


def read_regular(path: Path, what: str, error: type[DpdlError] = ConfigError) -> bytes:
    """The bytes of the regular file `path`, else an `error` as
    [`require_regular`][dpdl.files.require_regular] raises it. The file is opened without
    blocking and checked on the open descriptor, so that a FIFO put in its place after a check
    cannot block the read."""
    path = require_regular(path, what, error)  # names a socket, which cannot be opened
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as problem:
        raise error(f"{what} {path} cannot be read ({problem.strerror or problem})") from None
    try:
        mode = os.fstat(handle).st_mode
        if not stat.S_ISREG(mode):
            raise _not_regular(path, mode, what, error)
        os.set_blocking(handle, True)
        with os.fdopen(os.dup(handle), "rb") as stream:
            return stream.read()
    except OSError as problem:
        raise error(f"{what} {path} cannot be read ({problem.strerror or problem})") from None
    finally:
        os.close(handle)


def parse_json(data: bytes | str, path: Path, what: str, error: type[DpdlError]) -> Any:
    """The JSON value of `data`, read from `path`; an `error` naming `path` as `what` when it
    is not JSON, not UTF-8, or nested too deep for Python's parser (a `RecursionError`)."""
    try:
        return json.loads(data)
    except RecursionError:
        raise error(f"{what} {path} is nested too deeply to be read as JSON") from None
    except ValueError as problem:  # json.JSONDecodeError, UnicodeDecodeError
        raise error(f"{what} {path} is not JSON ({problem})") from None


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
