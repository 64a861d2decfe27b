"""Calibration: from a target (eps, delta) over T steps to the largest per-step sensitivity allowed.

Every Gaussian noise design in dpdl is calibrated through one number, the per-step Mahalanobis
sensitivity `mu_step` the budget allows. For a covariance R seen in full (eavesdropper) it is the
constraint `max_i [R^-1]_ii <= (mu_step / s)^2` of the Whisper and DECOR programs; for a fixed
covariance shape it fixes the noise scale
([`noise_scale`][dpdl.accounting.calibration.noise_scale]).

Methods:

- `"exact"` (default): the largest `mu_step` (to 1e-3 relative at example level) whose exact
  accounting (GDP at agent level, PLD at example level) gives at most the target eps. It never
  overshoots: the returned value is checked against the accountant and moved to the safe side.
- `"paper"`: the papers' closed form `mu_step^2 = eps^2 / (4 T log(1/delta))`
  (CorN-DSGD eq. (9b)) at agent level; at example level the papers' Renyi-DP accounting of the
  Poisson-subsampled Gaussian (DECOR Appendix D), calibrated like the exact one. To reproduce
  their settings. Its exact epsilon is
  reported next to it (`Calibration.achieved_epsilon`): it is below target for moderate eps
  and above it (an overshoot) at large eps.

Both are entries of `dpdl.choices.CALIBRATION_REGISTRY`; a plugin registers more (the
reproductions register the Whisper / CorN-DSGD and DECOR authors' released codes' zCDP bound as
`authors`). Whatever the method, the calibration reports the exact epsilon of what it chose.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from dpdl.accounting import gdp
from dpdl.accounting.accountant import (
    PLD_SEARCH_DISCRETIZATION,
    Noise,
    default_accountant,
    epsilon_from_mu_step,
    pld_epsilon,
    step_sensitivity,
)
from dpdl.accounting.neighbouring import AgentLevel, ExampleLevel, Neighbouring
from dpdl.accounting.noise import GaussianNoise, ScalableNoise
from dpdl.accounting.rdp_bound import paper_mu_step
from dpdl.accounting.search import geometric_bisect
from dpdl.choices import CALIBRATION_REGISTRY, CALIBRATIONS
from dpdl.errors import ConfigError, PrivacyParameterError
from dpdl.threats import ThreatModel

__all__ = [
    "CALIBRATIONS",
    "Calibration",
    "calibrate",
    "exact_mu_step",
    "noise_scale",
    "paper_calibration_mu_step",
    "safe_scale",
]


@dataclass(frozen=True)
class Calibration:
    """The per-step sensitivity a budget allows, and what the exact accountant says of it."""

    eps: float
    delta: float
    steps: int
    neighbouring: Neighbouring
    method: str
    mu_step: float
    achieved_epsilon: float

    @property
    def inverse_variance_bound(self) -> float:
        """The bound c in `max_i [R^-1]_ii <= c` for a fully observed covariance R."""
        return (self.mu_step / self.neighbouring.sensitivity) ** 2

    @property
    def overshoots(self) -> bool:
        """Whether the exact accountant gives more than the target eps (only the papers' form
        can)."""
        return self.achieved_epsilon > self.eps

    def as_dict(self) -> dict[str, float | int | str | bool]:
        return {
            "target_epsilon": self.eps,
            "delta": self.delta,
            "steps": self.steps,
            "neighbouring": str(self.neighbouring),
            "calibration": self.method,
            "mu_step": self.mu_step,
            "inverse_variance_bound": self.inverse_variance_bound,
            "exact_epsilon": self.achieved_epsilon,
            "overshoots": self.overshoots,
        }


def _subsampled_mu_step(
    eps: float, delta: float, steps: int, neighbouring: ExampleLevel, accountant: str
) -> float:
    """Largest mu_step (to 1e-3 relative) whose example-level `accountant` (`"pld"` or
    `"paper-rdp"`) epsilon is at most eps, by bisection in log space.

    Bracket: without subsampling the exact GDP value is feasible for the PLD (subsampling only
    amplifies privacy; RDP may need it halved); doubling from there finds an infeasible value
    without evaluating the (slow) PLD of very small noise far beyond the answer.
    """

    def feasible(mu: float) -> bool:
        if accountant == "pld":  # search on the coarser (faster, more pessimistic) discretisation
            return (
                pld_epsilon(mu, neighbouring.sampling_rate, steps, delta, PLD_SEARCH_DISCRETIZATION)
                <= eps
            )
        return epsilon_from_mu_step(mu, steps, delta, neighbouring, accountant) <= eps

    low = gdp.mu_for_budget(eps, delta) / math.sqrt(steps)
    while not feasible(low):
        low /= 2.0
    high = 2.0 * low
    while feasible(high):
        low, high = high, 2.0 * high
    low, _ = geometric_bisect(lambda mu: not feasible(mu), low, high, 1e-3)
    while (
        epsilon_from_mu_step(low, steps, delta, neighbouring, accountant) > eps
    ):  # the final, finer account
        low *= 1.0 - 1e-3
    return low


def exact_mu_step(eps: float, delta: float, steps: int, neighbouring: Neighbouring) -> float:
    """Calibration `exact`: the largest per-step sensitivity whose exact accounting (GDP at agent
    level, PLD at example level) gives at most `eps`, moved to the safe side of rounding."""
    accountant = default_accountant(neighbouring)
    if isinstance(neighbouring, ExampleLevel):
        return _subsampled_mu_step(eps, delta, steps, neighbouring, accountant)
    mu_step = gdp.mu_for_budget(eps, delta) / math.sqrt(steps)
    while epsilon_from_mu_step(mu_step, steps, delta, neighbouring, accountant) > eps:
        mu_step *= 1.0 - 1e-12  # floating-point round trip through sqrt(T): stay on the safe side
    return mu_step


def paper_calibration_mu_step(
    eps: float, delta: float, steps: int, neighbouring: Neighbouring
) -> float:
    """Calibration `paper`: the papers' closed form `mu_step^2 = eps^2 / (4 T log(1/delta))`
    (CorN-DSGD eq. (9b)) at agent level; at example level the largest per-step sensitivity whose
    Renyi-DP accounting of the Poisson-subsampled Gaussian (DECOR Appendix D) gives at most
    `eps`."""
    if isinstance(neighbouring, ExampleLevel):
        return _subsampled_mu_step(eps, delta, steps, neighbouring, "paper-rdp")
    return paper_mu_step(eps, delta, steps)


def calibrate(
    eps: float, delta: float, steps: int, neighbouring: Neighbouring, method: str = "exact"
) -> Calibration:
    """Per-step sensitivity allowed by an (eps, delta) budget over `steps` steps, by `method`
    (a name of `CALIBRATION_REGISTRY`), with the exact epsilon it achieves."""
    gdp.check_budget(eps, delta)
    gdp.check_steps(steps)
    if not isinstance(neighbouring, (AgentLevel, ExampleLevel)):
        raise ConfigError(
            f"neighbouring: expected AgentLevel(clip) or ExampleLevel(clip, batch_size, rate), got "
            f"{type(neighbouring).__name__}"
        )
    mu_step = CALIBRATION_REGISTRY.get(method)(eps, delta, steps, neighbouring)
    if not (isinstance(mu_step, float) and math.isfinite(mu_step) and mu_step > 0):
        raise ConfigError(
            f"calibration {method!r} gave per-step sensitivity {mu_step!r}: expected a positive, "
            "finite float"
        )
    accountant = default_accountant(neighbouring)
    achieved = epsilon_from_mu_step(mu_step, steps, delta, neighbouring, accountant)
    return Calibration(eps, delta, steps, neighbouring, method, mu_step, achieved)


def safe_scale(
    build: Callable[[float], Noise], threat: ThreatModel, calibration: Calibration, scale: float
) -> float:
    """`scale`, raised until the accountant certifies that `build(scale)` (a noise description, or a
    mechanism holding one) meets the calibration (steps of 1e-12 relative, doubling): the certified
    sensitivity is an upper bound on the exact one ([`sensitivity`][dpdl.accounting.sensitivity]),
    so a promise is never exceeded, not even by rounding. Both the per-step sensitivity and the
    epsilon the accountant reports of it are checked: [`epsilon`][dpdl.accounting.gdp.epsilon] is
    monotone in mu only up to rounding (1e-15 relative), so a design at the calibrated mu_step, or
    one ulp below it, could report an eps 1e-15 above the target.
    """
    neighbouring = calibration.neighbouring
    promised = max(calibration.eps, calibration.achieved_epsilon)  # the papers' form may overshoot

    def exceeds(scale: float) -> bool:
        mu_step = step_sensitivity(build(scale), threat, neighbouring)
        if math.isinf(mu_step):  # at one scale, at every scale: no amount of it would do
            raise PrivacyParameterError(
                f"no noise scale gives privacy against the {threat}: the design leaves a "
                "direction it sees unprotected (no finite sensitivity can be certified)"
            )
        if mu_step > calibration.mu_step:
            return True
        return (
            epsilon_from_mu_step(
                mu_step,
                calibration.steps,
                calibration.delta,
                neighbouring,
                default_accountant(neighbouring),
            )
            > promised
        )

    step = 1e-12
    while exceeds(scale):
        scale *= 1.0 + step
        step *= 2.0
    return scale


def noise_scale(
    unit: GaussianNoise | ScalableNoise, threat: ThreatModel, calibration: Calibration
) -> float:
    """Standard-deviation multiplier sigma such that `unit` scaled by sigma (its own `scaled`)
    meets `calibration` (the Mahalanobis sensitivity scales as `1 / sigma`:
    `sigma = mu_step(unit) / mu_step`).
    """
    unit_mu = step_sensitivity(unit, threat, calibration.neighbouring)
    if math.isinf(unit_mu):
        raise PrivacyParameterError(
            f"the {unit.name or 'noise'} covariance is singular against the {threat} threat: no "
            "noise scale gives privacy"
        )
    return safe_scale(unit.scaled, threat, calibration, unit_mu / calibration.mu_step)
