"""Checksummed archives of arrays and a JSON manifest: the file layout of every checkpoint dpdl
writes (a runtime agent's, [`dpdl.runtime.checkpoint`][dpdl.runtime.checkpoint], and a simulated
run's, [`dpdl.experiments.checkpoints`][dpdl.experiments.checkpoints]).

An archive is an `.npz` file holding the caller's arrays, `manifest` (UTF-8 JSON bytes) and
`sha256` (the SHA-256 of the manifest and of every array's name, dtype, shape and bytes). It is
written atomically (`dpdl.files.atomic_write`: a crash leaves the previous file
whole) and read with `allow_pickle=False`, so reading a file, whatever it holds, never runs code.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import zipfile
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from dpdl.errors import FileFormatError
from dpdl.files import atomic_write, require_regular

__all__ = [
    "archive_digest",
    "read_archive",
    "read_checked_archive",
    "setting_changes",
    "write_archive",
]


def archive_digest(manifest: bytes, arrays: Mapping[str, np.ndarray]) -> bytes:
    """SHA-256 of `manifest` and of every array (name, dtype, shape and bytes), in name order."""
    digest = hashlib.sha256(manifest)
    for name in sorted(arrays):
        array = np.ascontiguousarray(arrays[name])
        digest.update(json.dumps([name, array.dtype.str, list(array.shape)]).encode())
        digest.update(array.tobytes())
    return digest.digest()


def write_archive(path: Path, manifest: bytes, arrays: Mapping[str, np.ndarray]) -> None:
    """Write `arrays`, `manifest` and their checksum to `path` atomically."""
    stored = {**arrays, "manifest": np.frombuffer(manifest, dtype=np.uint8)}
    stored["sha256"] = np.frombuffer(archive_digest(manifest, arrays), dtype=np.uint8)
    buffer = io.BytesIO()
    np.savez(buffer, **stored)
    atomic_write(path, buffer.getvalue())


def read_archive(path: Path) -> tuple[bytes, dict[str, np.ndarray], bytes]:
    """The manifest, the arrays and the stored checksum of the archive at `path` (the caller
    compares the checksum with [`archive_digest`][dpdl.archives.archive_digest]). Raises
    `ValueError` (or what `numpy.load` raises: `OSError`, `EOFError`, `zipfile.BadZipFile`, ...)
    for a file that is not such an archive; never unpickles."""
    loaded = np.load(path, allow_pickle=False)
    if not isinstance(loaded, np.lib.npyio.NpzFile):  # an array, from a .npy file
        raise ValueError("a single array, not an .npz archive")
    with loaded as archive:
        arrays = {name: archive[name] for name in archive.files}
    if "manifest" not in arrays or "sha256" not in arrays:
        raise ValueError(f"an archive without manifest and checksum (entries {sorted(arrays)[:5]})")
    manifest, stored = arrays.pop("manifest"), arrays.pop("sha256")
    if (
        manifest.dtype != np.uint8
        or stored.dtype != np.uint8
        or manifest.ndim != 1
        or stored.shape != (32,)
    ):
        raise ValueError("a manifest and checksum that are not byte strings")
    return manifest.tobytes(), arrays, stored.tobytes()


def read_checked_archive(
    path: Path, kind: str, version: int, expected: str
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The JSON manifest and the arrays of the archive at `path`, checked whole: readable, its
    checksum its own, its manifest a JSON object of format `kind` and version `version`. A path
    that is not a regular file (a FIFO, a device, a folder) is refused before it is opened. Raises
    one [`FileFormatError`][dpdl.errors.FileFormatError] naming `path` and what was `expected`
    otherwise (a pickle, random bytes, a truncated archive, an object array: numpy refuses them
    without running anything)."""
    require_regular(path, "checkpoint", FileFormatError)
    try:
        manifest_bytes, arrays, stored = read_archive(path)
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error) as error:
        raise FileFormatError(
            f"{path} is not a readable checkpoint ({error}); {expected}"
        ) from None
    if not hmac.compare_digest(archive_digest(manifest_bytes, arrays), stored):
        raise FileFormatError(
            f"{path} fails its checksum: altered or torn after it was written; {expected}"
        )
    try:
        manifest = json.loads(manifest_bytes)
    except (ValueError, RecursionError) as error:
        raise FileFormatError(f"{path} has an unreadable manifest ({error}); {expected}") from None
    if (
        not isinstance(manifest, dict)
        or manifest.get("format") != kind
        or manifest.get("version") != version
    ):
        raise FileFormatError(f"{path} is a file of another format; {expected}")
    return manifest, arrays


def setting_changes(saved: Any, settings: Mapping[str, Any]) -> list[str]:
    """`key was A and is B` for every setting that differs between the settings a checkpoint
    saved and this run's (none when `saved` is not a mapping)."""
    if not isinstance(saved, dict):
        return []
    keys = sorted(set(saved) | set(settings))
    missing = "(not set)"
    return [
        f"{key} was {saved.get(key, missing)!r} and is {settings.get(key, missing)!r}"
        for key in keys
        if saved.get(key, missing) != settings.get(key, missing)
    ]
