"""Graphs read from files: every format gives the edge list's graph, every wrong file one clear
error.

The files are written with networkx, numpy and scipy's own writers (what a user would hand us), and
each is compared with the graph :func:`read_edgelist` reads from the same edges.
"""

from __future__ import annotations

import shutil
import warnings

import networkx as nx
import numpy as np
import pytest
import scipy.sparse

from dpdl.cli import main
from dpdl.errors import GraphError
from dpdl.graphs import build_graph, read_edgelist
from dpdl.graphs.readers import ADJACENCY_KEY, GRAPH_FILE_FORMATS, detect_format, read_graph_file

# a connected graph whose ids sort differently as strings ("10" < "5") than as numbers
EDGES = [(5, 10), (10, 20), (20, 30), (30, 40), (40, 5), (10, 30), (20, 40)]
LABELS = sorted({node for edge in EDGES for node in edge})


def edge_set(graph: nx.Graph) -> set[frozenset]:
    return {frozenset(edge) for edge in graph.edges()}


@pytest.fixture
def reference(tmp_path) -> nx.Graph:
    """The edge list's graph: ids 5..40 relabelled to 0..4 in numeric order."""
    path = tmp_path / "edges.txt"
    path.write_text("".join(f"{u} {v}\n" for u, v in EDGES))
    return read_edgelist(path)


def labelled() -> nx.Graph:
    graph = nx.Graph()
    graph.add_nodes_from(LABELS)  # in numeric order: GML names nodes by their position
    graph.add_edges_from(EDGES)
    return graph


def adjacency() -> np.ndarray:
    """Weighted adjacency of the graph on 0..4, with a diagonal (both ignored)."""
    index = {label: i for i, label in enumerate(LABELS)}
    matrix = 0.5 * np.eye(len(LABELS))
    for u, v in EDGES:
        matrix[index[u], index[v]] = matrix[index[v], index[u]] = 0.25
    return matrix


def write(fmt: str, folder, name: str | None = None):
    """The graph in format ``fmt``, written by the format's usual writer."""
    path = folder / (
        name
        or {
            "decentralizepy": "graph.txt",
            "npz": "graph.npz",
            "sparse-npz": "sparse.npz",
            "graphml": "graph.graphml",
            "gml": "graph.gml",
            "edgelist": "edges.txt",
        }[fmt]
    )
    if fmt == "edgelist":
        path.write_text("# u v\n" + "".join(f"{u} {v}\n" for u, v in EDGES))
    elif (
        fmt == "decentralizepy"
    ):  # as decentralizepy's Graph.write_graph_to_file: n, then every edge both ways
        graph = nx.convert_node_labels_to_integers(labelled())
        lines = [f"{u} {v}\n" for u in graph for v in graph[u]]
        path.write_text(f"{graph.number_of_nodes()}\n" + "".join(lines))
    elif fmt == "npz":
        with open(path, "wb") as handle:  # a file handle: np.savez would add .npz to a bare name
            np.savez(handle, **{ADJACENCY_KEY: adjacency()})
    elif fmt == "sparse-npz":
        with open(path, "wb") as handle:
            scipy.sparse.save_npz(handle, scipy.sparse.csr_matrix(adjacency()))
    elif fmt == "graphml":
        nx.write_graphml(labelled(), path)
    elif fmt == "gml":
        nx.write_gml(labelled(), path)
    return path


FORMATS = ["edgelist", "decentralizepy", "npz", "sparse-npz", "graphml", "gml"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_gives_the_edge_lists_graph(tmp_path, reference, fmt):
    path = write(fmt, tmp_path)
    prefix = "npz" if fmt == "sparse-npz" else fmt
    for spec in (f"{prefix}:{path}", f"file:{path}"):
        graph = build_graph(spec)
        assert sorted(graph.nodes) == list(range(len(LABELS))), spec
        assert edge_set(graph) == edge_set(reference), spec
        assert nx.number_of_selfloops(graph) == 0


@pytest.mark.parametrize(
    ("fmt", "name", "detected"),
    [
        ("npz", "adjacency.bin", "npz"),
        ("graphml", "graph.xml", "graphml"),
        ("gml", "graph.txt", "gml"),
        ("decentralizepy", "graph.edges", "decentralizepy"),
        ("edgelist", "graph.edges", "edgelist"),
    ],
)
def test_format_told_by_content_without_a_known_extension(tmp_path, reference, fmt, name, detected):
    path = write(fmt, tmp_path)
    renamed = tmp_path / "other" / name
    renamed.parent.mkdir()
    shutil.copy(path, renamed)
    assert detect_format(renamed) == detected
    assert edge_set(build_graph(f"file:{renamed}")) == edge_set(reference)


def test_gzipped_graphml_and_sparse_coo(tmp_path, reference):
    graphml = tmp_path / "graph.graphml.gz"
    nx.write_graphml(labelled(), graphml)  # networkx compresses by the extension
    assert edge_set(build_graph(f"file:{graphml}")) == edge_set(reference)
    coo = tmp_path / "coo.npz"
    scipy.sparse.save_npz(coo, scipy.sparse.coo_matrix(adjacency()))
    assert edge_set(build_graph(f"npz:{coo}")) == edge_set(reference)


def test_directed_file_with_every_arc_reciprocated_is_undirected(tmp_path, reference):
    path = tmp_path / "directed.graphml"
    nx.write_graphml(labelled().to_directed(), path)
    assert edge_set(build_graph(f"graphml:{path}")) == edge_set(reference)


def test_node_without_edges_is_kept_and_reported_disconnected(tmp_path):
    path = tmp_path / "isolated.txt"
    path.write_text("4\n0 1\n1 2\n2 0\n")  # node 3 has no edge
    assert read_graph_file(path, "decentralizepy").number_of_nodes() == 4
    with pytest.raises(GraphError, match="disconnected"):
        build_graph(f"decentralizepy:{path}")


def _object_npz(path):
    with open(path, "wb") as handle:
        np.savez(handle, **{ADJACENCY_KEY: np.array([{"code": "runs on load"}], dtype=object)})


def _savez(path, **arrays):
    with open(path, "wb") as handle:
        np.savez(handle, **arrays)


# name -> (spec prefix, file name, writer, words the error must contain)
BAD_FILES = {
    "binary-as-edgelist": (
        "edgelist",
        "image.png",
        lambda p: p.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff"),
        ["not a text edge list"],
    ),
    "binary-as-file": (
        "file",
        "image.png",
        lambda p: p.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff"),
        ["not text", "0x89"],
    ),
    "bad-gzip-edgelist": (
        "edgelist",
        "edges.txt.gz",
        lambda p: p.write_bytes(b"not gzip"),
        ["gzip"],
    ),
    "graphml-does-not-parse": (
        "graphml",
        "graph.graphml",
        lambda p: p.write_text("<graphml><graph>"),
        ["not valid GraphML"],
    ),
    "graphml-by-extension": (
        "file",
        "graph.graphml",
        lambda p: p.write_text("0 1\n1 2\n"),
        ["not valid GraphML"],
    ),
    "gml-does-not-parse": (
        "gml",
        "graph.gml",
        lambda p: p.write_text("graph [ node [ id 0 ]"),
        ["not valid GML"],
    ),
    "npz-without-the-key": (
        "npz",
        "graph.npz",
        lambda p: _savez(p, weights=np.eye(3)),
        ["no array 'adjacency'", "weights"],
    ),
    "npz-not-square": (
        "npz",
        "graph.npz",
        lambda p: _savez(p, adjacency=np.ones((3, 4))),
        ["square", "(3, 4)"],
    ),
    "npz-not-symmetric": (
        "npz",
        "graph.npz",
        lambda p: _savez(p, adjacency=np.triu(np.ones((3, 3)))),
        ["symmetric", "(1, 0)"],
    ),
    "sparse-not-symmetric": (
        "npz",
        "graph.npz",
        lambda p: scipy.sparse.save_npz(p, scipy.sparse.csr_matrix(np.triu(np.ones((3, 3))))),
        ["symmetric"],
    ),
    "npz-not-finite": (
        "npz",
        "graph.npz",
        lambda p: _savez(p, adjacency=np.full((2, 2), np.nan)),
        ["finite"],
    ),
    "npz-object-array": ("npz", "graph.npz", _object_npz, ["pickle"]),
    "npz-a-text-file": (
        "npz",
        "graph.npz",
        lambda p: p.write_text("0 1\n"),
        ["not a numpy .npz archive"],
    ),
    "npz-a-single-npy": (
        "npz",
        "graph.npy",
        lambda p: np.save(p, np.eye(2)),
        ["not an .npz archive"],
    ),
    "decentralizepy-id-beyond-the-count": (
        "decentralizepy",
        "graph.txt",
        lambda p: p.write_text("3\n0 1\n1 3\n"),
        ["line 3", "node id 3", "3 nodes"],
    ),
    "decentralizepy-no-count": (
        "decentralizepy",
        "graph.txt",
        lambda p: p.write_text("0 1\n1 2\n"),
        ["node count"],
    ),
    "directed-one-way": (
        "graphml",
        "graph.graphml",
        lambda p: nx.write_graphml(nx.DiGraph([(0, 1), (1, 2), (2, 0)]), p),
        ["directed", "no reverse"],
    ),
    "edgelist-given-a-decentralizepy-file": (
        "edgelist",
        "graph.txt",
        lambda p: p.write_text("3\n0 1\n1 2\n"),
        ["decentralizepy:PATH"],
    ),
}


@pytest.mark.parametrize("name", list(BAD_FILES))
def test_wrong_file_gives_one_error_naming_it_and_the_formats(tmp_path, name):
    prefix, file_name, writer, words = BAD_FILES[name]
    path = tmp_path / file_name
    writer(path)
    with pytest.raises(GraphError) as caught:
        build_graph(f"{prefix}:{path}")
    message = str(caught.value)
    assert str(path) in message and "\n" not in message
    assert all(f"{fmt}:PATH" in message for fmt in ["file", *GRAPH_FILE_FORMATS]), message
    assert all(word in message for word in words), message


def test_cli_reads_a_graph_file_and_reports_a_bad_one_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(
        warnings, "formatwarning", warnings.formatwarning
    )  # main() installs its own
    good = write("graphml", tmp_path)
    assert (
        main(["noise", "--method", "ldp", "--graph", f"file:{good}", "--steps", "10", "--json"])
        == 0
    )
    assert "(n=5," in capsys.readouterr().err
    bad = tmp_path / "bad.graphml"
    bad.write_text("<graphml")
    assert main(["noise", "--method", "ldp", "--graph", f"file:{bad}", "--steps", "10"]) == 2
    err = capsys.readouterr().err
    assert (
        len(err.splitlines()) == 1 and err.startswith("dpdl: error:") and "not valid GraphML" in err
    )
