"""Participation schemes: in which steps one record's gradient may differ (MAFALDA-SGD Remark 9;
Pillutla et al. 2025, Chapter 3; Choquette-Choo et al., ICML 2023).

A pattern is a set of steps; a record of agent u that participates in pattern pi changes the rows
`{t n + u : t in pi}` of G. The sensitivity is the worst pattern of the worst agent.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpdl.errors import ConfigError

__all__ = ["Participation"]


@dataclass(frozen=True)
class Participation:
    """The participation patterns of one record over `steps` steps."""

    steps: int
    patterns: tuple[tuple[int, ...], ...]
    name: str

    def __post_init__(self) -> None:
        if any(
            not pattern or min(pattern) < 0 or max(pattern) >= self.steps
            for pattern in self.patterns
        ):
            raise ConfigError(
                f"participation patterns must be non-empty sets of steps in [0, {self.steps})"
            )

    @classmethod
    def every_step(cls, steps: int) -> Participation:
        """The record takes part in every step: `(T, 1)`-participation, the agent-level relation
        of the correlated-noise papers (a whole local data set changes) and MAFALDA-SGD's Fig. 2."""
        return cls(steps, (tuple(range(steps)),), f"every step ({steps}, 1)")

    @classmethod
    def cyclic(cls, steps: int, k: int, b: int) -> Participation:
        """Cyclic `(k, b)`-participation with a fixed data order: the record is used at steps
        `i, i + b, ..., i + (k-1) b` for one offset `i < b` (`T = k b` when the data are
        cycled k times in b batches; MAFALDA-SGD uses k = 20, b = 19 and k = 20, b = 16)."""
        if k < 1 or b < 1:
            raise ConfigError(f"(k, b)-participation needs k >= 1 and b >= 1, got k={k}, b={b}")
        if steps > k * b:
            raise ConfigError(
                f"{steps} steps in cycles of b={b} give more than k={k} participations"
            )
        patterns = tuple(tuple(range(offset, steps, b)) for offset in range(min(b, steps)))
        return cls(steps, patterns, f"cyclic (k={k}, b={b})")

    def rows(self, agent: int, n: int) -> list[np.ndarray]:
        """For each pattern, the rows of G (time-major) that `agent`'s record changes."""
        return [np.asarray(pattern) * n + agent for pattern in self.patterns]

    @property
    def max_participations(self) -> int:
        return max(len(pattern) for pattern in self.patterns)
