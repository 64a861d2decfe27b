"""The engine on a GPU gives what it gives on the CPU (marker ``gpu``: ``make gpu-check`` runs
them, ``scripts/gpu_check.py``).

Each test runs a job on the device under test and again on the CPU, from the same seed (the noise
is drawn on the host, whatever the device), and compares: float64 tasks to 1e-12 relative, float32
torch models within the tolerance their rounding allows. The device is ``DPDL_TEST_DEVICE`` where
set (``cpu`` in the check's dry run, which exercises everything but the device), else ``cuda``
where torch sees a GPU; without either the tests are skipped: no test depends on a GPU.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional

import dpdl
from dpdl.experiments.train import TrainConfig, run_training
from dpdl.scale import SPARSE_MIN_AGENTS

pytestmark = pytest.mark.gpu

#: float32 models: a few steps of SGD from the same start, rounding apart on each device.
FLOAT32_TOLERANCE = 1e-4


@pytest.fixture
def device() -> str:
    chosen = os.environ.get("DPDL_TEST_DEVICE")
    if chosen is None and not torch.cuda.is_available():
        pytest.skip("needs a GPU (or DPDL_TEST_DEVICE=cpu, the GPU check's dry run)")
    return chosen or "cuda"


def _both(config: TrainConfig, device: str) -> tuple[np.ndarray, np.ndarray]:
    """The final models of ``config`` on ``device`` and on the CPU."""
    there = run_training(config, device=device).runs[0].models
    here = run_training(config, device="cpu").runs[0].models
    return there, here


def _close(there: np.ndarray, here: np.ndarray, rtol: float) -> None:
    scale = max(1.0, float(np.max(np.abs(here))))
    assert float(np.max(np.abs(there - here))) <= rtol * scale


@pytest.mark.parametrize(
    "config",
    [
        TrainConfig(task="logreg-a9a", graph="er", n=8, p=0.5, steps=40, mechanism="ldp", eps=5.0),
        TrainConfig(task="least-squares", graph="ring", n=8, steps=40, mechanism="decor", eps=5.0),
    ],
    ids=["logreg-a9a-ldp", "least-squares-decor"],
)
def test_a_linear_task_on_the_device_is_the_cpu_run_in_float64(config, device) -> None:
    there, here = _both(config, device)
    _close(there, here, 1e-12)


def test_a_torch_model_on_the_device_is_the_cpu_run_within_float32_rounding(device) -> None:
    config = TrainConfig(
        task="mnist-mlp", graph="ring", n=4, steps=5, mechanism="ldp", eps=5.0, batch_size=16
    )
    there, here = _both(config, device)
    _close(there, here, FLOAT32_TOLERANCE)


def test_sparse_mixing_on_the_device_is_the_cpu_run(device) -> None:
    """A ring of SPARSE_MIN_AGENTS agents gossips through a sparse W, on the device too."""
    config = TrainConfig(
        task="least-squares", graph="ring", n=SPARSE_MIN_AGENTS, steps=5, mechanism="ldp", eps=5.0
    )
    there, here = _both(config, device)
    _close(there, here, 1e-12)


def test_fit_trains_a_model_of_your_own_on_the_device(device) -> None:
    """``dpdl.fit`` of a small CNN of one's own (8x8 digits) on the device, against the CPU."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    inputs = (digits.data / 16.0).astype("float32").reshape(-1, 1, 8, 8)
    train, test = (inputs[:1500], digits.target[:1500]), (inputs[1500:], digits.target[1500:])

    def loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return functional.cross_entropy(outputs, targets, reduction="none")

    models = []
    for where in (device, "cpu"):
        torch.manual_seed(0)
        model = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
            nn.Flatten(), nn.Linear(8 * 8 * 8, 10),
        )  # fmt: skip
        result = dpdl.fit(
            model, loss, train=train, test=test, graph="ring", n=8, mechanism="ldp", eps=10.0,
            steps=10, lr=0.5, clip_level="example", batch_size=32, seed=0, device=where,
        )  # fmt: skip
        models.append(result.models)
    _close(models[0], models[1], FLOAT32_TOLERANCE)
