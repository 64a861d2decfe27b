"""Writing files that a crash cannot leave half-written, and fingerprints of files' contents.

Checkpoints and cache entries are read back by later runs, so a run killed while writing one must
leave either the previous file or the new one, never a torn mix: :func:`atomic_write` writes a
temporary file in the same folder (same file system, so the rename is atomic), flushes it to disk
and renames it over the target. :func:`json_safe` makes values writable as strict JSON.
"""

from __future__ import annotations

import hashlib
import math
import os
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["atomic_write", "file_sha256", "json_safe"]


def json_safe(value: Any) -> Any:
    """``value`` with non-finite floats as the strings ``"Infinity"`` / ``"NaN"`` (valid JSON)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    return value


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` by ``data`` atomically: a temporary file beside it, ``fsync``,
    ``os.replace``, then ``fsync`` of the folder so that the rename itself survives a power cut."""
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
