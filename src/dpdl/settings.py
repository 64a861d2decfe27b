"""Settings: dataclass fields that carry their own help text, command-line option, choices and
range, so that a run's settings are declared once and the command line, the checks and the Python
API all read that one declaration.

A settings class is a frozen dataclass whose fields are made by [`setting`][dpdl.settings.setting],
and whose `__post_init__` calls [`check_fields`][dpdl.settings.check_fields]. A field whose type is
itself a settings class is a nested group of settings
([`TrainConfig`][dpdl.jobspec.config.TrainConfig] holds [`TaskOptions`][dpdl.settings.TaskOptions],
[`DesignOptions`][dpdl.settings.DesignOptions] and
[`TrackingOptions`][dpdl.settings.TrackingOptions]); its fields are options of the command line like
the outer ones (`--partition`, not `--task-options-partition`).

- [`add_arguments`][dpdl.settings.add_arguments] adds an `argparse` option per field that has one;
- [`from_options`][dpdl.settings.from_options] builds the settings class back from the parsed
  options, generically, and [`to_options`][dpdl.settings.to_options] gives the options back from an
  instance;
- [`check_fields`][dpdl.settings.check_fields] checks every field's type, choices and range, naming
  the field.

The option classes of the layers below the job spec (tasks, mechanisms) are declared here, beside
[`dpdl.choices`][dpdl.choices], and re-exported by their homes (`dpdl.tasks.TaskOptions`,
[`dpdl.mechanisms.registry.DesignOptions`][dpdl.settings.DesignOptions],
[`dpdl.mechanisms.lppa.TrackingOptions`][dpdl.settings.TrackingOptions]): this module imports the
standard library, [`dpdl.choices`][dpdl.choices] and [`dpdl.errors`][dpdl.errors] only, so the
`dpdl` parser is built from it without importing numpy, torch or networkx.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import numbers
import os
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from dpdl.choices import (
    DECOR_SEARCH_REGISTRY,
    DISTRIBUTIONS,
    FACTORIZED_NAMES,
    IMAGE_TASKS,
    MECHANISM_NAMES,
    OBJECTIVES,
    PARTITIONS,
    START_REGISTRY,
    TASKS,
)
from dpdl.errors import ConfigError
from dpdl.registry import load_plugins

__all__ = [
    "DesignOptions",
    "Leaf",
    "Setting",
    "TaskOptions",
    "TrackingOptions",
    "add_arguments",
    "check_fields",
    "from_options",
    "leaves",
    "positive_int",
    "setting",
    "to_options",
]

_KEY = "dpdl.setting"

T = TypeVar("T")


@dataclass(frozen=True)
class Setting:
    """What a field declares besides its type and default.

    `help_text`: the option's help text, or a function giving it. `option`: its long option
    without `--` (the field name with `-` for `_` unless given). `cli`: False for a setting
    of the Python API alone, with no option. `allowed`: the values allowed, or a function giving
    them (a registry's `names`: read when the parser is built and when a value is checked, so
    names registered later count). `positive`: an integer >= 1. `group`: the help section of
    the option (`None`: the command's own options). `metavar`: the option's value in the help.
    A field without a default is a required option.
    """

    help_text: str | Callable[[], str]
    option: str | None = None
    cli: bool = True
    allowed: tuple[str, ...] | Callable[[], tuple[str, ...]] | None = None
    positive: bool = False
    group: str | None = None
    metavar: str | None = None
    interval: str | None = None
    unique: bool = False

    @property
    def help(self) -> str:
        """The help text, as of now."""
        return self.help_text() if callable(self.help_text) else self.help_text

    @property
    def choices(self) -> tuple[str, ...] | None:
        """The values allowed, as of now (`None`: any)."""
        return self.allowed() if callable(self.allowed) else self.allowed


def setting(
    default: Any = dataclasses.MISSING,
    help: str | Callable[[], str] = "",
    *,
    option: str | None = None,
    cli: bool = True,
    choices: tuple[str, ...] | Callable[[], tuple[str, ...]] | None = None,
    positive: bool = False,
    group: str | None = None,
    metavar: str | None = None,
    default_factory: Any = dataclasses.MISSING,
    interval: str | None = None,
    unique: bool = False,
) -> Any:
    """A dataclass field declared with its [`Setting`][dpdl.settings.Setting]; `cli=False`: no
    command-line option."""
    if interval is not None:
        _bounds(interval)  # a malformed interval fails where it is declared
    meta = Setting(help, option, cli, choices, positive, group, metavar, interval, unique)
    return dataclasses.field(
        default=default, default_factory=default_factory, metadata={_KEY: meta}
    )


@dataclass(frozen=True)
class Leaf:
    """One command-line option of a settings class: its field, the field's type and its
    declaration; `dest` is the option's name in the parsed namespace."""

    field: dataclasses.Field
    hint: Any
    setting: Setting

    @property
    def option(self) -> str:
        return _option(self.field, self.setting)

    @property
    def dest(self) -> str:
        return _dest(self.field, self.setting)


def _option(field: dataclasses.Field, meta: Setting) -> str:
    return meta.option or field.name.replace("_", "-")


def _dest(field: dataclasses.Field, meta: Setting) -> str:
    return _option(field, meta).replace("-", "_")


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _declared(field: dataclasses.Field) -> Setting | None:
    return field.metadata.get(_KEY)


def _optional(hint: Any) -> tuple[Any, bool]:
    """`(T, True)` for `T | None`, else `(hint, False)`."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        if len(args) == 1:
            return args[0], True
    return hint, False


def leaves(cls: type) -> Iterator[Leaf]:
    """Every command-line option of settings class `cls`, nested groups flattened, in field
    order."""
    for field in dataclasses.fields(cls):
        hint = _hints(cls)[field.name]
        if dataclasses.is_dataclass(hint):
            yield from leaves(hint)
            continue
        declared = _declared(field)
        if declared is not None and declared.cli:
            yield Leaf(field, hint, declared)


def _type_error(name: str, wanted: str, value: Any) -> ConfigError:
    return ConfigError(f"{name}: expected {wanted}, got {value!r}")


@functools.cache
def _bounds(interval: str) -> tuple[float, bool, float, bool]:
    """`(low, low included, high, high included)` of an interval written `"(0, 1]"`."""
    low, comma, high = interval[1:-1].partition(",")
    if not comma or interval[0] not in "[(" or interval[-1] not in "])":
        raise ValueError(f"malformed interval {interval!r}; write it as (0, 1] or [0, inf)")
    return float(low), interval[0] == "[", float(high), interval[-1] == "]"


def _in_interval(value: float, interval: str) -> bool:
    low, low_in, high, high_in = _bounds(interval)
    above = value >= low if low_in else value > low
    below = value <= high if high_in else value < high
    return above and below


def _check(name: str, hint: Any, meta: Setting | None, value: Any) -> Any:
    """`value` of field `name` checked against its type and declaration; lists of a tuple
    field become tuples."""
    base, optional = _optional(hint)
    if value is None:
        if optional:
            return None
        raise _type_error(name, "a value", value)
    if typing.get_origin(base) is tuple:
        if not isinstance(value, (list, tuple)):
            raise _type_error(name, "a sequence", value)
        item = typing.get_args(base)[0]
        items = tuple(_check(name, item, meta, v) for v in value)
        if meta is not None and meta.unique and len(set(items)) != len(items):
            twice = next(v for v in items if items.count(v) > 1)
            raise ConfigError(f"{name}: {twice!r} is given twice; each value may appear once")
        return items
    if dataclasses.is_dataclass(base):
        if not isinstance(value, base):
            raise _type_error(name, f"a {base.__name__}", value)
        return value
    if base is Path:
        if not isinstance(value, (str, os.PathLike)):
            raise _type_error(name, "a path", value)
        return value if isinstance(value, Path) else Path(value)
    if base is bool:
        if not isinstance(value, bool):
            raise _type_error(name, "true or false", value)
    elif base is int:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise _type_error(name, "an integer", value)
    elif base is float:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise _type_error(name, "a number", value)
        infinite_allowed = meta is not None and (meta.interval or "").endswith("inf]")
        if math.isnan(value) or (math.isinf(value) and not infinite_allowed):
            what = f" ({meta.help.split(' (default')[0]})" if meta is not None else ""
            raise _type_error(f"{name}{what}", "a finite number", value)
    elif base is str and not isinstance(value, str):
        raise _type_error(name, "a string", value)
    if meta is not None:
        if (choices := meta.choices) is not None and value not in choices:
            if callable(meta.allowed) and load_plugins():  # a registry's: a plugin may add it
                choices = meta.choices
            if value not in choices:
                raise _type_error(name, f"one of {', '.join(choices)}", value)
        if meta.positive and value < 1:
            raise _type_error(name, "a positive integer", value)
        if meta.interval is not None and not _in_interval(value, meta.interval):
            what = meta.help.split(" (default")[0].split(";")[0]
            raise _type_error(f"{name} ({what})", f"a number in {meta.interval}", value)
    return value


def check_fields(instance: Any) -> None:
    """Check every field of the frozen settings dataclass `instance` against its type, choices
    and range ([`Setting`][dpdl.settings.Setting]); raise
    [`ConfigError`][dpdl.errors.ConfigError] naming the first field that fails. A tuple field
    given as a list is stored as a tuple."""
    cls = type(instance)
    for field in dataclasses.fields(cls):
        declared = _declared(field)
        value = getattr(instance, field.name)
        checked = _check(field.name, _hints(cls)[field.name], declared, value)
        if checked is not value:
            object.__setattr__(instance, field.name, checked)


def positive_int(text: str) -> int:
    """An integer >= 1 from the command line."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def add_arguments(
    parser: argparse.ArgumentParser,
    cls: type,
    groups: tuple[str | None, ...] | None = None,
    skip: tuple[str, ...] = (),
) -> dict[str, argparse._ArgumentGroup]:
    """One option of `parser` per command-line setting of `cls` (or of those in `groups`,
    but those whose `dest` is in `skip`: settings a command would not honour), with the
    field's default, help, type, choices and range; each option's group is a help section.
    Returns the sections by title, for a command to add its own options to."""
    sections: dict[str, argparse._ArgumentGroup] = {}
    for leaf in leaves(cls):
        meta = leaf.setting
        if (groups is not None and meta.group not in groups) or leaf.dest in skip:
            continue
        target: Any = parser
        if meta.group is not None:
            if meta.group not in sections:
                sections[meta.group] = parser.add_argument_group(meta.group)
            target = sections[meta.group]
        base, _ = _optional(leaf.hint)
        kwargs: dict[str, Any] = {
            "dest": leaf.dest,
            "help": meta.help.replace("%", "%%"),
        }  # argparse expands %-formats
        if meta.metavar is not None:
            kwargs["metavar"] = meta.metavar
        default = leaf.field.default
        if base is bool:
            kwargs["action"] = "store_true"
        else:
            if typing.get_origin(base) is tuple:
                base = typing.get_args(base)[0]
                kwargs["nargs"] = "+"
                default = list(
                    leaf.field.default_factory() if default is dataclasses.MISSING else default
                )
            if (choices := meta.choices) is not None:
                kwargs["choices"] = choices
            elif base is int:
                kwargs["type"] = positive_int if meta.positive else int
            elif base in (float, Path):
                kwargs["type"] = base
            if default is dataclasses.MISSING and leaf.field.default_factory is dataclasses.MISSING:
                kwargs["required"] = True
            else:
                kwargs["default"] = default
        target.add_argument(f"--{leaf.option}", **kwargs)
    return sections


def from_options(cls: type[T], values: Mapping[str, Any] | argparse.Namespace) -> T:
    """An instance of settings class `cls` from parsed options (option `dest` -> value, or the
    namespace itself): every command-line setting from its option, the others at their defaults."""
    if isinstance(values, argparse.Namespace):
        values = vars(values)
    return _build(cls, values)


def to_options(instance: Any) -> dict[str, Any]:
    """The parsed options (option `dest` -> value) that
    [`from_options`][dpdl.settings.from_options] turns into the settings `instance`, nested
    groups included; tuples as the lists argparse gives."""
    values: dict[str, Any] = {}
    for field in dataclasses.fields(instance):
        value = getattr(instance, field.name)
        declared = _declared(field)
        if dataclasses.is_dataclass(value):
            values.update(to_options(value))
        elif declared is not None and declared.cli:
            values[_dest(field, declared)] = list(value) if isinstance(value, tuple) else value
    return values


def _build(cls: type[T], values: Mapping[str, Any]) -> T:
    kwargs: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        hint = _hints(cls)[field.name]
        if dataclasses.is_dataclass(hint):
            kwargs[field.name] = _build(hint, values)
            continue
        declared = _declared(field)
        if declared is not None and declared.cli:
            kwargs[field.name] = values[_dest(field, declared)]
    return cls(**kwargs)


@dataclass(frozen=True)
class TaskOptions:
    """Options of the named tasks (each task reads the ones it needs)."""

    partition: str = setting(
        "dirichlet",
        "how data are split over agents (default dirichlet)",
        choices=PARTITIONS,
        group="data",
    )
    alpha: float = setting(
        10.0, "Dirichlet concentration (default 10)", group="data", interval="(0, inf)"
    )
    labels_per_agent: int = setting(
        1, "classes per agent for labels-per-agent", positive=True, group="data"
    )
    test_fraction: float = setting(
        0.2, "share of the examples held out for testing", cli=False, interval="(0, 1)"
    )
    l2: float = setting(
        1e-3,
        "L2 regularisation of logistic regression (default 1e-3)",
        group="data",
        interval="[0, inf)",
    )
    dim: int = setting(
        10, "dimension of the least-squares task (default 10)", positive=True, group="data"
    )
    hidden: int = setting(64, "hidden units of the MLP tasks", cli=False, positive=True)
    #: How a9a and the MNIST tasks of one split (``logreg-a9a``, ``mnist-mlp``, ``mnist-linear``)
    #: hold out their test examples: ``random`` (a ``test_fraction`` of all examples) or
    #: ``files`` (the dataset's own test file, as the Whisper / CorN-DSGD authors' code does).
    split: str = setting(
        "random",
        "logreg-a9a, mnist-mlp, mnist-linear: the test examples, random (a test fraction of all) "
        "or files (the data set's own test file, as the Whisper/CorN-DSGD code) (default random)",
        choices=("random", "files"),
        group="data",
    )
    #: Share of all examples kept, drawn at random before the split (the same tasks); the
    #: CorN-DSGD authors' MNIST runs keep 0.2.
    data_fraction: float = setting(
        1.0,
        "logreg-a9a, mnist-mlp, mnist-linear: share of the examples kept, drawn before the split "
        "(default 1)",
        group="data",
        interval="(0, 1]",
    )
    #: Where every agent's model starts on the quadratic tasks: a name of
    #: :data:`dpdl.choices.START_REGISTRY` (``zeros``, their default; a plugin registers more).
    start: str = setting(
        "zeros",
        lambda: (
            "quadratic, least-squares: every agent's starting model, "
            f"{START_REGISTRY.described()} (default zeros)"
        ),
        choices=START_REGISTRY.names,
        group="data",
    )
    #: Examples each agent keeps, drawn at random from its part (image tasks); None: all of them.
    examples_per_agent: int | None = setting(
        None,
        "image tasks: examples each agent keeps, drawn at random from its part (default: all)",
        positive=True,
        group="data",
        metavar="M",
    )
    #: Test examples evaluated, a fixed random subset (image tasks); None: the whole test split.
    test_examples: int | None = setting(
        None,
        "image tasks: test examples evaluated, a fixed random subset (default: the whole test "
        "split)",
        positive=True,
        group="data",
        metavar="M",
    )

    def __post_init__(self) -> None:
        check_fields(self)

    def check_applies(self, task: str) -> None:
        """Raise [`ConfigError`][dpdl.errors.ConfigError] naming an option set away from its
        default that `task` does not read (the test file and the share of the data: a9a's and
        MNIST's one-split tasks only; the starting point: the quadratic tasks only). A plugin's
        task may read any option."""
        if task not in TASKS:
            return
        defaults = TaskOptions()
        for name, users in _TASK_OPTION_USERS.items():
            if getattr(self, name) != getattr(defaults, name) and task not in users:
                field = next(f for f in dataclasses.fields(self) if f.name == name)
                option = _option(field, _declared(field))
                raise ConfigError(
                    f"{name} (--{option}) applies only to task {', '.join(users)}, not {task!r}"
                )


#: The tasks that read each field of :class:`TaskOptions` that is checked for its task (those of
#: :func:`dpdl.tasks.catalog` that split one data set by file or keep a share of it, and the
#: quadratics' starting point).
_TASK_OPTION_USERS: dict[str, tuple[str, ...]] = {
    "split": ("logreg-a9a", "mnist-mlp", "mnist-linear"),
    "data_fraction": ("logreg-a9a", "mnist-mlp", "mnist-linear"),
    "start": ("quadratic", "least-squares"),
    "examples_per_agent": IMAGE_TASKS,
    "test_examples": IMAGE_TASKS,
}


@dataclass(frozen=True)
class DesignOptions:
    """How designs with choices are made.

    `threat`: the adversary DECOR is calibrated against (eavesdropper by default, as in the papers'
    experiments). `decor_search`: `trace` (minimise Tr(W R W^T)) or `appendix-d` (DECOR's own
    search; the couple of least Tr(W R W^T) among its grid), or another name of
    `dpdl.choices.DECOR_SEARCH_REGISTRY`. `groups` and `q`: the seed groups (m disjoint groups) and
    coalition size of `whisper-multiseed`. `objective`: what the correlated designs (Whisper, the
    multi-seed program, DECOR's couple) minimise under their privacy constraint: `one-step`, the
    variance one gossip round leaves, `Tr(W R W^T)` (the papers'), or `horizon`, the loss the noise
    leaves after the whole run ([`dpdl.mechanisms.horizon`][dpdl.mechanisms.horizon]), for which
    `horizon` holds the run's step size, steps and curvature (a
    [`dpdl.mechanisms.horizon.Horizon`][dpdl.mechanisms.horizon.Horizon]; `dpdl train` and sweeps
    fill it in from the run and its task).
    """

    threat: str = setting(
        "eavesdropper",
        "threat DECOR is calibrated against: eavesdropper, honest-but-curious, colluding-<q> "
        "(default eavesdropper)",
        option="design-against",
        group="noise design",
    )
    decor_search: str = setting(
        "trace",
        lambda: f"DECOR's noise couple: {DECOR_SEARCH_REGISTRY.described()} (default trace)",
        group="noise design",
    )
    groups: int = setting(
        1,
        "whisper-multiseed: number of disjoint seed groups m (default 1)",
        positive=True,
        group="noise design",
    )
    q: int = setting(
        1,
        "whisper-multiseed: coalition size protected against (default 1)",
        positive=True,
        group="noise design",
    )
    objective: str = setting(
        "one-step",
        "what whisper, whisper-multiseed and decor minimise under the privacy constraint: "
        "one-step (Tr(W R W^T), the papers') or horizon (the loss the noise leaves after the "
        "run's T steps at its step size, on the task's curvature) (default one-step)",
        choices=OBJECTIVES,
        group="noise design",
    )
    #: The run's step size, steps and curvature for the horizon objective (a
    #: :class:`dpdl.mechanisms.horizon.Horizon`, checked where it is read).
    horizon: object | None = setting(
        None, "the run's step size, steps and curvature (horizon objective)", cli=False
    )

    def __post_init__(self) -> None:
        check_fields(self)
        if self.horizon is not None and self.objective != "horizon":
            raise ConfigError(
                "horizon: a run's step size, steps and curvature apply only to the horizon "
                "objective (objective='horizon')"
            )
        try:  # a registry's name, or a template's (``<parameter>``) with its text
            DECOR_SEARCH_REGISTRY.match(self.decor_search)
        except ConfigError as error:
            raise ConfigError(f"decor_search (--decor-search): {error}") from None

    def check_applies(self, mechanism: str) -> None:
        """Raise [`ConfigError`][dpdl.errors.ConfigError] naming an option set away from its
        default that `mechanism` does not read (`--groups` for `ldp`, say): silently ignoring it
        would run another design than the user asked for. A plugin mechanism may read any option."""
        if mechanism not in ("none", *MECHANISM_NAMES, *FACTORIZED_NAMES):
            return
        defaults = DesignOptions()
        for field in dataclasses.fields(self):
            users = _DESIGN_USERS[field.name]
            if (
                getattr(self, field.name) != getattr(defaults, field.name)
                and mechanism not in users
            ):
                option = _option(field, _declared(field))
                raise ConfigError(
                    f"{field.name} (--{option}) applies only to mechanism {' or '.join(users)}, "
                    f"not {mechanism!r}"
                )


#: The built-in mechanisms that read each field of :class:`DesignOptions`.
_DESIGN_USERS: dict[str, tuple[str, ...]] = {
    "threat": ("decor",),
    "decor_search": ("decor",),
    "groups": ("whisper-multiseed",),
    "q": ("whisper-multiseed",),
    "objective": ("decor", "whisper", "whisper-multiseed"),
    "horizon": ("decor", "whisper", "whisper-multiseed"),
}


@dataclass(frozen=True)
class TrackingOptions:
    """The injected noise of a gradient-tracking job: its scale (Laplace scale or Gaussian standard
    deviation, not calibrated to a budget: LPPA sizes it for the attacks), distribution, and
    whether it is injected every round or once (Algorithm 1); and the local updates of each
    communication round (`dpdl.simulation.run_dsgt`)."""

    scale: float = setting(
        0.025,
        "dsgt: scale of the injected noise (default 0.025)",
        option="tracking-noise",
        group="gradient tracking",
        interval="(0, inf)",
    )
    distribution: str = setting(
        "laplace",
        "dsgt: the injected noise's distribution (default laplace)",
        choices=DISTRIBUTIONS,
        group="gradient tracking",
    )
    every_round: bool = setting(
        False,
        "dsgt: inject every communication round, not only into the initial tracking variable",
        group="gradient tracking",
    )
    local_steps: int = setting(
        1,
        "dsgt: local updates per communication round, the last of which sends (LPPA Fig. 6a's "
        "local epoch; default 1: every step communicates)",
        group="gradient tracking",
        positive=True,
    )

    def __post_init__(self) -> None:
        check_fields(self)

    def check_applies(self, algorithm: str) -> None:
        """Raise [`ConfigError`][dpdl.errors.ConfigError] naming an option set away from its
        default when `algorithm` is not gradient tracking (`dsgt`), the only one that injects
        this noise."""
        if algorithm == "dsgt":
            return
        defaults = TrackingOptions()
        for field in dataclasses.fields(self):
            if getattr(self, field.name) != getattr(defaults, field.name):
                option = _option(field, _declared(field))
                raise ConfigError(
                    f"{field.name} (--{option}) applies only to gradient tracking (--algorithm "
                    f"dsgt), not {algorithm!r}"
                )
