"""A run's settings are declared once (:mod:`dpdl.jobspec.config`, :mod:`dpdl.settings`): the
command line's options are generated from them, parsed options become a :class:`TrainConfig`
generically, and a ``TrainConfig`` built in Python is checked against the same declarations."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from dpdl.choices import TASKS
from dpdl.cli import build_parser
from dpdl.cli.agents import _agent_options
from dpdl.errors import ConfigError
from dpdl.jobspec.config import DEFAULT_STEP_SIZES, TrainConfig
from dpdl.runtime.options import AgentOptions
from dpdl.settings import (
    DesignOptions,
    TaskOptions,
    TrackingOptions,
    from_options,
    leaves,
    to_options,
)


def _command(name: str):  # noqa: ANN202 (an argparse parser)
    return build_parser()._subparsers._group_actions[0].choices[name]


@pytest.mark.parametrize("command", ["train", "run-agent", "run-local"])
def test_every_setting_is_an_option_with_its_default_and_help(command: str) -> None:
    actions = {action.dest: action for action in _command(command)._actions}
    for leaf in leaves(TrainConfig):
        action = actions[leaf.dest]
        assert action.option_strings == [f"--{leaf.option}"]
        assert action.help.replace("%%", "%") == leaf.setting.help
        default = leaf.field.default
        assert action.default == (list(default) if isinstance(default, tuple) else default)


def test_default_options_give_the_default_config() -> None:
    args = build_parser().parse_args(["train"])
    assert from_options(TrainConfig, args) == TrainConfig()


def test_options_reach_the_nested_settings() -> None:
    args = build_parser().parse_args(
        [
            "train",
            "--seed",
            "3",
            "4",
            "--partition",
            "iid",
            "--mechanism",
            "decor",
            "--design-against",
            "colluding-2",
            "--dim",
            "7",
            "--lr",
            "0.3",
        ]
    )
    config = from_options(TrainConfig, args)
    assert config.seeds == (3, 4) and config.lr == 0.3
    assert config.task_options == TaskOptions(partition="iid", dim=7)
    assert config.design == DesignOptions(threat="colluding-2")
    tracking = ["--algorithm", "dsgt", "--mechanism", "lppa", "--tracking-noise", "0.5"]
    args = build_parser().parse_args(["train", *tracking, "--every-round", "--local-steps", "5"])
    assert from_options(TrainConfig, args).tracking == TrackingOptions(
        scale=0.5, every_round=True, local_steps=5
    )


@pytest.mark.parametrize(
    ("kwargs", "field", "words"),
    [
        ({"n": 0}, "n", "positive integer"),
        ({"steps": 2.5}, "steps", "an integer"),
        ({"eps": "ten"}, "eps", "a number"),
        ({"task": "imagenet"}, "task", "one of"),
        ({"clip_level": "batch"}, "clip_level", "one of"),
        ({"seeds": (0, "1")}, "seeds", "an integer"),
        ({"key_seed": True}, "key_seed", "an integer"),
        ({"task_options": {"alpha": 1.0}}, "task_options", "TaskOptions"),
    ],
)
def test_python_api_checks_every_field_and_names_it(kwargs: dict, field: str, words: str) -> None:
    with pytest.raises(ConfigError, match=field) as error:
        TrainConfig(**kwargs)
    assert words in str(error.value)


def test_nested_settings_check_their_fields_too() -> None:
    with pytest.raises(ConfigError, match="partition"):
        TaskOptions(partition="by-colour")
    with pytest.raises(ConfigError, match="groups"):
        DesignOptions(groups=0)
    with pytest.raises(ConfigError, match="every_round"):
        TrackingOptions(every_round="yes")
    with pytest.raises(ConfigError, match="local_steps"):
        TrackingOptions(local_steps=0)


def test_seeds_given_as_a_list_are_stored_as_a_tuple() -> None:
    config = TrainConfig(seeds=[1, 2])
    assert config.seeds == (1, 2) and hash(config) == hash(TrainConfig(seeds=(1, 2)))
    assert dataclasses.replace(config, seeds=[5]).seeds == (5,)


def test_every_task_has_a_default_step_size() -> None:
    assert tuple(DEFAULT_STEP_SIZES) == TASKS


def test_to_options_gives_back_what_from_options_took() -> None:
    decor = ["--mechanism", "decor", "--decor-search", "appendix-d"]
    args = build_parser().parse_args(["train", "--seed", "2", "5", *decor])
    config = from_options(TrainConfig, args)
    options = to_options(config)
    assert options == {leaf.dest: vars(args)[leaf.dest] for leaf in leaves(TrainConfig)}
    assert from_options(TrainConfig, options) == config


@pytest.mark.parametrize("command", ["run-agent", "run-local"])
def test_runtime_options_are_generated_from_agent_options(command: str, tmp_path) -> None:
    args = build_parser().parse_args(
        [command, "--workdir", str(tmp_path), "--key-seed", "4", "--resume", "--departed", "2", "3"]
    )
    options = _agent_options(args)
    assert options == AgentOptions(tmp_path, key_seed=4, resume=True, departed=(2, 3))
    assert {leaf.dest for leaf in leaves(AgentOptions)} <= set(vars(args))
    with pytest.raises(SystemExit):
        build_parser().parse_args(
            [command]
        )  # --workdir is required: AgentOptions.workdir has no default


def test_agent_options_check_their_fields() -> None:
    assert AgentOptions("run").workdir == Path("run")
    with pytest.raises(ConfigError, match="mac"):
        AgentOptions("run", mac="crc32")
    with pytest.raises(ConfigError, match="checkpoint_every"):
        AgentOptions("run", checkpoint_every=0)


@pytest.mark.parametrize("command", [["sweep", "grid.toml"], ["reproduce", "lppa"]])
def test_sweep_and_reproduce_take_both_jobs_and_workers(command: list[str]) -> None:
    """The points at once: ``dpdl sweep`` names it --jobs and ``dpdl reproduce`` --workers; each
    takes the other's name too."""
    for option in ("--jobs", "--workers"):
        assert build_parser().parse_args([*command, option, "3"]).jobs == 3
