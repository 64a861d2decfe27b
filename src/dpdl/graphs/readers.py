"""Communication graphs read from files: edge lists, decentralizepy graph files, adjacency
matrices (`.npz`), GraphML and GML.

A graph file is named on the command line as `FORMAT:PATH` (`--graph npz:adjacency.npz`), or
`file:PATH` to tell the format from the file's extension, else from its first bytes. Every reader
returns an undirected `networkx.Graph` on the nodes `0..n-1` without self-loops (mixing rules add
those), edge weights dropped: the mixing rule sets the weights. A file that cannot be read as its
format raises one [`GraphError`][dpdl.errors.GraphError] that names the file and the accepted
formats; nothing read can run code (`.npz` files are loaded with `allow_pickle=False`).
"""

from __future__ import annotations

import gzip
import re
import xml.etree.ElementTree as ElementTree
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import networkx as nx
import numpy as np

from dpdl.choices import ADJACENCY_KEY, GRAPH_FILE_FORMATS
from dpdl.errors import GraphError
from dpdl.files import read_regular, require_regular
from dpdl.graphs.sizes import declared_size, require_graph_file_fits
from dpdl.graphs.topologies import read_edgelist, relabel_consecutive

if TYPE_CHECKING:
    import scipy.sparse

__all__ = [
    "ADJACENCY_KEY",
    "GRAPH_FILE_FORMATS",
    "detect_format",
    "graph_file_spec",
    "read_adjacency_npz",
    "read_decentralizepy",
    "read_gml",
    "read_graph_file",
    "read_graphml",
]

#: One line for error messages: the ways to name a graph file.
ACCEPTED = (
    "accepted graph files: file:PATH (format from the extension or the content), "
    + ", ".join(f"{name}:PATH" for name in GRAPH_FILE_FORMATS)
)

_EXTENSIONS = {".npz": "npz", ".graphml": "graphml", ".gml": "gml"}


def _error(path: Path, problem: str) -> GraphError:
    return GraphError(f"cannot read graph file {path}: {problem}; {ACCEPTED}")


def _text(path: Path) -> str:
    """The file's text (`.gz` decompressed); a binary file is an error, not a decoding
    traceback."""
    raw = read_regular(path, "graph file", GraphError)
    if path.suffix == ".gz":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as error:  # gzip.BadGzipFile is an OSError
            raise _error(path, f"not a readable gzip file ({error})") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise _error(
            path, f"not text (byte {raw[error.start]:#04x} at offset {error.start} is not UTF-8)"
        ) from None


def graph_file_spec(spec: str) -> tuple[str, Path] | None:
    """`(format, path)` of a `--graph` value naming a file (format `"file"`: to detect), or
    `None` for a graph name."""
    prefix, colon, path = spec.partition(":")
    if colon and (prefix == "file" or prefix in GRAPH_FILE_FORMATS):
        return prefix, Path(path)
    return None


def detect_format(path: Path) -> str:
    """Format of a graph file: from its extension (`.npz`, `.graphml`, `.gml`, each also
    `.gz`), else from its content: a zip archive is an `.npz`, XML is GraphML, a `graph [`
    is GML, a text file whose first line is one integer is decentralizepy's, other text an edge
    list."""
    require_regular(path, "graph file", GraphError)
    suffixes = [s for s in path.suffixes[-2:] if s != ".gz"]
    if suffixes and suffixes[-1].lower() in _EXTENSIONS:
        return _EXTENSIONS[suffixes[-1].lower()]
    if zipfile.is_zipfile(path):
        return "npz"
    head = _text(path)[:4096].lstrip()
    if head.startswith("<"):
        return "graphml"
    if re.match(r"(#[^\n]*\n\s*)*(Creator[^\n]*\n\s*)?graph\s*\[", head):
        return "gml"
    first = next((line.split() for line in head.splitlines() if line.strip()), [])
    return "decentralizepy" if len(first) == 1 and first[0].isdigit() else "edgelist"


def read_decentralizepy(path: str | Path) -> nx.Graph:
    """A graph file as decentralizepy writes and reads it (`Graph.read_graph_from_file`, type
    `edges`): the number of nodes `n` alone on the first line, then one edge `u v` per
    line with ids in `0..n-1`, each edge listed once or in both directions. Nodes keep their ids
    (a node without edges stays, and makes the graph disconnected)."""
    path = Path(path)
    lines = _text(path).splitlines()
    first = lines[0].split() if lines else []
    if len(first) != 1 or not first[0].isdigit() or int(first[0]) < 1:
        raise _error(
            path,
            "decentralizepy's first line is the node count, a positive integer; got "
            f"{(lines or [''])[0].strip()!r}",
        )
    n = int(first[0])
    graph = nx.empty_graph(n)
    for lineno, line in enumerate(lines[1:], start=2):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 2 or not all(field.isdigit() for field in fields):
            raise _error(path, f"line {lineno}: expected two node ids 'u v', got {line.strip()!r}")
        u, v = int(fields[0]), int(fields[1])
        if max(u, v) >= n:
            raise _error(
                path,
                f"line {lineno}: node id {max(u, v)} is out of range for the {n} nodes of line 1 "
                f"(ids 0..{n - 1})",
            )
        if u != v:
            graph.add_edge(u, v)
    return graph


def _adjacency_matrix(path: Path) -> np.ndarray | scipy.sparse.csr_array:
    """The matrix an `.npz` file holds: its dense array `ADJACENCY_KEY`, or its
    `scipy.sparse.save_npz` matrix (recognised by the `format` and `shape` arrays it
    saves)."""
    import scipy.sparse  # here, not at the top: only .npz graphs need it

    try:
        loaded = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
        raise _error(path, f"not a numpy .npz archive ({error})") from None
    if not isinstance(loaded, np.lib.npyio.NpzFile):
        raise _error(path, "a single .npy array, not an .npz archive")
    with loaded:
        keys = loaded.files
        if {"format", "shape"} <= set(keys):
            try:
                return scipy.sparse.csr_array(
                    scipy.sparse.load_npz(path)
                )  # np.load(allow_pickle=False) inside
            except (OSError, ValueError, KeyError) as error:
                raise _error(path, f"not a valid scipy.sparse .npz ({error})") from None
        if ADJACENCY_KEY not in keys:
            raise _error(
                path,
                f"no array '{ADJACENCY_KEY}' and no scipy.sparse matrix in the .npz (its arrays: "
                f"{', '.join(keys) or 'none'})",
            )
        try:
            return loaded[ADJACENCY_KEY]
        except ValueError as error:  # an object array: it would need pickle
            raise _error(
                path, f"array '{ADJACENCY_KEY}' cannot be read without pickle ({error})"
            ) from None


def read_adjacency_npz(path: str | Path) -> nx.Graph:
    """Graph of an adjacency matrix in an `.npz` file: a dense array under the key
    `ADJACENCY_KEY` (`np.savez(path, adjacency=A)`), or a matrix saved by
    `scipy.sparse.save_npz`. Node `i` is row `i`; a nonzero off-diagonal entry is an edge
    (its value, a weight, is dropped: the mixing rule sets the weights); the matrix must be square,
    symmetric and finite."""
    import scipy.sparse

    path = Path(path)
    matrix = _adjacency_matrix(path)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise _error(path, f"the adjacency matrix must be square, got shape {matrix.shape}")
    values = matrix.data if scipy.sparse.issparse(matrix) else matrix
    if values.dtype.kind not in "biuf" or not np.isfinite(values).all():
        raise _error(
            path, f"the adjacency matrix must hold finite numbers, got dtype {values.dtype}"
        )
    rows, cols = (matrix != matrix.T).nonzero()
    if len(rows):
        i, j = int(rows[0]), int(cols[0])
        raise _error(
            path,
            f"the adjacency matrix of an undirected graph must be symmetric; entry ({i}, {j}) "
            f"differs from ({j}, {i})",
        )
    graph = nx.empty_graph(matrix.shape[0])
    rows, cols = matrix.nonzero()
    graph.add_edges_from((i, j) for i, j in zip(rows.tolist(), cols.tolist(), strict=True) if i < j)
    return graph


def _undirected(path: Path, graph: nx.Graph) -> nx.Graph:
    """A simple undirected graph of `graph` on `0..n-1`: parallel edges merged, self-loops
    dropped; a directed graph must have every arc's reverse. Labels that are all integers (as
    strings too) keep their numeric order, other labels the file's order."""
    if graph.is_directed():
        one_way = next(
            ((u, v) for u, v in graph.edges() if u != v and not graph.has_edge(v, u)), None
        )
        if one_way is not None:
            raise _error(
                path,
                f"the graph is directed and the arc {one_way[0]} -> {one_way[1]} has no reverse; "
                "dpdl's agents need undirected links",
            )
    simple = nx.Graph()
    simple.add_nodes_from(graph.nodes)
    simple.add_edges_from((u, v) for u, v in graph.edges() if u != v)
    if all(
        isinstance(node, int) or (isinstance(node, str) and re.fullmatch(r"-?\d+", node))
        for node in simple.nodes
    ):
        return relabel_consecutive(
            nx.relabel_nodes(simple, {node: int(node) for node in simple.nodes})
        )
    return nx.convert_node_labels_to_integers(simple, ordering="default")


def _parsed(
    path: Path, kind: str, parse: Callable[[str], nx.Graph], errors: tuple[type[Exception], ...]
) -> nx.Graph:
    text = _text(path)
    try:
        graph = parse(text)
    except errors as error:
        raise _error(path, f"not valid {kind} ({error})") from None
    return _undirected(path, graph)


def read_graphml(path: str | Path) -> nx.Graph:
    """A GraphML file (networkx's parser; `.gz` read)."""
    return _parsed(
        Path(path),
        "GraphML",
        nx.parse_graphml,
        (ElementTree.ParseError, nx.NetworkXError, KeyError, ValueError, TypeError),
    )


def read_gml(path: str | Path) -> nx.Graph:
    """A GML file (networkx's parser, nodes named by their GML `id`; `.gz` read)."""
    return _parsed(
        Path(path),
        "GML",
        lambda text: nx.parse_gml(text, label=None),
        (nx.NetworkXError, KeyError, ValueError, TypeError),
    )


_READERS: dict[str, Callable[[Path], nx.Graph]] = {
    "edgelist": read_edgelist,
    "decentralizepy": read_decentralizepy,
    "npz": read_adjacency_npz,
    "graphml": read_graphml,
    "gml": read_gml,
}


def read_graph_file(path: str | Path, fmt: str = "file") -> nx.Graph:
    """The graph in `path`, read as `fmt` (a key of `GRAPH_FILE_FORMATS`, or `"file"`
    to detect it: [`detect_format`][dpdl.graphs.readers.detect_format]), on the nodes `0..n-1`.
    A path that is not a regular file (a FIFO, a device, a folder) is a
    [`GraphError`][dpdl.errors.GraphError]; a file whose declared size does not fit in memory
    ([`declared_size`][dpdl.graphs.sizes.declared_size]) a
    [`ResourceError`][dpdl.errors.ResourceError], both before it is read."""
    path = require_regular(Path(path), "graph file", GraphError)
    if fmt == "file":
        fmt = detect_format(path)
    if fmt not in _READERS:
        raise GraphError(f"unknown graph file format {fmt!r}; {ACCEPTED}")
    require_graph_file_fits(path, declared_size(path, fmt))
    try:
        graph = _READERS[fmt](path)
    except GraphError as error:
        if ACCEPTED in str(error):
            raise
        raise GraphError(f"{error}; {ACCEPTED}") from None
    if graph.number_of_nodes() == 0:
        raise _error(path, f"no nodes in it, read as {fmt}")
    return graph
