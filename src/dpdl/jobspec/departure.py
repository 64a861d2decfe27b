"""Agents leaving a run: the noise design recomputed on the remaining graph, and the privacy of
the two phases accounted together.

What a departure does to the guarantee. The messages of the first phase (rounds 1..t0, n agents,
design R on W) were released under that design; nothing later changes what they reveal, so their
guarantee stands. Continuing with R restricted to the remaining agents would not do:

- the correlated noise was shaped for W (Whisper: `R_cor` cancels along W's dominant
  directions; DECOR: the departed agent's edge terms no longer cancel), so the privacy it buys
  against an eavesdropper on the new mixing matrix W' is not the one accounted, and the
  utility it was optimised for is lost;
- the departed agent knows every seed it held (Whisper's shared seed, its DECOR edges, its group
  seeds): if it stays curious, it can subtract that noise from what it still overhears.

Whisper D-SGD and CorN-DSGD leave this as an open problem. The runtime
([`dpdl.runtime.agent`][dpdl.runtime.agent]) restarts the remaining agents as a second phase: the
graph without the departed agents (it must stay connected), its mixing matrix W', and the design
rebuilt for W' (Whisper's program solved again) with seeds agreed afresh (new keys), which the
departed agents never hold. The second phase is calibrated to what the budget leaves: with per-step
Mahalanobis sensitivity `mu_1` for `t0` rounds and `mu_2` for `T - t0`, the run is `sqrt(t0 mu_1^2 +
(T - t0) mu_2^2)`-GDP (Gaussian-DP composition, Dong, Roth and Su 2022, Corollary 3.3), so `mu_2` is
chosen to spend exactly the rest of the target's GDP parameter. The accountant composes the phases
([`dpdl.accounting.phases`][dpdl.accounting.phases]); this covers agent-level privacy (the
Gaussian-DP accountant); example-level two-phase accounting (composition of two subsampled
Gaussians) is not implemented.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace

import networkx as nx

from dpdl.accounting import AgentLevel, Calibration, PrivacyReport, account
from dpdl.accounting.phases import Phase, calibrate_last_phase, compose_phases, phases_mu_step
from dpdl.errors import ConfigError, GraphError
from dpdl.graphs import mixing_matrix
from dpdl.jobspec.config import TrainConfig
from dpdl.jobspec.job import Job, privacy_reports
from dpdl.mechanisms.registry import build_mechanism

__all__ = ["SecondPhase", "remaining_agents", "second_phase", "two_phase_reports"]


@dataclass
class SecondPhase:
    """The run after a departure: who is left (original ids, in rank order), from which round,
    and the job rebuilt for them (graph and mixing matrix over ranks 0..m-1, the recomputed
    design)."""

    agents: list[int]
    departed: list[int]
    start_round: int
    job: Job


def remaining_agents(n: int, departed: Iterable[int]) -> list[int]:
    """The agents of a run of n after `departed` left, in rank order."""
    gone = set(departed)
    return [i for i in range(n) if i not in gone]


def _remaining_graph(graph: nx.Graph, departed: list[int]) -> tuple[nx.Graph, list[int]]:
    agents = remaining_agents(graph.number_of_nodes(), departed)
    if len(agents) < 2:
        raise GraphError(f"after agents {departed} leave, fewer than two agents remain")
    remaining = nx.relabel_nodes(
        graph.subgraph(agents), {old: new for new, old in enumerate(agents)}, copy=True
    )
    if not nx.is_connected(remaining):
        raise GraphError(
            f"the graph without agents {departed} is disconnected: the remaining agents cannot "
            "keep training together"
        )
    return remaining, agents


def second_phase(
    config: TrainConfig, first: Job, departed: list[int], start_round: int
) -> SecondPhase:
    """The second phase of `config` (resolved) after `departed` left at the end of
    `start_round`."""
    n = first.task.n_agents
    if not departed or any(not 0 <= a < n for a in departed):
        raise ConfigError(f"departed agents must be among 0..{n - 1}, got {departed}")
    if not 0 <= start_round < config.steps:
        raise ConfigError(
            f"a departure after round {start_round} leaves no round of the {config.steps} to run"
        )
    if not isinstance(first.neighbouring, AgentLevel):
        raise ConfigError(
            "two-phase accounting after a departure is implemented for agent-level privacy only"
        )
    graph, agents = _remaining_graph(first.graph, sorted(departed))
    weights = mixing_matrix(graph, config.mixing)
    calibration = None
    if first.calibration is not None:
        calibration = _remaining_budget(first, config, start_round)
    mechanism = build_mechanism(config.mechanism, graph, weights, calibration, config.design)
    job = replace(first, graph=graph, weights=weights, calibration=calibration, mechanism=mechanism)
    return SecondPhase(agents, sorted(departed), start_round, job)


def _remaining_budget(first: Job, config: TrainConfig, start_round: int) -> Calibration:
    """The per-step sensitivity that spends, over the rounds left, what the first phase left of the
    target's GDP parameter."""
    threat = first.mechanism.default_threat
    spent = account(
        first.mechanism, threat, first.neighbouring, max(start_round, 1), config.delta
    ).mu_step
    if math.isinf(spent) and start_round > 0:
        raise ConfigError(
            f"{config.mechanism} noise protects nothing against the {threat} (its epsilon is "
            "infinite from the first round: the noise cancels where that adversary looks), so a "
            "departure leaves no budget to recompute the design for; choose a mechanism with a "
            "guarantee against it"
        )
    return calibrate_last_phase(
        config.eps,
        config.delta,
        [Phase(spent, start_round)],
        config.steps - start_round,
        first.neighbouring,
    )


def two_phase_reports(config: TrainConfig, first: Job, phase: SecondPhase) -> list[PrivacyReport]:
    """The whole run's guarantee, per threat (the design's own first), both phases composed."""
    t0, rest = phase.start_round, config.steps - phase.start_round
    reports = []
    for before, after in zip(
        privacy_reports(first.mechanism, first.neighbouring, max(t0, 1), config.delta),
        privacy_reports(phase.job.mechanism, phase.job.neighbouring, rest, config.delta),
        strict=False,
    ):
        phases = [Phase(before.mu_step, t0), Phase(after.mu_step, rest)]
        reports.append(
            PrivacyReport(
                compose_phases(phases, config.delta),
                config.delta,
                config.steps,
                phases_mu_step(phases),
                after.threat,
                after.neighbouring,
                "gdp (two phases)",
                before.exact and after.exact,
                max(before.coalitions, after.coalitions),
            )
        )
    return reports
