"""The noise design objective of a whole run: the excess loss the noise leaves after T steps.

Whisper D-SGD / CorN-DSGD (problem (9)) and DECOR's trace-optimal couple minimise the variance one
gossip round leaves, `Tr(W R W^T) = Tr(M R)` with `M = W^T W`. On quadratic objectives the
noise's part of the iterates obeys a linear recursion (docs/horizon.md): with agent i's Hessian
`H_i`, `D = blockdiag(H_i)`, `cW = W (x) I_d` and `A_t = cW (I - eta_t D)`, the noise part
`z` of `x <- W (x - eta_t (g + v_t))` is

    z_{t+1} = A_t z_t - eta_t cW v_t,       z_1 = 0,

so after T steps `z = -sum_t eta_t A_T ... A_{t+1} cW v_t`. Its contribution to the loss the
run reports, the mean over agents of `F(x_i) - F*` (`z^T Q z` with `Q = I_n (x) Hbar / (2n)`
and `Hbar` the global objective's Hessian, exact on a quadratic), is for noise of covariance R
per coordinate

    E z^T Q z = Tr(M R),   M = ptr_d( sum_t eta_t^2 cW^T Phi_t^T Q Phi_t cW ),
    Phi_t = A_T ... A_{t+1}

(`ptr_d` the partial trace over the coordinates). `M` is positive semidefinite, so the Whisper
program with `Tr(M R)` in place of `Tr(W R W^T)` is the same convex program
(`dpdl.solvers.whisper_dual.solve_weighted`). The sums are computed exactly: by binary powers
(O(log T) products) for a constant step size, backwards over the steps otherwise, and in the
eigenbasis of W, coordinate direction by direction, when W is symmetric and the Hessian shared.

The curvature is the run's: a quadratic task knows its Hessians; for logistic regression
`dpdl.jobspec.curvature.task_curvature` takes the Hessian at the initial point. Clipping is
left out of the model (a clipped gradient pulls back less, so the true curvature of a clipped run
is smaller): the objective is exact for a quadratic whose gradients stay below the threshold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import sparse

from dpdl.choices import OBJECTIVES, SCHEDULES
from dpdl.errors import ConfigError
from dpdl.scale import require_dense
from dpdl.settings import DesignOptions

__all__ = ["OBJECTIVES", "Curvature", "Horizon", "horizon_weight", "objective_weight"]


@dataclass(frozen=True, eq=False)
class Curvature:
    """The Hessians of the agents' objectives: `(d, d)` shared by every agent, or `(n, d, d)`
    one per agent. The loss the objective measures is the global objective's, whose Hessian is
    their mean."""

    hessians: np.ndarray

    def __post_init__(self) -> None:
        hessians = np.asarray(self.hessians, dtype=float)
        if hessians.ndim not in (2, 3) or hessians.shape[-1] != hessians.shape[-2]:
            raise ConfigError(
                f"curvature: expected Hessians of shape (d, d) or (n, d, d), got {hessians.shape}"
            )
        if not np.all(np.isfinite(hessians)):
            raise ConfigError("curvature: the Hessians must be finite")
        object.__setattr__(self, "hessians", (hessians + np.swapaxes(hessians, -1, -2)) / 2.0)

    @classmethod
    def scalar(cls, value: float, dim: int = 1) -> Curvature:
        """`H = value I_dim` for every agent (a smoothness constant L, say)."""
        if not (math.isfinite(value) and value >= 0):
            raise ConfigError(f"curvature: expected a finite number >= 0, got {value}")
        return cls(value * np.eye(dim))

    @property
    def shared(self) -> bool:
        """Whether every agent has the same Hessian."""
        return self.hessians.ndim == 2

    @property
    def dim(self) -> int:
        return self.hessians.shape[-1]

    def describe(self) -> dict[str, object]:
        values = np.linalg.eigvalsh(self.hessians if self.shared else self.hessians.mean(axis=0))
        return {
            "shared": self.shared,
            "dim": self.dim,
            "mean_hessian_min_eigenvalue": float(values[0]),
            "mean_hessian_max_eigenvalue": float(values[-1]),
        }


#: The schedules whose step sizes the objective weighs (:meth:`Horizon.step_sizes`); the step
#: decay (``step``) is not among them: its decay step does not reach a design.
WEIGHED_SCHEDULES = ("constant", "inv-sqrt")


@dataclass(frozen=True, eq=False)
class Horizon:
    """What the horizon objective needs of the run: its step size and schedule, its number of
    steps, and the curvature of its objective."""

    lr: float
    steps: int
    curvature: Curvature
    schedule: str = "constant"

    def __post_init__(self) -> None:
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ConfigError(f"horizon: the step size must be a finite number > 0, got {self.lr}")
        if int(self.steps) != self.steps or self.steps < 1:
            raise ConfigError(f"horizon: the steps must be an integer >= 1, got {self.steps}")
        if self.schedule not in WEIGHED_SCHEDULES:
            known = "unknown" if self.schedule not in SCHEDULES else "unweighed"
            raise ConfigError(
                f"horizon: {known} step-size schedule {self.schedule!r}; the horizon objective "
                f"weighs {', '.join(WEIGHED_SCHEDULES)}"
            )
        if not isinstance(self.curvature, Curvature):
            raise ConfigError(
                f"horizon: the curvature must be a Curvature, got {type(self.curvature).__name__}"
            )

    def step_sizes(self) -> np.ndarray:
        """`eta_t` for t = 1..T, as
        [`dpdl.jobspec.engine.StepSize`][dpdl.jobspec.engine.StepSize] gives them."""
        t = np.arange(1, self.steps + 1, dtype=float)
        return np.full(self.steps, self.lr) if self.schedule == "constant" else self.lr / np.sqrt(t)

    def weight(self, weights: np.ndarray) -> np.ndarray:
        """`M` with `Tr(M R)` the loss the noise leaves after the run (module docstring)."""
        return horizon_weight(weights, self)

    def describe(self) -> dict[str, object]:
        return {
            "lr": self.lr,
            "steps": self.steps,
            "schedule": self.schedule,
            "curvature": self.curvature.describe(),
        }


def _power_sum(step: np.ndarray, terminal: np.ndarray, count: int) -> np.ndarray:
    """`sum_{k < count} (B^k)^T Q B^k` for `B = step`, `Q = terminal`, by binary powers:
    `S(a + b) = S(a) + (B^a)^T S(b) B^a`."""
    total, power = np.zeros_like(terminal), np.eye(step.shape[0])
    block_sum, block_power = terminal, step
    while count:
        if count & 1:
            total = total + power.T @ block_sum @ power
            power = block_power @ power
        count >>= 1
        if count:
            block_sum = block_sum + block_power.T @ block_sum @ block_power
            block_power = block_power @ block_power
    return total


def _linear_weight(
    mixing: np.ndarray, curvature: np.ndarray, terminal: np.ndarray, etas: np.ndarray
) -> np.ndarray:
    """`sum_t eta_t^2 mixing^T Phi_t^T terminal Phi_t mixing` for the recursion
    `A_t = mixing (I - eta_t curvature)`, `Phi_t = A_T ... A_{t+1}`."""
    eye = np.eye(mixing.shape[0])
    if np.all(etas == etas[0]):
        step = mixing @ (eye - etas[0] * curvature)
        return etas[0] ** 2 * mixing.T @ _power_sum(step, terminal, len(etas)) @ mixing
    total, tail = np.zeros_like(terminal), terminal
    for eta in etas[::-1]:
        seen = mixing.T @ tail @ mixing
        total += eta**2 * seen
        relax = eye - eta * curvature
        tail = relax.T @ seen @ relax
    return total


def _shared_weight(weights: np.ndarray, hessian: np.ndarray, etas: np.ndarray) -> np.ndarray:
    """Every agent has the Hessian `hessian`: the coordinates decouple along its eigenvectors
    (eigenvalue h: `A_t = (1 - eta_t h) W`, loss weight h / (2n))."""
    n = weights.shape[0]
    values = np.clip(np.linalg.eigvalsh(hessian), 0.0, None)
    if np.allclose(weights, weights.T, rtol=0.0, atol=1e-12):
        spectrum, basis = np.linalg.eigh((weights + weights.T) / 2.0)
        tail = np.broadcast_to(values / (2.0 * n), (n, len(values))).copy()  # (W eigen, H eigen)
        total = np.zeros_like(tail)
        for eta in etas[::-1]:
            seen = spectrum[:, None] ** 2 * tail
            total += eta**2 * seen
            tail = (1.0 - eta * values[None, :]) ** 2 * seen
        return (basis * total.sum(axis=1)) @ basis.T
    total = np.zeros((n, n))
    for value in np.unique(values):
        count = int(np.sum(values == value))
        terminal = np.eye(n) * (count * value / (2.0 * n))
        total += _linear_weight(weights, value * np.eye(n), terminal, etas)
    return total


def horizon_weight(weights: np.ndarray | sparse.sparray, horizon: Horizon) -> np.ndarray:
    """`M` (n x n, PSD) such that `Tr(M R)` is the expected excess loss (mean over agents of the
    global objective at each agent's model) that noise of covariance R per coordinate leaves
    after `horizon.steps` D-SGD steps on a quadratic of the horizon's curvature (module
    docstring). Raises [`ConfigError`][dpdl.errors.ConfigError] where the step size makes the
    linearised run diverge so far that M is not finite."""
    n = weights.shape[0]
    curvature = horizon.curvature
    if not curvature.shared and curvature.hessians.shape[0] != n:
        raise ConfigError(
            f"curvature: {curvature.hessians.shape[0]} agents' Hessians for a graph of {n}"
        )
    size = n if curvature.shared else n * curvature.dim
    require_dense(size, "the horizon objective (dense matrices over agents x coordinates)", 6)
    weights = weights.toarray() if sparse.issparse(weights) else np.asarray(weights, dtype=float)
    etas = horizon.step_sizes()
    with np.errstate(over="ignore", invalid="ignore"):
        if curvature.shared:
            weight = _shared_weight(weights, curvature.hessians, etas)
        else:
            d = curvature.dim
            hessians = curvature.hessians
            mixing = np.kron(weights, np.eye(d))
            blocks = np.zeros((n, d, n, d))
            blocks[np.arange(n), :, np.arange(n), :] = hessians
            terminal = np.kron(np.eye(n), hessians.mean(axis=0) / (2.0 * n))
            full = _linear_weight(mixing, blocks.reshape(size, size), terminal, etas)
            weight = np.einsum("iaja->ij", full.reshape(n, d, n, d))
    if not np.all(np.isfinite(weight)):
        raise ConfigError(
            f"the horizon objective diverges: step size {horizon.lr} is too large for the "
            f"curvature (largest Hessian eigenvalue "
            f"{curvature.describe()['mean_hessian_max_eigenvalue']:.4g}) over {horizon.steps} steps"
        )
    return (weight + weight.T) / 2.0


def objective_weight(
    weights: np.ndarray | sparse.sparray, options: DesignOptions
) -> np.ndarray | None:
    """The matrix M of the design objective `Tr(M R)` that `options` asks for: None for the
    one-step objective `Tr(W R W^T)` (each design's own code path), the horizon's M
    otherwise."""
    if options.objective == "one-step":
        return None
    if not isinstance(options.horizon, Horizon):
        raise ConfigError(
            "the horizon objective needs the run's step size, steps and curvature: give "
            "DesignOptions(objective='horizon', horizon=Horizon(lr, steps, curvature)) (dpdl train "
            "and sweeps take them from the run)"
        )
    return options.horizon.weight(weights)
