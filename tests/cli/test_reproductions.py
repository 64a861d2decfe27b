"""`dpdl reproduce --list`: plain text on a terminal, whatever markup the docstrings hold."""

from __future__ import annotations

import pytest

from dpdl.cli.reproductions import plain_summary


@pytest.mark.parametrize(
    ("summary", "plain"),
    [
        ("``horizon``: noise for the whole run (``--objective horizon``).",
         "noise for the whole run (--objective horizon)."),
        ("`horizon`: noise for the whole run (`--objective horizon`).",
         "noise for the whole run (--objective horizon)."),
        ("MAFALDA's bound, :func:`~dpdl.accounting.pndp.pndp_epsilon`, by distance.",
         "MAFALDA's bound, pndp_epsilon, by distance."),
        ("MAFALDA's bound, [`pndp_epsilon`][dpdl.accounting.pndp.pndp_epsilon], by distance.",
         "MAFALDA's bound, pndp_epsilon, by distance."),
        ("DECOR Fig. 1, against LDP and CDP.", "DECOR Fig. 1, against LDP and CDP."),
    ],
)  # fmt: skip
def test_a_summary_is_printed_without_markup_or_its_own_name(summary: str, plain: str) -> None:
    assert plain_summary("horizon", summary) == plain


def test_the_listing_holds_no_markup(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("dpdl_reproductions")
    from dpdl import cli

    assert cli.main(["reproduce", "--list"]) == 0
    listing = capsys.readouterr().out
    assert "horizon" in listing
    for markup in ("`", ":func:", ":mod:", "]["):
        assert markup not in listing
