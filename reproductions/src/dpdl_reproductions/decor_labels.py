"""DECOR's example-level eps labels as the authors' released code computes them, and the
(eps, delta) over T steps that the same noise gets from dpdl's accountant.

In the authors' repository, `utils/dp_account.py: rdp_compose_convert(num_iter, delta, sigmacdp,
sigmacor, clip, degree_matrix, adjacency_matrix, subsample, batch_size)` with `subsample < 1`
(example level) returns `minimize_alpha(rdp_subsample(lambda alpha: alpha * rdp_eps_no_sub,
subsample))`, where `rdp_eps_no_sub = rdp_account(sigmacdp, sigmacor, clip / batch_size, ...)
= 2 (C/B)^2 max_i [Sigma^-1]_ii` is Algorithm 2 with sensitivity 2C/B (replace-one) and
`rdp_subsample` is Wang et al. (2019)'s bound on one subsampled step
([`wang_rdp`][dpdl.accounting.subsampled_rdp.wang_rdp]). `num_iter` and `delta` are not used: the
value is the bound on ONE step, minimised over the order, which (the bound growing with the order,
and `rdp_subsample` interpolating order 2's value on (1, 2]) is its order-2 value. That number
is what `utils/param_search.py: find_sigma_cor_eps` bisects to a target eps (within 0.05 above),
what `tuning_mnist.py` (`epsilons = [0.1, 0.5, 1, 3]`, `subsample = 64/3750`) calibrates
the MNIST noise to, and the x-axis labels of DECOR's MNIST figure.

With `mu_step` the per-step sensitivity-over-noise of dpdl's example-level relation
(add/remove-one, sensitivity C/B), the label is `wang_rdp(2 mu_step, q, 2)`.
"""

from __future__ import annotations

from dpdl.accounting import ExampleLevel, calibrate
from dpdl.accounting.accountant import pld_epsilon
from dpdl.accounting.search import geometric_bisect
from dpdl.accounting.subsampled_rdp import wang_epsilon, wang_rdp

__all__ = ["AUTHORS_RATE", "authors_label", "label_mu_step", "label_scales", "scales_table"]

#: The authors' MNIST sampling rate: ``subsample = 64/3750`` (60000 images over 16 agents).
AUTHORS_RATE = 64 / 3750


def authors_label(mu_step: float, rate: float) -> float:
    """The eps the authors' code reports for example-level noise of per-step sensitivity
    `mu_step` (C/B over the noise) at sampling rate `rate`: Wang et al.'s order-2 RDP of one
    step at the replace-one sensitivity 2C/B."""
    return wang_rdp(2.0 * mu_step, rate, 2)


def label_mu_step(label: float, rate: float) -> float:
    """The per-step sensitivity `mu_step` whose `authors_label` is `label` (to 1e-10
    relative): the noise of a mechanism calibrated to that label by the authors' search."""
    low, high = 1e-6, 1.0
    while authors_label(high, rate) < label:
        high *= 2.0
    return geometric_bisect(lambda mu: authors_label(mu, rate) >= label, low, high, 1e-10)[1]


def label_scales(
    labels: tuple[float, ...],
    steps: int,
    delta: float,
    clip: float,
    batch_size: int,
    rates: tuple[float, float],
) -> list[dict[str, float]]:
    """For each label: the per-step sensitivity the authors' code calibrates to it at their rate
    `rates[0]`, the (eps, delta) over `steps` steps that dpdl's exact accountant (PLD) and the
    paper's text (Wang et al. composed) give that noise, dpdl's exact eps of the label's noise at
    `rates[1]` (the reproduction's), and, the other way, dpdl's own calibration at eps = label
    at `rates[1]`: its per-step sensitivity and its label in the authors' code."""
    authors, ours = rates
    rows = []
    for label in labels:
        mu = label_mu_step(label, authors)
        calibration = calibrate(label, delta, steps, ExampleLevel(clip, batch_size, ours))
        rows.append(
            {
                "label": label,
                "mu_step": mu,
                "exact": pld_epsilon(mu, authors, steps, delta),
                "paper": wang_epsilon(2.0 * mu, authors, steps, delta),
                "exact_ours": pld_epsilon(label_mu_step(label, ours), ours, steps, delta),
                "ours_mu_step": calibration.mu_step,
                "ours_label": authors_label(calibration.mu_step, ours),
            }
        )
    return rows


def scales_table(rows: list[dict[str, float]], steps: int, delta: float, rates: tuple) -> list[str]:
    """`label_scales`' rows as a markdown table."""
    authors, ours = rates
    lines = [
        f"| label eps | what the authors' code means by it (q = {authors:.4g}) | per-step "
        f"mu_step (C/B over the noise) | dpdl exact (PLD): (eps, {delta:g}) over T = {steps} | "
        "the paper's text (Wang et al. composed over T) | dpdl exact at the reproduction's "
        f"q = {ours:.4g} | dpdl's own point at eps = label: mu_step, and its label in the "
        "authors' code |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    lines += [
        f"| {row['label']:g} | one step, order-2 Renyi divergence <= {row['label']:g} | "
        f"{row['mu_step']:.4g} | {row['exact']:.3g} | {row['paper']:.3g} | "
        f"{row['exact_ours']:.3g} | {row['ours_mu_step']:.3g}, label {row['ours_label']:.3g} |"
        for row in rows
    ]
    return lines
