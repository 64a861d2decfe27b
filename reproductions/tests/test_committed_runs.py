"""The committed runs are what this code computes: a few of each reproduction's runs that cost
seconds, run again, give their committed row's every number.

A change to how noise is drawn (the same distribution, other numbers), to a calibration's last
digits or to an engine leaves a reproduction's committed ``runs.csv`` describing another program;
its report would then no longer be what ``dpdl reproduce NAME`` gives. Each case takes the first
job of one method (and task, and protocol) in the grid order of the reproduction's first stage,
finds its committed row and runs it again.

The rows agree on any machine's BLAS kernels (correlated noise is drawn through the principal
square root of its covariance, a function of the covariance alone), with one exception: the
encoders MAFALDA-SGD optimises (L-BFGS over BLAS products, :mod:`dpdl.factorization.mafalda`) end
about 2e-5 apart (relative) on OpenBLAS's SkylakeX kernels and its Haswell ones, which drew the
committed rows. The cases that run one therefore run in a process of their own on the Haswell
kernels (:data:`PINNED_KERNEL`), which any x86-64 machine with AVX2 has. The design's fields (eps,
Tr(W R W^T), sigma) are named apart when they differ, since that is a change of privacy, not of
draws.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dpdl.experiments.results import read_rows
from dpdl_reproductions.reproduce import REPRODUCTIONS

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
#: The cases that read a data set of which the tests ship a slice (the committed runs read all of
#: it): run with the full data sets (``make test-full-data``).
FULL_DATA_CASES: list[tuple[str, dict[str, Any]]] = [
    *[
        ("mafalda-housing", {"graph": "florentine", "method": method, "protocol": "authors"})
        for method in ("dp-dsgd", "mafalda", "none")
    ],
    *[
        ("strategies", {"task": "housing-mlp-sklearn", "graph": "florentine", "method": method})
        for method in ("bandmf", "bsr", "bisr", "blt", "sqrt")
    ],
]

#: The OpenBLAS kernels that drew the committed rows of the methods whose encoder is optimised
#: (MAFALDA-SGD's), set before numpy loads OpenBLAS in the process that runs their case.
PINNED_KERNEL = {"OPENBLAS_CORETYPE": "Haswell"}
#: The methods whose runs optimise an encoder (BandMF's and BLT's coefficients by L-BFGS-B).
OPTIMISED = {"mafalda", "mafalda-l", "bandmf", "blt"}

#: Fields of a row that are costs, not results.
COSTS = {"run_seconds", "seconds"}
#: Fields that the noise's design gives, not its draws: the same on every machine.
DESIGN = {"epsilon", "exact_epsilon_of_calibration", "trace_WRW", "sigma"}


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


def _run(name: str, job: dict[str, Any]) -> dict[str, Any]:
    return REPRODUCTIONS[name].run_job(job)


def _run_pinned(name: str, job: dict[str, Any]) -> dict[str, Any]:
    """``job`` run in a fresh interpreter on the :data:`PINNED_KERNEL` (this one's OpenBLAS has
    chosen its kernels already)."""
    script = (
        "import json, sys\n"
        "from dpdl_reproductions.reproduce import REPRODUCTIONS\n"
        f"row = REPRODUCTIONS[{name!r}].run_job(json.loads(sys.argv[1]))\n"
        "print(json.dumps(row))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, json.dumps(job)],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
        env={**os.environ, **PINNED_KERNEL},
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    ("name", "holds"),
    [
        *CASES,
        *[pytest.param(n, h, marks=pytest.mark.full_data) for n, h in FULL_DATA_CASES],
    ],
    ids=[f"{n}-{h}" for n, h in CASES + FULL_DATA_CASES],
)
def test_a_committed_run_is_what_the_code_computes(name: str, holds: dict[str, Any]) -> None:
    job, committed = _case(name, holds)
    again = _run_pinned(name, job) if job.get("method") in OPTIMISED else _run(name, job)
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
    assert not differ, f"{name}: the committed row of {job} differs from a run now: {differ}"
