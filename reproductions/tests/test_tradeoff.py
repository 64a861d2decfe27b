"""The trade-off protocol: tuning grid, choice of the tuned point, final seeds, summaries."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from dpdl_reproductions import tradeoff
from dpdl_reproductions.tradeoff import Panel, Point, Study, Training

LOSS = Training(
    "quadratic",
    10,
    (0.1, 0.01),
    (1.0, 10.0),
    "optimality_gap",
    decor_couples=(None, 0),
    tune_seeds=2,
    seeds=5,
)
ACCURACY = Training(
    "quadratic",
    10,
    (0.1, 0.01),
    (1.0,),
    "test_accuracy",
    lower_is_better=False,
    tune_seeds=2,
    seeds=5,
)


def _study(training: Training = LOSS) -> Study:
    ring = Panel(
        "ring",
        training,
        "eps",
        (3.0, 10.0),
        {"graph": "ring", "n": 8},
        ("ldp", "decor", "cdp"),
        "eps",
        {"cdp": "complete"},
    )
    torus = Panel(
        "torus",
        training,
        "eps",
        (3.0, 10.0),
        {"graph": "torus", "n": 8},
        ("ldp", "decor", "cdp"),
        "eps",
        {"cdp": "complete"},
    )
    return Study((ring, torus))


def _metric(job: dict) -> float:
    """A made-up outcome: best at lr 0.01, clip 10, DECOR's couple 0; seeds add 0.001 each."""
    value = (
        1.0
        + (job["lr"] == 0.1)
        + 2 * (job["clip"] == 1.0)
        + 0.5 * (job["decor_couple"] is None and job["method"] == "decor")
    )
    return value + 0.001 * job["seed"]


def test_tuning_grid_covers_every_point_once_and_shares_the_centralised_baseline() -> None:
    jobs = tradeoff.tuning_jobs(_study())
    keys = {tuple(sorted(job.items(), key=str)) for job in jobs}
    assert len(keys) == len(jobs)
    per_calibration = (
        2 * 2 * (4 + 8) + 2 * 4
    )  # eps x topologies x (ldp + decor grids) + cdp once per eps
    assert len(jobs) == 2 * 2 * per_calibration  # calibrations x tuning seeds
    assert {job["graph"] for job in jobs if job["method"] == "cdp"} == {"complete"}
    assert {job["decor_couple"] for job in jobs if job["method"] == "decor"} == {None, 0}
    assert {job["decor_couple"] for job in jobs if job["method"] != "decor"} == {None}


def test_final_stage_runs_the_best_point_on_the_remaining_seeds() -> None:
    study = _study()
    rows = [{**job, "optimality_gap": _metric(job)} for job in tradeoff.tuning_jobs(study)]
    finals = tradeoff.final_jobs(study, rows)
    assert {job["seed"] for job in finals} == {2, 3, 4}
    assert {(job["lr"], job["clip"]) for job in finals} == {(0.01, 10.0)}
    assert {job["decor_couple"] for job in finals if job["method"] == "decor"} == {0}
    rows += [{**job, "optimality_gap": _metric(job)} for job in finals]
    summary = tradeoff.summarise(study, rows)
    point = summary[("ring", 3.0, "decor", "exact")]
    assert point.values == pytest.approx(tuple(1.0 + 0.001 * seed for seed in range(5)))
    assert (point.low, point.high, point.mean) == pytest.approx(
        (1.001, 1.003, 1.002)
    )  # quartiles and mean
    assert point.hyperparameters == {"lr": 0.01, "clip": 10.0, "decor_couple": 0}


def test_a_diverged_run_is_the_worst_and_higher_is_better_for_accuracy() -> None:
    study = _study(ACCURACY)
    rows = []
    for job in tradeoff.tuning_jobs(study):
        accuracy = 0.9 if job["lr"] == 0.1 else 0.5
        if job["lr"] == 0.1 and job["seed"] == 1 and job["method"] == "ldp":
            accuracy = math.nan  # one diverged seed disqualifies that step size for LDP
        rows.append({**job, "test_accuracy": accuracy})
    finals = tradeoff.final_jobs(study, rows)
    assert {job["lr"] for job in finals if job["method"] == "ldp"} == {0.01}
    assert {job["lr"] for job in finals if job["method"] != "ldp"} == {0.1}
    assert tradeoff.better(0.9, 0.5, lower_is_better=False) and not tradeoff.better(
        math.nan, 0.5, lower_is_better=True
    )


def test_run_job_trains_one_seed_and_reports_its_privacy() -> None:
    jobs = tradeoff.tuning_jobs(_study())
    exact = next(
        job
        for job in jobs
        if job["calibration"] == "exact" and job["method"] == "decor" and job["decor_couple"] == 0
    )
    row = tradeoff.run_job({**exact, "steps": 50})
    assert (
        exact["eps"] * (1 - 1e-6) <= row["epsilon"] <= exact["eps"]
    )  # calibrated exactly, never above
    assert (
        row["threat"] == "eavesdropper"
        and math.isfinite(row["optimality_gap"])
        and row["trace_WRW"] > 0
    )
    paper = next(
        job
        for job in jobs
        if job["calibration"] == "paper" and job["method"] == "ldp" and job["eps"] == 3.0
    )
    row = tradeoff.run_job({**paper, "steps": 50})
    assert (
        row["epsilon"] == pytest.approx(row["exact_epsilon_of_calibration"])
        and row["epsilon"] < 3.0
    )


def test_tuning_at_one_setting_reuses_its_choice_across_the_sweep() -> None:
    study = _study(replace(LOSS, tune_at={"eps": 10.0}))
    tuning = tradeoff.tuning_jobs(study)
    assert {job["eps"] for job in tuning} == {10.0}
    assert len(tuning) == len(tradeoff.tuning_jobs(_study())) // 2  # one of the two eps values

    def metric(job: dict) -> float:  # at eps = 3 the other step size would win: it must not be used
        return _metric(job) + (2.0 * (job["lr"] == 0.01) if job["eps"] == 3.0 else 0.0)

    rows = [{**job, "optimality_gap": metric(job)} for job in tuning]
    finals = tradeoff.final_jobs(study, rows)
    assert {(job["lr"], job["clip"]) for job in finals} == {(0.01, 10.0)}
    assert {job["seed"] for job in finals if job["eps"] == 3.0} == set(range(5))
    assert {job["seed"] for job in finals if job["eps"] == 10.0} == {2, 3, 4}
    rows += [{**job, "optimality_gap": metric(job)} for job in finals]
    summary = tradeoff.summarise(study, rows)
    assert summary[("torus", 3.0, "ldp", "paper")].hyperparameters == {
        "lr": 0.01,
        "clip": 10.0,
        "decor_couple": None,
    }
    assert summary[("torus", 3.0, "ldp", "paper")].mean == pytest.approx(3.002)


def _point(values: list[float]) -> Point:
    return Point(float(sum(values) / len(values)), min(values), max(values), tuple(values), {})


def test_significantly_better_is_scipys_two_sided_paired_t_test_at_95_percent() -> None:
    """The paired comparison over seeds agrees with scipy's two-sided paired t test (p < 0.05, the
    mean on the winner's side) for 3, 4 and 5 seeds, in both directions of the metric; its
    threshold is the t quantile (4.30, 3.18, 2.78 standard errors), not 2."""
    from scipy.stats import ttest_rel

    rng = np.random.default_rng(0)
    for seeds, quantile in ((3, 4.303), (4, 3.182), (5, 2.776)):
        decided, between = set(), 0
        for _ in range(300):
            base = rng.normal(0.9, 0.01, size=seeds)
            other = base + rng.normal(rng.uniform(-0.004, 0.004), 0.002, size=seeds)
            a, b = _point(list(other)), _point(list(base))
            test = ttest_rel(other, base)
            assert tradeoff.significantly_better(a, b, lower_is_better=False) == (
                test.pvalue < 0.05 and test.statistic > 0
            )
            assert tradeoff.significantly_better(a, b, lower_is_better=True) == (
                test.pvalue < 0.05 and test.statistic < 0
            )
            decided.add(bool(test.pvalue < 0.05 and test.statistic > 0))
            if (
                2.0 < test.statistic < quantile * 0.999
            ):  # what the old rule (2 standard errors) called significant
                assert not tradeoff.significantly_better(a, b, lower_is_better=False)
                between += 1
        assert (
            decided == {True, False} and between > 0
        )  # the draws cover both answers and the old rule's gap
    assert "two-sided Student t test" in tradeoff.SIGNIFICANCE and "95%" in tradeoff.SIGNIFICANCE


def test_every_report_using_the_test_states_it_under_its_claims_table(tmp_path) -> None:
    """Each reproduction whose claims call significantly_better names the test (its SIGNIFICANCE),
    and write_report prints it right under the claims table."""
    import inspect

    from dpdl_reproductions import corn_tradeoff
    from dpdl_reproductions.report import Claim, Verdict, write_report
    from dpdl_reproductions.reproduce import REPRODUCTIONS

    users = [
        name
        for name, module in REPRODUCTIONS.items()
        if "significantly_better" in inspect.getsource(module)
        or getattr(module, "analyse", None).__module__ == corn_tradeoff.__name__
        or "corn_tradeoff.analyse(" in inspect.getsource(module)
    ]
    assert set(users) >= {"decor-fig1", "whisper-quadratic", "whisper-logreg", "corn-mnist"}
    for name in users:
        assert REPRODUCTIONS[name].SIGNIFICANCE == tradeoff.SIGNIFICANCE
    lines = (
        write_report(
            tmp_path / "REPORT.md",
            "t",
            "intro",
            [Claim("(a)", "p", "m", Verdict.HOLDS)],
            [],
            [],
            tradeoff.SIGNIFICANCE,
        )
        .read_text()
        .splitlines()
    )
    row = lines.index("| (a) | p | m | holds |")
    assert lines[row + 1 : row + 3] == ["", tradeoff.SIGNIFICANCE]
    assert (
        tradeoff.SIGNIFICANCE
        not in write_report(tmp_path / "other.md", "t", "intro", [], [], []).read_text()
    )

    # The complete graph at eps = 3 (DECOR Fig. 1, MNIST): 0.03 points apart, seeds disagree on the
    # sign.
    paper, exact = _point([0.913, 0.912, 0.911, 0.910]), _point([0.914, 0.911, 0.910, 0.910])
    assert tradeoff.better(paper.mean, exact.mean, lower_is_better=False)
    assert not tradeoff.significantly_better(paper, exact, lower_is_better=False)
    diverged = _point([math.nan, 0.9, 0.9, 0.9])
    assert tradeoff.significantly_better(exact, diverged, lower_is_better=False)
