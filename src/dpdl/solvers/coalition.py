"""Generic convex programs for correlated noise, solved with CVXPY (Clarabel), for small n.

- `solve_multiseed`: CorN-DSGD problem (10). Seeds s_k held by groups H_k generate `R_cor^(k)` (PSD,
  supported on H_k x H_k); against every coalition I of q agents, the covariance it cannot see on
  the honest agents J, `(sigma_mix^2 I + sum_{k: H_k and I disjoint} R_cor^(k))[J, J]`, must satisfy
  `[(.)^-1]_jj <= c`; minimise `Tr(W R W^T)`, or `Tr(M R)` for a given PSD weight M (the horizon
  objective of [`dpdl.mechanisms.horizon`][dpdl.mechanisms.horizon]). Larger coalitions know more,
  so coalitions of size exactly q suffice (q = 0: the eavesdropper, I empty). Special cases: q = 0
  and one group is problem (9) (Whisper); one seed per agent with q = n - 1 is LDP.
- `solve_whisper_sdp`: problem (9) in the precision `P = R^-1`:
  `minimise Tr(W P^-1 W^T) s.t. diag(P) <= c` (a matrix-fractional program), an independent
  formulation used to check the dual solver of `dpdl.solvers.whisper_dual` (with a weight M,
  `Tr(M P^-1) = matrix_frac(B, P)` for `M = B B^T`).

Both use `[R^-1]_jj = matrix_frac(e_j, R)` (a Schur-complement LMI). The SDPs grow as
`C(n, q) * n` LMIs of size n, so they are meant for n up to a few tens. For a singular W the
infimum is not attained; the solvers then stop near it with a nearly singular precision.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from dpdl.errors import ConfigError
from dpdl.optional import require

cp = require("cvxpy", "solvers", "CorN-DSGD's coalition program (whisper-multiseed, whisper-seeds)")

__all__ = ["MultiSeedSolution", "solve_multiseed", "solve_whisper_sdp"]


@dataclass(frozen=True)
class MultiSeedSolution:
    """Optimal private variance and group blocks of problem (10)."""

    sigma_mix2: float
    blocks: list[np.ndarray]
    objective: float
    seconds: float
    status: str


def _check_status(problem: cp.Problem, what: str) -> None:
    if problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        raise ConfigError(f"{what}: the solver ended with status {problem.status!r}")


def solve_multiseed(
    weights: np.ndarray,
    groups: Sequence[Sequence[int]],
    q: int,
    c: float,
    solver: str = "CLARABEL",
    objective: np.ndarray | None = None,
) -> MultiSeedSolution:
    """CorN-DSGD problem (10) for seed groups `groups` and coalitions of size `q`; it
    minimises `Tr(M R)` for `M = objective` (default `W^T W`: `Tr(W R W^T)`).

    The program is homogeneous in the bound: R solves it for `c` exactly when `c R` solves it
    for 1, so it is solved for 1 and scaled back (the interior-point solver failed outright at
    `c` near 1e-7, budgets of eps 0.1-0.3 over a few thousand steps)."""
    n = weights.shape[0]
    if not 0 <= q < n:
        raise ConfigError(f"the coalition size must be in [0, n-1], got q={q} for n={n}")
    gram = weights.T @ weights
    scale = 1.0
    if objective is not None:  # scaled to a largest entry of 1, for the solver's tolerances
        scale = float(np.abs(objective).max())
        gram = np.asarray(objective, dtype=float) / scale
    groups = [tuple(sorted(g)) for g in groups]
    start = time.perf_counter()
    sigma_mix2 = cp.Variable(nonneg=True)
    blocks = [cp.Variable((len(g), len(g)), PSD=True) for g in groups]
    objective = sigma_mix2 * np.trace(gram) + sum(
        cp.trace(gram[np.ix_(g, g)] @ b) for g, b in zip(groups, blocks, strict=True)
    )
    constraints = []
    for coalition in combinations(range(n), q):
        honest = [j for j in range(n) if j not in coalition]
        index = {agent: row for row, agent in enumerate(honest)}
        unknown = sigma_mix2 * np.eye(len(honest))
        for group, block in zip(groups, blocks, strict=True):
            if not set(group) & set(coalition):
                selector = np.zeros((len(honest), len(group)))
                selector[[index[a] for a in group], range(len(group))] = 1.0
                unknown = unknown + selector @ block @ selector.T
        unknown = (unknown + unknown.T) / 2
        constraints += [
            cp.matrix_frac(np.eye(len(honest))[:, j], unknown) <= 1.0 for j in range(len(honest))
        ]
    problem = cp.Problem(cp.Minimize(objective), constraints)
    problem.solve(solver=solver)
    _check_status(problem, "the multi-seed covariance program (CorN-DSGD (10))")
    values = [np.asarray(b.value) / c for b in blocks]
    return MultiSeedSolution(
        float(sigma_mix2.value) / c,
        values,
        scale * float(problem.value) / c,
        time.perf_counter() - start,
        problem.status,
    )


def solve_whisper_sdp(
    weights: np.ndarray, c: float, solver: str = "CLARABEL", objective: np.ndarray | None = None
) -> tuple[np.ndarray, float]:
    """Problem (9) as `min Tr(W P^-1 W^T) s.t. diag(P) <= c`, or `min Tr(M P^-1)` for
    `M = objective`; returns `(R = P^-1, seconds)`."""
    n = weights.shape[0]
    start = time.perf_counter()
    if objective is None:
        factor = weights.T
    else:
        values, vectors = np.linalg.eigh(np.asarray(objective, dtype=float))
        factor = vectors * np.sqrt(np.clip(values, 0.0, None))  # M = F F^T
    precision = cp.Variable((n, n), PSD=True)
    problem = cp.Problem(cp.Minimize(cp.matrix_frac(factor, precision)), [cp.diag(precision) <= c])
    problem.solve(solver=solver)
    _check_status(problem, "the Whisper SDP (problem (9))")
    return np.linalg.inv(precision.value), time.perf_counter() - start
