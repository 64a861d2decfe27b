"""The learning figures of Whisper D-SGD (Figs. 2-3) and CorN-DSGD (Figs. 3-5): one protocol.

Setting (CorN-DSGD Section VI-A): n = 20 agents on Erdos-Renyi graphs (a fresh draw per seed),
Metropolis-Hastings weights, LDP vs DECOR (pairwise, trace-optimal noise couple) vs Whisper /
CorN-DSGD, delta = 1e-5, external eavesdropper; panel (a) sweeps eps at p = 0.5, panel (b) sweeps p
at eps = 10. The papers' claims (Section VI-B) are checked on the exact calibration; the papers'
closed-form calibration runs beside it to show what the exact accountant buys.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dpdl.jobspec.config import TrainConfig
from dpdl_reproductions import corn_authors, tradeoff
from dpdl_reproductions.report import Claim, Verdict, checked
from dpdl_reproductions.sweep_jobs import SweepJobs
from dpdl_reproductions.tradeoff import (
    Job,
    Panel,
    Point,
    Study,
    Training,
    average_model_note,
    better,
    budget_claim,
    plot_study,
    significantly_better,
    summarise,
)
from dpdl_reproductions.tradeoff import run_job as tradeoff_run_job

__all__ = [
    "EPS_GRID",
    "METHODS",
    "PARTS",
    "P_GRID",
    "Protocols",
    "analyse",
    "analyser",
    "authors_study",
    "config_of",
    "job_of",
    "run_job",
    "study",
    "sweep_jobs",
    "tuned_table",
]

Analysis = tuple[list[Path], list[Claim], list[str]]

EPS_GRID = (3.0, 5.0, 7.0, 10.0, 15.0, 20.0, 25.0, 30.0, 40.0)
P_GRID = (0.2, 0.4, 0.6, 0.8, 1.0)
QUICK_EPS, QUICK_P = (3.0, 10.0, 40.0), (0.2, 0.6, 1.0)
METHODS = ("ldp", "decor", "whisper")
DELTA = 1e-5


def study(training: Training, quick: bool, quick_eps: tuple[float, ...] = QUICK_EPS) -> Study:
    """Panels (a) eps at p = 0.5 and (b) p at eps = 10, n = 20, for `training`; `quick_eps` is
    panel (a)'s grid under `quick`."""
    eps_grid, p_grid = (quick_eps, QUICK_P) if quick else (EPS_GRID, P_GRID)
    return Study(
        (
            Panel(
                "(a)",
                training,
                "eps",
                eps_grid,
                {"graph": "er", "n": 20, "p": 0.5},
                METHODS,
                "privacy budget eps (p = 0.5)",
            ),
            Panel(
                "(b)",
                training,
                "p",
                p_grid,
                {"graph": "er", "n": 20, "eps": 10.0},
                METHODS,
                "connectivity p (eps = 10)",
            ),
        ),
        DELTA,
    )


def _margin(a: Point, b: Point, lower_is_better: bool) -> str:
    """How much better `a` is than `b`: a ratio for losses, points for accuracies."""
    if lower_is_better:
        return f"{b.mean / a.mean:.2f}x" if a.mean > 0 else "inf"
    return f"{100 * (a.mean - b.mean):+.1f} pts"


def _still(
    the_study: Study,
    rows: list[dict[str, Any]],
    summary: dict,
    initial: str | None,
    primary: str = "exact",
) -> dict[tuple[str, float], float]:
    """The points where the iterates do not move: no private method (exact calibration, tuned)
    ends below half of the initial value of the metric (the row field `initial`, None: every
    point counts as moving). Each such point maps to the best private method's final / initial
    ratio."""
    if initial is None:
        return {}
    start = float(np.mean([row[initial] for row in rows if row["method"] in METHODS]))
    still = {}
    for panel in the_study.panels:
        for x in panel.values:
            best = min(summary[(panel.label, x, method, primary)].mean for method in METHODS)
            if best >= HALF * start:
                still[(panel.label, x)] = best / start
    return still


#: A point whose best private method ends at or above this fraction of the initial metric has
#: not moved (:func:`_still`).
HALF = 0.5


def _untestable(still: dict[tuple[str, float], float], label: str, xs: list[float]) -> str:
    """Why the points `xs` of panel `label` cannot test a claim (they are all in `still`)."""
    ratios = ", ".join(f"{x:g}: {still[(label, x)]:.2f}x" for x in xs)
    return (
        f"at {ratios} of the initial value (the best private method, tuned) no method leaves its "
        "starting point, so the ranking there is the noise's; the clipped gradients nearly "
        "cancel across agents and the noise grows with the clipping threshold (see above)"
    )


def _verdict_of_misses(
    panel: Panel,
    paper: str,
    measured: str,
    misses: list[float],
    still: dict[tuple[str, float], float],
    cause: str,
) -> Claim:
    """A claim over `panel`'s points that misses at `misses`: holds if none, not testable as
    written if every miss is a point that does not move, else fails for `cause`."""
    if not misses:
        return Claim(panel.label, paper, measured, Verdict.HOLDS)
    if all((panel.label, x) in still for x in misses):
        moving = [x for x in panel.values if (panel.label, x) not in still]
        return Claim(
            panel.label,
            paper,
            measured,
            Verdict.NOT_TESTABLE,
            _untestable(still, panel.label, sorted(set(misses)))
            + (
                f"; at the points that move ({', '.join(f'{x:g}' for x in moving)}) it holds"
                if moving
                else ""
            ),
        )
    return Claim(panel.label, paper, measured, Verdict.FAILS, cause)


def analyse(
    the_study: Study,
    rows: list[dict[str, Any]],
    out: Path,
    figure_title: str,
    ylabel: str,
    log_y: bool,
    initial: str | None = None,
    references: Mapping[str, Mapping[str, list[float]]] | None = None,
    primary: str = "exact",
    figure_name: str | None = None,
) -> Analysis:
    """Figure, the papers' claims (Section VI-B) and notes.

    `initial` names the row field of the metric at step 0: a claim that misses only where no
    method leaves it is not testable as written (`_still`). `references` adds lines to
    the figure's panels (e.g. noise-free D-SGD). The claims are checked on the calibration
    `primary`; the exact accountant's gain and the budget are claimed, and the notes written,
    where the study runs the papers' calibration beside it (the papers' protocol). The figure is
    `figure_name` in `out` (default: the metric's name).
    """
    summary = summarise(the_study, rows)
    training = the_study.panels[0].training
    lower = training.lower_is_better
    figure = plot_study(
        the_study,
        summary,
        out / (figure_name or f"{training.metric}.png"),
        figure_title,
        ylabel,
        log_y,
        extra=references,
    )
    eps_panel, p_panel = the_study.panels
    still = _still(the_study, rows, summary, initial, primary)

    def at(panel: Panel, x: float, method: str, calibration: str = primary) -> Point:
        return summary[(panel.label, x, method, calibration)]

    claims = [
        _beats_ldp_claim(eps_panel, at, training, still),
        _beats_decor_claim(p_panel, at, training, still),
    ]
    if 1.0 in p_panel.values:
        claims.append(_same_at_complete(p_panel, rows, at, training.metric, training, primary))
    claims.append(_sparsest_claim(p_panel, at, lower, still))
    if "paper" not in the_study.calibrations:
        return [figure], claims, []
    claims.append(_exact_buys(the_study, summary, eps_panel, lower, still))
    claims.append(budget_claim([row for row in rows if row["method"] in METHODS], the_study.delta))
    return [figure], claims, _papers_protocol_notes(the_study, rows, p_panel, at, training)


def _beats_ldp_claim(
    eps_panel: Panel,
    at: Callable[..., Point],
    training: Training,
    still: dict[tuple[str, float], float],
) -> Claim:
    """Panel (a) of the learning figures (Whisper Figs. 2-3, CorN-DSGD Figs. 3-5; Section VI-B):
    DECOR and Whisper each beat LDP at every eps. Where they miss, a paired t test over seeds says
    whether LDP is significantly ahead (the cause) or within the seeds' spread."""
    lower = training.lower_is_better
    misses = [
        (eps, method)
        for eps in eps_panel.values
        for method in ("decor", "whisper")
        if not better(at(eps_panel, eps, method).mean, at(eps_panel, eps, "ldp").mean, lower)
    ]
    ldp_ahead = [
        (eps, method)
        for eps, method in misses
        if significantly_better(at(eps_panel, eps, "ldp"), at(eps_panel, eps, method), lower)
    ]
    total = 2 * len(eps_panel.values)
    named = ", ".join(
        f"{method} at eps={eps:g} "
        f"({_margin(at(eps_panel, eps, method), at(eps_panel, eps, 'ldp'), lower)})"
        for eps, method in misses
    )
    return _verdict_of_misses(
        eps_panel,
        "across all eps, both correlation-based approaches (DECOR and Whisper) outperform LDP",
        f"{total - len(misses)}/{total} (eps, method) points; margin over LDP "
        "(DECOR / Whisper): "
        + ", ".join(
            f"eps={eps:g}: "
            f"{_margin(at(eps_panel, eps, 'decor'), at(eps_panel, eps, 'ldp'), lower)} / "
            f"{_margin(at(eps_panel, eps, 'whisper'), at(eps_panel, eps, 'ldp'), lower)}"
            for eps in eps_panel.values
        )
        + (
            f"; of the {len(misses)} misses, LDP is significantly ahead (paired t test over "
            f"seeds) at {len(ldp_ahead)}"
            + (
                ": " + ", ".join(f"eps={eps:g} {method}" for eps, method in ldp_ahead)
                if ldp_ahead
                else ""
            )
            if misses
            else ""
        ),
        [eps for eps, _ in misses],
        still,
        f"LDP ahead of {named}"
        + (
            f"; significantly at {len(ldp_ahead)} (paired t test over {training.seeds} seeds)"
            if ldp_ahead
            else f": within the seeds' spread, not significant in a paired t test over "
            f"{training.seeds} seeds; the step size is tuned on {training.tune_seeds} "
            "seed(s), which selects with noise"
        ),
    )


def _beats_decor_claim(
    p_panel: Panel,
    at: Callable[..., Point],
    training: Training,
    still: dict[tuple[str, float], float],
) -> Claim:
    """Panel (b) of the learning figures (Whisper Figs. 2-3, CorN-DSGD Figs. 3-5; Section VI-B):
    Whisper at least as good as DECOR at every p < 1, with its margin at each."""
    lower = training.lower_is_better
    sparse = [p for p in p_panel.values if p < 1.0]
    behind = [
        p
        for p in sparse
        if better(at(p_panel, p, "decor").mean, at(p_panel, p, "whisper").mean, lower)
    ]
    return _verdict_of_misses(
        p_panel,
        "Whisper / CorN-DSGD outperforms DECOR for all network connectivities (p < 1)",
        f"Whisper at least as good as DECOR at {len(sparse) - len(behind)}/{len(sparse)} "
        "values of p; "
        + ", ".join(
            f"p={p:g}: {_margin(at(p_panel, p, 'whisper'), at(p_panel, p, 'decor'), lower)}"
            for p in sparse
        ),
        behind,
        still,
        "DECOR ahead at "
        + ", ".join(
            f"p={p:g} ({_margin(at(p_panel, p, 'decor'), at(p_panel, p, 'whisper'), lower)})"
            for p in behind
        )
        + f" over {training.seeds} seeds",
    )


def _sparsest_claim(
    p_panel: Panel,
    at: Callable[..., Point],
    lower: bool,
    still: dict[tuple[str, float], float],
) -> Claim:
    """Panel (b) of the learning figures (Whisper Figs. 2-3, CorN-DSGD Figs. 3-5; Section VI-B):
    Whisper's advantage over DECOR (DECOR - Whisper in the metric's units, positive is better)
    is largest at p <= 0.4; not testable where the panel runs no such p."""
    advantage = {
        p: (at(p_panel, p, "decor").mean - at(p_panel, p, "whisper").mean) * (1 if lower else -1)
        for p in p_panel.values
    }
    widest = max(advantage, key=lambda p: advantage[p])
    measured = (
        "Whisper's advantage (DECOR - Whisper in the metric's units, positive is better) by p: "
        + ", ".join(f"{p:g}: {a:+.3g}" for p, a in advantage.items())
        + f"; largest at p = {widest:g}"
    )
    sparsest = "at lower connectivities (p <= 0.4) Whisper outperforms DECOR by the largest margin"
    if not any(p <= 0.4 for p in p_panel.values):
        return Claim(
            p_panel.label,
            sparsest,
            measured,
            Verdict.NOT_TESTABLE,
            "this panel runs no p <= 0.4 (p = " + ", ".join(f"{p:g}" for p in p_panel.values) + ")",
        )
    return _verdict_of_misses(
        p_panel,
        sparsest,
        measured,
        [] if widest <= 0.4 else [widest, *(p for p in p_panel.values if p <= 0.4)],
        still,
        f"the largest advantage is at p = {widest:g} ({advantage[widest]:+.3g}), above "
        f"0.4 (best at p <= 0.4: "
        f"{max(a for p, a in advantage.items() if p <= 0.4):+.3g})",
    )


def _papers_protocol_notes(
    the_study: Study,
    rows: list[dict[str, Any]],
    p_panel: Panel,
    at: Callable[..., Point],
    training: Training,
) -> list[str]:
    """The papers' protocol's notes: how the step size and clipping threshold were tuned, the
    weights and DECOR's noise couple, the average model, and, where LDP's curve is flat in p
    (within 5%) in panel (b) of the learning figures (Whisper Figs. 2-3, CorN-DSGD Figs. 3-5),
    why."""
    notes = [
        f"Tuning: step size over {list(training.lrs)}, clipping threshold over "
        f"{list(training.clips)}, on the mean final {training.metric} of {training.tune_seeds} "
        f"seed(s); the tuned point then runs on {training.seeds} seeds "
        "(band: interquartile range over seeds). Tuned per (setting, method, calibration).",
        "Metropolis-Hastings weights 1/(1+max(d_i, d_j)) (doubly stochastic); the papers write "
        "1/(|N_i|+1).",
        "DECOR's noise couple is the one minimising Tr(W R W^T) under the same privacy constraint "
        "(the papers' comparison).",
        "Tuning on few seeds selects with noise: where a claim misses by a few percent, compare "
        "the point's band (the spread over seeds) in the figure; runs.csv holds every grid point "
        "of the tuning.",
        average_model_note(the_study, rows),
    ]
    ldp = [at(p_panel, p, "ldp").mean for p in p_panel.values]
    if max(ldp) <= 1.05 * min(ldp):
        notes.append(
            f"LDP barely moves with p in panel (b) ({min(ldp):.4g} to {max(ldp):.4g}): with a "
            "doubly stochastic W the average "
            "model's noise has variance sigma_ldp^2 / n whatever the graph, and at the tuned step "
            "sizes the agents stay close to their average. Correlated noise is designed for the "
            "graph, so its curves move with p."
        )
    return notes


def analyser(
    study_of: Callable[[bool], Study], title: str, ylabel: str, log_y: bool
) -> Callable[[list[dict[str, Any]], Path, bool], Analysis]:
    """A reproduction module's `analyse(rows, out, quick)` for the study `study_of(quick)`."""

    def analyse_rows(rows: list[dict[str, Any]], out: Path, quick: bool) -> Analysis:
        return analyse(study_of(quick), rows, out, title, ylabel, log_y)

    return analyse_rows


def _same_at_complete(
    p_panel: Panel,
    rows: list[dict[str, Any]],
    at: Callable[..., Point],
    metric: str,
    training: Training,
    primary: str = "exact",
) -> Claim:
    """At p = 1 Whisper's and DECOR's designs leave the same noise, so their utility should be the
    same: the interquartile ranges over seeds overlap (calibration `primary`)."""
    whisper, decor = at(p_panel, 1.0, "whisper"), at(p_panel, 1.0, "decor")
    overlap = whisper.low <= decor.high and decor.low <= whisper.high
    variance = {
        method: np.mean(
            [
                float(r["trace_WRW"])
                for r in rows
                if float(r["p"]) == 1.0 and r["method"] == method and r["calibration"] == primary
            ]
        )
        for method in ("whisper", "decor")
    }
    lrs = whisper.hyperparameters.get("lr"), decor.hyperparameters.get("lr")
    cause = (
        f"the step sizes differ ({lrs[0]} / {lrs[1]}), "
        + (
            "tuned once at "
            + ", ".join(f"{key} = {value:g}" for key, value in training.tune_at.items())
            + f" on {training.tune_seeds} seed(s) and reused"
            if training.tune_at
            else f"tuned on {training.tune_seeds} seed(s)"
        )
        + ": with the same noise, the gap is the tuning's"
        if lrs[0] != lrs[1]
        else f"the same step size {lrs[0]} and noise, so the gap is the seeds' spread"
    )
    return checked(
        p_panel.label,
        "at p = 1 (R_cor and L proportional) both methods achieve nearly the same utility",
        f"{metric}: Whisper {whisper.mean:.4g} [{whisper.low:.4g}, {whisper.high:.4g}], DECOR "
        f"{decor.mean:.4g} [{decor.low:.4g}, {decor.high:.4g}] (mean [interquartile range] over "
        f"seeds); ranges {'overlap' if overlap else 'do not overlap'}. Both leave Tr(W R W^T) = "
        f"{variance['whisper']:.4g} / {variance['decor']:.4g} (Whisper / DECOR) at their step "
        f"sizes {lrs[0]} / {lrs[1]}",
        overlap,
        f"Whisper {whisper.mean:.4g} against DECOR {decor.mean:.4g} at the same Tr(W R W^T): "
        + cause,
    )


def _exact_buys(
    the_study: Study,
    summary: dict,
    eps_panel: Panel,
    lower: bool,
    still: dict[tuple[str, float], float],
) -> Claim:
    """The exact accountant's gain: the same guarantee with less noise, hence better utility."""
    valid = [eps for eps in eps_panel.values if eps <= math.log(1 / the_study.delta)]
    parts, ahead = [], []
    for eps in eps_panel.values:
        pairs = []
        for method in eps_panel.methods:
            exact = summary[(eps_panel.label, eps, method, "exact")]
            paper = summary[(eps_panel.label, eps, method, "paper")]
            pairs.append(f"{method} {_margin(exact, paper, lower)}")
            if eps in valid and significantly_better(paper, exact, lower):
                ahead.append((eps, method))
        parts.append(f"eps={eps:g}: " + ", ".join(pairs))
    return _verdict_of_misses(
        eps_panel,
        "(our addition) the exact accountant gives the same guarantee with less noise, so utility "
        "is no worse "
        "than under the papers' calibration for eps <= log(1/delta) = "
        f"{math.log(1 / the_study.delta):.1f}",
        "exact vs papers' calibration: "
        + "; ".join(parts)
        + "; the papers' calibration significantly ahead (paired t test over seeds) at "
        + (", ".join(f"eps={eps:g} {method}" for eps, method in ahead) if ahead else "none"),
        [eps for eps, _ in ahead],
        still,
        "the papers' calibration, with more noise, is significantly ahead at "
        + ", ".join(f"eps={eps:g} {method}" for eps, method in ahead)
        + ": tuning on few seeds picked a worse step size for the exact calibration there",
    )


#: The parts of a figure run in both protocols (``dpdl reproduce NAME --parts``): the papers' text
#: and the authors' released code (:mod:`~dpdl_reproductions.corn_authors`).
PARTS = ("paper", "authors")


def authors_study(
    training: Training,
    eps_grid: tuple[float, ...],
    p_grid: tuple[float, ...],
    calibrations: tuple[str, ...],
) -> Study:
    """Panels (a) eps at p = 0.5 and (b) p at eps = 10 in the authors' protocol (`training`'s
    `protocol`), under `calibrations`."""
    return Study(
        (
            Panel(
                "(a) authors' protocol",
                training,
                "eps",
                eps_grid,
                {"graph": "er", "n": 20, "p": 0.5},
                METHODS,
                "example-level eps (p = 0.5)",
            ),
            Panel(
                "(b) authors' protocol",
                training,
                "p",
                p_grid,
                {"graph": "er", "n": 20, "eps": 10.0},
                METHODS,
                "connectivity p (example-level eps = 10)",
            ),
        ),
        DELTA,
        calibrations,
    )


def job_of(options: Mapping[str, Any], version: int = tradeoff.VERSION) -> Job:
    """The job of one run of a sweep file of both protocols: a run on the data set's own test
    file (`split = "files"`, the authors' data) is one of the authors' protocol
    (`corn_authors`), any other one of the papers' (`tradeoff.job_of`). The file's
    check that every job carries its options (`SweepJobs`) holds the authors' runs to their
    data options too."""
    job = tradeoff.job_of(options, version)
    return {**job, "protocol": corn_authors.PROTOCOL} if options["split"] == "files" else job


def config_of(job: Job) -> TrainConfig:
    """The training configuration of a job of either protocol."""
    if job.get("protocol") == corn_authors.PROTOCOL:
        return corn_authors.config_of(job)
    return tradeoff.config_of(job)


def sweep_jobs(name: str) -> SweepJobs:
    """The runs of reproduction `name`'s sweep file: its grids of the papers' protocol and of the
    authors' (the grids on the data set's own test file), the two parts."""
    return SweepJobs(
        name,
        job_of=job_of,
        config_of=config_of,
        protocols=frozenset({"", corn_authors.PROTOCOL}),
        part_option="split",
        part_names={"random": "paper", "files": "authors"},
    )


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """One run: the papers' protocol (`tradeoff.run_job`) or the authors'
    (`corn_authors.run_job`)."""
    if job.get("protocol") == corn_authors.PROTOCOL:
        return corn_authors.run_job(job)
    return tradeoff_run_job(job)


def tuned_table(study: Study, summary: Mapping[tuple[str, float, str, str], Point]) -> list[str]:
    """The step size tuned at every (panel, x) for every (method, calibration), a markdown
    table."""
    columns = [(m, c) for m in study.panels[0].methods for c in study.calibrations]
    lines = [
        "| panel | x | " + " | ".join(f"{m} ({c})" for m, c in columns) + " |",
        "|" + " --- |" * (2 + len(columns)),
    ]
    for panel in study.panels:
        for x in panel.values:
            cells = [
                f"{summary[(panel.label, x, m, c)].hyperparameters['lr']:g}" for m, c in columns
            ]
            lines.append(f"| {panel.label} | {panel.sweep} = {x:g} | " + " | ".join(cells) + " |")
    return lines


@dataclass(frozen=True)
class Protocols:
    """A figure run in the papers' protocol (`paper(quick)`) and the authors'
    (`authors(quick)`): a reproduction module's `jobs`, `followup_jobs` and `analyse`
    over its `parts`."""

    paper: Callable[[bool], Study]
    authors: Callable[[bool], Study]
    title: str
    ylabel: str
    log_y: bool
    #: What, in the authors' protocol, makes a claim hold that fails in the papers'.
    why: str
    #: The runs of both protocols: the sweep file (:func:`sweep_jobs`) that ``paper`` and
    #: ``authors`` describe for the analysis (a test checks that they agree).
    sweep: SweepJobs

    def jobs(self, quick: bool, parts: tuple[str, ...] = PARTS) -> list[dict[str, Any]]:
        return self.sweep.jobs(self.sweep.sweep(quick, parts))

    def followup_jobs(
        self, quick: bool, rows: list[dict[str, Any]], parts: tuple[str, ...] = PARTS
    ) -> list[dict[str, Any]]:
        return self.sweep.followup_jobs(self.sweep.sweep(quick, parts), rows)

    def analyse(
        self, rows: list[dict[str, Any]], out: Path, quick: bool, parts: tuple[str, ...] = PARTS
    ) -> Analysis:
        """The papers' protocol's analysis and the authors', their shared claims merged
        (`corn_authors.merge_claims`)."""
        figures: list[Path] = []
        claims: list[Claim] = []
        notes: list[str] = []
        paper_rows = [row for row in rows if not row.get("protocol")]
        theirs = [row for row in rows if row.get("protocol") == corn_authors.PROTOCOL]
        if "paper" in parts:
            paper = self.paper(quick)
            figures, claims, notes = analyse(
                paper, paper_rows, out, self.title, self.ylabel, self.log_y
            )
            notes.append(
                "Step sizes tuned (papers' protocol), per point, method and calibration:\n\n"
                + "\n".join(tuned_table(paper, summarise(paper, paper_rows)))
            )
        if "authors" in parts:
            authors = self.authors(quick)
            training = authors.panels[0].training
            found, authors_claims, _ = analyse(
                authors,
                theirs,
                out,
                f"{self.title}, authors' protocol",
                self.ylabel,
                self.log_y,
                primary=corn_authors.AUTHORS_CALIBRATION,
                figure_name=f"{training.metric}_authors.png",
            )
            figures += found
            claims = (
                corn_authors.merge_claims(claims, authors_claims, self.why)
                if "paper" in parts
                else authors_claims
            )
            claims.append(corn_authors.budget_claim(theirs, "all, authors' protocol"))
            notes += self._authors_notes(authors, theirs)
        if parts != PARTS:
            notes.append(
                f"Parts run: {', '.join(parts)} (of {', '.join(PARTS)}); the others are not in "
                "this report."
            )
        return figures, claims, notes

    def _authors_notes(self, authors: Study, rows: list[dict[str, Any]]) -> list[str]:
        """The authors' protocol: its tuned step sizes and its noise on both scales."""
        training = authors.panels[0].training
        summary = summarise(authors, rows)
        rates = [float(row["sampling_rate"]) for row in rows if row.get("sampling_rate")]
        rate = float(np.median(rates)) if rates else training.batch_size / 2000
        labels = tuple(sorted(set(authors.panels[0].values) | {10.0}))
        picks = [point.hyperparameters["lr"] for point in summary.values()]
        edge = sum(lr == max(training.lrs) for lr in picks)
        notes = [
            "Authors' protocol: claims checked on the authors' calibration (their noise, dashed "
            f"in the figure), {training.seeds} seeds a point after tuning the step size on "
            f"{training.tune_seeds} over {list(training.lrs)}, the same grid for every method, "
            f"per (point, method, calibration); {edge} of {len(picks)} picks are the grid's "
            "largest step size. Step sizes tuned:\n\n" + "\n".join(tuned_table(authors, summary)),
            "Authors' protocol, the noise on two scales. Their label eps sets the noise by "
            "zero-concentrated DP at sensitivity 2C over all T rounds, for one example, with no "
            "credit for the sampling; dpdl's exact accountant (example-level add/remove-one, "
            "Poisson sampling at the rate of the run's largest agent, PLD) says what that noise "
            f"really gives, and what its own calibration at the label needs (T = "
            f"{training.steps}, C = {training.clips[0]:g}, batch {training.batch_size}):\n\n"
            + "\n".join(
                corn_authors.scales_table(
                    labels, training.steps, authors.delta, rate, training.batch_size
                )
            )
            + "\n\nSo every point of the authors' figure is far more private per example than "
            "its label says (third and fourth columns), and far less private per agent (fifth: "
            "the same noise against an agent's whole batch, the papers' text's unit).",
        ]
        return notes
