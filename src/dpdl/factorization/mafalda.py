"""MAFALDA-SGD's noise correlation: a local encoder optimised for the gossip (Lemma 12, Algorithm
2).

Every agent correlates its own noise over time with the same `C_local` (`C = C_local (x) I_n`,
LDP: no seed is shared). The utility term of eq. (9) is then `||L C_local^-1||_F^2 =
tr(H X^-1)` with `X = C_local^T C_local` and

    H = sum_i A_i^T A_i,   A = (blockdiag W_t) W_T K^(T,n),   A_i = node i's T columns.

The commutation matrix only picks node i's columns `t n + i` of the time-major workload, so
H is a partial trace of `F^T F` (`F = (blockdiag W_t) W_T`) over agents, computed without
forming F: for a fixed symmetric W with eigenvalues `l_k`, block `(i, t)` of F is
`W^(i-t+1)` and

    H[t, s] = sum_k l_k^(|t-s|+2) sum_{j < T - max(t, s)} l_k^(2 j),

`O(n^3 + n T^2)` time and `O(T^2)` memory against the paper's `O(n^3 T + n^2 T^3)` and
`O(n^2 T^2)` (Remark 13). A fixed gossip that is reversible (`pi_i W_ij = pi_j W_ji`, as
the authors' rule `1 / (deg_i + 1)`) is similar to a symmetric one and takes a geometric sum
over pairs of eigenvalues, `O(n^3 + n^2 T^2)` (`_reversible_gram`: 0.13 s instead of
16 s on the Facebook ego graph over T = 320 steps, 0.3 s instead of 387 s on a 271-node Gnutella
sample, under load). Any other gossip takes the general route, `O(n^3 T^2 + n^2 T^3)` time,
`O(n^2 T)` memory.

The factorization is the multi-epoch one of Choquette-Choo et al. (ICML 2023): minimise
`tr(H X^-1)` over positive definite X with `X_st = 0` for distinct steps of one cyclic
pattern and every pattern's diagonal summing to one. Then `sens(C_local)^2 = 1` exactly under
cyclic `(k, b)`-participation (no off-diagonal term inside a pattern), so the objective is
`sens^2 ||L C^-1||_F^2` of Lemma 12. Solved by L-BFGS in float64.

MAFALDA-L-SGD, a variant in the authors' released code (`OPTIMAL_DL_LOCALCOR`, plotted as
"MAFALDA-L-SGD (Ours)" but left out of the paper's figures), gives every agent its own encoder,
optimised for its own term `H_i`
([`agent_utility_grams`][dpdl.factorization.mafalda.agent_utility_grams],
[`optimize_agents`][dpdl.factorization.mafalda.optimize_agents]): on an irregular graph a
well-connected agent's noise is averaged away faster than a leaf's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
from scipy.linalg import LinAlgError, cho_factor, cho_solve, cholesky
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import breadth_first_order

from dpdl.accounting import gdp
from dpdl.errors import ConfigError
from dpdl.factorization.generalized_sensitivity import pattern_sensitivity
from dpdl.factorization.min_separation import MinSeparated, min_separated_sensitivity
from dpdl.factorization.participation import Participation
from dpdl.factorization.workload import gossip_sequence

__all__ = [
    "Factorization",
    "agent_utility_grams",
    "factor_gram",
    "gdp_noise_multiplier",
    "local_loss",
    "local_sensitivity",
    "noise_error",
    "noise_multiplier",
    "optimize_agents",
    "optimize_local",
    "restarted",
    "sigma_for_sensitivity",
    "utility_gram",
]


def _symmetric_fixed(weights: np.ndarray | Sequence[np.ndarray]) -> bool:
    return (
        isinstance(weights, np.ndarray)
        and weights.ndim == 2
        and np.allclose(weights, weights.T, atol=1e-12)
    )


def _reversible(weights: np.ndarray | Sequence[np.ndarray]) -> np.ndarray | None:
    """The stationary distribution pi of a fixed gossip W that is reversible (`pi_i W_ij = pi_j
    W_ji`: W is similar to a symmetric matrix through `diag(pi)^(1/2)`, as the rule
    `w_ij = 1 / (deg_i + 1)` of the MAFALDA-SGD authors' code is), else None. pi follows the
    ratios `W_ij / W_ji` along a breadth-first tree, then detailed balance is checked on every
    edge."""
    if not (isinstance(weights, np.ndarray) and weights.ndim == 2):
        return None
    support = weights > 0
    if not (support == support.T).all():
        return None
    order, parents = breadth_first_order(csr_matrix(support), 0, directed=False)
    if len(order) != len(weights):
        return None
    pi = np.zeros(len(weights))
    pi[0] = 1.0
    for node in order[1:]:
        parent = parents[node]
        pi[node] = pi[parent] * weights[parent, node] / weights[node, parent]
    pi /= pi.sum()
    flow = pi[:, None] * weights
    return pi if np.allclose(flow, flow.T, rtol=0.0, atol=1e-12 * flow.max()) else None


def utility_gram(
    weights: np.ndarray | Sequence[np.ndarray], steps: int, block: int | None = None
) -> np.ndarray:
    """`H = sum_i A_i^T A_i` of Lemma 12 (`T x T`), by the cheapest route the gossip allows.

    With `block`, the sum of H's diagonal `block x block` blocks: the utility Gram matrix of one
    block of an encoder whose correlation restarts every `block` steps
    ([`restarted`][dpdl.factorization.mafalda.restarted]).
    """
    return _utility_grams(weights, steps, block, per_agent=False)


def agent_utility_grams(
    weights: np.ndarray | Sequence[np.ndarray], steps: int, block: int | None = None
) -> np.ndarray:
    """Every agent's own term `H_i = A_i^T A_i` of Lemma 12's sum (`n x T x T`; `block` as in
    [`utility_gram`][dpdl.factorization.mafalda.utility_gram], whose result is their sum).

    MAFALDA-L-SGD (the authors' code, `MF_OPTIMAL_DL_variednode`) gives agent i the encoder
    optimised for `H_i` alone: with `C = sum_i C_i (x) e_i e_i^T` the error of eq. (9) splits into
    `sum_i sens(C_i)^2 tr(H_i X_i^-1)`, each agent's noise reaching the models through its own
    columns `A_i`. For a fixed symmetric W with eigenpairs `(l_k, u_k)` each term of
    [`utility_gram`][dpdl.factorization.mafalda.utility_gram]'s eigenvalue sum is weighted by
    `u_k[i]^2`: `O(n^2 T^2)` time and `O(n T^2)` memory; otherwise the general route, `O(n^2 T^3)`
    time.
    """
    return _utility_grams(weights, steps, block, per_agent=True)


def _utility_grams(
    weights: np.ndarray | Sequence[np.ndarray], steps: int, block: int | None, per_agent: bool
) -> np.ndarray:
    """H (`per_agent` False) or every agent's `H_i` (True), by the cheapest route."""
    sequence = gossip_sequence(weights, steps)
    n = sequence[0].shape[0]
    size = block or steps
    if block is not None and (block < 1 or steps % block):
        raise ConfigError(
            f"correlation restarts need the {steps} steps to be a whole number of blocks, got "
            f"block={block}"
        )
    shape = (n, size, size) if per_agent else (size, size)
    gram = np.zeros(shape)
    if _symmetric_fixed(weights):
        inside = np.arange(size)
        lag = np.abs(np.subtract.outer(inside, inside))
        latest = np.maximum.outer(inside, inside)
        values, vectors = np.linalg.eigh(sequence[0])
        for value, vector in zip(values, vectors.T, strict=True):
            powers = value ** np.arange(steps + 2)
            geometric = np.concatenate(
                [[0.0], np.cumsum(powers[:steps] ** 2)]
            )  # sum_{j < L} l^(2j)
            term = np.zeros((size, size))
            for offset in range(0, steps, size):
                term += powers[np.minimum(lag + 2, steps + 1)] * geometric[steps - offset - latest]
            if per_agent:
                gram += (vector**2)[:, None, None] * term
            else:
                gram += term
        return gram
    pi = _reversible(weights)
    full = (
        _reversible_gram(sequence[0], pi, steps, per_agent)
        if pi is not None
        else _general_gram(sequence, steps, per_agent)
    )
    for offset in range(0, steps, size):
        gram += full[..., offset : offset + size, offset : offset + size]
    return gram


def _general_gram(sequence: Sequence[np.ndarray], steps: int, per_agent: bool) -> np.ndarray:
    """H (or every `H_i`) for any gossip sequence, row by row of F's blocks:
    `O(n^3 T^2 + n^2 T^3)` time, `O(n^2 T)` memory."""
    n = sequence[0].shape[0]
    full = np.zeros((n, steps, steps) if per_agent else (steps, steps))
    blocks = np.zeros((0, n, n))  # F blocks (i, t) for t <= i, current row i
    for i in range(steps):
        blocks = np.concatenate([blocks, np.eye(n)[None]])
        blocks = sequence[i] @ blocks
        if per_agent:  # agent a's columns: blocks[t][:, a] for every t
            columns = blocks.transpose(2, 0, 1)
            full[:, : i + 1, : i + 1] += columns @ columns.transpose(0, 2, 1)
        else:
            flat = blocks.reshape(i + 1, -1)
            full[: i + 1, : i + 1] += flat @ flat.T
    return full


def _reversible_gram(
    weights: np.ndarray, pi: np.ndarray, steps: int, per_agent: bool
) -> np.ndarray:
    """H (or every `H_i`) for a reversible W with stationary distribution pi, in `O(n^2 T^2)`
    time (`O(n^3 T + n^2 T^2)` per agent) against the general route's `O(n^2 T^3)`.

    With `S = P^(1/2) W P^(-1/2) = U diag(l) U^T` (`P = diag(pi)`), `W^a = P^(-1/2) U l^a U^T
    P^(1/2)` and `tr((W^a)^T W^b) = sum_kl l_k^a M_kl l_l^b N_lk` with `M = U^T P^-1 U` and
    `N = U^T P U`; agent i's diagonal entry is `pi_i sum_kl U_ik l_k^a M_kl l_l^b U_il`. For
    `s <= t` the sum over rows `r >= t` of F's blocks `W^(r-t+1)`, `W^(r-s+1)` is
    geometric: `H[t, s] = sum_l l_l^(t-s+1) v_t[l]` with `v_t[l] = sum_k C_kl l_k G_kl(T - t)`,
    `G_kl(L) = sum_(j < L) (l_k l_l)^j` and `C = M * N` (per agent `C_kl = pi_i U_ik M_kl
    U_il`).
    """
    n = len(weights)
    root = np.sqrt(pi)
    values, vectors = np.linalg.eigh(root[:, None] * weights / root[None, :])
    m = vectors.T @ (vectors / pi[:, None])
    products = np.multiply.outer(values, values)
    powers = values[None, :] ** np.arange(1, steps + 1)[:, None]  # row d: l^(d + 1)
    if per_agent:
        full = np.zeros((n, steps, steps))
        scaled = vectors * pi[:, None]
    else:
        full = np.zeros((steps, steps))
        n_matrix = vectors.T @ (vectors * pi[:, None])
    geometric, power = np.zeros((n, n)), np.ones((n, n))
    for t in range(steps - 1, -1, -1):  # G(T - t), one more term each step back
        geometric += power
        power *= products
        q = m * values[:, None] * geometric  # M_kl l_k G_kl(T - t)
        if per_agent:
            row = ((vectors @ q) * scaled) @ powers[t::-1].T  # (agents, s = 0 .. t)
            full[:, t, : t + 1] = row
            full[:, : t + 1, t] = row
        else:
            row = powers[t::-1] @ (n_matrix * q).sum(axis=0)  # s = 0 .. t: l^(t - s + 1)
            full[t, : t + 1] = row
            full[: t + 1, t] = row
    return full


def restarted(block_encoder: np.ndarray, steps: int) -> np.ndarray:
    """The encoder that restarts `block_encoder`'s correlation every `len(block_encoder)` steps
    (correlation restarts, Pillutla et al. 2025): `I_(T/B) (x) C_block`. Its noise costs
    `O(B)` memory per agent instead of `O(T)`, and its factorization `O(B^3)` per L-BFGS
    step."""
    size = len(block_encoder)
    if steps % size:
        raise ConfigError(f"{steps} steps are not a whole number of blocks of {size}")
    return np.kron(np.eye(steps // size), block_encoder)


def _pattern_labels(participation: Participation) -> np.ndarray:
    if not isinstance(participation, Participation):
        raise ConfigError(
            f"the MAFALDA factorization needs cyclic participation, not {participation.name}"
        )
    labels = np.full(participation.steps, -1)
    for index, pattern in enumerate(participation.patterns):
        if (labels[list(pattern)] >= 0).any():
            raise ConfigError(
                "the MAFALDA factorization needs disjoint participation patterns (cyclic "
                "participation)"
            )
        labels[list(pattern)] = index
    if (labels < 0).any():
        raise ConfigError("every step must belong to one participation pattern")
    return labels


def factor_gram(gram: np.ndarray) -> np.ndarray:
    """Lower-triangular C with `C^T C = gram` (a reversed Cholesky factor): causal noise
    `C^-1 Z`."""
    flip = np.flip(np.eye(gram.shape[0]), axis=0)
    lower = cholesky(flip @ gram @ flip, lower=True)
    return flip @ lower.T @ flip


def local_sensitivity(
    encoder: np.ndarray, participation: Participation | MinSeparated, method: str = "exact"
) -> float:
    """`sens(C_local)` under `participation` for one agent (Definition 7 with B invertible).
    Under b-min-separated participation, possibly a certified upper bound
    ([`min_separated_sensitivity`][dpdl.factorization.min_separation.min_separated_sensitivity]
    says which).

    Given one encoder per agent (`n x T x T`, MAFALDA-L-SGD), the largest of theirs: agent i's
    records enter only the rows its own encoder correlates (`C = sum_i C_i (x) e_i e_i^T` is
    block diagonal over agents), so its guarantee is `sens(C_i)`, and one noise multiplier for
    every agent must cover the largest.
    """
    encoders = encoder[None] if encoder.ndim == 2 else encoder
    if isinstance(participation, MinSeparated):  # closed form, exact or bound: module doc there
        score = partial(pattern_sensitivity, method=method)
        return max(
            math.sqrt(min_separated_sensitivity(one, participation, score).squared)
            for one in encoders
        )
    return max(
        math.sqrt(
            max(
                pattern_sensitivity(gram[np.ix_(p, p)], method)
                for p in map(list, participation.patterns)
            )
        )
        for gram in np.swapaxes(encoders, -1, -2) @ encoders
    )


def local_loss(
    utility: np.ndarray, encoder: np.ndarray, participation: Participation | MinSeparated
) -> float:
    """Lemma 12's objective `sens(C_local)^2 tr(H (C^T C)^-1)`: expected squared error of the
    gossiped models caused by noise of unit privacy (`sigma = 1`).

    With every agent's `H_i`
    ([`agent_utility_grams`][dpdl.factorization.mafalda.agent_utility_grams]) and one encoder per
    agent (MAFALDA-L-SGD), `sens^2 sum_i tr(H_i (C_i^T C_i)^-1)` with the largest sensitivity (one
    noise multiplier for all); agents' `H_i` and one shared encoder give `tr(H X^-1)` again.
    """
    return local_sensitivity(encoder, participation) ** 2 * noise_error(utility, encoder)


def noise_error(utility: np.ndarray, encoder: np.ndarray) -> float:
    """`tr(H (C^T C)^-1)` (summed over the agents' `H_i` and encoders, given one each): the
    error of [`local_loss`][dpdl.factorization.mafalda.local_loss] before its factor
    `sens(C_local)^2`, for a caller that has the sensitivity already."""
    inverse = np.linalg.inv(encoder)
    return float(np.sum((inverse @ np.swapaxes(inverse, -1, -2)) * utility))


def noise_multiplier(
    encoder: np.ndarray,
    participation: Participation | MinSeparated,
    row_sensitivity: float,
    eps: float,
    delta: float,
) -> float:
    """sigma such that MF-D-SGD with noise `C_local^-1 Z`, `Z ~ N(0, sigma^2)`, is
    `(eps, delta)`-DP against LDP's attacker: `mu = Delta sens(C_local) / sigma` (Theorem 8;
    under LDP `B = sigma W_T C^-1` is square and invertible, so `sens(C; B) = sens(C_local)`,
    checked in the tests), with the largest mu the budget allows (never above it: the epsilon of
    `sensitivity / sigma` is checked, since dividing twice can round mu up by one ulp)."""
    return sigma_for_sensitivity(
        row_sensitivity * local_sensitivity(encoder, participation), eps, delta
    )


def sigma_for_sensitivity(sensitivity: float, eps: float, delta: float) -> float:
    """The smallest sigma found for which `sensitivity / sigma`-GDP is `(eps, delta)`-DP, never
    above the budget ([`noise_multiplier`][dpdl.factorization.mafalda.noise_multiplier] for a
    caller that has the sensitivity already)."""
    return _within_eps(sensitivity, sensitivity / gdp.mu_for_budget(eps, delta), eps, delta)


def _within_eps(sensitivity: float, sigma: float, eps: float, delta: float) -> float:
    """`sigma`, raised ulp by ulp until the eps of `sensitivity / sigma`-GDP at `delta` is at
    most `eps`."""
    while gdp.epsilon(sensitivity / sigma, delta) > eps:
        sigma = math.nextafter(sigma, math.inf)
    return sigma


def gdp_noise_multiplier(
    encoder: np.ndarray,
    participation: Participation | MinSeparated,
    row_sensitivity: float,
    mu: float,
    delta: float,
) -> float:
    """sigma such that MF-D-SGD with noise `C_local^-1 Z`, `Z ~ N(0, sigma^2)`, is mu-GDP against
    LDP's attacker (Theorem 8): `Delta sens(C_local) / mu`, as the MAFALDA-SGD code sets it,
    raised ulp by ulp while the mu it gives rounds above `mu` or the eps of that mu at `delta`
    above the eps of `mu` (the float eps of [`gdp.epsilon`][dpdl.accounting.gdp.epsilon] is not
    monotone in mu to the last ulps: one ulp less of mu gave 16 ulps more of eps)."""
    sensitivity = row_sensitivity * local_sensitivity(encoder, participation)
    sigma = sensitivity / mu
    while sensitivity / sigma > mu:  # raising sigma lowers the mu it gives: this stays true after
        sigma = math.nextafter(sigma, math.inf)
    return _within_eps(sensitivity, sigma, gdp.epsilon(mu, delta), delta)


@dataclass(frozen=True)
class Factorization:
    """An optimised local encoder and how the optimisation went."""

    encoder: np.ndarray  # C_local, lower triangular
    loss: float  # sens^2 tr(H X^-1)
    iterations: int
    converged: bool


def _loss_and_gradient(utility: np.ndarray, gram: np.ndarray) -> tuple[float, np.ndarray] | None:
    try:
        factor = cho_factor(gram, lower=True, check_finite=False)
    except LinAlgError:
        return None
    solved = cho_solve(factor, utility, check_finite=False)  # X^-1 H
    loss = float(np.trace(solved))
    if not math.isfinite(loss) or loss <= 0:
        return None
    inverse_h = cho_solve(factor, solved.T, check_finite=False)  # X^-1 H X^-1
    return loss, -(inverse_h + inverse_h.T) / 2.0


def optimize_local(
    utility: np.ndarray,
    participation: Participation,
    max_iterations: int = 2000,
    tolerance: float = 1e-9,
    memory: int = 10,
) -> Factorization:
    """Minimise `tr(H X^-1)` under the multi-epoch constraints (module doc) by L-BFGS.

    Written by hand rather than with scipy's L-BFGS-B: the feasible set is an affine subspace of
    the positive definite cone, and scipy's line search cannot be told to stay inside the cone;
    here the step is halved until the Cholesky factorisation of X succeeds (the backtracking of
    Choquette-Choo et al.'s primal optimiser), with the usual two-loop recursion on gradients
    projected onto the subspace.
    """
    steps = participation.steps
    if utility.shape != (steps, steps):
        raise ConfigError(f"H must be {steps} x {steps} for {steps} steps, got {utility.shape}")
    labels = _pattern_labels(participation)
    same = labels[:, None] == labels[None, :]
    free = ~same | np.eye(steps, dtype=bool)
    counts = np.bincount(labels)

    def project(direction: np.ndarray) -> np.ndarray:
        direction = direction * free
        diagonal = np.diag(direction)
        np.fill_diagonal(direction, diagonal - (np.bincount(labels, diagonal) / counts)[labels])
        return direction

    gram = np.diag(1.0 / counts[labels])
    evaluated = _loss_and_gradient(utility, gram)
    if evaluated is None:
        raise ConfigError("H is not positive semi-definite with a positive trace")
    loss, gradient = evaluated
    gradient = project(gradient)
    history: list[tuple[np.ndarray, np.ndarray]] = []
    converged = False
    iteration = 0
    for iteration in range(1, max_iterations + 1):  # noqa: B007 - its last value is returned
        direction = gradient.copy()
        alphas = []
        for s, y in reversed(history):
            alpha = np.sum(s * direction) / np.sum(y * s)
            alphas.append(alpha)
            direction -= alpha * y
        if history:
            s, y = history[-1]
            direction *= np.sum(s * y) / np.sum(y * y)
        else:
            direction *= 1.0 / max(np.abs(gradient).max(), 1e-300) * np.abs(gram).max() * 0.1
        for (s, y), alpha in zip(history, reversed(alphas), strict=True):
            beta = np.sum(y * direction) / np.sum(y * s)
            direction += s * (alpha - beta)
        if np.sum(direction * gradient) <= 0:  # not a descent direction: restart from the gradient
            history.clear()
            direction = gradient * (np.abs(gram).max() * 0.1 / max(np.abs(gradient).max(), 1e-300))
        step, accepted = 1.0, None
        for _ in range(60):
            candidate = gram - step * direction
            result = _loss_and_gradient(utility, candidate)
            if result is not None and result[0] <= loss - 1e-4 * step * np.sum(
                direction * gradient
            ):
                accepted = (candidate, result)
                break
            step /= 2.0
        if accepted is None:
            converged = True  # no decrease possible along the search direction at float precision
            break
        candidate, (new_loss, new_gradient) = accepted
        new_gradient = project(new_gradient)
        history.append((candidate - gram, new_gradient - gradient))
        del history[:-memory]
        improvement = loss - new_loss
        gram, loss, gradient = candidate, new_loss, new_gradient
        if improvement <= tolerance * loss:
            converged = True
            break
    gram = (gram + gram.T) / 2.0
    return Factorization(factor_gram(gram), loss, iteration, converged)


def optimize_agents(grams: np.ndarray, participation: Participation) -> list[Factorization]:
    """MAFALDA-L-SGD's encoders: agent i's optimised for its own `H_i` alone
    ([`agent_utility_grams`][dpdl.factorization.mafalda.agent_utility_grams]; the authors'
    `MF_OPTIMAL_DL_variednode`), each by
    [`optimize_local`][dpdl.factorization.mafalda.optimize_local]. Every encoder has sensitivity
    1, so the summed error `sum_i tr(H_i X_i^-1)` is at most MAFALDA-SGD's `tr(H X^-1)`: each
    term is minimised on its own over the same feasible set. One L-BFGS run per agent: `n` times
    the shared cost."""
    return [optimize_local(gram, participation) for gram in grams]
