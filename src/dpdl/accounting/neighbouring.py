"""Neighbouring relations: what a privacy guarantee protects, and the L2 sensitivity that follows.

- Agent level (the papers' default): two data sets differ in one agent's whole local data set
  (replace-one). Its clipped gradient moves by at most `2C`: sensitivity `2C` per step.
- Example level (DECOR's MNIST experiment): one example is added to or removed from one agent's
  data set (add/remove-one). With Poisson sampling at rate q and per-example clipping, the batch
  sum moves by at most C and the engine divides by the expected batch size B: sensitivity `C/B`,
  and the step is a Poisson-subsampled Gaussian mechanism (accounted by PLD).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dpdl.errors import PrivacyParameterError

__all__ = ["AgentLevel", "ExampleLevel", "Neighbouring"]


def _check_clip(clip: float) -> None:
    if not (math.isfinite(clip) and clip > 0):
        raise PrivacyParameterError(
            f"the clipping threshold C must be a finite number > 0, got {clip}"
        )


@dataclass(frozen=True)
class AgentLevel:
    """Agent-level replace-one adjacency with per-agent gradient clipping at `clip`."""

    clip: float

    def __post_init__(self) -> None:
        _check_clip(self.clip)

    @property
    def sensitivity(self) -> float:
        return 2.0 * self.clip

    @property
    def sampling_rate(self) -> None:
        return None

    def __str__(self) -> str:
        return f"agent-level replace-one (C={self.clip:g}, sensitivity 2C)"


@dataclass(frozen=True)
class ExampleLevel:
    """Example-level add/remove-one adjacency, per-example clipping at `clip`, Poisson sampling
    of each agent's examples at `sampling_rate` with expected batch size `batch_size`.
    """

    clip: float
    batch_size: int
    sampling_rate: float

    def __post_init__(self) -> None:
        _check_clip(self.clip)
        if self.batch_size < 1:
            raise PrivacyParameterError(f"the batch size must be >= 1, got {self.batch_size}")
        if not 0.0 < self.sampling_rate <= 1.0:
            raise PrivacyParameterError(
                f"the sampling rate must be in (0, 1], got {self.sampling_rate}"
            )

    @property
    def sensitivity(self) -> float:
        return self.clip / self.batch_size

    def __str__(self) -> str:
        return (
            f"example-level add/remove-one (C={self.clip:g}, Poisson rate "
            f"q={self.sampling_rate:.4g}, expected batch {self.batch_size})"
        )


Neighbouring = AgentLevel | ExampleLevel
