"""The commit-msg hook (``scripts/check_commit_message.py``) holds a commit to the house habit: a
subject of at most 72 characters with a scope prefix, the body apart."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HOOK = ROOT / "scripts" / "check_commit_message.py"


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        ("accounting: certify the factor route\n\nThe numbers.\n", None),
        ("decor-fig1: run the authors' search\n", None),
        ("# a comment\naccounting: fine\n", None),
        ("accounting: " + "x" * 61 + "\n", "73 characters; at most 72"),
        ("Fix the accountant\n", "scope prefix"),
        ("accounting: subject\nbody glued on\n", "blank line"),
        ("\n# only comments\n", "empty"),
    ],
)
def test_the_hook_accepts_the_habit_and_names_each_breach(
    tmp_path: Path, message: str, problem: str | None
) -> None:
    path = tmp_path / "COMMIT_EDITMSG"
    path.write_text(message)
    result = subprocess.run(
        [sys.executable, str(HOOK), str(path)], capture_output=True, text=True, check=False
    )
    assert result.returncode == (0 if problem is None else 1), result.stderr
    if problem is not None:
        assert problem in result.stderr


def test_the_hook_is_declared_for_the_commit_msg_stage() -> None:
    config = (ROOT / ".pre-commit-config.yaml").read_text()
    assert "scripts/check_commit_message.py" in config and "stages: [commit-msg]" in config
