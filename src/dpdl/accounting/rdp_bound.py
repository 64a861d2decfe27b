"""The papers' closed-form Renyi-DP bound and calibration, kept to reproduce their numbers.

Whisper D-SGD / CorN-DSGD Theorem 2 (eq. (7)) and DECOR Theorem 1: a step whose Gaussian noise has
covariance R is `(alpha, 2 alpha C^2 max_i [R^-1]_ii)`-RDP (agent-level, replace-one, sensitivity
2C); T steps compose additively and the conversion of Mironov (2017, Prop. 3) optimised over alpha
gives

    eps <= 2 C^2 T m + 2 C sqrt(2 T log(1/delta) m),      m = max_i [R^-1]_ii.

The papers calibrate with the sufficient condition (CorN-DSGD eq. (9b))

    m <= eps^2 / (16 C^2 T log(1/delta)),

which the papers state for eps <= log(1/delta) (their bound then gives at most
`eps^2 / (8 log(1/delta)) + eps / sqrt(2)`). It is a sufficient RDP condition, not the exact
privacy profile: for small eps it asks for more noise than needed, for large eps (40 at
delta = 1e-5) the exact accountant shows it overshoots the target. Written in
terms of the per-step GDP sensitivity `mu_step = 2 C sqrt(m)` these are
`eps = T mu^2 / 2 + mu sqrt(2 T log(1/delta))` and `mu_step^2 <= eps^2 / (4 T log(1/delta))`.
"""

from __future__ import annotations

import math

from dpdl.accounting.gdp import check_budget

__all__ = ["paper_epsilon", "paper_mu_step"]


def paper_epsilon(mu_step: float, steps: int, delta: float) -> float:
    """Epsilon of the papers' RDP bound (eq. (7)) for T steps of per-step sensitivity
    `mu_step`."""
    if math.isinf(mu_step):
        return math.inf
    return steps * mu_step**2 / 2.0 + mu_step * math.sqrt(2.0 * steps * math.log(1.0 / delta))


def paper_mu_step(eps: float, delta: float, steps: int) -> float:
    """Per-step sensitivity allowed by the papers' calibration (eq. (9b)):
    `eps / sqrt(4 T log(1/delta))`."""
    check_budget(eps, delta)
    return eps / math.sqrt(4.0 * steps * math.log(1.0 / delta))
