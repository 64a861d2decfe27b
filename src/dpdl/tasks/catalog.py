"""The named tasks of the CLI, built from real data with deterministic seeds."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch
from torch import nn
from torch.nn import functional

from dpdl.choices import START_REGISTRY, TASK_REGISTRY, TASKS
from dpdl.data.a9a import load_a9a
from dpdl.data.adult import load_adult
from dpdl.data.checks import require_varying
from dpdl.data.housing import COLUMNS, load_california_housing
from dpdl.data.idx import load_idx_dataset
from dpdl.errors import ConfigError, DataError
from dpdl.seeding import purpose_rng
from dpdl.settings import TaskOptions
from dpdl.tasks import partition as partitions
from dpdl.tasks.base import Task
from dpdl.tasks.logistic import LogisticRegression
from dpdl.tasks.quadratic import decor_least_squares, whisper_quadratic
from dpdl.tasks.torch_model import TorchModelTask

__all__ = [
    "TASKS",
    "TASK_NETWORKS",
    "TASK_REGISTRY",
    "HousingFeatures",
    "TaskOptions",
    "build_task",
    "housing_task",
    "image_cnn",
    "image_task",
    "lenet",
    "partition_labels",
    "split_examples",
    "standardised_census",
    "task_network",
    "train_test_split",
]

#: Agent x test-example pairs per evaluation pass of the convolutional tasks (about 1 GB of
#: activations).
CNN_EVAL_CHUNK = 20_000


def train_test_split(
    n_examples: int, test_fraction: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Random split of `range(n_examples)` into (train, test) index arrays."""
    if not 0.0 < test_fraction < 1.0:
        raise ConfigError(f"the test fraction must be in (0, 1), got {test_fraction}")
    order = rng.permutation(n_examples)
    n_test = int(round(test_fraction * n_examples))  # noqa: RUF046 - the product may be a numpy float
    return np.sort(order[n_test:]), np.sort(order[:n_test])


def partition_labels(
    labels: np.ndarray, n_agents: int, options: TaskOptions, rng: np.random.Generator
) -> list[np.ndarray]:
    """Split examples with these `labels` across agents by `options.partition`."""
    if options.partition == "iid":
        return partitions.iid(len(labels), n_agents, rng)
    if options.partition == "dirichlet":
        return partitions.dirichlet(labels, n_agents, options.alpha, rng)
    if options.partition == "quantity-skew":
        return partitions.quantity_skew(len(labels), n_agents, options.alpha, rng)
    if options.partition == "labels-per-agent":
        return partitions.labels_per_agent(labels, n_agents, options.labels_per_agent, rng)
    raise ConfigError(
        f"unknown partition {options.partition!r}; known: {', '.join(partitions.PARTITIONS)}"
    )


def build_task(name: str, n_agents: int, seed: int = 0, options: TaskOptions | None = None) -> Task:
    """Task `name` (of `dpdl.choices.TASK_REGISTRY`) for `n_agents` agents; data split
    and partition are drawn from `seed`."""
    factory = TASK_REGISTRY.get(name)
    return factory(name, n_agents, seed, options or TaskOptions())


def _start(options: TaskOptions, dim: int) -> np.ndarray:
    """The starting model `options.start` names (`dpdl.choices.START_REGISTRY`), checked
    to be `dim` finite numbers."""
    start = np.asarray(START_REGISTRY.get(options.start)(dim), dtype=float)
    if start.shape != (dim,) or not np.all(np.isfinite(start)):
        raise ConfigError(
            f"start (--start): starting point {options.start!r} gave {start.shape} values, not "
            f"{dim} finite numbers"
        )
    return start


def _quadratic(name: str, n_agents: int, seed: int, options: TaskOptions) -> Task:
    return whisper_quadratic(n_agents, start=_start(options, 2))


def _least_squares(name: str, n_agents: int, seed: int, options: TaskOptions) -> Task:
    return decor_least_squares(
        n_agents,
        options.dim,
        purpose_rng(seed, "least-squares targets"),
        start=_start(options, options.dim),
    )


def split_examples(
    n_examples: int, n_train_file: int, options: TaskOptions, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Train and test indices of a dataset whose `n_examples` rows are its training file's
    `n_train_file` rows, then its test file's: a random `options.data_fraction` of the rows is
    kept (all of them at 1), then split at random (`options.test_fraction` held out) or by file
    (`options.split == "files"`: the kept rows of the test file are the test set)."""
    kept = np.arange(n_examples)
    if options.data_fraction < 1.0:
        count = int(options.data_fraction * n_examples)
        kept = np.sort(purpose_rng(seed, "data fraction").choice(n_examples, count, replace=False))
    if options.split == "files":
        return kept[kept < n_train_file], kept[kept >= n_train_file]
    train, test = train_test_split(
        len(kept), options.test_fraction, purpose_rng(seed, "train/test split")
    )
    return kept[train], kept[test]


#: Rows of a9a's training file (``a9a``; its test file ``a9a.t`` holds the other 16281).
A9A_TRAIN_ROWS = 32561


def _logreg_a9a(name: str, n_agents: int, seed: int, options: TaskOptions) -> Task:
    features, labels = load_a9a()
    train, test = split_examples(len(labels), A9A_TRAIN_ROWS, options, seed)
    parts = partition_labels(labels[train], n_agents, options, purpose_rng(seed, "partition"))
    return LogisticRegression(
        name, features[train], labels[train], parts, features[test], labels[test], options.l2
    )


def _cross_entropy(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return functional.cross_entropy(outputs, targets, reduction="none")


def _pixel_std(pixels: np.ndarray, folder: str) -> float:
    """The standard deviation of the training images' `pixels`, which standardising divides
    by: a [`DataError`][dpdl.errors.DataError] where it is 0 (every pixel of every image alike)."""
    std = float(pixels.std())
    if std == 0:
        raise DataError(
            f"{folder}: every pixel of the training images is {float(pixels.flat[0]):g}: "
            "standardising them divides by zero"
        )
    return std


def _mnist(
    name: str,
    n_agents: int,
    seed: int,
    options: TaskOptions,
    scale: Callable[[np.ndarray, np.ndarray], np.ndarray],
    model: Callable[[], nn.Module],
) -> TorchModelTask:
    """MNIST's 70000 images (train and test files together, flattened), split by
    [`split_examples`][dpdl.tasks.catalog.split_examples], pixels mapped by `scale(images,
    training indices)`, the training rows partitioned by label, and `model()` initialised from
    the seed."""
    train_images, train_labels = load_idx_dataset("mnist", "train")
    test_images, test_labels = load_idx_dataset("mnist", "t10k")
    images = np.concatenate([train_images, test_images]).reshape(-1, 28 * 28)
    labels = np.concatenate([train_labels, test_labels])
    train, test = split_examples(len(labels), len(train_labels), options, seed)
    images = scale(images, train)
    parts = partition_labels(labels[train], n_agents, options, purpose_rng(seed, "partition"))
    torch.manual_seed(int(purpose_rng(seed, "model init").integers(2**31)))
    return TorchModelTask(
        name,
        model(),
        _cross_entropy,
        images[train],
        labels[train],
        parts,
        images[test],
        labels[test],
        options.l2,
    )


def _mnist_mlp(name: str, n_agents: int, seed: int, options: TaskOptions) -> TorchModelTask:
    """MNIST with a one-hidden-layer network (DECOR Section 6.2; CorN-DSGD's shallow network).

    The 70000 images (train and test files together) are split 80/20 and partitioned like a9a
    (CorN-DSGD VI-A (iii): "the same train-test split, data partitioning scheme"); pixels are
    scaled to [0, 1] and standardised with the training mean and std.
    """

    def standardise(images: np.ndarray, train: np.ndarray) -> np.ndarray:
        pixels = images.astype(np.float32) / 255.0
        return (pixels - pixels[train].mean()) / _pixel_std(pixels[train], "mnist")

    return _mnist(
        "mnist-mlp",
        n_agents,
        seed,
        options,
        standardise,
        lambda: task_network("mnist-mlp", options, (28 * 28,)),
    )


#: MNIST's pixel mean and standard deviation (of [0, 1] pixels over the training file), with
#: which the CorN-DSGD authors' code normalises the images.
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081


def _mnist_linear(name: str, n_agents: int, seed: int, options: TaskOptions) -> TorchModelTask:
    """MNIST with a linear softmax model (784 -> 10, with bias): the model of the CorN-DSGD
    authors' released code (`models.py: LinearLayer(28*28, 10)`). Split as `mnist-mlp`
    ([`split_examples`][dpdl.tasks.catalog.split_examples]: the authors keep 20% of the 70000
    images and test on the kept images of the test file, `options.data_fraction` and
    `options.split`); pixels in [0, 1] normalised with MNIST's mean and std (`MNIST_MEAN`,
    `MNIST_STD`), as theirs."""

    def normalise(images: np.ndarray, train: np.ndarray) -> np.ndarray:
        return ((images.astype(np.float32) / 255.0 - MNIST_MEAN) / MNIST_STD).astype(np.float32)

    return _mnist(
        "mnist-linear",
        n_agents,
        seed,
        options,
        normalise,
        lambda: task_network("mnist-linear", options, (28 * 28,)),
    )


def _squared_error(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return (outputs.squeeze(-1) - targets) ** 2


def standardised_census(
    table: np.ndarray, values: np.ndarray, train: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """housing-mlp's features and target: the census table's columns and the median house value,
    standardised with the training rows' (`train`) mean and standard deviation (a column constant
    over them is a [`DataError`][dpdl.errors.DataError])."""
    require_varying(
        np.column_stack([table[train], values[train]]), "california_housing", COLUMNS,
        "training rows",
    )  # fmt: skip
    mean, std = table[train].mean(axis=0), table[train].std(axis=0)
    inputs = ((table - mean) / std).astype(np.float32)
    targets = ((values - values[train].mean()) / values[train].std()).astype(np.float32)
    return inputs, targets


#: How a housing task prepares the census table: ``prepare(table, values, train)`` gives its
#: features and target (float32), ``train`` the training rows' indices.
HousingFeatures = Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


def _housing_mlp(name: str, n_agents: int, seed: int, options: TaskOptions) -> TorchModelTask:
    return housing_task(name, n_agents, seed, options)


def housing_task(
    name: str,
    n_agents: int,
    seed: int,
    options: TaskOptions,
    prepare: HousingFeatures = standardised_census,
) -> TorchModelTask:
    """California housing regression with a one-hidden-layer ReLU network, mean squared error
    (MAFALDA-SGD Section 7.2: width 64), task `housing-mlp`. Features and target are standardised
    with the training split's statistics
    ([`standardised_census`][dpdl.tasks.catalog.standardised_census]), so predicting the mean
    scores a test loss of about 1; a plugin's task prepares them its own way (`prepare`).
    Label-based partitions use the target's deciles as labels."""
    table, values = load_california_housing()
    train, test = train_test_split(
        len(values), options.test_fraction, purpose_rng(seed, "train/test split")
    )
    inputs, targets = prepare(table, values, train)
    deciles = np.searchsorted(np.quantile(targets[train], np.linspace(0.1, 0.9, 9)), targets[train])
    parts = partition_labels(deciles, n_agents, options, purpose_rng(seed, "partition"))
    torch.manual_seed(int(purpose_rng(seed, "model init").integers(2**31)))
    model = task_network("housing-mlp", options, table.shape[1:])
    return TorchModelTask(
        name,
        model,
        _squared_error,
        inputs[train],
        targets[train],
        parts,
        inputs[test],
        targets[test],
        options.l2,
        classification=False,
    )


def _adult_mlp(name: str, n_agents: int, seed: int, options: TaskOptions) -> TorchModelTask:
    """UCI Adult income with a one-hidden-layer sigmoid network and two-class cross-entropy
    (LPPA's binary tasks use "a multi-layer perceptron" of unstated width and activation; ours is
    `options.hidden` wide, sigmoid as DLG's networks, see [`lenet`][dpdl.tasks.catalog.lenet]),
    on the original train / test rows."""
    train_features, train_labels = load_adult("train")
    test_features, test_labels = load_adult("test")
    parts = partition_labels(train_labels, n_agents, options, purpose_rng(seed, "partition"))
    torch.manual_seed(int(purpose_rng(seed, "model init").integers(2**31)))
    model = task_network("adult-mlp", options, train_features.shape[1:])
    return TorchModelTask(
        "adult-mlp",
        model,
        _cross_entropy,
        train_features,
        train_labels,
        parts,
        test_features,
        test_labels,
        options.l2,
    )


def image_cnn(classes: int = 10) -> nn.Sequential:
    """Two 3x3 convolutions of 16 and 32 channels, each with ReLU, 2x2 max-pooling and group norm
    (4 groups), then a linear softmax layer: MAFALDA-SGD's image network (Section 7.2). Input
    (B, 1, 28, 28); 20,586 parameters.

    The pooling comes before the ReLU here: `relu(maxpool(x)) = maxpool(relu(x))` exactly (ReLU
    is monotone), gradients included (the same maximum is routed back, and where it is negative
    ReLU's zero derivative stops it either way), and the parameters keep their places and their
    initial values; the ReLU then runs on a quarter of the values, which makes a training step on
    a CPU about a quarter faster (BENCHMARKS.md, "Per-agent gradients of torch models")."""
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.MaxPool2d(2), nn.ReLU(), nn.GroupNorm(4, 16),
        nn.Conv2d(16, 32, 3, padding=1), nn.MaxPool2d(2), nn.ReLU(), nn.GroupNorm(4, 32),
        nn.Flatten(), nn.Linear(32 * 7 * 7, classes),
    )  # fmt: skip


def lenet(classes: int = 10) -> nn.Sequential:
    """The "two-layer CNN" of LPPA's image experiments, taken as DLG's LeNet (Zhu et al. 2019) with
    two of its 5x5, 12-channel convolutions (stride 2, sigmoid) and its linear layer. Input
    (B, 1, 28, 28); 9,814 parameters. Smooth activations, no pooling and no normalisation are what
    gradient inversion by L-BFGS needs: ReLU's second derivative vanishes, and on MAFALDA's network
    (max-pooling, group norm) DLG recovered nothing recognisable from an exact gradient here."""
    return nn.Sequential(
        nn.Conv2d(1, 12, 5, stride=2, padding=2), nn.Sigmoid(),
        nn.Conv2d(12, 12, 5, stride=2, padding=2), nn.Sigmoid(),
        nn.Flatten(), nn.Linear(12 * 7 * 7, classes),
    )  # fmt: skip


def _mlp(inputs: int, hidden: int, outputs: int, activation: type[nn.Module]) -> nn.Sequential:
    """One hidden layer of `hidden` units with `activation` between two linear layers."""
    return nn.Sequential(nn.Linear(inputs, hidden), activation(), nn.Linear(hidden, outputs))


#: The network of every built-in torch task by the task's name, built from the task's options and
#: the shape of one example's input alone (no data): `network(options, input_shape)`. The tasks
#: build theirs with it, and a saved model of a task is loaded back into it
#: ([`task_network`][dpdl.tasks.catalog.task_network]).
TASK_NETWORKS: dict[str, Callable[[TaskOptions, tuple[int, ...]], nn.Module]] = {
    "mnist-mlp": lambda options, shape: _mlp(math.prod(shape), options.hidden, 10, nn.ReLU),
    # a sequence: per-example clipping by ghost norms
    "mnist-linear": lambda options, shape: nn.Sequential(nn.Linear(math.prod(shape), 10)),
    "housing-mlp": lambda options, shape: _mlp(math.prod(shape), options.hidden, 1, nn.ReLU),
    "adult-mlp": lambda options, shape: _mlp(math.prod(shape), options.hidden, 2, nn.Sigmoid),
    "mnist-cnn": lambda options, shape: image_cnn(),
    "fashion-cnn": lambda options, shape: image_cnn(),
    "mnist-lenet": lambda options, shape: lenet(),
    "fashion-lenet": lambda options, shape: lenet(),
}


def task_network(name: str, options: TaskOptions, input_shape: tuple[int, ...]) -> nn.Module:
    """A fresh network of the built-in torch task `name` (a key of `TASK_NETWORKS`) for `options`
    and examples of `input_shape`, initialised by torch's current random state."""
    if name not in TASK_NETWORKS:
        raise ConfigError(
            f"task {name!r} has no built-in network; those that do: {', '.join(TASK_NETWORKS)}"
        )
    return TASK_NETWORKS[name](options, tuple(input_shape))


def _image_task(name: str, n_agents: int, seed: int, options: TaskOptions) -> TorchModelTask:
    """MNIST or Fashion-MNIST (`mnist-*`, `fashion-*`) with
    [`image_cnn`][dpdl.tasks.catalog.image_cnn] (`*-cnn`) or [`lenet`][dpdl.tasks.catalog.lenet]
    (`*-lenet`): [`image_task`][dpdl.tasks.catalog.image_task] with standardised pixels."""
    return image_task(
        name, n_agents, seed, options, lambda: task_network(name, options, (1, 28, 28))
    )


def image_task(
    name: str,
    n_agents: int,
    seed: int,
    options: TaskOptions,
    network: Callable[[], nn.Module],
    standardised: bool = True,
) -> TorchModelTask:
    """The image task `name` on MNIST (a name that starts with `mnist`) or Fashion-MNIST (any
    other) with the network `network()` builds, for a task of your own: the original 60000 /
    10000 split; pixels scaled to [0, 1] and, where `standardised`, standardised with the
    training mean and std; the labels split by `options.partition`; each agent keeps
    `options.examples_per_agent` of its part where set (MAFALDA-SGD's FEMNIST nodes hold a few
    hundred examples each), and `options.test_examples` test images are evaluated where set. The
    network is built under a seed drawn from `seed`, so its initial weights are the seed's."""
    folder = "mnist" if name.startswith("mnist") else "fashion_mnist"
    train_images, train_labels = load_idx_dataset(folder, "train")
    test_images, test_labels = load_idx_dataset(folder, "t10k")

    def scaled(images: np.ndarray) -> np.ndarray:  # (m, 28, 28) uint8 -> (m, 1, 28, 28) in [0, 1]
        return images.astype(np.float32)[:, None] / 255.0

    train_inputs = scaled(train_images)
    mean, std = (
        (train_inputs.mean(), _pixel_std(train_inputs, folder)) if standardised else (0.0, 1.0)
    )
    parts = partition_labels(train_labels, n_agents, options, purpose_rng(seed, "partition"))
    if options.examples_per_agent is not None:
        keep, rng, fewest = (
            options.examples_per_agent,
            purpose_rng(seed, "examples per agent"),
            min(len(p) for p in parts),
        )
        if keep > fewest:
            raise ConfigError(
                f"{keep} examples per agent asked for, but an agent holds only {fewest}"
            )
        parts = [np.sort(rng.choice(part, keep, replace=False)) for part in parts]
    test = np.arange(len(test_labels))
    if options.test_examples is not None:
        test = np.sort(
            purpose_rng(seed, "test examples").choice(
                test, min(options.test_examples, len(test)), replace=False
            )
        )
    torch.manual_seed(int(purpose_rng(seed, "model init").integers(2**31)))
    return TorchModelTask(
        name, network(), _cross_entropy,
        (train_inputs - mean) / std, train_labels,
        parts, (scaled(test_images[test]) - mean) / std, test_labels[test], options.l2,
        eval_chunk=CNN_EVAL_CHUNK, seed=seed,
    )  # fmt: skip
