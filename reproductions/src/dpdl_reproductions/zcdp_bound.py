"""The Whisper D-SGD / CorN-DSGD and DECOR authors' released calibration, kept to run what they ran:
the calibration `authors` (registered in `dpdl.choices.CALIBRATION_REGISTRY` by
`plugin`).

Both released codes size the noise by zero-concentrated DP. Whisper's (arodio/WhisperDSGD,
`diff_privacy.py`: `DPNoiseGenerator._compute_dp_bound`, then `utils/dp_solver.py`'s
solvers) bounds the noise covariance by

    max_i [Sigma^-1]_ii <= (sqrt(log(1/delta) + eps) - sqrt(log(1/delta)))^2 / (2 T C^2);

DECOR's (elfirdoussilab1/DECOR, `utils/dp_account.py`: `reverse_eps` gives the per-round
`eps_iter = (sqrt(log(1/delta) + eps) - sqrt(log(1/delta)))^2 / T` and `rdp_account` computes
`eps_iter = 2 C^2 max_i [Sigma^-1]_ii`) is the same bound. It is T rounds of a Gaussian
mechanism of replace-one sensitivity 2C: `rho = T (2C)^2 max_i [Sigma^-1]_ii / 2`-zCDP, which is
`(rho + 2 sqrt(rho log(1/delta)), delta)`-DP (Bun and Steinke, TCC 2016, Prop. 1.3; DECOR's
`user_level_rdp`), solved exactly for rho. In dpdl's terms, the per-step sensitivity over noise
`mu_step = s sqrt(max_i [Sigma^-1]_ii)` it allows is:

- at agent level (each agent's gradient clipped to C, replace-one, s = 2C, as both papers'
  agent-level runs): `mu_step = 2 (sqrt(L + eps) - sqrt(L)) / sqrt(2T)` (L = log(1/delta)), so
  that `[Sigma^-1]_ii` meets their bound exactly: the noise their code draws;
- at example level (Whisper's released code: each example's gradient clipped to C, the noise on
  the batch's sum; dpdl divides the sum and the noise by the batch size B, s = C / B):
  `mu_step = (sqrt(L + eps) - sqrt(L)) / sqrt(2T)`, the same noise relative to one example.

dpdl's exact accountant finds less than the label at either level (reported as the calibration's
`achieved_epsilon`): the zCDP conversion is loose, and at example level the replace-one
sensitivity 2C of their bound is twice the add/remove sensitivity C. Kept to run what they ran,
never to promise a budget.
"""

from __future__ import annotations

import math

from dpdl.accounting.gdp import check_budget
from dpdl.accounting.neighbouring import ExampleLevel, Neighbouring
from dpdl.errors import ConfigError

__all__ = ["authors_bound", "authors_calibration", "authors_mu_step"]


def authors_bound(eps: float, delta: float, steps: int, clip: float) -> float:
    """The released codes' bound on `max_i [Sigma^-1]_ii`:
    `(sqrt(log(1/delta) + eps) - sqrt(log(1/delta)))^2 / (2 T C^2)`."""
    check_budget(eps, delta)
    log_delta = math.log(1.0 / delta)
    return (math.sqrt(log_delta + eps) - math.sqrt(log_delta)) ** 2 / (2.0 * steps * clip**2)


def authors_mu_step(eps: float, delta: float, steps: int, level: str = "example") -> float:
    """Per-step sensitivity over noise of the authors' calibration at `level` (module
    docstring): `2 (sqrt(log(1/delta) + eps) - sqrt(log(1/delta))) / sqrt(2 T)` at agent level,
    half that at example level."""
    if level not in ("agent", "example"):
        raise ConfigError(f"the authors' calibration is at agent or example level, not {level!r}")
    root = math.sqrt(authors_bound(eps, delta, steps, 1.0))  # (sqrt(L + eps) - sqrt(L)) / sqrt(2T)
    return 2.0 * root if level == "agent" else root


def authors_calibration(eps: float, delta: float, steps: int, neighbouring: Neighbouring) -> float:
    """Calibration `authors`: `authors_mu_step` at the level of `neighbouring` (example
    level for [`ExampleLevel`][dpdl.accounting.neighbouring.ExampleLevel], else agent level)."""
    level = "example" if isinstance(neighbouring, ExampleLevel) else "agent"
    return authors_mu_step(eps, delta, steps, level)
