"""Mixing (gossip) matrices on a communication graph, and their validation.

A mixing matrix W is nonnegative, supported on the graph's edges plus self-loops, and stochastic.
D-SGD needs it doubly stochastic (`W 1 = 1` and `1^T W = 1^T`) and mixing
(`lambda_2(W^T W) < 1`; Koloskova et al., ICML 2020; Boyd et al., IEEE TIT 2006).

From `SPARSE_MIN_AGENTS` agents on, the built-in rules build W from the graph's
edges as a `scipy.sparse` CSR array (O(|E|) memory; a D-SGD step's `W @ X` then costs
O(|E| d)), and the mixing rate is found by ARPACK (`scipy.sparse.linalg.eigsh` / `eigs` /
`svds` on `W - 1 pi^T` as an operator), never by a dense eigendecomposition. Below it, W is a
dense array as it always was.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import networkx as nx
import numpy as np
from scipy import sparse as sp
from scipy.sparse import csgraph
from scipy.sparse import linalg as spla

from dpdl.choices import MIXING_RULE_REGISTRY
from dpdl.errors import MixingMatrixError
from dpdl.graphs.topologies import require_connected
from dpdl.scale import SPARSE_MIN_AGENTS

__all__ = [
    "MIXING_RULES",
    "SPARSE_MIN_AGENTS",
    "NotDoublyStochasticWarning",
    "Weights",
    "as_format",
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

#: A mixing matrix: dense below :data:`SPARSE_MIN_AGENTS` agents, CSR from it on.
Weights = np.ndarray | sp.csr_array


def _wants_sparse(n: int, sparse: bool | None) -> bool:
    """Whether a matrix over `n` agents is held sparse: `sparse`, or by size when None."""
    return n >= SPARSE_MIN_AGENTS if sparse is None else sparse


def as_format(weights: Weights | sp.sparray | sp.spmatrix, sparse: bool | None = None) -> Weights:
    """`weights` as a float64 CSR array when `sparse` (by default: from
    `SPARSE_MIN_AGENTS` agents on), else as a dense float64 array; the same values."""
    n = weights.shape[0]
    if _wants_sparse(n, sparse):
        matrix = sp.csr_array(weights, dtype=float)
        matrix.sum_duplicates()
        matrix.sort_indices()
        return matrix
    return weights.toarray().astype(float) if sp.issparse(weights) else np.array(weights, float)


class NotDoublyStochasticWarning(UserWarning):
    """A mixing rule produced a matrix that is row- but not column-stochastic."""


def _adjacency(graph: nx.Graph) -> np.ndarray:
    n = graph.number_of_nodes()
    if sorted(graph.nodes) != list(range(n)):
        raise MixingMatrixError("graph nodes must be the integers 0..n-1 (use relabel_consecutive)")
    adjacency = nx.to_numpy_array(graph, nodelist=range(n), weight=None, dtype=float)
    np.fill_diagonal(adjacency, 0.0)
    return adjacency


def _sparse_adjacency(graph: nx.Graph) -> sp.csr_array:
    """The adjacency matrix as a CSR array, built from the edges (no n x n array)."""
    n = graph.number_of_nodes()
    if sorted(graph.nodes) != list(range(n)):
        raise MixingMatrixError("graph nodes must be the integers 0..n-1 (use relabel_consecutive)")
    # from the edge array directly: networkx's to_scipy_sparse_array maps every edge through a
    # node index in Python (14 s for 500,000 edges, against 0.3 s)
    edges = np.array(graph.edges(), dtype=np.int64).reshape(-1, 2)
    rows, cols = edges[:, 0], edges[:, 1]
    if not graph.is_directed():
        rows, cols = np.concatenate([rows, cols]), np.concatenate([cols, rows])
    off = rows != cols
    adjacency = sp.csr_array(
        (np.ones(int(off.sum())), (rows[off], cols[off])), shape=(n, n), dtype=float
    )
    adjacency.sum_duplicates()
    adjacency.data[:] = 1.0
    return adjacency


def _with_diagonal(off_diagonal: sp.csr_array) -> sp.csr_array:
    """`off_diagonal` plus, on the diagonal, what its rows leave to one."""
    rest = 1.0 - np.asarray(off_diagonal.sum(axis=1)).ravel()
    return as_format(off_diagonal + sp.diags_array(rest), sparse=True)


def metropolis_hastings(graph: nx.Graph, *, sparse: bool | None = None) -> Weights:
    """Metropolis-Hastings weights `w_ij = 1 / (1 + max(d_i, d_j))` on edges; rest on the
    diagonal.

    Symmetric and doubly stochastic on every undirected graph (Boyd et al., 2006, eq. (5)
    without the lazy half); dpdl's default. CSR when `sparse` (default: by size, module doc).
    """
    require_connected(graph)
    if _wants_sparse(graph.number_of_nodes(), sparse):
        edges = _sparse_adjacency(graph).tocoo()
        degree = np.bincount(edges.row, minlength=graph.number_of_nodes()).astype(float)
        values = 1.0 / (1.0 + np.maximum(degree[edges.row], degree[edges.col]))
        return _with_diagonal(sp.csr_array((values, (edges.row, edges.col)), shape=edges.shape))
    adjacency = _adjacency(graph)
    degree = adjacency.sum(axis=1)
    weights = adjacency / (1.0 + np.maximum.outer(degree, degree))
    np.fill_diagonal(weights, 1.0 - weights.sum(axis=1))
    return weights


def local_degree(graph: nx.Graph, *, sparse: bool | None = None) -> Weights:
    """The papers' rule `w_ij = 1 / (|N_i| + 1)` for `j` in `N_i` and for `j = i`.

    This is the matrix the Whisper D-SGD, CorN-DSGD and DECOR experiments call
    "Metropolis-Hastings". It is row-stochastic, but column-stochastic only on regular graphs: on an
    irregular graph a [`NotDoublyStochasticWarning`][dpdl.graphs.mixing.NotDoublyStochasticWarning]
    is issued, since D-SGD then converges to a weighted (not the uniform) average. CSR when `sparse`
    (default: by size).
    """
    require_connected(graph)
    weights: Weights
    if _wants_sparse(graph.number_of_nodes(), sparse):
        support = _sparse_adjacency(graph) + sp.eye_array(graph.number_of_nodes())
        weights = as_format(
            sp.diags_array(1.0 / np.asarray(support.sum(axis=1)).ravel()) @ support, sparse=True
        )
    else:
        adjacency = _adjacency(graph)
        weights = adjacency + np.eye(adjacency.shape[0])
        weights /= weights.sum(axis=1, keepdims=True)
    column_error = np.abs(np.asarray(weights.sum(axis=0)).ravel() - 1.0).max()
    if column_error > STOCHASTIC_TOL:
        warnings.warn(
            "the 1/(|N_i|+1) rule is only row-stochastic on this irregular graph "
            f"(column sums off by up to {column_error:.3g}); D-SGD will converge to a weighted "
            "average",
            NotDoublyStochasticWarning,
            stacklevel=2,
        )
    return weights


def max_degree(graph: nx.Graph, *, sparse: bool | None = None) -> Weights:
    """Uniform max-degree weights `w_ij = 1 / (d_max + 1)` on edges; rest on the diagonal.

    Symmetric and doubly stochastic; on a complete graph it is the uniform averaging matrix
    `11^T / n` (singular, which the covariance solvers must handle). CSR when `sparse`
    (default: by size).
    """
    require_connected(graph)
    if _wants_sparse(graph.number_of_nodes(), sparse):
        adjacency = _sparse_adjacency(graph)
        return _with_diagonal(adjacency / (adjacency.sum(axis=1).max() + 1.0))
    adjacency = _adjacency(graph)
    weights = adjacency / (adjacency.sum(axis=1).max() + 1.0)
    np.fill_diagonal(weights, 1.0 - weights.sum(axis=1))
    return weights


def sinkhorn_knopp(
    support: nx.Graph | np.ndarray | sp.sparray,
    tol: float = 1e-12,
    max_iter: int = 100_000,
    *,
    sparse: bool | None = None,
) -> Weights:
    """Doubly stochastic scaling `D_1 A D_2` of a nonnegative matrix (Sinkhorn & Knopp, 1967).

    `support` is a graph (then `A` is its adjacency plus the identity; for a directed graph row `i`
    holds `i`'s in-neighbours, the agents it receives from, as in
    [`validate_mixing_matrix`][dpdl.graphs.mixing.validate_mixing_matrix]) or a nonnegative square
    matrix (dense or sparse). Rows and columns are normalised in turn until both sums are within
    `tol` of one. Convergence requires total support, which holds for a strongly connected graph
    with self-loops; otherwise a [`MixingMatrixError`][dpdl.errors.MixingMatrixError] is raised. The
    result is CSR when `sparse` (default: by size, module doc), and the scaling then touches the
    nonzero entries only.

    Written by hand: scipy and networkx have no matrix-balancing routine, and the iteration is
    a few lines of vectorized numpy.
    """
    if isinstance(support, nx.Graph):
        require_connected(support)
        n = support.number_of_nodes()
        matrix = sp.csr_array(
            nx.to_scipy_sparse_array(support, nodelist=range(n), weight=None, format="csr"),
            dtype=float,
        )
        if support.is_directed():
            matrix = matrix.T  # edge j -> i: agent i receives from j, so w_ij > 0
        matrix = matrix + sp.eye_array(n)
    else:
        matrix = support
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise MixingMatrixError(f"Sinkhorn-Knopp needs a square matrix, got shape {matrix.shape}")
    scaled = as_format(matrix, _wants_sparse(matrix.shape[0], sparse))
    entries = scaled.data if sp.issparse(scaled) else scaled
    if (entries < 0).any():
        raise MixingMatrixError("Sinkhorn-Knopp needs a nonnegative matrix")
    if (_sums(scaled, 1) == 0).any() or (_sums(scaled, 0) == 0).any():
        raise MixingMatrixError(
            "Sinkhorn-Knopp needs every row and column to have a positive entry"
        )
    for _ in range(max_iter):
        if sp.issparse(scaled):
            scaled = as_format(sp.diags_array(1.0 / _sums(scaled, 1)) @ scaled, sparse=True)
            scaled = as_format(scaled @ sp.diags_array(1.0 / _sums(scaled, 0)), sparse=True)
        else:
            scaled /= scaled.sum(axis=1, keepdims=True)
            scaled /= scaled.sum(axis=0, keepdims=True)
        if np.abs(_sums(scaled, 1) - 1.0).max() < tol:
            return scaled
    raise MixingMatrixError(
        f"Sinkhorn-Knopp did not converge in {max_iter} iterations: the support lacks total "
        "support "
        "(is the graph strongly connected, with self-loops?)"
    )


def _sums(weights: Weights, axis: int) -> np.ndarray:
    """Row (`axis=1`) or column (`axis=0`) sums of a dense or sparse matrix, as a 1-d array."""
    return np.asarray(weights.sum(axis=axis)).ravel()


def _start(n: int) -> np.ndarray:
    """ARPACK's starting vector: fixed, so a spectral fact is the same on every run."""
    return np.random.default_rng(0).standard_normal(n)


def _sparse_mixing_rate(weights: Weights, doubly_stochastic: bool) -> float:
    """[`mixing_rate`][dpdl.graphs.mixing.mixing_rate] by ARPACK on `W - 1 pi^T` as an operator
    (matrix-vector products with W only): the largest eigenvalue in modulus for a symmetric W
    (Lanczos), the largest singular value for another doubly stochastic W, and for a
    row-stochastic W the left Perron vector `pi` then the spectral radius (Arnoldi). Equal to the
    dense answer to ARPACK's tolerance (machine precision)."""
    n = weights.shape[0]
    if n <= 2:  # ARPACK needs k < n - 1: a 2 x 2 matrix is dense
        return mixing_rate(as_format(weights, sparse=False), doubly_stochastic=doubly_stochastic)
    ones = np.ones(n)
    if doubly_stochastic:
        pi = ones / n
    else:
        _, left = spla.eigs(weights.T, k=1, which="LR", v0=_start(n))
        pi = np.real(left[:, 0])
        pi = pi / pi.sum()

    def matvec(x: np.ndarray) -> np.ndarray:
        x = np.ravel(x)
        return weights @ x - ones * (pi @ x)

    def rmatvec(x: np.ndarray) -> np.ndarray:
        x = np.ravel(x)
        return weights.T @ x - pi * x.sum()

    operator = spla.LinearOperator((n, n), matvec=matvec, rmatvec=rmatvec, dtype=float)
    if not doubly_stochastic:
        values = spla.eigs(operator, k=1, which="LM", v0=_start(n), return_eigenvectors=False)
        return float(np.abs(values).max())
    difference = weights - weights.T
    if (abs(difference).max() if sp.issparse(difference) else np.abs(difference).max()) == 0:
        values = spla.eigsh(operator, k=1, which="LM", v0=_start(n), return_eigenvectors=False)
        return float(np.abs(values).max())
    values = spla.svds(operator, k=1, v0=_start(n), return_singular_vectors=False)
    return float(values.max())


def mixing_rate(
    weights: Weights, *, doubly_stochastic: bool = True, sparse: bool | None = None
) -> float:
    """How fast `W^t` reaches consensus: below one iff it does.

    Doubly stochastic W: the second largest singular value `||W - 11^T/n||_2`, i.e.
    `sqrt(lambda_2(W^T W))`, the papers' convergence condition. Row-stochastic W: the spectral
    radius of `W - 1 pi^T`, with `pi` the stationary distribution (left Perron vector).

    A sparse W, or any W of `SPARSE_MIN_AGENTS` agents or more (or `sparse=True`), is
    handled by ARPACK without a dense decomposition (`_sparse_mixing_rate`).
    """
    n = weights.shape[0]
    if sp.issparse(weights) or _wants_sparse(n, sparse):
        return _sparse_mixing_rate(weights, doubly_stochastic)
    if doubly_stochastic:
        return float(np.linalg.norm(weights - np.full((n, n), 1.0 / n), 2))
    eigenvalues, left = np.linalg.eig(weights.T)
    pi = np.real(left[:, np.argmin(np.abs(eigenvalues - 1.0))])
    pi = pi / pi.sum()
    return float(np.abs(np.linalg.eigvals(weights - np.outer(np.ones(n), pi))).max())


def _check_support(weights: Weights, graph: nx.Graph) -> None:
    """Raise if `weights` puts weight outside the graph's edges plus self-loops."""
    n = weights.shape[0]
    if sp.issparse(weights):
        allowed = _sparse_adjacency(graph) + sp.eye_array(n)
        if graph.is_directed():
            allowed = allowed.T  # row i mixes what i receives, i.e. its in-neighbours
        heavy = weights.tocoo()
        keep = heavy.data > STOCHASTIC_TOL
        rows, cols = heavy.row[keep], heavy.col[keep]
        on_edges = np.asarray(sp.csr_array(allowed)[rows, cols]).ravel() != 0
        outside = np.flatnonzero(~on_edges)
        if len(outside):
            first = outside[np.lexsort((cols[outside], rows[outside]))[0]]
            i, j = rows[first], cols[first]
        else:
            return
    else:
        allowed = nx.to_numpy_array(graph, nodelist=range(n), weight=None) + np.eye(n)
        if graph.is_directed():
            allowed = allowed.T  # row i mixes what i receives, i.e. its in-neighbours
        mask = (weights > STOCHASTIC_TOL) & (allowed == 0)
        if not mask.any():
            return
        i, j = np.argwhere(mask)[0]
    raise MixingMatrixError(
        f"the mixing matrix puts weight {weights[i, j]:.3g} on ({i}, {j}), which is not an edge"
    )


def _support(weights: sp.csr_array) -> sp.csr_array:
    """The 0/1 pattern of `weights`' positive entries."""
    pattern = sp.csr_array(weights, copy=True)
    pattern.data = (pattern.data > 0).astype(float)
    pattern.eliminate_zeros()
    return pattern


def _aperiodic(support: sp.csr_array, members: np.ndarray) -> bool:
    """Whether the chain on the strongly connected class `members` of `support` is aperiodic:
    at once when one member keeps weight on itself, else by networkx's period test."""
    if (support.diagonal()[members] > 0).any():
        return True
    part = support[members][:, members]
    return nx.is_aperiodic(nx.from_scipy_sparse_array(part, create_using=nx.DiGraph))


def _why_not_mixing(weights: sp.csr_array, doubly_stochastic: bool) -> str | None:
    """Why `W^t` does not reach consensus, decided exactly from the support of W in O(nnz), or
    None when it does (Perron-Frobenius; Seneta, *Non-negative Matrices and Markov Chains*, Ch. 4).

    A row-stochastic W reaches `1 pi^T` iff its chain has exactly one closed class and that
    class is aperiodic. For a doubly stochastic W the papers' condition is the second singular
    value below one, i.e. `W^T W` (stochastic, symmetric, with a positive diagonal) irreducible,
    which for a symmetric W is W irreducible and not periodic. So a large graph is validated
    without an eigensolver (an eigenvalue's gap may be tiny while the answer is clear)."""
    support = _support(weights)
    if doubly_stochastic:
        symmetric = abs(weights - weights.T).max() == 0
        gram = support if symmetric else _support(support.T @ support)
        count, _ = csgraph.connected_components(gram, directed=False)
        if count > 1:
            return f"its support splits into {count} groups of agents that never mix"
        if symmetric and not _aperiodic(support, np.arange(weights.shape[0])):
            return "its weights are periodic (a bipartite support with no weight on self-loops)"
        return None
    count, labels = csgraph.connected_components(support, directed=True, connection="strong")
    arcs = support.tocoo()  # i -> j where W_ij > 0: agent i takes in agent j's value
    leaving = labels[arcs.row] != labels[arcs.col]
    closed = np.setdiff1d(np.arange(count), labels[arcs.row[leaving]])
    if len(closed) > 1:
        return f"its chain has {len(closed)} closed classes of agents that never hear each other"
    if not _aperiodic(support, np.flatnonzero(labels == closed[0])):
        return "its weights are periodic (no weight on self-loops and a periodic cycle structure)"
    return None


def _first_entry(weights: Weights, bad: np.ndarray) -> str:
    """` at entry (i, j)`: where the first `bad` entry (a mask of `weights` or of its
    sparse nonzeros) lies."""
    if sp.issparse(weights):
        coo = weights.tocoo()
        index = int(np.flatnonzero(bad)[0])
        return f" at entry ({int(coo.row[index])}, {int(coo.col[index])})"
    i, j = np.argwhere(bad)[0]
    return f" at entry ({int(i)}, {int(j)})"


def validate_mixing_matrix(
    weights: Weights | sp.sparray | sp.spmatrix,
    graph: nx.Graph | None = None,
    *,
    doubly_stochastic: bool = True,
    mixing: bool = True,
) -> Weights:
    """Check that `weights` is a usable mixing matrix and return it as float64: a dense array,
    or a CSR array if it was given sparse.

    Raises [`MixingMatrixError`][dpdl.errors.MixingMatrixError] naming the first violated condition:
    square shape, finite nonnegative entries, unit row sums (and column sums when
    `doubly_stochastic`), support within the graph's edges plus self-loops (when `graph` is given),
    and, when `mixing`, that it mixes (second largest singular value below one, i.e. the iteration
    reaches consensus; one matrix of a time-varying sequence need not). A sparse W, or any W of
    `SPARSE_MIN_AGENTS` agents or more, is checked on its nonzero entries, and whether it mixes is
    decided from its support (`_why_not_mixing`, exact) rather than from an eigensolver.
    """
    try:
        weights = (
            as_format(weights, sparse=True)
            if sp.issparse(weights)
            else np.asarray(weights, dtype=float)
        )
    except (TypeError, ValueError) as error:
        raise MixingMatrixError(
            f"the mixing matrix must be a 2-d array of numbers, got {type(weights).__name__} "
            f"({error})"
        ) from None
    if weights.ndim != 2 or weights.shape[0] != weights.shape[1] or weights.shape[0] == 0:
        raise MixingMatrixError(
            f"the mixing matrix must be square and non-empty, got shape {weights.shape}"
        )
    entries = weights.data if sp.issparse(weights) else weights
    if not np.isfinite(entries).all():
        where = _first_entry(weights, ~np.isfinite(entries))
        raise MixingMatrixError(f"the mixing matrix has non-finite entries{where}")
    if (entries < -STOCHASTIC_TOL).any():
        raise MixingMatrixError(
            f"the mixing matrix has negative entries (min {entries.min():.3g})"
            f"{_first_entry(weights, entries < -STOCHASTIC_TOL)}"
        )
    row_sums = _sums(weights, 1)
    if np.abs(row_sums - 1.0).max() > STOCHASTIC_TOL:
        row = int(np.abs(row_sums - 1.0).argmax())
        raise MixingMatrixError(
            f"the mixing matrix is not row-stochastic: row {row} sums to "
            f"{float(row_sums[row]):.6g} (tolerance {STOCHASTIC_TOL:g})"
        )
    if doubly_stochastic:
        column_sums = _sums(weights, 0)
        if np.abs(column_sums - 1.0).max() > STOCHASTIC_TOL:
            column = int(np.abs(column_sums - 1.0).argmax())
            raise MixingMatrixError(
                f"the mixing matrix is not doubly stochastic: column {column} sums to "
                f"{float(column_sums[column]):.6g} (tolerance {STOCHASTIC_TOL:g})"
            )
    n = weights.shape[0]
    if graph is not None:
        if graph.number_of_nodes() != n:
            raise MixingMatrixError(
                f"the mixing matrix is {n} x {n} but the graph has {graph.number_of_nodes()} nodes"
            )
        _check_support(weights, graph)
    if not mixing or n <= 1:
        return weights
    if sp.issparse(weights) or n >= SPARSE_MIN_AGENTS:
        reason = _why_not_mixing(as_format(weights, sparse=True), doubly_stochastic)
        if reason is not None:
            raise MixingMatrixError(
                f"the mixing matrix does not mix (consensus is not reached): {reason}"
            )
    elif mixing_rate(weights, doubly_stochastic=doubly_stochastic) >= 1.0 - 1e-12:
        raise MixingMatrixError(
            "the mixing matrix does not mix (consensus is not reached): the graph it lives on is "
            "disconnected or the weights are periodic"
        )
    return weights


MIXING_RULES: dict[str, Callable[..., Weights]] = {
    "metropolis-hastings": metropolis_hastings,
    "local-degree": local_degree,
    "max-degree": max_degree,
    "sinkhorn": sinkhorn_knopp,
}


def mixing_matrix(
    graph: nx.Graph, rule: str = "metropolis-hastings", *, sparse: bool | None = None
) -> Weights:
    """The mixing matrix of `graph` under `rule` (a name of
    `dpdl.choices.MIXING_RULE_REGISTRY`), validated (doubly stochastic unless
    `local-degree`): CSR when `sparse`, by default from `SPARSE_MIN_AGENTS` agents on
    (the built-in rules then build it from the edges), else dense."""
    weights = as_format(MIXING_RULE_REGISTRY.get(rule)(graph), sparse)
    return validate_mixing_matrix(weights, graph, doubly_stochastic=rule != "local-degree")
