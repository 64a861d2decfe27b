"""The named tasks of the CLI, built from real data with deterministic seeds."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import torch
from torch import nn
from torch.nn import functional

from dpdl.data.a9a import load_a9a
from dpdl.data.housing import load_california_housing
from dpdl.data.idx import load_idx_dataset
from dpdl.errors import ConfigError
from dpdl.seeding import purpose_rng
from dpdl.tasks import partition as partitions
from dpdl.tasks.base import Task
from dpdl.tasks.logistic import LogisticRegression
from dpdl.tasks.quadratic import decor_least_squares, whisper_quadratic
from dpdl.tasks.torch_model import TorchModelTask

__all__ = ["TaskOptions", "TASKS", "build_task", "train_test_split", "partition_labels"]

TASKS = ("quadratic", "least-squares", "logreg-a9a", "mnist-mlp", "housing-mlp")


@dataclass(frozen=True)
class TaskOptions:
    """Options of the named tasks (each task reads the ones it needs)."""

    partition: str = "dirichlet"
    alpha: float = 10.0
    labels_per_agent: int = 1
    test_fraction: float = 0.2
    l2: float = 1e-3
    dim: int = 10
    hidden: int = 64


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
    if name == "mnist-mlp":
        return _mnist_mlp(n_agents, seed, options)
    if name == "housing-mlp":
        return _housing_mlp(n_agents, seed, options)
    raise ConfigError(f"unknown task {name!r}; known: {', '.join(TASKS)}")


def _cross_entropy(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return functional.cross_entropy(outputs, targets, reduction="none")


def _mnist_mlp(n_agents: int, seed: int, options: TaskOptions) -> TorchModelTask:
    """MNIST with a one-hidden-layer network (DECOR Section 6.2; CorN-DSGD's shallow network).

    The 70000 images (train and test files together) are split 80/20 and partitioned like a9a
    (CorN-DSGD VI-A (iii): "the same train-test split, data partitioning scheme"); pixels are
    scaled to [0, 1] and standardised with the training mean and std.
    """
    train_images, train_labels = load_idx_dataset("mnist", "train")
    test_images, test_labels = load_idx_dataset("mnist", "t10k")
    images = np.concatenate([train_images, test_images]).reshape(-1, 28 * 28).astype(np.float32) / 255.0
    labels = np.concatenate([train_labels, test_labels])
    train, test = train_test_split(len(labels), options.test_fraction, purpose_rng(seed, "train/test split"))
    mean, std = images[train].mean(), images[train].std()
    images = (images - mean) / std
    parts = partition_labels(labels[train], n_agents, options, purpose_rng(seed, "partition"))
    torch.manual_seed(int(purpose_rng(seed, "model init").integers(2**31)))
    model = nn.Sequential(nn.Linear(28 * 28, options.hidden), nn.ReLU(), nn.Linear(options.hidden, 10))
    return TorchModelTask(
        "mnist-mlp", model, _cross_entropy, images[train], labels[train], parts, images[test], labels[test], options.l2
    )


def _squared_error(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return (outputs.squeeze(-1) - targets) ** 2


def _housing_mlp(n_agents: int, seed: int, options: TaskOptions) -> TorchModelTask:
    """California housing regression with a one-hidden-layer ReLU network, mean squared error
    (MAFALDA-SGD Section 7.2: width 64). Features and target are standardised with the training
    split's statistics, so predicting the mean scores a test loss of about 1. Label-based
    partitions use the target's deciles as labels."""
    features, values = load_california_housing()
    train, test = train_test_split(len(values), options.test_fraction, purpose_rng(seed, "train/test split"))
    mean, std = features[train].mean(axis=0), features[train].std(axis=0)
    inputs = ((features - mean) / std).astype(np.float32)
    targets = ((values - values[train].mean()) / values[train].std()).astype(np.float32)
    deciles = np.searchsorted(np.quantile(targets[train], np.linspace(0.1, 0.9, 9)), targets[train])
    parts = partition_labels(deciles, n_agents, options, purpose_rng(seed, "partition"))
    torch.manual_seed(int(purpose_rng(seed, "model init").integers(2**31)))
    model = nn.Sequential(nn.Linear(features.shape[1], options.hidden), nn.ReLU(), nn.Linear(options.hidden, 1))
    return TorchModelTask(
        "housing-mlp", model, _squared_error, inputs[train], targets[train], parts, inputs[test], targets[test], options.l2,
        classification=False,
    )
