"""The per-view canary audit: what each adversary sees of a whole run, attacked and accounted.

A canary at agent u moves u's clipped gradient by the sensitivity `Delta` in one coordinate at every
step. Each view is a trust model
([`dpdl.factorization.trust`][dpdl.factorization.trust]) on the run's linear model `M G + N Z`
([`from_noise`][dpdl.factorization.algorithms.from_noise]): an eavesdropper on every link (LDP) or
on some ([`Links`][dpdl.factorization.trust.Links]), a curious neighbour v and a curious agent
beyond u's neighbourhood (PNDP of one agent: the messages sent to it, its own seeds), and a
coalition of u's neighbours (PNDP of the set). The view is `O = A G + B Z`; per view:

- the upper bound: the accountant's exact GDP `mu` for u's records in that view
  ([`canary_test`][dpdl.factorization.generalized_sensitivity.canary_test]), and its eps;
- the attacks: one noisy D-SGD run whose coordinates are the trials, every agent drawing its
  noise from its own seeds ([`simulate_messages`][dpdl.attacks.canary.simulate_messages]); each
  coordinate carries the canary with probability 1/2 and is scored by the Neyman-Pearson statistic
  `a^T O`, `a = (B B^T)^+ A delta`. Many-run: the coordinates as independent runs, Clopper-Pearson
  bounds on a threshold test's errors and the Gaussian fit
  (`dpdl.attacks.membership`); one-run: the bound of Steinke, Nasr and
  Jagielski ([`one_run_lower_bound`][dpdl.attacks.canary.one_run_lower_bound]).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
from tqdm.auto import tqdm

from dpdl.accounting import AgentLevel, gdp
from dpdl.accounting.calibration import calibrate
from dpdl.attacks.canary import (
    expected_correct_guesses,
    one_run_lower_bound,
    seed_draws,
    simulate_messages,
)
from dpdl.attacks.membership import gaussian_fit_lower_bound, threshold_lower_bound
from dpdl.choices import VIEW_MECHANISMS
from dpdl.errors import ConfigError
from dpdl.experiments.results import json_safe, write_rows
from dpdl.factorization.algorithms import LinearAlgorithm, from_noise
from dpdl.factorization.generalized_sensitivity import CanaryTest, canary_test
from dpdl.factorization.trust import LDP, PNDP, Links, TrustModel, attacker_knowledge
from dpdl.jobspec.resources import Estimate, require_fits
from dpdl.mechanisms.base import NoiseMechanism, SeedBook
from dpdl.mechanisms.registry import MECHANISM_REGISTRY, DesignOptions, build_mechanism
from dpdl.seeding import purpose_rng

__all__ = [
    "VIEW_MECHANISMS",
    "View",
    "ViewAudit",
    "audit_views",
    "canary_views",
    "format_views",
    "write_views",
]

logger = logging.getLogger(__name__)

#: Confidence of the model-free and one-run bounds (1 - alpha), and of the Gaussian fit.
ALPHA, FIT_ALPHA = 0.05, 1e-3
#: Floating-point operations a second assumed by the time estimate (a shared core, pessimistic).
FLOPS = 2e9
#: Normal draws a second assumed by the time estimate.
DRAWS = 5e7


@dataclass(frozen=True)
class View:
    """One adversary's view of the run: a label and its trust model."""

    name: str
    trust: TrustModel


@dataclass(frozen=True)
class ViewAudit:
    """The upper and lower bounds on eps for the canary's agent in one view of one mechanism."""

    mechanism: str
    view: str
    trust: str
    mu_upper: float
    epsilon_upper: float
    mu_canary: float
    lower_many_run_cp: float
    lower_many_run_fit: float
    lower_one_run: float
    one_run_guesses: int
    one_run_correct: int
    false_positive: float
    false_negative: float

    def ratio(self, lower: float) -> float:
        """`lower / epsilon_upper` (NaN where the upper bound is 0 or infinite)."""
        if not math.isfinite(self.epsilon_upper) or self.epsilon_upper <= 0:
            return math.nan
        return lower / self.epsilon_upper

    def as_dict(self) -> dict[str, Any]:
        row = asdict(self)
        for name in ("lower_many_run_cp", "lower_many_run_fit", "lower_one_run"):
            row[f"{name}_ratio"] = self.ratio(getattr(self, name))
        return row


def _check_agent(graph: nx.Graph, agent: int, what: str) -> None:
    if not 0 <= agent < graph.number_of_nodes():
        raise ConfigError(
            f"{what} {agent} is not an agent: agents are 0..{graph.number_of_nodes() - 1}"
        )


def canary_views(
    graph: nx.Graph,
    agent: int,
    neighbour: int | None = None,
    non_neighbour: int | None = None,
    links: Sequence[tuple[int, int]] | None = None,
    coalition: Sequence[int] | None = None,
) -> list[View]:
    """The views audited for a canary at `agent`: the eavesdropper on every link, on `links`
    (default: the links out of `agent`), the curious `neighbour` (default: `agent`'s first), a
    `coalition` (default: all of `agent`'s neighbours) and the curious `non_neighbour` (default:
    the agent farthest from `agent`; none when every agent is a neighbour). Bad input is one
    error naming it."""
    _check_agent(graph, agent, "the canary's agent")
    adjacent = sorted(graph.neighbors(agent))
    if not adjacent:
        raise ConfigError(f"the canary's agent {agent} has no neighbour: nobody sees its messages")
    neighbour = adjacent[0] if neighbour is None else neighbour
    _check_agent(graph, neighbour, "the curious neighbour")
    if neighbour == agent:
        raise ConfigError(f"the curious neighbour {neighbour} is the canary's agent itself")
    if neighbour not in adjacent:
        raise ConfigError(
            f"the curious neighbour {neighbour} is not a neighbour of the canary's agent {agent} "
            f"(its neighbours: {adjacent})"
        )
    links = [(agent, other) for other in adjacent] if links is None else list(links)
    for sender, receiver in links:
        _check_agent(graph, sender, "a link's sender")
        _check_agent(graph, receiver, "a link's receiver")
        if not graph.has_edge(sender, receiver) or sender == receiver:
            raise ConfigError(f"link {sender}->{receiver} is not an edge of the graph")
    coalition = adjacent if coalition is None else sorted(set(coalition))
    for member in coalition:
        _check_agent(graph, member, "a coalition member")
    if agent in coalition or not coalition:
        raise ConfigError(
            f"the coalition {coalition} must be non-empty and leave out the canary's agent {agent}"
        )
    views = [
        View("eavesdropper, all links", LDP()),
        View(f"eavesdropper, {len(links)} links", Links(edges=tuple(links))),
        View(f"neighbour {neighbour}", PNDP((neighbour,))),
        View(f"coalition {coalition}", PNDP(tuple(coalition))),
    ]
    distances = nx.single_source_shortest_path_length(graph, agent)
    if non_neighbour is None:
        far = [v for v in sorted(distances) if distances[v] > 1]
        if not far:
            logger.info("every agent is a neighbour of %d: no non-neighbour view", agent)
            return views
        non_neighbour = max(far, key=lambda v: distances[v])
    _check_agent(graph, non_neighbour, "the non-neighbour")
    if non_neighbour == agent or non_neighbour in adjacent:
        raise ConfigError(
            f"the non-neighbour {non_neighbour} must be neither the canary's agent {agent} nor one "
            f"of its neighbours {adjacent}"
        )
    hops = distances.get(non_neighbour, math.inf)
    return [*views, View(f"non-neighbour {non_neighbour} ({hops} hops)", PNDP((non_neighbour,)))]


def _estimate(
    mechanisms: Sequence[NoiseMechanism], steps: int, views: int, trials: int
) -> Estimate:
    """Memory and time of the audit: per mechanism the dense linear model and each view's
    `B B^T` and its Cholesky factor, then the simulated run of `trials` coordinates."""
    n = mechanisms[0].n
    widest = max(mechanism.generator.shape[1] for mechanism in mechanisms)
    rows, columns = n * steps, (n + widest) * steps
    terms = {
        f"the linear model M, N ({rows:,} x {rows + columns:,} float64, three copies)": 24.0
        * rows
        * (rows + columns),
        f"a view's B and B B^T ({rows:,} x {columns:,} float64, three copies)": 24.0
        * rows
        * columns,
        f"the canary run ({n:,} agents x {trials:,} coordinates, float64, eight copies)": 64.0
        * n
        * trials,
    }
    flops = sum(  # B B^T and its Cholesky factor per view (the SVD only when B is singular)
        views * (2.0 * rows * rows * (n + m.generator.shape[1]) * steps + rows**3)
        for m in mechanisms
    )
    draws = sum(views * steps * trials * (n + 2.0 * m.generator.shape[1]) for m in mechanisms)
    return Estimate(terms, flops / FLOPS + draws / DRAWS, steps)


def _scores(
    mechanism: NoiseMechanism,
    weights: np.ndarray,
    algorithm: LinearAlgorithm,
    tests: list[tuple[View, CanaryTest]],
    canary: np.ndarray,
    seed: int,
    progress: bool,
) -> np.ndarray:
    """`(views, trials)`: each view's statistic `a^T O` on every coordinate of one run whose
    gradients are `canary` `(steps, n, trials)`, the attacker subtracting the seeds it holds."""
    steps, n, trials = canary.shape
    width = algorithm.noise.shape[1] // steps
    message_weights = np.zeros((len(tests), steps * n))
    seed_weights = np.zeros((len(tests), steps * width))
    for index, (view, test) in enumerate(tests):
        observed = view.trust.observed(algorithm)
        attackers = np.zeros(n, dtype=bool)
        attackers[list(view.trust.attackers)] = True
        known = algorithm.holders[:, attackers].any(axis=1)
        message_weights[index, observed] = test.direction[: observed.sum()]
        seed_weights[index, known] = test.direction[observed.sum() :]
    message_weights = message_weights.reshape(len(tests), steps, n)
    seed_weights = seed_weights.reshape(len(tests), steps, width)
    seeds = SeedBook.for_run(seed, n, len(mechanism.secrets))
    scores = np.zeros((len(tests), trials))
    run = simulate_messages(mechanism, weights, canary, seeds)
    for step, messages in enumerate(
        tqdm(
            run,
            total=steps,
            desc=f"{mechanism.name} run",
            unit="step",
            leave=False,
            disable=None if progress else True,
        )
    ):
        scores -= message_weights[:, step] @ messages  # O's rows are -messages / eta, eta = 1
        if seed_weights[:, step].any():
            scores += seed_weights[:, step] @ seed_draws(mechanism, seeds, step, trials)
    return scores


def _bounds(
    mechanism: str,
    view: View,
    test: CanaryTest,
    scores: np.ndarray,
    included: np.ndarray,
    delta: float,
) -> ViewAudit:
    """The lower bounds of one view from its scores, beside its upper bound."""
    upper = gdp.epsilon(test.mu_upper, delta) if math.isfinite(test.mu_upper) else math.inf
    noise = scores - test.shift * included
    if test.noise_free and np.abs(noise).max() <= 1e-6 * abs(test.shift):
        cp = fit = math.inf
        false_positive = false_negative = 0.0
    else:
        cp, false_positive, false_negative = threshold_lower_bound(
            scores[~included], scores[included], delta, ALPHA
        )
        fit = gaussian_fit_lower_bound(noise, test.shift, delta, FIT_ALPHA)
    guesses, _ = expected_correct_guesses(len(scores), test.mu_canary, delta, ALPHA)
    one_run, _, correct = one_run_lower_bound(scores, included, guesses, guesses, delta, ALPHA)
    return ViewAudit(
        mechanism,
        view.name,
        str(view.trust),
        test.mu_upper,
        upper,
        test.mu_canary,
        cp,
        fit,
        one_run,
        2 * guesses,
        correct,
        false_positive,
        false_negative,
    )


def _audit_mechanism(
    mechanism: NoiseMechanism,
    weights: np.ndarray,
    steps: int,
    views: Sequence[View],
    agent: int,
    sensitivity: float,
    delta: float,
    included: np.ndarray,
    seed: int,
    progress: bool,
) -> list[ViewAudit]:
    """Every view of one mechanism: a run per canary sign pattern, shared by the views that
    use it."""
    algorithm = from_noise(mechanism, weights, steps)
    tests = [
        (view, canary_test(attacker_knowledge(algorithm, view.trust), agent, sensitivity))
        for view in views
    ]
    results: dict[str, ViewAudit] = {}
    patterns = {test.signs.tobytes(): test.signs for _, test in tests}
    for key, signs in patterns.items():
        group = [(view, test) for view, test in tests if test.signs.tobytes() == key]
        canary = np.zeros((steps, mechanism.n, len(included)))
        canary[:, agent, :] = sensitivity * signs[:, None] * included[None, :]
        scores = _scores(mechanism, weights, algorithm, group, canary, seed, progress)
        for (view, test), row in zip(group, scores, strict=True):
            results[view.name] = _bounds(mechanism.name, view, test, row, included, delta)
    return [results[view.name] for view in views]


def audit_views(
    graph: nx.Graph,
    weights: np.ndarray,
    eps: float,
    delta: float,
    steps: int,
    clip: float,
    views: Sequence[View],
    agent: int,
    calibration: str = "exact",
    trials: int = 20_000,
    seed: int = 0,
    mechanisms: Sequence[str] = VIEW_MECHANISMS,
    progress: bool = True,
) -> list[ViewAudit]:
    """Each of `mechanisms`, calibrated to (eps, delta) over `steps` steps as `dpdl audit`
    calibrates it, against each of `views` (module doc): a canary at `agent` in `trials`
    coordinates of one run seeded by `seed`. Refused before the run when too large."""
    unknown = [name for name in mechanisms if name not in MECHANISM_REGISTRY]
    if unknown:
        raise ConfigError(
            f"unknown mechanism {unknown[0]!r} to audit; known: "
            f"{', '.join(MECHANISM_REGISTRY.names())}"
        )
    _check_agent(graph, agent, "the canary's agent")
    if trials < 100:
        raise ConfigError(f"the canary audit needs at least 100 trials (coordinates), got {trials}")
    neighbouring = AgentLevel(clip)
    budget = calibrate(eps, delta, steps, neighbouring, calibration)
    built = [build_mechanism(name, graph, weights, budget, DesignOptions()) for name in mechanisms]
    for mechanism in built:
        if type(mechanism).noise_stream is not NoiseMechanism.noise_stream:
            raise ConfigError(
                f"{mechanism.name} correlates its noise over time; the canary audit models "
                "per-step noise designs"
            )
    found = _estimate(built, steps, len(views), trials)
    require_fits(found, f"the canary audit ({len(built)} mechanisms x {len(views)} views)")
    included = purpose_rng(seed, "canary inclusion").random(trials) < 0.5
    audits: list[ViewAudit] = []
    for mechanism in tqdm(
        built, desc="canary audit", unit="mechanism", disable=None if progress else True
    ):
        audits += _audit_mechanism(
            mechanism,
            weights,
            steps,
            views,
            agent,
            neighbouring.sensitivity,
            delta,
            included,
            seed,
            progress,
        )
    return audits


def _cell(value: float) -> str:
    return "inf" if math.isinf(value) else "-" if math.isnan(value) else f"{value:.4g}"


def format_views(audits: Sequence[ViewAudit]) -> str:
    """Fixed-width table: mechanism x view -> upper eps, the three lower bounds and the fit's
    share of the upper bound."""
    width = max(len(a.view) for a in audits) + 2
    header = (
        f"{'mechanism':<12}{'view':<{width}}{'upper':>9}{'fit':>9}{'CP':>9}{'one-run':>9}"
        f"{'fit/upper':>11}"
    )
    lines = [header, "-" * len(header)]
    for a in audits:
        lines.append(
            f"{a.mechanism:<12}{a.view:<{width}}{_cell(a.epsilon_upper):>9}"
            f"{_cell(a.lower_many_run_fit):>9}{_cell(a.lower_many_run_cp):>9}"
            f"{_cell(a.lower_one_run):>9}{_cell(a.ratio(a.lower_many_run_fit)):>11}"
        )
    return "\n".join(lines)


def _report(audits: Sequence[ViewAudit], header: str, sections: Sequence[str]) -> str:
    violations = [
        f"{a.mechanism} ({a.view})"
        for a in audits
        for lower in (a.lower_many_run_cp, a.lower_many_run_fit, a.lower_one_run)
        if lower > a.epsilon_upper * (1 + 1e-9)
    ]
    rows = [
        f"| {a.mechanism} | {a.view} | {_cell(a.epsilon_upper)} | {_cell(a.mu_upper)} | "
        f"{_cell(a.mu_canary)} | {_cell(a.lower_many_run_fit)} | {_cell(a.lower_many_run_cp)} | "
        f"{_cell(a.lower_one_run)} | {_cell(a.ratio(a.lower_many_run_fit))} | "
        f"{_cell(a.ratio(a.lower_many_run_cp))} | {_cell(a.ratio(a.lower_one_run))} |"
        for a in audits
    ]
    return (
        "\n".join(
            [
                "# The audit of each adversary's view",
                "",
                "## Per-view canary audit",
                "",
                header,
                "",
                "Upper: the accountant's exact eps (GDP mu) for the canary agent's records in the "
                "view. Lower bounds from one run whose coordinates are the trials, each carrying "
                "the canary with probability 1/2, scored by the view's Neyman-Pearson statistic: "
                f"many-run Gaussian fit (at {1 - FIT_ALPHA:g}), many-run Clopper-Pearson (at "
                f"{1 - ALPHA:g}), one-run (Steinke, Nasr and Jagielski 2023, at {1 - ALPHA:g}). mu "
                "canary: the canary's own mu (below mu upper when no one-coordinate canary reaches "
                "the sensitivity).",
                "",
                "| mechanism | view | upper eps | mu upper | mu canary | fit | CP | one-run "
                "| fit / upper | CP / upper | one-run / upper |",
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
                *rows,
                "",
                "Lower bound above upper bound (a bug in one of them): "
                f"{', '.join(violations) if violations else 'none'}.",
                *(f"\n{section}" for section in sections),
            ]
        )
        + "\n"
    )


def write_views(
    audits: Sequence[ViewAudit], folder: Path, header: str, sections: Sequence[str] = ()
) -> None:
    """`views.csv`, `views.json` (one row per mechanism and view) and `REPORT.md` (its per-view
    section, under `header`, a line saying what was run; then each of `sections`, Markdown
    sections of the same report such as
    [`reconstruction_section`][dpdl.experiments.reconstruction.reconstruction_section])."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = [audit.as_dict() for audit in audits]
    write_rows(rows, folder / "views.csv")
    (folder / "views.json").write_text(json.dumps(json_safe(rows), indent=2) + "\n")
    (folder / "REPORT.md").write_text(_report(audits, header, sections))
