"""How a task's flat parameter vector splits into named tensors.

The engine holds every agent's parameters as one row of an `(n, d)` array. A saved model
([`dpdl.experiments.saved_models`][dpdl.experiments.saved_models]) is a state dict instead: names
mapped to tensors. A torch model's names and shapes are its module's (`"0.weight"`, `"0.bias"`,
in the order of `named_parameters`, which is the order of the flat vector); a task without a torch
module names its vector itself (logistic regression: `"weight"`; the quadratics: `"x"`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from dpdl.errors import ConfigError

__all__ = ["ParameterLayout"]


@dataclass(frozen=True)
class ParameterLayout:
    """The named tensors of a flat parameter vector, in its order.

    `module`: whether the names are a torch module's parameter names (the tensors form its state
    dict, parameters only: buffers are not trained by D-SGD) or names the task defines for a vector
    that no torch module holds. `input_shape`: the shape of one example's input to the module
    (None for a task without a module)."""

    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    module: bool
    input_shape: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if len(self.names) != len(self.shapes) or len(set(self.names)) != len(self.names):
            raise ConfigError("a parameter layout needs one shape per name and distinct names")

    @classmethod
    def of_module(cls, module: torch.nn.Module, input_shape: tuple[int, ...]) -> ParameterLayout:
        """The layout of `module`'s parameters (`named_parameters` order)."""
        named = list(module.named_parameters())
        return cls(
            tuple(name for name, _ in named),
            tuple(tuple(p.shape) for _, p in named),
            module=True,
            input_shape=tuple(input_shape),
        )

    @property
    def dim(self) -> int:
        """Length of the flat vector."""
        return sum(math.prod(shape) for shape in self.shapes)

    def unflatten(self, flat: np.ndarray | torch.Tensor) -> dict[str, torch.Tensor]:
        """The state dict of a flat vector `(d,)`: one contiguous tensor per name (a copy)."""
        vector = torch.as_tensor(np.asarray(flat) if not isinstance(flat, torch.Tensor) else flat)
        if vector.shape != (self.dim,):
            raise ConfigError(
                f"expected a vector of {self.dim} parameters, got {tuple(vector.shape)}"
            )
        sizes = [math.prod(shape) for shape in self.shapes]
        return {
            name: part.reshape(shape).clone()
            for name, part, shape in zip(
                self.names, torch.split(vector, sizes), self.shapes, strict=True
            )
        }

    def flatten(self, state: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """The flat vector `(d,)` of a state dict with exactly this layout's names and shapes."""
        self.require_matches({name: tuple(t.shape) for name, t in state.items()}, "the state dict")
        return torch.cat([state[name].reshape(-1) for name in self.names])

    def require_matches(self, shapes: Mapping[str, tuple[int, ...]], what: str) -> None:
        """Raise [`ConfigError`][dpdl.errors.ConfigError] unless `shapes` (name -> shape) has
        exactly this layout's names and shapes; the message names `what` and every difference."""
        problems = [f"no parameter {name}" for name in self.names if name not in shapes]
        problems += [f"parameter {name} is not saved" for name in shapes if name not in self.names]
        if problems:
            raise ConfigError(f"{what} does not fit the saved parameters: {'; '.join(problems)}")
        for name, shape in zip(self.names, self.shapes, strict=True):
            if tuple(shapes[name]) != shape:
                raise ConfigError(
                    f"{what}: parameter {name} has shape {tuple(shapes[name])}, the saved one "
                    f"{shape}"
                )

    def as_dict(self, dtype: str) -> dict[str, Any]:
        """Plain data for a manifest: the kind of names, the input shape and every tensor's name,
        shape and `dtype`."""
        return {
            "kind": "torch-module" if self.module else "task-vector",
            "input_shape": None if self.input_shape is None else list(self.input_shape),
            "tensors": [
                {"name": name, "shape": list(shape), "dtype": dtype}
                for name, shape in zip(self.names, self.shapes, strict=True)
            ],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ParameterLayout:
        """The layout [`as_dict`][dpdl.tasks.layout.ParameterLayout.as_dict] wrote; a
        [`ConfigError`][dpdl.errors.ConfigError] names what is malformed."""
        try:
            kind, tensors, inputs = data["kind"], data["tensors"], data["input_shape"]
            if kind not in ("torch-module", "task-vector") or not isinstance(tensors, list):
                raise TypeError
            names = tuple(str(t["name"]) for t in tensors)
            shapes = tuple(_shape(t["shape"]) for t in tensors)
            input_shape = None if inputs is None else _shape(inputs)
        except (KeyError, TypeError, ValueError):
            raise ConfigError(
                "the parameters' description is malformed: expected kind (torch-module or "
                "task-vector), input_shape and tensors (each name, shape, dtype)"
            ) from None
        return cls(names, shapes, module=kind == "torch-module", input_shape=input_shape)


def _shape(value: Any) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(
        isinstance(size, int) and not isinstance(size, bool) and size >= 0 for size in value
    ):
        raise ValueError(value)
    return tuple(value)
