"""Zero-sum correlated noise: the prior work the correlated-noise papers start from.

Pairwise-cancelling terms without independent noise (Imtiaz et al., IEEE TSP 2021; Biswas et al.,
PoPETs 2025; DECOR with sigma_pair = 0): `R = sigma^2 L`, so `1^T v = 0` and the sum of the
agents' messages reveals the sum of their gradients exactly. Every agent's message looks as noisy
as under LDP (we set `sigma^2 = sigma_ldp^2 / d_min` so every marginal variance is at least
`sigma_ldp^2`), yet R is singular: against an eavesdropper the accountant reports
epsilon = infinity (CorN-DSGD guideline (G1)). It is kept as the baseline whose guarantee is void.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import networkx as nx
import numpy as np

from dpdl.accounting.calibration import Calibration, noise_scale
from dpdl.mechanisms.base import NoiseMechanism, SharedSecret
from dpdl.mechanisms.independent import LocalDP
from dpdl.threats import Eavesdropper

__all__ = ["ZeroSum", "design_zero_sum", "matched_to_ldp"]

M = TypeVar("M", bound=NoiseMechanism)


class ZeroSum(NoiseMechanism):
    """`v_i = sum_{j in N_i} v_ij`, `v_ij = -v_ji ~ N(0, sigma^2)`: `R = sigma^2 L`."""

    name = "zero-sum"
    default_threat = Eavesdropper()
    calibrated = False

    def __init__(self, graph: nx.Graph, sigma: float) -> None:
        edges = sorted((min(u, v), max(u, v)) for u, v in graph.edges())
        pair = float(sigma) * np.array([[1.0], [-1.0]])
        super().__init__(graph.number_of_nodes(), 0.0, [SharedSecret(edge, pair) for edge in edges])
        self.sigma = float(sigma)

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "sigma2_edge": self.sigma**2}


def matched_to_ldp(build: Callable[[float], M], calibration: Calibration) -> M:
    """`build(sigma)` at the smallest sigma giving every agent at least the calibrated LDP
    variance (zero-sum designs have no calibration of their own: their guarantee is void whatever
    the
    scale)."""
    unit = build(1.0)
    sigma_ldp = noise_scale(LocalDP(unit.n, 1.0), Eavesdropper(), calibration)
    return build(sigma_ldp / np.sqrt(np.diag(unit.covariance()).min()))


def design_zero_sum(graph: nx.Graph, calibration: Calibration) -> ZeroSum:
    """Zero-sum noise whose every agent's variance matches the calibrated LDP variance or more."""
    return matched_to_ldp(lambda sigma: ZeroSum(graph, sigma), calibration)
