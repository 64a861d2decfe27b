"""The estimates of `dpdl.jobspec.costs`: they grow with the sizes that cost, and the commands'
ordinary sizes (the defaults, the test suite's) stay far inside the limits."""

from __future__ import annotations

import pytest

from dpdl.errors import ResourceError
from dpdl.jobspec.costs import (
    AGENT_PROCESS_BYTES,
    agents_estimate,
    audit_estimate,
    factorize_estimate,
    require_processes_fit,
)
from dpdl.jobspec.resources import Estimate, JobSizes, TaskShape, estimate

MECHANISMS = ["none", "ldp", "cdp", "decor", "whisper", "zero-sum", "lppa"]


def test_agents_cost_a_process_and_a_job_each() -> None:
    job = Estimate({"job": 1e6}, 10.0, 100)
    one, many = agents_estimate(1, job), agents_estimate(100, job)
    assert many.memory == pytest.approx(100 * (AGENT_PROCESS_BYTES + 1e6) + 1e6)
    assert one.memory < many.memory / 50
    assert many.seconds > one.seconds > job.seconds
    assert many.steps == 100


def test_factorize_memory_grows_as_the_square_of_the_steps() -> None:
    small = factorize_estimate(20, 20, 19)
    large = factorize_estimate(20, 40, 19)
    assert 3.5 < large.memory / small.memory < 4.5
    assert large.seconds > 8 * small.seconds * 0.9  # T^3 per iteration, more iterations
    per_agent = factorize_estimate(20, 20, 19, per_agent=True)
    assert per_agent.memory > small.memory and per_agent.seconds > 10 * small.seconds
    general = factorize_estimate(200, 20, 19, symmetric=False)
    assert general.memory > factorize_estimate(200, 20, 19).memory


def test_ordinary_commands_fit_easily() -> None:
    assert factorize_estimate(20, 20, 19).memory < 2**30  # the defaults, a ring of 20
    assert factorize_estimate(20, 20, 19).seconds < 600
    audit = audit_estimate(10, 10, MECHANISMS, [1, 10, 45, 1], 100, 20_000)
    assert audit.memory < 2**30 and audit.seconds < 3600
    job = estimate(JobSizes(4, 4, "ldp", True, TaskShape(2, "quadratic"), steps=100))
    assert agents_estimate(4, job).memory < 2 * 2**30


def test_the_audit_grows_with_steps_and_trials() -> None:
    base = audit_estimate(10, 10, MECHANISMS, [1, 10], 100, 1000)
    assert audit_estimate(10, 10, MECHANISMS, [1, 10], 10_000, 1000).seconds > 50 * (
        base.seconds - audit_estimate(10, 10, MECHANISMS, [1, 10], 100, None).seconds
    )
    assert audit_estimate(10, 10, MECHANISMS, [1, 10], 100, 10**6).memory > 100 * base.memory / 10
    # a threat with too many coalitions to search is not attacked
    assert audit_estimate(10, 10, ["ldp"], [10**9], 100, 1000).seconds < 100


def test_processes_beyond_the_system_are_refused() -> None:
    require_processes_fit(4, "four agents", connected=True)
    with pytest.raises(ResourceError, match=r"processes|open files|ports"):
        require_processes_fit(10**7, "ten million agents", connected=True)
