"""Graphs: topologies (synthetic and real), mixing matrices, spectral facts.

networkx in, numpy out: dense arrays below `SPARSE_MIN_AGENTS` agents, a CSR mixing matrix from it
on ([`dpdl.graphs.mixing`][dpdl.graphs.mixing]). [`build_graph`][dpdl.graphs.build_graph] turns the
CLI's graph specification into a graph.
"""

from __future__ import annotations

import numbers

import networkx as nx
import numpy as np

from dpdl.choices import GRAPH_SOURCES, SYNTHETIC_GRAPHS
from dpdl.errors import GraphError
from dpdl.graphs.mixing import (
    MIXING_RULES,
    SPARSE_MIN_AGENTS,
    NotDoublyStochasticWarning,
    Weights,
    as_format,
    local_degree,
    max_degree,
    metropolis_hastings,
    mixing_matrix,
    mixing_rate,
    sinkhorn_knopp,
    validate_mixing_matrix,
)
from dpdl.graphs.readers import GRAPH_FILE_FORMATS, graph_file_spec, read_graph_file
from dpdl.graphs.spectral import (
    GraphSummary,
    algebraic_connectivity,
    spectral_gap,
    summarize,
    vertex_connectivity,
)
from dpdl.graphs.topologies import (
    REAL_GRAPHS,
    complete,
    erdos_renyi,
    exponential,
    read_edgelist,
    real_graph,
    require_connected,
    ring,
    star,
    torus,
)

__all__ = [
    "GRAPH_FILE_FORMATS",
    "GRAPH_SOURCES",
    "MIXING_RULES",
    "REAL_GRAPHS",
    "SPARSE_MIN_AGENTS",
    "SYNTHETIC_GRAPHS",
    "GraphSummary",
    "NotDoublyStochasticWarning",
    "Weights",
    "algebraic_connectivity",
    "as_format",
    "build_graph",
    "complete",
    "erdos_renyi",
    "exponential",
    "local_degree",
    "max_degree",
    "metropolis_hastings",
    "mixing_matrix",
    "mixing_rate",
    "read_edgelist",
    "read_graph_file",
    "real_graph",
    "require_connected",
    "ring",
    "sinkhorn_knopp",
    "spectral_gap",
    "star",
    "summarize",
    "torus",
    "validate_mixing_matrix",
    "vertex_connectivity",
]


def build_graph(
    spec: str, n: int | None = None, p: float | None = None, seed: int | np.random.SeedSequence = 0
) -> nx.Graph:
    """Graph from a specification: a synthetic name (with `n`, and `p` for `er`), a real
    graph name (`REAL_GRAPHS`), another name of `GRAPH_SOURCES`, or a graph file,
    `FORMAT:PATH` or `file:PATH` (`GRAPH_FILE_FORMATS`). Real graphs and graph files are
    checked to be connected.
    """
    if not isinstance(spec, str):
        raise GraphError(f"graph: expected a name or FORMAT:PATH, got {spec!r}")
    if n is not None and (isinstance(n, bool) or not isinstance(n, numbers.Integral)):
        raise GraphError(f"n: the number of agents must be an integer, got {n!r}")
    if (file := graph_file_spec(spec)) is not None:
        return require_connected(read_graph_file(file[1], file[0]), f"graph in {spec}")
    if spec not in GRAPH_SOURCES:  # the real graphs' own message, listing them
        return require_connected(real_graph(spec), f"graph {spec!r}")
    return GRAPH_SOURCES.get(spec)(spec, n, p, seed)
