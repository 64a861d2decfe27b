"""The committed runs are what this code computes: a few of each reproduction's runs that cost
seconds, run again, give their committed row's every number.

A change to how noise is drawn (the same distribution, other numbers), to a calibration's last
digits or to an engine leaves a reproduction's committed ``runs.csv`` describing another program;
its report would then no longer be what ``dpdl reproduce NAME`` gives. Each case takes the first
job of one method (and task, and protocol) in the grid order of the reproduction's first stage,
finds its committed row and runs it again.

The draws of correlated noise depend on the BLAS kernels where its covariance has repeated
eigenvalues (:data:`COMMITTED_KERNEL`): on other kernels those cases check the design's fields
and are skipped for the rest, with the reason.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dpdl.experiments.reproduce import REPRODUCTIONS
from dpdl.experiments.results import read_rows

ROOT = Path(__file__).resolve().parents[1]

#: (reproduction, what the job holds) of each case: one job per method on the tasks whose runs take
#: a second or two.
CASES: list[tuple[str, dict[str, Any]]] = [
    *[
        ("decor-fig1", {"task": "least-squares", "method": method, "protocol": protocol})
        for method in ("ldp", "decor", "cdp")
        for protocol in (None, "authors")
    ],
    *[("decor-fig1", {"task": "logreg-a9a", "method": method}) for method in ("ldp", "decor")],
    *[
        ("whisper-logreg", {"method": method, "protocol": protocol})
        for method in ("ldp", "decor", "whisper")
        for protocol in (None, "authors")
    ],
    *[("whisper-quadratic", {"method": method}) for method in ("ldp", "decor", "whisper", "none")],
    *[
        ("horizon", {"task": task, "method": method})
        for task in ("least-squares", "quadratic")
        for method in ("whisper", "decor")
    ],
    ("whisper-variance", {}),
    ("decor-search", {}),
]

#: Fields of a row that are costs, not results.
COSTS = {"run_seconds", "seconds"}
#: Fields that the noise's design gives, not its draws: the same on every machine.
DESIGN = {"epsilon", "exact_epsilon_of_calibration", "trace_WRW", "sigma"}
#: The OpenBLAS kernels the committed rows were drawn with (``OPENBLAS_CORETYPE`` on the machines
#: that ran them). Correlated noise is drawn as ``V sqrt(diag w) z`` from an eigendecomposition
#: ``R = V diag(w) V^T``; where R has repeated eigenvalues (DECOR on a ring or torus) another
#: kernel's rounding turns V within their eigenspaces, so the draws, not their distribution,
#: differ.
COMMITTED_KERNEL = "Haswell"


def _kernel() -> str | None:
    """The architecture of the OpenBLAS that numpy uses (None: another BLAS)."""
    from threadpoolctl import threadpool_info

    return next(
        (
            info.get("architecture")
            for info in threadpool_info()
            if info["internal_api"] == "openblas"
        ),
        None,
    )


def _key(job: dict[str, Any]) -> str:
    return json.dumps(job, sort_keys=True)


def _case(name: str, holds: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The first job of ``name``'s first stage whose fields are ``holds`` (a field held as None:
    the job has none), and its committed row."""
    module = REPRODUCTIONS[name]
    job = next(
        job
        for job in module.jobs(False)
        if all(job.get(field) == value for field, value in holds.items())
    )
    rows = {
        _key({field: row.get(field) for field in job}): row
        for row in read_rows(ROOT / "results" / name / "runs.csv")
    }
    return job, rows[_key(job)]


@pytest.mark.parametrize(("name", "holds"), CASES, ids=[f"{n}-{h}" for n, h in CASES])
def test_a_committed_run_is_what_the_code_computes(name: str, holds: dict[str, Any]) -> None:
    job, committed = _case(name, holds)
    again = REPRODUCTIONS[name].run_job(job)
    compared = [
        field
        for field, value in again.items()
        if field not in COSTS
        and isinstance(value, float)
        and isinstance(committed.get(field), int | float)  # not a field added since (None)
    ]
    assert compared, "no result field to compare"
    differ = {
        field: (committed[field], again[field])
        for field in compared
        if again[field] != pytest.approx(committed[field], rel=1e-9, abs=1e-12, nan_ok=True)
    }
    designed = {field: values for field, values in differ.items() if field in DESIGN}
    assert not designed, f"{name}: the design of {job} differs from the committed one: {designed}"
    if differ and _kernel() != COMMITTED_KERNEL:
        pytest.skip(
            f"drawn with OpenBLAS's {COMMITTED_KERNEL} kernels, run here on {_kernel()}'s: the "
            "design agrees, the draws differ (an eigendecomposition with repeated eigenvalues)"
        )
    assert not differ, f"{name}: the committed row of {job} differs from a run now: {differ}"
