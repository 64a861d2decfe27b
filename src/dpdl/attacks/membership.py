"""A likelihood-ratio membership test: an empirical lower bound on epsilon, beside the accountant's.

The game of DP auditing (Jagielski, Ullman & Oprea, NeurIPS 2020; Nasr et al., IEEE S&P 2021): data
sets D and D' differ in one agent's data, which moves that agent's clipped gradient by the full
sensitivity s at every step (in one coordinate, the worst case). The adversary of a threat model
([`dpdl.threats`][dpdl.threats]) sees `P (g + v)` at every step, P its view of the honest agents
(the identity: every message; `1^T / n`: the average), after subtracting the noise of the seeds its
coalition holds, and runs the Neyman-Pearson test of D against D': the statistic `sum_t a^T o_t`
with `a = Sigma^+ P e_i`, `Sigma = P R P^T` for the unknown noise's covariance R, for the most
exposed honest agent i; where `P e_i` leaves the range of Sigma, `a` is its component in Sigma's
kernel and the statistic carries no noise at all, so the test never errs and the lower bound is
infinite (zero-sum designs, LPPA, no noise).

The noise comes from the mechanism's own sampler, T steps per trial; the attacker only uses R to
aim. Half the trials choose the threshold, the other half count the errors, and Clopper-Pearson
upper bounds on the false-positive and false-negative rates (each at level alpha / 2) give
`eps >= log((1 - delta - FPR) / FNR)` and `eps >= log((1 - delta - FNR) / FPR)` with
probability at least `1 - alpha`. This bound assumes nothing of the noise, and so stays far
below the accountant's at small delta: certifying eps needs false-positive rates near
`e^-eps`, which a few thousand trials cannot resolve.

For Gaussian noise the statistic is Gaussian under both hypotheses with one variance s^2 (a linear
function of the noise), so the test separates `N(0, s^2)` from `N(m, s^2)`, m the known shift:
its trade-off curve is that of `mu`-GDP with `mu = m / s`, and no mechanism whose view yields
this test is better than `mu`-GDP (Dong, Roth & Su 2022, Sections 2-3; the "Gaussian fit" of
auditing, e.g. Nasr et al., USENIX Security 2023). An exact upper confidence bound on s from the
chi-square law of the sample variance (all 2 x trials draws, the shift removed) gives a lower
bound on mu, and `eps(mu_lower, delta)` is a lower bound on epsilon with probability at least
`1 - fit_alpha`: it can meet the accountant's upper bound, and exceeding it means that the noise
drawn is smaller, in the attacked direction, than the covariance the accountant read. Being
nearly tight, it crosses the upper bound by chance with probability `fit_alpha`: hence a default
of 1e-3, so that an audit of dozens of (mechanism, threat) cells rarely shows a false alarm.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from dpdl.accounting.accountant import hidden_sensitivities
from dpdl.accounting.noise import GaussianNoise
from dpdl.accounting.sensitivity import unit_sensitivities
from dpdl.choices import DEFAULT_TRIALS
from dpdl.errors import ConfigError
from dpdl.threats import Eavesdropper, ThreatModel

__all__ = [
    "DEFAULT_TRIALS",
    "MAX_COALITIONS",
    "Aim",
    "EmpiricalPrivacy",
    "Sampled",
    "aim",
    "clopper_pearson_upper",
    "gaussian_fit_lower_bound",
    "membership_lower_bound",
    "threshold_lower_bound",
]

#: Eigenvalues below this fraction of the largest are the noise's kernel.
KERNEL_TOL = 1e-12
#: Candidate thresholds tried on the selection half.
THRESHOLDS = 400
#: Most coalitions a threat may have for the test to search them all.
MAX_COALITIONS = 20_000


class Sampled(Protocol):
    """Noise the attack can draw and aim at: a mechanism or a tracking injection."""

    n: int

    def sample(self, rng: np.random.Generator, dim: int) -> np.ndarray: ...

    def covariance(self) -> np.ndarray: ...

    def unknown_to(self, coalition: Iterable[int]) -> Sampled: ...


@dataclass(frozen=True)
class EmpiricalPrivacy:
    """What the membership test achieved against one mechanism and threat."""

    epsilon: (
        float  # lower bound, holding with probability >= 1 - alpha; inf when the test cannot err
    )
    agent: int
    coalition: tuple[int, ...]
    trials: int  # per hypothesis
    false_positive: float  # measured on the evaluation half at the chosen threshold
    false_negative: float
    noise_free: bool  # the test statistic carries no noise (the covariance misses the agent)
    #: The Gaussian-fit lower bound (module docstring), for Gaussian noise; None for other noise.
    gaussian_fit: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "epsilon_lower_bound": self.epsilon,
            "agent": self.agent,
            "coalition": list(self.coalition),
            "trials": self.trials,
            "false_positive": self.false_positive,
            "false_negative": self.false_negative,
            "noise_free": self.noise_free,
            "epsilon_lower_bound_gaussian_fit": self.gaussian_fit,
        }


@dataclass(frozen=True)
class Aim:
    """The attacked agent (among the honest), the test direction and how exposed the agent is."""

    agent: int
    direction: np.ndarray
    noise_free: bool
    exposure: float  # e_i^T P^T Sigma^+ P e_i, inf when noise-free


def aim(covariance: np.ndarray, view: np.ndarray, certified: np.ndarray | None = None) -> Aim:
    """Where to attack when the adversary observes `view @ (g + v)` with `v`'s covariance
    `covariance` over the honest agents.

    `certified`: the accountant's per-agent unit sensitivities for this view (inf where it
    certifies no finite value;
    [`hidden_sensitivities`][dpdl.accounting.accountant.hidden_sensitivities]), by default those
    of the bare covariance: the attack and the accountant share one rule for singularity. An
    agent the accountant leaves at inf is attacked along the component of `P e_i` in Sigma's
    least-variance directions (its kernel, or its smallest eigenvector where the kernel is empty
    but no finite value is certified); otherwise the agent of largest `(P e_i)^T Sigma^+ P e_i`
    along `Sigma^+ P e_i`."""
    if certified is None:
        certified = unit_sensitivities(covariance, view)
    sigma = view @ covariance @ view.T
    values, vectors = np.linalg.eigh((sigma + sigma.T) / 2.0)
    top = float(values.max(initial=0.0))
    kernel = values <= KERNEL_TOL * top if top > 0 else np.ones_like(values, dtype=bool)
    if not np.isfinite(certified).all():
        least = kernel if kernel.any() else values == values.min()
        leaks = vectors[:, least] @ (vectors[:, least].T @ view)
        leaked = np.linalg.norm(leaks, axis=0) * ~np.isfinite(certified)
        agent = int(np.argmax(leaked))
        return Aim(agent, leaks[:, agent], True, math.inf)
    inverse = (vectors[:, ~kernel] / values[~kernel]) @ vectors[:, ~kernel].T
    agent = int(np.argmax(certified))
    return Aim(agent, inverse @ view[:, agent], False, float(certified[agent]) ** 2)


def clopper_pearson_upper(errors: np.ndarray | int, trials: int, alpha: float) -> np.ndarray:
    """One-sided upper confidence bound at level `1 - alpha` on a rate seen `errors` times."""
    from scipy import stats  # 0.9 s to import, for one quantile

    errors = np.asarray(errors)
    bound = stats.beta.ppf(1.0 - alpha, errors + 1, np.maximum(trials - errors, 1))
    return np.where(errors >= trials, 1.0, bound)


def gaussian_fit_lower_bound(
    statistic: np.ndarray, shift: float, delta: float, alpha: float = 0.05
) -> float:
    """Lower bound on epsilon, with probability at least `1 - alpha`, from draws of the test
    statistic's noise (`statistic`, mean zero, Gaussian) and the known `shift` between the
    hypotheses: `eps(mu_lower, delta)` with `mu_lower = shift / s_upper` and `s_upper^2 =
    (k - 1) s^2 / chi2_alpha(k - 1)` (module docstring)."""
    from scipy import stats  # 0.9 s to import, for one quantile

    from dpdl.accounting.gdp import epsilon as gdp_epsilon

    count = len(statistic)
    variance = float(np.var(statistic, ddof=1))
    upper = (count - 1) * variance / float(stats.chi2.ppf(alpha, count - 1))
    return gdp_epsilon(abs(shift) / math.sqrt(upper), delta)


def _bound(fpr_hi: np.ndarray, fnr_hi: np.ndarray, delta: float) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.maximum(np.log(np.maximum(1.0 - delta - fpr_hi, 0.0) / fnr_hi), 0.0)


def _threshold_bounds(
    null: np.ndarray, alternative: np.ndarray, thresholds: np.ndarray, delta: float, level: float
) -> np.ndarray:
    fpr = clopper_pearson_upper((null[:, None] > thresholds).sum(axis=0), len(null), level)
    fnr = clopper_pearson_upper(
        (alternative[:, None] <= thresholds).sum(axis=0), len(alternative), level
    )
    return np.maximum(_bound(fpr, fnr, delta), _bound(fnr, fpr, delta))  # both ratios


def threshold_lower_bound(
    null: np.ndarray, alternative: np.ndarray, delta: float, alpha: float = 0.05
) -> tuple[float, float, float]:
    """`(eps, false positive rate, false negative rate)` of the test "statistic above a threshold
    means the canary is in", from draws of the statistic without (`null`) and with
    (`alternative`) the canary: the threshold is chosen on the first half of each, the errors
    counted on the second, and Clopper-Pearson bounds at level `alpha / 2` each give the lower
    bound on epsilon that holds with probability at least `1 - alpha` (module docstring)."""
    half_null, half_alternative = len(null) // 2, len(alternative) // 2
    candidates = np.quantile(
        np.concatenate([null[:half_null], alternative[:half_alternative]]),
        np.linspace(0.0, 1.0, THRESHOLDS),
    )
    level = alpha / 2.0
    chosen = candidates[
        np.argmax(
            _threshold_bounds(
                null[:half_null], alternative[:half_alternative], candidates, delta, level
            )
        )
    ]
    null, alternative = null[half_null:], alternative[half_alternative:]
    epsilon = float(_threshold_bounds(null, alternative, np.array([chosen]), delta, level)[0])
    return epsilon, float((null > chosen).mean()), float((alternative <= chosen).mean())


def membership_lower_bound(
    noise: Sampled,
    sensitivity: float,
    steps: int,
    delta: float,
    trials: int = DEFAULT_TRIALS,
    seed: int = 0,
    alpha: float = 0.05,
    threat: ThreatModel = Eavesdropper(),
    fit_alpha: float = 1e-3,
) -> EmpiricalPrivacy:
    """Run the membership test `trials` times under each hypothesis (see the module docstring),
    as `threat`: a coalition first subtracts the noise of the seeds its members hold, and attacks
    through the threat's view; of all the threat's coalitions, the one whose target is most exposed
    (at most `MAX_COALITIONS` are searched)."""
    if trials < 100:
        raise ConfigError(
            f"the membership test needs at least 100 trials per hypothesis, got {trials}"
        )
    if not (math.isfinite(sensitivity) and sensitivity > 0):
        raise ConfigError(f"the sensitivity must be a finite number > 0, got {sensitivity}")
    if threat.coalition_count(noise.n) > MAX_COALITIONS:
        raise ConfigError(
            f"the {threat} threat has {threat.coalition_count(noise.n)} coalitions on {noise.n} "
            f"agents; the membership test searches at most {MAX_COALITIONS}"
        )
    best: tuple[Aim, tuple[int, ...], Sampled, np.ndarray, np.ndarray] | None = None
    for coalition in threat.coalitions(noise.n):
        unknown = noise.unknown_to(coalition)
        honest = np.setdiff1d(np.arange(noise.n), coalition)
        view = threat.view(len(honest))
        description = getattr(noise, "noise", None)
        certified = (
            hidden_sensitivities(description, coalition, threat)[1]
            if isinstance(description, GaussianNoise)
            else None
        )
        target = aim(unknown.covariance()[np.ix_(honest, honest)], view, certified)
        if best is None or (target.noise_free, target.exposure) > (
            best[0].noise_free,
            best[0].exposure,
        ):
            best = (target, tuple(coalition), unknown, honest, view)
    assert best is not None
    target, coalition, unknown, honest, view = best
    rng = np.random.default_rng(seed)
    statistic = np.zeros(2 * trials)
    for _ in range(steps):
        statistic += target.direction @ (view @ unknown.sample(rng, 2 * trials)[honest])
    shift = steps * sensitivity * float(target.direction @ view[:, target.agent])
    null, alternative = statistic[:trials], statistic[trials:] + shift
    agent = int(honest[target.agent])
    if target.noise_free:
        spread = float(np.abs(statistic).max())
        if spread < 1e-6 * shift:
            return EmpiricalPrivacy(math.inf, agent, coalition, trials, 0.0, 0.0, True, math.inf)
        sigma = view @ unknown.covariance()[np.ix_(honest, honest)] @ view.T
        expected = math.sqrt(max(steps * float(target.direction @ sigma @ target.direction), 0.0))
        if spread > 100.0 * expected:  # the sampler puts noise where the covariance has none
            raise ConfigError(
                "the mechanism's samples have noise in the direction its covariance calls "
                "noise-free"
            )
        # Noise too small for the accountant to certify, but there: an ordinary test along it.
    epsilon, false_positive, false_negative = threshold_lower_bound(null, alternative, delta, alpha)
    gaussian = getattr(noise, "distribution", "gaussian") == "gaussian"
    return EmpiricalPrivacy(
        epsilon,
        agent,
        coalition,
        trials,
        false_positive,
        false_negative,
        False,
        gaussian_fit_lower_bound(statistic, shift, delta, fit_alpha) if gaussian else None,
    )
