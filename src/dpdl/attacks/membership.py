"""A likelihood-ratio membership test: an empirical lower bound on epsilon, beside the accountant's.

The game of DP auditing (Jagielski, Ullman & Oprea, NeurIPS 2020; Nasr et al., IEEE S&P 2021):
data sets D and D' differ in one agent's data, which moves that agent's clipped gradient by the
full sensitivity s at every step (in one coordinate, the worst case). The eavesdropper sees every
agent's noisy gradient at every step (what it reads off the messages, :mod:`dpdl.threats`) and
runs the Neyman-Pearson test of D against D': the statistic ``sum_t a^T o_t`` with ``a = R^+ e_i``
for the most exposed agent i; where ``e_i`` leaves the range of the noise covariance R, ``a`` is
its component in R's kernel and the statistic carries no noise at all, so the test never errs and
the lower bound is infinite (zero-sum designs, LPPA, no noise).

The noise comes from the mechanism's own sampler, T steps per trial; the attacker only uses R to
aim. Half the trials choose the threshold, the other half count the errors, and Clopper-Pearson
upper bounds on the false-positive and false-negative rates (each at level alpha / 2) give
``eps >= log((1 - delta - FPR) / FNR)`` and ``eps >= log((1 - delta - FNR) / FPR)`` with
probability at least ``1 - alpha``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from scipy import stats

from dpdl.errors import ConfigError

__all__ = ["Sampled", "EmpiricalPrivacy", "aim", "clopper_pearson_upper", "membership_lower_bound"]

#: Eigenvalues below this fraction of the largest are the noise's kernel.
KERNEL_TOL = 1e-12
#: Candidate thresholds tried on the selection half.
THRESHOLDS = 400


class Sampled(Protocol):
    """Noise the attack can draw and aim at: a mechanism or a tracking injection."""

    n: int

    def sample(self, rng: np.random.Generator, dim: int) -> np.ndarray: ...

    def covariance(self) -> np.ndarray: ...


@dataclass(frozen=True)
class EmpiricalPrivacy:
    """What the membership test achieved against one mechanism."""

    epsilon: float  # lower bound, holding with probability >= 1 - alpha; inf when the test cannot err
    agent: int
    trials: int  # per hypothesis
    false_positive: float  # measured on the evaluation half at the chosen threshold
    false_negative: float
    noise_free: bool  # the test statistic carries no noise (the covariance misses the agent)

    def as_dict(self) -> dict[str, float | int | bool]:
        return {
            "epsilon_lower_bound": self.epsilon,
            "agent": self.agent,
            "trials": self.trials,
            "false_positive": self.false_positive,
            "false_negative": self.false_negative,
            "noise_free": self.noise_free,
        }


def aim(covariance: np.ndarray) -> tuple[int, np.ndarray, bool]:
    """The attacked agent, the test direction ``a``, and whether the statistic is noise-free.

    An agent whose unit vector has a component in the covariance's kernel is attacked along that
    component (no noise); otherwise the agent of largest ``e_i^T R^+ e_i`` along ``R^+ e_i``.
    """
    values, vectors = np.linalg.eigh((covariance + covariance.T) / 2.0)
    kernel = values <= KERNEL_TOL * max(values.max(), 0.0) if values.max() > 0 else np.ones_like(values, dtype=bool)
    leak = vectors[:, kernel] @ vectors[:, kernel].T  # projector on the kernel; column i is its part of e_i
    leaked = np.linalg.norm(leak, axis=0)
    if leaked.max() > 1e-6:
        agent = int(np.argmax(leaked))
        return agent, leak[:, agent], True
    inverse = (vectors[:, ~kernel] / values[~kernel]) @ vectors[:, ~kernel].T
    agent = int(np.argmax(np.diag(inverse)))
    return agent, inverse[:, agent], False


def clopper_pearson_upper(errors: np.ndarray | int, trials: int, alpha: float) -> np.ndarray:
    """One-sided upper confidence bound at level ``1 - alpha`` on a rate seen ``errors`` times."""
    errors = np.asarray(errors)
    bound = stats.beta.ppf(1.0 - alpha, errors + 1, np.maximum(trials - errors, 1))
    return np.where(errors >= trials, 1.0, bound)


def _bound(fpr_hi: np.ndarray, fnr_hi: np.ndarray, delta: float) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.maximum(np.log(np.maximum(1.0 - delta - fpr_hi, 0.0) / fnr_hi), 0.0)


def membership_lower_bound(
    noise: Sampled,
    sensitivity: float,
    steps: int,
    delta: float,
    trials: int = 20_000,
    seed: int = 0,
    alpha: float = 0.05,
) -> EmpiricalPrivacy:
    """Run the membership test ``trials`` times under each hypothesis (see the module docstring)."""
    if trials < 100:
        raise ConfigError(f"the membership test needs at least 100 trials per hypothesis, got {trials}")
    if not (math.isfinite(sensitivity) and sensitivity > 0):
        raise ConfigError(f"the sensitivity must be a finite number > 0, got {sensitivity}")
    agent, direction, noise_free = aim(noise.covariance())
    rng = np.random.default_rng(seed)
    statistic = np.zeros(2 * trials)
    for _ in range(steps):
        statistic += direction @ noise.sample(rng, 2 * trials)
    shift = steps * sensitivity * float(direction[agent])
    null, alternative = statistic[:trials], statistic[trials:] + shift
    if noise_free:
        separated = np.abs(statistic).max() < 1e-6 * shift
        if not separated:  # the sampler puts noise where the covariance says there is none
            raise ConfigError("the mechanism's samples have noise in the direction its covariance calls noise-free")
        return EmpiricalPrivacy(math.inf, agent, trials, 0.0, 0.0, True)
    half = trials // 2
    candidates = np.quantile(np.concatenate([null[:half], alternative[:half]]), np.linspace(0.0, 1.0, THRESHOLDS))
    level = alpha / 2.0

    def bounds(null_part: np.ndarray, alternative_part: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
        count = len(null_part)
        fpr = clopper_pearson_upper((null_part[:, None] > thresholds).sum(axis=0), count, level)
        fnr = clopper_pearson_upper((alternative_part[:, None] <= thresholds).sum(axis=0), count, level)
        return np.maximum(_bound(fpr, fnr, delta), _bound(fnr, fpr, delta))  # both ratios of the trade-off

    chosen = candidates[np.argmax(bounds(null[:half], alternative[:half], candidates))]
    epsilon = float(bounds(null[half:], alternative[half:], np.array([chosen]))[0])
    return EmpiricalPrivacy(
        epsilon, agent, trials, float((null[half:] > chosen).mean()), float((alternative[half:] <= chosen).mean()), False
    )
