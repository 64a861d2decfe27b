"""Gradient reconstruction beyond the neighbourhood (`dpdl.attacks.reconstruction`): exact on
noiseless views, the generalized least-squares error covariance on noisy ones, and the unknowns
that no view can separate reported as such."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from dpdl.attacks.reconstruction import agent_errors, constant_gradients, reconstruct
from dpdl.errors import ConfigError
from dpdl.factorization.algorithms import from_noise
from dpdl.factorization.trust import PNDP, attacker_knowledge
from dpdl.graphs import metropolis_hastings
from dpdl.mechanisms.independent import LocalDP, NoNoise


def _gossip_view(graph: nx.Graph, attacker: int, rounds: int) -> np.ndarray:
    """El Mrini et al.'s knowledge matrix of gossip averaging (Section 3), built by hand: the
    attacker's own value, then every round its neighbours' values `e_v^T W^t x`."""
    weights = metropolis_hastings(graph)
    rows = [np.eye(graph.number_of_nodes())[attacker]]
    power = np.eye(graph.number_of_nodes())
    for _ in range(rounds):
        rows += [power[v] for v in graph.neighbors(attacker)]
        power = weights @ power
    return np.array(rows)


def _dgd_view(graph: nx.Graph, mechanism: object, steps: int, window: int):
    knowledge = attacker_knowledge(
        from_noise(mechanism, metropolis_hastings(graph), steps), PNDP((0,))
    )
    n = graph.number_of_nodes()
    return knowledge.workload @ constant_gradients(n, steps, window), knowledge.decoder


def test_gossip_averaging_values_beyond_the_neighbourhood_are_recovered_exactly() -> None:
    """Section 3 on a path: agent 0 hears only agent 1, yet recovers every value."""
    view = _gossip_view(nx.path_graph(6), 0, 8)
    values = np.random.default_rng(0).standard_normal((6, 3))
    result = reconstruct(view, np.zeros((len(view), 0)), view @ values)
    assert result.identifiable.all() and result.exact.all()
    np.testing.assert_allclose(result.estimate, values, atol=1e-8)
    assert np.all(result.variance == 0)


def test_agents_with_the_same_column_are_not_identifiable_but_their_sum_is() -> None:
    """Two leaves of the attacker's neighbour enter every equation alike: only their sum can be
    known, and the attack says so (El Mrini et al.'s indistinguishable nodes)."""
    graph = nx.Graph([(0, 1), (1, 2), (1, 3)])
    view = _gossip_view(graph, 0, 6)
    values = np.random.default_rng(1).standard_normal((4, 2))
    result = reconstruct(view, np.zeros((len(view), 0)), view @ values)
    assert result.identifiable.tolist() == [True, True, False, False]
    assert np.isnan(result.variance[2:]).all()
    np.testing.assert_allclose(result.estimate[:2], values[:2], atol=1e-10)
    np.testing.assert_allclose(result.estimate[2] + result.estimate[3], values[2] + values[3])
    assert not np.allclose(result.estimate[2], values[2], atol=1e-3)
    errors = agent_errors(result, values, np.arange(4), 4)
    assert errors.identifiable_fraction.tolist() == [1, 1, 0, 0]
    assert np.isnan(errors.predicted_error[2:]).all()


@pytest.mark.parametrize("graph", [nx.path_graph(6), nx.cycle_graph(6)], ids=["path", "ring"])
def test_noiseless_dgd_reconstructs_a_non_neighbours_gradient(graph: nx.Graph) -> None:
    """Section 4's setting (one gradient per agent over the run) on dpdl's own D-GD messages:
    agent 3, three hops away, to 1e-8."""
    steps = 12
    workload, decoder = _dgd_view(graph, NoNoise(6), steps, steps)
    gradients = np.random.default_rng(2).standard_normal((6, 4))
    result = reconstruct(workload, decoder, workload @ gradients)
    assert not result.identifiable[0]  # the attacker's own gradient is not in its view
    assert result.identifiable[1:].all() and result.exact[1:].all()
    assert nx.shortest_path_length(graph, 0, 3) == 3
    np.testing.assert_allclose(result.estimate[1:], gradients[1:], atol=1e-8)


def test_per_step_gradients_beyond_the_first_message_are_not_identifiable() -> None:
    """With every step's gradient unknown, a path's single neighbour gives one equation per step
    for five agents' gradients: only its first gradient (its first message) is identified."""
    steps = 6
    workload, decoder = _dgd_view(nx.path_graph(6), NoNoise(6), steps, 1)
    gradients = np.random.default_rng(3).standard_normal((6 * steps, 2))
    result = reconstruct(workload, decoder, workload @ gradients)
    assert np.flatnonzero(result.identifiable).tolist() == [1]
    assert result.rank == steps
    np.testing.assert_allclose(result.estimate[1], gradients[1], atol=1e-10)


def test_ldp_error_matches_the_closed_form_gls_covariance() -> None:
    """Under LDP noise the estimate is unbiased with covariance `(A^T Sigma^-1 A)^-1` (targets'
    columns; `Sigma = B B^T` invertible here), checked over 40,000 independent coordinates: the
    sample variance's relative standard error is 0.7%, the tolerance 5%, and the ordinary least
    squares estimate, whose variance is more than 20% larger for some target, would fail it."""
    workload, decoder = _dgd_view(nx.cycle_graph(6), LocalDP(6, 1.0), 8, 8)
    targets = np.arange(1, 6)
    covariance = decoder @ decoder.T
    columns = workload[:, targets]
    exact = np.linalg.inv(columns.T @ np.linalg.solve(covariance, columns))
    ols = np.linalg.pinv(columns)
    ols_variance = np.diag(ols @ covariance @ ols.T)
    assert (ols_variance / np.diag(exact)).max() > 1.2  # the test can tell GLS from OLS

    coordinates = 40_000
    rng = np.random.default_rng(4)
    gradients = rng.standard_normal((6, coordinates))
    noise = rng.standard_normal((decoder.shape[1], coordinates))
    result = reconstruct(workload, decoder, workload @ gradients + decoder @ noise)
    assert result.identifiable[targets].all() and not result.exact[targets].any()
    np.testing.assert_allclose(result.variance[targets], np.diag(exact), rtol=1e-8)
    error = result.estimate[targets] - gradients[targets]
    standard_error = np.sqrt(np.diag(exact) / coordinates)
    assert np.all(np.abs(error.mean(axis=1)) < 5 * standard_error)
    np.testing.assert_allclose(error.var(axis=1), np.diag(exact), rtol=0.05)
    sample = np.cov(error)
    scale = np.sqrt(np.outer(np.diag(exact), np.diag(exact)))
    assert np.abs((sample - exact) / scale).max() < 0.05

    errors = agent_errors(result, gradients, np.arange(6), 6)
    np.testing.assert_allclose(
        errors.relative_error[targets], errors.predicted_error[targets], rtol=0.05
    )


def test_a_seed_the_attacker_holds_is_removed_exactly() -> None:
    """Noise the attacker knows is no noise: a message carrying a target's value plus a seed the
    attacker holds (a row of B for the seed alone) gives the value exactly."""
    workload = np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 1.0]])
    decoder = np.array([[3.0, 0.0], [1.0, 0.0], [0.0, 2.0]])
    truth = np.array([[0.5], [-1.0]])
    noise = np.array([[0.7], [0.2]])
    result = reconstruct(workload, decoder, workload @ truth + decoder @ noise)
    assert result.exact.tolist() == [True, False]
    np.testing.assert_allclose(result.estimate[0], truth[0], atol=1e-12)
    np.testing.assert_allclose(result.variance, [0.0, 4.0], atol=1e-12)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: reconstruct(np.eye(2), np.eye(3), np.ones((2, 1))), "one row per observation"),
        (lambda: reconstruct(np.eye(2), np.eye(2), np.ones(2)), "matrices"),
        (lambda: reconstruct(np.eye(2), np.eye(2), np.full((2, 1), np.nan)), "finite"),
        (lambda: constant_gradients(3, 4, 5), "window"),
        (lambda: constant_gradients(3, 4, 0), "window"),
    ],
    ids=["rows", "vector", "nan", "window-long", "window-zero"],
)
def test_bad_input_is_one_config_error(call, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        call()


def test_constant_gradients_repeats_each_window_and_shortens_the_last() -> None:
    basis = constant_gradients(2, 5, 2)
    assert basis.shape == (10, 6)
    theta = np.arange(6.0)
    np.testing.assert_array_equal(basis @ theta, [0, 1, 0, 1, 2, 3, 2, 3, 4, 5])
