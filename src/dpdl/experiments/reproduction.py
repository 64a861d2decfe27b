"""What `dpdl reproduce NAME` runs: a reproduction of a paper's figure, registered by a plugin.

dpdl is the method; the reproductions of the papers' figures and tables are a package of their own
beside it in the source tree (`reproductions/`, `dpdl-reproductions`), which registers each one in
`dpdl.choices.REPRODUCTION_REGISTRY` through the plugin entry points
([`dpdl.registry.load_plugins`][dpdl.registry.load_plugins]). This module declares what such an
entry is (`Reproduction`) and finds them; a reproduction of your own registers the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from dpdl.choices import REPRODUCTION_REGISTRY, REPRODUCTIONS_INSTALL
from dpdl.errors import ConfigError
from dpdl.experiments.executors import Executor
from dpdl.registry import load_plugins

__all__ = ["Reproduction", "reproduction", "reproductions"]


@runtime_checkable
class Reproduction(Protocol):
    """A figure or table of a paper, run again: `dpdl reproduce NAME` calls `reproduce`,
    `dpdl reproduce NAME --from-sweep DIR` calls `report_of_sweep`, `--list` shows the
    attributes."""

    #: The name ``dpdl reproduce`` takes.
    name: str
    #: One line: the paper and the figure.
    summary: str
    #: Parts of the figure that may run alone (``--parts``); empty: it runs whole.
    parts: tuple[str, ...]
    #: The parts that ``dpdl sweep NAME`` states (empty: all of it); None: it has no sweep file.
    sweep_parts: tuple[str, ...] | None

    def reproduce(
        self,
        out: Path,
        *,
        quick: bool = False,
        parts: Sequence[str] | None = None,
        executor: Executor | None = None,
        progress: bool = True,
    ) -> Path:
        """Run the grid (only `parts` of it) on `executor` into `out`, its finished runs
        cached there; write the raw runs, the figures and `REPORT.md`; return the report's
        path."""
        ...

    def report_of_sweep(
        self, folder: Path, *, quick: bool = False, out: Path | None = None
    ) -> Path:
        """Write `REPORT.md` and the figures from the runs `dpdl sweep NAME` wrote into
        `folder` (nothing is run); return the report's path."""
        ...


def reproductions() -> dict[str, Reproduction]:
    """Every installed reproduction by name, in the order registered: a
    [`ConfigError`][dpdl.errors.ConfigError] naming the package to install if none is installed."""
    _installed()
    return {name: REPRODUCTION_REGISTRY.get(name) for name in REPRODUCTION_REGISTRY}


def reproduction(name: str) -> Reproduction:
    """The reproduction registered as `name`: a [`ConfigError`][dpdl.errors.ConfigError] naming
    the known ones if there is none, and the package to install if none is installed."""
    _installed()
    return REPRODUCTION_REGISTRY.get(name)


def _installed() -> None:
    """Load the plugins; a [`ConfigError`][dpdl.errors.ConfigError] naming the package if none
    registers a reproduction."""
    load_plugins()
    if not REPRODUCTION_REGISTRY:
        raise ConfigError(f"no reproductions are installed: {REPRODUCTIONS_INSTALL}")
