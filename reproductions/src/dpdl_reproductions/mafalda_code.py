"""What MAFALDA-SGD's released code trains that dpdl's own tasks do not: its network on MNIST and
Fashion-MNIST fed unstandardised pixels, the tasks `mnist-tiny-cnn` and `fashion-tiny-cnn`,
which mafalda-images' authors' protocol runs (`mafalda_images_authors`),
and the housing network on scikit-learn's features of the census table, the task
`housing-mlp-sklearn`, which mafalda-housing's runs (`mafalda_authors`);
all registered in `dpdl.choices.TASK_REGISTRY` by `plugin`.

They exist only to imitate the released scripts, so they live here, not in the library; the
library's [`dpdl.tasks.catalog.image_task`][dpdl.tasks.catalog.image_task] and
[`dpdl.tasks.catalog.housing_task`][dpdl.tasks.catalog.housing_task] build them, as they build its
own tasks.
"""

from __future__ import annotations

import numpy as np
from torch import nn

from dpdl.settings import TaskOptions
from dpdl.tasks.catalog import housing_task, image_task
from dpdl.tasks.torch_model import TorchModelTask

__all__ = ["housing_sklearn_task", "sklearn_housing", "tiny_cnn", "tiny_cnn_task"]


def tiny_cnn(classes: int = 10) -> nn.Sequential:
    """`FEMNIST_tiny_CNN` of MAFALDA-SGD's released code (`femnist.py`):
    [`dpdl.tasks.catalog.image_cnn`][dpdl.tasks.catalog.image_cnn] without the group norm after
    the first convolution, and 8 groups in the one after the second pooling; with `classes`
    outputs (FEMNIST's 62; 10 here). Input (B, 1, 28, 28); 20,554 parameters for 10 classes."""
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.GroupNorm(8, 32), nn.Flatten(), nn.Linear(32 * 7 * 7, classes),
    )  # fmt: skip


def tiny_cnn_task(name: str, n_agents: int, seed: int, options: TaskOptions) -> TorchModelTask:
    """`mnist-tiny-cnn` or `fashion-tiny-cnn`: `tiny_cnn` on the pixels in [0, 1], not
    standardised, as MAFALDA-SGD's code feeds its network `ToTensor`'s output."""
    return image_task(name, n_agents, seed, options, tiny_cnn, standardised=False)


def sklearn_housing(
    table: np.ndarray, values: np.ndarray, train: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The features of scikit-learn's `fetch_california_housing` (median income, house age,
    rooms, bedrooms and occupants per household, population, latitude, longitude) from the census
    table, standardised over all rows (`train` is not read: the code standardises before it
    splits), and the median house value in $100,000: the MAFALDA-SGD authors' `housing.py`."""
    households = table[:, 6]
    features = np.column_stack(
        [
            table[:, 7],
            table[:, 2],
            table[:, 3] / households,
            table[:, 4] / households,
            table[:, 5],
            table[:, 5] / households,
            table[:, 1],
            table[:, 0],
        ]
    )
    features = (features - features.mean(axis=0)) / features.std(axis=0)
    return features.astype(np.float32), (values / 1e5).astype(np.float32)


def housing_sklearn_task(
    name: str, n_agents: int, seed: int, options: TaskOptions
) -> TorchModelTask:
    """`housing-mlp-sklearn`: housing-mlp's network and split on `sklearn_housing`'s
    features and target, as MAFALDA-SGD's code prepares them."""
    return housing_task(name, n_agents, seed, options, sklearn_housing)
