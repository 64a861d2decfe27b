"""DECOR: pairwise-cancelling correlated noise (Allouah et al., ICML 2024, Algorithm 1).

Agent i adds ``u_i + sum_{j in N_i} v_ij`` with ``u_i ~ N(0, sigma_pair^2)`` private and
``v_ij = -v_ji ~ N(0, sigma_cor^2)`` from a seed shared by the edge's endpoints, so
``R = sigma_pair^2 I + sigma_cor^2 L`` (CorN-DSGD Section III, item 2). Against a coalition I the
unknown covariance on the honest agents H is ``sigma_pair^2 I + sigma_cor^2 L(G_H)`` (DECOR
Theorem 6, Algorithm 3), which :meth:`~dpdl.mechanisms.base.NoiseMechanism.unknown_covariance`
reproduces from the edge secrets.

Two ways to pick (sigma_pair, sigma_cor) for a budget:

- :func:`design_decor` (default): minimise ``Tr(W R W^T)`` under the privacy constraint, the
  comparison the Whisper / CorN-DSGD papers make, or ``Tr(M R)`` for a weight M (the loss the
  noise leaves after the whole run, :mod:`dpdl.mechanisms.horizon`). With
  ``t = sigma_cor^2 / sigma_pair^2`` the constraint fixes ``sigma_pair^2(t)`` (sensitivity scales
  as 1/sigma), leaving a 1-d search over t.
- :func:`appendix_d_couples`: DECOR's Appendix D.1 search: fix sigma_pair on a grid between the CDP
  and LDP noise levels, and bisect sigma_cor to meet the per-step budget; :func:`best_couple`
  picks the couple of least ``Tr(W R W^T)`` (or ``Tr(M R)``) among them.
"""

from __future__ import annotations

import math
from typing import Any

import networkx as nx
import numpy as np
from scipy import sparse
from scipy.optimize import minimize_scalar

from dpdl.accounting.accountant import step_sensitivity
from dpdl.accounting.calibration import Calibration, safe_scale
from dpdl.accounting.search import geometric_bisect
from dpdl.errors import ConfigError, PrivacyParameterError
from dpdl.mechanisms.base import NoiseMechanism, SharedSecret
from dpdl.threats import Eavesdropper, ThreatModel

__all__ = ["Decor", "appendix_d_couples", "appendix_d_search", "best_couple", "design_decor"]

_PAIR = np.array([[1.0], [-1.0]])


class Decor(NoiseMechanism):
    """``R = sigma_pair^2 I + sigma_cor^2 L``: private noise plus one secret per edge."""

    name = "decor"
    default_threat = Eavesdropper()

    def __init__(
        self,
        graph: nx.Graph,
        sigma_pair: float,
        sigma_cor: float,
        threat: ThreatModel | None = None,
    ) -> None:
        edges = sorted((min(u, v), max(u, v)) for u, v in graph.edges())
        super().__init__(
            graph.number_of_nodes(),
            sigma_pair**2,
            [SharedSecret((u, v), sigma_cor * _PAIR) for u, v in edges],
        )
        self.sigma_pair = float(sigma_pair)
        self.sigma_cor = float(sigma_cor)
        if threat is not None:
            self.default_threat = threat

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "sigma_pair2": self.sigma_pair**2,
            "sigma_cor2": self.sigma_cor**2,
        }


def _pair_scale(
    graph: nx.Graph, ratio: float, threat: ThreatModel, calibration: Calibration
) -> float:
    """sigma_pair such that ``sigma_pair^2 (I + ratio L)`` meets the calibration against
    ``threat``."""
    unit = step_sensitivity(  # a search step: the final scale is certified by safe_scale
        Decor(graph, 1.0, math.sqrt(ratio)), threat, calibration.neighbouring, simulated=False
    )
    if math.isinf(unit):
        raise PrivacyParameterError(
            f"DECOR noise gives no privacy against the {threat} threat on this graph"
        )
    return unit / calibration.mu_step


def design_decor(
    graph: nx.Graph,
    weights: np.ndarray | sparse.csr_array,
    calibration: Calibration,
    threat: ThreatModel | None = None,
    objective: np.ndarray | None = None,
) -> Decor:
    """DECOR noise minimising ``Tr(W R W^T)`` under the calibrated constraint against ``threat``,
    or ``Tr(M R)`` for ``M = objective``.

    ``Tr(W R W^T) = sigma_pair^2(t) (Tr(W W^T) + t Tr(W L W^T))`` (with M:
    ``sigma_pair^2(t) (Tr(M) + t Tr(M L))``); the search is over ``log10 t`` in [-6, 6] (bounded
    Brent), compared with t = 0 (which is LDP). A sparse W (large graphs) gives both traces from
    sparse products, without an n x n matrix.
    """
    threat = threat or Eavesdropper()
    laplacian = nx.laplacian_matrix(graph, nodelist=range(graph.number_of_nodes())).astype(float)
    if objective is not None:
        base = float(np.trace(objective))
        extra = float(np.sum(objective * laplacian.toarray()))
    elif sparse.issparse(weights):
        base = float(weights.multiply(weights).sum())
        extra = float(sparse.csr_array(weights @ laplacian).multiply(weights).sum())
    else:
        laplacian = laplacian.toarray()
        base = float(np.sum(weights * weights))
        extra = float(np.sum((weights @ laplacian) * weights))

    def cost(log_ratio: float) -> float:
        ratio = 10.0**log_ratio
        return _pair_scale(graph, ratio, threat, calibration) ** 2 * (base + ratio * extra)

    best = minimize_scalar(cost, bounds=(-6.0, 6.0), method="bounded", options={"xatol": 1e-6})
    ratio = (
        10.0**best.x if best.fun < _pair_scale(graph, 0.0, threat, calibration) ** 2 * base else 0.0
    )

    def build(sigma_pair: float) -> Decor:
        return Decor(graph, sigma_pair, sigma_pair * math.sqrt(ratio), threat)

    return build(
        safe_scale(build, threat, calibration, _pair_scale(graph, ratio, threat, calibration))
    )


def appendix_d_couples(
    graph: nx.Graph, calibration: Calibration, threat: ThreatModel | None = None, grid: int = 3
) -> list[Decor]:
    """DECOR Appendix D.1: for sigma_pair on a grid of ``grid`` points between the CDP level
    ``s / (sqrt(n) mu_step)`` and the LDP level ``s / mu_step``, the smallest sigma_cor meeting the
    budget (bisection in log space; the per-step budget is monotone in sigma_cor). Grid points
    where even a huge sigma_cor cannot meet the budget are skipped.
    """
    threat = threat or Eavesdropper()
    n = graph.number_of_nodes()
    ldp = calibration.neighbouring.sensitivity / calibration.mu_step
    couples = []
    for sigma_pair in np.geomspace(ldp / math.sqrt(n), ldp, grid + 2)[1:-1]:

        def meets(sigma_cor: float, pair: float = sigma_pair) -> bool:
            noise = Decor(graph, pair, sigma_cor)
            return (
                step_sensitivity(noise, threat, calibration.neighbouring, simulated=False)
                <= calibration.mu_step
            )

        high = 1e3 * ldp
        if not meets(high):
            continue
        _, high = geometric_bisect(meets, 1e-6 * ldp, high, 1e-9)
        couples.append(Decor(graph, sigma_pair, high, threat))
    return couples


def appendix_d_search(
    graph: nx.Graph,
    weights: np.ndarray | sparse.sparray,
    calibration: Calibration,
    threat: ThreatModel | None = None,
    objective: np.ndarray | None = None,
) -> Decor:
    """DECOR search ``appendix-d``: the couple of :func:`appendix_d_couples` of least
    ``Tr(W R W^T)`` (or ``Tr(M R)`` for ``M = objective``, :func:`best_couple`)."""
    couples = appendix_d_couples(graph, calibration, threat)
    if not couples:
        raise ConfigError(
            "DECOR's Appendix D search found no noise couple meeting the budget on this graph"
        )
    return best_couple(couples, weights, objective)


def best_couple(
    couples: list[Decor], weights: np.ndarray | sparse.sparray, objective: np.ndarray | None = None
) -> Decor:
    """The couple of least ``Tr(W R W^T)``, or of least ``Tr(M R)`` for ``M = objective``."""
    if objective is None:
        return min(couples, key=lambda m: m.variance_after_mixing(weights))
    return min(couples, key=lambda m: float(np.sum(objective * m.covariance())))
