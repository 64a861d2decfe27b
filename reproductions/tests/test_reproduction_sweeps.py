"""Reproductions whose runs are a sweep file (``dpdl sweep NAME``, the files in
``dpdl_reproductions/grids``): the jobs ``dpdl reproduce`` runs are the file's two
stages, the very jobs (cache keys) of the grid the reproduction's analysis reads, choosing what
its tuning chooses (checked on made-up metrics, nothing trained), in the full setting and the
quick one; and ``dpdl reproduce NAME --from-sweep DIR`` writes, from a sweep's ``runs.csv``, the
report the reproduction's own analysis writes from its runs (checked on the committed full
runs)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from dpdl.errors import ConfigError
from dpdl.experiments.results import read_rows, write_rows
from dpdl.experiments.sweeps.run import run_sweep
from dpdl.experiments.sweeps.spec import read_sweep, run_key
from dpdl.experiments.train import run_training
from dpdl.settings import to_options
from dpdl_reproductions import (
    corn_mnist,
    decor_fig1,
    horizon_design,
    lppa_parameters,
    lppa_tables,
    mafalda_authors,
    mafalda_housing,
    mafalda_images,
    mafalda_tradeoff,
    strategies,
    whisper_logreg,
    whisper_quadratic,
)
from dpdl_reproductions.grids import grid_file
from dpdl_reproductions.reproduce import REPRODUCTIONS as ALL
from dpdl_reproductions.reproduce import report_of_sweep
from dpdl_reproductions.sweep_jobs import SweepJobs
from dpdl_reproductions.tradeoff import (
    _JOB_KEYS,
    Study,
    final_jobs,
    summarise,
    tuning_jobs,
)

ROOT = Path(__file__).resolve().parents[1]


def _mafalda_studies(study: Study) -> list[Study]:
    """A MAFALDA figure's studies in dpdl's protocol: the private methods at every eps, no noise at
    the reference eps."""
    return [mafalda_tradeoff._private_study(study), mafalda_tradeoff._reference_study(study)]


#: Each reproduction with a sweep file: its module, the studies its analysis reads of the part
#: the file states, and the ``parts`` that run that part.
FILES: dict[str, tuple[ModuleType, Callable[[bool], list[Study]], dict[str, Any]]] = {
    "whisper-logreg": (
        whisper_logreg,
        lambda q: [whisper_logreg.study(q), whisper_logreg.authors_study(q)],
        {},
    ),
    "corn-mnist": (corn_mnist, lambda q: [corn_mnist.study(q), corn_mnist.authors_study(q)], {}),
    "whisper-quadratic": (
        whisper_quadratic,
        lambda q: [whisper_quadratic.study(q), *whisper_quadratic._noise_free(q).values()],
        {},
    ),
    "decor-fig1": (decor_fig1, lambda q: [decor_fig1.study(q)], {}),
    "mafalda-housing": (
        mafalda_housing,
        lambda q: _mafalda_studies(mafalda_housing.study(q)),
        {"parts": ("paper",)},
    ),
    "mafalda-images": (
        mafalda_images,
        lambda q: _mafalda_studies(mafalda_images.study(q)),
        {"parts": ("paper",)},
    ),
}
METRICS = ("optimality_gap", "test_loss", "test_accuracy", "squared_distance_tail")
_MAFALDA = ("dp-dsgd", "antipgd", "mafalda")


def _key(job: dict[str, Any]) -> str:
    return json.dumps(job, sort_keys=True)


def _made_up(job: dict[str, Any]) -> dict[str, Any]:
    """A job's row with metrics fixed by the job: distinct values, no ties."""
    value = int(hashlib.sha256(_key(job).encode()).hexdigest()[:12], 16) / 16**12
    return job | dict.fromkeys(METRICS, value)


@pytest.mark.parametrize("quick", [False, True], ids=["full", "quick"])
@pytest.mark.parametrize("name", FILES)
def test_a_reproductions_runs_are_its_sweep_files(name: str, quick: bool) -> None:
    module, studies_of, parts = FILES[name]
    studies = studies_of(quick)
    first = [_made_up(job) for job in module.jobs(quick, **parts)]
    rows = first + [_made_up(job) for job in module.followup_jobs(quick, first, **parts)]
    searched = [_made_up(job) for study in studies for job in tuning_jobs(study)]
    tuned = searched + [_made_up(job) for study in studies for job in final_jobs(study, searched)]
    assert {_key(row) for row in rows} == {_key(row) for row in tuned}
    assert len(rows) == len({_key(row) for row in rows})  # no job twice
    if not quick:  # the search itself is the study's (quick corn-mnist searches every point);
        # a grid without a search (the authors' search's LDP and CDP) runs all its seeds first
        assert {_key(row) for row in first} >= {_key(row) for row in searched}
    for study in studies:  # the analysis finds every tuned point on every seed
        assert summarise(study, rows) == summarise(study, tuned)


@pytest.mark.parametrize("quick", [False, True], ids=["full", "quick"])
def test_horizons_runs_are_its_sweep_file(quick: bool) -> None:
    """The horizon study's grid, every (task, graph, design, step size, seed), as its module
    states it, is its file's, in the same order; and the file has no second stage (every step
    size runs on every seed, as the analysis, which picks on the mean over all seeds, needs)."""
    tasks, graphs, seeds = horizon_design._setting(quick)
    grid = [
        {
            "version": horizon_design.VERSION,
            "task": task,
            "graph": graph,
            "n": 16,
            "p": 0.3,
            "method": method,
            "objective": objective,
            "eps": horizon_design.EPS,
            "steps": spec["steps"],
            "clip": spec["clip"],
            "lr": lr,
            "seed": seed,
        }
        for task, spec in tasks.items()
        for graph in graphs
        for method, objective in horizon_design.DESIGNS
        for lr in spec["lrs"]
        for seed in range(seeds)
    ]
    jobs = horizon_design.jobs(quick)
    assert [_key(job) for job in jobs] == [_key(job) for job in grid]  # the same order too
    sweep = horizon_design.SWEEP
    assert sweep.followup_jobs(sweep.sweep(quick), [_made_up(job) for job in jobs]) == []


@pytest.mark.parametrize("quick", [False, True], ids=["full", "quick"])
def test_the_strategies_runs_are_its_sweep_file_every_method_on_the_same_seeds(quick: bool) -> None:
    """The strategies report's grid: per panel (task, graph) every method at every mu of the panel
    on the same seeds, so that the methods pair over seeds; each a run of MAFALDA-SGD's authors'
    protocol (their housing or image jobs' configuration); no second stage."""
    jobs = strategies.jobs(quick)
    by_panel: dict[tuple[str, str], set] = {}
    for job in jobs:
        by_panel.setdefault((job["task"], job["graph"]), set()).add(
            (job["method"], job["mu"], job["seed"])
        )
    panels = {("housing-mlp-sklearn", "florentine")} if quick else set(strategies.PANELS)
    assert set(by_panel) == panels
    for points in by_panel.values():
        methods = {m for m, _, _ in points}
        mus = {mu for _, mu, _ in points}
        seeds = {s for _, _, s in points}
        assert methods == {*strategies.BASELINES, *strategies.STRATEGIES}
        assert points == {(m, mu, s) for m in methods for mu in mus for s in seeds}
        assert len(seeds) == (2 if quick else 3)
    assert len(jobs) == len({_key(job) for job in jobs})
    for job in jobs:
        config = strategies.config_of(job)
        assert (config.mixing, config.neighbouring, config.gdp_mu) == (
            "local-degree",
            "add-remove",
            job["mu"],
        )
        assert (config.steps, config.cycle, config.clip) == (32 if quick else 320, 16, 1.0)
    sweep = strategies.SWEEP
    assert sweep.followup_jobs(sweep.sweep(quick), [_made_up(job) for job in jobs]) == []


def test_a_sweep_file_that_sets_what_the_jobs_do_not_carry_is_refused(tmp_path) -> None:
    text = grid_file("whisper-logreg", quick=True).read_text()
    (tmp_path / "delta.toml").write_text(text.replace("[base]\n", "[base]\ndelta = 1e-6\n"))
    with pytest.raises(ConfigError, match="sweep file of whisper-logreg sets delta, which its"):
        SweepJobs("whisper-logreg").jobs(read_sweep(tmp_path / "delta.toml"))


def _housing_authors_jobs(
    graph: str, agents: int, quick: bool, seeds: int = 5, methods: tuple[str, ...] = _MAFALDA
) -> list[dict[str, Any]]:
    """The authors' housing jobs on ``graph`` as mafalda_authors listed them: every one of
    ``methods`` at every mu of the code's grid (quick: 2 passes, mu 0.2 and 2, one seed) on each
    seed, no noise once a seed where the methods are the figure's three."""
    passes, mus, seeds = (
        (2, (0.2, 2.0), 1) if quick else (20, (0.1, 0.2, 0.5, 1.0, 2.0, 5.0), seeds)
    )
    base = {
        "task": "housing-mlp",
        "graph": graph,
        "n": agents,
        "steps": passes * 16,
        "cycle": 16,
        "lr": 0.1,
        "clip": 1.0,
        "eval_every": 8,
        "protocol": "authors",
        "version": 3,
    }
    private = [
        {**base, "method": method, "mu": mu, "seed": seed}
        for mu in mus
        for method in methods
        for seed in range(seeds)
    ]
    if methods != _MAFALDA:
        return private
    return private + [{**base, "method": "none", "mu": 0.0, "seed": s} for s in range(seeds)]


def _mafalda_authors_jobs(quick: bool, part: str) -> list[dict[str, Any]]:
    """The jobs of mafalda-housing's ``part`` of the authors' protocol as the module listed them
    before its sweep file stated them (the cache's keys)."""
    h = mafalda_housing
    graphs = list(h.FIG5_GRAPHS.items())[: 1 if quick else None]
    if part == "authors":
        return _housing_authors_jobs(h.GRAPH, h.AGENTS, quick)
    if part == "graphs":
        return [job for g, (n, _) in graphs for job in _housing_authors_jobs(g, n, quick, 3)]
    per_agent = ([] if quick else [(h.GRAPH, (h.AGENTS, ""))]) + graphs
    return [
        job
        for g, (n, _) in per_agent
        if g in h.PER_AGENT_GRAPHS
        for job in _housing_authors_jobs(g, n, quick, 3, methods=("mafalda-l",))
    ]


@pytest.mark.parametrize("quick", [False, True], ids=["full", "quick"])
def test_mafalda_housings_authors_runs_are_its_sweep_files(quick: bool) -> None:
    """The authors' protocol's parts of mafalda-housing (every method at every mu, no noise, Fig.
    5's graphs, MAFALDA-L-SGD) are grids of its sweep file: the same jobs as the authors' list
    them (so the committed cache stands), each job's configuration the file's run, and no second
    stage for them (they tune nothing)."""
    sweep = mafalda_housing.SWEEP
    for part in ("authors", "graphs", "mafalda-l"):
        jobs = mafalda_housing.jobs(quick, (part,))
        expected = _mafalda_authors_jobs(quick, part)
        assert sorted(map(_key, jobs)) == sorted(map(_key, expected))
        for job in jobs[:3]:
            options = to_options(sweep.config_of(job))
            assert sweep.job_of({**options, "seed": job["seed"]}) == job
        rows = [_made_up(job) for job in jobs]
        assert mafalda_housing.followup_jobs(quick, rows, (part,)) == []
    committed = read_rows(ROOT / "results" / "mafalda-housing" / "runs.csv")
    if not quick:  # every committed run of the authors' protocol is a run of the file
        theirs = {
            _key({k: row[k] for k in _JOB_FIELDS}) for row in committed if row.get("protocol")
        }
        authors_parts = mafalda_housing.jobs(False, ("authors", "graphs", "mafalda-l"))
        stated = {_key({k: job[k] for k in _JOB_FIELDS}) for job in authors_parts}
        assert len(theirs) == 95 + 114 + 36 and theirs == stated


def _mafalda_images_authors_jobs(quick: bool) -> list[dict[str, Any]]:
    """The jobs of mafalda-images' authors' part as the module listed them before its sweep file
    stated them (the cache's keys): every method at every mu on 3 seeds per data set (quick:
    MNIST, 2 passes, mu 0.5 and 10, one seed, 32 images an agent, 500 tested), no noise once a
    seed."""
    passes, mus, seeds = (2, (0.5, 10.0), 1) if quick else (20, (1.0, 2.0, 5.0, 10.0), 3)
    base = {
        "graph": "florentine",
        "n": 15,
        "steps": passes * 16,
        "cycle": 16,
        "lr": 5.0,
        "decay_after": 81,
        "clip": 1.0,
        "examples": 32 if quick else 128,
        "test_examples": 500 if quick else 2000,
        "protocol": "authors",
        "version": 1,
    }
    return [
        {**base, "task": task, "method": method, "mu": mu, "seed": seed}
        for seed in range(seeds)
        for method in ("mafalda", "dp-dsgd", "antipgd", "none")
        for task in (("mnist-cnn",) if quick else ("mnist-cnn", "fashion-cnn"))
        for mu in (mus if method != "none" else (0.0,))
    ]


@pytest.mark.parametrize("quick", [False, True], ids=["full", "quick"])
def test_mafalda_images_authors_runs_are_its_sweep_files(quick: bool) -> None:
    """The authors' part of mafalda-images is two grids of its sweep file: the same jobs as the
    module listed (so the committed cache stands; every committed run of the part is one), each
    job's configuration the file's run, no second stage (they tune nothing)."""
    sweep = mafalda_images.SWEEP
    jobs = mafalda_images.jobs(quick, ("authors",))
    assert sorted(map(_key, jobs)) == sorted(map(_key, _mafalda_images_authors_jobs(quick)))
    for job in jobs[:3] + jobs[-1:]:
        options = to_options(sweep.config_of(job))
        assert sweep.job_of({**options, "seed": job["seed"]}) == job
    assert mafalda_images.followup_jobs(quick, [_made_up(job) for job in jobs], ("authors",)) == []
    if not quick:
        committed = read_rows(ROOT / "results" / "mafalda-images" / "runs.csv")
        fields = list(jobs[0])
        theirs = {_key({k: r[k] for k in fields}) for r in committed if r.get("protocol")}
        assert len(theirs) == 78 and theirs == set(map(_key, jobs))


def test_a_sweep_of_mafalda_images_authors_runs_is_their_runs(tmp_path) -> None:
    """``dpdl sweep mafalda-images --quick``'s authors' grids (7 runs) run: read back as the
    reproduction's rows, the jobs the module lists; node 0's and the agents' mean final accuracy and
    the noise's sigma of MAFALDA-SGD at mu = 10 and of the run without noise are those of the
    reproduction's own run, bit for bit."""
    sweep = mafalda_images.SWEEP
    result = run_sweep(sweep.sweep(True, ("authors",)), tmp_path / "out", progress=False)
    assert result.failed == 0 and len(result.rows) == 7
    rows = sweep.rows(read_rows(tmp_path / "out" / "runs.csv"))
    expected = _mafalda_images_authors_jobs(True)
    fields = list(expected[0])
    assert sorted(_key({k: row[k] for k in fields}) for row in rows) == sorted(map(_key, expected))
    for row in rows:
        if (row["method"], row["mu"]) in (("mafalda", 10.0), ("none", 0.0)):
            own = mafalda_images.run_job({key: row[key] for key in fields})
            for key in ("test_accuracy_node0", "test_accuracy", "sigma"):
                assert row[key] == own[key], key


_JOB_FIELDS = ("graph", "n", "steps", "method", "mu", "seed", "lr", "clip", "version")


def test_a_sweep_of_mafalda_housings_authors_runs_is_their_runs(tmp_path) -> None:
    """``dpdl sweep mafalda-housing --quick``'s Florentine grids (the part ``graphs``) run: read
    back as the reproduction's rows (:meth:`SweepJobs.rows`), each run's test loss at every
    evaluation, node 0's final test loss and sigma are those the reproduction's own run of the job
    gives, bit for bit; a grid whose label names no part is one error."""
    sweep = mafalda_housing.SWEEP
    result = run_sweep(sweep.sweep(True, ("graphs",)), tmp_path / "out", progress=False)
    assert result.failed == 0 and len(result.rows) == 7
    rows = sweep.rows(read_rows(tmp_path / "out" / "runs.csv"))
    expected = mafalda_housing.jobs(True, ("graphs",))
    fields = list(expected[0])
    assert sorted(_key({k: row[k] for k in fields}) for row in rows) == sorted(map(_key, expected))
    for row in rows:
        if (row["method"], row["mu"]) in (("mafalda", 0.2), ("none", 0.0)):
            own = mafalda_authors.run_job({key: row[key] for key in fields})
            for key in (mafalda_authors.CURVE, mafalda_authors.NODE_LOSS, "sigma", "test_loss"):
                assert row[key] == own[key], key
    unnamed = dataclasses.replace(sweep, part_labels={"Housing, Facebook ego": "paper"})
    with pytest.raises(ConfigError, match="the grid labelled 'Housing, Facebook ego, no noise'"):
        unnamed.sweep(True, ("paper",))


def _lppa_search(setting: dict[str, Any]) -> list[dict[str, Any]]:
    """An LPPA reproduction's search as its module listed it: DSGT at every step size on seed 0,
    per data set, for the setting's epochs."""
    return [
        lppa_tables.train_job(task, "dsgt", lr, 0, setting["epochs"])
        for task in setting["datasets"]
        for lr in setting["step_sizes"]
    ]


@pytest.mark.parametrize("quick", [False, True], ids=["full", "quick"])
def test_lppas_training_runs_are_its_sweep_files(quick: bool) -> None:
    """lppa's training runs, as the module listed them before its sweep file stated them: DSGT at
    every step size on seed 0, then every method at DSGT's best on every seed (chosen on made-up
    accuracies, ties none); the same jobs (cache keys), the DLG attacks beside them as before."""
    setting = lppa_tables._setting(quick)
    tuning = _lppa_search(setting)
    first = [_made_up(job) for job in lppa_tables.jobs(quick)]
    train = [row for row in first if row["kind"] == "train"]
    assert sorted(map(_key, lppa_tables.jobs(quick, ("training",)))) == sorted(map(_key, tuning))
    assert len(first) - len(train) == len(lppa_tables.jobs(quick, ("dlg",))) > 0

    def best(task: str) -> float:  # the module's own choice: DSGT's highest accuracy on seed 0
        return max((r for r in train if r["task"] == task), key=lambda r: r["optimality_gap"])["lr"]

    rows = [row | {"test_accuracy": row["optimality_gap"]} for row in first]
    final = [
        lppa_tables.train_job(task, method, best(task), seed, setting["epochs"])
        for task in setting["datasets"]
        for method in lppa_tables.METHODS
        for seed in range(setting["seeds"])
    ]
    expected = [job for job in final if job not in tuning]
    followup = lppa_tables.followup_jobs(quick, rows)
    assert sorted(map(_key, followup)) == sorted(map(_key, expected))
    assert lppa_tables.followup_jobs(quick, rows, ("dlg",)) == []


def test_a_sweep_of_lppas_training_runs_is_their_runs(tmp_path) -> None:
    """``dpdl sweep lppa --quick`` on Adult (``--set task=adult-mlp``): read back as the
    reproduction's rows, each run's accuracy after every epoch and its final metrics are those of
    the reproduction's own run of the job, bit for bit; a run that is none of its methods (here
    LPPA's injection every round) is one error naming it."""
    sweep = read_sweep(grid_file("lppa", quick=True), ["task=adult-mlp"])
    result = run_sweep(sweep, tmp_path / "out", progress=False)
    assert result.failed == 0 and len(result.rows) == 3
    rows = lppa_tables.SWEEP.rows(read_rows(tmp_path / "out" / "runs.csv"))
    for row in rows:
        job = {key: row[key] for key in ("kind", "task", "method", "lr", "seed", "epochs")}
        own = lppa_tables.run_job(job)
        history = lppa_tables._history(row)
        assert history == own["history"] and len(history) == 3  # epochs 0, 1, 2
        for key in ("test_accuracy", "test_loss", "consensus_distance"):
            assert row[key] == own[key], key
    options = to_options(lppa_tables.config_of(job)) | {"seed": job["seed"]}
    assert lppa_tables.job_of(options) == job
    with pytest.raises(ConfigError, match="is gradient tracking"):
        lppa_tables.job_of(options | {"mechanism": "lppa", "every_round": True})


def _lppa_parameters_settings(quick: bool) -> list[dict[str, Any]]:
    """lppa-parameters' settings as the module listed them before its sweep file stated them:
    Fig. 5's scales (DSGT once), Fig. 6a's local updates (at the setting's epochs, then for its
    rounds on one seed; LPPA at a tenth of beta at the two largest), Fig. 6b's clients at their
    own epochs (five clients are the setting's runs where those are the setting's epochs), Tables
    3-4's partitions, and where Fig. 6b's epochs are longer than the setting's (the quick one), the
    checks of misses over them (DP and LPPA at the largest beta; MNIST's #C = 2)."""
    setting = lppa_parameters._setting(quick)
    fig5, longer = lppa_parameters.FIG5, setting["client_epochs"]
    own = {"epochs": longer} if longer != setting["epochs"] else {}
    settings: list[dict[str, Any]] = [{"task": fig5}]
    settings += [{"task": fig5, "scale": scale} for scale in setting["scales"][1:]]
    settings += [{"task": fig5, "local_steps": k} for k in setting["local_steps"]]
    settings += [
        {"task": fig5, "local_steps": k, "rounds": setting["rounds"], "epochs": None, "seeds": 1}
        for k in setting["local_steps"]
    ]
    settings += [
        {"task": fig5, "local_steps": k, "scale": 0.0025, "methods": ("lppa",)}
        for k in setting["local_steps"][-2:]
    ]
    settings += [
        {"task": fig5, **own} | ({"clients": n} if n != 5 else {})
        for n in setting["clients"]
        if n != 5 or own
    ]
    for task in setting["datasets"]:
        settings += [{"task": task, **fields} for _, _, fields in lppa_parameters._partitions(task)]
    if not own:
        return settings
    return [
        *settings,
        {"task": fig5, "scale": setting["scales"][-1], **own, "methods": ("dp", "lppa")},
        {"task": fig5, "partition": "labels-per-agent", "labels": 2, **own},
    ]


@pytest.mark.parametrize("quick", [False, True], ids=["full", "quick"])
def test_lppa_parameters_training_runs_are_its_sweep_files(quick: bool) -> None:
    """lppa-parameters' training runs, as the module listed them before its sweep file stated
    them: DSGT at every step size on seed 0 per data set (i.i.d., five clients), then every
    method of every setting at the data set's choice on every seed (on made-up accuracies); the
    same jobs, the DLG attacks beside them as before; and the quick file's check at a fixed step
    size, which searches nothing, at the first stage."""
    setting = lppa_parameters._setting(quick)
    at_step = [  # the quick check at step size 0.1 of MNIST #C = 2, which its step size missed
        lppa_tables.train_job(
            "mnist-lenet",
            method,
            0.1,
            seed,
            setting["epochs"],
            partition="labels-per-agent",
            labels=2,
        )
        for method in lppa_tables.METHODS
        for seed in range(setting["seeds"])
        if quick
    ]
    tuning = _lppa_search(setting) + at_step
    first = [_made_up(job) for job in lppa_parameters.jobs(quick)]
    assert sorted(map(_key, lppa_parameters.jobs(quick, ("training",)))) == sorted(
        map(_key, tuning)
    )
    assert len(first) - len(tuning) == len(lppa_parameters.jobs(quick, ("dlg",))) > 0
    rows = [row | {"test_accuracy": row["optimality_gap"]} for row in first]

    def best(task: str) -> float:  # over the search: i.i.d., the checks at 0.1 aside
        searched = [
            r
            for r in rows
            if r["kind"] == "train" and r["task"] == task and r.get("partition") is None
        ]
        return max(searched, key=lambda r: r["test_accuracy"])["lr"]

    final = [
        lppa_tables.train_job(
            point["task"],
            method,
            best(point["task"]),
            seed,
            point.get("epochs", setting["epochs"]),
            **{k: v for k, v in point.items() if k not in ("task", "epochs", "seeds", "methods")},
        )
        for point in _lppa_parameters_settings(quick)
        for method in point.get("methods", lppa_tables.METHODS)
        if method != "dsgt" or "scale" not in point
        for seed in range(point.get("seeds", setting["seeds"]))
    ]
    expected = [job for job in final if job not in tuning]
    followup = lppa_parameters.followup_jobs(quick, rows)
    assert sorted(map(_key, followup)) == sorted(map(_key, expected))
    assert lppa_parameters.followup_jobs(quick, rows, ("dlg",)) == []


def test_a_run_in_rounds_is_evaluated_at_its_end_with_the_final_metrics_of_every_epoch() -> None:
    """Fig. 6a's runs in communication rounds are evaluated at their end only (the sweep file's
    ``eval-every`` equals their steps): their final metrics, which the analysis reads, are those
    of the same run evaluated after every epoch, as the committed runs were, bit for bit; the
    job of the run's options is the job; a length in steps that is no whole number of rounds is
    one error."""
    job = lppa_tables.train_job("adult-mlp", "lppa", 0.5, 0, None, local_steps=4, rounds=5)
    config = lppa_tables.config_of(job)
    assert (config.steps, config.eval_every, config.epochs) == (20, 20, None)
    every_epoch = dataclasses.replace(config, eval_every=6)
    end, epochs = run_training(config).runs[0], run_training(every_epoch).runs[0]
    assert [r["step"] for r in end.history] == [0, 20]
    assert [r["step"] for r in epochs.history] == [0, 6, 12, 18, 20]
    assert end.final == epochs.final
    options = to_options(config) | {"seed": 0}
    assert lppa_tables.job_of(options) == job
    with pytest.raises(ConfigError, match=r"steps \(--steps\) 22 is no multiple of local-steps"):
        lppa_tables.job_of(options | {"steps": 22})


def test_dpdl_sweep_takes_a_reproductions_name(tmp_path) -> None:
    def sweep(*args: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "dpdl.cli", "sweep", *args]
        return subprocess.run(command, capture_output=True, text=True, check=False)

    done = sweep("decor-fig1", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert 'decor_search (4): "trace", "appendix-d-0", "appendix-d-1"' in done.stdout
    assert done.stdout.rstrip().endswith("11893 runs, then each setting's choice on every seed")
    quick = sweep("whisper-logreg", "--quick", "--dry-run", "--set", "tune.seeds=2")
    assert quick.returncode == 0 and "on the first 2 seed(s)" in quick.stdout, quick.stderr
    unknown = sweep("decor-search", "--dry-run")
    assert unknown.returncode == 2 and "unknown named sweep 'decor-search'; known: whisper-" in (
        unknown.stderr
    )
    path = tmp_path / "a.toml"
    path.write_text((ROOT.parent / "examples" / "sweeps" / "a9a-eps.toml").read_text())
    not_a_name = sweep(str(path), "--quick", "--dry-run")
    assert not_a_name.returncode == 2 and "--quick: applies to a reproduction's name" in (
        not_a_name.stderr
    )


def _as_sweep_rows(rows: list[dict[str, Any]], module: ModuleType) -> list[dict[str, Any]]:
    """The rows of a reproduction's runs.csv that its file states as ``dpdl sweep`` writes its
    rows: a length in epochs beside the steps and evaluation period it resolved to, and the eps
    its accountant gave it as ``epsilon`` (a row that records it as ``eps`` only, the name of an
    option in a sweep's table: strategies')."""
    converted = []
    for row in rows:
        options = to_options(module.SWEEP.config_of(row))
        if options["epochs"] is not None:
            options |= {"steps": row["steps"], "eval_every": row["steps"] // options["epochs"]}
        results = {k: v for k, v in row.items() if k not in _JOB_KEYS and k not in options}
        if "epsilon" not in row and "eps" in row:
            results["epsilon"] = row["eps"]
        converted.append({"point": run_key(options), **options, "seed": row["seed"], **results})
    return converted


@pytest.mark.parametrize(
    ("name", "stated"),
    [
        ("whisper-logreg", " (the parts `paper`, `authors`)"),
        ("corn-mnist", " (the parts `paper`, `authors`)"),
        ("decor-fig1", " (the parts `least-squares`, `logreg-a9a`, `mnist-mlp`)"),
        ("mafalda-housing", " (the parts `paper`, `authors`, `graphs`, `mafalda-l`)"),
        ("mafalda-images", " (the parts `paper`, `authors`)"),
        ("whisper-quadratic", ""),
        ("horizon", ""),
        ("strategies", " (the parts `baselines`, `strategies`)"),
        ("lppa", " (the part `training`)"),
        ("lppa-parameters", " (the part `training`)"),
    ],
)
def test_a_report_from_a_sweeps_runs_is_the_reproductions_report(
    tmp_path, name: str, stated: str
) -> None:
    module = ALL[name]
    paper = [  # the training runs of the protocols the file states (not lppa's attacks)
        row
        for row in read_rows(ROOT / "results" / name / "runs.csv")
        if (row.get("protocol") or "") in module.SWEEP.protocols
        and row.get("kind", "train") == "train"
    ]
    write_rows(_as_sweep_rows(paper, module), tmp_path / "runs.csv")
    report = report_of_sweep(name, tmp_path).read_text()
    parts = {"parts": module.SWEEP_PARTS} if hasattr(module, "SWEEP_PARTS") else {}
    _, claims, notes = module.analyse(paper, tmp_path / "direct", False, **parts)
    assert claims and all(claim.measured in report for claim in claims)
    assert all(note.splitlines()[0] in report for note in notes)
    assert f"`dpdl sweep {name}`{stated}, then `dpdl reproduce {name} --from-sweep" in report
    assert f"{len(paper)} runs" in report


def test_a_sweep_folder_that_misses_runs_is_one_error_naming_it(tmp_path) -> None:
    paper = read_rows(ROOT / "results" / "corn-mnist" / "runs.csv")  # both protocols: the file's
    write_rows(_as_sweep_rows(paper[:-1], corn_mnist), tmp_path / "runs.csv")
    with pytest.raises(ConfigError, match="lacks runs of corn-mnist's grid"):
        report_of_sweep("corn-mnist", tmp_path)
    with pytest.raises(ConfigError, match="has no sweep file to report on"):
        report_of_sweep("decor-search", tmp_path)
    with pytest.raises(ConfigError, match=r"no runs\.csv here"):
        report_of_sweep("corn-mnist", tmp_path / "empty")
    write_rows(paper, tmp_path / "runs.csv")  # the reproduction's own table, not a sweep's
    with pytest.raises(ConfigError, match=r"runs\.csv is not the table of a sweep \(no column"):
        report_of_sweep("corn-mnist", tmp_path)


def test_reproduce_from_sweep_on_the_command_line(tmp_path) -> None:
    """The report goes into DIR/report (or --out), beside the sweep's own summary figures, whose
    names its figures share: those stay as the sweep wrote them."""
    paper = read_rows(ROOT / "results" / "corn-mnist" / "runs.csv")  # both protocols: the file's
    write_rows(_as_sweep_rows(paper, corn_mnist), tmp_path / "runs.csv")
    (tmp_path / "test_accuracy.png").write_bytes(b"the sweep's own figure")

    def from_sweep(*out: str) -> subprocess.CompletedProcess:
        command = ["reproduce", "corn-mnist", "--from-sweep", str(tmp_path), *out]
        return subprocess.run(
            [sys.executable, "-m", "dpdl.cli", *command], capture_output=True, text=True, check=True
        )

    done = from_sweep()
    assert "Reproduction: corn-mnist" in done.stdout
    assert done.stdout.rstrip().endswith(f"results: {tmp_path / 'report'}")
    report = (tmp_path / "report" / "REPORT.md").read_text()
    assert "Raw runs: `../runs.csv`." in report
    assert (tmp_path / "report" / "test_accuracy.png").stat().st_size > 10_000
    assert (tmp_path / "test_accuracy.png").read_bytes() == b"the sweep's own figure"
    from_sweep("--out", str(tmp_path / "elsewhere"))
    assert (tmp_path / "elsewhere" / "REPORT.md").is_file()


def test_every_reproductions_sweep_file_ships_with_the_package() -> None:
    """The package data (reproductions/pyproject.toml) holds every file of ``grids/``, so that an
    installed dpdl-reproductions reproduces from them."""
    import tomllib

    from dpdl.choices import SWEEP_REGISTRY
    from dpdl.registry import load_plugins
    from dpdl_reproductions.grids import GRIDS, named_sweeps

    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["dpdl_reproductions"]
    shipped = {path for glob in globs for path in GRIDS.parent.glob(glob)}
    files = set(GRIDS.rglob("*.toml"))
    assert files == shipped
    # every reproduction that reads its runs from a file has one, and one for --quick
    stated = {name for name, module in ALL.items() if hasattr(module, "SWEEP")}
    assert len(stated) == 11
    assert files == {GRIDS / q / f"{name}.toml" for name in stated for q in ("", "quick")}
    # and ``dpdl sweep NAME`` finds each by the name the plugin registered
    load_plugins()
    assert {name: SWEEP_REGISTRY.get(name) for name in SWEEP_REGISTRY} == named_sweeps()
    assert set(SWEEP_REGISTRY) == stated


def test_a_figure_whose_parts_are_tasks_needs_each_grid_to_fix_its_task(
    tmp_path, monkeypatch
) -> None:
    from dpdl_reproductions import grids

    text = grid_file("decor-fig1", quick=True).read_text()
    (tmp_path / "decor-fig1.toml").write_text(text)
    monkeypatch.setattr(grids, "GRIDS", tmp_path)
    parts = decor_fig1.SWEEP.sweep(False, ("logreg-a9a",))
    assert {dict(grid.fixed)["task"] for grid in parts.grids} == {"logreg-a9a"}
    assert len(parts.grids) == 3  # LDP, DECOR, CDP
    swept = text.replace('task = "least-squares"', 'task = ["least-squares"]', 1)
    (tmp_path / "decor-fig1.toml").write_text(swept)
    with pytest.raises(ConfigError, match="fixes its task"):
        decor_fig1.SWEEP.sweep(False, ("logreg-a9a",))
    with pytest.raises(ConfigError, match="states no parts"):
        SweepJobs("decor-fig1").sweep(False, ("logreg-a9a",))


def test_a_figure_whose_parts_are_protocols_splits_its_file_by_the_data_split() -> None:
    """corn-mnist's parts: its grids on MNIST's own test file are the authors' protocol's, the
    others the papers'; a grid whose option names no part is one error."""
    for quick in (False, True):
        sweep = corn_mnist.SWEEP
        paper, authors = (sweep.sweep(quick, (part,)).grids for part in ("paper", "authors"))
        assert {dict(grid.fixed)["task"] for grid in paper} == {"mnist-mlp"}
        assert {dict(grid.fixed)["task"] for grid in authors} == {"mnist-linear"}
        assert len(paper) + len(authors) == len(sweep.sweep(quick).grids) == 4
    named = SweepJobs("corn-mnist", part_option="task", part_names={"mnist-mlp": "paper"})
    with pytest.raises(ConfigError, match="task 'mnist-linear' names no part"):
        named.sweep(False, ("paper",))
