"""The one accountant: (noise description, threat model, neighbouring relation, steps) -> eps.

The noise is plain data (:class:`~dpdl.accounting.noise.GaussianNoise`, or anything holding one,
such as every mechanism; or a bare covariance for threats without coalitions): this layer imports
no mechanism.

Per step, the adversary's view is a Gaussian mechanism of Mahalanobis sensitivity
``mu_step = s * max_i sqrt(e_i^T P^T (P R P^T)^+ P e_i)`` (:mod:`dpdl.accounting.sensitivity`).
Over T steps:

- agent level, ``"gdp"`` (default): exact, ``mu = sqrt(T) mu_step``-GDP (adaptive composition),
  converted to (eps, delta) exactly (:mod:`dpdl.accounting.gdp`);
- agent level, ``"paper-rdp"``: the Whisper / DECOR RDP bound (:mod:`dpdl.accounting.rdp_bound`),
  kept to reproduce the papers;
- example level, ``"pld"``: the privacy-loss distribution of T Poisson-subsampled Gaussian
  mechanisms of noise multiplier ``1 / mu_step``, from dp_accounting (exact up to its
  discretisation, which errs on the pessimistic side);
- example level, ``"paper-rdp"``: the same mechanisms through Renyi DP (dp_accounting's
  ``RdpAccountant``), how DECOR (Appendix D, "RDP privacy amplification by subsampling") accounts
  example-level privacy; an upper bound on the PLD value, kept to reproduce the papers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from dpdl.accounting import gdp
from dpdl.accounting.neighbouring import ExampleLevel, Neighbouring
from dpdl.accounting.noise import GaussianNoise, NoiseSource, noise_of
from dpdl.accounting.rdp_bound import paper_epsilon
from dpdl.accounting.sensitivity import RANK_TOL, unit_sensitivity
from dpdl.errors import ConfigError, PrivacyParameterError
from dpdl.scale import SPARSE_MIN_AGENTS, require_dense
from dpdl.threats import ThreatModel

__all__ = [
    "ACCOUNTANTS",
    "Noise",
    "PrivacyReport",
    "account",
    "default_accountant",
    "epsilon_from_mu_step",
    "pld_epsilon",
    "step_sensitivity",
    "subsampled_rdp_epsilon",
]

ACCOUNTANTS = ("gdp", "paper-rdp", "pld")

#: Coalition enumeration is replaced by the full-collusion bound above this much work
#: (coalitions x honest agents^3 floating-point operations, about a minute here).
MAX_ENUMERATION_FLOPS = 3e11

#: dp_accounting PLD discretisation; finer is tighter but slower. Its PLDs are pessimistic: a
#: coarser grid over-estimates epsilon, so calibration searches on
#: :data:`PLD_SEARCH_DISCRETIZATION`.
PLD_DISCRETIZATION = 1e-4
PLD_SEARCH_DISCRETIZATION = 1e-3


@dataclass(frozen=True)
class PrivacyReport:
    """A privacy guarantee, always stated with its threat model, relation and accountant."""

    epsilon: float
    delta: float
    steps: int
    mu_step: float
    threat: str
    neighbouring: str
    accountant: str
    exact: bool = True
    coalitions: int = 1

    @property
    def mu(self) -> float:
        """Total GDP parameter ``sqrt(T) mu_step`` (meaningful for the agent-level accountants)."""
        return math.sqrt(self.steps) * self.mu_step

    def as_dict(self) -> dict[str, float | int | str]:
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "steps": self.steps,
            "mu_step": self.mu_step,
            "threat": self.threat,
            "neighbouring": self.neighbouring,
            "accountant": self.accountant,
            "exact": self.exact,
            "coalitions": self.coalitions,
        }

    def __str__(self) -> str:
        eps = "inf (no guarantee)" if math.isinf(self.epsilon) else f"{self.epsilon:.4g}"
        if not self.exact:
            how = " (upper bound: too many coalitions to enumerate, full collusion assumed)"
        elif self.coalitions > 1:
            how = f" (worst of {self.coalitions} coalitions)"
        else:
            how = ""
        return (
            f"eps={eps} at delta={self.delta:g} over {self.steps} steps; {self.threat}; "
            f"{self.neighbouring}; accountant {self.accountant}{how}"
        )


#: What the accountant reads: a noise description, anything holding one, or a bare covariance.
Noise = GaussianNoise | NoiseSource | np.ndarray


def _independent_sensitivity(variances: np.ndarray, threat: ThreatModel) -> float:
    """Worst unit sensitivity of independent noise ``R = diag(variances)`` in closed form, without
    an n x n matrix: ``max_i 1 / sqrt(r_i)`` under the identity view (each agent's message seen
    alone), infinite where ``r_i`` is zero (relative to the largest, as
    :func:`~dpdl.accounting.sensitivity.unit_sensitivities` decides); under another view ``P``
    (few rows, such as the central observer's average), ``Sigma = P diag(r) P^T`` is small."""
    n = len(variances)
    if type(threat).view is ThreatModel.view:  # the identity: every message seen on its own
        hidden = variances > RANK_TOL * variances.max(initial=0.0)
        if not hidden.all():
            return math.inf
        return float(np.max(1.0 / np.sqrt(variances)))
    view = threat.view(n)
    return (
        unit_sensitivity(np.diag(variances), view)
        if view.shape[0] >= n
        else _small_view(variances, view)
    )


def _small_view(variances: np.ndarray, view: np.ndarray) -> float:
    """Worst unit sensitivity ``max_i sqrt(P_i^T Sigma^+ P_i)`` of independent noise seen through a
    view ``P`` of few rows, with ``Sigma = P diag(r) P^T`` (k x k); a singular Sigma (relative to
    the largest variance) gives no guarantee."""
    sigma = (view * variances) @ view.T
    scale = float(variances.max(initial=0.0)) * float((view * view).sum(axis=1).max(initial=0.0))
    values, vectors = np.linalg.eigh((sigma + sigma.T) / 2.0)
    if scale <= 0 or values.min() <= RANK_TOL * scale:
        return math.inf
    projected = vectors.T @ view
    return float(np.sqrt((projected**2 / values[:, None]).sum(axis=0)).max())


def _unit_sensitivity(source: Noise, threat: ThreatModel) -> tuple[float, bool, int]:
    """Worst unit Mahalanobis sensitivity over the threat's coalitions, whether it is exact, and
    how many coalitions were enumerated to find it (the cost: each is an n x n factorisation)."""
    if isinstance(source, np.ndarray):
        if threat.coalition_count(source.shape[0]) != 1:
            raise ConfigError(
                f"the {threat} threat needs the mechanism's seed structure, not only its covariance"
            )
        return unit_sensitivity(source, threat.view(source.shape[0])), True, 1
    noise = noise_of(source)
    n = noise.n
    if (
        not noise.secrets
    ):  # independent noise: what a coalition knows changes nothing for the others
        if n >= SPARSE_MIN_AGENTS:
            return _independent_sensitivity(noise.private_variances, threat), True, 1
        return unit_sensitivity(noise.covariance(), threat.view(n)), True, 1
    count = threat.coalition_count(n)
    q = len(next(iter(threat.coalitions(n))))
    if q and min(len(secret.holders) for secret in noise.secrets) > n - q:
        # Every coalition of q agents meets every secret's holders: only private parts stay hidden.
        return _private_only(noise, threat), True, 1
    if count > 1 and count * float(n) ** 3 > MAX_ENUMERATION_FLOPS:
        # Full collusion knows every shared secret: only the private parts remain (an upper bound).
        return _private_only(noise, threat), False, 0
    if n >= SPARSE_MIN_AGENTS:  # each coalition's unknown covariance is a dense n x n matrix
        require_dense(n, "exact accounting of noise with shared secrets", matrices=4)
    worst, enumerated = 0.0, 0
    for coalition in threat.coalitions(n):
        enumerated += 1
        honest = np.setdiff1d(np.arange(n), coalition)
        unknown = noise.unknown_covariance(coalition)[np.ix_(honest, honest)]
        worst = max(worst, unit_sensitivity(unknown, threat.view(len(honest))))
        if math.isinf(worst):
            break
    return worst, True, enumerated


def _private_only(noise: GaussianNoise, threat: ThreatModel) -> float:
    """Worst unit sensitivity of the private parts of ``noise`` alone (what full collusion
    leaves): in closed form from :data:`~dpdl.scale.SPARSE_MIN_AGENTS` agents on."""
    if noise.n >= SPARSE_MIN_AGENTS:
        return _independent_sensitivity(noise.private_variances, threat)
    return unit_sensitivity(np.diag(noise.private_variances), threat.view(noise.n))


def step_sensitivity(noise: Noise, threat: ThreatModel, neighbouring: Neighbouring) -> float:
    """Per-step Mahalanobis sensitivity ``mu_step`` of the worst agent (``inf`` if unprotected).

    ``noise`` is a description (or a mechanism holding one), or a bare covariance for threats
    without coalitions.
    """
    return neighbouring.sensitivity * _unit_sensitivity(noise, threat)[0]


@lru_cache(maxsize=4096)
def pld_epsilon(
    mu_step: float,
    sampling_rate: float,
    steps: int,
    delta: float,
    discretization: float = PLD_DISCRETIZATION,
) -> float:
    """Epsilon of ``steps`` Poisson-subsampled Gaussian mechanisms with noise multiplier
    ``1/mu_step``."""
    import dp_accounting  # 1.3 s to import, and only example-level accounting needs it

    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(
            sampling_rate, dp_accounting.GaussianDpEvent(1.0 / mu_step)
        ),
        steps,
    )
    accountant = dp_accounting.pld.PLDAccountant(value_discretization_interval=discretization)
    return float(accountant.compose(event).get_epsilon(delta))


@lru_cache(maxsize=4096)
def subsampled_rdp_epsilon(mu_step: float, sampling_rate: float, steps: int, delta: float) -> float:
    """Epsilon of the same mechanisms as :func:`pld_epsilon` by Renyi DP (dp_accounting's default
    orders), the papers' example-level accounting."""
    import dp_accounting

    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(
            sampling_rate, dp_accounting.GaussianDpEvent(1.0 / mu_step)
        ),
        steps,
    )
    return float(dp_accounting.rdp.RdpAccountant().compose(event).get_epsilon(delta))


def epsilon_from_mu_step(
    mu_step: float, steps: int, delta: float, neighbouring: Neighbouring, accountant: str = "gdp"
) -> float:
    """Epsilon after ``steps`` steps of per-step sensitivity ``mu_step`` under ``accountant``."""
    gdp.check_steps(steps)
    if not (isinstance(delta, (int, float)) and 0.0 < delta < 1.0):
        raise PrivacyParameterError(f"delta must be in (0, 1), got {delta}")
    if accountant not in ACCOUNTANTS:
        raise ConfigError(f"unknown accountant {accountant!r}; known: {', '.join(ACCOUNTANTS)}")
    if accountant == ("gdp" if isinstance(neighbouring, ExampleLevel) else "pld"):
        raise ConfigError(
            "example-level privacy is accounted by 'pld' or 'paper-rdp', agent-level by 'gdp' or "
            "'paper-rdp'"
        )
    if math.isinf(mu_step):
        return math.inf
    if mu_step == 0.0:
        return 0.0
    if accountant == "gdp":
        return gdp.epsilon(math.sqrt(steps) * mu_step, delta)
    if accountant == "paper-rdp" and isinstance(neighbouring, ExampleLevel):
        return subsampled_rdp_epsilon(
            float(mu_step), float(neighbouring.sampling_rate), int(steps), float(delta)
        )
    if accountant == "paper-rdp":
        return paper_epsilon(mu_step, steps, delta)
    return pld_epsilon(float(mu_step), float(neighbouring.sampling_rate), int(steps), float(delta))


def default_accountant(neighbouring: Neighbouring) -> str:
    """``"pld"`` for example-level relations, ``"gdp"`` for agent-level ones."""
    return "pld" if isinstance(neighbouring, ExampleLevel) else "gdp"


def account(
    noise: Noise,
    threat: ThreatModel,
    neighbouring: Neighbouring,
    steps: int,
    delta: float,
    accountant: str | None = None,
) -> PrivacyReport:
    """Privacy of ``steps`` D-SGD steps of ``noise`` (a description or a mechanism holding one, or
    a bare per-step covariance for threats without coalitions) against ``threat``."""
    accountant = accountant or default_accountant(neighbouring)
    unit, exact, coalitions = _unit_sensitivity(noise, threat)
    mu_step = neighbouring.sensitivity * unit
    eps = epsilon_from_mu_step(mu_step, steps, delta, neighbouring, accountant)
    return PrivacyReport(
        eps, delta, steps, mu_step, str(threat), str(neighbouring), accountant, exact, coalitions
    )
