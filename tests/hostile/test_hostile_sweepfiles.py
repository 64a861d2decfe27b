"""Hostile sweep files: ``dpdl sweep FILE --dry-run`` with files a user could write or damage.
Each is refused whole, before anything runs, with exit status 2 and one ``dpdl: error:`` line
naming the table, key or point, without a traceback and without writing anything; nothing
trains (the check builds neither data nor graphs), so each case takes a fraction of a second."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hostile_helpers import assert_clear_error, tree

from dpdl.cli import main

pytestmark = pytest.mark.hostile

#: A small valid job: the [base] of most cases.
BASE = '[base]\ntask = "quadratic"\nn = 5\nsteps = 3\neval-every = 3\n'
#: A small valid grid.
GRID = '[sweep]\nmechanism = ["ldp", "decor"]\n'
#: A grid that searches the step size.
TUNED = BASE + "[sweep]\nlr = [0.1, 0.2]\nseed = [0, 1]\n"
#: A torch task's job (nothing is loaded: the check reads no data).
TORCH = '[base]\ntask = "mnist-cnn"\nsteps = 3\neval-every = 3\n'


def _tune(spec: str) -> str:
    return TUNED + f"tune = {spec}\n"


# name -> (sweep file, a word the error line must contain)
CASES: dict[str, tuple[str, str]] = {
    # tables and keys, named with their path
    "unknown-table": (BASE + "[grid]\nlr = [0.1]\n", "[grid].lr"),
    "unknown-empty-table": (BASE + GRID + "[extra]\n", "[extra]"),
    "key-outside-tables": ("eps = 3\n" + BASE + GRID, "outside any table"),
    "base-unknown-key": (BASE + "stepz = 4\n" + GRID, "[base].stepz"),
    "sweep-unknown-key": (BASE + "[sweep]\nepz = [1, 2]\n", "[sweep].epz"),
    "grids-unknown-key": (
        BASE + "[[sweep]]\neps = [1]\n[[sweep]]\nbogus = [1]\n",
        "[[sweep]] #2.bogus",
    ),
    "base-subtable": ("[base.graph]\nn = 3\n[sweep]\neps = [1]\n", "graph"),
    "sweep-subtable": (BASE + "[sweep.eps]\nlow = 1\n", "eps"),
    "base-key-twice": (BASE + "batch-size = 8\nbatch_size = 9\n" + GRID, "twice"),
    "sweep-key-twice": (BASE + "[sweep]\nbatch-size = [8]\nbatch_size = [9]\n", "twice"),
    "resources-unknown-key": (BASE + GRID + "[resources]\nmemroy = 1\n", "[resources].memroy"),
    "record-unknown-key": (BASE + GRID + "[record]\nagents = [0]\n", "[record].agents"),
    "tune-unknown-key": (_tune('{metric = "optimality_gap", sedes = 2}'), "sedes"),
    "tune-at-unknown-option": (_tune('{metric = "optimality_gap", at = {epz = 1}}'), "epz"),
    # values: types and ranges
    "axis-empty": (BASE + "[sweep]\neps = []\n", "eps"),
    "axis-nan": (BASE + "[sweep]\neps = [1, nan]\n", "eps"),
    "axis-steps-zero": (BASE + "[sweep]\nsteps = [3, 0]\n", "steps"),
    "axis-unknown-mechanism": (BASE + '[sweep]\nmechanism = ["ldp", "laplace"]\n', "laplace"),
    "axis-single-value": (BASE + "[sweep]\neps = 3\n", "eps"),
    "axis-in-base-too": (BASE + "eps = 3\n[sweep]\neps = [1, 2]\n", "set in [base] too"),
    "zip-unequal": (BASE + "[sweep]\neps = [1, 2]\nlr = [0.1]\nzip = ['eps', 'lr']\n", "zip"),
    "zip-not-an-axis": (BASE + "[sweep]\neps = [1, 2]\nzip = ['eps', 'lr']\n", "zip"),
    "zip-one-key": (BASE + "[sweep]\neps = [1, 2]\nzip = ['eps']\n", "zip"),
    "point-bad-combination": (
        BASE + "groups = 2\n" + '[sweep]\nmechanism = ["whisper-multiseed", "cdp"]\n',
        "'mechanism': 'cdp'",
    ),
    "label-twice": (
        BASE + '[[sweep]]\nlabel = "a"\neps = [1]\n[[sweep]]\nlabel = "a"\neps = [2]\n',
        "#2.label",
    ),
    "label-blank": (BASE + '[[sweep]]\nlabel = "  "\neps = [1]\n[[sweep]]\neps = [2]\n', "label"),
    "label-two-lines": (
        BASE + '[[sweep]]\nlabel = "a\\nb"\neps = [1]\n[[sweep]]\neps = [2]\n',
        "label",
    ),
    "label-number": (BASE + "[[sweep]]\neps = [1]\n[[sweep]]\nlabel = 3\neps = [2]\n", "label"),
    # resources: finite, positive, within a node
    "cpus-nan": (BASE + GRID + "[resources]\ncpus = nan\n", "cpus"),
    "cpus-inf": (BASE + GRID + "[resources]\ncpus = inf\n", "cpus"),
    "cpus-zero": (BASE + GRID + "[resources]\ncpus = 0\n", "cpus"),
    "cpus-negative": (BASE + GRID + "[resources]\ncpus = -1\n", "cpus"),
    "cpus-huge": (BASE + GRID + "[resources]\ncpus = 1000000\n", "cpus"),
    "cpus-string": (BASE + GRID + '[resources]\ncpus = "two"\n', "cpus"),
    "cpus-bool": (BASE + GRID + "[resources]\ncpus = true\n", "cpus"),
    "gpus-huge": (BASE + GRID + "[resources]\ngpus = 1e300\n", "gpus"),
    "gpus-nan": (BASE + GRID + "[resources]\ngpus = nan\n", "gpus"),
    "gpus-negative": (BASE + GRID + "[resources]\ngpus = -1\n", "gpus"),
    "gpus-fraction-above-one": (BASE + GRID + "[resources]\ngpus = 1.5\n", "gpus"),
    "memory-zero": (BASE + GRID + "[resources]\nmemory = 0\n", "memory"),
    "memory-word": (BASE + GRID + '[resources]\nmemory = "lots"\n', "memory"),
    "memory-huge": (BASE + GRID + '[resources]\nmemory = "1e30"\n', "memory"),
    "memory-nan": (BASE + GRID + "[resources]\nmemory = nan\n", "memory"),
    "resources-not-a-table": ("resources = 3\n" + BASE + GRID, "resources"),
    # recorded curves and agents, for every point
    "curve-unknown": (BASE + GRID + '[record]\ncurves = ["test_los"]\n', "test_los"),
    "curve-of-another-task": (
        BASE + GRID + '[record]\ncurves = ["test_accuracy"]\n',
        "test_accuracy",
    ),
    "curve-tail-without-average": (
        BASE + GRID + '[record]\ncurves = ["optimality_gap_tail"]\n',
        "optimality_gap_tail",
    ),
    "curve-empty-name": (BASE + GRID + '[record]\ncurves = [""]\n', "curves"),
    "curve-twice": (BASE + GRID + '[record]\ncurves = ["train_loss", "train_loss"]\n', "twice"),
    "curve-not-a-list": (BASE + GRID + '[record]\ncurves = "train_loss"\n', "curves"),
    "node-beyond-n": (TORCH + "n = 4\n" + GRID + "[record]\nnodes = [4]\n", "agent 4"),
    "node-beyond-n-at-one-point": (
        TORCH + "[sweep]\nn = [10, 3]\n[record]\nnodes = [5]\n",
        "n = 3",
    ),
    "node-beyond-a-real-graph": (
        TORCH + 'graph = "florentine"\n' + GRID + "[record]\nnodes = [15]\n",
        "agent 15",
    ),
    "node-of-a-task-without-agents": (BASE + GRID + "[record]\nnodes = [0]\n", "no agent's own"),
    "node-negative": (BASE + GRID + "[record]\nnodes = [-1]\n", "nodes"),
    "node-bool": (BASE + GRID + "[record]\nnodes = [true]\n", "nodes"),
    "node-not-a-list": (BASE + GRID + "[record]\nnodes = 0\n", "nodes"),
    # the search: its metric and its axes
    "tune-metric-unknown": (_tune('"bogus"'), "bogus"),
    "tune-metric-of-another-task": (_tune('"test_accuracy"'), "test_accuracy"),
    "tune-metric-at-one-point": (
        '[base]\nsteps = 3\n[sweep]\ntask = ["quadratic", "logreg-a9a"]\nlr = [0.1, 0.2]\n'
        'tune = "optimality_gap"\n',
        "logreg-a9a",
    ),
    "tune-metric-empty": (_tune('""'), "tune"),
    "tune-over-seed": (_tune('{metric = "optimality_gap", over = ["seed"]}'), "luckiest seed"),
    "tune-over-eps": (
        BASE + '[sweep]\neps = [1, 10]\ntune = {metric = "optimality_gap", over = ["eps"]}\n',
        "largest budget",
    ),
    "tune-over-delta": (
        BASE + '[sweep]\ndelta = [1e-6, 1e-5]\ntune = {metric = "train_loss", over = "delta"}\n',
        "delta",
    ),
    "tune-over-graph-seed": (
        BASE + '[sweep]\ngraph-seed = [1, 2]\ntune = {metric = "train_loss", over = '
        '["graph-seed"]}\n',
        "graph-seed",
    ),
    "tune-over-gdp-mu": (
        BASE + '[sweep]\ngdp-mu = [0.5, 1]\ntune = {metric = "train_loss", over = ["gdp-mu"]}\n',
        "gdp-mu",
    ),
    "tune-over-lr-and-seed": (
        _tune('{metric = "optimality_gap", over = ["lr", "seed"]}'),
        "seed",
    ),
    "tune-over-not-swept": (_tune('{metric = "optimality_gap", over = ["clip"]}'), "clip"),
    "tune-over-twice": (_tune('{metric = "optimality_gap", over = ["lr", "lr"]}'), "twice"),
    "tune-over-number": (_tune('{metric = "optimality_gap", over = 3}'), "over"),
    "tune-goal": (_tune('{metric = "optimality_gap", goal = "up"}'), "goal"),
    "tune-seeds-zero": (_tune('{metric = "optimality_gap", seeds = 0}'), "seeds"),
    "tune-seeds-more-than-seeds": (_tune('{metric = "optimality_gap", seeds = 5}'), "seeds = 5"),
    "tune-at-number": (_tune('{metric = "optimality_gap", at = 3}'), "at"),
    "tune-at-seed": (_tune('{metric = "optimality_gap", at = {seed = 1}}'), "seed"),
    # a file that states no runs is not the default job
    "empty-file": ("", "states no runs"),
    "only-comments": ("# a sweep\n# to be written\n", "states no runs"),
    "empty-tables": ("[base]\n[sweep]\n", "states no runs"),
    "only-resources": ("[resources]\ncpus = 2\n", "states no runs"),
    "empty-grid-among-others": (BASE + "[[sweep]]\neps = [1]\n[[sweep]]\n", "#2 is empty"),
    # the size: counted without expanding, estimated before running
    "grid-of-a-billion-points": (
        BASE
        + "[sweep]\n"
        + "\n".join(
            f"{key} = [{', '.join(str(0.001 * (i + 1)) for i in range(1000))}]"
            for key in ("eps", "lr", "clip")
        )
        + "\n",
        "1,000,000,000 runs",
    ),
    "point-too-long": (
        '[base]\ntask = "quadratic"\nn = 5\n[sweep]\nsteps = [3, 100000000000000]\n',
        "sweep point {'steps': 100000000000000}",
    ),
    "point-too-large": (
        '[base]\ntask = "quadratic"\nsteps = 3\nmechanism = "whisper"\n[sweep]\nn = [5, 200000]\n',
        "cannot fit",
    ),
}

#: Cases refused through --set: (sweep file, assignments, a word the error line must contain).
SET_CASES: dict[str, tuple[str, list[str], str]] = {
    "set-tune-over-seed": (_tune('"optimality_gap"'), ['tune.over=["seed"]'], "seed"),
    "set-tune-metric": (_tune('"optimality_gap"'), ['tune.metric="nope"'], "nope"),
    "set-axis-empty": (BASE + GRID, ["sweep.mechanism=[]"], "mechanism"),
    "set-node-beyond-n": (
        TORCH + "n = 8\n" + GRID + "[record]\nnodes = [6]\n",
        ["n=4"],
        "agent 6",
    ),
    "set-huge-seeds": (
        BASE + "[sweep]\neps = [" + ", ".join(str(i + 1) for i in range(1000)) + "]\n",
        ["seed=[" + ", ".join(map(str, range(1000))) + "]"],
        "1,000,000 runs",
    ),
}


def _refused(
    path: Path,
    sets: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    keyword: str,
) -> None:
    out = tmp_path / "out"
    args = ["sweep", str(path), "--dry-run", "--jobs", "1", "--out", str(out)]
    args += [f"--set={assignment}" for assignment in sets]
    start = time.perf_counter()
    try:
        code = main(args)
    except SystemExit as stop:
        code = stop.code
    assert_clear_error(code, capsys.readouterr().err, keyword, args)
    assert tree(out) == []
    assert time.perf_counter() - start < 30  # answered at once, nothing expanded or run


@pytest.mark.parametrize("name", CASES)
def test_bad_sweep_file(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DPDL_MEMORY_LIMIT", "64G")  # the same refusals on every machine
    text, keyword = CASES[name]
    path = tmp_path / "sweep.toml"
    path.write_text(text)
    _refused(path, [], tmp_path, capsys, keyword)


@pytest.mark.parametrize("name", SET_CASES)
def test_bad_sweep_set(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    text, sets, keyword = SET_CASES[name]
    path = tmp_path / "sweep.toml"
    path.write_text(text)
    _refused(path, sets, tmp_path, capsys, keyword)


def test_a_sweep_longer_than_the_limit_though_each_run_fits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ten runs of about 17 minutes each fit an hour's limit one by one, not together on one
    worker: the sweep is refused naming its summed estimate."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DPDL_TIME_LIMIT", "1h")
    path = tmp_path / "sweep.toml"
    path.write_text(
        BASE.replace("steps = 3", "steps = 10000000")
        + "[sweep]\neps = ["
        + ", ".join(str(i + 1) for i in range(10))
        + "]\n"
    )
    _refused(path, [], tmp_path, capsys, "the sweep would take")
