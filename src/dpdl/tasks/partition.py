"""Partitioners: how a data set is split across n agents (data heterogeneity).

Each returns a list of n index arrays into the data set, disjoint, every agent non-empty.

- [`iid`][dpdl.tasks.partition.iid]: uniform random split into near-equal parts.
- [`dirichlet`][dpdl.tasks.partition.dirichlet]: label skew; for every class, proportions across
  agents drawn from Dirichlet(alpha) (Hsu et al. 2019; the Whisper experiments use alpha = 10).
- [`quantity_skew`][dpdl.tasks.partition.quantity_skew]: iid labels, agent sizes from
  Dirichlet(beta) proportions.
- [`labels_per_agent`][dpdl.tasks.partition.labels_per_agent]: each agent holds only k classes
  (McMahan et al. 2017's shards).
"""

from __future__ import annotations

import numpy as np

from dpdl.choices import PARTITIONS
from dpdl.errors import ConfigError

__all__ = ["PARTITIONS", "dirichlet", "iid", "labels_per_agent", "quantity_skew"]

#: Redraws allowed before a partition that leaves an agent with too few examples is an error.
MAX_REDRAWS = 1000


def _check(n_examples: int, n_agents: int, min_size: int) -> None:
    if n_agents < 1:
        raise ConfigError(f"need at least one agent, got {n_agents}")
    if n_examples < n_agents * min_size:
        raise ConfigError(
            f"{n_examples} examples cannot give {n_agents} agents {min_size} example(s) each"
        )


def iid(n_examples: int, n_agents: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Uniformly random split into `n_agents` parts whose sizes differ by at most one."""
    _check(n_examples, n_agents, 1)
    return [np.sort(part) for part in np.array_split(rng.permutation(n_examples), n_agents)]


def _split_by_proportions(indices: np.ndarray, proportions: np.ndarray) -> list[np.ndarray]:
    cuts = (np.cumsum(proportions)[:-1] * len(indices)).astype(int)
    return np.split(indices, cuts)


def dirichlet(
    labels: np.ndarray, n_agents: int, alpha: float, rng: np.random.Generator, min_size: int = 2
) -> list[np.ndarray]:
    """Label-skewed split: class c's examples are divided with proportions `Dir(alpha 1_n)`.

    Redrawn until every agent has at least `min_size` examples.
    """
    if not (np.isfinite(alpha) and alpha > 0):
        raise ConfigError(
            f"the Dirichlet concentration alpha must be a finite number > 0, got {alpha}"
        )
    labels = np.asarray(labels)
    _check(len(labels), n_agents, min_size)
    classes = np.unique(labels)
    by_class = [np.flatnonzero(labels == c) for c in classes]
    for _ in range(MAX_REDRAWS):
        parts: list[list[np.ndarray]] = [[] for _ in range(n_agents)]
        for members in by_class:
            shuffled = rng.permutation(members)
            for agent, chunk in enumerate(
                _split_by_proportions(shuffled, rng.dirichlet(np.full(n_agents, alpha)))
            ):
                parts[agent].append(chunk)
        result = [np.sort(np.concatenate(chunks)) for chunks in parts]
        if min(len(part) for part in result) >= min_size:
            return result
    raise ConfigError(
        f"Dirichlet(alpha={alpha}) left some agent with fewer than {min_size} examples in "
        f"{MAX_REDRAWS} draws; "
        "raise alpha or lower the number of agents"
    )


def quantity_skew(
    n_examples: int, n_agents: int, beta: float, rng: np.random.Generator, min_size: int = 2
) -> list[np.ndarray]:
    """Size-skewed split: proportions `Dir(beta 1_n)`, examples assigned uniformly at random."""
    if not (np.isfinite(beta) and beta > 0):
        raise ConfigError(
            f"the Dirichlet concentration beta must be a finite number > 0, got {beta}"
        )
    _check(n_examples, n_agents, min_size)
    for _ in range(MAX_REDRAWS):
        result = [
            np.sort(p)
            for p in _split_by_proportions(
                rng.permutation(n_examples), rng.dirichlet(np.full(n_agents, beta))
            )
        ]
        if min(len(part) for part in result) >= min_size:
            return result
    raise ConfigError(
        f"quantity skew beta={beta} left some agent with fewer than {min_size} examples; raise beta"
    )


def labels_per_agent(
    labels: np.ndarray, n_agents: int, k: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """Each agent holds `k` classes; each class is split evenly among the agents holding it.

    Classes are dealt cyclically from a random order, so every class is held by some agent when
    `n_agents * k >= n_classes`.
    """
    labels = np.asarray(labels)
    classes = np.unique(labels)
    if not 1 <= k <= len(classes):
        raise ConfigError(f"labels per agent must be between 1 and {len(classes)}, got {k}")
    if n_agents * k < len(classes):
        raise ConfigError(
            f"{n_agents} agents with {k} labels each cannot cover {len(classes)} classes"
        )
    order = rng.permutation(classes)
    held = [[order[(agent * k + j) % len(classes)] for j in range(k)] for agent in range(n_agents)]
    holders = {c: [a for a in range(n_agents) if c in held[a]] for c in classes}
    parts: list[list[np.ndarray]] = [[] for _ in range(n_agents)]
    for c, agents in holders.items():
        for agent, chunk in zip(
            agents,
            np.array_split(rng.permutation(np.flatnonzero(labels == c)), len(agents)),
            strict=True,
        ):
            parts[agent].append(chunk)
    result = [np.sort(np.concatenate(chunks)) for chunks in parts]
    if min(len(part) for part in result) == 0:
        raise ConfigError(
            "some agent received no examples; use fewer agents or more labels per agent"
        )
    return result
