"""Noise as plain data: the accountant reads descriptions and composes phases (that it imports
no mechanism is checked with the other layers in ``tests/house/test_layers.py``).

Independent references:

- Gaussian-DP composition (Dong, Roth & Su, Corollary 3.3) and its (eps, delta) curve
  (Corollary 2.13), ``delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)``, evaluated
  with scipy, independently of :mod:`dpdl.accounting.gdp`;
- dp_accounting's privacy-loss distributions of the phases' Gaussian mechanisms, composed;
- the numbers the two-phase accounting of :mod:`dpdl.jobspec.departure` gave before it moved to
  the accountant (recorded from that code, compared exactly).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting.pld.privacy_loss_distribution import from_gaussian_mechanism
from scipy import sparse
from scipy.stats import norm

from dpdl.accounting import (
    AgentLevel,
    ExampleLevel,
    account,
    calibrate,
    noise_scale,
    step_sensitivity,
)
from dpdl.accounting.calibration import safe_scale
from dpdl.accounting.noise import GaussianNoise, SharedSecret
from dpdl.accounting.phases import Phase, calibrate_last_phase, compose_phases, phases_mu_step
from dpdl.errors import ConfigError
from dpdl.graphs import erdos_renyi, metropolis_hastings
from dpdl.mechanisms import LocalDP
from dpdl.mechanisms.base import NoiseMechanism, SeedBook
from dpdl.mechanisms.decor import Decor
from dpdl.mechanisms.lppa import lppa_noise
from dpdl.mechanisms.registry import build_mechanism
from dpdl.threats import CentralObserver, Colluding, Eavesdropper

DELTA = 1e-5
CLIP = 0.1


# -- the description carries what the accountant reads ---------------------------------------------


@pytest.fixture(scope="module")
def graph():
    return erdos_renyi(8, 0.5, 2)


@pytest.mark.parametrize("name", ["ldp", "cdp", "decor", "zero-sum", "lppa"])
@pytest.mark.parametrize(
    "threat", [Eavesdropper(), Colluding(1), Colluding(2), CentralObserver()], ids=str
)
def test_a_mechanism_and_its_description_account_identically(graph, name: str, threat) -> None:
    mechanism = build_mechanism(
        name, graph, metropolis_hastings(graph), calibrate(3.0, DELTA, 100, AgentLevel(CLIP))
    )
    assert isinstance(mechanism.noise, GaussianNoise)
    assert account(mechanism.noise, threat, AgentLevel(CLIP), 100, DELTA) == account(
        mechanism, threat, AgentLevel(CLIP), 100, DELTA
    )
    np.testing.assert_array_equal(mechanism.noise.covariance(), mechanism.covariance())
    for coalition in [(), (0,), (1, 5)]:
        np.testing.assert_array_equal(
            mechanism.noise.unknown_covariance(coalition), mechanism.unknown_covariance(coalition)
        )
        np.testing.assert_array_equal(
            mechanism.noise.unknown_to(coalition).covariance(),
            mechanism.unknown_to(coalition).covariance(),
        )


def test_decor_written_as_plain_data_is_accounted_like_the_mechanism(graph) -> None:
    edges = sorted((min(u, v), max(u, v)) for u, v in graph.edges())
    plain = GaussianNoise(
        8,
        np.full(8, 0.3**2),
        tuple(SharedSecret(e, 1.7 * np.array([[1.0], [-1.0]])) for e in edges),
    )
    for threat in [Eavesdropper(), Colluding(1), Colluding(3)]:
        assert step_sensitivity(plain, threat, AgentLevel(CLIP)) == step_sensitivity(
            Decor(graph, 0.3, 1.7), threat, AgentLevel(CLIP)
        )
    # what coalition {0} cannot see: the others' private parts, and the edges not touching agent 0
    hidden = plain.unknown_covariance((0,))
    assert (hidden[0] == 0).all() and (hidden[:, 0] == 0).all()
    expected = np.diag([0.0] + [0.09] * 7)
    for u, v in edges:
        if 0 not in (u, v):
            expected[np.ix_((u, v), (u, v))] += 1.7**2 * np.array([[1.0, -1.0], [-1.0, 1.0]])
    np.testing.assert_allclose(hidden, expected, rtol=1e-15, atol=0)


def test_a_description_is_frozen_and_validated() -> None:
    noise = GaussianNoise(3, 1.0)
    with pytest.raises(AttributeError):
        noise.n = 4  # type: ignore[misc]
    with pytest.raises(ValueError, match="read-only"):
        noise.private_variances[0] = 2.0
    with pytest.raises(ValueError, match="finite and >= 0"):
        GaussianNoise(3, -1.0)
    with pytest.raises(ValueError, match="one row per holder"):
        SharedSecret((0, 1), np.ones((3, 1)))


def test_calibration_sizes_a_description_as_it_sizes_the_mechanism() -> None:
    calibration = calibrate(2.0, DELTA, 200, AgentLevel(CLIP))
    sigma = noise_scale(LocalDP(5, 1.0), Eavesdropper(), calibration)
    assert noise_scale(GaussianNoise(5, 1.0), Eavesdropper(), calibration) == sigma
    assert safe_scale(lambda s: GaussianNoise(5, s**2), Eavesdropper(), calibration, sigma) == sigma
    assert (
        account(
            GaussianNoise(5, 1.0).scaled(sigma), Eavesdropper(), AgentLevel(CLIP), 200, DELTA
        ).epsilon
        <= 2.0
    )


def test_the_base_mechanism_holds_its_description() -> None:
    mechanism = NoiseMechanism(3, [1.0, 2.0, 0.5], [SharedSecret((0, 2), np.array([[1.0], [2.0]]))])
    assert mechanism.n == mechanism.noise.n == 3 and mechanism.secrets is mechanism.noise.secrets
    assert (
        mechanism.secrets_of(2) == mechanism.noise.secrets_of(2) == [0]
        and mechanism.secrets_of(1) == []
    )
    np.testing.assert_array_equal(
        mechanism.scaled(3.0).covariance(), mechanism.noise.scaled(3.0).covariance()
    )


def test_the_seeds_agents_agree_on_are_read_from_plain_data(graph) -> None:
    """What the key exchange and the seed book read is the noise description: a tracking
    injection's seed structure is a :class:`GaussianNoise` with the injection's covariance (LPPA:
    one secret per arc, held by its two ends), and a seed book hands an agent the same seeds
    whether it is given the description or the mechanism that holds it."""
    injection = lppa_noise(graph, 0.025, "gaussian")
    structure = injection.seed_structure()
    assert isinstance(structure, GaussianNoise) and structure.name == injection.name
    np.testing.assert_allclose(structure.covariance(), injection.covariance(), rtol=1e-14)
    arcs = [tuple(sorted(secret.holders)) for secret in structure.secrets]
    assert sorted(arcs) == sorted(tuple(sorted(e)) for e in graph.to_directed().edges())
    decor = Decor(graph, 0.7, 1.5)
    book = SeedBook.for_run(3, decor.n, len(decor.secrets))
    for agent in range(decor.n):
        assert book.for_agent(decor.noise, agent) == book.for_agent(decor, agent)
        assert set(book.for_agent(decor.noise, agent).secrets) == set(decor.secrets_of(agent))


# -- composition across phases ---------------------------------------------------------------------


def gdp_delta(eps: float, mu: float) -> float:
    """Dong, Roth & Su, Corollary 2.13, with scipy's normal distribution."""
    return float(norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2))


#: (t0, mu_1, t1, mu_2, delta) -> epsilon, as jobspec/departure.py's _composed_epsilon gave it.
OLD_COMPOSED = [
    ((45, 0.01, 75, 0.02, 1e-5), 0.6691792505482895),
    ((10, 0.3, 5, 0.1, 1e-6), 4.746108050828101),
    ((0, 0.0, 100, 0.05, 1e-5), 1.9930914044151598),
    ((1, 1.5, 1, 2.0, 1e-3), 10.204768741850508),
]


@pytest.mark.parametrize(("phases", "old"), OLD_COMPOSED)
def test_composed_phases_give_the_old_departure_numbers_and_the_closed_form(
    phases, old: float
) -> None:
    t0, mu1, t1, mu2, delta = phases
    epsilon = compose_phases([Phase(mu1, t0), Phase(mu2, t1)], delta)
    assert epsilon == old
    assert gdp_delta(epsilon, math.sqrt(t0 * mu1**2 + t1 * mu2**2)) == pytest.approx(
        delta, rel=1e-6
    )


@pytest.mark.parametrize(
    "phases", [[Phase(0.01, 45), Phase(0.02, 75)], [Phase(0.3, 10), Phase(0.1, 5), Phase(0.2, 7)]]
)
def test_composed_phases_agree_with_dp_accountings_pld(phases: list[Phase]) -> None:
    pld = from_gaussian_mechanism(
        1.0 / phases[0].mu_step, value_discretization_interval=1e-4
    ).self_compose(phases[0].steps)
    for phase in phases[1:]:
        pld = pld.compose(
            from_gaussian_mechanism(
                1.0 / phase.mu_step, value_discretization_interval=1e-4
            ).self_compose(phase.steps)
        )
    exact = compose_phases(phases, DELTA)
    # the PLD is pessimistic by its discretisation: above the exact value, and close to it
    assert exact <= pld.get_epsilon_for_delta(DELTA) <= exact * (1 + 2e-3)


def test_an_unprotected_phase_voids_the_run_unless_it_released_nothing() -> None:
    assert compose_phases([Phase(math.inf, 3), Phase(0.1, 10)], DELTA) == math.inf
    assert phases_mu_step([Phase(math.inf, 3), Phase(0.1, 10)]) == math.inf
    assert compose_phases([Phase(math.inf, 0), Phase(0.1, 10)], DELTA) == compose_phases(
        [Phase(0.1, 10)], DELTA
    )
    assert phases_mu_step([Phase(0.2, 10), Phase(0.1, 30)]) == math.sqrt(
        (10 * 0.2**2 + 30 * 0.1**2) / 40
    )


#: (first phase's mu_step, its steps, steps left, eps, delta) -> (mu_step, achieved epsilon) of the
#: second phase, as jobspec/departure.py's _remaining_budget gave them.
OLD_REMAINING = [
    ((0.15384615384615385, 45, 75, 5.0, 1e-5), (0.05060888855832231, 4.999999999999998)),
    ((0.010000000000000002, 100, 400, 1.0, 1e-6), (0.010727180876768634, 0.9999999999991109)),
    ((0.25, 0, 50, 8.0, 1e-5), (0.23561230668019453, 7.999999999999999)),
]


@pytest.mark.parametrize(("inputs", "old"), OLD_REMAINING)
def test_the_last_phase_spends_what_is_left_as_before_and_never_more(inputs, old) -> None:
    spent, t0, rest, eps, delta = inputs
    calibration = calibrate_last_phase(eps, delta, [Phase(spent, t0)], rest, AgentLevel(CLIP))
    assert (calibration.mu_step, calibration.achieved_epsilon) == old
    assert calibration.steps == rest and calibration.achieved_epsilon <= eps
    assert (
        compose_phases([Phase(spent, t0), Phase(calibration.mu_step, rest)], delta)
        == calibration.achieved_epsilon
    )


def test_a_spent_budget_or_an_example_level_relation_leaves_no_last_phase() -> None:
    with pytest.raises(ConfigError, match="spent the whole budget"):
        calibrate_last_phase(3.0, 1e-3, [Phase(0.25, 999)], 1, AgentLevel(CLIP))
    with pytest.raises(ConfigError, match="the first phase protects nothing"):
        calibrate_last_phase(3.0, 1e-3, [Phase(math.inf, 1)], 10, AgentLevel(CLIP))
    # a departure before any round: an unprotected first design released nothing (the old code
    # looped here)
    assert calibrate_last_phase(
        3.0, 1e-3, [Phase(math.inf, 0)], 10, AgentLevel(CLIP)
    ) == calibrate_last_phase(3.0, 1e-3, [], 10, AgentLevel(CLIP))
    with pytest.raises(ConfigError, match="agent-level"):
        calibrate_last_phase(3.0, 1e-3, [Phase(0.01, 9)], 1, ExampleLevel(CLIP, 64, 0.1))


def _generator_secret_by_secret(noise: GaussianNoise) -> sparse.csr_matrix:
    """The generator as it was built, one secret at a time."""
    rows, cols, data = [np.zeros(0, int)], [np.zeros(0, int)], [np.zeros(0)]
    for start, secret in zip(noise.offsets, noise.secrets, strict=False):
        width = secret.factor.shape[1]
        rows.append(np.repeat(np.asarray(secret.holders), width))
        cols.append(np.tile(np.arange(start, start + width), len(secret.holders)))
        data.append(secret.factor.reshape(-1))
    return sparse.csr_matrix(
        (np.concatenate(data), (np.concatenate(rows), np.concatenate(cols))),
        shape=(noise.n, int(noise.offsets[-1])),
    )


def test_the_generator_is_built_as_it_was_secret_by_secret() -> None:
    mixed = GaussianNoise(
        6,
        1.0,
        (
            SharedSecret((0, 2, 3), np.arange(6.0).reshape(3, 2)),
            SharedSecret((1,), np.ones((1, 3))),
            SharedSecret((2, 4), np.zeros((2, 0))),
            SharedSecret((5, 0), np.array([[1.0], [-2.0]])),
        ),
    )
    for noise in (mixed, Decor(erdos_renyi(40, 0.3, 2), 0.5, 0.7).noise):
        built = noise.generator
        built = built.toarray() if sparse.issparse(built) else built
        assert np.array_equal(built, _generator_secret_by_secret(noise).toarray())
        for coalition in ((), (0,), (2, 4), tuple(range(noise.n))):
            members = np.isin(np.arange(noise.n), coalition)
            hidden = noise._hidden_secrets(members)
            spans = [np.arange(noise.offsets[k], noise.offsets[k + 1]) for k in hidden]
            assert np.array_equal(
                noise._hidden_columns(members), np.concatenate([np.zeros(0, int), *spans])
            )
