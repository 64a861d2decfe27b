"""Shared by the benchmark scripts: each owns one marked section of ``BENCHMARKS.md``.

A script's section is the text between its two markers (``<!-- name:start -->`` and
``<!-- name:end -->``, markers included); :func:`write_section` replaces that section and leaves the
rest of the file, other scripts' sections included, alone.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

#: ``BENCHMARKS.md`` at the repository root.
BENCHMARKS_FILE = Path(__file__).resolve().parent.parent / "BENCHMARKS.md"


def markers(name: str) -> tuple[str, str]:
    """The start and end markers of the section owned by script ``name``."""
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


def write_section(text: str, start: str, end: str, path: Path = BENCHMARKS_FILE) -> None:
    """Put ``text`` (which begins with ``start`` and ends with ``end``) in place of the section
    between those markers in ``path``; append it if the markers are missing, create the file if it
    does not exist."""
    if not path.exists():
        path.write_text("# Benchmarks\n\n" + text)
        return
    current = path.read_text()
    first, last = current.find(start), current.find(end)
    if first == -1 or last == -1:
        path.write_text(current.rstrip("\n") + "\n\n" + text)
        return
    after = current[last + len(end) :].removeprefix("\n")
    path.write_text(current[:first] + text + after)


def measured(libraries: str) -> str:
    """The line that dates a section: UTC time, CPUs, ``libraries`` (versions and threads), Python,
    and the load average when the measurement ended."""
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    return (
        f"Measured {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; CPUs: "
        f"{os.cpu_count()}; {libraries}; Python {platform.python_version()}; load average at the "
        f"end (1, 5, 15 min): {load}."
    )


def run_case(script: str, case: list[str], env: dict[str, str] | None = None) -> dict:
    """Run ``script --case CASE...`` in a fresh interpreter and return the JSON object its last
    ``{...}`` line prints, or ``{"error": ...}`` with the last line of its error output."""
    done = subprocess.run(
        [sys.executable, script, "--case", *case],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr else "no output"}
    return json.loads(lines[-1])


def random_regular_file(folder: Path, agents: int, degree: int) -> Path:
    """An edge-list file of a random ``degree``-regular graph on ``agents`` nodes (seed 0), read as
    a user's graph file would be."""
    import networkx as nx

    graph = nx.random_regular_graph(degree, agents, seed=0)
    path = folder / "random-regular.txt"
    path.write_text("".join(f"{u} {v}\n" for u, v in graph.edges()))
    return path
