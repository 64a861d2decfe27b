"""The test files of the library (`tests/`) and of the reproductions (`reproductions/tests/`) have
unique file names: pytest imports a test file without an `__init__.py` beside it under its bare
name (the `prepend` import mode), so two `test_x.py` in one session (`make test`, or the full-data
lane, which collects both trees) fail to collect with "import file mismatch"."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_test_file_names_are_unique_across_both_suites() -> None:
    places: dict[str, list[str]] = defaultdict(list)
    for tree in (ROOT / "tests", ROOT / "reproductions" / "tests"):
        for path in tree.rglob("test_*.py"):
            places[path.name].append(str(path.relative_to(ROOT)))
    assert places, "no test files found"
    repeated = {name: paths for name, paths in places.items() if len(paths) > 1}
    assert not repeated, f"test files share a name: {repeated}"
