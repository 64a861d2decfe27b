"""The Whisper D-SGD / CorN-DSGD covariance program, solved through its n-variable concave dual.

Problem (9) of CorN-DSGD (Whisper D-SGD problem (10)): over covariances `R > 0`

    minimize  Tr(W R W^T)   subject to   [R^-1]_ii <= c   for every agent i,

with `c` the calibrated bound
([`dpdl.accounting.Calibration.inverse_variance_bound`][dpdl.accounting.calibration.Calibration.inverse_variance_bound]).
`Tr(W R W^T) = Tr(M R)` with `M = W^T W`; everything below holds for any positive semidefinite
weight M (`solve_weighted`), such as the loss the noise leaves after a whole run
([`dpdl.mechanisms.horizon`][dpdl.mechanisms.horizon]), and `solve_whisper` is `solve_weighted(W^T
W, c)`. With `M = V diag(mu) V^T`, `B = V_+ diag(sqrt(mu_+))` (the range of M: `M = B B^T`), `P =
R^-1` and `Lambda = diag(lambda)`, the Lagrangian `Tr(M R) + Tr(Lambda (P - c I))` is minimised at
`P = B A^-1/2 B^T` with `A = B^T Lambda B`, which gives the concave dual

    g(lambda) = 2 Tr(A^1/2) - c sum(lambda),        d g / d lambda_i = [B A^-1/2 B^T]_ii - c

(for invertible M, `2 Tr((Lambda^1/2 M Lambda^1/2)^1/2)` of docs/design.md: same spectrum). It is
maximised by L-BFGS over `log lambda` and polished by a fixed point on the optimality
conditions, one eigendecomposition of the r x r matrix A per step. The primal is
`R = M_+^-1/2 A^1/2 M_+^-1/2` on the range of W, built as `F F^T` (positive semidefinite by
construction, nothing is inverted), scaled by `max_i P_ii / c` so that no constraint is violated;
`Tr(M R) - g(lambda)` certifies the optimality gap.

Written by hand: a generic SDP solver (CVXPY + Clarabel) takes seconds at n = 20 and runs out of
memory near n = 50, while this is O(n^3) per iteration (n = 1000 in seconds).

Singular W (e.g. the complete graph with uniform weights `11^T/n`; singular values below
`KERNEL_TOL` times the largest count as zero; for a general M, square roots of its eigenvalues
below `KERNEL_TOL` times the largest): noise in the kernel of W cancels in one gossip
round, so the infimum of Tr(W R W^T) is approached by unbounded kernel noise and is not attained.
The range problem above is solved exactly, and the kernel gets an explicit, finite variance, `cap`
= `KERNEL_VARIANCE` times the largest variance on the range (`WhisperSolution.cap`); its
small contribution `1 / cap` to `[R^-1]_ii` (and a rounding margin, `KERNEL_MARGIN`) is
absorbed by the final scaling, at a relative cost
of about `n / KERNEL_VARIANCE` (2e-7 on the complete graph with n = 20, where the infimum is the
CDP level `1 / (n c)`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize
from threadpoolctl import threadpool_limits

from dpdl.errors import ConfigError

__all__ = ["KERNEL_TOL", "KERNEL_VARIANCE", "WhisperSolution", "solve_weighted", "solve_whisper"]

#: Singular values of W below this fraction of the largest span its kernel.
KERNEL_TOL = 1e-6
#: Variance of kernel noise, relative to the largest variance on the range of W.
KERNEL_VARIANCE = 1e8
#: With kernel noise R is ill-conditioned (about KERNEL_VARIANCE) and rounding of its entries moves
#: [R^-1]_ii by up to ~1e-8 relative: the scaling then keeps this margin below the bound.
KERNEL_MARGIN = 1e-7


@dataclass(frozen=True)
class WhisperSolution:
    """The optimal covariance and certificates of its quality."""

    covariance: np.ndarray
    objective: float
    dual_value: float
    iterations: int
    seconds: float
    cap: float
    kernel_dimension: int

    @property
    def gap(self) -> float:
        """Certified relative optimality gap `(primal - dual) / primal`."""
        return (self.objective - self.dual_value) / self.objective


def _dual_parts(lam: np.ndarray, basis: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Eigen-decomposition `(a, U)` of `A = B^T Lambda B` and `diag(B A^-1/2 B^T)`."""
    values, vectors = np.linalg.eigh(basis.T @ (lam[:, None] * basis))
    values = np.clip(values, values[-1] * np.finfo(float).eps, None)
    rotated = basis @ vectors  # B U
    return values, vectors, (rotated**2) @ values**-0.5


def _negative_dual(
    theta: np.ndarray, basis: np.ndarray, c: float, scale: float
) -> tuple[float, np.ndarray]:
    lam = np.exp(theta)
    values, _, diag_p = _dual_parts(lam, basis)
    value = 2.0 * np.sqrt(values).sum() - c * lam.sum()
    return -value / scale, -(lam * (diag_p - c)) / scale


def _polish(
    theta: np.ndarray, basis: np.ndarray, c: float, tol: float, max_iter: int = 200
) -> tuple[np.ndarray, int]:
    """Drive the optimality conditions `diag(P) = c` (active) / `<= c` (`lambda_i -> 0`) to
    `tol` by the fixed point `log lambda_i += 2 log(P_ii / c)` (first order, `P_ii` varies as
    `lambda_i^-1/2`; it contracts by about 1/2 per step). L-BFGS alone stalls near a gradient of
    `sqrt(machine epsilon)`, since its line search compares dual values."""
    for iteration in range(max_iter):
        _, _, diag_p = _dual_parts(np.exp(theta), basis)
        ratio = diag_p / c
        active = theta > theta.max() - 40.0  # lambda_i below e^-40 of the largest: inactive
        if ratio.max() - 1.0 <= tol and np.abs(ratio[active] - 1.0).max() <= 10 * tol:
            return theta, iteration
        theta = np.maximum(theta + 2.0 * np.log(ratio), theta.max() - 60.0)
    return theta, max_iter


def solve_whisper(
    weights: np.ndarray, c: float, tol: float = 1e-13, max_iter: int = 5000
) -> WhisperSolution:
    """Minimise `Tr(W R W^T)` subject to `[R^-1]_ii <= c` (see the module docstring).

    BLAS runs single-threaded here: numpy's and scipy's OpenBLAS copies otherwise stall each other
    between `eigh` and L-BFGS-B (measured 0.07 s against 0.3 s at n = 100 on 2 cores, and far
    worse under load), while at n = 1000 one thread costs only about a third more.
    """
    weights = np.asarray(weights, dtype=float)
    with threadpool_limits(limits=1):
        return solve_weighted(weights.T @ weights, c, tol, max_iter)


def solve_weighted(
    weight: np.ndarray, c: float, tol: float = 1e-13, max_iter: int = 5000
) -> WhisperSolution:
    """Minimise `Tr(M R)` subject to `[R^-1]_ii <= c` for a symmetric positive semidefinite
    `M = weight` (see the module docstring): the same certificates (`WhisperSolution.gap`)
    and the same guarantee that no constraint is exceeded as `solve_whisper`, which is
    `solve_weighted(W^T W, c)`."""
    gram = np.asarray(weight, dtype=float)
    if gram.ndim != 2 or gram.shape[0] != gram.shape[1] or not np.all(np.isfinite(gram)):
        raise ConfigError(
            f"the objective's weight must be a finite square matrix, got {gram.shape}"
        )
    if not np.allclose(gram, gram.T, rtol=1e-10, atol=1e-12 * np.abs(gram).max(initial=0.0)):
        raise ConfigError("the objective's weight must be symmetric")
    with threadpool_limits(limits=1):
        return _solve(gram, c, tol, max_iter)


def _solve(gram: np.ndarray, c: float, tol: float, max_iter: int) -> WhisperSolution:
    if not (np.isfinite(c) and c > 0):
        raise ConfigError(f"the inverse-variance bound c must be a finite number > 0, got {c}")
    start = time.perf_counter()
    n = gram.shape[0]
    mu, eigenvectors = np.linalg.eigh(gram)
    if mu[-1] <= 0:
        raise ConfigError("the objective's weight is zero: every covariance is optimal")
    on_range = mu > KERNEL_TOL**2 * mu[-1]
    basis = eigenvectors[:, on_range] * np.sqrt(mu[on_range])  # B, with B B^T = M on the range
    # Start from the best uniform lambda = t: diag(P) = diag(M^1/2) / sqrt(t) ~ c.
    diag_root = (eigenvectors[:, on_range] ** 2) @ np.sqrt(mu[on_range])
    theta0 = np.full(n, 2.0 * np.log(diag_root.mean() / c))
    scale = abs(_negative_dual(theta0, basis, c, 1.0)[0])
    result = minimize(
        _negative_dual,
        theta0,
        args=(basis, c, scale),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": max_iter, "ftol": 1e-12, "gtol": 1e-10, "maxcor": 30},
    )
    theta, iterations = _polish(result.x, basis, c, tol)
    lam = np.exp(theta)
    values, vectors, diag_p = _dual_parts(lam, basis)
    dual_value = 2.0 * np.sqrt(values).sum() - c * lam.sum()
    # R on the range: M_+^-1/2 A^1/2 M_+^-1/2 = F F^T, F = V_+ diag(mu^-1/2) U diag(a^1/4).
    factor = (eigenvectors[:, on_range] / np.sqrt(mu[on_range])) @ (vectors * values**0.25)
    covariance = factor @ factor.T
    kernel = eigenvectors[:, ~on_range]
    cap = KERNEL_VARIANCE * float(np.linalg.eigvalsh(covariance)[-1]) if kernel.shape[1] else 0.0
    covariance += cap * kernel @ kernel.T
    # F spans exactly the range of W, so R^-1 = P + V_0 V_0^T / cap is block-diagonal in the
    # eigenbasis of M and its diagonal needs no inversion. Scale so the worst constraint is tight.
    precision_diag = diag_p + ((kernel**2).sum(axis=1) / cap if cap else 0.0)
    covariance *= precision_diag.max() / c * (1.0 + KERNEL_MARGIN if cap else 1.0)
    objective = float(np.sum(gram * covariance))
    return WhisperSolution(
        covariance,
        objective,
        float(dual_value),
        int(result.nit) + iterations,
        time.perf_counter() - start,
        cap,
        int(kernel.shape[1]),
    )
