"""A job's privacy reports under a dropout schedule (`dpdl.jobspec.job.privacy_reports`)."""

from __future__ import annotations

import numpy as np
import pytest

from dpdl.accounting import AgentLevel, account, account_dropouts, calibrate
from dpdl.errors import ConfigError
from dpdl.graphs import build_graph, mixing_matrix
from dpdl.jobspec.dropouts import DropoutSchedule
from dpdl.jobspec.job import privacy_reports
from dpdl.mechanisms.registry import build_mechanism
from dpdl.threats import Colluding, Eavesdropper

DELTA = 1e-5
STEPS = 20
RELATION = AgentLevel(0.1)


@pytest.fixture(scope="module")
def decor():
    graph = build_graph("ring", 6, None, seed=0)
    weights = mixing_matrix(graph, "metropolis-hastings")
    calibration = calibrate(5.0, DELTA, STEPS, RELATION, "exact")
    return build_mechanism("decor", graph, weights, calibration, None)


def test_reports_under_a_schedule_are_the_runs(decor) -> None:
    alive = DropoutSchedule.from_rate(0.3, 6, STEPS, seed=2).alive
    for recovery in (False, True):
        reports = privacy_reports(decor, RELATION, STEPS, DELTA, alive, recovery)
        threats = [decor.default_threat, Eavesdropper(), Colluding(1)]
        threats = list(dict.fromkeys(threats))  # the default threat listed once
        assert [r.threat for r in reports] == [str(t) for t in threats]
        for report, threat in zip(reports, threats, strict=True):
            expected = account_dropouts(decor, threat, RELATION, alive, DELTA, recovery)
            assert report == expected
    plain = privacy_reports(decor, RELATION, STEPS, DELTA, alive)
    recovered = privacy_reports(decor, RELATION, STEPS, DELTA, alive, recovery=True)
    assert plain != recovered  # the recovery design is accounted as it is
    without = privacy_reports(decor, RELATION, STEPS, DELTA)
    assert all(a.epsilon <= b.epsilon for a, b in zip(plain, without, strict=True))


def test_a_schedule_without_dropouts_gives_the_plain_reports(decor) -> None:
    alive = DropoutSchedule.none(6, STEPS).alive
    reports = privacy_reports(decor, RELATION, STEPS, DELTA, alive, recovery=True)
    assert reports == privacy_reports(decor, RELATION, STEPS, DELTA)
    assert reports[0] == account(decor, decor.default_threat, RELATION, STEPS, DELTA)


@pytest.mark.parametrize("shape", [(STEPS + 1, 6), (STEPS, 5), (6,)])
def test_a_schedule_of_another_run_is_one_config_error(decor, shape) -> None:
    with pytest.raises(ConfigError, match="dropout schedule has shape"):
        privacy_reports(decor, RELATION, STEPS, DELTA, np.ones(shape, dtype=bool))
