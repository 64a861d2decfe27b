"""A sweep file: the grid of training runs ``dpdl sweep`` runs, in TOML::

    [base]                      # fixed settings: the keys of `dpdl train --config`
    task = "logreg-a9a"
    steps = 2000

    [sweep]                     # every list is an axis; the axes are crossed
    mechanism = ["ldp", "decor", "whisper"]
    eps = [1, 3, 10]
    seed = [0, 1, 2]
    zip = [["eps", "steps"]]    # optional: these axes move together (equal lengths), not crossed
    tune = "test_loss"          # optional: a step-size search, see Tune

    [resources]                 # optional: what each run declares to Ray (default 1 CPU, 0 GPU)
    cpus = 1
    gpus = 0

The keys are the long options of ``dpdl train`` (``batch-size`` or ``batch_size``), read and
checked by the same code as ``dpdl train --config`` (:mod:`dpdl.experiments.replay`): the same
types, choices and ranges, and an error that names the file, the line and the key. Each point is a
:class:`~dpdl.jobspec.config.TrainConfig`; every seed of a point is a run of its own (one row of
the table), so that the summary can put intervals over seeds.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpdl.choices import MECHANISM_REGISTRY
from dpdl.errors import ConfigError
from dpdl.experiments.replay import (
    key_line,
    option_actions,
    parse_set,
    read_toml,
    resolve_key,
    typed_value,
)
from dpdl.jobspec.config import TrainConfig
from dpdl.settings import add_arguments, from_options, to_options

__all__ = ["Axis", "Sweep", "Tune", "read_sweep"]

TABLES = ("base", "sweep", "resources")
GOALS = ("min", "max")


@dataclass(frozen=True)
class Axis:
    """One axis of the grid: the options ``keys`` (option ``dest``s; several when zipped) and
    their ``values``, one tuple per position."""

    keys: tuple[str, ...]
    values: tuple[tuple[Any, ...], ...]


@dataclass(frozen=True)
class Tune:
    """A step-size search: of the runs that differ only in the ``over`` options (default the step
    size ``lr``) and the seed, the summary keeps the setting whose mean ``metric`` over seeds is
    best (``goal`` min or max; a diverged run is the worst), as the papers tune each method. In
    the file: ``tune = "test_loss"`` or ``tune = {metric = "test_accuracy", goal = "max",
    over = ["lr", "clip"]}``."""

    metric: str
    over: tuple[str, ...] = ("lr",)
    goal: str = "min"


@dataclass(frozen=True)
class Sweep:
    """A sweep file read and checked: the fixed options, the axes, the search, the resources."""

    base: dict[str, Any]
    axes: tuple[Axis, ...]
    tune: Tune | None = None
    cpus: float = 1.0
    gpus: float = 0.0

    @property
    def swept(self) -> tuple[str, ...]:
        """The options that move, in the file's order (``seed`` among them when swept)."""
        return tuple(key for axis in self.axes for key in axis.keys)

    def points(self) -> list[dict[str, Any]]:
        """Every run of the grid, as the complete options (option ``dest`` -> value, as
        :func:`dpdl.settings.to_options` gives them) of a one-seed :class:`TrainConfig`: the
        defaults, then ``[base]``, then one position of every axis; each seed of a point a run of
        its own; duplicates dropped. A point that is no valid configuration raises a
        :class:`ConfigError` naming the point."""
        defaults = vars(train_parser().parse_args([]))
        runs: dict[str, dict[str, Any]] = {}
        for combination in itertools.product(*(axis.values for axis in self.axes)):
            chosen = {
                key: value
                for axis, position in zip(self.axes, combination, strict=True)
                for key, value in zip(axis.keys, position, strict=True)
            }
            values = {**defaults, **self.base, **chosen}
            try:
                config = from_options(TrainConfig, values)
            except ConfigError as error:
                raise ConfigError(f"sweep point {chosen}: {error}") from None
            for seed in config.seeds:
                options = to_options(config) | {"seed": [seed]}
                runs.setdefault(repr(sorted(options.items())), options)
        return list(runs.values())


def train_parser() -> argparse.ArgumentParser:
    """A parser of the settings of a training run, as ``dpdl train`` has them (without its output
    options): what a sweep file's keys are checked against."""
    parser = argparse.ArgumentParser(add_help=False)
    add_arguments(parser, TrainConfig)
    return parser


class _File:
    """Where a sweep file's keys are, for error messages naming file, line and key."""

    def __init__(self, path: Path, text: str) -> None:
        self.path, self.text = path, text

    def where(self, key: str, table: str | None = None) -> str:
        line = key_line(self.text, key, table)
        return f"{self.path}:{line}" if line else str(self.path)


def _value(action: argparse.Action, value: Any, where: str) -> Any:
    """``value`` of option ``action`` checked as ``dpdl train --config`` checks it; a mechanism
    against the registry too (its option is open, so argparse has no choices to check it by),
    so that a misspelt one fails here, not in every point that names it."""
    value = typed_value(action, value, where)
    if action.dest == "mechanism" and value != "none" and value not in MECHANISM_REGISTRY:
        known = ", ".join(("none", *MECHANISM_REGISTRY.names()))
        raise ConfigError(f"{where}: expected one of {known}, got {value!r}")
    return value


def _axis_values(
    action: argparse.Action, key: str, value: Any, where: str
) -> tuple[tuple[Any, ...], ...]:
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{where}: {key}: an axis is a non-empty list of values, got {value!r}")
    return tuple((_value(action, item, f"{where}: {key}"),) for item in value)


def _zip_groups(value: Any, where: str) -> list[list[str]]:
    """The ``zip`` entry: one list of keys, or a list of such lists."""
    groups = (
        value if isinstance(value, list) and all(isinstance(g, list) for g in value) else [value]
    )
    for group in groups:
        if not (
            isinstance(group, list) and len(group) >= 2 and all(isinstance(k, str) for k in group)
        ):
            raise ConfigError(
                f"{where}: zip: expected a list of two or more keys of [sweep] (or a list of such "
                f"lists), got {value!r}"
            )
    return groups


def _zipped(
    axes: dict[str, tuple[tuple[Any, ...], ...]],
    groups: list[list[str]],
    actions: dict[str, argparse.Action],
    where: str,
) -> list[Axis]:
    """The axes of ``axes`` (by dest), those of each zip group paired into one, in file order."""
    dests = [[resolve_key(actions, key, where).dest for key in group] for group in groups]
    grouped: dict[str, list[str]] = {}
    for keys, group in zip(dests, groups, strict=True):
        for dest, key in zip(keys, group, strict=True):
            if dest not in axes:
                raise ConfigError(f"{where}: zip: {key!r} is not an axis of [sweep]")
            if dest in grouped:
                raise ConfigError(f"{where}: zip: {key!r} is in two zip groups")
            grouped[dest] = keys
        lengths = {dest: len(axes[dest]) for dest in keys}
        if len(set(lengths.values())) > 1:
            raise ConfigError(
                f"{where}: zip: the zipped axes must have equal lengths, got "
                + ", ".join(f"{dest} {length}" for dest, length in lengths.items())
            )
    result, done = [], set()
    for dest in axes:
        if dest in done:
            continue
        keys = grouped.get(dest, [dest])
        done.update(keys)
        positions = zip(*(axes[key] for key in keys), strict=True)
        result.append(
            Axis(tuple(keys), tuple(tuple(v for (v,) in position) for position in positions))
        )
    return result if axes else [Axis((), ((),))]


def _tune(value: Any, actions: dict[str, argparse.Action], axes: set[str], where: str) -> Tune:
    if isinstance(value, str):
        value = {"metric": value}
    if not isinstance(value, dict) or not isinstance(value.get("metric"), str):
        raise ConfigError(
            f'{where}: tune: expected a metric name ("test_loss") or a table {{metric = ..., '
            f"goal = ..., over = [...]}}, got {value!r}"
        )
    unknown = set(value) - {"metric", "goal", "over"}
    if unknown:
        raise ConfigError(f"{where}: tune: unknown key(s) {', '.join(sorted(unknown))}")
    goal = value.get("goal", "min")
    if goal not in GOALS:
        raise ConfigError(f"{where}: tune: goal is 'min' or 'max', got {goal!r}")
    over = value.get("over", ["lr"])
    over = [over] if isinstance(over, str) else over
    dests = tuple(resolve_key(actions, key, f"{where}: tune").dest for key in over)
    missing = [dest for dest in dests if dest not in axes]
    if missing or not dests:
        raise ConfigError(
            f"{where}: tune: searches over axes of [sweep]; not swept: {', '.join(missing) or '-'}"
        )
    return Tune(value["metric"], dests, goal)


def _resources(table: Any, file: _File) -> tuple[float, float]:
    if not isinstance(table, dict):
        raise ConfigError(f"{file.where('resources')}: [resources] must be a table")
    amounts = {"cpus": 1.0, "gpus": 0.0}
    for key, value in table.items():
        where = f"{file.where(key, 'resources')}: {key}"
        if key not in amounts:
            raise ConfigError(f"{where}: unknown resource; known: cpus, gpus")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ConfigError(f"{where}: expected a number >= 0, got {value!r}")
        amounts[key] = float(value)
    return amounts["cpus"], amounts["gpus"]


def read_sweep(path: Path, assignments: Sequence[str] = ()) -> Sweep:
    """The sweep file ``path`` checked, with the ``--set`` ``assignments`` on top:
    ``key=value`` fixes an option (replacing its axis, if it has one), ``sweep.key=[...]`` sets an
    axis. Raises :class:`ConfigError` naming the file, line and key of what is wrong."""
    text, data = read_toml(path, "sweep file")
    file = _File(path, text)
    for table in data:
        if table not in TABLES or not isinstance(data[table], dict):
            raise ConfigError(
                f"{file.where(table)}: {table}: a sweep file has the tables "
                f"{', '.join(f'[{name}]' for name in TABLES)}, not {table!r}"
            )
    actions = option_actions(train_parser())
    base: dict[str, Any] = {}
    for key, value in data.get("base", {}).items():
        where = file.where(key, "base")
        action = resolve_key(actions, key, where)
        base[action.dest] = _value(action, value, f"{where}: {key}")
    sweep = dict(data.get("sweep", {}))
    special = {
        name: (sweep.pop(name), file.where(name, "sweep"))
        for name in ("zip", "tune")
        if name in sweep
    }
    axes: dict[str, tuple[tuple[Any, ...], ...]] = {}
    for key, value in sweep.items():
        where = file.where(key, "sweep")
        action = resolve_key(actions, key, where)
        if action.dest in base:
            raise ConfigError(
                f"{where}: {key}: set in [base] too ({file.where(key, 'base')}); keep one"
            )
        axes[action.dest] = _axis_values(action, key, value, where)
    fixed: set[str] = set()  # axes that --set fixed: they leave their zip group
    for assignment in assignments:
        key, value = parse_set(assignment)
        name = key.removeprefix("sweep.")
        action = resolve_key(actions, name, f"--set {assignment!r}")
        if key.startswith("sweep."):
            axes[action.dest] = _axis_values(action, name, value, "--set")
            base.pop(action.dest, None)
        else:
            base[action.dest] = _value(action, value, f"--set {key}")
            if axes.pop(action.dest, None) is not None:
                fixed.add(action.dest)
    value, where = special.get("zip", ([], str(path)))
    groups = [
        [key for key in group if resolve_key(actions, key, where).dest not in fixed]
        for group in (_zip_groups(value, where) if value else [])
    ]
    grid = _zipped(axes, [group for group in groups if len(group) > 1], actions, where)
    tune = None
    if "tune" in special:
        value, where = special["tune"]
        tune = _tune(value, actions, set(axes), where)
    cpus, gpus = _resources(data.get("resources", {}), file)
    return Sweep(base, tuple(grid), tune, cpus, gpus)
