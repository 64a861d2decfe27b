"""Threat models: who observes what, and which seeds they hold.

In one D-SGD step agent i sends `x_i - eta (g_i + v_i)`; an adversary that saw the previous
round's messages knows `x` and so observes the noisy clipped gradients `g + v` (MAFALDA-SGD,
Definition 5: O = A G + B Z). Adversaries differ in which of these they see and which noise seeds
they hold (DECOR Section 2, adversaries I-IV; CorN-DSGD Section V-D):

- [`Eavesdropper`][dpdl.threats.Eavesdropper]: every message, no seed (SecLDP adversary I).
- [`Colluding`][dpdl.threats.Colluding]: a coalition of q honest-but-curious agents sees every
  message and pools the seeds its members hold; members' own data are not protected. q = 1 is
  DECOR's adversary II (honest-but-curious, no collusion); q = n-1 is full collusion, i.e. LDP
  (adversary IV). The guarantee is the worst over all coalitions of size q (enumerated: C(n, q) of
  them).
- [`CentralObserver`][dpdl.threats.CentralObserver]: only the network average (central DP), the CDP
  baseline's adversary.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from dpdl.choices import THREAT_NAMES, THREAT_REGISTRY
from dpdl.errors import ConfigError

__all__ = [
    "THREAT_NAMES",
    "THREAT_REGISTRY",
    "CentralObserver",
    "Colluding",
    "Eavesdropper",
    "ThreatModel",
    "threat_by_name",
]


class ThreatModel:
    """Who the adversary is: the coalitions it may be, and its view of the others' messages."""

    name: str = ""
    description: str = ""

    def coalitions(self, n: int) -> Iterator[tuple[int, ...]]:
        """Every coalition of agents the adversary may be (their seeds and data are known)."""
        yield ()

    def coalition_count(self, n: int) -> int:
        return 1

    def view(self, honest: int) -> np.ndarray:
        """`(k, honest)` matrix P: the adversary observes `P (g + v)` of the honest agents."""
        return np.eye(honest)

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Eavesdropper(ThreatModel):
    """External eavesdropper observing every message, holding no seed."""

    name: str = "eavesdropper"
    description: str = "external eavesdropper observing all messages, knowing no secret"


@dataclass(frozen=True)
class Colluding(ThreatModel):
    """Coalitions of `q` honest-but-curious agents that see all messages and pool their seeds."""

    q: int = 1

    def __post_init__(self) -> None:
        if self.q < 1:
            raise ConfigError(f"a coalition has at least one agent, got q={self.q}")

    @property
    def name(self) -> str:  # type: ignore[override]
        return "honest-but-curious" if self.q == 1 else f"colluding-{self.q}"

    @property
    def description(self) -> str:  # type: ignore[override]
        if self.q == 1:
            return "each agent, curious, seeing all messages and knowing its own seeds"
        return f"any {self.q} agents colluding, seeing all messages and pooling their seeds"

    def coalitions(self, n: int) -> Iterator[tuple[int, ...]]:
        if self.q >= n:
            raise ConfigError(
                f"a coalition of q={self.q} agents leaves no honest agent among n={n}"
            )
        return combinations(range(n), self.q)

    def coalition_count(self, n: int) -> int:
        return math.comb(n, self.q)


@dataclass(frozen=True)
class CentralObserver(ThreatModel):
    """Central-DP adversary: observes only the network average, `P = 1^T / n`."""

    name: str = "central"
    description: str = "observer of the network average only (central DP)"

    def view(self, honest: int) -> np.ndarray:
        return np.full((1, honest), 1.0 / honest)


def honest_but_curious() -> Colluding:
    """Each agent alone, curious (DECOR's adversary II): coalitions of one."""
    return Colluding(1)


def colluding(q: str) -> Colluding:
    """Coalitions of `q` agents, `q` the digits of the name `colluding-<q>`."""
    if not q.isdigit():
        raise ConfigError(
            f"unknown threat model 'colluding-{q}'; known: {', '.join(THREAT_REGISTRY.names())}"
        )
    return Colluding(int(q))


def threat_by_name(name: str) -> ThreatModel:
    """The threat model called `name` in `dpdl.choices.THREAT_REGISTRY`:
    `eavesdropper`, `honest-but-curious`, `colluding-<q>`, `central`, or one registered
    there."""
    entry, parameter = THREAT_REGISTRY.match(name)
    factory = entry.load()
    try:
        threat = factory() if parameter is None else factory(parameter)
    except ConfigError as error:
        raise ConfigError(f"threat model {name!r}: {error}") from None
    if not isinstance(threat, ThreatModel):
        raise ConfigError(f"threat model {name!r} built a {type(threat).__name__}")
    return threat
