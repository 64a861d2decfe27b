"""A bad ``dpdl reproduce`` request is one error line naming the problem, and nothing written."""

from __future__ import annotations

import pytest

from dpdl.cli import main


@pytest.mark.parametrize(
    ("args", "keyword"),
    [
        (["reproduce", "no-such-figure"], "unknown reproduction"),
        (["reproduce", "whisper-variance", "--parts", "logreg-a9a"], "no parts"),
        (["reproduce", "decor-fig1", "--parts", "cifar"], "unknown part"),
    ],
)
def test_bad_reproduction_requests_give_one_error_line(capsys, tmp_path, args, keyword) -> None:
    assert main([*args, "--out", str(tmp_path / "out")]) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dpdl: error:"), captured.err
    assert keyword in lines[0].lower() and "Traceback" not in captured.err
    assert not (tmp_path / "out").exists()
