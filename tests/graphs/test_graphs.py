"""Tests of dpdl.graphs: topologies, mixing rules, validation, spectral facts and the real graphs.

Expected values come from closed forms, networkx's own functions or numpy linear algebra, not from
re-running dpdl's code path.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
import math
import os
import warnings
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from dpdl.errors import DataError, DpdlError, GraphError, MixingMatrixError
from dpdl.graphs import (
    NotDoublyStochasticWarning,
    algebraic_connectivity,
    build_graph,
    complete,
    erdos_renyi,
    exponential,
    local_degree,
    max_degree,
    metropolis_hastings,
    mixing_matrix,
    read_edgelist,
    require_connected,
    ring,
    sinkhorn_knopp,
    spectral_gap,
    star,
    torus,
    validate_mixing_matrix,
    vertex_connectivity,
)
from dpdl.graphs.topologies import LARGE_ERDOS_RENYI, connected_probability

ATOL = 1e-10


def edge_set(graph: nx.Graph) -> set[frozenset]:
    return {frozenset(edge) for edge in graph.edges}


def degrees(graph: nx.Graph) -> list[int]:
    return [d for _, d in sorted(graph.degree())]


def support_mask(graph: nx.Graph) -> np.ndarray:
    """Edges plus diagonal, built from networkx's adjacency (undirected graphs)."""
    n = graph.number_of_nodes()
    return (nx.to_numpy_array(graph, nodelist=range(n), weight=None) + np.eye(n)) > 0


def assert_doubly_stochastic_on(weights: np.ndarray, graph: nx.Graph) -> None:
    assert (weights >= -ATOL).all()
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, atol=1e-9)
    np.testing.assert_allclose(weights.sum(axis=0), 1.0, atol=1e-9)
    assert not (np.abs(weights) > ATOL)[~support_mask(graph)].any(), (
        "weight outside edges + diagonal"
    )


# --------------------------------------------------------------------------- Erdos-Renyi


def test_erdos_renyi_connected_on_integer_nodes():
    for seed in range(5):
        graph = erdos_renyi(30, 0.15, seed=seed)  # threshold log(30)/30 ~ 0.113
        assert nx.is_connected(graph)
        assert sorted(graph.nodes) == list(range(30))
        assert not graph.is_directed()


def test_erdos_renyi_deterministic_for_a_seed_and_different_across_seeds():
    first = erdos_renyi(25, 0.3, seed=7)
    assert edge_set(first) == edge_set(erdos_renyi(25, 0.3, seed=7))
    others = {frozenset(edge_set(erdos_renyi(25, 0.3, seed=s))) for s in range(8, 13)}
    others.add(frozenset(edge_set(first)))
    assert len(others) == 6  # six seeds, six different graphs
    # build_graph("er") is the same draw
    assert edge_set(build_graph("er", n=25, p=0.3, seed=7)) == edge_set(first)


def test_erdos_renyi_accepts_a_seed_sequence():
    a = erdos_renyi(20, 0.3, seed=np.random.SeedSequence(3))
    b = erdos_renyi(20, 0.3, seed=np.random.SeedSequence(3))
    assert edge_set(a) == edge_set(b)


def test_erdos_renyi_edge_density_matches_p():
    # Conditioning on connectivity barely matters well above the threshold: E[edges] ~ p n(n-1)/2.
    n, p = 40, 0.3
    counts = [erdos_renyi(n, p, seed=s).number_of_edges() for s in range(10)]
    expected = p * n * (n - 1) / 2  # 234; sd of the mean over 10 draws ~ 4.5
    assert abs(np.mean(counts) - expected) < 25


def test_erdos_renyi_p_one_is_complete():
    assert edge_set(erdos_renyi(9, 1.0)) == edge_set(nx.complete_graph(9))


def test_erdos_renyi_far_below_threshold_raises():
    with pytest.raises(GraphError, match="no connected Erdos-Renyi"):
        erdos_renyi(50, 0.001, seed=0)


def test_a_large_erdos_renyi_graph_is_drawn_in_linear_time_from_its_seed():
    """From LARGE_ERDOS_RENYI agents on: networkx's O(n + m) generator, the same graph for a seed,
    connected, about p n (n - 1) / 2 edges (10,000 agents of mean degree 15; the quadratic draw
    would visit 5e7 pairs); below it, the pairs drawn one by one as before (a seeded graph of the
    papers' sizes unchanged: the generator's own draw at the attempt's seed)."""
    n, p = 10_000, 15 / 10_000
    graph = erdos_renyi(n, p, seed=3)
    assert nx.is_connected(graph) and graph.number_of_nodes() == n
    assert abs(graph.number_of_edges() - p * n * (n - 1) / 2) < 5 * math.sqrt(p * n * n / 2)
    assert edge_set(erdos_renyi(n, p, seed=3)) == edge_set(graph)
    child = np.random.SeedSequence(np.random.SeedSequence(3).entropy, spawn_key=(0,))
    assert edge_set(graph) == edge_set(
        nx.fast_gnp_random_graph(n, p, seed=np.random.default_rng(child))
    )
    small = erdos_renyi(LARGE_ERDOS_RENYI - 1, 0.01, seed=3)
    assert edge_set(small) == edge_set(
        nx.gnp_random_graph(LARGE_ERDOS_RENYI - 1, 0.01, seed=np.random.default_rng(child))
    )


def test_a_large_erdos_renyi_graph_unlikely_connected_is_refused_before_any_draw():
    """100,000 agents at p = 1e-4 (mean degree 10) are connected with probability about
    exp(-n e^(-10)) = 1.1%: refused at once, naming the probability and the p that would do
    (connected with probability 0.99, by the same formula); directed, twice the exponent."""
    with pytest.raises(GraphError, match=r"probability about 0\.011 .* use p >= 0\.000161"):
        erdos_renyi(100_000, 1e-4)
    n = 100_000
    assert connected_probability(n, 1e-4) == pytest.approx(math.exp(-n * (1 - 1e-4) ** (n - 1)))
    assert connected_probability(n, 1.611193771198e-4) == pytest.approx(0.99, abs=1e-9)
    assert connected_probability(n, 1e-4, directed=True) == pytest.approx(
        connected_probability(n, 1e-4) ** 2
    )
    with pytest.raises(GraphError, match="strongly connected with probability"):
        erdos_renyi(n, 1.2e-4, directed=True)  # undirected: 0.54, directed 0.29


@pytest.mark.parametrize("p", [0.0, -0.1, 1.5, float("nan")])
def test_erdos_renyi_p_out_of_range_raises(p):
    with pytest.raises(GraphError):
        erdos_renyi(10, p)


def test_build_graph_er_needs_n_and_p():
    with pytest.raises(GraphError):
        build_graph("er", n=None, p=0.5)
    with pytest.raises(GraphError):
        build_graph("er", n=10, p=None)


# ------------------------------------------------------------------------- deterministic topologies


@pytest.mark.parametrize("n", [3, 7, 12])
def test_ring(n):
    graph = ring(n)
    assert graph.number_of_nodes() == n and graph.number_of_edges() == n
    assert set(degrees(graph)) == {2}
    assert nx.is_connected(graph)
    assert edge_set(build_graph("ring", n=n)) == edge_set(graph)


def test_ring_too_small():
    with pytest.raises(GraphError):
        ring(2)


def test_torus_16_is_4x4_and_4_regular():
    graph = torus(16)
    assert graph.number_of_nodes() == 16
    assert graph.number_of_edges() == 32  # 4-regular: 16 * 4 / 2
    assert set(degrees(graph)) == {4}
    assert sorted(graph.nodes) == list(range(16))
    assert nx.is_isomorphic(graph, nx.cartesian_product(nx.cycle_graph(4), nx.cycle_graph(4)))


def test_torus_12_is_3x4():
    graph = torus(12)
    assert nx.is_isomorphic(graph, nx.cartesian_product(nx.cycle_graph(3), nx.cycle_graph(4)))
    assert edge_set(build_graph("torus", n=12)) == edge_set(graph)


@pytest.mark.parametrize("n", [7, 13, 8])  # primes factor as 1 x n; 8 only as 2 x 4
def test_torus_without_3x3_factorisation_raises(n):
    with pytest.raises(GraphError):
        torus(n)


def test_torus_rows_must_divide_n():
    with pytest.raises(GraphError):
        torus(12, rows=5)


@pytest.mark.parametrize("n", [2, 5, 10])
def test_complete(n):
    graph = complete(n)
    assert graph.number_of_edges() == n * (n - 1) // 2
    assert set(degrees(graph)) == {n - 1}


@pytest.mark.parametrize("n", [2, 6, 11])
def test_star(n):
    graph = star(n)
    assert graph.number_of_nodes() == n and graph.number_of_edges() == n - 1
    assert graph.degree(0) == n - 1
    assert all(graph.degree(i) == 1 for i in range(1, n))


@pytest.mark.parametrize(
    ("n", "degree"),
    [
        (2, 1),  # hop 1 only, and i+1 == i-1
        (8, 5),  # hops 1, 2, 4: +-1, +-2, 4 (4 == -4 mod 8)
        (16, 7),  # 2 log2(n) - 1 for a power of two
        (10, 6),  # hops 1, 2, 4, 8: 8 == -2 mod 10 adds nothing new
        (12, 6),  # hops 1, 2, 4, 8: 8 == -4 mod 12
    ],
)
def test_exponential_degrees(n, degree):
    graph = exponential(n)
    assert graph.number_of_nodes() == n
    assert set(degrees(graph)) == {degree}
    assert graph.number_of_edges() == n * degree // 2
    # neighbours of i are exactly i +- 2^k mod n
    hops = {(s * 2**k) % n for k in range(int(math.log2(n)) + 1) if 2**k < n for s in (1, -1)} - {0}
    for i in range(n):
        assert set(graph[i]) == {(i + h) % n for h in hops}


def test_build_graph_synthetic_needs_n():
    with pytest.raises(GraphError):
        build_graph("ring")


# --------------------------------------------------------------------------- mixing rules


def irregular_graphs() -> list[nx.Graph]:
    return [star(7), erdos_renyi(15, 0.3, seed=1), build_graph("florentine")]


@pytest.mark.parametrize("rule", [metropolis_hastings, max_degree, sinkhorn_knopp])
def test_symmetric_rules_are_doubly_stochastic_on_edges(rule):
    for graph in [ring(8), torus(9), complete(5), *irregular_graphs()]:
        weights = rule(graph)
        assert weights.shape == (graph.number_of_nodes(),) * 2
        np.testing.assert_allclose(weights, weights.T, atol=1e-9)
        assert_doubly_stochastic_on(weights, graph)
        # and it passes dpdl's own validation on that graph
        validate_mixing_matrix(weights, graph)


def test_metropolis_hastings_formula_on_star():
    n = 6
    weights = metropolis_hastings(star(n))
    # centre degree n-1, leaves degree 1: every edge weight is 1/(1 + (n-1)) = 1/n
    expected = np.zeros((n, n))
    expected[0, 1:] = expected[1:, 0] = 1 / n
    expected[0, 0] = 1 / n  # 1 - (n-1)/n
    expected[np.arange(1, n), np.arange(1, n)] = 1 - 1 / n
    np.testing.assert_allclose(weights, expected, atol=1e-12)


def test_metropolis_hastings_formula_on_er_graph():
    graph = erdos_renyi(15, 0.3, seed=2)
    weights = metropolis_hastings(graph)
    for i in graph.nodes:
        for j in graph.nodes:
            if i != j:
                want = (
                    1 / (1 + max(graph.degree(i), graph.degree(j))) if graph.has_edge(i, j) else 0.0
                )
                assert weights[i, j] == pytest.approx(want, abs=1e-12)
        off = sum(1 / (1 + max(graph.degree(i), graph.degree(j))) for j in graph[i])
        assert weights[i, i] == pytest.approx(1 - off, abs=1e-12)


def test_local_degree_formula_and_warning_on_irregular_graph():
    graph = star(5)
    with pytest.warns(NotDoublyStochasticWarning):
        weights = local_degree(graph)
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, atol=1e-12)
    for i in graph.nodes:
        expected = 1 / (graph.degree(i) + 1)
        for j in graph.nodes:
            want = expected if (j == i or graph.has_edge(i, j)) else 0.0
            assert weights[i, j] == pytest.approx(want, abs=1e-12)
    assert abs(weights.sum(axis=0) - 1).max() > 0.1  # columns really are off
    # validated as row-stochastic only, it mixes
    validate_mixing_matrix(weights, graph, doubly_stochastic=False)
    with pytest.warns(NotDoublyStochasticWarning):
        mixing_matrix(graph, "local-degree")


def test_local_degree_no_warning_on_regular_graph():
    with warnings.catch_warnings():
        warnings.simplefilter("error", NotDoublyStochasticWarning)
        weights = local_degree(ring(7))
    np.testing.assert_allclose(weights, weights.T, atol=1e-12)
    np.testing.assert_allclose(weights[weights > 0], 1 / 3)
    assert_doubly_stochastic_on(weights, ring(7))


@pytest.mark.parametrize("n", [2, 5, 9])
def test_max_degree_on_complete_graph_is_uniform_averaging(n):
    np.testing.assert_allclose(max_degree(complete(n)), np.full((n, n), 1 / n), atol=1e-12)


def test_max_degree_formula_on_star():
    n = 5
    weights = max_degree(star(n))  # d_max = n-1, so edges get 1/n
    assert weights[0, 3] == pytest.approx(1 / n)
    assert weights[2, 2] == pytest.approx(1 - 1 / n)
    assert weights[1, 2] == 0.0


def directed_cycle_with_chord(n: int = 6) -> nx.DiGraph:
    graph = nx.DiGraph()
    graph.add_edges_from([(i, (i + 1) % n) for i in range(n)] + [(0, n // 2)])
    return graph


def test_sinkhorn_on_directed_strongly_connected_graph():
    graph = directed_cycle_with_chord(6)
    assert nx.is_strongly_connected(graph)
    weights = sinkhorn_knopp(graph)
    assert (weights >= 0).all()
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, atol=1e-9)
    np.testing.assert_allclose(weights.sum(axis=0), 1.0, atol=1e-9)
    assert not np.allclose(weights, weights.T)  # genuinely directed
    # support: self-loops and edges, row i = what agent i receives (edge j -> i gives w_ij)
    allowed = nx.to_numpy_array(graph, nodelist=range(6), weight=None).T + np.eye(6)
    assert not (weights > ATOL)[allowed == 0].any()
    # the chord's weight is positive (the chord lies on a cycle, so A + I has total support)
    assert weights[3, 0] > 1e-3
    # so the full pipeline accepts it
    np.testing.assert_allclose(mixing_matrix(graph, "sinkhorn"), weights)


def test_sinkhorn_matrix_input_and_missing_total_support():
    rng = np.random.default_rng(0)
    matrix = rng.uniform(0.1, 1.0, size=(5, 5))
    scaled = sinkhorn_knopp(matrix)
    np.testing.assert_allclose(scaled.sum(axis=0), 1.0, atol=1e-9)
    np.testing.assert_allclose(scaled.sum(axis=1), 1.0, atol=1e-9)
    # D1 A D2: the scaled matrix has rank-one ratio to A
    ratio = scaled / matrix
    np.testing.assert_allclose(ratio, np.outer(ratio[:, 0], ratio[0] / ratio[0, 0]), rtol=1e-8)
    with pytest.raises(MixingMatrixError):
        sinkhorn_knopp(np.array([[1.0, 1.0], [0.0, 1.0]]), max_iter=2000)  # no total support
    with pytest.raises(MixingMatrixError):
        sinkhorn_knopp(np.array([[1.0, -1.0], [1.0, 1.0]]))
    with pytest.raises(MixingMatrixError):
        sinkhorn_knopp(np.ones((2, 3)))


def test_mixing_matrix_unknown_rule():
    with pytest.raises(MixingMatrixError):
        mixing_matrix(ring(5), "no-such-rule")


# --------------------------------------------------------------------------- validation


def test_validate_rejects_non_square():
    with pytest.raises(MixingMatrixError, match="square"):
        validate_mixing_matrix(np.full((2, 3), 1 / 3))


def test_validate_rejects_negative_entries():
    weights = np.array([[1.5, -0.5], [-0.5, 1.5]])  # rows and columns sum to one
    with pytest.raises(MixingMatrixError, match="negative"):
        validate_mixing_matrix(weights)


def test_validate_rejects_non_finite():
    with pytest.raises(MixingMatrixError):
        validate_mixing_matrix(np.array([[np.nan, 0.5], [0.5, 0.5]]))


def test_validate_rejects_non_row_stochastic():
    with pytest.raises(MixingMatrixError, match="not row-stochastic"):
        validate_mixing_matrix(np.full((3, 3), 0.3))


def test_validate_rejects_row_but_not_column_stochastic():
    with pytest.warns(NotDoublyStochasticWarning):
        weights = local_degree(star(5))
    with pytest.raises(MixingMatrixError, match="doubly stochastic"):
        validate_mixing_matrix(weights, star(5), doubly_stochastic=True)


def test_validate_rejects_weight_on_non_edge():
    n = 5
    with pytest.raises(MixingMatrixError, match="not an edge"):
        validate_mixing_matrix(np.full((n, n), 1 / n), ring(n))
    # the same matrix is fine on the complete graph
    validate_mixing_matrix(np.full((n, n), 1 / n), complete(n))


def test_validate_rejects_size_mismatch_with_graph():
    with pytest.raises(MixingMatrixError):
        validate_mixing_matrix(metropolis_hastings(ring(5)), ring(6))


def test_validate_rejects_matrices_that_do_not_mix():
    # block-diagonal averaging on two disconnected components: doubly stochastic, never consensus
    blocks = np.zeros((6, 6))
    blocks[:3, :3] = blocks[3:, 3:] = 1 / 3
    with pytest.raises(MixingMatrixError, match="does not mix"):
        validate_mixing_matrix(blocks)
    with pytest.raises(MixingMatrixError, match="does not mix"):
        validate_mixing_matrix(np.eye(4))
    # periodic: swapping on K2
    with pytest.raises(MixingMatrixError, match="does not mix"):
        validate_mixing_matrix(np.array([[0.0, 1.0], [1.0, 0.0]]), complete(2))
    # while a lazy version of the swap mixes
    validate_mixing_matrix(np.array([[0.5, 0.5], [0.5, 0.5]]), complete(2))


def two_triangles() -> nx.Graph:
    return nx.disjoint_union(nx.cycle_graph(3), nx.cycle_graph(3))


def test_require_connected_rejects_disconnected_and_empty():
    graph = two_triangles()
    with pytest.raises(GraphError, match="disconnected"):
        require_connected(graph)
    with pytest.raises(GraphError):
        require_connected(nx.Graph())
    assert require_connected(ring(4)) is not None


@pytest.mark.parametrize("rule", ["metropolis-hastings", "local-degree", "max-degree", "sinkhorn"])
def test_mixing_rules_reject_disconnected_graph(rule):
    with pytest.raises(GraphError):
        mixing_matrix(two_triangles(), rule)


# --------------------------------------------------------------------------- spectral facts


@pytest.mark.parametrize("n", [3, 6, 10])
def test_algebraic_connectivity_complete(n):
    assert algebraic_connectivity(complete(n)) == pytest.approx(n, abs=1e-9)


@pytest.mark.parametrize("n", [4, 7, 12])
def test_algebraic_connectivity_ring(n):
    assert algebraic_connectivity(ring(n)) == pytest.approx(
        2 - 2 * math.cos(2 * math.pi / n), abs=1e-9
    )


def test_algebraic_connectivity_matches_networkx_and_is_zero_when_disconnected():
    graph = erdos_renyi(25, 0.25, seed=4)
    expected = nx.algebraic_connectivity(graph, method="lanczos", tol=1e-10)
    assert algebraic_connectivity(graph) == pytest.approx(expected, rel=1e-6)
    assert algebraic_connectivity(two_triangles()) == pytest.approx(0.0, abs=1e-9)


def test_spectral_gap_complete_max_degree_is_one():
    assert spectral_gap(max_degree(complete(7))) == pytest.approx(1.0, abs=1e-9)


def test_spectral_gap_ring_metropolis_hastings_closed_form():
    n = 8
    # W = I/3 + (shift + shift^T)/3 is circulant with eigenvalues 1/3 + 2/3 cos(2 pi k / n)
    eigen = [1 / 3 + 2 / 3 * math.cos(2 * math.pi * k / n) for k in range(1, n)]
    expected = 1 - max(abs(e) for e in eigen)
    assert spectral_gap(metropolis_hastings(ring(n))) == pytest.approx(expected, abs=1e-9)


def test_spectral_gap_identity_is_zero():
    assert spectral_gap(np.eye(4)) == pytest.approx(0.0, abs=1e-12)


def test_vertex_connectivity():
    assert vertex_connectivity(ring(9)) == 2
    assert vertex_connectivity(complete(6)) == 5
    assert vertex_connectivity(star(6)) == 1
    assert vertex_connectivity(torus(16)) == 4


# ----------------------------------------------------------------------- real graphs and edge lists


@pytest.mark.parametrize(
    ("name", "nodes", "edges", "reference"),
    [
        ("florentine", 15, 20, nx.florentine_families_graph),
        ("karate", 34, 78, nx.karate_club_graph),
        ("davis", 32, 89, nx.davis_southern_women_graph),
        ("les-miserables", 77, 254, nx.les_miserables_graph),
    ],
)
def test_small_real_graphs(name, nodes, edges, reference):
    graph = build_graph(name)
    assert graph.number_of_nodes() == nodes
    assert graph.number_of_edges() == edges
    assert sorted(graph.nodes) == list(range(nodes))
    assert nx.is_connected(graph)
    # same graph as networkx's copy, nodes relabelled in sorted order of their original labels
    ref = reference()
    mapping = {old: new for new, old in enumerate(sorted(ref.nodes))}
    assert edge_set(graph) == edge_set(nx.relabel_nodes(ref, mapping))


#: sha256 of the JSON of [list(graph.nodes), list(graph.edges)] of each graph as dpdl built it from
#: networkx 3.6.1's CSV exports before it built them from networkx: the agents' numbering and the
#: order in which nodes and edges are visited (which sets, e.g., the order of LPPA's arcs).
NETWORKX_FINGERPRINTS = {
    "florentine": "a056a3e8d698e7f8b8523ab08f8498afbb84ad9bc37a7b4a9f5c49d3a4cc5adb",
    "karate": "fc001f55abf580e28a99cbd279dea16f1ce7b57cf15a88084e84486f5bbf0d8b",
    "davis": "6ced097571741bb887aa6961c77cd2fed9a70434e670a01debb70fce7b2d3005",
    "les-miserables": "2b99a2ff8269a8d0fc8824a454ae8570811f86fcb071e466e72f7d5a309f77d4",
}


def _fingerprint(graph: nx.Graph) -> str:
    return hashlib.sha256(json.dumps([list(graph.nodes), list(graph.edges)]).encode()).hexdigest()


@pytest.mark.parametrize("name", list(NETWORKX_FINGERPRINTS))
def test_networkx_graphs_are_the_ones_read_from_csv_before(name):
    graph = build_graph(name)
    assert _fingerprint(graph) == NETWORKX_FINGERPRINTS[name]
    assert not any(
        data for _, _, data in graph.edges(data=True)
    )  # no weights to enter weighted matrices


@pytest.mark.full_data
@pytest.mark.parametrize(
    ("name", "file"),
    [
        ("florentine", "florentine_families"),
        ("karate", "karate_club"),
        ("davis", "davis_southern_women"),
        ("les-miserables", "les_miserables"),
    ],
)
def test_networkx_graphs_equal_the_csv_exports(name, file):
    """Where the old layout's CSV exports are at hand (networkx_graphs/ in DPDL_DATA_DIR), build the
    graph as dpdl did from them and compare node order and edge order exactly."""
    path = Path(os.environ["DPDL_DATA_DIR"]) / "networkx_graphs" / f"{file}.csv"
    if not path.is_file():
        pytest.skip(f"no {path}")
    with path.open(newline="") as handle:
        edges = [(row["source"], row["target"]) for row in csv.DictReader(handle)]
    if all(u.isdigit() and v.isdigit() for u, v in edges):
        edges = [(int(u), int(v)) for u, v in edges]
    old = nx.Graph()
    old.add_edges_from(edges)
    old = nx.relabel_nodes(old, {label: k for k, label in enumerate(sorted(old.nodes))})
    new = build_graph(name)
    assert list(new.nodes) == list(old.nodes) and list(new.edges) == list(old.edges)
    assert _fingerprint(old) == NETWORKX_FINGERPRINTS[name]


def test_karate_keeps_zacharys_numbering():
    graph = build_graph("karate")
    # member 0 (Mr. Hi) and 33 (the officer) are the two hubs, degrees 16 and 17
    assert graph.degree(0) == 16 and graph.degree(33) == 17


def test_facebook_ego_414_is_its_largest_component():
    graph = build_graph("facebook-ego-414")
    assert nx.is_connected(graph)
    assert graph.number_of_nodes() == 148
    assert graph.number_of_edges() == 1692
    assert sorted(graph.nodes) == list(range(148))


def test_facebook_combined_graph():
    graph = build_graph("facebook")
    assert graph.number_of_nodes() == 4039 and graph.number_of_edges() == 88234
    assert sorted(graph.nodes) == list(range(4039))


@pytest.mark.full_data
def test_every_facebook_ego_network_is_a_connected_part_of_the_combined_graph():
    """(nodes, edges) of each ego network's largest component, as dpdl read them from the ego files
    when this test was written; fewer nodes than the ego has friends in the combined graph (alters
    without a friend among the others, and smaller components, are left out)."""
    sizes = {
        0: (324, 2514),
        107: (1034, 26749),
        348: (224, 3192),
        414: (148, 1692),
        686: (168, 1656),
        698: (40, 220),
        1684: (775, 14006),
        1912: (744, 30023),
        3437: (532, 4812),
        3980: (44, 138),
    }
    combined = build_graph("facebook")
    for ego, (nodes, edges) in sizes.items():
        graph = build_graph(f"facebook-ego-{ego}")
        assert (graph.number_of_nodes(), graph.number_of_edges()) == (nodes, edges)
        assert nx.is_connected(graph) and nodes < combined.degree(ego)


def test_a_missing_ego_network_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setenv("DPDL_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("DPDL_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(
        DataError,
        match=r"data set 'facebook_ego' not found: no facebook/ego/107.edges or "
        r"facebook/ego/107.edges.gz .*'dpdl data fetch facebook_ego'",
    ):
        build_graph("facebook-ego-107")


def test_gnutella_largest_component():
    graph = build_graph("gnutella")
    assert nx.is_connected(graph)
    assert graph.number_of_nodes() == 6299
    # 20777 undirected edges in all; the 2 nodes left out share one edge
    assert graph.number_of_edges() == 20776
    assert sorted(graph.nodes) == list(range(6299))


def test_read_edgelist_relabels_and_skips_comments(tmp_path):
    path = tmp_path / "edges.txt"
    path.write_text("# a comment\n% another comment\n\n30 5\n10 30 1\n20 10\n7 7\n10 20 {}\n")
    graph = read_edgelist(path)
    # the path 5 - 30 - 10 - 20; the self-loop 7-7 is dropped (with it node 7), the repeated 10-20
    # is one edge. Ids 5, 10, 20, 30 -> 0, 1, 2, 3 in numeric order (string order would differ).
    assert sorted(graph.nodes) == [0, 1, 2, 3]
    assert edge_set(graph) == {frozenset(e) for e in [(0, 3), (3, 1), (1, 2)]}
    assert nx.number_of_selfloops(graph) == 0


def test_read_edgelist_gzip(tmp_path):
    path = tmp_path / "edges.txt.gz"
    with gzip.open(path, "wt") as handle:
        handle.write("# header\n100 200\n200 300\n300 100\n")
    graph = read_edgelist(path)
    assert edge_set(graph) == edge_set(nx.cycle_graph(3))


def test_read_edgelist_bad_lines(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("1 2\na b\n")
    with pytest.raises(GraphError, match="integers"):
        read_edgelist(bad)
    short = tmp_path / "short.txt"
    short.write_text("1 2\n3\n")
    with pytest.raises(GraphError):
        read_edgelist(short)
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n")
    with pytest.raises(GraphError):
        read_edgelist(empty)


def test_build_graph_edgelist(tmp_path):
    good = tmp_path / "good.txt"
    good.write_text("1 2\n2 3\n3 4\n4 1\n")
    assert edge_set(build_graph(f"edgelist:{good}")) == edge_set(nx.cycle_graph(4))

    with pytest.raises(GraphError, match="not found"):
        build_graph(f"edgelist:{tmp_path / 'missing.txt'}")

    disconnected = tmp_path / "disconnected.txt"
    disconnected.write_text("0 1\n1 2\n2 0\n5 6\n")
    with pytest.raises(GraphError, match="disconnected"):
        build_graph(f"edgelist:{disconnected}")


@pytest.mark.parametrize("name", ["no-such-graph", "facebook-ego-abc", "Karate"])
def test_unknown_graph_names(name):
    with pytest.raises(GraphError, match=r"unknown|facebook-ego-<id>"):
        build_graph(name)


def test_unknown_facebook_ego_is_a_dpdl_error():
    with pytest.raises(DpdlError):
        build_graph("facebook-ego-12345")
