"""The thread count a run computes with: allowed cores, the cgroup quota, idle cores."""

from __future__ import annotations

import os

import pytest
import torch
from threadpoolctl import threadpool_info, threadpool_limits

from dpdl import threads
from dpdl.errors import ConfigError


@pytest.mark.parametrize(
    ("text", "cores"),
    [("max 100000\n", None), ("150000 100000\n", 2), ("50000 100000", 1), ("400000 100000", 4),
     ("garbage", None), ("", None)],
)  # fmt: skip
def test_the_cgroup_quota_counts_whole_cores_rounded_up(tmp_path, text, cores) -> None:
    path = tmp_path / "cpu.max"
    path.write_text(text)
    assert threads._quota_cores(path) == cores
    assert threads._quota_cores(tmp_path / "missing") is None


def test_allowed_cores_are_the_affinity_capped_by_the_quota(monkeypatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4, 5})
    monkeypatch.setattr(threads, "_quota_cores", lambda: None)
    assert threads.allowed_cores() == 6
    monkeypatch.setattr(threads, "_quota_cores", lambda: 2)
    assert threads.allowed_cores() == 2


def test_default_threads_leave_the_cores_other_work_keeps_busy(monkeypatch) -> None:
    monkeypatch.setattr(threads, "allowed_cores", lambda: 8)
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    monkeypatch.setattr(os, "getloadavg", lambda: (3.7, 0.0, 0.0))
    assert threads.default_threads() == 8  # 13 idle cores, 8 allowed
    monkeypatch.setattr(os, "getloadavg", lambda: (11.2, 0.0, 0.0))
    assert threads.default_threads() == 5  # 16 - 11 idle
    monkeypatch.setattr(os, "getloadavg", lambda: (40.0, 0.0, 0.0))
    assert threads.default_threads() == 1  # a loaded machine: one thread, never zero


@pytest.mark.parametrize(
    ("value", "count"), [(None, None), ("", None), ("3", 3), (" 2 ", 2), ("4,2", 4)]
)
def test_omp_num_threads_sets_the_default_count(monkeypatch, value, count) -> None:
    """A user's OMP_NUM_THREADS is the default (its first level where it lists several); unset,
    the idle cores are."""
    monkeypatch.setattr(threads, "default_threads", lambda: 7)
    if value is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", value)
    assert threads.env_threads() == count
    with threads.compute_threads(None) as used:
        assert used == (count or 7) == torch.get_num_threads()
    with threads.compute_threads(1) as used:  # a count given wins over the variable
        assert used == 1


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5"])
def test_a_bad_omp_num_threads_is_one_clear_error(monkeypatch, value) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", value)
    with (
        pytest.raises(ConfigError, match="OMP_NUM_THREADS must be a whole number >= 1"),
        threads.compute_threads(None),
    ):
        pass


def test_compute_threads_sets_torch_and_blas_and_restores_them() -> None:
    before = torch.get_num_threads()
    with threads.compute_threads(1) as count:
        assert count == 1 and torch.get_num_threads() == 1
        assert all(pool["num_threads"] == 1 for pool in threadpool_info())
    assert torch.get_num_threads() == before


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "2"])
def test_a_thread_count_that_is_not_a_whole_number_is_refused(bad) -> None:
    with pytest.raises(ConfigError, match="threads must be a whole number >= 1"):
        threads.require_threads(bad)
    with (
        pytest.raises(ConfigError, match="threads must be a whole number >= 1"),
        threads.compute_threads(bad),
    ):
        pass


def test_a_job_computes_on_its_executors_threads_and_on_one_alone() -> None:
    """A job function entering job_threads() computes on one thread when called directly, and on
    the count its executor set when run inside one; both are restored after."""
    before = torch.get_num_threads()
    with threads.job_threads() as alone:
        assert alone == 1 == torch.get_num_threads()
    # a BLAS library loaded after something set OMP_NUM_THREADS=1 (Ray does) cannot go above one
    # thread: inside the job each library runs on what a limit of 2 gives it in this process
    with threadpool_limits(limits=2):
        reachable = _blas_threads()
    with threadpool_limits(limits=1):
        # the executor's wrapper, then the job's own function
        with threads.job_threads(2), threads.job_threads() as inside:
            assert inside == 2 == torch.get_num_threads()
            assert _blas_threads() == reachable
        assert set(_blas_threads()) == {1}
    assert torch.get_num_threads() == before and threads._job_threads == 1
    with pytest.raises(ConfigError, match="threads must be a whole number"), threads.job_threads(0):
        pass


def _blas_threads() -> list[int]:
    return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
