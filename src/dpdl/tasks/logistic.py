"""L2-regularised logistic regression, the papers' convex task on real data (a9a).

Per example `(a, y)` with `y in {-1, +1}`: `l(x) = log(1 + exp(-y a^T x))`; the objective
adds `(lambda / 2) ||x||^2`. The regulariser is data-independent, so its gradient is added after
clipping and needs no noise. Whisper D-SGD Section VI-A (ii) / CorN-DSGD VI-A (ii): a9a,
80/20 split, Dirichlet(10) partition, batch 128. DECOR Section 6.1 uses the same loss.

Per-example gradients are `-y sigma(-y a^T x) a`, so their norms are `|coef| ||a||` and
per-example clipping costs no more than agent-level clipping: no `(n, B, d)` gradient array is
formed. Thousands of agents are taken in blocks of agents (`BLOCK_ENTRIES`), so the batch
rows gathered and the evaluation's margins stay tens of megabytes whatever n (the papers' 20-100
agents are one block).

When the batches of all agents hold more entries than there are training rows (thousands of agents
with a few examples each, e.g. a9a on the 4039 agents of SNAP Facebook: 128 draws from about 8
rows per agent), a step weighs every row once instead: each row's weight is the sum of its draws'
weights, and agent i's gradient is `sum_r weight_r coef_r a_r` over its own rows, the same sum
grouped by row, in O(m d) for m rows instead of O(n B d). Where at most
`SPARSE_FEATURES` of the feature entries are nonzero (a9a: 11%), both sums run over the
nonzero entries alone, each one a gather and a scatter over a flat index: O(nnz) instead of
O(m d): for a9a on Facebook's 4039 agents, 10 ms a gradient instead of 130 ms (BENCHMARKS.md).
"""

from __future__ import annotations

import numpy as np
import torch

from dpdl.tasks.base import Batch, Task
from dpdl.tasks.layout import ParameterLayout

__all__ = ["BLOCK_ENTRIES", "SPARSE_FEATURES", "LogisticRegression"]

#: Most float64 entries of one block's temporary tensors (64 MB): the gathered batch rows
#: ``(agents, B, d)`` of a step, or the margins ``(examples, agents)`` of an evaluation.
BLOCK_ENTRIES = 1 << 23
#: Largest fraction of nonzero training features for which the row-weighted step runs over the
#: nonzero entries alone (each costs a gather and a scatter, about four dense multiply-adds).
SPARSE_FEATURES = 0.25


def _blocks(n: int, per_agent: int) -> list[slice]:
    """Consecutive agent blocks whose temporaries hold at most `BLOCK_ENTRIES` entries."""
    size = max(1, BLOCK_ENTRIES // max(per_agent, 1))
    return [slice(start, min(start + size, n)) for start in range(0, n, size)]


def _clipped(coefficients: torch.Tensor, row_norms: torch.Tensor, clip: float) -> torch.Tensor:
    """Per-example coefficients scaled so that each example's gradient `coef * a` (norm
    `|coef| ||a||`) has norm at most `clip`."""
    norms = coefficients.abs() * row_norms
    return coefficients * torch.clamp(clip / norms.clamp_min(1e-300), max=1.0)


class LogisticRegression(Task):
    """Binary logistic regression over agents' local data, evaluated on a common test set."""

    primary_metric = "test_loss"

    def __init__(
        self,
        name: str,
        train_features: np.ndarray,
        train_labels: np.ndarray,
        partition: list[np.ndarray],
        test_features: np.ndarray,
        test_labels: np.ndarray,
        l2: float,
    ) -> None:
        super().__init__(len(partition), train_features.shape[1])
        self.name = name
        order = np.concatenate(partition)
        self.features = torch.as_tensor(np.asarray(train_features[order], dtype=float))
        self.labels = torch.as_tensor(np.asarray(train_labels[order], dtype=float))
        self.offsets = np.concatenate([[0], np.cumsum([len(p) for p in partition])])
        self.feature_norms = torch.linalg.vector_norm(self.features, dim=1)
        #: The agent each training row belongs to.
        self.owners = torch.repeat_interleave(torch.as_tensor(np.diff(self.offsets)))
        rows, columns = torch.nonzero(self.features, as_tuple=True)
        sparse = len(rows) <= SPARSE_FEATURES * self.features.numel()
        #: The nonzero training features (row, value, and place ``owner * d + column`` in the
        #: flattened ``(n, d)`` parameters), or None where the features are dense.
        self.nonzero_rows = rows if sparse else None
        self.nonzero_values = self.features[rows, columns] if sparse else None
        self.nonzero_slots = self.owners[rows] * self.dim + columns if sparse else None
        self.test_features = torch.as_tensor(np.asarray(test_features, dtype=float))
        self.test_labels = torch.as_tensor(np.asarray(test_labels, dtype=float))
        self.l2 = float(l2)

    @property
    def agent_sizes(self) -> np.ndarray:
        return np.diff(self.offsets)

    def gradients(
        self, params: torch.Tensor, batch: Batch | None, example_clip: float | None
    ) -> torch.Tensor:
        assert batch is not None, "logistic regression is trained on mini-batches"
        n, size = batch.indices.shape
        if n == self.n_agents and n * size > len(self.labels):
            return self._row_weighted_gradients(params, batch, example_clip)
        if n > 1 and len(blocks := _blocks(n, size * self.dim)) > 1:
            return torch.cat(
                [
                    self.gradients(
                        params[b], Batch(batch.indices[b], batch.weights[b]), example_clip
                    )
                    for b in blocks
                ]
            )
        flat = batch.indices.reshape(-1)  # index_select: a third faster than indexing here
        rows = self.features.index_select(0, flat).view(n, size, self.dim)  # (n, B, d)
        labels = self.labels.index_select(0, flat).view(n, size)  # (n, B)
        # x_i^T a as (1, d) x (d, B): about 4x faster in torch's CPU kernels than (B, d) x (d, 1)
        margins = labels * torch.bmm(params[:, None, :], rows.transpose(1, 2))[:, 0, :]
        coefficients = -labels * torch.sigmoid(-margins)  # per-example gradient = coefficient * row
        if example_clip is not None:
            coefficients = _clipped(coefficients, self.feature_norms[batch.indices], example_clip)
        return torch.bmm((coefficients * batch.weights)[:, None, :], rows)[:, 0, :]

    def _row_weighted_gradients(
        self, params: torch.Tensor, batch: Batch, example_clip: float | None
    ) -> torch.Tensor:
        """Every agent's batch gradient as a weighted sum over its own rows (module doc)."""
        weights = torch.zeros_like(self.labels).index_add_(
            0, batch.indices.reshape(-1), batch.weights.reshape(-1)
        )
        sparse = self.nonzero_rows is not None
        if sparse:  # a_r^T x_owner(r), summed over the row's nonzero entries
            products = self.nonzero_values * params.reshape(-1).index_select(0, self.nonzero_slots)
            dots = torch.zeros_like(self.labels).index_add_(0, self.nonzero_rows, products)
        else:  # index_select: indexing with a tensor gathers rows ten times slower here
            dots = (self.features * params.index_select(0, self.owners)).sum(dim=1)
        margins = self.labels * dots
        coefficients = -self.labels * torch.sigmoid(-margins)
        if example_clip is not None:
            coefficients = _clipped(coefficients, self.feature_norms, example_clip)
        scales = coefficients * weights
        if sparse:
            terms = scales.index_select(0, self.nonzero_rows) * self.nonzero_values
            flat = torch.zeros(params.numel(), dtype=params.dtype, device=params.device)
            return flat.index_add_(0, self.nonzero_slots, terms).view_as(params)
        return torch.zeros_like(params).index_add_(0, self.owners, scales[:, None] * self.features)

    def regularizer_gradient(self, params: torch.Tensor) -> torch.Tensor | None:
        return self.l2 * params if self.l2 else None

    def _losses(
        self, params: torch.Tensor, features: torch.Tensor, labels: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        blocks = _blocks(len(params), len(labels))
        if len(blocks) > 1:
            parts = [self._losses(params[b], features, labels) for b in blocks]
            return torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])
        scores = features @ params.T  # (m, k)
        margins = labels[:, None] * scores
        losses = torch.logaddexp(
            torch.zeros((), dtype=margins.dtype, device=margins.device), -margins
        )
        # the predicted label is +1 where the score is > 0 and -1 elsewhere (scikit-learn's rule),
        # so a score of exactly 0 (the all-zero model at step 0) predicts -1, not neither label:
        # the all-zero model on a9a scores 0.76, the share of its -1 labels
        correct = torch.where(scores > 0, labels[:, None] > 0, labels[:, None] < 0)
        return losses.mean(dim=0), correct.double().mean(dim=0)

    def evaluate(self, params: torch.Tensor) -> dict[str, float]:
        average = params.mean(dim=0, keepdim=True)
        test_loss, test_accuracy = self._losses(
            torch.cat([params, average]), self.test_features, self.test_labels
        )
        train_loss, _ = self._losses(params, self.features, self.labels)
        regulariser = 0.5 * self.l2 * (params**2).sum(dim=1)
        return {
            "test_loss": float(test_loss[:-1].mean()),
            "test_accuracy": float(test_accuracy[:-1].mean()),
            "test_loss_average_model": float(test_loss[-1]),
            "test_accuracy_average_model": float(test_accuracy[-1]),
            "train_objective": float((train_loss + regulariser).mean()),
            "consensus_distance": float(((params - average) ** 2).sum(dim=1).mean()),
        }

    def parameter_layout(self) -> ParameterLayout:
        """One vector `weight` of `d` coefficients, one per feature (no bias: a9a's features hold
        none, and the model is `sigma(a^T x)`); no torch module."""
        return ParameterLayout(("weight",), ((self.dim,),), module=False)

    def describe(self) -> dict[str, object]:
        sizes = self.agent_sizes
        return {
            **super().describe(),
            "l2": self.l2,
            "train_examples": int(sizes.sum()),
            "test_examples": len(self.test_labels),
            "agent_sizes_min": int(sizes.min()),
            "agent_sizes_max": int(sizes.max()),
        }
