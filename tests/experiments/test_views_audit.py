"""The per-view canary audit: its lower bounds never exceed the exact eps of a mechanism whose eps
is known in closed form (LDP noise over T rounds: `mu = sqrt(T) Delta / sigma` against the
eavesdropper, and against a curious neighbour on a path), the Gaussian fit comes close to it,
and bad views are one error naming the problem."""

from __future__ import annotations

import json
import math

import networkx as nx
import pytest

from dpdl.accounting import AgentLevel
from dpdl.accounting.calibration import calibrate
from dpdl.errors import ConfigError
from dpdl.experiments.views import audit_views, canary_views, format_views, write_views
from dpdl.graphs import metropolis_hastings
from dpdl.mechanisms.registry import DesignOptions, build_mechanism

PATH = nx.path_graph(4)
WEIGHTS = metropolis_hastings(PATH)
EPS, DELTA, STEPS, CLIP = 3.0, 1e-5, 5, 1.0


@pytest.fixture(scope="module")
def ldp_audits():
    views = canary_views(PATH, 0)
    return audit_views(
        PATH,
        WEIGHTS,
        EPS,
        DELTA,
        STEPS,
        CLIP,
        views,
        0,
        trials=20_000,
        seed=3,
        mechanisms=("ldp",),
        progress=False,
    )


def test_views_of_a_path(ldp_audits) -> None:
    names = [audit.view for audit in ldp_audits]
    assert names == [
        "eavesdropper, all links",
        "eavesdropper, 1 links",
        "neighbour 1",
        "coalition [1]",
        "non-neighbour 3 (3 hops)",
    ]


def test_lower_bounds_never_exceed_the_closed_form(ldp_audits) -> None:
    """LDP's sigma from its calibration; the eavesdropper and the curious neighbour both see
    every noisy gradient of agent 0: mu = sqrt(T) Delta / sigma. No lower bound exceeds the
    exact eps, and the Gaussian fit reaches 0.9 of it."""
    budget = calibrate(EPS, DELTA, STEPS, AgentLevel(CLIP))
    mechanism = build_mechanism("ldp", PATH, WEIGHTS, budget, DesignOptions())
    sigma = math.sqrt(float(mechanism.private_variances[0]))
    closed = math.sqrt(STEPS) * AgentLevel(CLIP).sensitivity / sigma
    by_view = {audit.view: audit for audit in ldp_audits}
    for name in ("eavesdropper, all links", "neighbour 1", "coalition [1]"):
        assert by_view[name].mu_upper == pytest.approx(closed, rel=1e-8)
        assert by_view[name].epsilon_upper == pytest.approx(EPS, rel=1e-3)
    for audit in ldp_audits:
        for lower in (audit.lower_many_run_cp, audit.lower_many_run_fit, audit.lower_one_run):
            assert 0.0 <= lower <= audit.epsilon_upper, audit
        assert audit.lower_many_run_fit >= 0.9 * audit.epsilon_upper, audit
        assert audit.mu_canary <= audit.mu_upper * (1 + 1e-9)
    assert by_view["non-neighbour 3 (3 hops)"].epsilon_upper < 0.5 * EPS


def test_results_are_written(ldp_audits, tmp_path) -> None:
    write_views(ldp_audits, tmp_path, "header line")
    rows = json.loads((tmp_path / "views.json").read_text())
    assert len(rows) == 5 and rows[0]["lower_many_run_fit_ratio"] > 0.9
    assert (tmp_path / "views.csv").read_text().count("\n") == 6
    report = (tmp_path / "REPORT.md").read_text()
    assert "## Per-view canary audit" in report and "header line" in report
    assert "(a bug in one of them): none." in report
    assert "neighbour 1" in format_views(ldp_audits)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"agent": 4}, "the canary's agent 4 is not an agent"),
        ({"neighbour": 0}, "the curious neighbour 0 is the canary's agent itself"),
        ({"neighbour": 2}, "the curious neighbour 2 is not a neighbour"),
        ({"links": [(0, 2)]}, "link 0->2 is not an edge"),
        ({"links": [(0, 7)]}, "a link's receiver 7 is not an agent"),
        ({"non_neighbour": 1}, "the non-neighbour 1 must be neither"),
        ({"coalition": [0, 1]}, "leave out the canary's agent 0"),
    ],
)
def test_bad_views_are_named(options: dict, message: str) -> None:
    agent = options.pop("agent", 0)
    with pytest.raises(ConfigError, match=message):
        canary_views(PATH, agent, **options)


def test_no_non_neighbour_in_a_complete_graph() -> None:
    views = canary_views(nx.complete_graph(4), 2)
    assert not any(view.name.startswith("non-neighbour") for view in views)


def test_bad_audit_input_before_work() -> None:
    views = canary_views(PATH, 0)
    with pytest.raises(ConfigError, match="unknown mechanism 'nope'"):
        audit_views(PATH, WEIGHTS, EPS, DELTA, STEPS, CLIP, views, 0, mechanisms=("nope",))
    with pytest.raises(ConfigError, match="at least 100 trials"):
        audit_views(PATH, WEIGHTS, EPS, DELTA, STEPS, CLIP, views, 0, trials=10)


def test_too_large_is_refused_before_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """The estimate (dense linear model, B B^T per view, the run) is checked before any run."""
    from dpdl.errors import ResourceError

    monkeypatch.setenv("DPDL_MEMORY_LIMIT", "1MB")
    views = canary_views(PATH, 0)
    with pytest.raises(ResourceError, match=r"the canary audit .* cannot fit in memory"):
        audit_views(PATH, WEIGHTS, EPS, DELTA, 200, CLIP, views, 0, mechanisms=("ldp",))
    monkeypatch.setenv("DPDL_MEMORY_LIMIT", "inf")
    monkeypatch.setenv("DPDL_TIME_LIMIT", "1")
    with pytest.raises(ResourceError, match="would take about"):
        audit_views(PATH, WEIGHTS, EPS, DELTA, 200, CLIP, views, 0, mechanisms=("ldp",))
