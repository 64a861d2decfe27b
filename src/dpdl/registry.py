"""Open registries: name -> entry, with a one-line help and a target imported on first use.

Each kind of named thing the command line offers (mechanisms, tasks, graph sources, mixing rules,
threat models) has one [`Registry`][dpdl.registry.Registry], declared in
[`dpdl.choices`][dpdl.choices]. A built-in entry names its target by import path
(`"dpdl.mechanisms.registry:_ldp"`), so listing the names and their help (`dpdl --help`) imports
nothing heavy; the target is imported when first used. Code outside the package registers its own
with the decorator:

```python
from dpdl.choices import MECHANISM_REGISTRY

@MECHANISM_REGISTRY.register("my-mechanism", help="what it is, in one line")
def build(graph, weights, calibration, options): ...
```

A name may be a template with one `<parameter>` (`colluding-<q>`, `gnutella-<k>`): it matches any
name with text in place of the parameter, and [`Registry.match`][dpdl.registry.Registry.match]
returns that text.

Plugins: [`load_plugins`][dpdl.registry.load_plugins] imports the modules named by the environment
variable `DPDL_PLUGINS` (comma-separated module names importable on `sys.path`, or `.py` file paths)
and the entry points of group `dpdl.plugins`; the command line calls it before it builds its parser,
so what they register is in `dpdl train --help` and accepted as a choice.

Standard library only (and [`dpdl.errors`][dpdl.errors]).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from dpdl.errors import ConfigError, DpdlError

__all__ = ["PLUGINS_ENV", "PLUGIN_GROUP", "Entry", "Registry", "load_plugins"]

T = TypeVar("T")

#: The environment variable naming plugin modules (comma-separated names or ``.py`` paths).
PLUGINS_ENV = "DPDL_PLUGINS"

#: The entry-point group of installed plugins (each entry point names a module to import).
PLUGIN_GROUP = "dpdl.plugins"

_PARAMETER = re.compile(r"<[^<>]+>")


@dataclass
class Entry:
    """A registered name: its one-line help and its target, an object or `"module:attribute"`."""

    name: str
    help: str
    target: Any

    @property
    def loaded(self) -> bool:
        """Whether the target is an object already (not an import path still to import)."""
        return not isinstance(self.target, str)

    def load(self) -> Any:
        """The target, imported on first use."""
        if isinstance(self.target, str):
            module, _, attribute = self.target.partition(":")
            obj: Any = importlib.import_module(module)
            for part in attribute.split("."):
                obj = getattr(obj, part)
            self.target = obj
        return self.target


class Registry:
    """Names of one kind (`kind`, as error messages say it) and what each stands for.

    `error`: the exception class an unknown name raises ([`ConfigError`][dpdl.errors.ConfigError]
    unless given); its message lists the known names.
    """

    def __init__(self, kind: str, error: type[DpdlError] = ConfigError) -> None:
        self.kind = kind
        self.error = error
        self._entries: dict[str, Entry] = {}

    def add(self, name: str, target: Any, help: str = "", *, replace: bool = False) -> Entry:
        """Register `target` (an object, or `"module:attribute"` to import on first use) as
        `name`; a name already taken is an error unless `replace`."""
        if not name or len(_PARAMETER.findall(name)) > 1:
            raise ConfigError(f"a {self.kind} name is non-empty with at most one <parameter>")
        if name in self._entries and not replace:
            raise ConfigError(
                f"{self.kind} {name!r} is registered already (register it with replace=True to "
                "replace it)"
            )
        entry = Entry(name, help, target)
        self._entries[name] = entry
        return entry

    def register(self, name: str, help: str = "", *, replace: bool = False) -> Callable[[T], T]:
        """Decorator: register the decorated object as `name` (see
        [`add`][dpdl.registry.Registry.add])."""

        def decorate(target: T) -> T:
            self.add(name, target, help, replace=replace)
            return target

        return decorate

    def unregister(self, name: str) -> None:
        """Forget `name` (a test's or a plugin's own entry)."""
        self.entry(name)
        del self._entries[name]

    def names(self) -> tuple[str, ...]:
        """The registered names, in order of registration (templates as written)."""
        return tuple(self._entries)

    def helps(self) -> dict[str, str]:
        """Name -> one-line help, in order of registration."""
        return {name: entry.help for name, entry in self._entries.items()}

    def described(self) -> str:
        """`name: help` of every entry, `;`-separated (an option's help lists them so)."""
        return "; ".join(f"{name}: {what}" for name, what in self.helps().items())

    def match(self, name: str) -> tuple[Entry, str | None]:
        """The entry `name` is (exactly, else by a template), with the template's parameter text
        (`None` for an exact name); a name not registered yet loads the plugins
        ([`load_plugins`][dpdl.registry.load_plugins]) before it is refused: an unknown name
        raises `error` listing the known ones."""
        found = self._find(name)
        if found is None and load_plugins():
            found = self._find(name)
        if found is None:
            raise self.error(f"unknown {self.kind} {name!r}; known: {', '.join(self._entries)}")
        return found

    def _find(self, name: str) -> tuple[Entry, str | None] | None:
        if name in self._entries:
            return self._entries[name], None
        for key, entry in self._entries.items():
            if (found := _PARAMETER.search(key)) is not None:
                prefix, suffix = key[: found.start()], key[found.end() :]
                if (
                    len(name) > len(prefix) + len(suffix)
                    and name.startswith(prefix)
                    and name.endswith(suffix)
                ):
                    return entry, name[len(prefix) : len(name) - len(suffix)]
        return None

    def entry(self, name: str) -> Entry:
        """The entry `name` is (see [`match`][dpdl.registry.Registry.match])."""
        return self.match(name)[0]

    def get(self, name: str) -> Any:
        """The target registered as `name`, imported on first use."""
        return self.entry(name).load()

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        try:
            self.match(name)
        except DpdlError:
            return False
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {list(self._entries)})"


_loaded = False


def load_plugins(*, force: bool = False) -> list[str]:
    """Import the plugins (`DPDL_PLUGINS`, then the `dpdl.plugins` entry points) once; returns
    what was imported. A plugin that fails to import is a
    [`ConfigError`][dpdl.errors.ConfigError]."""
    global _loaded
    if _loaded and not force:
        return []
    _loaded = True
    done = []
    for spec in filter(None, (s.strip() for s in os.environ.get(PLUGINS_ENV, "").split(","))):
        _import_plugin(spec)
        done.append(spec)
    for point in _entry_points():
        try:
            point.load()
        except Exception as error:  # a broken plugin is named, whatever it raised
            raise ConfigError(f"plugin entry point {point.name!r} failed: {error}") from error
        done.append(point.value)
    return done


def _import_plugin(spec: str) -> None:
    try:
        if spec.endswith(".py") or os.sep in spec or "/" in spec:
            path = Path(spec)
            if not path.is_file():
                raise ConfigError(f"{PLUGINS_ENV}: no plugin file {spec}")
            name = f"dpdl_plugin_{path.stem}"
            module_spec = importlib.util.spec_from_file_location(name, path)
            if module_spec is None or module_spec.loader is None:
                raise ConfigError(f"{PLUGINS_ENV}: cannot import {spec}")
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[name] = module
            module_spec.loader.exec_module(module)
        else:
            importlib.import_module(spec)
    except ConfigError:
        raise
    except Exception as error:  # a broken plugin is named, whatever it raised
        raise ConfigError(f"{PLUGINS_ENV}: plugin {spec!r} failed to import: {error}") from error


def _entry_points() -> list[Any]:
    """The `dpdl.plugins` entry points of the installed distributions.

    `importlib.metadata` takes 30 ms to import and more to read every distribution, half of
    `dpdl --help`: it is used only where a distribution's `entry_points.txt` on `sys.path`
    names the group (a scan of the folders, about a millisecond)."""
    if not _declares_plugins():
        return []
    from importlib.metadata import entry_points

    return list(entry_points(group=PLUGIN_GROUP))


def _declares_plugins() -> bool:
    """Whether an installed distribution's `entry_points.txt` has a `[dpdl.plugins]` section."""
    section = f"[{PLUGIN_GROUP}]"
    for folder in sys.path:
        try:
            entries = list(os.scandir(folder or "."))
        except OSError:
            continue
        for entry in entries:
            if entry.name.endswith((".dist-info", ".egg-info")):
                try:
                    text = Path(entry.path, "entry_points.txt").read_text(errors="replace")
                except OSError:
                    continue
                if section in text:
                    return True
    return False
