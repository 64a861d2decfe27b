"""Optional dependencies: import one where a feature needs it, or say which extra installs it.

The core install (numpy, scipy, networkx, torch, dp-accounting, scikit-learn, matplotlib, tqdm)
runs every mechanism, task and reproduction that needs no convex solver and no cryptography.
Two parts are extras (`pyproject.toml`): `dpdl[solvers]` (cvxpy, for CorN-DSGD's coalition
program (10) and the solvers' independent checks) and `dpdl[runtime]` (cryptography, for the
peer-to-peer runtime's key agreement and message tags).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from dpdl.errors import MissingDependencyError

__all__ = ["require"]


def require(module: str, extra: str, feature: str) -> ModuleType:
    """`module` imported, or a [`MissingDependencyError`][dpdl.errors.MissingDependencyError]
    naming `feature` and the extra that installs it (`pip install 'dpdl[extra]'`)."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        top = module.split(".")[0]
        if error.name is None or error.name.split(".")[0] != top:
            # the module exists but one of its own imports failed: a real bug, not a missing extra
            raise
        raise MissingDependencyError(
            f"{feature} needs {top}, which is not installed; install it with: pip install "
            f"'dpdl[{extra}]'"
        ) from None
