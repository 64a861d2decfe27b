"""Writing files that a crash cannot leave half-written, and fingerprints of files' contents.

Checkpoints and cache entries are read back by later runs, so a run killed while writing one must
leave either the previous file or the new one, never a torn mix: `atomic_write` writes a
temporary file in the same folder (same file system, so the rename is atomic), flushes it to disk
and renames it over the target. `json_safe` makes values writable as strict JSON.
`folder_lock` keeps two jobs out of one working folder, and `claimed_folder` keeps one run's
results per folder: it holds the lock for the whole run and writes a marker (`.dpdl-run`: the
command and its settings) that tells a continuation of the same run from another run's results.

Every file dpdl reads by name goes through `require_regular` or `read_regular` first: a FIFO, a
device (`/dev/null`, `/dev/zero`), a socket or a folder given where a file is expected is refused
by name, never opened (a FIFO would block the reader forever, `/dev/zero` never ends).
`parse_json` turns JSON nested too deep for Python's parser into the same one clear error as any
other malformed file.
`write_failure` marks a folder whose run diverged (`FAILED.json`), and `refuse_failed_resume`
refuses to resume it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import math
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dpdl.errors import ConfigError, DivergenceError, DpdlError

__all__ = [
    "FAILED",
    "LOCK_NAME",
    "RUN_MARKER",
    "atomic_write",
    "claimed_folder",
    "clear_failure",
    "file_sha256",
    "folder_lock",
    "json_safe",
    "parse_json",
    "read_regular",
    "refuse_failed_resume",
    "require_folder",
    "require_regular",
    "write_failure",
]

#: The lock file a job holds in its working folder (:func:`folder_lock`).
LOCK_NAME = ".dpdl.lock"

#: The marker a command writes in the results folder it claims (:func:`claimed_folder`).
RUN_MARKER = ".dpdl-run"

#: Layout of the marker (its `format` field).
RUN_FORMAT = "dpdl-run"

#: The folders whose lock this process holds, by resolved path: (process, thread, depth). A job
#: that holds its folder's lock (a command, for its whole run) may take it again (the launcher it
#: calls), while another process or thread is refused.
_HELD: dict[Path, tuple[int, int, int]] = {}


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
def folder_lock(folder: Path, what: str = "job", name: str = LOCK_NAME) -> Iterator[None]:
    """Hold `folder`'s lock (an advisory `flock` on `folder/.dpdl.lock`, created with the folder)
    for the duration; a second holder is refused at once with a
    [`ConfigError`][dpdl.errors.ConfigError] naming the folder and the process that holds it. The
    operating system releases the lock when its holder exits, however it exits (a killed job
    leaves no stale lock). The thread that holds the lock may take it again (a command that holds
    its folder for the whole run calls a launcher that takes it too). `name`: the lock file's, for
    a lock on one file of the folder (a checkpoint's) rather than the whole folder."""
    folder = Path(folder)
    require_folder(folder, f"the {what}'s folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except PermissionError as error:
        raise ConfigError(
            f"the {what}'s folder {folder} cannot be made ({error.strerror})"
        ) from None
    key, me = folder.resolve() / name, (os.getpid(), threading.get_ident())
    held = _HELD.get(key)
    if held is not None and held[:2] == me:  # taken again by its holder
        _HELD[key] = (*me, held[2] + 1)
        try:
            yield
        finally:
            _HELD[key] = (*me, _HELD[key][2] - 1)
        return
    try:
        handle = os.open(folder / name, os.O_RDWR | os.O_CREAT, 0o644)
    except PermissionError as error:
        raise ConfigError(
            f"the {what}'s folder {folder} is not writable ({error.strerror})"
        ) from None
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
        _HELD[key] = (*me, 1)
        try:
            yield
        finally:
            _HELD.pop(key, None)
    finally:
        os.close(handle)  # releases the lock


def _read_marker(folder: Path) -> dict[str, Any] | None:
    """The run marker of `folder` (`RUN_MARKER`), or None where there is none that dpdl wrote."""
    path = folder / RUN_MARKER
    try:
        if not path.is_file() or path.stat().st_size > 1 << 20:
            return None
        marker = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict) or marker.get("format") != RUN_FORMAT:
        return None
    return marker


def _contents(folder: Path) -> list[Path]:
    """What `folder` holds besides its lock file (nothing when it does not exist)."""
    if not folder.is_dir():
        return []
    return sorted(entry for entry in folder.iterdir() if entry.name != LOCK_NAME)


def _written(folder: Path) -> bool:
    """Whether a run wrote anything into `folder` besides its marker and lock files (the folders
    that hold them do not count)."""
    return any(
        path.is_file() and path.name != LOCK_NAME and path != folder / RUN_MARKER
        for path in folder.rglob("*")
    )


def _differences(marker: dict[str, Any], command: str, settings: dict[str, Any]) -> str:
    """What makes the run `marker` records another run than `command` with `settings`."""
    if marker.get("command") != command:
        return f"it holds the results of 'dpdl {marker.get('command')}'"
    saved = marker.get("settings")
    saved = saved if isinstance(saved, dict) else {}
    changes = [
        f"{key} was {saved[key]!r} and is {settings[key]!r}"
        for key in sorted(set(saved) & set(settings))
        if saved[key] != settings[key]
    ]
    unmatched = len(set(saved) ^ set(settings))
    if unmatched:  # of another version, or of a run that had other options altogether
        changes.append(f"{unmatched} settings set in only one of the two runs")
    shown = "; ".join(changes[:6]) + (f"; and {len(changes) - 6} more" if len(changes) > 6 else "")
    return f"it holds a run with other settings: {shown}"


def _refuse_to_clear(folder: Path, option: str, how: str) -> None:
    """Refuse `--overwrite` of a folder that holds the user's files however it is marked: the
    file system's root, the home folder, the working folder or a folder above it."""
    place, here = folder.resolve(), Path.cwd().resolve()
    if place in (Path(place.anchor), Path.home().resolve(), here, *here.parents):
        raise ConfigError(
            f"{option} {folder}: {how.split()[-1]} would clear the root, home or working "
            "folder (or one above it); choose a folder of the run's own"
        )


def _clear(folder: Path) -> None:
    """Remove what `folder` holds (not its lock); links are removed, not followed."""
    for entry in _contents(folder):
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


@contextlib.contextmanager
def claimed_folder(
    folder: Path,
    command: str,
    settings: dict[str, Any],
    overwrite: bool = False,
    option: str = "--out",
    how: str = "add --overwrite",
) -> Iterator[Path]:
    """Hold `folder` as the results folder of one run of `command` with `settings` (plain JSON
    data: the options that make the results) for the duration: its lock
    ([`folder_lock`][dpdl.files.folder_lock]) and its marker (`.dpdl-run`).

    A new or empty folder is claimed; a folder whose marker records the same command and settings
    is the same run continued (a resume, a sweep's finished points); any other non-empty folder is
    refused with a [`ConfigError`][dpdl.errors.ConfigError] naming it (`option`: the option that
    named it) and what differs, before anything is written (`how`: how the caller asks to clear
    it). With `overwrite`, a folder that dpdl
    wrote (it has the marker) is cleared first; a folder dpdl did not write (no marker: a home or
    source folder) is never cleared. When the run fails on bad input (a
    [`DpdlError`][dpdl.errors.DpdlError]), a folder it created is removed, and a marker it wrote
    into an empty folder too."""
    folder = Path(folder)
    settings = json.loads(json.dumps(json_safe(settings), default=str))  # as the marker keeps it
    require_folder(folder, option)

    def check() -> dict[str, Any] | None:
        """Refuse `folder` unless it is new, empty, this run's, or dpdl's to `overwrite`."""
        marker = _read_marker(folder)
        if marker is None and _contents(folder):
            raise ConfigError(
                f"{option} {folder} is not empty and holds no dpdl run (no {RUN_MARKER} marker)"
                + (
                    f": {how.split()[-1]} clears only a folder that dpdl wrote; empty it "
                    "yourself or choose another folder"
                    if overwrite
                    else "; choose a new or empty folder"
                )
            )
        if marker is None or overwrite:
            return marker
        if marker.get("command") != command or marker.get("settings") != settings:
            raise ConfigError(
                f"{option} {folder} holds another run's results "
                f"({_differences(marker, command, settings)}); choose another folder, rerun "
                f"with the same options to continue that run, or {how} to clear it first"
            )
        return marker

    check()  # before the lock file is made in it: a refused folder is left as it was
    if overwrite:
        _refuse_to_clear(folder, option, how)
    created = next(  # the first folder of the path that the claim makes, if any
        (place for place in reversed((folder, *folder.parents)) if not place.exists()), None
    )
    with folder_lock(folder, f"{command} run"):
        marker = check()  # again, now that no other job can write it
        wrote = marker is None or overwrite
        if overwrite:
            _clear(folder)
        if wrote:
            record = {"format": RUN_FORMAT, "command": command, "settings": settings}
            try:
                atomic_write(folder / RUN_MARKER, (json.dumps(record, indent=1) + "\n").encode())
            except PermissionError as error:
                raise ConfigError(f"{option} {folder} is not writable ({error.strerror})") from None
        try:
            yield folder
        except DpdlError:  # bad input found before the run wrote anything: leave nothing
            if not _written(folder):
                if created is not None:
                    shutil.rmtree(created, ignore_errors=True)
                elif wrote:
                    (folder / RUN_MARKER).unlink(missing_ok=True)
            raise


#: The file that marks a results folder's run as diverged (seed, step, agent, cause, message).
FAILED = "FAILED.json"

#: The files of a folder that claim results, removed from a folder whose run diverged.
_CLAIMS = ("final.json",)


def write_failure(folder: Path, error: DivergenceError) -> Path:
    """Mark `folder` failed: `FAILED.json` holding `error`'s record (seed, step, agent, cause,
    message), and no `final.json` claiming results. Its checkpoints stay (to inspect), but a
    resume of them is refused (`refuse_failed_resume`)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in _CLAIMS:
        (folder / name).unlink(missing_ok=True)
    path = folder / FAILED
    atomic_write(path, (json.dumps(json_safe(error.record()), indent=2) + "\n").encode())
    return path


def clear_failure(folder: Path) -> None:
    """Remove `folder`'s `FAILED.json`: a new run replaces the one that failed."""
    (folder / FAILED).unlink(missing_ok=True)


def refuse_failed_resume(folder: Path) -> None:
    """Raise [`ConfigError`][dpdl.errors.ConfigError] if `folder`'s run diverged: its checkpoints
    would continue into the same divergence (the run is deterministic)."""
    path = folder / FAILED
    if not path.is_file():
        return
    try:
        message = json.loads(path.read_text()).get("message", "")
    except (OSError, ValueError, AttributeError):
        message = ""
    raise ConfigError(
        f"--resume: the run in {folder} diverged ({path}: {message or 'unreadable'}); its "
        "checkpoints would continue into the same divergence: start afresh (without --resume) "
        "with other settings"
    )
