"""DECOR's accountant reproduced, and the calibrated designs checked against their budgets.

Independent references written here from the papers:

- DECOR Algorithm 2 / Algorithm 3 (Appendix A): per-step RDP of order alpha is alpha * eps with
  ``eps = max_{|I| = q} 2 C^2 max_i [(sigma_cdp^2 I + sigma_cor^2 L(G minus I))^-1]_ii``
  (Algorithm 2 as printed omits the ^-1 on its line 3; Algorithm 3 and the proof, eq. (19), have
  it). A Gaussian mechanism of Mahalanobis sensitivity mu is (alpha, alpha mu^2 / 2)-RDP, so dpdl's
  ``mu_step`` must satisfy ``mu_step^2 / 2 = eps``.
- DECOR Theorem 1 / Theorem 6: the closed form ``2 C^2 (1/((n-q) s^2) + (1 - 1/(n-q)) / (s^2 + a_q
  s_cor^2))``.
- CorN-DSGD eq. (7) / (9b): the RDP-to-DP conversion and the closed-form calibration.
- Gaussian DP (Dong, Roth & Su, Corollary 2.13): ``delta(eps) = Phi(-eps/mu + mu/2) - e^eps
  Phi(-eps/mu - mu/2)``, inverted here with scipy, independently of :mod:`dpdl.accounting.gdp`.
"""

from __future__ import annotations

import itertools
import math

import networkx as nx
import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from dpdl.accounting import AgentLevel, account, calibrate
from dpdl.graphs import complete, erdos_renyi, metropolis_hastings, ring, torus
from dpdl.mechanisms.decor import Decor, design_decor
from dpdl.mechanisms.registry import DesignOptions, build_mechanism
from dpdl.mechanisms.whisper import design_whisper
from dpdl.mechanisms.zero_sum import ZeroSum
from dpdl.threats import CentralObserver, Colluding, Eavesdropper

DELTA = 1e-5

GRAPHS = {
    "ring16": ring(16),
    "torus16": torus(16),
    "er12": erdos_renyi(12, 0.4, 3),
    "er10-sparse": erdos_renyi(10, 0.3, 5),
}
THREATS = {
    "eavesdropper": (Eavesdropper(), 0),
    "hbc": (Colluding(1), 1),
    "colluding2": (Colluding(2), 2),
}
NOISE = [(0.7, 2.0), (1.5, 0.3)]  # (sigma_cdp, sigma_cor)


# -- the papers' formulas, written independently ---------------------------------------------------


def laplacian_without(graph: nx.Graph, removed: tuple[int, ...]) -> np.ndarray:
    remaining = graph.copy()
    remaining.remove_nodes_from(removed)
    return (
        nx.laplacian_matrix(remaining, nodelist=sorted(remaining.nodes), weight=None)
        .toarray()
        .astype(float)
    )


def decor_algorithm_3(
    graph: nx.Graph, clip: float, sigma_cdp: float, sigma_cor: float, q: int
) -> float:
    """DECOR Algorithm 3 (Algorithm 2 for q = 0 and q = 1): the per-step SecRDP epsilon."""
    n = graph.number_of_nodes()
    worst = 0.0
    for coalition in itertools.combinations(range(n), q):
        lap = laplacian_without(graph, coalition)
        sigma = np.linalg.inv(sigma_cdp**2 * np.eye(n - q) + sigma_cor**2 * lap)
        worst = max(worst, 2 * clip**2 * float(np.max(np.diag(sigma))))
    return worst


def algebraic_connectivity_after_deleting(graph: nx.Graph, q: int) -> float:
    """a_q(G): least second-smallest Laplacian eigenvalue over all graphs G minus q vertices."""
    n = graph.number_of_nodes()
    return min(
        float(np.linalg.eigvalsh(laplacian_without(graph, coalition))[1])
        for coalition in itertools.combinations(range(n), q)
    )


def theorem_6_bound(
    graph: nx.Graph, clip: float, sigma_cdp: float, sigma_cor: float, q: int
) -> float:
    m = graph.number_of_nodes() - q
    a_q = algebraic_connectivity_after_deleting(graph, q)
    return (
        2 * clip**2 * (1 / (m * sigma_cdp**2) + (1 - 1 / m) / (sigma_cdp**2 + a_q * sigma_cor**2))
    )


def gdp_delta(eps: float, mu: float) -> float:
    return float(norm.cdf(-eps / mu + mu / 2) - math.exp(eps + norm.logcdf(-eps / mu - mu / 2)))


def gdp_epsilon(mu: float, delta: float) -> float:
    return brentq(
        lambda e: gdp_delta(e, mu) - delta, 0.0, 10 * mu * mu + 100, xtol=1e-13, rtol=1e-14
    )


def gdp_mu(eps: float, delta: float) -> float:
    return brentq(lambda m: gdp_delta(eps, m) - delta, 1e-6, 100.0, xtol=1e-14, rtol=1e-14)


def trace_wrw(weights: np.ndarray, covariance: np.ndarray) -> float:
    return float(np.trace(weights @ covariance @ weights.T))


# -- Algorithm 2 / 3 ------------------------------------------------------------------------------


@pytest.mark.parametrize("noise", NOISE, ids=["cor-heavy", "cdp-heavy"])
@pytest.mark.parametrize("threat_name", list(THREATS))
@pytest.mark.parametrize("graph_name", list(GRAPHS))
def test_per_step_rdp_equals_decor_algorithm_3(
    graph_name: str, threat_name: str, noise: tuple[float, float]
) -> None:
    graph, (threat, q) = GRAPHS[graph_name], THREATS[threat_name]
    clip, (sigma_cdp, sigma_cor) = 0.3, noise
    report = account(Decor(graph, sigma_cdp, sigma_cor), threat, AgentLevel(clip), 1, DELTA)
    reference = decor_algorithm_3(graph, clip, sigma_cdp, sigma_cor, q)
    assert report.exact
    assert report.mu_step**2 / 2 == pytest.approx(reference, rel=1e-9)
    assert report.threat == str(threat)


@pytest.mark.parametrize("threat_name", list(THREATS))
def test_paper_rdp_accountant_composes_decor_per_step_rdp(threat_name: str) -> None:
    """Over T steps the papers convert T * eps_step RDP with Mironov's Prop. 3 optimised over alpha:
    eps = T e + 2 sqrt(T e log(1/delta)) (CorN-DSGD eq. (7) with e = 2 C^2 max [R^-1]_ii)."""
    graph, (threat, q) = GRAPHS["torus16"], THREATS[threat_name]
    clip, sigma_cdp, sigma_cor, steps = 0.3, 5.0, 8.0, 200
    per_step = decor_algorithm_3(graph, clip, sigma_cdp, sigma_cor, q)
    report = account(
        Decor(graph, sigma_cdp, sigma_cor),
        threat,
        AgentLevel(clip),
        steps,
        DELTA,
        accountant="paper-rdp",
    )
    expected = steps * per_step + 2 * math.sqrt(steps * per_step * math.log(1 / DELTA))
    assert report.epsilon == pytest.approx(expected, rel=1e-9)
    # the exact GDP accountant of the same noise: sqrt(T) mu_step-GDP, tighter than the RDP bound
    exact = account(Decor(graph, sigma_cdp, sigma_cor), threat, AgentLevel(clip), steps, DELTA)
    assert exact.epsilon == pytest.approx(
        gdp_epsilon(math.sqrt(2 * steps * per_step), DELTA), rel=1e-7
    )
    assert exact.epsilon < report.epsilon


def test_honest_but_curious_is_weaker_than_eavesdropper_and_colluding_weaker_still() -> None:
    for graph in GRAPHS.values():
        mus = [
            account(Decor(graph, 0.7, 2.0), t, AgentLevel(0.3), 1, DELTA).mu_step
            for t, _ in THREATS.values()
        ]
        assert mus[0] < mus[1] <= mus[2]


# -- Theorem 1 / Theorem 6 closed form -------------------------------------------------------------


@pytest.mark.parametrize("noise", NOISE, ids=["cor-heavy", "cdp-heavy"])
@pytest.mark.parametrize("q", [0, 1, 2])
@pytest.mark.parametrize("graph_name", list(GRAPHS))
def test_theorem_closed_form_is_an_upper_bound(
    graph_name: str, q: int, noise: tuple[float, float]
) -> None:
    graph, clip, (sigma_cdp, sigma_cor) = GRAPHS[graph_name], 0.3, noise
    threat = THREATS[["eavesdropper", "hbc", "colluding2"][q]][0]
    exact = (
        account(Decor(graph, sigma_cdp, sigma_cor), threat, AgentLevel(clip), 1, DELTA).mu_step ** 2
        / 2
    )
    assert theorem_6_bound(graph, clip, sigma_cdp, sigma_cor, q) >= exact * (1 - 1e-12)


def test_theorem_1_is_strictly_loose_on_the_ring() -> None:
    # e_i - 1/n projects on every nonzero Laplacian eigenvector of the ring, not only on a(G)'s.
    graph, clip, sigma_cdp, sigma_cor = GRAPHS["ring16"], 0.3, 0.7, 2.0
    exact = (
        account(
            Decor(graph, sigma_cdp, sigma_cor), Eavesdropper(), AgentLevel(clip), 1, DELTA
        ).mu_step
        ** 2
        / 2
    )
    assert theorem_6_bound(graph, clip, sigma_cdp, sigma_cor, 0) > 1.5 * exact


@pytest.mark.parametrize("n", [5, 16])
@pytest.mark.parametrize("q", [0, 1, 2])
def test_theorem_1_is_exact_on_the_complete_graph(n: int, q: int) -> None:
    """L(K_m) = m I - 1 1^T has the single nonzero eigenvalue m = a(K_m), so x_i = e_i - 1/m lies in
    its eigenspace and the Courant-Fischer step of the proof is an equality; K_n minus q vertices is
    K_(n-q), hence a_q = n - q."""
    graph, clip, sigma_cdp, sigma_cor = complete(n), 0.3, 0.7, 2.0
    threat = THREATS[["eavesdropper", "hbc", "colluding2"][q]][0]
    exact = (
        account(Decor(graph, sigma_cdp, sigma_cor), threat, AgentLevel(clip), 1, DELTA).mu_step ** 2
        / 2
    )
    m = n - q
    closed = (
        2 * clip**2 * (1 / (m * sigma_cdp**2) + (1 - 1 / m) / (sigma_cdp**2 + m * sigma_cor**2))
    )
    assert algebraic_connectivity_after_deleting(graph, q) == pytest.approx(m, rel=1e-12)
    assert exact == pytest.approx(closed, rel=1e-10)
    assert theorem_6_bound(graph, clip, sigma_cdp, sigma_cor, q) == pytest.approx(exact, rel=1e-10)


# -- zero-sum noise gives no guarantee -------------------------------------------------------------


@pytest.mark.parametrize("threat", [Eavesdropper(), Colluding(1), CentralObserver()], ids=str)
@pytest.mark.parametrize(
    "make", [lambda g: ZeroSum(g, 3.0), lambda g: Decor(g, 0.0, 3.0)], ids=["zero-sum", "decor0"]
)
@pytest.mark.parametrize("graph_name", ["ring16", "er12"])
def test_zero_sum_noise_gives_infinite_epsilon(graph_name: str, make, threat) -> None:
    # 1^T v = 0: the sum (or the average) of the messages reveals the sum of the gradients.
    mechanism = make(GRAPHS[graph_name])
    report = account(mechanism, threat, AgentLevel(0.1), 100, DELTA)
    assert math.isinf(report.epsilon) and math.isinf(report.mu_step)
    assert "no guarantee" in str(report)
    assert str(threat) in str(report)


def test_any_private_noise_restores_a_finite_guarantee() -> None:
    # the contrast: sigma_cdp > 0 makes R positive definite (CorN-DSGD guideline (G1))
    graph = GRAPHS["er12"]
    for threat in (Eavesdropper(), Colluding(1), CentralObserver()):
        report = account(Decor(graph, 0.05, 3.0), threat, AgentLevel(0.1), 100, DELTA)
        assert math.isfinite(report.epsilon) and "no guarantee" not in str(report)


# -- exact calibration against the papers' closed form ---------------------------------------------

ER20 = erdos_renyi(20, 0.5, 0)
W20 = metropolis_hastings(ER20)
STEPS, CLIP = 5000, 0.1


@pytest.mark.parametrize("eps", [3.0, 5.0, 10.0])
def test_exact_calibration_needs_less_noise_than_the_papers_closed_form(eps: float) -> None:
    exact_cal = calibrate(eps, DELTA, STEPS, AgentLevel(CLIP))
    paper_cal = calibrate(eps, DELTA, STEPS, AgentLevel(CLIP), method="paper")
    # both mu_step values from the formulas: exact GDP inversion, and CorN-DSGD eq. (9b)
    mu_exact = gdp_mu(eps, DELTA) / math.sqrt(STEPS)
    mu_paper = eps / math.sqrt(4 * STEPS * math.log(1 / DELTA))
    assert exact_cal.mu_step == pytest.approx(mu_exact, rel=1e-9)
    assert paper_cal.mu_step == pytest.approx(mu_paper, rel=1e-12)
    assert not paper_cal.overshoots  # eps <= log(1/delta): the closed form is conservative
    variance_ratio = (mu_exact / mu_paper) ** 2
    for design in (lambda cal: design_decor(ER20, W20, cal), lambda cal: design_whisper(W20, cal)):
        exact_noise, paper_noise = design(exact_cal), design(paper_cal)
        exact_trace, paper_trace = (
            trace_wrw(W20, exact_noise.covariance()),
            trace_wrw(W20, paper_noise.covariance()),
        )
        assert exact_trace < paper_trace
        # both programs are homogeneous: the optimal noise scales as 1 / mu_step^2
        assert paper_trace / exact_trace == pytest.approx(variance_ratio, rel=1e-4)
        # and the exact design meets its budget against the eavesdropper, tightly
        achieved = account(exact_noise, Eavesdropper(), AgentLevel(CLIP), STEPS, DELTA).epsilon
        assert eps * (1 - 1e-6) <= achieved <= eps


def test_noise_savings_match_the_design_notes() -> None:
    # docs/design.md: 2.6x (eps=3), 1.8x (eps=10), 1.4x (eps=20) less variance at delta=1e-5
    for eps, saving in [(3.0, 2.6), (10.0, 1.8), (20.0, 1.4)]:
        ratio = (gdp_mu(eps, DELTA) / (eps / math.sqrt(4 * math.log(1 / DELTA)))) ** 2
        assert ratio == pytest.approx(saving, abs=0.05)
        exact_cal = calibrate(eps, DELTA, STEPS, AgentLevel(CLIP))
        paper_cal = calibrate(eps, DELTA, STEPS, AgentLevel(CLIP), method="paper")
        assert (exact_cal.mu_step / paper_cal.mu_step) ** 2 == pytest.approx(ratio, rel=1e-8)


def test_papers_closed_form_overshoots_at_eps_40() -> None:
    eps = 40.0
    paper_cal = calibrate(eps, DELTA, STEPS, AgentLevel(CLIP), method="paper")
    # its total GDP parameter is sqrt(T) mu_step = eps / sqrt(4 log(1/delta)) whatever T
    achieved = gdp_epsilon(eps / math.sqrt(4 * math.log(1 / DELTA)), DELTA)
    assert achieved == pytest.approx(41.76, abs=0.01)
    assert paper_cal.overshoots
    assert paper_cal.achieved_epsilon == pytest.approx(achieved, rel=1e-7)
    # a design built on it really exceeds the budget; the exact calibration does not
    whisper_paper = design_whisper(W20, paper_cal)
    assert account(whisper_paper, Eavesdropper(), AgentLevel(CLIP), STEPS, DELTA).epsilon > eps
    exact_cal = calibrate(eps, DELTA, STEPS, AgentLevel(CLIP))
    assert not exact_cal.overshoots
    assert (
        account(
            design_whisper(W20, exact_cal), Eavesdropper(), AgentLevel(CLIP), STEPS, DELTA
        ).epsilon
        <= eps
    )


# -- the registry's designs meet their budgets -----------------------------------------------------

ER12 = erdos_renyi(12, 0.5, 0)
W12 = metropolis_hastings(ER12)


def _independent_mu_step(name: str, covariance: np.ndarray, clip: float) -> float:
    n = covariance.shape[0]
    if (
        name == "cdp"
    ):  # central observer sees the average: sensitivity (2C/n) over std sqrt(1^T R 1)/n
        return 2 * clip / math.sqrt(float(np.ones(n) @ covariance @ np.ones(n)))
    return 2 * clip * math.sqrt(float(np.max(np.diag(np.linalg.inv(covariance)))))


@pytest.mark.parametrize("eps", [1.0, 8.0])
@pytest.mark.parametrize("name", ["ldp", "decor", "whisper", "cdp"])
def test_registry_designs_meet_their_budget_without_overshooting(name: str, eps: float) -> None:
    clip, steps = 0.5, 1000
    calibration = calibrate(eps, DELTA, steps, AgentLevel(clip))
    mechanism = build_mechanism(name, ER12, W12, calibration)
    report = account(mechanism, mechanism.default_threat, AgentLevel(clip), steps, DELTA)
    assert 0.999 * eps <= report.epsilon <= eps
    assert report.mu_step <= calibration.mu_step
    assert report.mu_step == pytest.approx(
        _independent_mu_step(name, mechanism.covariance(), clip), rel=1e-9
    )
    assert report.epsilon == pytest.approx(
        gdp_epsilon(math.sqrt(steps) * report.mu_step, DELTA), rel=1e-7
    )


def test_decor_designed_against_honest_but_curious_meets_that_budget() -> None:
    clip, steps, eps = 0.5, 1000, 4.0
    calibration = calibrate(eps, DELTA, steps, AgentLevel(clip))
    mechanism = build_mechanism(
        "decor", ER12, W12, calibration, DesignOptions(threat="honest-but-curious")
    )
    assert mechanism.default_threat == Colluding(1)
    report = account(mechanism, Colluding(1), AgentLevel(clip), steps, DELTA)
    assert 0.999 * eps <= report.epsilon <= eps
    per_step = decor_algorithm_3(ER12, clip, mechanism.sigma_pair, mechanism.sigma_cor, 1)
    assert report.mu_step**2 / 2 == pytest.approx(per_step, rel=1e-9)
    # the eavesdropper, who knows fewer secrets, gets strictly less
    assert (
        account(mechanism, Eavesdropper(), AgentLevel(clip), steps, DELTA).epsilon < report.epsilon
    )
