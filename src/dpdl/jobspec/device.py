"""Which torch device an engine computes on: `cpu`, `cuda` (or `cuda:K`) or `auto`.

The device changes where the arithmetic runs, not what a run draws: batches and noise come from the
same seeded host streams on every device (`dpdl.seeding`), so a run's numbers agree across
devices to floating-point rounding, and a device is not part of a job's identity (checkpoints and
sweep points do not record it).
"""

from __future__ import annotations

import torch

from dpdl.errors import ConfigError

__all__ = ["resolve_device"]


def resolve_device(name: str | torch.device) -> torch.device:
    """The torch device `name` names; `auto` is the first GPU when one is visible, else the CPU.

    Raises [`ConfigError`][dpdl.errors.ConfigError] for a name torch does not know, or a GPU that
    this machine does not have."""
    if isinstance(name, torch.device):
        device = name
    elif name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        try:
            device = torch.device(name)
        except RuntimeError as error:
            raise ConfigError(
                f"unknown device {name!r}: use cpu, cuda, cuda:K (K a GPU's index) or auto"
            ) from error
    if device.type == "cpu":
        return device
    if device.type != "cuda":
        raise ConfigError(f"device {name!r} is not supported: use cpu, cuda, cuda:K or auto")
    if not torch.cuda.is_available():
        raise ConfigError(f"device {name!r} asks for a GPU, but torch sees none on this machine")
    if device.index is not None and device.index >= torch.cuda.device_count():
        raise ConfigError(
            f"device {name!r}: this machine has {torch.cuda.device_count()} GPU(s), numbered from 0"
        )
    return device
