"""The sizes graph files declare (`dpdl.graphs.sizes`): exact for what can be counted, and large
but legitimate graphs accepted (the hostile side is `tests/hostile/test_hostile_readers.py`)."""

from __future__ import annotations

import gzip
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
import scipy.sparse

from dpdl.graphs import read_graph_file
from dpdl.graphs.sizes import declared_size, require_graph_file_fits
from dpdl.jobspec.resources import graph_size
from dpdl.scale import format_bytes


@pytest.fixture(autouse=True)
def memory_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DPDL_MEMORY_LIMIT", "2G")


def test_a_sparse_million_node_ring_fits(tmp_path: Path) -> None:
    """10^6 nodes go sparse (`SPARSE_MIN_AGENTS`): the graph and a CSR W fit in 2 GiB."""
    n = 10**6
    path = tmp_path / "ring.txt"
    path.write_text(f"{n}\n" + "".join(f"{i} {(i + 1) % n}\n" for i in range(n)))
    size = declared_size(path, "decentralizepy")
    assert (size.nodes, size.edges) == (n, n)
    assert not any("dense" in term for term in size.terms())
    require_graph_file_fits(path, size)  # no error
    assert graph_size(f"decentralizepy:{path}", None, None) == (n, n)


def test_a_billion_nodes_do_not(tmp_path: Path) -> None:
    path = tmp_path / "big.txt"
    path.write_text("1000000000\n0 1\n")
    assert graph_size(f"file:{path}", None, None) == (10**9, 10**9 - 1)


@pytest.mark.parametrize("sparse", [False, True])
def test_npz_sizes_are_exact(sparse: bool, tmp_path: Path) -> None:
    graph = nx.cycle_graph(1200 if sparse else 50)
    path = tmp_path / "g.npz"
    if sparse:
        scipy.sparse.save_npz(path, scipy.sparse.csr_array(nx.to_scipy_sparse_array(graph)))
    else:
        np.savez_compressed(path, adjacency=nx.to_numpy_array(graph))
    size = declared_size(path, "npz")
    assert (size.nodes, size.edges) == (graph.number_of_nodes(), graph.number_of_edges())
    assert nx.utils.graphs_equal(read_graph_file(path, "npz"), graph)


@pytest.mark.parametrize("fmt", ["graphml", "gml"])
def test_markup_elements_are_counted(fmt: str, tmp_path: Path) -> None:
    graph = nx.path_graph(300)
    path = tmp_path / f"g.{fmt}.gz"
    text = "\n".join(nx.generate_graphml(graph) if fmt == "graphml" else nx.generate_gml(graph))
    path.write_bytes(gzip.compress(text.encode()))
    size = declared_size(path, fmt)
    assert (size.nodes, size.edges) == (300, 299)
    assert read_graph_file(path, fmt).number_of_edges() == 299


def test_huge_node_ids_in_an_edge_list_are_relabelled_not_allocated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DPDL_MEMORY_LIMIT", "64M")
    path = tmp_path / "g.txt"
    path.write_text("# ids\n1000000000000 5\n5 7\n7 1000000000000\n")
    assert declared_size(path, "edgelist").edges == 3
    assert sorted(read_graph_file(path, "edgelist").nodes) == [0, 1, 2]


def test_a_file_too_malformed_to_size_is_left_to_its_reader(tmp_path: Path) -> None:
    path = tmp_path / "g.npz"
    path.write_bytes(b"PK\x03\x04" + bytes(60))
    assert declared_size(path, "npz").nodes == 0
    assert graph_size(f"npz:{path}", None, None) is None
    assert graph_size(f"npz:{tmp_path / 'missing.npz'}", None, None) is None


def test_exbibytes_are_named() -> None:
    assert format_bytes(8.0 * 10**18) == "6.9 EiB"
    assert format_bytes(3 * 2**50) == "3.0 PiB"
