"""How large dpdl goes dense, and how much memory this machine has for a job.

Below `SPARSE_MIN_AGENTS` agents every matrix over agents is a dense numpy array, as the
papers' 20-100 agents need (and every seeded result of that size is unchanged). From it on, the
mixing matrix W is a `scipy.sparse` CSR matrix built from the graph's edges, so a D-SGD step
costs O(|E| d) instead of O(n^2 d); spectral facts and mixing validation use sparse eigensolvers;
independent noise is accounted in closed form per agent. Designs that need a dense n x n
covariance (Whisper, CorN-DSGD's multi-seed design) stay dense and check first, with
`require_dense`, that the matrices fit in memory.

`memory_limit` is the memory a job may use: `DPDL_MEMORY_LIMIT` when set, else what the
operating system says is available (`MemAvailable` of `/proc/meminfo`, capped by a cgroup's
`memory.max`; elsewhere the physical memory). `dpdl.jobspec.resources` compares a whole
job's estimate with it; `require_memory` compares a few named terms (a graph file's reading,
`dpdl.graphs.sizes`) with it.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from pathlib import Path

from dpdl.errors import ConfigError, ResourceError

__all__ = [
    "AGENT_EVAL_PAIRS",
    "GRAPH_EDGE_BYTES",
    "GRAPH_NODE_BYTES",
    "MEMORY_LIMIT_ENV",
    "SPARSE_MIN_AGENTS",
    "agent_test_count",
    "dense_bytes",
    "format_bytes",
    "graph_terms",
    "memory_limit",
    "parse_bytes",
    "require_dense",
    "require_memory",
]

#: From this many agents on, W is held sparse (CSR) and its spectrum found by sparse eigensolvers.
#: A dense 1000 x 1000 float64 matrix is 8 MB and its eigendecomposition about a second: below,
#: dense is as fast and keeps seeded results bit for bit.
SPARSE_MIN_AGENTS = 1000

#: Environment variable that sets the memory a job may use, in bytes or with a binary suffix
#: (``512M``, ``8G``, ``1.5T``), or ``inf`` to check nothing; it overrides what the OS says.
MEMORY_LIMIT_ENV = "DPDL_MEMORY_LIMIT"

#: Bytes networkx spends per node and per edge of a graph (dicts of dicts; measured).
GRAPH_NODE_BYTES = 300
GRAPH_EDGE_BYTES = 150

_SUFFIXES = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "P": 2**50}


def dense_bytes(n: int, matrices: int = 1) -> int:
    """Bytes of `matrices` dense float64 n x n matrices."""
    return 8 * n * n * matrices


def format_bytes(count: float) -> str:
    """`count` bytes in binary units, e.g. `74.5 GiB`."""
    for unit, size in (
        ("EiB", 2**60),
        ("PiB", 2**50),
        ("TiB", 2**40),
        ("GiB", 2**30),
        ("MiB", 2**20),
    ):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count / 2**10:.1f} KiB"


def parse_bytes(text: str, what: str = MEMORY_LIMIT_ENV) -> float:
    """`text` (`"8G"`, `"512MiB"`, `"1e9"`, `"inf"`) as bytes; a
    [`ConfigError`][dpdl.errors.ConfigError] naming `what` when it is not a size."""
    match = re.fullmatch(r"\s*([0-9.eE+]+|inf)\s*([KMGTP]?)(?:i?B)?\s*", text, re.IGNORECASE)
    try:
        value = float(match.group(1)) * _SUFFIXES[match.group(2).upper()] if match else math.nan
    except ValueError:
        value = math.nan
    if not value > 0:
        raise ConfigError(
            f"{what}={text!r} is not a size: give bytes, with K, M, G or T for binary units "
            "(8G), or inf"
        )
    return value


def _meminfo_available() -> int | None:
    """`MemAvailable` of `/proc/meminfo` in bytes (Linux), or None."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cgroup_room() -> int | None:
    """What a cgroup v2 `memory.max` leaves above the group's `memory.current`, or None."""
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit == "max":
            return None
        return int(limit) - int(Path("/sys/fs/cgroup/memory.current").read_text())
    except (OSError, ValueError):
        return None


def _physical_bytes() -> int | None:
    """Physical memory of this machine, or None where the OS does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def memory_limit() -> tuple[float, str] | None:
    """The memory a job may use, in bytes, and where that figure comes from; None where nothing
    says (then nothing is checked). `DPDL_MEMORY_LIMIT` wins; else the smaller of
    `MemAvailable` and a cgroup's room; else the physical memory."""
    text = os.environ.get(MEMORY_LIMIT_ENV)
    if text:
        value = parse_bytes(text)
        return None if math.isinf(value) else (value, MEMORY_LIMIT_ENV)
    found = [
        (float(value), source)
        for value, source in (
            (_meminfo_available(), "available memory"),
            (_cgroup_room(), "the cgroup's memory.max"),
        )
        if value is not None
    ]
    if found:
        return min(found)
    physical = _physical_bytes()
    return None if physical is None else (float(physical), "physical memory")


def require_dense(n: int, what: str, matrices: int) -> None:
    """Raise a [`ResourceError`][dpdl.errors.ResourceError] naming `n`, the bytes needed and the
    limit, before anything is allocated, when `matrices` dense n x n float64 matrices (what the
    design `what` holds at once) exceed the memory a job may use (`memory_limit`)."""
    needed, limit = dense_bytes(n, matrices), memory_limit()
    if limit is not None and needed > limit[0]:
        raise ResourceError(
            f"{what} is dense: at n = {n} agents it needs about {needed:,} bytes "
            f"({format_bytes(needed)}: {matrices} matrices of {n} x {n} float64), more than the "
            f"{format_bytes(limit[0])} of {limit[1]}; use a mechanism accounted in closed form "
            "at any n (ldp, cdp) or fewer agents"
        )


def graph_terms(n: int, edges: int, dense: bool) -> dict[str, float]:
    """The bytes of a graph of `n` nodes and `edges` edges as networkx holds it and of its
    mixing matrix W (`dense`: a float64 n x n array and its eigendecomposition; else CSR), by
    named term."""
    terms = {
        f"networkx graph ({n:,} nodes, {edges:,} edges)": float(
            GRAPH_NODE_BYTES * n + GRAPH_EDGE_BYTES * edges
        )
    }
    if dense:
        terms[f"dense mixing matrix W ({n:,} x {n:,} float64) and its eigendecomposition"] = (
            3 * 8.0 * n * n
        )
    else:
        terms[f"sparse mixing matrix W ({2 * edges + n:,} entries)"] = 3 * 12.0 * (2 * edges + n)
    return terms


def require_memory(terms: Mapping[str, float], what: str, advice: str) -> None:
    """Raise a [`ResourceError`][dpdl.errors.ResourceError] naming `what`, the bytes of `terms`
    added up, the largest term and the limit, when they exceed the memory a job may use
    (`memory_limit`); `advice` says what to do instead."""
    limit, needed = memory_limit(), float(sum(terms.values()))
    if limit is not None and needed > limit[0]:
        name, size = max(terms.items(), key=lambda item: item[1])
        raise ResourceError(
            f"{what}: that needs about {format_bytes(needed)} of memory (largest term: {name}, "
            f"{format_bytes(size)}), more than the {format_bytes(limit[0])} of {limit[1]}; "
            f"{advice}, or set {MEMORY_LIMIT_ENV} to override"
        )


#: The (agent model, test example) pairs an evaluation of a torch model scores at most when no
#: sample size is given: 148 MNIST CNN agents on 2,027 examples each and the average model on
#: 10,000 took 17.1 s on 2 cores, so 200,000 (1,351 each) for about 12 s (BENCHMARKS.md, "Deep
#: models on the CPU").
AGENT_EVAL_PAIRS = 200_000


def agent_test_count(tests: int, agents: int, examples: int | None) -> int:
    """How many of `tests` test examples each of `agents` models is scored on: `examples`
    (all of them if fewer); None: all while `agents * tests <= AGENT_EVAL_PAIRS`, otherwise
    `max(1000, AGENT_EVAL_PAIRS // agents)`."""
    if examples is None:
        examples = tests if agents * tests <= AGENT_EVAL_PAIRS else AGENT_EVAL_PAIRS // agents
        examples = max(examples, 1000)
    elif isinstance(examples, bool) or not isinstance(examples, int) or examples < 1:
        raise ConfigError(f"agent_test_examples must be a whole number >= 1, got {examples!r}")
    return min(examples, tests)
