"""The reconstruction attack on noiseless D-GD and each mechanism
(`dpdl.experiments.reconstruction`), and `dpdl audit --reconstruct`."""

from __future__ import annotations

import csv
import json
import math
import warnings

import networkx as nx
import pytest

from dpdl.cli import main
from dpdl.errors import ConfigError
from dpdl.experiments.reconstruction import (
    format_reconstruction,
    run_reconstruction,
    write_reconstruction,
)
from dpdl.graphs import metropolis_hastings

PATH = nx.path_graph(6)
STEPS = 10


@pytest.fixture(scope="module")
def report():
    return run_reconstruction(
        PATH, metropolis_hastings(PATH), 5.0, 1e-5, STEPS, 1.0, (0,), ["ldp", "whisper"], dim=8
    )


def test_noiseless_dgd_gives_every_agent_beyond_the_neighbourhood_exactly(report) -> None:
    rows = [row for row in report.rows if row.mechanism == "none"]
    assert [row.target for row in rows] == [1, 2, 3, 4, 5]
    assert [row.distance for row in rows] == [1, 2, 3, 4, 5]
    for row in rows:
        assert row.identifiable_fraction == row.exact_fraction == 1
        assert row.relative_error < 1e-8 and row.predicted_error == 0


def test_each_mechanism_leaves_the_gradients_identifiable_but_noisy(report) -> None:
    for name in ("ldp", "whisper"):
        rows = [row for row in report.rows if row.mechanism == name]
        assert len(rows) == 5
        for row in rows:
            assert row.identifiable_fraction == 1 and row.exact_fraction == 0
            assert row.relative_error > 0.1 and math.isfinite(row.predicted_error)
        # farther agents reach the attacker through more mixing: their error grows
        assert rows[-1].predicted_error > rows[0].predicted_error


def test_the_table_and_files_report_every_row(report, tmp_path) -> None:
    table = format_reconstruction(report)
    assert "(exact)" in table and "none: 4 of 4 agents beyond" in table
    write_reconstruction(report, tmp_path)
    with (tmp_path / "reconstruction.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 15 and {row["mechanism"] for row in rows} == {"none", "ldp", "whisper"}
    data = json.loads((tmp_path / "reconstruction.json").read_text())
    assert data["attackers"] == [0] and data["window"] == STEPS and len(data["rows"]) == 15


@pytest.mark.parametrize(
    ("attackers", "window", "match"),
    [
        ((), None, "at least one attacking agent"),
        ((6,), None, r"in 0\.\.5"),
        ((-1,), None, r"in 0\.\.5"),
        ((1, 1), None, "twice"),
        (tuple(range(6)), None, "no target"),
        ((0,), STEPS + 1, "window"),
    ],
    ids=["empty", "above", "negative", "twice", "everyone", "window"],
)
def test_bad_attackers_or_window_is_one_config_error(attackers, window, match) -> None:
    with pytest.raises(ConfigError, match=match):
        run_reconstruction(
            PATH, metropolis_hastings(PATH), 5.0, 1e-5, STEPS, 1.0, attackers, [], window=window
        )


@pytest.fixture(autouse=True)
def _keep_warning_format(monkeypatch) -> None:
    """main() installs its own warning format; put the original back afterwards."""
    monkeypatch.setattr(warnings, "formatwarning", warnings.formatwarning)


def test_cli_reconstruct_prints_the_table_and_writes_the_files(tmp_path, capsys) -> None:
    out = tmp_path / "out"
    args = ["audit", "--graph", "ring", "--n", "6", "--steps", "8", "--eps", "5"]
    code = main(
        [*args, "--reconstruct", "--attackers", "0", "--mechanisms", "ldp", "--out", str(out)]
    )
    printed = capsys.readouterr().out
    assert code == 0 and "(exact)" in printed and "ldp" in printed
    assert (out / "reconstruction.csv").exists() and not (out / "audit.csv").exists()


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["--reconstruct", "--attackers", "7"], "0..5"),
        (["--attackers", "1"], "only apply with --reconstruct"),
        (["--reconstruct", "--gradient-window", "9"], "longer than the run"),
    ],
    ids=["out-of-range", "without-reconstruct", "window"],
)
def test_cli_bad_reconstruction_options_are_one_error_line(tmp_path, capsys, extra, match):
    out = tmp_path / "out"
    args = ["audit", "--graph", "ring", "--n", "6", "--steps", "8", "--out", str(out), *extra]
    code = main(args)
    lines = capsys.readouterr().err.splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("dpdl: error:")
    assert match in lines[0] and not (out / "reconstruction.csv").exists()


def test_cli_refuses_a_reconstruction_too_large_before_any_work(
    tmp_path, capsys, monkeypatch
) -> None:
    """300 agents over 1000 steps: dense 300,000^2 message matrices, refused by the size check
    before a graph, a design or a message matrix is built."""

    def started(*args: object, **kwargs: object) -> None:
        raise AssertionError("the work started before the reconstruction was sized")

    monkeypatch.setattr("dpdl.experiments.reconstruction.from_noise", started)
    monkeypatch.setattr("dpdl.experiments.reconstruction.build_mechanism", started)
    monkeypatch.setattr("dpdl.cli.audit.graph_and_weights", started)
    monkeypatch.setenv("DPDL_MEMORY_LIMIT", "4G")
    args = ["audit", "--graph", "ring", "--n", "300", "--steps", "1000", "--reconstruct"]
    code = main([*args, "--out", str(tmp_path / "out")])
    lines = capsys.readouterr().err.splitlines()
    assert code == 2 and len(lines) == 1 and "cannot fit in memory" in lines[0]
    assert "message" in lines[0]
