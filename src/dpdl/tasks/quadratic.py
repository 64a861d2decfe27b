"""Deterministic quadratic objectives with a closed-form optimum.

Every agent's objective is `f_i(x) = (x - c_i)^T Q_i (x - c_i)` with `Q_i` positive
semidefinite, so the global objective `F = (1/n) sum_i f_i` has the exact minimiser
`x* = (sum Q_i)^-1 sum Q_i c_i`. Two instances from the papers:

- [`whisper_quadratic`][dpdl.tasks.quadratic.whisper_quadratic]: Whisper D-SGD eq. (11) / CorN-DSGD
  eq. (11), d = 2: `f_i = 15 (x1 + i)^2 + x2^2` for `i <= n/2` and `15 (x1 - i)^2 + x2^2` rotated by
  15 degrees around its minimiser `(i, 0)` for `i > n/2` (agents numbered from 1).
- [`decor_least_squares`][dpdl.tasks.quadratic.decor_least_squares]: DECOR Section 6.1, `f_i = 1/2
  ||A_i x - b_i||^2` with `A_i^2 = (i^2/n) I_d` and `b_i ~ N(0, I_d / i^2)`.

Both start every agent at zero, or at another common point (`start`: DECOR's released
`quadratics.py` starts at the all-ones point).

The optimality gap reported is `(1/n) sum_i F(x_i) - F*` (each agent's model on the global
objective; the papers write `(1/n) sum_i f_i(x_i) - f*`, which can be negative away from
consensus, so we use the global objective for every agent's model). The papers' own quantity is
reported beside it as `paper_optimality_gap` (Whisper D-SGD and CorN-DSGD, Section 5: each
agent's own objective at its own model), and the mean squared distance to the optimum,
`(1/n) sum_i ||x_i - x*||^2` as `squared_distance` (DECOR's released code plots it for its least
squares, `quadratics.py`).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from dpdl.scale import SPARSE_MIN_AGENTS
from dpdl.tasks.base import Batch, Task
from dpdl.tasks.layout import ParameterLayout

__all__ = ["QuadraticObjectives", "decor_least_squares", "whisper_quadratic", "zeros"]


class QuadraticObjectives(Task):
    """`f_i(x) = (x - c_i)^T Q_i (x - c_i)` for every agent (full gradients, no examples).

    `curvatures`, `centers` and `optimum` stay numpy arrays (the problem's facts); the engine
    computes with tensor copies on the task's device."""

    primary_metric = "optimality_gap"

    def __init__(
        self,
        name: str,
        curvatures: np.ndarray,
        centers: np.ndarray,
        start: float | np.ndarray = 0.0,
    ) -> None:
        n, d = centers.shape
        super().__init__(n, d)
        self.name = name
        #: Every agent's starting model (``d`` numbers; a number given is every coordinate).
        self.start = np.broadcast_to(np.asarray(start, dtype=float), (d,)).copy()
        self.curvatures = np.asarray(curvatures, dtype=float)
        self.centers = np.asarray(centers, dtype=float)
        total = self.curvatures.sum(axis=0)
        self.optimum = np.linalg.solve(total, np.einsum("nij,nj->i", self.curvatures, self.centers))
        self._curvatures = torch.from_numpy(self.curvatures)
        self._centers = torch.from_numpy(self.centers)
        self._optimum = torch.from_numpy(self.optimum)
        self.optimal_value = float(self.objective(self._optimum[None, :])[0])

    def initial_params(self) -> torch.Tensor:
        """`start` (zero by default)."""
        return torch.as_tensor(self.start, dtype=self.dtype, device=self.device)

    def parameter_layout(self) -> ParameterLayout:
        """The point `x` (`d` numbers) where the objectives are evaluated; no torch module."""
        return ParameterLayout(("x",), ((self.dim,),), module=False)

    def objective(self, params: torch.Tensor) -> torch.Tensor:
        """Global objective `F` at each row of `params` (m, d) -> (m,).

        From `SPARSE_MIN_AGENTS` agents on, expanded as
        `x^T Qbar x - 2 x^T mean(Q_j c_j) + mean(c_j^T Q_j c_j)` (O((m + n) d^2) instead of an
        (m, n, d) array: 745 GiB for 100,000 agents evaluating their models); below, term by term,
        as always (the same digits)."""
        curvatures, centers = self._curvatures, self._centers
        if self.n_agents >= SPARSE_MIN_AGENTS:
            mean_curvature = curvatures.mean(dim=0)
            pulled = torch.einsum("nij,nj->ni", curvatures, centers)
            constant = float(torch.einsum("ni,ni->", centers, pulled)) / self.n_agents
            quadratic = torch.einsum("mi,ij,mj->m", params, mean_curvature, params)
            return quadratic - 2.0 * params @ pulled.mean(dim=0) + constant
        diff = params[:, None, :] - centers[None, :, :]  # (m, n, d)
        values = torch.einsum("mni,nij,mnj->mn", diff, curvatures, diff)
        return values.mean(dim=1)

    def gradients(
        self, params: torch.Tensor, batch: Batch | None, example_clip: float | None
    ) -> torch.Tensor:
        return 2.0 * torch.einsum("nij,nj->ni", self._curvatures, params - self._centers)

    def agent_gradients(
        self, agent: int, params: torch.Tensor, batch: Batch | None, example_clip: float | None
    ) -> torch.Tensor:
        return 2.0 * (params - self._centers[agent]) @ self._curvatures[agent].T

    def evaluate(self, params: torch.Tensor) -> dict[str, float]:
        """The metrics of every agent's model (`params`: one row per agent, or one row that every
        agent holds, as at step 0)."""
        values = self.objective(params)
        average = params.mean(dim=0, keepdim=True)
        return {
            "optimality_gap": float(values.mean() - self.optimal_value),
            "optimality_gap_average_model": float(self.objective(average)[0] - self.optimal_value),
            "paper_optimality_gap": float(self._own(params).mean() - self.optimal_value),
            "train_loss": float(values.mean()),
            "consensus_distance": float(((params - average) ** 2).sum(dim=1).mean()),
            "squared_distance": float(((params - self._optimum) ** 2).sum(dim=1).mean()),
            "squared_distance_average_model": float(((average - self._optimum) ** 2).sum()),
        }

    def _own(self, params: torch.Tensor) -> torch.Tensor:
        """Each agent's own objective `f_i(x_i)` at its own model (n,); a single row is every
        agent's model."""
        models = params.expand(self.n_agents, -1) if params.shape[0] == 1 else params
        diff = models - self._centers
        return torch.einsum("ni,nij,nj->n", diff, self._curvatures, diff)


def zeros(dim: int) -> np.ndarray:
    """The starting point `zeros` (`dpdl.choices.START_REGISTRY`): every coordinate 0."""
    return np.zeros(dim)


def whisper_quadratic(
    n: int, angle_degrees: float = 15.0, start: float | np.ndarray = 0.0
) -> QuadraticObjectives:
    """Whisper D-SGD eq. (11): 2-d quadratics, the second half rotated by `angle_degrees`; every
    model starts at `start` (a number: every coordinate)."""
    index = np.arange(1, n + 1, dtype=float)
    second_half = index > n / 2
    centers = np.stack([np.where(second_half, index, -index), np.zeros(n)], axis=1)
    theta = math.radians(angle_degrees)
    rotation = np.array([[math.cos(theta), -math.sin(theta)], [math.sin(theta), math.cos(theta)]])
    base = np.diag([15.0, 1.0])
    rotated = rotation.T @ base @ rotation
    curvatures = np.where(second_half[:, None, None], rotated, base)
    return QuadraticObjectives("quadratic", curvatures, centers, start)


def decor_least_squares(
    n: int, dim: int, rng: np.random.Generator, start: float | np.ndarray = 0.0
) -> QuadraticObjectives:
    """DECOR least squares: `1/2 ||A_i x - b_i||^2`, `A_i = (i / sqrt(n)) I`,
    `b_i ~ N(0, I / i^2)`; every model starts at `start` (a number: every coordinate).

    Written as `a_i^2 / 2 ||x - b_i / a_i||^2` with `a_i = i / sqrt(n)`.
    """
    index = np.arange(1, n + 1, dtype=float)
    scale = index / math.sqrt(n)
    targets = rng.standard_normal((n, dim)) / index[:, None]
    curvatures = (scale**2 / 2.0)[:, None, None] * np.eye(dim)[None, :, :]
    return QuadraticObjectives("least-squares", curvatures, targets / scale[:, None], start)
