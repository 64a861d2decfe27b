"""The ``bad_files`` fixture of the hostile-input suite (the files are described in
``hostile_helpers``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hostile_helpers import FILES, write_special


@pytest.fixture(scope="session")
def bad_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every file of :data:`FILES` and the special ones, by key, in one session folder."""
    folder = tmp_path_factory.mktemp("hostile-files")
    paths = {}
    for key, content in FILES.items():
        suffix = ".toml" if key.startswith("toml") else ".txt"
        path = folder / f"{key}{suffix}"
        path.write_bytes(content)
        paths[key] = path
    paths.update(write_special(folder))
    return paths
