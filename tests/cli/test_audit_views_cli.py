"""`dpdl audit --views`: the per-view canary audit from the command line, and its options'
errors (one `dpdl: error:` line each); without `--views` the view options are refused, not
ignored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dpdl.cli import main

SMALL = ["audit", "--graph", "ring", "--n", "5", "--eps", "4", "--steps", "3", "--no-progress"]


def _error(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    try:
        code = main(args)
    except SystemExit as stop:  # an argument-parser error
        code = stop.code
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1 and err[0].startswith("dpdl: error:"), err
    return err[0]


def test_views_run_and_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "views"
    args = [*SMALL, "--views", "--mechanisms", "ldp", "--attack-trials", "400", "--json"]
    code = main([*args, "--canary-agent", "1", "--links", "1-2", "2-1", "--out", str(out)])
    assert code == 0
    printed = capsys.readouterr().out.strip().splitlines()
    rows = json.loads(printed[-1])["rows"]
    assert [row["view"] for row in rows] == [
        "eavesdropper, all links",
        "eavesdropper, 2 links",
        "neighbour 0",
        "coalition [0, 2]",
        "non-neighbour 3 (2 hops)",
    ]
    assert all(row["lower_many_run_fit"] <= row["epsilon_upper"] for row in rows)
    assert {p.name for p in out.iterdir()} >= {"views.csv", "views.json", "REPORT.md"}


def test_views_and_reconstruction_in_one_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both audits on one graph, budget and T: both tables in one REPORT.md, both files."""
    out = tmp_path / "both"
    args = [*SMALL, "--views", "--reconstruct", "--mechanisms", "ldp", "--attack-trials", "400"]
    assert main([*args, "--attackers", "1", "--json", "--out", str(out)]) == 0
    found = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [row["view"] for row in found["rows"]][:3] == [
        "eavesdropper, all links",
        "eavesdropper, 2 links",
        "neighbour 1",
    ]
    reconstruction = found["reconstruction"]
    assert reconstruction["attackers"] == [1] and reconstruction["steps"] == 3
    assert {row["mechanism"] for row in reconstruction["rows"]} == {"none", "ldp"}
    assert {row["target"] for row in reconstruction["rows"]} == {0, 2, 3, 4}
    assert {p.name for p in out.iterdir() if not p.name.startswith(".")} == {
        "views.csv",
        "views.json",
        "reconstruction.csv",
        "reconstruction.json",
        "REPORT.md",
    }
    report = (out / "REPORT.md").read_text()
    views, _, rest = report.partition("## Gradient reconstruction")
    assert "| ldp | neighbour 1 |" in views and "T=3" in views
    assert "| agent | distance | none | ldp |" in rest and "attackers [1]" in rest and "T=3" in rest
    # agent 3 is two hops from agent 1 on the ring of 5: noiseless D-GD gives it away exactly
    assert "| 3 | 2 | " in rest and "(exact) |" in rest.split("| 3 | 2 | ")[1].split("\n")[0]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--links", "0-1"], "--links only applies with --views"),
        (["--canary-agent", "0", "--coalition", "2"], "only apply with --views"),
        (["--views", "--canary-agent", "7"], "the canary's agent 7 is not an agent"),
        (["--views", "--links", "0-2"], "link 0->2 is not an edge"),
        (["--views", "--links", "0to1"], "a link is SENDER-RECEIVER"),
        (["--views", "--plot", "x.png"], "--plot draws the table"),
        (["--views", "--reconstruct", "--plot", "x.png"], "--plot draws the table"),
        (["--views", "--attackers", "1"], "--attackers only apply with --reconstruct"),
    ],
)
def test_view_option_errors(
    extra: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert message in _error([*SMALL, *extra, "--out", str(tmp_path / "o")], capsys)
