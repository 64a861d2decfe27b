"""Gradient reconstruction beyond the neighbourhood, on noiseless D-GD and on each mechanism.

The attack of El Mrini, Cyffers and Bellet (ICML 2024; `dpdl.attacks.reconstruction`) played
on dpdl's exact view of a run: for each mechanism (no noise first, i.e. plain D-GD; then each
design calibrated to the budget against the threat it is designed for, as `dpdl audit`
calibrates it), the T-round noisy D-SGD run is written as the messages `M G + N Z`
([`from_noise`][dpdl.factorization.algorithms.from_noise]), and the curious agents' view as `O =
A G + B Z` ([`attacker_knowledge`][dpdl.factorization.trust.attacker_knowledge] under
[`PNDP`][dpdl.factorization.trust.PNDP]: the messages they receive, their own gradients and the
seeds they hold). Every agent's gradient is a fixed random vector of norm C, the same at every
step of a window (`window = steps`, the default, is the paper's D-GD setting, Section 4: one
gradient per agent over the run), `d` coordinates; the noise is drawn, the view computed and the
attackers reconstruct by generalized least squares. Per target agent: its graph distance to the
attackers, the relative error of its reconstructed gradients (and the error the GLS covariance
predicts), and whether they are identifiable, or even exact, from the view.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from dpdl.accounting import AgentLevel, calibrate
from dpdl.attacks.reconstruction import AgentErrors, agent_errors, constant_gradients, reconstruct
from dpdl.errors import ConfigError
from dpdl.experiments.audit import audit_mechanisms
from dpdl.experiments.results import json_safe, write_rows
from dpdl.factorization.algorithms import from_noise
from dpdl.factorization.trust import PNDP, attacker_knowledge
from dpdl.jobspec.resources import FLOP_RATE, Estimate, require_fits
from dpdl.mechanisms.base import NoiseMechanism
from dpdl.mechanisms.registry import build_mechanism
from dpdl.seeding import purpose_rng

__all__ = [
    "DEFAULT_DIM",
    "ReconstructionReport",
    "ReconstructionRow",
    "check_attackers",
    "format_reconstruction",
    "reconstruction_section",
    "require_reconstruction_fits",
    "require_view_fits",
    "run_reconstruction",
    "write_reconstruction",
]

logger = logging.getLogger(__name__)

#: Independent coordinates of every gradient (each a draw of the same linear system).
DEFAULT_DIM = 20
#: What a reconstruction refused for its size is told to make smaller.
RECONSTRUCTION_ADVICE = "use fewer agents (--n), fewer steps (--steps) or fewer --mechanisms"


@dataclass(frozen=True)
class ReconstructionRow:
    """One target agent under one mechanism (`dpdl.attacks.reconstruction.AgentErrors`)."""

    mechanism: str
    target: int
    distance: float
    relative_error: float
    predicted_error: float
    identifiable_fraction: float
    exact_fraction: float


@dataclass(frozen=True)
class ReconstructionReport:
    """The attack's setting and one row per mechanism and target agent."""

    nodes: int
    edges: int
    attackers: tuple[int, ...]
    steps: int
    window: int
    dim: int
    eps: float
    delta: float
    clip: float
    calibration: str
    seed: int
    rows: list[ReconstructionRow] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["attackers"] = list(self.attackers)
        return data


def check_attackers(attackers: Sequence[int], n: int) -> tuple[int, ...]:
    """The curious agents as a tuple, refused unless they are distinct agents of `0..n-1` that
    leave at least one target."""
    chosen = tuple(int(a) for a in attackers)
    if not chosen:
        raise ConfigError("the reconstruction needs at least one attacking agent (--attackers)")
    outside = [a for a in chosen if not 0 <= a < n]
    if outside:
        raise ConfigError(f"attacking agents must be in 0..{n - 1}, got {outside}")
    if len(set(chosen)) != len(chosen):
        raise ConfigError(f"an attacking agent is listed twice: {list(chosen)}")
    if len(chosen) >= n:
        raise ConfigError(f"all {n} agents attack: no target is left to reconstruct")
    return chosen


def require_reconstruction_fits(
    n: int, edges: int, steps: int, mechanisms: int, log: bool = True
) -> None:
    """Refuse, before any design is made, a reconstruction whose run cannot fit: each
    mechanism's dense message matrices `M` (`n T x n T`) and `N` (`n T x` seeds, at most `n + 2
    edges` seeds per step), built in turn. The view is checked again once it is known
    ([`require_view_fits`][dpdl.experiments.reconstruction.require_view_fits])."""
    unknowns = float(n * steps)
    seeds = float(steps * (n + 2 * edges))
    terms = {
        f"the messages' gradient matrix M ({n * steps:,} x {n * steps:,} float64)": 8.0
        * unknowns**2,
        f"the messages' noise matrix N ({n * steps:,} x {int(seeds):,} float64)": 8.0
        * unknowns
        * seeds,
    }
    seconds = mechanisms * (unknowns**2 * n + unknowns * seeds * n) / FLOP_RATE
    what = f"the reconstruction attack (n = {n:,} agents, T = {steps:,}, {mechanisms} mechanisms)"
    require_fits(Estimate(terms, seconds, steps), what, log, RECONSTRUCTION_ADVICE)


def require_view_fits(views: int, unknowns: int, seeds: int, what: str) -> None:
    """Refuse a view of `views` equations in `unknowns` unknowns and `seeds` seeds whose
    reconstruction cannot fit: its noise covariance (`views x views`) and its eigenvectors, the
    constraints' full SVD (`unknowns x unknowns`), and their cubic costs."""
    terms = {
        f"the view's noise covariance and eigenvectors (2 x {views:,} x {views:,} float64)": 16.0
        * views**2,
        f"the constraints' singular vectors ({views:,} x {views:,} and {unknowns:,} x "
        f"{unknowns:,} float64)": 8.0 * (views**2 + unknowns**2),
    }
    seconds = (float(views) ** 2 * seeds + 10.0 * views**3 + 10.0 * unknowns**3) / FLOP_RATE
    require_fits(Estimate(terms, seconds), what, False, RECONSTRUCTION_ADVICE)


def _attack(
    name: str,
    mechanism: NoiseMechanism,
    weights: np.ndarray,
    attackers: tuple[int, ...],
    steps: int,
    window: int,
    gradients: np.ndarray,
    seed: int,
) -> AgentErrors:
    """Agent errors of the reconstruction against `mechanism` (`dpdl.attacks.reconstruction`)."""
    algorithm = from_noise(mechanism, weights, steps, name)
    knowledge = attacker_knowledge(algorithm, PNDP(attackers))
    n = algorithm.n
    basis = constant_gradients(n, steps, window)
    workload = knowledge.workload @ basis
    require_view_fits(*workload.shape, knowledge.decoder.shape[1], f"the view against {name}")
    noise = purpose_rng(seed, f"reconstruction noise {name}").standard_normal(
        (knowledge.decoder.shape[1], gradients.shape[1])
    )
    observed = workload @ gradients + knowledge.decoder @ noise
    result = reconstruct(workload, knowledge.decoder, observed)
    logger.info(
        "%s: the view has %d equations of rank %d for %d unknowns",
        name,
        workload.shape[0],
        result.rank,
        workload.shape[1],
    )
    return agent_errors(result, gradients, np.tile(np.arange(n), basis.shape[1] // n), n)


def run_reconstruction(
    graph: nx.Graph,
    weights: np.ndarray,
    eps: float,
    delta: float,
    steps: int,
    clip: float,
    attackers: Sequence[int] = (0,),
    mechanisms: Sequence[str] | None = None,
    calibration: str = "exact",
    window: int | None = None,
    dim: int = DEFAULT_DIM,
    seed: int = 0,
) -> ReconstructionReport:
    """The reconstruction attack of `attackers` (module docstring) against every mechanism of
    [`audit_mechanisms`][dpdl.experiments.audit.audit_mechanisms]`(n, mechanisms)`, each
    calibrated to (eps, delta) over `steps` steps for gradients clipped to `clip`; `window`
    steps share one gradient (default: all of them). Sizes are checked first."""
    n = graph.number_of_nodes()
    chosen = check_attackers(attackers, n)
    window = steps if window is None else window
    if steps < 1 or not 1 <= window <= steps:
        raise ConfigError(f"need steps >= 1 and a window in 1..steps, got {steps} and {window}")
    if dim < 1:
        raise ConfigError(f"the gradients need at least one coordinate, got {dim}")
    names = audit_mechanisms(n, mechanisms)
    require_reconstruction_fits(n, graph.number_of_edges(), steps, len(names))
    budget = calibrate(eps, delta, steps, AgentLevel(clip), calibration)
    windows = -(-steps // window)
    directions = purpose_rng(seed, "reconstruction gradients").standard_normal((n * windows, dim))
    gradients = clip * directions / np.linalg.norm(directions, axis=1, keepdims=True)
    hops = nx.multi_source_dijkstra_path_length(graph, set(chosen))
    report = ReconstructionReport(
        n,
        graph.number_of_edges(),
        chosen,
        steps,
        window,
        dim,
        eps,
        delta,
        clip,
        calibration,
        seed,
    )
    for name in names:
        mechanism = build_mechanism(name, graph, weights, budget)
        errors = _attack(name, mechanism, weights, chosen, steps, window, gradients, seed)
        report.rows.extend(
            ReconstructionRow(
                name,
                target,
                float(hops.get(target, math.inf)),
                float(errors.relative_error[target]),
                float(errors.predicted_error[target]),
                float(errors.identifiable_fraction[target]),
                float(errors.exact_fraction[target]),
            )
            for target in range(n)
            if target not in chosen
        )
    return report


def _cell(row: ReconstructionRow) -> str:
    if row.identifiable_fraction < 1:
        return f"{row.relative_error:.3g} (n/i)"
    if row.exact_fraction == 1:
        return f"{row.relative_error:.1e} (exact)"
    return f"{row.relative_error:.3g}"


def format_reconstruction(report: ReconstructionReport) -> str:
    """Fixed-width table: one line per target agent (its distance to the attackers), the relative
    error of its reconstructed gradients under each mechanism; then, per mechanism, the targets
    beyond the attackers' neighbourhood that the view identifies and their median error."""
    mechanisms = list(dict.fromkeys(row.mechanism for row in report.rows))
    cells = {(row.mechanism, row.target): row for row in report.rows}
    targets = sorted(
        {(row.distance, row.target) for row in report.rows}, key=lambda pair: (pair[0], pair[1])
    )
    width = max(20, *(len(name) + 2 for name in mechanisms))
    header = f"{'agent':>6}{'distance':>10}" + "".join(f"{name:>{width}}" for name in mechanisms)
    lines = [header, "-" * len(header)]
    for distance, target in targets:
        line = f"{target:>6}{distance:>10.0f}"
        lines.append(line + "".join(f"{_cell(cells[m, target]):>{width}}" for m in mechanisms))
    lines.append("")
    for name in mechanisms:
        beyond, found, _, median = _summary(report, name)
        lines.append(
            f"{name}: {found} of {beyond} agents beyond the neighbourhood identifiable, "
            f"median relative error {median:.3g}"
        )
    lines.append(
        "cells: ||reconstructed - true gradients|| / ||true gradients|| (exact: recovered from "
        "noise-free equations; n/i: not identifiable from the view, the estimate is a guess)"
    )
    return "\n".join(lines)


def _summary(report: ReconstructionReport, name: str) -> tuple[int, int, int, float]:
    """Of `name`'s targets beyond the attackers' neighbourhood (distance >= 2): how many there
    are, how many the view identifies, how many it recovers exactly, and the identified ones'
    median relative error."""
    beyond = [row for row in report.rows if row.mechanism == name and row.distance >= 2]
    found = [row for row in beyond if row.identifiable_fraction == 1]
    exact = sum(row.exact_fraction == 1 for row in found)
    median = float(np.median([row.relative_error for row in found])) if found else math.nan
    return len(beyond), len(found), exact, median


def reconstruction_section(report: ReconstructionReport, header: str) -> str:
    """The reconstruction as a Markdown section of a report (`## Gradient reconstruction`, under
    `header`): one row per target agent, its distance to the attackers and the relative error of
    its reconstructed gradients under each mechanism, marked exact or not identifiable; then,
    per mechanism, what the attackers recover beyond their neighbourhood."""
    mechanisms = list(dict.fromkeys(row.mechanism for row in report.rows))
    cells = {(row.mechanism, row.target): row for row in report.rows}
    targets = sorted({(row.distance, row.target) for row in report.rows})
    rows = [
        f"| {target} | {distance:.0f} | "
        + " | ".join(_cell(cells[name, target]) for name in mechanisms)
        + " |"
        for distance, target in targets
    ]
    summaries = []
    for name in mechanisms:
        beyond, found, exact, median = _summary(report, name)
        summaries.append(
            f"- {name}: {found} of {beyond} agents beyond the neighbourhood identifiable, "
            f"{exact} exactly, median relative error {median:.3g}"
        )
    return "\n".join(
        [
            "## Gradient reconstruction",
            "",
            header,
            "",
            "The curious agents reconstruct every other agent's gradient from what they receive "
            "over the run (El Mrini, Cyffers and Bellet, ICML 2024) by generalized least squares. "
            "Cells: ||reconstructed - true gradients|| / ||true gradients|| (exact: recovered "
            "from noise-free equations; n/i: not identifiable from the view, the estimate is a "
            "guess); distance: hops to the nearest attacker.",
            "",
            "| agent | distance | " + " | ".join(mechanisms) + " |",
            "| --- | --- | " + " | ".join("---" for _ in mechanisms) + " |",
            *rows,
            "",
            *summaries,
        ]
    )


def write_reconstruction(report: ReconstructionReport, folder: Path) -> None:
    """`reconstruction.json` (the setting and every row) and `reconstruction.csv` (the rows)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "reconstruction.json").write_text(
        json.dumps(json_safe(report.as_dict()), indent=2) + "\n"
    )
    write_rows([asdict(row) for row in report.rows], folder / "reconstruction.csv")
