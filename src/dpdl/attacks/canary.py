"""Canary audits of a whole noisy D-SGD run: the messages as the deployment makes them, and the
one-run bound.

[`simulate_messages`][dpdl.attacks.canary.simulate_messages] runs the D-SGD recursion
`x_{t+1} = W (x_t - eta (g_t + v_t))` from zero models, every agent drawing its noise `v_t` from
the seeds it holds
([`NoiseMechanism.agent_noise`][dpdl.mechanisms.base.NoiseMechanism.agent_noise]), and yields the
messages `x_t - eta (g_t + v_t)` the agents send at each step; the coordinates of the model are
independent trials (the noise is independent across coordinates).
[`seed_draws`][dpdl.attacks.canary.seed_draws] gives the standard normal draws of every seed at a
step, in the order of the columns of `Z` in
[`from_noise`][dpdl.factorization.algorithms.from_noise], so that an attacker holding a seed
subtracts exactly the draws the deployment used.

[`one_run_lower_bound`][dpdl.attacks.canary.one_run_lower_bound] is the audit of Steinke, Nasr and
Jagielski, "Privacy Auditing with One (1) Training Run" (NeurIPS 2023): m canaries, each included
independently with probability 1/2, are scored in one run; the auditor guesses the `k_+` highest
scores "in", the `k_-` lowest "out", abstains on the rest, and counts its `v` correct guesses out of
`r = k_+ + k_-`. Their theorem for `(eps, delta)`-DP (Section 5; computed exactly as the code of
their Appendix D) bounds the chance of `v` or more correct guesses by

    p(eps) = P[Bin(r, q) >= v] + 2 m delta max_{1 <= i <= v} P[v - i <= Bin(r, q) < v] / i,

with `q = e^eps / (1 + e^eps)` (randomized response's accuracy); the largest eps with
`p(eps) < alpha` is a lower bound on eps holding with probability at least `1 - alpha`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from dpdl.errors import ConfigError
from dpdl.mechanisms.base import NoiseMechanism, SeedBook

__all__ = [
    "expected_correct_guesses",
    "one_run_lower_bound",
    "one_run_p_value",
    "seed_draws",
    "simulate_messages",
]

#: Bisection steps of the one-run bound (eps to about 2^-40 of its bracket).
BISECTION_STEPS = 40


def seed_draws(mechanism: NoiseMechanism, seeds: SeedBook, step: int, dim: int) -> np.ndarray:
    """`(n + width, dim)`: each agent's private draws, then each secret's draws, at `step` (the
    columns of one step of `Z` in [`from_noise`][dpdl.factorization.algorithms.from_noise])."""
    private = [SeedBook.draw(seeds.private[i], step, (dim,)) for i in range(mechanism.n)]
    shared = [
        SeedBook.draw(seeds.secrets[k], step, (secret.factor.shape[1], dim))
        for k, secret in enumerate(mechanism.secrets)
    ]
    return np.vstack([np.stack(private), *shared])


def simulate_messages(
    mechanism: NoiseMechanism,
    weights: np.ndarray,
    gradients: np.ndarray,
    seeds: SeedBook,
    step_size: float = 1.0,
) -> Iterator[np.ndarray]:
    """The messages `(n, dim)` of each step of D-SGD with `gradients` `(steps, n, dim)` (a canary:
    zero but one agent's), each agent's noise drawn from its own seeds (module doc)."""
    steps, n, dim = gradients.shape
    if weights.shape != (n, n) or mechanism.n != n:
        raise ConfigError(
            f"the mixing matrix {weights.shape}, the mechanism ({mechanism.n} agents) and the "
            f"gradients ({n} agents) must agree"
        )
    books = [seeds.for_agent(mechanism, agent) for agent in range(n)]
    models = np.zeros((n, dim))
    for step in range(steps):
        noise = np.stack(
            [mechanism.agent_noise(agent, books[agent], step, dim) for agent in range(n)]
        )
        messages = models - step_size * (gradients[step] + noise)
        yield messages
        models = weights @ messages


def _binomial_tails(r: int, v: int, q: float) -> tuple[float, float]:
    """`P[Binomial(r, q) >= v]` and `max_{1 <= i <= v} P[v - i <= Binomial(r, q) < v] / i`."""
    from scipy import stats  # 0.9 s to import

    tail = float(stats.binom.sf(v - 1, r, q))
    if v == 0:
        return tail, 0.0
    below = np.cumsum(stats.binom.pmf(np.arange(v - 1, -1, -1), r, q))
    return tail, float((below / np.arange(1, v + 1)).max())


def one_run_p_value(m: int, r: int, v: int, eps: float, delta: float) -> float:
    """The chance, under `(eps, delta)`-DP, of `v` or more correct guesses out of `r` on `m`
    canaries (module doc; Steinke et al. 2023, Section 5 and Appendix D)."""
    if not 0 <= v <= r <= m:
        raise ConfigError(f"the one-run audit needs 0 <= v <= r <= m, got v={v}, r={r}, m={m}")
    q = 1.0 / (1.0 + math.exp(-eps))
    tail, spread = _binomial_tails(r, v, q)
    return min(tail + 2.0 * m * delta * spread, 1.0)


def _largest_rejected(m: int, r: int, v: int, delta: float, alpha: float) -> float:
    """The largest eps with `p(eps) < alpha` (0 when none is rejected), by bisection."""
    if one_run_p_value(m, r, v, 0.0, delta) >= alpha:
        return 0.0
    low, high = 0.0, 1.0
    while one_run_p_value(m, r, v, high, delta) < alpha:
        low, high = high, 2.0 * high
    for _ in range(BISECTION_STEPS):
        middle = (low + high) / 2.0
        if one_run_p_value(m, r, v, middle, delta) < alpha:
            low = middle
        else:
            high = middle
    return low


def one_run_lower_bound(
    scores: np.ndarray,
    included: np.ndarray,
    guesses_in: int,
    guesses_out: int,
    delta: float,
    alpha: float = 0.05,
) -> tuple[float, int, int]:
    """`(eps, r, v)`: the one-run lower bound (module doc) from the `scores` of `m` canaries
    (higher: more likely in) and which were `included`, guessing the `guesses_in` highest in and
    the `guesses_out` lowest out. The numbers of guesses must be fixed before the scores are seen
    (as [`expected_correct_guesses`][dpdl.attacks.canary.expected_correct_guesses] picks them)."""
    m = len(scores)
    if included.shape != (m,) or guesses_in < 0 or guesses_out < 0 or guesses_in + guesses_out > m:
        raise ConfigError(
            f"the one-run audit needs one inclusion bit per score and k+ + k- <= m = {m}, got "
            f"{included.shape}, k+ = {guesses_in}, k- = {guesses_out}"
        )
    order = np.argsort(scores, kind="stable")
    correct = int(included[order[m - guesses_in :]].sum()) if guesses_in else 0
    correct += int((~included[order[:guesses_out]]).sum())
    r = guesses_in + guesses_out
    return _largest_rejected(m, r, correct, delta, alpha), r, correct


def expected_correct_guesses(
    m: int, mu: float, delta: float, alpha: float = 0.05, candidates: int = 16
) -> tuple[int, float]:
    """`(k, eps)`: the number of guesses each way `k = k_+ = k_-` that maximizes the one-run bound
    expected when the scores are `N(0, 1)` without the canary and `N(mu, 1)` with it (the view's
    exact `mu`, known before the run), and that expected bound. Choosing `k` from `mu` rather than
    from the scores keeps the bound valid."""
    from scipy import stats  # 0.9 s to import

    best = (max(1, m // 20), 0.0)
    for k in np.unique(np.geomspace(1, m // 2, candidates).astype(int)):
        # threshold t with P[score > t] = k / m under the half-half mixture, then the share of
        # the top k that are in; the bottom k are symmetric about mu / 2.
        threshold = _mixture_quantile(1.0 - k / m, mu)
        above_in = 0.5 * float(stats.norm.sf(threshold - mu)) if math.isfinite(mu) else 0.5
        precision = min(above_in / (k / m), 1.0)
        correct = round(2 * k * precision)
        found = _largest_rejected(m, 2 * int(k), correct, delta, alpha)
        if found > best[1]:
            best = (int(k), found)
    return best


def _mixture_quantile(level: float, mu: float) -> float:
    """Quantile of `N(0, 1) / 2 + N(mu, 1) / 2` (mu finite), by bisection."""
    from scipy.special import ndtr

    if not math.isfinite(mu):
        return 0.0
    low, high = -10.0, mu + 10.0
    for _ in range(100):
        middle = (low + high) / 2.0
        below = 0.5 * (float(ndtr(middle)) + float(ndtr(middle - mu)))
        low, high = (middle, high) if below < level else (low, middle)
    return (low + high) / 2.0
