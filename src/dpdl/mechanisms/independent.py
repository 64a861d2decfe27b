"""Independent-noise baselines: no noise, local DP, and the central-DP baseline.

- LDP (Kasiviswanathan et al. 2011; Duchi et al. 2013): every agent adds its own
  `N(0, sigma_ldp^2)` noise, `R = sigma_ldp^2 I`, private against an eavesdropper that sees
  every message (and against any coalition, since no seed is shared).
- CDP baseline (DECOR Section 2, Whisper Section V): D-SGD with independent noise of variance
  `sigma_cdp^2 = sigma_ldp^2 / n` per agent; the network average then carries noise of variance
  `sigma_ldp^2 / n^2` on a mean of sensitivity `2C / n`: the same guarantee as LDP, but only
  against an adversary that sees the average (a trusted curator's release), which is what central
  DP promises. It is the utility target the correlated-noise methods are measured against.
"""

from __future__ import annotations

from typing import Any

from dpdl.mechanisms.base import NoiseMechanism
from dpdl.threats import CentralObserver, Eavesdropper

__all__ = ["CentralDP", "IndependentGaussian", "LocalDP", "NoNoise"]


class NoNoise(NoiseMechanism):
    """Plain D-SGD: no privacy noise (epsilon is infinite under every threat)."""

    name = "none"
    calibrated = False

    def __init__(self, n: int) -> None:
        super().__init__(n, 0.0)


class IndependentGaussian(NoiseMechanism):
    """Independent `N(0, sigma^2)` noise at every agent: `R = sigma^2 I`."""

    def __init__(self, n: int, sigma: float) -> None:
        super().__init__(n, float(sigma) ** 2)
        self.sigma = float(sigma)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "sigma": self.sigma, "sigma2": self.sigma**2}


class LocalDP(IndependentGaussian):
    """LDP baseline: `R = sigma_ldp^2 I`, designed against the eavesdropper."""

    name = "ldp"
    default_threat = Eavesdropper()


class CentralDP(IndependentGaussian):
    """CDP baseline: independent noise of variance `sigma_ldp^2 / n` per agent, designed against
    the central observer (see the module docstring). `sigma` is the per-agent std `sigma_cdp`.
    """

    name = "cdp"
    default_threat = CentralObserver()
