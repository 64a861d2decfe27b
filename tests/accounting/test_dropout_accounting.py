"""Exact accounting under dropouts (`dpdl.accounting.dropouts`).

Independent references:

- the direct computation on a tiny graph: each round's covariance of what a coalition cannot
  subtract, built entry by entry from the definitions (the alive agents' rows, the recovery shares
  written out, the seeds of the coalition's members subtracted, a missing member's included), the
  canary's Mahalanobis norm by `np.linalg.solve`, the GDP composition per (coalition, agent) by
  hand, and the (eps, delta) conversion of Dong, Roth and Su (Corollary 2.13) solved with scipy;
- dp_accounting's privacy loss distributions of subsampled Gaussians, composed by hand
  (`from_gaussian_mechanism`, `self_compose`, `compose`).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from dp_accounting.pld.privacy_loss_distribution import from_gaussian_mechanism
from scipy.optimize import brentq
from scipy.stats import norm

from dpdl.accounting import AgentLevel, ExampleLevel, account, dropouts
from dpdl.accounting.accountant import PLD_DISCRETIZATION
from dpdl.accounting.dropouts import (
    DropoutAccountant,
    account_dropouts,
    draw_alive,
    dropout_risk,
)
from dpdl.accounting.noise import GaussianNoise, SharedSecret
from dpdl.errors import ConfigError
from dpdl.jobspec.dropouts import DropoutSchedule
from dpdl.seeding import purpose_seed
from dpdl.threats import CentralObserver, Colluding, Eavesdropper

DELTA = 1e-5
AGENT = AgentLevel(0.5)
THREATS = [Eavesdropper(), Colluding(1), Colluding(2), CentralObserver()]

#: Rounds 1..4 of 5 agents: all alive, agent 1 missing, agents 0 and 3 missing, agent 4 missing.
SCHEDULE = np.array(
    [
        [1, 1, 1, 1, 1],
        [1, 0, 1, 1, 1],
        [0, 1, 1, 0, 1],
        [1, 1, 1, 1, 0],
    ],
    dtype=bool,
)


def decor_like() -> GaussianNoise:
    """DECOR on a ring of 5: private noise, and one pairwise secret per edge, `+s z` at i and
    `-s z` at j."""
    pairs = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 0)]
    secrets = [SharedSecret(pair, np.array([[1.3], [-1.3]])) for pair in pairs]
    return GaussianNoise(5, np.array([0.5, 0.7, 0.6, 0.9, 0.4]), secrets, "decor-like")


def whisper_like() -> GaussianNoise:
    """Seeds shared by groups of agents, with dense factors (Whisper's shape)."""
    rng = np.random.default_rng(3)
    secrets = [
        SharedSecret((0, 1, 2), rng.normal(size=(3, 2))),
        SharedSecret((0, 1, 2, 3, 4), rng.normal(size=(5, 1))),
        SharedSecret((3, 4), rng.normal(size=(2, 2))),
        SharedSecret((1, 3), rng.normal(size=(2, 1))),
    ]
    return GaussianNoise(5, np.array([0.3, 0.8, 0.5, 0.4, 0.6]), secrets, "whisper-like")


DESIGNS = {"decor": decor_like, "whisper": whisper_like}


# -- the direct computation ----------------------------------------------------------------------


def round_rows(noise: GaussianNoise, alive: np.ndarray, recovery: bool) -> list[np.ndarray]:
    """Each secret's factor as the round's agents compute it: a missing holder's row zero; with
    recovery, each alive holder adds `1 / (alive holders)` of the missing holders' rows."""
    factors = []
    for secret in noise.secrets:
        factor = np.zeros_like(secret.factor)
        present = [r for r, holder in enumerate(secret.holders) if alive[holder]]
        gone = [r for r, holder in enumerate(secret.holders) if not alive[holder]]
        for r in present:
            factor[r] = secret.factor[r]
            if recovery and gone:
                for g in gone:
                    factor[r] += secret.factor[g] / len(present)
        factors.append(factor)
    return factors


def direct_mu(noise, alive, coalition, agent, threat, recovery) -> float:
    """The canary's Mahalanobis norm in one round, from the covariance built by hand."""
    if not alive[agent] or agent in coalition:
        return 0.0
    seen = [i for i in range(noise.n) if alive[i] and i not in coalition]
    covariance = np.diag(noise.private_variances)
    for secret, factor in zip(noise.secrets, round_rows(noise, alive, recovery), strict=True):
        if set(secret.holders) & set(coalition):
            continue  # a member (alive or not) holds the seed: subtracted
        full = np.zeros((noise.n, factor.shape[1]))
        full[list(secret.holders)] = factor
        covariance = covariance + full @ full.T
    covariance = covariance[np.ix_(seen, seen)]
    shift = np.zeros(len(seen))
    shift[seen.index(agent)] = AGENT.sensitivity
    if isinstance(threat, CentralObserver):  # the average of what arrived: one number
        view = np.full((1, len(seen)), 1.0 / len(seen))
        covariance, shift = view @ covariance @ view.T, view @ shift
    return math.sqrt(shift @ np.linalg.solve(covariance, shift))


def gdp_epsilon(mu: float) -> float:
    """Dong, Roth and Su's conversion, solved for eps."""

    def excess(eps: float) -> float:
        return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2) - DELTA

    return brentq(excess, 0.0, 100.0, xtol=1e-14, rtol=1e-14)


def direct_run_mu(noise, alive, threat, recovery) -> float:
    """`max over (coalition, agent) of sqrt(sum_t mu_t^2)`, by hand."""
    worst = 0.0
    for coalition in threat.coalitions(noise.n):
        for agent in range(noise.n):
            total = sum(
                direct_mu(noise, row, coalition, agent, threat, recovery) ** 2 for row in alive
            )
            worst = max(worst, math.sqrt(total))
    return worst


@pytest.mark.parametrize("recovery", [False, True], ids=["plain", "recovery"])
@pytest.mark.parametrize("threat", THREATS, ids=str)
@pytest.mark.parametrize("design", list(DESIGNS))
def test_a_run_with_dropouts_is_accounted_as_computed_by_hand(design, threat, recovery) -> None:
    noise = DESIGNS[design]()
    report = account_dropouts(noise, threat, AGENT, SCHEDULE, DELTA, recovery)
    mu = direct_run_mu(noise, SCHEDULE, threat, recovery)
    assert report.mu == pytest.approx(mu, rel=1e-9)
    assert report.epsilon == pytest.approx(gdp_epsilon(mu), rel=1e-9)
    assert report.steps == len(SCHEDULE)
    assert (report.threat, report.neighbouring, report.accountant) == (
        str(threat),
        str(AGENT),
        "gdp",
    )


def test_a_missing_coalition_member_still_subtracts_its_seeds() -> None:
    """Agent 1 misses round 2; as the coalition {1} it still removes its pairs' noise from agents
    0 and 2, whose messages then carry only their other pair and private noise."""
    noise = decor_like()
    table = DropoutAccountant(noise, Colluding(1)).round(SCHEDULE[1])
    row = [c for (c,) in Colluding(1).coalitions(5)].index(1)
    for agent in (0, 2, 3, 4):
        expected = direct_mu(noise, SCHEDULE[1], (1,), agent, Colluding(1), False)
        assert table[row, agent] * AGENT.sensitivity == pytest.approx(expected, rel=1e-9)
    kept = direct_mu(noise, SCHEDULE[1], (), 0, Eavesdropper(), False)
    assert table[row, 0] * AGENT.sensitivity > kept  # less noise left to hide agent 0


# -- what the exact composition is, and is not ---------------------------------------------------


@pytest.mark.parametrize("threat", THREATS, ids=str)
@pytest.mark.parametrize("design", list(DESIGNS))
def test_a_schedule_without_dropouts_is_the_accountant(design, threat) -> None:
    noise = DESIGNS[design]()
    alive = np.ones((7, 5), dtype=bool)
    report = account_dropouts(noise, threat, AGENT, alive, DELTA)
    full = account(noise, threat, AGENT, 7, DELTA)
    assert report.epsilon == pytest.approx(full.epsilon, rel=1e-12)
    assert report.mu_step == pytest.approx(full.mu_step, rel=1e-12)
    example = ExampleLevel(0.5, 8, 0.05)
    dropped = account_dropouts(noise, threat, example, alive, DELTA)
    assert dropped.epsilon == account(noise, threat, example, 7, DELTA).epsilon


@pytest.mark.parametrize("threat", THREATS, ids=str)
def test_a_missing_agent_and_a_member_contribute_nothing(threat) -> None:
    rounds = DropoutAccountant(whisper_like(), threat)
    for alive in SCHEDULE:
        table = rounds.round(alive)
        assert (table[:, ~alive] == 0.0).all()
        for row, coalition in enumerate(rounds.coalitions):
            assert (table[row, list(coalition)] == 0.0).all()
            assert (table[row, alive & ~np.isin(np.arange(5), coalition)] > 0.0).all()
    absent = np.ones((4, 5), dtype=bool)
    absent[:, 2] = False  # agent 2 never sends: the run is that of the 4 others
    assert rounds.round(absent[0])[:, 2].max() == 0.0


def per_round_max_mu(noise, alive, threat) -> float:
    """The upper bound that composes each round's worst pair: `sqrt(sum_t max mu_t^2)`."""
    rounds = DropoutAccountant(noise, threat)
    return AGENT.sensitivity * math.sqrt(sum(rounds.round(row).max() ** 2 for row in alive))


@pytest.mark.parametrize("threat", [Eavesdropper(), Colluding(1)], ids=str)
def test_the_exact_composition_is_below_the_per_round_maximum(threat) -> None:
    noise = decor_like()
    for seed in range(3):
        alive = draw_alive(0.3, 5, 12, seed)
        exact = account_dropouts(noise, threat, AGENT, alive, DELTA).mu
        assert exact <= per_round_max_mu(noise, alive, threat) * (1 + 1e-12)
    # Crafted: equal agents, agent 0 missing in round 1 and agent 1 in round 2: each is seen
    # once (mu = 2C), the per-round maximum composes two rounds of 2C.
    alike = GaussianNoise(2, np.ones(2))
    crossed = np.array([[False, True], [True, False]])
    exact = account_dropouts(alike, Eavesdropper(), AGENT, crossed, DELTA)
    assert exact.mu == pytest.approx(AGENT.sensitivity, rel=1e-12)
    bound = per_round_max_mu(alike, crossed, Eavesdropper())
    assert bound == pytest.approx(math.sqrt(2) * AGENT.sensitivity, rel=1e-12)
    assert gdp_epsilon(bound) > exact.epsilon * 1.2


# -- when dropouts cost privacy ------------------------------------------------------------------


@pytest.mark.parametrize("threat", [Eavesdropper(), Colluding(1), Colluding(2)], ids=str)
@pytest.mark.parametrize("design", list(DESIGNS))
def test_without_recovery_dropouts_never_increase_epsilon(design, threat) -> None:
    noise = DESIGNS[design]()
    rounds = DropoutAccountant(noise, threat)
    full = rounds.round(np.ones(5, dtype=bool))
    for seed, rate in itertools.product(range(4), (0.2, 0.5)):
        alive = draw_alive(rate, 5, 10, seed)
        for row in alive:  # every pair's round: a marginal of the full round's view
            assert (rounds.round(row) <= full * (1 + 1e-9)).all()
        report = account_dropouts(noise, threat, AGENT, alive, DELTA, rounds=rounds)
        assert report.epsilon <= account(noise, threat, AGENT, 10, DELTA).epsilon * (1 + 1e-9)


def test_with_recovery_a_decor_agent_left_alone_loses_privacy() -> None:
    """Agent 1 missing: with recovery agents 0 and 2 drop the pair they shared with it, so their
    messages carry less noise than in the full round, and the eavesdropper's epsilon rises."""
    noise = decor_like()
    alive = np.ones((10, 5), dtype=bool)
    alive[:, 1] = False
    full = account(noise, Eavesdropper(), AGENT, 10, DELTA).epsilon
    plain = account_dropouts(noise, Eavesdropper(), AGENT, alive, DELTA).epsilon
    recovered = account_dropouts(noise, Eavesdropper(), AGENT, alive, DELTA, recovery=True)
    assert plain <= full
    assert recovered.epsilon > full * 1.05
    risk = dropout_risk(noise, Eavesdropper(), AGENT, 10, DELTA, 0.3, 6, recovery=True)
    assert risk.verdict != "no loss" and risk.worst > risk.no_dropout
    assert "higher" in risk.statement()


def test_the_risk_over_schedules_states_its_case() -> None:
    noise = decor_like()
    plain = dropout_risk(noise, Eavesdropper(), AGENT, 10, DELTA, 0.3, 8, seed=5, budget=50.0)
    assert plain.verdict == "no loss" and "stays private" in plain.statement()
    drawn = [
        account_dropouts(noise, Eavesdropper(), AGENT, draw_alive(0.3, 5, 10, 5 + k), DELTA)
        for k in range(8)
    ]
    epsilons = sorted(report.epsilon for report in drawn)
    assert plain.epsilons == tuple(report.epsilon for report in drawn)
    assert (plain.median, plain.p95, plain.worst) == (epsilons[4], epsilons[7], epsilons[7])
    assert plain.no_dropout == account(noise, Eavesdropper(), AGENT, 10, DELTA).epsilon
    recovered = dropout_risk(noise, Eavesdropper(), AGENT, 10, DELTA, 0.3, 8, 5, True, 50.0)
    assert recovered.verdict == "within budget"
    tight = dropout_risk(noise, Eavesdropper(), AGENT, 10, DELTA, 0.3, 8, 5, True, plain.no_dropout)
    assert tight.verdict == "loss" and "above the budget" in tight.statement()
    assert tight.as_dict()["max_epsilon"] == tight.worst


def test_schedules_are_one_uniform_per_round_and_agent_of_the_dropouts_stream() -> None:
    """What a run draws (`DropoutSchedule.from_rate` calls `draw_alive`), written out: the
    seed's `dropouts` stream, round-major, an agent missing where its uniform is below the
    rate."""
    for seed in (0, 7):
        uniforms = np.random.default_rng(purpose_seed(seed, "dropouts")).random((9, 6))
        assert (draw_alive(0.25, 6, 9, seed) == (uniforms >= 0.25)).all()
        assert (DropoutSchedule.from_rate(0.25, 6, 9, seed).alive == (uniforms >= 0.25)).all()


# -- example level -------------------------------------------------------------------------------


def composed_by_hand(mus: list[float], rate: float) -> float:
    """dp_accounting's PLDs of the rounds, composed one by one."""
    distributions = [
        from_gaussian_mechanism(
            1.0 / mu, sampling_prob=rate, value_discretization_interval=PLD_DISCRETIZATION
        )
        for mu in mus
    ]
    total = distributions[0]
    for other in distributions[1:]:
        total = total.compose(other)
    return total.get_epsilon_for_delta(DELTA)


def test_example_level_composes_each_pairs_subsampled_gaussians() -> None:
    """Independent noise of two sizes: agent 0 (noisier) alive in 3 rounds, agent 1 in 2. Each
    agent's rounds composed by hand, the worse of the two."""
    noise = GaussianNoise(2, np.array([4.0, 1.0]))
    alive = np.array([[1, 0], [1, 1], [1, 0], [0, 1]], dtype=bool)
    example = ExampleLevel(1.0, 4, 0.1)
    report = account_dropouts(noise, Eavesdropper(), example, alive, DELTA)
    mus = example.sensitivity / np.sqrt(noise.private_variances)
    by_hand = max(composed_by_hand([mus[0]] * 3, 0.1), composed_by_hand([mus[1]] * 2, 0.1))
    assert report.epsilon == pytest.approx(by_hand, rel=1e-9)
    assert report.accountant == "pld" and report.mu_step == pytest.approx(mus[1])


def test_example_level_pruning_keeps_the_maximum(monkeypatch) -> None:
    """The pairs left out are dominated: the maximum over every pair, composed without pruning,
    is the same, and fewer pairs were composed."""
    noise = decor_like()
    example = ExampleLevel(0.5, 4, 0.2)
    alive = SCHEDULE[[1, 2, 1, 3]]
    composed = []

    def counted(mus, rate, delta, built):
        composed.append(mus)
        return original(mus, rate, delta, built)

    original = dropouts._composed_pld_epsilon
    monkeypatch.setattr(dropouts, "_composed_pld_epsilon", counted)
    report = account_dropouts(noise, Colluding(1), example, alive, DELTA)
    rounds = DropoutAccountant(noise, Colluding(1))
    tables = np.stack([rounds.round(row) for row in alive]) * example.sensitivity
    pairs = [
        tables[:, c, u]
        for c, u in itertools.product(range(tables.shape[1]), range(5))
        if tables[:, c, u].any()
    ]
    every = max(composed_by_hand([m for m in pair if m > 0], 0.2) for pair in pairs)
    assert report.epsilon == pytest.approx(every, rel=1e-9)
    assert 1 <= len(composed) < len(pairs) / 2


# -- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "alive",
    [
        np.ones((4, 6), dtype=bool),  # a schedule of 6 agents for a 5-agent noise
        np.ones(5, dtype=bool),  # one mask, not a table
        np.ones((4, 5)),  # floats
        np.ones((0, 5), dtype=bool),  # no round
    ],
    ids=["other-n", "one-mask", "floats", "no-round"],
)
def test_a_bad_schedule_is_one_config_error(alive) -> None:
    with pytest.raises(ConfigError, match="dropout schedule"):
        account_dropouts(decor_like(), Eavesdropper(), AGENT, alive, DELTA)


def test_a_bad_mask_or_accountant_is_one_config_error() -> None:
    rounds = DropoutAccountant(decor_like(), Eavesdropper())
    with pytest.raises(ConfigError, match="alive mask"):
        rounds.round(np.ones(4, dtype=bool))
    with pytest.raises(ConfigError, match="agent-level"):
        account_dropouts(decor_like(), Eavesdropper(), AGENT, SCHEDULE, DELTA, accountant="pld")
    with pytest.raises(ConfigError, match="paper-rdp"):
        account_dropouts(
            decor_like(), Eavesdropper(), AGENT, SCHEDULE, DELTA, accountant="paper-rdp"
        )
    with pytest.raises(ConfigError, match="another noise, threat or design"):
        account_dropouts(decor_like(), Eavesdropper(), AGENT, SCHEDULE, DELTA, rounds=rounds)
    with pytest.raises(ConfigError, match="another noise, threat or design"):
        account_dropouts(rounds.noise, Eavesdropper(), AGENT, SCHEDULE, DELTA, True, None, rounds)
    with pytest.raises(ConfigError, match="rate"):
        dropout_risk(decor_like(), Eavesdropper(), AGENT, 4, DELTA, 1.0)
    with pytest.raises(ConfigError, match="schedules"):
        dropout_risk(decor_like(), Eavesdropper(), AGENT, 4, DELTA, 0.1, 0)
