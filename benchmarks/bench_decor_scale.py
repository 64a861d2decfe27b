"""DECOR at scale against the previous code, side by side in one run: the SNAP Facebook graph.

DECOR's design searched a noise ratio t with a certified accounting of an n-row factor at each of
its 40-odd steps (dense Cholesky factorisations and products of n x n matrices, about 14 s a step
at n = 4039), then accounted the design through a dense QR of its factor; the agents' noise was
drawn from a generator of 88,234 zero columns when the design had no correlation. Now a bound
proves t = 0 best where it is (Cauchy-Schwarz), one eigendecomposition of the Laplacian serves the
search elsewhere (from 1000 agents, against the eavesdropper), the accountant reads a sparse
factor through its sparse Gram (LAPACK's ``potri``, sparse residual products) and a diagonal one
in closed form, the generator is built without a per-secret loop, and a design without
correlation holds no secret (:mod:`dpdl.mechanisms.decor`, :mod:`dpdl.accounting.sensitivity`).

Cases (eps = 10, delta = 1e-5, T = 200, C = 0.1, Metropolis-Hastings W):

- the DECOR design (``build_mechanism("decor", ...)``) on the Facebook ego network 414 (148
  agents), ego network 107 (1034), the whole graph (4039), and rings of 1000 and 4039 agents
  (where correlation pays and the search runs);
- the eavesdropper's account of a fixed design on Facebook, the same in both trees: the design
  the search finds (sigma_cor = 0, a diagonal factor) and one with t = 1 (sigma_pair = sigma_cor
  = 1, the sparse factor of 92,273 columns);
- ``dpdl noise --method decor --graph facebook --steps 200``, a fresh interpreter end to end;
- ``run_training(TrainConfig(task="logreg-a9a", graph="facebook", mechanism="decor",
  steps=200, eval_every=200))``, a fresh interpreter end to end (the time in ``run_training``
  beside it).

Each case runs in a fresh interpreter on this checkout's ``src`` and on the previous tree's (a
``git worktree`` of ``--previous``), once each; a case that runs past ``--limit`` seconds is
stopped and recorded as ``> limit``. The privacy numbers each tree reports are put side by side.
Needs the full data sets (``DPDL_DATA_DIR``); writes the ``bench_decor_scale`` section of
``BENCHMARKS.md``. Run from the repository root:
``DPDL_DATA_DIR=... .venv/bin/python benchmarks/bench_decor_scale.py`` (about 50 minutes, most
of it the previous code's designs running to the limit).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _report import markers, measured, write_section  # benchmarks/_report.py

START, END = markers("bench_decor_scale")
ROOT = Path(__file__).resolve().parent.parent
#: The tree before this benchmark's changes.
PREVIOUS = "1000af3"
EPS, DELTA, STEPS, CLIP = 10.0, 1e-5, 200, 0.1

#: (label, case): each case is the arguments of :func:`_child`.
CASES = [
    *[
        (f"design, {label}", ["design", graph])
        for label, graph in (
            ("Facebook ego 414 (148 agents)", "facebook-ego-414"),
            ("Facebook ego 107 (1034 agents)", "facebook-ego-107"),
            ("Facebook (4039 agents)", "facebook"),
            ("ring of 1000 agents", "ring-1000"),
            ("ring of 4039 agents", "ring-4039"),
        )
    ],
    # The design's scale: sigma_pair = sensitivity / mu_step, as the search finds it on Facebook.
    (
        "eavesdropper account, Facebook, sigma_pair = 1.4138985313383206, sigma_cor = 0",
        ["account", "facebook", "1.4138985313383206", "0.0"],
    ),
    (
        "eavesdropper account, Facebook, sigma_pair = sigma_cor = 1",
        ["account", "facebook", "1.0", "1.0"],
    ),
    ("`dpdl noise --method decor --graph facebook`", ["noise", "facebook"]),
    ("training, Facebook, a9a, 200 steps", ["train", "facebook"]),
]


def _graph(name: str):
    from dpdl.graphs import build_graph, ring

    return ring(int(name.split("-")[1])) if name.startswith("ring-") else build_graph(name)


def _design(name: str) -> dict:
    """The calibrated DECOR design, timed, and its noise."""
    from dpdl.accounting import AgentLevel, calibrate
    from dpdl.graphs import mixing_matrix
    from dpdl.mechanisms.registry import build_mechanism

    graph = _graph(name)
    weights = mixing_matrix(graph)
    calibration = calibrate(EPS, DELTA, STEPS, AgentLevel(CLIP))
    start = time.perf_counter()
    noise = build_mechanism("decor", graph, weights, calibration)
    return {
        "seconds": time.perf_counter() - start,
        "sigma_pair": noise.sigma_pair,
        "sigma_cor": noise.sigma_cor,
        "trace_WRW": noise.variance_after_mixing(weights),
    }


def _account(name: str, pair: str, cor: str) -> dict:
    """The eavesdropper's account of the fixed design ``Decor(graph, pair, cor)``."""
    from dpdl.accounting import AgentLevel, account
    from dpdl.mechanisms.decor import Decor
    from dpdl.threats import Eavesdropper

    noise = Decor(_graph(name), float(pair), float(cor))
    start = time.perf_counter()
    report = account(noise, Eavesdropper(), AgentLevel(CLIP), STEPS, DELTA)
    return {
        "seconds": time.perf_counter() - start,
        "mu_step": report.mu_step,
        "epsilon": report.epsilon,
    }


def _train(name: str) -> dict:
    from dpdl.experiments.train import TrainConfig, run_training

    config = TrainConfig(
        task="logreg-a9a", graph=name, mechanism="decor", steps=STEPS, eval_every=STEPS
    )
    start = time.perf_counter()
    result = run_training(config)
    summary = result.summary()
    return {
        "run_training": time.perf_counter() - start,
        "epsilon": summary["privacy"][0]["epsilon"],
        result.primary_metric: summary[result.primary_metric],
    }


def _child(case: list[str]) -> None:
    """Run one case in this process and print its outcome as one JSON line."""
    kind, name, *rest = case
    outcome = {"design": _design, "account": _account, "train": _train}[kind](name, *rest)
    print(json.dumps(outcome))


def _run(src: Path, case: list[str], limit: float) -> dict:
    """``case`` in a fresh interpreter on ``src``: its outcome, and its wall clock end to end."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    if case[0] == "noise":
        command = [sys.executable, "-m", "dpdl.cli", "noise", "--method", "decor"]
        command += ["--graph", case[1], "--steps", str(STEPS), "--json"]
    else:
        command = [sys.executable, __file__, "--case", *case]
    start = time.perf_counter()
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, check=False, env=env, timeout=limit
        )
    except subprocess.TimeoutExpired:
        return {"timeout": limit}
    wall = time.perf_counter() - start
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {"error": (done.stderr.strip().splitlines() or ["no output"])[-1]}
    outcome = json.loads(lines[-1])
    if case[0] == "noise":
        outcome = {"epsilon": outcome["epsilon"], "sigma_pair2": outcome.get("sigma_pair2")}
    return {**outcome, "wall": wall}


def _seconds(outcome: dict) -> str:
    if "timeout" in outcome:
        return f"> {outcome['timeout']:.0f}"
    if "error" in outcome:
        return outcome["error"]
    inner = outcome.get("seconds", outcome.get("run_training"))
    if inner is None or "wall" not in outcome:
        return f"{outcome.get('wall', inner):.2f}"
    return f"{inner:.2f} ({outcome['wall']:.1f} end to end)"


def _privacy(outcome: dict) -> str:
    """What the tree says of the design's privacy and noise."""
    if "timeout" in outcome or "error" in outcome:
        return ""
    shown = {
        key: value
        for key, value in outcome.items()
        if key not in ("seconds", "wall", "run_training")
    }
    return "; ".join(
        f"{key} {value:.17g}" if isinstance(value, float) else f"{key} {value}"
        for key, value in shown.items()
    )


def _worktree(ref: str, folder: Path) -> Path:
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(folder), ref], check=True
    )
    return folder / "src"


def _table(results: dict[tuple[str, str], dict], previous: str) -> list[str]:
    rows = [
        "| case | code | seconds | privacy and noise (full precision) |",
        "| --- | --- | ---: | --- |",
    ]
    for label, _ in CASES:
        for tree in ("previous", "now"):
            outcome = results[(label, tree)]
            name = f"previous (`{previous}`)" if tree == "previous" else "now"
            rows.append(f"| {label} | {name} | {_seconds(outcome)} | {_privacy(outcome)} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--previous", default=PREVIOUS, help="the previous tree's git ref")
    parser.add_argument("--limit", type=float, default=600.0, help="seconds a case may run")
    parser.add_argument("--case", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        _child(args.case)
        return
    folder = Path(tempfile.mkdtemp(prefix="dpdl-previous-")) / "tree"
    trees = {"previous": _worktree(args.previous, folder), "now": ROOT / "src"}
    results: dict[tuple[str, str], dict] = {}
    try:
        for label, case in CASES:
            for tree, src in trees.items():
                results[(label, tree)] = _run(src, case, args.limit)
                print(label, tree, results[(label, tree)], flush=True)
    finally:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(folder)], check=False
        )
    import numpy

    text = "\n".join(
        [
            START,
            "## DECOR at scale (`benchmarks/bench_decor_scale.py`)",
            "",
            f"eps = {EPS:g}, delta = {DELTA:g}, T = {STEPS}, C = {CLIP}, Metropolis-Hastings W, "
            "the eavesdropper. Each case a fresh interpreter on the previous tree "
            f"(`{args.previous}`) and on this one, once each, stopped at {args.limit:.0f} s; "
            "seconds are the case's own (the design, the account, `run_training`), end to end "
            "the interpreter's wall clock. A design's privacy is its calibration's (its "
            "sensitivity certified within the budget); the accounts and runs state their eps.",
            "",
            *_table(results, args.previous),
            "",
            measured(f"numpy {numpy.__version__}, default BLAS threads"),
            END,
            "",
        ]
    )
    print(text)
    write_section(text, START, END)


if __name__ == "__main__":
    sys.exit(main())
