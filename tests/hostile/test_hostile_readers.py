"""Hostile files that dpdl reads by name: graph files that declare more than the machine holds
(refused with the estimate and the limit before anything is built), files that are not regular (a
FIFO must not block, `/dev/null` is not "not found", a folder is named as one), and files nested
too deeply for Python's parsers. Every case must be refused before any work: no training runs,
and `DPDL_MEMORY_LIMIT` makes the limits the same on every machine."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import shutil
import signal
import socket
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
import torch
from hostile_helpers import assert_clear_error, tree
from torch import nn

import dpdl
from dpdl.cli import main
from dpdl.errors import ConfigError, DataError, FileFormatError, GraphError, ResourceError
from dpdl.experiments.replay import read_toml
from dpdl.experiments.saved_models import load_models
from dpdl.graphs import build_graph, read_graph_file
from dpdl.jobspec.resources import graph_size
from dpdl.runtime.checkpoint import load_agent_key, load_checkpoint

pytestmark = pytest.mark.hostile

#: Seconds a case may take before it counts as a hang (a FIFO opened by mistake blocks forever).
HANG_SECONDS = 60
BILLION = 10**9


@pytest.fixture(autouse=True)
def no_hang() -> Iterator[None]:
    """Fail a case that blocks (SIGALRM interrupts the blocked open or read) instead of hanging
    the suite."""

    def stop(signum: int, frame: object) -> None:
        raise TimeoutError(f"blocked for {HANG_SECONDS} s: a reader waited on a file")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(HANG_SECONDS)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.fixture(autouse=True)
def memory_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine of 2 GiB for every case, whatever this one has."""
    monkeypatch.setenv("DPDL_MEMORY_LIMIT", "2G")


# --- graph files that declare more than the machine holds -------------------------------------


def _npy(shape: tuple[int, ...], dtype: str = "<f8", version: tuple[int, int] = (1, 0)) -> bytes:
    """A `.npy` header declaring `shape`, followed by a few bytes of data only."""
    stream = io.BytesIO()
    header = {"descr": dtype, "fortran_order": False, "shape": shape}
    if version == (1, 0):
        np.lib.format.write_array_header_1_0(stream, header)
    else:
        np.lib.format.write_array_header_2_0(stream, header)
    return stream.getvalue() + bytes(4096)


def _zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def _sparse(path: Path, shape: tuple[int, int], entries: int) -> Path:
    """A `scipy.sparse.save_npz` archive whose shape and number of entries are declared by its
    members' headers (the data behind them is a few bytes)."""
    stream = io.BytesIO()
    np.lib.format.write_array(stream, np.array(shape, dtype=np.int64))
    fmt = io.BytesIO()
    np.lib.format.write_array(fmt, np.array("csr"))
    return _zip(
        path,
        {
            "shape.npy": stream.getvalue(),
            "format.npy": fmt.getvalue(),
            "data.npy": _npy((entries,)),
            "indices.npy": _npy((entries,), "<i4"),
            "indptr.npy": _npy((shape[0] + 1,), "<i4"),
        },
    )


def _compressed_zeros(path: Path, side: int) -> Path:
    """A dense `side x side` float64 adjacency of zeros, deflated: a small file that inflates to
    `8 side^2` bytes."""
    stream = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        stream, {"descr": "<f8", "fortran_order": False, "shape": (side, side)}
    )
    with (
        zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive,
        archive.open("adjacency.npy", "w", force_zip64=True) as member,
    ):
        member.write(stream.getvalue())
        row = bytes(8 * side)
        for _ in range(side):
            member.write(row)
    return path


def _lines(count: int, first: str = "") -> bytes:
    return (first + "".join(f"{i} {i + 1}\n" for i in range(count))).encode()


def _graphml(nodes: int) -> bytes:
    body = "".join(f'<node id="{i}"/>' for i in range(nodes))
    body += "".join(f'<edge source="{i}" target="{i + 1}"/>' for i in range(nodes - 1))
    return f'<graphml><graph edgedefault="undirected">{body}</graph></graphml>'.encode()


def _gml(nodes: int) -> bytes:
    body = "".join(f"node [ id {i} ]\n" for i in range(nodes))
    body += "".join(f"edge [ source {i} target {i + 1} ]\n" for i in range(nodes - 1))
    return f"graph [\n{body}]\n".encode()


def _write(name: str, data: bytes) -> Callable[[Path], Path]:
    def make(folder: Path) -> Path:
        path = folder / name
        path.write_bytes(data)
        return path

    return make


# name -> (how to write the file into a folder, format, DPDL_MEMORY_LIMIT, what the error names)
SIZE_CASES: dict[str, tuple[Callable[[Path], Path], str, str, str]] = {
    "decentralizepy-billion": (
        _write("g.txt", b"1000000000\n0 1\n"),
        "decentralizepy",
        "2G",
        "1,000,000,000 nodes",
    ),
    "decentralizepy-ten-million-small-machine": (
        _write("g.txt", b"10000000\n0 1\n"),
        "decentralizepy",
        "1G",
        "10,000,000 nodes",
    ),
    "decentralizepy-detected": (_write("g.txt", b"1000000000\n0 1\n"), "file", "2G", "networkx"),
    "decentralizepy-gzip": (
        _write("g.txt.gz", gzip.compress(b"1000000000\n0 1\n")),
        "decentralizepy",
        "2G",
        "1,000,000,000 nodes",
    ),
    "decentralizepy-quintillion": (
        _write("g.txt", b"999999999999999999\n0 1\n"),
        "decentralizepy",
        "2G",
        "nodes",
    ),
    "npz-dense-billion": (
        lambda f: _zip(f / "g.npz", {"adjacency.npy": _npy((BILLION, BILLION))}),
        "npz",
        "2G",
        "EiB",
    ),
    "npz-dense-billion-v2-header": (
        lambda f: _zip(f / "g.npz", {"adjacency.npy": _npy((BILLION, BILLION), version=(2, 0))}),
        "npz",
        "2G",
        "dense adjacency array",
    ),
    "npz-dense-detected": (
        lambda f: _zip(f / "adjacency.bin", {"adjacency.npy": _npy((BILLION, BILLION))}),
        "file",
        "2G",
        "dense adjacency array",
    ),
    "npz-dense-one-dimensional": (
        lambda f: _zip(f / "g.npz", {"adjacency.npy": _npy((10**12,))}),
        "npz",
        "2G",
        "dense adjacency array",
    ),
    "npz-dense-int8-huge": (
        lambda f: _zip(f / "g.npz", {"adjacency.npy": _npy((10**6, 10**6), "|i1")}),
        "npz",
        "2G",
        "1,000,000 x 1,000,000 int8",
    ),
    "npz-dense-compressed-bomb": (
        lambda f: _compressed_zeros(f / "g.npz", 4000),
        "npz",
        "64M",
        "4,000 x 4,000 float64",
    ),
    "npz-sparse-billion-nodes": (
        lambda f: _sparse(f / "g.npz", (BILLION, BILLION), 4),
        "npz",
        "2G",
        "1,000,000,000 nodes",
    ),
    "npz-sparse-trillion-entries": (
        lambda f: _sparse(f / "g.npz", (10, 10), 10**12),
        "npz",
        "2G",
        "sparse adjacency",
    ),
    "edgelist-many-lines": (_write("g.txt", _lines(20000)), "edgelist", "1M", "networkx"),
    "edgelist-many-lines-gzip": (
        _write("g.txt.gz", gzip.compress(_lines(20000))),
        "edgelist",
        "1M",
        "networkx",
    ),
    "graphml-many-nodes": (_write("g.graphml", _graphml(5000)), "graphml", "2M", "parse tree"),
    "graphml-gzip-many-nodes": (
        _write("g.graphml.gz", gzip.compress(_graphml(5000))),
        "graphml",
        "2M",
        "parse tree",
    ),
    "gml-many-nodes": (_write("g.gml", _gml(5000)), "gml", "2M", "parse tree"),
    "gml-detected-many-nodes": (_write("g.data", _gml(5000)), "file", "2M", "parse tree"),
}


@pytest.mark.parametrize("name", SIZE_CASES)
def test_graph_file_declaring_too_much_is_refused_before_it_is_built(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make, fmt, limit, keyword = SIZE_CASES[name]
    monkeypatch.setenv("DPDL_MEMORY_LIMIT", limit)
    path = make(tmp_path)
    with pytest.raises(ResourceError) as caught:
        read_graph_file(path, fmt)
    message = str(caught.value)
    assert str(path) in message and keyword in message, message
    assert "DPDL_MEMORY_LIMIT" in message, message


def test_npz_whose_header_claims_more_than_its_member_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A header of 3,000 x 3,000 float64 (72 MB, within the limit) over 4 KB of data: named as
    such, not a numpy EOF error after allocating."""
    monkeypatch.setenv("DPDL_MEMORY_LIMIT", "inf")
    path = _zip(tmp_path / "g.npz", {"adjacency.npy": _npy((3000, 3000))})
    with pytest.raises(GraphError, match=r"declares shape \(3000, 3000\).*holds 4,096 bytes"):
        read_graph_file(path, "npz")


def test_a_job_on_a_declared_graph_too_large_for_its_agents_is_refused_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """10^6 nodes fit as a graph, not as 10^6 agents of a 100,000-parameter model: the job's
    estimate takes the declared size, so the file is refused before it is read."""
    monkeypatch.setenv("DPDL_MEMORY_LIMIT", "4G")
    path = tmp_path / "g.txt"
    path.write_bytes(b"1000000\n0 1\n")
    assert graph_size(f"decentralizepy:{path}", None, None) == (10**6, 10**6 - 1)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    out = tmp_path / "out"
    args = ["train", "--graph", f"decentralizepy:{path}", "--task", "mnist-mlp"]
    code, stderr = _run([*args, "--out", str(out), "--no-progress"])
    assert_clear_error(code, stderr, "1,000,000 agents", args)
    assert tree(out) == [] and tree(cwd) == []


# --- the same files on the command line --------------------------------------------------------

BIG_TEXT = _write("big.txt", b"1000000000\n0 1\n")
BIG_NPZ = SIZE_CASES["npz-dense-billion"][0]

# name -> (arguments, with {graph} for the file's spec, the file's writer)
CLI_SIZE_CASES: dict[str, tuple[list[str], Callable[[Path], Path], str]] = {
    "train-decentralizepy": (
        ["train", "--graph", "decentralizepy:{graph}"],
        BIG_TEXT,
        "1,000,000,000",
    ),
    "train-npz": (["train", "--graph", "npz:{graph}"], BIG_NPZ, "EiB"),
    "noise-decentralizepy": (
        ["noise", "--method", "ldp", "--graph", "decentralizepy:{graph}"],
        BIG_TEXT,
        "1,000,000,000",
    ),
    "noise-npz": (["noise", "--method", "whisper", "--graph", "file:{graph}"], BIG_NPZ, "EiB"),
    "audit-decentralizepy": (
        ["audit", "--graph", "decentralizepy:{graph}", "--steps", "10"],
        BIG_TEXT,
        "1,000,000,000",
    ),
    "audit-npz": (["audit", "--graph", "npz:{graph}", "--steps", "10"], BIG_NPZ, "EiB"),
    "factorize-decentralizepy": (
        ["factorize", "--graph", "decentralizepy:{graph}", "--participations", "2"],
        BIG_TEXT,
        "1,000,000,000",
    ),
    "factorize-npz": (["factorize", "--graph", "npz:{graph}", "--batches", "2"], BIG_NPZ, "EiB"),
    "run-local-decentralizepy": (
        ["run-local", "--graph", "decentralizepy:{graph}", "--task", "quadratic"],
        BIG_TEXT,
        "1,000,000,000",
    ),
    "run-local-npz": (
        ["run-local", "--graph", "npz:{graph}", "--task", "quadratic"],
        BIG_NPZ,
        "EiB",
    ),
}

#: Where each command writes: its output folder option.
OUT_OPTION = {
    "train": "--out",
    "audit": "--out",
    "factorize": "--out",
    "run-local": "--workdir",
    "sweep": "--out",
}


def _run(args: list[str]) -> tuple[object, str]:
    """Exit status and stderr of `dpdl ARGS` run in-process; an exception escaping `main` (a
    traceback in a real process) fails the case."""
    buffer = io.StringIO()
    with contextlib.redirect_stderr(buffer):
        try:
            code = main(args)
        except SystemExit as stop:
            code = stop.code
    return code, buffer.getvalue()


def _check_cli(args: list[str], keyword: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """One clear error naming `keyword`, nothing written in the output folder or the working
    directory."""
    for variable in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK"):
        monkeypatch.delenv(variable, raising=False)
    out, cwd = tmp_path / "out", tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    option = OUT_OPTION.get(args[0])
    full = [*args, option, str(out / "run")] if option else list(args)
    if args[0] in ("train", "audit", "run-local", "sweep"):
        full.append("--no-progress")
    code, stderr = _run(full)
    assert_clear_error(code, stderr, keyword, full)
    assert tree(out) == [], f"{full} wrote {tree(out)}"
    assert tree(cwd) == [], f"{full} wrote {tree(cwd)} in the working directory"


@pytest.mark.parametrize("name", CLI_SIZE_CASES)
def test_command_on_a_graph_file_declaring_too_much(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    args, make, keyword = CLI_SIZE_CASES[name]
    files = tmp_path / "files"
    files.mkdir()
    graph = make(files)
    filled = [arg.format(graph=graph) for arg in args]
    _check_cli(filled, keyword, tmp_path, monkeypatch)


# --- files that are not regular ----------------------------------------------------------------


def _special(kind: str, folder: Path, name: str) -> Path:
    """A path of `kind` named `name` in `folder`: a FIFO, a socket, a folder, or a device."""
    if kind == "device":
        return Path(os.devnull)
    if kind == "zero-device":
        return Path("/dev/zero")
    path = folder / name
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.close()  # the socket file stays
    return path


#: What each kind of file is called in the error.
KIND_WORDS = {
    "fifo": "FIFO",
    "device": "character device",
    "zero-device": "character device",
    "folder": "a folder",
    "socket": "socket",
}

# name -> (arguments with {file} for the special file, its name)
FILE_OPTIONS: dict[str, tuple[list[str], str]] = {
    "train-config": (["train", "--config", "{file}"], "options.toml"),
    "train-graph-file": (["train", "--graph", "file:{file}"], "g.txt"),
    "train-graph-edgelist": (["train", "--graph", "edgelist:{file}"], "g.txt"),
    "run-local-graph": (["run-local", "--graph", "npz:{file}", "--task", "quadratic"], "g.npz"),
    "noise-graph": (["noise", "--method", "ldp", "--graph", "gml:{file}"], "g.gml"),
    "audit-graph": (["audit", "--graph", "graphml:{file}", "--steps", "5"], "g.graphml"),
    "factorize-graph": (["factorize", "--graph", "decentralizepy:{file}"], "g.txt"),
    "sweep-file": (["sweep", "{file}", "--dry-run"], "sweep.toml"),
}
KINDS = ("fifo", "device", "folder", "socket")
NOT_REGULAR = [
    (option, kind)
    for option in FILE_OPTIONS
    for kind in KINDS
    if not (option == "sweep-file" and kind == "folder")  # a folder's name is a sweep's name
]


@pytest.mark.parametrize(("option", "kind"), NOT_REGULAR)
def test_file_option_naming_something_not_regular(
    option: str, kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    args, name = FILE_OPTIONS[option]
    files = tmp_path / "files"
    files.mkdir()
    path = _special(kind, files, name)
    filled = [arg.format(file=path) for arg in args]
    _check_cli(filled, KIND_WORDS[kind], tmp_path, monkeypatch)


@pytest.mark.parametrize("kind", ["fifo", "device", "zero-device", "folder", "socket"])
def test_graph_file_not_regular_in_the_api(kind: str, tmp_path: Path) -> None:
    """`/dev/null` is not "not found"; `/dev/zero` is not read for ever; a FIFO does not block."""
    path = _special(kind, tmp_path, "g.txt")
    with pytest.raises(GraphError, match=f"{path} is not a regular file.*{KIND_WORDS[kind]}"):
        read_graph_file(path)


@pytest.mark.parametrize("spec", ["file", "npz", "gml", "graphml", "edgelist", "decentralizepy"])
def test_fifo_graph_for_every_format_through_build_graph(spec: str, tmp_path: Path) -> None:
    path = _special("fifo", tmp_path, "g")
    with pytest.raises(GraphError, match="FIFO"):
        build_graph(f"{spec}:{path}", None, None, seed=0)


def test_declared_size_of_a_fifo_does_not_block(tmp_path: Path) -> None:
    from dpdl.graphs.sizes import declared_size

    path = _special("fifo", tmp_path, "g.txt")
    with pytest.raises(GraphError, match="FIFO"):
        declared_size(path, "edgelist")


@pytest.mark.parametrize("kind", ["fifo", "device", "folder"])
def test_options_file_not_regular_in_the_api(kind: str, tmp_path: Path) -> None:
    path = _special(kind, tmp_path, "options.toml")
    with pytest.raises(ConfigError, match=f"options file {path} is not a regular file"):
        read_toml(path)


def test_data_file_that_is_a_fifo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A data set's file replaced by a FIFO is named, not waited on (nor taken as missing)."""
    data = tmp_path / "data" / "california_housing"
    data.mkdir(parents=True)
    os.mkfifo(data / "cal_housing.data.gz")
    monkeypatch.setenv("DPDL_DATA_DIR", str(data.parent))
    args = ["train", "--graph", "ring", "--n", "4", "--steps", "2", "--task", "housing-mlp"]
    _check_cli(args, "cal_housing.data.gz is not a regular file", tmp_path, monkeypatch)


def test_checkpoint_that_is_a_fifo_is_refused_on_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--resume` with a FIFO where the checkpoint goes: refused by name, not a silent fresh
    start (which would replace the FIFO and hide the mistake)."""
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "run"
    args = ["train", "--graph", "ring", "--n", "4", "--steps", "2", "--task", "quadratic"]
    # a run of these options made the folder (its marker lets --resume continue it)
    assert _run([*args, "--out", str(out), "--no-progress"])[0] == 0
    shutil.rmtree(out / "checkpoints", ignore_errors=True)
    (out / "checkpoints").mkdir()
    os.mkfifo(out / "checkpoints" / "seed0.npz")
    code, stderr = _run([*args, "--out", str(out), "--resume", "--no-progress"])
    assert_clear_error(code, stderr, "seed0.npz is not a regular file", args)
    assert (out / "checkpoints" / "seed0.npz").is_fifo()


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_runtime_checkpoint_not_regular(kind: str, tmp_path: Path) -> None:
    path = _special(kind, tmp_path, "agent0.npz")
    with pytest.raises(FileFormatError, match=r"checkpoint .* is not a regular file"):
        load_checkpoint(path, "run", 0)


def test_agent_key_that_is_a_fifo(tmp_path: Path) -> None:
    path = _special("fifo", tmp_path, "key.json")
    with pytest.raises(FileFormatError, match=r"agent key file .* FIFO"):
        load_agent_key(path, "run", 0, 0)


def _saved_models(folder: Path) -> Path:
    """A folder of saved models written by `FitResult.save` (a tiny fit)."""
    rng = np.random.default_rng(0)
    inputs = rng.normal(size=(40, 3)).astype(np.float32)
    labels = (inputs[:, 0] > 0).astype(np.int64)
    torch.manual_seed(0)
    result = dpdl.fit(
        nn.Sequential(nn.Linear(3, 2)),
        lambda o, t: nn.functional.cross_entropy(o, t, reduction="none"),
        (inputs, labels),
        (inputs, labels),
        nx.cycle_graph(4),
        eps=5.0,
        steps=2,
        batch_size=4,
        progress=False,
    )
    result.save(folder)
    return folder


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _saved_models(tmp_path_factory.mktemp("saved") / "models")


def _copy(folder: Path, into: Path) -> Path:
    into.mkdir()
    for path in folder.iterdir():
        (into / path.name).write_bytes(path.read_bytes())
    return into


@pytest.mark.parametrize("kind", ["fifo", "folder", "socket"])
def test_saved_models_manifest_not_regular(kind: str, saved: Path, tmp_path: Path) -> None:
    folder = _copy(saved, tmp_path / "models")
    (folder / "manifest.json").unlink()
    _special(kind, folder, "manifest.json")
    with pytest.raises(FileFormatError, match=f"manifest .* {KIND_WORDS[kind]}"):
        load_models(folder)


def test_saved_models_listed_file_that_is_a_fifo(saved: Path, tmp_path: Path) -> None:
    folder = _copy(saved, tmp_path / "models")
    listed = json.loads((folder / "manifest.json").read_text())["files"]["average"]["path"]
    (folder / listed).unlink()
    os.mkfifo(folder / listed)
    with pytest.raises(FileFormatError, match=f"{listed} is not a regular file"):
        load_models(folder)


def test_fit_resume_from_a_fifo(tmp_path: Path) -> None:
    path = _special("fifo", tmp_path, "fit.npz")
    with pytest.raises(ConfigError, match=r"resume_from: checkpoint .* FIFO"):
        dpdl.fit(
            nn.Sequential(nn.Linear(3, 2)),
            lambda o, t: nn.functional.cross_entropy(o, t, reduction="none"),
            (np.zeros((8, 3), np.float32), np.zeros(8, np.int64)),
            (np.zeros((8, 3), np.float32), np.zeros(8, np.int64)),
            nx.cycle_graph(4),
            eps=5.0,
            resume_from=path,
            progress=False,
        )


# --- files nested too deeply ---------------------------------------------------------------------

DEEP = 2000
DEEP_TOML = {
    "arrays": "steps = " + "[" * DEEP + "]" * DEEP + "\n",
    "inline-tables": "steps = " + "{a = " * DEEP + "1" + "}" * DEEP + "\n",
    "arrays-of-tables": "steps = " + "[{a = " * DEEP + "1" + "}]" * DEEP + "\n",
}


@pytest.mark.parametrize("shape", DEEP_TOML)
def test_options_file_nested_too_deeply(
    shape: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = tmp_path / "files"
    files.mkdir()
    path = files / "deep.toml"
    path.write_text(DEEP_TOML[shape])
    _check_cli(["train", "--config", str(path)], "nested too deeply", tmp_path, monkeypatch)


def test_sweep_file_nested_too_deeply(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = tmp_path / "files"
    files.mkdir()
    path = files / "deep.toml"
    path.write_text("[base]\n" + DEEP_TOML["arrays"])
    _check_cli(["sweep", str(path), "--dry-run"], "nested too deeply", tmp_path, monkeypatch)


@pytest.mark.parametrize("value", ["[" * DEEP + "]" * DEEP, "{a = " * DEEP + "1" + "}" * DEEP])
def test_set_value_nested_too_deeply(
    value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = ["train", "--graph", "ring", "--n", "4", "--set", f"steps={value}"]
    _check_cli(args, "--set steps", tmp_path, monkeypatch)


def test_saved_models_manifest_nested_too_deeply(saved: Path, tmp_path: Path) -> None:
    folder = _copy(saved, tmp_path / "models")
    (folder / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(FileFormatError, match="nested too deeply"):
        load_models(folder)


def test_agent_key_nested_too_deeply(tmp_path: Path) -> None:
    path = tmp_path / "key.json"
    path.write_text('{"a": ' * 100_000 + "1" + "}" * 100_000)
    with pytest.raises(FileFormatError, match="is not agent 0's key"):
        load_agent_key(path, "run", 0, 0)


def test_data_file_found_as_a_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder where a data set's file goes is named as a folder, not taken as missing."""
    data = tmp_path / "data" / "california_housing"
    (data / "cal_housing.data.gz").mkdir(parents=True)
    monkeypatch.setenv("DPDL_DATA_DIR", str(data.parent))
    from dpdl.data.paths import data_file

    with pytest.raises(
        DataError, match=r"cal_housing.data.gz is not a regular file: it is a folder"
    ):
        data_file("california-housing", "california_housing/cal_housing.data.gz")


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_results_table_not_regular(kind: str, tmp_path: Path) -> None:
    from dpdl.experiments.results import read_rows

    path = _special(kind, tmp_path, "runs.csv")
    with pytest.raises(ConfigError, match=f"results table {path} is not a regular file"):
        read_rows(path)


@pytest.mark.parametrize("name", ["decentralizepy-billion", "npz-dense-billion"])
def test_fit_on_a_graph_file_declaring_too_much(name: str, tmp_path: Path) -> None:
    """`dpdl.fit` sizes a graph file from its header before reading it, as the commands do."""
    make, fmt, _, _ = SIZE_CASES[name]
    path = make(tmp_path)
    with pytest.raises(ResourceError, match="1,000,000,000"):
        dpdl.fit(
            nn.Sequential(nn.Linear(3, 2)),
            lambda o, t: nn.functional.cross_entropy(o, t, reduction="none"),
            (np.zeros((8, 3), np.float32), np.zeros(8, np.int64)),
            (np.zeros((8, 3), np.float32), np.zeros(8, np.int64)),
            f"{fmt}:{path}",
            eps=5.0,
            progress=False,
        )
