"""Benchmark of the certified accountant against the previous one, side by side in one run.

The accountant now reads the factor the agents sample (its Gram matrix and, where that is
ill-conditioned, a QR factorisation, each residual bounded: :mod:`dpdl.accounting.sensitivity`)
where it inverted an assembled covariance (one Cholesky), and certifies the simulation's
compressed draw beside it. This measures what that costs where it is
paid: designing a calibrated mechanism (every step of a design search and of the safe-scale loop
accounts), accounting it against the eavesdropper and against honest-but-curious agents (one
factorisation per coalition), and one step's noise draw of the simulation.

Each case runs in a fresh interpreter, once with this checkout's ``src`` and once with the
previous tree's (``git worktree`` of ``--previous``, by default the commit before the certified
accountant), taking turns for ``--rounds`` rounds; the table gives the median of each, and the
eps each reports (the previous one's may sit a rounding above the target). Figures go to stdout
and to the ``bench_certified`` section of ``BENCHMARKS.md``. Run from the repository root:
``.venv/bin/python benchmarks/bench_certified.py`` (about five minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _report import markers, measured, run_case, write_section  # benchmarks/_report.py

START, END = markers("bench_certified")
ROOT = Path(__file__).resolve().parent.parent
#: The commit before the certified accountant.
PREVIOUS = "e13b289"

#: (label, mechanism, graph, n, p, threat accounted).
CASES = [
    ("DECOR, Erdos-Renyi n=20 p=0.5", "decor", "er", 20, 0.5, "eavesdropper"),
    ("DECOR, Erdos-Renyi n=100 p=0.1", "decor", "er", 100, 0.1, "eavesdropper"),
    ("DECOR, complete n=60", "decor", "complete", 60, 0.0, "eavesdropper"),
    ("Whisper, Erdos-Renyi n=100 p=0.1", "whisper", "er", 100, 0.1, "eavesdropper"),
    ("Whisper, Erdos-Renyi n=400 p=0.05", "whisper", "er", 400, 0.05, "eavesdropper"),
    ("DECOR, ring n=40, honest-but-curious", "decor", "ring", 40, 0.0, "honest-but-curious"),
]


def _case(mechanism: str, graph: str, n: int, p: float, threat: str) -> dict:
    """Design, account and draw once (in this interpreter's dpdl)."""
    import numpy as np

    from dpdl.accounting import AgentLevel, account, calibrate
    from dpdl.graphs import build_graph, metropolis_hastings
    from dpdl.mechanisms.registry import build_mechanism
    from dpdl.threats import threat_by_name

    built = build_graph(graph, n, p, seed=0)
    weights = metropolis_hastings(built)
    calibration = calibrate(10.0, 1e-5, 1000, AgentLevel(0.1))
    start = time.perf_counter()
    noise = build_mechanism(mechanism, built, weights, calibration)
    designed = time.perf_counter()
    report = account(noise, threat_by_name(threat), AgentLevel(0.1), 1000, 1e-5)
    accounted = time.perf_counter()
    noise.sample(np.random.default_rng(0), 10_000)
    drawn = time.perf_counter()
    return {
        "design": designed - start,
        "account": accounted - designed,
        "draw": drawn - accounted,
        "epsilon": report.epsilon,
    }


def _run(src: Path, case: tuple) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
    return run_case(__file__, [json.dumps(list(case[1:]))], env=env)


def _worktree(ref: str, folder: Path) -> Path:
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(folder), ref], check=True
    )
    return folder / "src"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--previous", default=PREVIOUS, help="the previous tree's git ref")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--case", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(_case(*json.loads(args.case[0]))))
        return
    folder = Path(tempfile.mkdtemp(prefix="dpdl-previous-")) / "tree"
    previous = _worktree(args.previous, folder)
    trees = {"previous": previous, "certified": ROOT / "src"}
    times: dict[tuple[str, str], list[dict]] = {}
    try:
        for _ in range(args.rounds):
            for case in CASES:
                for name, src in trees.items():
                    times.setdefault((case[0], name), []).append(_run(src, case))
    finally:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(folder)], check=False
        )
    rows = [
        "| case | accountant | design (s) | account (s) | draw, d = 10^4 (s) | design / previous "
        "| eps |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for case in CASES:
        before = None
        for name in trees:
            runs = times[(case[0], name)]
            if any("error" in run for run in runs):
                rows.append(f"| {case[0]} | {name} | {runs[0].get('error')} | | | | |")
                continue
            median = {k: statistics.median(run[k] for run in runs) for k in runs[0]}
            before = before or median["design"]
            rows.append(
                f"| {case[0]} | {name} | {median['design']:.3f} | {median['account']:.3f} | "
                f"{median['draw']:.4f} | {median['design'] / before:.2f}x | "
                f"{runs[0]['epsilon']:.17g} |"
            )
    import numpy

    text = "\n".join(
        [
            START,
            "## Certified accountant (`benchmarks/bench_certified.py`)",
            "",
            "Designing a calibrated mechanism (eps = 10, delta = 1e-5, T = 1000, C = 0.1), "
            "accounting it against the threat named, and drawing one step's noise of dimension "
            f"10^4 in the simulation: the previous accountant (tree {args.previous}: one Cholesky "
            "of the assembled covariance) against the certified one (the Gram route on the "
            "agents' factor and on the simulation's square root, each residual bounded, and the "
            "QR route where the Gram route is loose), each case a fresh interpreter on one "
            f"thread, medians of {args.rounds} rounds taken in turns. The previous eps may sit "
            "a rounding above the target; the certified one never does (tests/"
            "test_certified_designs.py).",
            "",
            *rows,
            "",
            measured(f"numpy {numpy.__version__}, one thread"),
            END,
            "",
        ]
    )
    print(text)
    write_section(text, START, END)


if __name__ == "__main__":
    sys.exit(main())
