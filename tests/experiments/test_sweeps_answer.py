"""A sweep's answer: intervals clipped to the metric's range, the paired test of each mechanism
against the best at its eps, the table and its figure, on made-up runs (no training); and one
small real sweep that prints it (``dpdl sweep``)."""

from __future__ import annotations

import csv
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import ttest_rel

from dpdl.experiments.sweeps.answer import answer_cells, answer_table, paired_test, write_answer
from dpdl.experiments.sweeps.spec import read_sweep, run_key
from dpdl.experiments.sweeps.summary import (
    clipped_interval,
    summarise,
    t_interval,
    write_summary,
)
from dpdl.experiments.sweeps.tuning import search_runs, settings
from dpdl.tasks.metrics import clip_to_range

ROOT = Path(__file__).resolve().parents[2]


def test_two_seeds_whose_interval_overshoots_one_are_clipped_at_one() -> None:
    values = [0.90, 0.99]
    mean, low, high = t_interval(values)
    assert high > 1  # 0.945 +- 12.7 * 0.064 / sqrt(2): the raw interval claims 1.52
    assert clipped_interval("test_accuracy", values) == (mean, low if low > 0 else 0.0, 1.0)
    assert clipped_interval("test_accuracy_average_model", values)[2] == 1.0
    # a loss's and a gap's low end stops at 0; a metric not in the table is left as it was
    assert t_interval([0.01, 0.3])[1] < 0
    assert clipped_interval("test_loss", [0.01, 0.3])[1] == 0.0
    assert clipped_interval("optimality_gap_tail", [0.01, 0.3])[1] == 0.0
    assert clipped_interval("paper_optimality_gap", [0.01, 0.3]) == t_interval([0.01, 0.3])
    assert math.isnan(clip_to_range("test_accuracy", math.nan))


def test_the_paired_test_is_scipys_over_the_seeds_both_ran() -> None:
    best = {0: 0.50, 1: 0.52, 2: 0.47, 3: 0.49}
    worse = {0: 0.55, 1: 0.58, 2: 0.51, 3: 0.56, 9: 0.1}  # seed 9: the best has none
    test = paired_test(worse, best)
    seeds = [0, 1, 2, 3]
    expected = ttest_rel([worse[s] for s in seeds], [best[s] for s in seeds]).pvalue
    assert test.seeds == 4 and test.p == pytest.approx(expected, rel=1e-12)
    assert test.p < 0.05 and test.verdict == "significant at 5%" and test.significant
    assert test.difference == pytest.approx(np.mean([worse[s] - best[s] for s in seeds]))
    # unpaired, these overlap: the pairing is what separates them
    noisy = {0: 0.51, 1: 0.50, 2: 0.50, 3: 0.47}
    assert paired_test(noisy, best).verdict == "not significant"
    assert paired_test({0: 0.6}, {0: 0.5}).verdict == "1 seed: no test"
    assert paired_test({0: 0.5, 1: 0.6}, {0: 0.5, 1: 0.6}).p == 1.0  # the same runs
    assert paired_test({0: 0.6, 1: 0.7}, {0: 0.5, 1: 0.6}).p == 0.0  # one shift, every seed
    assert paired_test({0: math.nan, 1: 0.7}, {0: 0.5, 1: 0.6}).p is None


SWEEP = """\
[base]
task = "logreg-a9a"
n = 4
steps = 10

[sweep]
mechanism = ["ldp", "decor", "whisper"]
eps = [1, 10]
seed = [0, 1, 2]
"""

#: Made-up test accuracies: per (mechanism, eps), a level and a shift per seed. At eps 1 DECOR is
#: ahead of LDP by 0.05 on every seed (+- 0.005) and of Whisper by 0.001 (+- 0.02): the test
#: separates the first pair and not the second. At eps 10 LDP is best.
LEVELS = {
    ("ldp", 1.0): (0.80, [0.0, 0.004, -0.003]),
    ("decor", 1.0): (0.85, [0.0, 0.0, 0.0]),
    ("whisper", 1.0): (0.849, [0.02, -0.02, 0.0]),
    ("ldp", 10.0): (0.97, [0.02, -0.03, 0.025]),  # its interval overshoots 1
    ("decor", 10.0): (0.95, [0.01, -0.01, 0.0]),
    ("whisper", 10.0): (0.96, [0.0, 0.01, -0.01]),
}


def _made_up(tmp_path: Path, text: str = SWEEP) -> tuple[Any, dict[str, dict[str, Any]]]:
    path = tmp_path / "sweep.toml"
    path.write_text(text)
    sweep = read_sweep(path)
    by_run = {}
    for run in search_runs(sweep):
        level, shifts = LEVELS[(run["mechanism"], run["eps"])]
        seed = run["seed"][0]
        accuracy = level + shifts[seed] + (run.get("lr") or 0.0)  # a larger step: better
        by_run[run_key(run)] = {
            **run,
            "seed": seed,
            "test_accuracy": accuracy,
            "test_loss": 1 - accuracy,
            "primary_metric": "test_accuracy",
            "lower_is_better": False,
        }
    return sweep, by_run


def test_the_answer_marks_the_best_mechanism_at_each_eps_and_tests_the_others(tmp_path) -> None:
    sweep, by_run = _made_up(tmp_path)
    chosen = settings(sweep, lambda options: by_run.get(run_key(options)))
    cells = answer_cells(chosen, by_run, ["test_loss", "test_accuracy"])
    by = {(cell.options["mechanism"], cell.options["eps"]): cell for cell in cells}
    assert len(cells) == 6 and all(cell.primary.metric == "test_accuracy" for cell in cells)
    assert {key for key, cell in by.items() if cell.best} == {("decor", 1.0), ("ldp", 10.0)}
    assert by["ldp", 1.0].comparison.verdict == "significant at 5%"
    assert by["whisper", 1.0].comparison.verdict == "not significant"
    assert by["ldp", 1.0].comparison.seeds == 3
    assert by["ldp", 10.0].high == 1.0 and by["ldp", 10.0].mean < 1.0  # clipped, not the mean
    # summary.csv's interval is the same clipped one
    (line,) = [
        line
        for line in summarise(chosen, by_run, ["test_accuracy"])
        if (line["mechanism"], line["eps"]) == ("ldp", 10.0)
    ]
    assert line["test_accuracy_high"] == 1.0 and t_interval([0.99, 0.94, 0.995])[2] > 1.0
    text = answer_table(cells)
    assert "test_accuracy (higher is better)" in text and "clipped to [0, 1]" in text
    assert all(len(row) <= 100 for row in text.splitlines())
    rows = [row for row in text.splitlines() if row.startswith("|")][2:]
    assert [row.split("|")[1].strip() for row in rows] == ["1"] * 3 + ["10"] * 3  # by eps
    assert "best" in rows[1] and "p = " in rows[0] and "significant at 5%" in rows[0]
    # summary.csv puts the primary metric first, whatever order the runs gave
    written = write_summary(chosen, by_run, ["test_loss", "test_accuracy"], tmp_path / "summary")
    header = written["summary"].read_text().splitlines()[0]
    assert header.startswith("mechanism,eps,runs,test_accuracy_mean,test_accuracy_low,")
    assert written["table"].read_text() == answer_table(cells)
    paths = write_answer(cells, tmp_path / "out")
    assert paths["table"].read_text() == text
    assert paths["answer"].stat().st_size > 10_000
    with paths["table csv"].open() as handle:
        table = list(csv.DictReader(handle))
    assert [row["verdict"] for row in table if row["eps"] == "1.0"] == [
        "significant at 5%",
        "best",
        "not significant",
    ]


def test_a_tuned_grid_compares_each_mechanisms_choice(tmp_path) -> None:
    """The searched step size is no cell of its own: each mechanism's choice is compared, with
    the step size it chose beside it."""
    search = 'lr = [0.001, 0.002]\ntune = {metric = "test_accuracy", goal = "max"}'
    text = SWEEP.replace("seed = [0, 1, 2]", f"seed = [0, 1, 2]\n{search}")
    sweep, by_run = _made_up(tmp_path, text)
    chosen = settings(sweep, lambda options: by_run.get(run_key(options)))
    cells = answer_cells(chosen, by_run, ["test_loss", "test_accuracy"])
    assert len(cells) == 6 and all(cell.chosen == {"lr": 0.002} for cell in cells)
    assert all("lr" not in cell.options for cell in cells)
    assert sum(cell.best for cell in cells) == 2
    assert "lr: the search's choice for each row" in answer_table(cells)


def test_two_and_one_seeds_say_what_the_test_can_tell(tmp_path) -> None:
    sweep, by_run = _made_up(tmp_path, SWEEP.replace("seed = [0, 1, 2]", "seed = [0, 1]"))
    chosen = settings(sweep, lambda options: by_run.get(run_key(options)))
    text = answer_table(answer_cells(chosen, by_run, ["test_accuracy"]))
    assert "not significant*" in text and "* 2 seeds: a paired t test" in text
    sweep, by_run = _made_up(tmp_path, SWEEP.replace("seed = [0, 1, 2]", "seed = [0]"))
    chosen = settings(sweep, lambda options: by_run.get(run_key(options)))
    text = answer_table(answer_cells(chosen, by_run, ["test_accuracy"]))
    assert "1 seed: no test" in text and "1 seed: no interval and no test" in text


def test_dpdl_sweep_prints_the_answer(tmp_path) -> None:
    path = tmp_path / "small.toml"
    path.write_text(
        '[base]\ntask = "quadratic"\nn = 5\nsteps = 30\neval-every = 30\n\n'
        '[sweep]\nmechanism = ["ldp", "decor"]\neps = [5, 10]\nseed = [0, 1]\n'
    )
    command = [sys.executable, "-m", "dpdl.cli", "sweep", str(path), "--out", str(tmp_path / "out")]
    done = subprocess.run(
        [*command, "--jobs", "2", "--no-progress"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    assert "optimality_gap (lower is better)" in done.stdout
    assert "| eps | mechanism | optimality_gap" in done.stdout
    assert done.stdout.count("best") >= 2
    assert (tmp_path / "out" / "table.md").read_text() in done.stdout
    assert (tmp_path / "out" / "answer.png").is_file()
