"""The torch (vmap) path computes the same gradients as the hand-written numpy task."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.nn import functional

from dpdl.simulation import PoissonSampler, UniformSampler
from dpdl.tasks import LogisticRegression
from dpdl.tasks.torch_model import TorchModelTask


def _pair(seed: int = 0) -> tuple[LogisticRegression, TorchModelTask]:
    rng = np.random.default_rng(seed)
    n, m, d = 3, 40, 6
    features = rng.standard_normal((n * m, d))
    labels = np.where(rng.random(n * m) < 0.4, -1.0, 1.0)
    parts = np.array_split(rng.permutation(n * m), n)
    numpy_task = LogisticRegression("np", features, labels, parts, features[:30], labels[:30], l2=0.0)
    model = nn.Sequential(nn.Linear(d, 1, bias=False), nn.Flatten(0))

    def logistic(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return functional.softplus(-targets * outputs)

    torch_task = TorchModelTask("torch", model, logistic, features, labels, parts, features[:30], labels[:30], classification=False)
    return numpy_task, torch_task


def test_batched_gradients_match_numpy_logistic_regression() -> None:
    numpy_task, torch_task = _pair()
    params = np.random.default_rng(1).standard_normal((3, 6))
    batch = UniformSampler(numpy_task.agent_sizes, 16).sample(np.random.default_rng(2))
    np.testing.assert_allclose(torch_task.gradients(params, batch, None), numpy_task.gradients(params, batch, None), rtol=1e-5, atol=1e-6)


def test_per_example_clipped_gradients_match_numpy_logistic_regression() -> None:
    numpy_task, torch_task = _pair(seed=4)
    params = 3 * np.random.default_rng(5).standard_normal((3, 6))
    batch = PoissonSampler(numpy_task.agent_sizes, 8).sample(np.random.default_rng(6))
    expected = numpy_task.gradients(params, batch, 0.3)
    np.testing.assert_allclose(torch_task.gradients(params, batch, 0.3), expected, rtol=1e-5, atol=1e-6)
    unclipped = numpy_task.gradients(params, batch, None)
    assert not np.allclose(expected, unclipped)  # the clip is active on this instance


def test_evaluation_matches_numpy_test_loss() -> None:
    numpy_task, torch_task = _pair(seed=7)
    params = np.random.default_rng(8).standard_normal((3, 6))
    assert np.isclose(torch_task.evaluate(params)["test_loss"], numpy_task.evaluate(params)["test_loss"], rtol=1e-5)
    assert torch_task.initial_params().shape == (6,)
