"""Mixing (gossip) matrices on a communication graph, and their validation.

A mixing matrix W is nonnegative, supported on the graph's edges plus self-loops, and stochastic.
D-SGD needs it doubly stochastic (``W 1 = 1`` and ``1^T W = 1^T``) and mixing
(``lambda_2(W^T W) < 1``; Koloskova et al., ICML 2020; Boyd et al., IEEE TIT 2006).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import networkx as nx
import numpy as np

from dpdl.choices import MIXING_RULE_REGISTRY
from dpdl.errors import MixingMatrixError
from dpdl.graphs.topologies import require_connected

__all__ = [
    "MIXING_RULES",
    "NotDoublyStochasticWarning",
    "local_degree",
    "max_degree",
    "metropolis_hastings",
    "mixing_matrix",
    "mixing_rate",
    "sinkhorn_knopp",
    "validate_mixing_matrix",
]

#: Tolerance on row and column sums.
STOCHASTIC_TOL = 1e-9


class NotDoublyStochasticWarning(UserWarning):
    """A mixing rule produced a matrix that is row- but not column-stochastic."""


def _adjacency(graph: nx.Graph) -> np.ndarray:
    n = graph.number_of_nodes()
    if sorted(graph.nodes) != list(range(n)):
        raise MixingMatrixError("graph nodes must be the integers 0..n-1 (use relabel_consecutive)")
    adjacency = nx.to_numpy_array(graph, nodelist=range(n), weight=None, dtype=float)
    np.fill_diagonal(adjacency, 0.0)
    return adjacency


def metropolis_hastings(graph: nx.Graph) -> np.ndarray:
    """Metropolis-Hastings weights ``w_ij = 1 / (1 + max(d_i, d_j))`` on edges; rest on the
    diagonal.

    Symmetric and doubly stochastic on every undirected graph (Boyd et al., 2006, eq. (5)
    without the lazy half); dpdl's default.
    """
    require_connected(graph)
    adjacency = _adjacency(graph)
    degree = adjacency.sum(axis=1)
    weights = adjacency / (1.0 + np.maximum.outer(degree, degree))
    np.fill_diagonal(weights, 1.0 - weights.sum(axis=1))
    return weights


def local_degree(graph: nx.Graph) -> np.ndarray:
    """The papers' rule ``w_ij = 1 / (|N_i| + 1)`` for ``j`` in ``N_i`` and for ``j = i``.

    This is the matrix the Whisper D-SGD, CorN-DSGD and DECOR experiments call
    "Metropolis-Hastings". It is row-stochastic, but column-stochastic only on regular graphs:
    on an irregular graph a :class:`NotDoublyStochasticWarning` is issued, since D-SGD then
    converges to a weighted (not the uniform) average.
    """
    require_connected(graph)
    adjacency = _adjacency(graph)
    weights = adjacency + np.eye(adjacency.shape[0])
    weights /= weights.sum(axis=1, keepdims=True)
    column_error = np.abs(weights.sum(axis=0) - 1.0).max()
    if column_error > STOCHASTIC_TOL:
        warnings.warn(
            "the 1/(|N_i|+1) rule is only row-stochastic on this irregular graph "
            f"(column sums off by up to {column_error:.3g}); D-SGD will converge to a weighted "
            "average",
            NotDoublyStochasticWarning,
            stacklevel=2,
        )
    return weights


def max_degree(graph: nx.Graph) -> np.ndarray:
    """Uniform max-degree weights ``w_ij = 1 / (d_max + 1)`` on edges; rest on the diagonal.

    Symmetric and doubly stochastic; on a complete graph it is the uniform averaging matrix
    ``11^T / n`` (singular, which the covariance solvers must handle).
    """
    require_connected(graph)
    adjacency = _adjacency(graph)
    weights = adjacency / (adjacency.sum(axis=1).max() + 1.0)
    np.fill_diagonal(weights, 1.0 - weights.sum(axis=1))
    return weights


def sinkhorn_knopp(
    support: nx.Graph | np.ndarray, tol: float = 1e-12, max_iter: int = 100_000
) -> np.ndarray:
    """Doubly stochastic scaling ``D_1 A D_2`` of a nonnegative matrix (Sinkhorn & Knopp, 1967).

    ``support`` is a graph (then ``A`` is its adjacency plus the identity; for a directed graph
    row ``i`` holds ``i``'s in-neighbours, the agents it receives from, as in
    :func:`validate_mixing_matrix`) or a nonnegative square matrix. Rows and columns are
    normalised in turn until both sums are within ``tol`` of one. Convergence requires total
    support, which holds for a strongly connected graph with self-loops; otherwise a
    :class:`MixingMatrixError` is raised.

    Written by hand: scipy and networkx have no matrix-balancing routine, and the iteration is
    a few lines of vectorized numpy.
    """
    if isinstance(support, nx.Graph):
        require_connected(support)
        n = support.number_of_nodes()
        matrix = nx.to_numpy_array(support, nodelist=range(n), weight=None, dtype=float)
        if support.is_directed():
            matrix = matrix.T  # edge j -> i: agent i receives from j, so w_ij > 0
        matrix += np.eye(n)
    else:
        matrix = np.array(support, dtype=float)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise MixingMatrixError(f"Sinkhorn-Knopp needs a square matrix, got shape {matrix.shape}")
    if (matrix < 0).any():
        raise MixingMatrixError("Sinkhorn-Knopp needs a nonnegative matrix")
    if (matrix.sum(axis=1) == 0).any() or (matrix.sum(axis=0) == 0).any():
        raise MixingMatrixError(
            "Sinkhorn-Knopp needs every row and column to have a positive entry"
        )
    scaled = matrix.copy()
    for _ in range(max_iter):
        scaled /= scaled.sum(axis=1, keepdims=True)
        scaled /= scaled.sum(axis=0, keepdims=True)
        if np.abs(scaled.sum(axis=1) - 1.0).max() < tol:
            return scaled
    raise MixingMatrixError(
        f"Sinkhorn-Knopp did not converge in {max_iter} iterations: the support lacks total "
        "support "
        "(is the graph strongly connected, with self-loops?)"
    )


def mixing_rate(weights: np.ndarray, *, doubly_stochastic: bool = True) -> float:
    """How fast ``W^t`` reaches consensus: below one iff it does.

    Doubly stochastic W: the second largest singular value ``||W - 11^T/n||_2``, i.e.
    ``sqrt(lambda_2(W^T W))``, the papers' convergence condition. Row-stochastic W: the spectral
    radius of ``W - 1 pi^T``, with ``pi`` the stationary distribution (left Perron vector).
    """
    n = weights.shape[0]
    if doubly_stochastic:
        return float(np.linalg.norm(weights - np.full((n, n), 1.0 / n), 2))
    eigenvalues, left = np.linalg.eig(weights.T)
    pi = np.real(left[:, np.argmin(np.abs(eigenvalues - 1.0))])
    pi = pi / pi.sum()
    return float(np.abs(np.linalg.eigvals(weights - np.outer(np.ones(n), pi))).max())


def validate_mixing_matrix(
    weights: np.ndarray,
    graph: nx.Graph | None = None,
    *,
    doubly_stochastic: bool = True,
    mixing: bool = True,
) -> np.ndarray:
    """Check that ``weights`` is a usable mixing matrix and return it as a float64 array.

    Raises :class:`MixingMatrixError` naming the first violated condition: square shape, finite
    nonnegative entries, unit row sums (and column sums when ``doubly_stochastic``), support within
    the graph's edges plus self-loops (when ``graph`` is given), and, when ``mixing``, that it mixes
    (second largest singular value below one, i.e. the iteration reaches consensus; one matrix of
    a time-varying sequence need not).
    """
    weights = np.asarray(weights, dtype=float)
    if weights.ndim != 2 or weights.shape[0] != weights.shape[1]:
        raise MixingMatrixError(f"the mixing matrix must be square, got shape {weights.shape}")
    if not np.isfinite(weights).all():
        raise MixingMatrixError("the mixing matrix has non-finite entries")
    if (weights < -STOCHASTIC_TOL).any():
        raise MixingMatrixError(f"the mixing matrix has negative entries (min {weights.min():.3g})")
    row_error = np.abs(weights.sum(axis=1) - 1.0).max()
    if row_error > STOCHASTIC_TOL:
        raise MixingMatrixError(
            f"the mixing matrix is not row-stochastic (row sums off by up to {row_error:.3g})"
        )
    if doubly_stochastic:
        column_error = np.abs(weights.sum(axis=0) - 1.0).max()
        if column_error > STOCHASTIC_TOL:
            raise MixingMatrixError(
                "the mixing matrix is not doubly stochastic (column sums off by up to "
                f"{column_error:.3g})"
            )
    n = weights.shape[0]
    if graph is not None:
        if graph.number_of_nodes() != n:
            raise MixingMatrixError(
                f"the mixing matrix is {n} x {n} but the graph has {graph.number_of_nodes()} nodes"
            )
        allowed = nx.to_numpy_array(graph, nodelist=range(n), weight=None) + np.eye(n)
        if graph.is_directed():
            allowed = allowed.T  # row i mixes what i receives, i.e. its in-neighbours
        outside = (weights > STOCHASTIC_TOL) & (allowed == 0)
        if outside.any():
            i, j = np.argwhere(outside)[0]
            raise MixingMatrixError(
                f"the mixing matrix puts weight {weights[i, j]:.3g} on ({i}, {j}), which is not "
                "an edge"
            )
    if (
        mixing
        and n > 1
        and mixing_rate(weights, doubly_stochastic=doubly_stochastic) >= 1.0 - 1e-12
    ):
        raise MixingMatrixError(
            "the mixing matrix does not mix (consensus is not reached): the graph it lives on is "
            "disconnected or the weights are periodic"
        )
    return weights


MIXING_RULES: dict[str, Callable[[nx.Graph], np.ndarray]] = {
    "metropolis-hastings": metropolis_hastings,
    "local-degree": local_degree,
    "max-degree": max_degree,
    "sinkhorn": sinkhorn_knopp,
}


def mixing_matrix(graph: nx.Graph, rule: str = "metropolis-hastings") -> np.ndarray:
    """The mixing matrix of ``graph`` under ``rule`` (a name of
    :data:`dpdl.choices.MIXING_RULE_REGISTRY`), validated (doubly stochastic unless
    ``local-degree``)."""
    weights = MIXING_RULE_REGISTRY.get(rule)(graph)
    return validate_mixing_matrix(weights, graph, doubly_stochastic=rule != "local-degree")
