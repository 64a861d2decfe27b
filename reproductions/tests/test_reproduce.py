"""The reproduction framework: cached, resumable grids, and the quick reproductions end to end."""

from __future__ import annotations

import collections
import csv
import json
import logging
import os
import re
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from dpdl.experiments import cache as cache_module
from dpdl.experiments import executors
from dpdl.experiments.cache import RUN_SECONDS, job_key, run_jobs, scan_cache
from dpdl_reproductions.lppa_tables import SETTING_FIELDS
from dpdl_reproductions.report import VERDICT_CELL, Verdict, read_verdicts
from dpdl_reproductions.reproduce import REPRODUCTIONS, reproduce

#: The committed full runs.
RESULTS = Path(__file__).resolve().parents[1] / "results"


def _square(job: dict) -> dict:
    return {"value": job["x"] ** 2}


def _pid(job: dict) -> dict:
    return {"pid": os.getpid()}


def test_run_jobs_replaces_its_workers_after_a_bounded_number_of_jobs(
    tmp_path, monkeypatch
) -> None:
    """Every job runs (no deadlock when workers are replaced), in fresh pools of at most
    workers x MAX_JOBS_PER_WORKER jobs each."""
    monkeypatch.setattr(executors, "MAX_JOBS_PER_WORKER", 2)
    rows = run_jobs([{"x": x} for x in range(9)], _pid, tmp_path, workers=2, progress=False)
    assert [row["x"] for row in rows] == list(range(9))
    counts = collections.Counter(row["pid"] for row in rows)
    assert max(counts.values()) <= 4 and len(counts) >= 3  # 3 pools of 4, 4 and 1 jobs


def _counted_square(job: dict) -> dict:
    """The square of ``x``, leaving one file in ``job["calls"]`` per call (calls from worker
    processes)."""
    (Path(job["calls"]) / f"{job['x']}-{uuid.uuid4().hex}").touch()
    return {"value": job["x"] ** 2}


def _calls(folder: Path) -> collections.Counter:
    """How many times _counted_square ran per x, since the last call; forgets them."""
    counts = collections.Counter(int(p.name.split("-")[0]) for p in folder.iterdir())
    for p in folder.iterdir():
        p.unlink()
    return counts


@pytest.fixture
def counted(tmp_path: Path) -> tuple[list[dict], Path, Path]:
    """Five jobs of _counted_square, a folder counting their calls, an empty cache folder."""
    calls = tmp_path / "calls"
    calls.mkdir()
    return [{"x": x, "calls": str(calls)} for x in range(5)], calls, tmp_path / "cache"


def test_run_jobs_caches_results_and_never_recomputes_a_finished_job(counted) -> None:
    jobs, calls, cache = counted
    first = run_jobs(jobs[:3], _counted_square, cache, workers=1, progress=False)
    assert [row["value"] for row in first] == [0, 1, 4] and _calls(calls) == {0: 1, 1: 1, 2: 1}
    assert all(row[RUN_SECONDS] >= 0.0 for row in first)  # the seconds each job took
    second = run_jobs(jobs, _counted_square, cache, workers=2, progress=False)
    assert [row["value"] for row in second] == [0, 1, 4, 9, 16]
    assert second[:3] == first  # with the seconds they took when they ran
    assert _calls(calls) == {3: 1, 4: 1}  # the three finished jobs came from the cache
    assert run_jobs(
        jobs, _counted_square, cache, workers=2, progress=False
    ) == second and not _calls(calls)
    assert len(list(cache.glob("*.json"))) == 5 and not list(
        cache.glob(".*")
    )  # no temporary file left


def test_entries_of_an_older_engine_or_other_data_are_stale_and_rerun_exactly(
    counted, monkeypatch, caplog
) -> None:
    jobs, calls, cache = counted
    run_jobs(jobs, _counted_square, cache, workers=2, progress=False)
    assert _calls(calls) == dict.fromkeys(range(5), 1)
    monkeypatch.setattr(cache_module, "ENGINE_VERSION", cache_module.ENGINE_VERSION - 1)
    run_jobs(
        [jobs[1], jobs[3]], _counted_square, cache, workers=2, progress=False
    )  # entries of 1 and 3 now from the older engine
    assert _calls(calls) == {1: 1, 3: 1}
    monkeypatch.undo()
    assert len(scan_cache(jobs, cache).stale) == 2
    with caplog.at_level(logging.WARNING, logger=cache_module.__name__):
        rows = run_jobs(jobs, _counted_square, cache, workers=2, progress=False)
    assert _calls(calls) == {1: 1, 3: 1} and [row["value"] for row in rows] == [0, 1, 4, 9, 16]
    assert (
        "(rerun: 2 stale, 0 unusable)" in caplog.text
        and f"{cache / job_key(jobs[3])}.json: stale" in caplog.text
    )
    # the data files are part of the key: other data, every entry stale
    monkeypatch.setattr(cache_module, "data_fingerprint", lambda: "0" * 64)
    run_jobs(jobs, _counted_square, cache, workers=2, progress=False)
    assert _calls(calls) == dict.fromkeys(range(5), 1)
    monkeypatch.undo()
    # an entry of the layout before this one (the row alone) cannot say what made it: stale
    legacy = cache / f"{job_key(jobs[0])}.json"
    legacy.write_text(json.dumps({**jobs[0], "value": 0}))
    assert dict(scan_cache(jobs, cache).stale)[legacy].startswith(
        "written before cache entries recorded"
    )


def test_torn_edited_or_foreign_cache_files_are_detected_logged_and_rerun(counted, caplog) -> None:
    jobs, calls, cache = counted
    jobs.append({"x": 5, "calls": jobs[0]["calls"]})
    run_jobs(jobs, _counted_square, cache, workers=2, progress=False)
    _calls(calls)
    path = {job["x"]: cache / f"{job_key(job)}.json" for job in jobs}
    text = path[0].read_text()
    path[0].write_text(text[: len(text) // 2])  # torn
    path[1].write_text("")  # empty
    path[2].write_text(
        path[2].read_text().replace('"value": 4', '"value": 7')
    )  # edited, its checksum kept
    path[3].write_text("[9, 9]")  # wrong type
    path[4].write_text(path[5].read_text())  # another job's entry, whole
    assert '"value": 7' in path[2].read_text()
    with caplog.at_level(logging.WARNING, logger=cache_module.__name__):
        rows = run_jobs(jobs, _counted_square, cache, workers=2, progress=False)
    assert [row["value"] for row in rows] == [0, 1, 4, 9, 16, 25]
    assert _calls(calls) == dict.fromkeys(range(5), 1)  # job 5 untouched: not rerun
    for x, why in [
        (0, "not JSON"),
        (1, "not JSON"),
        (2, "fails its checksum"),
        (3, "a JSON list"),
        (4, "the entry of another job"),
    ]:
        assert f"{path[x]}: unusable cache entry ({why}" in caplog.text
    assert "(rerun: 0 stale, 5 unusable)" in caplog.text
    assert not scan_cache(jobs, cache).pending  # all rewritten whole


def test_the_data_fingerprint_follows_the_data_files_contents(tmp_path, monkeypatch) -> None:
    (tmp_path / "mnist").mkdir()
    data = tmp_path / "mnist" / "train-images-idx3-ubyte.gz"
    data.write_bytes(b"abcd")
    monkeypatch.setenv("DPDL_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("DPDL_CACHE_DIR", str(tmp_path / "empty-cache"))
    before = cache_module.data_fingerprint()
    assert cache_module.data_fingerprint() == before
    data.write_bytes(b"abce")  # same size
    os.utime(data, ns=(1, 1))
    assert cache_module.data_fingerprint() != before
    data.write_bytes(b"abcd")
    assert cache_module.data_fingerprint() == before  # contents, not times
    (tmp_path / "README.md").write_bytes(b"notes")
    assert cache_module.data_fingerprint() == before  # no loader reads it
    (tmp_path / "adult").mkdir()
    (tmp_path / "adult" / "adult.data.gz").write_bytes(b"")  # a layout the Adult loader reads
    assert cache_module.data_fingerprint() != before


#: Claims that hold in the --quick settings: all but whisper-variance's budget claim, which fails on
#: the papers' side (their closed form used at eps = 40, beyond its eps <= log(1/delta)).
HOLDING_QUICK = {"whisper-variance": 4, "whisper-seeds": 3}


@pytest.mark.parametrize(
    ("name", "figure", "claims", "holding"),
    [
        ("whisper-variance", "trace_WRW.png", 5, HOLDING_QUICK["whisper-variance"]),
        ("whisper-seeds", "objective_vs_seeds.png", 3, HOLDING_QUICK["whisper-seeds"]),
        ("mafalda-pndp", "pndp_by_distance.png", 1, 1),
        # All but the authors' example-level eps, one step's label rather than T steps' eps.
        ("decor-search", "fig3_example_level.png", 9, 8),
    ],
)
def test_quick_reproductions_write_figures_and_confirm_the_claims(
    tmp_path, name: str, figure: str, claims: int, holding: int
) -> None:
    assert name in REPRODUCTIONS
    report = reproduce(name, tmp_path, quick=True, workers=2, progress=False)
    text = report.read_text()
    assert (tmp_path / figure).stat().st_size > 10_000
    assert (tmp_path / "runs.csv").read_text().count("\n") > 10
    verdicts = read_verdicts(report)
    assert verdicts is not None and sum(verdicts.values()) == claims, text
    assert verdicts[Verdict.HOLDS] == holding, text


@pytest.mark.parametrize(
    ("name", "figures", "holding"),
    [
        ("whisper-quadratic", ["optimality_gap.png", "paper_optimality_gap.png"], []),
        (
            "whisper-logreg",
            ["test_loss.png"],
            ["both correlation-based approaches"],
        ),
        (
            "corn-mnist",
            ["test_accuracy.png"],
            ["both correlation-based approaches"],
        ),
        (
            "decor-fig1",
            ["least_squares.png", "logreg_a9a.png", "mnist.png"],
            ["considerably surpasses LDP"],
        ),
    ],
)
def test_quick_learning_reproductions_tune_train_and_report(
    tmp_path, name: str, figures: list[str], holding: list[str]
) -> None:
    """The smoke test of each learning figure's --quick setting: both stages run, the figures and
    the report are written, and the claims that hold by a wide margin even in the quick setting
    (correlated noise beats LDP) are confirmed. Every run of dpdl's exact calibration is within
    its budget (the budget claim itself fails where the papers' closed form is used beyond its
    range)."""
    report = reproduce(name, tmp_path, quick=True, workers=2, progress=False).read_text()
    for figure in figures:
        assert (tmp_path / figure).stat().st_size > 10_000
    rows = (tmp_path / "runs.csv").read_text().splitlines()
    assert len(rows) - 1 == len(set(rows[1:])) > 10  # tuning and final runs, none twice
    claims = [
        line
        for line in report.splitlines()
        if line.startswith("| ") and VERDICT_CELL.search(line) is not None
    ]
    assert len(claims) >= 4
    within = re.search(r"exact calibration: epsilon <= target in (\d+)/(\d+) runs", report)
    assert within and within[1] == within[2], report
    for text in holding:
        matching = [line for line in claims if text in line]
        assert matching and all(line.endswith("| holds |") for line in matching), (text, report)


def test_quick_horizon_compares_both_objectives_within_budget(tmp_path) -> None:
    """The --quick setting of horizon: LDP, CDP and both objectives of Whisper and DECOR train on
    least squares and a9a; every run is within the budget, and each (task, graph, design) gets a
    gap-closed claim."""
    report = reproduce("horizon", tmp_path, quick=True, workers=2, progress=False).read_text()
    assert (tmp_path / "final_error.png").stat().st_size > 10_000
    with (tmp_path / "runs.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2 * 6 * 2  # tasks x designs x seeds
    assert {(r["method"], r["objective"]) for r in rows if r["method"] == "whisper"} == {
        ("whisper", "one-step"),
        ("whisper", "horizon"),
    }
    assert all(float(r["epsilon"]) <= 10.0 for r in rows)
    assert "every run is (eps, delta)-DP at the target" in report
    claims = [
        line for line in report.splitlines() if line.startswith("| ") and "gap closed" in line
    ]
    assert len(claims) == 2 * 2  # (task, graph) x (Whisper, DECOR)


def test_quick_strategies_runs_every_method_on_paired_seeds_within_budget(tmp_path) -> None:
    """The --quick setting of strategies: every method at every mu on the same two seeds of Housing
    on the Florentine families, every run within its mu's budget, MAFALDA-SGD's encoder of
    sensitivity 1 needing less noise than DP-D-SGD's (sqrt(k), k = 2 passes) and predicting less
    error, and each method's results table reaching the report."""
    from dpdl.accounting import gdp
    from dpdl_reproductions import strategies

    report = reproduce("strategies", tmp_path, quick=True, workers=2, progress=False).read_text()
    assert (tmp_path / "test_loss.png").stat().st_size > 10_000
    with (tmp_path / "runs.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    methods = [*strategies.BASELINES, *strategies.STRATEGIES]
    assert sorted((r["method"], float(r["mu"]), int(r["seed"])) for r in rows) == sorted(
        (method, mu, seed) for method in methods for mu in (0.1, 0.5) for seed in (0, 1)
    )
    assert all(float(r["eps"]) <= gdp.epsilon(float(r["mu"]), 1e-6) for r in rows)
    first = {r["method"]: r for r in rows if r["seed"] == "0" and float(r["mu"]) == 0.1}
    assert float(first["dp-dsgd"]["sensitivity"]) == pytest.approx(2**0.5)
    assert float(first["mafalda"]["sensitivity"]) == pytest.approx(1.0)
    assert float(first["mafalda"]["sigma"]) < float(first["dp-dsgd"]["sigma"])
    assert float(first["mafalda"]["design_loss"]) < float(first["dp-dsgd"]["design_loss"])
    assert int(first["dp-dsgd"]["state_floats"]) == 0 < int(first["mafalda"]["state_floats"])
    assert "| all | every run meets its budget" in report and report.count("| holds |") >= 1
    for method in methods:
        assert f"| {strategies.LABELS[method]} | " in report


def test_quick_mafalda_housing_trains_every_method_within_budget(tmp_path) -> None:
    """The --quick setting of mafalda-housing: every method runs at every eps, every private run
    meets its budget under the factorization accountant, and MAFALDA's optimised encoder needs a
    smaller noise multiplier than independent noise (sensitivity 1 against sqrt(k)); the authors'
    protocol runs every method at every mu with its test-loss curve, on the Facebook ego graph and
    Fig. 5's Florentine families, and every part's claims reach the report."""
    report = reproduce(
        "mafalda-housing", tmp_path, quick=True, workers=2, progress=False
    ).read_text()
    for figure in ("test_loss.png", "test_loss_authors.png", "test_loss_over_time.png"):
        assert (tmp_path / figure).stat().st_size > 10_000
    with (tmp_path / "runs.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    paper = [row for row in rows if row["protocol"] != "authors"]
    assert {(row["method"], float(row["eps"])) for row in paper if row["method"] != "none"} == {
        (method, eps) for method in ("dp-dsgd", "antipgd", "mafalda") for eps in (2.0, 10.0, 50.0)
    }
    assert all(
        float(row["epsilon"]) <= float(row["eps"]) for row in paper if row["method"] != "none"
    )
    sigma = {(row["method"], float(row["eps"])): float(row["sigma"]) for row in paper}
    assert all(
        sigma[("mafalda", eps)] < sigma[("dp-dsgd", eps)] < sigma[("antipgd", eps)]
        for eps in (2.0, 10.0, 50.0)
    )
    theirs = [row for row in rows if row["protocol"] == "authors"]
    assert {(row["method"], float(row["mu"])) for row in theirs} == {
        (method, mu)
        for method in ("dp-dsgd", "antipgd", "mafalda", "mafalda-l")
        for mu in (0.2, 2.0)
    } | {("none", 0.0)}
    assert {row["graph"] for row in theirs if row["method"] == "mafalda-l"} == {"florentine"}
    assert all(len(json.loads(row["test_loss_curve"])) == 5 for row in theirs)  # steps 0, 8, .., 32
    # node 0's final test loss (the code's trade-off figures) is one of the agents' whose mean
    # ends the curve: on the Facebook ego graph, not their mean
    assert all(float(row["test_loss_node0"]) > 0 for row in theirs)
    assert any(
        float(row["test_loss_node0"]) != pytest.approx(json.loads(row["test_loss_curve"])[-1])
        for row in theirs
    )
    assert all(
        (float(row["lr"]), float(row["clip"]), int(row["steps"])) == (0.1, 1.0, 32)
        for row in theirs
    )
    assert (
        "under LDP (matrix-factorization accounting) | epsilon <= target in 9/9 runs | holds |"
        in report
    )
    lines = report.splitlines()
    assert any("31% lower test loss" in line and "authors' protocol:" in line for line in lines)
    assert any("2-fold reduction in eps" in line and "dpdl's protocol:" in line for line in lines)
    theirs_claims = [line for line in lines if line.startswith("| Housing, Facebook ego, authors'")]
    assert len(theirs_claims) == 2
    # Fig. 5's other graphs: the Florentine families in the authors' protocol, one panel each.
    assert (tmp_path / "test_loss_graphs.png").stat().st_size > 10_000
    florentine = [row for row in theirs if row["graph"] == "florentine"]
    assert len(florentine) == 4 * 2 + 1 and all(row["n"] == "15" for row in florentine)
    assert any(line.startswith("| Housing, Florentine families, authors'") for line in lines)
    assert any(
        line.startswith("| Housing, Florentine families against Facebook ego") for line in lines
    )
    # MAFALDA-L-SGD: per-agent encoders, the shared noise multiplier, less error by design.
    sigma = {(r["graph"], r["method"], float(r["mu"])): float(r["sigma"]) for r in theirs}
    for row in (r for r in theirs if r["method"] == "mafalda-l"):
        key = (row["graph"], float(row["mu"]))
        assert sigma[(key[0], "mafalda-l", key[1])] == pytest.approx(
            sigma[(key[0], "mafalda", key[1])], rel=1e-6
        )
        assert float(row["design_loss"]) < float(row["design_loss_shared"])
    per_agent = [line for line in lines if "MAFALDA-L-SGD" in line and line.startswith("| ")]
    assert len(per_agent) == 2 and "| holds |" in per_agent[0]  # on the Florentine families


def test_quick_lppa_trains_attacks_and_reports(tmp_path) -> None:
    """The --quick setting of lppa: DSGT, DP and LPPA train on Adult and MNIST, DLG attacks each,
    the figures are written, and the claims that hold by a wide margin even here are confirmed (LPPA
    ends where DSGT does; DLG recovers plain DSGT's example and not LPPA's)."""
    report = reproduce("lppa", tmp_path, quick=True, workers=2, progress=False).read_text()
    for figure in ("accuracy_mnist.png", "accuracy_adult.png", "dlg_mnist.png"):
        assert (tmp_path / figure).stat().st_size > 10_000
    with (tmp_path / "runs.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert {(row["kind"], row["task"], row["method"]) for row in rows} == {
        (kind, task, method)
        for kind in ("train", "dlg")
        for task in ("adult-mlp", "mnist-lenet")
        for method in ("dsgt", "dp", "lppa")
    }
    for claim in (
        "LPPA's accuracy equals noise-free DSGT's",
        "DLG reconstructs the sender's data from plain DSGT",
    ):
        assert any(
            line.startswith("| Table") and claim in line and line.endswith("| holds |")
            for line in report.splitlines()
        ), report


def test_quick_lppa_parameters_runs_every_panel(tmp_path) -> None:
    """The --quick setting of lppa-parameters: Fig. 5's scales (DSGT once), Fig. 6a's local
    updates (for the setting's epochs, and for its rounds on one seed), Fig. 6b's client counts
    and Tables 3-4's skewed splits each train the three methods, and the checks of misses over
    Fig. 6b's epochs and at another step size; Fig. 5's attacks run at every scale; every claim
    gets a verdict, the unavailable data sets' "not testable as written", and the figures are
    written."""
    report = reproduce(
        "lppa-parameters", tmp_path, quick=True, workers=2, progress=False
    ).read_text()
    for figure in (
        "fig5_accuracy.png",
        "fig5_mse.png",
        "fig6a_local_steps.png",
        "fig6b_clients.png",
    ):
        assert (tmp_path / figure).stat().st_size > 10_000
    with (tmp_path / "runs.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    train = [row for row in rows if row["kind"] == "train"]
    assert {row["scale"] for row in train if row["method"] == "dsgt"} == {""}
    assert {(row["method"], row["scale"]) for row in rows if row["kind"] == "dlg"} == {
        ("dsgt", ""),
        ("dp", ""),
        ("lppa", ""),
        ("dp", "0.5"),
        ("lppa", "0.5"),
    }
    assert {row["clients"] for row in train} == {"", "10"}  # five clients: Table 1's
    # Fig. 6b's runs, five clients among them, at their own epochs; the other panels' at the
    # setting's
    assert {(row["clients"], row["epochs"]) for row in train} == {
        ("", "1"),
        ("", ""),  # Fig. 6a's runs of 4 rounds
        ("", "2"),
        ("10", "2"),
    }
    # Fig. 6a: K updates per communication, for Fig. 5's epoch on both seeds or 4 rounds (4K
    # steps) on one
    (epoch,) = {
        row["steps"]
        for row in train
        if row["task"] == "mnist-lenet"
        and row["epochs"] == "1"
        and not any(row[key] for key in SETTING_FIELDS)
    }
    local = {
        (row["method"], row["local_steps"], row["rounds"], row["steps"], row["seed"])
        for row in train
        if row["local_steps"]
    }
    assert local == {
        (method, str(k), rounds, steps, seed)
        for method in ("dsgt", "dp", "lppa")
        for k in (2, 8)
        for rounds, steps, seeds in (("", epoch, "01"), ("4", str(4 * k), "0"))
        for seed in seeds
    }
    # and the check of LPPA's drift: LPPA alone at a tenth of beta at both K, both seeds
    assert {
        (row["method"], row["local_steps"], row["seed"])
        for row in train
        if row["scale"] == "0.0025"
    } == {("lppa", k, seed) for k in ("2", "8") for seed in ("0", "1")}
    # the check of MNIST #C = 2 at step size 0.1, the three methods on both seeds
    assert {
        (row["method"], row["seed"]) for row in train if row["labels"] == "2" and row["lr"] == "0.1"
    } == {(method, seed) for method in ("dsgt", "dp", "lppa") for seed in ("0", "1")}
    # the checks of misses over Fig. 6b's epochs: DP and LPPA at the largest beta, MNIST #C = 2
    assert {
        (row["method"], row["scale"], row["labels"], row["seed"])
        for row in train
        if row["epochs"] == "2" and (row["scale"] or row["labels"])
    } == {
        (method, scale, labels, seed)
        for method, scale, labels in (
            ("dp", "0.5", ""),
            ("lppa", "0.5", ""),
            ("dsgt", "", "2"),
            ("dp", "", "2"),
            ("lppa", "", "2"),
        )
        for seed in ("0", "1")
    }
    assert {(row["partition"], row["alpha"], row["labels"]) for row in train} == {
        ("", "", ""),
        ("quantity-skew", "0.5", ""),
        ("dirichlet", "0.1", ""),
        ("labels-per-agent", "", "1"),
        ("labels-per-agent", "", "2"),
        ("labels-per-agent", "", "3"),
    }
    verdicts = read_verdicts(tmp_path / "REPORT.md")
    assert verdicts is not None and sum(verdicts.values()) == 15, report
    assert verdicts[Verdict.NOT_TESTABLE] == 1, report
    assert report.count("| Fig. 6a |") == 2, report
    assert "| Fig. 5 | the noise scale beta does not change plain DSGT |" in report


def test_quick_mafalda_images_trains_every_method_within_budget(tmp_path) -> None:
    """The --quick setting of mafalda-images: MAFALDA's CNN on non-iid MNIST, every method at every
    eps within its budget under the factorization accountant, and the figure written; the authors'
    protocol runs every method at every mu with node 0's final accuracy and every agent's, and its
    figure and claims reach the report."""
    report = reproduce(
        "mafalda-images", tmp_path, quick=True, workers=2, progress=False
    ).read_text()
    for figure in ("test_accuracy.png", "test_accuracy_authors.png"):
        assert (tmp_path / figure).stat().st_size > 10_000
    with (tmp_path / "runs.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    paper = [row for row in rows if row["protocol"] != "authors"]
    assert {(row["method"], float(row["eps"])) for row in paper if row["method"] != "none"} == {
        (method, eps) for method in ("dp-dsgd", "antipgd", "mafalda") for eps in (2.0, 10.0)
    }
    assert all(0.0 <= float(row["test_accuracy"]) <= 1.0 for row in rows)
    assert (
        "under LDP (matrix-factorization accounting) | epsilon <= target in 6/6 runs | holds |"
        in report
    )
    theirs = [row for row in rows if row["protocol"] == "authors"]
    assert {(row["method"], float(row["mu"])) for row in theirs} == {
        (method, mu) for method in ("dp-dsgd", "antipgd", "mafalda") for mu in (0.5, 10.0)
    } | {("none", 0.0)}
    assert all(
        (float(row["lr"]), float(row["clip"]), int(row["steps"])) == (5.0, 1.0, 32)
        for row in theirs
    )
    for row in theirs:
        agents = json.loads(row["test_accuracy_agents"])
        assert len(agents) == 15 and float(row["test_accuracy_node0"]) == agents[0]
        assert abs(float(row["test_accuracy"]) - sum(agents) / 15) < 1e-9
    lines = report.splitlines()
    assert any(
        line.startswith("| MNIST, Florentine families, authors' protocol |") for line in lines
    )
    assert any("largest relative gains" in line and "authors' protocol:" in line for line in lines)
    assert "| Facebook ego (Fig. 4), authors' protocol |" in report


def test_mafalda_images_authors_jobs_follow_the_code() -> None:
    """The authors' part of mafalda-images: every method at every mu of its grid and no noise once a
    seed, at step size 5 (a tenth of it after step 81), C = 1 and T = 320, MAFALDA's runs first;
    dpdl's part keeps its jobs; each run is the configuration of the code's network (on [0, 1]
    pixels) and its step-size decay."""
    from dpdl.jobspec.engine import StepSize
    from dpdl_reproductions import mafalda_images
    from dpdl_reproductions import mafalda_images_authors as authors
    from dpdl_reproductions.mafalda_code import tiny_cnn

    jobs = mafalda_images.jobs(False, parts=("authors",))
    mus = (1.0, 2.0, 5.0, 10.0)
    assert len(jobs) == 2 * 3 * (3 * len(mus) + 1)
    assert all(
        (job["protocol"], job["lr"], job["clip"], job["steps"], job["cycle"], job["decay_after"])
        == ("authors", 5.0, 1.0, 320, 16, 81)
        for job in jobs
    )
    assert {(job["task"], job["method"], job["mu"], job["seed"]) for job in jobs} == {
        (task, method, mu, seed)
        for task in ("mnist-cnn", "fashion-cnn")
        for method in ("dp-dsgd", "antipgd", "mafalda")
        for mu in mus
        for seed in range(3)
    } | {(task, "none", 0.0, seed) for task in ("mnist-cnn", "fashion-cnn") for seed in range(3)}
    assert jobs[0]["method"] == "mafalda"
    assert all("protocol" not in job for job in mafalda_images.jobs(False, parts=("paper",)))
    config = authors.config_of(jobs[0])
    assert (config.task, config.schedule, config.decay_after, config.decay_factor) == (
        "mnist-tiny-cnn",
        "step",
        81,
        0.1,
    )
    assert (config.mixing, config.neighbouring, config.gdp_mu) == (
        "local-degree",
        "add-remove",
        1.0,
    )
    step = StepSize(5.0, "step", 81)
    assert step(1) == step(81) == 5.0 and step(82) == step(320) == 0.5
    assert sum(p.numel() for p in tiny_cnn().parameters()) == 20_554


def test_mafalda_images_authors_analysis_judges_each_claim(tmp_path) -> None:
    """On made-up runs of the authors' part: MAFALDA ahead at every eps on MNIST holds; on
    Fashion-MNIST DP-D-SGD ties it at the largest eps and every method is at chance at the
    smallest, so the claim fails and says where; MAFALDA's largest relative gain is at a tight
    budget (eps 4.89, mu = 1) on MNIST, not on Fashion-MNIST (eps 11); the Facebook ego graph is
    not testable."""
    from dpdl_reproductions import mafalda_images

    accuracy = {
        "mafalda": {1.0: 0.3, 2.0: 0.5, 5.0: 0.8, 10.0: 0.85},
        "dp-dsgd": {1.0: 0.1, 2.0: 0.2, 5.0: 0.6, 10.0: 0.8},
        "antipgd": {1.0: 0.1, 2.0: 0.1, 5.0: 0.1, 10.0: 0.1},
    }
    rows = []
    for job in mafalda_images.jobs(False, parts=("authors",)):
        value = 0.9 if job["method"] == "none" else accuracy[job["method"]][job["mu"]]
        if job["task"] == "fashion-cnn" and job["method"] == "mafalda" and job["mu"] in (1.0, 10.0):
            value = accuracy["dp-dsgd"][job["mu"]]
        rows.append(
            {**job, "test_accuracy": value, "test_accuracy_node0": value, "sigma": job["mu"]}
        )
    figures, claims, notes = mafalda_images.analyse(rows, tmp_path, False, parts=("authors",))
    assert (
        figures == [tmp_path / "test_accuracy_authors.png"] and figures[0].stat().st_size > 10_000
    )
    beats = {
        claim.panel.split(",")[0]: claim
        for claim in claims
        if claim.paper.startswith("MAFALDA-SGD achieves higher test accuracy")
    }
    mnist, fashion = beats["MNIST"], beats["Fashion-MNIST"]
    assert mnist.verdict is Verdict.HOLDS and "higher in 8/8" in mnist.measured
    assert fashion.verdict is Verdict.FAILS
    assert "eps 4.89 (dp-dsgd)" in fashion.reason and "eps 96.7 (dp-dsgd)" in fashion.reason
    assert "at eps 4.89 every method is within 5 points of chance" in fashion.reason
    # the seeds' range at each miss, MAFALDA-SGD's against the baseline's
    assert "over the 3 seeds there" in fashion.reason
    assert "eps 4.89: 10.0-10.0 / 10.0-10.0% (dp-dsgd)" in fashion.reason
    gains = {
        claim.panel.split(",")[0]: claim for claim in claims if "largest relative" in claim.paper
    }
    assert gains["MNIST"].verdict is Verdict.HOLDS
    assert "eps 4.89: +200%" in gains["MNIST"].measured
    assert gains["Fashion-MNIST"].verdict is Verdict.FAILS
    assert "largest at eps 11 of 4.89-96.7" in gains["Fashion-MNIST"].reason
    ego = next(claim for claim in claims if claim.panel.startswith("Facebook ego"))
    assert ego.verdict is Verdict.NOT_TESTABLE
    assert any("no noise ends at 90.0% on node 0" in note for note in notes)


def _decor_fig1_analysis(
    tmp_path: Path, part: str, metrics_of: Callable[[dict], dict]
) -> tuple[list, list[str]]:
    """decor-fig1's claims and notes on made-up quick runs of ``part``: each job's row holds
    ``metrics_of(job)`` and the privacy fields the analysis reads."""
    from dpdl_reproductions import decor_fig1

    def row(job: dict) -> dict:
        privacy = {"epsilon": job["eps"], "exact_epsilon_of_calibration": job["eps"]}
        return {**job, **metrics_of(job), **privacy, "trace_WRW": 1.0}

    parts = (part,)
    rows = [row(job) for job in decor_fig1.jobs(True, parts=parts)]
    rows += [row(job) for job in decor_fig1.followup_jobs(True, rows, parts=parts)]
    _, claims, notes = decor_fig1.analyse(rows, tmp_path, True, parts=parts)
    return claims, notes


def test_decor_fig1_says_where_decor_stays_far_from_cdp_and_why(tmp_path) -> None:
    """On made-up runs where DECOR closes little of LDP's gap on the ring, the CDP claim fails and
    the report's note names the point, DECOR's consensus distance there and the algebraic
    connectivities (ring 2 - 2 cos(2 pi / 16), torus 2, complete 16)."""
    accuracy = {"cdp": 0.9, "ldp": 0.8, "decor": {"ring": 0.82, "torus": 0.89, "complete": 0.9}}

    def metrics(job: dict) -> dict:
        value = accuracy[job["method"]]
        value = value[job["graph"]] if isinstance(value, dict) else value
        return {
            "test_accuracy": value + 0.001 * job["seed"],
            "consensus_distance": 5.0 if job["graph"] == "ring" else 0.0,
        }

    claims, notes = _decor_fig1_analysis(tmp_path, "mnist-mlp", metrics)
    closely = next(claim for claim in claims if "closely matches" in claim.paper)
    assert not closely.holds and "at 2/3 points" in closely.measured
    assert closely.reason.endswith("disagreement does not cost; these runs did not record it")
    (note,) = [note for note in notes if "stays further than half" in note]
    assert "ring eps=3 (consensus distance 5," in note and "complete graph" in note
    assert "ring 0.152, torus 2, complete 16" in note

    # by the average model (the authors' code's metric), DECOR's 4 points below CDP on the ring
    # close half of LDP's 10 there
    def averaged(job: dict) -> dict:
        model = {"cdp": 0.9, "ldp": 0.8}.get(job["method"], 0.86 if job["graph"] == "ring" else 0.9)
        return {**metrics(job), "test_accuracy_average_model": model}

    claims, _ = _decor_fig1_analysis(tmp_path, "mnist-mlp", averaged)
    closely = next(claim for claim in claims if "closely matches" in claim.paper)
    assert not closely.holds
    assert closely.reason.endswith(
        "scored by it (at the same tuned hyperparameters): ring eps=3: DECOR 4 pts below CDP, "
        "LDP 10 (closes half of LDP's gap)"
    )


def test_decor_fig1_calls_a_miss_within_decors_spread_over_seeds_one(tmp_path) -> None:
    """On made-up least-squares runs where DECOR's mean on the ring misses half of LDP's gap (in
    log ratio: 10.5x against 10x) but its interquartile range over the 4 seeds holds the
    threshold, the claim fails as a near miss, with the range, and no note blames the graph."""

    def metrics(job: dict) -> dict:
        value = {"cdp": 1.0, "ldp": 100.0}.get(job["method"])
        if value is None:
            value = 10.5 * (1 + 0.1 * (job["seed"] - 1.5)) if job["graph"] == "ring" else 2.0
        if job["method"] == "ldp" and job["calibration"] == "paper" and job["graph"] == "torus":
            value = 90.0 + 0.1 * job["seed"]  # the papers' LDP ahead of the exact one there
        # the average model prefers another step size than the tuning's choice (the first point
        # of the grid, every point tying): the report scores it at the points tuned on the mean
        # over agents, the only ones run on every seed
        return {
            "optimality_gap": value,
            "optimality_gap_average_model": value * (2 if job["lr"] == 0.1 else 1),
            "squared_distance_tail": value,
            "consensus_distance": 1.0,
        }

    claims, notes = _decor_fig1_analysis(tmp_path, "least-squares", metrics)
    closely = next(
        claim
        for claim in claims
        if claim.panel == "Least squares" and "closely matches" in claim.paper
    )
    assert not closely.holds
    assert "ring eps=3 (10.5x against 10x, half of LDP's gap in log ratio" in closely.reason
    assert "each within DECOR's spread over its 4 seeds" in closely.reason
    assert not any(note.startswith("Least squares: DECOR stays further") for note in notes)
    exact = next(claim for claim in claims if "exact accountant's calibration" in claim.paper)
    assert not exact.holds and "significantly ahead at 1 point(s)" in exact.reason
    assert exact.reason.endswith(
        "ldp on the torus at eps=3, 100 exact against 90.15, both at lr 0.1, clip 0.1"
    )


def test_a_report_states_wall_time_and_the_compute_time_its_runs_recorded() -> None:
    """The run line: the invocation's wall time and the seconds the runs recorded, summed; runs
    from before they recorded it get the committed run's measured wall time instead."""
    from dpdl_reproductions.reproduce import FULL, _run_line

    timed = [{RUN_SECONDS: 1.5}, {RUN_SECONDS: 2.25}, {RUN_SECONDS: None}]
    assert _run_line("dpdl reproduce x", FULL, timed, cached=1, wall=3.2, committed="1 h") == (
        f"Run: `dpdl reproduce x`, {FULL}, 3 runs (1 of them cached by an earlier invocation), "
        "3 s wall time; 4 s of compute summed over the 2 runs that recorded it; the other 1 "
        "predate recorded compute times; wall time measured when they ran (on two cores, two "
        "worker processes unless said): 1 h. Raw runs: `runs.csv`."
    )
    line = _run_line("dpdl reproduce x", FULL, [{}, {}], cached=2, wall=0.4, committed="1 h")
    assert "2 runs, all cached by earlier invocations, 0 s wall time; the runs predate" in line
    assert line.endswith("unless said): 1 h. Raw runs: `runs.csv`.")
    # written again (no invocation): every run recorded its time, the wall time is the committed
    again = _run_line("dpdl reproduce x", FULL, timed[:2], committed="2 h over two invocations")
    assert again == (
        f"Run: `dpdl reproduce x`, {FULL}, 2 runs; 4 s of compute summed over the runs; wall time "
        "measured when they ran (on two cores, two worker processes unless said): 2 h over two "
        "invocations. Raw runs: `runs.csv`."
    )


def test_committed_reports_are_what_report_again_writes_and_state_their_wall_time(
    tmp_path,
) -> None:
    """Every committed report quotes its run's wall time (none points elsewhere for it), and
    writing one again from its runs.csv gives the committed report unchanged."""
    from dpdl_reproductions.reproduce import committed_wall_time, report_again

    results = RESULTS
    for name in REPRODUCTIONS:
        run = next(
            line
            for line in (results / name / "REPORT.md").read_text().splitlines()
            if line.startswith("Run: `")
        )
        committed = committed_wall_time(results / name)
        assert committed is not None and committed in run and "BENCHMARKS.md" not in run, run
    for name in ("whisper-variance", "lppa"):  # one without figures to draw again
        out = tmp_path / name
        shutil.copytree(results / name, out)
        assert report_again(name, out).read_text() == (results / name / "REPORT.md").read_text()


def test_the_authors_noise_is_their_closed_form_and_within_its_label_at_example_level() -> None:
    """Whisper / CorN-DSGD's released calibration (``diff_privacy.py``: variance 2 T C^2 /
    (sqrt(log(1/delta) + eps) - sqrt(log(1/delta)))^2 on the batch's sum) as dpdl's per-step
    sensitivity over noise, and what dpdl's exact example-level accountant says of it: far below
    the label, with or without the sampling's credit."""
    import math

    from dpdl.accounting.accountant import pld_epsilon
    from dpdl_reproductions.zcdp_bound import authors_mu_step

    steps, delta, clip = 5000, 1e-5, 0.1
    for eps in (3.0, 10.0, 40.0):
        log_delta = math.log(1 / delta)
        variance = 2 * steps * clip**2 / (math.sqrt(log_delta + eps) - math.sqrt(log_delta)) ** 2
        assert authors_mu_step(eps, delta, steps) == pytest.approx(clip / math.sqrt(variance))
        mu = authors_mu_step(eps, delta, steps)
        assert pld_epsilon(mu, 1.0, steps, delta) < 0.4 * eps
        assert pld_epsilon(mu, 128 / 1600, steps, delta) < 0.1 * eps


def test_the_authors_data_options_split_by_file_and_keep_a_fraction() -> None:
    """a9a on its own train / test files; MNIST (the test slices: 5000 + 1000 images) keeps 20%
    of its images, the kept ones of the test file as its test set, and a linear model."""
    from dpdl.settings import TaskOptions
    from dpdl.tasks import build_task

    a9a = build_task("logreg-a9a", 20, 0, TaskOptions(l2=0.0, split="files"))
    assert int(a9a.agent_sizes.sum()) == 32561 and a9a.describe()["dim"] == 123
    mnist = build_task("mnist-linear", 20, 0, TaskOptions(split="files", data_fraction=0.2))
    train, test = int(mnist.agent_sizes.sum()), len(mnist.test_targets)
    assert train + test == 1200 and 100 < test < 300  # 20% of 6000, about a sixth of it tested
    assert mnist.dim == 784 * 10 + 10
    again = build_task("mnist-linear", 20, 0, TaskOptions(split="files", data_fraction=0.2))
    assert (again.test_targets == mnist.test_targets).all()  # the seed fixes the kept images


def test_the_authors_protocol_runs_at_example_level_within_budget() -> None:
    """One short run of each calibration of the authors' protocol: example level (a sampling rate
    below one), dpdl's exact eps of the authors' noise far below the label, and of its own
    calibration at the label."""
    from dpdl_reproductions import corn_tradeoff, whisper_logreg

    job = next(
        job
        for job in whisper_logreg.jobs(True, parts=("authors",))
        if job["method"] == "whisper" and job["calibration"] == "authors"
    )
    theirs = corn_tradeoff.run_job({**job, "steps": 20})
    ours = corn_tradeoff.run_job({**job, "steps": 20, "calibration": "exact"})
    assert 0.0 < theirs["sampling_rate"] < 1.0
    assert theirs["epsilon"] < 0.5 * job["eps"] and 0.9 * job["eps"] < ours["epsilon"] <= job["eps"]
    assert theirs["trace_WRW"] > 10 * ours["trace_WRW"]  # their noise is the larger


def test_the_protocols_share_one_step_size_grid_and_leave_the_paper_runs_alone() -> None:
    """Both reproductions: the authors' part's jobs carry ``protocol = authors`` and tune every
    method over the same step sizes; the paper part's jobs are those of the committed runs, so it
    needs no new run."""
    from dpdl.experiments.results import read_rows
    from dpdl_reproductions import corn_mnist, whisper_logreg

    for module in (whisper_logreg, corn_mnist):
        authors = module.jobs(False, parts=("authors",))
        assert {job["protocol"] for job in authors} == {"authors"}
        grids = collections.defaultdict(set)
        for job in authors:
            grids[job["method"]].add(job["lr"])
        assert len({frozenset(grid) for grid in grids.values()}) == 1 and len(grids) == 3
        committed = [
            row for row in read_rows(RESULTS / module.NAME / "runs.csv") if not row.get("protocol")
        ]
        assert committed  # the committed runs are read
        paper = module.jobs(False, parts=("paper",))
        assert all("protocol" not in job for job in paper)
        assert module.followup_jobs(False, committed, parts=("paper",)) == []


def test_a_claim_that_fails_in_the_paper_protocol_and_holds_in_the_authors_is_authors_only() -> (
    None
):
    from dpdl_reproductions.corn_authors import merge_claims
    from dpdl_reproductions.report import Claim

    def claim(text: str, verdict: Verdict) -> Claim:
        return Claim("(a)", text, "m", verdict, "" if verdict is Verdict.HOLDS else "why")

    paper = [claim("x", Verdict.FAILS), claim("y", Verdict.HOLDS), claim("z", Verdict.FAILS)]
    authors = [claim("x", Verdict.HOLDS), claim("y", Verdict.FAILS), claim("z", Verdict.FAILS)]
    merged = merge_claims(paper, [*authors, claim("w", Verdict.HOLDS)], "example level")
    assert [c.verdict for c in merged] == [
        Verdict.AUTHORS_ONLY,
        Verdict.HOLDS,
        Verdict.FAILS,
        Verdict.HOLDS,
    ]
    assert "example level" in merged[0].reason and "Authors' protocol" in merged[0].measured
