"""L2-regularised logistic regression, the papers' convex task on real data (a9a).

Per example ``(a, y)`` with ``y in {-1, +1}``: ``l(x) = log(1 + exp(-y a^T x))``; the objective
adds ``(lambda / 2) ||x||^2``. The regulariser is data-independent, so its gradient is added after
clipping and needs no noise. Whisper D-SGD Section VI-A (ii) / CorN-DSGD VI-A (ii): a9a,
80/20 split, Dirichlet(10) partition, batch 128. DECOR Section 6.1 uses the same loss.

Per-example gradients are ``-y sigma(-y a^T x) a``, so their norms are ``|coef| ||a||`` and
per-example clipping costs no more than agent-level clipping: no ``(n, B, d)`` gradient array is
formed. Thousands of agents are taken in blocks of agents (:data:`BLOCK_ENTRIES`), so the batch
rows gathered and the evaluation's margins stay tens of megabytes whatever n (the papers' 20-100
agents are one block: their numbers are unchanged).
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from dpdl.tasks.base import Batch, Task

__all__ = ["BLOCK_ENTRIES", "LogisticRegression"]

#: Most float64 entries of one block's temporary arrays (64 MB): the gathered batch rows
#: ``(agents, B, d)`` of a step, or the margins ``(examples, agents)`` of an evaluation.
BLOCK_ENTRIES = 1 << 23


def _blocks(n: int, per_agent: int) -> list[slice]:
    """Consecutive agent blocks whose temporaries hold at most :data:`BLOCK_ENTRIES` entries."""
    size = max(1, BLOCK_ENTRIES // max(per_agent, 1))
    return [slice(start, min(start + size, n)) for start in range(0, n, size)]


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
        self.features = np.ascontiguousarray(train_features[order], dtype=float)
        self.labels = np.asarray(train_labels[order], dtype=float)
        self.offsets = np.concatenate([[0], np.cumsum([len(p) for p in partition])])
        self.feature_norms = np.linalg.norm(self.features, axis=1)
        self.test_features = np.ascontiguousarray(test_features, dtype=float)
        self.test_labels = np.asarray(test_labels, dtype=float)
        self.l2 = float(l2)

    @property
    def agent_sizes(self) -> np.ndarray:
        return np.diff(self.offsets)

    def gradients(
        self, params: np.ndarray, batch: Batch | None, example_clip: float | None
    ) -> np.ndarray:
        assert batch is not None, "logistic regression is trained on mini-batches"
        n, size = batch.indices.shape
        if n > 1 and len(blocks := _blocks(n, size * self.dim)) > 1:
            return np.concatenate(
                [
                    self.gradients(
                        params[b], Batch(batch.indices[b], batch.weights[b]), example_clip
                    )
                    for b in blocks
                ]
            )
        rows = np.take(
            self.features, batch.indices, axis=0
        )  # (n, B, d); faster than fancy indexing
        labels = self.labels[batch.indices]  # (n, B)
        margins = labels * np.matmul(rows, params[:, :, None])[:, :, 0]
        coefficients = -labels * expit(-margins)  # per-example gradient = coefficient * row
        if example_clip is not None:
            norms = np.abs(coefficients) * self.feature_norms[batch.indices]
            coefficients = coefficients * np.minimum(1.0, example_clip / np.maximum(norms, 1e-300))
        return np.matmul((coefficients * batch.weights)[:, None, :], rows)[:, 0, :]

    def regularizer_gradient(self, params: np.ndarray) -> np.ndarray | None:
        return self.l2 * params if self.l2 else None

    def _losses(
        self, params: np.ndarray, features: np.ndarray, labels: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        blocks = _blocks(len(params), len(labels))
        if len(blocks) > 1:
            parts = [self._losses(params[b], features, labels) for b in blocks]
            return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
        margins = labels[:, None] * (features @ params.T)  # (m, k)
        return np.logaddexp(0.0, -margins).mean(axis=0), (margins > 0).mean(axis=0)

    def evaluate(self, params: np.ndarray) -> dict[str, float]:
        average = params.mean(axis=0, keepdims=True)
        test_loss, test_accuracy = self._losses(
            np.vstack([params, average]), self.test_features, self.test_labels
        )
        train_loss, _ = self._losses(params, self.features, self.labels)
        regulariser = 0.5 * self.l2 * (params**2).sum(axis=1)
        return {
            "test_loss": float(test_loss[:-1].mean()),
            "test_accuracy": float(test_accuracy[:-1].mean()),
            "test_loss_average_model": float(test_loss[-1]),
            "test_accuracy_average_model": float(test_accuracy[-1]),
            "train_objective": float((train_loss + regulariser).mean()),
            "consensus_distance": float(((params - average) ** 2).sum(axis=1).mean()),
        }

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
