"""The README is a landing page that cannot drift: short, its Python example runs as written, and
its command lines are commands dpdl takes."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def test_the_readme_is_a_landing_page() -> None:
    lines = README.splitlines()
    assert len(lines) <= 150
    assert max(len(line) for line in lines) <= 300


def test_the_python_example_runs_and_learns_within_its_budget(tmp_path: Path) -> None:
    example = re.search(r"```python\n(.*?)```", README, re.S)
    assert example is not None
    result = subprocess.run(
        [sys.executable, "-c", example.group(1)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
        cwd=tmp_path,
    )
    report, metrics = result.stdout.strip().rsplit(" {", 1)
    assert report.startswith("eps=") and "eavesdropper" in report
    eps = float(report.split()[0].removeprefix("eps="))
    assert eps <= 10.0
    accuracy = float(re.search(r"'test_accuracy': ([0-9.]+)", metrics).group(1))
    assert accuracy > 0.9  # the label is a linear rule: DECOR's noise leaves it learnable


def test_the_command_lines_parse() -> None:
    """Each ``dpdl ...`` line of the README's bash blocks is a command the parser takes."""
    from dpdl.cli import build_parser

    blocks = re.findall(r"```bash\n(.*?)```", README, re.S)
    commands = []
    for block in blocks:
        joined = block.replace("\\\n", " ")
        commands += [line.split("#")[0] for line in joined.splitlines() if line.startswith("dpdl ")]
    assert len(commands) >= 3
    parser = build_parser()
    for command in commands:
        parser.parse_args(shlex.split(command)[1:])  # argparse exits on a bad line
