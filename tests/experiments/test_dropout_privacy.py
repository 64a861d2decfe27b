"""A run with dropouts states what it spent under its schedule (`SeedRun.privacy`, accounted by
`account_dropouts`), beside the design's guarantee (`SeedRun.design_privacy`), and only the
design is held to the calibration."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from dpdl.accounting import account, account_dropouts
from dpdl.experiments.results import write_results
from dpdl.experiments.train import TrainConfig, run_training
from dpdl.jobspec.job import Job, build_job
from dpdl.threats import Colluding, Eavesdropper, ThreatModel

CONFIG = TrainConfig(
    task="least-squares",
    graph="ring",
    n=6,
    mechanism="decor",
    eps=5.0,
    steps=30,
    eval_every=30,
    dropout=0.3,
)


@pytest.mark.parametrize("recovery", [False, True])
def test_a_run_reports_the_epsilon_of_its_schedule(recovery: bool) -> None:
    config = replace(CONFIG, dropout_recovery=recovery)
    run = run_training(config).runs[0]
    job = build_job(config.resolved(), 0)
    assert job.dropouts is not None and job.recovery is recovery
    np.testing.assert_array_equal(run.dropouts.alive, job.dropouts.alive)
    assert run.design_privacy is not None
    for realized, design in zip(run.privacy, run.design_privacy, strict=True):
        threat = realized.threat
        expected = account_dropouts(
            job.mechanism,
            next(t for t in _threats(job) if str(t) == threat),
            job.neighbouring,
            job.dropouts.alive,
            config.delta,
            recovery,
        )
        assert realized.epsilon == pytest.approx(expected.epsilon, rel=1e-12)
        plain = account(
            job.mechanism,
            next(t for t in _threats(job) if str(t) == threat),
            job.neighbouring,
            config.steps,
            config.delta,
        )
        assert design.epsilon == pytest.approx(plain.epsilon, rel=1e-12)
        if not recovery and threat != "central":  # a sub-view releases no more
            assert realized.epsilon < design.epsilon


def _threats(job: Job) -> list[ThreatModel]:
    """The threats `privacy_reports` accounts (DECOR's own is the eavesdropper)."""
    return [job.mechanism.default_threat, Eavesdropper(), Colluding(1)]


def test_final_json_holds_the_realized_and_the_design_guarantees(tmp_path: Path) -> None:
    result = run_training(CONFIG)
    write_results(result, tmp_path)
    seed = json.loads((tmp_path / "config.json").read_text())["seeds"][0]
    assert seed["dropouts"]["missed_rounds"] == result.runs[0].dropouts.missed > 0
    assert [r["epsilon"] for r in seed["privacy"]] == [r.epsilon for r in result.runs[0].privacy]
    assert [r["epsilon"] for r in seed["design_privacy"]] == [
        r.epsilon for r in result.runs[0].design_privacy
    ]
