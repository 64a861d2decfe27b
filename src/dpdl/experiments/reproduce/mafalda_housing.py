"""``mafalda-housing``: MAFALDA-SGD Fig. 3 (right) and Fig. 5, test loss vs the LDP budget on Housing.

California housing regression (20640 block groups, 80/20 split, features and target standardised),
a one-hidden-layer ReLU network of width 64 with mean squared error, on the largest component of
Facebook ego network 414 (148 agents, Metropolis-Hastings weights), data spread uniformly at random
over agents. Cyclic participation k = 20, b = 19 (T = 380): each agent's examples are cut once into
19 batches used in turn, clipped per example at C, so a record changes the batch mean by at most
``2 C / smallest batch`` in 20 steps. Every method is (eps, 1e-6)-DP against LDP's attacker
(every message public), accounted by the matrix-factorization sensitivity (Theorem 8):

- ``dp-dsgd``: independent noise (C_local = I, sens = sqrt(20));
- ``antipgd``: the noise of the previous step subtracted (C_local = 1_{t >= s}, Koloskova et al.);
- ``mafalda``: the local encoder optimised for this gossip (Lemma 12, Algorithm 2; sens = 1);
- ``none``: no noise, the non-private reference (a flat line).

The step size and clipping threshold of each method are tuned at every eps on two seeds, and every
point then averages 20 seeds, as the paper. The paper does not say how it tuned. Tuned once at
eps = 10 and reused (our first full run), MAFALDA-SGD and DP-D-SGD tied at eps = 50, and DP-D-SGD's
step size went unstable at eps = 1 (test loss 8.4; 0.80 at the step size tuned there), which made
MAFALDA-SGD's average advantage 23% instead of the 6% measured with every eps tuned. The paper
reports the test loss over the last 50 steps; we report the final one.
"""  # noqa: E501 - verbatim in REPORT.md; its first line is the `reproduce --list` summary

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from dpdl.experiments.reproduce import mafalda_tradeoff as protocol
from dpdl.experiments.reproduce.mafalda_tradeoff import METHODS, REFERENCE_EPS
from dpdl.experiments.reproduce.report import Claim, checked
from dpdl.experiments.reproduce.tradeoff import Panel, Study, Training

__all__ = ["NAME", "analyse", "followup_jobs", "jobs", "run_job"]

NAME = "mafalda-housing"
GRAPH, AGENTS = "facebook-ego-414", 148
PARTICIPATIONS, CYCLE = 20, 19
EPS_GRID, QUICK_EPS = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0), (2.0, 10.0, 50.0)
#: Section 7.2: "a 31% average improvement in test loss" at a fixed budget.
PAPER_IMPROVEMENT = 0.31


def study(quick: bool) -> Study:
    """The full setting above; ``--quick``: 4 passes (T = 76), one step size, one seed."""
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


jobs, followup_jobs = protocol.stages(study)
run_job = protocol.run_job


def analyse(
    rows: list[dict[str, Any]], out: Path, quick: bool
) -> tuple[list[Path], list[Claim], list[str]]:
    """Figure (test loss vs eps, the no-noise reference flat), claims and notes."""
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
    ratios = [
        private[(label, x, "dp-dsgd", "exact")].mean / private[(label, x, "mafalda", "exact")].mean
        for x in grid
    ]
    beats = [
        private[(label, x, "mafalda", "exact")].mean < private[(label, x, method, "exact")].mean
        for x in grid
        for method in ("dp-dsgd", "antipgd")
    ]
    improvement = 1.0 - float(np.mean([1.0 / r for r in ratios]))
    met, runs = protocol.budget_met(rows)
    claims = [
        checked(
            label,
            "MAFALDA-SGD beats DP-D-SGD and AntiPGD at every eps",
            f"lower loss in {sum(beats)}/{len(beats)} (baseline, eps) pairs; DP-D-SGD / MAFALDA "
            f"test loss: "
            + ", ".join(f"eps {x:g}: {r:.2f}x" for x, r in zip(grid, ratios, strict=True)),
            all(beats),
            f"a baseline as good or better in {len(beats) - sum(beats)} (baseline, eps) pairs",
        ),
        checked(
            label,
            f"{100 * PAPER_IMPROVEMENT:.0f}% lower test loss than the baselines on average "
            "(Section 7.2)",
            f"{100 * improvement:.0f}% lower than DP-D-SGD, the stronger baseline, on average "
            f"over eps (holds: at least half the paper's {100 * PAPER_IMPROVEMENT:.0f}%)",
            improvement >= PAPER_IMPROVEMENT / 2,
            f"{100 * improvement:.0f}% where the paper says {100 * PAPER_IMPROVEMENT:.0f}%: every "
            "method's step size and clipping threshold are tuned here at every eps, while the "
            "authors' code runs every method at step 0.1 and C = 1 (batch 16, T = 320) and "
            "averages the gain over evaluation points at one noise multiplier; tuned once at "
            "eps = 10, as in our first run, the gain was 23% (not yet run in the authors' "
            "protocol)",
        ),
        checked(
            "all",
            "every private run is (eps, 1e-6)-DP under LDP (matrix-factorization accounting)",
            f"epsilon <= target in {met}/{runs} runs",
            met == runs,
            f"{runs - met} runs over their target: a bug in the accountant or the calibration",
        ),
    ]
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
    return [figure], claims, notes
