"""Composition across phases: a run whose per-step sensitivity changes (an agent's departure).

A phase is `steps` D-SGD steps of per-step Mahalanobis sensitivity `mu_step` (one noise design,
[`step_sensitivity`][dpdl.accounting.accountant.step_sensitivity]). At agent level each step is a
`mu_step`-GDP mechanism, and adaptively composed Gaussian mechanisms compose exactly: phases `(mu_k,
T_k)` give `sqrt(sum_k T_k mu_k^2)`-GDP (Dong, Roth and Su 2022, Corollary 3.3), converted to (eps,
delta) exactly ([`dpdl.accounting.gdp.epsilon`][dpdl.accounting.gdp.epsilon]). A phase of no steps
releases nothing and adds nothing, whatever its `mu_step`. Example-level composition (of subsampled
Gaussians of different multipliers) is not implemented here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from dpdl.accounting import gdp
from dpdl.accounting.calibration import Calibration
from dpdl.accounting.neighbouring import AgentLevel
from dpdl.errors import ConfigError, PrivacyParameterError

__all__ = ["Phase", "calibrate_last_phase", "compose_phases", "phases_mu_step"]


@dataclass(frozen=True)
class Phase:
    """`steps` steps of per-step Mahalanobis sensitivity `mu_step` (`inf`: unprotected)."""

    mu_step: float
    steps: int

    def __post_init__(self) -> None:
        if self.steps < 0 or not self.mu_step >= 0:
            raise PrivacyParameterError(
                f"a phase has steps >= 0 and mu_step >= 0, got {self.steps} steps of mu_step "
                f"{self.mu_step}"
            )


def _squared_mu(phases: Sequence[Phase]) -> float:
    """`sum_k T_k mu_k^2` over the phases that release something (`inf` if one is
    unprotected)."""
    released = [phase for phase in phases if phase.steps]
    if any(math.isinf(phase.mu_step) for phase in released):
        return math.inf
    return sum(phase.steps * phase.mu_step**2 for phase in released)


def compose_phases(phases: Sequence[Phase], delta: float) -> float:
    """Epsilon at `delta` of the phases run one after the other (agent level, exact GDP)."""
    squared = _squared_mu(phases)
    if math.isinf(squared):
        return math.inf
    return gdp.epsilon(math.sqrt(squared), delta)


def phases_mu_step(phases: Sequence[Phase]) -> float:
    """The constant per-step sensitivity that composes, over all the phases' steps, like the phases:
    `sqrt(sum_k T_k mu_k^2 / sum_k T_k)`."""
    return math.sqrt(_squared_mu(phases) / sum(phase.steps for phase in phases))


def calibrate_last_phase(
    eps: float, delta: float, before: Sequence[Phase], steps: int, neighbouring: AgentLevel
) -> Calibration:
    """The per-step sensitivity that spends, over `steps` more steps, what the phases `before`
    left of the (eps, delta) budget's GDP parameter `mu`: `mu_2^2 = (mu^2 - sum_k T_k mu_k^2)
    / steps`, lowered until the composed epsilon is at most eps (never overshoots)."""
    if not isinstance(neighbouring, AgentLevel):
        raise ConfigError("composition across phases is implemented for agent-level privacy only")
    spent = _squared_mu(before)
    if math.isinf(spent):
        raise ConfigError(
            "the first phase protects nothing (its per-step sensitivity is infinite: its noise "
            "leaves a direction unprotected), so no budget is left to calibrate the rest to"
        )
    left = gdp.mu_for_budget(eps, delta) ** 2 - spent
    if left <= 0:
        raise ConfigError(
            f"the first {sum(phase.steps for phase in before)} rounds spent the whole budget "
            f"eps={eps}"
        )
    mu_step = math.sqrt(left / steps)
    while compose_phases([*before, Phase(mu_step, steps)], delta) > eps:
        mu_step *= 1.0 - 1e-12  # stay on the safe side of the target through the round trip
    achieved = compose_phases([*before, Phase(mu_step, steps)], delta)
    return Calibration(eps, delta, steps, neighbouring, "exact (second phase)", mu_step, achieved)
