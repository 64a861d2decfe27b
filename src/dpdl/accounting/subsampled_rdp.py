"""Renyi DP of a subsampled Gaussian by the bound of Wang, Balle & Kasiviswanathan (AISTATS 2019),
the example-level accounting DECOR names (Appendix D.1, "RDP privacy amplification by
subsampling"), kept to reproduce the paper.

A Gaussian mechanism of sensitivity-over-noise `mu` (Mahalanobis sensitivity) is
`(alpha, alpha mu^2 / 2)`-RDP. Run on a subsample drawn without replacement at rate `q`
(replace-one neighbours), Wang et al. Theorem 9 bounds its RDP at integer orders `alpha >= 2` by

    1/(alpha-1) log(1 + q^2 C(alpha,2) min(4 (e^{eps(2)}-1), e^{eps(2)} min(2, (e^{eps(inf)}-1)^2))
                + sum_{j=3}^{alpha} q^j C(alpha,j) e^{(j-1) eps(j)} min(2, (e^{eps(inf)}-1)^j)),

with `eps(j) = j mu^2 / 2` and `eps(inf) = inf` for the Gaussian (both inner minima are 2).
T steps compose additively and the conversion of Mironov (2017, Prop. 3),
`eps = T eps'(alpha) + log(1/delta) / (alpha - 1)`, is minimised over the integer orders.

Written here rather than taken from dp_accounting: dp_accounting's Gaussian without replacement
(`SampledWithoutReplacementDpEvent`, the same theorem) takes a tighter term at small noise-scaled
sensitivities (order 5 at mu = 0.5, rate 64/3750: 8.49e-4 against 8.79e-4 here), and reproducing
the paper needs the bound as the authors computed it; the tests check both that this equals the
authors' values and that it never falls below dp_accounting's.

dpdl's exact example-level accountant is the PLD of Poisson sampling (add/remove-one,
[`pld_epsilon`][dpdl.accounting.accountant.pld_epsilon]); this bound is for another sampling and
another relation, so the two meet only as bounds on different neighbouring notions.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln, logsumexp

from dpdl.accounting.gdp import check_budget, check_steps
from dpdl.errors import PrivacyParameterError

__all__ = ["ORDERS", "wang_epsilon", "wang_rdp"]

#: The integer orders the conversion is minimised over.
ORDERS = tuple(range(2, 257))


def _log_comb(n: int, k: np.ndarray) -> np.ndarray:
    return gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)


def wang_rdp(mu: float, rate: float, order: int) -> float:
    """Wang et al. (2019) Theorem 9: RDP of order `order` (an integer >= 2) of one Gaussian step
    of sensitivity-over-noise `mu` on a subsample at `rate`; summed in log space (the terms
    overflow a float from `(j - 1) j mu^2 / 2` of about 700 on)."""
    if order < 2 or int(order) != order:
        raise PrivacyParameterError(f"Wang et al.'s bound is for integer orders >= 2, got {order}")
    if not 0.0 < rate <= 1.0:
        raise PrivacyParameterError(f"the sampling rate must be in (0, 1], got {rate}")
    order = int(order)
    eps2 = mu**2  # eps(2) = 2 mu^2 / 2
    log_min2 = min(math.log(4.0) + eps2 + math.log(-math.expm1(-eps2)), math.log(2.0) + eps2)
    terms = [0.0, 2 * math.log(rate) + float(_log_comb(order, np.array(2))) + log_min2]
    if order >= 3:
        j = np.arange(3, order + 1)
        terms += list(
            j * math.log(rate) + _log_comb(order, j) + (j - 1) * j * mu**2 / 2 + math.log(2.0)
        )
    return float(logsumexp(terms)) / (order - 1)


def wang_epsilon(mu: float, rate: float, steps: int, delta: float) -> float:
    """Epsilon of `steps` such steps: Wang et al.'s RDP composed and converted (Mironov 2017,
    Prop. 3), the best of `ORDERS` (DECOR Appendix D.1 as the paper writes it)."""
    check_steps(steps)
    check_budget(1.0, delta)
    if math.isinf(mu):
        return math.inf
    return min(
        steps * wang_rdp(mu, rate, order) + math.log(1.0 / delta) / (order - 1) for order in ORDERS
    )
