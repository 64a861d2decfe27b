"""Gradient reconstruction beyond the neighbourhood (El Mrini, Cyffers & Bellet, ICML 2024).

Curious agents that know the graph and the gossip matrix write every message they receive over
a run as a linear equation in the other agents' private values, and solve the system. On gossip
averaging (their Section 3) the unknowns are the initial values and the system is their
knowledge matrix `K_T x = y_T`; an agent's value is recovered exactly when its unit vector lies
in the row space of `K_T` (their reduced row echelon form test), which happens well beyond the
attackers' neighbours. On decentralized gradient descent (their Section 4) the unknowns are the
gradients; they assume each agent's gradient stays the same over the iterations attacked (small
learning rates, "gradient similarity"), which
[`constant_gradients`][dpdl.attacks.reconstruction.constant_gradients] encodes as a basis `P`
(`G = P theta`), and against differential privacy they solve it by generalized least squares
with the noise covariance (their Section 5, the GLS of their code).

Here the view is written as `O = A G + B Z`: `A` maps every agent's gradient at every step
(time-major, column `t n + u` is agent u at step t) to what the attackers observe, `B` maps the
standard Gaussian seeds `Z` to the noise on it, and every column of `G` and `Z` is one of `d`
independent coordinates. The attackers' own gradients are already removed from `A` and the
seeds they hold appear as rows of `B` (the view that `dpdl.factorization.trust` builds). With
`Sigma = B B^T`, [`reconstruct`][dpdl.attacks.reconstruction.reconstruct] computes the best
linear unbiased estimate (generalized least squares, exact for a singular `Sigma`):

- with the SVD `B = U S V^T`, the directions `U_0` with no noise (`U_0^T B = 0`) give exact
  constraints `U_0^T A G = U_0^T O`;
- the others, whitened, `S_1^-1 U_1^T O = S_1^-1 U_1^T A G + white noise`, are solved
  by least squares over the solutions of the constraints, `G = C^+ c + N theta` (`N` a basis of
  the null space of `C = U_0^T A`): `theta = (D N)^+ (b - D C^+ c)`;
- the error covariance is `N (D N)^+ (D N)^+T N^T`, per coordinate.

Unknown j is *identifiable* (estimable) when `e_j` lies in the row space of `A`, and *exact* when
it lies in the row space of the noise-free constraints `C` (variance 0). Without noise (`B = 0`)
every identifiable unknown is exact and the estimate is the least-squares solution `A^+ O`; an
unknown that is not identifiable gets the minimum-norm estimate, which carries no information.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpdl.errors import ConfigError

__all__ = [
    "AgentErrors",
    "Reconstruction",
    "agent_errors",
    "constant_gradients",
    "reconstruct",
]

#: Singular values of the equations below this fraction of their largest are taken as zero (the
#: rank of what the view identifies; the noise's rank uses numpy's tolerance).
RANK_TOL = 1e-9
#: An unknown is in a row space when its squared distance to it is below this.
SPAN_TOL = 1e-8


@dataclass(frozen=True)
class Reconstruction:
    """The estimate of every unknown, and what the view lets the attackers know of it.

    Attributes:
        estimate: `(unknowns, d)`, the generalized least-squares estimate.
        identifiable: `(unknowns,)`, `e_j` in the row space of `A` (an unbiased estimate exists).
        exact: `(unknowns,)`, identifiable from noise-free equations alone (error 0).
        variance: `(unknowns,)`, the estimate's error variance per coordinate; NaN where not
            identifiable.
        rank: the rank of `A` (how many independent combinations of unknowns the view gives).
    """

    estimate: np.ndarray
    identifiable: np.ndarray
    exact: np.ndarray
    variance: np.ndarray
    rank: int


def constant_gradients(agents: int, steps: int, window: int) -> np.ndarray:
    """`P` (`agents steps x agents windows`, time-major both ways): every agent's gradient is one
    unknown per `window` consecutive steps (the last window may be shorter). `window = steps` is
    the D-GD attack's assumption (one gradient per agent, El Mrini et al., Section 4); `window =
    1` leaves every step's gradient unknown."""
    if agents < 1 or steps < 1:
        raise ConfigError(f"need at least one agent and one step, got {agents} and {steps}")
    if not 1 <= window <= steps:
        raise ConfigError(f"the gradient window must be in 1..{steps} steps, got {window}")
    windows = -(-steps // window)
    basis = np.zeros((agents * steps, agents * windows))
    for t in range(steps):
        w = t // window
        basis[t * agents : (t + 1) * agents, w * agents : (w + 1) * agents] = np.eye(agents)
    return basis


def _range_split(decoder: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`(U_0, U_1, s_1)`: orthonormal bases of the directions of the view that carry no noise and
    of those that do, and the noise's standard deviation along the latter: the SVD of `B` itself
    (its singular values are accurate to `eps s_max`, those of `B B^T` only to `sqrt(eps)
    s_max`: designs whose large shared noise cancels, like Whisper's, need the former), with
    numpy's rank tolerance `s_max max(B.shape) eps`."""
    views, seeds = decoder.shape
    left, values, _ = np.linalg.svd(decoder, full_matrices=seeds < views)
    tolerance = values.max(initial=0.0) * max(views, seeds) * np.finfo(float).eps
    noisy = np.zeros(views, dtype=bool)
    noisy[: len(values)] = values > tolerance
    return left[:, ~noisy], left[:, noisy], values[noisy[: len(values)]]


def _row_basis(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """`(V_r, s_r, U_r, V_0)` of the thin SVD of `matrix`: the row space's orthonormal basis,
    the nonzero singular values, the matching left vectors, and a basis of the null space."""
    columns = matrix.shape[1]
    if matrix.shape[0] == 0:
        return np.zeros((columns, 0)), np.zeros(0), np.zeros((0, 0)), np.eye(columns)
    left, values, right_t = np.linalg.svd(matrix, full_matrices=True)
    rank = int((values > RANK_TOL * values.max(initial=0.0)).sum())
    right = right_t.T
    return right[:, :rank], values[:rank], left[:, :rank], right[:, rank:]


def reconstruct(workload: np.ndarray, decoder: np.ndarray, observed: np.ndarray) -> Reconstruction:
    """The generalized least-squares reconstruction of `G` from `O = A G + B Z` (module
    docstring): `workload` is `A` (`views x unknowns`), `decoder` is `B` (`views x seeds`, no
    columns or all zero for a noiseless view), `observed` is `O` (`views x d`)."""
    workload = np.asarray(workload, dtype=float)
    decoder = np.asarray(decoder, dtype=float)
    observed = np.asarray(observed, dtype=float)
    if workload.ndim != 2 or decoder.ndim != 2 or observed.ndim != 2:
        raise ConfigError("A, B and O must be matrices (O: one column per coordinate)")
    if not workload.shape[0] == decoder.shape[0] == observed.shape[0]:
        raise ConfigError(
            f"A, B and O must have one row per observation, got {workload.shape[0]}, "
            f"{decoder.shape[0]} and {observed.shape[0]}"
        )
    if not (np.isfinite(workload).all() and np.isfinite(decoder).all()):
        raise ConfigError("A and B must be finite")
    if not np.isfinite(observed).all():
        raise ConfigError("the observations O must be finite")
    quiet, noisy, scale = _range_split(decoder)
    constraints = quiet.T @ workload
    whitened = (noisy.T @ workload) / scale[:, None]
    exact_rows, exact_values, exact_left, null = _row_basis(constraints)
    particular = exact_rows @ ((exact_left.T @ (quiet.T @ observed)) / exact_values[:, None])
    reduced = whitened @ null
    noisy_rows, noisy_values, noisy_left, _ = _row_basis(reduced)
    residual = (noisy.T @ observed) / scale[:, None] - whitened @ particular
    spread = null @ (noisy_rows / noisy_values[None, :])  # N (D N)^+ = spread @ noisy_left.T
    estimate = particular + spread @ (noisy_left.T @ residual)
    lifted = null @ noisy_rows
    in_exact = (exact_rows**2).sum(axis=1)
    in_rows = in_exact + (lifted**2).sum(axis=1)
    identifiable = in_rows > 1 - SPAN_TOL
    variance = np.where(identifiable, (spread**2).sum(axis=1), np.nan)
    return Reconstruction(
        estimate,
        identifiable,
        in_exact > 1 - SPAN_TOL,
        variance,
        len(exact_values) + len(noisy_values),
    )


@dataclass(frozen=True)
class AgentErrors:
    """Per agent: how well its unknowns were reconstructed.

    Attributes:
        relative_error: `||estimate - truth|| / ||truth||` over the agent's unknowns and
            coordinates (NaN for an agent whose truth is zero).
        predicted_error: the same from the error covariance, `sqrt(d sum_j variance_j) /
            ||truth||`: what the estimate's error is expected to be; NaN unless every unknown of
            the agent is identifiable.
        identifiable_fraction: share of the agent's unknowns that are identifiable.
        exact_fraction: share that are recovered without error.
    """

    relative_error: np.ndarray
    predicted_error: np.ndarray
    identifiable_fraction: np.ndarray
    exact_fraction: np.ndarray


def agent_errors(
    result: Reconstruction, truth: np.ndarray, owners: np.ndarray, agents: int
) -> AgentErrors:
    """[`AgentErrors`][dpdl.attacks.reconstruction.AgentErrors] of `result` against `truth`
    (`unknowns x d`), unknown j belonging to agent `owners[j]` in `0..agents-1`."""
    truth = np.asarray(truth, dtype=float)
    owners = np.asarray(owners)
    if truth.shape != result.estimate.shape or owners.shape != result.identifiable.shape:
        raise ConfigError(
            f"the truth must be {result.estimate.shape} and the owners "
            f"{result.identifiable.shape}, got {truth.shape} and {owners.shape}"
        )
    if owners.size and not (owners.min() >= 0 and owners.max() < agents):
        raise ConfigError(f"the owners of the unknowns must be agents in 0..{agents - 1}")
    d = truth.shape[1]
    squared_error = np.bincount(
        owners, ((result.estimate - truth) ** 2).sum(axis=1), minlength=agents
    )
    squared_truth = np.bincount(owners, (truth**2).sum(axis=1), minlength=agents)
    counts = np.bincount(owners, minlength=agents).astype(float)
    expected = np.bincount(owners, np.nan_to_num(result.variance, nan=0.0), minlength=agents) * d
    unidentified = np.bincount(owners, ~result.identifiable, minlength=agents) > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        norms = np.where(squared_truth > 0, np.sqrt(squared_truth), np.nan)
        return AgentErrors(
            np.sqrt(squared_error) / norms,
            np.where(unidentified, np.nan, np.sqrt(expected) / norms),
            np.bincount(owners, result.identifiable, minlength=agents) / counts,
            np.bincount(owners, result.exact, minlength=agents) / counts,
        )
