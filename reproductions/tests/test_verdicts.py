"""Verdicts of the reproductions' claims: typed, with reasons, and counted into the README."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dpdl_reproductions.report import (
    Claim,
    Verdict,
    budget_verdict,
    checked,
    read_verdicts,
    write_report,
)
from dpdl_reproductions.reproduce import verdict_table

ROOT = Path(__file__).resolve().parents[1]
START, END = "<!-- verdicts:start -->", "<!-- verdicts:end -->"


def test_every_verdict_but_holds_needs_its_reason() -> None:
    assert Claim("(a)", "p", "m", Verdict.HOLDS).holds
    for kind in (Verdict.FAILS, Verdict.NOT_TESTABLE, Verdict.AUTHORS_ONLY):
        with pytest.raises(ValueError, match="needs its reason"):
            Claim("(a)", "p", "m", kind, " ")
        assert not Claim("(a)", "p", "m", kind, "why").holds
    with pytest.raises(TypeError):
        Claim("(a)", "p", "m", True)  # type: ignore[arg-type]
    assert checked("(a)", "p", "m", True, "unused").verdict is Verdict.HOLDS
    missed = checked("(a)", "p", "m", False, "why", Verdict.NOT_TESTABLE)
    assert (missed.verdict, missed.reason) == (Verdict.NOT_TESTABLE, "why")


def test_the_report_states_each_verdict_and_reads_back_its_counts(tmp_path) -> None:
    claims = [
        Claim("(a)", "p", "m", Verdict.HOLDS),
        Claim("(b)", "p", "m", Verdict.FAILS, "0.98x, within the seeds' spread"),
        Claim("(c)", "p", "m", Verdict.NOT_TESTABLE, "nothing moves"),
        Claim("(d)", "p", "m", Verdict.AUTHORS_ONLY, "their step size"),
        Claim("(e)", "p", "m", Verdict.HOLDS),
    ]
    report = write_report(tmp_path / "REPORT.md", "t", "intro", claims, [], [])
    text = report.read_text()
    assert "| (b) | p | m | **fails**: 0.98x, within the seeds' spread |" in text
    assert "| (a) | p | m | holds |" in text
    counts = read_verdicts(report)
    assert counts == {
        Verdict.HOLDS: 2,
        Verdict.FAILS: 1,
        Verdict.NOT_TESTABLE: 1,
        Verdict.AUTHORS_ONLY: 1,
    }


def test_a_closed_form_beyond_its_range_fails_with_the_number() -> None:
    over = budget_verdict("all", "DP", "exact: 10/10", True, {10.0: 6.9, 40.0: 41.8}, 1e-5)
    assert over.verdict is Verdict.FAILS
    assert "log(1/delta) = 11.5" in over.reason and "(41.8, 1e-05)-DP" in over.reason
    assert "4.5% over" in over.reason
    assert budget_verdict("all", "DP", "e", True, {10.0: 6.9}, 1e-5).holds
    assert "exceeds" in budget_verdict("all", "DP", "e", False, {10.0: 6.9}, 1e-5).reason


def test_the_readme_table_of_verdicts_is_the_reports_count() -> None:
    """The README's table is regenerated from results/*/REPORT.md; it cannot drift from them."""
    readme = (ROOT / "README.md").read_text()
    block = readme[readme.index(START) + len(START) : readme.index(END)].strip()
    assert block == verdict_table(ROOT / "results")


def test_a_pipe_or_a_line_break_in_a_claim_stays_in_its_cell(tmp_path) -> None:
    """Pipes in a cell's text (an absolute value, a norm) are escaped, one escaped already is kept,
    and a line break becomes a space, so every claim is one row of four cells."""
    claims = [
        Claim("(a)", "|x - y| small", "||x||^2 = 1\nand `a|b`", Verdict.HOLDS),
        Claim("(b)", "p", r"already \| escaped", Verdict.FAILS, "|gap| = 2"),
    ]
    report = write_report(tmp_path / "REPORT.md", "t", "intro", claims, [], [])
    rows = [line for line in report.read_text().splitlines() if line.startswith("| (")]
    assert rows == [
        r"| (a) | \|x - y\| small | \|\|x\|\|^2 = 1 and `a\|b` | holds |",
        r"| (b) | p | already \| escaped | **fails**: \|gap\| = 2 |",
    ]
    assert all(len(re.split(r"(?<!\\)\|", row)) == 6 for row in rows)  # four cells, two ends
    assert read_verdicts(report) == {Verdict.HOLDS: 1, Verdict.FAILS: 1}


def test_a_claim_checked_in_both_protocols_holds_where_dpdl_s_holds() -> None:
    """MAFALDA-SGD's Housing claims are checked in dpdl's protocol and the authors': they hold if
    they hold in dpdl's, hold in the authors' protocol only if only there, else fail."""
    from dpdl_reproductions.mafalda_housing import across_protocols

    def verdict(paper: bool, theirs: bool) -> Verdict:
        return across_protocols((f"dpdl {paper}", paper), ("a", theirs), "31%", "tuning").verdict

    assert verdict(True, False) is Verdict.HOLDS
    only = across_protocols(("6%", False), ("30%", True), "31%", "tuning")
    assert only.verdict is Verdict.AUTHORS_ONLY and "tuning" in only.reason
    assert only.measured == "dpdl's protocol: 6%; authors' protocol: 30%"
    assert verdict(False, False) is Verdict.FAILS
    alone = across_protocols(None, ("30%", True), "31%", "tuning")
    assert alone.verdict is Verdict.HOLDS and alone.panel.endswith("authors' protocol")


def test_the_budget_at_a_target_loss_is_interpolated_in_log_eps() -> None:
    """Section 7.2's "2-fold reduction in eps at a test loss of 0.75": where each curve first
    reaches the loss, linear in log eps between grid points, with bounds outside the grid."""
    from dpdl_reproductions.mafalda_tradeoff import eps_at_loss

    crossing = eps_at_loss([1.0, 4.0, 16.0], [1.0, 0.8, 0.6], 0.7)
    assert crossing.kind == "reached" and crossing.eps == pytest.approx(8.0)
    assert str(eps_at_loss([1.0, 4.0], [0.5, 0.4], 0.7)) == "<= 1"
    assert str(eps_at_loss([1.0, 4.0], [0.9, 0.8], 0.7)) == "> 4"
