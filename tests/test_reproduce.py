"""The reproduction framework: cached, resumable grids, and the quick reproductions end to end."""

from __future__ import annotations

import json

import pytest

from dpdl.experiments.reproduce import REPRODUCTIONS, reproduce
from dpdl.experiments.reproduce.runner import job_key, run_jobs


def _square(job: dict) -> dict:
    return {"value": job["x"] ** 2}


def test_run_jobs_caches_results_and_resumes(tmp_path) -> None:
    jobs = [{"x": x} for x in range(5)]
    first = run_jobs(jobs[:3], _square, tmp_path, workers=1, progress=False)
    assert [row["value"] for row in first] == [0, 1, 4]
    # A cached result is reused as is: tamper with one and see it come back unchanged.
    path = tmp_path / f"{job_key(jobs[1])}.json"
    path.write_text(json.dumps({"x": 1, "value": -1}))
    second = run_jobs(jobs, _square, tmp_path, workers=2, progress=False)
    assert [row["value"] for row in second] == [0, -1, 4, 9, 16]
    assert len(list(tmp_path.glob("*.json"))) == 5


@pytest.mark.parametrize(("name", "figure", "claims"), [("whisper-variance", "trace_WRW.png", 5), ("whisper-seeds", "objective_vs_seeds.png", 3)])
def test_quick_reproductions_write_figures_and_confirm_the_claims(tmp_path, name: str, figure: str, claims: int) -> None:
    assert name in REPRODUCTIONS
    report = reproduce(name, tmp_path, quick=True, workers=2, progress=False)
    text = report.read_text()
    assert (tmp_path / figure).stat().st_size > 10_000
    assert (tmp_path / "runs.csv").read_text().count("\n") > 10
    assert "| **no** |" not in text, text  # every claim holds
    assert text.count("| yes |") == claims
