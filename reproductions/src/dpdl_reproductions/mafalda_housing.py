"""`mafalda-housing`: MAFALDA-SGD Fig. 3 and Fig. 5, Housing test loss vs the LDP budget and over time.

California housing regression (20640 block groups, 80/20 split, features and target standardised),
a one-hidden-layer ReLU network of width 64 with mean squared error, on the largest component of
Facebook ego network 414 (148 agents, Metropolis-Hastings weights), data spread uniformly at random
over agents. Cyclic participation k = 20, b = 19 (T = 380): each agent's examples are cut once into
19 batches used in turn, clipped per example at C, so a record changes the batch mean by at most
`2 C / smallest batch` in 20 steps. Every method is (eps, 1e-6)-DP against LDP's attacker
(every message public), accounted by the matrix-factorization sensitivity (Theorem 8):

- `dp-dsgd`: independent noise (C_local = I, sens = sqrt(20));
- `antipgd`: the noise of the previous step subtracted (C_local = 1_{t >= s}, Koloskova et al.);
- `mafalda`: the local encoder optimised for this gossip (Lemma 12, Algorithm 2; sens = 1);
- `none`: no noise, the non-private reference (a flat line).

The step size and clipping threshold of each method are tuned at every eps on two seeds, and every
point then averages 20 seeds, as the paper. The paper does not say how it tuned. Tuned once at
eps = 10 and reused (our first full run), MAFALDA-SGD and DP-D-SGD tied at eps = 50, and DP-D-SGD's
step size went unstable at eps = 1 (test loss 8.4; 0.80 at the step size tuned there), which made
MAFALDA-SGD's average advantage 23% instead of the 6% measured with every eps tuned. The paper
reports the test loss over the last 50 steps; we report the final one.

The same figure runs a second time as the authors' released code runs it (`experiments_housing.sh
--graph=ego` of their MFDL repository; `dpdl_reproductions.mafalda_authors`), 5
seeds, the test loss recorded every 8 steps (Fig. 3 left):

| Housing, Facebook ego | paper (dpdl's default) | authors' code |
| --- | --- | --- |
| participation | k = 20 passes of b = 19 batches (T = 380) | k = 20 passes of b = 16 batches (T = 320) |
| batch | 5 to 6 examples (111 or 112 per agent) | 6 or 7 examples; the clipped sum divided by the agent's smallest batch |
| step size | tuned over {0.01, 0.03, 0.1} per method and eps | 0.1 for every method |
| clipping threshold C | tuned over {0.3, 1, 3} per method and eps | 1 for every method |
| privacy budget | eps in {1, 2, 5, 10, 20, 50} at delta = 1e-6 | GDP mu in {0.1, 0.2, 0.5, 1, 2, 5} (noise multiplier 1 / mu): eps 0.40, 0.83, 2.25, 4.89, 11.0, 35.6 at delta = 1e-6 |
| sensitivity of a batch mean | 2 C / smallest batch (an example replaced) | C / smallest batch (an example added or removed) |
| gossip | Metropolis-Hastings (doubly stochastic) | 1 / (deg_i + 1) on the neighbours and the agent itself (row-stochastic) |
| features, target | the data file's 8 columns (totals per block group) standardised with the training split's statistics; target standardised | scikit-learn's features (rooms, bedrooms, occupants per household) standardised over all rows; target in $100,000 (variance 1.33) |
| metric | final test loss (mean over agents) | test loss (mean over agents); the gain over DP-D-SGD averaged over the last 50 steps at one mu; the code's trade-off figures (Fig. 3 right, Fig. 5) take node 0's final test loss (`loss[0]` in `tradeoff_plotter.py`): so do this part's, the mean over agents beside it |
| seeds | 2 to tune, 20 in all | 5 (the code: 20) |

Fig. 5 (Appendix C.1) draws the same trade-off on other graphs; its graphs, in the authors' code
(`tradeoff_plotter.py`, `experiments_housing.sh`), are Florentine families (15 agents), the
Facebook ego graph (148), the connected PeerTube graph (271) and Misskey (919). A third part
(`--parts graphs`) runs the authors' protocol above, 3 seeds a point, on Padgett's Florentine
families and on the 271-node Gnutella sample that `mafalda-pndp` uses as a stand-in for PeerTube
(a breadth-first sample of SNAP's Gnutella08 of PeerTube's size; the stand-in is not PeerTube's
graph); the Facebook ego panel is the authors' part above (5 seeds). The PeerTube and Misskey graphs
are not obtainable offline. Misskey's runs in the code differ besides (8 batches, step size 1, mu
from 7.5 to 15); the code's PeerTube figure leaves AntiPGD out.

A fourth part (`--parts mafalda-l`) runs MAFALDA-L-SGD, a second method of the authors' code
(`OPTIMAL_DL_LOCALCOR`, `MF_OPTIMAL_DL_variednode`; labelled "MAFALDA-L-SGD (Ours)" in its
plotting scripts, which leave it out of the paper's figures), in the authors' protocol on the
Facebook ego graph and the Florentine families (3 seeds each): every agent's encoder is optimised
for its own term `H_i` of Lemma 12's sum instead of one encoder for the sum, each of sensitivity
1, so the noise multiplier is MAFALDA-SGD's. Its runs pair with the MAFALDA-SGD runs of the
authors' part (Facebook ego) and the graphs part (Florentine families) seed by seed (same split,
initialisation and noise seeds). The 148 per-agent
factorizations of the Facebook ego graph over T = 320 steps take 289 s on one thread beside one
other process (they had not finished in 30 minutes with the BLAS threads of two processes on two
cores).

A test loss of 0.75 in the authors' units (Section 7.2's "2-fold reduction in eps") is 0.75 / 1.33 =
0.563 on dpdl's standardised target.
"""  # noqa: E501 - verbatim in REPORT.md; its first line is the `reproduce --list` summary

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from dpdl.accounting import gdp
from dpdl.experiments.plots import plot_panels
from dpdl_reproductions import mafalda_authors as authors
from dpdl_reproductions import mafalda_tradeoff as protocol
from dpdl_reproductions.mafalda_tradeoff import METHODS, REFERENCE_EPS, Crossing
from dpdl_reproductions.report import Claim, Verdict, checked
from dpdl_reproductions.tradeoff import Panel, Study, Training

__all__ = [
    "NAME",
    "PARTS",
    "SWEEP",
    "SWEEP_PARTS",
    "across_protocols",
    "analyse",
    "followup_jobs",
    "jobs",
    "run_job",
]

NAME = "mafalda-housing"
GRAPH, AGENTS = "facebook-ego-414", 148
PARTICIPATIONS, CYCLE = 20, 19
EPS_GRID, QUICK_EPS = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0), (2.0, 10.0, 50.0)
#: The parts, each worth running alone (``dpdl reproduce mafalda-housing --parts``): dpdl's protocol
#: (the paper's text, every method tuned), the authors' released code's, the latter on Fig. 5's
#: other graphs, and MAFALDA-L-SGD in it on every graph of the last two (compared with their
#: MAFALDA-SGD runs).
PARTS = ("paper", "authors", "graphs", "mafalda-l")
#: The method of the ``mafalda-l`` part and its label.
PER_AGENT, PER_AGENT_LABEL = "mafalda-l", "MAFALDA-L-SGD"
#: The graphs of the ``mafalda-l`` part (``--quick``: the Florentine families). One L-BFGS run
#: per agent over T = 320 steps, on one thread: a few seconds for the 15 Florentine families, 289 s
#: for the 148 agents of the Facebook ego graph beside one other process (22 to 310 iterations an
#: agent).
PER_AGENT_GRAPHS = (GRAPH, "florentine")
#: Fig. 5's other graphs that dpdl builds offline (agents, panel label), run in the authors'
#: protocol with :data:`GRAPH_SEEDS` seeds a point (``--parts graphs``); ``--quick`` runs the first.
FIG5_GRAPHS = {
    "florentine": (15, "Housing, Florentine families, authors' protocol"),
    "gnutella-271": (271, "Housing, Gnutella sample (for PeerTube), authors' protocol"),
}
GRAPH_SEEDS = 3
#: Section 7.2: "a 31% average improvement in test loss" at a fixed budget.
PAPER_IMPROVEMENT = 0.31
#: Section 7.2: "for a fixed test-loss value of 0.75, it achieves a 2-fold reduction in eps", in the
#: authors' units ($100,000 squared); the variance of the target in them (all 20640 block groups)
#: converts it to dpdl's standardised target.
PAPER_LOSS, PAPER_REDUCTION, TARGET_VARIANCE = 0.75, 2.0, 1.3316
#: The budgets at which the authors' Fig. 3 leaves AntiPGD out (``housing_plotter.py``: mu < 0.5,
#: "as they don't converge"), and the test loss the caption says it stays above.
ANTIPGD_ABSENT_MUS, ANTIPGD_FLOOR = (0.1, 0.2), 6.0
AUTHORS_LABEL = "Housing, Facebook ego, authors' protocol"
#: The two views of Fig. 3 right in the authors' protocol: node 0's model, which the code's figure
#: plots (``loss[0]`` in ``tradeoff_plotter.py``), and the mean over agents.
NODE_PANEL, MEAN_PANEL = "node 0's model (the code's figure)", "mean over agents"


def study(quick: bool) -> Study:
    """The full setting above; `--quick`: 4 passes (T = 76), one step size, one seed."""
    if quick:
        training = Training(
            "housing-mlp",
            4 * CYCLE,
            (0.05,),
            (1.0,),
            "test_loss",
            clip_level="example",
            cycle=CYCLE,
        )
        eps = QUICK_EPS
    else:
        training = Training(
            "housing-mlp",
            PARTICIPATIONS * CYCLE,
            (0.01, 0.03, 0.1),
            (0.3, 1.0, 3.0),
            "test_loss",
            clip_level="example",
            cycle=CYCLE,
            tune_seeds=2,
            seeds=20,
        )
        eps = EPS_GRID
    panel = Panel(
        "Housing, Facebook ego",
        training,
        "eps",
        eps,
        {"graph": GRAPH, "n": AGENTS, "p": 0.0},
        (*METHODS, "none"),
        "LDP privacy budget eps (delta = 1e-6)",
    )
    return Study((panel,), protocol.DELTA, calibrations=("exact",))


#: Every part's runs are the sweep file's (``dpdl sweep NAME``): its grids' labels name their
#: parts.
SWEEP_PARTS = PARTS
#: The part of each grid of the sweep files, by its label (the quick file's are the full one's).
PART_LABELS = {
    "Housing, Facebook ego": "paper",
    "Housing, Facebook ego, no noise": "paper",
    AUTHORS_LABEL: "authors",
    f"{AUTHORS_LABEL}, no noise": "authors",
    **{label: "graphs" for _, label in FIG5_GRAPHS.values()},
    **{f"{label}, no noise": "graphs" for _, label in FIG5_GRAPHS.values()},
    f"Housing, {PER_AGENT_LABEL}, authors' protocol": PER_AGENT,
}


PROTOCOLS = protocol.Protocols(
    NAME,
    study,
    authors.PROTOCOL,
    authors.job_of,
    authors.config_of,
    authors.run_job,
    PART_LABELS,
)
SWEEP = PROTOCOLS.sweep
run_job = PROTOCOLS.run_job


def jobs(quick: bool, parts: tuple[str, ...] = PARTS) -> list[dict[str, Any]]:
    """The first stage of the sweep file's grids of `parts` (`protocol.Protocols.jobs`)."""
    return PROTOCOLS.jobs(quick, parts)


def followup_jobs(
    quick: bool, rows: list[dict[str, Any]], parts: tuple[str, ...] = PARTS
) -> list[dict[str, Any]]:
    """dpdl's tuned points on every seed (the authors' protocol tunes nothing)."""
    return PROTOCOLS.followup_jobs(quick, rows, parts)


def _authors_rows(rows: list[dict[str, Any]], graph: str) -> list[dict[str, Any]]:
    """The authors' protocol's runs on `graph`."""
    return [r for r in rows if r.get("protocol") == authors.PROTOCOL and r["graph"] == graph]


def analyse(
    rows: list[dict[str, Any]], out: Path, quick: bool, parts: tuple[str, ...] = PARTS
) -> tuple[list[Path], list[Claim], list[str]]:
    """Figures (test loss vs eps in each protocol, the no-noise reference flat; the authors' test
    loss over training), claims and notes."""
    figures: list[Path] = []
    claims: list[Claim] = []
    notes: list[str] = []
    paper = _paper_analysis(PROTOCOLS.paper_rows(rows), out, quick) if "paper" in parts else None
    ours = _authors_analysis(_authors_rows(rows, GRAPH), out) if "authors" in parts else None
    graphs = _graphs_analysis(rows, out) if "graphs" in parts else None
    per_agent = _per_agent_analysis(rows, out) if PER_AGENT in parts else None
    for analysis in (paper, ours, graphs, per_agent):
        if analysis is not None:
            figures += analysis["figures"]
            notes += analysis["notes"]
    if paper is not None:
        claims.append(paper["beats"])
    if paper is not None or ours is not None:  # the two protocols' shared claims
        claims += [
            across_protocols(
                paper and paper["improvement"],
                ours and ours["improvement"],
                f"{100 * PAPER_IMPROVEMENT:.0f}% lower test loss than the baselines on average "
                "(Section 7.2)",
                _improvement_cause(paper, ours),
            ),
            across_protocols(
                paper and paper["reduction"][:2],
                ours and ours["reduction"][:2],
                f"a {PAPER_REDUCTION:g}-fold reduction in eps at a test loss of {PAPER_LOSS:g} "
                "(Section 7.2)",
                "; ".join(
                    f"{name}, the best baseline reaches the loss at "
                    f"{analysis['reduction'][2]:.2f}x MAFALDA-SGD's eps"
                    for name, analysis in (
                        ("tuned at every eps (dpdl's protocol)", paper),
                        ("at step size 0.1 and C = 1 (the authors' protocol)", ours),
                    )
                    if analysis is not None
                )
                + f" (the verdict asks for sqrt({PAPER_REDUCTION:g}) = "
                f"{math.sqrt(PAPER_REDUCTION):.2f}x: half the paper's reduction in log eps)",
            ),
        ]
    if ours is not None:
        claims += ours["claims"]
    if graphs is not None:
        claims += graphs["claims"]
    if per_agent is not None:
        claims += per_agent["claims"]
    if paper is not None:
        claims.append(paper["budget"])
    if parts != PARTS:
        notes.append(
            f"Parts run: {', '.join(parts)} (of {', '.join(PARTS)}); the others are not in this "
            "report."
        )
    return figures, claims, notes


def across_protocols(
    paper: tuple[str, bool] | None, ours: tuple[str, bool] | None, claim: str, cause: str
) -> Claim:
    """One claim checked in both protocols (`(measured, holds)` each, None where not run): it
    holds if it holds in dpdl's, holds in the authors' protocol only if only there, else fails."""
    measured = "; ".join(
        f"{name}: {result[0]}"
        for name, result in (("dpdl's protocol", paper), ("authors' protocol", ours))
        if result is not None
    )
    label = "Housing, Facebook ego" + ("" if paper is not None else ", authors' protocol")
    if paper is not None and paper[1]:
        return Claim(label, claim, measured, Verdict.HOLDS)
    if ours is not None and ours[1]:
        return Claim(
            label,
            claim,
            measured,
            Verdict.AUTHORS_ONLY if paper is not None else Verdict.HOLDS,
            "it holds with the settings of the authors' code (step size 0.1 and C = 1 for every "
            f"method, their metric), not with every method tuned: {cause}",
        )
    return Claim(
        label, claim, measured, Verdict.FAILS, f"short of the paper in every protocol run: {cause}"
    )


def _reduction(
    eps: list[float], curves: dict[str, list[float]], target: float
) -> tuple[str, bool, float]:
    """The eps at which MAFALDA-SGD and the best baseline first reach loss `target`, whether
    MAFALDA-SGD needs at most 1 / sqrt(2) of the baseline's (half the paper's 2-fold in log eps),
    and the ratio of the two."""
    crossings = {m: protocol.eps_at_loss(eps, curves[m], target) for m in METHODS}
    best = min(("dp-dsgd", "antipgd"), key=lambda m: _order(crossings[m]))
    ours, theirs = crossings["mafalda"], crossings[best]
    ratio = theirs.eps / ours.eps
    exact = ours.kind != "never" and theirs.kind != "before"
    if ours.kind == "never" and theirs.kind == "never":
        fold = f"neither reaches it at eps <= {ours.eps:.3g}"
    else:
        bound = ">= " if ours.kind == "before" or theirs.kind == "never" else ""
        fold = f"a {bound if exact else '<= '}{ratio:.2f}-fold reduction"
    text = (
        f"eps at a test loss of {target:.3g}: MAFALDA {ours}, {best} (the best baseline) "
        f"{theirs}: {fold}"
    )
    return text, exact and ratio >= math.sqrt(PAPER_REDUCTION), ratio


def _improvement_cause(paper: dict[str, Any] | None, ours: dict[str, Any] | None) -> str:
    """Why the 31% holds in one protocol and not the other, from both protocols' numbers."""
    causes = []
    if ours is not None:
        e, dp, maf = ours["nearest"]
        causes.append(
            "there DP-D-SGD's noise costs it most at small budgets (final test loss "
            f"{dp:.3g} against MAFALDA's {maf:.3g} at eps {e:.3g}"
            + (
                f"; it diverges at eps {', '.join(f'{x:.2g}' for x in ours['diverged'])}"
                if ours["diverged"]
                else ""
            )
            + f"), and the gain is still {100 * ours['in_range']:.0f}% on average over the "
            f"budgets within dpdl's range (eps >= {EPS_GRID[0]:g})"
        )
    if paper is not None:
        causes.append(
            "tuned at every eps (dpdl's protocol), DP-D-SGD takes a smaller step size or "
            "clipping threshold where its noise is large and ends at most "
            f"{100 * paper['worst']:.0f}% above MAFALDA"
        )
    return "; ".join(causes) + (
        f" (the verdict asks for at least half the paper's {100 * PAPER_IMPROVEMENT:.0f}%)"
    )


def _order(crossing: Crossing) -> float:
    return math.inf if crossing.kind == "never" else crossing.eps


def _paper_analysis(rows: list[dict[str, Any]], out: Path, quick: bool) -> dict[str, Any]:
    """dpdl's protocol: its figure, claims and notes."""
    the_study = study(quick)
    private, reference = protocol.summaries(the_study, rows)
    panel = the_study.panels[0]
    label, grid = panel.label, list(panel.values)
    figure = protocol.plot_tradeoff(
        the_study,
        rows,
        out / "test_loss.png",
        "MAFALDA-SGD Fig. 3 (right): Housing on Facebook ego 414",
        "final test loss (MSE, standardised target)",
        log_y=True,
    )
    none = reference[(label, REFERENCE_EPS, "none", "exact")]
    means = {m: [private[(label, x, m, "exact")].mean for x in grid] for m in METHODS}
    ratios = [d / m for d, m in zip(means["dp-dsgd"], means["mafalda"], strict=True)]
    beats = [
        means["mafalda"][i] < means[method][i]
        for i in range(len(grid))
        for method in ("dp-dsgd", "antipgd")
    ]
    improvement = 1.0 - float(np.mean([1.0 / r for r in ratios]))
    met, runs = protocol.budget_met(rows)
    at_ten = {
        method: next(row for row in rows if row["method"] == method and row["eps"] == REFERENCE_EPS)
        for method in METHODS
    }
    notes = [
        f"No noise reaches a test loss of {none.mean:.3f} (tuned: {none.hyperparameters}).",
        "Tuned (lr, clip) per method and eps: "
        + "; ".join(
            f"{m}: "
            + ", ".join(
                f"eps {x:g}: ({private[(label, x, m, 'exact')].hyperparameters['lr']:g}, "
                f"{private[(label, x, m, 'exact')].hyperparameters['clip']:g})"
                for x in grid
            )
            for m in METHODS
        )
        + ".",
        "Encoder sensitivity and noise per unit of clipping threshold (sigma / C, the same at "
        "every C) at eps = 10: "
        + "; ".join(
            f"{m}: sens {row['sensitivity']:.3g}, sigma / C {row['sigma'] / row['clip']:.3g}"
            for m, row in at_ten.items()
        )
        + ". MAFALDA's seeds are smaller than independent noise's and its correlation cancels "
        "part of them in the gossip; AntiPGD's encoder has no zero inside a participation "
        "pattern, so its sensitivity and noise are the largest (the paper sees it diverge too).",
        protocol.average_model(the_study, rows),
    ]
    return {
        "figures": [figure],
        "notes": notes,
        "beats": checked(
            label,
            "MAFALDA-SGD beats DP-D-SGD and AntiPGD at every eps",
            f"lower loss in {sum(beats)}/{len(beats)} (baseline, eps) pairs; DP-D-SGD / MAFALDA "
            f"test loss: "
            + ", ".join(f"eps {x:g}: {r:.2f}x" for x, r in zip(grid, ratios, strict=True)),
            all(beats),
            f"a baseline as good or better in {len(beats) - sum(beats)} (baseline, eps) pairs",
        ),
        "improvement": (
            f"{100 * improvement:.0f}% lower final test loss than DP-D-SGD, the stronger baseline, "
            "on average over eps",
            improvement >= PAPER_IMPROVEMENT / 2,
        ),
        "reduction": _reduction(grid, means, PAPER_LOSS / TARGET_VARIANCE),
        "worst": max(ratios) - 1.0,
        "budget": checked(
            "all",
            "every private run is (eps, 1e-6)-DP under LDP (matrix-factorization accounting)",
            f"epsilon <= target in {met}/{runs} runs",
            met == runs,
            f"{runs - met} runs over their target: a bug in the accountant or the calibration",
        ),
    }


def _authors_analysis(rows: list[dict[str, Any]], out: Path) -> dict[str, Any]:
    """The authors' protocol: its two figures (Fig. 3 right and left), claims and notes."""
    curves = authors.curves(rows)
    steps = authors.eval_steps(rows)
    mus = sorted({mu for method, mu in curves if method != "none"})
    eps = {mu: gdp.epsilon(mu, protocol.DELTA) for mu in mus}
    none = curves[("none", 0.0)]
    final = {m: [float(curves[(m, mu)][:, -1].mean()) for mu in mus] for m in METHODS}
    nodes = authors.node_finals(rows)  # Fig. 3 right plots node 0's model (the code's figure)
    node = {m: [float(nodes[(m, mu)].mean()) for mu in mus] for m in METHODS}
    gains = {
        mu: authors.tail_gain(curves[("dp-dsgd", mu)], curves[("mafalda", mu)], steps) for mu in mus
    }
    improvement = float(np.mean(list(gains.values())))
    # The budgets within dpdl's eps grid, where the two protocols can be set side by side.
    inside = [mu for mu in mus if eps[mu] >= EPS_GRID[0]] or mus[-1:]
    grid = [eps[mu] for mu in mus]
    views = {  # panel -> (seed-mean series, per-seed finals, no noise)
        NODE_PANEL: (node, nodes, float(nodes[("none", 0.0)].mean())),
        MEAN_PANEL: (
            final,
            {key: curve[:, -1] for key, curve in curves.items()},
            float(none[:, -1].mean()),
        ),
    }
    tradeoff = plot_panels(
        dict.fromkeys(views, grid),
        {
            panel: {**series, "no noise": [reference] * len(grid)}
            for panel, (series, _, reference) in views.items()
        },
        dict.fromkeys(views, "LDP privacy budget eps (delta = 1e-6)"),
        "final test loss (MSE, target in $100,000)",
        out / "test_loss_authors.png",
        "MAFALDA-SGD Fig. 3 (right), the authors' protocol, Facebook ego (seed mean, quartiles)",
        log_y=True,
        log_x=True,
        titles=True,
        bands={
            panel: {m: _quartiles([seeds[(m, mu)] for mu in mus]) for m in METHODS}
            for panel, (_, seeds, _) in views.items()
        },
    )
    panels = {f"mu = {mu:g} (eps = {eps[mu]:.3g})": mu for mu in mus}
    over_time = plot_panels(
        {panel: [float(s) for s in steps] for panel in panels},
        {
            panel: {
                **{m: list(curves[(m, mu)].mean(axis=0)) for m in METHODS},
                "no noise": list(none.mean(axis=0)),
            }
            for panel, mu in panels.items()
        },
        dict.fromkeys(panels, "step"),
        "test loss (MSE, target in $100,000)",
        out / "test_loss_over_time.png",
        "MAFALDA-SGD Fig. 3 (left), the authors' protocol: test loss over training (seed mean)",
        log_y=True,
        columns=3,
        titles=True,
    )
    after_start = steps > 0
    absent = [mu for mu in ANTIPGD_ABSENT_MUS if mu in mus] or mus[:1]
    antipgd_low = {
        mu: float(curves[("antipgd", mu)].mean(axis=0)[after_start].min()) for mu in absent
    }
    below = {
        mu: int(
            (
                curves[("mafalda", mu)].mean(axis=0)[after_start]
                < curves[("dp-dsgd", mu)].mean(axis=0)[after_start]
            ).sum()
        )
        for mu in absent
    }
    beats = [
        node["mafalda"][i] < node[m][i] for i in range(len(mus)) for m in ("dp-dsgd", "antipgd")
    ]
    among = [  # the same over the mean of the agents' losses, reported beside
        final["mafalda"][i] < final[m][i] for i in range(len(mus)) for m in ("dp-dsgd", "antipgd")
    ]
    evaluations = int(after_start.sum())
    claims = [
        checked(
            AUTHORS_LABEL,
            "MAFALDA-SGD beats DP-D-SGD and AntiPGD at every eps (Fig. 3 right)",
            f"node 0's model (the code's figure): lower final loss in {sum(beats)}/{len(beats)} "
            "(baseline, eps) pairs; final test loss (MAFALDA / DP-D-SGD / AntiPGD): "
            + _triples(grid, node)
            + f"; the mean over agents: lower in {sum(among)}/{len(among)} pairs, "
            + _triples(grid, final),
            all(beats),
            f"a baseline as good or better in {len(beats) - sum(beats)} (baseline, eps) pairs",
        ),
        _over_time_claim(below, antipgd_low, evaluations),
    ]
    notes = [
        "Authors' protocol: no noise ends at a test loss of "
        f"{float(none[:, -1].mean()):.3f} ($100,000 squared; "
        f"{float(none[:, -1].mean()) / TARGET_VARIANCE:.3f} on the standardised scale). Gain of "
        "MAFALDA over DP-D-SGD over the last 50 steps (the paper's metric) per mu: "
        + ", ".join(f"mu {mu:g} (eps {eps[mu]:.3g}): {100 * g:.0f}%" for mu, g in gains.items())
        + ". The code's own slice (``housing_plotter.py``: the last 50 entries of a curve with one "
        "entry per (evaluation, seed), 20 seeds and one evaluation every 16 steps) reaches back "
        "only to the last three evaluations; the last 50 steps here hold "
        f"{int((steps > steps[-1] - authors.TAIL_STEPS).sum())} evaluations.",
        "Authors' protocol, encoder sensitivity and noise per unit of clipping threshold "
        f"(sigma / C) at mu = {mus[len(mus) // 2]:g}: "
        + "; ".join(
            f"{m}: sens {row['sensitivity']:.3g}, sigma / C {row['sigma'] / row['clip']:.3g}"
            for m in METHODS
            for row in [
                next(
                    r
                    for r in rows
                    if r.get("protocol") == authors.PROTOCOL
                    and r["method"] == m
                    and r["mu"] == mus[len(mus) // 2]
                )
            ]
        )
        + ".",
    ]
    return {
        "figures": [tradeoff, over_time],
        "notes": notes,
        "claims": claims,
        "improvement": (
            f"{100 * improvement:.0f}% lower test loss than DP-D-SGD over the last 50 steps, on "
            "average over mu ("
            + ", ".join(f"eps {eps[mu]:.3g}: {100 * g:.0f}%" for mu, g in gains.items())
            + ")",
            improvement >= PAPER_IMPROVEMENT / 2,
        ),
        "reduction": _node_reduction(grid, node, final),
        "nearest": (
            eps[inside[0]],
            *(final[m][mus.index(inside[0])] for m in ("dp-dsgd", "mafalda")),
        ),
        "diverged": [
            eps[mu]
            for mu in mus
            if curves[("dp-dsgd", mu)][:, -1].mean() > curves[("dp-dsgd", mu)][:, 0].mean()
        ],
        "in_range": float(np.mean([gains[mu] for mu in inside])),
    }


def _quartiles(values: list[np.ndarray]) -> tuple[list[float], list[float]]:
    """The interquartile band over seeds of each point."""
    return [float(np.percentile(v, 25)) for v in values], [
        float(np.percentile(v, 75)) for v in values
    ]


def _triples(grid: list[float], final: dict[str, list[float]]) -> str:
    """`eps e: MAFALDA / DP-D-SGD / AntiPGD` for every eps of `grid`."""
    return ", ".join(
        f"eps {e:.3g}: {final['mafalda'][i]:.3g} / {final['dp-dsgd'][i]:.3g} / "
        f"{final['antipgd'][i]:.3g}"
        for i, e in enumerate(grid)
    )


def _node_reduction(
    grid: list[float], node: dict[str, list[float]], mean: dict[str, list[float]]
) -> tuple[str, bool, float]:
    """The paper's eps reduction at a test loss of `PAPER_LOSS` read off Fig. 3 right as the
    code draws it (node 0's model; judged), and off the mean over agents (reported beside)."""
    text, holds, ratio = _reduction(grid, node, PAPER_LOSS)
    return (
        f"node 0's model: {text}; mean over agents: {_reduction(grid, mean, PAPER_LOSS)[0]}",
        holds,
        ratio,
    )


def _over_time_claim(below: dict[float, int], antipgd_low: dict[float, float], count: int) -> Claim:
    """Fig. 3 left at the budgets the authors' figure may show (those it leaves AntiPGD out at):
    MAFALDA's seed-mean test loss below DP-D-SGD's at every evaluation after the start (`below`
    of `count`), AntiPGD's above `ANTIPGD_FLOOR` (its lowest: `antipgd_low`)."""
    above = [f"mu {mu:g}: {count - c}" for mu, c in below.items() if c < count]
    low = [f"{mu:g}" for mu, value in antipgd_low.items() if value <= ANTIPGD_FLOOR]
    return checked(
        AUTHORS_LABEL,
        "test loss over training at a fixed eps (Fig. 3 left): MAFALDA-SGD below DP-D-SGD, "
        f"AntiPGD always above {ANTIPGD_FLOOR:g}",
        f"evaluations after the start (every {authors.EVAL_EVERY} steps) at which MAFALDA's "
        "seed-mean test loss is below DP-D-SGD's: "
        + ", ".join(f"mu {mu:g}: {c}/{count}" for mu, c in below.items())
        + "; AntiPGD's lowest seed-mean test loss after the start: "
        + ", ".join(f"mu {mu:g}: {value:.3g}" for mu, value in antipgd_low.items()),
        not above and not low,
        "; ".join(
            ([f"MAFALDA at or above DP-D-SGD at {', '.join(above)} evaluations"] if above else [])
            + ([f"AntiPGD reaches {ANTIPGD_FLOOR:g} or less at mu {', '.join(low)}"] if low else [])
        ),
    )


def _graphs_analysis(rows: list[dict[str, Any]], out: Path) -> dict[str, Any]:
    """Fig. 5 in the authors' protocol: the final test loss against eps on each graph run (the
    Facebook ego panel from the authors' part where it ran), MAFALDA-SGD against the baselines on
    each of `FIG5_GRAPHS`, and Appendix C.1's smaller-graph claim."""
    labels = {GRAPH: AUTHORS_LABEL} | {g: label for g, (_, label) in FIG5_GRAPHS.items()}
    results: dict[str, dict[str, Any]] = {}
    for graph, label in labels.items():
        graph_rows = _authors_rows(rows, graph)
        if not graph_rows:
            continue
        curves = authors.curves(graph_rows)
        nodes = authors.node_finals(graph_rows)  # Fig. 5 plots node 0's model (the code's figure)
        mus = sorted({mu for method, mu in curves if method != "none"})
        results[graph] = result = {
            "agents": int(graph_rows[0]["n"]),
            "label": label,
            "short": label.removeprefix("Housing, ").removesuffix(", authors' protocol"),
            "mus": mus,
            "eps": [gdp.epsilon(mu, protocol.DELTA) for mu in mus],
            "final": {m: [nodes[(m, mu)] for mu in mus] for m in METHODS},
            "final_mean": {
                m: [float(curves[(m, mu)][:, -1].mean()) for mu in mus] for m in METHODS
            },
            "none": float(nodes[("none", 0.0)].mean()),
            "seeds": len(curves[("none", 0.0)]),
            "by_seed": {
                (r["method"], float(r["mu"])): {}
                for r in graph_rows
                if r["method"] in ("mafalda", "none")
            },
            "sigma": {
                mu: next(
                    r["sigma"] for r in graph_rows if r["method"] == "mafalda" and r["mu"] == mu
                )
                for mu in mus
            },
        }
        for r in graph_rows:
            if r["method"] in ("mafalda", "none"):
                final = json.loads(r[authors.CURVE])[-1]
                result["by_seed"][(r["method"], float(r["mu"]))][r["seed"]] = final
    figure = plot_panels(
        {r["label"]: r["eps"] for r in results.values()},
        {
            r["label"]: {
                **{m: [float(v.mean()) for v in r["final"][m]] for m in METHODS},
                "no noise": [r["none"]] * len(r["mus"]),
            }
            for r in results.values()
        },
        {r["label"]: "LDP privacy budget eps (delta = 1e-6)" for r in results.values()},
        "final test loss (MSE, target in $100,000)",
        out / "test_loss_graphs.png",
        "MAFALDA-SGD Fig. 5, the authors' protocol: Housing on each graph, node 0's model (the "
        "code's figure; seed mean, quartiles)",
        log_y=True,
        log_x=True,
        titles=True,
        bands={
            r["label"]: {m: _quartiles(r["final"][m]) for m in METHODS} for r in results.values()
        },
    )
    claims = [_beats_claim(results[g]) for g in FIG5_GRAPHS if g in results]
    claims += _smaller_graph_claims(results)
    notes = [
        "Fig. 5 in the authors' protocol: "
        + "; ".join(
            f"{r['short']} ({r['seeds']} seeds): no noise ends at {r['none']:.3g} on node 0's "
            "model, MAFALDA's noise "
            f"sigma / C at mu = {r['mus'][len(r['mus']) // 2]:g} is "
            f"{r['sigma'][r['mus'][len(r['mus']) // 2]]:.3g}"
            for r in results.values()
        )
        + ". The noise scales with C / smallest batch: 16 batches of each agent's share of the "
        "16512 training rows. The figure and the claims against the baselines take node 0's "
        "final test loss, as the code's figure does (``loss[0]`` in ``tradeoff_plotter.py``); "
        "the smaller-graph claims take the mean over agents, since node 0 is one agent of "
        "unequal degree on each graph."
    ]
    return {"figures": [figure], "notes": notes, "claims": claims}


def _beats_claim(result: dict[str, Any]) -> Claim:
    """Appendix C.1 on one graph: MAFALDA-SGD's seed-mean final test loss at or below DP-D-SGD's
    and AntiPGD's at every eps."""
    final = {m: [float(v.mean()) for v in result["final"][m]] for m in METHODS}
    mean = result["final_mean"]

    def at_or_below(series: dict[str, list[float]]) -> list[bool]:
        return [
            series["mafalda"][i] <= series[m][i]
            for i in range(len(result["mus"]))
            for m in ("dp-dsgd", "antipgd")
        ]

    pairs, among = at_or_below(final), at_or_below(mean)
    return checked(
        result["label"],
        "MAFALDA-SGD's trade-off improves on DP-D-SGD's and AntiPGD's at every eps (Fig. 5)",
        f"node 0's model (the code's figure): at or below in {sum(pairs)}/{len(pairs)} "
        "(baseline, eps) pairs; final test loss (MAFALDA / DP-D-SGD / AntiPGD): "
        + _triples(result["eps"], final)
        + f"; the mean over agents: at or below in {sum(among)}/{len(among)} pairs, "
        + _triples(result["eps"], mean),
        all(pairs),
        f"a baseline lower in {len(pairs) - sum(pairs)} (baseline, eps) pairs",
    )


#: Appendix C.1's claim on graph size.
SMALLER_GRAPHS = (
    "smaller graphs give better privacy-utility trade-offs, only because their agents' batches "
    "are bigger (Appendix C.1)"
)
#: The smallest excess over the no-noise loss, as a fraction of it, that the smaller-graph claim
#: judges: below it the noise costs a graph less than the spread of its own runs.
MATERIAL = 0.01


def _smaller_graph_claims(results: dict[str, dict[str, Any]]) -> list[Claim]:
    """Appendix C.1's smaller-graph claim between each two graphs run, next in size (Florentine
    families against Facebook ego, Facebook ego against the Gnutella sample), by
    `_smaller_graph_claim`; not testable with fewer than two graphs."""
    ranked = sorted(results, key=lambda graph: results[graph]["agents"])
    if len(ranked) < 2:
        return [
            Claim(
                "Housing, Fig. 5 graphs, authors' protocol",
                SMALLER_GRAPHS,
                f"graphs run: {', '.join(results) or 'none'}",
                Verdict.NOT_TESTABLE,
                "it needs two graphs: the authors' part (Facebook ego) and the graphs part",
            )
        ]
    return [
        _smaller_graph_claim(results[small], results[large])
        for small, large in itertools.pairwise(ranked)
    ]


def _smaller_graph_claim(a: dict[str, Any], b: dict[str, Any]) -> Claim:
    """Appendix C.1 between the smaller graph's results `a` and the larger one's `b`:
    smaller graphs give better trade-offs because each agent's batches are bigger.
    Tested at the mus both ran, on the
    seeds both ran (a seed fixes the train/test split and the model's initialisation, whose spread
    is wider than the graphs' difference without noise). The claim is about the cost of privacy:
    MAFALDA-SGD's excess over the graph's own no-noise loss must be lower on the smaller graph at
    every mu where it is material on either graph (above `MATERIAL` of the no-noise loss);
    where the noise costs neither graph that much, the final losses differ by the graphs' own
    no-noise losses, which the claim does not speak of (reported, not judged)."""
    small, large = a["short"], b["short"]
    mus = [mu for mu in a["mus"] if mu in b["mus"]]
    seeds = sorted(set(a["by_seed"][("none", 0.0)]) & set(b["by_seed"][("none", 0.0)]))

    def at(result: dict[str, Any], method: str, mu: float) -> float:
        return float(np.mean([result["by_seed"][(method, mu)][seed] for seed in seeds]))

    none = {g: at(r, "none", 0.0) for g, r in ((small, a), (large, b))}
    loss = {(g, mu): at(r, "mafalda", mu) for g, r in ((small, a), (large, b)) for mu in mus}
    lower = [loss[(small, mu)] < loss[(large, mu)] for mu in mus]
    cost = {(g, mu): loss[(g, mu)] - none[g] for g, mu in loss}
    floor = MATERIAL * min(none.values())
    material = [max(cost[(small, mu)], cost[(large, mu)]) > floor for mu in mus]
    excess = [cost[(small, mu)] < cost[(large, mu)] for mu in mus]
    judged = [ok for ok, big in zip(excess, material, strict=True) if big]
    mid = mus[len(mus) // 2]
    return checked(
        f"Housing, {small} against {large}, authors' protocol",
        SMALLER_GRAPHS,
        f"seeds {', '.join(map(str, seeds))} (both graphs); MAFALDA's final test loss (mean "
        f"over agents), {small} / {large}: "
        + ", ".join(f"mu {mu:g}: {loss[(small, mu)]:.3g} / {loss[(large, mu)]:.3g}" for mu in mus)
        + f"; lower on {small} at {sum(lower)}/{len(mus)} mu; no noise: {none[small]:.3g} / "
        f"{none[large]:.3g}; the excess over it: "
        + ", ".join(f"mu {mu:g}: {cost[(small, mu)]:+.3g} / {cost[(large, mu)]:+.3g}" for mu in mus)
        + f", lower at {sum(excess)}/{len(mus)}, and at {sum(judged)}/{len(judged)} of the mu "
        f"where it exceeds {MATERIAL:.0%} of the no-noise loss on either graph (mu "
        + ", ".join(f"{mu:g}" for mu, big in zip(mus, material, strict=True) if big)
        + f"); MAFALDA's noise sigma / C at mu = {mid:g}: "
        f"{a['sigma'][mid]:.3g} / {b['sigma'][mid]:.3g} (C / smallest batch: the batches are "
        f"{b['sigma'][mid] / a['sigma'][mid]:.1f}x bigger on {small})",
        bool(judged) and all(judged),
        "the cost of privacy (loss above no noise) is not lower on the smaller graph at mu "
        + ", ".join(
            f"{mu:g}" for mu, ok, big in zip(mus, excess, material, strict=True) if big and not ok
        )
        if judged
        else "the noise costs neither graph a material loss at any mu",
    )


def _per_agent_analysis(rows: list[dict[str, Any]], out: Path) -> dict[str, Any]:
    """MAFALDA-L-SGD against MAFALDA-SGD in the authors' protocol on every graph where both ran:
    the error its design removes (eq. (9) summed over agents, each run records it), and the final
    test loss, compared seed by seed (a seed fixes the split, the model's initialisation and the
    seeds of the noise, so the pair differs only in the encoders)."""
    labels = {GRAPH: AUTHORS_LABEL} | {g: label for g, (_, label) in FIG5_GRAPHS.items()}
    claims: list[Claim] = []
    notes: list[str] = []
    panels: dict[str, dict[str, Any]] = {}
    for graph, label in labels.items():
        graph_rows = _authors_rows(rows, graph)
        ours = [r for r in graph_rows if r["method"] == PER_AGENT]
        if not ours:
            continue
        finals = {
            (r["method"], float(r["mu"]), r["seed"]): json.loads(r[authors.CURVE])[-1]
            for r in graph_rows
        }
        mus = sorted({float(r["mu"]) for r in ours})
        seeds = sorted({r["seed"] for r in ours})
        first = ours[0]
        if "design_loss" not in first:  # a sweep's run: its row keeps the training run alone
            first = protocol.per_agent_design(graph, first["steps"], first["cycle"], authors.RULE)
        design = float(first["design_loss"]) / float(first["design_loss_shared"])
        paired = [
            [finals[(PER_AGENT, mu, s)] - finals[("mafalda", mu, s)] for s in seeds]
            for mu in mus
            if all(("mafalda", mu, s) in finals for s in seeds)
        ]
        if len(paired) < len(mus):
            claims.append(
                Claim(
                    label,
                    f"{PER_AGENT_LABEL} improves on MAFALDA-SGD (the authors' code)",
                    f"{PER_AGENT_LABEL} ran at {len(mus)} mu; MAFALDA-SGD's runs of the same "
                    "seeds are missing",
                    Verdict.NOT_TESTABLE,
                    "the comparison needs MAFALDA-SGD's runs of the authors' part (Facebook ego) "
                    "or the graphs part (the others): run them with this part",
                )
            )
            continue
        mean = {
            m: [float(np.mean([finals[(m, mu, s)] for s in seeds])) for mu in mus]
            for m in ("mafalda", PER_AGENT, "dp-dsgd")
            if all((m, mu, s) in finals for mu in mus for s in seeds)
        }
        eps = [gdp.epsilon(mu, protocol.DELTA) for mu in mus]
        panels[label] = {"eps": eps, "mean": mean}
        gaps = [float(np.mean(d)) for d in paired]
        errors = [
            float(np.std(d, ddof=1) / math.sqrt(len(d))) if len(d) > 1 else 0.0 for d in paired
        ]
        relative = [g / m for g, m in zip(gaps, mean["mafalda"], strict=True)]
        worse = [g > 2 * se for g, se in zip(gaps, errors, strict=True)]
        average = float(np.mean(relative))
        claims += [
            checked(
                label,
                f"{PER_AGENT_LABEL}'s per-agent encoders cause less error in the gossiped models "
                "than MAFALDA-SGD's shared encoder (eq. (9) split by agent; the authors' "
                "``MF_OPTIMAL_DL_variednode``)",
                f"the error of noise of unit privacy, summed over agents: {design:.4f}x "
                "MAFALDA-SGD's (every encoder of sensitivity 1)",
                design <= 1.0,
                "the per-agent optimisation ended above the shared optimum: an L-BFGS run "
                "stopped early",
            ),
            checked(
                label,
                f"{PER_AGENT_LABEL} improves on MAFALDA-SGD's test loss (offered in the authors' "
                'code as a second method of theirs, "MAFALDA-L-SGD (Ours)", and left out of the '
                "paper's figures): lower on average over eps, and nowhere higher by more than two "
                "standard errors of the paired difference",
                f"final test loss, {PER_AGENT_LABEL} minus MAFALDA-SGD, mean over "
                f"{len(seeds)} paired seeds (standard error; relative): "
                + ", ".join(
                    f"eps {e:.3g}: {g:+.4f} ({se:.4f}; {100 * r:+.2f}%)"
                    for e, g, se, r in zip(eps, gaps, errors, relative, strict=True)
                )
                + f"; {100 * average:+.2f}% on average over eps",
                average < 0 and not any(worse),
                f"{100 * average:+.2f}% on average, higher by more than two standard errors at "
                f"{sum(worse)} of {len(mus)} eps; the design removes {100 * (1 - design):.1f}% of "
                "the noise's error, and the largest difference at one eps is "
                f"{100 * max(abs(r) for r in relative):.2f}% of the loss",
            ),
        ]
        notes.append(
            f"{PER_AGENT_LABEL}, {label.removeprefix('Housing, ')}: {len(ours)} runs; every "
            "agent's encoder is optimised for its own term H_i of Lemma 12's sum (one L-BFGS run "
            "per agent), all of sensitivity 1, so the noise multiplier is MAFALDA-SGD's "
            f"(sigma / C {float(ours[0]['sigma']) / float(ours[0]['clip']):.3g} at mu "
            f"{float(ours[0]['mu']):g}) and only the correlation over time differs by agent."
        )
    figures = []
    if panels:
        figures.append(
            plot_panels(
                {label: panel["eps"] for label, panel in panels.items()},
                {label: panel["mean"] for label, panel in panels.items()},
                dict.fromkeys(panels, "LDP privacy budget eps (delta = 1e-6)"),
                "final test loss (MSE, target in $100,000)",
                out / "test_loss_mafalda_l.png",
                f"{PER_AGENT_LABEL} against MAFALDA-SGD (seed mean)",
                log_y=True,
                log_x=True,
                titles=True,
            )
        )
    return {"figures": figures, "notes": notes, "claims": claims}
