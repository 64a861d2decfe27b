"""A reproduction's figures drawn again from its committed ``runs.csv``
(:func:`dpdl_reproductions.reproduce.redraw`, what the documentation site shows)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpdl.errors import ConfigError
from dpdl_reproductions.reproduce import redraw

ROOT = Path(__file__).resolve().parents[1]
PNG = b"\x89PNG\r\n\x1a\n"


def test_a_reproduction_redrawn_from_its_runs(tmp_path: Path) -> None:
    runs = ROOT / "results" / "whisper-seeds" / "runs.csv"
    figures = redraw("whisper-seeds", runs, tmp_path / "seeds")
    assert [f.name for f in figures] == ["objective_vs_seeds.png"]
    assert figures[0].read_bytes().startswith(PNG)
    with pytest.raises(ConfigError, match=r"runs\.csv leaves out"):
        redraw("lppa", ROOT / "results" / "lppa" / "runs.csv", tmp_path / "lppa")
    with pytest.raises(ConfigError, match="unknown reproduction"):
        redraw("no-such-figure", runs, tmp_path / "none")
