"""Shared pieces of the hostile-input suite: the bad files it feeds dpdl, and how a CLI case is
judged (exit status 2, one ``dpdl: error:`` line naming the bad thing, no traceback, nothing
written). The ``bad_files`` fixture is in ``conftest.py``."""

from __future__ import annotations

import gzip
import time
import tracemalloc
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

#: The bad (and a few good) files the cases name as ``{key}`` in their arguments.
FILES: dict[str, bytes] = {
    "binary": bytes(range(256)) * 4,
    "empty": b"",
    "blank": b"\n\n   \n",
    "weighted": b"0 1 0.5\n1 2 2.0\n2 3 1.0\n3 0 1.0\n",
    "csv": b"source,target\n0,1\n1,2\n2,3\n3,0\n",
    "words": b"alice bob\nbob carol\ncarol alice\n",
    "three-columns-text": b"0 1 x\n1 2 y\n",
    "disconnected": b"0 1\n1 2\n2 0\n3 4\n4 5\n5 3\n",
    "single-node-loop": b"0 0\n",
    "ring": b"0 1\n1 2\n2 3\n3 0\n",
    "decentralizepy-bad": b"four\n0 1\n",
    "decentralizepy-range": b"3\n0 1\n1 7\n",
    "graphml-garbage": b"<graphml><graph><node id=",
    "gml-garbage": b"graph [ node [ id 0 ] edge [ source 0 ",
    "zip-truncated": b"PK\x03\x04" + bytes(60),
    "gz-bad": b"\x1f\x8b\x08\x00garbage",
    "toml-bad": b"steps = = 3\n",
    "toml-unknown-key": b"no-such-option = 3\n",
    "toml-wrong-type": b'steps = "many"\n',
    "toml-fraction": b"steps = 2.5\n",
    "toml-table": b"[graph]\nn = 3\n",
    "toml-bool-for-int": b"steps = true\n",
    "toml-nan": b"eps = nan\n",
    "toml-list-for-float": b"eps = [1, 2]\n",
    "toml-negative-alpha": b"alpha = -1.0\n",
    "toml-every-round": b"every-round = true\n",
    "toml-dup-seed": b"seed = [3, 3]\n",
    "toml-utf16": "steps = 3\n".encode("utf-16"),
    "toml-huge": b"steps = 99999999999999999999999999999\n",
}


def write_special(folder: Path) -> dict[str, Path]:
    """Files that need more than bytes: archives, gzip, a file standing where a folder goes."""
    paths = {}
    gz = folder / "edges.txt.gz"
    gz.write_bytes(gzip.compress(bytes(range(256))))
    paths["gz-binary"] = gz
    npz_text = folder / "notnpz.npz"
    npz_text.write_text("0 1\n1 2\n")
    paths["npz-text"] = npz_text
    npz_nokey = folder / "nokey.npz"
    np.savez(npz_nokey, other=np.eye(3))
    paths["npz-nokey"] = npz_nokey
    npz_asym = folder / "asym.npz"
    np.savez(npz_asym, adjacency=np.triu(np.ones((4, 4)), 1))
    paths["npz-asym"] = npz_asym
    npz_nan = folder / "nan.npz"
    adjacency = np.ones((3, 3))
    adjacency[0, 1] = np.nan
    np.savez(npz_nan, adjacency=adjacency)
    paths["npz-nan"] = npz_nan
    npz_rect = folder / "rect.npz"
    np.savez(npz_rect, adjacency=np.ones((3, 4)))
    paths["npz-rect"] = npz_rect
    zip_foreign = folder / "foreign.zip"
    with zipfile.ZipFile(zip_foreign, "w") as archive:
        archive.writestr("readme.txt", "not an array")
    paths["zip-foreign"] = zip_foreign
    a_file = folder / "a-file"
    a_file.write_text("I am a file, not a folder\n")
    paths["a-file"] = a_file
    paths["under-a-file"] = a_file / "out"
    paths["folder"] = folder / "a-folder"
    paths["folder"].mkdir()
    paths["missing"] = folder / "does-not-exist.txt"
    return paths


def fill(args: list[str], files: dict[str, Path], out: Path) -> list[str]:
    """``args`` with ``{key}`` replaced by the path of bad file ``key`` and ``{out}`` by the
    case's output folder."""
    names = {key: str(path) for key, path in files.items()}
    return [arg.format(out=out, **names) for arg in args]


def assert_clear_error(code: object, stderr: str, keyword: str, args: list[str]) -> None:
    """Exit status 2, no traceback, exactly one ``dpdl: error:`` line, and that line names
    ``keyword`` (case-insensitive)."""
    detail = f"args={args}\nstderr={stderr!r}"
    assert "Traceback" not in stderr, detail
    assert code == 2, f"exit status {code!r}\n{detail}"
    errors = [line for line in stderr.splitlines() if line.startswith("dpdl: error:")]
    assert len(errors) == 1, detail
    assert keyword.lower() in errors[0].lower(), detail


def tree(folder: Path) -> list[str]:
    """Every path under ``folder`` (empty when it does not exist)."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


def refused_fast(call: Callable[[], Any], max_traced: int, max_seconds: float) -> Any:
    """Run ``call()`` under tracemalloc and assert it returned or raised having traced under
    ``max_traced`` bytes within ``max_seconds`` (an API refusal raises: the bounds are checked on
    the error's way out too); return its result."""

    def within_bounds() -> None:
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
        assert peak < max_traced, f"allocated {peak:,} bytes before refusing"
        assert seconds < max_seconds, f"took {seconds:.1f} s to refuse"

    tracemalloc.start()
    start = time.perf_counter()
    try:
        result = call()
    except Exception:
        within_bounds()
        raise
    else:
        within_bounds()
    finally:
        tracemalloc.stop()
    return result
