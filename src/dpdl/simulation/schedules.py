"""Step-size schedules ``eta_t`` for t = 1, 2, ..., T."""

from __future__ import annotations

import math
from dataclasses import dataclass

from dpdl.choices import SCHEDULES
from dpdl.errors import ConfigError

__all__ = ["StepSize", "SCHEDULES"]


@dataclass(frozen=True)
class StepSize:
    """``constant``: ``eta_t = eta``; ``inv-sqrt``: ``eta_t = eta / sqrt(t)`` (Whisper's quadratic task)."""

    eta: float
    schedule: str = "constant"

    def __post_init__(self) -> None:
        if not (math.isfinite(self.eta) and self.eta > 0):
            raise ConfigError(f"the step size must be a finite number > 0, got {self.eta}")
        if self.schedule not in SCHEDULES:
            raise ConfigError(f"unknown step-size schedule {self.schedule!r}; known: {', '.join(SCHEDULES)}")

    def __call__(self, t: int) -> float:
        """Step size at step ``t >= 1``."""
        return self.eta if self.schedule == "constant" else self.eta / math.sqrt(t)
