"""Certified calibration: no calibrated design overshoots its budget, checked in 60 digits.

A fuzz of random small designs (random budgets, steps and clips, n = 4-14) across every calibrated
mechanism and objective: LDP, the CDP baseline, DECOR on Erdos-Renyi graphs and on complete graphs
(where its pair-noise ratio is pushed to its cap and R's condition reaches 1e8-1e12), DECOR's
Appendix D search, Whisper, the horizon objective of Whisper and DECOR, the multi-seed program
against coalitions, DECOR against honest-but-curious agents, and two-phase runs after a
departure. For each, the covariance the agents sample is rebuilt here from the mechanism's public
parts (each agent's ``sqrt`` of its private variance, each secret's factor on its holders; none
of dpdl's accounting code), and so is the simulation's draw ``L`` where it has one; every
coalition of the design's threat is enumerated; the worst agent's Mahalanobis norm
``sqrt([Sigma^-1]_ii)`` is evaluated in 60-digit arithmetic (mpmath) and turned into delta at the
target eps by the Gaussian-DP profile, in 60 digits too. Not one may exceed its budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mpmath as mp
import networkx as nx
import numpy as np
import pytest

import dpdl.accounting.noise as noise_module
import dpdl.mechanisms.decor as decor_module
from dpdl.accounting import AgentLevel, calibrate, step_sensitivity
from dpdl.accounting.phases import Phase, calibrate_last_phase
from dpdl.accounting.sensitivity import factor_sensitivities
from dpdl.graphs import complete, erdos_renyi, metropolis_hastings
from dpdl.mechanisms.base import NoiseMechanism
from dpdl.mechanisms.horizon import Curvature, Horizon
from dpdl.mechanisms.registry import DesignOptions, build_mechanism
from dpdl.threats import CentralObserver, ThreatModel

mp.mp.dps = 60


def true_delta(eps: float, mu: mp.mpf) -> mp.mpf:
    """delta(eps; mu) of mu-GDP in 60 digits (Dong, Roth & Su 2022, Corollary 2.13)."""
    eps = mp.mpf(eps)
    return mp.ncdf(-eps / mu + mu / 2) - mp.exp(eps) * mp.ncdf(-eps / mu - mu / 2)


def hidden_factor(mechanism: NoiseMechanism, coalition: tuple[int, ...]) -> np.ndarray:
    """The factor of the noise a coalition cannot subtract, on the honest rows, rebuilt from the
    mechanism's parts: what each agent samples (``agent_noise``)."""
    n = mechanism.n
    honest = [i for i in range(n) if i not in coalition]
    columns = [np.diag(np.sqrt(mechanism.private_variances))[:, honest]]
    for secret in mechanism.secrets:
        if set(secret.holders) & set(coalition):
            continue
        block = np.zeros((n, secret.factor.shape[1]))
        block[list(secret.holders)] = secret.factor
        columns.append(block)
    return np.hstack(columns)[honest]


def exact_unit(factor: np.ndarray, central: bool = False) -> mp.mpf:
    """``max_i sqrt([(B B^T)^-1]_ii)`` (or the average's ``1 / sqrt(1^T B B^T 1)``) of the float
    factor B read exactly, in 60 digits; inf where B B^T is singular."""
    rows = mp.matrix(factor.tolist())
    if central:
        total = sum(sum(rows[i, j] for i in range(rows.rows)) ** 2 for j in range(rows.cols))
        return mp.inf if total == 0 else 1 / mp.sqrt(total)
    sigma = rows * rows.T
    try:
        inverse = mp.inverse(sigma)
    except ZeroDivisionError:
        return mp.inf
    diagonal = [inverse[i, i] for i in range(sigma.rows)]
    if min(diagonal) <= 0:
        return mp.inf
    return mp.sqrt(max(diagonal))


def exact_step(mechanism: NoiseMechanism, threat: ThreatModel, clip: float) -> mp.mpf:
    """The worst per-step sensitivity in 60 digits over the threat's coalitions and the
    simulation's own draw."""
    central = isinstance(threat, CentralObserver)
    worst = max(
        exact_unit(hidden_factor(mechanism, tuple(coalition)), central)
        for coalition in threat.coalitions(mechanism.n)
    )
    sampled = mechanism.noise.sampling_factor
    if sampled is not None:
        worst = max(worst, exact_unit(sampled, central))
    return 2 * mp.mpf(clip) * worst


@dataclass(frozen=True)
class Budget:
    eps: float
    delta: float
    steps: int
    clip: float


def budgets(count: int, seed: int) -> list[Budget]:
    rng = np.random.default_rng(seed)
    return [
        Budget(
            float(np.exp(rng.uniform(np.log(0.1), np.log(40.0)))),
            float(np.exp(rng.uniform(np.log(1e-10), np.log(1e-3)))),
            int(rng.integers(1, 10_000)),
            float(rng.uniform(0.05, 2.0)),
        )
        for _ in range(count)
    ]


def graph_for(kind: str, n: int, seed: int) -> nx.Graph:
    return complete(n) if kind == "complete" else erdos_renyi(n, 0.5, seed=seed)


def horizon(n: int, budget: Budget, seed: int) -> Horizon:
    rng = np.random.default_rng(seed)
    curvatures = rng.uniform(0.05, 5.0, n)[:, None, None] * np.eye(2)
    return Horizon(float(rng.uniform(0.01, 0.5)), min(budget.steps, 500), Curvature(curvatures))


#: (mechanism, graph kind, design options, how many designs, agents from..to).
CASES = [
    ("ldp", "er", {}, 100, (4, 14)),
    ("cdp", "er", {}, 100, (4, 14)),
    ("decor", "er", {}, 170, (4, 14)),
    ("decor", "complete", {}, 150, (4, 14)),
    ("decor", "er", {"decor_search": "appendix-d"}, 50, (4, 10)),
    ("decor", "er", {"threat": "honest-but-curious"}, 40, (4, 8)),
    ("whisper", "er", {}, 150, (4, 14)),
    ("whisper", "er", {"objective": "horizon"}, 80, (4, 12)),
    ("decor", "er", {"objective": "horizon"}, 60, (4, 12)),
    ("whisper-multiseed", "er", {"groups": 2, "q": 1}, 20, (4, 7)),
]


def _designs(name: str, kind: str, options: dict, count: int, sizes: tuple[int, int], seed: int):
    rng = np.random.default_rng(seed)
    for index, budget in enumerate(budgets(count, seed)):
        n = int(rng.integers(sizes[0], sizes[1] + 1))
        graph = graph_for(kind, n, seed + index)
        weights = metropolis_hastings(graph)
        calibration = calibrate(budget.eps, budget.delta, budget.steps, AgentLevel(budget.clip))
        design = dict(options)
        if design.get("objective") == "horizon":
            design["horizon"] = horizon(n, budget, seed + index)
        yield (
            budget,
            calibration,
            build_mechanism(name, graph, weights, calibration, DesignOptions(**design)),
        )


@pytest.mark.parametrize(
    ("name", "kind", "options", "count", "sizes"),
    CASES,
    ids=[f"{c[0]}-{c[1]}-{'-'.join(map(str, c[2].values())) or 'one-step'}" for c in CASES],
)
def test_no_calibrated_design_overshoots_in_60_digits(
    name: str, kind: str, options: dict, count: int, sizes: tuple[int, int]
) -> None:
    seed = 1000 + CASES.index((name, kind, options, count, sizes)) * 10_000
    overshoots = []
    for budget, calibration, mechanism in _designs(name, kind, options, count, sizes, seed):
        threat = mechanism.default_threat
        mu_step = exact_step(mechanism, threat, budget.clip)
        delta = true_delta(budget.eps, mp.sqrt(budget.steps) * mu_step)
        if mu_step > mp.mpf(calibration.mu_step) or delta > mp.mpf(budget.delta):
            overshoots.append((budget, float(mu_step / mp.mpf(calibration.mu_step) - 1)))
    assert not overshoots


@pytest.mark.parametrize("kind", ["er", "complete"])
def test_spectral_searches_and_sparse_factors_never_overshoot_in_60_digits(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The paths of large DECOR designs forced on small ones: the eavesdropper's search from one
    eigendecomposition (:data:`dpdl.mechanisms.decor.SPECTRAL_MIN_AGENTS`), then one certified
    account to move its estimate, and every factor kept sparse
    (:data:`dpdl.accounting.noise.DENSE_FACTOR_ENTRIES`): the accountant's sparse Gram route, with
    rounding constants counting the terms a sparse row sums (11-16 agents: a sparser generator
    than a fifth of its entries)."""
    monkeypatch.setattr(decor_module, "SPECTRAL_MIN_AGENTS", 1)
    monkeypatch.setattr(noise_module, "DENSE_FACTOR_ENTRIES", 0)
    overshoots = []
    for budget, calibration, mechanism in _designs("decor", kind, {}, 60, (11, 16), 90_000):
        mu_step = exact_step(mechanism, mechanism.default_threat, budget.clip)
        delta = true_delta(budget.eps, mp.sqrt(budget.steps) * mu_step)
        if mu_step > mp.mpf(calibration.mu_step) or delta > mp.mpf(budget.delta):
            overshoots.append((budget, float(mu_step / mp.mpf(calibration.mu_step) - 1)))
    assert not overshoots


def test_two_phase_runs_never_overshoot_in_60_digits() -> None:
    """A departure: the first phase's design on n agents for t0 rounds, the second's on the rest,
    calibrated to what the first left (:func:`~dpdl.accounting.phases.calibrate_last_phase`); the
    whole run's 60-digit delta at the target eps, over 60 random runs of Whisper and DECOR."""
    rng = np.random.default_rng(7)
    overshoots = []
    for index, budget in enumerate(budgets(60, 77)):
        name = ("whisper", "decor")[index % 2]
        n = int(rng.integers(5, 11))
        graph = complete(n) if index % 3 == 0 else erdos_renyi(n, 0.6, seed=index)
        calibration = calibrate(budget.eps, budget.delta, budget.steps, AgentLevel(budget.clip))
        first = build_mechanism(name, graph, metropolis_hastings(graph), calibration)
        start = int(rng.integers(0, budget.steps))
        rest = graph.subgraph(range(1, n))
        if not nx.is_connected(rest):
            continue
        rest = nx.convert_node_labels_to_integers(rest)
        spent = step_sensitivity(first, first.default_threat, AgentLevel(budget.clip))
        second_budget = calibrate_last_phase(
            budget.eps,
            budget.delta,
            [Phase(spent, start)],
            budget.steps - start,
            AgentLevel(budget.clip),
        )
        second = build_mechanism(name, rest, metropolis_hastings(rest), second_budget)
        mu_first = exact_step(first, first.default_threat, budget.clip)
        mu_second = exact_step(second, second.default_threat, budget.clip)
        total = mp.sqrt(start * mu_first**2 + (budget.steps - start) * mu_second**2)
        if true_delta(budget.eps, total) > mp.mpf(budget.delta):
            overshoots.append(budget)
    assert not overshoots


def test_the_assembled_inverse_would_overshoot_where_the_factor_does_not() -> None:
    """Why the accountant reads factors: on ill-conditioned designs (DECOR on complete graphs,
    ``cond(R)`` about 1e7 at the ratio's cap) the inverse of an assembled R misreads
    ``max_i [R^-1]_ii`` by about ``cond(R) u``, in either direction, so some of these designs
    would have been read below their true sensitivity; the certified value never is."""
    below, conditions = 0, []
    for budget, calibration, mechanism in _designs("decor", "complete", {}, 40, (6, 14), 5):
        factor = hidden_factor(mechanism, ())
        covariance = factor @ factor.T
        conditions.append(np.linalg.cond(covariance))
        assembled = float(np.sqrt(np.diag(np.linalg.inv(covariance)).max()))
        exact = exact_unit(factor)
        below += assembled < exact
        certified = calibration.mu_step / (2 * budget.clip)
        assert mp.mpf(certified) >= exact
    assert max(conditions) > 5e6 and below > 0


def test_near_singular_views_are_never_finite_below_the_truth() -> None:
    """Zero-sum noise plus private noise shrinking to nothing: wherever the accountant reports a
    finite value it is at least the 60-digit one, and where it cannot certify it says inf."""
    graph = erdos_renyi(8, 0.5, seed=3)
    incidence = nx.incidence_matrix(graph, oriented=True).toarray()
    for private in (1e-2, 1e-5, 1e-8, 1e-12, 1e-16, 0.0):
        factor = np.hstack([private * np.eye(8), incidence])
        bounds = factor_sensitivities(factor)
        exact = exact_unit(factor)
        assert max(bounds) >= exact
        if private == 0.0:
            assert math.isinf(max(bounds))


def test_a_search_step_reads_the_agents_factor_and_the_promise_reads_both() -> None:
    """step_sensitivity(simulated=False), a design search's step, is the agents' factor alone;
    the full value (what safe_scale certifies and reports) is the worse of it and the
    simulation's own draw, here a few units in the last place apart."""
    from dpdl.accounting.accountant import view_sensitivities
    from dpdl.mechanisms.decor import Decor
    from dpdl.threats import Eavesdropper

    noise = Decor(complete(10), 1e-3, 1.0)  # ratio 1e6: cond(R) about 1e7
    relation = AgentLevel(0.5)
    agents = step_sensitivity(noise, Eavesdropper(), relation, simulated=False)
    both = step_sensitivity(noise, Eavesdropper(), relation)
    sampled = 2 * 0.5 * view_sensitivities(noise.noise.sampling_factor, Eavesdropper()).max()
    assert both == max(agents, sampled) and agents != sampled
    assert both == pytest.approx(agents, rel=1e-6)
