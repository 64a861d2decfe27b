"""Which `torch.distributed` backend carries the agents' messages, and the device each agent then
computes on.

- `gloo`: CPU tensors over TCP, on any machine; every agent computes on the CPU.
- `nccl`: one GPU per agent, `cuda:LOCAL_RANK` of its machine (NCCL refuses two ranks on one
  GPU). The agent's gradients run on its GPU and its messages travel GPU to GPU through NCCL
  (NVLink, InfiniBand or sockets, whatever NCCL finds). The default process group is then
  `cpu:gloo,cuda:nccl`: torch sends a tensor through the backend of its device, so the key
  exchange and the checkpoint agreement (small CPU tensors) keep using gloo while the models use
  NCCL. Tags are still computed and checked on the host (the cipher library works on host bytes),
  so each round copies the outgoing message to the GPU and each incoming one back.

The backend changes where messages travel, not what they hold: a run's numbers agree between
backends to floating-point rounding, and the backend is not part of a run's identity.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

from dpdl.choices import BACKENDS
from dpdl.errors import ConfigError

__all__ = ["BACKENDS", "agent_device", "environment_int", "process_group_backend"]


def environment_int(name: str) -> int:
    """The integer environment variable `name` (set by torchrun or
    [`run_local`][dpdl.runtime.launch.run_local])."""
    text = os.environ[name]
    if not text.strip().isdigit():
        raise ConfigError(f"{name}={text!r}: expected an integer >= 0, as torchrun sets it")
    return int(text)


def _check(backend: str) -> None:
    if backend not in BACKENDS:
        raise ConfigError(f"unknown backend {backend!r}; known: {', '.join(BACKENDS)}")


def agent_device(backend: str) -> torch.device:
    """The device this agent computes and exchanges on: the CPU under gloo; under nccl, the GPU
    of its machine numbered by `LOCAL_RANK` (which torchrun sets, and
    [`run_local`][dpdl.runtime.launch.run_local] sets to the rank). Raises
    [`ConfigError`][dpdl.errors.ConfigError] when that GPU is not there."""
    _check(backend)
    if backend == "gloo":
        return torch.device("cpu")
    if not dist.is_nccl_available() or not torch.cuda.is_available():
        raise ConfigError(
            "--backend nccl runs each agent on its own GPU, but torch sees no GPU with NCCL on "
            "this machine: use --backend gloo"
        )
    if "LOCAL_RANK" not in os.environ:
        raise ConfigError(
            "--backend nccl: LOCAL_RANK is not set, so the agent cannot tell which GPU of this "
            "machine is its own: start it with torchrun, which sets it"
        )
    local_rank, count = environment_int("LOCAL_RANK"), torch.cuda.device_count()
    if local_rank >= count:
        raise ConfigError(
            f"--backend nccl runs one agent per GPU, but this machine has {count} GPU(s) and this "
            f"agent is its number {local_rank} (from 0): start at most {count} agents per machine "
            f"(torchrun --nproc-per-node {count}), or use --backend gloo"
        )
    return torch.device("cuda", local_rank)


def process_group_backend(backend: str) -> str:
    """The backend string of `torch.distributed.init_process_group` for `backend`."""
    _check(backend)
    return "gloo" if backend == "gloo" else "cpu:gloo,cuda:nccl"
