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

#: Eigenvalues of Sigma below this fraction of :func:`_scale` are treated as zero (singular).
RANK_TOL = 1e-12
#: Cholesky is trusted when every squared pivot exceeds this fraction of :func:`_scale`; below it
#: the eigendecomposition decides (a singular matrix can factor with tiny rounded pivots).
CHOLESKY_TOL = 1e-9


def _scale(covariance: np.ndarray, view: np.ndarray) -> float:
    """The scale Sigma's rounding errors are relative to: R's largest variance times P's largest
    squared row norm (the largest variance of one observed coordinate if the noise were perfectly
    correlated; within a factor n of ``lambda_max(R)`` for the views here). Sigma's own
    entries will not do: the central observer's ``1^T R 1 / n^2`` of zero-sum noise is pure
    rounding (1e-16 of R), a 1 x 1 matrix that factors cleanly and would give a huge finite mu."""
    variance = float(np.diag(covariance).max(initial=0.0))
    return max(variance, 0.0) * float((view * view).sum(axis=1).max(initial=0.0))


def unit_sensitivities(covariance: np.ndarray, view: np.ndarray) -> np.ndarray:
    """Per-agent Mahalanobis sensitivity for a unit change, ``sqrt(e_i^T P^T Sigma^+ P e_i)``.

    Returns an array of length n with ``inf`` for agents whose change is not hidden by noise. A
    clearly positive definite Sigma is handled by a Cholesky factorisation; a (nearly) singular one
    by an eigendecomposition that decides which directions are hidden. Both decide relative to the
    scale of R under the view (:func:`_scale`), never to an absolute level or to Sigma alone, so
    scaling R by any factor scales every finite value by its inverse square root and keeps every
    infinite one.
    """
    covariance = np.asarray(covariance, dtype=float)
    view = np.asarray(view, dtype=float)
    identity = view.shape == covariance.shape and np.count_nonzero(view) == len(view)
    identity = identity and bool((np.diag(view) == 1.0).all())
    # the identity view leaves R as it is (the same numbers, without two n^3 products)
    sigma = covariance if identity else view @ covariance @ view.T
    sigma = (sigma + sigma.T) / 2.0
    scale = _scale(covariance, view)
    try:
        factor, lower = cho_factor(sigma, lower=True, check_finite=False)
        pivots = np.diag(factor) ** 2
        if pivots.min() > CHOLESKY_TOL * scale:
            return np.sqrt(
                (view * cho_solve((factor, lower), view, check_finite=False)).sum(axis=0)
            )
    except LinAlgError:
        pass
    eigenvalues, eigenvectors = np.linalg.eigh(sigma)
    positive = (
        eigenvalues > RANK_TOL * scale if scale > 0 else np.zeros_like(eigenvalues, dtype=bool)
    )
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
