"""Jobs that cannot fit: sizes far beyond memory and absurd step counts. Each must be refused
before anything large is allocated (traced allocations stay under :data:`MAX_TRACED` and the
refusal comes within :data:`MAX_SECONDS`), as one ``dpdl: error:`` line (or a
:class:`~dpdl.errors.ResourceError`) naming the estimate and the limit, with nothing written. The
memory limit is injected (``DPDL_MEMORY_LIMIT``), so the cases do not depend on this machine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from hostile_helpers import assert_clear_error, refused_fast, tree
from torch import nn

import dpdl
from dpdl.accounting import AgentLevel
from dpdl.cli import main
from dpdl.errors import ConfigError, ResourceError
from dpdl.jobspec.config import TrainConfig
from dpdl.jobspec.job import build_job
from dpdl.settings import TaskOptions

pytestmark = pytest.mark.hostile

#: The memory the cases run under, and the bounds a refusal must stay within.
LIMIT = "4G"
MAX_TRACED = 64 * 2**20
MAX_SECONDS = 20.0

TRAIN = ["train", "--no-progress", "--out", "{out}/run", "--task", "quadratic", "--steps", "10"]
# name -> (arguments, words the error line must contain besides the limit)
CASES: dict[str, tuple[list[str], tuple[str, ...]]] = {
    "train-huge-n-ring": ([*TRAIN, "--graph", "ring", "--n", "1000000000"], ("networkx graph",)),
    "train-huge-n-complete": ([*TRAIN, "--graph", "complete", "--n", "100000"], ("edges",)),
    "train-huge-n-er": ([*TRAIN, "--graph", "er", "--n", "300000", "--p", "0.5"], ("memory",)),
    "train-huge-d": (
        [*TRAIN, "--task", "least-squares", "--dim", "1000000", "--graph", "ring", "--n", "4"],
        ("curvatures",),
    ),
    "train-huge-d-logreg-state": (
        [*TRAIN, "--task", "least-squares", "--dim", "30000", "--graph", "ring", "--n", "100"],
        ("curvatures",),
    ),
    "train-dense-whisper": (
        [*TRAIN, "--graph", "ring", "--n", "30000", "--mechanism", "whisper"],
        ("whisper design",),
    ),
    "train-dense-decor": (
        [*TRAIN, "--graph", "ring", "--n", "40000", "--mechanism", "decor"],
        ("decor design",),
    ),
    "train-dense-w-below-sparse": (
        [*TRAIN, "--task", "least-squares", "--dim", "5000", "--graph", "ring", "--n", "999"],
        ("memory",),
    ),
    "train-many-seeds-huge-state": (
        [*TRAIN, "--task", "least-squares", "--dim", "20000", "--graph", "ring", "--n", "20"],
        ("memory",),
    ),
    "train-huge-steps": (
        [*TRAIN, "--graph", "ring", "--n", "4", "--steps", str(10**26)],
        ("steps",),
    ),
    "train-steps-beyond-30-days": (
        [*TRAIN, "--graph", "ring", "--n", "4", "--steps", str(10**11), "--eval-every", str(10**9)],
        ("30 days",),
    ),
    "train-huge-steps-a9a": (
        [*TRAIN, "--task", "logreg-a9a", "--graph", "ring", "--n", "4", "--steps", str(10**12)],
        ("steps",),
    ),
    "run-local-huge-n": (
        [
            "run-local",
            "--graph",
            "ring",
            "--n",
            "1000000000",
            "--task",
            "quadratic",
            "--no-progress",
            "--workdir",
            "{out}/work",
        ],
        ("networkx graph",),
    ),
    "run-local-huge-steps": (
        [
            "run-local",
            "--graph",
            "ring",
            "--n",
            "3",
            "--task",
            "quadratic",
            "--steps",
            str(10**20),
            "--no-progress",
            "--workdir",
            "{out}/work",
        ],
        ("steps",),
    ),
    "noise-whisper-dense": (
        ["noise", "--method", "whisper", "--graph", "ring", "--n", "100000"],
        ("whisper design",),
    ),
    "noise-complete-huge": (
        ["noise", "--method", "ldp", "--graph", "complete", "--n", "1000000"],
        ("networkx graph",),
    ),
    "noise-er-huge": (
        ["noise", "--method", "decor", "--graph", "er", "--n", "200000", "--p", "0.3"],
        ("memory",),
    ),
}


def _refused_fast(call: Any) -> Any:  # noqa: ANN401 (whatever the call returns)
    return refused_fast(call, MAX_TRACED, MAX_SECONDS)


@pytest.mark.parametrize("name", CASES)
def test_a_job_that_cannot_fit_is_refused_before_allocating(
    name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("DPDL_MEMORY_LIMIT", LIMIT)
    monkeypatch.delenv("DPDL_TIME_LIMIT", raising=False)
    out, cwd = tmp_path / "out", tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    args, words = CASES[name]
    filled = [arg.format(out=out) for arg in args]
    if "seeds" in name:
        filled += ["--seed", *map(str, range(50))]

    def run() -> object:
        try:
            return main(filled)
        except SystemExit as stop:
            return stop.code

    code = _refused_fast(run)
    stderr = capsys.readouterr().err
    assert_clear_error(code, stderr, "about", filled)
    line = next(line for line in stderr.splitlines() if line.startswith("dpdl: error:"))
    limit_named = "4.0 GiB of DPDL_MEMORY_LIMIT" in line or "limit of 30 days" in line
    assert limit_named, line
    for word in words:
        assert word in line, line
    assert tree(out) == [] and tree(cwd) == []


def test_the_time_limit_can_be_moved(monkeypatch: pytest.MonkeyPatch) -> None:
    config = TrainConfig(
        task="quadratic", graph="ring", n=4, steps=10**11, eval_every=10**9
    ).resolved()
    with pytest.raises(ResourceError, match=r"more than the limit of 30 days"):
        _refused_fast(lambda: build_job(config, 0))
    monkeypatch.setenv("DPDL_TIME_LIMIT", "10s")
    with pytest.raises(ResourceError, match=r"limit of 10 s; use fewer steps"):
        build_job(TrainConfig(task="quadratic", graph="ring", n=4, steps=10**6).resolved(), 0)
    monkeypatch.setenv("DPDL_TIME_LIMIT", "inf")
    config = TrainConfig(task="quadratic", graph="ring", n=4, steps=10**14, eval_every=10**14)
    assert build_job(config.resolved(), 0)  # its 3 records fit


@pytest.mark.parametrize("variable", ["DPDL_MEMORY_LIMIT", "DPDL_TIME_LIMIT"])
@pytest.mark.parametrize("value", ["lots", "-1", "0", "nan"])
def test_a_bad_limit_is_named(variable: str, value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError, match=variable):
        build_job(TrainConfig(task="quadratic", graph="ring", n=4, steps=3).resolved(), 0)


def _model() -> nn.Module:
    return nn.Sequential(nn.Linear(100, 100), nn.ReLU(), nn.Linear(100, 2))


def _loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(outputs, targets, reduction="none")


API_CASES = {
    "fit-huge-graph": lambda: dpdl.fit(
        _model(), _loss, _DATA, _DATA, "ring", n=10**9, mechanism="none", steps=3
    ),
    "fit-per-example-gradients": lambda: dpdl.fit(
        _model(),
        _loss,
        _DATA,
        _DATA,
        "ring",
        n=2000,
        eps=1.0,
        steps=3,
        clip_level="example",
        batch_size=100_000,
    ),
    "fit-huge-steps": lambda: dpdl.fit(
        _model(), _loss, _DATA, _DATA, "ring", n=4, mechanism="none", steps=10**15
    ),
    "design-noise-dense": lambda: dpdl.design_noise(
        "ring", "whisper", 1.0, 1e-5, 10, AgentLevel(1.0), n=100_000
    ),
    "design-noise-complete": lambda: dpdl.design_noise(
        "complete", "ldp", 1.0, 1e-5, 10, AgentLevel(1.0), n=10**6
    ),
    "build-job-huge-d": lambda: build_job(
        TrainConfig(
            task="least-squares", graph="ring", n=4, task_options=TaskOptions(dim=10**6)
        ).resolved(),
        0,
    ),
}
_DATA = (torch.randn(8, 100), torch.randint(0, 2, (8,)))


@pytest.mark.parametrize("name", API_CASES)
def test_an_api_call_that_cannot_fit_is_refused(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DPDL_MEMORY_LIMIT", LIMIT)
    with pytest.raises(ResourceError, match=r"about .* (4\.0 GiB of DPDL_MEMORY_LIMIT|30 days)"):
        _refused_fast(API_CASES[name])
