"""`strategies`: time-correlated strategies (BandMF, BLT, BISR, square root) against DP-D-SGD and MAFALDA-SGD, decentralized.

Not a paper's figure: the evidence of issue 50 (item 4) for the strategies of centralized DP
training, each used as every agent's local encoder of MF-D-SGD (`A G + B Z`, the noise
`C_local^-1 Z` of each agent), beside DP-D-SGD's independent noise (`dp-dsgd`, `C_local = I`)
and MAFALDA-SGD's encoder optimised for the gossip (`mafalda`, Lemma 12, Algorithm 2):

- `bandmf`: banded Toeplitz `C_local` (BandMF, McKenna et al.), its coefficients optimised for
  the gossip's error;
- `bsr`: banded square root (the square root's first coefficients, closed form);
- `bisr`: banded inverse square root (BISR / BandInvMF, "Back to Square Roots"): `C_local^-1`
  banded;
- `blt`: buffered linear Toeplitz (BLT, Dvijotham et al., McKenna 2024): a buffer of a few floats
  per coordinate, its parameters optimised;
- `sqrt`: the square-root factorization of the prefix sum (Fichtenberger et al.), dense.

Protocol: MAFALDA-SGD's authors' code as dpdl runs it (`mafalda-housing` and `mafalda-images`,
their parts `authors`): k = 20 passes of b = 16 cyclic batches (T = 320), each example's gradient
clipped at C = 1, each batch's clipped sum divided by its agent's smallest batch (add / remove),
the budget a GDP mu at delta = 1e-6 against LDP's attacker (every message public; the noise
multiplier meets mu for the encoder's sensitivity under (20, 16)-participation), the gossip
`w_ij = 1 / (|N_i| + 1)`, no tuning. Three panels:

- Housing (`housing-mlp-sklearn`, step 0.1) on the Facebook ego graph (148 agents), mu in
  {0.5, 1, 2} (eps 2.25, 4.89, 11.0);
- Housing on Padgett's Florentine families (15 agents), mu in {0.1, 0.2, 0.5} (eps 0.40, 0.83,
  2.25): each agent holds ten times the Facebook agents' data, so the same mu costs far less, and
  at mu >= 0.5 DP-D-SGD and MAFALDA-SGD end within 4% of the no-noise loss (`mafalda-housing`);
- MNIST (the code's CNN, `mnist-tiny-cnn`, step 5.0, a tenth of it after step 81, 128 images an
  agent, tested on a fixed 2000) on the Florentine families only, mu = 5 (eps 35.6): on the
  Facebook ego graph the 148 agents' per-example gradients of the CNN cost about 4 s a step, some
  20 minutes a run; and mu 1 and 2 were cut (the notes say why).

The strategies run at their defaults: `--bands` the cycle b = 16 (so that no two steps of one
cyclic pattern share a band), `--buffer` 4. AntiPGD is left out (in this protocol its test loss is
orders of magnitude above the others', `mafalda-housing`).

Metrics: the final test loss (Housing) and test accuracy (MNIST) of the agents' models, mean over
agents; each method on the same three seeds (a seed fixes the split, the model's start and the
noise's draws), so that the methods pair over seeds. Per strategy, from its encoder for the
panel's gossip: its sensitivity under (20, 16)-participation, the noise multiplier sigma each run
used, the error of the gossiped models that noise of unit privacy causes, `sens^2 tr(H X^-1)`
(eq. (9), `dpdl factorize`'s loss), and the memory its noise keeps per step: how many floats per
agent and coordinate the noise of step t must carry from the steps before it, at least (the
largest rank of `C_local^-1`'s blocks `[t:, :t]`, the state of any causal linear generator of
that noise) beside what dpdl's engine keeps. The sensitivities, predicted errors and engine
memories are those `dpdl factorize --graph florentine --mixing local-degree --participations 20
--batches 16` prints (`--graph facebook-ego-414` for the Facebook ego graph).
"""  # noqa: E501 - verbatim in REPORT.md; its first line is the `reproduce --list` summary

from __future__ import annotations

import math
import warnings
from collections import defaultdict
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from scipy.linalg import solve_triangular, svdvals
from scipy.stats import spearmanr
from scipy.stats import t as student_t

from dpdl.accounting import gdp
from dpdl.experiments.cache import RUN_SECONDS
from dpdl.experiments.plots import plot_panels
from dpdl.experiments.results import read_rows
from dpdl.experiments.train import run_training
from dpdl.factorization.mafalda import local_loss, local_sensitivity, utility_gram
from dpdl.factorization.participation import Participation
from dpdl.graphs import NotDoublyStochasticWarning
from dpdl.jobspec.config import TrainConfig
from dpdl.jobspec.factorized import strategy_for
from dpdl.mechanisms.noise_streams import plan
from dpdl.threads import job_threads
from dpdl_reproductions import mafalda_authors as housing
from dpdl_reproductions import mafalda_images_authors as images
from dpdl_reproductions.mafalda_tradeoff import DELTA, local_encoder, mixing
from dpdl_reproductions.report import Claim, Verdict, checked
from dpdl_reproductions.sweep_jobs import SweepJobs

__all__ = [
    "NAME",
    "PARTS",
    "SIGNIFICANCE",
    "SWEEP",
    "SWEEP_PARTS",
    "analyse",
    "config_of",
    "design",
    "engine_memory",
    "job_of",
    "jobs",
    "run_job",
    "state_floats",
]

NAME = "strategies"
#: `baselines`: DP-D-SGD and MAFALDA-SGD; `strategies`: the time-correlated strategies.
PARTS = ("baselines", "strategies")
SWEEP_PARTS = PARTS
#: Bump when run_job's output changes, so cached runs are recomputed.
VERSION = 1
SIGNIFICANCE = (
    "Intervals: 95% Student t intervals over seeds (t quantile for n - 1 degrees of freedom); a "
    "difference between two methods is paired over seeds (the same split, start and draws of Z). "
    "A strategy improves on a method where the paired interval of the difference lies on the "
    "better side of 0 at every mu; it is within 5% of MAFALDA-SGD where the paired interval of "
    "its excess (test loss; MNIST: test error, 1 - accuracy) ends below 5% of MAFALDA-SGD's mean "
    "at every mu."
)
BASELINES = ("dp-dsgd", "mafalda")
STRATEGIES = ("bandmf", "bsr", "bisr", "blt", "sqrt")
LABELS = {
    "dp-dsgd": "DP-D-SGD",
    "mafalda": "MAFALDA-SGD",
    "bandmf": "BandMF",
    "bsr": "BSR",
    "bisr": "BISR",
    "blt": "BLT",
    "sqrt": "square root",
}
#: The methods' names on a figure's axis of methods.
SHORT = {"dp-dsgd": "DP-D", "mafalda": "MAFALDA", "sqrt": "sqrt"}
#: The part of each grid of the sweep files, by its label.
PART_LABELS = {
    f"{panel}, {part}": part
    for panel in (
        "Housing, Facebook ego",
        "Housing, Florentine families",
        "MNIST, Florentine families",
    )
    for part in PARTS
}
#: How much worse than MAFALDA-SGD "within" allows, relative to its mean.
WITHIN = 0.05
#: The rank correlation above which the predicted error "orders" the strategies.
ORDERS = 0.7
#: Singular values of `C_local^-1`'s blocks below this fraction of its norm count as zero.
RANK_TOL = 1e-8


def job_of(options: Mapping[str, Any], version: int = VERSION) -> dict[str, Any]:
    """The job of one run of the sweep file (its options with its one seed as a number, as a row
    of its `runs.csv` has them): the fields of its cache key, from which `config_of` gives those
    options back."""
    return {
        "version": version,
        "task": options["task"],
        "graph": options["graph"],
        "n": int(options["n"]),
        "steps": int(options["steps"]),
        "cycle": int(options["cycle"]),
        "lr": float(options["lr"]),
        "clip": float(options["clip"]),
        "eval_every": int(options["eval_every"]),
        "decay_after": options.get("decay_after"),
        "examples": options.get("examples_per_agent"),
        "test_examples": options.get("test_examples"),
        "method": options["mechanism"],
        "mu": housing.budget_of(options),
        "seed": int(options["seed"]),
    }


def config_of(job: Mapping[str, Any]) -> TrainConfig:
    """The training configuration of `job`: MAFALDA-SGD's authors' protocol as
    `mafalda_authors.config_of` (Housing) and `mafalda_images_authors.config_of` (MNIST)
    state it."""
    if job["task"] == images.TASKS["mnist-cnn"]:
        return images.config_of({**job, "task": "mnist-cnn"})
    return housing.config_of(dict(job))


#: The runs: every (panel, method, mu, seed) of the sweep file (``dpdl sweep strategies``).
SWEEP = SweepJobs(NAME, VERSION, job_of, config_of, part_labels=PART_LABELS)


def jobs(quick: bool, parts: tuple[str, ...] = PARTS) -> list[dict[str, Any]]:
    """Every (panel, method, mu, seed) of the sweep file's grids of `parts`."""
    return SWEEP.jobs(SWEEP.sweep(quick, parts))


def state_floats(encoder: np.ndarray) -> int:
    """The floats per coordinate that the noise `C^-1 Z` of `encoder` must carry from one step to
    the next, at least: the largest numerical rank (singular values above `RANK_TOL` of the
    norm) of the blocks `L[t:, :t]` of `L = C^-1`, how much of the noise drawn before step t
    the noise from step t on depends on (0 for independent noise, b - 1 for a banded `C` or
    `C^-1` of b bands, the buffer for BLT, about T / 2 for a generic dense encoder)."""
    inverse = np.linalg.inv(encoder)
    tolerance = RANK_TOL * float(svdvals(inverse)[0])
    steps = inverse.shape[0]
    return max(
        (int(np.sum(svdvals(inverse[t:, :t]) > tolerance)) for t in range(1, steps)), default=0
    )


@lru_cache(maxsize=16)
def design(method: str, graph: str, steps: int, cycle: int) -> dict[str, float]:
    """The encoder of `method` for the authors' gossip on `graph`: its sensitivity under cyclic
    `(steps / cycle, cycle)`-participation, the error of the gossiped models that noise of unit
    privacy causes (`sens^2 tr(H X^-1)`, `design_loss`), and the floats its noise carries per
    step (`state_floats`)."""
    participation = Participation.cyclic(steps, -(-steps // cycle), cycle)
    encoder = local_encoder(method, graph, steps, cycle, housing.RULE)
    gram = utility_gram(mixing(graph, housing.RULE), steps)
    return {
        "design_sensitivity": local_sensitivity(encoder, participation),
        "design_loss": local_loss(gram, encoder, participation),
        "state_floats": state_floats(encoder),
    }


@lru_cache(maxsize=32)
def engine_memory(method: str, graph: str, steps: int, cycle: int) -> int:
    """The floats of noise state per agent and coordinate that dpdl's engine keeps between steps
    for `method`'s strategy on the authors' gossip on `graph` (its default bands and buffer), as
    it plans them ([`plan`][dpdl.mechanisms.noise_streams.plan]: the BLT buffer, `p - 1` for a
    `C` or `C^-1` of `p` bands, else every seed drawn, `T`)."""
    strategy = strategy_for(method, mixing(graph, housing.RULE), steps, cycle)
    decoder = strategy.decoder
    if decoder is None:  # as the engine inverts it
        decoder = solve_triangular(strategy.encoder, np.eye(steps), lower=True)
    return plan(strategy.encoder, decoder, strategy.buffer)[1]


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """One seed of one method: its training configuration (`config_of`) as `dpdl train` runs it,
    on the executor's threads (one by default), its final metrics (mean over agents), privacy,
    and its encoder's design (`design`)."""
    with job_threads(), warnings.catch_warnings():
        warnings.simplefilter("ignore", NotDoublyStochasticWarning)  # the report states it
        run = run_training(config_of(job)).runs[0]
        planned = design(job["method"], job["graph"], job["steps"], job["cycle"])
    return {
        **{key: value for key, value in run.final.items() if key != "step"},
        "eps": run.privacy[0].epsilon,
        "sigma": run.mechanism["sigma"],
        "sensitivity": run.mechanism["sensitivity"],
        **planned,
    }


#: Each panel's label by its (task, graph), in the report's order.
PANELS = {
    ("housing-mlp-sklearn", "facebook-ego-414"): "Housing, Facebook ego",
    ("housing-mlp-sklearn", "florentine"): "Housing, Florentine families",
    ("mnist-tiny-cnn", "florentine"): "MNIST, Florentine families",
}


def _interval(values: np.ndarray) -> tuple[float, float]:
    """Mean and half-width of the 95% Student t interval (nan with one value)."""
    if len(values) < 2:
        return float(np.mean(values)), math.nan
    quantile = float(student_t.ppf(0.975, len(values) - 1))
    return float(values.mean()), quantile * float(values.std(ddof=1)) / math.sqrt(len(values))


def _images(task: str) -> bool:
    return task == images.TASKS["mnist-cnn"]


def _error(row: Mapping[str, Any]) -> float:
    """What a run is judged by, lower better: its test loss (Housing) or test error (MNIST)."""
    if _images(row["task"]):
        return 1.0 - float(row["test_accuracy"])
    return float(row["test_loss"])


def _shown(row: Mapping[str, Any]) -> float:
    """What the report shows of a run: its test loss (Housing) or test accuracy in % (MNIST)."""
    return 100.0 * float(row["test_accuracy"]) if _images(row["task"]) else float(row["test_loss"])


Grouped = dict[str, dict[float, dict[int, dict[str, Any]]]]


def _grouped(rows: list[dict[str, Any]]) -> dict[tuple[str, str], Grouped]:
    """The rows by panel (task, graph), method, mu and seed."""
    panels: dict[tuple[str, str], Grouped] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(dict))
    )
    for row in rows:
        panels[(row["task"], row["graph"])][row["method"]][float(row["mu"])][int(row["seed"])] = row
    return {key: panels[key] for key in PANELS if key in panels}


def _values(runs: dict[int, dict[str, Any]], seeds: list[int], of: Any = _error) -> np.ndarray:
    return np.array([of(runs[seed]) for seed in seeds], dtype=float)


def _paired(
    grouped: Grouped, method: str, other: str, mu: float, seeds: list[int]
) -> tuple[float, float, float]:
    """The paired difference of `method`'s error minus `other`'s at `mu` (mean, half-width of
    its interval) and `other`'s mean error, over `seeds`."""
    mine = _values(grouped[method][mu], seeds)
    theirs = _values(grouped[other][mu], seeds)
    mean, half = _interval(mine - theirs)
    return mean, half, float(theirs.mean())


def _relative(mean: float, half: float, base: float) -> str:
    """A paired difference relative to `base`: its value and interval in %."""
    if not math.isfinite(half):
        return f"{100 * mean / base:+.1f}%"
    low, high = 100 * (mean - half) / base, 100 * (mean + half) / base
    return f"{100 * mean / base:+.1f}% [{low:+.1f}, {high:+.1f}]"


def _order(methods: list[str]) -> list[str]:
    known = [m for m in (*BASELINES, *STRATEGIES) if m in methods]
    return known + sorted(m for m in methods if m not in known)


def _accounted(row: Mapping[str, Any]) -> float:
    """The eps a run's accountant gave it: `eps` in this reproduction's rows (`run_job`),
    `epsilon` in a sweep's (whose `eps` is the option, what mu gives at delta)."""
    return float(row["epsilon"] if "epsilon" in row else row["eps"])


def _budget_claim(rows: list[dict[str, Any]]) -> Claim:
    """Every run is mu-GDP at its label mu: its eps at delta no more than what mu gives."""
    over = [row for row in rows if _accounted(row) > gdp.epsilon(float(row["mu"]), DELTA)]
    mus = sorted({float(row["mu"]) for row in rows})
    return checked(
        "all",
        "every run meets its budget, whichever the strategy (its noise multiplier calibrated to "
        "its encoder's sensitivity under the runs' cyclic participation)",
        f"{len(rows) - len(over)}/{len(rows)} runs within the eps their mu gives at delta = "
        f"{DELTA:g} ("
        + ", ".join(f"mu {mu:g}: eps {gdp.epsilon(mu, DELTA):.3g}" for mu in mus)
        + ")",
        not over,
        f"{len(over)} runs above their budget: a calibration error",
    )


def _improves_claim(
    panel: str, grouped: Grouped, method: str, other: str, seeds: list[int]
) -> Claim:
    """`method` improves on `other` at every mu: the paired interval of the difference of errors
    lies below 0. The reason tells the mu where it is not significant over the seeds (and on
    which side its mean lies) from those where it is significantly worse."""
    mus = sorted(grouped[method])
    paired = {mu: _paired(grouped, method, other, mu, seeds) for mu in mus}
    better = [mu for mu, (mean, half, _) in paired.items() if mean + half < 0]
    worse = [mu for mu, (mean, half, _) in paired.items() if mean - half > 0]
    unclear = [mu for mu in mus if mu not in better and mu not in worse]
    metric = "test error" if panel.startswith("MNIST") else "test loss"

    def listed(chosen: list[float]) -> str:
        return ", ".join(f"{mu:g}" for mu in chosen)

    reasons = []
    if worse:
        reasons.append(f"significantly higher at mu {listed(worse)}: it does not help there")
    if unclear:
        side = {
            True: [mu for mu in unclear if paired[mu][0] < 0],
            False: [mu for mu in unclear if paired[mu][0] >= 0],
        }
        reasons.append(
            f"not significant over the {len(seeds)} seeds at mu {listed(unclear)} (the paired "
            "interval reaches 0; "
            + "; ".join(
                f"{'lower' if lower else 'higher'} on average at mu {listed(side[lower])}"
                for lower in (True, False)
                if side[lower]
            )
            + ")"
        )
    if better:
        reasons.append(f"significantly lower at mu {listed(better)}")
    return checked(
        panel,
        f"{LABELS.get(method, method)} improves on {LABELS.get(other, other)}",
        f"final {metric}, {LABELS.get(method, method)} minus {LABELS.get(other, other)}, paired "
        f"over {len(seeds)} seeds, relative to {LABELS.get(other, other)}'s mean [95% interval]: "
        + "; ".join(f"mu {mu:g}: {_relative(*paired[mu])}" for mu in mus),
        not worse and not unclear,
        "; ".join(reasons),
    )


def _within_claim(
    panel: str,
    grouped: Grouped,
    method: str,
    seeds: list[int],
    memory: dict[str, tuple[int, int]],
) -> Claim:
    """`method` is within `WITHIN` of MAFALDA-SGD at every mu, at the memory it keeps."""
    mus = sorted(grouped[method])
    paired = {mu: _paired(grouped, method, "mafalda", mu, seeds) for mu in mus}
    far = [mu for mu, (mean, half, base) in paired.items() if not mean + half <= WITHIN * base]
    metric = "test error" if panel.startswith("MNIST") else "test loss"
    label = LABELS.get(method, method)
    return checked(
        panel,
        f"{label} is within {WITHIN:.0%} of MAFALDA-SGD's final {metric} with "
        f"{memory[method][0]} floats of noise state per agent and coordinate instead of "
        f"{memory['mafalda'][0]} (dpdl's engine; the least any generator of its noise needs: "
        f"{memory[method][1]} and {memory['mafalda'][1]})",
        f"{label} minus MAFALDA-SGD, paired, relative to MAFALDA-SGD [95% interval]: "
        + "; ".join(f"mu {mu:g}: {_relative(*paired[mu])}" for mu in mus),
        not far,
        _far_reason(paired, far, len(seeds)),
    )


def _far_reason(
    paired: dict[float, tuple[float, float, float]], far: list[float], seeds: int
) -> str:
    """Why a strategy is not shown within `WITHIN` of MAFALDA-SGD: at the mu `far`, its mean
    excess is above it, or the interval over the seeds is too wide to tell."""
    above = [mu for mu in far if paired[mu][0] > WITHIN * paired[mu][2]]
    wide = [mu for mu in far if mu not in above]
    reasons = []
    if above:
        reasons.append(
            f"its mean excess is above {WITHIN:.0%} at mu " + ", ".join(f"{mu:g}" for mu in above)
        )
    if wide:
        reasons.append(
            f"the {seeds} seeds cannot tell at mu "
            + ", ".join(
                f"{mu:g} (mean {100 * paired[mu][0] / paired[mu][2]:+.1f}%, the interval up to "
                f"{100 * (paired[mu][0] + paired[mu][1]) / paired[mu][2]:+.1f}%)"
                for mu in wide
            )
        )
    return "; ".join(reasons)


def _design_claims(graph: str, designs: dict[str, dict[str, float]]) -> list[Claim]:
    """On the gossip of `graph`: no strategy's predicted error below MAFALDA-SGD's (the optimum
    over every encoder); which strategies' predicted error is below DP-D-SGD's."""
    loss = {method: design["design_loss"] for method, design in designs.items()}
    strategies = [m for m in _order(list(loss)) if m not in BASELINES]
    panel = f"design, {PANELS[('housing-mlp-sklearn', graph)].split(', ')[1]}"
    ratios = ", ".join(
        f"{LABELS.get(m, m)} {loss[m] / loss['dp-dsgd']:.3g}" for m in _order(list(loss))
    )
    below = [m for m in strategies if loss[m] < loss["mafalda"] * (1 - 1e-6)]
    above = [m for m in strategies if loss[m] >= loss["dp-dsgd"]]
    return [
        checked(
            panel,
            "MAFALDA-SGD's encoder, optimised over every lower-triangular encoder (Lemma 12), "
            "predicts the least error of all: no strategy's sens^2 tr(H X^-1) is below it",
            f"predicted error relative to DP-D-SGD's ({loss['dp-dsgd']:.4g}): {ratios}",
            not below,
            "below MAFALDA-SGD's: "
            + ", ".join(f"{LABELS.get(m, m)} ({loss[m] / loss['mafalda']:.4f}x)" for m in below)
            + ": MAFALDA-SGD's optimisation stopped above the optimum",
        ),
        checked(
            panel,
            "every strategy predicts less error than DP-D-SGD's independent noise on this gossip",
            "predicted error relative to MAFALDA-SGD's: "
            + ", ".join(f"{LABELS.get(m, m)} {loss[m] / loss['mafalda']:.3g}" for m in strategies),
            not above,
            "more than DP-D-SGD's: "
            + ", ".join(f"{LABELS.get(m, m)} ({loss[m] / loss['dp-dsgd']:.3g}x)" for m in above)
            + ": designed for another workload, it does not fit the gossip's",
        ),
    ]


def _ranks_claim(panel: str, grouped: Grouped, seeds: list[int]) -> Claim:
    """The predicted error orders the methods as their final error does at the tightest mu."""
    methods = _order(list(grouped))
    mu = min(min(grouped[m]) for m in methods)
    at = [m for m in methods if mu in grouped[m]]
    predicted = [float(next(iter(grouped[m][mu].values()))["design_loss"]) for m in at]
    measured = [float(_values(grouped[m][mu], seeds).mean()) for m in at]
    rho = float(spearmanr(predicted, measured).statistic) if len(at) > 2 else math.nan
    return checked(
        panel,
        f"the predicted error sens^2 tr(H X^-1) orders the methods as their final error does "
        f"(Spearman's rank correlation at least {ORDERS:g}, at the tightest mu)",
        f"mu {mu:g}: rank correlation {rho:.2f} over {len(at)} methods; by predicted error: "
        + ", ".join(LABELS.get(m, m) for _, m in sorted(zip(predicted, at, strict=True)))
        + "; by final error: "
        + ", ".join(LABELS.get(m, m) for _, m in sorted(zip(measured, at, strict=True))),
        rho >= ORDERS,
        f"rank correlation {rho:.2f}: the design's objective (the gossiped models' error under "
        "a linearised, unclipped model) does not rank the methods as training does",
        Verdict.NOT_TESTABLE if not math.isfinite(rho) else Verdict.FAILS,
    )


def _first(grouped: Grouped, method: str) -> dict[str, Any]:
    """A run of `method` (its design's fields are every run's)."""
    return next(iter(grouped[method][min(grouped[method])].values()))


def _memory(grouped: Grouped) -> dict[str, tuple[int, int]]:
    """Per method: the floats of noise state the engine keeps per step (`engine_memory`) and
    the least any causal generator needs (`state_floats`, the runs' field)."""
    memory = {}
    for method in grouped:
        row = _first(grouped, method)
        engine = engine_memory(method, row["graph"], int(row["steps"]), int(row["cycle"]))
        memory[method] = (engine, int(row["state_floats"]))
    return memory


def _table(
    panel: str, grouped: Grouped, seeds: list[int], memory: dict[str, tuple[int, int]]
) -> str:
    """The results of one panel as a markdown table: per method its encoder's sensitivity,
    predicted error, noise memory, and at every mu its final metric (mean and 95% t half-width
    over seeds) with the noise multiplier sigma its runs used."""
    methods = _order(list(grouped))
    mus = sorted({mu for m in methods for mu in grouped[m]})
    metric = "test accuracy (%)" if panel.startswith("MNIST") else "test loss"
    first = {m: _first(grouped, m) for m in methods}
    base = float(first["dp-dsgd"]["design_loss"]) if "dp-dsgd" in first else math.nan
    lines = [
        f"{panel}: final {metric}, mean ± 95% t half-width over seeds "
        f"{', '.join(map(str, seeds))}, and sigma (the noise multiplier of the runs)",
        "",
        "| method | sens | predicted error (x DP-D-SGD's) | noise memory: engine / least "
        "(floats) | "
        + " | ".join(f"mu {mu:g} (eps {gdp.epsilon(mu, DELTA):.3g})" for mu in mus)
        + " |",
        "| --- | --- | --- | --- |" + " --- |" * len(mus),
    ]
    for m in methods:
        cells = []
        for mu in mus:
            if mu not in grouped[m]:
                cells.append("-")
                continue
            mean, half = _interval(_values(grouped[m][mu], seeds, _shown))
            sigma = float(next(iter(grouped[m][mu].values()))["sigma"])
            cells.append(f"{mean:.4g} ± {half:.2g} (sigma {sigma:.3g})")
        row = first[m]
        lines.append(
            f"| {LABELS.get(m, m)} | {float(row['sensitivity']):.4g} | "
            f"{float(row['design_loss']) / base:.3g} | {memory[m][0]} / {memory[m][1]} | "
            + " | ".join(cells)
            + " |"
        )
    return "\n".join(lines) + "\n"  # a blank line ends the table before the next note


def _paired_figure(
    panels: dict[tuple[str, str], Grouped], seeds: list[int], out: Path
) -> Path | None:
    """Every method's excess over MAFALDA-SGD (test loss; MNIST: test error), paired over seeds
    and relative to MAFALDA-SGD's mean, with its 95% interval: against eps where a panel has
    several budgets, method by method where it has one."""
    grid: dict[str, list[float]] = {}
    series: dict[str, dict[str, list[float]]] = {}
    bands: dict[str, dict[str, tuple[list[float], list[float]]]] = {}
    xlabels: dict[str, str] = {}
    ticks: dict[str, list[str]] = {}
    for key, grouped in panels.items():
        if "mafalda" not in grouped:
            continue
        panel = PANELS[key]
        others = [m for m in _order(list(grouped)) if m != "mafalda"]
        mus = sorted(grouped["mafalda"])
        excess = {
            m: [
                (100 * mean / base, 100 * np.nan_to_num(half) / base)
                for mean, half, base in (_paired(grouped, m, "mafalda", mu, seeds) for mu in mus)
            ]
            for m in others
        }
        if len(mus) > 1:
            grid[panel] = [gdp.epsilon(mu, DELTA) for mu in mus]
            xlabels[panel] = "LDP budget eps (delta = 1e-6)"
            series[panel] = {LABELS.get(m, m): [e for e, _ in excess[m]] for m in others}
            bands[panel] = {
                LABELS.get(m, m): ([e - h for e, h in excess[m]], [e + h for e, h in excess[m]])
                for m in others
            }
        else:
            grid[panel] = list(range(len(others)))
            ticks[panel] = [SHORT.get(m, LABELS.get(m, m)) for m in others]
            xlabels[panel] = f"method (mu {mus[0]:g}, eps {gdp.epsilon(mus[0], DELTA):.3g})"
            label = "excess over MAFALDA-SGD"
            series[panel] = {label: [excess[m][0][0] for m in others]}
            bands[panel] = {
                label: (
                    [excess[m][0][0] - excess[m][0][1] for m in others],
                    [excess[m][0][0] + excess[m][0][1] for m in others],
                )
            }
    if not grid:
        return None
    return plot_panels(
        grid,
        series,
        xlabels,
        "excess over MAFALDA-SGD (% of its mean)",
        out / "excess_over_mafalda.png",
        "Test loss (MNIST: test error) minus MAFALDA-SGD's, paired (mean, 95% t interval)",
        log_y=False,
        bands=bands,
        log_x=not ticks,
        titles=True,
        ticks=ticks or None,
    )


def _figures(panels: dict[tuple[str, str], Grouped], seeds: list[int], out: Path) -> list[Path]:
    """Test loss vs eps (Housing, one panel per graph) and test accuracy by method (MNIST)."""
    figures = []
    for images_task, name, ylabel in (
        (False, "test_loss.png", "final test loss (MSE, target in $100,000)"),
        (True, "test_accuracy.png", "final test accuracy (%)"),
    ):
        chosen = {key: g for key, g in panels.items() if _images(key[0]) == images_task}
        if not chosen:
            continue
        grid, series, bands, xlabels, ticks = {}, {}, {}, {}, {}
        for key, grouped in chosen.items():
            panel = PANELS[key]
            methods = _order(list(grouped))
            mus = sorted({mu for m in methods for mu in grouped[m]})
            stats = {
                m: [_interval(_values(grouped[m][mu], seeds, _shown)) for mu in mus]
                for m in methods
            }
            if len(mus) > 1:  # a line per method over eps
                grid[panel] = [gdp.epsilon(mu, DELTA) for mu in mus]
                xlabels[panel] = "LDP budget eps (delta = 1e-6)"
                series[panel] = {LABELS.get(m, m): [s[0] for s in stats[m]] for m in methods}
                bands[panel] = {
                    LABELS.get(m, m): (
                        [s[0] - np.nan_to_num(s[1]) for s in stats[m]],
                        [s[0] + np.nan_to_num(s[1]) for s in stats[m]],
                    )
                    for m in methods
                }
            else:  # one budget: the methods side by side
                grid[panel] = list(range(len(methods)))
                ticks[panel] = [SHORT.get(m, LABELS.get(m, m)) for m in methods]
                xlabels[panel] = f"method (mu {mus[0]:g}, eps {gdp.epsilon(mus[0], DELTA):.3g})"
                label = "mean over agents"
                series[panel] = {label: [stats[m][0][0] for m in methods]}
                bands[panel] = {
                    label: (
                        [stats[m][0][0] - np.nan_to_num(stats[m][0][1]) for m in methods],
                        [stats[m][0][0] + np.nan_to_num(stats[m][0][1]) for m in methods],
                    )
                }
        figures.append(
            plot_panels(
                grid,
                series,
                xlabels,
                ylabel,
                out / name,
                "Strategies, authors' protocol (mean, 95% t interval)",
                log_y=not images_task,
                bands=bands,
                log_x=not ticks,
                titles=True,
                ticks=ticks or None,
            )
        )
    return figures


#: The committed runs of `mafalda-housing`, whose authors' part shares the baselines' Housing runs.
HOUSING_RUNS = Path(__file__).resolve().parents[2] / "results" / "mafalda-housing" / "runs.csv"
#: What a shared run is compared on, per graph: the Facebook ego graph's mean over agents is scored
#: on a sample of the test set since those runs (the agents' models on 2027 of its 4128 rows,
#: `dpdl.scale.AGENT_EVAL_PAIRS`), its average model on all of it.
SHARED_FIELDS = {
    "florentine": ("test_loss", "consensus_distance"),
    "facebook-ego-414": ("test_loss_average_model", "consensus_distance"),
}


def _shared_note(rows: list[dict[str, Any]]) -> str | None:
    """Whether the baselines' Housing runs are `mafalda-housing`'s committed runs of the same
    configuration (its authors' part, version 3), digit for digit."""
    if not HOUSING_RUNS.is_file():
        return None
    committed = {
        (r["graph"], r["method"], float(r["mu"]), int(r["seed"])): r
        for r in read_rows(HOUSING_RUNS)
        if r.get("protocol") == housing.PROTOCOL and r["graph"] in SHARED_FIELDS
    }
    pairs = [
        (row, committed[key])
        for row in rows
        if not _images(row["task"])
        and (key := (row["graph"], row["method"], float(row["mu"]), int(row["seed"]))) in committed
    ]
    if not pairs:
        return None
    gaps = [
        max(abs(float(a[f]) / float(b[f]) - 1) for f in SHARED_FIELDS[a["graph"]]) for a, b in pairs
    ]
    return (
        f"The baselines' Housing runs that `mafalda-housing` committed too (its authors' part: "
        f"same configuration, seeds and draws): {sum(gap == 0 for gap in gaps)}/{len(pairs)} give "
        f"its numbers to every digit, the others within {max(gaps):.1g} relative (the float32 "
        "rounding of the evaluation, the last digits of the encoder's optimisation); compared on "
        "the Florentine families' final test loss and consensus distance, and on the Facebook ego "
        "graph's average model's test loss and consensus distance, since the 148 agents' own "
        "models are now scored on a fixed sample of 2027 of the 4128 test rows "
        "(`dpdl.scale.AGENT_EVAL_PAIRS`) where those runs scored all of them: there the mean over "
        "agents differs, the training does not."
    )


def _blt_note(panels: dict[tuple[str, str], Grouped]) -> str | None:
    """What the optimised BLT buffer holds on each graph: how many of its (theta, omega) pairs
    act, and the floats its noise needs at least."""
    parts = []
    for (task, graph), grouped in panels.items():
        if "blt" not in grouped or _images(task):
            continue
        row = _first(grouped, "blt")
        strategy = strategy_for(
            "blt", mixing(graph, housing.RULE), int(row["steps"]), int(row["cycle"])
        )
        assert strategy.buffer is not None  # a BLT's
        theta, omega = strategy.buffer
        parts.append(
            f"{PANELS[(task, graph)].split(', ')[1]}: theta "
            + ", ".join(f"{t:.4g}" for t in theta)
            + ", omega "
            + ", ".join(f"{w:.4g}" for w in omega)
            + f" (least state {int(row['state_floats'])})"
        )
    if not parts:
        return None
    return (
        "BLT's optimised buffer of 4 (`--buffer` 4): "
        + "; ".join(parts)
        + ". Where an omega is 0 its pair adds nothing, and pairs of one theta add up to one: "
        "the least state counts the decays that act, so the engine's 4 floats could be fewer."
    )


#: The centralized special case, checked against jax-privacy 2.0 (`make crosscheck-jax-privacy`,
#: BENCHMARKS.md's section; `tests/factorization/test_jax_privacy_crosscheck.py` checks the
#: recorded numbers on every test run).
CROSSCHECK_NOTE = (
    "The strategies' centralized special case against jax-privacy 2.0 (its own environment, "
    "`make crosscheck-jax-privacy`; the section of BENCHMARKS.md, checked by "
    "`tests/factorization/test_jax_privacy_crosscheck.py` on the recorded numbers): with one "
    "agent, or exact averaging W = 11^T / n, the decentralized utility Gram matrix is exactly the "
    "prefix sum's A^T A, and over 156 strategies and participations (identity, square root, BSR, "
    "BandMF, BISR, BLT, jax-privacy's optimised BandMF, BLT and dense optimum; T = 16, 64, 256) "
    "dpdl's sensitivity equals jax-privacy's to 7.1e-16 relative (cyclic) and 5.7e-16 "
    "(b-min-separated) and the expected error to 4.0e-13; dpdl's own constructors rebuild "
    "jax-privacy's C and C^-1 from the same parameters to 1.0e-15. Where jax-privacy's Toeplitz "
    "formula is used outside its assumptions (coefficients [1, .2, .1, .1, .1, .9], T = 8, k = 2, "
    "b = 4) it gives 1.870829 against dpdl's exact 2.174856."
)


def _cuts_note(seconds: dict[str, list[float]]) -> str:
    """What this report leaves out of the grid it was asked for, and why."""
    mnist = float(np.median(seconds.get("MNIST, Florentine families") or [math.nan]))
    cost = ", ".join(
        f"{panel} {np.median(values):.0f} s" for panel, values in seconds.items() if values
    )
    return (
        "Cut from the grid first planned (Housing mu in {0.5, 1, 2}, MNIST mu in {1, 2, 5}, 3 "
        "seeds, the whole under an hour of one core): MNIST runs at mu = 5 only, since a run of "
        "the CNN takes minutes here (five processes sharing two cores; 63 runs would have "
        f"taken {63 * mnist / 60:.0f} minutes at the median below), and at mu 1 and 2 "
        "`mafalda-images`' authors' part ends near chance with DP-D-SGD and MAFALDA-SGD a point "
        "apart (18.8 / 17.9% over agents at mu 1, 27.7 / 27.1% at mu 2), too close to rank "
        "strategies; the Florentine families' Housing runs at mu in {0.1, 0.2, 0.5} instead of "
        "{0.5, 1, 2}, where DP-D-SGD and MAFALDA-SGD end within 4% of the no-noise loss "
        "(`mafalda-housing`'s Fig. 5 part). Three seeds, the floor: the t quantile for 2 "
        "degrees of freedom is 4.30, so only large or very regular differences are significant. "
        + (f"Median compute per run: {cost}." if cost else "")
    )


def analyse(
    rows: list[dict[str, Any]], out: Path, quick: bool, parts: tuple[str, ...] = PARTS
) -> tuple[list[Path], list[Claim], list[str]]:
    """Per panel: the table of every method's final metric, sensitivity, sigma, predicted error
    and noise state; per strategy the claims that it improves on DP-D-SGD and is within 5% of
    MAFALDA-SGD; per gossip the predicted errors' claims; whether the predicted error ranks the
    methods as training does."""
    panels = _grouped(rows)
    seeds = sorted({int(row["seed"]) for row in rows})
    claims = [_budget_claim(rows)]
    notes = []
    designs: dict[str, dict[str, dict[str, float]]] = {}
    for key, grouped in panels.items():
        panel = PANELS[key]
        methods = _order(list(grouped))
        memory = _memory(grouped)
        notes.append(_table(panel, grouped, seeds, memory))
        designs.setdefault(key[1], {}).update(
            {m: {"design_loss": float(_first(grouped, m)["design_loss"])} for m in methods}
        )
        if set(BASELINES) <= set(methods):
            claims.append(_improves_claim(panel, grouped, "mafalda", "dp-dsgd", seeds))
        for method in (m for m in methods if m not in BASELINES):
            if "dp-dsgd" in grouped:
                claims.append(_improves_claim(panel, grouped, method, "dp-dsgd", seeds))
            if "mafalda" in grouped:
                claims.append(_within_claim(panel, grouped, method, seeds, memory))
        if len(methods) > 2:
            claims.append(_ranks_claim(panel, grouped, seeds))
    for graph, of_graph in designs.items():
        if set(BASELINES) <= set(of_graph) and len(of_graph) > 2:
            claims += _design_claims(graph, of_graph)
    seconds = {
        PANELS[key]: [
            float(r[RUN_SECONDS])
            for g in grouped.values()
            for by_seed in g.values()
            for r in by_seed.values()
            if r.get(RUN_SECONDS) is not None
        ]
        for key, grouped in panels.items()
    }
    notes += [
        note
        for note in (
            _blt_note(panels),
            _shared_note(rows),
            _cuts_note(seconds),
            CROSSCHECK_NOTE,
        )
        if note is not None
    ]
    if "strategies" not in parts or not any(
        m in STRATEGIES for grouped in panels.values() for m in grouped
    ):
        notes.append(
            "The strategies' runs are not in this report (part `strategies` not run): only "
            "DP-D-SGD and MAFALDA-SGD are compared."
        )
    paired = _paired_figure(panels, seeds, out)
    return _figures(panels, seeds, out) + ([paired] if paired else []), claims, notes
