"""Gaussian differential privacy (Dong, Roth & Su, JRSS-B 2022): the exact algebra.

A Gaussian mechanism whose output shifts by at most ``mu`` noise standard deviations (Mahalanobis
sensitivity ``mu``) is mu-GDP; T adaptively composed mechanisms of sensitivities ``mu_t`` are
``sqrt(sum mu_t^2)``-GDP (their Corollary 3.3), and mu-GDP is (eps, delta)-DP exactly for

    delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)          (their Corollary 2.13)

which is also the analytic Gaussian mechanism of Balle & Wang (ICML 2018). Nothing here is an
upper bound that could be tightened: for Gaussian noise without subsampling this *is* the privacy
profile. The functions round in the safe direction: :func:`epsilon` never under-reports,
:func:`mu_for_budget` never over-reports.

Written by hand (a dozen lines) so that the tests can check it against dp_accounting's RDP, PLD and
analytic-Gaussian code as independent computations.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq
from scipy.special import log_ndtr, ndtr

from dpdl.errors import PrivacyParameterError

__all__ = ["delta", "epsilon", "mu_for_budget", "compose", "check_budget"]


def check_budget(eps: float, delta_: float) -> None:
    """Raise :class:`PrivacyParameterError` unless ``eps > 0`` and ``0 < delta < 1``."""
    if not (isinstance(eps, (int, float)) and math.isfinite(eps) and eps > 0):
        raise PrivacyParameterError(f"epsilon must be a finite number > 0, got {eps}")
    if not (isinstance(delta_, (int, float)) and 0.0 < delta_ < 1.0):
        raise PrivacyParameterError(f"delta must be in (0, 1), got {delta_}")


def delta(eps: float, mu: float) -> float:
    """delta(eps) of a mu-GDP mechanism (exact; stable for large eps through log Phi)."""
    if mu <= 0.0:
        return 0.0
    if math.isinf(mu):
        return 1.0
    first = ndtr(-eps / mu + mu / 2.0)
    second = math.exp(eps + log_ndtr(-eps / mu - mu / 2.0))
    return float(max(first - second, 0.0))


def compose(mus: np.ndarray | list[float]) -> float:
    """GDP parameter of the adaptive composition of mechanisms with GDP parameters ``mus``."""
    mus = np.asarray(mus, dtype=float)
    if np.isinf(mus).any():
        return math.inf
    return float(np.sqrt(np.sum(mus**2)))


def epsilon(mu: float, delta_: float) -> float:
    """Smallest eps with ``delta(eps; mu) <= delta_`` (rounded up, never below the exact value)."""
    if not 0.0 < delta_ < 1.0:
        raise PrivacyParameterError(f"delta must be in (0, 1), got {delta_}")
    if math.isinf(mu):
        return math.inf
    if delta(0.0, mu) <= delta_:
        return 0.0
    upper = max(1.0, mu * mu)
    while delta(upper, mu) > delta_:
        upper *= 2.0
    eps = brentq(lambda e: delta(e, mu) - delta_, 0.0, upper, xtol=1e-13, rtol=1e-14)
    while delta(eps, mu) > delta_:  # step to the safe side of the root
        eps = math.nextafter(eps, math.inf) if eps > 0 else 1e-300
        eps += abs(eps) * 1e-14
    return float(eps)


def mu_for_budget(eps: float, delta_: float) -> float:
    """Largest mu such that mu-GDP implies (eps, delta_)-DP (rounded down, never above)."""
    check_budget(eps, delta_)
    upper = 1.0
    while delta(eps, upper) <= delta_:
        upper *= 2.0
    mu = brentq(lambda m: delta(eps, m) - delta_, 0.0, upper, xtol=1e-14, rtol=1e-14)
    while delta(eps, mu) > delta_:  # step to the safe side of the root
        mu -= abs(mu) * 1e-14
    return float(mu)
