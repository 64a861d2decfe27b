"""Threat models: what the adversary observes of the agents' noisy messages.

In one D-SGD step agent i sends ``x_i - eta (g_i + v_i)``; an adversary that saw the previous
round's messages knows ``x`` and so observes a linear map ``P (g + v)`` of the noisy clipped
gradients (agents first), with ``v ~ N(0, R)`` per coordinate (MAFALDA-SGD, Definition 5: O = A G +
B Z). A threat model fixes the view ``P`` and which agents' privacy is at stake. The accountant
(:mod:`dpdl.accounting.accountant`) turns (R, P) into a Mahalanobis sensitivity.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

__all__ = ["ThreatModel", "Eavesdropper", "CentralObserver", "THREATS", "threat_by_name"]


class ThreatModel(ABC):
    """Who the adversary is: its view of the agents' noisy gradients."""

    name: str
    description: str

    @abstractmethod
    def view(self, n: int) -> np.ndarray:
        """The ``(k, n)`` matrix P such that the adversary observes ``P (g + v)`` each step."""

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Eavesdropper(ThreatModel):
    """External eavesdropper that observes every message on every edge (LDP / SecLDP adversary I).

    It knows no secret, so the whole noise covariance R protects the agents: ``P = I``.
    """

    name: str = "eavesdropper"
    description: str = "external eavesdropper observing all messages"

    def view(self, n: int) -> np.ndarray:
        return np.eye(n)


@dataclass(frozen=True)
class CentralObserver(ThreatModel):
    """Central-DP adversary: observes only the network average of the updates (a trusted curator
    would release the same), ``P = 1^T / n``. The CDP baseline is accounted against it.
    """

    name: str = "central"
    description: str = "observer of the network average only (central DP)"

    def view(self, n: int) -> np.ndarray:
        return np.full((1, n), 1.0 / n)


THREATS: dict[str, ThreatModel] = {t.name: t for t in (Eavesdropper(), CentralObserver())}


def threat_by_name(name: str) -> ThreatModel:
    """The threat model called ``name`` (a key of :data:`THREATS`)."""
    from dpdl.errors import ConfigError

    if name not in THREATS:
        raise ConfigError(f"unknown threat model {name!r}; known: {', '.join(THREATS)}")
    return THREATS[name]
