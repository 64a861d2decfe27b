"""The size a graph file declares, read from its header or counted by streaming it, before the
graph is built.

A graph file can ask for more than the machine holds while being small itself: a
decentralizepy file whose first line is `1000000000`, an `.npz` whose array header says
10^9 x 10^9 in 4 KB, a compressed dense adjacency that inflates to gigabytes, a text file of
millions of edges. `declared_size` finds the nodes and edges such a file will build, and what
reading it holds besides (the dense array and its symmetry check, a sparse matrix's arrays, the
text and the parse tree of GraphML and GML), without building anything: the `.npy` headers of
the archive's members (`numpy.lib.format`), a dense array's nonzeros counted block by block,
the lines or elements of a text file counted in a stream that stops once the count alone is
more than the machine holds. `require_graph_file_fits` refuses, with a
[`ResourceError`][dpdl.errors.ResourceError] naming the file, the declared size, the estimate
and the limit, a file whose reading, networkx graph and mixing matrix do not fit
(`dpdl.scale.memory_limit`, `DPDL_MEMORY_LIMIT`). A job's estimate
(`dpdl.jobspec.resources.graph_size`) takes the same sizes,
so that a graph file too large for the job's per-agent state is refused before it is read.
"""

from __future__ import annotations

import gzip
import re
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import IO

import numpy as np

from dpdl.choices import ADJACENCY_KEY
from dpdl.errors import DpdlError, GraphError
from dpdl.files import require_regular
from dpdl.scale import SPARSE_MIN_AGENTS, graph_terms, memory_limit, require_memory

__all__ = ["FileSize", "declared_size", "require_graph_file_fits"]

#: Bytes a parse tree spends per node or edge element of GraphML (ElementTree elements and their
#: attribute dicts) or GML (networkx's tokens and nested lists), on top of the graph.
PARSE_ELEMENT_BYTES = 1000
#: Bytes read at once when a file is streamed to count its lines or elements.
BLOCK = 1 << 22


@dataclass(frozen=True)
class FileSize:
    """What a graph file will build: `nodes` and (about) `edges`, and `reading`, the bytes
    its reader holds besides the graph, by named term."""

    nodes: int
    edges: int
    reading: dict[str, float] = field(default_factory=dict)

    def terms(self) -> dict[str, float]:
        """The reading's terms, the networkx graph's and the mixing matrix's."""
        dense = self.nodes < SPARSE_MIN_AGENTS
        return {**self.reading, **graph_terms(self.nodes, self.edges, dense)}


def _cap(per_item: float) -> float:
    """How many items of `per_item` bytes may be counted before the count alone is more than
    the machine holds (then counting stops: the file is refused anyway)."""
    limit = memory_limit()
    return float("inf") if limit is None else limit[0] / per_item + 1


def _stream(path: Path) -> IO[bytes]:
    return gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")


def _blocks(path: Path) -> Iterator[bytes]:
    """The file's bytes (`.gz` decompressed) in blocks; a broken gzip file ends the stream (its
    reader names the problem)."""
    try:
        with _stream(path) as stream:
            while block := stream.read(BLOCK):
                yield block
    except (OSError, EOFError):
        return


def _count(path: Path, pattern: re.Pattern[bytes], cap: float, split: bytes) -> tuple[int, int]:
    """Matches of `pattern` in the file and the bytes read, the count stopping once above
    `cap`. Each block is counted up to its last `split` (a line's end, or the byte that starts
    or ends an element), which no match spans; the rest waits for the next block (a file without
    any `split` is not one its reader reads, and is counted approximately)."""
    count, size, tail = 0, 0, b""
    for block in _blocks(path):
        size += len(block)
        text = tail + block
        after = split != b"<"  # a line or a GML element ends with `split`, a GraphML one starts
        cut = text.rfind(split) + after
        if cut <= 0:
            tail = text if len(text) <= BLOCK else text[-64:]
            continue
        count += len(pattern.findall(text[:cut]))
        tail = text[cut:]
        if count > cap:
            return count, size
    return count + len(pattern.findall(tail)), size


_LINE = re.compile(rb"^[ \t]*[0-9+-]", re.MULTILINE)


def _text_lines(path: Path, fmt: str) -> FileSize:
    """An edge list (one edge per line, read as a stream) or a decentralizepy file (the node
    count, then one edge per line, read whole and split into lines); comment lines are not
    counted."""
    lines, size = _count(path, _LINE, _cap(2 * 150.0), b"\n")
    if fmt == "edgelist":  # a connected graph has at most edges + 1 nodes
        return FileSize(lines + 1, lines)
    head = next(_blocks(path), b"")[:4096].lstrip().split(b"\n", 1)[0].split()
    if len(head) != 1 or not head[0].isdigit():
        return FileSize(0, 0)  # the reader names the bad first line
    nodes = int(head[0])
    text = {
        f"the file's text ({size:,} bytes, read whole, and its lines)": 2.0 * size + 64.0 * lines
    }
    return FileSize(nodes, min(max(lines - 1, 0), nodes * (nodes - 1) // 2), text)


def _markup(path: Path, fmt: str) -> FileSize:
    """GraphML or GML: its node and edge elements counted; the reader holds the text (bytes and
    str) and a parse tree."""
    if fmt == "graphml":
        nodes_at, edges_at = re.compile(rb"<node[\s/>]"), re.compile(rb"<edge[\s/>]")
        split = b"<"
    else:
        nodes_at, edges_at = re.compile(rb"\bnode\s*\["), re.compile(rb"\bedge\s*\[")
        split = b"]"
    nodes, size = _count(path, nodes_at, _cap(PARSE_ELEMENT_BYTES), split)
    edges, _ = _count(path, edges_at, _cap(PARSE_ELEMENT_BYTES), split)
    return FileSize(
        nodes,
        edges,
        {
            f"the file's text ({size:,} bytes, read whole)": 2.0 * size,
            f"{fmt} parse tree ({nodes + edges:,} elements)": PARSE_ELEMENT_BYTES
            * float(nodes + edges),
        },
    )


def _read_header(member: IO[bytes], name: str) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype of the `.npy` stream `member`, left at its first data byte."""
    version = np.lib.format.read_magic(member)
    read = {
        (1, 0): np.lib.format.read_array_header_1_0,
        (2, 0): np.lib.format.read_array_header_2_0,
    }.get(version)
    if read is None:
        raise ValueError(f"member {name} has .npy format version {version}")
    shape, _, dtype = read(member)
    return shape, dtype


def _header(archive: zipfile.ZipFile, name: str) -> tuple[tuple[int, ...], np.dtype, int]:
    """Shape, dtype and data bytes of the member `name` (a `.npy` file) of an `.npz`, from its
    header alone."""
    with archive.open(name) as member:
        shape, dtype = _read_header(member, name)
        header = member.tell()
    stored = archive.getinfo(name).file_size - header
    return shape, dtype, stored


def _array_bytes(shape: tuple[int, ...], dtype: np.dtype) -> float:
    return float(np.prod([float(side) for side in shape])) * dtype.itemsize


def _archive(path: Path) -> FileSize:
    """An `.npz`: a dense array `ADJACENCY_KEY` (the array, its comparison with its transpose,
    its nonzeros' indices) or a `scipy.sparse` matrix (its arrays, a CSR copy and its
    transpose), sized from the members' `.npy` headers."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = {name.removesuffix(".npy"): name for name in archive.namelist()}
            if "format" in names and "shape" in names:
                return _sparse(path, archive, names)
            if ADJACENCY_KEY not in names:
                return FileSize(0, 0)
            shape, dtype, stored = _header(archive, names[ADJACENCY_KEY])
            data = _array_bytes(shape, dtype)
            reading = {
                f"dense adjacency array ({' x '.join(f'{s:,}' for s in shape)} {dtype})": data,
                "its symmetry check (booleans)": data / max(dtype.itemsize, 1),
            }
            nodes = int(shape[0]) if len(shape) == 2 else 0
            size = FileSize(nodes, max(nodes - 1, 0), reading)
            require_graph_file_fits(path, size)
            if data > stored:
                raise GraphError(
                    f"cannot read graph file {path}: array '{ADJACENCY_KEY}' declares shape "
                    f"{shape} ({data:,.0f} bytes of {dtype}) but its member holds {stored:,} bytes"
                )
            edges = _dense_edges(archive, names[ADJACENCY_KEY], shape, dtype)
            return FileSize(nodes, edges, {**reading, "its nonzeros' indices": 16.0 * 2 * edges})
    except DpdlError:
        raise
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile):
        return FileSize(0, 0)  # the reader names what is wrong with it


def _dense_edges(
    archive: zipfile.ZipFile, name: str, shape: tuple[int, ...], dtype: np.dtype
) -> int:
    """About the edges of a dense square member: its nonzero entries counted in blocks of rows
    (half of them: each edge is two entries)."""
    if len(shape) != 2 or dtype.hasobject or dtype.itemsize == 0:
        return 0
    width = int(shape[1]) * dtype.itemsize
    rows = max(1, BLOCK // max(width, 1))
    count = 0
    with archive.open(name) as member:
        _read_header(member, name)
        while block := member.read(rows * width):
            usable = len(block) - len(block) % dtype.itemsize
            count += int(np.count_nonzero(np.frombuffer(block[:usable], dtype=dtype)))
    return count // 2


def _sparse(path: Path, archive: zipfile.ZipFile, names: dict[str, str]) -> FileSize:
    """A `scipy.sparse.save_npz` archive: its shape (a tiny member, read) and its stored
    entries (from the headers of `data`, `indices`, `row`, `col`)."""
    shape_header, _, _ = _header(archive, names["shape"])
    if int(np.prod(shape_header)) > 16:
        return FileSize(0, 0)
    with archive.open(names["shape"]) as member:
        shape = np.lib.format.read_array(member, allow_pickle=False).tolist()
    headers = {
        key: _header(archive, names[key])
        for key in ("data", "indices", "indptr", "row", "col")
        if key in names
    }
    arrays = {key: _array_bytes(shape_, dtype) for key, (shape_, dtype, _) in headers.items()}
    entries = int(np.prod(headers["data"][0])) if "data" in headers else 0
    nodes = int(shape[0]) if len(shape) == 2 else 0
    reading = {
        f"sparse adjacency ({entries:,} entries: its arrays, a CSR copy and its transpose)": 3
        * float(sum(arrays.values()))
    }
    size = FileSize(nodes, min(entries // 2, nodes * (nodes - 1) // 2), reading)
    require_graph_file_fits(path, size)
    for key, (shape_, _, stored) in headers.items():
        if arrays[key] > stored:
            raise GraphError(
                f"cannot read graph file {path}: array '{key}' of its sparse matrix declares "
                f"shape {shape_} ({arrays[key]:,.0f} bytes) but its member holds {stored:,} bytes"
            )
    return size


_SIZERS: dict[str, Callable[[Path, str], FileSize]] = {
    "edgelist": _text_lines,
    "decentralizepy": _text_lines,
    "graphml": _markup,
    "gml": _markup,
    "npz": lambda path, fmt: _archive(path),
}


@lru_cache(maxsize=16)
def _cached(path: str, fmt: str, stamp: tuple[int, int]) -> FileSize:
    return _SIZERS[fmt](Path(path), fmt)


def declared_size(path: str | Path, fmt: str) -> FileSize:
    """The nodes and edges the graph file `path` of format `fmt` (a key of
    `dpdl.choices.GRAPH_FILE_FORMATS`) will build, and what reading it holds, without building
    it (zero nodes where the file is too malformed to say: its reader names the problem). A
    file that is not regular is a [`GraphError`][dpdl.errors.GraphError]; one whose declared
    array alone does not fit, a [`ResourceError`][dpdl.errors.ResourceError]."""
    path = require_regular(Path(path), "graph file", GraphError)
    if fmt not in _SIZERS:
        return FileSize(0, 0)
    status = path.stat()
    return _cached(str(path.resolve()), fmt, (status.st_mtime_ns, status.st_size))


def require_graph_file_fits(path: str | Path, size: FileSize) -> None:
    """Raise a [`ResourceError`][dpdl.errors.ResourceError] naming `path`, its declared nodes,
    the estimate and the limit when reading it, its graph and its mixing matrix would not fit in
    the memory a job may use."""
    require_memory(
        size.terms(),
        f"graph file {path} declares {size.nodes:,} nodes",
        "use a smaller graph",
    )
