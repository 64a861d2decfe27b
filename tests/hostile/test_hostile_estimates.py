"""Commands sized before any work (issue 49, item 1): `run-local`'s agent processes, `factorize`'s
T x T matrices, `audit`'s trials x steps x agents, the metric records of `train` and `fit`, a
noise design's time, `reproduce NAME` from its sweep file and pools of worker processes. Each case
must be refused with an estimate (`about ...`) before anything is spawned, allocated or written:
the step that would start the work is replaced by one that fails the case (`STARTED`), so that a
command that goes ahead fails fast instead of running. Limits are injected (`DPDL_MEMORY_LIMIT`,
`DPDL_TIME_LIMIT`, the system's limits read by `dpdl.jobspec.costs`), so the cases do not depend
on this machine."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pytest
import torch
from hostile_helpers import assert_clear_error, refused_fast, tree
from torch import nn

import dpdl
from dpdl.cli import main
from dpdl.errors import ResourceError
from dpdl.graphs import mixing_matrix

pytestmark = pytest.mark.hostile

LIMIT = "4G"
MAX_TRACED = 64 * 2**20
MAX_SECONDS = 30.0
STARTED = "the work started before the job was sized"

#: Where each command's work starts: replaced by `_started` in every case.
WORK = [
    "dpdl.runtime.launch.spawn_agents",
    "dpdl.jobspec.job.build_task",
    "dpdl.experiments.factorize.utility_gram",
    "dpdl.experiments.audit.noise_report",
    "dpdl.experiments.noise.build_mechanism",
    "dpdl.cli.reproductions.executor_from",
    "dpdl.experiments.executors._pooled",
    "dpdl.experiments.fit.split_examples",
]


def _started(*args: Any, **kwargs: Any) -> None:
    raise AssertionError(STARTED)


RL = ["run-local", "--task", "quadratic", "--no-progress", "--workdir", "{out}/work"]
FZ = ["factorize", "--graph", "ring", "--n", "10", "--out", "{out}/fz"]
AU = ["audit", "--graph", "ring", "--n", "10", "--no-progress", "--out", "{out}/au"]
TR = ["train", "--task", "quadratic", "--graph", "ring", "--n", "4", "--no-progress"]
TR += ["--out", "{out}/run"]
NO = ["noise", "--graph", "ring"]
RE = ["reproduce", "--no-progress", "--out", "{out}/rep"]
NO_MEMORY_LIMIT = {"DPDL_MEMORY_LIMIT": "inf", "DPDL_TIME_LIMIT": "inf"}

#: name -> (arguments, environment, words the error line holds besides "about")
CASES: dict[str, tuple[list[str], dict[str, str], tuple[str, ...]]] = {
    "run-local-100000-agents": ([*RL, "--graph", "ring", "--n", "100000"], {}, ("agent",)),
    "run-local-20-agents-in-4G": ([*RL, "--graph", "ring", "--n", "20"], {}, ("agent processes",)),
    "run-local-torus-16": ([*RL, "--graph", "torus", "--n", "16"], {}, ("agent processes",)),
    "run-local-complete-11": ([*RL, "--graph", "complete", "--n", "11"], {}, ("agent processes",)),
    "run-local-star-50": ([*RL, "--graph", "star", "--n", "50"], {}, ("agent processes",)),
    "run-local-er-30": ([*RL, "--graph", "er", "--n", "30", "--p", "0.5"], {}, ("agent",)),
    "run-local-least-squares-jobs": (
        [*RL, "--graph", "ring", "--n", "8", "--task", "least-squares", "--dim", "3000"],
        {},
        ("agent processes",),
    ),
    "run-local-rounds-beyond-30m": (
        [*RL, "--graph", "ring", "--n", "4", "--steps", str(10**7)],
        {"DPDL_TIME_LIMIT": "30m"},
        ("agent processes", "steps"),
    ),
    "run-local-starts-beyond-5s": (
        [*RL, "--graph", "ring", "--n", "40", "--steps", "3"],
        {"DPDL_MEMORY_LIMIT": "inf", "DPDL_TIME_LIMIT": "5s"},
        ("agent processes",),
    ),
    "factorize-1e5-participations-and-batches": (
        [*FZ, "--participations", "100000", "--batches", "100000"],
        {},
        ("encoder optimisation", "--participations"),
    ),
    "factorize-T-30000": (
        [*FZ, "--participations", "300", "--batches", "100"],
        {},
        ("30,000",),
    ),
    "factorize-per-agent-5000": (
        [*FZ, "--n", "5000", "--per-agent"],
        {},
        ("every agent",),
    ),
    "factorize-100000-agents": (
        [*FZ, "--n", "100000", "--participations", "2", "--batches", "2"],
        {},
        ("dense mixing matrix",),
    ),
    "factorize-restart-T-1e5": (
        [*FZ, "--participations", "1000", "--batches", "100", "--restart", "1000"],
        {},
        ("encoders",),
    ),
    "factorize-beyond-1h": (
        [*FZ, "--participations", "40", "--batches", "100"],
        {"DPDL_MEMORY_LIMIT": "inf", "DPDL_TIME_LIMIT": "1h"},
        ("4,000 steps",),
    ),
    "factorize-torus-40000": (
        [*FZ, "--graph", "torus", "--n", "40000"],
        {},
        ("40,000",),
    ),
    "factorize-complete-30000": (
        [*FZ, "--graph", "complete", "--n", "30000"],
        {},
        ("30,000",),
    ),
    "factorize-star-T-1e6": (
        [*FZ, "--graph", "star", "--participations", "1000", "--batches", "1000"],
        {},
        ("1,000,000",),
    ),
    "audit-1e15-steps": ([*AU, "--steps", str(10**15)], {}, ("steps", "30 days")),
    "audit-1e13-trials": ([*AU, "--attack-trials", str(10**13)], {}, ("trials",)),
    "audit-100000-agents": ([*AU, "--n", "100000"], {}, ("100,000",)),
    "audit-ldp-1e9-trials": (
        [*AU, "--mechanisms", "ldp", "--attack-trials", str(10**9)],
        {},
        ("noise samples",),
    ),
    "audit-whisper-30000": (
        [*AU, "--mechanisms", "whisper", "--n", "30000"],
        {},
        ("whisper design",),
    ),
    "audit-complete-20000": ([*AU, "--graph", "complete", "--n", "20000"], {}, ("20,000",)),
    "audit-1e6-steps-beyond-1m": (
        [*AU, "--steps", str(10**6)],
        {"DPDL_TIME_LIMIT": "1m"},
        ("1,000,000 steps",),
    ),
    "audit-3000-agents": ([*AU, "--n", "3000"], {}, ("3,000",)),
    "audit-er-5000": ([*AU, "--graph", "er", "--n", "5000", "--p", "0.5"], {}, ("5,000",)),
    "train-1e9-records": (
        [*TR, "--steps", str(10**9), "--eval-every", "1"],
        {},
        ("recorded metrics",),
    ),
    "train-records-of-100-seeds": (
        [*TR, "--steps", str(10**7), "--eval-every", "1", "--seed", *map(str, range(100))],
        {},
        ("recorded metrics", "100 seed(s)"),
    ),
    "train-average-last-1e9": (
        [*TR, "--steps", str(10**9), "--eval-every", str(10**9), "--average-last", str(10**9)],
        {},
        ("recorded metrics",),
    ),
    "train-least-squares-records": (
        [*TR, "--task", "least-squares", "--steps", str(10**8), "--eval-every", "1"],
        {},
        ("recorded metrics",),
    ),
    "train-logreg-records": (
        [*TR, "--task", "logreg-a9a", "--steps", str(10**8), "--eval-every", "1"],
        {},
        ("recorded metrics",),
    ),
    "noise-whisper-900-beyond-1m": (
        [*NO, "--method", "whisper", "--n", "900"],
        {"DPDL_TIME_LIMIT": "1m"},
        ("whisper design", "limit of 1 min"),
    ),
    "noise-decor-5000-beyond-5s": (
        [*NO, "--method", "decor", "--n", "5000"],
        {"DPDL_TIME_LIMIT": "5s"},
        ("decor design",),
    ),
    "noise-zero-sum-800-beyond-10s": (
        [*NO, "--method", "zero-sum", "--n", "800"],
        {"DPDL_TIME_LIMIT": "10s"},
        ("zero-sum design",),
    ),
    "noise-lppa-700-beyond-5s": (
        [*NO, "--method", "lppa", "--n", "700"],
        {"DPDL_TIME_LIMIT": "5s"},
        ("lppa design",),
    ),
    "reproduce-whisper-quadratic-quick-beyond-10m": (
        [*RE, "whisper-quadratic", "--quick"],
        {"DPDL_TIME_LIMIT": "10m"},
        ("reproduce whisper-quadratic", "runs"),
    ),
    "reproduce-one-worker-beyond-30m": (
        [*RE, "whisper-quadratic", "--quick", "--jobs", "1"],
        {"DPDL_TIME_LIMIT": "30m"},
        ("1 workers",),
    ),
    "reproduce-corn-mnist-beyond-1h": (
        [*RE, "corn-mnist"],
        {"DPDL_TIME_LIMIT": "1h"},
        ("reproduce corn-mnist",),
    ),
    "reproduce-64-workers-in-4G": (
        [*RE, "whisper-quadratic", "--quick", "--jobs", "64"],
        {},
        ("64 worker",),
    ),
}


def _refused_fast(call: Any) -> Any:  # noqa: ANN401 (whatever the call returns)
    return refused_fast(call, MAX_TRACED, MAX_SECONDS)


@pytest.fixture
def no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every step that starts a command's work fails the case; the limits are injected."""
    for target in WORK:
        module, name = target.rsplit(".", 1)
        monkeypatch.setattr(importlib.import_module(module), name, _started)
    monkeypatch.setenv("DPDL_MEMORY_LIMIT", LIMIT)
    monkeypatch.delenv("DPDL_TIME_LIMIT", raising=False)


def _run_cli(
    args: list[str], environment: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[object, Path, Path]:
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    out, cwd = tmp_path / "out", tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    filled = [arg.format(out=out) for arg in args]

    def run() -> object:
        try:
            return main(filled)
        except SystemExit as stop:
            return stop.code

    return _refused_fast(run), out, cwd


@pytest.mark.usefixtures("no_work")
@pytest.mark.parametrize("name", CASES)
def test_a_command_is_sized_before_any_work(
    name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    args, environment, words = CASES[name]
    code, out, cwd = _run_cli(args, environment, tmp_path, monkeypatch)
    stderr = capsys.readouterr().err
    assert STARTED not in stderr, stderr
    assert_clear_error(code, stderr, "about", args)
    line = next(line for line in stderr.splitlines() if line.startswith("dpdl: error:"))
    for word in words:
        assert word in line, line
    assert tree(out) == [] and tree(cwd) == []


def _limits(monkeypatch: pytest.MonkeyPatch, **values: int) -> None:
    """The system's limits as `dpdl.jobspec.costs` reads them: `processes`, `files`, `ports`,
    `pid_max` (the others as they are)."""
    import resource

    from dpdl.jobspec import costs

    real_soft, real_read, real_ports = costs._soft_limit, costs._read_int, costs._port_range
    kinds = {resource.RLIMIT_NPROC: "processes", resource.RLIMIT_NOFILE: "files"}
    monkeypatch.setattr(
        costs, "_soft_limit", lambda kind: values.get(kinds.get(kind, ""), real_soft(kind))
    )
    monkeypatch.setattr(
        costs,
        "_read_int",
        lambda path, field=0: (
            values["pid_max"]
            if "pid_max" in path and "pid_max" in values
            else real_read(path, field)
        ),
    )
    monkeypatch.setattr(costs, "_port_range", lambda: values.get("ports", real_ports()))


SYSTEM_CASES = {
    "run-local-beyond-ulimit-u": ({"processes": 64}, "ulimit -u"),
    "run-local-beyond-ulimit-n": ({"files": 128}, "ulimit -n"),
    "run-local-beyond-ports": ({"ports": 50}, "ip_local_port_range"),
    "run-local-beyond-pid-max": ({"pid_max": 80}, "pid_max"),
}


@pytest.mark.usefixtures("no_work")
@pytest.mark.parametrize("name", SYSTEM_CASES)
def test_agents_beyond_the_system_limits_are_refused(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    values, word = SYSTEM_CASES[name]
    _limits(monkeypatch, **values)
    args = [*RL, "--graph", "ring", "--n", "100"]
    code, out, cwd = _run_cli(args, NO_MEMORY_LIMIT, tmp_path, monkeypatch)
    stderr = capsys.readouterr().err
    assert STARTED not in stderr, stderr
    assert_clear_error(code, stderr, word, args)
    assert "100 " in stderr and tree(out) == [] and tree(cwd) == []


def _ring_weights(n: int) -> np.ndarray:
    return np.asarray(mixing_matrix(nx.cycle_graph(n), "metropolis-hastings"))


def _model() -> nn.Module:
    return nn.Sequential(nn.Linear(10, 2))


def _loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(outputs, targets, reduction="none")


_DATA = (torch.randn(16, 10), torch.randint(0, 2, (16,)))


def _factorize(n: int, k: int, b: int, per_agent: bool = False) -> object:
    from dpdl.experiments.factorize import factorize

    return factorize(_ring_weights(n), k, b, 1.0, 1e-6, per_agent=per_agent)


def _audit(steps: int, trials: int) -> object:
    from dpdl.experiments.audit import run_audit

    graph = nx.cycle_graph(10)
    weights = _ring_weights(10)
    return run_audit(graph, weights, 1.0, 1e-5, steps, 1.0, attack_trials=trials, progress=False)


def _workers(count: int) -> object:
    from dpdl.experiments.executors import ExecutorOptions, LocalExecutor

    jobs = [{"point": i} for i in range(200)]
    return next(LocalExecutor(ExecutorOptions(workers=count)).map(dict, jobs))


def _agents(n: int) -> object:
    from dpdl.jobspec.config import TrainConfig
    from dpdl.runtime.launch import require_agents_fit

    return require_agents_fit(TrainConfig(task="quadratic", graph="ring", n=n).resolved(), n)


API_CASES = {
    "factorize-1e4-by-1e4": (lambda: _factorize(10, 10**4, 10**4), "encoder optimisation"),
    "factorize-per-agent-200": (lambda: _factorize(200, 100, 100, True), "every agent"),
    "run-audit-1e15-steps": (lambda: _audit(10**15, 1000), "30 days"),
    "run-audit-1e13-trials": (lambda: _audit(100, 10**13), "noise samples"),
    "fit-1e9-records": (
        lambda: dpdl.fit(
            _model(), _loss, _DATA, _DATA, "ring", n=4, mechanism="none", steps=10**9, eval_every=1
        ),
        "recorded metrics",
    ),
    "executor-64-workers": (lambda: _workers(64), "worker processes"),
    "require-agents-fit-1000": (lambda: _agents(1000), "agent processes"),
}


@pytest.mark.usefixtures("no_work")
@pytest.mark.parametrize("name", API_CASES)
def test_an_api_call_is_sized_before_any_work(name: str) -> None:
    call, word = API_CASES[name]
    with pytest.raises(ResourceError, match=r"about") as caught:
        _refused_fast(call)
    assert word in str(caught.value)
