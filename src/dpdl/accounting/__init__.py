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
"""

from dpdl.accounting.accountant import (
    ACCOUNTANTS,
    PrivacyReport,
    account,
    epsilon_from_mu_step,
    step_sensitivity,
)
from dpdl.accounting.calibration import CALIBRATIONS, Calibration, calibrate, noise_scale
from dpdl.accounting.neighbouring import AgentLevel, ExampleLevel, Neighbouring
from dpdl.accounting.noise import GaussianNoise, SharedSecret
from dpdl.accounting.phases import Phase, calibrate_last_phase, compose_phases

__all__ = [
    "ACCOUNTANTS",
    "CALIBRATIONS",
    "AgentLevel",
    "Calibration",
    "ExampleLevel",
    "GaussianNoise",
    "Neighbouring",
    "Phase",
    "PrivacyReport",
    "SharedSecret",
    "account",
    "calibrate",
    "calibrate_last_phase",
    "compose_phases",
    "epsilon_from_mu_step",
    "noise_scale",
    "step_sensitivity",
]
