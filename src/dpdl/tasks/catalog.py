"""The named tasks of the CLI, built from real data with deterministic seeds."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpdl.data.a9a import load_a9a
from dpdl.errors import ConfigError
from dpdl.seeding import purpose_rng
from dpdl.tasks import partition as partitions
from dpdl.tasks.base import Task
from dpdl.tasks.logistic import LogisticRegression
from dpdl.tasks.quadratic import decor_least_squares, whisper_quadratic

__all__ = ["TaskOptions", "TASKS", "build_task", "train_test_split", "partition_labels"]

TASKS = ("quadratic", "least-squares", "logreg-a9a")


@dataclass(frozen=True)
class TaskOptions:
    """Options of the named tasks (each task reads the ones it needs)."""

    partition: str = "dirichlet"
    alpha: float = 10.0
    labels_per_agent: int = 1
    test_fraction: float = 0.2
    l2: float = 1e-3
    dim: int = 10


def train_test_split(n_examples: int, test_fraction: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Random split of ``range(n_examples)`` into (train, test) index arrays."""
    if not 0.0 < test_fraction < 1.0:
        raise ConfigError(f"the test fraction must be in (0, 1), got {test_fraction}")
    order = rng.permutation(n_examples)
    n_test = int(round(test_fraction * n_examples))
    return np.sort(order[n_test:]), np.sort(order[:n_test])


def partition_labels(labels: np.ndarray, n_agents: int, options: TaskOptions, rng: np.random.Generator) -> list[np.ndarray]:
    """Split examples with these ``labels`` across agents by ``options.partition``."""
    if options.partition == "iid":
        return partitions.iid(len(labels), n_agents, rng)
    if options.partition == "dirichlet":
        return partitions.dirichlet(labels, n_agents, options.alpha, rng)
    if options.partition == "quantity-skew":
        return partitions.quantity_skew(len(labels), n_agents, options.alpha, rng)
    if options.partition == "labels-per-agent":
        return partitions.labels_per_agent(labels, n_agents, options.labels_per_agent, rng)
    raise ConfigError(f"unknown partition {options.partition!r}; known: {', '.join(partitions.PARTITIONS)}")


def build_task(name: str, n_agents: int, seed: int = 0, options: TaskOptions | None = None) -> Task:
    """Task ``name`` for ``n_agents`` agents; data split and partition are drawn from ``seed``."""
    options = options or TaskOptions()
    if name == "quadratic":
        return whisper_quadratic(n_agents)
    if name == "least-squares":
        return decor_least_squares(n_agents, options.dim, purpose_rng(seed, "least-squares targets"))
    if name == "logreg-a9a":
        features, labels = load_a9a()
        train, test = train_test_split(len(labels), options.test_fraction, purpose_rng(seed, "train/test split"))
        parts = partition_labels(labels[train], n_agents, options, purpose_rng(seed, "partition"))
        return LogisticRegression(
            name, features[train], labels[train], parts, features[test], labels[test], options.l2
        )
    raise ConfigError(f"unknown task {name!r}; known: {', '.join(TASKS)}")
