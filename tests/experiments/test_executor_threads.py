"""``--threads N`` of ``dpdl sweep`` and ``dpdl reproduce``: every job of an executor computes
with N threads in torch and the BLAS libraries (one by default), and a bad count is refused before
any job runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dpdl.errors import ConfigError
from dpdl.experiments.executors import ExecutorOptions, LocalExecutor

ROOT = Path(__file__).resolve().parents[2]


def _threads(job: dict) -> dict:
    """The threads the job computes with, as a job function of a grid enters them
    (:func:`dpdl.threads.job_threads`): torch's, and every BLAS library's."""
    import torch
    from threadpoolctl import threadpool_info

    from dpdl.threads import job_threads

    with job_threads():
        blas = [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]
        return {"torch": torch.get_num_threads(), "blas": blas}


@pytest.mark.parametrize("threads", [1, 2])
def test_each_job_of_the_local_executor_computes_with_its_threads(threads: int) -> None:
    options = ExecutorOptions(workers=1, threads=threads)
    (outcome,) = LocalExecutor(options).map(_threads, [{"x": 0}])
    assert outcome.error is None
    assert outcome.result["torch"] == threads
    assert outcome.result["blas"] and set(outcome.result["blas"]) == {threads}


def test_one_thread_by_default() -> None:
    (outcome,) = LocalExecutor(ExecutorOptions(workers=1)).map(_threads, [{"x": 0}])
    assert outcome.result["torch"] == 1 and set(outcome.result["blas"]) == {1}


@pytest.mark.parametrize("bad", [0, -2, 1.5, True])
def test_a_bad_thread_count_is_refused(bad: object) -> None:
    with pytest.raises(ConfigError, match="threads must be a whole number >= 1"):
        ExecutorOptions(threads=bad)


@pytest.mark.parametrize(
    "command", [["sweep", "examples/sweeps/a9a-eps.toml"], ["reproduce", "whisper-variance"]]
)
def test_the_commands_refuse_a_bad_count_before_any_work(tmp_path, command: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "dpdl.cli", *command, "--threads", "0", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 2 and "--threads" in done.stderr
    assert not list(tmp_path.iterdir())  # nothing written
