"""The learning figures of Whisper D-SGD (Figs. 2-3) and CorN-DSGD (Figs. 3-5): one protocol.

Setting (CorN-DSGD Section VI-A): n = 20 agents on Erdos-Renyi graphs (a fresh draw per seed),
Metropolis-Hastings weights, LDP vs DECOR (pairwise, trace-optimal noise couple) vs Whisper /
CorN-DSGD, delta = 1e-5, external eavesdropper; panel (a) sweeps eps at p = 0.5, panel (b) sweeps p
at eps = 10. The papers' claims (Section VI-B) are checked on the exact calibration; the papers'
closed-form calibration runs beside it to show what the exact accountant buys.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from dpdl.experiments.reproduce.report import Claim
from dpdl.experiments.reproduce.tradeoff import (
    Panel,
    Point,
    Study,
    Training,
    better,
    budget_claim,
    plot_study,
    significantly_better,
    summarise,
)

__all__ = ["EPS_GRID", "METHODS", "P_GRID", "analyse", "analyser", "study"]

Analysis = tuple[list[Path], list[Claim], list[str]]

EPS_GRID = (3.0, 5.0, 7.0, 10.0, 15.0, 20.0, 25.0, 30.0, 40.0)
P_GRID = (0.2, 0.4, 0.6, 0.8, 1.0)
QUICK_EPS, QUICK_P = (3.0, 10.0, 40.0), (0.2, 0.6, 1.0)
METHODS = ("ldp", "decor", "whisper")
DELTA = 1e-5


def study(training: Training, quick: bool, quick_eps: tuple[float, ...] = QUICK_EPS) -> Study:
    """Panels (a) eps at p = 0.5 and (b) p at eps = 10, n = 20, for ``training``; ``quick_eps`` is
    panel (a)'s grid under ``quick``."""
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
    """How much better ``a`` is than ``b``: a ratio for losses, points for accuracies."""
    if lower_is_better:
        return f"{b.mean / a.mean:.2f}x" if a.mean > 0 else "inf"
    return f"{100 * (a.mean - b.mean):+.1f} pts"


def analyse(
    the_study: Study,
    rows: list[dict[str, Any]],
    out: Path,
    figure_title: str,
    ylabel: str,
    log_y: bool,
) -> Analysis:
    """Figure, the papers' claims (Section VI-B) and notes."""
    summary = summarise(the_study, rows)
    training = the_study.panels[0].training
    lower = training.lower_is_better
    figure = plot_study(
        the_study, summary, out / f"{training.metric}.png", figure_title, ylabel, log_y
    )
    eps_panel, p_panel = the_study.panels

    def at(panel: Panel, x: float, method: str, calibration: str = "exact") -> Point:
        return summary[(panel.label, x, method, calibration)]

    claims = []
    beats_ldp = [
        (eps, method)
        for eps in eps_panel.values
        for method in ("decor", "whisper")
        if better(at(eps_panel, eps, method).mean, at(eps_panel, eps, "ldp").mean, lower)
    ]
    misses = [
        (eps, method)
        for eps in eps_panel.values
        for method in ("decor", "whisper")
        if (eps, method) not in beats_ldp
    ]
    ldp_ahead = [
        (eps, method)
        for eps, method in misses
        if significantly_better(at(eps_panel, eps, "ldp"), at(eps_panel, eps, method), lower)
    ]
    claims.append(
        Claim(
            "(a)",
            "across all eps, both correlation-based approaches (DECOR and Whisper) outperform LDP",
            f"{len(beats_ldp)}/{2 * len(eps_panel.values)} (eps, method) points; margin over LDP "
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
            len(beats_ldp) == 2 * len(eps_panel.values),
        )
    )
    sparse = [p for p in p_panel.values if p < 1.0]
    whisper_wins = [
        p
        for p in sparse
        if not better(at(p_panel, p, "decor").mean, at(p_panel, p, "whisper").mean, lower)
    ]
    claims.append(
        Claim(
            "(b)",
            "Whisper / CorN-DSGD outperforms DECOR for all network connectivities (p < 1)",
            f"Whisper at least as good as DECOR at {len(whisper_wins)}/{len(sparse)} values of p; "
            + ", ".join(
                f"p={p:g}: {_margin(at(p_panel, p, 'whisper'), at(p_panel, p, 'decor'), lower)}"
                for p in sparse
            ),
            len(whisper_wins) == len(sparse),
        )
    )
    if 1.0 in p_panel.values:
        whisper, decor = at(p_panel, 1.0, "whisper"), at(p_panel, 1.0, "decor")
        overlap = whisper.low <= decor.high and decor.low <= whisper.high
        variance = {
            method: np.mean(
                [
                    float(r["trace_WRW"])
                    for r in rows
                    if float(r["p"]) == 1.0
                    and r["method"] == method
                    and r["calibration"] == "exact"
                ]
            )
            for method in ("whisper", "decor")
        }
        claims.append(
            Claim(
                "(b)",
                "at p = 1 (R_cor and L proportional) both methods achieve nearly the same utility",
                f"{training.metric}: Whisper {whisper.mean:.4g} [{whisper.low:.4g}, "
                f"{whisper.high:.4g}], DECOR {decor.mean:.4g} [{decor.low:.4g}, {decor.high:.4g}] "
                "(mean [interquartile range] over seeds); ranges "
                f"{'overlap' if overlap else 'do not overlap'}. Both leave Tr(W R W^T) = "
                f"{variance['whisper']:.4g} / {variance['decor']:.4g} (Whisper / DECOR) at their "
                f"step sizes {whisper.hyperparameters.get('lr')} / "
                f"{decor.hyperparameters.get('lr')}",
                overlap,
            )
        )
    advantage = {
        p: (at(p_panel, p, "decor").mean - at(p_panel, p, "whisper").mean) * (1 if lower else -1)
        for p in p_panel.values
    }
    widest = max(advantage, key=lambda p: advantage[p])
    claims.append(
        Claim(
            "(b)",
            "at lower connectivities (p <= 0.4) Whisper outperforms DECOR by the largest margin",
            "Whisper's advantage (DECOR - Whisper in the metric's units, positive is better) by p: "
            + ", ".join(f"{p:g}: {a:+.3g}" for p, a in advantage.items())
            + f"; largest at p = {widest:g}",
            widest <= 0.4,
        )
    )
    claims.append(_exact_buys(the_study, summary, eps_panel, lower))
    claims.append(budget_claim(rows))
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
    return [figure], claims, notes


def analyser(
    study_of: Callable[[bool], Study], title: str, ylabel: str, log_y: bool
) -> Callable[[list[dict[str, Any]], Path, bool], Analysis]:
    """A reproduction module's ``analyse(rows, out, quick)`` for the study ``study_of(quick)``."""

    def analyse_rows(rows: list[dict[str, Any]], out: Path, quick: bool) -> Analysis:
        return analyse(study_of(quick), rows, out, title, ylabel, log_y)

    return analyse_rows


def _exact_buys(the_study: Study, summary: dict, eps_panel: Panel, lower: bool) -> Claim:
    """The exact accountant's gain: the same guarantee with less noise, hence better utility."""
    valid = [eps for eps in eps_panel.values if eps <= math.log(1 / the_study.delta)]
    parts, holds = [], True
    for eps in eps_panel.values:
        pairs = []
        for method in eps_panel.methods:
            exact = summary[(eps_panel.label, eps, method, "exact")]
            paper = summary[(eps_panel.label, eps, method, "paper")]
            pairs.append(f"{method} {_margin(exact, paper, lower)}")
            if eps in valid and significantly_better(paper, exact, lower):
                holds = False
        parts.append(f"eps={eps:g}: " + ", ".join(pairs))
    return Claim(
        "(a)",
        "(our addition) the exact accountant gives the same guarantee with less noise, so utility "
        "is no worse "
        "than under the papers' calibration for eps <= log(1/delta) = "
        f"{math.log(1 / the_study.delta):.1f}",
        "exact vs papers' calibration: "
        + "; ".join(parts)
        + "; no worse: the papers' calibration is never significantly "
        "ahead (paired t test over seeds)",
        holds,
    )
