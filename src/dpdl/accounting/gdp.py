"""Gaussian differential privacy (Dong, Roth & Su, JRSS-B 2022): the exact algebra.

A Gaussian mechanism whose output shifts by at most `mu` noise standard deviations (Mahalanobis
sensitivity `mu`) is mu-GDP; T adaptively composed mechanisms of sensitivities `mu_t` are
`sqrt(sum mu_t^2)`-GDP (their Corollary 3.3), and mu-GDP is (eps, delta)-DP exactly for

    delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)          (their Corollary 2.13)

which is also the analytic Gaussian mechanism of Balle & Wang (ICML 2018). Nothing here is an upper
bound that could be tightened: for Gaussian noise without subsampling this *is* the privacy profile.
The inverses are bisections to one unit in the last place, in the safe direction:
[`epsilon`][dpdl.accounting.gdp.epsilon] never under-reports,
[`mu_for_budget`][dpdl.accounting.gdp.mu_for_budget] never over-reports. Both decide with
[`within`][dpdl.accounting.gdp.within], which accepts a point only when the float delta plus a bound
on its rounding error (`ROUNDING`) is at most the target: the float delta alone is off by up to
8.5e-15 of its first term, 5e-12 of delta itself at eps = 0.05, delta = 1e-10 (the two terms cancel:
the first is 600 times delta there), enough to put 79 of 200 budgets (eps 0.05-60, delta 1e-3-1e-10)
above their target when measured in 60-digit arithmetic (the tests do so).

Written by hand (a dozen lines) so that the tests can check it against dp_accounting's RDP, PLD and
analytic-Gaussian code as independent computations.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import numpy as np
from scipy.special import log_ndtr, ndtr

from dpdl.errors import PrivacyParameterError

__all__ = [
    "ROUNDING",
    "check_budget",
    "check_steps",
    "compose",
    "delta",
    "epsilon",
    "mu_for_budget",
    "renyi",
    "within",
]

#: Rounding-error bound of :func:`delta`, in units of ``c^2 + eps + 1`` times its first term
#: (``c = eps/mu + mu/2``): an absolute error ``u c`` in the arguments of Phi (u = 2^-52) moves
#: Phi(a) by ``u c |a|`` and Phi(b) by ``u c^2`` relative; ``exp(eps + log Phi(b))`` adds ``u (eps +
#: c^2/2)``; Phi itself a few u. Measured against 60 digits (eps 1e-4 to 500, delta 1e-2 to 1e-15):
#: at most 2.75 u (c^2 + eps + 1) Phi(a), so 8 u leaves a factor of 2.9.
ROUNDING = 8 * 2.0**-52


#: The largest epsilon calibrated or accounted: far beyond any meaningful guarantee (e^eps
#: overflows floating point near 710), and beyond it the search for mu overflows to infinity.
MAX_EPSILON = 1e6


def check_budget(eps: float, delta_: float) -> None:
    """Raise [`PrivacyParameterError`][dpdl.errors.PrivacyParameterError] unless `0 < eps <=
    MAX_EPSILON` and `0 < delta < 1`."""
    if not (isinstance(eps, (int, float)) and math.isfinite(eps) and eps > 0):
        raise PrivacyParameterError(f"epsilon must be a finite number > 0, got {eps}")
    if eps > MAX_EPSILON:
        raise PrivacyParameterError(
            f"epsilon {eps:g} is beyond {MAX_EPSILON:g}: such a budget protects nothing (and "
            "overflows the accountant)"
        )
    if not (isinstance(delta_, (int, float)) and 0.0 < delta_ < 1.0):
        raise PrivacyParameterError(f"delta must be in (0, 1), got {delta_}")


def check_steps(steps: int) -> None:
    """Raise [`PrivacyParameterError`][dpdl.errors.PrivacyParameterError] unless `steps` is an
    integer >= 1 (a fractional step count is a mistake, not a budget)."""
    if isinstance(steps, bool) or not isinstance(steps, numbers.Integral) or steps < 1:
        raise PrivacyParameterError(f"the number of steps must be an integer >= 1, got {steps!r}")


def _terms(eps: float, mu: float) -> tuple[float, float]:
    """`Phi(-eps/mu + mu/2)` and `e^eps Phi(-eps/mu - mu/2)` (the second through log Phi, stable
    for large eps; it is at most the first, so its exponent is capped at 0 against overflow)."""
    first = float(ndtr(-eps / mu + mu / 2.0))
    second = math.exp(min(eps + float(log_ndtr(-eps / mu - mu / 2.0)), 0.0))
    return first, second


def delta(eps: float, mu: float) -> float:
    """delta(eps) of a mu-GDP mechanism (Dong et al. 2022, Corollary 2.13), in floating point."""
    if mu <= 0.0:
        return 0.0
    if math.isinf(mu):
        return 1.0
    first, second = _terms(eps, mu)
    return max(first - second, 0.0)


def within(eps: float, mu: float, delta_: float) -> bool:
    """Whether mu-GDP is certainly (eps, delta_)-DP: the float delta plus its rounding-error bound
    (`ROUNDING`) is at most `delta_`. The margin is tiny (below 1e-10 of delta for the
    budgets of the tests, grid eps 0.05-60, delta 1e-3-1e-10), but the float delta alone is not a
    promise."""
    if mu <= 0.0:
        return True
    if math.isinf(mu):
        return False
    first, second = _terms(eps, mu)
    c = eps / mu + mu / 2.0
    return first - second + ROUNDING * (c * c + eps + 1.0) * first <= delta_


def compose(mus: np.ndarray | list[float]) -> float:
    """GDP parameter of the adaptive composition of mechanisms with GDP parameters `mus`."""
    mus = np.asarray(mus, dtype=float)
    if np.isinf(mus).any():
        return math.inf
    return float(np.sqrt(np.sum(mus**2)))


def _bisect_floats(holds: Callable[[float], bool], low: float, high: float) -> tuple[float, float]:
    """Shrink `[low, high]` with `not holds(low)` and `holds(high)` (or the reverse for a
    decreasing property) to adjacent floats: the answer is exact to one unit in the last place,
    and monotone in the inputs wherever `holds` is (a root finder's tolerance is not)."""
    while True:
        middle = (low + high) / 2.0
        if middle in (low, high):
            return low, high
        if holds(middle):
            high = middle
        else:
            low = middle


def epsilon(mu: float, delta_: float) -> float:
    """Smallest float eps at which mu-GDP is [`within`][dpdl.accounting.gdp.within] `(eps,
    delta_)` (never below the exact value); `inf` when no float eps is (mu so large that the
    rounding bound exceeds delta)."""
    if not 0.0 < delta_ < 1.0:
        raise PrivacyParameterError(f"delta must be in (0, 1), got {delta_}")
    if math.isinf(mu):
        return math.inf
    if within(0.0, mu, delta_):
        return 0.0
    upper = max(1.0, mu * mu)
    while not within(upper, mu, delta_):
        upper *= 2.0
        if math.isinf(upper):
            return math.inf
    return _bisect_floats(lambda e: within(e, mu, delta_), 0.0, upper)[1]


def mu_for_budget(eps: float, delta_: float) -> float:
    """Largest float mu such that mu-GDP is [`within`][dpdl.accounting.gdp.within] (eps, delta_)
    (never above the exact value)."""
    check_budget(eps, delta_)
    upper = 1.0
    while within(eps, upper, delta_):
        upper *= 2.0
    return _bisect_floats(lambda m: not within(eps, m, delta_), 0.0, upper)[0]


def renyi(mu: float, alpha: float) -> float:
    """Renyi DP of order `alpha > 1` of a mu-GDP Gaussian mechanism, `alpha mu^2 / 2` (the Renyi
    divergence of N(mu, 1) from N(0, 1); Mironov 2017, Proposition 7)."""
    if not alpha > 1.0:
        raise PrivacyParameterError(f"the Renyi order must be > 1, got {alpha}")
    return alpha * mu * mu / 2.0
