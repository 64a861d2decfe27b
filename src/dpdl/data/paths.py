"""Where data files live.

Two sources: files bundled inside the package (a9a, so that ``make demo`` needs nothing else), and
the project's shared data folder ``shared/data`` (real graphs, MNIST, Adult, ...). The shared folder
is found, in order, from the ``DPDL_DATA_DIR`` environment variable, then as ``shared/data`` in the
current directory or any of its parents, then beside the package's source tree.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from dpdl.errors import DataError

__all__ = ["bundled_file", "shared_data_dir", "shared_data_file"]


def bundled_file(relative: str) -> Path:
    """Path of a data file shipped inside the ``dpdl.data`` package."""
    path = Path(str(resources.files("dpdl.data").joinpath(relative)))
    if not path.is_file():
        raise DataError(f"bundled data file missing from the dpdl package: {relative} (reinstall dpdl)")
    return path


def _candidates() -> list[Path]:
    found: list[Path] = []
    env = os.environ.get("DPDL_DATA_DIR")
    if env:
        found.append(Path(env))
    for start in (Path.cwd().resolve(), Path(__file__).resolve().parent):
        for folder in (start, *start.parents):
            found.append(folder / "shared" / "data")
    return found


def shared_data_dir() -> Path:
    """The ``shared/data`` folder, or a :class:`DataError` naming where it was looked for."""
    candidates = _candidates()
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    raise DataError(
        "the shared data folder was not found; set DPDL_DATA_DIR to the folder holding "
        "a9a/, mnist/, facebook/, ... (looked for shared/data above the current directory)"
    )


def shared_data_file(relative: str) -> Path:
    """Path of ``relative`` inside the shared data folder, or a :class:`DataError` if missing."""
    path = shared_data_dir() / relative
    if not path.is_file():
        raise DataError(f"data file not found: {path}")
    return path
