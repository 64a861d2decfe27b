"""Child processes of the library: one start method for the reproduction pools, the demo and the
runtime's local agents."""

from __future__ import annotations

import multiprocessing

__all__ = ["PRELOAD", "worker_context"]

#: Modules the fork server imports once, so that every child starts with torch and dpdl loaded:
#: importing them costs about 4.5 s a process here, more than many reproduction jobs take, and
#: the reproduction pools are replaced every few dozen jobs. Each module whose functions children
#: run is named (the packages import their submodules lazily), and so is dp_accounting, which dpdl
#: imports only where example-level accounting runs, in the children.
PRELOAD = ["dpdl.experiments.reproduce", "dpdl.experiments.demo", "dpdl.runtime.launch", "dp_accounting"]


def worker_context() -> multiprocessing.context.BaseContext:
    """Start method of child processes: ``forkserver`` with :data:`PRELOAD` imported. Plain ``fork``
    copies a parent whose BLAS / torch thread pools may hold locks, and the children then hang
    (seen under pytest); the fork server imports in one thread and forks before any pool starts.

    The preload list takes effect when a process first starts its fork server, which then serves
    every later child of that process.
    """
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    return context
