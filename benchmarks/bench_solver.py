"""Benchmark of the Whisper covariance solver (:func:`dpdl.solvers.whisper_dual.solve_whisper`).

Problem (9) of CorN-DSGD (Whisper D-SGD): over covariances R > 0, minimise Tr(W R W^T) subject to
[R^-1]_ii <= c for every agent i, with c calibrated for agent-level clipping C = 0.1 and
eps = 10, delta = 1e-5 over T = 5000 steps (exact calibration; the papers' closed form is
reported next to it). dpdl solves it through an n-variable concave dual; CVXPY + Clarabel is the
reference. What is measured, in one run:

1. Agreement and speed against CVXPY, for n = 10, 20, 30 on Erdos-Renyi G(n, 0.5) (seed 0) with
   Metropolis-Hastings W: the dual, :func:`dpdl.solvers.coalition.solve_whisper_sdp` (a
   matrix-fractional SDP in P = R^-1) and :func:`dpdl.solvers.coalition.solve_multiseed` with one
   seed group of all agents and q = 0 (the papers' formulation in R, one Schur LMI per agent).
   Every objective Tr(W R W^T) and every constraint violation max_i([R^-1]_ii / c - 1) (positive:
   violated) is recomputed here from the returned R. Targets: dual and CVXPY objectives within
   1e-5 relative; dual violation <= 1e-9. Each CVXPY call runs in a child process that is stopped
   after 180 s, and the time CVXPY spends compiling is told apart from Clarabel's own solve time.
   ``solve_multiseed`` at n = 30 is skipped unless ``--multiseed-n30`` is given: measured on its
   own, it took 282 s (quiet machine) and 494 s (other processes running) on a 2-core machine,
   99.9% of it inside Clarabel (21 iterations), so with the flag it stops at the 180 s limit.
2. Scale of the dual alone: n = 100 (p = 0.5) and n = 1000 (p = 0.05): seconds (targets: under 1 s
   and under 60 s), iterations, certified duality gap, constraint violation.
3. A singular W: the complete graph with uniform weights 11^T / n (max-degree rule) at n = 20,
   where the infimum 1 / (n c) is not attained: the kernel variance cap the solver uses, the
   objective, and the constraints.

The dual is timed twice: with BLAS at its default thread count and limited to one thread
(threadpoolctl). numpy and scipy each load their own OpenBLAS here, and the dual alternates between
them (numpy's ``eigh``, scipy's L-BFGS-B): with two threads each on a 2-core machine, the threads of
one library spin while the other's work, and the dual is several to 30 times slower at n = 30-100
than with one thread (over 100x when another process is busy). So the two settings are reported side
by side, with a small table limiting each library in turn, and the load average at the start and the
end of the run. Small problems are timed best of 3; at n = 1000 the dual runs once per setting, in a
child process stopped after 120 s.

Figures go to stdout and, as the section between ``<!-- bench_solver:start -->`` and
``<!-- bench_solver:end -->``, to ``BENCHMARKS.md`` at the repository root (the rest of the file is
left alone). Run from the repository root: ``.venv/bin/python benchmarks/bench_solver.py`` (about
1 minute on an idle 2-core machine; with ``--multiseed-n30`` add the 180 s limit).
"""

from __future__ import annotations

import argparse
import datetime
import math
import multiprocessing
import os
import platform
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from functools import partial
from importlib.metadata import version
from pathlib import Path
from typing import Any

import cvxpy as cp
import mpmath
import networkx as nx
import numpy as np
from threadpoolctl import ThreadpoolController, threadpool_info, threadpool_limits

from _report import BENCHMARKS_FILE, markers, write_section  # benchmarks/_report.py
from dpdl.accounting import AgentLevel, calibrate
from dpdl.accounting.calibration import Calibration
from dpdl.graphs import complete, erdos_renyi, max_degree, metropolis_hastings
from dpdl.solvers.coalition import solve_multiseed, solve_whisper_sdp
from dpdl.solvers.whisper_dual import KERNEL_MARGIN, WhisperSolution, solve_whisper

EPS, DELTA, STEPS, CLIP = 10.0, 1e-5, 5000, 0.1
EDGE_PROBABILITY = 0.5
SEED = 0
#: Sizes compared against CVXPY (Erdos-Renyi with EDGE_PROBABILITY).
COMPARE_SIZES = (10, 20, 30)
#: Sizes of the dual alone, with their edge probabilities, and the seconds each should take.
SCALE_SIZES = {100: 0.5, 1000: 0.05}
SCALE_TARGETS = {100: 1.0, 1000: 60.0}
SINGULAR_N = 20
#: Other sizes at which the singular case's constraints are checked (rounding can go either way).
SINGULAR_OTHER_N = (10, 30, 40)
#: Size at which the dual is timed with each BLAS copy limited in turn.
INTERFERENCE_N = 30
#: Small solves are timed best of REPEATS; the largest (n = 1000) once.
REPEATS = 3
#: Seconds after which a CVXPY call, or a dual solve at n = 1000, is stopped.
CVXPY_LIMIT = 180.0
DUAL_LIMIT = 120.0
#: solve_multiseed at this n takes minutes; run it only with --multiseed-n30.
MULTISEED_SLOW_N = 30
MULTISEED_SLOW_NOTE = "measured on its own: 282-494 s"
OBJECTIVE_TARGET = 1e-5
VIOLATION_TARGET = 1e-9
#: Condition number of R above which diag(R^-1) is computed in extended precision.
ILL_CONDITIONED = 1e6
#: BLAS thread settings the dual is timed under: numpy's default and one thread.
THREADS = {"default": None, "1 thread": 1}

START, END = markers("bench_solver")


@dataclass
class Outcome:
    """One solve: R's objective and worst constraint, the wall clock, or why there is no R."""

    objective: float = math.nan
    violation: float = math.nan
    seconds: float = math.nan
    note: str = ""  # why there is no solution: skipped, stopped, failed
    split: dict[str, float] = field(default_factory=dict)  # CVXPY compile / Clarabel solve seconds

    @property
    def solved(self) -> bool:
        return not self.note


@dataclass
class Comparison:
    """Dual and CVXPY solutions of one Erdos-Renyi instance."""

    n: int
    dual: Outcome
    dual_seconds: dict[str, float]  # by THREADS label, best of REPEATS
    dual_solution: WhisperSolution
    sdp: Outcome
    multiseed: Outcome

    def relative_difference(self, other: Outcome) -> float:
        """(dual - other) / other, on the recomputed objectives: positive means the dual is
        worse."""
        return (self.dual.objective - other.objective) / other.objective

    def feasible_difference(self, other: Outcome) -> float:
        """:meth:`relative_difference` after scaling ``other``'s R by 1 + its violation, which makes
        it feasible (R -> s R divides every [R^-1]_ii by s) and multiplies its objective by s."""
        feasible = other.objective * (1.0 + max(other.violation, 0.0))
        return (self.dual.objective - feasible) / feasible


@dataclass
class Scale:
    """The dual alone on a large instance."""

    n: int
    p: float
    edges: int
    outcome: Outcome
    seconds: dict[str, float]  # by THREADS label (nan if stopped)
    notes: dict[str, str]
    iterations: int
    gap: float


@dataclass
class Singular:
    """The dual on the complete graph with uniform weights."""

    n: int
    outcome: Outcome
    cap: float
    kernel_dimension: int
    condition: float  # of R
    reported_objective: float
    infimum: float
    gap: float
    iterations: int
    other_violations: dict[int, float]  # the same check at SINGULAR_OTHER_N


@dataclass
class Results:
    """Everything one run measures."""

    facts: str
    calibrations: dict[str, Calibration]
    comparisons: list[Comparison]
    interference_n: int
    interference: dict[str, float]
    scales: list[Scale]
    singular: Singular


# --- measuring ------------------------------------------------------------------------------------


def calibrations() -> dict[str, Calibration]:
    """The exact calibration (used throughout) and the papers' closed form, for comparison."""
    neighbouring = AgentLevel(CLIP)
    return {
        method: calibrate(EPS, DELTA, STEPS, neighbouring, method=method)
        for method in ("exact", "paper")
    }


def inverse_diagonal(covariance: np.ndarray) -> np.ndarray:
    """diag(R^-1). Inverting in float64 is off by about cond(R) * 1e-16 relative, so an
    ill-conditioned R (the singular-W case, cond ~ 1e8) is inverted in 40-digit arithmetic."""
    eigenvalues = np.linalg.eigvalsh(covariance)
    if eigenvalues[-1] < ILL_CONDITIONED * eigenvalues[0]:
        return np.diag(np.linalg.inv(covariance))
    with mpmath.workdps(40):
        inverse = mpmath.matrix(covariance.tolist()) ** -1
        return np.array([float(inverse[i, i]) for i in range(len(covariance))])


def assess(weights: np.ndarray, covariance: np.ndarray, c: float, seconds: float) -> Outcome:
    """Objective Tr(W R W^T) and worst relative violation max_i([R^-1]_ii / c - 1), from R
    itself."""
    objective = float(np.sum((weights @ covariance) * weights))
    violation = float(np.max(inverse_diagonal(covariance) / c - 1.0))
    return Outcome(objective, violation, seconds)


def _child(call: Callable[[], Any], sender: Any) -> None:
    """Body of the child process of :func:`limited`: run ``call`` and send back what came of it."""
    start = time.perf_counter()
    try:
        sender.send(("ok", call(), time.perf_counter() - start))
    except Exception as error:  # reported by the parent, not raised
        sender.send(("error", f"{type(error).__name__}: {error}", time.perf_counter() - start))
    finally:
        sender.close()


def limited(call: Callable[[], Any], limit: float) -> tuple[Any, float, str]:
    """``(value, seconds, note)`` of ``call()`` run in a forked child process, stopped (terminated)
    after ``limit`` seconds; ``note`` is empty on success and says what happened otherwise."""
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(call, sender))
    process.start()
    sender.close()
    try:
        if not receiver.poll(limit):
            process.terminate()
            process.join()
            return None, math.nan, f"stopped after {limit:.0f} s"
        status, value, seconds = receiver.recv()
    except EOFError:
        process.join()
        return None, math.nan, f"child process died (exit code {process.exitcode})"
    finally:
        receiver.close()
    process.join()
    if status == "error":
        return None, seconds, f"failed after {seconds:.1f} s: {value}"
    return value, seconds, ""


def with_solver_split(
    call: Callable[[], np.ndarray],
) -> Callable[[], tuple[np.ndarray, dict[str, float]]]:
    """``call`` (a CVXPY solve returning R), also returning CVXPY's compile time and Clarabel's
    solve time and iterations. It wraps ``cvxpy.Problem.solve``: run it in a child process."""

    def run() -> tuple[np.ndarray, dict[str, float]]:
        split: dict[str, float] = {}
        original = cp.Problem.solve

        def solve(problem: cp.Problem, *args: Any, **kwargs: Any) -> Any:
            value = original(problem, *args, **kwargs)
            split.update(
                compile=problem.compilation_time or math.nan,
                solve=problem.solver_stats.solve_time or math.nan,
                iterations=problem.solver_stats.num_iters or math.nan,
            )
            return value

        cp.Problem.solve = solve
        try:
            return call(), split
        finally:
            cp.Problem.solve = original

    return run


def cvxpy_outcome(weights: np.ndarray, c: float, call: Callable[[], np.ndarray]) -> Outcome:
    """Run a CVXPY solve (returning R) under :data:`CVXPY_LIMIT` and assess its R."""
    value, seconds, note = limited(with_solver_split(call), CVXPY_LIMIT)
    if note:
        return Outcome(seconds=seconds, note=note)
    covariance, split = value
    outcome = assess(weights, covariance, c, seconds)
    outcome.split = split
    return outcome


def multiseed_covariance(weights: np.ndarray, c: float) -> np.ndarray:
    """R = sigma_mix^2 I + R_cor from problem (10) with one seed held by all agents and q = 0."""
    n = len(weights)
    solution = solve_multiseed(weights, [tuple(range(n))], 0, c)
    return solution.sigma_mix2 * np.eye(n) + solution.blocks[0]


def time_dual_threads(
    weights: np.ndarray, c: float, threads: int | None, repeats: int
) -> tuple[WhisperSolution, float]:
    """The dual's solution and best wall clock of ``repeats`` solves, BLAS limited to ``threads``
    threads (None: numpy's default)."""
    best, solution = math.inf, None
    with threadpool_limits(limits=threads, user_api="blas"):
        for _ in range(repeats):
            start = time.perf_counter()
            solution = solve_whisper(weights, c)
            best = min(best, time.perf_counter() - start)
    return solution, best


def time_dual(
    weights: np.ndarray, c: float, repeats: int
) -> tuple[WhisperSolution, dict[str, float]]:
    """The dual's solution and its best wall clock under each BLAS thread setting of THREADS.

    The settings take turns within each repeat, so a burst of load elsewhere hits both alike.
    """
    best = dict.fromkeys(THREADS, math.inf)
    for _ in range(repeats):
        for label, threads in THREADS.items():
            solution, seconds = time_dual_threads(weights, c, threads, 1)
            best[label] = min(best[label], seconds)
    return solution, best


def blas_interference(n: int, c: float) -> dict[str, float]:
    """Best wall clock of the dual at size n with each BLAS copy (numpy's, scipy's) limited to one
    thread in turn, next to the default and to all limited: the dual alternates between numpy
    (eigh) and scipy (L-BFGS-B), which here load separate OpenBLAS libraries with their own
    threads."""
    _, weights = er_weights(n, EDGE_PROBABILITY)
    controller = ThreadpoolController()
    blas = [
        lib for lib in controller.lib_controllers if lib.user_api == "blas" and lib.num_threads > 1
    ]
    settings: dict[str, Any] = {
        "default": None,
        "all BLAS 1 thread": [lib.filepath for lib in blas],
    }
    for lib in blas:
        settings[f"only {Path(lib.filepath).parent.name} 1 thread"] = [lib.filepath]
    best = dict.fromkeys(settings, math.inf)
    for _ in range(REPEATS):
        for label, paths in settings.items():
            limiter = controller.select(filepath=paths).limit(limits=1) if paths else nullcontext()
            with limiter:
                start = time.perf_counter()
                solve_whisper(weights, c)
                best[label] = min(best[label], time.perf_counter() - start)
    return best


def er_weights(n: int, p: float) -> tuple[nx.Graph, np.ndarray]:
    graph = erdos_renyi(n, p, SEED)
    return graph, metropolis_hastings(graph)


def compare(n: int, c: float, multiseed: bool) -> Comparison:
    """Dual, matrix-fractional SDP and the papers' R formulation on G(n, 0.5)."""
    _, weights = er_weights(n, EDGE_PROBABILITY)
    solution, seconds = time_dual(weights, c, REPEATS)
    dual = assess(weights, solution.covariance, c, seconds["default"])
    sdp = cvxpy_outcome(weights, c, lambda: solve_whisper_sdp(weights, c)[0])
    if multiseed:
        papers = cvxpy_outcome(weights, c, lambda: multiseed_covariance(weights, c))
    else:
        papers = Outcome(
            note=f"skipped ({MULTISEED_SLOW_NOTE}; --multiseed-n30 tries it, "
            f"{CVXPY_LIMIT:.0f} s limit)"
        )
    return Comparison(n, dual, seconds, solution, sdp, papers)


def scale(n: int, p: float, c: float) -> Scale:
    """The dual alone at size n: timed under each thread setting (best of REPEATS, once for
    n = 1000)."""
    graph, weights = er_weights(n, p)
    repeats = REPEATS if n < 1000 else 1
    seconds, notes, solution = {}, {}, None
    for label, threads in THREADS.items():
        value, _, note = limited(
            partial(time_dual_threads, weights, c, threads, repeats), DUAL_LIMIT
        )
        notes[label] = note
        if note:
            seconds[label] = math.nan
        else:
            solution, seconds[label] = value
    edges = graph.number_of_edges()
    if solution is None:
        return Scale(
            n, p, edges, Outcome(note="; ".join(notes.values())), seconds, notes, 0, math.nan
        )
    outcome = assess(
        weights, solution.covariance, c, min(t for t in seconds.values() if not math.isnan(t))
    )
    return Scale(n, p, edges, outcome, seconds, notes, solution.iterations, solution.gap)


def singular(n: int, c: float) -> Singular:
    """The dual on the complete graph with W = 11^T / n, where the infimum 1 / (n c) is not
    attained."""
    weights = max_degree(complete(n))
    solution, seconds = time_dual(weights, c, REPEATS)
    outcome = assess(weights, solution.covariance, c, seconds["default"])
    return Singular(
        n,
        outcome,
        solution.cap,
        int(getattr(solution, "kernel_dimension", -1)),
        float(np.linalg.cond(solution.covariance)),
        solution.objective,
        1.0 / (n * c),
        solution.gap,
        solution.iterations,
        {m: singular_violation(m, c) for m in SINGULAR_OTHER_N},
    )


def singular_violation(n: int, c: float) -> float:
    """max_i([R^-1]_ii / c - 1) of the dual's R on the complete graph with W = 11^T / n."""
    weights = max_degree(complete(n))
    return assess(weights, solve_whisper(weights, c).covariance, c, math.nan).violation


def machine_facts(load_at_start: tuple[float, ...]) -> str:
    """Date, CPUs, versions, BLAS, and the load average at the start and the end of the run."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    blas = ", ".join(
        f"{info.get('internal_api', '?')} {info.get('version', '?')} in "
        f"{Path(info['filepath']).parent.name} ({info['num_threads']} "
        f"thread{'s' * (info['num_threads'] != 1)} by default)"
        for info in threadpool_info()
        if info.get("user_api") == "blas"
    )
    return (
        f"{now}; CPUs (os.cpu_count()): {os.cpu_count()}; Python {platform.python_version()}; "
        f"numpy {np.__version__}; scipy {version('scipy')}; cvxpy {cp.__version__}; clarabel "
        f"{version('clarabel')}; BLAS: {blas}; {platform.machine()} {platform.system()}; load "
        f"average (1, 5, 15 min) at the start: {_load(load_at_start)}, at the end: "
        f"{_load(os.getloadavg())}"
    )


def _load(values: tuple[float, ...]) -> str:
    return ", ".join(f"{value:.2f}" for value in values)


# --- reporting ------------------------------------------------------------------------------------


def _number(value: float, spec: str) -> str:
    return "-" if math.isnan(value) else format(value, spec)


def calibration_lines(cals: dict[str, Calibration]) -> list[str]:
    lines = []
    for method, cal in cals.items():
        lines.append(
            f"- {method}: mu_step = {cal.mu_step:.6g}, c = (mu_step / C)^2 = "
            f"{cal.inverse_variance_bound:.6g}, exact epsilon of that calibration = "
            f"{cal.achieved_epsilon:.4g}" + (" (used below)" if method == "exact" else "")
        )
    return lines


def objectives_table(comparisons: list[Comparison]) -> list[str]:
    lines = [
        "| n | Tr(W R W^T): dual | matrix-fractional SDP | papers' R formulation "
        "| dual vs SDP (rel.) | dual vs R formulation (rel.) | dual certified gap |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for cmp in comparisons:
        cells = [f"{cmp.dual.objective:.10g}"]
        cells += [
            f"{o.objective:.10g}" if o.solved else o.note.split(" (")[0]
            for o in (cmp.sdp, cmp.multiseed)
        ]
        cells += [
            f"{cmp.relative_difference(o):+.2e}" if o.solved else "-"
            for o in (cmp.sdp, cmp.multiseed)
        ]
        cells.append(f"{cmp.dual_solution.gap:.1e}")
        lines.append(f"| {cmp.n} | " + " | ".join(cells) + " |")
    return lines


def violations_table(comparisons: list[Comparison]) -> list[str]:
    lines = [
        "| n | max_i [R^-1]_ii / c - 1: dual | matrix-fractional SDP | papers' R formulation "
        "| dual vs SDP made feasible (rel.) | dual vs R formulation made feasible (rel.) |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for cmp in comparisons:
        cells = [
            f"{o.violation:+.2e}" if o.solved else "-" for o in (cmp.dual, cmp.sdp, cmp.multiseed)
        ]
        cells += [
            f"{cmp.feasible_difference(o):+.2e}" if o.solved else "-"
            for o in (cmp.sdp, cmp.multiseed)
        ]
        lines.append(f"| {cmp.n} | " + " | ".join(cells) + " |")
    return lines


def _cvxpy_cell(outcome: Outcome) -> str:
    if not outcome.solved:
        return outcome.note
    split = outcome.split
    return (
        f"{outcome.seconds:.2f} (compile {split.get('compile', math.nan):.2f}, Clarabel "
        f"{split.get('solve', math.nan):.2f} in {split.get('iterations', math.nan):.0f} it.)"
    )


def speed_table(comparisons: list[Comparison]) -> list[str]:
    lines = [
        "| n | dual (s), default BLAS threads | dual (s), 1 thread | dual iterations | "
        "matrix-fractional SDP (s) | papers' R formulation (s) | SDP / dual | R formulation / "
        "dual |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for cmp in comparisons:
        fastest = min(cmp.dual_seconds.values())
        ratios = [
            f"{o.seconds / fastest:,.0f}x" if o.solved else "-" for o in (cmp.sdp, cmp.multiseed)
        ]
        lines.append(
            f"| {cmp.n} | {cmp.dual_seconds['default']:.4f} | {cmp.dual_seconds['1 thread']:.4f} | "
            f"{cmp.dual_solution.iterations} | {_cvxpy_cell(cmp.sdp)} | "
            f"{_cvxpy_cell(cmp.multiseed)} | " + " | ".join(ratios) + " |"
        )
    return lines


def interference_lines(n: int, seconds: dict[str, float]) -> list[str]:
    header = " | ".join(seconds)
    return [
        f"| n | {header} |",
        "|---:|" + "---:|" * len(seconds),
        f"| {n} | " + " | ".join(f"{value:.4f}" for value in seconds.values()) + " |",
    ]


def scale_table(scales: list[Scale]) -> list[str]:
    lines = [
        "| n | p | edges | dual (s), default BLAS threads | dual (s), 1 thread | iterations "
        "| certified gap | max_i [R^-1]_ii / c - 1 | Tr(W R W^T) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in scales:
        times = [s.notes[label] or f"{s.seconds[label]:.3f}" for label in THREADS]
        lines.append(
            f"| {s.n} | {s.p} | {s.edges} | {times[0]} | {times[1]} | {s.iterations} | "
            f"{_number(s.gap, '.1e')} | {_number(s.outcome.violation, '+.2e')} | "
            f"{_number(s.outcome.objective, '.8g')} |"
        )
    return lines


def singular_lines(result: Singular) -> list[str]:
    o = result.outcome
    excess = (o.objective - result.infimum) / result.infimum
    return [
        f"- kernel of W: dimension {result.kernel_dimension}; cap (kernel variance, "
        f"`solution.cap`) = {result.cap:.6g}",
        f"- Tr(W R W^T) = {o.objective:.10g}; the infimum 1 / (n c) = {result.infimum:.10g}; "
        f"excess {excess:+.2e} relative (reported objective {result.reported_objective:.10g}, "
        f"certified gap {result.gap:.1e})",
        f"- max_i [R^-1]_ii / c - 1 = {o.violation:+.2e} (constraints "
        f"{'hold' if o.violation <= VIOLATION_TARGET else 'VIOLATED'}), computed in 40-digit "
        f"arithmetic from the float64 R: cond(R) = {result.condition:.2e}, so rounding R's entries "
        f"alone moves [R^-1]_ii by up to about cond(R) x 1e-16 = {result.condition * 1e-16:.0e} "
        "relative",
        f"- the same check at n = {', '.join(map(str, result.other_violations))}: "
        + ", ".join(f"{value:+.2e}" for value in result.other_violations.values())
        + " (rounding alone moves these by about cond(R) x 1e-16; the solver keeps a margin of "
        f"{KERNEL_MARGIN:g} below the bound on a singular W so that they stay negative)",
        f"- {result.iterations} iterations, {o.seconds:.4f} s",
    ]


def targets(comparisons: list[Comparison], scales: list[Scale], result: Singular) -> list[str]:
    verdict = {True: "met", False: "MISSED"}
    lines = []
    for cmp in comparisons:
        for name, other in (
            ("matrix-fractional SDP", cmp.sdp),
            ("papers' R formulation", cmp.multiseed),
        ):
            if other.solved:
                difference = abs(cmp.relative_difference(other))
                lines.append(
                    f"- n = {cmp.n}, dual vs {name} within {OBJECTIVE_TARGET:g}: "
                    f"{verdict[difference <= OBJECTIVE_TARGET]} ({difference:.1e})."
                )
            else:
                lines.append(f"- n = {cmp.n}, dual vs {name}: not compared, {other.note}.")
    for label, outcome in [(f"n = {c.n}", c.dual) for c in comparisons] + [
        (f"n = {s.n}", s.outcome) for s in scales
    ]:
        if outcome.solved:
            lines.append(
                f"- {label}, dual violation <= {VIOLATION_TARGET:g}: "
                f"{verdict[outcome.violation <= VIOLATION_TARGET]} ({outcome.violation:+.1e})."
            )
    lines.append(
        f"- singular W (n = {result.n}), constraints hold (violation <= {VIOLATION_TARGET:g}): "
        f"{verdict[result.outcome.violation <= VIOLATION_TARGET]} "
        f"({result.outcome.violation:+.1e})."
    )
    for m, violation in result.other_violations.items():
        lines.append(
            f"- singular W (n = {m}, extra check), violation <= {VIOLATION_TARGET:g}: "
            f"{verdict[violation <= VIOLATION_TARGET]} ({violation:+.1e})."
        )
    for s in scales:
        for label in THREADS:
            took = s.notes[label] or f"{s.seconds[label]:.3f} s"
            met = not s.notes[label] and s.seconds[label] < SCALE_TARGETS[s.n]
            lines.append(
                f"- n = {s.n} dual under {SCALE_TARGETS[s.n]:g} s (BLAS: {label}): {verdict[met]} "
                f"({took})."
            )
    return lines


def section(results: Results) -> str:
    """The markdown section this script owns, markers included."""
    cals, comparisons, scales, result = (
        results.calibrations,
        results.comparisons,
        results.scales,
        results.singular,
    )
    c = cals["exact"].inverse_variance_bound
    lines = [
        START,
        "## Whisper covariance solver (`benchmarks/bench_solver.py`)",
        "",
        f"Measured {results.facts}.",
        f"Times are wall clock (`time.perf_counter`); the dual's are the best of {REPEATS} (one "
        "run at n = 1000), CVXPY's are one run each, in a child process stopped after "
        f"{CVXPY_LIMIT:.0f} s. Other processes running at the same time (see the load average) "
        "slow them down.",
        "",
        "Problem (9): minimise Tr(W R W^T) over R > 0 subject to [R^-1]_ii <= c for every agent, "
        f"with c calibrated for agent-level clipping C = {CLIP}, eps = {EPS:g}, delta = {DELTA:g}, "
        f"T = {STEPS} steps:",
        "",
        *calibration_lines(cals),
        "",
        f"### Dual vs CVXPY + Clarabel (Erdos-Renyi G(n, {EDGE_PROBABILITY}), seed {SEED}, "
        f"Metropolis-Hastings W, c = {c:.6g})",
        "",
        "- *dual*: `dpdl.solvers.whisper_dual.solve_whisper`.",
        "- *matrix-fractional SDP*: `dpdl.solvers.coalition.solve_whisper_sdp`, minimise "
        "Tr(W P^-1 W^T) s.t. diag(P) <= c, in the precision P = R^-1.",
        "- *papers' R formulation*: "
        "`dpdl.solvers.coalition.solve_multiseed(W, [all agents], q = 0, c)`, "
        "R = sigma_mix^2 I + R_cor with one Schur LMI `matrix_frac(e_i, R) <= c` per agent.",
        "",
        "Objectives, recomputed from each returned R (relative difference: (dual - CVXPY) / CVXPY, "
        "positive when the dual's objective is higher):",
        "",
        *objectives_table(comparisons),
        "",
        "Constraint violation of each returned R (positive: violated; CVXPY's interior-point "
        "solutions are feasible only to the solver's tolerance), and the objective difference once "
        "each CVXPY R is scaled by 1 + its violation, which makes it feasible (negative: the dual "
        "is better):",
        "",
        *violations_table(comparisons),
        "",
        "Wall clock; for CVXPY, the part spent compiling the problem and the part spent in "
        "Clarabel, with its iterations. Ratios are against the dual's faster thread setting:",
        "",
        *speed_table(comparisons),
        "",
        "The dual alternates between numpy (`eigh`) and scipy (L-BFGS-B), which here load two "
        "separate OpenBLAS libraries, each with its own pool of threads; between calls one pool's "
        "threads keep spinning while the other's work, which is what makes the default setting "
        "slow at small n. Limiting either copy to one thread is enough (n = "
        f"{results.interference_n}, best of {REPEATS}, seconds):",
        "",
        *interference_lines(results.interference_n, results.interference),
        "",
        "### Dual alone, at scale (Erdos-Renyi, seed 0, Metropolis-Hastings W)",
        "",
        *scale_table(scales),
        "",
        f"### Singular W: complete graph, uniform weights 11^T / n, n = {result.n}",
        "",
        *singular_lines(result),
        "",
        "Targets:",
        "",
        *targets(comparisons, scales, result),
        END,
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    """Run the three measurements, print the section and write it to BENCHMARKS.md."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--multiseed-n30",
        action="store_true",
        help=f"also run solve_multiseed at n = {MULTISEED_SLOW_N} "
        f"(stopped after {CVXPY_LIMIT:.0f} s)",
    )
    args = parser.parse_args()
    load_at_start = os.getloadavg()
    cals = calibrations()
    c = cals["exact"].inverse_variance_bound
    comparisons = []
    for n in COMPARE_SIZES:
        print(f"comparing with CVXPY at n = {n} ...", flush=True)
        comparisons.append(compare(n, c, multiseed=n < MULTISEED_SLOW_N or args.multiseed_n30))
    scales = []
    for n, p in SCALE_SIZES.items():
        print(f"dual alone at n = {n} ...", flush=True)
        scales.append(scale(n, p, c))
    print(f"singular W at n = {SINGULAR_N} ...", flush=True)
    result = singular(SINGULAR_N, c)
    print(f"BLAS threads at n = {INTERFERENCE_N} ...", flush=True)
    interference = blas_interference(INTERFERENCE_N, c)
    results = Results(
        machine_facts(load_at_start),
        cals,
        comparisons,
        INTERFERENCE_N,
        interference,
        scales,
        result,
    )
    text = section(results)
    print(text)
    write_section(text, START, END)
    print(f"written to {BENCHMARKS_FILE}")


if __name__ == "__main__":
    main()
