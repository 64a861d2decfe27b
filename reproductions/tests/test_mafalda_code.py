"""MAFALDA-SGD's code's tasks, registered by the reproductions' plugin: its network on the pixels
its code feeds it."""

from __future__ import annotations

from dpdl.choices import TASK_REGISTRY, TASKS
from dpdl.registry import load_plugins
from dpdl.tasks import build_task
from dpdl.tasks.catalog import TaskOptions
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
