"""REPORT.md of a reproduction: for each panel, what the paper claims, what we measured, verdict."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["Claim", "write_report"]


@dataclass(frozen=True)
class Claim:
    """One checkable statement of a paper and what this run found."""

    panel: str
    paper: str
    measured: str
    holds: bool


def write_report(
    path: Path,
    title: str,
    intro: str,
    claims: list[Claim],
    figures: list[Path],
    notes: list[str],
    significance: str = "",
) -> Path:
    """Markdown report: setting, claims table (paper / measured / holds), the statistical test its
    verdicts use (``significance``, one sentence under the table, where they use one), figures,
    notes."""
    lines = [
        f"# {title}",
        "",
        intro,
        "",
        "| panel | the paper claims | we measured | holds |",
        "| --- | --- | --- | --- |",
    ]
    lines += [
        f"| {c.panel} | {c.paper} | {c.measured} | {'yes' if c.holds else '**no**'} |"
        for c in claims
    ]
    if significance:
        lines += ["", significance]
    lines += ["", "## Figures", ""]
    lines += [f"![{figure.stem}]({figure.name})" for figure in figures]
    if notes:
        lines += ["", "## Notes", ""] + [f"- {note}" for note in notes]
    path.write_text("\n".join(lines) + "\n")
    return path
