"""The runtime's backends: gloo on any machine, nccl with one GPU per agent (``--backend``).

Without GPUs (CI) only the refusals run: nccl is refused before any agent starts, with the reason.
With two GPUs, agents on nccl reach the models of the simulation, as agents on gloo do."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from dpdl.cli import main
from dpdl.errors import ConfigError
from dpdl.experiments.train import TrainConfig, run_training
from dpdl.runtime import AgentOptions, run_local
from dpdl.runtime.backend import BACKENDS, agent_device, process_group_backend

KEY_SEED = 11


def _config() -> TrainConfig:
    return TrainConfig(
        task="logreg-a9a",
        graph="complete",
        n=2,
        mechanism="decor",
        eps=5.0,
        steps=50,
        eval_every=50,
        key_seed=KEY_SEED,
    )


def test_gloo_computes_on_the_cpu_in_a_gloo_group() -> None:
    assert agent_device("gloo") == torch.device("cpu")
    assert process_group_backend("gloo") == "gloo"


def test_nccl_sends_cuda_tensors_through_nccl_and_cpu_tensors_through_gloo() -> None:
    assert process_group_backend("nccl") == "cpu:gloo,cuda:nccl"
    assert set(BACKENDS) == {"gloo", "nccl"}


def test_an_unknown_backend_is_refused_by_name() -> None:
    with pytest.raises(ConfigError, match="unknown backend 'mpi'"):
        agent_device("mpi")
    with pytest.raises(ConfigError, match="unknown backend 'mpi'"):
        process_group_backend("mpi")


@pytest.mark.skipif(torch.cuda.is_available(), reason="the machine has a GPU")
def test_nccl_without_a_gpu_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCAL_RANK", "0")
    with pytest.raises(ConfigError, match="--backend nccl runs each agent on its own GPU"):
        agent_device("nccl")
    with pytest.raises(ConfigError, match=r"2 agents, and this machine has 0 GPU\(s\)"):
        run_local(_config(), 0, AgentOptions(tmp_path, backend="nccl"))
    assert not any(tmp_path.iterdir()), "no agent may start"


def test_nccl_takes_the_gpu_of_its_local_rank_and_refuses_one_too_many(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.distributed, "is_nccl_available", lambda: True)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    with pytest.raises(ConfigError, match="LOCAL_RANK is not set"):
        agent_device("nccl")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert agent_device("nccl") == torch.device("cuda", 1)
    monkeypatch.setenv("LOCAL_RANK", "2")
    with pytest.raises(ConfigError, match=r"2 GPU\(s\) and this agent is its number 2"):
        agent_device("nccl")
    monkeypatch.setenv("LOCAL_RANK", "one")
    with pytest.raises(ConfigError, match="LOCAL_RANK='one'"):
        agent_device("nccl")


def test_the_command_line_offers_the_backends_and_refuses_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["run-local", "--task", "least-squares", "--n", "2", "--workdir", str(tmp_path),
              "--backend", "mpi"])  # fmt: skip
    assert exit_.value.code == 2
    assert "invalid choice: 'mpi'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["run-agent", "--help"])
    assert "--backend {gloo,nccl}" in capsys.readouterr().out


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_agents_on_nccl_reach_the_models_of_the_simulation(tmp_path: Path) -> None:
    config = _config()
    simulated = run_training(config).runs[0]
    outcome = run_local(config, 0, AgentOptions(tmp_path, key_seed=KEY_SEED, backend="nccl"))
    assert outcome.errors == {}
    assert outcome.models is not None
    np.testing.assert_allclose(outcome.models, simulated.models, rtol=1e-9, atol=1e-11)
