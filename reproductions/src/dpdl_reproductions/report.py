"""REPORT.md of a reproduction: for each panel, what the paper claims, what we measured, and a
verdict with its reason; the verdicts counted back from the reports (the README's table).

A verdict is one of four kinds (`Verdict`): the claim *holds*; it *holds in the authors'
protocol only* (their released code, not the paper's text); it *fails* (the reason gives the
measured gap and its cause); or it is *not testable as written* (the reason says why). Every kind
but the first needs its reason.
"""

from __future__ import annotations

import enum
import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "AVERAGE_MODEL",
    "Claim",
    "Verdict",
    "budget_verdict",
    "checked",
    "no_average_model",
    "read_verdicts",
    "verdict_table",
    "write_report",
]


class Verdict(enum.Enum):
    """What became of a paper's claim; the value is how REPORT.md writes it."""

    HOLDS = "holds"
    AUTHORS_ONLY = "holds in the authors' protocol only"
    FAILS = "fails"
    NOT_TESTABLE = "not testable as written"


@dataclass(frozen=True)
class Claim:
    """One checkable statement of a paper, what this run found, and the verdict on it.

    `reason` is required for every verdict but `Verdict.HOLDS`: for `FAILS` the
    measured gap and its cause, for `NOT_TESTABLE` why the setting as written cannot test it,
    for `AUTHORS_ONLY` what in the authors' protocol makes it hold.
    """

    panel: str
    paper: str
    measured: str
    verdict: Verdict
    reason: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.verdict, Verdict):
            raise TypeError(f"a claim's verdict is a Verdict, not {self.verdict!r}")
        if self.verdict is not Verdict.HOLDS and not self.reason.strip():
            raise ValueError(f"the verdict {self.verdict.value!r} needs its reason")

    @property
    def holds(self) -> bool:
        """Whether the claim holds as the paper states it."""
        return self.verdict is Verdict.HOLDS


def checked(
    panel: str,
    paper: str,
    measured: str,
    holds: bool,
    reason: str,
    otherwise: Verdict = Verdict.FAILS,
) -> Claim:
    """A claim that holds when `holds`, else gets `otherwise` with `reason` (the reason is
    dropped when it holds)."""
    if holds:
        return Claim(panel, paper, measured, Verdict.HOLDS)
    return Claim(panel, paper, measured, otherwise, reason)


def budget_verdict(
    panel: str,
    paper: str,
    exact: str,
    exact_met: bool,
    achieved: dict[float, float],
    delta: float,
) -> Claim:
    """The claim that every point is (eps, delta)-DP at its label eps: `exact` says how dpdl's
    exact calibration did (`exact_met`: every run within its target), `achieved` maps each
    label eps to the exact epsilon of the papers' closed-form calibration at it.

    The papers state their closed form for eps <= log(1/delta) (DECOR Corollary 3, Whisper
    Proposition 1) and plot points beyond it; where it then gives more than the label, the claim
    fails on the papers' side, and the reason says by how much.
    """
    measured = f"{exact}; exact epsilon of the papers' calibration: " + ", ".join(
        f"{eps:g} -> {value:.3g}" for eps, value in sorted(achieved.items())
    )
    if not exact_met:
        return Claim(
            panel, paper, measured, Verdict.FAILS, "dpdl's exact calibration exceeds its target"
        )
    over = {eps: value for eps, value in sorted(achieved.items()) if value > eps}
    if not over:
        return Claim(panel, paper, measured, Verdict.HOLDS)
    return Claim(
        panel,
        paper,
        measured,
        Verdict.FAILS,
        f"the papers' closed form is stated for eps <= log(1/delta) = {math.log(1 / delta):.1f} "
        "and used beyond it: "
        + ", ".join(
            f"its eps = {eps:g} points are ({value:.3g}, {delta:g})-DP, "
            f"{100 * (value / eps - 1):.1f}% over the label"
            for eps, value in over.items()
        )
        + "; dpdl's exact calibration meets every target",
    )


#: The suffix of a metric of the agents' average model (:meth:`dpdl.tasks.base.Task.evaluate`).
AVERAGE_MODEL = "_average_model"


def no_average_model(column: str) -> str:
    """The note of a report whose runs predate the average model's metric `column` (torch
    models did not report it when the committed runs were made)."""
    return (
        f"Average model: these runs predate its metric (`{column}`, the agents' mean parameters "
        "evaluated), so runs.csv does not have it; running the reproduction again (not from the "
        "cache of these runs) adds it, and this note then gives it beside the mean over agents."
    )


def _cell(claim: Claim) -> str:
    """The verdict column: the kind in bold unless it holds, then its reason."""
    if claim.verdict is Verdict.HOLDS:
        return Verdict.HOLDS.value
    return f"**{claim.verdict.value}**: {claim.reason}"


#: A pipe not escaped already: in a table cell it would end the cell.
_PIPE = re.compile(r"(?<!\\)\|")


def _table_cell(text: str) -> str:
    """`text` safe in a markdown table cell: every pipe escaped (`\\|`), which ends the cell
    otherwise, even inside a code span; on one line."""
    return _PIPE.sub(r"\\|", " ".join(text.splitlines()))


def write_report(
    path: Path,
    title: str,
    intro: str,
    claims: list[Claim],
    figures: list[Path],
    notes: list[str],
    significance: str = "",
) -> Path:
    """Markdown report: setting, claims table (paper / measured / verdict and reason, each cell
    made safe by `_table_cell`), the statistical test its verdicts use (`significance`,
    one sentence under the table, where they use one), figures, notes."""
    lines = [
        f"# {title}",
        "",
        intro,
        "",
        HEADER,
        "| --- | --- | --- | --- |",
    ]
    for claim in claims:
        cells = (claim.panel, claim.paper, claim.measured, _cell(claim))
        lines.append("| " + " | ".join(_table_cell(cell) for cell in cells) + " |")
    if significance:
        lines += ["", significance]
    lines += ["", "## Figures", ""]
    lines += [f"![{figure.stem}]({figure.name})" for figure in figures]
    if notes:
        lines += ["", "## Notes", ""] + [f"- {note}" for note in notes]
    path.write_text("\n".join(lines) + "\n")
    return path


#: A claims-table row's last cell: its verdict, bold with its reason unless it holds.
VERDICT_CELL = re.compile(r"\| (?:\*\*(?P<kind>[^*]+)\*\*: .*|(?P<holds>holds)) \|$")


HEADER = "| panel | the paper claims | we measured | verdict |"


def read_verdicts(report: Path) -> Counter[Verdict] | None:
    """How many claims of each verdict a REPORT.md written by `write_report` states (its
    claims table's last column); None for a report written before verdicts (a yes / no column),
    which its reproduction has to write again."""
    lines = Path(report).read_text().splitlines()
    if HEADER not in lines:
        return None
    counts: Counter[Verdict] = Counter()
    for line in lines:
        match = VERDICT_CELL.search(line) if line.startswith("| ") else None
        if match:
            counts[Verdict(match["kind"] or match["holds"])] += 1
    return counts


def verdict_table(results: Path, names: list[str]) -> str:
    """The README's table of verdicts: per reproduction (`results/NAME/REPORT.md`), how many
    claims get each verdict, and the totals (a report written before verdicts is named, not
    counted)."""
    header = ["reproduction", *(kind.value for kind in Verdict), "claims"]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    total: Counter[Verdict] = Counter()
    for name in names:
        counts = read_verdicts(results / name / "REPORT.md")
        if counts is None:
            lines.append(
                f"| `{name}` | " + " | ".join(["-"] * len(Verdict)) + " | not yet written again |"
            )
            continue
        total += counts
        cells = [f"`{name}`", *(str(counts[kind]) for kind in Verdict)]
        lines.append("| " + " | ".join([*cells, str(sum(counts.values()))]) + " |")
    cells = ["all", *(str(total[kind]) for kind in Verdict), str(sum(total.values()))]
    lines.append("| " + " | ".join(f"**{cell}**" for cell in cells) + " |")
    return "\n".join(lines)
