"""The one accountant: (noise description, threat model, neighbouring relation, steps) -> eps.

The noise is plain data ([`GaussianNoise`][dpdl.accounting.noise.GaussianNoise], or anything holding
one, such as every mechanism; or a bare covariance for threats without coalitions): this layer
imports no mechanism.

Per step, the adversary's view is a Gaussian mechanism of Mahalanobis sensitivity `mu_step = s *
max_i sqrt(e_i^T P^T (P R P^T)^+ P e_i)`, certified from the factor the agents sample: never below
the exact value, whatever the rounding
([`dpdl.accounting.sensitivity`][dpdl.accounting.sensitivity]). Over T steps:

- agent level, `"gdp"` (default): exact, `mu = sqrt(T) mu_step`-GDP (adaptive composition),
  converted to (eps, delta) exactly ([`dpdl.accounting.gdp`][dpdl.accounting.gdp]);
- agent level, `"paper-rdp"`: the Whisper / DECOR RDP bound
  ([`dpdl.accounting.rdp_bound`][dpdl.accounting.rdp_bound]), kept to reproduce the papers;
- example level, `"pld"`: the privacy-loss distribution of T Poisson-subsampled Gaussian
  mechanisms of noise multiplier `1 / mu_step`, from dp_accounting (exact up to its
  discretisation, which errs on the pessimistic side);
- example level, `"paper-rdp"`: the same mechanisms through Renyi DP (dp_accounting's
  `RdpAccountant`), how DECOR (Appendix D, "RDP privacy amplification by subsampling") accounts
  example-level privacy; an upper bound on the PLD value, kept to reproduce the papers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import sparse

from dpdl.accounting import gdp
from dpdl.accounting.neighbouring import ExampleLevel, Neighbouring
from dpdl.accounting.noise import GaussianNoise, NoiseSource, noise_of
from dpdl.accounting.rdp_bound import paper_epsilon
from dpdl.accounting.sensitivity import factor_sensitivities, rounding_gamma, unit_sensitivity
from dpdl.errors import ConfigError, PrivacyParameterError
from dpdl.scale import SPARSE_MIN_AGENTS, require_dense
from dpdl.threats import ThreatModel

__all__ = [
    "ACCOUNTANTS",
    "Noise",
    "PrivacyReport",
    "account",
    "compose_runs",
    "default_accountant",
    "epsilon_from_mu_step",
    "hidden_sensitivities",
    "pld_epsilon",
    "step_sensitivity",
    "subsampled_rdp_epsilon",
    "view_sensitivities",
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
    """A privacy guarantee, always stated with its threat model, relation and accountant.

    `sampling_rate` is the Poisson rate of an example-level relation (each step then a
    Poisson-subsampled Gaussian mechanism), None at agent level: what
    [`view_of`][dpdl.accounting.export.view_of] needs to export the view exactly."""

    epsilon: float
    delta: float
    steps: int
    mu_step: float
    threat: str
    neighbouring: str
    accountant: str
    exact: bool = True
    coalitions: int = 1
    sampling_rate: float | None = None

    @property
    def mu(self) -> float:
        """Total GDP parameter `sqrt(T) mu_step` (meaningful for the agent-level accountants)."""
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
            "sampling_rate": self.sampling_rate,
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


def _is_identity(threat: ThreatModel) -> bool:
    """Whether the threat sees every honest agent's message on its own (its view is the
    identity, the base class's)."""
    return type(threat).view is ThreatModel.view


def _diagonal(stds: np.ndarray) -> np.ndarray:
    """Certified `1 / s_i` of independent noise seen message by message: the next float up from
    the rounded quotient (within half a unit of the exact one), inf where `s_i` is zero."""
    with np.errstate(divide="ignore"):
        return np.where(stds > 0.0, np.nextafter(1.0 / stds, np.inf), np.inf)


def _diagonal_of(factor: np.ndarray | sparse.sparray) -> np.ndarray | None:
    """The diagonal of a square factor with no entry off it (each agent's noise its own, read in
    closed form by `_diagonal`), else None."""
    if factor.shape[0] != factor.shape[1]:
        return None
    if sparse.issparse(factor):
        diagonal, count = factor.diagonal(), factor.count_nonzero()
    else:
        diagonal, count = np.diag(factor), np.count_nonzero(factor)
    independent = np.count_nonzero(diagonal) == count and np.isfinite(diagonal).all()
    return diagonal if independent else None


def view_sensitivities(
    factor: np.ndarray | sparse.sparray, threat: ThreatModel, floor: float = 0.0
) -> np.ndarray:
    """Certified unit sensitivities of the agents whose rows `factor` holds, noise `factor z`
    seen through the threat's view: the identity reads the factor as it is (`floor`, the smallest
    private standard deviation, bounds it below); another view `P` reads `P B`, whose rounding
    enters the bound
    ([`factor_sensitivities`][dpdl.accounting.sensitivity.factor_sensitivities])."""
    if _is_identity(threat):
        diagonal = _diagonal_of(factor)
        if diagonal is not None:  # independent noise after all (DECOR with sigma_cor = 0)
            return _diagonal(np.abs(diagonal))
        return factor_sensitivities(factor, floor=floor)
    view = np.asarray(threat.view(factor.shape[0]), dtype=float)
    product = np.asarray(factor.T @ view.T).T  # P B, dense: a view has few rows
    error = rounding_gamma(factor.shape[0] + 2) * np.asarray(abs(factor).T @ np.abs(view).T).T
    return factor_sensitivities(product, view, entry_error=error)


def hidden_sensitivities(
    noise: GaussianNoise, coalition: Iterable[int], threat: ThreatModel
) -> tuple[np.ndarray, np.ndarray]:
    """The honest agents (not in `coalition`) and their certified unit sensitivities against
    `threat`'s view after the coalition subtracts the noise of the seeds it holds, from the
    factor the agents sample
    ([`unknown_factor`][dpdl.accounting.noise.GaussianNoise.unknown_factor]). The accountant's
    rule, which the membership attack shares: inf exactly where no finite value is certified."""
    coalition = list(coalition)
    if not noise.secrets:  # independent noise, never an n x n matrix (n may be 10^5)
        honest = np.setdiff1d(np.arange(noise.n), coalition)
        stds = noise.private_stds[honest]
        if _is_identity(threat):
            return honest, _diagonal(stds)
        view = np.asarray(threat.view(len(honest)), dtype=float)
        product = view * stds  # P diag(s), each entry one rounded product
        error = rounding_gamma(1) * np.abs(product)
        return honest, factor_sensitivities(product, view, entry_error=error)
    honest, factor = noise.unknown_factor(coalition)
    stds = noise.private_stds[honest]
    floor = float(stds.min(initial=0.0)) if len(honest) else 0.0
    return honest, view_sensitivities(factor, threat, floor)


def _sampled_by_simulation(noise: GaussianNoise, threat: ThreatModel) -> float:
    """Worst certified unit sensitivity of the simulation's draw `L z`
    ([`sampling_factor`][dpdl.accounting.noise.GaussianNoise.sampling_factor]) through the
    threat's view, no seed subtracted (one generator draws it, which no agent holds); 0 where the
    simulation draws the agents' own factor."""
    factor = noise.sampling_factor
    if factor is None:
        return 0.0
    return float(view_sensitivities(factor, threat).max(initial=0.0))


def _unit_sensitivity(
    source: Noise, threat: ThreatModel, simulated: bool = True
) -> tuple[float, bool, int]:
    """Worst certified unit Mahalanobis sensitivity over the threat's coalitions, whether it is
    exact (not the full-collusion bound), and how many coalitions were enumerated to find it
    (the cost: each is a factorisation of an n-row factor). The simulation's own draw is
    certified beside the agents' (`_sampled_by_simulation`)."""
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
        return float(hidden_sensitivities(noise, (), threat)[1].max(initial=0.0)), True, 1
    count = threat.coalition_count(n)
    q = len(next(iter(threat.coalitions(n))))
    if q and min(len(secret.holders) for secret in noise.secrets) > n - q:
        # Every coalition of q agents meets every secret's holders: only private parts stay hidden.
        return _private_only(noise, threat), True, 1
    if count > 1 and count * float(n) ** 3 > MAX_ENUMERATION_FLOPS:
        # Full collusion knows every shared secret: only the private parts remain (an upper bound).
        return _private_only(noise, threat), False, 0
    if n >= SPARSE_MIN_AGENTS:  # each coalition's factor: n x (n + secrets), its QR, residuals
        require_dense(n, "exact accounting of noise with shared secrets", matrices=16)
    worst, enumerated = (_sampled_by_simulation(noise, threat) if simulated else 0.0), 0
    for coalition in threat.coalitions(n):
        enumerated += 1
        worst = max(worst, float(hidden_sensitivities(noise, coalition, threat)[1].max()))
        if math.isinf(worst):
            break
    return worst, True, enumerated


def _private_only(noise: GaussianNoise, threat: ThreatModel) -> float:
    """Worst certified unit sensitivity of the private parts of `noise` alone (what full
    collusion leaves)."""
    private = GaussianNoise(noise.n, noise.private_variances)
    return float(hidden_sensitivities(private, (), threat)[1].max(initial=0.0))


def step_sensitivity(
    noise: Noise, threat: ThreatModel, neighbouring: Neighbouring, simulated: bool = True
) -> float:
    """Per-step Mahalanobis sensitivity `mu_step` of the worst agent (`inf` if unprotected).

    `noise` is a description (or a mechanism holding one), or a bare covariance for threats
    without coalitions. `simulated=False` leaves out the simulation's own draw (the agents'
    factor only): for the steps of a design search, whose result
    [`safe_scale`][dpdl.accounting.calibration.safe_scale] then certifies in full.
    """
    return neighbouring.sensitivity * _unit_sensitivity(noise, threat, simulated)[0]


@lru_cache(maxsize=4096)
def pld_epsilon(
    mu_step: float,
    sampling_rate: float,
    steps: int,
    delta: float,
    discretization: float = PLD_DISCRETIZATION,
) -> float:
    """Epsilon of `steps` Poisson-subsampled Gaussian mechanisms with noise multiplier
    `1/mu_step`."""
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
    """Epsilon of the same mechanisms as [`pld_epsilon`][dpdl.accounting.accountant.pld_epsilon]
    by Renyi DP (dp_accounting's default orders), the papers' example-level accounting."""
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
    """Epsilon after `steps` steps of per-step sensitivity `mu_step` under `accountant`."""
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
    """`"pld"` for example-level relations, `"gdp"` for agent-level ones."""
    return "pld" if isinstance(neighbouring, ExampleLevel) else "gdp"


def account(
    noise: Noise,
    threat: ThreatModel,
    neighbouring: Neighbouring,
    steps: int,
    delta: float,
    accountant: str | None = None,
) -> PrivacyReport:
    """Privacy of `steps` D-SGD steps of `noise` (a description or a mechanism holding one, or
    a bare per-step covariance for threats without coalitions) against `threat`."""
    accountant = accountant or default_accountant(neighbouring)
    unit, exact, coalitions = _unit_sensitivity(noise, threat)
    mu_step = neighbouring.sensitivity * unit
    eps = epsilon_from_mu_step(mu_step, steps, delta, neighbouring, accountant)
    return PrivacyReport(
        eps, delta, steps, mu_step, str(threat), str(neighbouring), accountant, exact, coalitions,
        neighbouring.sampling_rate,
    )  # fmt: skip


def compose_runs(
    reports: Sequence[PrivacyReport], neighbouring: Neighbouring | None = None
) -> PrivacyReport:
    """The guarantee of releasing together the results of several runs on the same data, one
    report each (same threat, relation, accountant and delta): the runs compose like one run of
    all their steps. Under the Gaussian-DP accountant exactly (`sqrt(sum_k T_k mu_k^2)`, Dong,
    Roth and Su 2022, Corollary 3.3); under the others (`neighbouring` then names the relation)
    as `sum_k T_k` steps at the largest per-step sensitivity, an upper bound (they are
    monotone in it). Three seeds of one (eps = 1, delta = 1e-5)-run are, released together,
    (eps = 1.83)-DP, not (eps = 1)."""
    if not reports:
        raise ConfigError("composing runs needs at least one run's privacy report")
    first = reports[0]
    alike = {(r.threat, r.neighbouring, r.accountant, r.delta) for r in reports}
    if len(alike) > 1:
        raise ConfigError("the runs composed must be accounted alike (threat, relation, delta)")
    steps = sum(r.steps for r in reports)
    rate = first.sampling_rate if neighbouring is None else neighbouring.sampling_rate
    if first.accountant == "gdp":  # the sum's rounding padded upwards: a promise, not an estimate
        squared = sum(r.steps * r.mu_step**2 for r in reports)
        total = math.sqrt(squared) * (1.0 + rounding_gamma(len(reports) + 4))
        mu_step = total / math.sqrt(steps)
        eps = gdp.epsilon(total, first.delta)
    elif neighbouring is None:
        raise ConfigError(f"composing {first.accountant} reports needs their relation")
    else:
        mu_step = max(r.mu_step for r in reports)
        eps = epsilon_from_mu_step(mu_step, steps, first.delta, neighbouring, first.accountant)
    return PrivacyReport(
        eps, first.delta, steps, mu_step, first.threat, first.neighbouring, first.accountant,
        all(r.exact for r in reports), max(r.coalitions for r in reports), rate,
    )  # fmt: skip
