"""Spectral and combinatorial facts about a graph and its mixing matrix.

These are the quantities the papers' guarantees depend on: the algebraic connectivity a(G) of the
Laplacian (DECOR Theorem 1, eavesdropper), the spectral gap of W (D-SGD convergence,
Koloskova et al. 2020), and the vertex connectivity (how many agents must collude to cut the graph,
DECOR's collusion levels).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import networkx as nx
import numpy as np

from dpdl.graphs.mixing import mixing_rate

__all__ = [
    "GraphSummary",
    "algebraic_connectivity",
    "laplacian",
    "spectral_gap",
    "summarize",
    "vertex_connectivity",
]


def laplacian(graph: nx.Graph) -> np.ndarray:
    """Dense combinatorial Laplacian ``L = D - A`` of an undirected graph, nodes ``0..n-1``."""
    n = graph.number_of_nodes()
    return nx.laplacian_matrix(graph, nodelist=range(n), weight=None).toarray().astype(float)


def algebraic_connectivity(graph: nx.Graph) -> float:
    """Second smallest eigenvalue of the Laplacian (Fiedler, 1973); zero iff disconnected."""
    if graph.number_of_nodes() < 2:
        return 0.0
    return float(np.linalg.eigvalsh(laplacian(graph))[1])


def spectral_gap(weights: np.ndarray) -> float:
    """``1 - sigma_2(W)``, one minus the second largest singular value of a doubly stochastic W.

    For a symmetric W this is ``1 - max_{i >= 2} |lambda_i(W)|``. Koloskova et al.'s consensus rate
    is ``p = 1 - sigma_2(W)^2``.
    """
    return 1.0 - mixing_rate(np.asarray(weights, dtype=float))


def vertex_connectivity(graph: nx.Graph) -> int:
    """Least number of agents whose removal disconnects the graph (``n - 1`` for a complete
    graph)."""
    return int(nx.node_connectivity(graph))


#: Above this many nodes the summary leaves out the vertex connectivity: networkx computes it with
#: O(n) maximum flows (minutes at n = 1000); call :func:`vertex_connectivity` directly if needed.
VERTEX_CONNECTIVITY_MAX_NODES = 300


@dataclass(frozen=True)
class GraphSummary:
    """The facts printed with every run: size, degrees and the spectral quantities above."""

    nodes: int
    edges: int
    min_degree: int
    max_degree: int
    algebraic_connectivity: float
    spectral_gap: float
    vertex_connectivity: int | None

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


def summarize(graph: nx.Graph, weights: np.ndarray) -> GraphSummary:
    """Summary of a graph and the mixing matrix used on it (vertex connectivity only up to
    :data:`VERTEX_CONNECTIVITY_MAX_NODES` nodes, None above)."""
    degrees = [d for _, d in graph.degree()]
    return GraphSummary(
        nodes=graph.number_of_nodes(),
        edges=graph.number_of_edges(),
        min_degree=min(degrees),
        max_degree=max(degrees),
        algebraic_connectivity=algebraic_connectivity(graph),
        spectral_gap=spectral_gap(weights),
        vertex_connectivity=vertex_connectivity(graph)
        if graph.number_of_nodes() <= VERTEX_CONNECTIVITY_MAX_NODES
        else None,
    )
