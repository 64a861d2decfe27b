"""Child processes of the library: one start method for the reproduction pools, the demo and the
runtime's local agents, and one log level for all of them.

A child started from the fork server is a copy of the server, not of its parent: it has neither
the parent's logging handlers nor (when the server started earlier) the parent's current
environment. So each child process records the parent's `dpdl.logs.LEVEL_ENV` when it is
created and, before running its target, sets up logging at that level
(`dpdl.logs.configure`): `dpdl -v reproduce ...` shows its workers' INFO records too.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.context
import os
from typing import Any

from dpdl.logs import LEVEL_ENV, configure_from_env

__all__ = ["PRELOAD", "worker_context"]

#: Modules the fork server imports once, so that every child starts with torch and dpdl loaded:
#: importing them costs about 4.5 s a process here, more than many grid jobs take, and the pools of
#: the executors are replaced every few dozen jobs. Each module whose functions children run is
#: named (the packages import their submodules lazily; an executor adds the module of the jobs'
#: function, :func:`worker_context`), and so is dp_accounting, which dpdl imports only where
#: example-level accounting runs, in the children.
PRELOAD = [
    "dpdl.experiments.demo",
    "dpdl.runtime.launch",
    "dp_accounting",
]


def worker_context(*modules: str) -> multiprocessing.context.BaseContext:
    """Start method of child processes: `forkserver` with `PRELOAD` and `modules` (the
    module of the function the children run: a sweep's, a plugin's reproduction) imported. Plain
    `fork` copies a parent whose BLAS / torch thread pools may hold locks, and the children then
    hang (seen under pytest); the fork server imports in one thread and forks before any pool
    starts.

    The preload list takes effect when a process first starts its fork server, which then serves
    every later child of that process.
    """
    context = _Context()
    context.set_forkserver_preload([*PRELOAD, *(m for m in modules if m not in PRELOAD)])
    return context


class _Process(multiprocessing.context.ForkServerProcess):
    """A fork-server process that takes its parent's log level along (`dpdl.logs`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._log_level = os.environ.get(LEVEL_ENV)  # in the parent, pickled with the process

    def run(self) -> None:
        if self._log_level is not None:
            os.environ[LEVEL_ENV] = self._log_level
            configure_from_env()
        _one_thread()
        super().run()


def _one_thread() -> None:
    """Give torch one thread in a child: the library starts about one child per core (pools of
    jobs, the runtime's agents), and torch's default of a thread per core in every child makes its
    thread pools spin against each other (the engine computes in torch)."""
    import torch  # preloaded by the fork server: no import cost here

    torch.set_num_threads(1)


class _Context(multiprocessing.context.ForkServerContext):
    """The `forkserver` start method, with `_Process` as its process class (which
    `ProcessPoolExecutor` and `Process` both use)."""

    Process = _Process
