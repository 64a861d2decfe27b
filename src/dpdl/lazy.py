"""Lazy exports of a package (PEP 562): `from dpdl.tasks import build_task` imports
[`dpdl.tasks.catalog`][dpdl.tasks.catalog] (and torch) when the name is first asked for, not when
anything of the package is imported.

Packages whose submodules pull in torch, matplotlib or the other slow libraries use it, so that
importing one light submodule ([`dpdl.tasks.partition`][dpdl.tasks.partition],
`dpdl.attacks.membership`) does not import its heavy siblings through the package's `__init__`.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: Mapping[str, tuple[str, ...]]
) -> tuple[list[str], Callable[[str], object], Callable[[], list[str]]]:
    """`__all__`, `__getattr__` and `__dir__` of `package`, which exports the names
    `exports[module]` of each of its submodules `module` (relative, e.g. `"catalog"`), or of
    a module of a lower layer that it re-exports (absolute, `"dpdl...."`).

    A name is imported from its submodule on first access and then kept on the package, so later
    accesses are plain attribute lookups.
    """
    where = {
        name: module if module.startswith("dpdl.") else f"{package}.{module}"
        for module, names in exports.items()
        for name in names
    }

    def __getattr__(name: str) -> object:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where[name]), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return list(where), __getattr__, __dir__
