"""The audit: every mechanism against every threat model, for one graph and one budget.

Each mechanism is calibrated to the budget against the threat it is designed for (LDP, DECOR,
Whisper: the eavesdropper; CDP: the central observer; the multi-seed design: honest-but-curious
agents), then accounted exactly against all threats. What a design does not protect against shows
as a larger epsilon, or infinity where no guarantee holds at all (no noise, i.e. plain D-SGD and
DSGT; zero-sum noise; LPPA's noise flow, sized like zero-sum noise since it has no calibration of
its own). Beside each upper bound, the threat's adversary attacks: a likelihood-ratio membership
test on the mechanism's own samples gives an empirical lower bound on epsilon
(`dpdl.attacks.membership`), and the eavesdropper's sum attack the error with which it
recovers the network's aggregate gradient (`dpdl.attacks.eavesdropper`). A lower bound above
the upper bound would be a bug in one of the two.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import networkx as nx
import numpy as np
from tqdm.auto import tqdm

from dpdl.accounting import AgentLevel
from dpdl.attacks.membership import DEFAULT_TRIALS, membership_lower_bound
from dpdl.choices import MULTISEED_MAX_N
from dpdl.errors import ConfigError
from dpdl.experiments.noise import DEFAULT_THREATS, NoiseReport, noise_report
from dpdl.experiments.results import json_safe, write_rows
from dpdl.jobspec.costs import AUDIT_ADVICE, audit_estimate
from dpdl.jobspec.resources import require_fits
from dpdl.mechanisms.independent import NoNoise
from dpdl.mechanisms.lppa import NoiseFlow, lppa_noise
from dpdl.mechanisms.registry import MECHANISM_REGISTRY, DesignOptions
from dpdl.threats import Colluding, Eavesdropper, ThreatModel

__all__ = [
    "MULTISEED_MAX_N",
    "audit_mechanisms",
    "format_audit",
    "require_audit_fits",
    "run_audit",
    "write_audit",
]

#: LPPA's Laplace noise scale in its experiments (Section 6, "beta = 0.025").
LPPA_LAPLACE_SCALE = 0.025
#: The threat the attacks play.
ATTACKER = str(Eavesdropper())


def audit_mechanisms(n: int, names: Sequence[str] | None = None) -> list[str]:
    """Mechanisms audited on n agents: no noise first, then `names` in their order, or by default
    every registered design, plugins included (the multi-seed SDP only for small n)."""
    if names is None:
        names = [
            name
            for name in MECHANISM_REGISTRY.names()
            if name != "whisper-multiseed" or n <= MULTISEED_MAX_N
        ]
    unknown = [name for name in names if name != NoNoise.name and name not in MECHANISM_REGISTRY]
    if unknown:
        raise ConfigError(
            f"unknown mechanism {unknown[0]!r} to audit; known: none, "
            f"{', '.join(MECHANISM_REGISTRY.names())}"
        )
    return [NoNoise.name, *(name for name in dict.fromkeys(names) if name != NoNoise.name)]


def require_audit_fits(
    agents: tuple[int, int],
    steps: int,
    attack_trials: int | None,
    mechanisms: Sequence[str] | None = None,
    threats: tuple[ThreatModel, ...] = DEFAULT_THREATS,
    log: bool = True,
) -> None:
    """Refuse, before any design is made, an audit on a graph of `agents` = `(n, edges)` that
    cannot fit (`audit_estimate`: the largest design, and
    per mechanism and threat `steps` draws of `2 attack_trials` noise samples and the aim at
    every coalition), naming the estimate."""
    n, edges = agents
    names = audit_mechanisms(n, mechanisms)
    counts = [
        threat.coalition_count(n)
        for threat in threats
        if not (isinstance(threat, Colluding) and threat.q >= n)
    ]
    found = audit_estimate(n, edges, names, counts, steps, attack_trials)
    what = f"the audit (n = {n:,} agents, {len(names)} mechanisms, {attack_trials or 0:,} trials)"
    require_fits(found, what, log, AUDIT_ADVICE)


def run_audit(
    graph: nx.Graph,
    weights: np.ndarray,
    eps: float,
    delta: float,
    steps: int,
    clip: float,
    calibration: str = "exact",
    threats: tuple[ThreatModel, ...] = DEFAULT_THREATS,
    attack_trials: int = DEFAULT_TRIALS,
    seed: int = 0,
    progress: bool = True,
    mechanisms: Sequence[str] | None = None,
) -> list[NoiseReport]:
    """One [`NoiseReport`][dpdl.experiments.noise.NoiseReport] per audited mechanism
    ([`audit_mechanisms`][dpdl.experiments.audit.audit_mechanisms] of `mechanisms`), each
    attacked as every threat. Its memory and time are estimated first
    ([`require_audit_fits`][dpdl.experiments.audit.require_audit_fits])."""
    names = audit_mechanisms(graph.number_of_nodes(), mechanisms)
    agents = (graph.number_of_nodes(), graph.number_of_edges())
    require_audit_fits(agents, steps, attack_trials, mechanisms, threats)
    reports = [
        noise_report(
            name,
            graph,
            weights,
            eps,
            delta,
            steps,
            clip,
            calibration,
            threats,
            DesignOptions(),
            attack_trials,
            seed,
        )
        for name in tqdm(names, desc="audit", unit="mechanism", disable=None if progress else True)
    ]
    for report in reports:
        if (
            report.method == NoiseFlow.name
        ):  # the paper's own LPPA: Laplace noise of scale 0.025, every round
            laplace = lppa_noise(graph, LPPA_LAPLACE_SCALE, "laplace", every_round=True)
            sensitivity = AgentLevel(clip).sensitivity
            report.attack["laplace_eavesdropper_lower_bound"] = membership_lower_bound(
                laplace, sensitivity, steps, delta, attack_trials, seed
            ).epsilon
    return reports


def _cell(value: float, exact: bool = True) -> str:
    if math.isnan(value):
        return "-"
    if math.isinf(value):
        return "inf"
    return f"{value:.4g}" + ("" if exact else "*")


def format_audit(reports: list[NoiseReport]) -> str:
    """Fixed-width table: mechanism x threat -> epsilon (and the attack's lower bound), Tr(W R W^T),
    and the sum attack's error."""
    threats = list(reports[0].epsilon)
    attacked = any(r.attack for r in reports)
    width = max(22 if attacked else 14, *(len(t) + 2 for t in threats))
    header = f"{'mechanism':<18}{'Tr(WRW^T)':>12}" + "".join(f"{t:>{width}}" for t in threats)
    lines = [
        header + (f"{'sum error/C':>13}" if attacked else ""),
        "-" * (len(header) + (13 if attacked else 0)),
    ]
    for report in reports:
        cells = ""
        for t in threats:
            cell = _cell(report.epsilon.get(t, math.nan), report.epsilon_exact.get(t, True))
            if t in report.epsilon_lower_bound:
                fit = report.epsilon_lower_bound_fit.get(t)
                fitted = "" if fit is None else f"|{_cell(fit)}"
                cell += f" ({_cell(report.epsilon_lower_bound[t])}{fitted})"
            cells += f"{cell:>{width}}"
        error = f"{report.attack['sum_attack_relative_error']:>13.3g}" if report.attack else ""
        lines.append(f"{report.method:<18}{report.trace_wrw:>12.4g}{cells}{error}")
    if any(not all(r.epsilon_exact.values()) for r in reports):
        lines.append("* upper bound: too many coalitions to enumerate, full collusion assumed")
    if attacked:
        lines.append(
            "each cell: the accountant's epsilon (the threat's membership test: lower bounds, "
            "model-free at 95% confidence|Gaussian fit at 99.9%; inf: the test never errs); sum "
            "error/C: the eavesdropper's RMS error on the aggregate gradient, in units of C"
        )
    return "\n".join(lines)


def _report_markdown(reports: list[NoiseReport], table: str) -> str:
    calibration = reports[0].calibration
    by_name = {report.method: report for report in reports}
    violations = [
        f"{r.method} ({t})"
        for r in reports
        for bounds in (r.epsilon_lower_bound, r.epsilon_lower_bound_fit)
        for t, lower in bounds.items()
        if lower > r.epsilon[t] * (1 + 1e-9)
    ]
    lines = [
        "# The audit: every method against every threat model",
        "",
        f"Graph: {reports[0].graph.get('nodes', '?')} agents; eps = {calibration.eps:g}, delta = "
        f"{calibration.delta:g}, T = {calibration.steps}; each design calibrated against the "
        "threat it is designed for, then accounted exactly "
        "(Gaussian DP) against every threat. Upper bounds are the accountant's; the lower bounds "
        "in parentheses are each threat's likelihood-ratio membership test on the mechanism's own "
        "noise samples, after subtracting what the threat's coalition knows (inf: the test "
        "statistic carries no noise, so it never errs, for any number of trials): first the "
        "model-free bound (Clopper-Pearson on the test's error rates), then the Gaussian fit "
        "(the statistic is Gaussian for Gaussian noise: a lower bound on its mu, then eps).",
        "",
        "```",
        table,
        "```",
        "",
        "## Findings",
        "",
        "- Lower bound above upper bound (a bug in one of them): "
        f"{', '.join(violations) if violations else 'none'}.",
    ]
    if NoiseFlow.name in by_name:
        lppa = by_name[NoiseFlow.name]
        lines.append(
            "- **LPPA** (Miao et al. 2025): its noise flow injects `B delta` (B the arc "
            "incidence matrix), of covariance "
            "`Var(delta) B B^T`, a Laplacian singular along 1. Theorem 2 claims a privacy budget "
            "sqrt(2) times smaller than "
            f"the DP baseline's; the accountant finds eps = {_cell(lppa.epsilon[ATTACKER], True)} "
            "against the eavesdropper, and so does the membership test "
            f"({_cell(lppa.epsilon_lower_bound.get(ATTACKER, math.nan))} on the Gaussian flow, "
            f"{_cell(lppa.attack.get('laplace_eavesdropper_lower_bound', math.nan))} on the "
            f"paper's own Laplace flow of scale {LPPA_LAPLACE_SCALE}): adding up the messages "
            "recovers the aggregate gradient with an RMS error of "
            f"{lppa.attack.get('sum_attack_rms_error', math.nan):.2g}. The sqrt(2) is the scale "
            "of the difference of two "
            "draws, not a guarantee."
        )
    if NoNoise.name in by_name:
        lines.append(
            "- **No noise** (plain D-SGD and DSGT): no guarantee against anyone, and the attacks "
            "confirm it."
        )
    if "zero-sum" in by_name:
        lines.append(
            "- **Zero-sum noise** (pairwise cancelling, no independent noise): the same verdict "
            "as LPPA, for the same reason."
        )
    finite = [r for r in reports if r.attack and math.isfinite(r.epsilon[ATTACKER])]
    if finite:
        gaps = ", ".join(
            f"{r.method} {r.epsilon_lower_bound[ATTACKER]:.3g} <= {r.epsilon[ATTACKER]:.3g}"
            for r in finite
        )
        lines.append(
            "- Where a guarantee holds against the eavesdropper, its lower and upper bounds: "
            f"{gaps}."
        )
    ratios = [
        f"| {r.method} | {t} | {r.epsilon[t]:.4g} | {r.epsilon_lower_bound[t]:.4g} | {fit:.4g} | "
        f"{fit / r.epsilon[t]:.3f} |"
        for r in reports
        for t, fit in r.epsilon_lower_bound_fit.items()
        if math.isfinite(r.epsilon[t]) and r.epsilon[t] > 0 and math.isfinite(fit)
    ]
    if ratios:
        lines += [
            "",
            "## How tight the accountant is",
            "",
            "Where a finite guarantee holds: the accountant's epsilon, the two lower bounds, and "
            "the Gaussian fit's share of the upper bound (1 would be exactly tight).",
            "",
            "| mechanism | threat | upper | lower, model-free | lower, Gaussian fit "
            "| fit / upper |",
            "| --- | --- | --- | --- | --- | --- |",
            *ratios,
        ]
    return "\n".join(lines) + "\n"


def write_audit(reports: list[NoiseReport], folder: Path) -> None:
    """`audit.json` (every report in full), `audit.csv` (mechanism, Tr(W R W^T), epsilon per
    threat, the attacks' results) and `REPORT.md` (the table and what it shows)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "audit.json").write_text(
        json.dumps(json_safe([report.as_dict() for report in reports]), indent=2) + "\n"
    )
    rows = [
        {
            "mechanism": r.method,
            "trace_WRW": r.trace_wrw,
            **r.epsilon,
            **{f"{t}_lower_bound": lower for t, lower in r.epsilon_lower_bound.items()},
            **{f"{t}_lower_bound_fit": fit for t, fit in r.epsilon_lower_bound_fit.items()},
            **({"sum_attack_rms_error": r.attack["sum_attack_rms_error"]} if r.attack else {}),
        }
        for r in reports
    ]
    write_rows(rows, folder / "audit.csv")
    (folder / "REPORT.md").write_text(_report_markdown(reports, format_audit(reports)))
