"""The eavesdropper on some links (`Links`) and one agent's canary test (`canary_test`) against
views whose exact mu is known by hand: LDP noise against the eavesdropper over T rounds, a curious
neighbour on a 3-agent path (it recovers every noisy gradient of its neighbour), and a curious
non-neighbour there over two rounds."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest

from dpdl.errors import ConfigError
from dpdl.factorization import LDP, PNDP, Links, attacker_knowledge, from_noise
from dpdl.factorization.generalized_sensitivity import canary_test
from dpdl.graphs import metropolis_hastings
from dpdl.mechanisms.base import NoiseMechanism, SharedSecret

PATH = nx.path_graph(3)
WEIGHTS = metropolis_hastings(PATH)
SIGMA, DELTA = 1.7, 0.3


def _ldp(steps: int):
    return from_noise(NoiseMechanism(3, SIGMA**2), WEIGHTS, steps)


def test_links_observe_exactly_the_messages_on_them() -> None:
    """Messages are one row per (step, sender), sent to all its neighbours: tapping 0->1 sees
    agent 0's rows, tapping 1->2 agent 1's; no seed is known and no gradient removed."""
    algorithm = _ldp(4)
    rows = np.arange(4 * 3)
    assert np.array_equal(np.flatnonzero(Links(edges=((0, 1),)).observed(algorithm)), rows[::3])
    both = Links(edges=((0, 1), (1, 2))).observed(algorithm)
    assert np.array_equal(np.flatnonzero(both), np.sort(np.r_[rows[::3], rows[1::3]]))
    knowledge = attacker_knowledge(algorithm, Links(edges=((1, 2),)))
    assert knowledge.decoder.shape[0] == 4  # four messages, no known seed
    np.testing.assert_array_equal(knowledge.workload, algorithm.gradients[1::3])
    assert knowledge.protected.all()


@pytest.mark.parametrize(
    ("edges", "message"),
    [(((0, 2),), "link 0->2 is not an edge"), (((1, 1),), "link 1->1"), (((0, 5),), "0->5")],
)
def test_a_link_that_is_not_an_edge_is_named(edges, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        attacker_knowledge(_ldp(2), Links(edges=edges))


def test_links_needs_links_and_no_attackers() -> None:
    with pytest.raises(ConfigError, match="at least one observed link"):
        Links()
    with pytest.raises(ConfigError, match="no attacking agent"):
        Links((1,), edges=((0, 1),))


@pytest.mark.parametrize("steps", [1, 5, 12])
def test_ldp_against_the_eavesdropper_composes_over_rounds(steps: int) -> None:
    """Every message is public: the view is G + noise, so mu = sqrt(T) Delta / sigma, and the
    constant canary reaches it."""
    test = canary_test(attacker_knowledge(_ldp(steps), LDP()), 0, DELTA)
    assert test.mu_upper == pytest.approx(math.sqrt(steps) * DELTA / SIGMA, rel=1e-9)
    assert test.mu_canary == pytest.approx(test.mu_upper, rel=1e-9)
    assert test.shift == pytest.approx(test.mu_canary**2, rel=1e-9)


def test_curious_neighbour_on_a_path_sees_every_noisy_gradient() -> None:
    """Agent 1 receives 0's messages and knows its own: `y_t^0 - W_00 y_{t-1}^0 - W_01
    y_{t-1}^1 = g_t^0 + v_t^0`, so it sees all of agent 0's noisy gradients: sqrt(T) Delta /
    sigma, the eavesdropper's value."""
    steps = 6
    test = canary_test(attacker_knowledge(_ldp(steps), PNDP((1,))), 0, DELTA)
    assert test.mu_upper == pytest.approx(math.sqrt(steps) * DELTA / SIGMA, rel=1e-8)


def test_non_neighbour_on_a_path_over_two_rounds() -> None:
    """Agent 2 sees agent 1's messages: `y_0^1 = v_0^1` and `y_1^1 = W_10 (g_0^0 + v_0^0) +
    W_11 y_0^1 + W_12 y_0^2 + v_1^1`, whose unknown noise is `W_10 v_0^0 + v_1^1`; the canary
    of step 1 has not reached it yet. So mu = W_10 Delta / (sigma sqrt(1 + W_10^2))."""
    w10 = WEIGHTS[1, 0]
    test = canary_test(attacker_knowledge(_ldp(2), PNDP((2,))), 0, DELTA)
    expected = w10 * DELTA / (SIGMA * math.sqrt(1.0 + w10**2))
    assert test.mu_upper == pytest.approx(expected, rel=1e-8)
    assert test.mu_canary == pytest.approx(expected, rel=1e-8)


def test_noise_that_cancels_leaves_the_canary_noise_free() -> None:
    """Pairwise-cancelling noise alone (no private part): the eavesdropper adds the messages up
    and the canary leaves range(B): infinite mu, a test direction with no noise."""
    secret = SharedSecret((0, 1), np.array([[1.0], [-1.0]]))
    knowledge = attacker_knowledge(
        from_noise(NoiseMechanism(3, np.array([0.0, 0.0, 1.0]), [secret]), WEIGHTS, 2), LDP()
    )
    test = canary_test(knowledge, 0, DELTA)
    assert test.noise_free and math.isinf(test.mu_upper)
    np.testing.assert_allclose(test.direction @ knowledge.decoder, 0.0, atol=1e-9)
    assert test.shift > 0


def test_canary_at_an_attacker_is_an_error() -> None:
    knowledge = attacker_knowledge(_ldp(2), PNDP((1,)))
    with pytest.raises(ConfigError, match="canary's agent 1"):
        canary_test(knowledge, 1, DELTA)
    with pytest.raises(ConfigError, match="canary's agent 3"):
        canary_test(knowledge, 3, DELTA)


@pytest.mark.parametrize("trust", [LDP(), PNDP((1,)), PNDP((2, 3)), Links(edges=((0, 1), (2, 1)))])
def test_canary_test_agrees_with_agent_sensitivities(trust) -> None:
    """The Cholesky path of `canary_test` against the SVD path of `agent_sensitivities`, on
    correlated noise (private, pairwise-cancelling and a three-holder secret) on a 4-cycle."""
    from dpdl.factorization import Participation, agent_sensitivities

    secrets = [
        SharedSecret((0, 1), np.array([[0.9], [-0.9]])),
        SharedSecret((1, 2, 3), np.array([[0.5, 0.1], [0.2, -0.3], [-0.4, 0.6]])),
    ]
    cycle = nx.cycle_graph(4)
    mechanism = NoiseMechanism(4, np.array([0.3, 0.5, 0.7, 0.4]), secrets)
    knowledge = attacker_knowledge(from_noise(mechanism, metropolis_hastings(cycle), 5), trust)
    sensitivities = agent_sensitivities(knowledge, Participation.every_step(5))
    for agent in np.flatnonzero(knowledge.protected):
        test = canary_test(knowledge, int(agent), DELTA)
        assert test.mu_upper == pytest.approx(DELTA * sensitivities[agent], rel=1e-7)
        assert test.mu_canary <= test.mu_upper * (1 + 1e-9)


def test_canary_signs_reach_most_of_the_sensitivity() -> None:
    """An eavesdropper on agent 0's out-links of a 6-cycle: X has negative entries (the unseen
    neighbours' messages carry 0's past gradients back), so no constant canary reaches the SDP;
    the local search's signs still reach 0.95 of its mu."""
    cycle = nx.cycle_graph(6)
    algorithm = from_noise(NoiseMechanism(6, 1.0), metropolis_hastings(cycle), 20)
    test = canary_test(attacker_knowledge(algorithm, Links(edges=((0, 1), (0, 5)))), 0, 1.0)
    constant = canary_test(attacker_knowledge(algorithm, LDP()), 0, 1.0)
    assert constant.mu_canary == pytest.approx(constant.mu_upper, rel=1e-9)
    assert not (test.signs == 1).all()
    assert 0.95 * test.mu_upper <= test.mu_canary <= test.mu_upper * (1 + 1e-9)
