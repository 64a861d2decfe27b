"""The certified accountant's routes for large designs against its dense route and 60 digits.

A sparse factor (DECOR's column per edge, from about a million entries on) is read through its
sparse Gram: Cholesky's inverse from LAPACK's ``potri``, the residual and its rounding by sparse
products, rounding constants that count the terms a sparse row sums. Identity targets (every
agent seen on its own) read Z's diagonal and rows where products with the identity did. A factor
with nothing off its diagonal (DECOR with ``sigma_cor = 0``) is independent noise, read in closed
form. Each is checked here against the dense route (the old one) and against the exact value of
the factor's floats in 60-digit arithmetic (mpmath): never below it, and within stated tolerances
of the dense route.
"""

from __future__ import annotations

import mpmath as mp
import networkx as nx
import numpy as np
import pytest
from scipy import sparse

from dpdl.accounting import AgentLevel, account
from dpdl.accounting.accountant import view_sensitivities
from dpdl.accounting.sensitivity import _gram, _inverse_bounds, factor_sensitivities
from dpdl.graphs import complete, erdos_renyi, ring
from dpdl.mechanisms import LocalDP
from dpdl.mechanisms.decor import Decor
from dpdl.threats import Eavesdropper

mp.mp.dps = 60


def exact_units(factor: np.ndarray) -> np.ndarray:
    """``sqrt([(B B^T)^-1]_ii)`` of the float factor B read exactly, in 60 digits, per row."""
    rows = mp.matrix(factor.tolist())
    inverse = mp.inverse(rows * rows.T)
    return np.array([mp.sqrt(inverse[i, i]) for i in range(rows.rows)], dtype=object)


def decor_factor(graph: nx.Graph, private: float, shared: float) -> np.ndarray:
    """``[s I | c Delta]``: DECOR's factor, one column per edge."""
    incidence = nx.incidence_matrix(graph, oriented=True).toarray()
    return np.hstack([private * np.eye(graph.number_of_nodes()), shared * incidence])


#: (graph, private s, shared c): well-conditioned, a ring where the dense route takes its QR
#: route, and DECOR on complete graphs at cond(R) = 1e8 and 1e10.
FACTORS = [
    (erdos_renyi(12, 0.4, 1), 1.0, 1.0),
    (erdos_renyi(14, 0.5, 2), 0.3, 0.01),
    (ring(9), 1.0, 30.0),
    (complete(10), 1e-3, 1.0),
    (complete(14), 1e-4, 2.0),
]


@pytest.mark.parametrize(("graph", "private", "shared"), FACTORS)
def test_the_sparse_route_is_certified_and_never_looser_than_the_dense_one(
    graph: nx.Graph, private: float, shared: float
) -> None:
    """Never below the 60-digit value; at most 1e-10 above the dense route (which tightens a
    loose Gram bound by its QR route, skipped where the sparse Gram bound is tight to 1e-11),
    and below it where the dense route's rounding constants, which count every column of B, are
    loose (by 2e-4 at cond(R) = 1e10)."""
    factor = decor_factor(graph, private, shared)
    dense = factor_sensitivities(factor)
    fast = factor_sensitivities(sparse.csr_array(factor))
    for bound, truth in zip(fast, exact_units(factor), strict=True):
        assert mp.mpf(float(bound)) >= truth
    assert (fast <= dense * (1.0 + 1e-10)).all()
    assert (fast >= dense * (1.0 - 5e-4)).all()


def test_near_singular_sparse_views_are_never_finite_below_the_truth() -> None:
    graph = erdos_renyi(8, 0.5, seed=3)
    for private in (1e-2, 1e-5, 1e-8, 1e-12, 0.0):
        factor = decor_factor(graph, private, 1.0)
        bounds = factor_sensitivities(sparse.csr_array(factor))
        if private == 0.0:
            assert np.isinf(bounds).all()
            continue
        for bound, truth in zip(bounds, exact_units(factor), strict=True):
            assert mp.mpf(float(bound)) >= truth


def test_identity_targets_give_the_products_with_the_identity_to_the_bit() -> None:
    """Reading Z's diagonal and rows instead of multiplying by the identity changes no bit."""
    factor = decor_factor(erdos_renyi(30, 0.2, 4), 0.7, 3.0)
    sigma, error = _gram(factor, None)
    fast = _inverse_bounds(sigma, error, None)
    product = _inverse_bounds(sigma, error, np.eye(30))
    for ours, theirs in zip(fast, product, strict=True):
        assert np.array_equal(ours, theirs)


def test_a_factor_with_nothing_off_its_diagonal_is_read_in_closed_form() -> None:
    """DECOR without correlation is LDP: the same certified value as LDP of the same scale, the
    next float above 1 / s, never below the 60-digit value, dense or sparse."""
    stds = np.array([0.3, 1.7, 2.0, 1e-3])
    for factor in (np.diag(stds), sparse.diags_array(stds).tocsr()):
        bounds = view_sensitivities(factor, Eavesdropper())
        assert np.array_equal(bounds, np.nextafter(1.0 / stds, np.inf))
        for bound, std in zip(bounds, stds, strict=True):
            assert mp.mpf(float(bound)) >= 1 / mp.mpf(float(std))
    graph = erdos_renyi(12, 0.4, 1)
    relation = AgentLevel(0.1)
    decor = account(Decor(graph, 1.3, 0.0), Eavesdropper(), relation, 100, 1e-5)
    ldp = account(LocalDP(12, 1.3), Eavesdropper(), relation, 100, 1e-5)
    assert decor.mu_step == ldp.mu_step and decor.epsilon == ldp.epsilon
