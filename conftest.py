"""Test data for both suites (``tests/``, the library's, and ``reproductions/tests/``): the
real-data slices in ``tests/data`` unless you point ``DPDL_DATA_DIR`` elsewhere.

Set before anything imports dpdl (pytest imports this file first), and inherited by the worker
processes the reproductions start. With the slices the user cache is set aside too
(``DPDL_CACHE_DIR`` to a folder that does not exist), so that the tests read the same files on every
machine. Tests marked ``full_data`` need the full data sets and run only when ``DPDL_DATA_DIR`` was
set to a folder holding them (``dpdl data fetch``, see ``dpdl data list``).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

SLICES = Path(__file__).resolve().parent / "tests" / "data"
FULL_DATA = (
    bool(os.environ.get("DPDL_DATA_DIR")) and Path(os.environ["DPDL_DATA_DIR"]).resolve() != SLICES
)
if not FULL_DATA:
    os.environ["DPDL_DATA_DIR"] = str(SLICES)
    os.environ["DPDL_CACHE_DIR"] = str(SLICES / "no-cache")


#: How logging of the ``dpdl`` logger was before any test ran (no handler: a program that imports
#: dpdl decides where records go).
_LOGGER = logging.getLogger("dpdl")
_BEFORE = (list(_LOGGER.handlers), _LOGGER.level, os.environ.get("DPDL_LOG_LEVEL"))


@pytest.fixture(autouse=True)
def _dpdl_logging_as_it_was():
    """Undo what ``dpdl.cli.main`` sets up for logging (a stderr handler and a level on the ``dpdl``
    logger, the level in ``DPDL_LOG_LEVEL``), so that tests calling it leave no trace in the next:
    restored to the state before the whole session, since a module-scoped fixture that runs the
    CLI sets it up before a test's own snapshot could be taken."""
    yield
    handlers, level, env = _BEFORE
    _LOGGER.handlers[:] = handlers
    _LOGGER.setLevel(level)
    if env is None:
        os.environ.pop("DPDL_LOG_LEVEL", None)
    else:
        os.environ["DPDL_LOG_LEVEL"] = env


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if FULL_DATA:
        return
    skip = pytest.mark.skip(
        reason="needs the full data sets: set DPDL_DATA_DIR to a folder holding them "
        "(see 'dpdl data list')"
    )
    for item in items:
        if "full_data" in item.keywords:
            item.add_marker(skip)
