"""Whisper D-SGD / CorN-DSGD's learning figures as the authors' released code runs them
(`train.py` of their repository), beside the papers' protocol in `whisper-logreg` and
`corn-mnist`.

What the code does (`utils/optim.py`, `learner.py`, `diff_privacy.py`, `utils/dp_solver.py`,
`paper_experiments/*/*.sh`): each agent draws a batch of 128 of its examples, clips every
example's gradient to C = 0.1 (microbatches of one), sums them, adds its share of the correlated
noise and divides by 128, then takes an SGD step and gossips (Metropolis-Hastings weights on an
Erdos-Renyi graph, a fresh draw per seed). The noise covariance is solved under
`max_i [Sigma^-1]_ii <= (sqrt(log(1/delta) + eps) - sqrt(log(1/delta)))^2 / (2 T C^2)`, the
zero-concentrated-DP conversion at sensitivity 2C over T rounds: a guarantee for one EXAMPLE
(replace-one, no credit for the sampling), not for an agent's data, whose batch sum moves by up to
128 C. dpdl runs the same mechanism at example level (calibration `authors`,
`dpdl_reproductions.zcdp_bound.authors_mu_step`: the same noise, relative to the per-example
sensitivity C / 128 of the batch mean) and accounts it exactly
(example-level add/remove-one, Poisson sampling, PLD): every such run reports the eps it really
has, far below its label.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from dpdl.accounting import ExampleLevel, calibrate, gdp
from dpdl.accounting.accountant import pld_epsilon
from dpdl.experiments.train import run_training
from dpdl.jobspec.config import TrainConfig
from dpdl.settings import TaskOptions
from dpdl.threads import job_threads
from dpdl_reproductions import tradeoff
from dpdl_reproductions.report import Claim, Verdict
from dpdl_reproductions.tradeoff import Job
from dpdl_reproductions.zcdp_bound import authors_mu_step

__all__ = [
    "AUTHORS_CALIBRATION",
    "PROTOCOL",
    "TASK_OPTIONS",
    "budget_claim",
    "config_of",
    "merge_claims",
    "run_job",
    "scales_table",
]

PROTOCOL = "authors"
#: The calibration of the authors' closed form (:mod:`dpdl_reproductions.zcdp_bound`); ``exact``
#: beside it is dpdl's example-level accountant at the same label.
AUTHORS_CALIBRATION = "authors"
#: The authors' data: a9a's own train / test files, no regularisation (``weight_decay`` 0 in every
#: script); MNIST: 20% of the 70000 images (``generate_data.py --s_frac 0.2``), the kept images of
#: the test file as the test set, no regularisation.
TASK_OPTIONS = {
    "logreg-a9a": TaskOptions(l2=0.0, split="files"),
    "mnist-linear": TaskOptions(l2=0.0, split="files", data_fraction=0.2),
}


def config_of(job: Job) -> TrainConfig:
    """The training configuration of a job of the authors' protocol: the trade-off figures'
    (`config_of`, its calibration `authors` or
    `exact`) with the authors' data options."""
    return replace(tradeoff.config_of(job), task_options=TASK_OPTIONS[job["task"]])


def run_job(job: Job) -> dict[str, Any]:
    """One seed of one grid point in the authors' protocol: the task with their data options, the
    mechanism at their noise (calibration `authors`) or at dpdl's exact example-level
    calibration (`exact`), trained by dpdl's engine; the row of
    `run_job` (its `epsilon`: dpdl's exact
    example-level eps of the run's noise) and the run's Poisson sampling rate."""
    with job_threads():
        result = run_training(config_of(job))
    assert result.calibration is not None  # every method of the protocol adds noise
    relation = result.calibration.neighbouring
    return {
        **tradeoff.result_row(result),
        "sampling_rate": relation.sampling_rate if isinstance(relation, ExampleLevel) else 1.0,
    }


def scales_table(
    labels: tuple[float, ...], steps: int, delta: float, rate: float, batch: int
) -> list[str]:
    """For each label eps: the authors' noise multiplier (noise std over C on the batch sum),
    what dpdl's accountant says of it (example level with and without the sampling's credit, and
    at agent level, where the mean's sensitivity is C and its noise the sum's over `batch`), and
    dpdl's own example-level calibration at the label (its multiplier, and how many times less
    noise it needs)."""
    lines = [
        f"| label eps | authors' noise multiplier sigma / C (sum of the batch) | dpdl exact, "
        f"example level, Poisson rate {rate:.3g}: (eps, {delta:g}) | dpdl exact, example level, "
        f"no sampling credit | dpdl exact, agent level (noise / {batch} on the mean) | dpdl's "
        "example-level calibration at the label: sigma / C | authors' noise / dpdl's |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for eps in labels:
        mu = authors_mu_step(eps, delta, steps)
        own = calibrate(eps, delta, steps, ExampleLevel(0.1, batch, rate), "exact").mu_step
        agent = gdp.epsilon(mu * batch * math.sqrt(steps), delta)  # Gaussian: GDP is exact
        lines.append(
            f"| {eps:g} | {1 / mu:.4g} | {pld_epsilon(mu, rate, steps, delta):.3g} | "
            f"{pld_epsilon(mu, 1.0, steps, delta):.3g} | {agent:.3g} | {1 / own:.3g} | "
            f"{own / mu:.3g} |"
        )
    return lines


def budget_claim(rows: list[dict[str, Any]], label: str) -> Claim:
    """Every run of the authors' protocol is (eps, delta)-DP at example level by dpdl's exact
    accountant, at both calibrations."""
    met = [row for row in rows if row["epsilon"] <= row["eps"]]
    worst = max(rows, key=lambda row: row["epsilon"] / row["eps"])
    by_label: dict[float, float] = {}
    for row in rows:
        if row["calibration"] == AUTHORS_CALIBRATION:
            by_label[row["eps"]] = max(by_label.get(row["eps"], 0.0), row["epsilon"])
    measured = (
        f"dpdl's exact example-level eps <= label in {len(met)}/{len(rows)} runs (largest ratio "
        f"{worst['epsilon'] / worst['eps']:.3g}); the authors' noise at each label, the largest "
        "over its runs (their graphs and partitions differ): "
        + ", ".join(f"{eps:g} -> {value:.3g}" for eps, value in sorted(by_label.items()))
    )
    claim = "every run is (eps, delta)-DP (the authors' code: for one example, not one agent)"
    if len(met) == len(rows):
        return Claim(label, claim, measured, Verdict.HOLDS)
    return Claim(label, claim, measured, Verdict.FAILS, "some runs exceed their label")


def _said(verdict: Verdict) -> str:
    """`verdict` after "it" in a sentence: "it holds", "it fails", "it is not testable"."""
    return f"is {verdict.value}" if verdict is Verdict.NOT_TESTABLE else verdict.value


def merge_claims(paper: list[Claim], authors: list[Claim], why: str) -> list[Claim]:
    """The papers' claims checked in both protocols, one row each: a claim that holds in the
    paper's protocol holds; one that fails (or cannot be tested) there but holds in the authors'
    holds in the authors' protocol only (`why`: what in their protocol makes it hold); otherwise
    the paper's verdict stands, with the authors' result beside it. Claims of either list that the
    other does not state are kept as they are."""
    theirs = {claim.paper: claim for claim in authors}
    merged = []
    for claim in paper:
        other = theirs.pop(claim.paper, None)
        if other is None:
            merged.append(claim)
            continue
        there = _said(other.verdict) + (f": {other.reason}" if other.reason else "")
        measured = (
            f"paper's protocol: {claim.measured}. Authors' protocol: {other.measured} (there "
            f"it {there})"
        )
        if claim.verdict is Verdict.HOLDS:
            merged.append(Claim(claim.panel, claim.paper, measured, Verdict.HOLDS))
        elif other.verdict is Verdict.HOLDS:
            merged.append(
                Claim(
                    claim.panel,
                    claim.paper,
                    measured,
                    Verdict.AUTHORS_ONLY,
                    f"in the paper's protocol it {_said(claim.verdict)}: {claim.reason}. {why}",
                )
            )
        else:
            merged.append(
                Claim(
                    claim.panel,
                    claim.paper,
                    measured,
                    claim.verdict,
                    f"{claim.reason}. In the authors' protocol it {there}",
                )
            )
    return merged + list(theirs.values())
