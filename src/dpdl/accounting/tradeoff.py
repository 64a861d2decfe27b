"""f-DP trade-off curves of Gaussian DP (Dong, Roth & Su, JRSS-B 2022): the closed form.

A test that tells apart the two neighbouring inputs from one release, with type I error `alpha`,
has type II error at least `f(alpha)`; for a mu-GDP mechanism the best test is the Neyman-Pearson
test of `N(0, 1)` against `N(mu, 1)`, whose trade-off function defines mu-GDP (their Section 2)

    G_mu(alpha) = Phi(Phi^-1(1 - alpha) - mu).

`G_mu` is symmetric (`G_mu(G_mu(alpha)) = alpha`), convex, decreasing from 1 to 0, and its
supporting lines of slope `-e^eps` give the (eps, delta) profile:
`delta(eps) = 1 + G_mu^*(-e^eps)` (their Proposition 2.12, `G^*` the convex conjugate), which is
[`gdp.delta`][dpdl.accounting.gdp.delta] (their Corollary 2.13).

Computed as `ndtr(-ndtri(alpha) - mu)`, which is scipy's `norm.cdf(norm.isf(alpha) - mu)`
(`norm.isf(alpha) = -ndtri(alpha)` is `Phi^-1(1 - alpha)` without the cancellation of `1 - alpha`
at small alpha), without importing `scipy.stats`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import ndtr, ndtri

from dpdl.accounting import gdp
from dpdl.errors import PrivacyParameterError

__all__ = ["TradeOffCurve"]


@dataclass(frozen=True)
class TradeOffCurve:
    """The trade-off function `G_mu` of a `mu`-GDP view (module doc): `curve(alpha)` is the
    smallest type II error of a test of type I error `alpha` (an array or a number, each in
    [0, 1]). `mu = inf` is no privacy (every input told apart: `0` everywhere), `mu = 0` perfect
    privacy (`1 - alpha`)."""

    mu: float

    def __post_init__(self) -> None:
        if not self.mu >= 0.0:  # NaN too
            raise PrivacyParameterError(f"a GDP parameter mu is >= 0, got {self.mu}")

    def __call__(self, alpha: ArrayLike) -> np.ndarray:
        """`G_mu(alpha) = Phi(Phi^-1(1 - alpha) - mu)` (Dong et al. 2022, Section 2)."""
        alpha = np.asarray(alpha, dtype=float)
        if not ((alpha >= 0.0) & (alpha <= 1.0)).all():
            raise PrivacyParameterError("type I errors alpha are in [0, 1]")
        if math.isinf(self.mu):
            return np.zeros_like(alpha)
        return np.asarray(ndtr(-ndtri(alpha) - self.mu))

    def grid(self, points: int = 1001) -> tuple[np.ndarray, np.ndarray]:
        """`(alpha, beta)` on `points` evenly spaced type I errors from 0 to 1 (both ends
        included), `beta = G_mu(alpha)`."""
        if points < 2:
            raise PrivacyParameterError(f"a grid has at least 2 points, got {points}")
        alpha = np.linspace(0.0, 1.0, points)
        return alpha, self(alpha)

    def delta(self, eps: float) -> float:
        """delta at `eps` of the curve's supporting line of slope `-e^eps`, in closed form
        ([`gdp.delta`][dpdl.accounting.gdp.delta], Dong et al. 2022, Corollary 2.13)."""
        return gdp.delta(eps, self.mu)

    def epsilon(self, delta: float) -> float:
        """The smallest eps of the curve at `delta`, never below the exact value
        ([`gdp.epsilon`][dpdl.accounting.gdp.epsilon])."""
        return gdp.epsilon(self.mu, delta)

    def as_dict(self, points: int = 1001) -> dict[str, object]:
        """The curve as plain data for JSON: `mu`, the formula, and `alpha` / `beta` on
        [`grid`][dpdl.accounting.tradeoff.TradeOffCurve.grid]."""
        alpha, beta = self.grid(points)
        return {
            "kind": "f-DP trade-off curve of mu-GDP (Dong, Roth & Su 2022)",
            "formula": "beta(alpha) = Phi(Phi^-1(1 - alpha) - mu)",
            "mu": self.mu,
            "alpha": alpha.tolist(),
            "beta": beta.tolist(),
        }
