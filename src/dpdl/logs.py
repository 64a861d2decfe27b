"""How dpdl's log records reach the terminal: one handler, set up by the command line alone.

The library logs through `logging.getLogger(__name__)` and never prints; a program that imports
dpdl decides where the records go. The `dpdl` command (and the child processes it starts) call
`configure`: one handler on the `dpdl` logger that writes `dpdl: level: message` lines
to stderr, at the level of `-v` / `-q` (default WARNING).

Child processes inherit the level through the environment variable `LEVEL_ENV`, which
`configure` sets: the fork-server children of `dpdl.processes.worker_context` (the
reproduction and demo pools, the local agents of `dpdl run-local`) take it along and call
`configure_from_env` first; agents started by `torchrun` run `dpdl run-agent`, whose
`main` reads it when given no `-v` / `-q`.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

__all__ = [
    "FORMAT",
    "LEVEL_ENV",
    "configure",
    "configure_from_env",
    "env_level",
    "level_from_flags",
]

#: Environment variable that carries the log level (a name: ``DEBUG``, ``INFO``, ``WARNING``,
#: ``ERROR``) from the command line to the processes it starts.
LEVEL_ENV = "DPDL_LOG_LEVEL"

#: One line per record, like the command line's ``dpdl: error: ...`` lines.
FORMAT = "dpdl: %(levelname)s: %(message)s"


class _Stderr(logging.StreamHandler):
    """A handler writing to whatever `sys.stderr` is when a record comes (as
    `logging.lastResort` does), so that a replaced stderr (pytest's capture) gets the records."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self):  # noqa: ANN201 (a text stream)
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:  # noqa: ANN001 (logging.StreamHandler sets it in __init__)
        pass


class _Format(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        name = record.levelname
        record.levelname = name.lower()
        try:
            return super().format(record)
        finally:
            record.levelname = name


def level_from_flags(verbose: int, quiet: bool) -> int:
    """The level for `-v` given `verbose` times and `-q`: ERROR when quiet, else WARNING,
    INFO, DEBUG for 0, 1, 2+ `-v`."""
    if quiet:
        return logging.ERROR
    return (logging.WARNING, logging.INFO, logging.DEBUG)[min(verbose, 2)]


def configure(level: int) -> None:
    """Send the `dpdl` logger's records at `level` and above to stderr, one line each, and pass
    the level on to child processes (`LEVEL_ENV`). Calling it again replaces the handler.
    Above WARNING (`-q`), Python warnings are ignored too: errors only."""
    logger = logging.getLogger("dpdl")
    for handler in [h for h in logger.handlers if isinstance(h, _Stderr)]:
        logger.removeHandler(handler)
    handler = _Stderr()
    handler.setFormatter(_Format(FORMAT))
    logger.addHandler(handler)
    logger.setLevel(level)
    os.environ[LEVEL_ENV] = logging.getLevelName(level)
    if level > logging.WARNING:
        warnings.simplefilter("ignore")


def env_level() -> int | None:
    """The level `LEVEL_ENV` names, or None when it is unset or names no level."""
    name = os.environ.get(LEVEL_ENV, "").strip().upper()
    level = logging.getLevelName(name) if name else None
    return level if isinstance(level, int) else None


def configure_from_env() -> None:
    """In a child process: `configure` at the level the parent passed on, if it passed one
    (a process started outside the command line keeps Python's defaults)."""
    level = env_level()
    if level is not None:
        configure(level)
