"""`dropouts`: utility and eps against the dropout rate for LDP, DECOR, Whisper and seed recovery.

Not a paper's figure: the evidence of issue 51 (item 3). Each agent misses each round with
probability `--dropout` (it computes and sends nothing; its neighbours mix what arrived and give
the missing weights to their own model), drawn from the seed, so that every method of a seed
misses the same rounds. Pairwise-cancelling noise cancels only when every holder of a seed sends:
DECOR's `v_ij` without its `-v_ij`, Whisper's shared seeds without all their holders, leave noise
in the network average. The dropout-robust design is seed recovery (`--dropout-recovery`): in each
round the alive holders of a shared seed add the missing holders' share, so the seed's total
enters the network as designed (zero for DECOR's pairs); the accountant states what each threat
then sees, round by round, and its eps is the run's realized eps under its dropouts.

Protocol (`horizon`'s, for the papers' one-step designs): n = 16 agents on a ring, a 4 x 4 torus
and Erdos-Renyi (p = 0.3, a new draw per seed), 15 on the Florentine families graph,
Metropolis-Hastings weights; eps = 10 at delta = 1e-5 against the eavesdropper (exact
calibration, agent level, as `dpdl train` calibrates), C = 0.1, batch 64, constant steps, T = 500;
DECOR's least squares (d = 10, full gradients) from its code's starting point (every coordinate
1: from `horizon`'s zeros, the start is within 0.003 of the optimum and every private run ends
further from it than it started), step 0.1, the largest of DECOR's grid; L2-regularised logistic
regression on a9a from zeros, step 0.05, `horizon`'s tuned choice at this budget. Methods: LDP,
DECOR (its trace-optimal couple) and Whisper as they are, and DECOR and Whisper with seed
recovery (`+ recovery`), at dropout rates 0, 0.1, 0.2 and 0.3; at rate 0 recovery acts on
nothing, so its rate-0 point is the method's own run.

Metrics: the final optimality gap (least squares) and test loss (a9a) of the agents' models, mean
over agents; the realized eps of each run against the eavesdropper (every message) and against
honest-but-curious agents (each agent's received messages, its own seeds subtracted), as the
accountant gives them under the run's dropouts. Five seeds, the same for every method and rate (a
seed fixes the graph draw, the data, the batches, the noise and the dropouts), so that a method's
runs at two rates, and two methods at one rate, pair over seeds.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from dpdl.experiments.cache import RUN_SECONDS
from dpdl.experiments.plots import plot_panels
from dpdl.experiments.sweeps.summary import t_interval
from dpdl.experiments.train import run_training
from dpdl.jobspec.config import TrainConfig
from dpdl.threads import job_threads
from dpdl_reproductions import horizon_design
from dpdl_reproductions.report import Claim, checked
from dpdl_reproductions.sweep_jobs import SweepJobs

__all__ = [
    "NAME",
    "SIGNIFICANCE",
    "SWEEP",
    "analyse",
    "config_of",
    "job_of",
    "jobs",
    "label_of",
    "run_job",
]

NAME = "dropouts"
#: Bump when run_job's output changes, so cached runs are recomputed.
VERSION = 1
EPS, DELTA = horizon_design.EPS, horizon_design.DELTA
#: The methods as they are, and those run with seed recovery too.
METHODS = ("ldp", "decor", "whisper")
RECOVERED = ("decor", "whisper")
#: The suffix of a method's label when it runs with seed recovery.
RECOVERY = "+recovery"
LABELS = {
    "ldp": "LDP",
    "decor": "DECOR",
    "whisper": "Whisper",
    f"decor{RECOVERY}": "DECOR + recovery",
    f"whisper{RECOVERY}": "Whisper + recovery",
}
#: Per task: the metric it is judged by (lower is better) and its name in a panel's.
TASKS = {
    "least-squares": ("optimality_gap", "least squares"),
    "logreg-a9a": ("test_loss", "a9a"),
}
GRAPHS = {
    "ring": "ring",
    "torus": "4 x 4 torus",
    "er": "Erdos-Renyi",
    "florentine": "Florentine families",
}
#: The threats whose realized eps the runs record, in the report's order.
THREATS = ("eavesdropper", "honest-but-curious")
#: How a claim names each threat.
AGAINST = {"eavesdropper": "the eavesdropper", "honest-but-curious": "honest-but-curious agents"}
#: How far from its rate-0 utility "within" and "barely moves" allow, relative to its mean.
MARGIN = 0.10
#: The relative slack of "never exceeds" on an eps (the accountant's own rounding).
TOLERANCE = 1e-6
SIGNIFICANCE = (
    "Intervals: 95% Student t intervals over seeds (t quantile for n - 1 degrees of freedom). A "
    "change with the rate is paired over seeds (a method's run at the rate minus its run at rate "
    "0 on the same seed: the same graph, data, batches and noise stream), and so is recovery "
    "against no recovery at one rate (the same dropouts too). Utility degrades where the paired "
    f"interval lies above 0 at every rate; it stays within {MARGIN:.0%} where the interval ends "
    f"below {MARGIN:.0%} of the rate-0 mean (barely moves: inside +-{MARGIN:.0%}) at every rate; "
    "a method's loss relative to its rate-0 utility minus LDP's is paired too, in points of %. "
    f"An eps exceeds its reference where it is above it by more than {TOLERANCE:g} relative."
)

Interval = tuple[float, float, float]
#: Runs by method label, dropout rate and seed.
Panel = dict[str, dict[float, dict[int, dict[str, Any]]]]


def job_of(options: Mapping[str, Any], version: int = VERSION) -> dict[str, Any]:
    """The job of one run of the sweep file (its options with its one seed as a number, as a row
    of its `runs.csv` has them): `horizon`'s job at the one-step objective, with the starting
    point, the dropout rate and whether seed recovery runs; `config_of` gives those options
    back."""
    job = horizon_design.job_of(options, version)
    del job["objective"]  # always the papers' one-step design
    return {
        **job,
        "start": options["start"],
        "dropout": float(options["dropout"]),
        "recovery": bool(options["dropout_recovery"]),
    }


def config_of(job: Mapping[str, Any]) -> TrainConfig:
    """The training configuration of `job`: `horizon`'s protocol (its `config_of`) for the
    papers' one-step design, from the job's starting point, at its dropout rate, with seed
    recovery where it asks."""
    config = horizon_design.config_of({**job, "objective": "one-step"})
    return replace(
        config,
        task_options=replace(config.task_options, start=job["start"]),
        dropout=job["dropout"],
        dropout_recovery=job["recovery"],
    )


#: The runs: every (task, graph, method, recovery, rate, seed) of the sweep file (``dpdl sweep
#: dropouts``).
SWEEP = SweepJobs(NAME, VERSION, job_of, config_of)


def jobs(quick: bool) -> list[dict[str, Any]]:
    """Every (task, graph, method, recovery, rate, seed), from the sweep file."""
    return SWEEP.jobs(SWEEP.sweep(quick))


def _column(threat: str) -> str:
    """The field of a row holding its realized eps against `threat`."""
    return "eps_" + threat.replace("-", "_")


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """One seed of one method at one dropout rate, as `dpdl train` runs it, on the executor's
    threads (one by default): its final metrics (mean over agents), and its realized eps against
    each threat the accountant reports (`epsilon`, `threat`: the first, the one the noise is
    calibrated against)."""
    with job_threads():
        run = run_training(config_of(job)).runs[0]
    return {
        **{key: value for key, value in run.final.items() if key != "step"},
        "epsilon": run.privacy[0].epsilon,
        "threat": run.privacy[0].threat,
        **{_column(report.threat): report.epsilon for report in run.privacy},
        "trace_WRW": run.trace_wrw,
    }


def label_of(row: Mapping[str, Any]) -> str:
    """A run's method label: its mechanism, `+recovery` where it ran with seed recovery."""
    return str(row["method"]) + (RECOVERY if row["recovery"] else "")


def _utility(row: Mapping[str, Any]) -> float:
    """What a run is judged by, lower better: its task's final metric, mean over agents."""
    return float(row[TASKS[row["task"]][0]])


def _eps(row: Mapping[str, Any], threat: str) -> float | None:
    """A run's realized eps against `threat`: its own field, or `epsilon` where `threat` is
    the run's first (a sweep's rows record that one only); None where it has neither."""
    value = row.get(_column(threat))
    if value is None and row.get("threat") == threat:
        value = row.get("epsilon")
    return None if value is None else float(value)


def _grouped(rows: list[dict[str, Any]]) -> dict[tuple[str, str], Panel]:
    """The rows by panel (task, graph), method label, rate and seed, panels in the report's
    order; a recovered method's rate 0 is its method's own runs (recovery acts on nothing)."""
    panels: dict[tuple[str, str], Panel] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(dict))
    )
    for row in rows:
        key = (row["task"], row["graph"])
        panels[key][label_of(row)][float(row["dropout"])][int(row["seed"])] = row
    for panel in panels.values():
        for method in RECOVERED:
            if method + RECOVERY in panel and 0.0 in panel.get(method, {}):
                panel[method + RECOVERY][0.0] = panel[method][0.0]
    order = [(task, graph) for task in TASKS for graph in GRAPHS]
    return {key: panels[key] for key in sorted(panels, key=order.index)}


def _panel_label(key: tuple[str, str]) -> str:
    return f"{TASKS[key[0]][1]}, {GRAPHS[key[1]]}"


def _labels(panel: Panel) -> list[str]:
    return [label for label in LABELS if label in panel]


def _paired(
    panel: Panel, label: str, rate: float, other: str, other_rate: float
) -> tuple[float, float, float, float]:
    """The paired difference of `label`'s utility at `rate` minus `other`'s at `other_rate`
    over the seeds both ran (mean, interval's low and high ends) and `other`'s mean there."""
    mine, theirs = panel[label][rate], panel[other][other_rate]
    seeds = sorted(set(mine) & set(theirs))
    a = np.array([_utility(mine[seed]) for seed in seeds])
    b = np.array([_utility(theirs[seed]) for seed in seeds])
    mean, low, high = t_interval(list(a - b))
    return mean, low, high, float(b.mean())


def _percent(mean: float, low: float, high: float, base: float) -> str:
    """A paired difference relative to `base`: its value and interval in %."""
    if not math.isfinite(low):
        return f"{100 * mean / base:+.1f}%"
    return f"{100 * mean / base:+.1f}% [{100 * low / base:+.1f}, {100 * high / base:+.1f}]"


def _rate_claim(
    panel: str,
    paper: str,
    what: str,
    paired: dict[float, tuple[float, float, float, float]],
    holds_at: Callable[[float, float, float, float], bool],
    why: str,
) -> Claim:
    """A claim that holds where `holds_at(mean, low, high, base)` at every rate of `paired`;
    its reason names the rates where it does not (`why`), with their paired differences."""
    failing = [rate for rate, values in paired.items() if not holds_at(*values)]
    return checked(
        panel,
        paper,
        f"{what} [95% interval]: "
        + "; ".join(f"rate {rate:g}: {_percent(*values)}" for rate, values in paired.items()),
        not failing,
        f"{why} at rate " + ", ".join(f"{rate:g} ({_percent(*paired[rate])})" for rate in failing),
    )


def _change(panel: Panel, label: str) -> dict[float, tuple[float, float, float, float]]:
    """`label`'s utility at each rate above 0 minus its own at rate 0, paired."""
    return {rate: _paired(panel, label, rate, label, 0.0) for rate in sorted(panel[label]) if rate}


def _relative_loss(panel: Panel, label: str, rate: float) -> dict[int, float]:
    """Per seed, how much of its rate-0 utility `label` loses at `rate` (a fraction)."""
    base = panel[label][0.0]
    return {
        seed: _utility(row) / _utility(base[seed]) - 1
        for seed, row in panel[label][rate].items()
        if seed in base
    }


def _beyond_ldp(panel: Panel, label: str, rate: float) -> tuple[float, float, float, float]:
    """`label`'s relative loss at `rate` minus LDP's, paired over seeds (mean, the interval's
    ends, and 1: a difference of fractions, shown in points of %)."""
    mine, ldp = _relative_loss(panel, label, rate), _relative_loss(panel, "ldp", rate)
    mean, low, high = t_interval([mine[seed] - ldp[seed] for seed in sorted(set(mine) & set(ldp))])
    return mean, low, high, 1.0


def _recovery_claims(name: str, metric: str, panel: Panel, method: str) -> list[Claim]:
    """With seed recovery, `method` stays within `MARGIN` of rate 0, improves on no recovery,
    and loses at most `MARGIN` more than LDP does."""
    label = method + RECOVERY
    rates = [rate for rate in sorted(panel[label]) if rate]
    claims = [
        _rate_claim(
            name,
            f"with seed recovery, {LABELS[method]}'s utility stays within {MARGIN:.0%} of its "
            "utility without dropouts",
            f"final {metric} at the rate minus at rate 0, paired, relative to rate 0's mean",
            _change(panel, label),
            lambda mean, low, high, base: high <= MARGIN * base,
            f"the paired interval ends above {MARGIN:.0%} of rate 0's mean",
        )
    ]
    if method in panel:
        claims.append(
            _rate_claim(
                name,
                f"seed recovery improves {LABELS[method]}'s utility under dropouts",
                f"final {metric} with recovery minus without, paired, relative to without",
                {rate: _paired(panel, label, rate, method, rate) for rate in rates},
                lambda mean, low, high, base: high < 0,
                "the paired interval reaches 0 (not significant over the seeds, or worse)",
            )
        )
    if "ldp" in panel and 0.0 in panel["ldp"]:
        claims.append(
            _rate_claim(
                name,
                f"with seed recovery, {LABELS[method]} loses at most {MARGIN:.0%} more of its "
                "rate-0 utility to dropouts than LDP does (the rounds dropouts take from every "
                "method)",
                f"final {metric} relative to rate 0, minus LDP's, paired, in points",
                {rate: _beyond_ldp(panel, label, rate) for rate in rates if rate in panel["ldp"]},
                lambda mean, low, high, base: high <= MARGIN,
                f"the paired interval ends more than {MARGIN:.0%} above LDP's loss",
            )
        )
    return claims


def _utility_claims(name: str, task: str, panel: Panel) -> list[Claim]:
    """DECOR and Whisper degrade with the rate without recovery; recovery keeps them within
    `MARGIN` of rate 0 and improves on no recovery (`_recovery_claims`); LDP barely moves."""
    metric = TASKS[task][0].replace("_", " ")
    change = f"final {metric} at the rate minus at rate 0, paired, relative to rate 0's mean"
    claims = []
    for method in (m for m in RECOVERED if m in panel and 0.0 in panel[m]):
        claims.append(
            _rate_claim(
                name,
                f"without recovery, {LABELS[method]}'s utility degrades with the dropout rate "
                "(its pairwise noise no longer cancels)",
                change,
                _change(panel, method),
                lambda mean, low, high, base: low > 0,
                "the paired interval reaches 0 (not significant over the seeds, or better)",
            )
        )
    for method in (m for m in RECOVERED if m + RECOVERY in panel and 0.0 in panel[m + RECOVERY]):
        claims += _recovery_claims(name, metric, panel, method)
    if "ldp" in panel and 0.0 in panel["ldp"]:
        claims.append(
            _rate_claim(
                name,
                f"LDP's utility barely moves with the dropout rate (within +-{MARGIN:.0%}): its "
                "noise is each agent's own",
                change,
                _change(panel, "ldp"),
                lambda mean, low, high, base: -MARGIN * base <= low and high <= MARGIN * base,
                f"the paired interval leaves +-{MARGIN:.0%} of rate 0's mean",
            )
        )
    return claims


def _realized(row: Mapping[str, Any], threat: str) -> float:
    """A run's realized eps against `threat`, one of the threats every run records."""
    value = _eps(row, threat)
    assert value is not None  # analyse reads only the threats every row records
    return value


def _reference(threat: str, base: Mapping[str, Any]) -> float:
    """What a run's realized eps against `threat` is held to: the budget against the
    eavesdropper (the calibration's threat), else the method's eps on the same seed without
    dropouts (`base`), the guarantee its design gives that threat."""
    return EPS if threat == THREATS[0] else _realized(base, threat)


def _losses(
    panel: Panel, labels: list[str], threat: str
) -> list[tuple[float, float, float, str, float, int]]:
    """The runs of `labels` under dropouts whose realized eps against `threat` exceeds their
    reference: (ratio, eps, reference, label, rate, seed), largest ratio first."""
    over = []
    for label in labels:
        base = panel[label][0.0]
        for rate, runs in panel[label].items():
            for seed, row in runs.items():
                if not rate or seed not in base:
                    continue
                realized, limit = _realized(row, threat), _reference(threat, base[seed])
                if realized > limit * (1 + TOLERANCE):
                    over.append((realized / limit, realized, limit, label, rate, seed))
    return sorted(over, reverse=True)


def _privacy_claim(name: str, panel: Panel, labels: list[str], threat: str) -> Claim | None:
    """Whether the realized eps against `threat` of every run of `labels` under dropouts stays
    within its reference (`_reference`); the reason names the largest loss."""
    labels = [label for label in labels if label in panel and 0.0 in panel[label]]
    if not labels:
        return None
    rates = sorted({rate for label in labels for rate in panel[label]})
    means = [
        f"{LABELS[label]} "
        + " / ".join(
            f"{np.mean([_realized(row, threat) for row in runs.values()]):.4g}"
            if (runs := panel[label].get(rate))
            else "-"
            for rate in rates
        )
        for label in labels
    ]
    over = _losses(panel, labels, threat)
    recovery = any(label.endswith(RECOVERY) for label in labels)
    target = (
        f"the budget eps = {EPS:g}"
        if threat == THREATS[0]
        else "its eps without dropouts (the design's guarantee against that threat)"
    )
    ratio, realized, limit, label, rate, seed = over[0] if over else (0, 0, 0, "", 0, 0)
    return checked(
        name,
        f"{'with' if recovery else 'without'} seed recovery, the realized eps against "
        f"{AGAINST[threat]} never exceeds {target}",
        f"mean realized eps over seeds at rates {' / '.join(f'{r:g}' for r in rates)}: "
        + "; ".join(means),
        not over,
        f"{len(over)} runs above it, the largest {realized:.4g} against {limit:.4g} "
        f"({ratio:.3g}x; {LABELS.get(label, label)} at rate {rate:g}, seed {seed})"
        + (
            ": recovery puts a missing holder's share into the alive holders' messages (a DECOR "
            "pair's noise then cancels within the survivor's own message), so this threat sees "
            "less noise on them: a privacy loss for the utility recovery keeps"
            if recovery
            else ": a missing message should only remove what the threat sees (an accounting error)"
        ),
    )


def _calibration_claim(rows: list[dict[str, Any]]) -> Claim:
    """Every run without dropouts meets the budget against the eavesdropper."""
    base = [row for row in rows if not float(row["dropout"])]
    over = [row for row in base if (value := _eps(row, THREATS[0])) is None or value > EPS]
    return checked(
        "all",
        f"without dropouts every run is (eps, delta)-DP at eps = {EPS:g}, delta = {DELTA:g} "
        "against the eavesdropper (exact calibration)",
        f"{len(base) - len(over)}/{len(base)} runs at rate 0 within eps = {EPS:g}",
        not over,
        f"{len(over)} runs above the budget: a calibration error",
    )


def _acting_claim(panels: dict[tuple[str, str], Panel]) -> Claim:
    """The runs act on their dropouts: no run at a rate above 0 ends where its seed's run at
    rate 0 does, to every digit."""
    same, total = 0, 0
    for panel in panels.values():
        for label in panel:
            base = panel[label].get(0.0, {})
            for rate, runs in panel[label].items():
                for seed, row in runs.items():
                    if rate and seed in base:
                        total += 1
                        same += _utility(row) == _utility(base[seed])
    return checked(
        "all",
        "the runs act on their dropouts: a run at a rate above 0 differs from its seed's run "
        "without dropouts",
        f"{total - same}/{total} runs at a rate above 0 differ from their rate-0 run",
        not same,
        f"{same} runs end exactly where their rate-0 run does: the engine did not apply their "
        "dropouts, so the other claims describe no dropouts at all",
    )


def _table(name: str, task: str, panel: Panel, threats: list[str]) -> str:
    """The results of one panel as a markdown table: per method and rate its final metric (mean
    and 95% t half-width over seeds) and mean realized eps against each threat."""
    rates = sorted({rate for runs in panel.values() for rate in runs})
    seeds = sorted({seed for runs in panel.values() for by in runs.values() for seed in by})
    lines = [
        f"{name}: final {TASKS[task][0].replace('_', ' ')}, mean ± 95% t half-width over seeds "
        f"{', '.join(map(str, seeds))}, and the mean realized eps against the "
        + " / ".join(threats),
        "",
        "| method | " + " | ".join(f"rate {rate:g}" for rate in rates) + " |",
        "| --- |" + " --- |" * len(rates),
    ]
    for label in _labels(panel):
        cells = []
        for rate in rates:
            runs = list(panel[label].get(rate, {}).values())
            if not runs:
                cells.append("-")
                continue
            mean, low, _ = t_interval([_utility(row) for row in runs])
            eps = " / ".join(f"{np.mean([_realized(r, t) for r in runs]):.3g}" for t in threats)
            cells.append(f"{mean:.4g} ± {mean - low:.2g} (eps {eps})")
        lines.append(f"| {LABELS[label]} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"  # a blank line ends the table before the next note


def _figure(
    panels: dict[tuple[str, str], Panel],
    of: Callable[[Panel, str, float], Interval | None],
    path: Path,
    ylabel: str,
    title: str,
    log_y: bool,
    extra: Mapping[str, float] | None = None,
) -> Path:
    """A panel per (task, graph), a line per method against the rate: `of(panel, label, rate)`
    (mean, interval's ends; None: no point), and `extra`'s constant lines."""
    grid, series, bands = {}, {}, {}
    for key, panel in panels.items():
        name = _panel_label(key)
        rates = sorted({rate for runs in panel.values() for rate in runs})
        grid[name], series[name], bands[name] = rates, {}, {}
        for label in _labels(panel):
            points = [of(panel, label, rate) or (math.nan,) * 3 for rate in rates]
            series[name][LABELS[label]] = [mean for mean, _, _ in points]
            bands[name][LABELS[label]] = (
                [low if math.isfinite(low) else mean for mean, low, _ in points],
                [high if math.isfinite(high) else mean for mean, _, high in points],
            )
        for line, value in (extra or {}).items():
            series[name][line] = [value] * len(rates)
    return plot_panels(
        grid,
        series,
        dict.fromkeys(grid, "dropout rate (per agent and round)"),
        ylabel,
        path,
        title,
        log_y=log_y,
        bands=bands,
        columns=min(4, len(grid)),
        titles=True,
    )


def _figures(panels: dict[tuple[str, str], Panel], out: Path, threats: list[str]) -> list[Path]:
    """Utility against the rate, its paired change from rate 0, and the realized eps against
    each threat."""

    def utility(panel: Panel, label: str, rate: float) -> Interval | None:
        runs = panel[label].get(rate)
        return t_interval([_utility(row) for row in runs.values()]) if runs else None

    def change(panel: Panel, label: str, rate: float) -> Interval | None:
        if rate not in panel[label] or 0.0 not in panel[label]:
            return None
        mean, low, high, base = _paired(panel, label, rate, label, 0.0)
        return 100 * mean / base, 100 * low / base, 100 * high / base

    def realized(threat: str) -> Callable[[Panel, str, float], Interval | None]:
        def of(panel: Panel, label: str, rate: float) -> Interval | None:
            runs = panel[label].get(rate)
            return t_interval([_realized(row, threat) for row in runs.values()]) if runs else None

        return of

    figures = [
        _figure(
            panels,
            utility,
            out / "utility.png",
            "optimality gap (least squares), test loss (a9a)",
            "Utility against the dropout rate (mean, 95% t interval)",
            log_y=True,
        ),
        _figure(
            panels,
            change,
            out / "utility_change.png",
            "change from rate 0 (% of its mean)",
            "Utility minus rate 0's, paired (mean, 95% t interval)",
            log_y=False,
        ),
    ]
    for threat in threats:
        figures.append(
            _figure(
                panels,
                realized(threat),
                out / f"{_column(threat)}.png",
                f"realized eps (delta = {DELTA:g})",
                f"Realized eps against {AGAINST[threat]} (mean, 95% t interval)",
                log_y=False,
                extra={f"budget (eps {EPS:g})": EPS} if threat == THREATS[0] else None,
            )
        )
    return figures


def _cuts_note(rows: list[dict[str, Any]]) -> str:
    """What this report leaves out of the grid it was asked for, and what a run cost."""
    seconds = defaultdict(list)
    for row in rows:
        if row.get(RUN_SECONDS) is not None:
            seconds[TASKS[row["task"]][1]].append(float(row[RUN_SECONDS]))
    cost = ", ".join(f"{task} {np.median(values):.2g} s" for task, values in seconds.items())
    return (
        "Cut to keep the grid (720 runs) near an hour of one core, most of it the exact "
        "accounting of the rounds with dropouts (a distinct round per pattern of missing "
        "agents, against each threat): one step size per task, not tuned per method and rate "
        "(0.1 for least squares, the largest of DECOR's grid and the best of {0.05, 0.1} for "
        "DECOR and Whisper without dropouts on two seeds; 0.05 for a9a, `horizon`'s choice), "
        "while dropouts slow the gossip and add noise that does not cancel, so another step "
        "could suit the higher rates; T = 500 for both tasks, not the papers' 2000 (DECOR) and "
        "5000 (Whisper); five seeds; rates up to 0.3. "
        + (f"Median compute per run: {cost}." if cost else "")
    )


def _unrecovered_seeds(panel: Panel, method: str) -> list[int]:
    """The seeds on which `method` with seed recovery ends where it does without it, to every
    digit, at every rate above 0."""
    recovered, plain = panel[method + RECOVERY], panel[method]
    rates = [rate for rate in recovered if rate]
    if not rates:
        return []
    seeds = set.intersection(*(set(recovered[rate]) & set(plain.get(rate, {})) for rate in rates))
    return sorted(
        seed
        for seed in seeds
        if all(_utility(recovered[rate][seed]) == _utility(plain[rate][seed]) for rate in rates)
    )


def _unchanged_note(panels: dict[tuple[str, str], Panel]) -> str | None:
    """Where seed recovery changes nothing: the noise of those seeds' designs shares no seed that
    a dropout could break (DECOR's trace-optimal couple can put no noise in pairs: LDP), so
    recovery has nothing to recover."""
    parts = [
        f"{LABELS[method]} on {_panel_label(key)}, seeds {', '.join(map(str, seeds))}"
        for key, panel in panels.items()
        for method in RECOVERED
        if method in panel
        and method + RECOVERY in panel
        and (seeds := _unrecovered_seeds(panel, method))
    ]
    if not parts:
        return None
    return (
        "Seed recovery changes nothing (the same runs to every digit at every rate) for "
        + "; ".join(parts)
        + ": the noise of those seeds' designs shares no seed that a dropout could break (on "
        "some graphs DECOR's trace-optimal couple puts no noise in pairs, sigma_cor = 0: LDP), "
        "so there recovery cannot improve on no recovery."
    )


#: How the report reads the budget and the references of the privacy claims.
REFERENCE_NOTE = (
    "The noise is calibrated to eps = 10 against the eavesdropper without dropouts, as `dpdl "
    "train` does; DECOR's and Whisper's eps against honest-but-curious agents is higher by "
    "design even then (a curious agent subtracts the noise of the seeds it holds), so a run's "
    "realized eps against that threat is held to its method's eps on the same seed without "
    "dropouts. The dropouts are public and independent of the data: the accountant conditions "
    "on them, so the realized eps is the run's guarantee given its dropouts."
)


def analyse(
    rows: list[dict[str, Any]], out: Path, quick: bool
) -> tuple[list[Path], list[Claim], list[str]]:
    """Per panel (task, graph): the table of every method's utility and realized eps at every
    rate; the claims that DECOR and Whisper degrade without recovery, stay close to rate 0 with
    it, improve on no recovery and lose little more than LDP, and that LDP barely moves; the
    claims on each threat's realized eps with and without recovery."""
    panels = _grouped(rows)
    threats = [t for t in THREATS if all(_eps(row, t) is not None for row in rows)]
    claims = [_calibration_claim(rows), _acting_claim(panels)]
    notes = []
    for key, panel in panels.items():
        name = _panel_label(key)
        notes.append(_table(name, key[0], panel, threats))
        claims += _utility_claims(name, key[0], panel)
        for threat in threats:
            for labels in (list(METHODS), [m + RECOVERY for m in RECOVERED]):
                claim = _privacy_claim(name, panel, labels, threat)
                claims += [claim] if claim is not None else []
    notes += [note for note in (_unchanged_note(panels), _cuts_note(rows)) if note is not None]
    notes.append(REFERENCE_NOTE)
    missing = [threat for threat in THREATS if threat not in threats]
    if missing:
        notes.append(
            "Not every run records its realized eps against the "
            + " and the ".join(missing)
            + " (a sweep's runs.csv keeps the eps against the calibration's threat only): "
            "those claims and figures are left out; `dpdl reproduce dropouts` records both."
        )
    return _figures(panels, out, threats), claims, notes
