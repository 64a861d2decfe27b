"""Sampling is what the accountant assumes.

The accountant reasons about ``mechanism.covariance()`` and ``mechanism.unknown_covariance(I)``;
these tests check that the noise the agents actually draw -- each from its *own* seeds, through
``agent_noise`` -- and the simulation's vectorized ``sample`` path have that covariance, that each
agent needs exactly the seeds its threat model allows, and that the coalition covariances are the
ones of DECOR Theorem 6 / CorN-DSGD Section V-D, computed independently here.

Statistical tests (exact, no normal approximation): for a fixed vector u, the projections
``u^T x`` of m i.i.d. N(0, R) draws are i.i.d. N(0, u^T R u), so ``sum (u^T x)^2 / (u^T R u)`` is
exactly chi-square with m degrees of freedom. Testing u = e_a and u = e_a +/- e_b for all a < b
pins down every entry of R (``R_ab = (var(e_a + e_b) - var(e_a - e_b)) / 4``). Each covariance
check is a two-sided chi-square test on these n^2 projections with a union (Bonferroni) bound:
family-wise false-alarm rate ``FALSE_ALARM`` per check, and the whole file makes fewer than 20
such checks, so a spurious failure has probability below 2e-6. With m = 20000 draws the
test detects a relative error of about 6% in any projected variance.
"""

from __future__ import annotations

import itertools
import math

import networkx as nx
import numpy as np
import pytest
from scipy.stats import chi2

from dpdl.accounting import AgentLevel, calibrate
from dpdl.graphs import erdos_renyi, metropolis_hastings, ring
from dpdl.mechanisms import LocalDP, NoiseMechanism, SeedBook
from dpdl.mechanisms.decor import Decor
from dpdl.mechanisms.whisper import MultiSeedWhisper, Whisper, design_whisper
from dpdl.mechanisms.zero_sum import ZeroSum

#: Family-wise false-alarm rate of one covariance check (union bound over its n^2 projections).
FALSE_ALARM = 1e-7
DIM = 2000  # coordinates per step: i.i.d. draws of the (n,) noise vector
STEPS = 10  # m = DIM * STEPS = 20000 draws per check
RUN_SEED = 20240611
UNIT_ROUNDOFF = 2.0**-53


# -- independent constructions --------------------------------------------------------------------


def nx_laplacian(graph: nx.Graph, nodes: list[int] | None = None) -> np.ndarray:
    """Combinatorial Laplacian D - A of ``graph`` on ``nodes`` (in that order), from networkx."""
    nodes = sorted(graph.nodes) if nodes is None else nodes
    return nx.laplacian_matrix(graph, nodelist=nodes, weight=None).toarray().astype(float)


def random_pd(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, n))
    return a @ a.T / n + 0.2 * np.eye(n)


def random_psd(k: int, rank: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((k, rank))
    return a @ a.T


def embed(block: np.ndarray, group: tuple[int, ...], n: int) -> np.ndarray:
    out = np.zeros((n, n))
    out[np.ix_(group, group)] = block
    return out


ER8 = erdos_renyi(8, 0.4, 1)
RING8 = ring(8)
MS_GROUPS = [
    (0, 1, 2, 3, 4),
    (3, 4, 5, 6, 7),
]  # two overlapping seed groups (CorN-DSGD allows overlap)
MS_BLOCKS = [random_psd(5, 2, 11), random_psd(5, 3, 12)]  # PSD, rank-deficient
MS_SIGMA_MIX2 = 0.3
WHISPER_R = random_pd(8, 5)


def _whisper_designed() -> tuple[Whisper, np.ndarray]:
    weights = metropolis_hastings(ER8)
    mechanism = design_whisper(weights, calibrate(10.0, 1e-5, 100, AgentLevel(0.1)))
    return mechanism, mechanism.solution.covariance * 1.0  # the solver's R (scaled by ~1)


def cases() -> dict[str, tuple[NoiseMechanism, np.ndarray]]:
    """name -> (mechanism, its covariance written from the papers' formulas)."""
    designed, _ = _whisper_designed()
    return {
        "ldp": (LocalDP(8, 0.7), 0.49 * np.eye(8)),
        "decor-er": (Decor(ER8, 0.6, 1.1), 0.36 * np.eye(8) + 1.21 * nx_laplacian(ER8)),
        "decor-ring": (Decor(RING8, 0.5, 2.0), 0.25 * np.eye(8) + 4.0 * nx_laplacian(RING8)),
        # design_whisper's covariance is only known through the solver; it is checked below to be
        # sigma_mix^2 I + PSD, and the reference is the mechanism's own covariance()
        "whisper-designed": (designed, designed.covariance()),
        "whisper-random": (Whisper.from_covariance(WHISPER_R), WHISPER_R),
        "multiseed": (
            MultiSeedWhisper(8, MS_SIGMA_MIX2, MS_GROUPS, MS_BLOCKS, q=1),
            MS_SIGMA_MIX2 * np.eye(8)
            + sum(embed(b, g, 8) for g, b in zip(MS_GROUPS, MS_BLOCKS, strict=True)),
        ),
        "zero-sum": (ZeroSum(ER8, 0.9), 0.81 * nx_laplacian(ER8)),
    }


CASES = cases()


# -- the statistical check ------------------------------------------------------------------------


def assert_covariance(
    draws: np.ndarray, expected: np.ndarray, false_alarm: float = FALSE_ALARM
) -> None:
    """Exact chi-square tests of ``draws`` (m, n) i.i.d. N(0, expected) on the projections
    e_a and e_a +/- e_b, Bonferroni-corrected to family-wise rate ``false_alarm``."""
    m, n = draws.shape
    directions = [np.eye(n)[a] for a in range(n)]
    for a, b in itertools.combinations(range(n), 2):
        directions.append(np.eye(n)[a] + np.eye(n)[b])
        directions.append(np.eye(n)[a] - np.eye(n)[b])
    level = false_alarm / len(directions)
    low, high = chi2.ppf(level / 2, m), chi2.isf(level / 2, m)
    scale = float(np.abs(expected).max())
    failures = []
    for u in directions:
        variance = float(u @ expected @ u)
        statistic = float(np.sum((draws @ u) ** 2))
        if (
            variance <= 1e-12 * scale
        ):  # a direction with no noise must carry none (e.g. 1 for zero-sum)
            if statistic > 1e-18 * m * scale:
                failures.append((u, variance, statistic / m))
            continue
        if not low <= statistic / variance <= high:
            failures.append((u, variance, statistic / m))
    assert not failures, (
        f"{len(failures)} projections off (u, expected var, sample var): {failures[:3]}"
    )


def agent_draws(
    mechanism: NoiseMechanism, run_seed: int = RUN_SEED, steps: int = STEPS
) -> np.ndarray:
    """(steps * DIM, n) noise vectors, each agent computing its own row from its own seeds only."""
    book = SeedBook.for_run(run_seed, mechanism.n, len(mechanism.secrets))
    own = [book.for_agent(mechanism, i) for i in range(mechanism.n)]
    per_step = [
        np.stack([mechanism.agent_noise(i, own[i], step, DIM) for i in range(mechanism.n)], axis=1)
        for step in range(steps)
    ]
    return np.concatenate(per_step, axis=0)


# -- covariance of the two sampling paths ---------------------------------------------------------


@pytest.mark.parametrize("name", list(CASES))
def test_covariance_is_the_papers_formula(name: str) -> None:
    mechanism, expected = CASES[name]
    covariance = mechanism.covariance()
    np.testing.assert_allclose(
        covariance, expected, rtol=1e-10, atol=1e-12 * np.abs(expected).max()
    )
    np.testing.assert_allclose(
        covariance, covariance.T, rtol=0, atol=1e-12 * np.abs(expected).max()
    )
    assert np.linalg.eigvalsh(covariance)[0] >= -1e-10 * np.abs(expected).max()


def test_designed_whisper_is_private_noise_plus_psd_correlated_part() -> None:
    mechanism, solver_covariance = _whisper_designed()
    covariance = mechanism.covariance()
    # design_whisper rescales the solver's R by a factor within 1e-9 of 1 (safe_scale steps of
    # 1e-12)
    np.testing.assert_allclose(
        covariance, solver_covariance, rtol=1e-8, atol=1e-10 * np.abs(covariance).max()
    )
    sigma_mix2 = float(np.linalg.eigvalsh(covariance)[0])
    assert sigma_mix2 > 0  # CorN-DSGD guideline (G1): R > 0
    np.testing.assert_allclose(mechanism.private_variances, sigma_mix2, rtol=1e-9)
    assert len(mechanism.secrets) == 1 and mechanism.secrets[0].holders == tuple(range(8))


@pytest.mark.parametrize("name", list(CASES))
def test_agents_own_seed_based_noise_has_the_accounted_covariance(name: str) -> None:
    mechanism, expected = CASES[name]
    assert_covariance(agent_draws(mechanism), expected)


@pytest.mark.parametrize("name", list(CASES))
def test_vectorized_sampler_has_the_accounted_covariance(name: str) -> None:
    mechanism, expected = CASES[name]
    rng = np.random.default_rng(7)
    draws = np.concatenate([mechanism.sample(rng, DIM).T for _ in range(STEPS)], axis=0)
    assert draws.shape == (DIM * STEPS, mechanism.n)
    assert_covariance(draws, expected)


def test_vectorized_sampler_draws_a_coalitions_view_with_its_members_exactly_silent() -> None:
    """The square root of a singular R (members' rows and columns are zero) draws the honest
    agents' noise with the unknown covariance and exactly zero for members."""
    mechanism, _ = CASES["decor-er"]
    coalition, honest = [2, 5], [0, 1, 3, 4, 6, 7]
    view, rng = mechanism.unknown_to(coalition), np.random.default_rng(8)
    draws = np.concatenate([view.sample(rng, DIM).T for _ in range(STEPS)], axis=0)
    assert np.all(draws[:, coalition] == 0.0)
    assert_covariance(
        draws[:, honest], mechanism.unknown_covariance(coalition)[np.ix_(honest, honest)]
    )


@pytest.mark.parametrize(("n", "by_root"), [(8, True), (120, False)])
def test_vectorized_sampler_draws_the_cheaper_way_with_the_same_covariance(
    n: int, by_root: bool
) -> None:
    """DECOR on a ring has as many secrets as agents: a square root of R (n normals and n^2
    multiply-adds a coordinate) is cheaper for 8 agents, the seeds (2n normals) for 120."""
    graph = ring(n)
    mechanism = Decor(graph, 0.5, 2.0)
    assert (mechanism.noise.sampling_factor is not None) == by_root
    rng, watched = np.random.default_rng(9), list(range(8))
    draws = np.concatenate([mechanism.sample(rng, DIM)[watched].T for _ in range(STEPS)], axis=0)
    expected = 0.25 * np.eye(n) + 4.0 * nx_laplacian(graph)
    assert_covariance(draws, expected[np.ix_(watched, watched)])


@pytest.mark.parametrize("name", ["decor-er", "whisper-random"])
def test_agent_noise_is_independent_across_steps(name: str) -> None:
    """Pairs (step 2k, step 2k+1) stacked as one 2n-vector must have covariance blockdiag(R, R)."""
    mechanism, expected = CASES[name]
    n = mechanism.n
    draws = agent_draws(mechanism, steps=STEPS)  # (STEPS * DIM, n), step-major
    per_step = draws.reshape(STEPS, DIM, n)
    paired = np.concatenate([per_step[0::2], per_step[1::2]], axis=2).reshape(-1, 2 * n)
    block = np.zeros((2 * n, 2 * n))
    block[:n, :n] = block[n:, n:] = expected
    assert_covariance(paired, block)


# -- exact cancellation of the pairwise terms ------------------------------------------------------


def _rounding_bound(graph: nx.Graph, sigma_cor: float, private: np.ndarray) -> np.ndarray:
    """Per-coordinate bound on |fsum_i noise_i - sum_i private_i| from floating-point accumulation.

    Agent i adds its private draw and its deg(i) edge terms t_ij = fl(sigma z_e), t_ji = -t_ij
    (exact negatives), so in exact arithmetic the edge terms cancel; each agent's running sum of
    deg(i) + 1 terms errs by at most gamma_deg (|p_i| + sum_j |t_ij|) (Higham, Lemma 3.1 / eq. 4.4).
    We bound |z| <= 9 (P(|z| > 9) ~ 2e-19 per draw, negligible over 1e5 draws).
    """
    bound = np.zeros(private.shape[1])
    for i in graph.nodes:
        degree = graph.degree(i)
        gamma = degree * UNIT_ROUNDOFF / (1 - degree * UNIT_ROUNDOFF)
        bound += gamma * (np.abs(private[i]) + degree * sigma_cor * 9.0 * (1 + UNIT_ROUNDOFF))
    return 2 * bound + 1e-300


@pytest.mark.parametrize("graph", [ER8, RING8], ids=["er8", "ring8"])
@pytest.mark.parametrize(
    "make", [lambda g: ZeroSum(g, 1.3), lambda g: Decor(g, 0.0, 1.3)], ids=["zero-sum", "decor0"]
)
def test_pairwise_terms_cancel_in_the_sum_of_agents_noise(graph: nx.Graph, make) -> None:
    mechanism = make(graph)
    book = SeedBook.for_run(RUN_SEED, mechanism.n, len(mechanism.secrets))
    for step in range(3):
        noise = np.stack(
            [
                mechanism.agent_noise(i, book.for_agent(mechanism, i), step, DIM)
                for i in range(mechanism.n)
            ]
        )
        assert noise.std() > 1.0  # each agent's noise is large (variance 1.69 deg(i))
        total = np.array([math.fsum(noise[:, c]) for c in range(DIM)])
        bound = _rounding_bound(graph, 1.3, np.zeros_like(noise))
        # Cancellation up to each agent's own floating-point accumulation (~1e-15 here); a sign
        # error in v_ji = -v_ij would leave a residual of order sigma_cor = 1.3.
        assert np.all(np.abs(total) <= bound), np.abs(total).max()


@pytest.mark.parametrize(
    "make", [lambda g: ZeroSum(g, 1.3), lambda g: Decor(g, 0.0, 1.3)], ids=["zero-sum", "decor0"]
)
def test_pairwise_terms_cancel_exactly_when_each_agent_holds_one_edge(make) -> None:
    """On a perfect matching no agent accumulates: v_ij and v_ji are exact negatives, bit for
    bit."""
    matching = nx.Graph([(0, 1), (2, 3), (4, 5)])
    mechanism = make(matching)
    book = SeedBook.for_run(RUN_SEED, 6, len(mechanism.secrets))
    for step in range(3):
        noise = np.stack(
            [mechanism.agent_noise(i, book.for_agent(mechanism, i), step, DIM) for i in range(6)]
        )
        for u, v in matching.edges:
            np.testing.assert_array_equal(noise[u], -noise[v])
        assert all(math.fsum(noise[:, c]) == 0.0 for c in range(DIM))
        assert np.all(noise != 0.0)


@pytest.mark.parametrize("graph", [ER8, RING8], ids=["er8", "ring8"])
def test_with_private_noise_the_sum_is_the_sum_of_private_parts(graph: nx.Graph) -> None:
    """Decor(sigma_pair > 0): sum_i noise_i = sum_i u_i, where u_i is what LDP noise of std
    sigma_pair would be from the same run seed (the same private seeds)."""
    sigma_pair, sigma_cor = 0.8, 1.3
    decor, ldp = Decor(graph, sigma_pair, sigma_cor), LocalDP(graph.number_of_nodes(), sigma_pair)
    book = SeedBook.for_run(RUN_SEED, decor.n, len(decor.secrets))
    ldp_book = SeedBook.for_run(RUN_SEED, ldp.n, 0)
    for step in range(3):
        noise = np.stack(
            [decor.agent_noise(i, book.for_agent(decor, i), step, DIM) for i in range(decor.n)]
        )
        private = np.stack(
            [ldp.agent_noise(i, ldp_book.for_agent(ldp, i), step, DIM) for i in range(ldp.n)]
        )
        total = np.array([math.fsum(noise[:, c]) for c in range(DIM)])
        private_total = np.array([math.fsum(private[:, c]) for c in range(DIM)])
        bound = _rounding_bound(graph, sigma_cor, private)
        assert np.all(
            np.abs(total - private_total) <= bound + 2 * UNIT_ROUNDOFF * np.abs(private_total)
        )
        assert np.abs(noise - private).std() > 1.0  # the correlated terms are there, and large


# -- each agent uses exactly the seeds its threat model allows -------------------------------------


@pytest.mark.parametrize("graph", [ER8, RING8], ids=["er8", "ring8"])
def test_decor_agent_holds_its_private_seed_and_its_edges_seeds(graph: nx.Graph) -> None:
    mechanism = Decor(graph, 0.6, 1.1)
    book = SeedBook.for_run(RUN_SEED, mechanism.n, len(mechanism.secrets))
    assert len(mechanism.secrets) == graph.number_of_edges()
    for i in range(mechanism.n):
        own = book.for_agent(mechanism, i)
        assert set(own.private) == {i}
        assert own.private[i] is book.private[i]
        held_edges = {frozenset(mechanism.secrets[k].holders) for k in own.secrets}
        assert held_edges == {frozenset((i, j)) for j in graph.neighbors(i)}
        assert len(own.secrets) == graph.degree(i)
        assert all(own.secrets[k] is book.secrets[k] for k in own.secrets)
        _assert_book_is_necessary_and_sufficient(mechanism, book, i)


def test_whisper_every_agent_holds_the_single_shared_seed() -> None:
    mechanism = Whisper.from_covariance(WHISPER_R)
    book = SeedBook.for_run(RUN_SEED, 8, len(mechanism.secrets))
    assert len(mechanism.secrets) == 1
    for i in range(8):
        own = book.for_agent(mechanism, i)
        assert set(own.private) == {i} and set(own.secrets) == {0}
        assert own.secrets[0] is book.secrets[0]
        _assert_book_is_necessary_and_sufficient(mechanism, book, i)


def test_multiseed_agent_holds_the_seeds_of_its_groups() -> None:
    mechanism, _ = CASES["multiseed"]
    book = SeedBook.for_run(RUN_SEED, 8, len(mechanism.secrets))
    for i in range(8):
        own = book.for_agent(mechanism, i)
        assert {mechanism.secrets[k].holders for k in own.secrets} == {
            g for g in MS_GROUPS if i in g
        }
        _assert_book_is_necessary_and_sufficient(mechanism, book, i)


def test_ldp_agent_holds_only_its_private_seed() -> None:
    mechanism = LocalDP(5, 1.0)
    book = SeedBook.for_run(RUN_SEED, 5, 0)
    for i in range(5):
        own = book.for_agent(mechanism, i)
        assert set(own.private) == {i} and not own.secrets
        _assert_book_is_necessary_and_sufficient(mechanism, book, i)


def _assert_book_is_necessary_and_sufficient(
    mechanism: NoiseMechanism, book: SeedBook, agent: int
) -> None:
    own = book.for_agent(mechanism, agent)
    # sufficient: the agent's noise from its own seeds is the same as from the whole run's book
    np.testing.assert_array_equal(
        mechanism.agent_noise(agent, own, 3, 50), mechanism.agent_noise(agent, book, 3, 50)
    )
    # necessary: without any one of its seeds the agent cannot compute its noise
    for key in own.private:
        reduced = SeedBook(
            own.seed, {k: v for k, v in own.private.items() if k != key}, dict(own.secrets)
        )
        with pytest.raises(KeyError):
            mechanism.agent_noise(agent, reduced, 3, 50)
    for key in own.secrets:
        reduced = SeedBook(
            own.seed, dict(own.private), {k: v for k, v in own.secrets.items() if k != key}
        )
        with pytest.raises(KeyError):
            mechanism.agent_noise(agent, reduced, 3, 50)


# -- determinism ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["decor-er", "whisper-random", "multiseed", "ldp"])
def test_agent_noise_is_a_deterministic_function_of_seed_and_step(name: str) -> None:
    mechanism, _ = CASES[name]
    book = SeedBook.for_run(RUN_SEED, mechanism.n, len(mechanism.secrets))
    again = SeedBook.for_run(RUN_SEED, mechanism.n, len(mechanism.secrets))  # rebuilt elsewhere
    other_run = SeedBook.for_run(RUN_SEED + 1, mechanism.n, len(mechanism.secrets))
    for i in range(mechanism.n):
        first = mechanism.agent_noise(i, book.for_agent(mechanism, i), 5, 100)
        np.testing.assert_array_equal(
            first, mechanism.agent_noise(i, book.for_agent(mechanism, i), 5, 100)
        )
        np.testing.assert_array_equal(
            first, mechanism.agent_noise(i, again.for_agent(mechanism, i), 5, 100)
        )
        # continuous draws: a coincidence in any coordinate has probability 0
        assert np.all(first != mechanism.agent_noise(i, book.for_agent(mechanism, i), 6, 100))
        assert np.all(first != mechanism.agent_noise(i, other_run.for_agent(mechanism, i), 5, 100))


def test_vectorized_sampler_is_deterministic_in_its_generator() -> None:
    mechanism, _ = CASES["decor-er"]
    a = mechanism.sample(np.random.default_rng(3), 100)
    np.testing.assert_array_equal(a, mechanism.sample(np.random.default_rng(3), 100))
    assert np.all(a != mechanism.sample(np.random.default_rng(4), 100))


def _turned_eigh(turn: np.random.Generator):
    """``np.linalg.eigh`` that returns another orthonormal basis of each repeated eigenvalue's
    eigenspace, as another BLAS kernel's rounding may: the same decomposition of the matrix."""
    eigh = np.linalg.eigh

    def turned(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        values, vectors = eigh(matrix)
        vectors = vectors.copy()
        start = 0
        while start < len(values):
            stop = start + 1
            scale = 1e-9 * max(abs(values).max(), 1e-300)
            while stop < len(values) and values[stop] - values[start] <= scale:
                stop += 1
            if stop - start > 1:
                rotation, _ = np.linalg.qr(turn.standard_normal((stop - start, stop - start)))
                vectors[:, start:stop] = vectors[:, start:stop] @ rotation
            start = stop
        return values, vectors

    return turned


#: Whisper's design on a ring: its covariance has the ring's symmetry, so repeated eigenvalues.
WHISPER_RING_R = design_whisper(
    metropolis_hastings(RING8), calibrate(10.0, 1e-5, 100, AgentLevel(0.1))
).covariance()


@pytest.mark.parametrize(
    ("name", "make"),
    [
        ("decor-ring", lambda: Decor(RING8, 0.5, 2.0)),
        ("whisper-ring", lambda: Whisper.from_covariance(WHISPER_RING_R)),
        ("multiseed", lambda: MultiSeedWhisper(8, MS_SIGMA_MIX2, MS_GROUPS, MS_BLOCKS, q=1)),
    ],
    ids=["decor-ring", "whisper-ring", "multiseed"],
)
def test_draws_do_not_depend_on_the_eigenbasis_of_a_repeated_eigenvalue(
    name: str, make, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where R (or a secret's block) has repeated eigenvalues, the noise drawn, both ways, is the
    same whatever basis of their eigenspaces LAPACK returns: a principal square root, not
    ``V sqrt(w)``, so another machine's BLAS kernels draw the same numbers."""

    def draws(mechanism: NoiseMechanism) -> tuple[np.ndarray, np.ndarray]:
        book = SeedBook.for_run(RUN_SEED, mechanism.n, len(mechanism.secrets))
        own = [
            mechanism.agent_noise(i, book.for_agent(mechanism, i), 2, 50)
            for i in range(mechanism.n)
        ]
        return mechanism.sample(np.random.default_rng(7), 50), np.stack(own)

    before = draws(make())
    values = np.linalg.eigvalsh(make().covariance())
    assert np.any(np.diff(values) < 1e-9 * values.max()), "no repeated eigenvalue to turn"
    monkeypatch.setattr(np.linalg, "eigh", _turned_eigh(np.random.default_rng(5)))
    after = draws(make())
    for one, other in zip(before, after, strict=True):
        np.testing.assert_allclose(one, other, rtol=0, atol=1e-12 * np.abs(one).max())


# -- the covariance a coalition cannot see ---------------------------------------------------------


def _coalitions(n: int) -> list[tuple[int, ...]]:
    rng = np.random.default_rng(0)
    triples = [tuple(sorted(rng.choice(n, 3, replace=False).tolist())) for _ in range(5)]
    return [c for q in (1, 2) for c in itertools.combinations(range(n), q)] + triples


def _assert_members_zero(unknown: np.ndarray, coalition: tuple[int, ...]) -> None:
    assert np.all(unknown[list(coalition), :] == 0.0) and np.all(unknown[:, list(coalition)] == 0.0)


@pytest.mark.parametrize("graph", [ER8, RING8], ids=["er8", "ring8"])
def test_decor_unknown_covariance_is_the_laplacian_of_the_graph_without_the_coalition(
    graph: nx.Graph,
) -> None:
    sigma_pair, sigma_cor = 0.6, 1.1
    mechanism = Decor(graph, sigma_pair, sigma_cor)
    n = mechanism.n
    np.testing.assert_allclose(
        mechanism.unknown_covariance(()),
        sigma_pair**2 * np.eye(n) + sigma_cor**2 * nx_laplacian(graph),
    )
    for coalition in _coalitions(n):
        honest = [i for i in range(n) if i not in coalition]
        remaining = graph.copy()
        remaining.remove_nodes_from(
            coalition
        )  # DECOR Theorem 6: G_H, the subgraph on honest agents
        expected = sigma_pair**2 * np.eye(len(honest)) + sigma_cor**2 * nx_laplacian(
            remaining, honest
        )
        unknown = mechanism.unknown_covariance(coalition)
        np.testing.assert_allclose(
            unknown[np.ix_(honest, honest)], expected, rtol=1e-12, atol=1e-14
        )
        _assert_members_zero(unknown, coalition)


def test_zero_sum_unknown_covariance_is_singular_on_every_remaining_component() -> None:
    mechanism = ZeroSum(ER8, 0.9)
    for coalition in _coalitions(8):
        honest = [i for i in range(8) if i not in coalition]
        remaining = ER8.copy()
        remaining.remove_nodes_from(coalition)
        unknown = mechanism.unknown_covariance(coalition)
        np.testing.assert_allclose(
            unknown[np.ix_(honest, honest)], 0.81 * nx_laplacian(remaining, honest), atol=1e-14
        )
        _assert_members_zero(unknown, coalition)


def test_whisper_any_coalition_knows_the_global_seed_and_leaves_only_private_noise() -> None:
    mechanism = Whisper.from_covariance(WHISPER_R)
    sigma_mix2 = float(
        np.linalg.eigvalsh(WHISPER_R)[0]
    )  # the split Whisper documents: lambda_min(R)
    np.testing.assert_allclose(mechanism.unknown_covariance(()), WHISPER_R, rtol=1e-10, atol=1e-12)
    for coalition in _coalitions(8):
        honest = [i for i in range(8) if i not in coalition]
        unknown = mechanism.unknown_covariance(coalition)
        np.testing.assert_allclose(
            unknown[np.ix_(honest, honest)],
            sigma_mix2 * np.eye(len(honest)),
            rtol=1e-10,
            atol=1e-14,
        )
        _assert_members_zero(unknown, coalition)


def test_multiseed_unknown_covariance_keeps_the_seeds_no_member_holds() -> None:
    """CorN-DSGD Section V-D: R^(I) = sigma_mix^2 I + sum over k with H_k disjoint from I of
    R^(k)."""
    mechanism, _ = CASES["multiseed"]
    for coalition in _coalitions(8):
        honest = [i for i in range(8) if i not in coalition]
        expected = MS_SIGMA_MIX2 * np.eye(8)
        for group, block in zip(MS_GROUPS, MS_BLOCKS, strict=True):
            if not set(group) & set(coalition):
                expected = expected + embed(block, group, 8)
        unknown = mechanism.unknown_covariance(coalition)
        np.testing.assert_allclose(
            unknown[np.ix_(honest, honest)],
            expected[np.ix_(honest, honest)],
            rtol=1e-10,
            atol=1e-12,
        )
        _assert_members_zero(unknown, coalition)
