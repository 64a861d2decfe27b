"""REPORT.md of a reproduction: for each panel, what the paper claims, what we measured, verdict."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Claim", "write_report", "write_rows"]


@dataclass(frozen=True)
class Claim:
    """One checkable statement of a paper and what this run found."""

    panel: str
    paper: str
    measured: str
    holds: bool


def write_rows(rows: list[dict[str, Any]], path: Path) -> Path:
    """All rows as CSV (columns: the union of the rows' keys, in first-seen order)."""
    columns: list[str] = []
    for row in rows:
        columns += [key for key in row if key not in columns]
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    return path


def write_report(
    path: Path, title: str, intro: str, claims: list[Claim], figures: list[Path], notes: list[str], significance: str = ""
) -> Path:
    """Markdown report: setting, claims table (paper / measured / holds), the statistical test its
    verdicts use (``significance``, one sentence under the table, where they use one), figures, notes."""
    lines = [f"# {title}", "", intro, "", "| panel | the paper claims | we measured | holds |", "| --- | --- | --- | --- |"]
    lines += [f"| {c.panel} | {c.paper} | {c.measured} | {'yes' if c.holds else '**no**'} |" for c in claims]
    if significance:
        lines += ["", significance]
    lines += ["", "## Figures", ""]
    lines += [f"![{figure.stem}]({figure.name})" for figure in figures]
    if notes:
        lines += ["", "## Notes", ""] + [f"- {note}" for note in notes]
    path.write_text("\n".join(lines) + "\n")
    return path
