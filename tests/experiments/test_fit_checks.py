"""The checks `fit` makes before training (`dpdl.experiments.fit_checks`): what they accept
trains, and they cost one probe on two examples that leaves the model as it was (the refusals
themselves are in tests/hostile/test_hostile_fit.py)."""

from __future__ import annotations

from typing import Any

import networkx as nx
import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

import dpdl
from dpdl.errors import GraphError
from dpdl.experiments.fit_checks import PROBE_EXAMPLES

RING = nx.cycle_graph(4)
X = np.random.default_rng(0).standard_normal((40, 3)).astype(np.float32)
Y = (X[:, 0] > 0).astype(np.int64)
OPTIONS: dict[str, Any] = {
    "mechanism": "ldp", "eps": 5.0, "steps": 3, "clip": 0.1, "batch_size": 4, "progress": False,
}  # fmt: skip


def _loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(outputs, targets, reduction="none")


class _Conv(nn.Module):
    def __init__(self, norm: nn.Module) -> None:
        super().__init__()
        self.conv, self.norm, self.head = nn.Conv1d(1, 2, 2), norm, nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.conv(x[:, None, :])).flatten(1))


def _frozen_batchnorm() -> nn.Module:
    """A BatchNorm in evaluation mode: fixed statistics, each example normalised alone."""
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
    model[1].running_mean.fill_(0.5)
    return model.eval()


@pytest.mark.parametrize(
    ("model", "clip_level"),
    [
        (_frozen_batchnorm, "agent"),
        (lambda: nn.Sequential(nn.Linear(3, 4), nn.GroupNorm(2, 4), nn.Linear(4, 2)), "example"),
        (lambda: nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.Linear(4, 2)), "example"),
        (lambda: _Conv(nn.InstanceNorm1d(2)), "example"),
        (lambda: nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.5), nn.Linear(4, 2)).eval(), "agent"),
    ],
    ids=["batchnorm-eval", "groupnorm", "layernorm", "instancenorm-no-stats", "dropout-eval"],
)
def test_the_layers_advised_instead_train(model: Any, clip_level: str) -> None:
    result = dpdl.fit(model(), _loss, (X, Y), (X, Y), RING, clip_level=clip_level, **OPTIONS)
    assert np.isfinite(result.models).all() and result.final_metrics["step"] == 3


def test_a_regression_with_float_targets_and_one_output_trains() -> None:
    """`classification=False` takes float targets and a single output (no labels checked)."""
    targets = torch.tensor(X[:, 1], dtype=torch.float32)
    result = dpdl.fit(
        nn.Linear(3, 1), lambda o, t: (o[:, 0] - t) ** 2, (torch.tensor(X), targets),
        (X, targets.numpy()), RING, classification=False, **OPTIONS,
    )  # fmt: skip
    assert "test_accuracy" not in result.final_metrics


class _Recording(nn.Module):
    """A linear model that records the shape of every input it is called on."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 2)
        self.shapes: list[tuple[int, ...]] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.shapes.append(tuple(x.shape))
        return self.linear(x)


@pytest.mark.parametrize("clip_level", ["agent", "example"])
def test_validation_probes_two_examples_and_leaves_the_model_as_it_was(clip_level: str) -> None:
    """A call refused after the checks (its graph is disconnected, found once the model is
    probed) ran the model a few times on at most two examples, and left its parameters as they
    were."""
    model = _Recording()
    before = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    disconnected = nx.union(RING, nx.cycle_graph(range(4, 8)))
    with pytest.raises(GraphError):
        dpdl.fit(model, _loss, (X, Y), (X, Y), disconnected, clip_level=clip_level, **OPTIONS)
    assert 0 < len(model.shapes) <= 4, model.shapes
    assert all(shape[0] <= PROBE_EXAMPLES for shape in model.shapes), model.shapes
    after = model.state_dict()
    assert all(torch.equal(before[name], after[name]) for name in before)


def test_n_beside_a_real_graph_is_refused_once_its_source_was_imported() -> None:
    """The registry holds a source as its import path until first used, then as the function:
    `n` beside a real graph is refused either way (it passed once another test had built one)."""
    from dpdl.choices import GRAPH_SOURCES
    from dpdl.errors import ConfigError
    from dpdl.graphs import build_graph

    build_graph("florentine")
    assert not isinstance(GRAPH_SOURCES.entry("florentine").target, str)
    with pytest.raises(ConfigError, match="has its own size: drop n=4"):
        dpdl.fit(nn.Linear(3, 2), _loss, (X, Y), (X, Y), graph="florentine", n=4, **OPTIONS)
