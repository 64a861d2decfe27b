"""The reproductions' grids run on either executor of dpdl's run cache with the same results."""

from __future__ import annotations

import pytest

from dpdl.experiments.cache import RUN_SECONDS, run_jobs
from dpdl.experiments.executors import ExecutorOptions, RayExecutor
from dpdl_reproductions import whisper_variance


@pytest.fixture(scope="module")
def local_ray():
    """A Ray on this machine, started by the test and shut down after (the executor leaves a Ray it
    did not start running)."""
    ray = pytest.importorskip("ray")
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING")
    yield ray
    ray.shutdown()


def test_a_reproduction_runs_its_jobs_on_ray_with_the_same_results(tmp_path, local_ray) -> None:
    jobs = whisper_variance.jobs(True)[:4]
    local = run_jobs(jobs, whisper_variance.run_job, tmp_path / "local", 2, progress=False)
    with RayExecutor(ExecutorOptions()) as executor:
        on_ray = run_jobs(
            jobs, whisper_variance.run_job, tmp_path / "ray", progress=False, executor=executor
        )

    def results(rows: list[dict]) -> list[dict]:  # without the seconds each run took
        return [{key: value for key, value in row.items() if key != RUN_SECONDS} for row in rows]

    assert results(on_ray) == results(local) and all(RUN_SECONDS in row for row in on_ray)
