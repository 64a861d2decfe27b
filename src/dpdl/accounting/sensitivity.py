"""Mahalanobis sensitivity of a linear Gaussian view, certified: the one number privacy depends on.

The adversary observes `P (g + v)` with `v = B z`, `z ~ N(0, I)` per coordinate: `B` is
the factor the agents sample, `[diag(s) | G]` (each agent's private standard deviation, then
the factors of the shared secrets it cannot subtract), so `R = B B^T`. Changing agent i's
clipped gradient by at most `s` in L2 norm shifts the observation's mean by `s P e_i`, whose
Mahalanobis norm under `Sigma = P R P^T` is

    mu_i = s sqrt(e_i^T P^T Sigma^+ P e_i) = s ||(P B)^+ P e_i||,

the norm of the smallest `y` with `P B y = P e_i` (infinite when there is none: a singular
covariance leaks; MAFALDA-SGD Theorem 8, CorN-DSGD guideline (G1)).

**Certified.** Every value returned is an upper bound on the exact value for the floats given
(the factor's entries read as real numbers, which is what the agents sample), whatever the
rounding; no float inverse is trusted. Two routes, both certified by the standard bound on a dot
product's rounding (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., eq. (3.5):
`|fl(x^T y) - x^T y| <= gamma_m |x|^T |y|`, `gamma_m = m u / (1 - m u)`, whatever the order of
summation):

- the Gram route (`_inverse_bounds`): `Sigma = B B^T` in floating point, its distance
  from the exact Gram bounded entrywise, Cholesky's inverse `Z`, and the exact residual
  `E = I - Sigma Z` bounded from its float value, so that `Sigma^-1 = Z (I - E)^-1` and
  `x^T Sigma^-1 x <= x^T Z x + ||Z^T x|| ||E x|| / (1 - ||E||)`: `k^3` work, about
  `u cond(Sigma)` above the exact value. A sparse factor keeps Sigma and its bound sparse:
  `E` and its rounding come from sparse products, and `gamma_m` counts the terms a sparse
  row sums (`_row_terms`; DECOR: 1 + an agent's degree) rather than every column;
- the QR route (`_qr_bounds`), where the Gram route is loose (an ill-conditioned view) and
  affordable: `B^T = Q U`, the approximate right inverse `Z = Q U^-T`, the exact residual
  `E = I - B Z` bounded the same way; with `y0 = Z x` and `r = x - B y0`,
  `||B^+ x|| <= ||y0|| + ||B^+||_2 ||r||`, `||B^+||_2 <= min(1 / s_min, ||Z||_F / (1 -
  ||E||_F))` (`s_min`: the smallest private standard deviation, since `B B^T >= diag(s)^2`;
  the second form because `Z (I - E)^-1` is a right inverse of B): about `gamma_m cond(B) =
  gamma_m sqrt(cond(R))` above, 1e-10 at `cond(R) = 1e12`, where the inverse of an assembled R
  errs by `cond(R) u`, 1e-4, in either direction.

When no route certifies a finite value it is infinite: the one rule for singularity, which the
membership attack shares (`dpdl.attacks.membership`), so a near-singular view is never
reported finite below its true value. A bare covariance (no factor) takes the Gram route on
`Sigma` itself ([`unit_sensitivities`][dpdl.accounting.sensitivity.unit_sensitivities]).
"""

from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.linalg import cho_factor, cho_solve, lapack, solve_triangular

__all__ = [
    "factor_sensitivities",
    "rounding_gamma",
    "unit_sensitivities",
    "unit_sensitivity",
]

#: The unit roundoff of float64.
UNIT_ROUNDOFF = 2.0**-53


def rounding_gamma(count: int) -> float:
    """Higham's `gamma_m = m u / (1 - m u)`: the relative error bound of a sum of m terms."""
    return count * UNIT_ROUNDOFF / (1.0 - count * UNIT_ROUNDOFF)


def _norms_up(matrix: np.ndarray, slack: np.ndarray) -> np.ndarray:
    """Upper bounds on the column norms of any matrix within `slack` (entrywise) of `matrix`,
    padded for the rounding of the norms themselves."""
    rows = matrix.shape[0]
    norms = np.linalg.norm(matrix, axis=0) + np.linalg.norm(slack, axis=0)
    return norms * (1.0 + rounding_gamma(rows + 4))


def _certify(
    solutions: np.ndarray,
    residuals: np.ndarray,
    slack: np.ndarray,
    inverse_norm: float,
    zero: np.ndarray,
) -> np.ndarray:
    """`||y0|| + ||B^+||_2 ||r||` per column, padded; zero for zero targets, inf uncertified."""
    bound = _norms_up(solutions, np.zeros_like(solutions)) + inverse_norm * _norms_up(
        residuals, slack
    )
    bound = bound * (1.0 + rounding_gamma(4 * (solutions.shape[0] + residuals.shape[0]) + 16))
    bound[zero] = 0.0
    return np.where(np.isnan(bound), np.inf, bound)


#: The Gram route's bound is kept when it is within this (relative) of its own estimate; a looser
#: one (an ill-conditioned view, the bound about ``u cond(Sigma)`` above) is tightened by the QR
#: route where that is affordable.
LOOSENESS = 1e-11
#: The QR route is taken for factors at most this many times wider than tall: its cost grows as
#: ``m k^2`` (DECOR on a dense graph has a column per edge), the Gram route's as ``k^3``.
QR_WIDTH = 4


def _cholesky_inverse(sigma: np.ndarray | sparse.sparray) -> np.ndarray | None:
    """Cholesky's inverse `Z` of the symmetric float Sigma, None where Cholesky fails (Sigma not
    positive definite in floating point) or Z is not finite. A sparse Sigma (a sparse factor's
    Gram) is factorised dense and inverted from its factor (LAPACK `potrf`, `potri`: `k^3`
    operations where solving for the identity takes `7 k^3 / 3`); any Z will do, since only its
    residual certifies the bounds."""
    k = sigma.shape[0]
    if not sparse.issparse(sigma):
        try:
            inverse = cho_solve(cho_factor(sigma, lower=True), np.eye(k), check_finite=False)
        except np.linalg.LinAlgError:
            return None
        return inverse if np.isfinite(inverse).all() else None
    factor, info = lapack.dpotrf(sigma.toarray(), lower=1, clean=1, overwrite_a=1)
    if info == 0:
        factor, info = lapack.dpotri(factor, lower=1, overwrite_c=1)
    if info != 0:
        return None
    inverse = np.tril(factor) + np.tril(factor, -1).T  # potri fills one triangle
    return inverse if np.isfinite(inverse).all() else None


def _row_terms(matrix: sparse.sparray) -> int:
    """The most entries a row of a sparse matrix stores: the most nonzero terms of a dot product
    of its rows (Higham's `gamma_m` counts the terms summed; adding an exact zero rounds
    nothing)."""
    return int(np.diff(sparse.csr_array(matrix).indptr).max(initial=0))


def _gap_norm(
    sigma: np.ndarray | sparse.sparray,
    sigma_error: np.ndarray | sparse.sparray,
    inverse: np.ndarray,
) -> float:
    """An upper bound on `||E||_F` of the exact residual `E = I - Sigma Z` (the exact Sigma
    within `sigma_error` of `sigma`, entrywise), from its float value and the rounding of the
    product: `gamma_{m+2} (I + |Sigma| |Z|) + (1 + gamma_{m+1}) sigma_error |Z|`, m the terms of
    a row's product (k for a dense Sigma). A sparse Sigma takes two sparse products (`k nnz`
    operations each, m the most entries of its rows) where a dense one takes three `k^3`
    products; its slack, itself one rounded product of non-negative terms, is raised by
    `gamma_{m+4}`."""
    k = inverse.shape[0]
    magnitude = np.abs(inverse)
    if sparse.issparse(sigma):
        terms = _row_terms(abs(sigma) + abs(sigma_error))
        gap = -(sigma @ inverse)
        gap[np.diag_indices(k)] += 1.0
        weight = rounding_gamma(terms + 2) * abs(sigma) + (1.0 + rounding_gamma(terms + 1)) * abs(
            sigma_error
        )
        slack = np.asarray(weight @ magnitude) * (1.0 + rounding_gamma(terms + 4))
        slack[np.diag_indices(k)] += rounding_gamma(terms + 2)
    else:
        gap = np.eye(k) - sigma @ inverse
        slack = rounding_gamma(k + 2) * (np.eye(k) + np.abs(sigma) @ magnitude) + (
            1.0 + rounding_gamma(k + 1)
        ) * (sigma_error @ magnitude)
    return float(np.sqrt((_norms_up(gap, slack) ** 2).sum()))


def _quadratic_terms(
    inverse: np.ndarray, goals: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per column x of `goals` (the identity when None): `x^T Z x`, a bound on its rounding,
    an upper bound on `||Z^T x||` and `||x||`. For the identity these are Z's diagonal, its
    magnitude times `gamma_{2k+2}`, the norms of Z's rows and ones, read off Z without a product
    (what the products with the identity give, to the bit: `k^3` operations each saved)."""
    k = inverse.shape[0]
    if goals is None:
        diagonal = np.diag(inverse).copy()
        rows = np.ascontiguousarray(inverse.T)
        reach = _norms_up(rows, rounding_gamma(k + 1) * np.abs(rows))
        return diagonal, rounding_gamma(2 * k + 2) * np.abs(diagonal), reach, np.ones(k)
    # x^T Z x through one BLAS product per term (a three-operand einsum loops in C without BLAS:
    # 0.08 s a call at k = 500, 60% of a 500-agent DECOR audit); the bound holds in any order of
    # summation.
    quadratic = (goals * (inverse @ goals)).sum(axis=0)
    magnitude = np.abs(goals)
    quadratic_error = rounding_gamma(2 * k + 2) * (magnitude * (np.abs(inverse) @ magnitude)).sum(
        axis=0
    )
    reach_slack = rounding_gamma(k + 1) * np.abs(inverse.T) @ np.abs(goals)
    reach = _norms_up(inverse.T @ goals, reach_slack)
    return quadratic, quadratic_error, reach, np.linalg.norm(goals, axis=0)


def _inverse_bounds(
    sigma: np.ndarray | sparse.sparray,
    sigma_error: np.ndarray | sparse.sparray,
    goals: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Certified upper bounds on `sqrt(x^T Sigma^-1 x)` for the columns x of `goals` (the
    identity when None), the exact Sigma within `sigma_error` (entrywise) of the symmetric float
    `sigma` (both dense, or both sparse), and the float estimates `sqrt(x^T Z x)` they bound
    (inf where nothing is certified).

    `Z`, Cholesky's inverse of the float Sigma, has an exact residual `E = I - Sigma Z`
    bounded from its float value and the rounding of the product, so `Sigma^-1 = Z (I - E)^-1`
    and `x^T Sigma^-1 x <= x^T Z x + ||Z^T x|| ||x|| ||E|| / (1 - ||E||)`: an error of about
    `cond(Sigma) u`."""
    k = sigma.shape[0]
    count = k if goals is None else goals.shape[1]
    unknown = (np.full(count, np.inf), np.full(count, np.inf))
    inverse = _cholesky_inverse(sigma)
    if inverse is None:
        return unknown
    gap_norm = _gap_norm(sigma, sigma_error, inverse)
    if not gap_norm < 1.0:
        return unknown
    quadratic, quadratic_error, reach, lengths = _quadratic_terms(inverse, goals)
    spill = lengths * gap_norm * (1.0 + rounding_gamma(k + 2))
    squared = quadratic + quadratic_error + reach * spill / (1.0 - gap_norm)
    bounds = np.sqrt(np.maximum(squared, 0.0)) * (1.0 + rounding_gamma(4 * k + 16))
    return bounds, np.sqrt(np.maximum(quadratic, 0.0))


def _gram(
    factor: np.ndarray | sparse.sparray, error: np.ndarray | None
) -> tuple[np.ndarray | sparse.sparray, ...]:
    """`B B^T` in floating point and a bound on its distance from the exact Gram of the exact
    factor (within `error` of `B`, entrywise): sparse products, and a sparse Gram and bound,
    where B is sparse and exact (DECOR's column per edge: an entry of the Gram sums at most as
    many terms as a row of B stores, 1 + the agent's degree, where a dense B's sums m)."""
    m = factor.shape[1]
    magnitude = abs(factor)
    product, absolute = factor @ factor.T, magnitude @ magnitude.T
    if sparse.issparse(factor) and error is None:
        m = _row_terms(factor)
    elif sparse.issparse(factor):
        product, absolute = product.toarray(), absolute.toarray()
    bound = rounding_gamma(m + 2) * absolute
    if error is not None:
        spread = error @ magnitude.T
        spread = spread.toarray() if sparse.issparse(spread) else np.asarray(spread)
        bound = bound + (1.0 + rounding_gamma(m + 2)) * (
            spread + spread.T + np.asarray(error @ error.T)
        )
    symmetric = (product + product.T) / 2.0
    bound = bound + abs(product - symmetric) + rounding_gamma(2) * abs(symmetric)
    return symmetric, bound


def _residual(
    factor: np.ndarray, error: np.ndarray, goals: np.ndarray, solutions: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """`goals - B solutions` in floating point, and an entrywise bound on its distance from the
    exact residual of the exact factor (within `error` of `B`)."""
    m = factor.shape[1]
    residual = goals - factor @ solutions
    magnitude = np.abs(solutions)
    slack = rounding_gamma(2 * m + 4) * (np.abs(goals) + np.abs(factor) @ magnitude) + (
        1.0 + rounding_gamma(m + 1)
    ) * (error @ magnitude)
    return residual, slack


def _qr_bounds(
    factor: np.ndarray, goals: np.ndarray, identity: bool, error: np.ndarray, floor: float
) -> np.ndarray:
    """The QR route of [`factor_sensitivities`][dpdl.accounting.sensitivity.factor_sensitivities]
    (module docstring): bounds about `gamma_m cond(B)` above the exact values."""
    k = factor.shape[0]
    unknown = np.full(goals.shape[1], np.inf)
    orthogonal, upper = np.linalg.qr(factor.T)
    if not np.diag(upper).all():  # an exactly singular factor
        return unknown
    inverse = solve_triangular(upper, np.eye(k), trans="T", check_finite=False)
    right = orthogonal @ inverse  # factor @ right ~ I
    if not np.isfinite(right).all():
        return unknown
    gap, gap_slack = _residual(factor, error, np.eye(k), right)
    gap_norm = float(np.sqrt((_norms_up(gap, gap_slack) ** 2).sum()))
    if identity:
        solutions, residuals, slack = right, gap, gap_slack
    else:
        solutions = right @ goals
        residuals, slack = _residual(factor, error, goals, solutions)
    bounds = [1.0 / floor] if floor > 0.0 else []
    if gap_norm < 1.0:
        right_norm = float(np.linalg.norm(right)) * (1.0 + rounding_gamma(right.size + 4))
        bounds.append(right_norm / (1.0 - gap_norm) * (1.0 + rounding_gamma(8)))
    if not bounds:
        return unknown
    return _certify(solutions, residuals, slack, min(bounds), ~goals.any(axis=0))


def factor_sensitivities(
    factor: np.ndarray | sparse.sparray,
    targets: np.ndarray | None = None,
    *,
    entry_error: np.ndarray | None = None,
    floor: float = 0.0,
) -> np.ndarray:
    """Certified upper bounds on `||B^+ x_j||` for a factor `B` (k, m; dense or sparse) and
    the columns `x_j` of `targets` (k, t; the identity when None), inf where none can be
    certified (see the module docstring).

    Two routes, each certified: the Gram route (`B B^T` with its rounding bounded, then
    Cholesky; `k^3` work, about `u cond(B B^T)` above the exact values), and, where that is
    looser than `LOOSENESS` and the factor at most `QR_WIDTH` times wider than tall,
    the QR route (about `u sqrt(cond(B B^T))` above); the smaller bound is returned.
    `entry_error` bounds, entrywise, how far the exact factor may be from `factor` (a view's
    product `P B` is rounded); `floor` is a number with `B B^T >= floor^2 I` exactly (the
    smallest private standard deviation, when every row has one), or 0.
    """
    if targets is not None:  # a view's columns often repeat (the average's are all 1/n)
        distinct, back = np.unique(np.asarray(targets, dtype=float), axis=1, return_inverse=True)
        if distinct.shape[1] < np.shape(targets)[1]:
            found = factor_sensitivities(factor, distinct, entry_error=entry_error, floor=floor)
            return found[back.ravel()]
    factor = factor if sparse.issparse(factor) else np.asarray(factor, dtype=float)
    k, m = factor.shape
    identity = targets is None
    goals = None if identity else np.asarray(targets, dtype=float)
    zero = np.zeros(k, dtype=bool) if identity else ~goals.any(axis=0)
    values = factor.data if sparse.issparse(factor) else factor
    if k == 0 or zero.all():
        return np.zeros(len(zero))
    if m < k or not np.isfinite(values).all():
        return np.where(zero, 0.0, np.inf)
    with np.errstate(all="ignore"):
        bounds, estimates = _inverse_bounds(*_gram(factor, entry_error), goals)
        loose = ~(bounds <= estimates * (1.0 + LOOSENESS)) & ~zero
        if loose.any() and m <= QR_WIDTH * k:
            dense = factor.toarray() if sparse.issparse(factor) else factor
            error = np.zeros_like(dense) if entry_error is None else np.asarray(entry_error)
            targets = np.eye(k) if identity else goals
            bounds = np.minimum(bounds, _qr_bounds(dense, targets, identity, error, floor))
    bounds[zero] = 0.0
    return np.where(np.isnan(bounds), np.inf, bounds)


def unit_sensitivities(covariance: np.ndarray, view: np.ndarray) -> np.ndarray:
    """Per-agent Mahalanobis sensitivity for a unit change, `sqrt(e_i^T P^T Sigma^+ P e_i)`, of a
    bare covariance R (no factor) seen through `view`, `Sigma = P R P^T`: certified upper
    bounds, inf where none can be certified (`_inverse_bounds`, with the rounding of
    `P R P^T` in Sigma's error)."""
    covariance = np.asarray(covariance, dtype=float)
    view = np.asarray(view, dtype=float)
    n = covariance.shape[0]
    zero = ~view.any(axis=0)
    if not np.isfinite(covariance).all():
        return np.where(zero, 0.0, np.inf)
    with np.errstate(all="ignore"):
        sigma = view @ covariance @ view.T
        magnitude = np.abs(view) @ np.abs(covariance) @ np.abs(view).T
        symmetric = (sigma + sigma.T) / 2.0
        sigma_error = (
            rounding_gamma(2 * n + 2) * magnitude
            + np.abs(sigma - symmetric)
            + rounding_gamma(2) * np.abs(symmetric)
        )
        result = _inverse_bounds(symmetric, sigma_error, view)[0]
    result[zero] = 0.0
    return np.where(np.isnan(result), np.inf, result)


def unit_sensitivity(covariance: np.ndarray, view: np.ndarray) -> float:
    """Worst agent's unit Mahalanobis sensitivity, `max_i mu_i / s`."""
    return float(unit_sensitivities(covariance, view).max(initial=0.0))
