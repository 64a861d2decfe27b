"""Download the full data sets of `manifest.json` and check them against their published sha256;
report what is present where (`dpdl data fetch` and `dpdl data list`).

A file is streamed in chunks into a temporary file in its destination folder, hashed as it
arrives, and renamed into place only once its size and sha256 match the manifest; a wrong file is
deleted and reported. Connection errors (refused, reset, a transfer cut short, a server error) are
retried with exponential backoff, each attempt starting the file again.

Written with the standard library's urllib: the one thing `requests` would add here is connection
pooling, and each data set is a few files fetched once.
"""

from __future__ import annotations

import hashlib
import http.client
import logging
import os
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpdl.data.paths import cache_dir, data_roots, manifest
from dpdl.errors import DataError
from dpdl.files import file_sha256, folder_lock

__all__ = ["CHUNK", "RETRIES", "FileStatus", "download", "fetch", "survey"]

logger = logging.getLogger(__name__)

#: Bytes read from the connection at a time.
CHUNK = 1 << 20
#: Attempts per file; the waits between them double from ``backoff`` seconds.
RETRIES = 5
#: Seconds a connection may stay silent before the attempt counts as failed.
TIMEOUT = 60.0

#: ``progress(bytes_done, bytes_total or None)``, called after every chunk.
Progress = Callable[[int, "int | None"], None]


class _Transient(Exception):
    """An attempt failed in a way worth retrying (connection lost, short transfer, server error)."""


def _attempt(url: str, handle: Any, size: int | None, progress: Progress | None) -> str:
    """One transfer of `url` into the open temporary file `handle`; its sha256."""
    digest, done = hashlib.sha256(), 0
    handle.seek(0)
    handle.truncate()
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as response:
            length = response.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else size
            while chunk := response.read(CHUNK):
                handle.write(chunk)
                digest.update(chunk)
                done += len(chunk)
                if progress:
                    progress(done, total)
    except urllib.error.HTTPError as error:
        if error.code >= 500:
            raise _Transient(f"HTTP {error.code} {error.reason}") from None
        raise DataError(f"downloading {url} failed: HTTP {error.code} {error.reason}") from None
    except (
        urllib.error.URLError,
        http.client.HTTPException,
        ConnectionError,
        TimeoutError,
    ) as error:
        raise _Transient(
            str(getattr(error, "reason", None) or error or type(error).__name__)
        ) from None
    if total is not None and done != total:
        raise _Transient(f"the transfer stopped after {done} of {total} bytes")
    return digest.hexdigest()


def download(
    url: str,
    path: Path,
    sha256: str,
    size: int | None = None,
    *,
    retries: int = RETRIES,
    backoff: float = 1.0,
    progress: Progress | None = None,
) -> Path:
    """Download `url` to `path`, verified: streamed into a temporary file beside `path`, which is
    renamed to `path` only if its sha256 (and `size` where known) match; otherwise deleted, and a
    [`DataError`][dpdl.errors.DataError] says why. Transient failures are retried `retries` times
    in all, waiting `backoff`, `2 backoff`, ... seconds between attempts."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # closed by `with handle:` below, which needs its name outside it: the finally deletes it
    handle = tempfile.NamedTemporaryFile(  # noqa: SIM115
        dir=path.parent, prefix=f".{path.name}.", suffix=".part", delete=False
    )
    temporary = Path(handle.name)
    try:
        with handle:
            for attempt in range(1, max(retries, 1) + 1):
                try:
                    actual = _attempt(url, handle, size, progress)
                    break
                except _Transient as error:
                    if attempt >= retries:
                        raise DataError(
                            f"downloading {url} failed {retries} times; last: {error}"
                        ) from None
                    wait = backoff * 2 ** (attempt - 1)
                    logger.warning(
                        "downloading %s: %s; retrying in %.3g s (attempt %d of %d)",
                        url,
                        error,
                        wait,
                        attempt + 1,
                        retries,
                    )
                    time.sleep(wait)
        if actual != sha256:
            raise DataError(
                f"{url}: sha256 {actual} is not the published {sha256}; nothing was kept"
            )
        if size is not None and temporary.stat().st_size != size:
            raise DataError(
                f"{url}: {temporary.stat().st_size} bytes, not the published {size}; nothing was "
                "kept"
            )
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    return path


def fetch(
    name: str,
    dest: Path | None = None,
    *,
    progress: Callable[[str], Progress | None] | None = None,
    datasets: dict[str, dict[str, Any]] | None = None,
    **options: Any,
) -> list[Path]:
    """Download data set `name` of the manifest (`datasets`, default the packaged one) into
    `dest` (default: the user cache folder), each file to its place in the data layout; files
    already there with the right sha256 are kept. `progress(file path)` gives each file's
    progress callback; `options` go to `download`. The folder's lock
    ([`folder_lock`][dpdl.files.folder_lock]) is held meanwhile: a second fetch into it is
    refused. A data set without a verifiable original raises a
    [`DataError`][dpdl.errors.DataError] that says where to get it and which sha256 to expect."""
    datasets = datasets if datasets is not None else manifest()
    if name not in datasets:
        raise DataError(f"unknown data set {name!r}; known: {', '.join(datasets)}")
    entry, dest = datasets[name], dest or cache_dir()
    if "manual" in entry:
        expected = "; ".join(f"{item['path']} sha256 {item['sha256']}" for item in entry["files"])
        raise DataError(
            f"{name} cannot be fetched: {entry['manual'].replace('<dest>', str(dest))} Expected: "
            f"{expected}"
        )
    paths = []
    with folder_lock(dest, "data fetch"):  # two fetches into one folder would race
        for item in entry["files"]:
            path = dest / item["path"]
            if path.is_file() and file_sha256(path) == item["sha256"]:
                logger.info("%s is already there, verified", path)
            else:
                download(
                    item["url"],
                    path,
                    item["sha256"],
                    item.get("size"),
                    progress=progress(item["path"]) if progress else None,
                    **options,
                )
            paths.append(path)
    return paths


@dataclass(frozen=True)
class FileStatus:
    """Where one file of a data set was found: `path` None if nowhere; `where` the root's kind
    (`DPDL_DATA_DIR` or `cache`); `verified` whether its sha256 is the manifest's for that
    layout (None where the manifest has none)."""

    dataset: str
    relative: str
    path: Path | None
    where: str | None
    size: int | None
    verified: bool | None


def survey(datasets: dict[str, dict[str, Any]] | None = None) -> list[FileStatus]:
    """Every file of every data set: the first of its layouts found in the data roots (in the order
    loaders search them), its size and whether its sha256 matches."""
    datasets = datasets if datasets is not None else manifest()
    roots = data_roots()
    found = []
    for name, entry in datasets.items():
        for item in entry["files"]:
            layouts = [item, *item.get("alternatives", [])]
            hit = next(
                (
                    (what, root / layout["path"], layout)
                    for what, root in roots
                    for layout in layouts
                    if (root / layout["path"]).is_file()
                ),
                None,
            )
            if hit is None:
                found.append(FileStatus(name, item["path"], None, None, None, None))
                continue
            what, path, layout = hit
            verified = (
                None if layout.get("sha256") is None else file_sha256(path) == layout["sha256"]
            )
            found.append(
                FileStatus(name, layout["path"], path, what, path.stat().st_size, verified)
            )
    return found
