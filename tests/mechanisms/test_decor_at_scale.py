"""DECOR's design at scale: the spectral search against the accountant's, and the bound that takes
LDP without a search.

From :data:`~dpdl.mechanisms.decor.SPECTRAL_MIN_AGENTS` agents on, the search against the
eavesdropper reads one eigendecomposition of the Laplacian instead of a certified accounting per
step; here it is forced on small graphs and compared with the accountant's search (the design of
every smaller graph), and the design it finds must meet its budget by the accountant.
"""

from __future__ import annotations

import math

import networkx as nx
import pytest

import dpdl.mechanisms.decor as decor_module
from dpdl.accounting import AgentLevel, account, calibrate, step_sensitivity
from dpdl.graphs import build_graph, erdos_renyi, metropolis_hastings, ring, torus
from dpdl.mechanisms.decor import Decor, _ldp_is_best, _spectral_units, _traces, design_decor
from dpdl.threats import Colluding, Eavesdropper

RELATION = AgentLevel(0.1)
GRAPHS = {
    "ring16": ring(16),
    "torus16": torus(16),
    "er20": erdos_renyi(20, 0.3, 3),
    "er12": erdos_renyi(12, 0.5, 1),
}


@pytest.mark.parametrize("name", GRAPHS)
def test_the_spectral_unit_is_the_accountants_to_its_rounding(name: str) -> None:
    """``max_i [(I + t L)^-1]_ii`` from one eigendecomposition against the certified value of the
    factor: never above it by more than rounding, below it by no more than its certificate."""
    graph = GRAPHS[name]
    unit = _spectral_units(graph)
    for ratio in (0.0, 1e-6, 1e-2, 1.0, 37.0, 1e4):
        noise = Decor(graph, 1.0, math.sqrt(ratio))
        certified = step_sensitivity(noise, Eavesdropper(), RELATION, simulated=False)
        certified /= RELATION.sensitivity
        assert unit(ratio) <= certified * (1.0 + 1e-13)
        assert unit(ratio) >= certified * (1.0 - 1e-9)


@pytest.mark.parametrize("name", GRAPHS)
def test_a_spectral_design_meets_its_budget_and_is_the_searched_one(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The design the spectral search finds is certified within the budget (and no noisier than
    a relative 1e-11 above it) and is the accountant's search's design: the same ratio to the
    search's tolerance, the same variance after mixing to 1e-9."""
    graph = GRAPHS[name]
    weights = metropolis_hastings(graph)
    calibration = calibrate(3.0, 1e-5, 1000, RELATION)
    searched = design_decor(graph, weights, calibration)
    monkeypatch.setattr(decor_module, "SPECTRAL_MIN_AGENTS", 1)
    spectral = design_decor(graph, weights, calibration)
    mu_step = step_sensitivity(spectral, Eavesdropper(), RELATION)
    assert calibration.mu_step * (1.0 - 1e-11) <= mu_step <= calibration.mu_step
    report = account(spectral, Eavesdropper(), RELATION, 1000, 1e-5)
    assert report.epsilon <= 3.0
    ratios = [(m.sigma_cor / m.sigma_pair) ** 2 for m in (searched, spectral)]
    assert ratios[1] == pytest.approx(ratios[0], rel=1e-4)
    assert (ratios[0] > 0) == (name != "er20")  # no correlation pays on er20
    assert spectral.variance_after_mixing(weights) == pytest.approx(
        searched.variance_after_mixing(weights), rel=1e-9
    )


def test_ldp_is_taken_without_a_search_exactly_where_the_search_takes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On the Facebook ego network 414 (148 agents, a data slice of the tests) no correlation
    pays: the bound proves it, and the design is the search's to the bit. On a ring DECOR pays
    and the bound says nothing."""
    graph = build_graph("facebook-ego-414")
    weights = metropolis_hastings(graph)
    calibration = calibrate(10.0, 1e-5, 200, RELATION)
    assert _ldp_is_best(graph, Eavesdropper(), *_traces(graph, weights, None))
    assert _ldp_is_best(graph, Colluding(1), *_traces(graph, weights, None))
    pruned = design_decor(graph, weights, calibration)
    monkeypatch.setattr(decor_module, "_ldp_is_best", lambda *arguments: False)
    searched = design_decor(graph, weights, calibration)
    assert searched.sigma_cor == pruned.sigma_cor == 0.0
    assert searched.sigma_pair == pruned.sigma_pair
    small_ring = ring(16)
    assert not _ldp_is_best(
        small_ring, Eavesdropper(), *_traces(small_ring, metropolis_hastings(small_ring), None)
    )


def test_a_large_ring_is_designed_from_one_eigendecomposition() -> None:
    """1000 agents, the spectral search's size: the design is certified within its budget, and
    its ratio is the optimum of the exact cost."""
    graph = ring(1000)
    weights = metropolis_hastings(graph)
    calibration = calibrate(3.0, 1e-5, 1000, RELATION)
    noise = design_decor(graph, weights, calibration)
    mu_step = step_sensitivity(noise, Eavesdropper(), RELATION)
    assert calibration.mu_step * (1.0 - 1e-10) <= mu_step <= calibration.mu_step
    ratio = (noise.sigma_cor / noise.sigma_pair) ** 2
    unit = _spectral_units(graph)
    base, extra = _traces(graph, weights, None)
    costs = [unit(ratio * f) ** 2 * (base + ratio * f * extra) for f in (0.99, 1.0, 1.01)]
    assert ratio > 0 and costs[1] <= min(costs[0], costs[2])
    assert nx.number_of_edges(graph) == len(noise.secrets)
