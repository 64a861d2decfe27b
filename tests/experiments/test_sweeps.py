"""Sweeps (``dpdl sweep``): the file's grid and its errors, the same table from the local executor
and from a local Ray, resuming after a kill with each point computed once, and a failed point that
does not end the sweep. Small settings (the quadratic, n = 5) keep the file under a minute."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from dpdl.errors import ConfigError, MissingDependencyError
from dpdl.experiments.executors import DIED, ExecutorOptions, LocalExecutor, RayExecutor
from dpdl.experiments.results import read_rows
from dpdl.experiments.sweeps.run import run_sweep
from dpdl.experiments.sweeps.spec import read_sweep
from dpdl.experiments.sweeps.tuning import search_runs
from dpdl.experiments.train import TrainConfig, run_training
from dpdl.settings import TaskOptions
from dpdl.tasks import build_task

ROOT = Path(__file__).resolve().parents[2]

SMALL = """\
[base]
task = "quadratic"
n = 5
steps = 30
eval-every = 30

[sweep]
mechanism = ["ldp", "decor"]
seed = [0, 1]
"""


def _file(tmp_path: Path, text: str, name: str = "sweep.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_lists_are_crossed_zip_pairs_them_and_each_seed_is_a_run(tmp_path) -> None:
    text = """\
[base]
task = "quadratic"
seed = [0, 1, 2]

[sweep]
mechanism = ["ldp", "decor"]
eps = [1, 3, 10]
steps = [10, 20, 30]
zip = ["eps", "steps"]
"""
    sweep = read_sweep(_file(tmp_path, text))
    points = sweep.points()
    assert len(points) == 2 * 3 * 3  # mechanism x (eps, steps) paired x three seeds
    assert {(p["eps"], p["steps"]) for p in points} == {(1.0, 10), (3.0, 20), (10.0, 30)}
    assert all(len(p["seed"]) == 1 for p in points)
    assert sweep.grids[0].swept == ("mechanism", "eps", "steps")
    fixed = read_sweep(_file(tmp_path, text), ["eps=5", "sweep.seed=[7]"]).points()
    assert len(fixed) == 2 * 3 and {p["eps"] for p in fixed} == {5.0}  # steps still moves
    assert {p["seed"][0] for p in fixed} == {7}


def test_default_leaves_an_option_unset_beside_set_values(tmp_path) -> None:
    # the task's own step size (no step size) beside set ones, in one search
    text = """\
[base]
task = "quadratic"
mechanism = "decor"

[sweep]
lr = ["default", 0.1]
schedule = ["default", "constant"]
"""
    points = read_sweep(_file(tmp_path, text)).points()
    assert {p["lr"] for p in points} == {None, 0.1}
    assert {p["schedule"] for p in points} == {None, "constant"}
    for text in ("[sweep]\neps = ['defualt']\n", "[sweep]\nmechanism = ['defualt']\n"):
        with pytest.raises(ConfigError, match=r"sweep\.toml:2: (eps|mechanism): expected"):
            read_sweep(_file(tmp_path, text))


def test_default_gives_back_an_options_default(tmp_path) -> None:
    """A search's ``at`` gives back the default of what its grid sets: a grid of lengths in steps
    searches once, at a length in epochs."""
    text = """\
[base]
task = "logreg-a9a"
eps = 3

[sweep]
steps = [40, 80]
eval-every = [40, 80]
zip = [["steps", "eval-every"]]
lr = [0.1, 0.2]
tune = { metric = "test_loss", at = { epochs = 3, steps = "default", eval-every = "default" } }
"""
    sweep = read_sweep(_file(tmp_path, text))
    assert {(p["epochs"], p["steps"], p["eval_every"]) for p in sweep.points()} == {
        (None, 40, 40),
        (None, 80, 80),
    }
    searched = search_runs(sweep)
    assert {(r["epochs"], r["steps"], r["eval_every"]) for r in searched} == {
        (3, TrainConfig.steps, TrainConfig.eval_every)
    }
    assert len(searched) == 2  # one search at the setting, for both lengths


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[base]\ntask = "quadratic"\n\n[sweep]\nepz = [1, 2]\n',
            "sweep.toml:5: [sweep].epz: unknown option",
        ),
        ("[base]\nsteps = 10\n\n[sweep]\neps = [1, 'x']\n", "sweep.toml:5: eps: expected a number"),
        ("[sweep]\nmechanism = ['ldp', 'nope']\n", "sweep.toml:2: mechanism: expected one of"),
        ("[sweep]\neps = 3\n", "sweep.toml:2: eps: an axis is a non-empty list"),
        ("[base]\neps = 3\n[sweep]\neps = [1]\n", "sweep.toml:4: eps: set in [base] too"),
        ("[sweep]\neps = [1, 2]\nn = [5]\nzip = ['eps', 'n']\n", "sweep.toml:4: zip: the zipped"),
        ("[sweep]\nlr = [0.1]\ntune = {metric = 'x', goal = 'up'}\n", "sweep.toml:3: tune: goal"),
        ("[grid]\neps = [1]\n", "sweep.toml:1: [grid].eps: a sweep file has the tables"),
        ("[resources]\ngpus = -1\n", "sweep.toml:2: [resources].gpus: expected a finite number"),
        (
            "[record]\ncurves = 'test_loss'\n",
            "sweep.toml:2: [record].curves: expected a list of metric",
        ),
        ("[record]\nnodes = [0, -1]\n", "sweep.toml:2: [record].nodes: expected a list of agent"),
        (
            "[record]\nnodes = [1, 1]\n",
            "sweep.toml:2: [record].nodes: [1, 1] names one entry twice",
        ),
        (
            "[record]\nagents = [0]\n",
            "sweep.toml:2: [record].agents: unknown key; known: curves, nodes",
        ),
    ],
)
def test_a_bad_file_names_its_line_and_key(tmp_path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[")):
        read_sweep(_file(tmp_path, text))


def test_the_step_size_search_keeps_the_best_step_size_per_setting(tmp_path) -> None:
    text = SMALL + 'lr = [1e-4, 1e-2]\ntune = "optimality_gap"\n'
    result = run_sweep(
        read_sweep(_file(tmp_path, text)), tmp_path / "out", workers=2, progress=False
    )
    assert len(result.rows) == 8
    summary = (tmp_path / "out" / "summary.csv").read_text().splitlines()
    assert summary[0].startswith("mechanism,lr,runs,optimality_gap_mean,optimality_gap_low,")
    assert len(summary) == 1 + 2  # one line per mechanism: its best step size
    assert all(",0.01,2," in line for line in summary[1:])  # the larger step learns more


def test_a_row_records_the_sampling_rate_of_an_example_level_guarantee(tmp_path) -> None:
    """Example level: the largest Poisson rate an agent's batch gives (its smallest agent's), the
    rate the accountant used; agent level: 1. The papers' calibration runs from a file too."""
    text = """\
[base]
task = "logreg-a9a"
n = 4
steps = 5
eval-every = 5
batch-size = 16
mechanism = "ldp"

[sweep]
clip-level = ["agent", "example"]
calibration = ["exact", "paper"]
"""
    result = run_sweep(
        read_sweep(_file(tmp_path, text)), tmp_path / "out", workers=1, progress=False
    )
    smallest = int(build_task("logreg-a9a", 4, 0, TaskOptions()).agent_sizes.min())
    rates = {(row["clip_level"], row["calibration"]): row["sampling_rate"] for row in result.rows}
    assert rates == {
        ("agent", "exact"): 1.0,
        ("agent", "paper"): 1.0,
        ("example", "exact"): pytest.approx(16 / smallest),
        ("example", "paper"): pytest.approx(16 / smallest),
    }
    for row in result.rows:  # the papers' forms stay below their label at eps 10; exact meets it
        assert row["epsilon"] <= row["eps"]


def test_record_adds_a_metrics_curve_and_one_agents_final_metrics(tmp_path) -> None:
    """``[record]``: each run's row holds the test loss at every evaluation (a JSON list, the same
    numbers ``dpdl train`` records) and agents 0 and 2's final test loss and accuracy, which
    average, with the other agents', to the run's (the mean over agents); a curve that is no
    metric, an agent beyond n, and agents' metrics a task does not keep are errors naming them."""
    text = """\
[base]
task = "mnist-cnn"
n = 3
steps = 4
eval-every = 2
batch-size = 8
examples-per-agent = 16
test-examples = 64
partition = "iid"
mechanism = "ldp"

[sweep]
seed = [0, 1]

[record]
curves = ["test_loss"]
nodes = [0, 2]
"""
    result = run_sweep(
        read_sweep(_file(tmp_path, text)), tmp_path / "out", workers=1, progress=False
    )
    config = TrainConfig(
        task="mnist-cnn",
        n=3,
        steps=4,
        eval_every=2,
        batch_size=8,
        mechanism="ldp",
        seeds=(1,),
        task_options=TaskOptions(partition="iid", examples_per_agent=16, test_examples=64),
    )
    run = run_training(config).runs[0]
    (row,) = (row for row in read_rows(tmp_path / "out" / "runs.csv") if row["seed"] == 1)
    assert json.loads(row["test_loss_curve"]) == [record["test_loss"] for record in run.history]
    assert len(json.loads(row["test_loss_curve"])) == 3  # steps 0, 2, 4
    for metric in ("test_loss", "test_accuracy"):
        values = run.agent_metrics[metric]
        assert (row[f"{metric}_node0"], row[f"{metric}_node2"]) == (values[0], values[2])
        assert sum(values) / 3 == pytest.approx(row[metric], rel=1e-6)
    assert "test_loss_node1" not in row and "test_accuracy_curve" not in row
    assert len(result.rows) == 2
    for wrong, message in [
        ('curves = ["test_los"]', r"\[record\] curves: 'test_los' is not a metric of every run"),
        ("nodes = [3]", r"\[record\] nodes: agent 3 is not an agent of the run"),
    ]:
        bad = text.replace('curves = ["test_loss"]\nnodes = [0, 2]', wrong)
        with pytest.raises(ConfigError, match=message):
            run_sweep(read_sweep(_file(tmp_path, bad)), tmp_path / "out", progress=False)
    florentine = text.replace("n = 3\n", 'graph = "florentine"\n')  # 15 agents, n unused
    with pytest.raises(ConfigError, match=r"nodes: agent 15 is not an agent of the run .*\(15 "):
        run_sweep(
            read_sweep(_file(tmp_path, florentine.replace("nodes = [0, 2]", "nodes = [15]"))),
            tmp_path / "florentine",
            progress=False,
        )
    quadratic = SMALL + "\n[record]\nnodes = [0]\n"
    with pytest.raises(ConfigError, match=r"nodes: a run of this sweep keeps no agent's own"):
        run_sweep(read_sweep(_file(tmp_path, quadratic)), tmp_path / "quad", progress=False)


@pytest.fixture(scope="module")
def local_table(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("local")
    sweep = read_sweep(_file(folder, SMALL))
    run_sweep(sweep, folder / "out", workers=2, progress=False)
    return (folder / "out" / "runs.csv").read_text()


@pytest.fixture(scope="module")
def local_ray():
    """A Ray on this machine, started by the test and shut down after (the executor leaves a Ray it
    did not start running)."""
    ray = pytest.importorskip("ray")
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING")
    yield ray
    ray.shutdown()


def test_local_executor_and_a_local_ray_give_identical_tables(
    tmp_path, local_table, local_ray
) -> None:
    with RayExecutor(ExecutorOptions()) as executor:
        result = run_sweep(
            read_sweep(_file(tmp_path, SMALL)), tmp_path / "out", executor, progress=False
        )
    assert local_ray.is_initialized()  # the test's Ray is left to the test
    assert len(result.rows) == 4 and result.failed == 0
    assert (tmp_path / "out" / "runs.csv").read_text() == local_table


def _entries(folder: Path) -> dict[str, tuple[int, int]]:
    """Each stored point's file name -> (inode, modification time): rewritten if recomputed."""
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in folder.glob("*.json")}


def test_a_killed_sweep_resumes_and_computes_each_point_once(tmp_path, local_table) -> None:
    text = SMALL.replace("steps = 30", "steps = 15000").replace("eval-every = 30", "") + (
        "eps = [5, 10]\n"
    )
    path = _file(tmp_path, text)
    points = tmp_path / "out" / "points"
    command = [sys.executable, "-m", "dpdl.cli", "-q", "sweep", str(path), "--jobs", "1"]
    command += ["--out", str(tmp_path / "out"), "--no-progress"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    process = subprocess.Popen(command, env=env, start_new_session=True)
    deadline = time.monotonic() + 60
    while len(_entries(points)) < 2 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)  # the sweep and its workers
    process.wait()
    before = _entries(points)
    assert 2 <= len(before) < 8, "the sweep was not killed halfway"
    result = run_sweep(read_sweep(path), tmp_path / "out", workers=2, progress=False)
    after = _entries(points)
    assert len(result.rows) == 8 and result.failed == 0 and len(after) == 8
    assert {name: after[name] for name in before} == before  # none computed twice


def test_a_failed_point_is_a_row_with_its_error_and_the_others_run(tmp_path) -> None:
    text = SMALL + 'clip-level = ["agent", "example"]\n'  # the quadratic has no examples
    result = run_sweep(
        read_sweep(_file(tmp_path, text)), tmp_path / "out", workers=2, progress=False
    )
    assert result.failed == 4 and len(result.rows) == 8
    assert all("no examples" in row["error"] for row in result.rows if "error" in row)
    again = run_sweep(
        read_sweep(_file(tmp_path, text)), tmp_path / "out", workers=2, progress=False
    )
    assert again.failed == 4  # failures are not stored: the next run tries them again


def _dies_on_two(job: dict) -> dict:
    if job["x"] == 2:
        os._exit(1)  # a worker killed (out of memory, a crash in native code)
    return {"square": job["x"] ** 2}


def test_the_local_executor_survives_a_worker_process_that_dies() -> None:
    jobs = [{"x": x} for x in range(6)]
    outcomes = {o.job["x"]: o for o in LocalExecutor(ExecutorOptions(2)).map(_dies_on_two, jobs)}
    assert sorted(outcomes) == list(range(6))
    assert outcomes[2].result is None and outcomes[2].error == DIED
    assert all(outcomes[x].result == {"square": x * x} for x in (0, 1, 3, 4, 5))


def test_two_sweeps_writing_into_one_folder_at_once_leave_whole_files(
    tmp_path, local_table
) -> None:
    sweep = read_sweep(_file(tmp_path, SMALL))

    def run(_: int) -> int:
        return len(run_sweep(sweep, tmp_path / "out", workers=1, progress=False).rows)

    with ThreadPoolExecutor(2) as pool:
        assert list(pool.map(run, [0, 1])) == [4, 4]
    assert (tmp_path / "out" / "runs.csv").read_text() == local_table
    assert len(list((tmp_path / "out" / "points").glob("*.json"))) == 4
    assert not list((tmp_path / "out").rglob("*.partial"))


def test_the_ray_executor_without_ray_names_the_extra(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'dpdl\[ray\]'"):
        RayExecutor(ExecutorOptions())


def test_local_executor_refuses_an_address() -> None:
    with pytest.raises(ConfigError, match="--executor ray"):
        LocalExecutor(ExecutorOptions(address="head:6379"))


def test_dry_run_prints_the_grid_and_its_size(tmp_path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "dpdl.cli", "sweep", str(_file(tmp_path, SMALL)), "--dry-run"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        check=True,
    )
    assert done.stdout.splitlines()[-1] == "4 runs"
    assert 'mechanism (2): "ldp", "decor"' in done.stdout


def _rows(path: Path) -> list[dict[str, str]]:
    import csv

    with path.open() as handle:
        return list(csv.DictReader(handle))


def test_a_search_in_two_stages_tunes_on_the_first_seeds_and_runs_the_choice_on_all(
    tmp_path,
) -> None:
    text = SMALL.replace("seed = [0, 1]", "seed = [0, 1, 2]") + (
        'lr = [1e-4, 1e-2]\ntune = {metric = "optimality_gap", seeds = 1}\n'
    )
    sweep = read_sweep(_file(tmp_path, text))
    result = run_sweep(sweep, tmp_path / "out", workers=2, progress=False)
    rows = _rows(tmp_path / "out" / "runs.csv")
    # the search: 2 mechanisms x 2 step sizes on seed 0; then the choice on seeds 1 and 2
    assert len(rows) == len(result.rows) == 2 * 2 + 2 * 2
    summary = _rows(tmp_path / "out" / "summary.csv")
    assert len(summary) == 2
    for mechanism in ("ldp", "decor"):
        searched = {
            row["lr"]: float(row["optimality_gap"])
            for row in rows
            if row["mechanism"] == mechanism and row["seed"] == "0"
        }
        assert len(searched) == 2
        best = min(searched, key=searched.get)
        finals = [r for r in rows if r["mechanism"] == mechanism and r["lr"] == best]
        losers = [r for r in rows if r["mechanism"] == mechanism and r["lr"] != best]
        assert sorted(r["seed"] for r in finals) == ["0", "1", "2"]
        assert [r["seed"] for r in losers] == ["0"]  # never run past the search
        (line,) = [line for line in summary if line["mechanism"] == mechanism]
        assert line["lr"] == best and line["runs"] == "3"
        mean = sum(float(r["optimality_gap"]) for r in finals) / 3
        assert float(line["optimality_gap_mean"]) == pytest.approx(mean, rel=1e-12)
    timing = (tmp_path / "out" / "timing.json").read_text()
    assert '"runs": 8' in timing and '"runs_with_compute_seconds": 8' in timing


def test_a_search_at_one_setting_chooses_for_every_value_of_it(tmp_path) -> None:
    text = SMALL + (
        'eps = [5, 10]\nlr = [1e-4, 1e-2]\ntune = {metric = "optimality_gap", at = {eps = 10}}\n'
    )
    run_sweep(read_sweep(_file(tmp_path, text)), tmp_path / "out", workers=2, progress=False)
    rows = _rows(tmp_path / "out" / "runs.csv")
    at_five = [row for row in rows if row["eps"] == "5.0"]
    assert len(rows) == 2 * 2 * 2 + 2 * 2  # the search at eps 10, then the choice at eps 5
    assert len(at_five) == 2 * 2 and len({row["lr"] for row in at_five}) == 1
    summary = _rows(tmp_path / "out" / "summary.csv")
    for mechanism in ("ldp", "decor"):
        lines = [line for line in summary if line["mechanism"] == mechanism]
        assert len(lines) == 2 and lines[0]["lr"] == lines[1]["lr"]  # one choice for both eps


GRIDS = """\
[base]
task = "quadratic"
n = 5
steps = 30
eval-every = 30
mechanism = "ldp"
seed = [0, 1]

[[sweep]]
label = "(a) eps"
p = 0.5
eps = [5, 10]

[[sweep]]
label = "(b) p"
eps = 10
p = [0.5, 0.8]
"""


def test_several_grids_run_their_union_once_and_summarise_a_panel_each(tmp_path) -> None:
    sweep = read_sweep(_file(tmp_path, GRIDS))
    assert [grid.label for grid in sweep.grids] == ["(a) eps", "(b) p"]
    assert len(sweep.points()) == (2 + 2 - 1) * 2  # (eps 10, p 0.5) is in both grids
    result = run_sweep(sweep, tmp_path / "out", workers=2, progress=False)
    assert len(result.rows) == 6 and result.failed == 0
    summary = _rows(tmp_path / "out" / "summary.csv")
    assert [(line["grid"], line["eps"] or line["p"]) for line in summary] == [
        ("(a) eps", "5.0"),
        ("(a) eps", "10.0"),
        ("(b) p", "0.5"),
        ("(b) p", "0.8"),
    ]
    shared = [
        line for line in summary if line["optimality_gap_mean"] == summary[1]["optimality_gap_mean"]
    ]
    assert len(shared) == 2  # the shared point is one set of runs, summarised in both panels
    assert (tmp_path / "out" / "optimality_gap.png").is_file()
    # --set sets an axis where a grid sweeps it, never where a grid fixes the option
    narrowed = read_sweep(_file(tmp_path, GRIDS), ["sweep.eps=[3]"])
    assert {(p["eps"], p["p"]) for p in narrowed.points()} == {(3.0, 0.5), (10.0, 0.5), (10.0, 0.8)}


def test_grids_of_tasks_with_other_metrics_summarise_each_its_own(tmp_path) -> None:
    # DECOR Fig. 1's file in small: least squares reports an optimality gap, a9a a test loss
    text = """\
[base]
n = 5
steps = 10
eval-every = 10
seed = [0, 1]

[[sweep]]
label = "quadratic"
task = "quadratic"
eps = [5, 10]

[[sweep]]
label = "a9a"
task = "logreg-a9a"
batch-size = 16
eps = [5, 10]
"""
    result = run_sweep(read_sweep(_file(tmp_path, text)), tmp_path / "out", progress=False)
    assert result.failed == 0 and {"optimality_gap", "test_loss"} <= set(result.metrics)
    summary = _rows(tmp_path / "out" / "summary.csv")
    assert [line["grid"] for line in summary] == ["quadratic"] * 2 + ["a9a"] * 2
    for line in summary:
        mine, other = (
            ("optimality_gap", "test_loss")
            if line["grid"] == "quadratic"
            else ("test_loss", "optimality_gap")
        )
        assert float(line[f"{mine}_mean"]) > 0 and line[f"{other}_mean"] == ""
    assert (tmp_path / "out" / "test_loss.png").is_file()
    assert (tmp_path / "out" / "optimality_gap.png").is_file()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[sweep]\nlr = [0.1]\ntune = {metric = 'x', seeds = 0}\n", "sweep.toml:3: tune: seeds"),
        (
            "[sweep]\nlr = [0.1]\ntune = {metric = 'x', at = {lr = 1}}\n",
            "tune.at: 'lr' is searched",
        ),
        ("[sweep]\nlr = [0.1]\ntune = {metric = 'x', at = {epz = 1}}\n", "tune.at: unknown option"),
        ("[[sweep]]\neps = [1]\n[[sweep]]\nlabel = 3\n", "sweep.toml:4: label: expected"),
        ("[[sweep]]\neps = [1]\n[[sweep]]\np = 'x'\n", "sweep.toml:4: p: expected a number"),
    ],
)
def test_a_bad_search_or_grid_names_its_line_and_key(tmp_path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[")):
        read_sweep(_file(tmp_path, text))


def test_a_search_needs_as_many_seeds_as_it_names(tmp_path) -> None:
    text = SMALL + 'lr = [1e-4, 1e-2]\ntune = {metric = "optimality_gap", seeds = 3}\n'
    with pytest.raises(ConfigError, match=r"tune: seeds = 3, but the point .* has 2 seed"):
        run_sweep(read_sweep(_file(tmp_path, text)), tmp_path / "out", workers=1, progress=False)


def test_set_tune_changes_every_search_and_only_searches(tmp_path) -> None:
    from dpdl.experiments.sweeps.tuning import search_runs

    text = SMALL.replace("seed = [0, 1]", "seed = [0, 1, 2]") + (
        'lr = [1e-4, 1e-2]\ntune = {metric = "optimality_gap", seeds = 2}\n'
    )
    path = _file(tmp_path, text)
    assert len(search_runs(read_sweep(path))) == 2 * 2 * 2
    sweep = read_sweep(path, ["tune.seeds=1", "tune.goal=max"])
    assert (sweep.grids[0].tune.seeds, sweep.grids[0].tune.goal) == (1, "max")
    assert len(search_runs(sweep)) == 2 * 2 * 1
    with pytest.raises(ConfigError, match=r"tune: seeds is a number .* got 0"):
        read_sweep(path, ["tune.seeds=0"])
    with pytest.raises(ConfigError, match=r"--set tune.seeds: .* has no search"):
        read_sweep(_file(tmp_path, SMALL, "plain.toml"), ["tune.seeds=1"])


def test_a_row_states_sigma_only_for_a_mechanism_that_has_one(local_table) -> None:
    """LDP's rows hold its noise's sigma; DECOR's, with no single sigma, an empty cell (they once
    said 0.0, as if DECOR added no noise)."""
    rows = list(csv.DictReader(io.StringIO(local_table)))
    sigma = {row["mechanism"]: row["sigma"] for row in rows}
    assert float(sigma["ldp"]) > 0 and sigma["decor"] == ""


@pytest.mark.parametrize(
    "text",
    [
        SMALL,
        SMALL
        + "eps = [1, 2, 3]\nlr = [0.1, 0.2]\nzip = [['eps', 'mechanism']]\n".replace(
            "['eps', 'mechanism']", "['lr', 'mechanism']"
        ),
        '[base]\ntask = "quadratic"\nseed = [0, 1, 2]\n[sweep]\neps = [1, 2]\np = [0.5]\n',
        '[base]\ntask = "quadratic"\n[sweep]\neps = [1, 2]\nseed = [[0], [1, 2]]\n'
        "zip = ['eps', 'seed']\n",
        '[base]\ntask = "quadratic"\n[[sweep]]\neps = [1, 2]\n[[sweep]]\nlr = [0.1, 0.2, 0.3]\n'
        "seed = [4, 5]\n",
    ],
)
def test_the_size_of_a_grid_is_counted_without_expanding_it(tmp_path, text: str) -> None:
    """`Grid.size` multiplies the axes' lengths (a zipped pair one axis, the seeds each a run)
    and gives the runs that expanding the grid makes; a sweep counts its grids' runs."""
    from dpdl.experiments.sweeps.check import sweep_size

    sweep = read_sweep(_file(tmp_path, text))
    for grid in sweep.grids:
        positions, runs = grid.size(sweep.base)
        configs = grid.configs(sweep.base)
        assert positions == len(configs)
        assert runs == sum(len(options["seed"]) for options in configs)
    assert sweep_size(sweep) == len(sweep.points())  # these grids share no run


def test_a_grid_of_a_billion_points_is_counted_and_refused_at_once(tmp_path) -> None:
    """Before, `--dry-run` expanded the grid and never answered; now its size is the product of
    the axes' lengths, and the refusal names it with an estimate of the time."""
    from dpdl.errors import ResourceError
    from dpdl.experiments.sweeps.check import check_sweep, sweep_size

    axes = "\n".join(
        f"{key} = [{', '.join(str(0.01 * (i + 1)) for i in range(1000))}]"
        for key in ("eps", "lr", "clip")
    )
    sweep = read_sweep(_file(tmp_path, SMALL.replace("[sweep]\n", f"[sweep]\n{axes}\n")))
    start = time.perf_counter()
    assert sweep_size(sweep) == 2 * 10**9 * 2  # mechanism x eps x lr x clip, on two seeds
    with pytest.raises(ResourceError, match=r"4,000,000,000 runs .* estimated at about"):
        check_sweep(sweep, 2)
    assert time.perf_counter() - start < 5


def test_a_bad_sweep_is_refused_before_any_run(tmp_path) -> None:
    """What failed only after every point had trained (a curve no task reports, an agent beyond
    n, a search metric the task does not report) is refused before the first run: nothing is
    written."""
    for extra in (
        '\n[record]\ncurves = ["test_los"]\n',
        'lr = [0.1, 0.2]\ntune = "test_loss"\n',
        "\n[record]\nnodes = [5]\n",
    ):
        out = tmp_path / "out"
        with pytest.raises(ConfigError, match=r"test_los|test_loss|nodes"):
            run_sweep(read_sweep(_file(tmp_path, SMALL + extra)), out, workers=1, progress=False)
        assert not out.exists()


def test_every_registered_sweep_file_passes_the_whole_check() -> None:
    """The reproductions' sweep files, full and quick, pass every check `--dry-run` makes (their
    runs' estimates within the time limit on two workers)."""
    from dpdl.choices import SWEEP_REGISTRY
    from dpdl.experiments.sweeps.check import check_sweep
    from dpdl.experiments.sweeps.spec import named_sweep_file
    from dpdl.registry import load_plugins

    load_plugins()
    names = SWEEP_REGISTRY.names()
    if not names:
        pytest.skip("the reproductions' package is not installed")
    for name in names:
        for quick in (False, True):
            if quick and SWEEP_REGISTRY.get(name).quick is None:
                continue
            checked = check_sweep(read_sweep(named_sweep_file(name, quick)), 2)
            assert checked.runs > 0 and checked.seconds >= 0
