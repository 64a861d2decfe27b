"""The reproductions' sweep files: `NAME.toml` states the runs of `dpdl reproduce NAME` (its
parts in the papers' protocol), `quick/NAME.toml` those of its `--quick` setting; registered
by name (`dpdl_reproductions.plugin`), so that `dpdl sweep NAME` runs them
anywhere, on Ray too."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from dpdl.errors import ConfigError
from dpdl.experiments.sweeps.spec import NamedSweep

__all__ = ["GRIDS", "SWEEPS", "grid_file", "named_sweeps"]

#: The folder of the sweep files (``quick/`` beside them).
GRIDS = Path(__file__).resolve().parent / "grids"


def named_sweeps() -> dict[str, NamedSweep]:
    """Every sweep file by its reproduction's name, with its `--quick` one."""
    return {
        path.stem: NamedSweep(path, GRIDS / "quick" / path.name)
        for path in sorted(GRIDS.glob("*.toml"))
    }


def grid_file(name: str, quick: bool = False) -> Path:
    """The sweep file of reproduction `name` (of its `quick` setting); a
    [`ConfigError`][dpdl.errors.ConfigError] naming those that have one if it has none."""
    path = GRIDS / ("quick" if quick else "") / f"{name}.toml"
    if not path.is_file():
        raise ConfigError(
            f"reproduction {name!r} has no sweep file; those that have one: "
            f"{', '.join(named_sweeps())}"
        )
    return path


#: The sweep files by name, the targets :mod:`dpdl_reproductions.plugin` registers.
SWEEPS = SimpleNamespace(**named_sweeps())
