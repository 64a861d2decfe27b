"""Communication topologies: synthetic generators and real graphs (networkx's classic social graphs,
and SNAP's, read from the data folders of `dpdl.data.paths`).

Every function returns an undirected `networkx.Graph` (a directed one where asked) whose
nodes are the integers `0..n-1` (agents first, as everywhere in dpdl). Generators that can produce
a disconnected graph either guarantee connectivity or raise [`GraphError`][dpdl.errors.GraphError].
"""

from __future__ import annotations

import csv
import gzip
import math
from pathlib import Path

import networkx as nx
import numpy as np

from dpdl.choices import REAL_GRAPHS
from dpdl.data.paths import data_file
from dpdl.errors import GraphError
from dpdl.files import require_regular

__all__ = [
    "LARGE_ERDOS_RENYI",
    "REAL_GRAPHS",
    "complete",
    "connected_probability",
    "erdos_renyi",
    "exponential",
    "read_edgelist",
    "real_graph",
    "relabel_consecutive",
    "require_connected",
    "ring",
    "star",
    "torus",
]


def relabel_consecutive(graph: nx.Graph) -> nx.Graph:
    """Relabel the nodes to `0..n-1` in sorted order of their original labels (`graph` itself
    when they are those already: a copy of a large graph takes seconds)."""
    try:
        order = sorted(graph.nodes)
    except TypeError:  # mixed label types: keep insertion order
        order = list(graph.nodes)
    if order == list(range(len(order))):
        return graph
    return nx.relabel_nodes(graph, {old: new for new, old in enumerate(order)}, copy=True)


def require_connected(graph: nx.Graph, what: str = "graph") -> nx.Graph:
    """Return `graph` unchanged if it is connected, else raise a
    [`GraphError`][dpdl.errors.GraphError]."""
    n = graph.number_of_nodes()
    if n == 0:
        raise GraphError(f"the {what} has no nodes")
    connected = nx.is_strongly_connected(graph) if graph.is_directed() else nx.is_connected(graph)
    if not connected:
        if graph.is_directed():
            parts = nx.number_strongly_connected_components(graph)
        else:
            parts = nx.number_connected_components(graph)
        raise GraphError(
            f"the {what} is disconnected ({parts} components over {n} nodes); decentralized "
            "averaging cannot reach consensus: use a connected graph or keep its largest component"
        )
    return graph


#: From this many agents on, G(n, p) is drawn by networkx's ``fast_gnp_random_graph`` (Batagelj
#: and Brandes 2005, O(n + m): 100,000 agents in seconds, where ``gnp_random_graph`` visits all
#: n(n-1)/2 pairs), and a graph unlikely to be connected is refused before any draw. Below it the
#: pairs are drawn as before, so that every seeded graph of the papers' sizes stays the same.
LARGE_ERDOS_RENYI = 1000


def connected_probability(n: int, p: float, directed: bool = False) -> float:
    """About the probability that G(n, p) is connected (strongly, when `directed`): that no node
    is isolated (no node without an arc in or out), `exp(-n (1 - p)^(n - 1))` (twice the
    exponent directed), which it approaches as n grows (Erdos and Renyi 1959; Bollobas, Random
    Graphs, Thm. 7.3)."""
    isolated = n * math.exp((n - 1) * math.log1p(-p)) if p < 1.0 else 0.0
    return math.exp(-(2.0 if directed else 1.0) * isolated)


def _connecting_p(n: int, directed: bool, probability: float = 0.99) -> float:
    """The p at which [`connected_probability`][dpdl.graphs.topologies.connected_probability] is
    `probability`."""
    isolated = -math.log(probability) / (2.0 if directed else 1.0)
    return -math.expm1(math.log(isolated / n) / (n - 1))


def erdos_renyi(
    n: int,
    p: float,
    seed: int | np.random.SeedSequence = 0,
    max_tries: int = 1000,
    directed: bool = False,
) -> nx.Graph:
    """Erdos-Renyi G(n, p), conditioned on being connected (strongly connected when `directed`:
    every ordered pair is then an arc with probability p, as LPPA's directed topologies need).

    Connectivity is ensured by rejection sampling: graphs are drawn with independent seeds until one
    is connected, so the result is distributed exactly as G(n, p) conditioned on connectivity (no
    edges are added by hand). If `max_tries` draws are all disconnected (`p` far below `log(n)/n`),
    a [`GraphError`][dpdl.errors.GraphError] says so. From `LARGE_ERDOS_RENYI` agents on, the draw
    is O(n + m), and a graph connected with probability under 1/2
    ([`connected_probability`][dpdl.graphs.topologies.connected_probability]) is refused before any
    draw, naming the p that would do.
    """
    if n < 1:
        raise GraphError(f"an Erdos-Renyi graph needs n >= 1 nodes, got {n}")
    if not 0.0 < p <= 1.0:
        raise GraphError(f"the Erdos-Renyi edge probability must be in (0, 1], got p={p}")
    draw = nx.gnp_random_graph
    if n >= LARGE_ERDOS_RENYI:
        draw = nx.fast_gnp_random_graph
        if (chance := connected_probability(n, p, directed)) < 0.5:
            strongly, factor = ("strongly ", "2 ") if directed else ("", "")
            raise GraphError(
                f"an Erdos-Renyi graph with n={n}, p={p:g} is {strongly}connected with "
                f"probability about {chance:.2g} (no node isolated: exp(-{factor}n (1 - p)^(n - "
                f"1))); use p >= {_connecting_p(n, directed):.3g} (connected with probability "
                "0.99), or a topology connected by construction (ring, torus, exponential)"
            )
    seq = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    for attempt in range(
        max_tries
    ):  # children derived without spawn(): the caller's sequence is not mutated
        child = np.random.SeedSequence(seq.entropy, spawn_key=(*seq.spawn_key, attempt))
        graph = draw(n, p, seed=np.random.default_rng(child), directed=directed)
        if (nx.is_strongly_connected if directed else nx.is_connected)(graph):
            return graph
    raise GraphError(
        f"no {'strongly ' if directed else ''}connected Erdos-Renyi graph with n={n}, p={p} in "
        f"{max_tries} draws; the connectivity threshold is about log(n)/n = "
        f"{math.log(max(n, 2)) / n:.3f}"
    )


def ring(n: int) -> nx.Graph:
    """Cycle over `n >= 3` agents."""
    if n < 3:
        raise GraphError(f"a ring needs n >= 3 nodes, got {n}")
    return nx.cycle_graph(n)


def torus(n: int, rows: int | None = None) -> nx.Graph:
    """2-d torus grid (periodic lattice) with `n = rows * cols` agents.

    Without `rows` the most square factorisation of `n` is used (n=16 gives 4 x 4).
    """
    if rows is None:
        rows = max(r for r in range(1, math.isqrt(n) + 1) if n % r == 0)
    if rows < 1 or n % rows:
        raise GraphError(f"a torus with n={n} nodes cannot have {rows} rows")
    cols = n // rows
    if rows < 3 or cols < 3:
        raise GraphError(
            f"a 2-d torus needs at least 3 rows and 3 columns; n={n} factors only as {rows} x "
            f"{cols}"
        )
    return relabel_consecutive(nx.grid_2d_graph(rows, cols, periodic=True))


def complete(n: int) -> nx.Graph:
    """Complete graph over `n >= 2` agents."""
    if n < 2:
        raise GraphError(f"a complete graph needs n >= 2 nodes, got {n}")
    return nx.complete_graph(n)


def star(n: int) -> nx.Graph:
    """Star with centre 0 and `n - 1` leaves."""
    if n < 2:
        raise GraphError(f"a star needs n >= 2 nodes, got {n}")
    return nx.star_graph(n - 1)


def exponential(n: int) -> nx.Graph:
    """Static exponential graph: agent i is linked to `i +/- 2^k mod n` for `2^k < n`.

    The undirected version of the exponential graph of Ying et al. (NeurIPS 2021), degree about
    `2 log2(n)`.
    """
    if n < 2:
        raise GraphError(f"an exponential graph needs n >= 2 nodes, got {n}")
    graph = nx.empty_graph(n)
    hop = 1
    while hop < n:
        graph.add_edges_from((i, (i + hop) % n) for i in range(n) if (i + hop) % n != i)
        hop *= 2
    return graph


def _unweighted(path: Path, lineno: int, extra: list[str]) -> None:
    """Refuse the columns after `u v` on line `lineno` unless they say "no weight"."""
    if not extra or extra == ["{}"]:
        return
    try:
        weight = float(extra[0]) if len(extra) == 1 else None
    except ValueError:
        weight = None
    if weight == 1.0:
        return
    what = f"weight {extra[0]}" if weight is not None else f"extra columns {' '.join(extra)!r}"
    raise GraphError(
        f"{path}:{lineno}: {what} after the edge: an edge list gives edges only (the mixing rule "
        "sets the weights, so weights would be ignored); drop the column, or pass your own mixing "
        "matrix to dpdl.fit"
    )


def read_edgelist(path: str | Path) -> nx.Graph:
    """Read an undirected graph from a whitespace-separated edge list with integer node ids.

    Lines starting with `#` or `%` are comments; `.gz` files are read directly. A third column may
    only say that the edge is unweighted (a weight of 1, or networkx's empty `{}`): the mixing rule
    sets the weights, so other weights would be silently dropped, and are an error. Node ids are
    relabelled to `0..n-1` in increasing order. A binary file is a
    [`GraphError`][dpdl.errors.GraphError], not a decoding error from deep inside the reader.
    """
    path = require_regular(Path(path), "edge list file", GraphError)
    opener = gzip.open if path.suffix == ".gz" else open
    graph = nx.Graph()
    try:
        with opener(path, "rt", encoding="utf-8") as handle:
            for lineno, line in enumerate(handle, start=1):
                fields = line.split()
                if not fields or fields[0][0] in "#%":
                    continue
                if len(fields) < 2:
                    hint = (
                        " (a node count first, as in decentralizepy's files? name it "
                        "decentralizepy:PATH)"
                        if (graph.number_of_nodes() == 0 and fields[0].isdigit())
                        else ""
                    )
                    raise GraphError(
                        f"{path}:{lineno}: expected two integer node ids, got "
                        f"{line.strip()!r}{hint}"
                    )
                try:
                    u, v = int(fields[0]), int(fields[1])
                except ValueError:
                    raise GraphError(
                        f"{path}:{lineno}: node ids must be integers, got {line.strip()!r}"
                    ) from None
                _unweighted(path, lineno, fields[2:])
                if u != v:
                    graph.add_edge(u, v)
    except UnicodeDecodeError:
        raise GraphError(
            f"{path} is not a text edge list: it holds bytes that are not UTF-8 text"
        ) from None
    except (OSError, EOFError) as error:  # gzip.BadGzipFile, a truncated .gz
        raise GraphError(f"{path} is not a readable gzip edge list ({error})") from None
    if graph.number_of_nodes() == 0:
        raise GraphError(f"edge list {path} has no edges")
    return relabel_consecutive(graph)


#: The classic social graphs networkx builds from its own source, by CLI name.
NETWORKX_GRAPHS = {
    "florentine": nx.florentine_families_graph,
    "karate": nx.karate_club_graph,
    "davis": nx.davis_southern_women_graph,
    "les-miserables": nx.les_miserables_graph,
}


def _networkx_graph(name: str) -> nx.Graph:
    """networkx's graph `name`, its edges only, nodes relabelled in sorted order of their labels
    (Zachary's numbers for karate, so agent i is member i; names otherwise).

    The edges are added in networkx's order and without their attributes: karate's and Les
    Miserables' `weight` would otherwise enter every matrix built with networkx's default
    weighting, and the node and edge order is then the one the graph had when it was read from a
    CSV export of networkx 3.6.1 (the test suite checks both against a fingerprint)."""
    graph = nx.Graph()
    graph.add_edges_from(NETWORKX_GRAPHS[name]().edges())
    return relabel_consecutive(graph)


def _largest_component(graph: nx.Graph) -> nx.Graph:
    nodes = max(nx.connected_components(graph), key=len)
    return relabel_consecutive(graph.subgraph(nodes).copy())


def _breadth_first_sample(graph: nx.Graph, size: int) -> nx.Graph:
    """The subgraph induced by the first `size` nodes a breadth-first search reaches from the
    highest-degree node (lowest id on a tie): connected, and deterministic."""
    if size > graph.number_of_nodes():
        raise GraphError(f"cannot sample {size} nodes from a graph of {graph.number_of_nodes()}")
    start = max(graph.nodes, key=lambda node: (graph.degree(node), -node))
    order = [start, *(v for _, v in nx.bfs_edges(graph, start, sort_neighbors=sorted))]
    return relabel_consecutive(graph.subgraph(order[:size]).copy())


#: The egos of SNAP ego-Facebook.
FACEBOOK_EGOS = (0, 107, 348, 414, 686, 698, 1684, 1912, 3437, 3980)


def _facebook_ego(ego: int) -> nx.Graph:
    """Ego network `ego` of SNAP ego-Facebook: the alters' friendships (largest component), from
    the ego's own `<ego>.edges` file.

    Not derived from the combined graph: there the alters of 6 of the 10 egos share 1 to 29 more
    edges (friendships recorded in another ego's network), so the graphs would differ.
    """
    return _largest_component(
        read_edgelist(
            data_file("facebook_ego", f"facebook/ego/{ego}.edges", f"facebook/ego/{ego}.edges.gz")
        )
    )


def real_graph(name: str) -> nx.Graph:
    """The real graph named `name` in `REAL_GRAPHS` (a [`DataError`][dpdl.errors.DataError] says
    how to get its data set where it is missing)."""
    if name in NETWORKX_GRAPHS:
        return _networkx_graph(name)
    if name.startswith("facebook-ego-"):
        suffix = name.removeprefix("facebook-ego-")
        if not suffix.isdigit():
            raise GraphError(f"facebook ego networks are named facebook-ego-<id>, got {name!r}")
        if int(suffix) not in FACEBOOK_EGOS:
            raise GraphError(
                f"SNAP ego-Facebook has no ego {suffix}; its egos: "
                f"{', '.join(map(str, FACEBOOK_EGOS))}"
            )
        return _facebook_ego(int(suffix))
    if name == "facebook":
        return read_edgelist(data_file("facebook", "facebook/facebook_combined.txt.gz"))
    if name == "gnutella":
        return _largest_component(
            read_edgelist(data_file("gnutella", "gnutella/p2p-Gnutella08.txt.gz"))
        )
    if name.startswith("gnutella-"):
        suffix = name.removeprefix("gnutella-")
        if not suffix.isdigit() or int(suffix) < 2:
            raise GraphError(
                f"a Gnutella sample is named gnutella-<k> with k >= 2 nodes, got {name!r}"
            )
        return _breadth_first_sample(real_graph("gnutella"), int(suffix))
    if name == "collegemsg":
        graph = nx.Graph()
        with gzip.open(
            data_file("collegemsg", "collegemsg/collegemsg.csv.gz"), "rt", newline=""
        ) as handle:
            for row in csv.DictReader(handle):
                if row["Source"] != row["Target"]:
                    graph.add_edge(int(row["Source"]), int(row["Target"]))
        return _largest_component(graph)
    raise GraphError(f"unknown real graph {name!r}; known: {', '.join(REAL_GRAPHS)}")
