"""The Whisper D-SGD / CorN-DSGD authors' released calibration, kept to reproduce their runs.

Their code (arodio/WhisperDSGD, ``diff_privacy.py: _compute_dp_bound`` and ``solve_ldp``, the
bound of ``utils/dp_solver.py``) sizes the noise by zero-concentrated DP: T rounds of a Gaussian
mechanism of sensitivity 2C (replace-one) and noise standard deviation sigma are
``rho = T (2C)^2 / (2 sigma^2)``-zCDP, which is ``(rho + 2 sqrt(rho log(1/delta)), delta)``-DP
(Bun and Steinke, TCC 2016, Prop. 1.3). Solving ``rho + 2 sqrt(rho L) = eps`` (L = log(1/delta))
gives ``sqrt(rho) = sqrt(L + eps) - sqrt(L)``, and their bound

    max_i [Sigma^-1]_ii <= (sqrt(log(1/delta) + eps) - sqrt(log(1/delta)))^2 / (2 T C^2),

i.e. a per-step sensitivity over noise ``mu_step = C / sigma = (sqrt(L + eps) - sqrt(L)) /
sqrt(2T)`` in dpdl's terms (sensitivity C). Their code applies it for one example: each example's
gradient clipped to C, the noise added to the batch's sum. The conversion is loose and the
sensitivity doubled, so dpdl's exact accountant always finds less than the label (reported as the
calibration's ``achieved_epsilon``): it is kept to run what they ran, never to promise a budget.
"""

from __future__ import annotations

import math

from dpdl.accounting.gdp import check_budget

__all__ = ["authors_mu_step"]


def authors_mu_step(eps: float, delta: float, steps: int) -> float:
    """Per-step sensitivity over noise of the authors' calibration:
    ``(sqrt(log(1/delta) + eps) - sqrt(log(1/delta))) / sqrt(2 T)``."""
    check_budget(eps, delta)
    log_delta = math.log(1.0 / delta)
    return (math.sqrt(log_delta + eps) - math.sqrt(log_delta)) / math.sqrt(2.0 * steps)
