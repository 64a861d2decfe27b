"""Benchmark of dpdl at graph sizes beyond the papers' (issue 20, items 2 and 6): the sparse mixing
matrix, validation and spectral facts, and end-to-end training on thousands of agents.

What is measured, each case in a fresh Python process (wall clock, ``time.perf_counter``; peak
memory: the child's maximum resident set size, ``resource.getrusage``):

1. Mixing validation on SNAP Facebook (4039 agents) and Gnutella (6299): ``mixing_matrix`` (build
   the Metropolis-Hastings W and validate it: stochasticity, support, mixing rate) and the graph
   summary's spectral facts (algebraic connectivity, spectral gap). Sparse (CSR W, ARPACK, LOBPCG)
   always; the old dense way (``np.linalg.norm(W - J, 2)`` and a dense Laplacian ``eigvalsh``) only
   with ``--with-dense`` (minutes per graph). Goal: under 5 s per graph.
2. ``dpdl train`` end to end (``run_training``: graph, W, task, calibration, mechanism, D-SGD,
   accounting, summary) on Facebook, logistic regression on a9a, LDP, ``--facebook-steps`` steps
   (default 100; the goal is stated for 1000, and the per-step cost is reported to extrapolate).
   Goal: 1000 steps under 30 s, peak memory under 1.5 GB.
3. A random 10-regular graph of 100,000 agents (read from an edge-list file, as a user's graph
   would be), least-squares task, LDP and DECOR, 100 steps. Goal: under 100 s and 8 GB.

A case that fails reports its error instead of a time. Figures go to stdout and, as the section
between ``<!-- bench_scale:start -->`` and ``<!-- bench_scale:end -->``, to ``BENCHMARKS.md``.

Run from the repository root with the data folder set (``DPDL_DATA_DIR``):
``.venv/bin/python benchmarks/bench_scale.py`` (several minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from _report import markers, measured, random_regular_file, run_case, write_section

#: The large sparse random graph: agents and degree.
RANDOM_AGENTS, RANDOM_DEGREE = 100_000, 10


def _peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9


def _validation(graph_name: str, dense: bool) -> dict[str, float]:
    from dpdl.graphs import algebraic_connectivity, mixing_matrix, real_graph, spectral_gap
    from dpdl.graphs.mixing import metropolis_hastings, validate_mixing_matrix

    graph = real_graph(graph_name)
    start = time.perf_counter()
    if dense:
        weights = metropolis_hastings(graph, sparse=False)
        n = weights.shape[0]
        validate_mixing_matrix(weights, graph, mixing=False)
        rate = float(np.linalg.norm(weights - np.full((n, n), 1.0 / n), 2))
        validated = time.perf_counter()
        connectivity = algebraic_connectivity(graph, sparse=False)
        gap = 1.0 - rate
    else:
        weights = mixing_matrix(graph)
        validated = time.perf_counter()
        connectivity = algebraic_connectivity(graph)
        gap = spectral_gap(weights)
    end = time.perf_counter()
    return {
        "validation_s": validated - start,
        "spectral_s": end - validated,
        "algebraic_connectivity": connectivity,
        "spectral_gap": gap,
    }


def _train(graph: str, task: str, mechanism: str, steps: int) -> dict[str, float]:
    from dpdl.experiments.train import TrainConfig, run_training

    start = time.perf_counter()
    result = run_training(
        TrainConfig(task=task, graph=graph, mechanism=mechanism, steps=steps, eval_every=steps)
    )
    summary = result.summary()
    return {
        "seconds": time.perf_counter() - start,
        "n": summary["n"],
        "epsilon": summary["privacy"][0]["epsilon"],
        "trace_WRW": summary["trace_WRW"],
        result.primary_metric: summary[result.primary_metric],
    }


def _child(case: list[str]) -> None:
    """Run one case in this process and print its outcome as one JSON line."""
    try:
        if case[0] == "validation":
            outcome = _validation(case[1], case[2] == "dense")
        else:
            outcome = _train(case[1], case[2], case[3], int(case[4]))
    except Exception as error:  # a benchmark reports what failed instead of stopping
        outcome = {"error": f"{type(error).__name__}: {error}"}
    outcome["peak_gb"] = _peak_gb()
    print(json.dumps(outcome))


def _run(case: list[str]) -> dict:
    return run_case(__file__, case)


def _random_graph_file(folder: Path) -> Path:
    return random_regular_file(folder, RANDOM_AGENTS, RANDOM_DEGREE)


def _cell(outcome: dict, key: str, fmt: str = ".1f") -> str:
    return outcome["error"] if "error" in outcome else format(outcome[key], fmt)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--with-dense", action="store_true", help="also time the old dense way")
    parser.add_argument("--facebook-steps", type=int, default=100)
    args = parser.parse_args()
    if args.case:
        _child(args.case)
        return
    rows = ["| case | way | time (s) | peak memory (GB) | notes |", "|---|---|---|---|---|"]
    for name in ("facebook", "gnutella"):
        for way in ("sparse", "dense") if args.with_dense else ("sparse",):
            out = _run(["validation", name, way])
            print(name, way, out, flush=True)
            notes = (
                f"spectral facts {_cell(out, 'spectral_s', '.2f')} s more (a(G) = "
                f"{_cell(out, 'algebraic_connectivity', '.6g')}, gap = "
                f"{_cell(out, 'spectral_gap', '.4g')})"
            )
            rows.append(
                f"| mixing validation, {name} | {way} | {_cell(out, 'validation_s', '.2f')} | "
                f"{out['peak_gb']:.2f} | {notes} |"
            )
    steps = args.facebook_steps
    out = _run(["train", "facebook", "logreg-a9a", "ldp", str(steps)])
    print("facebook ldp", out, flush=True)
    per_step = "" if "error" in out else f"; {out['seconds'] / steps:.3f} s per step, all in"
    rows.append(
        f"| train, Facebook (n = {out.get('n', 4039)}), a9a, LDP, {steps} steps | sparse | "
        f"{_cell(out, 'seconds')} | {out['peak_gb']:.2f} | eps {_cell(out, 'epsilon', '.3g')}"
        f"{per_step} |"
    )
    with tempfile.TemporaryDirectory() as folder:
        path = _random_graph_file(Path(folder))
        for mechanism in ("ldp", "decor"):
            out = _run(["train", f"edgelist:{path}", "least-squares", mechanism, "100"])
            print("random", mechanism, out, flush=True)
            notes = (
                "" if "error" in out else f"eps {out['epsilon']:.3g}, trace {out['trace_WRW']:.4g}"
            )
            rows.append(
                f"| train, random {RANDOM_DEGREE}-regular (n = {RANDOM_AGENTS:,}), least squares, "
                f"{mechanism.upper()}, 100 steps | sparse | {_cell(out, 'seconds')} | "
                f"{out['peak_gb']:.2f} | {notes} |"
            )
    start, end = markers("bench_scale")
    text = "\n".join(
        [
            start,
            "## Sparse at scale (bench_scale.py)",
            "",
            "Each case in a fresh process; time is wall clock, memory the process's peak resident "
            "set. " + measured(f"numpy {np.__version__}"),
            "",
            *rows,
            end,
            "",
        ]
    )
    print(text)
    write_section(text, start, end)


if __name__ == "__main__":
    main()
