"""Accounting: one accountant for every linear Gaussian mechanism, and calibration.

- [`noise`][dpdl.accounting.noise]: one round's Gaussian noise as plain data (what every mechanism
  describes and the accountant reads; this package imports no mechanism).
- [`gdp`][dpdl.accounting.gdp]: exact Gaussian-DP algebra (pure maths).
- [`rdp_bound`][dpdl.accounting.rdp_bound]: the papers' closed-form RDP bound, for reproduction.
- [`subsampled_rdp`][dpdl.accounting.subsampled_rdp]: Wang et al. (2019)'s RDP bound for
  subsampling, DECOR's example-level accounting, for reproduction.
- [`sensitivity`][dpdl.accounting.sensitivity]: Mahalanobis sensitivity of a covariance under a
  view.
- [`neighbouring`][dpdl.accounting.neighbouring]: agent- and example-level relations.
- [`accountant`][dpdl.accounting.accountant]: covariance + threat + relation + steps -> epsilon.
- [`calibration`][dpdl.accounting.calibration]: target epsilon -> allowed per-step sensitivity.
- [`phases`][dpdl.accounting.phases]: composition of phases of different per-step sensitivities.
- [`dropouts`][dpdl.accounting.dropouts]: a run in which agents miss rounds, accounted exactly, and
  the distribution of its epsilon over dropout schedules drawn at a rate.
- [`tradeoff`][dpdl.accounting.tradeoff]: f-DP trade-off curves of Gaussian DP, in closed form.
- [`export`][dpdl.accounting.export]: a view's privacy loss as a dp_accounting `DpEvent` or
  privacy loss distribution, or an f-DP curve, to compose with other accountants.
"""

from dpdl.accounting.accountant import (
    ACCOUNTANTS,
    PrivacyReport,
    account,
    epsilon_from_mu_step,
    step_sensitivity,
)
from dpdl.accounting.calibration import CALIBRATIONS, Calibration, calibrate, noise_scale
from dpdl.accounting.dropouts import (
    DropoutAccountant,
    DropoutRisk,
    account_dropouts,
    dropout_risk,
)
from dpdl.accounting.export import (
    View,
    dp_event,
    gaussian_view,
    pair_view,
    privacy_loss_distribution,
    tradeoff,
    view_of,
    whitened_sensitivity,
)
from dpdl.accounting.neighbouring import AgentLevel, ExampleLevel, Neighbouring
from dpdl.accounting.noise import GaussianNoise, SharedSecret
from dpdl.accounting.phases import Phase, calibrate_last_phase, compose_phases
from dpdl.accounting.tradeoff import TradeOffCurve

__all__ = [
    "ACCOUNTANTS",
    "CALIBRATIONS",
    "AgentLevel",
    "Calibration",
    "DropoutAccountant",
    "DropoutRisk",
    "ExampleLevel",
    "GaussianNoise",
    "Neighbouring",
    "Phase",
    "PrivacyReport",
    "SharedSecret",
    "TradeOffCurve",
    "View",
    "account",
    "account_dropouts",
    "calibrate",
    "calibrate_last_phase",
    "compose_phases",
    "dp_event",
    "dropout_risk",
    "epsilon_from_mu_step",
    "gaussian_view",
    "noise_scale",
    "pair_view",
    "privacy_loss_distribution",
    "step_sensitivity",
    "tradeoff",
    "view_of",
    "whitened_sensitivity",
]
