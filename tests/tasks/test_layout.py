"""The names and shapes of a task's parameter vector (:mod:`dpdl.tasks.layout`): a flat vector and
its state dict convert both ways in the engine's order, every task names its vector, and the
catalogue's networks are built without data exactly as the tasks build them."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from dpdl.errors import ConfigError
from dpdl.seeding import purpose_rng
from dpdl.tasks import TaskOptions, build_task
from dpdl.tasks.catalog import TASK_NETWORKS, task_network
from dpdl.tasks.layout import ParameterLayout


def test_a_vector_and_its_state_dict_convert_both_ways_in_the_modules_order() -> None:
    module = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    layout = ParameterLayout.of_module(module, (3,))
    assert layout.names == ("0.weight", "0.bias", "2.weight", "2.bias") and layout.dim == 26
    flat = torch.cat([p.detach().reshape(-1) for p in module.parameters()]).double()
    state = layout.unflatten(flat)
    for name, parameter in module.named_parameters():
        assert torch.equal(state[name], parameter.detach().double())
    assert torch.equal(layout.flatten(state), flat)
    state["0.bias"][0] = 99.0  # a copy: the vector is untouched
    assert flat[12] != 99.0
    assert ParameterLayout.from_dict(layout.as_dict("float64")) == layout


def test_a_state_dict_of_other_names_or_shapes_is_refused_naming_each_difference() -> None:
    layout = ParameterLayout(("weight", "bias"), ((2, 3), (2,)), module=True, input_shape=(3,))
    with pytest.raises(ConfigError, match=r"no parameter bias; parameter extra is not saved"):
        layout.require_matches({"weight": (2, 3), "extra": (2,)}, "the module")
    with pytest.raises(ConfigError, match=r"bias has shape \(3,\), the saved one \(2,\)"):
        layout.require_matches({"weight": (2, 3), "bias": (3,)}, "the module")
    with pytest.raises(ConfigError, match="expected a vector of 8 parameters"):
        layout.unflatten(np.zeros(9))
    with pytest.raises(ConfigError, match="distinct names"):
        ParameterLayout(("w", "w"), ((1,), (1,)), module=False)
    for bad in ({"kind": "pickle"}, {"kind": "task-vector", "tensors": [{}], "input_shape": None}):
        with pytest.raises(ConfigError, match="malformed"):
            ParameterLayout.from_dict(bad)


@pytest.mark.parametrize(
    ("name", "names"),
    [("logreg-a9a", ("weight",)), ("quadratic", ("x",)), ("least-squares", ("x",))],
)
def test_a_task_without_a_torch_module_names_its_vector(name: str, names: tuple[str]) -> None:
    task = build_task(name, 4, 0)
    layout = task.parameter_layout()
    assert layout.names == names and not layout.module and layout.input_shape is None
    assert layout.dim == task.dim


@pytest.mark.parametrize("name", sorted(TASK_NETWORKS))
def test_the_catalogues_networks_are_built_without_data_as_the_tasks_build_them(name: str) -> None:
    """The network `task_network` builds under the task's model seed is the task's model: the
    same names, shapes and initial weights (so a task builds its model with it)."""
    options = TaskOptions(partition="iid", hidden=16)
    task = build_task(name, 3, 0, options)
    layout = task.parameter_layout()
    assert layout.module and layout.dim == task.dim
    assert layout.input_shape == tuple(task.test_inputs.shape[1:])
    torch.manual_seed(int(purpose_rng(0, "model init").integers(2**31)))
    network = task_network(name, options, layout.input_shape)
    assert ParameterLayout.of_module(network, layout.input_shape) == layout
    flat = torch.cat([p.detach().reshape(-1) for p in network.parameters()]).double()
    assert torch.equal(flat, task.initial_params())


def test_a_task_without_a_built_in_network_is_named() -> None:
    with pytest.raises(ConfigError, match="'logreg-a9a' has no built-in network"):
        task_network("logreg-a9a", TaskOptions(), (123,))
