"""Runs that can be replayed: ``dpdl train`` writes config.toml, ``--config`` / ``--set`` read it.

Two small training runs (quadratic task, ring of 4, 20 steps) are shared by a module fixture: the
original and its replay, which must agree bit for bit. Everything else goes through the parser.
"""

from __future__ import annotations

import argparse
import json
import tomllib
import warnings

import pytest

from dpdl.cli import build_parser, main
from dpdl.errors import ConfigError
from dpdl.experiments.replay import NOT_RECORDED, dump_options, load_options, option_actions
from dpdl.tasks import whisper_quadratic

RUN = [
    "train",
    "--task",
    "quadratic",
    "--graph",
    "ring",
    "--n",
    "4",
    "--steps",
    "20",
    "--eval-every",
    "5",
    "--no-progress",
]


def _train_parser() -> argparse.ArgumentParser:
    return build_parser().parse_args(["train"]).parser


def _main(args: list[str], capsys) -> tuple[int, str]:
    capsys.readouterr()
    try:
        code = main(args)
    except SystemExit as exit_:
        code = exit_.code
    return code, capsys.readouterr().err


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The original run and its replay from config.toml alone (to another folder)."""
    root = tmp_path_factory.mktemp("replay")
    with warnings.catch_warnings(), pytest.MonkeyPatch.context() as patch:
        patch.setattr(warnings, "formatwarning", warnings.formatwarning)  # main() installs its own
        assert main([*RUN, "--out", str(root / "a")]) == 0
        assert (
            main(["train", "--config", str(root / "a" / "config.toml"), "--out", str(root / "b")])
            == 0
        )
    return root


def test_replay_gives_the_same_numbers_bit_for_bit(runs):
    for name in ("metrics.csv", "final.json", "config.json"):
        assert (runs / "a" / name).read_bytes() == (runs / "b" / name).read_bytes(), name
    original = tomllib.loads((runs / "a" / "config.toml").read_text())
    assert tomllib.loads((runs / "b" / "config.toml").read_text()) == original
    # the resolved defaults are written: the quadratic task's step size and schedule, not "unset"
    assert original["lr"] == 0.01 and original["schedule"] == "inv-sqrt" and original["seed"] == [0]


def test_set_seed_changes_the_seed_and_nothing_else(runs, capsys):
    code, err = _main(
        [
            "train",
            "--config",
            str(runs / "a" / "config.toml"),
            "--set",
            "seed=[1]",
            "--out",
            str(runs / "c"),
        ],
        capsys,
    )
    assert code == 0, err
    original = tomllib.loads((runs / "a" / "config.toml").read_text())
    changed = tomllib.loads((runs / "c" / "config.toml").read_text())
    assert changed.pop("seed") == [1] and original.pop("seed") == [0]
    assert changed == original
    assert (runs / "c" / "metrics.csv").read_text() != (runs / "a" / "metrics.csv").read_text()


def test_the_tail_average_and_the_start_are_replayed_and_printed(runs, capsys):
    """``--set start=ones --set average-last=4``: the run starts at ones (its first record is the
    task's metrics there), final.json holds every metric's mean over the last 4 iterates, the
    command prints the primary one's, and the file written replays to the same numbers."""
    config = str(runs / "a" / "config.toml")
    sets = ["--set", "start=ones", "--set", "average-last=4"]
    code, err = _main(["train", "--config", config, *sets, "--out", str(runs / "t")], capsys)
    assert code == 0, err
    final = json.loads((runs / "t" / "final.json").read_text())
    assert "optimality_gap, mean over the last 4 iterates: " in err
    assert f"{final['optimality_gap_tail']:.6g}" in err
    assert set(final) >= {f"{name}_tail" for name in ("optimality_gap", "squared_distance")}
    task = whisper_quadratic(4, start=1.0)
    first = (runs / "t" / "metrics.csv").read_text().splitlines()[1].split(",")
    assert float(first[2]) == pytest.approx(
        task.evaluate(task.initial_params()[None, :])["optimality_gap"], rel=1e-12
    )
    code, err = _main(
        ["train", "--config", str(runs / "t" / "config.toml"), "--out", str(runs / "u")], capsys
    )
    assert code == 0, err
    assert (runs / "u" / "final.json").read_bytes() == (runs / "t" / "final.json").read_bytes()


def test_file_records_every_option_of_the_parser(runs):
    """The keys are the train parser's long options: a new option is recorded without a list to
    update."""
    text = (runs / "a" / "config.toml").read_text()
    written = set(tomllib.loads(text))
    # default None: named in a comment, not written
    unset = {
        "key-seed",
        "cycle",
        "gdp-mu",
        "graph-seed",
        "epochs",
        "decay-after",
        "examples-per-agent",
        "test-examples",
        "threads",
        "checkpoint-every",
        "bands",
        "buffer",
        "dropout-schedule",
    }
    options = {
        s.removeprefix("--")
        for a in _train_parser()._actions
        for s in a.option_strings
        if s.startswith("--")
    }
    assert written | unset == options - {"help", *NOT_RECORDED}
    assert all(key in text.split("\n\n")[0] for key in unset)


def test_round_trip_of_every_value_type(tmp_path):
    """Lists, flags, floats, strings with a colon, choices: what is written is read back as
    parsed."""
    parser = _train_parser()
    args = parser.parse_args(
        [
            "--seed",
            "3",
            "1",
            "--every-round",
            "--graph",
            "edgelist:edges.txt",
            "--lr",
            "0.0123456789",
            "--key-seed",
            "7",
            "--mixing",
            "max-degree",
            "--eps",
            "2.5",
        ]
    )
    path = tmp_path / "config.toml"
    path.write_text(dump_options(parser, vars(args)))
    loaded = load_options(parser, path)
    recorded = {action.dest for action in option_actions(parser).values()}
    assert loaded == {
        dest: value for dest, value in vars(args).items() if dest in recorded and value is not None
    }
    assert loaded["seed"] == [3, 1] and loaded["every_round"] is True and loaded["key_seed"] == 7


def test_command_line_overrides_the_file_and_set_overrides_one_key(runs):
    config = str(runs / "a" / "config.toml")
    parser = build_parser()
    args = parser.parse_args(
        ["train", "--steps", "7", "--config", config, "--set", "eps=3", "--set", "batch_size=16"]
    )
    assert args.steps == 7  # given on the command line, before --config or after it
    assert args.eps == 3.0 and isinstance(args.eps, float)  # a TOML integer for a float option
    assert args.batch_size == 16  # '_' spelling accepted
    assert args.task == "quadratic" and args.n == 4 and args.graph == "ring"  # from the file
    args = parser.parse_args(["train", "--config", config, "--set", "eps=3", "--eps", "4"])
    assert args.eps == 4.0
    args = parser.parse_args(["train", "--set", "graph=edgelist:edges.txt", "--set", "seed=5"])
    assert args.graph == "edgelist:edges.txt" and args.seed == [
        5
    ]  # not TOML: a plain string; a scalar for a list


@pytest.mark.parametrize(
    ("text", "sets", "words"),
    [
        (
            'task = "quadratic"\n\nbatchsize = 3\n',
            [],
            ["config.toml:3", "unknown option 'batchsize'", "batch-size"],
        ),
        ('steps = "20"\n', [], ["config.toml:1", "steps", "an integer"]),
        ("eps = true\n", [], ["eps", "a number"]),
        ("seed = [0, 1.5]\n", [], ["seed", "a list, each item an integer"]),
        ("every-round = 1\n", [], ["every-round", "true or false"]),
        ('mixing = "uniform"\n', [], ["mixing", "metropolis-hastings"]),
        ("steps = 0\n", [], ["steps", "positive integer"]),
        ("batch-size = 8\nbatch_size = 8\n", [], ["batch_size", "twice"]),
        ("seed = []\n", [], ["seed", "at least one"]),
        ("task = quadratic\n", [], ["not valid TOML", "line 1"]),
        ("", ["stpes=3"], ["--set", "unknown option 'stpes'", "steps"]),
        ("", ["steps"], ["--set", "key=value"]),
        ("", ["steps=ten"], ["--set steps", "an integer"]),
    ],
)
def test_bad_options_file_gives_one_error_line(tmp_path, capsys, text, sets, words):
    path = tmp_path / "config.toml"
    path.write_text(text)
    code, err = _main(
        [
            "train",
            "--config",
            str(path),
            *[f"--set={s}" for s in sets],
            "--out",
            str(tmp_path / "out"),
        ],
        capsys,
    )
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("dpdl: error:"), err
    assert all(word in err for word in words), err
    assert not (tmp_path / "out").exists()


def test_unreadable_options_files(tmp_path):
    parser = _train_parser()
    with pytest.raises(ConfigError, match="not found"):
        load_options(parser, tmp_path / "missing.toml")
    binary = tmp_path / "models.npy"
    binary.write_bytes(b"\x93NUMPY\x01\x00\xff\xfe")
    with pytest.raises(ConfigError, match=f"cannot read options file {binary}"):
        load_options(parser, binary)


def test_train_help_documents_config_set_and_graph_files():
    help_text = _train_parser().format_help()  # what `dpdl train --help` prints
    for word in (
        "--config FILE",
        "--set KEY=VALUE",
        "config.toml",
        "file:PATH",
        "edgelist",
        "decentralizepy",
        "npz",
        "graphml",
        "gml",
    ):
        assert word in help_text, word
