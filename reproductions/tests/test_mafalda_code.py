"""The released codes' tasks and starting point, registered by the reproductions' plugin:
MAFALDA-SGD's network on the pixels its code feeds it, its housing features, and DECOR's start
at ones."""

from __future__ import annotations

import numpy as np

from dpdl.choices import START_REGISTRY, TASK_REGISTRY, TASKS
from dpdl.data.housing import load_california_housing
from dpdl.registry import load_plugins
from dpdl.seeding import purpose_rng
from dpdl.tasks import build_task
from dpdl.tasks.catalog import TaskOptions, train_test_split
from dpdl_reproductions.plugin import TINY_CNN_TASKS


def test_the_tiny_cnn_is_mafaldas_code_network_on_its_unstandardised_pixels() -> None:
    """``mnist-tiny-cnn``: the split, agents' examples and test images of ``mnist-cnn`` (the same
    seed and options), fed the [0, 1] pixels as MAFALDA-SGD's code feeds them (``mnist-cnn``
    standardises them), to the code's network (20,554 parameters)."""
    load_plugins()
    options = TaskOptions(partition="iid", examples_per_agent=20, test_examples=50)
    tiny, cnn = (build_task(name, 3, 0, options) for name in ("mnist-tiny-cnn", "mnist-cnn"))
    assert (tiny.offsets == cnn.offsets).all() and bool((tiny.targets == cnn.targets).all())
    assert bool((tiny.test_targets == cnn.test_targets).all())
    assert float(tiny.inputs.min()) == 0.0 and float(tiny.inputs.max()) == 1.0
    assert abs(float(cnn.inputs.std()) - 1.0) < 0.05 and float(tiny.inputs.std()) < 0.5
    assert tiny.dim == 20_554 and cnn.dim == 20_586


def test_the_code_tasks_are_the_plugins_not_the_librarys() -> None:
    load_plugins()
    assert TASK_REGISTRY.helps().items() >= TINY_CNN_TASKS.items()
    assert not set(TINY_CNN_TASKS) & set(TASKS)


def test_housing_prepared_as_the_mafalda_code_does() -> None:
    """``housing-mlp-sklearn``: scikit-learn's eight features (median income, age, rooms,
    bedrooms and occupants per household, population, latitude, longitude), computed here from
    the census table's columns, standardised over all rows (train and test together), the target
    in $100,000; the same split and partition as ``housing-mlp``."""
    load_plugins()
    table, values = load_california_housing()
    per_household = table / table[:, [6]]
    columns = [table[:, 7], table[:, 2], per_household[:, 3], per_household[:, 4], table[:, 5]]
    features = np.column_stack([*columns, per_household[:, 5], table[:, 1], table[:, 0]])
    features = (features - features.mean(axis=0)) / features.std(axis=0)
    train, test = train_test_split(len(values), 0.2, purpose_rng(3, "train/test split"))
    options = TaskOptions(partition="iid")
    task = build_task("housing-mlp-sklearn", 10, seed=3, options=options)
    np.testing.assert_allclose(task.test_inputs.numpy(), features[test], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(task.test_targets.numpy(), values[test] / 1e5, rtol=1e-7)
    sort = lambda a: np.sort(a, axis=0)  # noqa: E731 - the training rows are grouped by agent
    np.testing.assert_allclose(sort(task.inputs.numpy()), sort(features[train]), atol=1e-6)
    np.testing.assert_allclose(sort(task.targets.numpy()), sort(values[train] / 1e5), rtol=1e-7)
    plain = build_task("housing-mlp", 10, seed=3, options=options)
    np.testing.assert_array_equal(task.agent_sizes, plain.agent_sizes)
    assert "housing-mlp-sklearn" not in TASKS


def test_decors_code_starts_the_quadratics_at_ones() -> None:
    """``start = ones`` (DECOR's quadratics.py): every coordinate of every agent at 1, the problem
    unchanged; the library has no such starting point of its own."""
    load_plugins()
    for name in ("quadratic", "least-squares"):
        zeros = build_task(name, 6, seed=2)
        ones = build_task(name, 6, seed=2, options=TaskOptions(start="ones"))
        np.testing.assert_array_equal(ones.initial_params().numpy(), np.ones(ones.dim))
        np.testing.assert_array_equal(ones.optimum, zeros.optimum)
    assert START_REGISTRY.entry("ones").target.__module__ == "dpdl_reproductions.decor_authors"
