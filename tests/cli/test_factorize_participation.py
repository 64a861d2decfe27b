"""`dpdl factorize --participation min-sep`: the table accounted under b-min-separated
participation, each sensitivity marked exact, closed form or upper bound."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest

from dpdl.cli import main
from dpdl.factorization.mafalda import local_sensitivity
from dpdl.factorization.min_separation import MinSeparated, toeplitz_sensitivity_squared


def _factorize(capsys, monkeypatch, out, k: int, b: int, *extra: str) -> tuple[int, str, str]:
    monkeypatch.setattr(warnings, "formatwarning", warnings.formatwarning)
    capsys.readouterr()
    args = ["factorize", "--graph", "florentine", "--participations", str(k)]
    args += ["--batches", str(b), "--out", str(out), "--json", *extra]
    try:
        code = main(args)
    except SystemExit as exit_:
        code = exit_.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_min_sep_accounts_every_encoder_under_min_separation(capsys, monkeypatch, tmp_path):
    """k = 4, b = 5 (430 patterns, all scored): DP-D-SGD and AntiPGD by the Toeplitz closed form,
    MAFALDA's encoder (optimised for cyclic batches) exactly, and above its cyclic sensitivity 1."""
    code, out, err = _factorize(capsys, monkeypatch, tmp_path, 4, 5, "--participation", "min-sep")
    assert code == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["participation"] == "min-sep"
    rows = {row["method"]: row for row in summary["rows"]}
    assert rows["dp-dsgd"]["sensitivity"] == pytest.approx(2.0)
    assert (
        rows["dp-dsgd"]["sensitivity_kind"]
        == rows["antipgd"]["sensitivity_kind"]
        == ("closed form")
    )
    assert rows["antipgd"]["sensitivity"] == pytest.approx(
        math.sqrt(toeplitz_sensitivity_squared(np.ones(20), 4, 5))
    )
    encoder = np.load(tmp_path / "encoder.npy")
    assert rows["mafalda"]["sensitivity_kind"] == "exact"
    assert rows["mafalda"]["sensitivity"] == pytest.approx(
        local_sensitivity(encoder, MinSeparated(20, 4, 5))
    )
    assert rows["mafalda"]["sensitivity"] > 1.0 + 1e-6
    assert "accounted under b-min-separation" in out


def test_min_sep_marks_upper_bounds(capsys, monkeypatch, tmp_path):
    """k = 10, b = 3 (T = 30, 125,490 patterns): MAFALDA's sensitivity is the certified bound,
    said in the table; cyclic accounting (the default) is exact."""
    code, out, err = _factorize(
        capsys, monkeypatch, tmp_path / "m", 10, 3, "--participation", "min-sep"
    )
    assert code == 0, err
    rows = {row["method"]: row for row in json.loads(out.strip().splitlines()[-1])["rows"]}
    assert rows["mafalda"]["sensitivity_kind"] == "upper bound"
    assert "mafalda: too many min-sep patterns to score" in out
    code, out, err = _factorize(capsys, monkeypatch, tmp_path / "c", 10, 3)
    assert code == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["participation"] == "cyclic"
    assert {row["sensitivity_kind"] for row in summary["rows"]} == {"exact"}
    assert "certified upper bound" not in out


def test_unknown_participation_is_one_error_line(capsys, monkeypatch, tmp_path):
    code, out, err = _factorize(capsys, monkeypatch, tmp_path, 2, 5, "--participation", "poisson")
    assert code == 2 and out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dpdl: error:") and "participation" in lines[0]
