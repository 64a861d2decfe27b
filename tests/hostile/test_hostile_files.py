"""Hostile files: graph files, data files, agent checkpoints and reproduction cache entries that
are binary, truncated, empty, foreign or edited. A reader must answer with a
:class:`~dpdl.errors.DpdlError` naming the file (a cache entry: reported unusable and never used),
never with a decoding, unpickling or numpy exception."""

from __future__ import annotations

import gzip
import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hostile_helpers import FILES

from dpdl.data import adult, housing
from dpdl.data.idx import read_idx
from dpdl.errors import DataError, FileFormatError, GraphError
from dpdl.experiments.cache import _write_entry, job_key, scan_cache
from dpdl.experiments.checkpoints import load_state
from dpdl.graphs.readers import read_graph_file
from dpdl.runtime.checkpoint import AgentState, load_checkpoint, save_checkpoint

pytestmark = pytest.mark.hostile


def _npz(**arrays: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def _zip(**members: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in members.items():
            archive.writestr(name, text)
    return buffer.getvalue()


_OBJECTS = np.empty(2, dtype=object)

# name -> (file name, content, format, a word the message must contain besides the file's name)
GRAPH_CASES: dict[str, tuple[str, bytes, str, str]] = {
    "binary-detected": ("g.txt", FILES["binary"], "file", "UTF-8"),
    "binary-edgelist": ("g.txt", FILES["binary"], "edgelist", "UTF-8"),
    "binary-decentralizepy": ("g.txt", FILES["binary"], "decentralizepy", "UTF-8"),
    "binary-graphml": ("g.graphml", FILES["binary"], "graphml", "UTF-8"),
    "binary-gml": ("g.gml", FILES["binary"], "gml", "UTF-8"),
    "binary-npz": ("g.npz", FILES["binary"], "npz", "npz"),
    "empty-detected": ("g.txt", b"", "file", "no edges"),
    "empty-edgelist": ("g.txt", b"", "edgelist", "no edges"),
    "empty-decentralizepy": ("g.txt", b"", "decentralizepy", "first line"),
    "empty-graphml": ("g.graphml", b"", "file", "GraphML"),
    "empty-gml": ("g.gml", b"", "file", "GML"),
    "empty-npz": ("g.npz", b"", "file", "npz"),
    "blank-edgelist": ("g.txt", FILES["blank"], "edgelist", "no edges"),
    "comments-only": ("g.txt", b"# nodes 3\n% nothing\n", "edgelist", "no edges"),
    "one-column": ("g.txt", b"0\n1\n", "edgelist", "two integer node ids"),
    "weighted": ("g.txt", FILES["weighted"], "edgelist", "weight"),
    "csv": ("g.txt", FILES["csv"], "edgelist", "integer"),
    "words": ("g.txt", FILES["words"], "edgelist", "integers"),
    "extra-text-column": ("g.txt", FILES["three-columns-text"], "edgelist", "extra columns"),
    "json": ("g.txt", b'{"edges": [[0, 1]]}', "file", "integers"),
    "gz-not-gzip": ("g.txt.gz", FILES["gz-bad"], "edgelist", "gzip"),
    "gz-truncated": ("g.txt.gz", gzip.compress(b"0 1\n1 2\n" * 50)[:30], "edgelist", "gzip"),
    "gz-binary-detected": ("g.txt.gz", gzip.compress(FILES["binary"]), "file", "UTF-8"),
    "decentralizepy-word-count": ("g.txt", FILES["decentralizepy-bad"], "decentralizepy", "first"),
    "decentralizepy-zero-nodes": ("g.txt", b"0\n", "decentralizepy", "positive"),
    "decentralizepy-out-of-range": (
        "g.txt",
        FILES["decentralizepy-range"],
        "decentralizepy",
        "out of range",
    ),
    "decentralizepy-three-ids": ("g.txt", b"3\n0 1 2\n", "decentralizepy", "two node ids"),
    "graphml-truncated": ("g.graphml", FILES["graphml-garbage"], "file", "GraphML"),
    "graphml-one-way-arc": (
        "g.graphml",
        b'<?xml version="1.0"?><graphml xmlns="http://graphml.graphdrawing.org/xmlns">'
        b'<graph edgedefault="directed"><node id="a"/><node id="b"/>'
        b'<edge source="a" target="b"/></graph></graphml>',
        "file",
        "reverse",
    ),
    "gml-truncated": ("g.gml", FILES["gml-garbage"], "file", "GML"),
    "gml-no-nodes": ("g.gml", b"graph [ ]\n", "file", "no nodes"),
    "zip-truncated": ("g.npz", FILES["zip-truncated"], "npz", "npz"),
    "zip-foreign": ("g.npz", _zip(**{"readme.txt": "hello"}), "npz", "npz"),
    "npz-no-adjacency": ("g.npz", _npz(other=np.eye(3)), "npz", "adjacency"),
    "npz-vector": ("g.npz", _npz(adjacency=np.ones(3)), "npz", "square"),
    "npz-rectangular": ("g.npz", _npz(adjacency=np.ones((2, 3))), "npz", "square"),
    "npz-asymmetric": ("g.npz", _npz(adjacency=np.triu(np.ones((3, 3)), 1)), "npz", "symmetric"),
    "npz-nan": ("g.npz", _npz(adjacency=np.full((3, 3), np.nan)), "npz", "finite"),
    "npz-strings": ("g.npz", _npz(adjacency=np.array([["a", "b"], ["b", "a"]])), "npz", "finite"),
    "npz-object-array": ("g.npz", _npz(adjacency=_OBJECTS), "npz", "pickle"),
    "npz-empty-matrix": ("g.npz", _npz(adjacency=np.zeros((0, 0))), "npz", "no nodes"),
    "npz-sparse-broken": (
        "g.npz",
        _npz(format=np.array("csr"), shape=np.array([3, 3])),
        "npz",
        "scipy.sparse",
    ),
}


@pytest.mark.parametrize("name", GRAPH_CASES)
def test_bad_graph_file(name: str, tmp_path: Path) -> None:
    filename, content, fmt, keyword = GRAPH_CASES[name]
    path = tmp_path / filename
    path.write_bytes(content)
    with pytest.raises(GraphError) as caught:
        read_graph_file(path, fmt)
    message = str(caught.value)
    assert str(path) in message and keyword.lower() in message.lower(), message


@pytest.mark.parametrize("where", ["missing", "folder"])
def test_graph_file_that_is_not_a_file(where: str, tmp_path: Path) -> None:
    path = tmp_path / "g.txt"
    if where == "folder":
        path.mkdir()
    with pytest.raises(GraphError, match="not found" if where == "missing" else "it is a folder"):
        read_graph_file(path)


def _idx(values: np.ndarray) -> bytes:
    header = bytes([0, 0, 0x08, values.ndim]) + b"".join(
        int(size).to_bytes(4, "big") for size in values.shape
    )
    return header + values.astype(np.uint8).tobytes()


_IDX = _idx(np.arange(24).reshape(2, 3, 4))

# name -> (file name, content, a word the message must contain)
IDX_CASES: dict[str, tuple[str, bytes, str]] = {
    "empty": ("x-idx3-ubyte", b"", "not an IDX"),
    "binary": ("x-idx3-ubyte", FILES["binary"][1:], "not an IDX"),
    "text": ("x-idx3-ubyte", b"0 1 2 3\n", "not an IDX"),
    "header-cut": ("x-idx3-ubyte", _IDX[:9], "truncated"),
    "data-cut": ("x-idx3-ubyte", _IDX[:-5], "truncated"),
    "gz-empty": ("x-idx3-ubyte.gz", b"", "not an IDX"),
    "gz-cut": ("x-idx3-ubyte.gz", gzip.compress(_IDX)[:20], "cannot be read"),
    "gz-garbage": ("x-idx3-ubyte.gz", FILES["gz-bad"], "cannot be read"),
    "gz-of-text": ("x-idx3-ubyte.gz", gzip.compress(b"hello world"), "not an IDX"),
}


@pytest.mark.parametrize("name", IDX_CASES)
def test_bad_idx_file(name: str, tmp_path: Path) -> None:
    filename, content, keyword = IDX_CASES[name]
    path = tmp_path / filename
    path.write_bytes(content)
    with pytest.raises(DataError) as caught:
        read_idx(path)
    assert str(path) in str(caught.value) and keyword in str(caught.value), str(caught.value)


# name -> (content of the data file, a word the message must contain)
TABLE_CASES: dict[str, tuple[bytes, str]] = {
    "housing-binary": (FILES["binary"], "cannot be read"),
    "housing-empty-gzip": (gzip.compress(b""), "cal_housing"),
    "housing-not-numbers": (gzip.compress(b"a,b,c,d,e,f,g,h,i\n"), "cal_housing"),
    "adult-binary": (FILES["binary"], "cannot be read"),
    "adult-wrong-columns": (gzip.compress(b"1,2,3\n"), "fields"),
    "adult-empty": (gzip.compress(b"\n\n"), "no rows"),
    "adult-not-utf8": (gzip.compress(b"\xff\xfe" * 100), "cannot be read"),
}


@pytest.mark.parametrize("name", TABLE_CASES)
def test_bad_table_data_file(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A damaged data file of the tabular tasks, found through ``DPDL_DATA_DIR``."""
    content, keyword = TABLE_CASES[name]
    if name.startswith("housing"):
        (tmp_path / "california_housing").mkdir()
        (tmp_path / "california_housing" / "cal_housing.data.gz").write_bytes(content)
        load, cache = (housing.load_california_housing, housing._load)
    else:
        (tmp_path / "adult").mkdir()
        for part in ("adult.data.gz", "adult.test.gz"):
            (tmp_path / "adult" / part).write_bytes(content)
        load, cache = (lambda: adult.load_adult("train"), adult._load)
    monkeypatch.setenv("DPDL_DATA_DIR", str(tmp_path))
    cache.cache_clear()
    try:
        with pytest.raises(DataError) as caught:
            load()
    finally:
        cache.cache_clear()
    assert str(tmp_path) in str(caught.value) and keyword in str(caught.value), str(caught.value)


def _checkpoint(path: Path) -> None:
    save_checkpoint(path, [AgentState(10, np.arange(4.0), None)], "run", 1)


def _damaged_checkpoint(name: str, path: Path) -> None:
    if name == "empty":
        path.write_bytes(b"")
    elif name == "binary":
        path.write_bytes(FILES["binary"])
    elif name == "pickle-bytes":
        path.write_bytes(b"\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00K\x01.")
    elif name == "json":
        path.write_text(json.dumps({"round": 10}))
    elif name == "npz-without-manifest":
        path.write_bytes(_npz(params=np.zeros(3)))
    elif name == "npy-array":
        buffer = io.BytesIO()
        np.save(buffer, np.zeros(3))
        path.write_bytes(buffer.getvalue())
    else:
        _checkpoint(path)
        whole = path.read_bytes()
        if name == "truncated":
            path.write_bytes(whole[: len(whole) // 2])
        elif name == "one-byte-flipped":
            middle = len(whole) // 2
            path.write_bytes(whole[:middle] + bytes([whole[middle] ^ 0xFF]) + whole[middle + 1 :])


# name -> a word the message must contain besides the file's name
CHECKPOINT_CASES: dict[str, str] = {
    "empty": "not a readable checkpoint",
    "binary": "not a readable checkpoint",
    "pickle-bytes": "not a readable checkpoint",
    "json": "not a readable checkpoint",
    "npz-without-manifest": "not a readable checkpoint",
    "npy-array": "not a readable checkpoint",
    "truncated": "checkpoint",
    "one-byte-flipped": "checkpoint",
}


@pytest.mark.parametrize("name", CHECKPOINT_CASES)
def test_bad_checkpoint(name: str, tmp_path: Path) -> None:
    path = tmp_path / "agent1.ckpt"
    _damaged_checkpoint(name, path)
    with pytest.raises(FileFormatError) as caught:
        load_checkpoint(path, "run", 1)
    message = str(caught.value)
    assert str(path) in message and CHECKPOINT_CASES[name] in message, message


@pytest.mark.parametrize("name", [*CHECKPOINT_CASES, "agent-checkpoint"])
def test_bad_run_checkpoint(name: str, tmp_path: Path) -> None:
    """``dpdl train --resume`` and ``fit(resume_from=...)`` read the same damaged files, and a
    runtime agent's whole checkpoint, with one error naming the file."""
    path = tmp_path / "seed0.npz"
    if name == "agent-checkpoint":
        _checkpoint(path)
    else:
        _damaged_checkpoint(name, path)
    with pytest.raises(FileFormatError) as caught:
        load_state(path, {"steps": 10})
    message = str(caught.value)
    assert str(path) in message and CHECKPOINT_CASES.get(name, "another format") in message


def test_checkpoint_of_another_agent(tmp_path: Path) -> None:
    path = tmp_path / "agent1.ckpt"
    _checkpoint(path)
    with pytest.raises(FileFormatError, match="not of agent 2"):
        load_checkpoint(path, "run", 2)


JOB = {"figure": "hostile", "seed": 0, "steps": 3}
DATA = "no data"


def _cache_entry(name: str, path: Path) -> None:
    key = {"job": JOB, "engine": 0, "data": DATA}
    if name == "empty":
        path.write_bytes(b"")
    elif name == "binary":
        path.write_bytes(FILES["binary"])
    elif name == "list":
        path.write_text("[1, 2, 3]")
    elif name == "deep":
        path.write_text("[" * 100_000 + "]" * 100_000)
    else:
        _write_entry(path, key, {"accuracy": 0.5})
        entry = json.loads(path.read_text())
        if name == "truncated":
            path.write_text(path.read_text()[:40])
        elif name == "edited-value":
            entry["row"]["accuracy"] = 0.99
            path.write_text(json.dumps(entry))
        elif name == "other-format":
            entry["format"] = "something-else"
            path.write_text(json.dumps(entry))
        elif name == "checksum-removed":
            del entry["sha256"]
            path.write_text(json.dumps(entry))


# name -> a word the reason must contain
CACHE_CASES: dict[str, str] = {
    "empty": "not JSON",
    "binary": "not JSON",
    "truncated": "not JSON",
    "list": "not an entry",
    "deep": "not JSON",
    "edited-value": "checksum",
    "other-format": "format",
    "checksum-removed": "checksum",
}


@pytest.mark.parametrize("name", CACHE_CASES)
def test_bad_cache_entry_is_never_used(name: str, tmp_path: Path) -> None:
    path = tmp_path / f"{job_key(JOB)}.json"
    _cache_entry(name, path)
    scan = scan_cache([JOB], tmp_path, DATA)
    assert scan.rows == {} and scan.pending == [JOB]
    reasons = [why for where, why in scan.unusable + scan.stale if where == path]
    assert len(reasons) == 1 and CACHE_CASES[name] in reasons[0], reasons
