"""Spectral and combinatorial facts about a graph and its mixing matrix.

These are the quantities the papers' guarantees depend on: the algebraic connectivity a(G) of the
Laplacian (DECOR Theorem 1, eavesdropper), the spectral gap of W (D-SGD convergence,
Koloskova et al. 2020), and the vertex connectivity (how many agents must collude to cut the graph,
DECOR's collusion levels).

From `SPARSE_MIN_AGENTS` nodes on, the spectral quantities are found by sparse
eigensolvers (LOBPCG for the Laplacian, ARPACK for W), never by a dense eigendecomposition.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import asdict, dataclass

import networkx as nx
import numpy as np
from scipy import sparse as sp
from scipy.sparse import linalg as spla

from dpdl.graphs.mixing import Weights, mixing_rate
from dpdl.scale import SPARSE_MIN_AGENTS

logger = logging.getLogger(__name__)

__all__ = [
    "GraphSummary",
    "algebraic_connectivity",
    "laplacian",
    "spectral_gap",
    "summarize",
    "vertex_connectivity",
]


def laplacian(graph: nx.Graph) -> np.ndarray:
    """Dense combinatorial Laplacian `L = D - A` of an undirected graph, nodes `0..n-1`."""
    n = graph.number_of_nodes()
    return nx.laplacian_matrix(graph, nodelist=range(n), weight=None).toarray().astype(float)


#: LOBPCG's residual tolerance and iteration cap for the algebraic connectivity; the eigenvalue's
#: error is about the squared residual over the spectral gap, far below what is reported.
LOBPCG_TOL = 1e-8
LOBPCG_MAX_ITER = 1000
#: Eigenvectors LOBPCG iterates at once (the second one onwards speed up convergence).
LOBPCG_BLOCK = 4


def _sparse_algebraic_connectivity(graph: nx.Graph) -> float:
    """The second smallest Laplacian eigenvalue by LOBPCG (Knyazev, 2001) restricted to the
    complement of the constant vector (the first eigenvector), Jacobi-preconditioned and started
    from a fixed random block, so the answer is the same on every run."""
    n = graph.number_of_nodes()
    matrix = sp.csr_array(nx.laplacian_matrix(graph, nodelist=range(n), weight=None), dtype=float)
    block = min(LOBPCG_BLOCK, max(1, (n - 1) // 5))
    start = np.random.default_rng(0).standard_normal((n, block))
    preconditioner = sp.diags_array(1.0 / np.maximum(matrix.diagonal(), 1.0))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        values, _ = spla.lobpcg(
            matrix,
            start,
            M=preconditioner,
            Y=np.ones((n, 1)),
            largest=False,
            tol=LOBPCG_TOL,
            maxiter=LOBPCG_MAX_ITER,
        )
    for warning in caught:
        logger.debug("LOBPCG on the Laplacian of %d nodes: %s", n, warning.message)
    return max(float(np.min(values)), 0.0)


def algebraic_connectivity(graph: nx.Graph, *, sparse: bool | None = None) -> float:
    """Second smallest eigenvalue of the Laplacian (Fiedler, 1973); zero iff disconnected.

    By a dense eigendecomposition below `SPARSE_MIN_AGENTS` nodes, by LOBPCG from it on (or
    when `sparse`); the two agree to LOBPCG's tolerance."""
    n = graph.number_of_nodes()
    if n < 2:
        return 0.0
    if (n >= SPARSE_MIN_AGENTS if sparse is None else sparse) and n > 2:
        return _sparse_algebraic_connectivity(graph)
    return float(np.linalg.eigvalsh(laplacian(graph))[1])


def spectral_gap(weights: Weights) -> float:
    """`1 - sigma_2(W)`, one minus the second largest singular value of a doubly stochastic W.

    For a symmetric W this is `1 - max_{i >= 2} |lambda_i(W)|`. Koloskova et al.'s consensus rate is
    `p = 1 - sigma_2(W)^2`. A sparse or large W goes to ARPACK
    ([`mixing_rate`][dpdl.graphs.mixing.mixing_rate]).
    """
    return 1.0 - mixing_rate(weights if sp.issparse(weights) else np.asarray(weights, dtype=float))


def vertex_connectivity(graph: nx.Graph) -> int:
    """Least number of agents whose removal disconnects the graph (`n - 1` for a complete
    graph)."""
    return int(nx.node_connectivity(graph))


#: Above this many nodes the summary leaves out the vertex connectivity: networkx computes it with
#: O(n) maximum flows (minutes at n = 1000); call :func:`vertex_connectivity` directly if needed.
VERTEX_CONNECTIVITY_MAX_NODES = 300
#: Above this many nodes the summary leaves out the algebraic connectivity and the spectral gap:
#: on large expanders the extreme eigenvalues crowd together and the iterative eigensolvers take
#: tens of seconds each (about 25 s and 10 s at 100,000 agents of degree 10, against 1-3 s at
#: Facebook's 4039); call :func:`algebraic_connectivity` or :func:`spectral_gap` directly.
SPECTRAL_MAX_NODES = 20_000


@dataclass(frozen=True)
class GraphSummary:
    """The facts printed with every run: size, degrees and the spectral quantities above."""

    nodes: int
    edges: int
    min_degree: int
    max_degree: int
    algebraic_connectivity: float | None
    spectral_gap: float | None
    vertex_connectivity: int | None

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


def summarize(graph: nx.Graph, weights: Weights) -> GraphSummary:
    """Summary of a graph and the mixing matrix used on it (vertex connectivity only up to
    `VERTEX_CONNECTIVITY_MAX_NODES` nodes, the spectral facts up to
    `SPECTRAL_MAX_NODES`; None above)."""
    degrees = [d for _, d in graph.degree()]
    n = graph.number_of_nodes()
    spectral = n <= SPECTRAL_MAX_NODES
    if not spectral:
        logger.info("graph of %d nodes: the summary leaves out its spectral facts", n)
    return GraphSummary(
        nodes=n,
        edges=graph.number_of_edges(),
        min_degree=min(degrees),
        max_degree=max(degrees),
        algebraic_connectivity=algebraic_connectivity(graph) if spectral else None,
        spectral_gap=spectral_gap(weights) if spectral else None,
        vertex_connectivity=vertex_connectivity(graph)
        if n <= VERTEX_CONNECTIVITY_MAX_NODES
        else None,
    )
