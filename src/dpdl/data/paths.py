"""Where data files live.

Two sources: files bundled inside the package (a9a, so that `make demo` needs nothing else), and
the full data sets listed in `manifest.json` (MNIST, Adult, real graphs, ...), which are looked
up, in this order, in

1. the folder named by the `DPDL_DATA_DIR` environment variable, if set (it must be a folder);
2. the user cache folder, `DPDL_CACHE_DIR` if set, else the platform's (`~/.cache/dpdl` on
   Linux), where `dpdl data fetch NAME` writes.

Both hold the same layout, one folder per data set (`mnist/train-images-idx3-ubyte.gz`, ...).
Nothing is downloaded at run time: a missing file is one [`DataError`][dpdl.errors.DataError] that
says how to get it.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import platformdirs

from dpdl.errors import DataError
from dpdl.files import require_regular

__all__ = ["bundled_file", "cache_dir", "data_file", "data_roots", "manifest"]


def bundled_file(relative: str) -> Path:
    """Path of a data file shipped inside the `dpdl.data` package."""
    path = Path(str(resources.files("dpdl.data").joinpath(relative)))
    if not path.is_file():
        raise DataError(
            f"bundled data file missing from the dpdl package: {relative} (reinstall dpdl)"
        )
    return path


@lru_cache(maxsize=1)
def manifest() -> dict[str, dict[str, Any]]:
    """The packaged `manifest.json`: per data set, its title, licence, citation and files (path in
    the data folder, URL or None where no verifiable original exists, sha256, size, and the other
    layouts a loader also reads, with their own sha256)."""
    return json.loads(bundled_file("manifest.json").read_text())


def cache_dir() -> Path:
    """The user cache folder: `DPDL_CACHE_DIR` if set, else
    `platformdirs.user_cache_dir("dpdl")`."""
    return Path(
        os.environ.get("DPDL_CACHE_DIR") or platformdirs.user_cache_dir("dpdl")
    ).expanduser()


def data_roots() -> list[tuple[str, Path]]:
    """The folders searched for data sets, in order, each with what it is (for messages)."""
    roots = []
    env = os.environ.get("DPDL_DATA_DIR")
    if env:
        path = Path(env).expanduser()
        if not path.is_dir():
            raise DataError(
                f"DPDL_DATA_DIR={env} is not a folder; point it at the folder holding mnist/, "
                "adult/, ... or unset it"
            )
        roots.append(("DPDL_DATA_DIR", path))
    roots.append(("cache", cache_dir()))
    return roots


def data_file(dataset: str, *relatives: str) -> Path:
    """The first of `relatives` (layouts of one file, in order of preference) found in the data
    roots, searched in order; a [`DataError`][dpdl.errors.DataError] naming the data set, where
    it was looked for and how to get it if none is there."""
    roots = data_roots()
    for _, root in roots:
        for relative in relatives:
            if (root / relative).exists():  # a FIFO or a folder is refused by name, not skipped
                return require_regular(root / relative, f"data file of {dataset!r}", DataError)
    looked = " and ".join(f"{root} ({what})" for what, root in roots)
    hint = "" if "DPDL_DATA_DIR" in dict(roots) else "; or set DPDL_DATA_DIR to a folder holding it"
    raise DataError(
        f"data set {dataset!r} not found: no {' or '.join(relatives)} in {looked}; "
        f"get it with 'dpdl data fetch {dataset}'{hint}"
    )
