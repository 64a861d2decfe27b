"""A training run with dropouts records them and replays: from its options file, and from the
schedule it wrote (`dropouts.csv`, read back with `--dropout-schedule`)."""

from __future__ import annotations

import csv
import json
import warnings
from pathlib import Path

import pytest

from dpdl.cli import main

RUN = [
    "train",
    "--task",
    "least-squares",
    "--graph",
    "ring",
    "--n",
    "5",
    "--mechanism",
    "decor",
    "--eps",
    "5",
    "--steps",
    "20",
    "--eval-every",
    "5",
    "--no-progress",
    "--dropout-recovery",
]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run at dropout rate 0.3 (`a`), its replay from config.toml (`b`) and its replay from
    the schedule it wrote (`c`); and a run of two seeds (`seeds`)."""
    root = tmp_path_factory.mktemp("dropouts")
    with warnings.catch_warnings(), pytest.MonkeyPatch.context() as patch:
        patch.setattr(warnings, "formatwarning", warnings.formatwarning)  # main() installs its own
        assert main([*RUN, "--dropout", "0.3", "--out", str(root / "a")]) == 0
        replay = ["train", "--config", str(root / "a" / "config.toml"), "--out", str(root / "b")]
        assert main(replay) == 0
        schedule = ["--dropout-schedule", str(root / "a" / "dropouts.csv")]
        assert main([*RUN, *schedule, "--out", str(root / "c")]) == 0
        seeds = ["--dropout", "0.3", "--seed", "0", "1", "--out", str(root / "seeds")]
        assert main([*RUN, *seeds]) == 0
    return root


def test_a_run_records_its_dropouts_and_writes_its_schedule(runs: Path) -> None:
    final = json.loads((runs / "a" / "final.json").read_text())
    config = json.loads((runs / "a" / "config.json").read_text())
    with (runs / "a" / "dropouts.csv").open() as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["round", "agent"] and len(rows) > 1
    missed = len(rows) - 1
    described = {"dropouts": "rate 0.3, seed 0", "missed_rounds": missed}
    assert final["dropouts"] == [{"seed": 0, **described, "missed_fraction": missed / 100}]
    assert config["seeds"][0]["dropouts"] == {**described, "missed_fraction": missed / 100}
    assert config["config"]["dropout"] == 0.3 and config["config"]["dropout_recovery"] is True


def test_the_options_file_replays_the_run_bit_for_bit(runs: Path) -> None:
    for name in ("metrics.csv", "final.json", "config.json", "dropouts.csv"):
        assert (runs / "a" / name).read_bytes() == (runs / "b" / name).read_bytes(), name


def test_the_written_schedule_replays_the_dropouts(runs: Path) -> None:
    assert (runs / "a" / "metrics.csv").read_bytes() == (runs / "c" / "metrics.csv").read_bytes()
    assert (runs / "a" / "dropouts.csv").read_bytes() == (runs / "c" / "dropouts.csv").read_bytes()
    final = json.loads((runs / "c" / "final.json").read_text())
    assert final["dropouts"][0]["dropouts"] == "file dropouts.csv"


def test_each_seed_of_a_run_writes_its_own_schedule(runs: Path) -> None:
    final = json.loads((runs / "seeds" / "final.json").read_text())
    assert [entry["seed"] for entry in final["dropouts"]] == [0, 1]
    assert not (runs / "seeds" / "dropouts.csv").exists()
    first, second = (runs / "seeds" / f"dropouts-seed{s}.csv" for s in (0, 1))
    assert first.read_bytes() == (runs / "a" / "dropouts.csv").read_bytes()  # seed 0's draws
    assert second.read_bytes() != first.read_bytes()


def test_train_says_how_many_rounds_its_agents_missed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*RUN, "--steps", "4", "--dropout", "0.5", "--out", str(tmp_path / "r")]) == 0
    missed = json.loads((tmp_path / "r" / "final.json").read_text())["dropouts"][0]
    said = f"seed 0: dropouts (rate 0.5, seed 0): {missed['missed_rounds']} agent-rounds missed"
    assert said in capsys.readouterr().err
