"""Accounting: one accountant for every linear Gaussian mechanism, and calibration.

- :mod:`~dpdl.accounting.noise`: one round's Gaussian noise as plain data (what every mechanism
  describes and the accountant reads; this package imports no mechanism).
- :mod:`~dpdl.accounting.gdp`: exact Gaussian-DP algebra (pure maths).
- :mod:`~dpdl.accounting.rdp_bound`: the papers' closed-form RDP bound, for reproduction.
- :mod:`~dpdl.accounting.subsampled_rdp`: Wang et al. (2019)'s RDP bound for subsampling, DECOR's
  example-level accounting, for reproduction.
- :mod:`~dpdl.accounting.sensitivity`: Mahalanobis sensitivity of a covariance under a view.
- :mod:`~dpdl.accounting.neighbouring`: agent- and example-level relations.
- :mod:`~dpdl.accounting.accountant`: covariance + threat + relation + steps -> epsilon.
- :mod:`~dpdl.accounting.calibration`: target epsilon -> allowed per-step sensitivity.
- :mod:`~dpdl.accounting.phases`: composition of phases of different per-step sensitivities.
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
