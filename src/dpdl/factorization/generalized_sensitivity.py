"""Generalized sensitivity `sens(C; B)` under participation, and its GDP guarantee
(MAFALDA-SGD, Definition 7, Theorem 8, eq. (8)).

For `O = A G + B Z` with `A = B C` and `Z ~ N(0, I)`, changing G by `D` moves the mean
of O by `A D`, whose Mahalanobis norm under `B B^T` is `||C D||_{B^+ B}` (`B^T (B B^T)^+ B
= B^+ B`), whatever C is chosen. So with `X = A^T (B B^T)^+ A = C^T B^+ B C`:

    sens(C; B)^2 = max_pattern max_{||d_s|| <= 1} sum_{s, t in pattern} X_st <d_s, d_t>,

and the mechanism is `Delta sens`-GDP for a per-row change of at most `Delta`, gradients
chosen adaptively included (Theorem 8). Two values per pattern:

- `"bound"`: `sum_{s,t} |X_st|`, eq. (8) (Pillutla et al. 2025, Lemma 3.15(a); the paper
  prints it without the square on sens);
- `"exact"`: the maximum itself. It equals the bound when `X_pattern >= 0` entrywise (Lemma
  3.15(b)); otherwise it is `max <X, Y>` over `Y >= 0` (PSD) with `diag(Y) <= 1`, an SDP,
  exact for models of dimension `d >= |pattern|` (every Y is then the Gram matrix of
  d-dimensional vectors of norm at most 1). We solve it in its Burer-Monteiro form (unit vectors
  `d_s`, block-coordinate ascent `d_s <- sum_t X_st d_t / ||.||`, which reaches the SDP optimum
  at full rank; Erdogdu et al. 2022) and return the value of a *feasible dual* point built from the
  ascent's multipliers (`lambda_s = <d_s, sum_t X_st d_t>`, shifted until `Diag(lambda) >= X`):
  a certified upper bound, tight when the ascent converged, never above eq. (8). Written by hand
  because an accounting of every pair of a graph solves tens of thousands of these tiny SDPs and a
  CVXPY solve costs about 0.1 s each; the tests check it against CVXPY.

A column of A outside the range of B is a gradient the noise does not hide: infinite sensitivity.

[`canary_test`][dpdl.factorization.generalized_sensitivity.canary_test] gives, for one agent's
records, both sides of an audit: the sensitivity above and the Neyman-Pearson test of a canary
that moves the agent's gradient in one coordinate at every step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpdl.accounting import gdp
from dpdl.errors import ConfigError
from dpdl.factorization.min_separation import MinSeparated, min_separated_sensitivity
from dpdl.factorization.participation import Participation
from dpdl.factorization.trust import Knowledge

__all__ = [
    "SENSITIVITY_METHODS",
    "CanaryTest",
    "agent_sensitivities",
    "canary_test",
    "knowledge_epsilon",
    "pattern_sensitivity",
    "whiten",
]

SENSITIVITY_METHODS = ("exact", "bound")

#: Singular values of B below this fraction of the largest are zero (B B^T is singular there).
RANK_TOL = 1e-10
#: A column of A is outside range(B) when its residual exceeds this fraction of its norm.
LEAK_TOL = 1e-7


def _decoder_range(decoder: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """An orthonormal basis of range(B) and the matching singular values of B."""
    left, singular, _ = np.linalg.svd(decoder, full_matrices=False)
    keep = singular > RANK_TOL * singular.max(initial=0.0)
    return left[:, keep], singular[keep]


def _whiten_in(
    workload: np.ndarray, basis: np.ndarray, singular: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    projected = basis.T @ workload
    residual = np.linalg.norm(workload - basis @ projected, axis=0)
    leaked = residual > LEAK_TOL * np.maximum(np.linalg.norm(workload, axis=0), 1e-300)
    return projected / singular[:, None], leaked


def whiten(knowledge: Knowledge) -> tuple[np.ndarray, np.ndarray]:
    """`Y` with `Y^T Y = A^T (B B^T)^+ A` (`r x n T`), and which columns of A leave
    range(B)."""
    return _whiten_in(knowledge.workload, *_decoder_range(knowledge.decoder))


def _elliptope_maximum(gram: np.ndarray, sweeps: int = 2000, tolerance: float = 1e-12) -> float:
    """A certified upper bound on `max <gram, Y>`, `Y` PSD with `diag(Y) <= 1` (module
    doc)."""
    size = len(gram)
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((size, size))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    value = -math.inf
    for _ in range(sweeps):
        for s in range(size):
            pull = gram[s] @ vectors - gram[s, s] * vectors[s]
            norm = np.linalg.norm(pull)
            if norm > 0:
                vectors[s] = pull / norm
        new_value = float(np.sum((vectors @ vectors.T) * gram))
        if new_value - value <= tolerance * abs(new_value):
            break
        value = new_value
    multipliers = np.maximum(np.einsum("sr,sr->s", vectors, gram @ vectors), 0.0)
    shift = max(0.0, -float(np.linalg.eigvalsh(np.diag(multipliers) - gram).min()))
    return float(multipliers.sum() + size * shift)


def pattern_sensitivity(gram: np.ndarray, method: str = "exact") -> float:
    """Squared sensitivity of one pattern with Gram block `gram` (`X_pattern`), see module
    doc."""
    if method not in SENSITIVITY_METHODS:
        raise ConfigError(
            f"unknown sensitivity method {method!r}; known: {', '.join(SENSITIVITY_METHODS)}"
        )
    scale = float(np.abs(gram).max(initial=0.0))
    bound = float(np.abs(gram).sum())
    if method == "bound" or scale == 0.0 or (gram >= -1e-12 * scale).all():
        return bound
    return min(bound, scale * _elliptope_maximum(gram / scale))


def agent_sensitivities(
    knowledge: Knowledge, participation: Participation | MinSeparated, method: str = "exact"
) -> np.ndarray:
    """`sens(C; B)` for each protected agent's records (`inf` when one is not hidden, NaN for
    the attackers, whose data the guarantee is not about). Under b-min-separated participation,
    each agent's T x T block of X scored by
    [`min_separated_sensitivity`][dpdl.factorization.min_separation.min_separated_sensitivity]:
    exact when its patterns are few enough to score, else a certified upper bound (logged)."""
    if participation.steps != knowledge.steps:
        raise ConfigError(
            f"the participation covers {participation.steps} steps, the algorithm {knowledge.steps}"
        )
    whitened, leaked = whiten(knowledge)
    result = np.full(knowledge.n, np.nan)
    if isinstance(participation, MinSeparated):
        for agent in np.flatnonzero(knowledge.protected):
            rows = np.arange(knowledge.steps) * knowledge.n + agent
            if leaked[rows].any():
                result[agent] = math.inf
                continue
            block = whitened[:, rows]
            found = min_separated_sensitivity(
                None,
                participation,
                lambda gram: pattern_sensitivity(gram, method),
                gram=block.T @ block,
            )
            result[agent] = math.sqrt(found.squared)
        return result
    for agent in np.flatnonzero(knowledge.protected):
        worst = 0.0
        for rows in participation.rows(agent, knowledge.n):
            if leaked[rows].any():
                worst = math.inf
                break
            block = whitened[:, rows]
            worst = max(worst, pattern_sensitivity(block.T @ block, method))
        result[agent] = math.sqrt(worst)
    return result


def knowledge_epsilon(
    knowledge: Knowledge,
    participation: Participation | MinSeparated,
    row_sensitivity: float,
    delta: float,
    method: str = "exact",
) -> tuple[float, float]:
    """`(eps, mu)`: the mechanism is `mu = Delta max_agent sens`-GDP (Theorem 8) and so
    `(eps, delta)`-DP exactly (Dong et al. 2022, Corollary 2.13; the paper's Remark 10), for a
    change of at most `row_sensitivity = Delta` in each row of G a record takes part in."""
    if not (math.isfinite(row_sensitivity) and row_sensitivity > 0):
        raise ConfigError(
            f"the per-row sensitivity must be a finite number > 0, got {row_sensitivity}"
        )
    mu = row_sensitivity * float(np.nanmax(agent_sensitivities(knowledge, participation, method)))
    return gdp.epsilon(mu, delta), mu


@dataclass(frozen=True)
class CanaryTest:
    """One agent's records in one view `O = A G + B Z`: the accountant's bound and the optimal
    test of a canary.

    Attributes:
        mu_upper: `Delta sens` over the agent's T rows (every-step participation, Theorem 8).
        mu_canary: the canary's own `mu = ||A delta||_{(B B^T)^+}` (at most `mu_upper`).
        signs: `(T,)` the canary's sign at each step (`delta = Delta signs` on the agent's rows).
        direction: `a = (B B^T)^+ A delta` over the rows of O; when `A delta` leaves range(B),
            its component outside that range (the statistic then carries no noise).
        shift: `a^T A delta`, the statistic's mean under the canary (its variance is `shift`
            when the test is noisy: `mu_canary = sqrt(shift)`).
    """

    mu_upper: float
    mu_canary: float
    signs: np.ndarray
    direction: np.ndarray
    shift: float

    @property
    def noise_free(self) -> bool:
        return math.isinf(self.mu_canary)


def _canary_signs(gram: np.ndarray, sweeps: int = 1000) -> np.ndarray:
    """Signs `s` with a large `s^T X s`: the sensitivity's SDP restricted to one coordinate (a
    max-cut-like problem), by flipping one sign at a time while that increases it (each flip
    does: the diagonal term stays), from a constant canary and from the signs of X's leading
    eigenvector; the better local optimum. On 16-agent tori it reaches 0.97-0.99 of the SDP."""
    starts = [np.ones(len(gram)), np.sign(np.linalg.eigh(gram)[1][:, -1])]
    found = []
    for signs in starts:
        signs[signs == 0] = 1.0
        for _ in range(sweeps):
            flipped = False
            for step in range(len(gram)):
                pull = gram[step] @ signs - gram[step, step] * signs[step]
                if pull * signs[step] < 0:
                    signs[step] = -signs[step]
                    flipped = True
            if not flipped:
                break
        found.append(signs)
    return max(found, key=lambda signs: float(signs @ gram @ signs))


def _cholesky(decoder: np.ndarray, iterations: int = 30) -> np.ndarray | None:
    """The Cholesky factor L of `B B^T` when B has full row rank and is well conditioned (the
    smallest eigenvalue of `B B^T`, by inverse iteration on L, above `RANK_TOL^2` of the
    largest): a fiftieth of the SVD's work. None otherwise (the SVD then finds B's range)."""
    from scipy.linalg import solve_triangular

    gram = decoder @ decoder.T
    try:
        factor = np.linalg.cholesky(gram)
    except np.linalg.LinAlgError:
        return None
    vector = np.random.default_rng(0).standard_normal(len(gram))
    smallest = math.inf
    for _ in range(iterations):
        vector /= np.linalg.norm(vector)
        solved = solve_triangular(
            factor, solve_triangular(factor, vector, lower=True), lower=True, trans="T"
        )
        smallest = min(smallest, 1.0 / float(vector @ solved))
        vector = solved
    largest = float(np.linalg.norm(gram, ord=1))  # at least the largest eigenvalue
    return factor if smallest > RANK_TOL**2 * largest else None


def canary_test(
    knowledge: Knowledge, agent: int, row_sensitivity: float, method: str = "exact"
) -> CanaryTest:
    """The accountant's GDP `mu` for `agent`'s records (each of its T gradient rows moved by at
    most `row_sensitivity`) and the Neyman-Pearson test of a canary moving that agent's gradient by
    `row_sensitivity` in one coordinate at every step: `O ~ N(b A delta, B B^T)` for `b` in
    {0, 1}, best told apart by `a^T O` with `a = (B B^T)^+ A delta` (module doc)."""
    if not (0 <= agent < knowledge.n) or not knowledge.protected[agent]:
        raise ConfigError(
            f"the canary's agent {agent} must be one of the protected agents "
            f"{np.flatnonzero(knowledge.protected).tolist()}"
        )
    columns = knowledge.workload[:, np.arange(knowledge.steps) * knowledge.n + agent]
    factor = _cholesky(knowledge.decoder)
    if factor is not None:  # B B^T = L L^T: Y = L^-1 A_u, a = L^-T Y delta
        from scipy.linalg import solve_triangular

        whitened = solve_triangular(factor, columns, lower=True)
        gram = whitened.T @ whitened
        signs = _canary_signs(gram)
        moved = whitened @ (row_sensitivity * signs)
        direction = solve_triangular(factor, moved, lower=True, trans="T")
    else:
        basis, singular = _decoder_range(knowledge.decoder)
        whitened, leaked = _whiten_in(columns, basis, singular)
        if leaked.any():
            signs = np.ones(knowledge.steps)
            change = columns @ (row_sensitivity * signs)
            direction = change - basis @ (basis.T @ change)
            return CanaryTest(math.inf, math.inf, signs, direction, float(direction @ change))
        gram = whitened.T @ whitened
        signs = _canary_signs(gram)
        moved = whitened @ (row_sensitivity * signs)
        direction = basis @ (moved / singular)
    mu_upper = row_sensitivity * math.sqrt(pattern_sensitivity(gram, method))
    shift = float(moved @ moved)
    return CanaryTest(mu_upper, math.sqrt(shift), signs, direction, shift)
