"""Noise mechanisms and their calibration to a privacy budget.

:func:`build_mechanism` makes a mechanism by name, calibrated so that the accountant gives the
target budget against the mechanism's own threat model.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dpdl.accounting.calibration import Calibration, noise_scale
from dpdl.errors import ConfigError
from dpdl.mechanisms.base import NoiseMechanism
from dpdl.mechanisms.independent import CentralDP, IndependentGaussian, LocalDP, NoNoise

__all__ = ["NoiseMechanism", "NoNoise", "IndependentGaussian", "LocalDP", "CentralDP", "MECHANISMS", "build_mechanism"]

Factory = Callable[[np.ndarray, Calibration], NoiseMechanism]


def _scaled_identity(cls: type[IndependentGaussian]) -> Factory:
    """Factory for ``R = sigma^2 I`` with sigma set by the calibration against ``cls``'s threat."""

    def build(weights: np.ndarray, calibration: Calibration) -> NoiseMechanism:
        n = weights.shape[0]
        return cls(n, noise_scale(np.eye(n), cls.default_threat, calibration))

    return build


#: Calibrated mechanisms by CLI name ("none" takes no budget).
MECHANISMS: dict[str, Factory] = {
    LocalDP.name: _scaled_identity(LocalDP),
    CentralDP.name: _scaled_identity(CentralDP),
}


def build_mechanism(name: str, weights: np.ndarray, calibration: Calibration | None) -> NoiseMechanism:
    """Mechanism ``name`` for the mixing matrix ``weights``, calibrated to ``calibration``.

    ``"none"`` needs no calibration; every other mechanism does.
    """
    if name == NoNoise.name:
        return NoNoise(weights.shape[0])
    if name not in MECHANISMS:
        raise ConfigError(f"unknown mechanism {name!r}; known: none, {', '.join(MECHANISMS)}")
    if calibration is None:
        raise ConfigError(f"mechanism {name!r} needs a privacy budget (eps, delta)")
    return MECHANISMS[name](weights, calibration)
