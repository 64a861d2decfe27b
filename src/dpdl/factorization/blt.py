"""Buffered linear Toeplitz (BLT) strategies: a Toeplitz `C` whose noise `C^-1 Z` is drawn with
`d` floats of state per agent and coordinate (Dvijotham, McMahan, Pillutla, Steinke and Thakurta,
"Efficient and near-optimal noise generation for streaming differential privacy", FOCS 2024;
McKenna, "Scaling up the banded matrix factorization mechanism for differentially private ML",
2024, Section 4).

A BLT of buffer size `d` has `c_0 = 1` and `c_k = sum_i omega_i theta_i^(k-1)` for `k >= 1`
(Dvijotham et al.'s definition): `c(x) = 1 + sum_i omega_i x / (1 - theta_i x)`, the impulse
response of the linear system with state `s` in `R^d`

    s_(t+1) = Theta s_t + 1 u_t,   y_t = u_t + omega^T s_t,   Theta = diag(theta).

Its inverse system (`u` from `y`) has the same state fed back: `u_t = y_t - omega^T s_t`, so
`C^-1` is again a BLT with `d_0 = 1` and `d_k = -omega^T (Theta - 1 omega^T)^(k-1) 1`; the
eigenvalues of `Theta - 1 omega^T` are the inverse's `theta'`
([`inverse_buffer`][dpdl.factorization.blt.inverse_buffer]: the inverse of a BLT is a BLT, as
Dvijotham et al. show). The engine draws `C^-1 Z` that way, keeping `s`: `d` floats per agent and
coordinate ([`LocalCorrelatedNoise`][dpdl.mechanisms.time_correlated.LocalCorrelatedNoise]).

`blt` optimises `(theta, omega)` for the gossip's utility Gram matrix `H` with the objective of
BandMF ([`ToeplitzObjective`][dpdl.factorization.toeplitz.ToeplitzObjective]), under
`0 <= theta <= 1` and `omega >= 0`: `C`'s coefficients are then nonnegative, `C^T C >= 0`
entrywise, and the objective's sensitivity is exact under any participation (Pillutla et al.
2025, Lemma 3.15(b), as in
[`generalized_sensitivity`][dpdl.factorization.generalized_sensitivity]). The run is
calibrated with [`local_sensitivity`][dpdl.factorization.mafalda.local_sensitivity] on the dense
`C` all the same.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

from dpdl.choices import BLT_BUFFER
from dpdl.errors import ConfigError
from dpdl.factorization.mafalda import local_loss
from dpdl.factorization.participation import Participation
from dpdl.factorization.strategy import Strategy
from dpdl.factorization.toeplitz import ToeplitzObjective, toeplitz_matrix

__all__ = [
    "DEFAULT_BUFFER",
    "blt_coefficients",
    "blt_strategy",
    "decoder_coefficients",
    "inverse_buffer",
]

#: The buffer size `blt` takes by default (`dpdl.choices.BLT_BUFFER`): the BLT papers find a
#: handful of buffers close to the best Toeplitz strategy's error over thousands of steps; on the
#: Florentine families' gossip (T = 320) buffers beyond 1 (k = 20, b = 16) or 2 (k = 4, b = 80)
#: gained nothing, so 4 leaves a margin at 4 floats of state per agent and coordinate.
DEFAULT_BUFFER = BLT_BUFFER


def blt_coefficients(theta: np.ndarray, omega: np.ndarray, count: int) -> np.ndarray:
    """`c_0 = 1`, `c_k = sum_i omega_i theta_i^(k-1)`: the first `count` Toeplitz coefficients
    of the BLT `(theta, omega)`."""
    powers = np.asarray(theta)[None, :] ** np.arange(max(count - 1, 0))[:, None]
    return np.concatenate([[1.0], powers @ np.asarray(omega)])[:count]


def decoder_coefficients(theta: np.ndarray, omega: np.ndarray, count: int) -> np.ndarray:
    """The first `count` coefficients of `C^-1` from the buffer recurrence (module doc): `d_0 =
    1`, `d_k = -omega^T (Theta - 1 omega^T)^(k-1) 1`."""
    feedback = np.diag(theta) - np.outer(np.ones(len(theta)), omega)
    result = np.zeros(count)
    result[0] = 1.0
    state = np.ones(len(theta))
    for k in range(1, count):
        result[k] = -np.dot(omega, state)
        state = feedback @ state
    return result


def inverse_buffer(theta: np.ndarray, omega: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`(theta', omega')` of `C^-1` as a BLT, `d_k = sum_i omega'_i theta'_i^(k-1)`: `theta'`
    the eigenvalues of `Theta - 1 omega^T` (real for `omega >= 0`: it is similar to a symmetric
    matrix minus a rank-one square) and `omega'_i = -(omega^T v_i)(u_i^T 1)` for its right and
    left eigenvectors `v_i`, `u_i` (`U = V^-1`)."""
    feedback = np.diag(theta) - np.outer(np.ones(len(theta)), omega)
    values, vectors = np.linalg.eig(feedback)
    weights = -(np.asarray(omega) @ vectors) * np.linalg.solve(vectors, np.ones(len(theta)))
    return np.real_if_close(values, tol=1e6), np.real_if_close(weights, tol=1e6)


def _start(buffer: int) -> np.ndarray:
    """The optimisation's start: decay rates `1 - 2^-(2i+1)` (half-lives from one step to about
    `4^d` steps) and weights summing to 1/2, `sqrt`'s `c_1`."""
    theta = 1.0 - 0.5 ** (2.0 * np.arange(buffer) + 1.0)
    return np.concatenate([theta, np.full(buffer, 0.5 / buffer)])


def blt_strategy(
    utility: np.ndarray,
    participation: Participation,
    buffer: int = DEFAULT_BUFFER,
    max_iterations: int = 500,
) -> Strategy:
    """The BLT of buffer size `buffer` minimising BandMF's objective for `H` (module doc), by
    L-BFGS-B over `(theta, omega)` with an analytic gradient (the chain rule through
    [`blt_coefficients`][dpdl.factorization.blt.blt_coefficients]); the better of the optimum
    and the start by the exact loss."""
    if buffer < 1:
        raise ConfigError(f"the buffer size must be at least 1, got {buffer}")
    steps = participation.steps
    lags = np.arange(max(steps - 1, 0))[:, None]  # k - 1 for k = 1 .. T-1

    toeplitz = ToeplitzObjective(utility, participation)

    def objective(parameters: np.ndarray) -> tuple[float, np.ndarray]:
        theta, omega = parameters[:buffer], parameters[buffer:]
        loss, gradient = toeplitz(blt_coefficients(theta, omega, steps))
        powers = theta[None, :] ** lags  # theta^(k-1)
        slopes = np.zeros_like(powers)  # (k-1) theta^(k-2)
        slopes[1:] = lags[1:] * theta[None, :] ** (lags[1:] - 1)
        tail = gradient[1:]
        return loss, np.concatenate([(tail @ slopes) * omega, tail @ powers])

    start = _start(buffer)
    bounds = [(0.0, 1.0)] * buffer + [(0.0, None)] * buffer
    found = minimize(
        objective,
        start,
        jac=True,
        method="L-BFGS-B",
        bounds=bounds,
        options={"maxiter": max_iterations},
    )
    candidates = [start] + ([found.x] if np.isfinite(found.x).all() else [])
    encoders = [
        toeplitz_matrix(blt_coefficients(p[:buffer], p[buffer:], steps), steps) for p in candidates
    ]
    best = int(np.argmin([local_loss(utility, e, participation) for e in encoders]))
    theta, omega = candidates[best][:buffer], candidates[best][buffer:]
    return Strategy(encoders[best], buffer=(theta.copy(), omega.copy()))
