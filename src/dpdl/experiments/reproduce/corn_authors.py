"""Whisper D-SGD / CorN-DSGD's learning figures as the authors' released code runs them
(``train.py`` of their repository), beside the papers' protocol in ``whisper-logreg`` and
``corn-mnist``.

What the code does (``utils/optim.py``, ``learner.py``, ``diff_privacy.py``, ``utils/dp_solver.py``,
``paper_experiments/*/*.sh``): each agent draws a batch of 128 of its examples, clips every
example's gradient to C = 0.1 (microbatches of one), sums them, adds its share of the correlated
noise and divides by 128, then takes an SGD step and gossips (Metropolis-Hastings weights on an
Erdos-Renyi graph, a fresh draw per seed). The noise covariance is solved under
``max_i [Sigma^-1]_ii <= (sqrt(log(1/delta) + eps) - sqrt(log(1/delta)))^2 / (2 T C^2)``, the
zero-concentrated-DP conversion at sensitivity 2C over T rounds: a guarantee for one EXAMPLE
(replace-one, no credit for the sampling), not for an agent's data, whose batch sum moves by up to
128 C. dpdl runs the same mechanism at example level (:func:`authors_mu_step`: the same noise,
relative to the per-example sensitivity C / 128 of the batch mean) and accounts it exactly
(example-level add/remove-one, Poisson sampling, PLD): every such run reports the eps it really
has, far below its label.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import torch
from threadpoolctl import threadpool_limits

from dpdl.accounting import Calibration, ExampleLevel, calibrate, gdp
from dpdl.accounting.accountant import epsilon_from_mu_step, pld_epsilon
from dpdl.experiments.reproduce.report import Claim, Verdict
from dpdl.experiments.reproduce.tradeoff import Job, config_of
from dpdl.jobspec.curvature import run_design
from dpdl.jobspec.job import build_job, privacy_reports
from dpdl.mechanisms.registry import build_mechanism
from dpdl.settings import TaskOptions
from dpdl.simulation import run_dsgd

__all__ = [
    "AUTHORS_CALIBRATION",
    "PROTOCOL",
    "TASK_OPTIONS",
    "authors_mu_step",
    "budget_claim",
    "merge_claims",
    "run_job",
    "scales_table",
]

PROTOCOL = "authors"
#: The calibration of the authors' closed form (:func:`authors_mu_step`); ``exact`` beside it is
#: dpdl's example-level accountant at the same label.
AUTHORS_CALIBRATION = "authors"
#: The authors' data: a9a's own train / test files, no regularisation (``weight_decay`` 0 in every
#: script); MNIST: 20% of the 70000 images (``generate_data.py --s_frac 0.2``), the kept images of
#: the test file as the test set, no regularisation.
TASK_OPTIONS = {
    "logreg-a9a": TaskOptions(l2=0.0, split="files"),
    "mnist-linear": TaskOptions(l2=0.0, split="files", data_fraction=0.2),
}


def authors_mu_step(eps: float, delta: float, steps: int) -> float:
    """The authors' noise as dpdl's per-step sensitivity over noise at example level: their LDP
    variance ``2 T C^2 / (sqrt(log(1/delta) + eps) - sqrt(log(1/delta)))^2`` on the sum of the
    batch's clipped gradients (``diff_privacy.py: _compute_dp_bound``, ``solve_ldp``), i.e. a
    noise standard deviation ``C / mu`` on the sum and ``(C / B) / mu`` on the mean, whose
    per-example sensitivity is ``C / B``."""
    log_delta = math.log(1.0 / delta)
    return (math.sqrt(log_delta + eps) - math.sqrt(log_delta)) / math.sqrt(2.0 * steps)


def run_job(job: Job) -> dict[str, Any]:
    """One seed of one grid point in the authors' protocol: the task with their data options, the
    mechanism at their noise (calibration ``authors``) or at dpdl's exact example-level
    calibration (``exact``), trained by dpdl's engine; the row of
    :func:`~dpdl.experiments.reproduce.tradeoff.run_job` (its ``epsilon``: dpdl's exact
    example-level eps of the run's noise)."""
    config = replace(
        config_of({**job, "calibration": "exact"}),
        mechanism="none",  # the mechanism is built below, at this protocol's calibration
        task_options=TASK_OPTIONS[job["task"]],
    ).resolved()
    torch.set_num_threads(1)
    with threadpool_limits(limits=1):
        built = build_job(config, job["seed"])
        relation = built.neighbouring
        if job["calibration"] == AUTHORS_CALIBRATION:
            mu_step = authors_mu_step(job["eps"], config.delta, config.steps)
            calibration = Calibration(
                job["eps"],
                config.delta,
                config.steps,
                relation,
                AUTHORS_CALIBRATION,
                mu_step,
                epsilon_from_mu_step(mu_step, config.steps, config.delta, relation, "pld"),
            )
        else:
            calibration = calibrate(job["eps"], config.delta, config.steps, relation, "exact")
        design = run_design(config.design, built.task, config.lr, config.steps, config.schedule)
        mechanism = build_mechanism(job["method"], built.graph, built.weights, calibration, design)
        result = run_dsgd(built.task, built.weights, mechanism, built.dsgd, seed=job["seed"])
        privacy = privacy_reports(mechanism, relation, config.steps, config.delta)
    return {
        **{key: value for key, value in result.history[-1].items() if key != "step"},
        "epsilon": privacy[0].epsilon,
        "threat": privacy[0].threat,
        "exact_epsilon_of_calibration": calibration.achieved_epsilon,
        "trace_WRW": mechanism.noise.variance_after_mixing(built.weights),
        "sampling_rate": relation.sampling_rate if isinstance(relation, ExampleLevel) else 1.0,
    }


def scales_table(
    labels: tuple[float, ...], steps: int, delta: float, rate: float, batch: int
) -> list[str]:
    """For each label eps: the authors' noise multiplier (noise std over C on the batch sum),
    what dpdl's accountant says of it (example level with and without the sampling's credit, and
    at agent level, where the mean's sensitivity is C and its noise the sum's over ``batch``), and
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
        f"{worst['epsilon'] / worst['eps']:.3g}); the authors' noise at each label: "
        + ", ".join(f"{eps:g} -> {value:.3g}" for eps, value in sorted(by_label.items()))
    )
    claim = "every run is (eps, delta)-DP (the authors' code: for one example, not one agent)"
    if len(met) == len(rows):
        return Claim(label, claim, measured, Verdict.HOLDS)
    return Claim(label, claim, measured, Verdict.FAILS, "some runs exceed their label")


def merge_claims(paper: list[Claim], authors: list[Claim], why: str) -> list[Claim]:
    """The papers' claims checked in both protocols, one row each: a claim that holds in the
    paper's protocol holds; one that fails (or cannot be tested) there but holds in the authors'
    holds in the authors' protocol only (``why``: what in their protocol makes it hold); otherwise
    the paper's verdict stands, with the authors' result beside it. Claims of either list that the
    other does not state are kept as they are."""
    theirs = {claim.paper: claim for claim in authors}
    merged = []
    for claim in paper:
        other = theirs.pop(claim.paper, None)
        if other is None:
            merged.append(claim)
            continue
        there = other.verdict.value + (f": {other.reason}" if other.reason else "")
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
                    f"in the paper's protocol it {claim.verdict.value}: {claim.reason}. {why}",
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
