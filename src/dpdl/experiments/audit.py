"""The audit: every mechanism against every threat model, for one graph and one budget.

Each mechanism is calibrated to the budget against the threat it is designed for (LDP, DECOR,
Whisper: the eavesdropper; CDP: the central observer; the multi-seed design: honest-but-curious
agents), then accounted exactly against all threats. What a design does not protect against shows
as a larger epsilon, or infinity where no guarantee holds at all (zero-sum noise).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import networkx as nx
import numpy as np
from tqdm.auto import tqdm

from dpdl.experiments.noise import DEFAULT_THREATS, NoiseReport, noise_report
from dpdl.experiments.reproduce.report import write_rows
from dpdl.experiments.results import json_safe
from dpdl.mechanisms.registry import MECHANISMS, DesignOptions
from dpdl.threats import ThreatModel

__all__ = ["MULTISEED_MAX_N", "audit_mechanisms", "run_audit", "format_audit", "write_audit"]

#: The multi-seed design is a CVXPY SDP with C(n, q) n constraints: audited up to this n.
MULTISEED_MAX_N = 12


def audit_mechanisms(n: int) -> list[str]:
    """Mechanisms audited on n agents (the multi-seed SDP only for small n)."""
    return [name for name in MECHANISMS if name != "whisper-multiseed" or n <= MULTISEED_MAX_N]


def run_audit(
    graph: nx.Graph,
    weights: np.ndarray,
    eps: float,
    delta: float,
    steps: int,
    clip: float,
    calibration: str = "exact",
    threats: tuple[ThreatModel, ...] = DEFAULT_THREATS,
    progress: bool = True,
) -> list[NoiseReport]:
    """One :class:`NoiseReport` per audited mechanism."""
    names = audit_mechanisms(graph.number_of_nodes())
    return [
        noise_report(name, graph, weights, eps, delta, steps, clip, calibration, threats, DesignOptions())
        for name in tqdm(names, desc="audit", unit="mechanism", disable=None if progress else True)
    ]


def _cell(value: float, exact: bool) -> str:
    if math.isinf(value):
        return "inf"
    return f"{value:.4g}" + ("" if exact else "*")


def format_audit(reports: list[NoiseReport]) -> str:
    """Fixed-width table: mechanism x threat -> epsilon, plus Tr(W R W^T)."""
    threats = list(reports[0].epsilon)
    width = max(14, *(len(t) + 2 for t in threats))
    header = f"{'mechanism':<18}{'Tr(WRW^T)':>12}" + "".join(f"{t:>{width}}" for t in threats)
    lines = [header, "-" * len(header)]
    for report in reports:
        cells = "".join(f"{_cell(report.epsilon.get(t, math.nan), report.epsilon_exact.get(t, True)):>{width}}" for t in threats)
        lines.append(f"{report.method:<18}{report.trace_wrw:>12.4g}{cells}")
    if any(not all(r.epsilon_exact.values()) for r in reports):
        lines.append("* upper bound: too many coalitions to enumerate, full collusion assumed")
    return "\n".join(lines)


def write_audit(reports: list[NoiseReport], folder: Path) -> None:
    """``audit.json`` (every report in full) and ``audit.csv`` (mechanism, Tr(W R W^T), epsilon per threat)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "audit.json").write_text(json.dumps(json_safe([report.as_dict() for report in reports]), indent=2) + "\n")
    write_rows([{"mechanism": r.method, "trace_WRW": r.trace_wrw, **r.epsilon} for r in reports], folder / "audit.csv")
