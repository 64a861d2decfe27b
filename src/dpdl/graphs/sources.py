"""The built-in graph sources of `dpdl.choices.GRAPH_SOURCES`: each is called
`source(spec, n, p, seed)` with the graph's name as given and returns a networkx graph."""

from __future__ import annotations

import networkx as nx
import numpy as np

from dpdl.errors import GraphError
from dpdl.graphs import topologies

__all__ = ["complete", "er", "er_directed", "exponential", "real", "ring", "star", "torus"]

Seed = int | np.random.SeedSequence


def _agents(spec: str, n: int | None) -> int:
    if n is None:
        raise GraphError(f"graph {spec!r} needs a number of agents n")
    return n


def er(spec: str, n: int | None, p: float | None, seed: Seed) -> nx.Graph:
    agents = _agents(spec, n)
    if p is None:
        raise GraphError("an Erdos-Renyi graph needs an edge probability p")
    return topologies.erdos_renyi(agents, p, seed)


def er_directed(spec: str, n: int | None, p: float | None, seed: Seed) -> nx.Graph:
    """A strongly connected directed G(n, p): every ordered pair an arc with probability p (LPPA's
    topologies, mixed by Sinkhorn-Knopp)."""
    agents = _agents(spec, n)
    if p is None:
        raise GraphError("an Erdos-Renyi graph needs an edge probability p")
    return topologies.erdos_renyi(agents, p, seed, directed=True)


def ring(spec: str, n: int | None, p: float | None, seed: Seed) -> nx.Graph:
    return topologies.ring(_agents(spec, n))


def torus(spec: str, n: int | None, p: float | None, seed: Seed) -> nx.Graph:
    return topologies.torus(_agents(spec, n))


def complete(spec: str, n: int | None, p: float | None, seed: Seed) -> nx.Graph:
    return topologies.complete(_agents(spec, n))


def star(spec: str, n: int | None, p: float | None, seed: Seed) -> nx.Graph:
    return topologies.star(_agents(spec, n))


def exponential(spec: str, n: int | None, p: float | None, seed: Seed) -> nx.Graph:
    return topologies.exponential(_agents(spec, n))


def real(spec: str, n: int | None, p: float | None, seed: Seed) -> nx.Graph:
    """A real graph ([`dpdl.graphs.topologies.real_graph`][dpdl.graphs.topologies.real_graph];
    `n`, `p`, `seed` unused)."""
    return topologies.require_connected(topologies.real_graph(spec), f"graph {spec!r}")
