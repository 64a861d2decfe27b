"""A sweep file: the grid of training runs `dpdl sweep` runs, in TOML:

```toml
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

[record]                    # optional: more columns of runs.csv than the final metrics
curves = ["test_loss"]      # each at every evaluation: test_loss_curve, a JSON list
nodes = [0]                 # agent 0's final metrics: test_loss_node0, ...
```

A figure of several panels is several grids: `[[sweep]]` tables, each a grid of its own (its
axes, `zip`, `tune`, a `label` naming the panel, and single values that fix an option for
that grid alone, e.g. `eps = 10` in the panel that sweeps p); the sweep runs their union, a run
two grids share once.

The keys are the long options of `dpdl train` (`batch-size` or `batch_size`), read and checked by
the same code as `dpdl train --config` (`dpdl.experiments.replay`): the same types, choices and
ranges, and an error that names the file, the line and the key. Each point is a
[`TrainConfig`][dpdl.jobspec.config.TrainConfig]; every seed of a point is a run of its own (one row
of the table), so that the summary can put intervals over seeds.
"""

from __future__ import annotations

import argparse
import itertools
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpdl.choices import REPRODUCTIONS_INSTALL, SWEEP_REGISTRY, mechanism_names
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
from dpdl.registry import load_plugins
from dpdl.scale import format_bytes, parse_bytes
from dpdl.settings import add_arguments, from_options, to_options

__all__ = [
    "DEFAULT",
    "Axis",
    "Grid",
    "NamedSweep",
    "Sweep",
    "Tune",
    "named_sweep_file",
    "read_sweep",
    "train_parser",
]

TABLES = ("base", "sweep", "resources", "record")
GOALS = ("min", "max")
#: The keys of a grid's table that are not options.
SPECIAL = ("zip", "tune", "label")
#: The most a run may declare to Ray: no node of a cluster has more (a larger figure is a typo,
#: and Ray would wait forever for a node that can hold it).
MAX_CPUS = 1024
MAX_GPUS = 64
MAX_MEMORY = 2.0**50
#: Options a search may not tune over, and why: the seed and the privacy budget are not settings
#: of a method but its luck and its guarantee.
NOT_TUNABLE = {
    "seed": "it would keep the luckiest seed: a seed is a replicate, and the summary's intervals "
    "are over seeds",
    "graph_seed": "it would keep the luckiest graph: a graph's seed is a replicate",
    "key_seed": "it would keep the luckiest noise: a key's seed is a replicate",
    "eps": "it would choose the largest budget (less noise always looks better), spending more "
    "privacy than the other points claim: compare the methods at each budget, an axis of its own",
    "delta": "it would spend the largest budget: the budget is what a method is compared at",
    "gdp_mu": "it would spend the largest budget: the budget is what a method is compared at",
}


@dataclass(frozen=True)
class Axis:
    """One axis of the grid: the options `keys` (option `dest`s; several when zipped) and
    their `values`, one tuple per position."""

    keys: tuple[str, ...]
    values: tuple[tuple[Any, ...], ...]


@dataclass(frozen=True)
class Tune:
    """A step-size search: of the runs that differ only in the `over` options (default the step
    size `lr`) and the seed, the one whose mean `metric` over seeds is best (`goal` min or
    max; a diverged or failed run is the worst) is the setting's, as the papers tune each method.

    In two stages, as the papers' protocols run: the search runs on the first `seeds` seeds of
    each setting (None: on all of them), then the chosen point runs on every seed. With `at`
    (options and values, e.g. `eps = 10`), the search runs once at that setting and its choice
    holds for every value of those options, where searching every point costs too much. On a tie
    the first point in the grid's order wins. In the file: `tune = "test_loss"` or `tune =
    {metric = "test_accuracy", goal = "max", over = ["lr", "clip"], seeds = 2, at = {eps = 10}}`.
    """

    metric: str
    over: tuple[str, ...] = ("lr",)
    goal: str = "min"
    seeds: int | None = None
    at: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True, eq=False)
class Grid:
    """One grid of a sweep: its axes (crossed; zipped ones move together), the options it alone
    fixes, its search, and the `label` of its panel. Each grid is itself (compared and hashed
    by identity): two grids of one file stay two panels."""

    axes: tuple[Axis, ...]
    fixed: tuple[tuple[str, Any], ...] = ()
    tune: Tune | None = None
    label: str = ""

    @property
    def swept(self) -> tuple[str, ...]:
        """The options that move, in the file's order (`seed` among them when swept)."""
        return tuple(key for axis in self.axes for key in axis.keys)

    @property
    def name(self) -> str:
        """The grid as messages name it: its label, else its table."""
        return f"[[sweep]] {self.label!r}" if self.label else "[sweep]"

    def _split(self) -> tuple[Axis | None, list[Axis]]:
        """The axis of the seeds alone (one configuration's replicates, not positions), if any,
        and the other axes."""
        seeds = next((axis for axis in self.axes if axis.keys == ("seed",)), None)
        return seeds, [axis for axis in self.axes if axis is not seeds]

    def size(self, base: dict[str, Any]) -> tuple[int, int]:
        """`(positions, runs)` of the grid without expanding it: the product of its axes'
        lengths, and the runs, every position on each of its seeds (where a zipped axis moves
        the seeds, the seeds of its values summed, times the other axes' lengths)."""
        seeds, axes = self._split()
        positions = math.prod(len(axis.values) for axis in axes)
        if seeds is not None:
            return positions, positions * sum(len(v) for (v,) in seeds.values)
        moving = next((axis for axis in axes if "seed" in axis.keys), None)
        if moving is None:
            fixed = {**base, **dict(self.fixed)}
            return positions, positions * len(fixed.get("seed") or TrainConfig.seeds)
        column = moving.keys.index("seed")
        others = math.prod(len(axis.values) for axis in axes if axis is not moving)
        return positions, others * sum(
            len(value[column] or TrainConfig.seeds) for value in moving.values
        )

    def positions(self, base: dict[str, Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
        """Every position of the grid, in the grid's order, unchecked, one at a time: the options
        that move there, and every option's value (the defaults, then `base`, then the grid's
        fixed options, then the position)."""
        defaults = vars(train_parser().parse_args([]))
        seeds, axes = self._split()
        replicates = {} if seeds is None else {"seed": [s for (v,) in seeds.values for s in v]}
        for combination in itertools.product(*(axis.values for axis in axes)):
            chosen = {
                key: value
                for axis, position in zip(axes, combination, strict=True)
                for key, value in zip(axis.keys, position, strict=True)
            }
            yield chosen, {**defaults, **base, **dict(self.fixed), **replicates, **chosen}

    def configs(self, base: dict[str, Any]) -> list[dict[str, Any]]:
        """Every position of the grid, in the grid's order, as the complete options (option
        `dest` -> value, as [`dpdl.settings.to_options`][dpdl.settings.to_options] gives them) of
        a [`TrainConfig`][dpdl.jobspec.config.TrainConfig] with all its seeds: the defaults, then
        `base`, then the grid's fixed options, then the position. A position that is no valid
        configuration raises a [`ConfigError`][dpdl.errors.ConfigError] naming it."""
        where = f"{self.name} " if self.label else ""
        return [options_of(values, chosen, where) for chosen, values in self.positions(base)]


def options_of(values: dict[str, Any], what: Any, grid: str = "") -> dict[str, Any]:
    """`values` checked as one [`TrainConfig`][dpdl.jobspec.config.TrainConfig] and given back
    complete, as [`to_options`][dpdl.settings.to_options] gives them; a
    [`ConfigError`][dpdl.errors.ConfigError] names `what` (in the grid `grid`)."""
    try:
        return to_options(from_options(TrainConfig, values))
    except ConfigError as error:
        raise ConfigError(f"{grid}sweep point {what}: {error}") from None


def runs_of(options: dict[str, Any], seeds: Sequence[int] | None = None) -> list[dict[str, Any]]:
    """The runs of a configuration's options: one per seed (of `seeds`, default its own)."""
    return [options | {"seed": [seed]} for seed in (options["seed"] if seeds is None else seeds)]


@dataclass(frozen=True)
class Sweep:
    """A sweep file read and checked: the fixed options, the grids, the resources, and what each
    run's row records besides its final metrics: the metrics `curves` at every evaluation, and
    the final metrics of the agents `nodes` (`[record]`; a paper's figure that plots a metric
    over training, or one agent's model)."""

    base: dict[str, Any]
    grids: tuple[Grid, ...]
    cpus: float = 1.0
    gpus: float = 0.0
    curves: tuple[str, ...] = ()
    nodes: tuple[int, ...] = ()
    #: Bytes of memory each run declares to Ray (None: none declared).
    memory: float | None = None

    def points(self) -> list[dict[str, Any]]:
        """Every run of every grid in full (each seed a run of its own; a run two grids share
        once), as the complete options of a one-seed
        [`TrainConfig`][dpdl.jobspec.config.TrainConfig]. With a search in two stages
        (`Tune.seeds`, `Tune.at`) only some of them run: `dpdl.experiments.sweeps.tuning` says
        which."""
        runs: dict[str, dict[str, Any]] = {}
        for grid in self.grids:
            for options in grid.configs(self.base):
                for run in runs_of(options):
                    runs.setdefault(run_key(run), run)
        return list(runs.values())


def run_key(options: dict[str, Any]) -> str:
    """A run's identity among the runs of a sweep: its options."""
    return repr(sorted(options.items()))


def train_parser() -> argparse.ArgumentParser:
    """A parser of the settings of a training run, as `dpdl train` has them (without its output
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

    def in_grid(self, key: str, index: int | None) -> str:
        """Where `key` is in the grid table `[sweep]` (`index` None) or in the
        `index`-th `[[sweep]]` table."""
        if index is None:
            return self.where(key, "sweep")
        lines = self.text.splitlines()
        headers = [n for n, line in enumerate(lines) if re.match(r"\s*\[\[\s*sweep\s*\]\]", line)]
        if index >= len(headers):
            return str(self.path)
        after = lines[headers[index] + 1 :]
        table = itertools.takewhile(lambda line: not line.lstrip().startswith("["), after)
        line = key_line("\n".join(table), key)
        return f"{self.path}:{headers[index] + 1 + line}" if line else str(self.path)


#: The value that stands for an option's default, unset where that is none: TOML has no null, and
#: an axis may need the unset value beside set ones (the task's own step size, ``lr = "default"``,
#: beside set step sizes), and a search's ``at`` may give back the default of what its grid sets
#: (lppa-parameters' runs in rounds search at a length in epochs: ``steps = "default"``).
DEFAULT = "default"


def _value(action: argparse.Action, value: Any, where: str) -> Any:
    """`value` of option `action` checked as `dpdl train --config` checks it; a mechanism
    against the registry too (its option is open, so argparse has no choices to check it by),
    so that a misspelt one fails here, not in every point that names it. `"default"` is the
    option's default (`DEFAULT`), where it is no choice of the option's own."""
    if value == DEFAULT and DEFAULT not in (action.choices or ()):
        return action.default
    value = typed_value(action, value, where)
    if action.dest == "mechanism" and value not in mechanism_names():
        known = ", ".join(mechanism_names())
        raise ConfigError(f"{where}: expected one of {known}, got {value!r}")
    return value


def _axis_values(
    action: argparse.Action, key: str, value: Any, where: str
) -> tuple[tuple[Any, ...], ...]:
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{where}: {key}: an axis is a non-empty list of values, got {value!r}")
    return tuple((_value(action, item, f"{where}: {key}"),) for item in value)


def _zip_groups(value: Any, where: str) -> list[list[str]]:
    """The `zip` entry: one list of keys, or a list of such lists."""
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
    """The axes of `axes` (by dest), those of each zip group paired into one, in file order."""
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
    if (
        not isinstance(value, dict)
        or not isinstance(value.get("metric"), str)
        or not value["metric"]
    ):
        raise ConfigError(
            f'{where}: tune: expected a metric name ("test_loss") or a table {{metric = ..., '
            f"goal = ..., over = [...], seeds = N, at = {{...}}}}, got {value!r}"
        )
    unknown = set(value) - {"metric", "goal", "over", "seeds", "at"}
    if unknown:
        raise ConfigError(f"{where}: tune: unknown key(s) {', '.join(sorted(unknown))}")
    goal = value.get("goal", "min")
    if goal not in GOALS:
        raise ConfigError(f"{where}: tune: goal is 'min' or 'max', got {goal!r}")
    over = value.get("over", ["lr"])
    over = [over] if isinstance(over, str) else over
    if not isinstance(over, list) or not all(isinstance(key, str) for key in over):
        raise ConfigError(f"{where}: tune: over is a list of options of [sweep], got {over!r}")
    dests = tuple(resolve_key(actions, key, f"{where}: tune.over").dest for key in over)
    for key, dest in zip(over, dests, strict=True):
        if dest in NOT_TUNABLE:
            raise ConfigError(
                f"{where}: tune.over: {key!r} cannot be searched over: {NOT_TUNABLE[dest]}"
            )
    if len(set(dests)) < len(dests):
        raise ConfigError(f"{where}: tune.over: {over!r} names one option twice")
    missing = [dest for dest in dests if dest not in axes]
    if missing or not dests:
        raise ConfigError(
            f"{where}: tune: searches over axes of [sweep]; not swept: {', '.join(missing) or '-'}"
        )
    seeds = value.get("seeds")
    if seeds is not None and (isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1):
        raise ConfigError(f"{where}: tune: seeds is a number of seeds >= 1, got {seeds!r}")
    at = value.get("at", {})
    if not isinstance(at, dict):
        raise ConfigError(f"{where}: tune: at is a table of options and values, got {at!r}")
    fixed = {}
    for key, item in at.items():
        action = resolve_key(actions, key, f"{where}: tune.at")
        if action.dest in dests or action.dest == "seed":
            raise ConfigError(
                f"{where}: tune.at: {key!r} is searched over or a seed, not a setting"
            )
        fixed[action.dest] = _value(action, item, f"{where}: tune.at: {key}")
    return Tune(value["metric"], dests, goal, seeds, tuple(fixed.items()))


def _amount(key: str, value: Any, where: str) -> float:
    """One resource of `[resources]`: a finite number, within what a node can have (`cpus`
    above 0, `gpus` from 0, a fraction below one or a whole number, as Ray shares them;
    `memory` in bytes, or a size such as `"4GiB"`)."""
    if key == "memory":
        size = parse_bytes(value, where) if isinstance(value, str) else value
        if (
            isinstance(size, bool)
            or not isinstance(size, (int, float))
            or not 1 <= size <= MAX_MEMORY
        ):
            raise ConfigError(
                f"{where}: expected the bytes each run may use (a number >= 1, or a size such as "
                f'"4GiB"), at most {format_bytes(MAX_MEMORY)}, got {value!r}'
            )
        return float(size)
    low, high = ("above 0", MAX_CPUS) if key == "cpus" else ("from 0", MAX_GPUS)
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not (value > 0 if key == "cpus" else value >= 0)
        or value > high
    ):
        raise ConfigError(
            f"{where}: expected a finite number {low} to {high} (what one node can have), "
            f"got {value!r}"
        )
    if key == "gpus" and value > 1 and value != int(value):
        raise ConfigError(
            f"{where}: a run shares a GPU (a fraction below 1) or holds whole ones, got {value!r}"
        )
    return float(value)


def _resources(table: Any, file: _File) -> tuple[float, float, float | None]:
    if not isinstance(table, dict):
        raise ConfigError(f"{file.where('resources')}: [resources] must be a table")
    amounts: dict[str, float | None] = {"cpus": 1.0, "gpus": 0.0, "memory": None}
    for key, value in table.items():
        where = f"{file.where(key, 'resources')}: [resources].{key}"
        if key not in amounts:
            raise ConfigError(f"{where}: unknown resource; known: cpus, gpus, memory")
        amounts[key] = _amount(key, value, where)
    return amounts["cpus"] or 1.0, amounts["gpus"] or 0.0, amounts["memory"]


def _record(table: Any, file: _File) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """The `[record]` table: `curves`, metric names; `nodes`, agent indices (>= 0)."""
    if not isinstance(table, dict):
        raise ConfigError(f"{file.where('record')}: [record] must be a table")
    recorded: dict[str, tuple[Any, ...]] = {"curves": (), "nodes": ()}
    for key, value in table.items():
        where = f"{file.where(key, 'record')}: [record].{key}"
        if key not in recorded:
            raise ConfigError(f"{where}: unknown key; known: curves, nodes")
        if key == "curves":
            valid = isinstance(value, list) and all(isinstance(v, str) and v for v in value)
            expected = 'a list of metric names, e.g. ["test_loss"]'
        else:
            valid = isinstance(value, list) and all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value
            )
            expected = "a list of agent indices >= 0, e.g. [0]"
        if not valid:
            raise ConfigError(f"{where}: expected {expected}, got {value!r}")
        if len(set(value)) < len(value):
            raise ConfigError(f"{where}: {value!r} names one entry twice")
        recorded[key] = tuple(value)
    return recorded["curves"], recorded["nodes"]


def _grid(
    table: dict[str, Any],
    index: int | None,
    base: dict[str, Any],
    assignments: list[tuple[str, Any]],
    tune_sets: dict[str, Any],
    actions: dict[str, argparse.Action],
    file: _File,
) -> Grid:
    """One grid table (`[sweep]`, or the `index`-th `[[sweep]]`) checked, with the
    `--set` `assignments` on top: `key=value` (in `base` already) replaces its axis or
    fixed value; `sweep.key=[...]` sets the axis, unless this grid fixes the option; the
    `tune_sets` (`tune.seeds=1`: `{"seeds": 1}`) replace those keys of the grid's search."""
    table = dict(table)
    path = "[sweep]" if index is None else f"[[sweep]] #{index + 1}"
    special = {
        name: (table.pop(name), file.in_grid(name, index)) for name in SPECIAL if name in table
    }
    axes: dict[str, tuple[tuple[Any, ...], ...]] = {}
    fixed: dict[str, Any] = {}
    for key, value in table.items():
        where = file.in_grid(key, index)
        action = resolve_key(actions, key, f"{where}: {path}.{key}")
        if action.dest in axes or action.dest in fixed:
            raise ConfigError(f"{where}: {path}.{key}: the option is set twice (two spellings)")
        if action.dest in base:
            raise ConfigError(
                f"{where}: {key}: set in [base] too ({file.where(key, 'base')}); keep one"
            )
        if isinstance(value, list):
            axes[action.dest] = _axis_values(action, key, value, where)
        elif index is None:
            raise ConfigError(
                f"{where}: {key}: an axis is a non-empty list of values, got {value!r} (a fixed "
                "option goes in [base], or in one [[sweep]] grid of several)"
            )
        else:
            fixed[action.dest] = _value(action, value, f"{where}: {key}")
    overridden: set[str] = set()  # axes that --set fixed: they leave their zip group
    for key, value in assignments:
        name = key.removeprefix("sweep.")
        action = resolve_key(actions, name, f"--set {key}")
        if key.startswith("sweep."):
            if action.dest not in fixed:
                axes[action.dest] = _axis_values(action, name, value, "--set")
        else:
            fixed.pop(action.dest, None)
            if axes.pop(action.dest, None) is not None:
                overridden.add(action.dest)
    value, where = special.get("zip", ([], str(file.path)))
    groups = [
        [key for key in group if resolve_key(actions, key, where).dest not in overridden]
        for group in (_zip_groups(value, where) if value else [])
    ]
    grid = _zipped(axes, [group for group in groups if len(group) > 1], actions, where)
    tune = None
    if "tune" in special:
        value, where = special["tune"]
        if tune_sets:
            value = {**({"metric": value} if isinstance(value, str) else value), **tune_sets}
            where = f"{where} (with --set tune.{', tune.'.join(tune_sets)})"
        tune = _tune(value, actions, set(axes), where)
    label, where = special.get("label", ("", ""))
    if not isinstance(label, str) or (label and not label.strip()) or "\n" in label:
        raise ConfigError(
            f"{where}: label: expected the panel's name as a string on one line, got {label!r}"
        )
    return Grid(tuple(grid), tuple(fixed.items()), tune, label)


@dataclass(frozen=True)
class NamedSweep:
    """A sweep file registered by name (`dpdl.choices.SWEEP_REGISTRY`, `dpdl sweep NAME`):
    `full` states the runs, `quick` (where there is one) those of `--quick`, with fewer seeds
    and grid points."""

    full: Path
    quick: Path | None = None


def named_sweep_file(name: str, quick: bool = False) -> Path:
    """The sweep file registered as `name` (its `quick` one): a
    [`ConfigError`][dpdl.errors.ConfigError] naming the registered ones if there is none (the
    papers' come with the reproductions' package)."""
    load_plugins()
    if not SWEEP_REGISTRY:
        raise ConfigError(
            f"no sweep file is registered as {name!r} (give the path of a sweep file); the papers' "
            f"sweep files come with their reproductions: {REPRODUCTIONS_INSTALL}"
        )
    sweep = SWEEP_REGISTRY.get(name)
    if quick and sweep.quick is None:
        raise ConfigError(f"sweep {name!r} has no --quick setting; run it without --quick")
    return sweep.quick if quick else sweep.full


def read_sweep(path: Path, assignments: Sequence[str] = ()) -> Sweep:
    """The sweep file `path` checked, with the `--set` `assignments` on top: `key=value` fixes an
    option (replacing its axis, if it has one, in every grid), `sweep.key=[...]` sets an axis (in
    every grid that does not fix the option itself), `tune.key=value` sets a key of every grid's
    search (`tune.seeds=1`). Raises [`ConfigError`][dpdl.errors.ConfigError] naming the file,
    line and key of what is wrong. The plugins are loaded first, so that the file may name what
    they register (a task, a mechanism)."""
    load_plugins()
    text, data = read_toml(path, "sweep file")
    file = _File(path, text)
    _check_tables(data, file)
    actions = option_actions(train_parser())
    base: dict[str, Any] = {}
    for key, value in data.get("base", {}).items():
        where = file.where(key, "base")
        action = resolve_key(actions, key, f"{where}: [base].{key}")
        if action.dest in base:
            raise ConfigError(f"{where}: [base].{key}: the option is set twice (two spellings)")
        base[action.dest] = _value(action, value, f"{where}: {key}")
    sets = [parse_set(assignment) for assignment in assignments]
    tune_sets = {key.removeprefix("tune."): value for key, value in sets if key.startswith("tune.")}
    sets = [(key, value) for key, value in sets if not key.startswith("tune.")]
    tables = data.get("sweep", {})
    if isinstance(tables, dict):
        grids = [_grid(tables, None, base, sets, tune_sets, actions, file)]
    else:
        grids = [
            _grid(table, k, base, sets, tune_sets, actions, file) for k, table in enumerate(tables)
        ]
    _check_labels(grids, file)
    if tune_sets and all(grid.tune is None for grid in grids):
        raise ConfigError(
            f"--set tune.{', tune.'.join(tune_sets)}: {path} has no search (tune) to change"
        )
    for key, value in sets:  # in order: the last word on an option counts
        name = key.removeprefix("sweep.")
        action = resolve_key(actions, name, f"--set {key!r}")
        if key.startswith("sweep."):
            base.pop(action.dest, None)
        else:
            base[action.dest] = _value(action, value, f"--set {key}")
    cpus, gpus, memory = _resources(data.get("resources", {}), file)
    curves, nodes = _record(data.get("record", {}), file)
    _check_runs(data, file)
    return Sweep(base, tuple(grids), cpus, gpus, curves, nodes, memory)


def _check_tables(data: dict[str, Any], file: _File) -> None:
    """The file's tables are those of a sweep file (a key outside them is named with its table's
    path, `[grid].lr`)."""
    for table, value in data.items():
        grids = table == "sweep" and isinstance(value, list)
        if table not in TABLES or not (isinstance(value, dict) or grids):
            if isinstance(value, dict):
                named = f"[{table}]" + (f".{next(iter(value))}" if value else "")
            else:
                named = f"{table} (a key outside any table)"
            raise ConfigError(
                f"{file.where(table)}: {named}: a sweep file has the tables "
                f"{', '.join(f'[{name}]' for name in TABLES)} (or several [[sweep]] grids), "
                f"not {table!r}"
            )


def _check_runs(data: dict[str, Any], file: _File) -> None:
    """The file states runs: an empty file, or one without settings in `[base]` or `[sweep]`, is
    refused rather than run as the default job; so is an empty grid beside others."""
    sweep = data.get("sweep", {})
    grids = sweep if isinstance(sweep, list) else [sweep]
    if not data.get("base") and not any(grids):
        raise ConfigError(
            f"{file.path}: the sweep file states no runs (no settings in [base] and no axis in "
            "[sweep]); an empty file is not taken as the default job: give [base] and [sweep] "
            "(docs/sweeps.md)"
        )
    if len(grids) > 1:
        for index, grid in enumerate(grids):
            if not grid:
                raise ConfigError(
                    f"{file.path}: [[sweep]] #{index + 1} is empty: a grid of several states its "
                    "axes or settings (remove it, or give it some)"
                )


def _check_labels(grids: list[Grid], file: _File) -> None:
    """Each grid's label names one panel: two grids of one label would share its summary lines
    and its panel, so a label given twice is refused."""
    first: dict[str, int] = {}
    for index, grid in enumerate(grids):
        if grid.label and grid.label in first:
            raise ConfigError(
                f"{file.in_grid('label', index)}: [[sweep]] #{index + 1}.label: {grid.label!r} "
                f"is the label of [[sweep]] #{first[grid.label] + 1} too: each grid's panel needs "
                "a label of its own"
            )
        first.setdefault(grid.label, index)
