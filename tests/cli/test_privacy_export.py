"""`dpdl privacy export`: a `dpdl train` run's view against one threat as JSON that dp_accounting
reads back (the event) and that matches the run's epsilon (event, PLD, f-DP curve)."""

from __future__ import annotations

import json
from pathlib import Path

import dp_accounting
import pytest

from dpdl.accounting import gdp
from dpdl.cli import main

TRAIN = ["train", "--task", "quadratic", "--graph", "ring", "--n", "4", "--steps", "20",
         "--mechanism", "decor", "--eps", "3", "--no-progress"]  # fmt: skip


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("run") / "decor"
    assert main([*TRAIN, "--out", str(folder)]) == 0
    return folder


def _named_tuples(value: object) -> object:
    """The event's JSON as the named tuples `DpEvent.from_named_tuple` reads."""
    from collections import namedtuple

    if isinstance(value, dict):
        fields = {key: _named_tuples(item) for key, item in value.items()}
        return namedtuple("Event", list(fields))(**fields)
    return value


def test_the_exported_event_reads_back_into_dp_accounting(run: Path, tmp_path: Path) -> None:
    out = tmp_path / "event.json"
    code = main(
        ["privacy", "export", str(run), "--threat", "honest-but-curious", "--out", str(out)]
    )
    assert code == 0
    data = json.loads(out.read_text())
    final = json.loads((run / "final.json").read_text())
    report = next(r for r in final["privacy"] if r["threat"] == "honest-but-curious")
    event = dp_accounting.DpEvent.from_named_tuple(_named_tuples(data["dp_event"]))
    assert event == dp_accounting.SelfComposedDpEvent(
        dp_accounting.GaussianDpEvent(1 / report["mu_step"]), 20
    )
    eps = dp_accounting.pld.PLDAccountant().compose(event).get_epsilon(report["delta"])
    assert eps == pytest.approx(report["epsilon"], abs=1e-3)


def test_the_pld_and_fdp_formats(run: Path, tmp_path: Path, capsys) -> None:
    assert (
        main(["privacy", "export", str(run / "final.json"), "--format", "fdp", "--points", "5"])
        == 0
    )
    fdp = json.loads(capsys.readouterr().out)
    final = json.loads((run / "final.json").read_text())
    own = final["privacy"][0]
    assert fdp["view"]["threat"] == own["threat"]
    assert gdp.epsilon(fdp["fdp"]["mu"], own["delta"]) == pytest.approx(own["epsilon"], rel=1e-12)
    assert fdp["fdp"]["alpha"] == [0.0, 0.25, 0.5, 0.75, 1.0]
    out = tmp_path / "pld.json"
    args = ["privacy", "export", str(run), "--format", "pld", "--discretization", "1e-3"]
    assert main([*args, "--out", str(out)]) == 0
    pld = json.loads(out.read_text())["pld"]
    assert pld["discretization"] == 1e-3 and pld["pessimistic_estimate"] is True


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--threat", "central"], "no privacy report against threat 'central'"),
        (["--together"], "records no several seeds' privacy"),
        (["--discretization", "0"], "--discretization must be a finite number > 0"),
        (["--discretization", "inf"], "--discretization must be a finite number > 0"),
        (["--discretization", "nan"], "--discretization must be a finite number > 0"),
    ],
)
def test_bad_input_is_one_clear_error(run: Path, args, message, capsys) -> None:
    assert main(["privacy", "export", str(run), *args]) == 2
    assert message in capsys.readouterr().err


def test_a_folder_that_is_not_a_run_is_refused(tmp_path: Path, capsys) -> None:
    assert main(["privacy", "export", str(tmp_path)]) == 2
    assert "neither final.json nor manifest.json" in capsys.readouterr().err


def test_an_existing_out_file_is_replaced_only_with_overwrite(
    run: Path, tmp_path: Path, capsys
) -> None:
    """`--out` names a file: an existing one is refused and left as it was, unless
    `--overwrite`; a folder is refused."""
    out = tmp_path / "event.json"
    out.write_text("mine")
    assert main(["privacy", "export", str(run), "--out", str(out)]) == 2
    assert "exists; add --overwrite" in capsys.readouterr().err
    assert out.read_text() == "mine"
    assert main(["privacy", "export", str(run), "--out", str(out), "--overwrite"]) == 0
    assert "dp_event" in json.loads(out.read_text())
    assert main(["privacy", "export", str(run), "--out", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err
