"""``whisper-quadratic``: Whisper D-SGD Fig. 2 / CorN-DSGD Fig. 3, optimality gap vs eps and p.

The quadratics of eq. (11) (d = 2, the second half rotated by 15 degrees), full gradients,
diminishing step size eta_t = 1e-2 / sqrt(t), T = 5000; n = 20, Erdos-Renyi, LDP vs DECOR vs
Whisper, both calibrations, 10 seeds. The optimality gap is that of every agent's model on the
global objective, averaged over agents.

The papers' clipping threshold C = 0.1 leaves nothing to compare here: the optimum lies about 5
away from the start and the clipped steps move at most ``C sum_t eta_t = 0.14`` in T steps, so every
method ends at the initial gap (measured: about 600 for all three at every eps). We tune C over
{0.1, 1, 10, 100, 1000} and eta_1 over {1e-1, 1e-2 (the papers'), 1e-3} per method and point
instead (the noise scales with C, so this is the privacy-utility trade-off that DECOR's
Appendix D.2 tunes too), keeping the papers' 1/sqrt(t) decay. With clipped gradients the restoring
force is bounded while the noise is not, so the final gap is heavy-tailed across seeds (a first
full run with 2 tuning and 10 final seeds: min 5, max 356 for one point): we tune on 5 seeds and
average 30 (the papers: 10), which costs minutes.

Why the claims fail at eps <= 10 (panel (a), and panel (b) at p = 0.2, which runs at eps = 10):
barely any method learns there (every tuned point of panel (a) ends within 0.75-1.42x of the
initial gap of 602, most at the smallest step size), so the ranking is noise. The agents'
minimisers lie at -10..-1 and 11..20 and their gradients at the start (norms 30 to 580) nearly
cancel once clipped: the clipped mean gradient is 12% of C for every C up to 100. The noise scales
with C as well, so no threshold helps: even at the central level sigma_ldp / sqrt(n), with
sigma_ldp = 2 C sqrt(T) / mu, T = 5000 steps of that pull add up to about 0.14 (eps = 3), 0.38
(eps = 10) and 1.1 (eps = 40) standard deviations of the noise they accumulate in the average model.
"""

from __future__ import annotations

from dpdl.experiments.reproduce import corn_tradeoff, tradeoff
from dpdl.experiments.reproduce.tradeoff import Study, Training

__all__ = ["NAME", "SIGNIFICANCE", "analyse", "followup_jobs", "jobs", "run_job"]

NAME = "whisper-quadratic"
SIGNIFICANCE = tradeoff.SIGNIFICANCE
run_job = tradeoff.run_job
CLIPS = (0.1, 1.0, 10.0, 100.0, 1000.0)


def study(quick: bool) -> Study:
    """The papers' setting with C and eta_1 tuned; fewer grid points and seeds for ``--quick``."""
    seeds = {"tune_seeds": 1, "seeds": 2} if quick else {"tune_seeds": 5, "seeds": 30}
    training = Training(
        "quadratic", 5000, (1e-1, 1e-2, 1e-3), CLIPS, "optimality_gap", schedule="inv-sqrt", **seeds
    )
    return corn_tradeoff.study(training, quick)


jobs, followup_jobs = tradeoff.stages(study)
analyse = corn_tradeoff.analyser(
    study, "Quadratic optimisation (Whisper Fig. 2 / CorN Fig. 3)", "optimality gap", log_y=True
)
