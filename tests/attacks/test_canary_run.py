"""The canary run and the one-run bound: the messages the agents send, each drawing its noise
from its own seeds, are the linear model's `-eta (M G + N Z)` for the same draws; the one-run
p-value and bound of Steinke, Nasr and Jagielski (2023) against binomial cases computed by
hand."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest

from dpdl.attacks.canary import (
    expected_correct_guesses,
    one_run_lower_bound,
    one_run_p_value,
    seed_draws,
    simulate_messages,
)
from dpdl.errors import ConfigError
from dpdl.factorization import from_noise
from dpdl.graphs import metropolis_hastings
from dpdl.mechanisms.base import NoiseMechanism, SeedBook, SharedSecret


def _correlated(n: int) -> NoiseMechanism:
    """Private noise, a DECOR-like pairwise secret and a wider secret of three holders."""
    secrets = [
        SharedSecret((0, 1), np.array([[0.8], [-0.8]])),
        SharedSecret((1, 2, 3), np.array([[0.5, 0.1], [0.2, -0.3], [-0.4, 0.6]])),
    ]
    return NoiseMechanism(n, np.linspace(0.5, 1.5, n), secrets)


def test_messages_equal_the_linear_model_for_the_same_draws() -> None:
    n, steps, dim, eta = 5, 4, 7, 0.3
    graph = nx.cycle_graph(n)
    weights = metropolis_hastings(graph)
    mechanism = _correlated(n)
    seeds = SeedBook.for_run(11, n, len(mechanism.secrets))
    gradients = np.random.default_rng(0).standard_normal((steps, n, dim))
    messages = np.concatenate(
        list(simulate_messages(mechanism, weights, gradients, seeds, step_size=eta))
    )
    algorithm = from_noise(mechanism, weights, steps)
    draws = np.concatenate([seed_draws(mechanism, seeds, t, dim) for t in range(steps)])
    model = algorithm.gradients @ gradients.reshape(steps * n, dim) + algorithm.noise @ draws
    np.testing.assert_allclose(messages, -eta * model, atol=1e-12)


def test_messages_check_their_sizes() -> None:
    mechanism = _correlated(5)
    seeds = SeedBook.for_run(0, 5, 2)
    with pytest.raises(ConfigError, match="must agree"):
        next(simulate_messages(mechanism, np.eye(4), np.zeros((2, 5, 3)), seeds))


def test_p_value_by_hand() -> None:
    """m = 4, r = 2, v = 2, eps = 1, delta = 0.01: `q^2 + 2 m delta max(P[B = 1], (P[B = 1] +
    P[B = 0]) / 2)`, B ~ Binomial(2, q)."""
    q = math.e / (1.0 + math.e)
    one, zero = 2 * q * (1 - q), (1 - q) ** 2
    expected = q**2 + 2 * 4 * 0.01 * max(one, (one + zero) / 2)
    assert one_run_p_value(4, 2, 2, 1.0, 0.01) == pytest.approx(expected, rel=1e-12)
    assert one_run_p_value(4, 2, 1, 0.0, 0.0) == pytest.approx(0.75, rel=1e-12)


def test_pure_dp_bound_by_hand() -> None:
    """Ten guesses, all correct, delta = 0: the p-value is q^10, so the bound is the eps with
    `q = alpha^(1/10)`, `eps = log(q / (1 - q))`."""
    scores = np.arange(10.0)
    included = scores >= 5
    eps, r, v = one_run_lower_bound(scores, included, 5, 5, 0.0, alpha=0.05)
    q = 0.05 ** (1 / 10)
    assert (r, v) == (10, 10)
    assert eps == pytest.approx(math.log(q / (1 - q)), abs=1e-9)


def test_bound_counts_guesses_and_abstains() -> None:
    """Top 2 guessed in (one right), bottom 2 out (both right), the middle abstained."""
    scores = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    included = np.array([False, False, True, True, False, True])
    _, r, v = one_run_lower_bound(scores, included, 2, 2, 1e-5)
    assert (r, v) == (4, 3)


def test_bound_is_zero_without_signal_and_grows_with_it() -> None:
    rng = np.random.default_rng(1)
    included = rng.random(4000) < 0.5
    noise = rng.standard_normal(4000)
    k, _ = expected_correct_guesses(4000, 3.0, 1e-5)
    none = one_run_lower_bound(noise, included, k, k, 1e-5)[0]
    strong = one_run_lower_bound(noise + 3.0 * included, included, k, k, 1e-5)[0]
    assert none < 0.3 < strong


def test_bad_guesses_are_an_error() -> None:
    with pytest.raises(ConfigError, match="k\\+ \\+ k- <= m"):
        one_run_lower_bound(np.zeros(4), np.zeros(4, dtype=bool), 3, 2, 0.0)
    with pytest.raises(ConfigError, match="0 <= v <= r <= m"):
        one_run_p_value(3, 4, 1, 1.0, 0.0)
