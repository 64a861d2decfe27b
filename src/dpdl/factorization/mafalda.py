"""MAFALDA-SGD's noise correlation: a local encoder optimised for the gossip (Lemma 12, Algorithm
2).

Every agent correlates its own noise over time with the same ``C_local`` (``C = C_local (x) I_n``,
LDP: no seed is shared). The utility term of eq. (9) is then ``||L C_local^-1||_F^2 =
tr(H X^-1)`` with ``X = C_local^T C_local`` and

    H = sum_i A_i^T A_i,   A = (blockdiag W_t) W_T K^(T,n),   A_i = node i's T columns.

The commutation matrix only picks node i's columns ``t n + i`` of the time-major workload, so
H is a partial trace of ``F^T F`` (``F = (blockdiag W_t) W_T``) over agents, computed without
forming F: for a fixed symmetric W with eigenvalues ``l_k``, block ``(i, t)`` of F is
``W^(i-t+1)`` and

    H[t, s] = sum_k l_k^(|t-s|+2) sum_{j < T - max(t, s)} l_k^(2 j),

``O(n^3 + n T^2)`` time and ``O(T^2)`` memory against the paper's ``O(n^3 T + n^2 T^3)`` and
``O(n^2 T^2)`` (Remark 13). A time-varying or asymmetric gossip takes the general route,
``O(n^3 T^2 + n^2 T^3)`` time, ``O(n^2 T)`` memory.

The factorization is the multi-epoch one of Choquette-Choo et al. (ICML 2023): minimise
``tr(H X^-1)`` over positive definite X with ``X_st = 0`` for distinct steps of one cyclic
pattern and every pattern's diagonal summing to one. Then ``sens(C_local)^2 = 1`` exactly under
cyclic ``(k, b)``-participation (no off-diagonal term inside a pattern), so the objective is
``sens^2 ||L C^-1||_F^2`` of Lemma 12. Solved by L-BFGS in float64.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.linalg import LinAlgError, cho_factor, cho_solve, cholesky

from dpdl.accounting import gdp
from dpdl.errors import ConfigError
from dpdl.factorization.generalized_sensitivity import pattern_sensitivity
from dpdl.factorization.participation import Participation
from dpdl.factorization.workload import gossip_sequence

__all__ = [
    "Factorization",
    "factor_gram",
    "local_loss",
    "local_sensitivity",
    "noise_multiplier",
    "optimize_local",
    "restarted",
    "utility_gram",
]


def _symmetric_fixed(weights: np.ndarray | Sequence[np.ndarray]) -> bool:
    return (
        isinstance(weights, np.ndarray)
        and weights.ndim == 2
        and np.allclose(weights, weights.T, atol=1e-12)
    )


def utility_gram(
    weights: np.ndarray | Sequence[np.ndarray], steps: int, block: int | None = None
) -> np.ndarray:
    """``H = sum_i A_i^T A_i`` of Lemma 12 (``T x T``), by the cheapest route the gossip allows.

    With ``block``, the sum of H's diagonal ``block x block`` blocks: the utility Gram matrix of one
    block of an encoder whose correlation restarts every ``block`` steps (:func:`restarted`).
    """
    sequence = gossip_sequence(weights, steps)
    size = block or steps
    if block is not None and (block < 1 or steps % block):
        raise ConfigError(
            f"correlation restarts need the {steps} steps to be a whole number of blocks, got "
            f"block={block}"
        )
    inside = np.arange(size)
    lag = np.abs(np.subtract.outer(inside, inside))
    latest = np.maximum.outer(inside, inside)
    gram = np.zeros((size, size))
    if _symmetric_fixed(weights):
        for value in np.linalg.eigvalsh(sequence[0]):
            powers = value ** np.arange(steps + 2)
            geometric = np.concatenate(
                [[0.0], np.cumsum(powers[:steps] ** 2)]
            )  # sum_{j < L} l^(2j)
            for offset in range(0, steps, size):
                gram += powers[np.minimum(lag + 2, steps + 1)] * geometric[steps - offset - latest]
        return gram
    n = sequence[0].shape[0]
    full = np.zeros((steps, steps))
    blocks = np.zeros((0, n, n))  # F blocks (i, t) for t <= i, current row i
    for i in range(steps):
        blocks = np.concatenate([blocks, np.eye(n)[None]])
        blocks = sequence[i] @ blocks
        flat = blocks.reshape(i + 1, -1)
        full[: i + 1, : i + 1] += flat @ flat.T
    for offset in range(0, steps, size):
        gram += full[offset : offset + size, offset : offset + size]
    return gram


def restarted(block_encoder: np.ndarray, steps: int) -> np.ndarray:
    """The encoder that restarts ``block_encoder``'s correlation every ``len(block_encoder)`` steps
    (correlation restarts, Pillutla et al. 2025): ``I_(T/B) (x) C_block``. Its noise costs
    ``O(B)`` memory per agent instead of ``O(T)``, and its factorization ``O(B^3)`` per L-BFGS
    step."""
    size = len(block_encoder)
    if steps % size:
        raise ConfigError(f"{steps} steps are not a whole number of blocks of {size}")
    return np.kron(np.eye(steps // size), block_encoder)


def _pattern_labels(participation: Participation) -> np.ndarray:
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
    """Lower-triangular C with ``C^T C = gram`` (a reversed Cholesky factor): causal noise
    ``C^-1 Z``."""
    flip = np.flip(np.eye(gram.shape[0]), axis=0)
    lower = cholesky(flip @ gram @ flip, lower=True)
    return flip @ lower.T @ flip


def local_sensitivity(
    encoder: np.ndarray, participation: Participation, method: str = "exact"
) -> float:
    """``sens(C_local)`` under ``participation`` for one agent (Definition 7 with B invertible)."""
    gram = encoder.T @ encoder
    return math.sqrt(
        max(
            pattern_sensitivity(gram[np.ix_(p, p)], method)
            for p in map(list, participation.patterns)
        )
    )


def local_loss(utility: np.ndarray, encoder: np.ndarray, participation: Participation) -> float:
    """Lemma 12's objective ``sens(C_local)^2 tr(H (C^T C)^-1)``: expected squared error of the
    gossiped models caused by noise of unit privacy (``sigma = 1``)."""
    inverse = np.linalg.inv(encoder)
    return local_sensitivity(encoder, participation) ** 2 * float(
        np.sum((inverse @ inverse.T) * utility)
    )


def noise_multiplier(
    encoder: np.ndarray,
    participation: Participation,
    row_sensitivity: float,
    eps: float,
    delta: float,
) -> float:
    """sigma such that MF-D-SGD with noise ``C_local^-1 Z``, ``Z ~ N(0, sigma^2)``, is
    ``(eps, delta)``-DP against LDP's attacker: ``mu = Delta sens(C_local) / sigma`` (Theorem 8;
    under LDP ``B = sigma W_T C^-1`` is square and invertible, so ``sens(C; B) = sens(C_local)``,
    checked in the tests), with the largest mu the budget allows (never above it: the epsilon of
    ``sensitivity / sigma`` is checked, since dividing twice can round mu up by one ulp)."""
    sensitivity = row_sensitivity * local_sensitivity(encoder, participation)
    sigma = sensitivity / gdp.mu_for_budget(eps, delta)
    while gdp.epsilon(sensitivity / sigma, delta) > eps:
        sigma = math.nextafter(sigma, math.inf)
    return sigma


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
    """Minimise ``tr(H X^-1)`` under the multi-epoch constraints (module doc) by L-BFGS.

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
