"""Noise mechanisms: Gaussian noise ``v_t ~ N(0, R)`` per coordinate, added to clipped gradients.

A mechanism knows its per-step covariance R across agents (n x n; the d coordinates are
independent and identically distributed) and how to sample all agents' noise for one step as one
``(n, d)`` array. What the accountant needs is the covariance plus the threat model it is meant
for (:attr:`NoiseMechanism.default_threat`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from dpdl.threats import Eavesdropper, ThreatModel

__all__ = ["NoiseMechanism"]


class NoiseMechanism(ABC):
    """Gaussian noise across n agents, N(0, R) independently for each coordinate."""

    #: Short name used by the CLI and in results.
    name: str = ""
    #: The adversary the mechanism is designed against; the accountant reports against it first.
    default_threat: ThreatModel = Eavesdropper()

    def __init__(self, n: int) -> None:
        if n < 1:
            raise ValueError(f"a mechanism needs n >= 1 agents, got {n}")
        self.n = n

    @abstractmethod
    def covariance(self) -> np.ndarray:
        """Per-coordinate covariance R (n x n) of one step's noise across agents."""

    @abstractmethod
    def sample(self, rng: np.random.Generator, dim: int) -> np.ndarray:
        """One step's noise for all agents, shape ``(n, dim)``."""

    @property
    def is_noiseless(self) -> bool:
        """True when the mechanism adds no noise at all (the engine then skips sampling)."""
        return False

    def describe(self) -> dict[str, Any]:
        """Parameters for the run's config file."""
        return {"mechanism": self.name, "n": self.n, "threat": str(self.default_threat)}
