"""`dpdl privacy dropouts`: a design's eps per threat over dropout schedules drawn at a rate, as
`dpdl.accounting.dropouts.dropout_risk` computes it, printed and written as JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dpdl.accounting import AgentLevel, calibrate, dropout_risk
from dpdl.cli import main
from dpdl.graphs import build_graph, mixing_matrix
from dpdl.mechanisms.registry import build_mechanism
from dpdl.threats import Colluding, Eavesdropper

ARGS = ["privacy", "dropouts", "--method", "decor", "--graph", "ring", "--n", "6", "--steps",
        "30", "--eps", "4", "--dropout", "0.2", "--schedules", "4", "--seed", "3", "--threat",
        "eavesdropper", "honest-but-curious"]  # fmt: skip


@pytest.fixture(scope="module")
def decor():
    graph = build_graph("ring", 6, None, seed=3)
    weights = mixing_matrix(graph, "metropolis-hastings")
    relation = AgentLevel(0.1)
    return build_mechanism("decor", graph, weights, calibrate(4.0, 1e-5, 30, relation), None)


@pytest.mark.parametrize("recovery", [False, True], ids=["plain", "recovery"])
def test_the_action_prints_and_writes_each_threats_risk(decor, recovery, tmp_path, capsys):
    out = tmp_path / "dropouts.json"
    extra = ["--dropout-recovery"] if recovery else []
    assert main([*ARGS, *extra, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    data = json.loads(out.read_text())
    assert (data["dropout"], data["recovery"], data["schedules"]) == (0.2, recovery, 4)
    for threat, row in zip([Eavesdropper(), Colluding(1)], data["threats"], strict=True):
        risk = dropout_risk(decor, threat, AgentLevel(0.1), 30, 1e-5, 0.2, 4, 3, recovery, 4.0)
        assert row == json.loads(json.dumps(risk.as_dict()))
        assert risk.statement() in printed
    verdicts = {row["threat"]: row["verdict"] for row in data["threats"]}
    if recovery:  # a DECOR agent whose neighbour is missing keeps less noise
        assert verdicts["eavesdropper"] == "loss"
    else:
        assert set(verdicts.values()) == {"no loss"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--dropout", "0"], "--dropout RATE"),
        (["--dropout", "1"], "--dropout"),
        (["--threat", "colluding-6"], "no honest agent"),
        (["--objective", "horizon"], "use 'dpdl noise'"),
    ],
)
def test_bad_input_is_one_clear_error(args, message, capsys) -> None:
    assert main([*ARGS, *args]) == 2
    assert message in capsys.readouterr().err


def test_an_existing_out_file_is_refused_before_any_work(tmp_path: Path, capsys) -> None:
    out = tmp_path / "dropouts.json"
    out.write_text("mine")
    assert main([*ARGS, "--out", str(out)]) == 2
    assert "exists; add --overwrite" in capsys.readouterr().err
    assert out.read_text() == "mine"
