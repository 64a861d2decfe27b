"""Decentralized learning as matrix factorization (MAFALDA-SGD): workloads, factorizations,
generalized sensitivity, and their agreement with independent computations."""

from __future__ import annotations

import math
import warnings

import cvxpy as cp
import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.stats import multivariate_normal

from dpdl.accounting import AgentLevel, account, gdp
from dpdl.errors import ConfigError, MixingMatrixError
from dpdl.factorization import (
    LDP,
    PNDP,
    Participation,
    SecLDP,
    agent_sensitivities,
    antipgd,
    attacker_knowledge,
    dp_dsgd,
    from_noise,
    gossip_workload,
    knowledge_epsilon,
    mf_dsgd,
    muffliato,
    zip_dl,
)
from dpdl.factorization.algorithms import local_encoder
from dpdl.factorization.generalized_sensitivity import pattern_sensitivity
from dpdl.factorization.mafalda import (
    _reversible,
    agent_utility_grams,
    local_loss,
    local_sensitivity,
    noise_multiplier,
    optimize_agents,
    optimize_local,
    restarted,
    utility_gram,
)
from dpdl.factorization.workload import gossip_blocks, muffliato_workload
from dpdl.graphs import (
    NotDoublyStochasticWarning,
    erdos_renyi,
    metropolis_hastings,
    mixing_matrix,
    ring,
)
from dpdl.mechanisms.decor import Decor
from dpdl.mechanisms.whisper import Whisper
from dpdl.mechanisms.zero_sum import ZeroSum
from dpdl.threats import Colluding, Eavesdropper

GRAPH = erdos_renyi(6, 0.5, seed=3)
WEIGHTS = metropolis_hastings(GRAPH)
STEPS = 4


def random_gossip(n: int, rng: np.random.Generator) -> np.ndarray:
    """A random row-stochastic matrix on the complete graph (asymmetric, time-varying use)."""
    matrix = rng.random((n, n))
    return matrix / matrix.sum(axis=1, keepdims=True)


def test_workload_reproduces_the_message_recursion() -> None:
    """W_T (G + V) equals the messages of D-SGD run step by step, fixed and time-varying gossip."""
    rng = np.random.default_rng(0)
    n, steps = 5, 6
    for weights in (metropolis_hastings(ring(n)), [random_gossip(n, rng) for _ in range(steps)]):
        sequence = weights if isinstance(weights, list) else [weights] * steps
        updates = rng.standard_normal((steps, n, 3))  # g_t + v_t
        messages, model = [], np.zeros((n, 3))
        for t in range(steps):
            message = model + updates[t]
            messages.append(message)
            model = sequence[t] @ message
        stacked = gossip_workload(weights, steps) @ updates.reshape(steps * n, 3)
        np.testing.assert_allclose(stacked, np.concatenate(messages), atol=1e-12)
        np.testing.assert_allclose(
            (gossip_blocks(weights, steps) @ stacked)[-n:], model, atol=1e-12
        )


def test_muffliato_with_one_round_is_the_gossip_workload() -> None:
    np.testing.assert_array_equal(
        muffliato_workload(WEIGHTS, STEPS, 1), gossip_workload(WEIGHTS, STEPS)
    )
    assert muffliato_workload(WEIGHTS, STEPS, 3).shape == (3 * STEPS * 6, STEPS * 6)


def mafalda_encoder(steps: int) -> np.ndarray:
    return optimize_local(
        utility_gram(WEIGHTS, steps), Participation.cyclic(steps, 2, steps // 2)
    ).encoder


ALGORITHMS = {
    "dp-dsgd": lambda: dp_dsgd(WEIGHTS, STEPS, sigma=1.3),
    "antipgd": lambda: antipgd(WEIGHTS, STEPS),
    "muffliato-k2": lambda: muffliato(WEIGHTS, STEPS, 2),
    "mafalda": lambda: mf_dsgd(WEIGHTS, STEPS, local_encoder(mafalda_encoder(STEPS), 6)),
    "decor": lambda: from_noise(Decor(GRAPH, 0.7, 1.5).noise, WEIGHTS, STEPS, name="DECOR"),
    "whisper": lambda: from_noise(
        Whisper.from_covariance(np.eye(6) + np.ones((6, 6))), WEIGHTS, STEPS
    ),
    "zip-dl": lambda: zip_dl(WEIGHTS, STEPS),
    "time-varying": lambda: dp_dsgd(
        [metropolis_hastings(erdos_renyi(6, 0.5, seed=s)) for s in range(STEPS)], STEPS
    ),
}
TRUST_MODELS = [LDP(), SecLDP((0,)), SecLDP((1, 4)), PNDP((0,)), PNDP((2, 5))]


@pytest.mark.parametrize("trust", TRUST_MODELS, ids=str)
@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_attacker_knowledge_factorizes(name: str, trust) -> None:
    """Theorem 6: after Lemma 14's reduction some C has A = B C, for every algorithm and trust
    model."""
    knowledge = attacker_knowledge(ALGORITHMS[name](), trust)
    assert knowledge.encoder is not None
    np.testing.assert_allclose(knowledge.decoder @ knowledge.encoder, knowledge.workload, atol=1e-9)
    attackers = list(trust.attackers)
    assert not knowledge.workload.reshape(-1, STEPS, 6)[
        :, :, attackers
    ].any()  # known gradients removed
    assert not knowledge.protected[attackers].any() and knowledge.protected.sum() == 6 - len(
        attackers
    )


@pytest.mark.parametrize("name", ["dp-dsgd", "antipgd", "mafalda", "decor", "whisper"])
def test_the_papers_encoders_are_the_ones_used(name: str) -> None:
    """The encoders of Appendix A (C = I, 1_{t >= t'} (x) I, [I; 0] for DECOR, ...) factorize as
    they are."""
    for trust in TRUST_MODELS:
        knowledge = attacker_knowledge(ALGORITHMS[name](), trust)
        assert knowledge.encoder is knowledge.structured


def test_zero_sum_noise_has_no_factorization_and_infinite_sensitivity() -> None:
    knowledge = attacker_knowledge(from_noise(ZeroSum(GRAPH, 1.0), WEIGHTS, STEPS), LDP())
    assert knowledge.encoder is None
    assert np.isinf(agent_sensitivities(knowledge, Participation.every_step(STEPS))).all()
    eps, mu = knowledge_epsilon(knowledge, Participation.every_step(STEPS), 1.0, 1e-5)
    assert math.isinf(eps) and math.isinf(mu)


@pytest.mark.parametrize("seed", [0, 1])
def test_square_invertible_decoder_gives_the_centralised_sensitivity(seed: int) -> None:
    """sens(C; B) = sens(C) when B is square and invertible (LDP on MF-D-SGD, B = W_T C^-1)."""
    rng = np.random.default_rng(seed)
    steps = 6
    local = np.tril(rng.standard_normal((steps, steps))) + 3 * np.eye(steps)  # mixed signs in C^T C
    knowledge = attacker_knowledge(mf_dsgd(WEIGHTS, steps, local_encoder(local, 6)), LDP())
    assert (
        np.linalg.matrix_rank(knowledge.decoder)
        == knowledge.decoder.shape[0]
        == knowledge.decoder.shape[1]
    )
    for participation in (
        Participation.every_step(steps),
        Participation.cyclic(steps, 2, 3),
        Participation.cyclic(steps, 3, 2),
    ):
        for method in ("exact", "bound"):
            np.testing.assert_allclose(
                agent_sensitivities(knowledge, participation, method),
                local_sensitivity(local, participation, method),
                rtol=1e-7,
            )


@pytest.mark.parametrize("mechanism", ["decor", "whisper"])
def test_per_step_covariance_gives_the_covariance_accountants_epsilon(mechanism: str) -> None:
    """A per-step covariance accounted as a factorization equals the covariance accountant, against
    the eavesdropper (LDP) and against each honest-but-curious agent (SecLDP with one attacker)."""
    design = (
        Decor(GRAPH, 0.7, 1.5)
        if mechanism == "decor"
        else Whisper.from_covariance(np.eye(6) + np.ones((6, 6)))
    )
    algorithm = from_noise(design, WEIGHTS, STEPS)
    neighbouring = AgentLevel(0.3)
    every = Participation.every_step(STEPS)
    eps, mu = knowledge_epsilon(
        attacker_knowledge(algorithm, LDP()), every, neighbouring.sensitivity, 1e-5
    )
    report = account(design, Eavesdropper(), neighbouring, STEPS, 1e-5)
    assert mu == pytest.approx(report.mu, rel=1e-9)
    assert eps == pytest.approx(report.epsilon, rel=1e-9)
    worst = max(
        knowledge_epsilon(
            attacker_knowledge(algorithm, SecLDP((a,))), every, neighbouring.sensitivity, 1e-5
        )[1]
        for a in range(6)
    )
    assert worst == pytest.approx(
        account(design, Colluding(1), neighbouring, STEPS, 1e-5).mu, rel=1e-9
    )


def test_exact_pattern_sensitivity_is_attained_and_below_the_bound() -> None:
    """The SDP value is the maximum of ||sum_s c_s d_s||^2 over unit vectors d_s (checked by local
    optimisation from many starts in d = k dimensions), and never above eq. (8)'s bound."""
    rng = np.random.default_rng(4)
    factor = rng.standard_normal((5, 4))
    gram = factor.T @ factor
    assert (gram < 0).any()
    exact = pattern_sensitivity(gram, "exact")

    def negative(flat: np.ndarray) -> float:
        directions = flat.reshape(4, 4)
        directions = directions / np.linalg.norm(directions, axis=1, keepdims=True)
        return -float(np.sum((directions @ directions.T) * gram))

    best = max(-minimize(negative, rng.standard_normal(16)).fun for _ in range(30))
    assert best == pytest.approx(exact, rel=1e-5)
    assert best <= exact * (1 + 1e-9)  # a certified upper bound
    for seed in range(5):  # and CVXPY's SDP optimum, on PSD blocks with negative entries
        factor = np.random.default_rng(seed).standard_normal((4, 6))
        block = factor.T @ factor
        directions = cp.Variable((6, 6), PSD=True)
        problem = cp.Problem(cp.Maximize(cp.trace(block @ directions)), [cp.diag(directions) <= 1])
        problem.solve()
        assert pattern_sensitivity(block, "exact") == pytest.approx(problem.value, rel=1e-5)
    assert exact <= pattern_sensitivity(gram, "bound") + 1e-9
    nonnegative = np.abs(gram)
    assert pattern_sensitivity(nonnegative, "exact") == pytest.approx(nonnegative.sum())


@pytest.mark.parametrize("name", ["dp-dsgd", "zip-dl"])
def test_privacy_loss_is_gaussian_with_the_accounted_mu(name: str) -> None:
    """Monte Carlo: the log-likelihood ratio of the attacker's view under two neighbouring gradient
    sequences (the worst agent and pattern) is N(mu^2/2, mu^2), and its delta(eps) matches
    mu-GDP."""
    algorithm = ALGORITHMS[name]()
    knowledge = attacker_knowledge(algorithm, PNDP((0,)))
    participation = Participation.cyclic(STEPS, 2, 2)
    sensitivities = agent_sensitivities(knowledge, participation)
    agent = int(np.nanargmax(sensitivities))
    mu = float(sensitivities[agent])
    # worst pattern and direction in one dimension (the SDP optimum has rank one when X_pi >= 0)
    best, difference = -1.0, None
    for rows in participation.rows(agent, 6):
        for signs in ([1, 1], [1, -1]):
            change = np.zeros(6 * STEPS)
            change[rows] = signs
            covariance = knowledge.decoder @ knowledge.decoder.T
            shift = knowledge.workload @ change
            value = float(shift @ np.linalg.pinv(covariance) @ shift)
            if value > best:
                best, difference = value, shift
    assert math.sqrt(best) == pytest.approx(mu, rel=1e-6)
    rng = np.random.default_rng(5)
    samples = (knowledge.decoder @ rng.standard_normal((knowledge.decoder.shape[1], 200_000))).T
    null = multivariate_normal(np.zeros(len(difference)), covariance, allow_singular=True)
    alternative = multivariate_normal(difference, covariance, allow_singular=True)
    loss = null.logpdf(samples) - alternative.logpdf(samples)
    assert loss.mean() == pytest.approx(mu**2 / 2, rel=0.02)
    assert loss.std() == pytest.approx(mu, rel=0.02)
    eps = 1.0
    empirical_delta = np.mean(np.maximum(0.0, 1.0 - np.exp(eps - loss)))
    assert empirical_delta == pytest.approx(gdp.delta(eps, mu), abs=0.01)


def test_utility_gram_routes_agree_with_the_commutation_matrix() -> None:
    """H of Lemma 12 by the eigenvalue route and the general route equals sum_i A_i^T A_i built
    with an explicit commutation matrix."""
    n, steps = 6, 5
    rng = np.random.default_rng(6)
    commutation = np.zeros((n * steps, n * steps))
    for t in range(steps):
        for i in range(n):
            commutation[t * n + i, i * steps + t] = 1.0  # K^(T,n): node-major -> time-major
    for weights in (WEIGHTS, [random_gossip(n, rng) for _ in range(steps)]):
        full = gossip_blocks(weights, steps) @ gossip_workload(weights, steps) @ commutation
        expected = sum(
            full[:, i * steps : (i + 1) * steps].T @ full[:, i * steps : (i + 1) * steps]
            for i in range(n)
        )
        np.testing.assert_allclose(utility_gram(weights, steps), expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(
        utility_gram(WEIGHTS, steps), utility_gram([WEIGHTS] * steps, steps), rtol=1e-12
    )


def _convex_optimum(utility: np.ndarray, participation: Participation) -> float:
    """CVXPY's optimum of min tr(H X^-1) over positive semi-definite X under the multi-epoch
    constraints (every pattern's diagonal sums to one, no correlation inside a pattern)."""
    steps = participation.steps
    gram = cp.Variable((steps, steps), PSD=True)
    root = np.linalg.cholesky(utility + 1e-12 * np.eye(steps))
    constraints = [sum(gram[t, t] for t in pattern) == 1 for pattern in participation.patterns]
    constraints += [
        gram[s, t] == 0
        for pattern in participation.patterns
        for s in pattern
        for t in pattern
        if s < t
    ]
    problem = cp.Problem(cp.Minimize(cp.matrix_frac(root, gram)), constraints)
    problem.solve()
    return float(problem.value)


def _commutation(n: int, steps: int) -> np.ndarray:
    """K^(T,n): node-major columns (agent i's T steps together) to time-major rows."""
    commutation = np.zeros((n * steps, n * steps))
    for t in range(steps):
        for i in range(n):
            commutation[t * n + i, i * steps + t] = 1.0
    return commutation


def test_agent_utility_grams_are_each_agents_columns_of_the_workload() -> None:
    """``H_i = A_i^T A_i`` by both routes equals agent i's T columns of ``(blockdiag W_t) W_T K``
    built explicitly, on an irregular graph (agents' terms differ) and a time-varying gossip;
    their sum is H, and with restarts each is its block sum."""
    n, steps = 6, 6
    rng = np.random.default_rng(8)
    for weights in (WEIGHTS, [random_gossip(n, rng) for _ in range(steps)]):
        full = gossip_blocks(weights, steps) @ gossip_workload(weights, steps)
        full = full @ _commutation(n, steps)
        expected = np.stack(
            [
                full[:, i * steps : (i + 1) * steps].T @ full[:, i * steps : (i + 1) * steps]
                for i in range(n)
            ]
        )
        grams = agent_utility_grams(weights, steps)
        np.testing.assert_allclose(grams, expected, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(grams.sum(axis=0), utility_gram(weights, steps), rtol=1e-12)
        blocks = agent_utility_grams(weights, steps, block=3)
        np.testing.assert_allclose(
            blocks, expected[:, :3, :3] + expected[:, 3:, 3:], rtol=1e-12, atol=1e-12
        )
    assert np.ptp(agent_utility_grams(WEIGHTS, steps)[:, 0, 0]) > 1e-3  # irregular: they differ


def test_reversible_gossip_route_equals_the_general_route() -> None:
    """A fixed gossip similar to a symmetric one through diag(pi)^(1/2) (the authors' rule
    ``1 / (deg_i + 1)`` on an irregular graph) takes the eigenvalue route of a reversible chain; it
    equals the general route (the same matrix as a time-varying sequence) to rounding, summed, per
    agent and with restarts. A fixed non-reversible gossip is recognised as such."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotDoublyStochasticWarning)
        weights = mixing_matrix(erdos_renyi(12, 0.3, seed=1), "local-degree")
    assert not np.allclose(weights, weights.T) and _reversible(weights) is not None
    steps = 9
    for block in (None, 3):
        np.testing.assert_allclose(
            utility_gram(weights, steps, block=block),
            utility_gram([weights] * steps, steps, block=block),
            rtol=1e-12,
            atol=1e-12,
        )
        np.testing.assert_allclose(
            agent_utility_grams(weights, steps, block=block),
            agent_utility_grams([weights] * steps, steps, block=block),
            rtol=1e-12,
            atol=1e-12,
        )
    assert _reversible(random_gossip(6, np.random.default_rng(9))) is None


def test_mafalda_l_encoders_are_each_agents_optimum_and_never_worse_than_the_shared_one() -> None:
    """MAFALDA-L-SGD: each agent's encoder has sensitivity 1 and reaches CVXPY's optimum of its own
    program; the error of the stack, ``||F N||_F^2`` with the per-agent noise operator N built
    explicitly, equals ``local_loss`` and is below MAFALDA-SGD's shared encoder's."""
    n, steps, k, b = 6, 8, 2, 4
    participation = Participation.cyclic(steps, k, b)
    grams = agent_utility_grams(WEIGHTS, steps)
    shared = optimize_local(grams.sum(axis=0), participation)
    results = optimize_agents(grams, participation)
    stack = np.stack([r.encoder for r in results])
    for result in results:
        assert result.converged
        assert local_sensitivity(result.encoder, participation) == pytest.approx(1.0, abs=1e-6)
    assert local_sensitivity(stack, participation) == pytest.approx(1.0, abs=1e-6)
    assert local_sensitivity(np.stack([np.eye(steps), 2 * np.eye(steps)]), participation) == (
        pytest.approx(2 * local_sensitivity(np.eye(steps), participation))
    )  # the largest: the second agent's noise is half as large

    leaf = int(np.argmin(np.diag(WEIGHTS)))
    assert results[leaf].loss == pytest.approx(
        _convex_optimum(grams[leaf], participation), rel=1e-4
    )

    full = gossip_blocks(WEIGHTS, steps) @ gossip_workload(WEIGHTS, steps) @ _commutation(n, steps)
    operator = np.zeros((n * steps, n * steps))  # node-major: agent i's seeds to its noise
    for i, encoder in enumerate(stack):
        operator[i * steps : (i + 1) * steps, i * steps : (i + 1) * steps] = np.linalg.inv(encoder)
    error = float(np.sum((full @ operator) ** 2))
    assert local_loss(grams, stack, participation) == pytest.approx(error, rel=1e-9)
    assert local_loss(grams, shared.encoder, participation) == pytest.approx(shared.loss, rel=1e-9)
    assert error <= shared.loss * (1 + 1e-9)
    assert error < shared.loss * 0.999  # an irregular graph gains something


def test_mafalda_factorization_matches_a_convex_solver_and_beats_the_baselines() -> None:
    """L-BFGS reaches CVXPY's optimum of the convex program min tr(H X^-1) under the multi-epoch
    constraints; its encoder has sensitivity exactly 1 and a lower loss than DP-D-SGD and
    AntiPGD."""
    steps, k, b = 8, 2, 4
    participation = Participation.cyclic(steps, k, b)
    utility = utility_gram(WEIGHTS, steps)
    result = optimize_local(utility, participation)
    assert result.converged
    assert local_sensitivity(result.encoder, participation, "exact") == pytest.approx(1.0, abs=1e-6)
    assert local_sensitivity(result.encoder, participation, "bound") == pytest.approx(1.0, abs=1e-6)
    np.testing.assert_allclose(np.triu(result.encoder, 1), 0.0)  # causal noise C^-1 Z

    assert result.loss == pytest.approx(_convex_optimum(utility, participation), rel=1e-4)
    assert result.loss == pytest.approx(
        local_loss(utility, result.encoder, participation), rel=1e-9
    )
    assert result.loss < local_loss(utility, np.eye(steps), participation)
    assert result.loss < local_loss(utility, np.tril(np.ones((steps, steps))), participation)


def test_the_optimised_encoders_are_the_same_on_any_number_of_threads() -> None:
    """MAFALDA-SGD's and MAFALDA-L-SGD's encoders are computed on one BLAS thread whatever the
    caller allows, so a run with them is the same on every machine: the Florentine families over
    T = 160 (both encoders' last digits differ between one and two threads without the limit)."""
    from threadpoolctl import threadpool_limits

    from dpdl.factorization.encoders import mafalda, mafalda_l
    from dpdl.graphs import build_graph, mixing_matrix

    weights = mixing_matrix(build_graph("florentine"), "local-degree")
    participation = Participation.cyclic(160, 10, 16)
    for encoder in (mafalda, mafalda_l):
        with threadpool_limits(limits=2):
            two = encoder(weights, participation)
        with threadpool_limits(limits=1):
            one = encoder(weights, participation)
        assert np.array_equal(one, two)


@pytest.mark.parametrize(
    "encoder", [np.eye(40), np.tril(np.ones((40, 40)))], ids=["dp-dsgd", "antipgd"]
)
def test_noise_multiplier_never_overshoots_the_budget(encoder: np.ndarray) -> None:
    """The reported epsilon, from the accountant on ``row * sens / sigma``, stays within every
    target: ``sigma = sens / mu`` alone can come back one ulp above mu (seen: 50.00000000000001
    for AntiPGD at eps = 50 in the mafalda-housing run)."""
    participation = Participation.cyclic(40, 10, 4)
    sensitivity = local_sensitivity(encoder, participation)
    rng = np.random.default_rng(0)
    for eps, row in zip(rng.uniform(0.5, 60.0, 300), rng.uniform(1e-3, 1.0, 300), strict=True):
        sigma = noise_multiplier(encoder, participation, row, eps, 1e-6)
        assert gdp.epsilon(row * sensitivity / sigma, 1e-6) <= eps
        assert (
            gdp.epsilon(row * sensitivity / (sigma * (1 - 1e-9)), 1e-6) > eps - 1e-6 * eps
        )  # and no looser than that


def test_bad_inputs_are_named() -> None:
    with pytest.raises(MixingMatrixError, match="row-stochastic"):
        dp_dsgd(WEIGHTS * 1.1, STEPS)
    with pytest.raises(ConfigError, match="one matrix per step"):
        dp_dsgd([WEIGHTS] * 3, STEPS)
    with pytest.raises(ConfigError, match="invertible"):
        mf_dsgd(WEIGHTS, STEPS, np.zeros((24, 24)))
    with pytest.raises(ConfigError, match="more than k"):
        Participation.cyclic(10, 2, 4)
    with pytest.raises(ConfigError, match="at least one attacking agent"):
        PNDP(())
    with pytest.raises(ConfigError, match="attacking agents must be"):
        attacker_knowledge(dp_dsgd(WEIGHTS, STEPS), SecLDP((7,)))
    with pytest.raises(ConfigError, match="covers 3 steps"):
        agent_sensitivities(
            attacker_knowledge(dp_dsgd(WEIGHTS, STEPS), LDP()), Participation.every_step(3)
        )
    with pytest.raises(ConfigError, match="per-row sensitivity"):
        knowledge_epsilon(
            attacker_knowledge(dp_dsgd(WEIGHTS, STEPS), LDP()),
            Participation.every_step(STEPS),
            0.0,
            1e-5,
        )


def test_correlation_restarts_factorize_blocks_at_the_predicted_cost() -> None:
    """An encoder restarted every B steps has sensitivity sqrt(T / B) under cyclic participation,
    and its loss on the full horizon is T / B times the block's loss on the summed diagonal blocks
    of H; it sits between the full-horizon optimum and independent noise."""
    steps, block, b = 24, 8, 4
    participation = Participation.cyclic(steps, steps // b, b)
    utility = utility_gram(WEIGHTS, steps)
    block_utility = utility_gram(WEIGHTS, steps, block=block)
    np.testing.assert_allclose(
        block_utility,
        sum(utility[o : o + block, o : o + block] for o in range(0, steps, block)),
        rtol=1e-12,
    )
    np.testing.assert_allclose(
        block_utility, utility_gram([WEIGHTS] * steps, steps, block=block), rtol=1e-10
    )
    result = optimize_local(block_utility, Participation.cyclic(block, block // b, b))
    encoder = restarted(result.encoder, steps)
    assert local_sensitivity(encoder, participation) ** 2 == pytest.approx(steps / block)
    loss = local_loss(utility, encoder, participation)
    assert loss == pytest.approx(steps / block * result.loss, rel=1e-9)
    assert (
        optimize_local(utility, participation).loss
        < loss
        < local_loss(utility, np.eye(steps), participation)
    )
    with pytest.raises(ConfigError, match="whole number of blocks"):
        utility_gram(WEIGHTS, steps, block=7)


def test_renyi_divergence_of_the_gaussian_mechanism() -> None:
    """alpha mu^2 / 2 equals the Renyi divergence of N(mu, 1) from N(0, 1) computed by
    quadrature."""
    from scipy.integrate import quad
    from scipy.stats import norm

    mu, alpha = 0.8, 2.5
    integral = quad(lambda x: norm.pdf(x, mu) ** alpha * norm.pdf(x) ** (1 - alpha), -20, 20)[0]
    assert gdp.renyi(mu, alpha) == pytest.approx(np.log(integral) / (alpha - 1), rel=1e-9)
