"""Benchmark of the certified bound's quadratic forms, the previous way and this one, in one run.

The certified accountant (:func:`dpdl.accounting.sensitivity._inverse_bounds`) evaluates
``x^T Z x`` and ``|x|^T |Z| |x|`` for every column x of the goals, Z the inverse of a k x k
covariance, once per coalition. It ran them as a three-operand ``np.einsum("ki,kl,li->i", ...)``,
which loops in C without BLAS; it now runs two matrix products (``(X * (Z @ X)).sum(0)``). For k
in 100, 300, 500 (a DECOR run on a ring of 500 agents accounts 518 such forms), this times both on
the same random positive definite Z and k goals, taking turns for ``--rounds`` rounds, and gives
the median of each, the speed-up and the largest relative difference of the values (rounding
only). Figures go to stdout and to the ``bench_quadratic_forms`` section of ``BENCHMARKS.md``.
Run from the repository root: ``.venv/bin/python benchmarks/bench_quadratic_forms.py`` (about 20
seconds).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from _report import markers, measured, write_section  # benchmarks/_report.py

START, END = markers("bench_quadratic_forms")
SIZES = (100, 300, 500)


def previous(goals: np.ndarray, inverse: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The forms as the accountant computed them before: two three-operand einsums."""
    quadratic = np.einsum("ki,kl,li->i", goals, inverse, goals)
    absolute = np.einsum("ki,kl,li->i", np.abs(goals), np.abs(inverse), np.abs(goals))
    return quadratic, absolute


def now(goals: np.ndarray, inverse: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The forms as :func:`dpdl.accounting.sensitivity._inverse_bounds` computes them now."""
    magnitude = np.abs(goals)
    return (goals * (inverse @ goals)).sum(axis=0), (magnitude * (np.abs(inverse) @ magnitude)).sum(
        axis=0
    )


def _timed(function, *args) -> float:
    start = time.perf_counter()
    function(*args)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    rng = np.random.default_rng(0)
    lines = [
        START,
        "## The certified bound's quadratic forms (`bench_quadratic_forms.py`)",
        "",
        "Both forms of one coalition's bound, `x^T Z x` and `|x|^T |Z| |x|` for k goals, the "
        "previous three-operand einsum against two BLAS products; median of "
        f"{rounds} rounds, taking turns.",
        "",
        "| k | einsum (previous) | BLAS products (now) | speed-up | largest relative difference |",
        "| --- | --- | --- | --- | --- |",
    ]
    for k in SIZES:
        factor = rng.standard_normal((k, k))
        inverse = np.linalg.inv(factor @ factor.T / k + np.eye(k))
        goals = rng.standard_normal((k, k))
        old, new = [], []
        for _ in range(rounds):
            old.append(_timed(previous, goals, inverse))
            new.append(_timed(now, goals, inverse))
        before, after = previous(goals, inverse), now(goals, inverse)
        differ = max(
            float(np.max(np.abs(a - b) / np.abs(a))) for a, b in zip(before, after, strict=True)
        )
        slow, fast = statistics.median(old), statistics.median(new)
        lines.append(
            f"| {k} | {slow * 1e3:.1f} ms | {fast * 1e3:.2f} ms | {slow / fast:.0f}x | "
            f"{differ:.1e} |"
        )
    lines += ["", measured(f"numpy {np.__version__}"), END, ""]
    text = "\n".join(lines)
    print(text)
    write_section(text, START, END)


if __name__ == "__main__":
    main()
