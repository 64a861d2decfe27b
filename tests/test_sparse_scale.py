"""Sparse at scale (issue 20, item 2): the sparse mixing matrix, validation and spectral facts equal
the dense ones on small graphs; a D-SGD run gives the same models with either; accounting of
independent noise in closed form equals the dense path; results report the graph's real size; a
dense design too large for memory is refused before it allocates."""

from __future__ import annotations

import warnings

import networkx as nx
import numpy as np
import pytest
import torch
from scipy import sparse

import dpdl.scale
from dpdl.accounting import AgentLevel, account, calibrate
from dpdl.accounting import accountant as accountant_module
from dpdl.errors import ConfigError, MixingMatrixError
from dpdl.graphs import (
    SPARSE_MIN_AGENTS,
    algebraic_connectivity,
    erdos_renyi,
    local_degree,
    max_degree,
    metropolis_hastings,
    mixing_matrix,
    mixing_rate,
    ring,
    sinkhorn_knopp,
    summarize,
    validate_mixing_matrix,
)
from dpdl.jobspec.engine import DSGDConfig, StepSize
from dpdl.mechanisms import NoiseMechanism
from dpdl.mechanisms.decor import Decor, design_decor
from dpdl.mechanisms.independent import CentralDP, LocalDP
from dpdl.mechanisms.registry import build_mechanism
from dpdl.simulation import run_dsgd
from dpdl.tasks import build_task
from dpdl.threats import CentralObserver, Colluding, Eavesdropper

RULES = [metropolis_hastings, local_degree, max_degree, sinkhorn_knopp]


@pytest.fixture(scope="module")
def graph() -> nx.Graph:
    return erdos_renyi(40, 0.15, seed=3)


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.__name__)
def test_sparse_rules_build_the_dense_matrix(graph: nx.Graph, rule) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # local-degree on an irregular graph
        dense, csr = rule(graph, sparse=False), rule(graph, sparse=True)
    assert isinstance(dense, np.ndarray) and isinstance(csr, sparse.csr_array)
    np.testing.assert_allclose(csr.toarray(), dense, rtol=0, atol=1e-15)
    doubly = rule is not local_degree
    assert mixing_rate(csr, doubly_stochastic=doubly) == pytest.approx(
        mixing_rate(dense, doubly_stochastic=doubly), rel=1e-10
    )


def test_directed_sinkhorn_sparse_equals_dense() -> None:
    digraph = erdos_renyi(25, 0.3, seed=1, directed=True)
    dense, csr = sinkhorn_knopp(digraph, sparse=False), sinkhorn_knopp(digraph, sparse=True)
    np.testing.assert_allclose(csr.toarray(), dense, atol=1e-12)
    assert mixing_rate(csr) == pytest.approx(mixing_rate(dense), rel=1e-9)


def test_mixing_matrix_is_sparse_from_the_threshold() -> None:
    assert isinstance(mixing_matrix(ring(30)), np.ndarray)
    big = mixing_matrix(ring(SPARSE_MIN_AGENTS))
    assert isinstance(big, sparse.csr_array) and big.nnz == 3 * SPARSE_MIN_AGENTS
    assert isinstance(mixing_matrix(ring(30), sparse=True), sparse.csr_array)


def test_spectral_facts_sparse_equal_dense(graph: nx.Graph) -> None:
    dense = metropolis_hastings(graph, sparse=False)
    csr = metropolis_hastings(graph, sparse=True)
    assert algebraic_connectivity(graph, sparse=True) == pytest.approx(
        algebraic_connectivity(graph, sparse=False), rel=1e-8
    )
    # the dense W through the sparse solver too (what a large dense W from a plugin rule gets)
    assert mixing_rate(dense, sparse=True) == pytest.approx(mixing_rate(dense), rel=1e-10)
    facts, sparse_facts = summarize(graph, dense).as_dict(), summarize(graph, csr).as_dict()
    assert sparse_facts == pytest.approx(facts, rel=1e-10)


def _error(weights, graph=None) -> str:
    with pytest.raises(MixingMatrixError) as caught:
        validate_mixing_matrix(weights, graph)
    return str(caught.value)


def test_sparse_validation_says_what_dense_says(graph: nx.Graph) -> None:
    dense = metropolis_hastings(graph, sparse=False)
    assert isinstance(validate_mixing_matrix(sparse.csr_array(dense), graph), sparse.csr_array)
    skewed = dense.copy()
    skewed[0, 0] += 0.1
    assert _error(sparse.csr_array(skewed)) == _error(skewed)
    other = metropolis_hastings(erdos_renyi(40, 0.15, seed=4), sparse=False)
    assert _error(sparse.csr_array(other), graph) == _error(other, graph)
    negative = dense.copy()
    negative[0, 0] = -1.0
    assert _error(sparse.csr_array(negative)) == _error(negative)
    split = sparse.block_diag([metropolis_hastings(ring(10), sparse=True)] * 2, format="csr")
    assert "does not mix" in _error(sparse.csr_array(split))
    assert "does not mix" in _error(split.toarray())


def _chain(arcs: list[tuple[int, int, float]], n: int) -> np.ndarray:
    weights = np.zeros((n, n))
    for i, j, w in arcs:
        weights[i, j] = w
    return weights


#: (W, doubly stochastic?, what the support-based check says, or None: it mixes). Each W's
#: verdict is also the dense eigen-decomposition's (checked below).
MIXING_CASES = [
    (np.roll(np.eye(6), 1, axis=1), True, "splits into 6 groups"),  # a permutation: sigma_2 = 1
    (nx.to_numpy_array(nx.cycle_graph(6)) / 2, True, "periodic (a bipartite support"),
    (nx.to_numpy_array(nx.cycle_graph(5)) / 2, True, None),  # odd cycle: aperiodic
    (np.kron(np.eye(2), np.full((3, 3), 1 / 3)), True, "splits into 2 groups"),
    (_chain([(0, 1, 1), (1, 1, 0.5), (1, 2, 0.5), (2, 1, 0.5), (2, 2, 0.5), (3, 3, 1)], 4), False,
     "2 closed classes"),
    (_chain([(0, 1, 1), (1, 1, 0.5), (1, 2, 0.5), (2, 1, 0.5), (2, 2, 0.5)], 3), False, None),
    (np.roll(np.eye(6), 1, axis=1), False, "periodic (no weight on self-loops"),
    (_chain([(0, 1, 1), (1, 2, 1), (2, 0, 0.5), (2, 1, 0.5)], 3), False, None),  # cycles 3 and 2
]  # fmt: skip


@pytest.mark.parametrize(("weights", "doubly", "reason"), MIXING_CASES)
def test_whether_a_sparse_w_mixes_is_decided_from_its_support_as_the_spectrum_says(
    weights: np.ndarray, doubly: bool, reason: str | None
) -> None:
    def verdict(w) -> str | None:
        try:
            validate_mixing_matrix(w, doubly_stochastic=doubly)
        except MixingMatrixError as error:
            return str(error)
        return None

    dense, by_support = verdict(weights), verdict(sparse.csr_array(weights))
    assert (dense is None) == (reason is None)
    assert (by_support is None) == (reason is None)
    if reason is not None:
        assert "does not mix" in dense
        assert reason in by_support


def test_seeded_dsgd_gives_the_same_models_with_a_sparse_w() -> None:
    graph = erdos_renyi(30, 0.2, seed=2)
    dense = mixing_matrix(graph)
    task = build_task("least-squares", 30, 0)
    config = DSGDConfig(steps=25, step_size=StepSize(0.1), clip=1.0, eval_every=5)
    for mechanism in (LocalDP(30, 0.05), Decor(graph, 0.05, 0.1)):
        first = run_dsgd(task, dense, mechanism, config, seed=7)
        second = run_dsgd(task, sparse.csr_array(dense), mechanism, config, seed=7)
        np.testing.assert_allclose(second.params, first.params, rtol=1e-12, atol=1e-14)


def test_variance_after_mixing_and_decor_design_sparse_equal_dense(graph: nx.Graph) -> None:
    dense = metropolis_hastings(graph, sparse=False)
    csr = sparse.csr_array(dense)
    for mechanism in (LocalDP(40, 0.3), Decor(graph, 0.2, 0.7)):
        assert mechanism.variance_after_mixing(csr) == pytest.approx(
            mechanism.variance_after_mixing(dense), rel=1e-12
        )
    calibration = calibrate(10.0, 1e-5, 100, AgentLevel(0.1))
    one, other = design_decor(graph, dense, calibration), design_decor(graph, csr, calibration)
    assert other.sigma_pair == pytest.approx(one.sigma_pair, rel=1e-9)
    assert other.sigma_cor == pytest.approx(one.sigma_cor, rel=1e-9)


@pytest.mark.parametrize("threat", [Eavesdropper(), Colluding(1), CentralObserver()], ids=str)
def test_independent_noise_in_closed_form_equals_the_dense_accountant(threat) -> None:
    variances = np.random.default_rng(0).uniform(0.5, 2.0, 50)
    noise = NoiseMechanism(50, variances)
    closed = accountant_module._unit_sensitivity(noise, threat)[0]
    dense = accountant_module.view_sensitivities(np.diag(noise.noise.private_stds), threat).max()
    assert closed == pytest.approx(dense, rel=1e-12)
    assert closed >= 1.0 / np.sqrt(variances.min()) or isinstance(threat, CentralObserver)
    unprotected = NoiseMechanism(2, np.array([1.0, 0.0]))
    assert accountant_module._unit_sensitivity(unprotected, Eavesdropper())[0] == np.inf


def test_ldp_at_scale_is_calibrated_and_accounted_without_an_n_by_n_matrix() -> None:
    n = 100_000  # an n x n matrix would be 80 GB
    calibration = calibrate(10.0, 1e-5, 100, AgentLevel(0.1))
    mechanism = build_mechanism("ldp", ring(3), sparse.eye_array(n, format="csr"), calibration)
    assert mechanism.n == n
    assert account(mechanism, Eavesdropper(), AgentLevel(0.1), 100, 1e-5).epsilon <= 10.0
    assert account(CentralDP(n, 1.0), CentralObserver(), AgentLevel(0.1), 100, 1e-5).epsilon > 0


def test_results_report_the_graphs_number_of_agents() -> None:
    from dpdl.experiments.train import TrainConfig, run_training

    result = run_training(
        TrainConfig(task="least-squares", graph="karate", steps=2, eval_every=1, mechanism="ldp")
    )
    assert result.config.n == 34 and result.summary()["n"] == 34
    assert result.config.as_dict()["n"] == 34


def test_a_dense_design_too_large_for_memory_is_refused_first(
    graph: nx.Graph, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DPDL_MEMORY_LIMIT", "64K")  # a 64 KiB machine
    calibration = calibrate(10.0, 1e-5, 100, AgentLevel(0.1))
    weights = metropolis_hastings(graph, sparse=True)
    for method in ("whisper", "whisper-multiseed"):
        with pytest.raises(ConfigError, match=r"n = 40 agents it needs about 204,800 bytes"):
            build_mechanism(method, graph, weights, calibration)
    assert dpdl.scale.dense_bytes(100_000) == 80_000_000_000


def test_runtime_links_read_a_sparse_w(graph: nx.Graph) -> None:
    pytest.importorskip("cryptography")
    from dpdl.runtime.channel import receivers_of, senders_of

    dense = metropolis_hastings(graph, sparse=False)
    csr = sparse.csr_array(dense)
    for agent in (0, 7, 39):
        assert receivers_of(csr, agent) == receivers_of(dense, agent)
        assert senders_of(csr, agent) == senders_of(dense, agent)


def test_least_squares_objective_expanded_at_scale_equals_term_by_term(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dpdl.tasks import quadratic

    task = quadratic.decor_least_squares(50, 10, np.random.default_rng(0))
    params = torch.from_numpy(np.random.default_rng(1).standard_normal((7, 10)))
    term_by_term = task.objective(params).numpy()
    monkeypatch.setattr(quadratic, "SPARSE_MIN_AGENTS", 10)
    np.testing.assert_allclose(task.objective(params).numpy(), term_by_term, rtol=1e-12)
