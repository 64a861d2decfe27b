"""``whisper-logreg``: Whisper D-SGD Fig. 3 / CorN-DSGD Fig. 4, a9a logistic regression test loss vs eps and p.

L2-regularised logistic regression on a9a (80/20 split, Dirichlet(10) partition, batch 128),
T = 5000 steps, C = 0.1, step size tuned over the papers' grid {1e-1, 5e-2, 1e-2, 5e-3, 1e-3};
n = 20, Erdos-Renyi, LDP vs DECOR vs Whisper, both calibrations, 10 seeds.
"""  # noqa: E501 - verbatim in REPORT.md; its first line is the `reproduce --list` summary

from __future__ import annotations

from dpdl.experiments.reproduce import corn_tradeoff, tradeoff
from dpdl.experiments.reproduce.tradeoff import Study, Training

__all__ = ["NAME", "SIGNIFICANCE", "analyse", "followup_jobs", "jobs", "run_job"]

NAME = "whisper-logreg"
SIGNIFICANCE = tradeoff.SIGNIFICANCE
run_job = tradeoff.run_job


def study(quick: bool) -> Study:
    """The papers' setting, or T = 1000, two step sizes and fewer grid points for ``--quick``."""
    if quick:
        return corn_tradeoff.study(
            Training("logreg-a9a", 1000, (1e-1, 1e-2), (0.1,), "test_loss", seeds=2), quick
        )
    training = Training(
        "logreg-a9a",
        5000,
        (1e-1, 5e-2, 1e-2, 5e-3, 1e-3),
        (0.1,),
        "test_loss",
        tune_seeds=2,
        seeds=10,
    )
    return corn_tradeoff.study(training, quick)


jobs, followup_jobs = tradeoff.stages(study)
analyse = corn_tradeoff.analyser(
    study, "Logistic regression on a9a (Whisper Fig. 3 / CorN Fig. 4)", "test loss", log_y=True
)
