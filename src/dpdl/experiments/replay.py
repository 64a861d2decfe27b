"""Options files that replay a run: a command's options as TOML, read back with typed checks.

The keys are not listed here: they are the long options of the command's own
`argparse.ArgumentParser` (`--batch-size` is the key `batch-size`; `batch_size` is
read too), and each value's type comes from its option (a flag is a boolean, `nargs="+"` a list,
`type=float` a number, `choices` a closed set). So an option added to `dpdl train` is in every
file written from then on, and a file with a mistyped or stale key fails loudly instead of being
half-applied.

The options of a run's settings, and so their keys, types, choices and ranges here, are generated
from the one declaration of those settings
([`dpdl.jobspec.config.TrainConfig`][dpdl.jobspec.config.TrainConfig], through
[`dpdl.settings.add_arguments`][dpdl.settings.add_arguments]); the command's own options (`--json`,
`--save-models`, ...) are recorded beside them, from the parser alone.
"""

from __future__ import annotations

import argparse
import difflib
import itertools
import re
import tomllib
import typing
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from dpdl.errors import ConfigError
from dpdl.files import read_regular

__all__ = [
    "NOT_RECORDED",
    "dump_options",
    "key_line",
    "load_options",
    "option_actions",
    "parse_set",
    "read_toml",
    "resolve_key",
    "typed_value",
]

#: Options that are not part of a run's definition: the options file itself and its overrides,
#: help, and the results folder (a replay that changes a key must not overwrite the run it came
#: from, so the folder is chosen again: ``--out``, or the default named after the options), and
#: what acts on that folder or beside it: ``--resume`` (a replay starts afresh) and
#: ``--tensorboard`` (a replay would add its curves to the run's own).
NOT_RECORDED = ("help", "config", "set", "out", "resume", "tensorboard")


def option_actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """Every recorded option of `parser` by key: its first long option string without `--`."""
    actions = {}
    for action in parser._actions:  # argparse has no public list of a parser's actions
        longs = [s for s in action.option_strings if s.startswith("--")]
        if longs and action.dest not in NOT_RECORDED:
            actions[longs[0].removeprefix("--")] = action
    return actions


def _is_flag(action: argparse.Action) -> bool:
    return action.nargs == 0 and isinstance(action.const, bool)


def _is_list(action: argparse.Action) -> bool:
    return action.nargs in ("+", "*")


def _value_type(action: argparse.Action) -> type:
    """The Python type an option's values have once parsed: its `type` when that is a class,
    else the return annotation of its converter (`_positive_int -> int`), else `str`."""
    if action.type is None:
        return str
    if isinstance(action.type, type):
        return action.type
    return typing.get_type_hints(action.type)["return"]


def dump_options(
    parser: argparse.ArgumentParser, values: dict[str, Any], header: Iterable[str] = ()
) -> str:
    """TOML text of every recorded option of `parser`, from `values` (option `dest` -> value,
    e.g. `vars(args)` with the defaults the run resolved). TOML has no null: an option whose value
    is `None` is named in a comment and left out, so reading the file gives it its default again.
    `header` lines come first, as comments."""
    import tomli_w

    data, unset = {}, []
    for key, action in option_actions(parser).items():
        value = values[action.dest]
        if value is None:
            unset.append(key)
        else:
            data[key] = value
    lines = [f"# {line}" for line in header]
    if unset:
        lines.append(f"# not set, so the command's default applies: {', '.join(unset)}")
    return "\n".join(lines) + ("\n\n" if lines else "") + tomli_w.dumps(data)


def _type_name(action: argparse.Action) -> str:
    if _is_flag(action):
        return "true or false"
    if action.choices is not None:
        item = f"one of {', '.join(map(repr, action.choices))}"
    else:
        item = {int: "an integer", float: "a number"}.get(_value_type(action), "a string")
    return f"a list, each item {item}" if _is_list(action) else item


def _scalar(action: argparse.Action, value: Any, where: str) -> Any:
    """`value` checked against the option's type, converter and choices, as argparse would
    have parsed it from the command line."""
    wanted = _value_type(action)
    wrong = ConfigError(f"{where}: expected {_type_name(action)}, got {value!r}")
    if isinstance(value, (bool, dict, list)):
        raise wrong
    if wanted is int and not isinstance(value, int):
        raise wrong
    if wanted is float and not isinstance(value, (int, float)):
        raise wrong
    if wanted is str and not isinstance(value, str):
        raise wrong
    if action.type is not None and not isinstance(
        action.type, type
    ):  # a converter that also checks a range
        try:
            value = action.type(str(value))
        except (argparse.ArgumentTypeError, ValueError) as error:
            raise ConfigError(f"{where}: {error}") from None
    else:
        value = wanted(value)
    if action.choices is not None and value not in action.choices:
        raise ConfigError(f"{where}: expected {_type_name(action)}, got {value!r}")
    return value


def typed_value(action: argparse.Action, value: Any, where: str) -> Any:
    """`value` of option `action` as the parsed namespace holds it; a single value is
    accepted for a list option (`seed = 3` is `seed = [3]`)."""
    if _is_flag(action):
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected {_type_name(action)}, got {value!r}")
        return value
    if _is_list(action):
        items = value if isinstance(value, list) else [value]
        if not items and action.nargs == "+":
            raise ConfigError(
                f"{where}: expected {_type_name(action)} with at least one item, got []"
            )
        return [_scalar(action, item, where) for item in items]
    return _scalar(action, value, where)


def key_line(text: str, key: str, table: str | None = None) -> int | None:
    """The line of `text` where `key` is assigned or opens a table, for error messages; with
    `table`, the line where it is assigned in that table (`[table]` up to the next header)."""
    pattern = re.compile(rf"""^\s*(\[\s*)?["']?{re.escape(key)}["']?\s*(=|\])""")
    lines = list(enumerate(text.splitlines(), 1))
    if table is not None:
        start = key_line(text, table)
        if start is None:
            return None
        lines = list(
            itertools.takewhile(lambda item: not item[1].lstrip().startswith("["), lines[start:])
        )
    return next((number for number, line in lines if pattern.match(line)), None)


def resolve_key(actions: dict[str, argparse.Action], key: str, where: str) -> argparse.Action:
    action = actions.get(key) or actions.get(key.replace("_", "-"))
    if action is None:
        close = difflib.get_close_matches(key.replace("_", "-"), actions, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(actions)}"
        raise ConfigError(f"{where}: unknown option {key!r}{hint}")
    return action


def parse_set(assignment: str) -> tuple[str, Any]:
    """`key=value` of `--set`: the value as a TOML literal (`[1, 2]`, `0.5`, `true`,
    `"text"`), or as a plain string when it is not one (`ring`, `edgelist:path.txt`)."""
    key, equals, text = assignment.partition("=")
    if not equals or not key.strip():
        raise ConfigError(f"--set {assignment!r}: expected key=value")
    try:
        value = tomllib.loads(f"value = {text}")["value"]
    except tomllib.TOMLDecodeError:
        value = text
    except RecursionError:
        raise ConfigError(
            f"--set {key.strip()}: the value is nested too deeply to be read "
            "(arrays or tables inside one another hundreds of levels deep)"
        ) from None
    return key.strip(), value


def read_toml(path: Path, what: str = "options file") -> tuple[str, dict[str, Any]]:
    """The text of the TOML file `path` (for the lines errors name) and its data; a missing,
    unreadable, not regular (a FIFO, a device, a folder), invalid or too deeply nested file is a
    [`ConfigError`][dpdl.errors.ConfigError] naming it as `what`."""
    try:
        text = read_regular(Path(path), what).decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError(f"cannot read {what} {path}: {error}") from None
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: not valid TOML: {error}") from None
    except RecursionError:
        raise ConfigError(
            f"{what} {path} is nested too deeply to be read (tables or arrays inside one another "
            "hundreds of levels deep)"
        ) from None


def load_options(
    parser: argparse.ArgumentParser, path: Path | None = None, assignments: Sequence[str] = ()
) -> dict[str, Any]:
    """Option `dest` -> value from the TOML file `path` (as `dump_options` writes it), then the
    `key=value` `assignments` of `--set` on top. Raises [`ConfigError`][dpdl.errors.ConfigError]
    naming the file, the key (and its line) for an unreadable file, an unknown key, a key given
    twice (`batch-size` and `batch_size`) or a value of the wrong type."""
    actions = option_actions(parser)
    values: dict[str, Any] = {}
    if path is not None:
        text, data = read_toml(path)
        for key, value in data.items():
            line = key_line(text, key)
            where = f"{path}:{line}: {key}" if line else f"{path}: {key}"
            action = resolve_key(actions, key, f"{path}:{line}" if line else str(path))
            if action.dest in values:
                raise ConfigError(f"{where}: the option is given twice (as '-' and '_' spellings)")
            values[action.dest] = typed_value(action, value, where)
    for assignment in assignments:
        key, value = parse_set(assignment)
        action = resolve_key(actions, key, f"--set {assignment!r}")
        values[action.dest] = typed_value(action, value, f"--set {key}")
    return values
