"""`whisper-logreg`: Whisper D-SGD Fig. 3 / CorN-DSGD Fig. 4, a9a logistic regression test loss vs eps and p.

Two protocols (`--parts paper authors`). The papers' (`paper`): L2-regularised logistic
regression on a9a (80/20 split, Dirichlet(10) partition, batch 128), agent-level privacy,
T = 5000 steps, C = 0.1, step size tuned over the papers' grid {1e-1, 5e-2, 1e-2, 5e-3, 1e-3};
n = 20, Erdos-Renyi, LDP vs DECOR vs Whisper, both calibrations, 10 seeds. The authors' released
code (`authors`, `corn_authors`: `train.py` and
`paper_experiments/a9a_libsvm/*.sh` of arodio/WhisperDSGD):

| setting | papers' text (`paper`) | authors' code (`authors`) |
| --- | --- | --- |
| privacy unit | one agent: its batch gradient clipped to C | one example: each example's gradient clipped to C (`--mbz 1`), noise added to the batch's sum, the sum divided by the batch |
| noise from eps | closed form [R^-1]_ii <= eps^2 / (16 C^2 T log(1/delta)) (dashed) and dpdl's exact GDP accountant (solid) | zCDP conversion max_i [Sigma^-1]_ii <= (sqrt(log(1/delta) + eps) - sqrt(log(1/delta)))^2 / (2 T C^2) on the sum (`diff_privacy.py`; calibration `authors`, dashed) |
| batch | 128 | 128 a step, drawn without replacement (dpdl: Poisson, expected 128) |
| T, C | 5000, 0.1 | 5000, 0.1 |
| step size | tuned per point over the grid | the scripts: one per (eps or p, method), from a one-seed sweep (eps 3..40: LDP 1e-3 to 1e-2, DECOR 1e-3 to 1e-2, Whisper 1e-3 to 5e-2; p: 5e-3, DECOR 1e-2 at p = 1, Whisper 1e-2 at p >= 0.8); here tuned per point, method and calibration over the papers' grid |
| agents, graph | 20, Erdos-Renyi, Metropolis-Hastings | the same (weights 1/(1 + max(d_i, d_j))), a fresh graph per seed |
| data | all 48842 rows, 80/20 random split, Dirichlet(10) partition | a9a's own train / test files (32561 / 16281 rows), Dirichlet(10) partition (`--alpha 10`); the partition is drawn once (seed 12345) for all seeds |
| model | logistic regression, L2 1e-3, no bias, starts at 0 | a linear layer with bias (torch's initialisation), no weight decay |
| metric | mean over agents of the test loss on the test set | mean over agents of each agent's loss on its own test rows |
| eps, p | eps in {3, ..., 40} at p = 0.5; p in {0.2, ..., 1} at eps = 10 | eps in {3, 5, 7, 10, 15, 20, 30, 40}, p in {0.2, 0.4, 0.6, 0.8, 1}; here the same |
| seeds | 10 (tuned on 2) | 9 (here the step size tuned on the first) |

What dpdl cannot match in the authors' protocol: its logistic task has no bias and starts at 0;
its example-level batches are Poisson (the accountant's assumption), not fixed draws of 128; every
agent is tested on the whole test file, not on its own rows; the partition is redrawn per seed.
The authors' noise meets its label at example level by dpdl's exact accountant (far below it: see
the notes), so it is run as released; dpdl's own example-level calibration at the same labels,
with 10 to 40 times less noise, is not run here (the budget): its noise is in the notes' table.

What the authors' protocol shows here: no method leaves the majority class (test accuracy 0.764)
at any step size of the grid below 0.1, and all three end within 1% of one another. Each
example's gradient (norm |coef| sqrt(14) on a9a's one-hot rows) is clipped to C = 0.1, which
biases the update towards the majority class; a noise-free run of the same protocol (seed 0,
step 0.005) ends at the same test loss, 0.561 (0.383 with agent-level clipping), so the noise,
and with it the noise designs, costs nothing measurable there: the claims' misses in this
protocol are within the seeds' spread.
"""  # noqa: E501 - verbatim in REPORT.md; its first line is the `reproduce --list` summary

from __future__ import annotations

from dpdl_reproductions import corn_authors, corn_tradeoff, tradeoff
from dpdl_reproductions.tradeoff import Study, Training

__all__ = [
    "NAME",
    "PARTS",
    "SIGNIFICANCE",
    "SWEEP",
    "SWEEP_PARTS",
    "analyse",
    "authors_study",
    "followup_jobs",
    "jobs",
    "run_job",
]

NAME = "whisper-logreg"
SIGNIFICANCE = tradeoff.SIGNIFICANCE
PARTS = corn_tradeoff.PARTS
#: The parts that the sweep file ``dpdl sweep NAME`` runs states (:func:`dpdl_reproductions.
#: report_of_sweep`): both protocols.
SWEEP_PARTS = PARTS
#: The runs of both protocols: its sweep file.
SWEEP = corn_tradeoff.sweep_jobs(NAME)
run_job = corn_tradeoff.run_job
#: The papers' step-size grid, shared by every method of both protocols.
LRS = (1e-1, 5e-2, 1e-2, 5e-3, 1e-3)


def study(quick: bool) -> Study:
    """The papers' setting, or T = 1000, two step sizes and fewer grid points for `--quick`."""
    if quick:
        return corn_tradeoff.study(
            Training("logreg-a9a", 1000, (1e-1, 1e-2), (0.1,), "test_loss", seeds=2), quick
        )
    training = Training(
        "logreg-a9a",
        5000,
        LRS,
        (0.1,),
        "test_loss",
        tune_seeds=2,
        seeds=10,
    )
    return corn_tradeoff.study(training, quick)


def authors_study(quick: bool) -> Study:
    """The authors' protocol (`corn_authors`): example level, their calibration, the
    scripts' points and 9 seeds; T = 200, two step sizes and two points a panel for `--quick`."""
    if quick:
        training = Training(
            "logreg-a9a",
            200,
            (1e-1, 1e-2),
            (0.1,),
            "test_loss",
            clip_level="example",
            seeds=2,
            protocol=corn_authors.PROTOCOL,
        )
        return corn_tradeoff.authors_study(training, (10.0, 40.0), (0.6, 1.0), CALIBRATIONS)
    training = Training(
        "logreg-a9a",
        5000,
        LRS,
        (0.1,),
        "test_loss",
        clip_level="example",
        seeds=9,
        protocol=corn_authors.PROTOCOL,
    )
    return corn_tradeoff.authors_study(
        training, (3.0, 5.0, 7.0, 10.0, 15.0, 20.0, 30.0, 40.0), corn_tradeoff.P_GRID, CALIBRATIONS
    )


#: The authors' protocol's calibration: theirs (the budget leaves out dpdl's exact one).
CALIBRATIONS = (corn_authors.AUTHORS_CALIBRATION,)

PROTOCOLS = corn_tradeoff.Protocols(
    study,
    authors_study,
    "Logistic regression on a9a (Whisper Fig. 3 / CorN Fig. 4)",
    "test loss",
    True,
    "In the authors' protocol it holds: there the privacy is per example (each example's gradient "
    "clipped to C, the noise added to the batch's sum and divided by its 128 examples: 56 times "
    "smaller in standard deviation at eps = 10 than the agent-level noise of the paper's exact "
    "calibration, see the scales in the notes), and the noise costs nothing measurable",
    sweep=SWEEP,
)
jobs, followup_jobs, analyse = PROTOCOLS.jobs, PROTOCOLS.followup_jobs, PROTOCOLS.analyse
