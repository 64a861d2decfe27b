"""The Whisper D-SGD / CorN-DSGD covariance program, solved through its n-variable concave dual.

Problem (9) of CorN-DSGD (Whisper D-SGD problem (10)): over covariances ``R > 0``

    minimize  Tr(W R W^T)   subject to   [R^-1]_ii <= c   for every agent i,

with ``c`` the calibrated bound (:attr:`dpdl.accounting.Calibration.inverse_variance_bound`).
With ``M = W^T W``, ``P = R^-1`` and ``Lambda = diag(lambda)`` the Lagrangian is minimised by
``P Lambda P = M``, i.e. ``P = Lambda^-1/2 (Lambda^1/2 M Lambda^1/2)^1/2 Lambda^-1/2``, which gives the
concave dual

    g(lambda) = 2 Tr((Lambda^1/2 M Lambda^1/2)^1/2) - c sum(lambda),    grad g = diag(P) - c,

maximised by L-BFGS over ``log lambda`` (one symmetric eigendecomposition per evaluation). The
primal point is then rescaled, ``P <- D P D`` with ``D = diag(sqrt(c / P_ii))``, so that every
constraint holds with equality up to rounding, and ``Tr(M P^-1) - g(lambda)`` certifies the
optimality gap. Written by hand because a generic SDP solver (CVXPY + Clarabel) takes seconds at
n = 20 and runs out of memory near n = 50, while this is O(n^3) per iteration.

Singular W (e.g. the complete graph with uniform weights ``11^T/n``): the infimum is not attained,
since noise in the kernel of W cancels for free and can grow without bound. We then minimise
``Tr(W R W^T) + tau Tr(R)`` with ``tau = CAP_RELATIVE * lambda_max(M)``, which caps the kernel
noise, and report it (:attr:`WhisperSolution.cap`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

from dpdl.errors import ConfigError

__all__ = ["WhisperSolution", "solve_whisper", "CAP_RELATIVE"]

#: Relative size of the variance penalty used when ``W^T W`` is singular.
CAP_RELATIVE = 1e-6


@dataclass(frozen=True)
class WhisperSolution:
    """The optimal covariance and certificates of its quality."""

    covariance: np.ndarray
    objective: float
    dual_value: float
    iterations: int
    seconds: float
    cap: float

    @property
    def gap(self) -> float:
        """Certified relative optimality gap ``(primal - dual) / primal`` (of the capped problem)."""
        return (self.objective - self.dual_value) / self.objective


def _dual(theta: np.ndarray, gram: np.ndarray, c: float) -> tuple[float, np.ndarray, np.ndarray]:
    """Negative dual value, its gradient in ``log lambda``, and the diagonal of P."""
    lam = np.exp(theta)
    root = np.sqrt(lam)
    values, vectors = np.linalg.eigh(gram * np.outer(root, root))
    sqrt_values = np.sqrt(np.clip(values, 0.0, None))
    diag_sqrt = (vectors**2) @ sqrt_values  # diag(S^1/2)
    diag_p = diag_sqrt / lam
    value = 2.0 * sqrt_values.sum() - c * lam.sum()
    return -value, -(lam * (diag_p - c)), diag_p


def solve_whisper(weights: np.ndarray, c: float, tol: float = 1e-12, max_iter: int = 5000) -> WhisperSolution:
    """Minimise ``Tr(W R W^T)`` subject to ``[R^-1]_ii <= c`` (see the module docstring)."""
    weights = np.asarray(weights, dtype=float)
    if not (np.isfinite(c) and c > 0):
        raise ConfigError(f"the inverse-variance bound c must be a finite number > 0, got {c}")
    start = time.perf_counter()
    gram = weights.T @ weights
    eigenvalues = np.linalg.eigvalsh(gram)
    cap = 0.0
    if eigenvalues[0] <= 1e-12 * eigenvalues[-1]:
        cap = CAP_RELATIVE * eigenvalues[-1]
        gram = gram + cap * np.eye(len(gram))
    # Start from the best uniform lambda: P = M^1/2 / sqrt(t), so diag(P) ~ c for t below.
    values, vectors = np.linalg.eigh(gram)
    diag_root = (vectors**2) @ np.sqrt(np.clip(values, 0.0, None))
    theta0 = np.full(len(gram), 2.0 * np.log(diag_root.mean() / c))
    result = minimize(
        lambda th: _dual(th, gram, c)[:2],
        theta0,
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": max_iter, "ftol": tol, "gtol": 1e-14, "maxcor": 30},
    )
    lam = np.exp(result.x)
    root = np.sqrt(lam)
    values, vectors = np.linalg.eigh(gram * np.outer(root, root))
    sqrt_values = np.sqrt(np.clip(values, 0.0, None))
    precision = (vectors * sqrt_values) @ vectors.T / np.outer(root, root)  # P
    dual_value = 2.0 * sqrt_values.sum() - c * lam.sum()
    scale = np.sqrt(c / np.diag(precision))
    precision = precision * np.outer(scale, scale)  # diag(P) = c
    covariance = np.linalg.inv(precision)
    covariance = (covariance + covariance.T) / 2.0
    objective = float(np.sum(gram * covariance))  # Tr(M R), with the cap term when W is singular
    return WhisperSolution(covariance, objective, float(dual_value), int(result.nit), time.perf_counter() - start, cap)
