"""Sweeps: a grid of training runs described once in a TOML file (`spec`), run on an
executor through the cache the reproductions use (`run`), summarised over seeds with
t-intervals (`summary`): `dpdl sweep FILE`.

The names are imported on first use (`dpdl.lazy`): reading a sweep file (`--dry-run`)
imports neither torch nor matplotlib.
"""

from dpdl.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "spec": ("Axis", "Sweep", "Tune", "read_sweep"),
        "run": ("SweepResult", "run_point", "run_sweep"),
        "summary": ("summarise", "t_interval"),
    },
)
