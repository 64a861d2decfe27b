"""Gradient inversion: Deep Leakage from Gradients (DLG; Zhu, Liu & Han, NeurIPS 2019).

An honest-but-curious neighbour receives agent j's message and knows the model and its parameters
(in DSGT's first round every agent holds the same `theta^0`, and `gamma_j^0` is j's gradient on
its batch: exactly under DSGT, plus i.i.d. noise under the DP baseline, plus the noise difference
under LPPA). It optimises a dummy example and a dummy soft label so that the gradient they induce
matches the message,

    min_{x', y'}  || grad_theta sum_b l(f(x'_b; theta), softmax(y'_b)) / B - message ||^2,

by L-BFGS, as DLG does and as LPPA's Section 6.2 attacks its baselines. The mean squared error
between `x'` and the true examples (after matching each true example to its closest
reconstruction) is LPPA's privacy measure (Table 2).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch.nn import functional

from dpdl.errors import ConfigError
from dpdl.tasks.torch_model import TorchModelTask

__all__ = ["Inversion", "invert_gradient"]


@dataclass(frozen=True)
class Inversion:
    """What DLG reconstructed from one message."""

    inputs: np.ndarray  # (B, ...) dummy examples after optimisation
    labels: np.ndarray  # (B,) argmax of the dummy labels
    mse: float  # mean squared error against the true examples
    gradient_distance: float  # the matching objective at the end, relative to ||message||^2

    def as_dict(self) -> dict[str, float | list[int]]:
        return {
            "mse": self.mse,
            "gradient_distance": self.gradient_distance,
            "labels": self.labels.tolist(),
        }


def invert_gradient(
    task: TorchModelTask,
    params: np.ndarray,
    message: np.ndarray,
    truth: np.ndarray,
    classes: int,
    iterations: int = 300,
    seed: int = 0,
) -> Inversion:
    """Reconstruct `truth.shape[0]` examples of `task` from `message`, a gradient (d,) of the
    model at `params` (d,) on them, possibly noisy; `truth` only scores the result."""
    if message.shape != params.shape or params.shape != (task.dim,):
        raise ConfigError(f"DLG needs parameters and a message of the model's dimension {task.dim}")
    if iterations < 1:
        raise ConfigError(f"DLG needs at least one L-BFGS iteration, got {iterations}")
    generator = torch.Generator().manual_seed(seed)
    flat = torch.tensor(params, dtype=torch.float32, requires_grad=True)
    target = torch.tensor(message, dtype=torch.float32)
    scale = float((target**2).sum()) or 1.0
    dummy = torch.randn(truth.shape, generator=generator).requires_grad_(True)
    label_logits = torch.randn((truth.shape[0], classes), generator=generator).requires_grad_(True)
    optimizer = torch.optim.LBFGS(
        [dummy, label_logits],
        lr=1.0,
        max_iter=iterations,
        history_size=100,
        line_search_fn="strong_wolfe",
    )

    def distance() -> torch.Tensor:
        outputs = task.outputs(flat, dummy)
        loss = (
            -(functional.softmax(label_logits, dim=-1) * functional.log_softmax(outputs, dim=-1))
            .sum(dim=-1)
            .mean()
        )
        (gradient,) = torch.autograd.grad(loss, flat, create_graph=True)
        return ((gradient - target) ** 2).sum() / scale

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        value = distance()
        value.backward()
        return value

    optimizer.step(closure)
    reconstructed = dummy.detach().numpy()
    # each true example against its closest reconstruction (the batch order is not identifiable)
    errors = (
        ((truth[:, None] - reconstructed[None]) ** 2)
        .reshape(len(truth), len(truth), -1)
        .mean(axis=2)
    )
    return Inversion(
        reconstructed,
        label_logits.detach().argmax(dim=-1).numpy(),
        float(errors.min(axis=1).mean()),
        float(distance().detach()),
    )
