"""Mahalanobis sensitivity of a linear Gaussian view: the one number privacy depends on.

The adversary observes ``P (g + v)`` with ``v ~ N(0, R)`` (per coordinate). Changing agent i's
clipped gradient by at most ``s`` in L2 norm shifts the observation's mean by ``s P e_i`` (times a
unit vector over coordinates), whose Mahalanobis norm under ``Sigma = P R P^T`` is

    mu_i = s sqrt(e_i^T P^T Sigma^+ P e_i),

infinite when ``P e_i`` leaves the range of Sigma (a singular covariance leaks: MAFALDA-SGD
Theorem 8; CorN-DSGD guideline (G1)). With ``P = I`` this is ``s sqrt([R^-1]_ii)``.
"""

from __future__ import annotations

import numpy as np
from numpy.linalg import LinAlgError
from scipy.linalg import cho_factor, cho_solve

__all__ = ["unit_sensitivities", "unit_sensitivity"]

#: Eigenvalues below this fraction of the largest are treated as zero (the covariance is singular).
RANK_TOL = 1e-12
#: Cholesky is trusted when every squared pivot exceeds this fraction of the largest variance;
#: below it the eigendecomposition decides (a singular matrix can factor with tiny rounded pivots).
CHOLESKY_TOL = 1e-9


def unit_sensitivities(covariance: np.ndarray, view: np.ndarray) -> np.ndarray:
    """Per-agent Mahalanobis sensitivity for a unit change, ``sqrt(e_i^T P^T Sigma^+ P e_i)``.

    Returns an array of length n with ``inf`` for agents whose change is not hidden by noise. A
    clearly positive definite Sigma is handled by a Cholesky factorisation; a (nearly) singular one
    by an eigendecomposition that decides which directions are hidden.
    """
    covariance = np.asarray(covariance, dtype=float)
    view = np.asarray(view, dtype=float)
    sigma = view @ covariance @ view.T
    sigma = (sigma + sigma.T) / 2.0
    try:
        factor, lower = cho_factor(sigma, lower=True, check_finite=False)
        pivots = np.diag(factor) ** 2
        if pivots.min() > CHOLESKY_TOL * np.diag(sigma).max():
            return np.sqrt((view * cho_solve((factor, lower), view, check_finite=False)).sum(axis=0))
    except LinAlgError:
        pass
    eigenvalues, eigenvectors = np.linalg.eigh(sigma)
    scale = max(float(eigenvalues.max(initial=0.0)), 0.0)
    positive = eigenvalues > RANK_TOL * scale if scale > 0 else np.zeros_like(eigenvalues, dtype=bool)
    projected = eigenvectors.T @ view  # (k, n): coordinates of P e_i in the eigenbasis
    squared = (projected[positive] ** 2 / eigenvalues[positive, None]).sum(axis=0)
    leaked = np.sqrt((projected[~positive] ** 2).sum(axis=0))
    column_norms = np.linalg.norm(view, axis=0)
    singular = leaked > 1e-9 * np.maximum(column_norms, 1e-300)
    result = np.sqrt(squared)
    result[singular & (column_norms > 0)] = np.inf
    return result


def unit_sensitivity(covariance: np.ndarray, view: np.ndarray) -> float:
    """Worst agent's unit Mahalanobis sensitivity, ``max_i mu_i / s``."""
    return float(unit_sensitivities(covariance, view).max())
